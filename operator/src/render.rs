//! Gateway + Sources + Sinks + Secret values → the gateway's own `Config`, per pod.
//!
//! Pure functions only. The config is built from `ankusa_config` types and validated with the
//! gateway's own `validate()`; the YAML the pods read is `Config::to_yaml()`, never a template.
//!
//! A Source that cannot be rendered (a missing Secret, a bad option, a config the gateway would
//! refuse) never disappears from the pods' config: dropping it would dead-letter its queued
//! deliveries as `source_gone`. It keeps the version the pods last received (read back from
//! the config Secret) and reports `Degraded`; a Source that never rendered stays out.

use std::collections::{BTreeMap, BTreeSet};

use ankusa_config::{
    AdminToken, BackupConfig, BackupStoreConfig, BlobStoreType, Config, DedupeConfig, HmacVerify,
    IntakeConfig, OnVerifyFailure, Preset, RetryOverride, SinkConfig, SourceConfig, StorageConfig,
    TimedPreset, VerifyConfig, WalConfig, WalType,
};
use ankusa_crds::names::DATA_MOUNT;
use ankusa_crds::sink::SinkType;
use ankusa_crds::source::{HmacSpec, RetrySpec};
use ankusa_crds::{
    ArchiveCredentials, BackupSpec, DurabilityMode, Gateway, IntakeSpec, IntakeType, SecretKeyRef,
    Sink, SinkSpec, Source, SourceSpec, VerifyType,
};
use kube::ResourceExt;

mod durability;
pub mod files;
pub use durability::{
    Durability, durability, durability_field, durability_fingerprint, durability_secret_names,
    is_durability_field,
};

/// Secret values by Secret name, then key (raw bytes of `data`).
pub type SecretValues = BTreeMap<String, BTreeMap<String, Vec<u8>>>;

/// Everything rendering reads.
pub struct Inputs<'a> {
    pub gateway: &'a Gateway,
    /// Sources of the namespace (those of other gateways are skipped).
    pub sources: &'a [Source],
    /// Sinks of the namespace.
    pub sinks: &'a [Sink],
    pub secrets: &'a SecretValues,
    /// The admin API token the operator uses (rendered with scope `*`).
    pub admin_token: &'a str,
    /// The config the pods last received, for the fallback described above.
    pub previous: Option<&'a Config>,
}

/// How one Source made it into the config.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Rendered from its current spec.
    Current,
    /// Its current spec failed to render; the pods keep the previous version.
    Previous(String),
    /// Failed to render and never rendered before: not in the config.
    Missing(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct SourceRender {
    /// The source id in the config.
    pub id: String,
    pub generation: Option<i64>,
    pub outcome: Outcome,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SinkRender {
    pub generation: Option<i64>,
    /// Sources (object names) that deliver to it.
    pub used_by: Vec<String>,
    /// Why it could not be rendered.
    pub error: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Rendered {
    /// The config without `node.instance` (set per pod); `None` when the Gateway's own
    /// settings are refused (`error` says why).
    pub base: Option<Config>,
    pub error: Option<String>,
    /// By Source object name.
    pub sources: BTreeMap<String, SourceRender>,
    /// By Sink object name (sinks used by this gateway's sources).
    pub sinks: BTreeMap<String, SinkRender>,
    /// Secrets whose values went into the config.
    pub secrets_used: BTreeSet<String>,
}

impl Rendered {
    /// The config of one pod: `node.instance` is the pod name.
    pub fn for_pod(&self, pod: &str) -> Option<Config> {
        let mut c = self.base.clone()?;
        c.node.instance = pod.to_string();
        Some(c)
    }
}

/// Does this Source belong to this Gateway?
pub fn source_of(source: &Source, gateway: &str) -> bool {
    source.spec.gateway_ref.name == gateway
}

/// The source id of a Source: `spec.id` or its name.
pub fn source_id(source: &Source) -> String {
    source.spec.id.clone().unwrap_or_else(|| source.name_any())
}

/// The entry `SecretValues` holds for a Secret that exists without the opt-in label: no data,
/// only this key (Secret data keys are `[-._a-zA-Z0-9]+`, so no real key looks like it).
pub const NOT_USABLE: &str = "\0not-usable";

/// Resolves one Secret key to text (a trailing newline, as `--from-file` leaves, is dropped).
pub fn secret_value(secrets: &SecretValues, r: &SecretKeyRef) -> Result<String, String> {
    let Some(data) = secrets.get(&r.name) else {
        return Err(format!("Secret {} not found", r.name));
    };
    if data.contains_key(NOT_USABLE) {
        return Err(format!(
            "Secret {} is not labelled {}={} (a Secret is used only when it opts in)",
            r.name,
            ankusa_crds::names::USABLE_LABEL,
            ankusa_crds::names::USABLE
        ));
    }
    let Some(bytes) = data.get(&r.key) else {
        return Err(format!("Secret {} has no key {:?}", r.name, r.key));
    };
    let text = std::str::from_utf8(bytes)
        .map_err(|_| format!("Secret {} key {:?} is not UTF-8 text", r.name, r.key))?;
    let text = text.trim_end_matches(['\n', '\r']);
    if text.is_empty() {
        return Err(format!("Secret {} key {:?} is empty", r.name, r.key));
    }
    Ok(text.to_string())
}

/// The Gateway's own part of the config: listeners, data dir, admin token, settings.
pub fn base_config(gw: &Gateway, admin_token: &str) -> Config {
    let spec = &gw.spec;
    let mut c = Config::default();
    c.node.instance = gw.name_any();
    c.node.data_dir = DATA_MOUNT.into();
    c.http.ip = [0, 0, 0, 0].into();
    c.http.port = spec.ports.http;
    c.admin.ip = [0, 0, 0, 0].into();
    c.admin.port = spec.ports.admin;
    c.claim_check.port = spec.ports.claims;
    if let Some(cc) = &spec.settings.claim_check {
        if let Some(on) = cc.enabled {
            c.claim_check.enabled = on;
        }
        c.claim_check.retention_days = cc.retention_days;
    }
    c.admin.tokens = vec![AdminToken {
        token: admin_token.to_string(),
        scopes: vec!["*".into()],
    }];
    let s = &spec.settings;
    if let Some(l) = &s.log {
        c.log = l.clone();
    }
    if let Some(h) = &s.http {
        if let Some(v) = h.max_body_bytes {
            c.http.max_body_bytes = v;
        }
        if let Some(v) = h.routing {
            c.http.routing = v;
        }
        if let Some(v) = &h.prefix {
            c.http.prefix = v.clone();
        }
        if let Some(v) = h.body_timeout_ms {
            c.http.body_timeout_ms = v;
        }
    }
    if let Some(b) = &s.batcher {
        c.batcher = b.clone();
    }
    if let Some(r) = &s.rate_limits {
        c.rate_limits = r.clone();
    }
    if let Some(d) = &s.dispatch {
        c.dispatch = d.clone();
    }
    if let Some(e) = &s.egress {
        c.egress = e.gateway.clone();
    }
    if let Some(q) = &s.quarantine {
        c.quarantine = q.clone();
    }
    if let Some(q) = &s.queue {
        c.queue = q.clone();
    }
    c
}

/// Where a `local` archive lives: a directory on the pod's own volume, beside its store.
pub fn local_archive_dir() -> String {
    format!("{DATA_MOUNT}/archive")
}

/// The spec field of a gateway `storage.*` key, for errors that name what the user wrote.
fn archive_field(config_field: &str) -> String {
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
struct S3Fields<'a> {
    bucket: Option<&'a str>,
    endpoint: Option<&'a str>,
    region: Option<&'a str>,
    force_path_style: Option<bool>,
    timeout_ms: Option<u64>,
    credentials: Option<&'a ArchiveCredentials>,
}

/// The gateway's `s3:` keys of a store, credentials read from their Secrets; errors name the
/// field under `at` (`spec.archive`, `spec.durability.backup.store`) and never a value.
fn s3_store(
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

/// Option names that must come from a Secret (`secretRefs`), never from `options`.
const CREDENTIAL_KEYS: &[&str] = &[
    "secret",
    "secrets",
    "password",
    "token",
    "api_key",
    "auth_token",
    "access_key",
    "secret_key",
    "private_key",
    "secret_access_key",
    "session_token",
    "credentials",
    "credentials_json",
    "nkey",
    "nkey_seed",
    "jwt",
    "creds",
];

fn is_credential_key(k: &str) -> bool {
    let k = k.to_ascii_lowercase();
    CREDENTIAL_KEYS.contains(&k.as_str())
        || ["_password", "_secret", "_token"]
            .iter()
            .any(|s| k.ends_with(s))
}

/// `scheme://user:password@host...`
fn url_has_password(s: &str) -> bool {
    let Some((_, rest)) = s.split_once("://") else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    authority
        .rsplit_once('@')
        .is_some_and(|(userinfo, _)| userinfo.contains(':'))
}

/// Refuses credentials written inline in a Sink's `options` (at any depth: `sasl.password`,
/// `auth.token`, ...).
pub fn check_sink_options(
    options: &serde_json::Map<String, serde_json::Value>,
) -> Result<(), String> {
    check_options_at("options", options)
}

fn check_options_at(
    path: &str,
    options: &serde_json::Map<String, serde_json::Value>,
) -> Result<(), String> {
    for (k, v) in options {
        let here = format!("{path}.{k}");
        let rel = here.strip_prefix("options.").unwrap_or(&here).to_string();
        if is_credential_key(k) {
            return Err(format!(
                "{here} is a credential: give it in secretRefs[\"{rel}\"] (a Secret reference)"
            ));
        }
        match v {
            serde_json::Value::String(s) if url_has_password(s) => {
                return Err(format!(
                    "{here} holds a password in its URL: give the URL in secretRefs[\"{rel}\"]"
                ));
            }
            serde_json::Value::Object(h) if k == "headers" => {
                for name in h.keys() {
                    let n = name.to_ascii_lowercase();
                    if n == "authorization" || n == "proxy-authorization" || n.contains("api-key") {
                        return Err(format!(
                            "{here}.{name} carries a credential: give it in secretHeaders"
                        ));
                    }
                }
            }
            serde_json::Value::Object(m) => check_options_at(&here, m)?,
            serde_json::Value::Array(items) => {
                for item in items {
                    if let serde_json::Value::String(s) = item
                        && url_has_password(s)
                    {
                        return Err(format!(
                            "{here} holds a password in a URL: give it in secretRefs[\"{rel}\"]"
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Sets `a.b.c` in a JSON object, creating the intermediate objects.
fn set_path(
    obj: &mut serde_json::Map<String, serde_json::Value>,
    path: &str,
    value: serde_json::Value,
) -> Result<(), String> {
    let mut parts = path.split('.').peekable();
    let mut cur = obj;
    while let Some(part) = parts.next() {
        if part.is_empty() {
            return Err(format!("secretRefs key {path:?} is not a dot path"));
        }
        if parts.peek().is_none() {
            cur.insert(part.to_string(), value);
            return Ok(());
        }
        let next = cur
            .entry(part.to_string())
            .or_insert_with(|| serde_json::Value::Object(Default::default()));
        cur = match next {
            serde_json::Value::Object(m) => m,
            _ => {
                return Err(format!(
                    "secretRefs key {path:?}: options.{part} is not a map"
                ));
            }
        };
    }
    Ok(())
}

/// The option paths a Secret may fill, per sink type: the credentials and the addresses that
/// carry them, nothing else. A Secret placed anywhere else (`timeout_ms`, `topic`) would reach
/// a status or an Event through the error that follows, or be sent somewhere as plain data.
pub fn secret_ref_paths(t: SinkType) -> &'static [&'static str] {
    match t {
        // A receiver URL is often the credential itself (a Slack incoming-webhook URL).
        SinkType::Http => &["secret", "url"],
        SinkType::Log => &[],
        SinkType::Kafka => &[
            "sasl.username",
            "sasl.password",
            "sasl.token",
            "tls.ca_pem",
            "tls.cert_pem",
            "tls.key_pem",
        ],
        SinkType::Rabbitmq => &["url", "tls.ca_pem", "tls.cert_pem", "tls.key_pem"],
        SinkType::Redis => &["url", "tls.ca_pem", "tls.cert_pem", "tls.key_pem"],
        SinkType::Nats => &[
            "auth.username",
            "auth.password",
            "auth.token",
            "auth.nkey_seed",
            "auth.jwt",
            // The shared TLS settings' PEM text (a private CA, a client certificate and key).
            "tls.ca_pem",
            "tls.cert_pem",
            "tls.key_pem",
        ],
        SinkType::Sqs => &[
            "queue_url",
            "endpoint",
            "access_key_id",
            "secret_access_key",
            "session_token",
            "tls.ca_pem",
            "tls.cert_pem",
            "tls.key_pem",
        ],
        SinkType::GooglePubsub => &[
            "token",
            "endpoint",
            "tls.ca_pem",
            "tls.cert_pem",
            "tls.key_pem",
        ],
    }
}

/// A Sink → the gateway's typed `SinkConfig`: `options` + `type` + the values of
/// `secretRefs` (keys are option paths: `secret`, `url`, `sasl.password`) and `secretHeaders`, deserialised by the gateway's own types (so a sink type
/// the gateway gains is rendered without changes here).
pub fn render_sink(sink: &Sink, secrets: &SecretValues) -> Result<SinkConfig, String> {
    render_sink_spec(&sink.spec, secrets)
}

/// [`render_sink`] of a Sink's spec alone (also the shape of the intake log of
/// `spec.durability`). Errors name the field relative to the spec (`options.brokers`,
/// `secretRefs.sasl.password`).
pub fn render_sink_spec(spec: &SinkSpec, secrets: &SecretValues) -> Result<SinkConfig, String> {
    files::refuse_path_keys(&spec.options, Some(spec.type_), "a Sink")?;
    let c = sink_from_object(spec, sink_object(spec, secrets)?)?;
    files::refuse_file_options(&c, "options", Some(spec.type_), "a Sink").map(|()| c)
}

/// A Sink spec's options with `type` and the Secret values filled in: the JSON object of the
/// gateway's sink entry, before its types read it.
pub(crate) fn sink_object(
    spec: &SinkSpec,
    secrets: &SecretValues,
) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    check_sink_options(&spec.options)?;
    let mut obj = spec.options.clone();
    obj.insert("type".into(), spec.type_.as_str().into());
    let allowed = secret_ref_paths(spec.type_);
    for (k, refs) in &spec.secret_refs {
        if !allowed.contains(&k.as_str()) {
            // The key is the Sink author's own text, not a Secret's value.
            return Err(if allowed.is_empty() {
                format!(
                    "secretRefs[{k:?}]: a {} sink takes no Secret references",
                    spec.type_.as_str()
                )
            } else {
                format!(
                    "secretRefs[{k:?}]: not a credential option of a {} sink (a Secret may fill: {})",
                    spec.type_.as_str(),
                    allowed.join(", ")
                )
            });
        }
        if refs.is_empty() {
            return Err(format!("secretRefs.{k} is empty"));
        }
        let values = refs
            .iter()
            .map(|r| secret_value(secrets, r))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("secretRefs.{k}: {e}"))?;
        let v = if values.len() == 1 {
            serde_json::Value::String(values.into_iter().next().unwrap_or_default())
        } else {
            values.into()
        };
        set_path(&mut obj, k, v)?;
    }
    if !spec.secret_headers.is_empty() {
        let headers = obj
            .entry("headers")
            .or_insert_with(|| serde_json::Value::Object(Default::default()));
        let serde_json::Value::Object(headers) = headers else {
            return Err("options.headers must be a map".into());
        };
        for (h, r) in &spec.secret_headers {
            let v = secret_value(secrets, r).map_err(|e| format!("secretHeaders.{h}: {e}"))?;
            headers.insert(h.clone(), v.into());
        }
    }
    Ok(obj)
}

fn sink_from_object(
    spec: &SinkSpec,
    obj: serde_json::Map<String, serde_json::Value>,
) -> Result<SinkConfig, String> {
    let value = serde_json::Value::Object(obj);
    serde_path_to_error::deserialize::<_, SinkConfig>(value).map_err(|e| {
        let path = e.path().to_string();
        // serde quotes the offending value ("invalid type: string \"...\""), and that value
        // may be a Secret's: the message reaches statuses, Events and logs.
        let inner = ankusa_config::value_free(&e.into_inner().to_string());
        if inner.contains("unknown variant") && (path == "." || path.is_empty() || path == "type") {
            format!(
                "type {} is not supported by this gateway version",
                spec.type_.as_str()
            )
        } else if path == "." || path.is_empty() {
            format!("options: {inner}")
        } else {
            format!("options.{path}: {inner}")
        }
    })
}

fn secrets_of(
    refs: &[SecretKeyRef],
    secrets: &SecretValues,
) -> Result<ankusa_config::Secrets, String> {
    if refs.is_empty() {
        return Err("verify.secretRefs must name at least one Secret key".into());
    }
    let values = refs
        .iter()
        .map(|r| secret_value(secrets, r))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("verify.secretRefs: {e}"))?;
    Ok(ankusa_config::Secrets(values))
}

fn verify_config(spec: &SourceSpec, secrets: &SecretValues) -> Result<VerifyConfig, String> {
    let v = &spec.verify;
    let timed = |secret| TimedPreset {
        secret,
        tolerance_seconds: v.tolerance_seconds.unwrap_or(300),
    };
    if v.type_ != VerifyType::Hmac && v.hmac.is_some() {
        return Err("verify.hmac is only for type: hmac".into());
    }
    Ok(match v.type_ {
        VerifyType::None => {
            if !v.secret_refs.is_empty() {
                return Err("verify.secretRefs given but verify.type is none".into());
            }
            VerifyConfig::None
        }
        VerifyType::Stripe => VerifyConfig::Stripe(timed(secrets_of(&v.secret_refs, secrets)?)),
        VerifyType::Slack => VerifyConfig::Slack(timed(secrets_of(&v.secret_refs, secrets)?)),
        VerifyType::StandardWebhooks => {
            VerifyConfig::StandardWebhooks(timed(secrets_of(&v.secret_refs, secrets)?))
        }
        VerifyType::Github => VerifyConfig::Github(Preset {
            secret: secrets_of(&v.secret_refs, secrets)?,
        }),
        VerifyType::Shopify => VerifyConfig::Shopify(Preset {
            secret: secrets_of(&v.secret_refs, secrets)?,
        }),
        VerifyType::Hmac => {
            let h: &HmacSpec = v
                .hmac
                .as_ref()
                .ok_or("verify.hmac is required for type: hmac")?;
            VerifyConfig::Hmac(HmacVerify {
                secret: secrets_of(&v.secret_refs, secrets)?,
                signature_header: h.signature_header.clone(),
                signed: h.signed.clone().unwrap_or_else(|| "{body}".into()),
                hash: h.hash.unwrap_or(ankusa_config::HmacHash::Sha256),
                encoding: h.encoding.unwrap_or(ankusa_config::SigEncoding::Hex),
                sig_prefix: h.sig_prefix.clone(),
                parse: h.parse.unwrap_or_default(),
                sig_key: h.sig_key.clone(),
                version: h.version.clone(),
                timestamp_header: h.timestamp_header.clone(),
                tolerance_seconds: v.tolerance_seconds,
                secret_decode: h.secret_decode.unwrap_or_default(),
            })
        }
    })
}

fn retry_override(r: &RetrySpec) -> RetryOverride {
    RetryOverride {
        base_ms: r.base_ms,
        max_ms: r.max_ms,
        max_attempts: r.max_attempts,
        jitter: r.jitter,
        max_elapsed_ms: r.max_elapsed_ms,
    }
}

/// One Source → the gateway's `SourceConfig`, its sinks resolved from `sinks` (by name).
pub fn render_source(
    source: &Source,
    sinks: &BTreeMap<String, Result<SinkConfig, String>>,
    secrets: &SecretValues,
) -> Result<SourceConfig, String> {
    let spec = &source.spec;
    if spec.sinks.is_empty() {
        return Err("sinks must name at least one Sink".into());
    }
    let mut rendered_sinks = Vec::with_capacity(spec.sinks.len());
    for (i, r) in spec.sinks.iter().enumerate() {
        match sinks.get(&r.name) {
            None => return Err(format!("sinks[{i}]: Sink {} not found", r.name)),
            Some(Err(e)) => return Err(format!("sinks[{i}]: Sink {}: {e}", r.name)),
            Some(Ok(s)) => rendered_sinks.push(s.clone()),
        }
    }
    let mut sc = SourceConfig::with_sinks(rendered_sinks);
    // The pods report a sink's delivery failures under these names (`GET /v1/status`), which
    // is how they reach the Sink's status.
    sc.sink_names = spec.sinks.iter().map(|r| r.name.clone()).collect();
    sc.tenant = spec.tenant.clone();
    sc.trust_url_tenant = spec.trust_url_tenant;
    sc.verify = verify_config(spec, secrets)?;
    sc.on_verify_failure = spec.on_verify_failure.unwrap_or(OnVerifyFailure::Reject);
    sc.dedupe = spec.dedupe.as_ref().map(|d| DedupeConfig {
        preset: d.preset,
        header: d.header.clone(),
        json: d.json.clone(),
        ttl_seconds: d
            .ttl_seconds
            .unwrap_or_else(ankusa_config::default_dedupe_ttl),
    });
    sc.forward_headers = spec.forward_headers.clone();
    if let Some(v) = spec.max_headers {
        sc.max_headers = v;
    }
    if let Some(v) = spec.forward_headers_max_bytes {
        sc.forward_headers_max_bytes = v;
    }
    sc.retry = spec.retry.as_ref().map(retry_override);
    Ok(sc)
}

/// Secrets a Source refers to (directly; its sinks' are in [`sink_secret_names`]).
pub fn source_secret_names(source: &Source) -> impl Iterator<Item = &str> {
    source
        .spec
        .verify
        .secret_refs
        .iter()
        .map(|r| r.name.as_str())
}

pub fn sink_secret_names(sink: &Sink) -> impl Iterator<Item = &str> {
    sink.spec
        .secret_refs
        .values()
        .flatten()
        .map(|r| r.name.as_str())
        .chain(sink.spec.secret_headers.values().map(|r| r.name.as_str()))
}

/// Secrets a Gateway's own settings read (the admin token is fetched on its own): the
/// claim check's reader tokens, the archive's credentials and those of `spec.durability`.
pub fn gateway_secret_names(gw: &Gateway) -> impl Iterator<Item = &str> {
    let claim = gw
        .spec
        .settings
        .claim_check
        .iter()
        .flat_map(|cc| cc.token_secret_refs.iter().map(|r| r.name.as_str()));
    let archive = gw
        .spec
        .archive
        .iter()
        .filter_map(|a| a.credentials.as_ref())
        .flat_map(|c| c.refs().map(|(_, r)| r.name.as_str()));
    claim.chain(archive).chain(durability_secret_names(gw))
}

/// The claim check's reader tokens; with at least one, the claim port listens on the pod
/// network so consumers in other pods can redeem claims.
fn claim_tokens(
    c: &mut Config,
    cc: &ankusa_crds::ClaimCheckSettings,
    secrets: &SecretValues,
) -> Result<(), String> {
    let mut tokens = Vec::with_capacity(cc.token_secret_refs.len());
    for (i, r) in cc.token_secret_refs.iter().enumerate() {
        let v = secret_value(secrets, r)
            .map_err(|e| format!("spec.settings.claim_check.token_secret_refs[{i}]: {e}"))?;
        tokens.push(ankusa_config::ClaimToken::new(v));
    }
    if !tokens.is_empty() {
        c.claim_check.ip = [0, 0, 0, 0].into();
    }
    c.claim_check.tokens = tokens;
    Ok(())
}

/// Renders the whole config of a Gateway.
pub fn render(inputs: &Inputs) -> Rendered {
    let gw_name = inputs.gateway.name_any();
    let mut out = Rendered {
        base: None,
        error: None,
        sources: BTreeMap::new(),
        sinks: BTreeMap::new(),
        secrets_used: BTreeSet::new(),
    };
    if let Some(r) = &inputs.gateway.spec.admin_token_secret_ref {
        out.secrets_used.insert(r.name.clone());
    }
    let mut base = base_config(inputs.gateway, inputs.admin_token);
    if let Some(cc) = &inputs.gateway.spec.settings.claim_check {
        for r in &cc.token_secret_refs {
            out.secrets_used.insert(r.name.clone());
        }
        if let Err(e) = claim_tokens(&mut base, cc, inputs.secrets) {
            out.error = Some(e);
            return out;
        }
    }
    if let Err(e) = ankusa_config::validate(&base) {
        out.error = Some(format!("settings refused by the gateway's validation: {e}"));
        return out;
    }
    if let Some(c) = inputs
        .gateway
        .spec
        .archive
        .as_ref()
        .and_then(|a| a.credentials.as_ref())
    {
        out.secrets_used
            .extend(c.refs().map(|(_, r)| r.name.clone()));
    }
    match archive_storage(inputs.gateway, inputs.secrets) {
        Ok(storage) => base.storage = storage,
        Err(e) => {
            out.error = Some(e);
            return out;
        }
    }
    if let Err(e) = ankusa_config::validate(&base) {
        // The settings passed above: what is refused is the archive.
        let field = e
            .field
            .as_deref()
            .map(archive_field)
            .unwrap_or_else(|| "spec.archive".into());
        out.error = Some(format!(
            "{field}: refused by the gateway's validation: {}",
            e.message
        ));
        return out;
    }
    out.secrets_used
        .extend(durability_secret_names(inputs.gateway).map(String::from));
    match durability(inputs.gateway, inputs.secrets) {
        Ok(d) => {
            base.wal = d.wal;
            base.intake = d.intake;
            base.backup = d.backup;
        }
        Err(e) => {
            out.error = Some(e);
            return out;
        }
    }
    if let Err(e) = ankusa_config::validate(&base) {
        // What passed above is fine: what is refused is `spec.durability`.
        let field = e
            .field
            .as_deref()
            .filter(|f| is_durability_field(f))
            .map(durability_field)
            .unwrap_or_else(|| "spec.durability".into());
        out.error = Some(format!(
            "{field}: refused by the gateway's validation: {}",
            e.message
        ));
        return out;
    }

    // This gateway's sources, oldest first so that a later duplicate id is the one refused.
    let mut sources: Vec<&Source> = inputs
        .sources
        .iter()
        .filter(|s| source_of(s, &gw_name))
        .collect();
    sources.sort_by(|a, b| {
        (
            a.metadata.creation_timestamp.as_ref().map(|t| t.0),
            a.name_any(),
        )
            .cmp(&(
                b.metadata.creation_timestamp.as_ref().map(|t| t.0),
                b.name_any(),
            ))
    });

    // Sinks used by them.
    let ambient_allowed = files::ambient_identity_allowed(inputs.gateway);
    let by_name: BTreeMap<String, &Sink> = inputs.sinks.iter().map(|s| (s.name_any(), s)).collect();
    let mut sink_configs: BTreeMap<String, Result<SinkConfig, String>> = BTreeMap::new();
    for src in &sources {
        for r in &src.spec.sinks {
            let Some(sink) = by_name.get(&r.name) else {
                continue;
            };
            let entry = out
                .sinks
                .entry(r.name.clone())
                .or_insert_with(|| SinkRender {
                    generation: sink.metadata.generation,
                    used_by: Vec::new(),
                    error: None,
                });
            if !entry.used_by.contains(&src.name_any()) {
                entry.used_by.push(src.name_any());
            }
            if !sink_configs.contains_key(&r.name) {
                let rendered = render_sink(sink, inputs.secrets)
                    .and_then(|c| files::refuse_ambient_identity(&c, ambient_allowed).map(|()| c));
                if let Err(e) = &rendered {
                    entry.error = Some(e.clone());
                } else {
                    out.secrets_used
                        .extend(sink_secret_names(sink).map(String::from));
                }
                sink_configs.insert(r.name.clone(), rendered);
            }
        }
    }

    let mut ids_taken: BTreeMap<String, String> = BTreeMap::new();
    for src in sources {
        let name = src.name_any();
        let id = source_id(src);
        let rendered = if let Some(other) = ids_taken.get(&id) {
            Err(format!(
                "source id {id:?} is already used by Source {other}"
            ))
        } else {
            render_source(src, &sink_configs, inputs.secrets).and_then(|sc| {
                files::check_source(&sc, ambient_allowed)?;
                // Validate in context with the gateway's own rules.
                let mut probe = base.clone();
                probe.sources.insert(id.clone(), sc.clone());
                ankusa_config::validate(&probe)
                    .map(|_| sc)
                    .map_err(|e| format!("refused by the gateway's validation: {e}"))
            })
        };
        let outcome = match rendered {
            Ok(sc) => {
                out.secrets_used
                    .extend(source_secret_names(src).map(String::from));
                base.sources.insert(id.clone(), sc);
                Outcome::Current
            }
            Err(e) => {
                let prev = inputs
                    .previous
                    .and_then(|p| p.sources.get(&id))
                    .filter(|_| !ids_taken.contains_key(&id));
                let (kept, outcome) = files::fallback(prev, e);
                if let Some(prev) = kept {
                    base.sources.insert(id.clone(), prev.clone());
                }
                outcome
            }
        };
        ids_taken.entry(id.clone()).or_insert_with(|| name.clone());
        out.sources.insert(
            name,
            SourceRender {
                id,
                generation: src.metadata.generation,
                outcome,
            },
        );
    }
    match files::validate(&base) {
        Ok(()) => out.base = Some(base),
        Err(e) => out.error = Some(e),
    }
    out
}

/// Parses a config the operator rendered earlier (the config Secret's content).
pub fn parse_rendered(yaml: &str) -> Option<Config> {
    ankusa_config::from_rendered_yaml(yaml).ok()
}
