//! The pen's per-source buckets: GCRA, one theoretical-arrival time per source, like the
//! tenant limiter (`edge::ratelimit`), plus `give_back` — a hook refused after it took its
//! token (the pen full, too many writes waiting, the store failing) returns it, so only a
//! hook the pen kept (or may still keep) spends one.
//!
//! Keys are configured source ids (a request for an unknown source never gets here), so the
//! map is bounded by the config; a bucket full again is dropped by a sweep once a minute.

use std::collections::HashMap;
use std::sync::Mutex;

/// How often buckets that are full again are dropped.
const SWEEP_EVERY_US: u64 = 60_000_000;

#[derive(Default)]
pub struct Buckets {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Source → theoretical arrival time, microseconds since the epoch.
    tat: HashMap<String, u64>,
    last_sweep_us: u64,
}

/// The emission interval of `rate` per second, in microseconds.
fn interval_us(rate: f64) -> u64 {
    (1_000_000.0 / rate).max(1.0) as u64
}

impl Buckets {
    /// Takes one token of `key`'s bucket (`burst` back to back, `rate` per second): `Err` is
    /// how many milliseconds until one would be there.
    pub fn take(&self, key: &str, rate: f64, burst: u32, now_us: u64) -> Result<(), u64> {
        let interval = interval_us(rate);
        let tolerance = interval.saturating_mul(u64::from(burst.saturating_sub(1)));
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if now_us.saturating_sub(g.last_sweep_us) >= SWEEP_EVERY_US {
            g.tat.retain(|_, tat| *tat > now_us);
            g.last_sweep_us = now_us;
        }
        let tat = g.tat.get(key).copied().unwrap_or(now_us).max(now_us);
        if tat - now_us > tolerance {
            return Err((tat - now_us - tolerance).div_ceil(1000));
        }
        g.tat.insert(key.to_string(), tat + interval);
        Ok(())
    }

    /// Returns a token `take` gave: the bucket is as if that request never came (never fuller
    /// than full).
    pub fn give_back(&self, key: &str, rate: f64, now_us: u64) {
        let interval = interval_us(rate);
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(tat) = g.tat.get_mut(key) {
            *tat = tat.saturating_sub(interval).max(now_us);
        }
    }

    /// Sources holding a bucket now.
    pub fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .tat
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: u64 = 1_000_000_000_000;

    #[test]
    fn burst_back_to_back_then_the_rate() {
        let b = Buckets::default();
        for _ in 0..100 {
            b.take("s", 20.0, 100, T0).unwrap();
        }
        assert_eq!(
            b.take("s", 20.0, 100, T0),
            Err(50),
            "the next token in 50 ms at 20/s"
        );
        // 50 ms later exactly one more.
        b.take("s", 20.0, 100, T0 + 50_000).unwrap();
        assert!(b.take("s", 20.0, 100, T0 + 50_000).is_err());
        // One second later, 20 more and no more.
        let t1 = T0 + 1_050_000;
        for _ in 0..20 {
            b.take("s", 20.0, 100, t1).unwrap();
        }
        assert!(b.take("s", 20.0, 100, t1).is_err());
    }

    #[test]
    fn one_source_never_spends_another_sources_tokens() {
        let b = Buckets::default();
        for _ in 0..3 {
            b.take("flood", 1.0, 3, T0).unwrap();
        }
        assert!(b.take("flood", 1.0, 3, T0).is_err());
        for _ in 0..3 {
            b.take("other", 1.0, 3, T0).unwrap();
        }
    }

    #[test]
    fn a_token_given_back_can_be_taken_again_but_never_overfills() {
        let b = Buckets::default();
        b.take("s", 1.0, 2, T0).unwrap();
        b.take("s", 1.0, 2, T0).unwrap();
        assert!(b.take("s", 1.0, 2, T0).is_err());
        b.give_back("s", 1.0, T0);
        b.take("s", 1.0, 2, T0).unwrap();
        assert!(b.take("s", 1.0, 2, T0).is_err());
        // Giving back more than was taken leaves a full bucket, not a bigger one.
        for _ in 0..5 {
            b.give_back("s", 1.0, T0);
        }
        b.take("s", 1.0, 2, T0).unwrap();
        b.take("s", 1.0, 2, T0).unwrap();
        assert!(b.take("s", 1.0, 2, T0).is_err());
        // A source that never took anything has nothing to give back.
        b.give_back("never", 1.0, T0);
        assert_eq!(b.len(), 1);
    }

    #[test]
    fn full_buckets_are_swept() {
        let b = Buckets::default();
        b.take("a", 10.0, 1, T0).unwrap();
        b.take("b", 0.001, 1, T0).unwrap();
        // A minute later: "a" is full again, "b" is still refilling (1000 s per token).
        b.take("c", 10.0, 1, T0 + 61_000_000).unwrap();
        assert_eq!(b.len(), 2, "a dropped, b and c kept");
        assert!(b.take("b", 0.001, 1, T0 + 61_000_000).is_err());
    }
}
