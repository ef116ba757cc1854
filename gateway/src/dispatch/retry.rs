//! The exponential retry policy and the horizon.
//!
//! Delay for attempt n (1-based) is `min(max_ms, base_ms · 2^(n-1))`, times a random factor in
//! [0.5, 1.0] with jitter. A `retry_after` answer waits at least that long (capped by
//! `dispatch.max_retry_after_ms`). No retry is ever scheduled past the horizon
//! (`first_attempt_at + max_elapsed_ms`): the last attempt runs on it, and a failure at or
//! after it dead-letters.

use ankusa_config::RetryConfig;

/// What to do after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    RetryAt(u64),
    GiveUp,
}

/// The backoff before attempt `attempts + 1`; `rand01` is a uniform draw in [0, 1).
pub fn backoff_ms(p: &RetryConfig, attempts: u32, rand01: f64) -> u64 {
    let exp = attempts.saturating_sub(1).min(40);
    let raw = p.base_ms.saturating_mul(1u64 << exp).min(p.max_ms);
    if p.jitter {
        ((raw as f64) * (0.5 + 0.5 * rand01)).round().max(1.0) as u64
    } else {
        raw
    }
}

/// Decides after failure number `attempts` (already counted) at `now`.
/// `retry_after_ms` is the destination's requested pause, already capped by the caller.
pub fn decide(
    p: &RetryConfig,
    attempts: u32,
    first_attempt_at: u64,
    now: u64,
    retry_after_ms: Option<u64>,
    rand01: f64,
) -> Decision {
    let horizon = first_attempt_at.saturating_add(p.max_elapsed_ms);
    if now >= horizon {
        return Decision::GiveUp;
    }
    if p.max_attempts.is_some_and(|max| attempts >= max) {
        return Decision::GiveUp;
    }
    let mut delay = backoff_ms(p, attempts, rand01);
    if let Some(ra) = retry_after_ms {
        delay = delay.max(ra);
    }
    Decision::RetryAt(now.saturating_add(delay).min(horizon))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> RetryConfig {
        RetryConfig::default()
    }

    #[test]
    fn doubles_to_the_cap_with_jitter_bounds() {
        let mut p = p();
        p.jitter = false;
        assert_eq!(backoff_ms(&p, 1, 0.0), 100);
        assert_eq!(backoff_ms(&p, 2, 0.0), 200);
        assert_eq!(backoff_ms(&p, 12, 0.0), 204_800);
        assert_eq!(backoff_ms(&p, 13, 0.0), 300_000, "capped by attempt 13");
        assert_eq!(backoff_ms(&p, 1000, 0.0), 300_000);
        p.jitter = true;
        assert_eq!(backoff_ms(&p, 1, 0.0), 50);
        assert_eq!(backoff_ms(&p, 1, 0.999_999), 100);
    }

    #[test]
    fn horizon_bounds_every_retry_and_dead_letters_at_or_after_it() {
        let mut p = p();
        p.max_elapsed_ms = 1_000;
        p.jitter = false;
        assert_eq!(decide(&p, 1, 0, 10, None, 0.0), Decision::RetryAt(110));
        // A long backoff is cut at the horizon: the last attempt runs on it.
        assert_eq!(decide(&p, 20, 0, 900, None, 0.0), Decision::RetryAt(1_000));
        assert_eq!(decide(&p, 21, 0, 1_000, None, 0.0), Decision::GiveUp);
        assert_eq!(decide(&p, 21, 0, 5_000, None, 0.0), Decision::GiveUp);
    }

    #[test]
    fn retry_after_is_honoured_but_never_past_the_horizon() {
        let mut p = p();
        p.jitter = false;
        assert_eq!(
            decide(&p, 1, 0, 0, Some(60_000), 0.0),
            Decision::RetryAt(60_000)
        );
        assert_eq!(
            decide(&p, 1, 0, 0, Some(10), 0.0),
            Decision::RetryAt(100),
            "backoff wins when later"
        );
        p.max_elapsed_ms = 30_000;
        assert_eq!(
            decide(&p, 1, 0, 0, Some(60_000), 0.0),
            Decision::RetryAt(30_000)
        );
    }

    #[test]
    fn max_attempts() {
        let mut p = p();
        p.max_attempts = Some(3);
        assert!(matches!(
            decide(&p, 2, 0, 0, None, 0.5),
            Decision::RetryAt(_)
        ));
        assert_eq!(decide(&p, 3, 0, 0, None, 0.5), Decision::GiveUp);
    }
}
