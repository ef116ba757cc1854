//! What the gateway and its sinks share: the stored hook (`Envelope`), the `Sink` contract
//! with its error classes and the claim check a sink may hand large bodies to, and the two
//! clock helpers both sides use (`now_ms`, `full_jitter`).

mod envelope;
mod sink;

pub use envelope::{Envelope, Verification, VerifyStatus};
pub use sink::{ClaimCheck, ClaimCheckRef, DeliveryCtx, Destination, Sink, SinkError};

/// Unix milliseconds now (0 if the clock is before 1970).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A full-jitter pause: 1 to min(30 s, 500 ms · 2^(attempt-1)) milliseconds, the spec's draw
/// for throttling (`425` without `Retry-After`) and full batch queues.
pub fn full_jitter(attempt: u32) -> u64 {
    let cap = 500u64
        .saturating_mul(1u64 << attempt.saturating_sub(1).min(16))
        .min(30_000);
    1 + fastrand::u64(0..cap.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_bounds() {
        for attempt in [1, 2, 5, 40] {
            for _ in 0..200 {
                let ms = full_jitter(attempt);
                let cap = (500u64 << (attempt - 1).min(16)).min(30_000);
                assert!((1..=cap).contains(&ms), "{attempt}: {ms}");
            }
        }
    }
}
