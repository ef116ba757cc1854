//! A hook's ordering lanes: per sink entry of its source, the lane key of an ordered entry
//! (its `ordering_key` header or JSON path, `dedupe::ordering_key`), `""` for the keyless lane
//! of an entry whose key the hook does not carry (counted in
//! `ankusa_dispatch_lane_key_missing_total`). Imports `live` and `metrics` only.

use http::HeaderMap;

use super::dedupe;
use crate::live::LiveSource;
use crate::metrics::Metrics;

/// Per sink index, the ordering lane key of each ordered sink entry (`""`: the keyless lane);
/// empty when the source has no ordered sink.
pub fn lanes(
    metrics: &Metrics,
    source: &LiveSource,
    headers: &HeaderMap,
    body: &[u8],
) -> Vec<Option<String>> {
    if !source.cfg.sinks.iter().any(|s| s.ordering().0) {
        return Vec::new();
    }
    source
        .cfg
        .sinks
        .iter()
        .map(|s| match s.ordering() {
            (false, _) => None,
            (true, None) => Some(String::new()),
            (true, Some(k)) => Some(dedupe::ordering_key(k, headers, body).unwrap_or_else(|| {
                metrics
                    .dispatch
                    .lane_key_missing
                    .with_label_values(&[s.type_name()])
                    .inc();
                String::new()
            })),
        })
        .collect()
}
