//! What counts as a credential in a Sink's options: keys that must come from a Secret
//! (`password`, `*_token`, ...; the list is the CRD's, `ankusa_crds::sink::keys`), URLs
//! carrying a password, credential headers. A credential written inline in a manifest is
//! refused, naming the option and never its value.
//!
//! May import: `ankusa_crds` only (a leaf: `render::sink` and `render::files` use it).

pub use ankusa_crds::sink::keys::{is_credential_key, secret_ref_paths};

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
