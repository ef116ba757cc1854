//! What the ingest listener holds: exactly the parts its stages use, built once by `app.rs`.
//! Everything is shared (`Arc`) or owned by the edge alone (the rate limiters, the body
//! budget); nothing here is read by another listener.

use std::sync::Arc;

use ankusa_core::now_ms;
use tokio::sync::Semaphore;

use super::ratelimit::RateLimiter;
use crate::archive::dlq_bounds::DlqGuard;
use crate::commit::Committer;
use crate::direct::Direct;
use crate::fleet::FleetClient;
use crate::lifecycle::Emitter;
use crate::live::ConfigHandle;
use crate::metrics::Metrics;
use crate::quarantine::Pen;

/// The time source of decisions that depend on it (rate limits, signature windows).
pub trait Clock: Send + Sync {
    fn now_ms(&self) -> u64;
}

pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        now_ms()
    }
}

pub struct EdgeState {
    /// The config in force: each request takes its `Live` at its start.
    pub config: Arc<ConfigHandle>,
    /// Where an accepted hook goes.
    pub ack: Ack,
    /// The quarantine pen (`on_verify_failure: quarantine`).
    pub pen: Arc<Pen>,
    /// The DLQ's bounds: `503 dlq_full` while over one with nothing archived to evict.
    pub dlq: Arc<DlqGuard>,
    /// `Retry-After` of the intake refusals (`intake.retry_after_s`; 2 without an intake log).
    pub intake_retry_after: u64,
    /// Per tenant (`rate_limits`).
    pub limiter: RateLimiter,
    /// Per client address (`http.client_rate_limit`).
    pub client_limiter: RateLimiter,
    /// Bytes of request bodies being read (`http.max_inflight_body_bytes`).
    pub body_budget: Arc<Semaphore>,
    pub metrics: Arc<Metrics>,
    pub clock: Arc<dyn Clock>,
    /// Hooks held in the pen, counted per interval as lifecycle events.
    pub lifecycle: Option<Emitter>,
    /// With `fleet`: the client forwarding keyed hooks to their owner pod.
    pub fleet: Option<Arc<FleetClient>>,
}

/// What a `201` waits for (`wal.type`).
pub enum Ack {
    /// `disk`, `dual`: group commit (and the intake log under `dual`).
    Commit(Arc<Committer>),
    /// `none`: every sink of the source confirmed the hook.
    Direct(Arc<Direct>),
}

impl EdgeState {
    /// The body budget of `http.max_inflight_body_bytes` (at most what a semaphore holds).
    pub fn body_budget(max_inflight_body_bytes: u64) -> Arc<Semaphore> {
        Arc::new(Semaphore::new(
            usize::try_from(max_inflight_body_bytes)
                .unwrap_or(usize::MAX)
                .min(Semaphore::MAX_PERMITS),
        ))
    }
}
