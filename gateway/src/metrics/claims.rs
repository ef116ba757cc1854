//! `Metrics::claims`: the claim check's packs in a blob store and the TokenReviews of its
//! ServiceAccount readers.

use prometheus::{Histogram, IntCounterVec, Registry};

use super::register::{counter_vec, histogram};

/// Cloned into the claim store and the reviewer (the series are shared handles).
#[derive(Clone)]
pub struct ClaimMetrics {
    pub packs: IntCounterVec,
    pub pack_bodies: Histogram,
    pub token_reviews: IntCounterVec,
}

impl ClaimMetrics {
    pub fn new(r: &Registry) -> ClaimMetrics {
        ClaimMetrics {
            packs: counter_vec(
                r,
                "ankusa_claim_packs_total",
                "Claim packs written to the claim blob store, by outcome (written, failed)",
                &["outcome"],
            ),
            pack_bodies: histogram(
                r,
                "ankusa_claim_pack_bodies",
                "Bodies per claim pack written",
                vec![
                    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 512.0, 4096.0, 65000.0,
                ],
            ),
            token_reviews: counter_vec(
                r,
                "ankusa_claim_token_reviews_total",
                "TokenReviews the claim port asked of the API server, by outcome (reader, not_listed, refused, unavailable)",
                &["outcome"],
            ),
        }
    }

    /// Series registered nowhere (`check-config`, tests, benches).
    pub fn unregistered() -> ClaimMetrics {
        ClaimMetrics::new(&Registry::new())
    }
}
