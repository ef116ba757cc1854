//! The pen's shares as stored state: per (source, tenant) pair that holds entries, how many and
//! their bytes (`quarantine` family, `u<source>\0<tenant>` → `<entries:8><bytes:8>`). They are
//! written in the same synced batch as the entries they count — by the pen's group commit, a
//! purge, a release step, the expiry — and deleted when the pair holds nothing, so a key exists
//! only for a pair with entries (and the edge bounds the pairs a source may hold). They are
//! absolute values, not merge deltas, so that a count at zero can go: every write that changes
//! them holds `PenState::write` from reading the current values to updating the copy in memory
//! (`Usage`), which is what the edge's admission reads (no disk read on the request path).
//!
//! A store whose pairs do not add up to the pen's entry counter (made before the shares, or
//! damaged) has them rebuilt from the summaries when the pen starts: one scan of the whole pen,
//! which `quarantine.max_bytes` bounds.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use rocksdb::{DB, IteratorMode, ReadOptions, WriteBatch};

use super::codec::PenSummary;
use super::{Store, StoreError, classify, keys};

/// What a pair, a source or the whole pen holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Held {
    pub entries: u64,
    pub bytes: u64,
}

impl Held {
    fn encode(self) -> [u8; 16] {
        let mut v = [0u8; 16];
        v[..8].copy_from_slice(&self.entries.to_be_bytes());
        v[8..].copy_from_slice(&self.bytes.to_be_bytes());
        v
    }

    fn decode(v: &[u8]) -> Option<Held> {
        let v: &[u8; 16] = v.try_into().ok()?;
        Some(Held {
            entries: keys::be64(&v[..8])?,
            bytes: keys::be64(&v[8..])?,
        })
    }
}

/// Entries and bytes per (source, tenant), with the sums per source and per tenant kept beside
/// them. The pen's store copy holds what is on disk; the pen's admission keeps one more of the
/// writes it admitted and the writer has not answered yet.
#[derive(Debug, Default)]
pub struct Usage {
    sources: HashMap<String, SourceUsage>,
    /// Per tenant, over all sources.
    tenants: HashMap<String, Held>,
}

#[derive(Debug, Default)]
struct SourceUsage {
    bytes: u64,
    tenants: HashMap<String, Held>,
}

impl Usage {
    pub fn pair(&self, source: &str, tenant: &str) -> Held {
        self.sources
            .get(source)
            .and_then(|s| s.tenants.get(tenant))
            .copied()
            .unwrap_or_default()
    }

    pub fn source_bytes(&self, source: &str) -> u64 {
        self.sources.get(source).map_or(0, |s| s.bytes)
    }

    /// Tenants `source` holds entries for.
    pub fn source_tenants(&self, source: &str) -> usize {
        self.sources.get(source).map_or(0, |s| s.tenants.len())
    }

    pub fn tenant_bytes(&self, tenant: &str) -> u64 {
        self.tenants.get(tenant).map_or(0, |t| t.bytes)
    }

    /// Pairs held.
    pub fn pairs(&self) -> usize {
        self.sources.values().map(|s| s.tenants.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.sources.is_empty()
    }

    /// Everything held.
    pub fn total(&self) -> Held {
        let mut t = Held::default();
        for s in self.sources.values() {
            for h in s.tenants.values() {
                t.entries += h.entries;
                t.bytes += h.bytes;
            }
        }
        t
    }

    pub fn add(&mut self, source: &str, tenant: &str, d: Held) {
        let cur = self.pair(source, tenant);
        self.set(
            source,
            tenant,
            Held {
                entries: cur.entries.saturating_add(d.entries),
                bytes: cur.bytes.saturating_add(d.bytes),
            },
        );
    }

    /// Takes `d` off a pair (never below zero); a pair left without entries is dropped.
    pub fn sub(&mut self, source: &str, tenant: &str, d: Held) {
        let cur = self.pair(source, tenant);
        self.set(
            source,
            tenant,
            Held {
                entries: cur.entries.saturating_sub(d.entries),
                bytes: cur.bytes.saturating_sub(d.bytes),
            },
        );
    }

    /// Sets a pair; one without entries is removed, and so are its source and tenant once
    /// they hold nothing else.
    pub fn set(&mut self, source: &str, tenant: &str, to: Held) {
        let cur = self.pair(source, tenant);
        let t = self.tenants.get(tenant).copied().unwrap_or_default();
        let t = Held {
            entries: t
                .entries
                .saturating_sub(cur.entries)
                .saturating_add(to.entries),
            bytes: t.bytes.saturating_sub(cur.bytes).saturating_add(to.bytes),
        };
        if t.entries == 0 {
            self.tenants.remove(tenant);
        } else if let Some(v) = self.tenants.get_mut(tenant) {
            *v = t;
        } else {
            self.tenants.insert(tenant.to_string(), t);
        }
        if to.entries == 0 {
            if let Some(s) = self.sources.get_mut(source) {
                s.bytes = s.bytes.saturating_sub(cur.bytes);
                s.tenants.remove(tenant);
                if s.tenants.is_empty() {
                    self.sources.remove(source);
                }
            }
            return;
        }
        if !self.sources.contains_key(source) {
            self.sources
                .insert(source.to_string(), SourceUsage::default());
        }
        let Some(s) = self.sources.get_mut(source) else {
            return;
        };
        s.bytes = s.bytes.saturating_sub(cur.bytes).saturating_add(to.bytes);
        if let Some(h) = s.tenants.get_mut(tenant) {
            *h = to;
        } else {
            s.tenants.insert(tenant.to_string(), to);
        }
    }
}

/// The pen's locks and its share counters in memory (a field of the store).
#[derive(Default)]
pub(crate) struct PenState {
    /// Serialises the pen's deletes (purges, releases, expiry): each reads entries and then
    /// deletes them with their bytes; two of them on one entry would count its bytes off twice.
    deletes: Mutex<()>,
    /// Held by every write that changes the share counters, from reading their current values
    /// to updating `held`: the group commit's puts and the deletes' batches.
    write: Mutex<()>,
    /// The share counters as they are on disk.
    held: Mutex<Usage>,
    loaded: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Store {
    /// Held across a read-then-delete of pen entries.
    pub(super) fn pen_guard(&self) -> MutexGuard<'_, ()> {
        lock(&self.pen.deletes)
    }

    /// Reads the share counters into memory, rebuilding them from the summaries when they do
    /// not add up to the pen's entry counter. Called as the pen starts; a write that comes
    /// first loads them itself.
    pub fn pen_shares_load(&self) -> Result<(), StoreError> {
        let _w = lock(&self.pen.write);
        self.pen_shares_load_locked()
    }

    fn pen_shares_load_locked(&self) -> Result<(), StoreError> {
        if self.pen.loaded.load(Ordering::SeqCst) {
            return Ok(());
        }
        let db = self.db()?;
        let cf = Self::cf(&db, keys::CF_QUARANTINE)?;
        let mut stored = Usage::default();
        let mut stored_keys = Vec::new();
        let mut readable = true;
        let mut ro = ReadOptions::default();
        ro.set_iterate_upper_bound(vec![keys::PEN_SHARE + 1]);
        let start = [keys::PEN_SHARE];
        for item in db.iterator_cf_opt(
            cf,
            ro,
            IteratorMode::From(&start, rocksdb::Direction::Forward),
        ) {
            let (k, v) = item.map_err(|e| classify(&e))?;
            match (keys::parse_pen_share(&k), Held::decode(&v)) {
                (Some((source, tenant)), Some(h)) => stored.add(source, tenant, h),
                _ => readable = false,
            }
            stored_keys.push(k.to_vec());
        }
        let (entries, _) = self.pen_totals()?;
        let usage = if readable && stored.total().entries == entries.max(0) as u64 {
            stored
        } else {
            tracing::warn!(
                pairs = stored_keys.len(),
                "the quarantine pen's share counters do not match its entries; rebuilding them from the entries"
            );
            let rebuilt = self.pen_shares_scan(&db)?;
            let mut batch = WriteBatch::default();
            for k in &stored_keys {
                batch.delete_cf(cf, k);
            }
            for (source, s) in &rebuilt.sources {
                for (tenant, h) in &s.tenants {
                    batch.put_cf(cf, keys::pen_share(source, tenant), h.encode());
                }
            }
            self.write(&db, batch, true)?;
            rebuilt
        };
        *lock(&self.pen.held) = usage;
        self.pen.loaded.store(true, Ordering::SeqCst);
        Ok(())
    }

    /// The shares of every summary, from a scan of the whole pen.
    fn pen_shares_scan(&self, db: &DB) -> Result<Usage, StoreError> {
        let cf = Self::cf(db, keys::CF_QUARANTINE)?;
        let mut ro = ReadOptions::default();
        ro.set_iterate_upper_bound(vec![keys::PEN_SUMMARY + 1]);
        let start = [keys::PEN_SUMMARY];
        let mut usage = Usage::default();
        for item in db.iterator_cf_opt(
            cf,
            ro,
            IteratorMode::From(&start, rocksdb::Direction::Forward),
        ) {
            let (_, v) = item.map_err(|e| classify(&e))?;
            if let Ok(s) = PenSummary::decode(&v) {
                usage.add(
                    &s.source_id,
                    &s.tenant,
                    Held {
                        entries: 1,
                        bytes: s.size,
                    },
                );
            }
        }
        Ok(usage)
    }

    /// Reads the share counters (what is on disk).
    pub fn pen_usage<R>(&self, f: impl FnOnce(&Usage) -> R) -> R {
        f(&lock(&self.pen.held))
    }

    /// Writes `batch` (synced) with the share counters changed by the entries it adds and the
    /// entries it deletes; the copy in memory follows once the batch is on disk.
    pub(super) fn pen_write(
        &self,
        db: &DB,
        mut batch: WriteBatch,
        added: &[&PenSummary],
        removed: &[PenSummary],
    ) -> Result<(), StoreError> {
        let _w = lock(&self.pen.write);
        self.pen_shares_load_locked()?;
        let cf = Self::cf(db, keys::CF_QUARANTINE)?;
        let mut delta: HashMap<(&str, &str), (i64, i64)> = HashMap::new();
        for (s, sign) in added
            .iter()
            .map(|s| (*s, 1i64))
            .chain(removed.iter().map(|s| (s, -1i64)))
        {
            let d = delta
                .entry((s.source_id.as_str(), s.tenant.as_str()))
                .or_default();
            d.0 += sign;
            d.1 += sign * s.size as i64;
        }
        let after: Vec<((&str, &str), Held)> = {
            let held = lock(&self.pen.held);
            delta
                .into_iter()
                .map(|((source, tenant), (de, dbytes))| {
                    let cur = held.pair(source, tenant);
                    let to = Held {
                        entries: (cur.entries as i64).saturating_add(de).max(0) as u64,
                        bytes: (cur.bytes as i64).saturating_add(dbytes).max(0) as u64,
                    };
                    ((source, tenant), to)
                })
                .collect()
        };
        for ((source, tenant), to) in &after {
            let k = keys::pen_share(source, tenant);
            if to.entries == 0 {
                batch.delete_cf(cf, k);
            } else {
                batch.put_cf(cf, k, to.encode());
            }
        }
        self.write(db, batch, true)?;
        let mut held = lock(&self.pen.held);
        for ((source, tenant), to) in after {
            held.set(source, tenant, to);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::temp_store;
    use crate::{PenFilter, PenWrite};

    fn entry(source: &str, tenant: &str, at: u64, size: u64) -> PenWrite {
        let id = uuid::Uuid::now_v7();
        PenWrite {
            summary: PenSummary {
                id,
                source_id: source.into(),
                tenant: tenant.into(),
                received_at: at,
                reason: "no_match".into(),
                size,
                method: "POST".into(),
                path: format!("/webhooks/{source}"),
                url_tenant: false,
            },
            envelope: vec![7; size as usize],
        }
    }

    fn share_keys(s: &Store) -> Vec<(String, String, Held)> {
        let db = s.db().unwrap();
        let cf = Store::cf(&db, keys::CF_QUARANTINE).unwrap();
        db.prefix_iterator_cf(cf, [keys::PEN_SHARE])
            .map(|i| i.unwrap())
            .take_while(|(k, _)| k.first() == Some(&keys::PEN_SHARE))
            .map(|(k, v)| {
                let (a, b) = keys::parse_pen_share(&k).unwrap();
                (a.to_string(), b.to_string(), Held::decode(&v).unwrap())
            })
            .collect()
    }

    #[test]
    fn usage_keeps_pair_source_and_tenant_sums_and_drops_what_is_empty() {
        let mut u = Usage::default();
        let one = |bytes| Held { entries: 1, bytes };
        u.add("a", "t1", one(10));
        u.add("a", "t2", one(5));
        u.add("b", "t1", one(7));
        assert_eq!(u.source_bytes("a"), 15);
        assert_eq!(u.source_tenants("a"), 2);
        assert_eq!(u.tenant_bytes("t1"), 17);
        assert_eq!(u.pairs(), 3);
        u.sub("a", "t1", one(10));
        assert_eq!(u.source_tenants("a"), 1);
        assert_eq!(u.tenant_bytes("t1"), 7);
        u.sub("b", "t1", one(7));
        assert_eq!(u.tenant_bytes("t1"), 0);
        assert!(!u.tenants.contains_key("t1"), "an empty tenant goes");
        assert!(!u.sources.contains_key("b"), "an empty source goes");
        // Never below zero, and taking from nothing leaves nothing behind.
        u.sub(
            "a",
            "t2",
            Held {
                entries: 9,
                bytes: 99,
            },
        );
        u.sub("zzz", "q", one(1));
        assert!(u.is_empty() && u.tenants.is_empty(), "{u:?}");
        assert_eq!(u.total(), Held::default());
    }

    #[test]
    fn puts_purges_and_a_reopen_keep_the_stored_shares_exact_and_delete_them_at_zero() {
        let (d, s) = temp_store();
        let ws = [
            entry("a", "t1", 10, 100),
            entry("a", "t1", 11, 50),
            entry("a", "t2", 12, 30),
            entry("b", "t1", 13, 20),
        ];
        s.pen_put(&ws).unwrap();
        s.pen_usage(|u| {
            assert_eq!(u.source_bytes("a"), 180);
            assert_eq!(u.tenant_bytes("t1"), 170);
            assert_eq!(
                u.pair("a", "t1"),
                Held {
                    entries: 2,
                    bytes: 150
                }
            );
        });
        assert_eq!(share_keys(&s).len(), 3);
        // Purge tenant t2 and one entry of (a, t1): t2's key goes, (a, t1) shrinks.
        let t2 = PenFilter {
            tenant: Some("t2".into()),
            ..Default::default()
        };
        assert_eq!(s.pen_purge(&t2, 10).unwrap().deleted, 1);
        let oldest = PenFilter {
            source_id: Some("a".into()),
            ..Default::default()
        };
        assert_eq!(s.pen_purge(&oldest, 1).unwrap().bytes, 100);
        let mut keys_now = share_keys(&s);
        keys_now.sort_by(|x, y| (&x.0, &x.1).cmp(&(&y.0, &y.1)));
        assert_eq!(
            keys_now,
            vec![
                (
                    "a".into(),
                    "t1".into(),
                    Held {
                        entries: 1,
                        bytes: 50
                    }
                ),
                (
                    "b".into(),
                    "t1".into(),
                    Held {
                        entries: 1,
                        bytes: 20
                    }
                ),
            ]
        );
        drop(s);
        let s = Store::open(&d.path().join("store")).unwrap();
        s.pen_shares_load().unwrap();
        s.pen_usage(|u| {
            assert_eq!(u.source_bytes("a"), 50);
            assert_eq!(u.tenant_bytes("t1"), 70);
            assert_eq!(u.tenant_bytes("t2"), 0);
        });
        // Everything purged: no share key is left.
        s.pen_purge(&PenFilter::default(), 100).unwrap();
        assert!(share_keys(&s).is_empty());
        assert!(s.pen_usage(|u| u.is_empty()));
    }

    #[test]
    fn shares_that_do_not_add_up_are_rebuilt_from_the_entries() {
        let (d, s) = temp_store();
        s.pen_put(&[entry("a", "t", 1, 40), entry("b", "u", 2, 60)])
            .unwrap();
        // As a store made before the shares: the pair keys are not there.
        let db = s.db().unwrap();
        let cf = Store::cf(&db, keys::CF_QUARANTINE).unwrap();
        let mut b = WriteBatch::default();
        b.delete_cf(cf, keys::pen_share("a", "t"));
        b.delete_cf(cf, keys::pen_share("b", "u"));
        // and one damaged pair that must go.
        b.put_cf(cf, keys::pen_share("gone", "t"), b"junk");
        db.write(b).unwrap();
        drop(db);
        drop(s);
        let s = Store::open(&d.path().join("store")).unwrap();
        s.pen_shares_load().unwrap();
        s.pen_usage(|u| {
            assert_eq!(u.source_bytes("a"), 40);
            assert_eq!(u.source_bytes("b"), 60);
            assert_eq!(u.source_bytes("gone"), 0);
        });
        assert_eq!(share_keys(&s).len(), 2, "rebuilt on disk too");
    }
}
