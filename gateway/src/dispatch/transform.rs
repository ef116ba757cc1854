//! A sink entry's `transform`, run for each delivery attempt (so a replay sends what the
//! transform configured now makes of the stored hook, which never changes): `transform.body`
//! becomes the body the sink sends, as JSON, and `transform.headers` is added to the headers
//! it forwards. The HTTP sink signs what it sends, so the signature covers the transformed
//! body; a queue message carries it with the received body's digest in `original_sha256`.
//!
//! A transform is a pure function of the hook: one that fails fails every time, so the
//! delivery is a permanent failure (dead-lettered; replay it once the transform is fixed).

use std::sync::Arc;

use ankusa_config::CompiledRouting;
use ankusa_core::Envelope;
use ankusa_filter::DEFAULT_MAX_COST;
use sha2::{Digest, Sha256};

use super::forward;
use crate::hook::route::{activation, json_body};

/// What one attempt sends instead of the stored hook.
pub struct Transformed {
    pub hook: Arc<Envelope>,
    /// Added to (and replacing same-named) forwarded headers.
    pub headers: Vec<(String, String)>,
    /// Set when the body was replaced.
    pub original_sha256: Option<String>,
}

/// Applies `route`'s transform to `hook`; `Err` is the error class. A header name the gateway
/// never forwards (its own `x-ankusa-*`, framing, credentials) is refused, not dropped.
pub fn apply(route: &CompiledRouting, hook: &Arc<Envelope>) -> Result<Transformed, &'static str> {
    let reads_body = [&route.body, &route.headers]
        .into_iter()
        .flatten()
        .any(ankusa_filter::Program::reads_body);
    let body = if reads_body { json_body(hook) } else { None };
    let act = activation(hook, body.as_ref());
    let headers = match &route.headers {
        Some(p) => p
            .eval_headers(&act, DEFAULT_MAX_COST)
            .map_err(|e| e.class())?,
        None => Vec::new(),
    };
    if headers.iter().any(|(n, _)| forward::never_forwarded(n)) {
        return Err("reserved_header");
    }
    let Some(p) = &route.body else {
        return Ok(Transformed {
            hook: hook.clone(),
            headers,
            original_sha256: None,
        });
    };
    let value = p.eval_json(&act, DEFAULT_MAX_COST).map_err(|e| e.class())?;
    let bytes = serde_json::to_vec(&value).map_err(|_| "invalid_output")?;
    let mut sent = Envelope::clone(hook);
    sent.body = bytes.into();
    sent.content_type = Some("application/json".into());
    Ok(Transformed {
        hook: Arc::new(sent),
        headers,
        original_sha256: Some(hex::encode(Sha256::digest(&hook.body))),
    })
}

/// `forwarded` with `extra` added, an extra header replacing a forwarded one of its name.
pub fn merge_headers(
    mut forwarded: Vec<(String, String)>,
    extra: Vec<(String, String)>,
) -> Vec<(String, String)> {
    if extra.is_empty() {
        return forwarded;
    }
    forwarded.retain(|(n, _)| !extra.iter().any(|(e, _)| e == n));
    forwarded.extend(extra);
    forwarded
}

#[cfg(test)]
mod tests {
    use super::*;
    use ankusa_config::{OnFilterError, SinkRouting, Transform};

    fn route(body: Option<&str>, headers: Option<&str>) -> CompiledRouting {
        let t = Transform {
            body: body.map(String::from),
            headers: headers.map(String::from),
        };
        SinkRouting {
            filter: None,
            on_filter_error: OnFilterError::Deliver,
            transform: Some(&t),
        }
        .compile("sinks[0]")
        .expect("compiles")
    }

    fn hook(body: &str) -> Arc<Envelope> {
        let mut e = Envelope::new("acme", "stripe", bytes::Bytes::from(body.to_string()));
        e.content_type = Some("text/plain".into());
        Arc::new(e)
    }

    #[test]
    fn the_body_is_replaced_and_the_stored_hook_kept() {
        let h = hook(r#"{"type":"invoice.paid","data":{"object":{"id":"in_1","amount":5}}}"#);
        let t = apply(&route(Some("body.data.object"), None), &h).expect("applies");
        assert_eq!(&t.hook.body[..], br#"{"amount":5,"id":"in_1"}"#);
        assert_eq!(t.hook.content_type.as_deref(), Some("application/json"));
        assert_eq!(t.hook.id, h.id);
        assert_eq!(
            t.original_sha256.as_deref(),
            Some(hex::encode(Sha256::digest(&h.body)).as_str())
        );
        assert_eq!(h.content_type.as_deref(), Some("text/plain"));
    }

    #[test]
    fn headers_are_added_and_replace_forwarded_ones() {
        let h = hook(r#"{"type":"invoice.paid"}"#);
        let t = apply(&route(None, Some(r#"{"x-event-type": body.type}"#)), &h).expect("applies");
        assert!(
            Arc::ptr_eq(&t.hook, &h),
            "no body transform: the hook itself"
        );
        assert_eq!(t.original_sha256, None);
        let merged = merge_headers(
            vec![
                ("x-event-type".into(), "old".into()),
                ("x-other".into(), "1".into()),
            ],
            t.headers,
        );
        assert_eq!(
            merged,
            vec![
                ("x-other".to_string(), "1".to_string()),
                ("x-event-type".to_string(), "invoice.paid".to_string())
            ]
        );
    }

    #[test]
    fn failures_are_error_classes() {
        let h = hook(r#"{"type":"invoice.paid"}"#);
        assert_eq!(
            apply(&route(Some("body.data.object"), None), &h).err(),
            Some("no_such_key")
        );
        assert_eq!(
            apply(&route(None, Some(r#"{"x-ankusa-id": "forged"}"#)), &h).err(),
            Some("reserved_header")
        );
    }
}
