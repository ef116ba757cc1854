//! A bucket of the spec (`spec.archive` of a type other than `local`,
//! `spec.durability.backup.store`, `spec.settings.claim_check.store`) → the gateway's store
//! block: `type` and its `s3:`, `gcs:` or `azure:` keys, credentials read from their Secrets.
//! A field of another type is refused by name rather than ignored, so a spec never says more
//! than the pods do. Errors name the spec field and never a Secret's value.
//!
//! May import: `render::rendered`, `render::secrets`, `ankusa_config`, `ankusa_crds`.

use ankusa_config::{BackupStoreConfig, BlobStoreType};
use ankusa_crds::{ArchiveCredentials, ArchiveSpec, BackupStoreSpec};

use crate::render::rendered::SecretValues;
use crate::render::secrets::secret_value;

/// The bucket fields of `spec.archive` and of a `BackupStoreSpec`.
pub struct BucketFields<'a> {
    pub type_: BlobStoreType,
    pub bucket: Option<&'a str>,
    pub endpoint: Option<&'a str>,
    pub region: Option<&'a str>,
    pub force_path_style: Option<bool>,
    pub account: Option<&'a str>,
    pub container: Option<&'a str>,
    pub anonymous: Option<bool>,
    pub timeout_ms: Option<u64>,
    pub credentials: Option<&'a ArchiveCredentials>,
}

impl<'a> BucketFields<'a> {
    pub fn of_archive(a: &'a ArchiveSpec) -> Self {
        BucketFields {
            type_: a.type_,
            bucket: a.bucket.as_deref(),
            endpoint: a.endpoint.as_deref(),
            region: a.region.as_deref(),
            force_path_style: a.force_path_style,
            account: a.account.as_deref(),
            container: a.container.as_deref(),
            anonymous: a.anonymous,
            timeout_ms: a.timeout_ms,
            credentials: a.credentials.as_ref(),
        }
    }

    pub fn of_store(s: &'a BackupStoreSpec) -> Self {
        BucketFields {
            type_: s.type_,
            bucket: s.bucket.as_deref(),
            endpoint: s.endpoint.as_deref(),
            region: s.region.as_deref(),
            force_path_style: s.force_path_style,
            account: s.account.as_deref(),
            container: s.container.as_deref(),
            anonymous: s.anonymous,
            timeout_ms: s.timeout_ms,
            credentials: s.credentials.as_ref(),
        }
    }

    /// The spec fields set, by name (`timeoutMs` and `endpoint` belong to every type).
    fn set(&self) -> [(&'static str, bool); 7] {
        [
            ("bucket", self.bucket.is_some()),
            ("region", self.region.is_some()),
            ("forcePathStyle", self.force_path_style.is_some()),
            ("account", self.account.is_some()),
            ("container", self.container.is_some()),
            ("anonymous", self.anonymous.is_some()),
            ("credentials", self.credentials.is_some()),
        ]
    }

    /// The first field set of any bucket type, if any (for `local`, which takes none).
    pub fn first_set(&self) -> Option<&'static str> {
        let common = [
            ("endpoint", self.endpoint.is_some()),
            ("timeoutMs", self.timeout_ms.is_some()),
        ];
        self.set()
            .into_iter()
            .chain(common)
            .find_map(|(name, set)| set.then_some(name))
    }
}

/// The type's name in the spec and the gateway (`s3`, `gcs`, `azure`, `local`).
pub fn type_name(t: BlobStoreType) -> &'static str {
    ankusa_config::BlobStoreKind::from(t).as_str()
}

/// The fields (beside `endpoint` and `timeoutMs`) and credentials each bucket type takes.
fn allowed(t: BlobStoreType) -> (&'static [&'static str], &'static [&'static str]) {
    match t {
        BlobStoreType::S3 => (
            &["bucket", "region", "forcePathStyle", "credentials"],
            &["accessKeyId", "secretAccessKey", "sessionToken"],
        ),
        BlobStoreType::Gcs => (
            &["bucket", "anonymous", "credentials"],
            &["serviceAccountKey"],
        ),
        BlobStoreType::Azure => (
            &["account", "container", "credentials"],
            &["sasToken", "accountKey"],
        ),
        BlobStoreType::Local => (&[], &[]),
    }
}

/// The gateway's store keys of the bucket `f` at `at` (`spec.archive`): `(type, block)` where
/// `block` is what goes under the type's key (`s3:`). The caller refuses `local`.
pub fn bucket_block(
    at: &str,
    f: &BucketFields,
    secrets: &SecretValues,
) -> Result<(&'static str, serde_json::Map<String, serde_json::Value>), String> {
    let t = type_name(f.type_);
    let (fields, creds) = allowed(f.type_);
    if let Some((name, _)) = f
        .set()
        .into_iter()
        .find(|(name, set)| *set && !fields.contains(name))
    {
        return Err(format!("{at}.{name}: is not a field of type {t}"));
    }
    let mut out = serde_json::Map::new();
    if let Some(e) = f.endpoint {
        // A URL's userinfo is taken for credentials even if its password holds a `/`.
        if e.contains('@') {
            return Err(format!(
                "{at}.endpoint: carries credentials in its URL: give them in {at}.credentials (Secret references)"
            ));
        }
        out.insert("endpoint".into(), e.into());
    }
    if let Some(v) = f.timeout_ms {
        out.insert("timeout_ms".into(), v.into());
    }
    let given: Vec<(&'static str, String)> = match f.credentials {
        Some(c) => c
            .refs()
            .map(|(field, r)| {
                if !creds.contains(&field) {
                    return Err(format!(
                        "{at}.credentials.{field}: is not a credential of type {t}"
                    ));
                }
                secret_value(secrets, r)
                    .map(|v| (field, v))
                    .map_err(|e| format!("{at}.credentials.{field}: {e}"))
            })
            .collect::<Result<_, _>>()?,
        None => Vec::new(),
    };
    let has = |name: &str| given.iter().any(|(f, _)| *f == name);
    match f.type_ {
        BlobStoreType::S3 => {
            let Some(bucket) = f.bucket else {
                return Err(format!("{at}.bucket: is required for type s3"));
            };
            out.insert("bucket".into(), bucket.into());
            if let Some(r) = f.region {
                out.insert("region".into(), r.into());
            }
            if let Some(v) = f.force_path_style {
                out.insert("force_path_style".into(), v.into());
            }
            if has("accessKeyId") != has("secretAccessKey") {
                return Err(format!(
                    "{at}.credentials: accessKeyId and secretAccessKey are given together or not at all"
                ));
            }
        }
        BlobStoreType::Gcs => {
            let Some(bucket) = f.bucket else {
                return Err(format!("{at}.bucket: is required for type gcs"));
            };
            out.insert("bucket".into(), bucket.into());
            if let Some(v) = f.anonymous {
                out.insert("anonymous".into(), v.into());
            }
            if let Some((_, key)) = given.first() {
                // The gateway reads any other value as a file path; a Secret holds the JSON.
                if !key.trim_start().starts_with('{') {
                    return Err(format!(
                        "{at}.credentials.serviceAccountKey: must hold a service-account key's JSON"
                    ));
                }
            }
        }
        BlobStoreType::Azure => {
            let (Some(account), Some(container)) = (f.account, f.container) else {
                let missing = if f.account.is_none() {
                    "account"
                } else {
                    "container"
                };
                return Err(format!("{at}.{missing}: is required for type azure"));
            };
            out.insert("account".into(), account.into());
            out.insert("container".into(), container.into());
            if given.len() > 1 {
                return Err(format!(
                    "{at}.credentials: give one of sasToken and accountKey"
                ));
            }
        }
        BlobStoreType::Local => return Err(format!("{at}.type: local is not a bucket")),
    }
    for (field, v) in given {
        let key = match field {
            "accessKeyId" => "access_key_id",
            "secretAccessKey" => "secret_access_key",
            "sessionToken" => "session_token",
            "serviceAccountKey" => "credentials",
            "sasToken" => "sas_token",
            _ => "account_key",
        };
        out.insert(key.into(), v.into());
    }
    Ok((t, out))
}

/// The spec field (under the store's own field) of a key of a gateway store block
/// (`s3.bucket`, `gcs.credentials`, `azure.sas_token`), or `None` for the block itself
/// (`type`, `local`).
pub fn bucket_field(key: &str) -> Option<String> {
    let key = key.trim_start_matches('.');
    let key = ["s3", "gcs", "azure"]
        .iter()
        .find_map(|p| {
            key.strip_prefix(p)
                .filter(|r| r.is_empty() || r.starts_with('.'))
        })
        .unwrap_or(key)
        .trim_start_matches('.');
    let spec = match key {
        "" | "type" | "local" | "local.dir" => return None,
        "access_key_id" => "credentials.accessKeyId".into(),
        "secret_access_key" => "credentials.secretAccessKey".into(),
        "session_token" => "credentials.sessionToken".into(),
        "credentials" => "credentials.serviceAccountKey".into(),
        "sas_token" => "credentials.sasToken".into(),
        "account_key" => "credentials.accountKey".into(),
        other => camel(other),
    };
    Some(spec)
}

/// The gateway's store block (`BackupStoreConfig`) of a `BackupStoreSpec` at `at`
/// (`spec.durability.backup.store`, `spec.settings.claim_check.store`); `type: local` is
/// refused with `why` (what a store on the pod's own volume would lose).
pub fn store_block(
    at: &str,
    st: &BackupStoreSpec,
    secrets: &SecretValues,
    why: &str,
) -> Result<BackupStoreConfig, String> {
    if st.type_ == BlobStoreType::Local {
        return Err(format!("{at}.type: must be s3, gcs or azure: {why}"));
    }
    let (t, block) = bucket_block(at, &BucketFields::of_store(st), secrets)?;
    let obj = serde_json::json!({"type": t, t: block});
    serde_path_to_error::deserialize::<_, BackupStoreConfig>(obj).map_err(|e| {
        let path = e.path().to_string();
        let field = bucket_field(&path).map_or_else(|| at.to_string(), |f| format!("{at}.{f}"));
        // serde may quote the value, which may be a Secret's.
        let inner = ankusa_config::value_free(&e.into_inner().to_string());
        format!("{field}: {inner}")
    })
}

/// `publish_timeout_ms` → `publishTimeoutMs`.
pub fn camel(snake: &str) -> String {
    let mut out = String::with_capacity(snake.len());
    let mut up = false;
    for ch in snake.chars() {
        if ch == '_' {
            up = true;
        } else if up {
            out.extend(ch.to_uppercase());
            up = false;
        } else {
            out.push(ch);
        }
    }
    out
}
