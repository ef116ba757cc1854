//! Fixtures of the crate's unit tests: objects built from JSON, each with the `apiVersion` and
//! `kind` of its own Rust type (no hand-written group/version strings), and the controller
//! owner references Kubernetes puts on them. Compiled for tests only; imports nothing of the
//! crate, so any module's tests may use it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Resource;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// A `K` from its other fields (`metadata`, `spec`, `status`, ...).
pub fn object<K>(mut fields: Value) -> K
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
{
    fields["apiVersion"] = Value::String(K::api_version(&()).into_owned());
    fields["kind"] = Value::String(K::kind(&()).into_owned());
    serde_json::from_value(fields).expect("a valid object")
}

/// The controller owner reference to a `K` named `name` with `uid`, as JSON.
pub fn controller_ref<K>(name: &str, uid: &str) -> Value
where
    K: Resource<DynamicType = ()>,
{
    serde_json::to_value(OwnerReference {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        name: name.into(),
        uid: uid.into(),
        controller: Some(true),
        block_owner_deletion: None,
    })
    .expect("an owner reference")
}
