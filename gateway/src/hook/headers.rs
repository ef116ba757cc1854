//! What of a request's headers a hook keeps: every header but credentials, framing and
//! hop-by-hop ones (`NOT_STORED`), in arrival order, and the trace context within its limits.
//! Stored headers are read back as a map (`map`) when a stored hook is judged or keyed again
//! (a quarantine release, an archive replay). A leaf: imports nothing of the crate.

use http::{HeaderMap, HeaderName, HeaderValue, header};

use ankusa_format::request::valid_traceparent;

/// Headers not kept in the stored hook: credentials, framing and hop-by-hop.
pub const NOT_STORED: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "content-length",
    "expect",
];

/// The headers a hook keeps (names lowercase, values that are text).
pub fn stored(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(n, _)| !NOT_STORED.contains(&n.as_str()))
        .filter_map(|(n, v)| {
            v.to_str()
                .ok()
                .map(|v| (n.as_str().to_string(), v.to_string()))
        })
        .collect()
}

/// The stored headers as a map (a header the map refuses could not have been sent).
pub fn map(stored: &[(String, String)]) -> HeaderMap {
    let mut map = HeaderMap::with_capacity(stored.len());
    for (n, v) in stored {
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(n.as_bytes()),
            HeaderValue::from_str(v),
        ) {
            map.append(n, v);
        }
    }
    map
}

pub fn content_type(headers: &HeaderMap) -> Option<String> {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(String::from)
}

/// `traceparent`, when it is one.
pub fn traceparent(headers: &HeaderMap) -> Option<String> {
    trace(headers, "traceparent").filter(|v| valid_traceparent(v))
}

/// `tracestate`, up to 512 bytes.
pub fn tracestate(headers: &HeaderMap) -> Option<String> {
    trace(headers, "tracestate").filter(|v| v.len() <= 512)
}

fn trace(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(|s| s.trim().to_string())
}
