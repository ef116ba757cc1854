//! What every reconciler shares: the client, the event recorder, metrics, the pods' admin
//! API client, settings; the error type; the server-side apply parameters and the one status
//! write every controller uses ([`Ctx::patch_status`]).
//!
//! May import: `admin` (the client it holds), `metrics`, `resources` (the policy in
//! `Settings`), `signals` (the memory it holds). Nothing here knows a Gateway's pods (that is `pods`) or a status's content
//! (that is `status`): every other module may import this one, so it imports none of them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::NamespaceResourceScope;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event as KEvent, EventType, Recorder, Reporter};
use kube::{Client, Resource, ResourceExt};

use crate::admin::AdminClient;
use crate::metrics::Metrics;
use crate::resources;
use crate::signals;

/// Field manager of everything the operator applies.
pub const MANAGER: &str = "ankusa-operator";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<kube::runtime::finalizer::Error<Error>>),
    /// Waiting on something outside (queued deliveries draining, a pod answering); retried.
    #[error("waiting: {0}")]
    Waiting(String),
    #[error("{0}")]
    Invalid(String),
}

impl Error {
    /// Metric label.
    pub fn label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::Finalizer(e) => match e.as_ref() {
                kube::runtime::finalizer::Error::CleanupFailed(Error::Waiting(_))
                | kube::runtime::finalizer::Error::ApplyFailed(Error::Waiting(_)) => "waiting",
                _ => "finalizer",
            },
            Error::Waiting(_) => "waiting",
            Error::Invalid(_) => "invalid",
        }
    }

    pub fn is_waiting(&self) -> bool {
        self.label() == "waiting"
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Operator settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Image of gateway pods whose Gateway names none.
    pub gateway_image: String,
    /// Fastest re-poll of a running ReplayJob.
    pub replay_poll: Duration,
    /// Who may reach the pods' admin port, and which ServiceAccounts a Gateway may name.
    pub policy: resources::Policy,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            gateway_image: format!("ghcr.io/ankusa/ankusa:{}", env!("CARGO_PKG_VERSION")),
            replay_poll: Duration::from_secs(1),
            policy: resources::Policy::default(),
        }
    }
}

pub struct Ctx {
    pub client: Client,
    pub recorder: Recorder,
    pub metrics: Arc<Metrics>,
    pub admin: AdminClient,
    pub settings: Settings,
    /// Last pod poll per object (`kind/ns/name`), so a status write does not re-poll at once.
    pub last_poll: Mutex<HashMap<String, Instant>>,
    /// What the pods' last polls said of DLQs and breakers, per Gateway (`crate::signals`).
    pub signals: Mutex<signals::Memory>,
}

impl Ctx {
    pub fn new(
        client: Client,
        metrics: Arc<Metrics>,
        settings: Settings,
        instance: String,
    ) -> Self {
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: MANAGER.into(),
                instance: Some(instance),
            },
        );
        Ctx {
            client,
            recorder,
            metrics,
            admin: AdminClient::default(),
            settings,
            last_poll: Mutex::new(HashMap::new()),
            signals: Mutex::new(signals::Memory::default()),
        }
    }

    /// Publishes an event; failures are logged, never fail a reconcile.
    pub async fn event<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        type_: EventType,
        reason: &str,
        note: impl Into<String>,
    ) {
        let ev = KEvent {
            type_,
            reason: reason.into(),
            note: Some(truncate(note.into(), 1000)),
            action: reason.into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&ev, &obj.object_ref(&())).await {
            tracing::warn!(error = %e, reason, "could not publish event");
        }
    }

    /// Time since the last poll of `key`, recording now when it is at least `min` (or never).
    pub fn poll_due(&self, key: &str, min: Duration) -> Option<Duration> {
        let mut m = self.last_poll.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        match m.get(key) {
            Some(t) if now.duration_since(*t) < min => Some(min - now.duration_since(*t)),
            _ => {
                m.insert(key.to_string(), now);
                None
            }
        }
    }

    pub fn forget_poll(&self, key: &str) {
        self.last_poll
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
    }

    /// Writes `status` (the whole status, or the part `controller` owns) to `obj`'s status
    /// subresource by server-side apply, under the field manager `ankusa-operator/<controller>`.
    /// The body's `apiVersion` and `kind` are `K`'s own.
    pub async fn patch_status<K, S>(&self, obj: &K, controller: &str, status: &S) -> Result<()>
    where
        K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
        S: serde::Serialize,
    {
        let api: Api<K> =
            Api::namespaced(self.client.clone(), &obj.namespace().unwrap_or_default());
        let body = serde_json::json!({
            "apiVersion": K::api_version(&()),
            "kind": K::kind(&()),
            "status": status,
        });
        api.patch_status(
            &obj.name_any(),
            &status_params(controller),
            &Patch::Apply(&body),
        )
        .await?;
        Ok(())
    }
}

pub fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
    s
}

/// Server-side apply params of the operator.
pub fn apply_params() -> PatchParams {
    PatchParams::apply(MANAGER).force()
}

/// Server-side apply params of one controller's status writes.
pub fn status_params(controller: &str) -> PatchParams {
    PatchParams::apply(&format!("{MANAGER}/{controller}")).force()
}
