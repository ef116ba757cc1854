//! Admission by bytes: whether one more entry fits the pen. Three caps apply to it — the node's
//! (`quarantine.max_bytes`), its source's share and its tenant's share (by default the node cap
//! split evenly over the quarantine sources and over their tenants, `Config::pen_shares`)
//! — and one bound on keys: a source holds entries for at most `MAX_TENANTS_PER_SOURCE`
//! tenants (a shared source's tenant comes from the URL of a hook that failed verification, so
//! anyone can name new ones; the bound is per source, so a flood of new tenants on one source
//! never refuses another source's). Each is checked against what the store holds (its share
//! counters, `store::Usage`) plus what was admitted and not written yet (`InFlight`), under one
//! lock, so two requests cannot both take the last room; a refusal takes nothing.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use ankusa_config::Config;

use ankusa_store::{Held, Store, Usage};

/// Tenants one source may hold entries for at once; the next new tenant's hook is
/// `503 quarantine_full` (the source's tenants already held still get in).
pub const MAX_TENANTS_PER_SOURCE: usize = 10_000;

/// The pen's bounds in force, from the live config (`Pen::limits` keeps them per generation).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    pub burst: u32,
    pub rate: f64,
    pub max_bytes: u64,
    pub per_source: u64,
    pub per_tenant: u64,
    pub max_body_bytes: u64,
}

impl Limits {
    pub fn of(cfg: &Config) -> Limits {
        let q = &cfg.quarantine;
        let shares = cfg.pen_shares();
        Limits {
            burst: q.burst,
            rate: q.rate,
            max_bytes: q.max_bytes,
            per_source: shares.per_source,
            per_tenant: shares.per_tenant,
            max_body_bytes: q.max_body_bytes,
        }
    }
}

/// Which cap refused an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Node,
    Source,
    Tenant,
}

impl Scope {
    /// The `scope` label of `ankusa_quarantine_full_total`.
    pub fn label(self) -> &'static str {
        match self {
            Scope::Node => "node",
            Scope::Source => "source",
            Scope::Tenant => "tenant",
        }
    }
}

/// Entries admitted and not yet answered by the pen's writer, per source and tenant. At most
/// `MAX_PENDING` writes wait, so this stays small.
#[derive(Default)]
pub struct InFlight {
    usage: Mutex<Usage>,
}

impl InFlight {
    fn lock(&self) -> MutexGuard<'_, Usage> {
        self.usage.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes `size` bytes for an entry of (`source`, `tenant`) if every cap has room: `total`
    /// (what the pen holds plus what was admitted) goes up with it.
    pub fn admit(
        &self,
        store: &Store,
        total: &AtomicU64,
        source: &str,
        tenant: &str,
        size: u64,
        l: &Limits,
    ) -> Result<(), Scope> {
        let mut admitted = self.lock();
        store.pen_usage(|held| {
            let over = |now: u64, cap: u64| now.saturating_add(size) > cap;
            if over(total.load(Ordering::SeqCst), l.max_bytes) {
                return Err(Scope::Node);
            }
            let source_bytes = held.source_bytes(source) + admitted.source_bytes(source);
            if over(source_bytes, l.per_source) {
                return Err(Scope::Source);
            }
            let tenant_bytes = held.tenant_bytes(tenant) + admitted.tenant_bytes(tenant);
            if over(tenant_bytes, l.per_tenant) {
                return Err(Scope::Tenant);
            }
            let new_pair = held.pair(source, tenant).entries == 0
                && admitted.pair(source, tenant).entries == 0;
            // Pairs admitted may be held already: counting them again errs on the safe side.
            if new_pair
                && held.source_tenants(source) + admitted.source_tenants(source)
                    >= MAX_TENANTS_PER_SOURCE
            {
                return Err(Scope::Source);
            }
            Ok(())
        })?;
        total.fetch_add(size, Ordering::SeqCst);
        admitted.add(
            source,
            tenant,
            Held {
                entries: 1,
                bytes: size,
            },
        );
        Ok(())
    }

    /// An admitted entry was answered (written, or failed): it no longer counts here.
    pub fn settle(&self, source: &str, tenant: &str, size: u64) {
        self.lock().sub(
            source,
            tenant,
            Held {
                entries: 1,
                bytes: size,
            },
        );
    }

    /// Entries admitted and not answered.
    pub fn entries(&self) -> u64 {
        self.lock().total().entries
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ankusa_store::test_util::temp_store;
    use ankusa_store::{PenSummary, PenWrite};

    fn limits(max_bytes: u64, per_source: u64, per_tenant: u64) -> Limits {
        Limits {
            burst: 1,
            rate: 1.0,
            max_bytes,
            per_source,
            per_tenant,
            max_body_bytes: 1 << 20,
        }
    }

    fn write(source: &str, tenant: &str, size: u64) -> PenWrite {
        PenWrite {
            summary: PenSummary {
                id: uuid::Uuid::now_v7(),
                source_id: source.into(),
                tenant: tenant.into(),
                received_at: 1,
                reason: "no_match".into(),
                size,
                method: "POST".into(),
                path: "/webhooks/x".into(),
                url_tenant: false,
            },
            envelope: vec![0; size as usize],
        }
    }

    #[test]
    fn a_source_over_its_share_is_refused_while_another_gets_in() {
        let (_d, store) = temp_store();
        let total = AtomicU64::new(0);
        let f = InFlight::default();
        let l = limits(1000, 300, 1000);
        // Held on disk and admitted both count.
        store.pen_put(&[write("a", "t", 200)]).unwrap();
        total.store(200, Ordering::SeqCst);
        f.admit(&store, &total, "a", "t", 100, &l).unwrap();
        assert_eq!(f.admit(&store, &total, "a", "t", 1, &l), Err(Scope::Source));
        f.admit(&store, &total, "b", "t", 300, &l).unwrap();
        assert_eq!(total.load(Ordering::SeqCst), 600, "a refusal takes nothing");
        // Once the admitted write is answered, its bytes count only where they landed.
        f.settle("a", "t", 100);
        f.admit(&store, &total, "a", "t", 100, &l).unwrap();
        assert_eq!(f.entries(), 2);
        // The node cap before any share.
        let l = limits(800, 10_000, 10_000);
        assert_eq!(f.admit(&store, &total, "c", "u", 101, &l), Err(Scope::Node));
    }

    #[test]
    fn a_tenant_over_its_share_is_refused_on_every_source() {
        let (_d, store) = temp_store();
        let total = AtomicU64::new(0);
        let f = InFlight::default();
        let l = limits(10_000, 1_000, 250);
        f.admit(&store, &total, "a", "acme", 200, &l).unwrap();
        assert_eq!(
            f.admit(&store, &total, "b", "acme", 100, &l),
            Err(Scope::Tenant),
            "acme's share spans its sources"
        );
        f.admit(&store, &total, "a", "beta", 250, &l).unwrap();
        f.admit(&store, &total, "b", "acme", 50, &l).unwrap();
    }

    #[test]
    fn a_source_holds_a_bounded_number_of_tenants_and_others_are_not_affected() {
        let (_d, store) = temp_store();
        let total = AtomicU64::new(0);
        let f = InFlight::default();
        let l = limits(u64::MAX, u64::MAX, u64::MAX);
        let writes: Vec<PenWrite> = (0..MAX_TENANTS_PER_SOURCE - 1)
            .map(|i| write("shared", &format!("t{i}"), 1))
            .collect();
        store.pen_put(&writes).unwrap();
        f.admit(&store, &total, "shared", "last", 1, &l).unwrap();
        assert_eq!(
            f.admit(&store, &total, "shared", "one-too-many", 1, &l),
            Err(Scope::Source)
        );
        // A tenant it holds already still gets in; another source is not touched.
        f.admit(&store, &total, "shared", "t7", 1, &l).unwrap();
        f.admit(&store, &total, "other", "one-too-many", 1, &l)
            .unwrap();
    }
}
