//! Which Sink option keys a manifest may not hold inline: credentials (they come from a Secret
//! through `secretRefs`) and paths (a manifest must never make a gateway pod read a file).
//! Also, per sink type, the option paths a Secret may fill. The CRD schema leaves these keys
//! out of the typed option fields and the operator refuses them in the deprecated `options`,
//! from this one list.
//!
//! A leaf: imports `SinkType` only.

use super::SinkType;

/// Option names that must come from a Secret (`secretRefs`), never from a manifest.
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

/// Whether an option name is a credential (`password`, `*_token`, `*_secret`, ...).
pub fn is_credential_key(k: &str) -> bool {
    let k = k.to_ascii_lowercase();
    CREDENTIAL_KEYS.contains(&k.as_str())
        || ["_password", "_secret", "_token"]
            .iter()
            .any(|s| k.ends_with(s))
}

/// Whether an option name names a file or a directory.
pub fn is_path_key(k: &str) -> bool {
    let k = k.to_ascii_lowercase();
    k.ends_with("file") || k.ends_with("_path") || k.ends_with("_dir")
}

/// The option paths a Secret may fill, per sink type: the credentials and the addresses that
/// carry them, nothing else. A Secret placed anywhere else (`timeout_ms`, `topic`) would reach
/// a status or an Event through the error that follows, or be sent somewhere as plain data.
pub fn secret_ref_paths(t: SinkType) -> &'static [&'static str] {
    const TLS: [&str; 3] = ["tls.ca_pem", "tls.cert_pem", "tls.key_pem"];
    match t {
        // A receiver URL is often the credential itself (a Slack incoming-webhook URL).
        SinkType::Http => &["secret", "url"],
        SinkType::Log => &[],
        SinkType::Kafka => &[
            "sasl.username",
            "sasl.password",
            "sasl.token",
            TLS[0],
            TLS[1],
            TLS[2],
        ],
        SinkType::Rabbitmq | SinkType::Redis => &["url", TLS[0], TLS[1], TLS[2]],
        SinkType::Nats => &[
            "auth.username",
            "auth.password",
            "auth.token",
            "auth.nkey_seed",
            "auth.jwt",
            TLS[0],
            TLS[1],
            TLS[2],
        ],
        SinkType::Sqs => &[
            "queue_url",
            "endpoint",
            "access_key_id",
            "secret_access_key",
            "session_token",
            TLS[0],
            TLS[1],
            TLS[2],
        ],
        SinkType::GooglePubsub => &["token", "endpoint", TLS[0], TLS[1], TLS[2]],
    }
}
