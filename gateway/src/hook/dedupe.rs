//! The provider's event id, as the source's `dedupe:` says where to find it, and an ordered
//! sink's lane key (`ordering_key`), both normalised the same way. A leaf: imports nothing of
//! the crate.

use ankusa_config::{DedupeConfig, DedupePreset};
use sha2::{Digest, Sha256};

/// Keys longer than this are stored as `sha256:<hex>`.
const MAX_KEY: usize = 200;

/// The dedupe key of a request, if the source configures one and the request carries it.
pub fn extract(cfg: &DedupeConfig, headers: &http::HeaderMap, body: &[u8]) -> Option<String> {
    let raw = match (cfg.preset, &cfg.header, &cfg.json) {
        (Some(DedupePreset::Github), _, _) => header(headers, "x-github-delivery"),
        (Some(DedupePreset::StandardWebhooks), _, _) => header(headers, "webhook-id"),
        (Some(DedupePreset::Svix), _, _) => header(headers, "svix-id"),
        (Some(DedupePreset::Shopify), _, _) => header(headers, "x-shopify-webhook-id"),
        (Some(DedupePreset::Stripe), _, _) => json(body, "id"),
        (None, Some(h), _) => header(headers, h),
        (None, None, Some(path)) => json(body, path),
        (None, None, None) => None,
    }?;
    Some(normalise(raw))
}

/// The lane key of an ordered sink: its `ordering_key` header or JSON path (read from the
/// first 1 MiB of the body), normalised like dedupe keys. `None`: the hook has no key and
/// goes to the sink's keyless lane.
pub fn ordering_key(
    k: &ankusa_config::OrderingKey,
    headers: &http::HeaderMap,
    body: &[u8],
) -> Option<String> {
    let raw = match (&k.header, &k.json) {
        (Some(h), _) => header(headers, h),
        (None, Some(path)) => json(&body[..body.len().min(1 << 20)], path),
        (None, None) => None,
    }?;
    Some(normalise(raw))
}

fn header(headers: &http::HeaderMap, name: &str) -> Option<String> {
    let v = headers.get(name)?.to_str().ok()?.trim();
    (!v.is_empty()).then(|| v.to_string())
}

/// A string or integer at a dot path of a JSON body.
fn json(body: &[u8], path: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    let mut cur = &v;
    for part in path.split('.') {
        cur = cur.get(part)?;
    }
    match cur {
        serde_json::Value::String(s) if !s.is_empty() => Some(s.clone()),
        serde_json::Value::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        _ => None,
    }
}

fn normalise(k: String) -> String {
    if k.len() > MAX_KEY || k.bytes().any(|b| !(0x20..0x7f).contains(&b)) {
        format!("sha256:{}", hex::encode(Sha256::digest(k.as_bytes())))
    } else {
        k
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(preset: Option<DedupePreset>, header: Option<&str>, json: Option<&str>) -> DedupeConfig {
        DedupeConfig {
            preset,
            header: header.map(String::from),
            json: json.map(String::from),
            ttl_seconds: 10,
        }
    }

    #[test]
    fn presets_and_custom_keys() {
        let mut h = http::HeaderMap::new();
        h.insert("x-github-delivery", "72d3162e".parse().unwrap());
        h.insert("webhook-id", "msg_1".parse().unwrap());
        assert_eq!(
            extract(&cfg(Some(DedupePreset::Github), None, None), &h, b""),
            Some("72d3162e".into())
        );
        assert_eq!(
            extract(
                &cfg(Some(DedupePreset::StandardWebhooks), None, None),
                &h,
                b""
            ),
            Some("msg_1".into())
        );
        assert_eq!(
            extract(&cfg(Some(DedupePreset::Svix), None, None), &h, b""),
            None
        );
        let body = br#"{"id":"evt_1","data":{"object":{"n":42}}}"#;
        assert_eq!(
            extract(&cfg(Some(DedupePreset::Stripe), None, None), &h, body),
            Some("evt_1".into())
        );
        assert_eq!(
            extract(&cfg(None, None, Some("data.object.n")), &h, body),
            Some("42".into())
        );
        assert_eq!(
            extract(&cfg(None, None, Some("data.missing")), &h, body),
            None
        );
        assert_eq!(
            extract(&cfg(None, Some("Webhook-Id"), None), &h, b""),
            Some("msg_1".into())
        );
    }

    #[test]
    fn long_keys_are_hashed() {
        let body = format!(r#"{{"id":"{}"}}"#, "x".repeat(300));
        let k = extract(
            &cfg(Some(DedupePreset::Stripe), None, None),
            &http::HeaderMap::new(),
            body.as_bytes(),
        )
        .unwrap();
        assert!(k.starts_with("sha256:") && k.len() == 71);
    }
}
