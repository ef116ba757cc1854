//! Check-ins to a blob store, packed: the bodies one tenant checks in together (the attempts of
//! one dispatch round run concurrently, so their check-ins arrive within milliseconds) share
//! one pack object. A tenant's open pack is written `linger` after its first body, or at once
//! when it reaches `max_bytes` or [`pack::MAX_ENTRIES`]; every check-in in it is answered once
//! the store holds the object, so a claim is stored before any message names it.
//!
//! A hook is checked in once: its other sinks and its retries within [`REMEMBERED`] get the same
//! reference (a concurrent check-in of the same hook waits for the first). Later, or after a
//! restart, a retry checks the body in again — a new claim in a new pack, which also renews a
//! body the bucket's lifecycle rule may have taken by then. Imports the leaf `pack` and `blob`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ankusa_core::{ClaimCheckRef, Envelope};
use bytes::Bytes;
use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use sha2::{Digest, Sha256};
use tokio::sync::watch;
use uuid::Uuid;

use super::pack::{self, Entry, PackId};
use crate::blob::BlobStore;
use crate::metrics::ClaimMetrics;

/// How long a hook's reference is handed to its other sinks and retries.
const REMEMBERED: Duration = Duration::from_secs(600);
/// Most hooks remembered.
const REMEMBERED_MAX: usize = 65_536;

type CheckIn = Shared<BoxFuture<'static, Result<ClaimCheckRef, String>>>;
/// `None` while the pack is being written; then its id, or why it was not stored.
type Written = Option<Result<PackId, String>>;

pub struct Packer {
    store: Arc<BlobStore>,
    linger: Duration,
    max_bytes: u64,
    open: Mutex<HashMap<String, OpenPack>>,
    hooks: Mutex<HashMap<Uuid, (Instant, CheckIn)>>,
    next_generation: std::sync::atomic::AtomicU64,
    metrics: ClaimMetrics,
}

struct OpenPack {
    generation: u64,
    entries: Vec<Entry>,
    bytes: u64,
    written: watch::Sender<Written>,
}

impl Packer {
    pub fn new(
        store: Arc<BlobStore>,
        linger: Duration,
        max_bytes: u64,
        metrics: ClaimMetrics,
    ) -> Arc<Packer> {
        Arc::new(Packer {
            store,
            linger,
            max_bytes,
            open: Mutex::new(HashMap::new()),
            hooks: Mutex::new(HashMap::new()),
            next_generation: std::sync::atomic::AtomicU64::new(0),
            metrics,
        })
    }

    /// `env`'s claim: the one already made for it, or a place in its tenant's open pack.
    pub async fn check_in(self: &Arc<Self>, env: &Envelope) -> Result<ClaimCheckRef, String> {
        let check_in = {
            let mut hooks = self.hooks.lock().unwrap_or_else(|p| p.into_inner());
            match hooks.get(&env.id) {
                Some((at, c)) if at.elapsed() < REMEMBERED => c.clone(),
                _ => {
                    if hooks.len() >= REMEMBERED_MAX {
                        hooks.retain(|_, (at, _)| at.elapsed() < REMEMBERED);
                        if hooks.len() >= REMEMBERED_MAX {
                            hooks.clear();
                        }
                    }
                    let c = self
                        .clone()
                        .join(env.tenant.clone(), env.id, env.body.clone())
                        .boxed()
                        .shared();
                    hooks.insert(env.id, (Instant::now(), c.clone()));
                    c
                }
            }
        };
        let result = check_in.clone().await;
        if result.is_err() {
            // A failed check-in is not handed to the next attempt: that one tries again.
            let mut hooks = self.hooks.lock().unwrap_or_else(|p| p.into_inner());
            if hooks.get(&env.id).is_some_and(|(_, c)| c.ptr_eq(&check_in)) {
                hooks.remove(&env.id);
            }
        }
        result
    }

    /// Adds `env`'s body to its tenant's open pack (now, not when first polled: `Shared` runs
    /// this future's body on the first poll, which `check_in` does at once).
    async fn join(
        self: Arc<Self>,
        tenant: String,
        hook_id: Uuid,
        body: Bytes,
    ) -> Result<ClaimCheckRef, String> {
        let sha256 = hex::encode(Sha256::digest(&body));
        let (position, mut written) = {
            let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
            let pack = open.entry(tenant.clone()).or_insert_with(|| {
                let generation = self
                    .next_generation
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let me = self.clone();
                let tenant = tenant.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(me.linger).await;
                    me.seal(&tenant, generation);
                });
                OpenPack {
                    generation,
                    entries: Vec::new(),
                    bytes: 0,
                    written: watch::channel(None).0,
                }
            });
            let position = pack.entries.len() as u16;
            pack.bytes += body.len() as u64;
            pack.entries.push(Entry {
                hook_id: hook_id.to_string(),
                body,
                sha256: sha256.clone(),
            });
            let full = pack.bytes >= self.max_bytes || pack.entries.len() >= pack::MAX_ENTRIES;
            let (generation, rx) = (pack.generation, pack.written.subscribe());
            drop(open);
            if full {
                self.seal(&tenant, generation);
            }
            (position, rx)
        };
        let id = loop {
            if let Some(r) = written.borrow_and_update().clone() {
                break r?;
            }
            written
                .changed()
                .await
                .map_err(|_| "claim check-in failed: the pack writer stopped".to_string())?;
        };
        Ok(ClaimCheckRef {
            urn: format!("urn:ankusa:claim:v1:{tenant}:{}", id.claim(position)),
            sha256,
        })
    }

    /// Takes `tenant`'s open pack if it is still the one of `generation` (a timer or a full
    /// pack must not seal a newer pack early) and writes it in the background.
    fn seal(self: &Arc<Self>, tenant: &str, generation: u64) {
        let pack = {
            let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
            match open.get(tenant) {
                Some(p) if p.generation == generation => open.remove(tenant),
                _ => None,
            }
        };
        let Some(pack) = pack else { return };
        let store = self.store.clone();
        let metrics = self.metrics.clone();
        let tenant = tenant.to_string();
        tokio::spawn(async move {
            let id = PackId::new(ankusa_core::now_ms(), fastrand::u64(..));
            let object: Bytes = pack::build(id, &tenant, &pack.entries);
            let stored = store.put(&id.key(&tenant), object).await;
            metrics
                .packs
                .with_label_values(&[if stored.is_ok() { "written" } else { "failed" }])
                .inc();
            if stored.is_ok() {
                metrics.pack_bodies.observe(pack.entries.len() as f64);
            }
            if let Err(e) = &stored {
                tracing::warn!(store = store.kind(), bodies = pack.entries.len(), error = %e, "claim pack write failed");
            }
            pack.written.send_replace(Some(
                stored
                    .map(|()| id)
                    .map_err(|e| format!("claim check-in failed: {e}")),
            ));
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blob::LocalStore;

    fn hook(tenant: &str, size: usize) -> Envelope {
        let mut env = ankusa_store::test_util::ingest_test_envelope(tenant, "src");
        env.body = Bytes::from(vec![size as u8; size]);
        env
    }

    async fn packs(store: &BlobStore, tenant: &str) -> Vec<String> {
        let listed = store
            .list(&format!("claims/tenant={tenant}/"), 100)
            .await
            .unwrap_or_default();
        listed.into_iter().map(|l| l.key).collect()
    }

    #[tokio::test]
    async fn concurrent_check_ins_of_a_tenant_share_a_pack() {
        let d = tempfile::tempdir().unwrap();
        let store = Arc::new(BlobStore::Local(LocalStore::new(d.path().to_path_buf())));
        let m = ClaimMetrics::unregistered();
        let p = Packer::new(store.clone(), Duration::from_millis(50), 1 << 30, m.clone());
        let hooks: Vec<Envelope> = (0..10)
            .map(|i| hook(if i % 2 == 0 { "acme" } else { "beta" }, 100 + i))
            .collect();
        let refs = futures::future::join_all(hooks.iter().map(|h| p.check_in(h))).await;
        let refs: Vec<ClaimCheckRef> = refs.into_iter().map(Result::unwrap).collect();
        assert_eq!(packs(&store, "acme").await.len(), 1);
        assert_eq!(packs(&store, "beta").await.len(), 1);
        assert_eq!(m.packs.with_label_values(&["written"]).get(), 2);
        assert_eq!(m.pack_bodies.get_sample_count(), 2);
        assert_eq!(m.pack_bodies.get_sample_sum(), 10.0);
        let claims: std::collections::HashSet<_> = refs.iter().map(|r| r.urn.clone()).collect();
        assert_eq!(claims.len(), 10);
        // Another sink of the same hook, and a retry: the same reference, nothing written.
        let again = p.check_in(&hooks[3]).await.unwrap();
        assert_eq!(again, refs[3]);
        assert_eq!(packs(&store, "beta").await.len(), 1);
    }

    #[tokio::test]
    async fn a_full_pack_is_written_without_waiting() {
        let d = tempfile::tempdir().unwrap();
        let store = Arc::new(BlobStore::Local(LocalStore::new(d.path().to_path_buf())));
        // An hour of linger: only reaching `max_bytes` writes these packs.
        let p = Packer::new(
            store.clone(),
            Duration::from_secs(3600),
            1000,
            ClaimMetrics::unregistered(),
        );
        let (a, b) = (hook("acme", 600), hook("acme", 601));
        let both = futures::future::join(p.check_in(&a), p.check_in(&b));
        let (ra, rb) = tokio::time::timeout(Duration::from_secs(10), both)
            .await
            .expect("a full pack is written at once");
        assert_ne!(ra.unwrap(), rb.unwrap());
        let alone = tokio::time::timeout(Duration::from_secs(10), p.check_in(&hook("acme", 5000)))
            .await
            .expect("a body over max_bytes is a pack by itself");
        assert!(alone.is_ok());
        assert_eq!(packs(&store, "acme").await.len(), 2);
    }
}
