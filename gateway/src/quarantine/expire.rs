//! The pen's expiry: every `quarantine.expire_interval_ms`, entries received more than
//! `quarantine.retention_hours` ago are deleted, oldest first. A pass is a run of purges of the
//! entries received up to its cutoff (`Store::pen_purge` with `until`): each a synced batch of
//! at most `BATCH` entries that updates the pen's totals and its shares with them, at most
//! `PER_PASS` entries a pass (a pass that stops there is followed by the next one at once). The
//! removals count in `ankusa_quarantine_expired_total`. The pass runs on a blocking thread of its
//! own: it never holds up the pen's group commit longer than one batch's write.

use std::sync::Arc;
use std::time::Duration;

use ankusa_store::{PenFilter, PenPurged, Store, StoreError};

use crate::live::ConfigHandle;

use super::Pen;

/// Entries one synced batch of the expiry deletes at most.
pub const BATCH: usize = 1_000;
/// Entries one pass deletes at most.
pub const PER_PASS: usize = 10_000;

/// Deletes the entries received at or before `cutoff` (unix ms), oldest first, at most
/// `PER_PASS`; what it removed, and whether it stopped at `PER_PASS`.
pub fn pass(store: &Store, pen: &Pen, cutoff: u64) -> Result<(PenPurged, bool), StoreError> {
    let expired = PenFilter {
        until: Some(cutoff),
        ..Default::default()
    };
    let mut done = PenPurged::default();
    while (done.deleted as usize) < PER_PASS {
        let limit = BATCH.min(PER_PASS - done.deleted as usize);
        let p = store.pen_purge(&expired, limit)?;
        pen.removed(p);
        pen.metrics.expired.inc_by(p.deleted);
        done.deleted += p.deleted;
        done.bytes += p.bytes;
        if (p.deleted as usize) < limit {
            return Ok((done, false));
        }
    }
    Ok((done, true))
}

/// Runs the expiry for as long as the process does (the keys are read every pass, so a reload
/// applies them at the next one); `now_ms` is the clock the cutoff is taken from.
pub fn spawn(
    store: Arc<Store>,
    pen: Arc<Pen>,
    config: Arc<ConfigHandle>,
    now_ms: impl Fn() -> u64 + Send + 'static,
) {
    tokio::spawn(async move {
        loop {
            let q = config.live().config.quarantine.clone();
            let cutoff = now_ms().saturating_sub(q.retention_ms());
            let (store, pen) = (store.clone(), pen.clone());
            let more = match tokio::task::spawn_blocking(move || pass(&store, &pen, cutoff)).await {
                Ok(Ok((p, more))) => {
                    if p.deleted > 0 {
                        tracing::info!(
                            deleted = p.deleted,
                            bytes = p.bytes,
                            "expired quarantine entries deleted"
                        );
                    }
                    more
                }
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "quarantine expiry failed; retried at the next pass");
                    false
                }
                Err(e) => {
                    tracing::error!(error = %e, "quarantine expiry pass panicked");
                    false
                }
            };
            if !more {
                tokio::time::sleep(Duration::from_millis(q.expire_interval_ms.max(1))).await;
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use ankusa_store::PenSummary;
    use ankusa_store::PenWrite;
    use ankusa_store::test_util::temp_store;

    fn write(source: &str, at: u64) -> PenWrite {
        PenWrite {
            summary: PenSummary {
                id: uuid::Uuid::now_v7(),
                source_id: source.into(),
                tenant: "default".into(),
                received_at: at,
                reason: "no_match".into(),
                size: 10,
                method: "POST".into(),
                path: "/webhooks/x".into(),
                url_tenant: false,
            },
            envelope: vec![0; 10],
        }
    }

    #[test]
    fn a_pass_deletes_only_what_is_old_bounded_and_frees_every_counter() {
        let (_d, store) = temp_store();
        let store = Arc::new(store);
        let pen = Pen::start(store.clone(), &prometheus::Registry::new()).unwrap();
        let old: Vec<PenWrite> = (0..PER_PASS as u64 + 5)
            .map(|i| write(if i % 2 == 0 { "a" } else { "b" }, 1_000 + i))
            .collect();
        let new: Vec<PenWrite> = (0..3).map(|i| write("a", 50_000 + i)).collect();
        for chunk in old.chunks(2_000) {
            store.pen_put(chunk).unwrap();
        }
        store.pen_put(&new).unwrap();
        // The pen was started before these writes (done by hand here): tell it.
        let n = (old.len() + new.len()) as i64;
        pen.entries
            .fetch_add(n, std::sync::atomic::Ordering::SeqCst);
        pen.bytes
            .fetch_add(n as u64 * 10, std::sync::atomic::Ordering::SeqCst);

        let (p, more) = pass(&store, &pen, 49_999).unwrap();
        assert_eq!((p.deleted as usize, more), (PER_PASS, true), "bounded");
        let (p, more) = pass(&store, &pen, 49_999).unwrap();
        assert_eq!((p.deleted, p.bytes, more), (5, 50, false));
        assert_eq!(pen.metrics.expired.get(), PER_PASS as u64 + 5);
        assert_eq!(store.pen_totals().unwrap(), (3, 30));
        assert_eq!((pen.entries(), pen.bytes()), (3, 30));
        store.pen_usage(|u| {
            assert_eq!(u.source_bytes("a"), 30);
            assert_eq!(u.source_bytes("b"), 0);
            assert_eq!(u.tenant_bytes("default"), 30);
        });
        // Nothing left to expire: the newer entries stay.
        assert_eq!(pass(&store, &pen, 49_999).unwrap().0.deleted, 0);
        assert_eq!(store.pen_totals().unwrap().0, 3);
    }
}
