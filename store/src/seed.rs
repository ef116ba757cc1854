//! Bulk loading for benchmarks and tests: millions of dead rows written directly, with the
//! keys and counters dispatch would have written.

use rocksdb::WriteBatch;

use super::codec::{DeliveryRow, Envelope, ErrorClass, RowState, encode_envelope};
use super::{Store, StoreError, classify, index, keys};

/// One dead row for `Store::bulk_load_dead`.
#[derive(Debug, Clone)]
pub struct DeadSeed {
    pub tenant: String,
    pub source_id: String,
    pub sink: u16,
    pub sink_type: String,
    pub error_class: ErrorClass,
    pub dead_at: u64,
    pub body: bytes::Bytes,
}

impl Store {
    /// Writes dead rows (each with its hook) directly, unsynced and without the WAL, in large
    /// batches: for seeding benchmarks and tests with millions of rows. The keys are exactly the
    /// ones dispatch writes when it dead-letters a row, and counters are kept. Call
    /// `flush` before relying on the rows surviving a crash.
    pub fn bulk_load_dead(&self, rows: &[DeadSeed]) -> Result<(), StoreError> {
        let db = self.db()?;
        let hooks = Self::cf(&db, keys::CF_HOOKS)?;
        let deliveries = Self::cf(&db, keys::CF_DELIVERIES)?;
        let ix = Self::cf(&db, keys::CF_INDEX)?;
        let first = self.reserve_seqs(rows.len() as u64);
        let mut batch = WriteBatch::default();
        for (i, r) in rows.iter().enumerate() {
            let seq = first + i as u64;
            let env = Envelope {
                seq,
                received_at: r.dead_at.saturating_sub(1_000),
                content_type: Some("application/json".into()),
                ..Envelope::new(r.tenant.clone(), r.source_id.clone(), r.body.clone())
            };
            let id = env.id;
            batch.put_cf(hooks, keys::hook(seq), encode_envelope(&env));
            batch.put_cf(ix, keys::hook_id(&id), seq.to_be_bytes());
            let row = DeliveryRow {
                sink_type: r.sink_type.clone(),
                tenant: r.tenant.clone(),
                source_id: r.source_id.clone(),
                hook_id: id,
                size: r.body.len() as u64,
                state: RowState::Dead,
                attempts: 1,
                first_attempt_at: Some(r.dead_at.saturating_sub(500)),
                due_at: r.dead_at,
                last_error: Some(format!("{}: permanent: status 410", r.sink_type)),
                error_class: Some(r.error_class),
                dead_at: Some(r.dead_at),
                replay_id: None,
                lane: None,
            };
            batch.put_cf(deliveries, keys::delivery(seq, r.sink), row.encode());
            index::put_dead(&mut batch, ix, seq, r.sink, &row);
            index::count(&mut batch, &row, 0, 1);
            batch.merge(keys::C_HOOKS, 1i64.to_le_bytes());
            batch.merge(keys::C_HOOK_BYTES, (r.body.len() as i64).to_le_bytes());
        }
        batch.merge(
            keys::META_NEXT_SEQ,
            (first + rows.len() as u64).to_be_bytes(),
        );
        let mut wo = rocksdb::WriteOptions::default();
        wo.disable_wal(true);
        db.write_opt(batch, &wo).map_err(|e| classify(&e))
    }

    /// Flushes memtables to SST files (after a WAL-less bulk load).
    pub fn flush(&self) -> Result<(), StoreError> {
        let db = self.db()?;
        for name in keys::ALL_CFS {
            let cf = Self::cf(&db, name)?;
            db.flush_cf(cf).map_err(|e| classify(&e))?;
        }
        db.flush().map_err(|e| classify(&e))
    }
}
