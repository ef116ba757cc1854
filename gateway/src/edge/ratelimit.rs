//! Rate limits: GCRA, one theoretical-arrival time per key — a tenant (charged after
//! verification and before the durable write) or a client address (charged before the body
//! is read). A refusal stores nothing.
//!
//! The map is bounded: keys come from requests (URL tenants, client addresses), so a client
//! spraying new keys must not grow it without end. Past `capacity` keys, those whose bucket
//! is full again go first; if that is not enough, the tenth closest to full does (they get a
//! fresh bucket when they come back: the bound costs a little precision, never memory).

use std::collections::HashMap;
use std::sync::Mutex;

use ankusa_config::RateLimit;

pub struct RateLimiter {
    /// Key → theoretical arrival time, in microseconds since the epoch.
    tat: Mutex<HashMap<String, u64>>,
    capacity: usize,
}

/// Keys held at most by default (about 8 MB).
pub const DEFAULT_CAPACITY: usize = 100_000;

/// Keys kept before idle ones (whose bucket is full again) are dropped.
const SWEEP_ABOVE: usize = 10_000;

impl Default for RateLimiter {
    fn default() -> Self {
        RateLimiter::with_capacity(DEFAULT_CAPACITY)
    }
}

impl RateLimiter {
    pub fn with_capacity(capacity: usize) -> RateLimiter {
        RateLimiter {
            tat: Mutex::new(HashMap::new()),
            capacity: capacity.max(1),
        }
    }

    /// Keys held now.
    pub fn len(&self) -> usize {
        self.tat.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `Ok` admits one request; `Err(ms)` is how long until one would be admitted.
    pub fn check(&self, key: &str, limit: &RateLimit, now_us: u64) -> Result<(), u64> {
        let interval = (1_000_000.0 / limit.rate).max(1.0) as u64;
        let tolerance = interval.saturating_mul(limit.burst.saturating_sub(1) as u64);
        let mut map = self.tat.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() > SWEEP_ABOVE.min(self.capacity) {
            map.retain(|_, tat| *tat > now_us);
        }
        if map.len() >= self.capacity && !map.contains_key(key) {
            // Every key is still live: drop the tenth closest to a full bucket.
            let mut tats: Vec<u64> = map.values().copied().collect();
            let k = (self.capacity / 10).min(tats.len() - 1);
            let (_, cut, _) = tats.select_nth_unstable(k);
            let cut = *cut;
            map.retain(|_, tat| *tat > cut);
        }
        let tat = map.get(key).copied().unwrap_or(now_us).max(now_us);
        if tat - now_us > tolerance {
            let wait_us = tat - now_us - tolerance;
            return Err(wait_us.div_ceil(1000));
        }
        map.insert(key.to_string(), tat + interval);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_rate() {
        let l = RateLimiter::default();
        let lim = RateLimit {
            rate: 10.0,
            burst: 3,
        };
        let t0 = 1_000_000_000;
        for _ in 0..3 {
            l.check("a", &lim, t0).unwrap();
        }
        let wait = l.check("a", &lim, t0).unwrap_err();
        assert_eq!(wait, 100, "one more after 100 ms at 10/s");
        l.check("b", &lim, t0).unwrap();
        l.check("a", &lim, t0 + 100_000).unwrap();
        assert!(l.check("a", &lim, t0 + 100_000).is_err());
    }

    #[test]
    fn spraying_keys_never_grows_the_map_past_its_capacity() {
        let l = RateLimiter::with_capacity(1000);
        let lim = RateLimit {
            rate: 0.001,
            burst: 1,
        };
        // Every key stays live for 1000 s: nothing expires on its own.
        for i in 0..50_000u64 {
            l.check(&format!("k{i}"), &lim, 1_000_000 + i).unwrap();
            assert!(l.len() <= 1000, "{} keys after {i}", l.len());
        }
        // A key that is still held keeps its state.
        assert!(l.check("k49999", &lim, 1_050_000).is_err());
    }

    #[test]
    fn fractional_rates() {
        let l = RateLimiter::default();
        let lim = RateLimit {
            rate: 0.5,
            burst: 1,
        };
        l.check("a", &lim, 0).unwrap();
        assert_eq!(l.check("a", &lim, 0).unwrap_err(), 2000);
        l.check("a", &lim, 2_000_000).unwrap();
    }
}
