//! `spec.durability` → the gateway's `wal`, `intake` and `backup` sections.
//!
//! The intake log is rendered as a Sink of type `kafka` or `nats` would be (its options, its
//! `secretRefs` read from Secrets), then placed under `intake.kafka` or `intake.jetstream`.
//! The backup store is rendered as `spec.archive`'s bucket is (`render::bucket`). `intake.node` is left to
//! the gateway's default, `node.instance` (the pod name): stable across a lost volume, so a
//! pod coming back empty finds its own records in the log and its own backups
//! (`<keyPrefix>/backup/<pod>/`). Errors name the spec field and never a Secret's value.
//! The Secrets it reads are listed by `render::secrets::durability_secret_names`.
//!
//! May import: `render::{rendered, bucket, sink, files}`, `ankusa_config`, `ankusa_crds`.

use ankusa_config::{BackupConfig, BlobStoreType, Config, IntakeConfig, WalConfig, WalType};
use ankusa_crds::sink::SinkType;
use ankusa_crds::{
    BackupSpec, DurabilityMode, DurabilitySpec, Gateway, IntakeSpec, IntakeType, SinkSpec,
};
use kube::ResourceExt;

use crate::render::bucket::{bucket_field, camel, store_block};
use crate::render::files;
use crate::render::rendered::SecretValues;
use crate::render::sink::{sink_object, typed_field_error};

/// What `spec.durability` renders to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Durability {
    pub wal: WalConfig,
    pub intake: Option<IntakeConfig>,
    pub backup: BackupConfig,
}

const AT: &str = "spec.durability";

/// `spec.durability` → `wal`, `intake`, `backup`. Absent: the defaults (disk, no backups).
pub fn durability(gw: &Gateway, secrets: &SecretValues) -> Result<Durability, String> {
    let Some(d) = &gw.spec.durability else {
        return Ok(Durability::default());
    };
    let mut out = Durability::default();
    match (d.mode, &d.intake) {
        (DurabilityMode::Dual, None) => {
            return Err(format!("{AT}.intake: is required for mode dual"));
        }
        (DurabilityMode::Disk | DurabilityMode::Direct, Some(_)) => {
            return Err(format!("{AT}.intake: is for mode dual only"));
        }
        (DurabilityMode::Dual, Some(i)) => {
            out.wal.wal_type = WalType::Dual;
            out.intake = Some(intake_config(i, secrets)?);
        }
        (DurabilityMode::Disk | DurabilityMode::Direct, None) => {}
    }
    if d.mode == DurabilityMode::Direct {
        direct_wal(d, &mut out.wal)?;
        return Ok(out);
    }
    if d.publish_timeout_ms.is_some() || d.retry_after_s.is_some() {
        return Err(format!(
            "{AT}.publishTimeoutMs, {AT}.retryAfterS: are for mode direct only"
        ));
    }
    if let Some(b) = d.backup.as_ref().filter(|b| b.enabled) {
        out.backup = backup_config(gw, b, secrets)?;
    }
    Ok(out)
}

/// `mode: direct`: `wal.type: none` with its deadline and `Retry-After`. No backup: the pods
/// keep no hook to back up.
fn direct_wal(d: &DurabilitySpec, wal: &mut WalConfig) -> Result<(), String> {
    if d.backup.as_ref().is_some_and(|b| b.enabled) {
        return Err(format!(
            "{AT}.backup: is for modes disk and dual (a direct Gateway stores no hook)"
        ));
    }
    wal.wal_type = WalType::None;
    if let Some(v) = d.publish_timeout_ms {
        wal.publish_timeout_ms = v;
    }
    if let Some(v) = d.retry_after_s {
        wal.retry_after_s = v;
    }
    Ok(())
}

/// The intake log: a Sink of type `kafka` (or `nats` for JetStream) rendered by
/// `render::sink::render_sink_spec`, plus the intake's own knobs.
fn intake_config(i: &IntakeSpec, secrets: &SecretValues) -> Result<IntakeConfig, String> {
    let at = format!("{AT}.intake");
    let sink_type = match i.type_ {
        IntakeType::Kafka => SinkType::Kafka,
        IntakeType::Jetstream => SinkType::Nats,
    };
    let (options, field) = i.resolved_options().map_err(|e| format!("{at}.{e}"))?;
    let spec = SinkSpec {
        type_: sink_type,
        options: Some(options.clone()),
        secret_refs: i.secret_refs.clone(),
        ..SinkSpec::of_type(sink_type)
    };
    let name_err = |e: String| {
        let e = typed_field_error(e, field);
        if e.starts_with(field) || e.starts_with("secretRefs") {
            format!("{at}.{e}")
        } else {
            format!("{at}: {e}")
        }
    };
    files::refuse_path_keys(&options, Some(sink_type), "a Gateway").map_err(name_err)?;
    let mut obj = sink_object(&spec, secrets).map_err(name_err)?;
    obj.remove("type");
    // Read by the log's own type (not the tagged sink enum), so errors carry their path.
    fn read<T: serde::de::DeserializeOwned>(
        at: &str,
        field: &str,
        obj: serde_json::Map<String, serde_json::Value>,
    ) -> Result<T, String> {
        serde_path_to_error::deserialize::<_, T>(serde_json::Value::Object(obj)).map_err(|e| {
            let path = e.path().to_string();
            // serde may quote the value, which may be a Secret's.
            let inner = ankusa_config::value_free(&e.into_inner().to_string());
            if path == "." || path.is_empty() {
                format!("{at}.{field}: {inner}")
            } else {
                format!("{at}.{field}.{path}: {inner}")
            }
        })
    }
    // Every key has a default but the log itself.
    let mut c: IntakeConfig = serde_json::from_value(serde_json::json!({}))
        .map_err(|_| format!("{at}: the gateway's intake defaults do not parse"))?;
    match i.type_ {
        IntakeType::Kafka => c.kafka = Some(read(&at, field, obj)?),
        IntakeType::Jetstream => c.jetstream = Some(read(&at, field, obj)?),
    }
    let opts = format!("{at}.{field}");
    if let Some(k) = &c.kafka {
        files::refuse_file_options(k, &opts, Some(sink_type), "a Gateway")?;
    }
    if let Some(j) = &c.jetstream {
        files::refuse_file_options(j, &opts, Some(sink_type), "a Gateway")?;
    }
    files::refuse_file_options(&c, &at, Some(sink_type), "a Gateway")?;
    if let Some(v) = i.publish_timeout_ms {
        c.publish_timeout_ms = v;
    }
    if let Some(v) = i.breaker_failures {
        c.breaker_failures = v;
    }
    if let Some(v) = i.retry_after_s {
        c.retry_after_s = v;
    }
    if let Some(v) = i.reconcile_interval_ms {
        c.reconcile_interval_ms = v;
    }
    Ok(c)
}

/// Backups: the store given, or the archive's bucket. Never a store on the pod's own volume,
/// which a lost volume takes with it.
fn backup_config(
    gw: &Gateway,
    b: &BackupSpec,
    secrets: &SecretValues,
) -> Result<BackupConfig, String> {
    let at = format!("{AT}.backup");
    let mut c = BackupConfig {
        enabled: true,
        ..BackupConfig::default()
    };
    if let Some(v) = b.interval_ms {
        c.interval_ms = v;
    }
    if let Some(v) = b.keep {
        c.keep = v;
    }
    c.key_prefix =
        Some(b.key_prefix.clone().unwrap_or_else(|| {
            format!("{}/{}", gw.namespace().unwrap_or_default(), gw.name_any())
        }));
    match &b.store {
        Some(st) => {
            let store = store_block(
                &format!("{at}.store"),
                st,
                secrets,
                "a local backup stays on the pod's own volume and is lost with it",
            )?;
            c.store = Some(store);
        }
        // The gateway's default: the archive's store (`storage`), its credentials included.
        None => match &gw.spec.archive {
            Some(a) if a.type_ != BlobStoreType::Local => {}
            Some(_) => {
                return Err(format!(
                    "{at}.store: is required: spec.archive is of type local, on the pod's own volume, which a lost volume takes with it"
                ));
            }
            None => {
                return Err(format!(
                    "{at}.store: is required when spec.archive is not set"
                ));
            }
        },
    }
    Ok(c)
}

/// The spec field of a gateway `wal.*`, `intake.*` or `backup.*` key, for errors that name
/// what the user wrote (`intake.kafka.brokers` → `spec.durability.intake.options.brokers`).
pub fn durability_field(config_field: &str) -> String {
    let f = config_field.trim_end_matches('.');
    match f {
        "wal.publish_timeout_ms" => return format!("{AT}.publishTimeoutMs"),
        "wal.retry_after_s" => return format!("{AT}.retryAfterS"),
        _ if f == "wal" || f.starts_with("wal.") => return format!("{AT}.mode"),
        _ => {}
    }
    if let Some(rest) = f.strip_prefix("intake") {
        let rest = rest.trim_start_matches('.');
        for log in ["kafka", "jetstream"] {
            if let Some(opt) = rest.strip_prefix(log) {
                let opt = opt.trim_start_matches('.');
                return if opt.is_empty() {
                    format!("{AT}.intake.options")
                } else {
                    format!("{AT}.intake.options.{opt}")
                };
            }
        }
        return if rest.is_empty() {
            format!("{AT}.intake")
        } else {
            format!("{AT}.intake.{}", camel(rest))
        };
    }
    if let Some(rest) = f.strip_prefix("backup") {
        let rest = rest.trim_start_matches('.');
        if let Some(store) = rest.strip_prefix("store") {
            return match bucket_field(store) {
                Some(spec) => format!("{AT}.backup.store.{spec}"),
                None => format!("{AT}.backup.store"),
            };
        }
        return if rest.is_empty() {
            format!("{AT}.backup")
        } else {
            format!("{AT}.backup.{}", camel(rest))
        };
    }
    AT.to_string()
}

/// Whether a gateway config field belongs to `spec.durability`.
pub fn is_durability_field(config_field: &str) -> bool {
    ["wal", "intake", "backup"].iter().any(|p| {
        config_field == *p
            || config_field
                .strip_prefix(p)
                .is_some_and(|r| r.starts_with('.') || r.starts_with('['))
    })
}

/// A keyed digest of a config's `wal`, `intake` and `backup` sections (secrets included), or
/// `None` when they are at their defaults. The gateway opens its intake log and backup store
/// when it starts, so the StatefulSet's pod template carries this digest: a change of
/// `spec.durability`, or of a Secret it reads, rolls the pods one at a time. Keyed with the
/// admin token (which only the operator and the pods know), so the annotation gives nobody a
/// way to test guesses of a password.
pub fn durability_fingerprint(c: &Config, key: &str) -> Option<String> {
    use hmac::{Hmac, Mac};
    if c.wal == WalConfig::default() && c.intake.is_none() && c.backup == BackupConfig::default() {
        return None;
    }
    let body = serde_json::to_vec(&(&c.wal, &c.intake, &c.backup)).ok()?;
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(key.as_bytes()).ok()?;
    mac.update(&body);
    let tag = mac.finalize().into_bytes();
    Some(hex::encode(&tag[..16]))
}
