//! `spec.archive` → the gateway's `storage:` section: a `local` archive is a directory on the
//! pod's own volume; a bucket (`s3`, `gcs`, `azure`) is rendered by `render::bucket`, its
//! credentials from Secrets only. Errors name the spec field (`spec.archive.keyPrefix`), never a
//! Secret's value.
//!
//! May import: `render::{bucket, rendered}`, `ankusa_config`, `ankusa_crds`.

use ankusa_config::{BlobStoreType, StorageConfig};
use ankusa_crds::Gateway;
use ankusa_crds::names::DATA_MOUNT;
use kube::ResourceExt;

use crate::render::bucket::{BucketFields, bucket_block, bucket_field};
use crate::render::rendered::SecretValues;

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
    let spec = match rest.trim_start_matches('.') {
        "key_prefix" => "keyPrefix".to_string(),
        "archive_at" => "archiveAt".to_string(),
        "roll_bytes" => "rollBytes".to_string(),
        "roll_ms" => "rollMs".to_string(),
        "interval_ms" => "intervalMs".to_string(),
        "type" | "local" | "local.dir" => "type".to_string(),
        other => match bucket_field(other) {
            Some(f) => f,
            None => return "spec.archive".into(),
        },
    };
    format!("spec.archive.{spec}")
}

/// `spec.archive` → the gateway's `storage:` section: `local` is a directory on the pod's
/// volume; a bucket takes its credentials from Secrets only. The key prefix defaults to
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
    if a.type_ == BlobStoreType::Local {
        if let Some(f) = BucketFields::of_archive(a).first_set() {
            return Err(format!(
                "spec.archive.{f}: is for a bucket (s3, gcs, azure), not type local"
            ));
        }
        obj.insert("type".into(), "local".into());
        obj.insert(
            "local".into(),
            serde_json::json!({ "dir": local_archive_dir() }),
        );
    } else {
        let (t, block) = bucket_block("spec.archive", &BucketFields::of_archive(a), secrets)?;
        obj.insert("type".into(), t.into());
        obj.insert(t.into(), serde_json::Value::Object(block));
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
