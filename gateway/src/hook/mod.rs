//! The hook as group commit takes it. Three paths commit hooks: the edge (a request), a
//! `quarantine` replay (a pen entry that verifies now) and an `archive` replay (an archived
//! hook sent again). Each builds its `IngestRecord` with `record`, so what a committed hook
//! carries — its dedupe key and entry (`dedupe`), its ordering lanes (`lanes`), its sinks and
//! which of them its filters turn away (`route`) — is decided in one place (`record_routed`
//! lets an archive replay with `ignore_filters` skip the filters). `envelope` is a request's
//! hook before any of that: the headers kept
//! (`headers`: never credentials, framing or hop-by-hop ones), content type and trace context.
//!
//! Below the edge and `replay`, above the store's record types: imports `live` (the source's
//! config) and `metrics` only. `dispatch::forward` reads `headers::NOT_STORED` (what was not
//! stored is never forwarded).

pub mod dedupe;
pub mod headers;
mod lanes;
pub mod route;

use bytes::Bytes;
use http::HeaderMap;

use ankusa_core::{Envelope, Verification};
use ankusa_store::{Dedupe, IngestRecord};

use crate::live::LiveSource;
use crate::metrics::Metrics;

pub use headers::NOT_STORED;
pub use lanes::lanes;

/// Where a hook's dedupe key comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keyed {
    /// The source's `dedupe:` key, read from the hook's headers or body now (the edge, a
    /// quarantine release). `url_tenant`: the tenant came from the URL, so a source shared by
    /// URL tenants that does not trust it keeps one dedupe namespace for all of them.
    BySource { url_tenant: bool },
    /// No dedupe entry; the envelope keeps the key it carries. A hook accepted despite a failed
    /// check has none (a forged copy must not pre-empt the real event at the consumer); an
    /// archived hook sent again keeps its own (its consumers' idempotency key).
    Never,
}

/// The hook a request is, received `now`: a new id, the headers kept, no dedupe key yet.
pub fn envelope(
    tenant: String,
    source_id: String,
    headers: &HeaderMap,
    body: Bytes,
    now: u64,
    verification: Verification,
) -> Envelope {
    Envelope {
        id: uuid::Uuid::now_v7(),
        seq: 0,
        received_at: now,
        tenant,
        source_id,
        headers: headers::stored(headers),
        content_type: headers::content_type(headers),
        verification,
        dedupe_key: None,
        traceparent: headers::traceparent(headers),
        tracestate: headers::tracestate(headers),
        body,
    }
}

/// The record group commit takes for `envelope`, a hook of `source` with these headers: the
/// dedupe key as `keyed` says, the ordering lanes and the sinks of the source as configured
/// now. The store assigns the sequence number.
pub fn record(
    source: &LiveSource,
    envelope: Envelope,
    headers: &HeaderMap,
    keyed: Keyed,
    metrics: &Metrics,
) -> IngestRecord {
    record_routed(source, envelope, headers, keyed, metrics, Filters::Apply)
}

/// Whether a commit evaluates the sinks' filters: an archive replay with `ignore_filters`
/// sends to every sink it names and counts nothing in the filter metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filters {
    Apply,
    Ignore,
}

/// `record`, with the filters applied or not.
pub fn record_routed(
    source: &LiveSource,
    mut envelope: Envelope,
    headers: &HeaderMap,
    keyed: Keyed,
    metrics: &Metrics,
    filters: Filters,
) -> IngestRecord {
    let dedupe = match (keyed, &source.cfg.dedupe) {
        (Keyed::BySource { url_tenant }, cfg) => {
            let found = cfg.as_ref().and_then(|d| {
                dedupe::extract(d, headers, &envelope.body).map(|key| Dedupe {
                    key,
                    ttl_ms: d.ttl_seconds.saturating_mul(1000),
                    source_wide: url_tenant && source.shared() && !source.cfg.trust_url_tenant,
                })
            });
            envelope.dedupe_key = found.as_ref().map(|d| d.key.clone());
            found
        }
        (Keyed::Never, _) => None,
    };
    envelope.seq = 0;
    let skip_sinks = match filters {
        Filters::Apply => route::skipped_sinks(source, &envelope, metrics),
        Filters::Ignore => Vec::new(),
    };
    IngestRecord {
        lanes: lanes(metrics, source, headers, &envelope.body),
        dedupe,
        envelope,
        sinks: source.sink_types.clone(),
        skip_sinks,
    }
}
