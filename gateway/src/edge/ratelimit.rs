//! Per-tenant rate limits: GCRA, one theoretical-arrival time per tenant. Charged after
//! verification and before the durable write; a refusal stores nothing.

use std::collections::HashMap;
use std::sync::Mutex;

use ankusa_config::RateLimit;

#[derive(Default)]
pub struct RateLimiter {
    /// Tenant → theoretical arrival time, in microseconds since the epoch.
    tat: Mutex<HashMap<String, u64>>,
}

/// Entries kept before idle ones (whose bucket is full again) are dropped.
const SWEEP_ABOVE: usize = 10_000;

impl RateLimiter {
    /// `Ok` admits one request; `Err(ms)` is how long until one would be admitted.
    pub fn check(&self, tenant: &str, limit: &RateLimit, now_us: u64) -> Result<(), u64> {
        let interval = (1_000_000.0 / limit.rate).max(1.0) as u64;
        let tolerance = interval.saturating_mul(limit.burst.saturating_sub(1) as u64);
        let mut map = self.tat.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() > SWEEP_ABOVE {
            map.retain(|_, tat| *tat > now_us);
        }
        let tat = map.get(tenant).copied().unwrap_or(now_us).max(now_us);
        if tat - now_us > tolerance {
            let wait_us = tat - now_us - tolerance;
            return Err(wait_us.div_ceil(1000));
        }
        map.insert(tenant.to_string(), tat + interval);
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
