//! `spec.archive` → the gateway's `storage:` section, and the S3 store fields it shares with
//! `spec.durability.backup.store`: a `local` archive is a directory on the pod's own volume; an
//! `s3` one takes its credentials from Secrets only. Errors name the spec field
//! (`spec.archive.keyPrefix`), never a Secret's value.
//!
//! May import: `render::secrets`, `ankusa_config`, `ankusa_crds`.

use ankusa_config::{BackupStoreConfig, BlobStoreType, StorageConfig};
use ankusa_crds::names::DATA_MOUNT;
use ankusa_crds::{ArchiveCredentials, BackupStoreSpec, Gateway};
use kube::ResourceExt;

use crate::render::rendered::SecretValues;
use crate::render::secrets::secret_value;

/// Where a `local` archive lives: a directory on the pod's own volume, beside its store.
pub fn local_archive_dir() -> String {
    format!("{DATA_MOUNT}/archive")
}

/// The spec field of a gateway `storage.*` key, for errors that name what the user wrote.
pub fn archive_field(config_field: &str) -> String {
    let rest = config_field
        .strip_prefix("storage.")
        .or_else(|| config_field.strip_prefix("storage"))
        .unwrap_or(config_field);
    let key = rest.strip_prefix("s3.").unwrap_or(rest);
    let spec = match key {
        "" | "." => return "spec.archive".into(),
        "type" | "local" | "local.dir" | "s3" => "type",
        "key_prefix" => "keyPrefix",
        "archive_at" => "archiveAt",
        "roll_bytes" => "rollBytes",
        "roll_ms" => "rollMs",
        "interval_ms" => "intervalMs",
        "timeout_ms" => "timeoutMs",
        "force_path_style" => "forcePathStyle",
        "access_key_id" => "credentials.accessKeyId",
        "secret_access_key" => "credentials.secretAccessKey",
        "session_token" => "credentials.sessionToken",
        other => other,
    };
    format!("spec.archive.{spec}")
}

/// `spec.archive` → the gateway's `storage:` section: `local` is a directory on the pod's
/// volume; `s3` takes its credentials from Secrets only. The key prefix defaults to
/// `<namespace>/<gateway>`. Errors name the spec field and never a Secret's value.
pub fn archive_storage(
    gw: &Gateway,
    secrets: &SecretValues,
) -> Result<Option<StorageConfig>, String> {
    let Some(a) = &gw.spec.archive else {
        return Ok(None);
    };
    let mut obj = serde_json::Map::new();
    let key_prefix = a
        .key_prefix
        .clone()
        .unwrap_or_else(|| format!("{}/{}", gw.namespace().unwrap_or_default(), gw.name_any()));
    obj.insert("key_prefix".into(), key_prefix.into());
    if let Some(at) = a.archive_at {
        obj.insert(
            "archive_at".into(),
            serde_json::to_value(at).map_err(|_| "spec.archive.archiveAt: does not encode")?,
        );
    }
    for (k, v) in [
        ("roll_bytes", a.roll_bytes),
        ("roll_ms", a.roll_ms),
        ("interval_ms", a.interval_ms),
    ] {
        if let Some(v) = v {
            obj.insert(k.into(), v.into());
        }
    }
    match a.type_ {
        BlobStoreType::Local => {
            let s3_only = [
                ("bucket", a.bucket.is_some()),
                ("endpoint", a.endpoint.is_some()),
                ("region", a.region.is_some()),
                ("forcePathStyle", a.force_path_style.is_some()),
                ("credentials", a.credentials.is_some()),
                ("timeoutMs", a.timeout_ms.is_some()),
            ];
            if let Some((f, _)) = s3_only.iter().find(|(_, set)| *set) {
                return Err(format!("spec.archive.{f}: is for type s3 only"));
            }
            obj.insert("type".into(), "local".into());
            obj.insert(
                "local".into(),
                serde_json::json!({ "dir": local_archive_dir() }),
            );
        }
        BlobStoreType::S3 => {
            let s3 = s3_store(
                "spec.archive",
                &S3Fields {
                    bucket: a.bucket.as_deref(),
                    endpoint: a.endpoint.as_deref(),
                    region: a.region.as_deref(),
                    force_path_style: a.force_path_style,
                    timeout_ms: a.timeout_ms,
                    credentials: a.credentials.as_ref(),
                },
                secrets,
            )?;
            obj.insert("type".into(), "s3".into());
            obj.insert("s3".into(), serde_json::Value::Object(s3));
        }
    }
    serde_path_to_error::deserialize::<_, StorageConfig>(serde_json::Value::Object(obj))
        .map(Some)
        .map_err(|e| {
            let field = archive_field(&format!("storage.{}", e.path()));
            // serde may quote the value, which may be a Secret's.
            let inner = ankusa_config::value_free(&e.into_inner().to_string());
            format!("{field}: {inner}")
        })
}

/// The S3 fields of `spec.archive` and `spec.durability.backup.store`.
pub struct S3Fields<'a> {
    pub bucket: Option<&'a str>,
    pub endpoint: Option<&'a str>,
    pub region: Option<&'a str>,
    pub force_path_style: Option<bool>,
    pub timeout_ms: Option<u64>,
    pub credentials: Option<&'a ArchiveCredentials>,
}

/// The gateway's `s3:` keys of a store, credentials read from their Secrets; errors name the
/// field under `at` (`spec.archive`, `spec.durability.backup.store`) and never a value.
pub fn s3_store(
    at: &str,
    f: &S3Fields,
    secrets: &SecretValues,
) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    let Some(bucket) = f.bucket else {
        return Err(format!("{at}.bucket: is required for type s3"));
    };
    let mut s3 = serde_json::Map::new();
    s3.insert("bucket".into(), bucket.into());
    if let Some(r) = f.region {
        s3.insert("region".into(), r.into());
    }
    if let Some(e) = f.endpoint {
        if url_has_userinfo(e) {
            return Err(format!(
                "{at}.endpoint: carries credentials in its URL: give them in {at}.credentials (Secret references)"
            ));
        }
        s3.insert("endpoint".into(), e.into());
    }
    if let Some(v) = f.force_path_style {
        s3.insert("force_path_style".into(), v.into());
    }
    if let Some(t) = f.timeout_ms {
        s3.insert("timeout_ms".into(), t.into());
    }
    if let Some(c) = f.credentials {
        if c.access_key_id.is_some() != c.secret_access_key.is_some() {
            return Err(format!(
                "{at}.credentials: accessKeyId and secretAccessKey are given together or not at all"
            ));
        }
        for (field, r) in c.refs() {
            let v =
                secret_value(secrets, r).map_err(|e| format!("{at}.credentials.{field}: {e}"))?;
            let key = match field {
                "accessKeyId" => "access_key_id",
                "secretAccessKey" => "secret_access_key",
                _ => "session_token",
            };
            s3.insert(key.into(), v.into());
        }
    }
    Ok(s3)
}

/// `scheme://user[:password]@host...`: an S3 endpoint carries no userinfo, so any `@` is
/// taken for one (a password may itself hold a `/` that would end the authority early).
fn url_has_userinfo(s: &str) -> bool {
    s.contains('@')
}

/// The gateway's store block (`type: s3` and its `s3:` keys) of a `BackupStoreSpec` at `at`
/// (`spec.durability.backup.store`, `spec.settings.claim_check.store`); `field` names the spec
/// field of a key of the block (`s3.bucket`) the gateway's types refuse. The caller refuses
/// types other than `s3`.
pub fn s3_block(
    at: &str,
    st: &BackupStoreSpec,
    secrets: &SecretValues,
    field: impl Fn(&str) -> String,
) -> Result<BackupStoreConfig, String> {
    let s3 = s3_store(
        at,
        &S3Fields {
            bucket: st.bucket.as_deref(),
            endpoint: st.endpoint.as_deref(),
            region: st.region.as_deref(),
            force_path_style: st.force_path_style,
            timeout_ms: st.timeout_ms,
            credentials: st.credentials.as_ref(),
        },
        secrets,
    )?;
    let obj = serde_json::json!({"type": "s3", "s3": s3});
    serde_path_to_error::deserialize::<_, BackupStoreConfig>(obj).map_err(|e| {
        let field = field(&e.path().to_string());
        // serde may quote the value, which may be a Secret's.
        let inner = ankusa_config::value_free(&e.into_inner().to_string());
        format!("{field}: {inner}")
    })
}
