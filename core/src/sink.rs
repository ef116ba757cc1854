//! The `Sink` contract.
//!
//! A sink answers `Ok(())` only once the hook is accepted by the destination; every error
//! carries one of the classes dispatch acts on. A panic inside a sink is caught by dispatch
//! and counts as a failed attempt.

use futures::future::BoxFuture;

use crate::Envelope;

/// How dispatch treats a failed attempt.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SinkError {
    /// Retrying cannot fix it: dead-letter after this attempt; not counted by breakers.
    #[error("permanent: {0}")]
    Permanent(String),
    /// Permanent and the operator's to fix (a refused credential, a missing queue or topic).
    #[error("permanent config: {0}")]
    PermanentConfig(String),
    /// The destination asked for a pause: no sooner than `ms` (capped), or the backoff if later.
    #[error("retry after {ms} ms: {reason}")]
    RetryAfter { ms: u64, reason: String },
    /// Anything else: the retry policy.
    #[error("{0}")]
    Transient(String),
}

impl SinkError {
    pub fn is_permanent(&self) -> bool {
        matches!(
            self,
            SinkError::Permanent(_) | SinkError::PermanentConfig(_)
        )
    }
}

/// What a sink knows about one attempt besides the hook.
#[derive(Debug, Clone)]
pub struct DeliveryCtx {
    pub instance: String,
    pub region: Option<String>,
    /// 1 for the first attempt.
    pub attempt: u32,
    pub replay_id: Option<String>,
    /// Provider headers to forward, after the source's `forward_headers` policy and caps.
    pub forward_headers: Vec<(String, String)>,
    pub tenant_for_pools: String,
    /// Set when the body is larger than the smallest `inline_max_bytes` of the source's sinks:
    /// checked in once per hook, shared by every sink and retry.
    pub claim_check: Option<ClaimCheckRef>,
    /// The lane key when the sink entry is ordered (`""` for the keyless lane); sinks pass
    /// it on (HTTP `x-ankusa-ordering-key`, Kafka record key, SQS group, Pub/Sub orderingKey).
    pub ordering_key: Option<String>,
    /// The W3C `traceparent` this attempt sends on: the gateway's `deliver` span when traces
    /// are exported (`telemetry.otlp`), in the hook's trace. `None`: the hook's own
    /// (`Envelope::traceparent`), as stored at ingest.
    pub traceparent: Option<String>,
    /// Set when the sink entry's `transform` replaced the body: the hex SHA-256 of the body as
    /// received (the queue message's `original_sha256`; the hook in the store is unchanged).
    pub original_sha256: Option<String>,
}

/// A destination of a source's hooks.
pub trait Sink: Send + Sync {
    fn deliver<'a>(
        &'a self,
        env: &'a Envelope,
        ctx: &'a DeliveryCtx,
    ) -> BoxFuture<'a, Result<(), SinkError>>;

    /// Whether `Ok` means the hook is kept by something that outlives this node.
    fn durable(&self) -> bool {
        true
    }

    /// Largest body sent inline; `None` for a sink that never uses the claim check.
    fn inline_max_bytes(&self) -> Option<u64> {
        None
    }

    fn type_name(&self) -> &'static str;

    /// Whether attempts wait in a batcher for their batch's answer (SQS, Pub/Sub). Dispatch
    /// does not count such attempts against its concurrency limits, which would cap every batch
    /// at that many messages; the sink's own batcher bounds its requests in flight, and the
    /// claimed-row windows bound how many attempts wait.
    fn batching(&self) -> bool {
        false
    }

    /// The shared endpoint this sink posts to and how many requests it runs there at once
    /// (an HTTP receiver and its pool size), when other sinks may share that capacity.
    /// Dispatch keeps the rows it holds for one destination to a few times that capacity,
    /// shared among the destination's tenants, so one slow receiver behind thousands of
    /// tenants cannot take every claimed-row and attempt slot. `None`: not held back.
    fn destination(&self) -> Option<Destination> {
        None
    }
}

/// A shared endpoint (`Sink::destination`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// Names the endpoint, e.g. `https://hooks.example.com:443`.
    pub id: String,
    /// Requests it runs at once (at least 1).
    pub concurrency: u32,
}

/// A body checked in to the claim check: what a queue message carries instead of the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimCheckRef {
    /// `urn:ankusa:claim:v1:<tenant>:<claim_id>`.
    pub urn: String,
    /// Lowercase hex SHA-256 of the body.
    pub sha256: String,
}

/// Where bodies too large to travel inline are checked in. A check-in is idempotent per hook:
/// every sink and every retry of one hook share one reference.
pub trait ClaimCheck: Send + Sync {
    fn check_in<'a>(&'a self, env: &'a Envelope) -> BoxFuture<'a, Result<ClaimCheckRef, String>>;
}
