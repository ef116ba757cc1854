//! What counts as a credential in a Sink's `options`: keys that must come from a Secret
//! (`password`, `*_token`, ...), URLs carrying a password, credential headers; and, per sink
//! type, the option paths a Secret may fill (`secretRefs` keys). A credential written inline
//! in a manifest is refused, naming the option and never its value.
//!
//! May import: `ankusa_crds` only (a leaf: `render::sink` and `render::files` use it).

use ankusa_crds::sink::SinkType;

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
