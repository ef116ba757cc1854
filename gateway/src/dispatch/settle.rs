//! What a finished attempt (or an open breaker) makes of a claimed row: delivered, due again
//! (the retry policy and its horizon, a destination's `Retry-After`), or dead-lettered with an
//! error class. Pure decisions over the row and the policy, plus the attempt metrics; the
//! scheduler writes the outcome and updates its windows.

use std::time::Duration;

use ankusa_config::{DispatchConfig, ErrorClass, RetryConfig};
use ankusa_core::SinkError;
use ankusa_store::Outcome;

use super::{Claim, retry};
use crate::metrics::Metrics;

/// A failed attempt's error as the row (`last_error`) and the sink's health record it.
pub fn error_text(sink_type: &str, e: &SinkError) -> String {
    format!("{sink_type}: {e}")
}

/// The outcome of an attempt's `result`, `elapsed` long, at `now`. Failures are retried under
/// `policy` (at most until its horizon) unless permanent.
pub fn attempt_outcome(
    claim: &Claim,
    result: Result<(), SinkError>,
    elapsed: Duration,
    policy: &RetryConfig,
    d: &DispatchConfig,
    now: u64,
    m: &Metrics,
) -> Outcome {
    let mut row = claim.row.clone();
    row.attempts += 1;
    let (seq, sink) = (claim.seq, claim.sink);
    let sink_type = claim.key.sink_type.as_str();
    let label = match &result {
        Ok(()) => "ok",
        Err(SinkError::Permanent(_)) | Err(SinkError::PermanentConfig(_)) => "permanent",
        Err(SinkError::RetryAfter { .. }) => "retry_after",
        Err(SinkError::Transient(_)) => "transient",
    };
    m.dispatch
        .attempt_duration_seconds
        .with_label_values(&[sink_type, label])
        .observe(elapsed.as_secs_f64());
    let e = match result {
        Ok(()) => return Outcome::Delivered { seq, sink, row },
        Err(e) => e,
    };
    if let SinkError::Transient(msg) = &e
        && msg.starts_with("attempt_timeout")
    {
        m.dispatch
            .attempt_timeouts
            .with_label_values(&[sink_type])
            .inc();
    }
    if matches!(e, SinkError::PermanentConfig(_)) {
        m.dispatch
            .config_errors
            .with_label_values(&[sink_type])
            .inc();
    }
    row.last_error = Some(error_text(sink_type, &e));
    let retry_after = match &e {
        SinkError::RetryAfter { ms, .. } => Some((*ms).min(d.max_retry_after_ms)),
        _ => None,
    };
    let first = row.first_attempt_at.unwrap_or(now);
    let decision = if e.is_permanent() {
        retry::Decision::GiveUp
    } else {
        retry::decide(
            policy,
            row.attempts,
            first,
            now,
            retry_after,
            fastrand::f64(),
        )
    };
    match decision {
        retry::Decision::RetryAt(at) => {
            row.due_at = at;
            Outcome::Retry { seq, sink, row }
        }
        retry::Decision::GiveUp => {
            row.dead_at = Some(now);
            row.error_class = Some(match e {
                SinkError::Permanent(_) | SinkError::PermanentConfig(_) => ErrorClass::Permanent,
                SinkError::RetryAfter { .. } => ErrorClass::Throttled,
                SinkError::Transient(_) => ErrorClass::Transient,
            });
            m.dispatch
                .dead_lettered
                .with_label_values(&[sink_type])
                .inc();
            tracing::warn!(
                id = %row.hook_id, sink, sink_type, attempts = row.attempts,
                reason = row.last_error.as_deref().unwrap_or(""), "delivery dead-lettered"
            );
            Outcome::Dead { seq, sink, row }
        }
    }
}

/// The outcome of a row parked behind an open breaker: due again at `until` with its attempts
/// unchanged, but never past its retry horizon, where it is dead-lettered without another
/// attempt.
pub fn parked_outcome(
    claim: &Claim,
    until: u64,
    policy: &RetryConfig,
    now: u64,
    m: &Metrics,
) -> Outcome {
    let mut row = claim.row.clone();
    let (seq, sink) = (claim.seq, claim.sink);
    let horizon = row
        .first_attempt_at
        .unwrap_or(now)
        .saturating_add(policy.max_elapsed_ms);
    if now >= horizon {
        row.dead_at = Some(now);
        row.error_class = Some(ErrorClass::Transient);
        row.last_error = Some(format!(
            "retry_horizon: {} (parked behind an open circuit breaker; last error: {})",
            claim.key.sink_type,
            row.last_error.as_deref().unwrap_or("none")
        ));
        m.dispatch
            .dead_lettered
            .with_label_values(&[claim.key.sink_type.as_str()])
            .inc();
        Outcome::Dead { seq, sink, row }
    } else {
        row.due_at = until.min(horizon);
        Outcome::Retry { seq, sink, row }
    }
}
