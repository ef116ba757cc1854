//! Redaction for `print-config` and `GET /v1/config`: an allowlist. Only keys known to hold
//! no secret are shown; everything else (secrets, tokens, sink header values, keys added
//! later and not yet reviewed) reads `[redacted]`. URLs lose userinfo and query values; a
//! sink's `url`, `queue_url` and `endpoint` (options the operator lets a Secret fill: a Slack
//! incoming-webhook URL carries its token in the path) show only `scheme://host[:port]`, with
//! `/[redacted]` in place of any path or query.

use serde_json::{Map, Value};

use crate::model::Config;
use crate::secrets::redact_url;

const REDACTED: &str = "[redacted]";

/// Keys whose values are shown (scalars as they are, structures walked with the same rule).
const SHOWN: &[&str] = &[
    // sections
    "node",
    "log",
    "http",
    "admin",
    "batcher",
    "rate_limits",
    "dispatch",
    "egress",
    "claim_check",
    "bucket_expiry_days",
    "redeem_grace_days",
    "pack_linger_ms",
    "pack_max_bytes",
    // claim readers' ServiceAccounts (names, no credential; token_file is a path)
    "token_review",
    "audience",
    "service_accounts",
    "namespace",
    "name",
    "api_server",
    "cache_ttl_s",
    "retry",
    "pools",
    "verify",
    "dedupe",
    "default",
    "ordering_key",
    "tenants",
    // node / log / http / admin
    "instance",
    "data_dir",
    "region",
    "roles",
    "level",
    "format",
    "ip",
    "port",
    "max_body_bytes",
    "routing",
    "prefix",
    "body_timeout_ms",
    "enabled",
    "scopes",
    // batcher / limits / dispatch
    "partitions",
    "max_batch",
    "max_delay_ms",
    "max_queue",
    "max_queue_bytes",
    "max_wait_ms",
    "rate",
    "burst",
    "concurrency",
    "max_inflight",
    "max_inflight_bytes",
    "batch",
    "attempt_timeout_ms",
    "max_retry_after_ms",
    "base_ms",
    "max_ms",
    "max_attempts",
    "jitter",
    "max_elapsed_ms",
    "sink_concurrency",
    "breaker_failures",
    "breaker_open_ms",
    "breaker_max_open_ms",
    // egress / claim check
    "allow_http",
    "allow_loopback",
    "allow_private",
    "allow_link_local",
    "allow_cidrs",
    "pool_size",
    "max_pools",
    "max_pools_per_tenant",
    "pool_max_idle_ms",
    "retention_days",
    // lifecycle events (its sinks follow the sources' sinks rules)
    "lifecycle",
    "max_events",
    "max_per_minute",
    "count_interval_s",
    // sources
    "tenant",
    "trust_url_tenant",
    "type",
    "tolerance_seconds",
    "signature_header",
    "signed",
    "hash",
    "encoding",
    "sig_prefix",
    "parse",
    "sig_key",
    "version",
    "timestamp_header",
    "secret_decode",
    "on_verify_failure",
    "preset",
    "header",
    "json",
    "ttl_seconds",
    "forward_headers",
    "max_headers",
    "forward_headers_max_bytes",
    "sinks",
    "sink_names",
    // sinks
    "method",
    "timeout_ms",
    "allow_unsigned",
    "max_response_bytes",
    "cacertfile",
    "allow_insecure_tls",
    "ordered",
    // queue sinks (credential keys such as password, token, secret_access_key, session_token,
    // access_key_id, username, nkey_seed, jwt and sasl's children stay redacted)
    "topic",
    "key",
    "inline_max_bytes",
    "max_record_bytes",
    "produce_timeout_ms",
    "idle_timeout_ms",
    "sasl",
    "mechanism",
    "exchange",
    "exchange_type",
    "routing_key",
    "confirm_timeout_ms",
    "retry_ms",
    "subject",
    "publish_timeout_ms",
    "max_message_bytes",
    "tls",
    "channel",
    "message_group_id",
    "batch_linger_ms",
    "batch_max_entries",
    "batch_max_bytes",
    "batch_queue_max",
    "batch_queue_max_bytes",
    "batch_queue_tenant_max",
    "batch_max_inflight",
    "project",
    "auth",
    "message_ordering_key",
    // the shared `tls:` settings: paths and names (ca_pem, cert_pem and key_pem stay
    // redacted), and NATS's `.creds` file path
    "ca_file",
    "cert_file",
    "key_file",
    "server_name",
    "insecure_skip_verify",
    "credentials_file",
    // Kafka's protocol and OAUTHBEARER token file (a path), RabbitMQ's SASL mechanism
    "security_protocol",
    "token_file",
    "auth_mechanism",
    // the quarantine pen's bounds (burst, rate and max_body_bytes are listed above)
    "quarantine",
    "max_bytes",
    "max_bytes_per_source",
    "max_bytes_per_tenant",
    "retention_hours",
    "expire_interval_ms",
    // the archive's store (access_key_id, secret_access_key and session_token stay redacted)
    // and the DLQ's bounds
    "storage",
    "archive_at",
    "key_prefix",
    "roll_bytes",
    "roll_ms",
    "interval_ms",
    "local",
    "dir",
    "s3",
    "bucket",
    "force_path_style",
    // GCS and Azure Blob stores (`credentials`, `sas_token` and `account_key` stay redacted)
    "gcs",
    "anonymous",
    "azure",
    "account",
    "container",
    "queue",
    "dlq",
    "max_rows",
    "reap_interval_ms",
    // durability: wal, intake (its kafka/jetstream keys follow the sinks' rules), backup
    "wal",
    "intake",
    "kafka",
    "jetstream",
    "node",
    "publish_timeout_ms",
    "retry_after_s",
    "reconcile_interval_ms",
    "backup",
    "store",
    "keep",
    // telemetry (the export `headers` stay redacted; `endpoint` is a URL key)
    "telemetry",
    "otlp",
    "protocol",
    "sampling_ratio",
    "service_name",
];

/// Keys holding a URL, or a list of `host:port` / URL entries, that may carry userinfo:
/// shown without it (and without query values).
const URL_KEYS: &[&str] = &["url", "queue_url", "endpoint", "servers", "brokers"];

/// URL keys of a sink whose path and query are redacted too (`SINK_URL_KEYS` under
/// `SINKS_AT`): the sink URL options a Secret may fill (`secret_ref_paths` in the operator).
const SINK_URL_KEYS: &[&str] = &["url", "queue_url", "endpoint"];
const SINKS_AT: &[&str] = &["sources.*.sinks", "lifecycle.sinks"];

/// Paths (dotted, `*` for any id) of maps whose keys are ids (shown) and whose values are
/// structures walked by the same rule.
const ID_MAPS: &[&str] = &[
    "sources",
    "rate_limits.tenants",
    "dispatch.tenants.overrides",
];

/// Lists of secrets: every element redacted.
const SECRET_LISTS: &[&str] = &["claim_check.tokens"];

/// The config as JSON with every non-allowlisted value redacted.
pub fn redacted_json(c: &Config) -> Value {
    let v = serde_json::to_value(c).expect("config serialises to JSON");
    match v {
        Value::Object(m) => Value::Object(walk_map(m, "")),
        other => other,
    }
}

/// One source as `redacted_json` shows it under `sources.<id>` (what a lifecycle event's diff
/// carries): the same allowlist, so a source change never puts a secret in an event.
pub fn redacted_source(id: &str, s: &crate::section::source::SourceConfig) -> Value {
    let mut c = Config::default();
    c.sources.insert(id.to_string(), s.clone());
    redacted_json(&c)["sources"][id].take()
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn walk_map(m: Map<String, Value>, path: &str) -> Map<String, Value> {
    let mut out = Map::new();
    for (k, v) in m {
        let here = join(path, &k);
        let shown = if ID_MAPS.contains(&here.as_str()) {
            match v {
                Value::Object(children) => Value::Object(
                    children
                        .into_iter()
                        .map(|(id, c)| {
                            let child = match c {
                                // Ids are shown; what they hold is walked under a `*` path.
                                Value::Object(m) => Value::Object(walk_map(m, &join(&here, "*"))),
                                other => walk_shown(other, &join(&here, "*")),
                            };
                            (id, child)
                        })
                        .collect(),
                ),
                other => other,
            }
        } else if k == "tokens" || SECRET_LISTS.contains(&here.as_str()) {
            // A list of tokens (`admin.tokens`, `claim_check.tokens`): a plain entry is the
            // secret itself; a map entry (`{token, scopes}`, `{token, tenants}`) is walked by
            // the same rule, so its token reads `[redacted]` and the rest is shown.
            match v {
                Value::Array(items) => Value::Array(
                    items
                        .into_iter()
                        .map(|i| match i {
                            Value::Object(m) => Value::Object(walk_map(m, &here)),
                            _ => REDACTED.into(),
                        })
                        .collect(),
                ),
                _ => REDACTED.into(),
            }
        } else if k == "headers" {
            match v {
                Value::Object(h) => Value::Object(
                    h.into_iter()
                        .map(|(name, _)| (name, REDACTED.into()))
                        .collect(),
                ),
                _ => REDACTED.into(),
            }
        } else if SINKS_AT.contains(&path) && SINK_URL_KEYS.contains(&k.as_str()) {
            match v {
                Value::String(u) => Value::String(origin_only(&u)),
                _ => REDACTED.into(),
            }
        } else if URL_KEYS.contains(&k.as_str()) {
            match v {
                Value::String(u) => Value::String(redact_server(&u)),
                Value::Array(items) => Value::Array(
                    items
                        .into_iter()
                        .map(|i| match i {
                            Value::String(u) => Value::String(redact_server(&u)),
                            _ => REDACTED.into(),
                        })
                        .collect(),
                ),
                _ => REDACTED.into(),
            }
        } else if SHOWN.contains(&k.as_str()) {
            walk_shown(v, &here)
        } else {
            REDACTED.into()
        };
        out.insert(k, shown);
    }
    out
}

fn walk_shown(v: Value, path: &str) -> Value {
    match v {
        Value::Object(m) => Value::Object(walk_map(m, path)),
        Value::Array(items) => {
            Value::Array(items.into_iter().map(|i| walk_shown(i, path)).collect())
        }
        scalar => scalar,
    }
}

/// A URL, or a scheme-less `host:port` entry, without userinfo (and, for a URL, without query
/// values). Whatever does not parse is redacted whole.
fn redact_server(raw: &str) -> String {
    if raw.contains("://") {
        return redact_url(raw);
    }
    // `host:port` (or `user:pw@host:port`): keep what follows the last `@`.
    let host = raw.rsplit('@').next().unwrap_or(raw);
    if host
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b".-:[]_".contains(&b))
    {
        host.to_string()
    } else {
        REDACTED.into()
    }
}

/// `scheme://host[:port]` of a URL, then its path as `/[redacted]` when it has a path other
/// than `/`, a query or a fragment. Whatever does not parse, or has no host, is redacted whole.
fn origin_only(raw: &str) -> String {
    let Ok(u) = url::Url::parse(raw) else {
        return REDACTED.into();
    };
    let Some(host) = u.host_str() else {
        return REDACTED.into();
    };
    let mut out = format!("{}://{host}", u.scheme());
    if let Some(port) = u.port() {
        out.push_str(&format!(":{port}"));
    }
    let bare = matches!(u.path(), "" | "/") && u.query().is_none() && u.fragment().is_none();
    out.push_str(if bare { u.path() } else { "/[redacted]" });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::*;

    #[test]
    fn secrets_tokens_and_header_values_are_redacted() {
        let mut c = Config::default();
        c.admin.tokens.push(AdminToken {
            token: "tok-very-secret-123".into(),
            scopes: vec!["*".into()],
        });
        let mut h = HttpSinkConfig::new("https://user:pw@example.com/in?key=abc&x=1");
        h.secret = Some(Secrets::one("whsec_c2VjcmV0"));
        h.headers
            .insert("Authorization".into(), "Bearer zzz".into());
        let mut s = SourceConfig::with_sinks(vec![SinkConfig::Http(h)]);
        s.verify = VerifyConfig::Github(Preset {
            secret: Secrets::one("gh-secret"),
        });
        c.sources.insert("gh".into(), s);
        let text = redacted_json(&c).to_string();
        for needle in [
            "tok-very-secret-123",
            "whsec_c2VjcmV0",
            "Bearer zzz",
            "gh-secret",
            "pw@",
            "abc",
        ] {
            assert!(!text.contains(needle), "{needle} leaked: {text}");
        }
        let v = redacted_json(&c);
        assert_eq!(v["sources"]["gh"]["verify"]["type"], "github");
        assert_eq!(
            v["sources"]["gh"]["sinks"][0]["url"],
            "https://example.com/[redacted]"
        );
        assert_eq!(v["admin"]["tokens"][0]["scopes"][0], "*");
        assert_eq!(v["http"]["port"], 4000);
    }

    #[test]
    fn lifecycle_sinks_follow_the_source_sink_rules() {
        let mut h = HttpSinkConfig::new("https://user:pw@events.example.com/hook/tok123?key=abc");
        h.secret = Some(Secrets::one("whsec_bGlmZWN5Y2xl"));
        let c = Config {
            lifecycle: Some(LifecycleConfig::with_sinks(vec![SinkConfig::Http(h)])),
            ..Default::default()
        };
        let v = redacted_json(&c);
        let text = v.to_string();
        for needle in ["pw@", "tok123", "abc", "whsec_bGlmZWN5Y2xl"] {
            assert!(!text.contains(needle), "{needle} leaked: {text}");
        }
        assert_eq!(
            v["lifecycle"]["sinks"][0]["url"],
            "https://events.example.com/[redacted]"
        );
        assert_eq!(v["lifecycle"]["max_per_minute"], 60);
        let mut s = SourceConfig::with_sinks(vec![SinkConfig::Http(HttpSinkConfig::new(
            "https://example.com/p/secret-path",
        ))]);
        s.verify = VerifyConfig::Github(Preset {
            secret: Secrets::one("gh-secret-2"),
        });
        let one = redacted_source("gh", &s).to_string();
        assert!(
            !one.contains("gh-secret-2") && !one.contains("secret-path"),
            "{one}"
        );
    }

    #[test]
    fn claim_tokens_are_redacted_and_id_maps_show_their_ids() {
        let mut c = Config::default();
        c.claim_check.tokens = vec![
            "claim-token-0123456789".into(),
            ClaimToken::for_tenants("scoped-claim-token-0123", &["acme"]),
        ];
        c.dispatch.tenants.overrides.insert(
            "acme".into(),
            TenantWindow {
                max_inflight: Some(9),
                ..Default::default()
            },
        );
        c.rate_limits.tenants.insert(
            "beta".into(),
            RateLimit {
                rate: 1.0,
                burst: 2,
            },
        );
        let v = redacted_json(&c);
        assert!(!v.to_string().contains("claim-token-0123"), "{v}");
        assert_eq!(v["claim_check"]["tokens"][0], "[redacted]");
        assert_eq!(v["claim_check"]["tokens"][1]["token"], "[redacted]");
        assert_eq!(v["claim_check"]["tokens"][1]["tenants"][0], "acme");
        assert_eq!(
            v["dispatch"]["tenants"]["overrides"]["acme"]["max_inflight"],
            9
        );
        assert_eq!(v["rate_limits"]["tenants"]["beta"]["burst"], 2);
    }

    #[test]
    fn queue_sink_credentials_are_redacted() {
        let mut c = Config::default();
        let mut k = KafkaSinkConfig::new(
            vec!["kuser:kpw1@127.0.0.1:9092".into(), "h2:9092".into()],
            "hooks",
        );
        k.sasl = Some(KafkaSasl {
            mechanism: KafkaSaslMechanism::Plain,
            username: "sasl-user-x".into(),
            password: "sasl-pass-x".into(),
            token: None,
            token_file: None,
        });
        let r = RabbitmqSinkConfig::new("amqp://ruser:rabbit-pw@127.0.0.1:5672/%2f", "ex");
        let mut n = NatsSinkConfig::new(vec!["nats://nuser:nats-pw@127.0.0.1:4222".into()], "a.b");
        n.auth = Some(NatsAuth {
            nkey_seed: Some("SUACSEED".into()),
            jwt: Some("eyJ-jwt".into()),
            ..Default::default()
        });
        let d = RedisSinkConfig::new("redis://:redis-pw@127.0.0.1:6379/0", "ch");
        let mut q =
            SqsSinkConfig::new("https://sqs.us-east-1.amazonaws.com/1/q?X-Amz-Security-Token=qtok");
        q.endpoint = Some("http://eu:endpoint-pw@127.0.0.1:5000".into());
        q.access_key_id = Some("AKIAEXAMPLE".into());
        q.secret_access_key = Some("aws-secret-key".into());
        q.session_token = Some("aws-session-tok".into());
        let mut g = GooglePubsubSinkConfig::new("proj", "topic1");
        g.auth = PubsubAuth::Token;
        g.token = Some("ya29.gcp-token".into());
        c.sources.insert(
            "q".into(),
            SourceConfig::with_sinks(vec![
                SinkConfig::Kafka(k),
                SinkConfig::Rabbitmq(r),
                SinkConfig::Nats(n),
                SinkConfig::Redis(d),
                SinkConfig::Sqs(q),
                SinkConfig::GooglePubsub(g),
            ]),
        );
        let v = redacted_json(&c);
        let text = v.to_string();
        for needle in [
            "kpw1",
            "kuser",
            "sasl-user-x",
            "sasl-pass-x",
            "rabbit-pw",
            "ruser",
            "nats-pw",
            "nuser",
            "SUACSEED",
            "eyJ-jwt",
            "redis-pw",
            "qtok",
            "endpoint-pw",
            "AKIAEXAMPLE",
            "aws-secret-key",
            "aws-session-tok",
            "ya29.gcp-token",
        ] {
            assert!(!text.contains(needle), "{needle} leaked: {text}");
        }
        let sinks = &v["sources"]["q"]["sinks"];
        assert_eq!(sinks[0]["brokers"][0], "127.0.0.1:9092");
        assert_eq!(sinks[0]["topic"], "hooks");
        assert_eq!(sinks[0]["sasl"]["mechanism"], "plain");
        assert_eq!(sinks[1]["url"], "amqp://127.0.0.1:5672/[redacted]");
        assert_eq!(sinks[3]["url"], "redis://127.0.0.1:6379/[redacted]");
        assert_eq!(
            sinks[4]["queue_url"],
            "https://sqs.us-east-1.amazonaws.com/[redacted]"
        );
        assert_eq!(sinks[4]["endpoint"], "http://127.0.0.1:5000/");
        assert_eq!(sinks[1]["exchange"], "ex");
        assert_eq!(sinks[2]["servers"][0], "nats://127.0.0.1:4222");
        assert_eq!(sinks[3]["channel"], "ch");
        assert_eq!(sinks[4]["batch_max_entries"], 10);
        assert_eq!(sinks[5]["auth"], "token");
        assert_eq!(sinks[5]["token"], "[redacted]");
    }

    #[test]
    fn sink_url_paths_are_redacted_and_origins_shown() {
        let mut c = Config::default();
        let mut slack =
            HttpSinkConfig::new("https://hooks.slack.com/services/T000/B000/XXXXslacktoken");
        slack.allow_unsigned = true;
        let bare = HttpSinkConfig::new("http://[::1]:8080/");
        let frag = HttpSinkConfig::new("https://r.example/#frag-token");
        let mut g = GooglePubsubSinkConfig::new("proj", "topic1");
        g.endpoint = Some("https://pubsub.example:8443/v1/ep-token".into());
        c.sources.insert(
            "s".into(),
            SourceConfig::with_sinks(vec![
                SinkConfig::Http(slack),
                SinkConfig::Http(bare),
                SinkConfig::Http(frag),
                SinkConfig::GooglePubsub(g),
                SinkConfig::Http(HttpSinkConfig::new("not a url/with-token")),
            ]),
        );
        // Not a sink: the archive's S3 endpoint keeps its path.
        c.storage = Some(
            serde_yaml_ng::from_str(
                "type: s3\ns3: {bucket: b, endpoint: \"http://minio:9000/base\"}",
            )
            .expect("storage parses"),
        );
        let v = redacted_json(&c);
        let text = v.to_string();
        for needle in ["slacktoken", "T000", "frag-token", "ep-token", "with-token"] {
            assert!(!text.contains(needle), "{needle} leaked: {text}");
        }
        let sinks = &v["sources"]["s"]["sinks"];
        assert_eq!(sinks[0]["url"], "https://hooks.slack.com/[redacted]");
        assert_eq!(sinks[1]["url"], "http://[::1]:8080/");
        assert_eq!(sinks[2]["url"], "https://r.example/[redacted]");
        assert_eq!(
            sinks[3]["endpoint"],
            "https://pubsub.example:8443/[redacted]"
        );
        assert_eq!(sinks[4]["url"], "[redacted]");
        assert_eq!(v["storage"]["s3"]["endpoint"], "http://minio:9000/base");
    }

    #[test]
    fn tls_key_material_is_redacted_and_paths_are_shown() {
        let mut c = Config::default();
        let mut n = NatsSinkConfig::new(vec!["tls://127.0.0.1:4222".into()], "a.b");
        n.tls = NatsTls::Settings(SinkTls {
            ca_file: Some("/etc/ankusa/ca.pem".into()),
            cert_pem: Some("-----BEGIN CERTIFICATE-----cert-text".into()),
            key_pem: Some("-----BEGIN PRIVATE KEY-----key-text".into()),
            server_name: Some("nats.internal".into()),
            ..Default::default()
        });
        n.auth = Some(NatsAuth {
            credentials_file: Some("/etc/ankusa/u.creds".into()),
            ..Default::default()
        });
        c.sources.insert(
            "q".into(),
            SourceConfig::with_sinks(vec![SinkConfig::Nats(n)]),
        );
        let v = redacted_json(&c);
        let text = v.to_string();
        assert!(
            !text.contains("key-text") && !text.contains("cert-text"),
            "{text}"
        );
        let tls = &v["sources"]["q"]["sinks"][0]["tls"];
        assert_eq!(tls["key_pem"], "[redacted]");
        assert_eq!(tls["ca_file"], "/etc/ankusa/ca.pem");
        assert_eq!(tls["server_name"], "nats.internal");
        assert_eq!(
            v["sources"]["q"]["sinks"][0]["auth"]["credentials_file"],
            "/etc/ankusa/u.creds"
        );
    }

    #[test]
    fn durability_sections_are_shown_and_their_credentials_redacted() {
        let y = r#"
wal: {type: dual}
intake:
  kafka:
    brokers: ["kafka:9092"]
    topic: ankusa-intake
    security_protocol: sasl_plaintext
    sasl: {mechanism: scram_sha_512, username: gw, password: intake-password}
backup:
  enabled: true
  interval_ms: 30000
  keep: 5
  store:
    type: s3
    s3: {bucket: backups, access_key_id: AKIAEXAMPLE, secret_access_key: backup-secret}
"#;
        let c: Config = serde_yaml_ng::from_str(y).expect("parses");
        let v = redacted_json(&c);
        let text = v.to_string();
        assert!(
            !text.contains("intake-password") && !text.contains("backup-secret"),
            "{text}"
        );
        assert_eq!(v["wal"]["type"], "dual");
        assert_eq!(v["intake"]["kafka"]["topic"], "ankusa-intake");
        assert_eq!(v["intake"]["publish_timeout_ms"], 5000);
        assert_eq!(v["backup"]["keep"], 5);
        assert_eq!(v["backup"]["store"]["s3"]["bucket"], "backups");
        assert_eq!(
            v["backup"]["store"]["s3"]["secret_access_key"],
            "[redacted]"
        );
    }

    #[test]
    fn gcs_and_azure_credentials_are_redacted() {
        let y = r#"
storage:
  type: gcs
  gcs: {bucket: archive, endpoint: "http://u:gcs-pw@127.0.0.1:9023/", credentials: '{"type": "service_account", "client_email": "a@b", "private_key": "gcs-private-key"}'}
backup:
  enabled: true
  store:
    type: azure
    azure: {account: acct, container: backups, sas_token: "sv=2021&sig=azure-sas-sig", account_key: YXp1cmUta2V5}
"#;
        let c: Config = serde_yaml_ng::from_str(y).expect("parses");
        let v = redacted_json(&c);
        let text = v.to_string();
        for secret in ["gcs-pw", "gcs-private-key", "azure-sas-sig", "YXp1cmUta2V5"] {
            assert!(!text.contains(secret), "{secret}: {text}");
        }
        assert_eq!(v["storage"]["gcs"]["bucket"], "archive");
        assert_eq!(v["storage"]["gcs"]["anonymous"], false);
        assert_eq!(v["storage"]["gcs"]["endpoint"], "http://127.0.0.1:9023/");
        assert_eq!(v["storage"]["gcs"]["credentials"], "[redacted]");
        let az = &v["backup"]["store"]["azure"];
        assert_eq!(
            (az["account"].as_str(), az["container"].as_str()),
            (Some("acct"), Some("backups"))
        );
        assert_eq!(az["sas_token"], "[redacted]");
        assert_eq!(az["account_key"], "[redacted]");
        assert_eq!(az["timeout_ms"], 30000);
    }
}
