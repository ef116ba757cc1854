//! Ordering lanes in the store: the hand-over of a lane whose head cleared (its lowest waiting
//! row becomes the head, due now), heads given to lanes left without one, and the lanes' state
//! at start. A lane's rows wait under `lane_pending` keys; only its head is in the due index.
//! Split from `queue` (which calls `advance_lane` inside an outcome batch); imports the keys,
//! the row codec and the store's write path only.

use std::collections::HashMap;

use rocksdb::{DB, IteratorMode, ReadOptions, WriteBatch};

use super::codec::{DeliveryRow, RowState};
use super::index::LaneId;
use super::{Store, StoreError, classify, keys};

/// A lane whose head cleared (delivered or dead-lettered) in an outcome batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneAdvance {
    pub lane: LaneId,
    pub tenant: String,
    /// The next row became the head: (due at, seq); `None`: the lane is empty now.
    pub promoted: Option<(u64, u64)>,
}

/// Lanes with a head, and lanes with waiting rows but no head.
#[derive(Debug, Default)]
pub struct LaneState {
    pub heads: Vec<LaneId>,
    pub orphans: Vec<LaneId>,
}

impl Store {
    /// Adds to the batch the hand-over of a lane whose head (of `row`) cleared: its lowest
    /// waiting row becomes the head, due now; or the head pointer goes.
    pub(super) fn advance_lane(
        &self,
        db: &DB,
        batch: &mut WriteBatch,
        row: &DeliveryRow,
        sink: u16,
        now: u64,
        lane_floor: &HashMap<LaneId, u64>,
    ) -> Result<LaneAdvance, StoreError> {
        let key = row.lane.as_deref().unwrap_or_default();
        let lane = LaneId::new(&row.tenant, &row.source_id, sink, key);
        let floor = lane_floor.get(&lane).copied().unwrap_or(0);
        let promoted = self.promote_in_batch(db, batch, lane.bytes(), sink, now, floor)?;
        if promoted.is_none() {
            let ix = Self::cf(db, keys::CF_INDEX)?;
            batch.delete_cf(ix, keys::lane_head(lane.bytes()));
        }
        Ok(LaneAdvance {
            lane,
            tenant: row.tenant.clone(),
            promoted,
        })
    }

    /// Makes the lane's lowest waiting row its head (due `now`) in the batch.
    fn promote_in_batch(
        &self,
        db: &DB,
        batch: &mut WriteBatch,
        lane: &[u8],
        sink: u16,
        now: u64,
        floor: u64,
    ) -> Result<Option<(u64, u64)>, StoreError> {
        let ix = Self::cf(db, keys::CF_INDEX)?;
        let deliveries = Self::cf(db, keys::CF_DELIVERIES)?;
        // Starting at the floor skips the tombstones of the lane's earlier heads.
        let prefix = keys::lane_pending_prefix(lane);
        let start = keys::lane_pending(lane, floor);
        let mut ro = ReadOptions::default();
        ro.set_iterate_lower_bound(start.clone());
        ro.set_iterate_upper_bound(keys::prefix_end(&prefix));
        let mut it = db.iterator_cf_opt(
            ix,
            ro,
            IteratorMode::From(&start, rocksdb::Direction::Forward),
        );
        let (seq, mut next) = loop {
            let Some(item) = it.next() else {
                return Ok(None);
            };
            let (k, _) = item.map_err(|e| classify(&e))?;
            let Some((_, seq)) = keys::parse_lane_pending(&k) else {
                let e = StoreError::Corrupt("malformed lane key".into());
                self.set_aside(db, batch, keys::CF_INDEX, &k, &[], &e)?;
                continue;
            };
            batch.delete_cf(ix, &k);
            let Some(v) = db
                .get_pinned_cf(deliveries, keys::delivery(seq, sink))
                .map_err(|e| classify(&e))?
            else {
                tracing::warn!(seq, sink, "lane entry without its row dropped");
                return Ok(None);
            };
            match DeliveryRow::decode(&v) {
                Ok(row) => break (seq, row),
                Err(e) => {
                    // The lane goes on with its next row.
                    let dk = keys::delivery(seq, sink);
                    self.set_aside(db, batch, keys::CF_DELIVERIES, &dk, &v, &e)?;
                }
            }
        };
        next.due_at = now;
        next.state = RowState::Pending;
        batch.put_cf(deliveries, keys::delivery(seq, sink), next.encode());
        batch.put_cf(ix, keys::due(&next.tenant, now, seq, sink), []);
        batch.put_cf(ix, keys::lane_head(lane), seq.to_be_bytes());
        Ok(Some((now, seq)))
    }

    /// Gives a lane without a head its head. Returns the tenant and due time when it did.
    pub fn promote_lane(
        &self,
        lane: &LaneId,
        now: u64,
        floor: u64,
    ) -> Result<Option<(String, u64, u64)>, StoreError> {
        let lane = lane.bytes();
        let _rows = self.rows_guard();
        let db = self.db()?;
        let ix = Self::cf(&db, keys::CF_INDEX)?;
        if db
            .get_pinned_cf(ix, keys::lane_head(lane))
            .map_err(|e| classify(&e))?
            .is_some()
        {
            return Ok(None);
        }
        let Some(tenant) = keys::lane_tenant(lane).map(String::from) else {
            return Err(StoreError::Corrupt("malformed lane id".into()));
        };
        let sink =
            keys::lane_sink(lane).ok_or_else(|| StoreError::Corrupt("malformed lane id".into()))?;
        let mut batch = WriteBatch::default();
        let promoted = self.promote_in_batch(&db, &mut batch, lane, sink, now, floor)?;
        if promoted.is_some() {
            self.write(&db, batch, false)?;
        }
        Ok(promoted.map(|(at, seq)| (tenant, at, seq)))
    }

    /// Lanes with a head, and lanes with waiting rows but no head (an ingest whose hand-over
    /// to dispatch was cut by a restart). One seek per lane.
    pub fn lane_state(&self) -> Result<LaneState, StoreError> {
        let db = self.db()?;
        let ix = Self::cf(&db, keys::CF_INDEX)?;
        let mut heads = Vec::new();
        let mut ro = ReadOptions::default();
        ro.set_iterate_upper_bound(vec![keys::IX_LANE_HEAD + 1]);
        for item in db.iterator_cf_opt(
            ix,
            ro,
            IteratorMode::From(&[keys::IX_LANE_HEAD], rocksdb::Direction::Forward),
        ) {
            let (k, _) = item.map_err(|e| classify(&e))?;
            heads.push(LaneId::from_bytes(&k[1..]));
        }
        let mut orphans = Vec::new();
        let mut seek = vec![keys::IX_LANE_PENDING];
        loop {
            let mut ro = ReadOptions::default();
            ro.set_iterate_upper_bound(vec![keys::IX_LANE_PENDING + 1]);
            let mut it = db.iterator_cf_opt(
                ix,
                ro,
                IteratorMode::From(&seek, rocksdb::Direction::Forward),
            );
            let Some(item) = it.next() else { break };
            let (k, _) = item.map_err(|e| classify(&e))?;
            let Some((lane, _)) = keys::parse_lane_pending(&k) else {
                return Err(StoreError::Corrupt("malformed lane key".into()));
            };
            if !heads.iter().any(|h| h.bytes() == lane) {
                orphans.push(LaneId::from_bytes(lane));
            }
            seek = keys::prefix_end(&keys::lane_pending_prefix(lane));
        }
        Ok(LaneState { heads, orphans })
    }
}
