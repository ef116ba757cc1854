//! Two rules of the renderer about what a manifest may make a gateway pod do on its behalf.
//!
//! **No file from a Kubernetes object.** An option whose value is a path (`sasl.token_file`,
//! `tls.key_file`, `auth.credentials_file`, ... — every option the gateway types
//! [`ankusa_config::FilePath`]) makes the gateway read that file and send its content to the
//! destination: a Kafka Sink with `token_file: /etc/ankusa/<gw>-0.yaml` would ship the pod's
//! whole config, the admin token and every secret in it, to the broker the Sink names. Key
//! material reaches a pod only through `secretRefs` (`*_pem`, `token`), which the operator
//! writes into the config itself. The allow list of path-valued options a manifest may set is
//! empty, and it is enforced twice:
//! - on the typed config the renderer built (`refuse_file_options`): [`ankusa_config::file_options`]
//!   lists every `FilePath` set, so an option the gateway adds later is refused without a change
//!   here;
//! - on the raw options (`refuse_path_keys`): a key named like a path (`*file`, `*_path`,
//!   `*_dir`, at any depth; header names aside) is refused with the same message, even one this
//!   gateway version does not know yet.
//!
//! **No ambient cloud identity unless the Gateway allows it.** An `sqs` Sink without static
//! credentials, or a `google_pubsub` Sink with `auth: metadata` (its default), acts with
//! whatever identity the pods' environment, web identity or node carries, which the Sink's
//! author was never given. Such a Sink is refused unless the Gateway sets
//! `spec.settings.egress.allowAmbientIdentity: true`.
//!
//! Errors name the option and never a value.
//!
//! May import: `render::{credentials, rendered}` (leaves), `ankusa_config`, `ankusa_crds`.

use ankusa_config::{Config, SinkConfig, SourceConfig, file_options};
use ankusa_crds::Gateway;
use ankusa_crds::sink::SinkType;

use crate::render::credentials::secret_ref_paths;
use crate::render::rendered::Outcome;

pub use ankusa_crds::sink::keys::is_path_key;

/// Where the key material of a file option goes instead: the `secretRefs` key of the same
/// option in PEM or token form when the sink type takes one.
fn hint(option: &str, t: Option<SinkType>) -> String {
    let generic = "secretRefs (*_pem / token)".to_string();
    let Some(t) = t else {
        return generic;
    };
    let (prefix, leaf) = option.rsplit_once('.').unwrap_or(("", option));
    let stem = leaf
        .strip_suffix("_file")
        .or_else(|| leaf.strip_suffix("file"))
        .unwrap_or(leaf);
    let at = |k: String| {
        if prefix.is_empty() {
            k
        } else {
            format!("{prefix}.{k}")
        }
    };
    [at(format!("{stem}_pem")), at(stem.to_string())]
        .into_iter()
        .find(|k| secret_ref_paths(t).contains(&k.as_str()))
        .map(|k| format!("secretRefs[\"{k}\"]"))
        .unwrap_or(generic)
}

fn refusal(at: &str, who: &str, t: Option<SinkType>, option: &str) -> String {
    format!(
        "{at}: a file path is not accepted from {who}: give the key material in {}",
        hint(option, t)
    )
}

/// Refuses raw `options` holding a key named like a path, at any depth (the names of an http
/// sink's `headers` are header names, not options). `at` prefixes the field (`options`).
pub fn refuse_path_keys(
    options: &serde_json::Map<String, serde_json::Value>,
    t: Option<SinkType>,
    who: &str,
) -> Result<(), String> {
    fn walk(
        path: &str,
        m: &serde_json::Map<String, serde_json::Value>,
        t: Option<SinkType>,
        who: &str,
    ) -> Result<(), String> {
        for (k, v) in m {
            let rel = if path.is_empty() {
                k.clone()
            } else {
                format!("{path}.{k}")
            };
            if is_path_key(k) {
                return Err(refusal(&format!("options.{rel}"), who, t, &rel));
            }
            if let serde_json::Value::Object(inner) = v
                && !(path.is_empty() && k == "headers")
            {
                walk(&rel, inner, t, who)?;
            }
        }
        Ok(())
    }
    walk("", options, t, who)
}

/// Refuses a rendered value in which any file option is set; `at` prefixes the option's path
/// (`options` for a sink's own fields).
pub fn refuse_file_options<T: serde::Serialize + ?Sized>(
    value: &T,
    at: &str,
    t: Option<SinkType>,
    who: &str,
) -> Result<(), String> {
    match file_options(value).into_iter().next() {
        None => Ok(()),
        Some(option) => Err(refusal(&format!("{at}.{option}"), who, t, &option)),
    }
}

/// Whether the Gateway lets its Sinks use the pods' ambient cloud identity.
pub fn ambient_identity_allowed(gw: &Gateway) -> bool {
    gw.spec
        .settings
        .egress
        .as_ref()
        .is_some_and(|e| e.allow_ambient_identity)
}

const OPT_IN: &str =
    "or let the Gateway allow it (spec.settings.egress.allowAmbientIdentity: true)";

/// Refuses a sink that would act with the pods' ambient cloud identity, unless `allowed`.
pub fn refuse_ambient_identity(sink: &SinkConfig, allowed: bool) -> Result<(), String> {
    if allowed {
        return Ok(());
    }
    match sink {
        SinkConfig::Sqs(c) if c.access_key_id.is_none() => Err(format!(
            "options.access_key_id: not set, so this sqs sink would act with the gateway pods' ambient cloud \
             identity (their environment, web identity or instance metadata): give access_key_id and \
             secret_access_key in secretRefs, {OPT_IN}"
        )),
        SinkConfig::GooglePubsub(c) if c.auth == ankusa_config::PubsubAuth::Metadata => {
            Err(format!(
                "options.auth: metadata (the default) makes this google_pubsub sink act with the gateway pods' \
             ambient cloud identity (the node's metadata server): use auth: token with secretRefs[\"token\"], \
             {OPT_IN}"
            ))
        }
        _ => Ok(()),
    }
}

/// A Source's config as the pods would run it, checked against both rules: a version kept
/// from an earlier render must pass them too before it is kept.
pub fn check_source(sc: &SourceConfig, ambient_allowed: bool) -> Result<(), String> {
    for (i, sink) in sc.sinks.iter().enumerate() {
        refuse_file_options(sink, &format!("sinks[{i}].options"), None, "a Sink")?;
        refuse_ambient_identity(sink, ambient_allowed).map_err(|e| format!("sinks[{i}]: {e}"))?;
    }
    refuse_file_options(sc, "source", None, "a Source")
}

/// What a Source that no longer renders keeps: its previous version, if that names no file
/// either (one rendered before this rule, or read back from a config Secret, may). Dropping a
/// Source dead-letters its queued deliveries, a price worth a pod's files only: a previous
/// version using the pods' ambient identity is kept like any other, while the Source reports
/// why it no longer renders.
pub fn fallback(prev: Option<&SourceConfig>, error: String) -> (Option<&SourceConfig>, Outcome) {
    match prev.map(|p| check_source(p, true).map(|()| p)) {
        Some(Ok(p)) => (Some(p), Outcome::Previous(error)),
        Some(Err(why)) => (
            None,
            Outcome::Missing(format!(
                "{error}; its previous version is refused too: {why}"
            )),
        ),
        None => (None, Outcome::Missing(error)),
    }
}

/// The whole rendered config names no file option anywhere (the admin listener's certificate
/// files come from the pods' environment, `ANKUSA_ADMIN_TLS_*`, and are not in the rendered
/// config).
pub fn refuse_any_file_option(c: &Config) -> Result<(), String> {
    match file_options(c).into_iter().next() {
        None => Ok(()),
        Some(option) => Err(format!(
            "{option}: a file path is not accepted from a Kubernetes object"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn path_like_keys_are_refused_at_any_depth_but_header_names_are_not_options() {
        let opts = |v: serde_json::Value| v.as_object().unwrap().clone();
        let e = refuse_path_keys(
            &opts(json!({"sasl": {"mechanism": "oauthbearer", "token_file": "/etc/ankusa/gw-0.yaml"}})),
            Some(SinkType::Kafka),
            "a Sink",
        )
        .unwrap_err();
        assert_eq!(
            e,
            "options.sasl.token_file: a file path is not accepted from a Sink: give the key material in secretRefs[\"sasl.token\"]"
        );
        assert!(!e.contains("/etc/ankusa"));
        let e = refuse_path_keys(
            &opts(json!({"tls": {"key_file": "/k"}})),
            Some(SinkType::Redis),
            "a Sink",
        )
        .unwrap_err();
        assert!(
            e.starts_with("options.tls.key_file:") && e.contains("secretRefs[\"tls.key_pem\"]"),
            "{e}"
        );
        for k in ["cacertfile", "some_future_path", "spool_dir", "CA_FILE"] {
            let e = refuse_path_keys(&opts(json!({ k: "x" })), Some(SinkType::Http), "a Sink")
                .unwrap_err();
            assert!(
                e.starts_with(&format!("options.{k}:")) && e.contains("(*_pem / token)"),
                "{e}"
            );
        }
        refuse_path_keys(
            &opts(json!({"url": "https://x", "headers": {"X-Profile": "a", "x-file": "b"}})),
            Some(SinkType::Http),
            "a Sink",
        )
        .unwrap();
        refuse_path_keys(
            &opts(json!({"force_path_style": true, "path": "/p"})),
            None,
            "a Sink",
        )
        .unwrap();
    }

    #[test]
    fn ambient_identity_is_refused_unless_allowed() {
        let sqs: SinkConfig = serde_json::from_value(json!({
            "type": "sqs", "queue_url": "https://sqs.us-east-1.amazonaws.com/1/q"}))
        .unwrap();
        let e = refuse_ambient_identity(&sqs, false).unwrap_err();
        assert!(
            e.starts_with("options.access_key_id:") && e.contains("allowAmbientIdentity"),
            "{e}"
        );
        refuse_ambient_identity(&sqs, true).unwrap();
        let pubsub: SinkConfig =
            serde_json::from_value(json!({"type": "google_pubsub", "project": "p", "topic": "t"}))
                .unwrap();
        let e = refuse_ambient_identity(&pubsub, false).unwrap_err();
        assert!(e.starts_with("options.auth:"), "{e}");
        let emulator: SinkConfig = serde_json::from_value(
            json!({"type": "google_pubsub", "project": "p", "topic": "t", "auth": "none"}),
        )
        .unwrap();
        refuse_ambient_identity(&emulator, false).unwrap();
    }
}
