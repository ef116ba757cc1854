//! Which provider headers reach sinks: the source's `forward_headers` list (or all), minus
//! authentication, framing, hop-by-hop and `x-ankusa-*` names, within the per-source caps on
//! count and bytes. A header past a cap is dropped whole, in arrival order.

use ankusa_config::SourceConfig;

use crate::hook::NOT_STORED;
use crate::metrics::Metrics;

/// Never forwarded, whatever the source lists, besides what the edge did not store: headers
/// that describe this hop (`host`, `set-cookie`) and the trace context, which sinks send as
/// the gateway's own.
const NOT_FORWARDED: &[&str] = &["set-cookie", "host", "traceparent", "tracestate"];

pub fn never_forwarded(name: &str) -> bool {
    NOT_STORED
        .iter()
        .chain(NOT_FORWARDED)
        .any(|n| n.eq_ignore_ascii_case(name))
        // Bytes, not a str slice: a name read back from the store may hold a multi-byte
        // character across byte 9, where slicing the str would panic.
        || name
            .as_bytes()
            .get(..9)
            .is_some_and(|p| p.eq_ignore_ascii_case(b"x-ankusa-"))
}

/// The headers to forward for one hook.
pub fn forwarded(
    headers: &[(String, String)],
    source: &SourceConfig,
    metrics: Option<&Metrics>,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut bytes = 0usize;
    for (name, value) in headers {
        if never_forwarded(name) {
            continue;
        }
        if let Some(list) = &source.forward_headers
            && !list.iter().any(|h| h.eq_ignore_ascii_case(name))
        {
            continue;
        }
        if out.len() >= source.max_headers as usize {
            if let Some(m) = metrics {
                m.sinks.headers_dropped.with_label_values(&["count"]).inc();
            }
            continue;
        }
        let size = name.len() + value.len();
        if bytes + size > source.forward_headers_max_bytes as usize {
            if let Some(m) = metrics {
                m.sinks.headers_dropped.with_label_values(&["bytes"]).inc();
            }
            continue;
        }
        bytes += size;
        out.push((name.to_ascii_lowercase(), value.clone()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ankusa_config::{LogSinkConfig, SinkConfig};

    fn src() -> SourceConfig {
        SourceConfig::with_sinks(vec![SinkConfig::Log(LogSinkConfig::default())])
    }

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn names_from_a_damaged_row_never_panic() {
        assert!(!never_forwarded("x-ankusaé"));
        assert!(!never_forwarded("ééééé"));
        assert!(never_forwarded("X-Ankusa-Idé"));
    }

    #[test]
    fn drops_auth_framing_and_ankusa_headers() {
        let got = forwarded(
            &h(&[
                ("authorization", "x"),
                ("x-ankusa-id", "y"),
                ("x-github-event", "push"),
                ("content-type", "a/b"),
            ]),
            &src(),
            None,
        );
        assert_eq!(
            got,
            h(&[("x-github-event", "push"), ("content-type", "a/b")])
        );
    }

    #[test]
    fn list_narrows_and_caps_drop_whole_headers_in_order() {
        let mut s = src();
        s.forward_headers = Some(vec!["A".into(), "b".into(), "c".into()]);
        s.max_headers = 2;
        let got = forwarded(
            &h(&[("a", "1"), ("z", "9"), ("b", "2"), ("c", "3")]),
            &s,
            None,
        );
        assert_eq!(got, h(&[("a", "1"), ("b", "2")]));
        let mut s = src();
        s.forward_headers_max_bytes = 5;
        let got = forwarded(&h(&[("aa", "111"), ("b", "2"), ("c", "")]), &s, None);
        assert_eq!(
            got,
            h(&[("aa", "111")]),
            "b=2 would make 7 bytes; c fits only if counted alone"
        );
    }
}
