//! What every row transition writes besides the row itself: counter deltas, the two
//! dead-index keys of a dead row, the hook's deletion with its last row. And the dead index
//! read side that the DLQ and replay jobs share: key ranges, the cursor, the filter matcher.
//!
//! `queue`, `dlq` and `jobs` use these; none of them uses another.

use std::collections::HashSet;

use ankusa_api::DeadFilter;
use rocksdb::{ColumnFamily, DB, IteratorMode, ReadOptions, WriteBatch};

use super::codec::{DeadSummary, DeliveryRow, ErrorClass};
use super::{Store, StoreError, classify, keys};

/// Merges the counter deltas of one row moving between pending and dead (`-1`, `0`, `1`).
pub(super) fn count(batch: &mut WriteBatch, row: &DeliveryRow, pending: i64, dead: i64) {
    if pending != 0 {
        batch.merge(keys::C_PENDING, pending.to_le_bytes());
        batch.merge(keys::c_pending_tenant(&row.tenant), pending.to_le_bytes());
        batch.merge(
            keys::c_pending_source(&row.source_id),
            pending.to_le_bytes(),
        );
    }
    if dead != 0 {
        batch.merge(keys::C_DEAD, dead.to_le_bytes());
        batch.merge(
            keys::C_DEAD_BYTES,
            dead.saturating_mul(row.size as i64).to_le_bytes(),
        );
        batch.merge(keys::c_dead_tenant(&row.tenant), dead.to_le_bytes());
        batch.merge(keys::c_dead_source(&row.source_id), dead.to_le_bytes());
    }
}

/// Counts a replayed row that settled (delivered, or dead again) against its job.
pub(super) fn count_replayed(batch: &mut WriteBatch, row: &DeliveryRow, delivered: bool) {
    if let Some(job) = &row.replay_id {
        let key = if delivered {
            keys::c_job_delivered(job)
        } else {
            keys::c_job_failed(job)
        };
        batch.merge(key, 1i64.to_le_bytes());
    }
}

/// The two dead-index keys of a dead row: all tenants, and its tenant's.
fn dead_keys(seq: u64, sink: u16, row: &DeliveryRow) -> [Vec<u8>; 2] {
    let dead_at = row.dead_at.unwrap_or(row.due_at);
    [
        keys::dead(dead_at, seq, sink),
        keys::dead_tenant(&row.tenant, dead_at, seq, sink),
    ]
}

/// Puts the two dead-index keys of a dead row.
pub(super) fn put_dead(
    batch: &mut WriteBatch,
    index: &ColumnFamily,
    seq: u64,
    sink: u16,
    row: &DeliveryRow,
) {
    let summary = DeadSummary {
        tenant: row.tenant.clone(),
        source_id: row.source_id.clone(),
        sink,
        sink_type: row.sink_type.clone(),
        error_class: row.error_class.unwrap_or(ErrorClass::Transient),
        hook_id: row.hook_id,
    }
    .encode();
    for k in dead_keys(seq, sink, row) {
        batch.put_cf(index, k, &summary);
    }
}

pub(super) fn delete_dead(
    batch: &mut WriteBatch,
    index: &ColumnFamily,
    seq: u64,
    sink: u16,
    row: &DeliveryRow,
) {
    for k in dead_keys(seq, sink, row) {
        batch.delete_cf(index, k);
    }
}

/// Whether a dead row (its index summary) is one the filter selects. The time bounds are the
/// scan's range, not checked here.
pub(super) fn matches(f: &DeadFilter, s: &DeadSummary) -> bool {
    f.source_id.as_deref().is_none_or(|x| x == s.source_id)
        && f.sink.is_none_or(|x| x == s.sink)
        && f.error_class.is_none_or(|x| x == s.error_class)
        && f.id.is_none_or(|x| x == s.hook_id)
        && f.tenant.as_deref().is_none_or(|x| x == s.tenant)
}

/// The dead-index cursor (`ankusa-format`, so the admin API's cursor parser is fuzzed).
pub use ankusa_format::cursor::DeadCursor;

/// A dead-index key of either index, parsed: its cursor.
pub(super) fn parse_dead(k: &[u8]) -> Option<DeadCursor> {
    let (dead_at, seq, sink) =
        keys::parse_dead(k).or_else(|| keys::parse_dead_tenant(k).map(|(_, a, s, i)| (a, s, i)))?;
    Some(DeadCursor::new(dead_at, seq, sink))
}

/// The index keys of rows dead in [`since`, `until`] (`until` absent: no end): in `x` for all
/// tenants, or in `X<tenant>\0` for one, so a tenant's scan never reads another's keys.
/// Returns [lower, upper).
pub(super) fn dead_range(
    tenant: Option<&str>,
    since: u64,
    until: Option<u64>,
) -> (Vec<u8>, Vec<u8>) {
    let end = until.filter(|&u| u < u64::MAX).map(|u| u + 1);
    match tenant {
        Some(t) => (
            keys::dead_tenant(t, since, 0, 0),
            match end {
                Some(e) => keys::dead_tenant(t, e, 0, 0),
                None => keys::prefix_end(&keys::dead_tenant_prefix(t)),
            },
        ),
        None => (
            keys::dead(since, 0, 0),
            match end {
                Some(e) => keys::dead(e, 0, 0),
                None => vec![keys::IX_DEAD + 1],
            },
        ),
    }
}

impl Store {
    /// Adds the deletion of hook `seq` to the batch when none of its rows remains outside
    /// `deleted`.
    pub(super) fn delete_hook_if_done(
        &self,
        db: &DB,
        batch: &mut WriteBatch,
        seq: u64,
        row: &DeliveryRow,
        deleted: &HashSet<(u64, u16)>,
    ) -> Result<(), StoreError> {
        let deliveries = Self::cf(db, keys::CF_DELIVERIES)?;
        let mut ro = ReadOptions::default();
        ro.set_iterate_upper_bound(keys::delivery(seq + 1, 0).to_vec());
        let it = db.iterator_cf_opt(
            deliveries,
            ro,
            IteratorMode::From(&keys::delivery(seq, 0), rocksdb::Direction::Forward),
        );
        for item in it {
            let (k, _) = item.map_err(|e| classify(&e))?;
            if let Some(key) = keys::parse_delivery(&k)
                && !deleted.contains(&key)
            {
                return Ok(());
            }
        }
        let hooks = Self::cf(db, keys::CF_HOOKS)?;
        let index = Self::cf(db, keys::CF_INDEX)?;
        // A hook not yet archived stays for the compactor, which reclaims it once it is.
        if db
            .get_pinned_cf(index, keys::archive_due(seq))
            .map_err(|e| classify(&e))?
            .is_some()
        {
            return Ok(());
        }
        batch.delete_cf(hooks, keys::hook(seq));
        // An archive replay queues a hook again under a new seq with the same id: the id then
        // names that copy, which keeps it.
        let points_here = db
            .get_pinned_cf(index, keys::hook_id(&row.hook_id))
            .map_err(|e| classify(&e))?
            .is_none_or(|v| keys::be64(&v) == Some(seq));
        if points_here {
            batch.delete_cf(index, keys::hook_id(&row.hook_id));
        }
        batch.merge(keys::C_HOOKS, (-1i64).to_le_bytes());
        batch.merge(keys::C_HOOK_BYTES, (-(row.size as i64)).to_le_bytes());
        Ok(())
    }
}

/// An ordering lane (tenant, source, sink index, lane key), as dispatch holds it: opaque, so
/// only the store knows its bytes (`keys::lane_id`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LaneId(Vec<u8>);

impl LaneId {
    pub(super) fn new(tenant: &str, source: &str, sink: u16, key: &str) -> LaneId {
        LaneId(keys::lane_id(tenant, source, sink, key))
    }

    /// The lane of an ordered row (`None` for a row of an unordered sink).
    pub(super) fn of(row: &DeliveryRow, sink: u16) -> Option<LaneId> {
        let key = row.lane.as_deref()?;
        Some(LaneId::new(&row.tenant, &row.source_id, sink, key))
    }

    pub(super) fn from_bytes(bytes: &[u8]) -> LaneId {
        LaneId(bytes.to_vec())
    }

    pub(super) fn bytes(&self) -> &[u8] {
        &self.0
    }
}
