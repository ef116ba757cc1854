//! Rows whose bytes do not decode. One damaged row must not stop the node: the reader that
//! meets it moves it to the corrupt index (`z<family>\0<key>` → the error and the bytes as
//! found), counts it (`c:corrupt`, exported as `ankusa_store_corrupt_rows_total`) and goes on
//! with the next row. `GET /v1/store/corrupt` lists what was set aside; `ankusa store check`
//! walks the whole store and reports (or, with `--repair`, sets aside) what does not decode.
//!
//! A delivery row set aside is an obligation that can no longer be met as stored: it is logged
//! at error level with its key, and its hook stays until an operator decides.

use base64::Engine;
use rocksdb::{DB, IteratorMode, ReadOptions, WriteBatch};
use serde::Serialize;

use super::codec::{self, CorruptRow, DeadSummary, DedupeEntry, DeliveryRow};
use super::{Store, StoreError, classify, index, keys};

/// The `default` column family: metadata, counters, replay jobs.
pub const DEFAULT_FAMILY: &str = "default";

/// One set-aside row, as the admin API and `store check` show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CorruptEntry {
    pub family: String,
    /// The row's key, hex.
    pub key: String,
    pub at: u64,
    pub error: String,
    /// Length of the bytes kept.
    pub size: usize,
}

/// What `Store::check` found.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CheckReport {
    /// Rows read, per family.
    pub rows: u64,
    /// Rows that do not decode (each named), set aside when repairing.
    pub damaged: Vec<CorruptEntry>,
    /// Whether the damaged rows were moved to the corrupt index.
    pub repaired: bool,
    /// Rows already in the corrupt index before this check.
    pub already_set_aside: u64,
}

impl Store {
    /// Adds to `batch` the move of a row that did not decode: deleted from its family, kept in
    /// the corrupt index with `why`, counted.
    pub(crate) fn set_aside(
        &self,
        db: &DB,
        batch: &mut WriteBatch,
        family: &str,
        key: &[u8],
        value: &[u8],
        why: &dyn std::fmt::Display,
    ) -> Result<(), StoreError> {
        let ix = Self::cf(db, keys::CF_INDEX)?;
        if family == DEFAULT_FAMILY {
            batch.delete(key);
        } else {
            batch.delete_cf(Self::cf(db, family)?, key);
        }
        let row = CorruptRow {
            at: ankusa_core::now_ms(),
            error: why.to_string(),
            value: base64::engine::general_purpose::STANDARD.encode(value),
        };
        batch.put_cf(ix, keys::corrupt(family, key), row.encode());
        batch.merge(keys::C_CORRUPT, 1i64.to_le_bytes());
        tracing::error!(
            family,
            key = %hex::encode(key),
            error = %why,
            "a stored row does not decode; moved to the corrupt index"
        );
        Ok(())
    }

    /// `set_aside` in a write of its own, for readers that hold no batch (DLQ pages, boot).
    /// Decodes the delivery row `(seq, sink)` read as `value`; one that does not decode is set
    /// aside in `batch` and `None` is returned, so the caller skips it like a missing row.
    pub(crate) fn row_or_set_aside(
        &self,
        db: &DB,
        batch: &mut WriteBatch,
        seq: u64,
        sink: u16,
        value: &[u8],
    ) -> Result<Option<DeliveryRow>, StoreError> {
        match DeliveryRow::decode(value) {
            Ok(row) => Ok(Some(row)),
            Err(e) => {
                let key = keys::delivery(seq, sink);
                self.set_aside(db, batch, keys::CF_DELIVERIES, &key, value, &e)?;
                Ok(None)
            }
        }
    }

    pub(crate) fn set_aside_now(
        &self,
        family: &str,
        key: &[u8],
        value: &[u8],
        why: &dyn std::fmt::Display,
    ) -> Result<(), StoreError> {
        let db = self.db()?;
        let mut batch = WriteBatch::default();
        self.set_aside(&db, &mut batch, family, key, value, why)?;
        self.write(&db, batch, true)
    }

    /// Writes `value` under `key` as it is, decoded or not: how tests of damaged state damage a
    /// real store. Not for anything else.
    #[doc(hidden)]
    pub fn write_raw(&self, family: &str, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        let db = self.db()?;
        let mut batch = WriteBatch::default();
        if family == DEFAULT_FAMILY {
            batch.put(key, value);
        } else {
            batch.put_cf(Self::cf(&db, family)?, key, value);
        }
        self.write(&db, batch, true)
    }

    /// Rows set aside since the store was made (the `c:corrupt` counter).
    pub fn corrupt_count(&self) -> Result<i64, StoreError> {
        self.counter(keys::C_CORRUPT)
    }

    /// Up to `limit` set-aside rows, oldest key first.
    pub fn corrupt_rows(&self, limit: usize) -> Result<Vec<CorruptEntry>, StoreError> {
        let db = self.db()?;
        let ix = Self::cf(&db, keys::CF_INDEX)?;
        let mut ro = ReadOptions::default();
        ro.set_iterate_upper_bound(vec![keys::IX_CORRUPT + 1]);
        let mut out = Vec::new();
        for item in db.iterator_cf_opt(
            ix,
            ro,
            IteratorMode::From(&[keys::IX_CORRUPT], rocksdb::Direction::Forward),
        ) {
            if out.len() >= limit {
                break;
            }
            let (k, v) = item.map_err(|e| classify(&e))?;
            let Some((family, key)) = keys::parse_corrupt(&k) else {
                continue;
            };
            let (at, error, size) = match CorruptRow::decode(&v) {
                Ok(r) => {
                    let size = base64::engine::general_purpose::STANDARD
                        .decode(&r.value)
                        .map(|b| b.len())
                        .unwrap_or(0);
                    (r.at, r.error, size)
                }
                Err(e) => (0, e.to_string(), v.len()),
            };
            out.push(CorruptEntry {
                family: family.to_string(),
                key: hex::encode(key),
                at,
                error,
                size,
            });
        }
        Ok(out)
    }

    /// Reads every row of every family and decodes it as its key says it should be. With
    /// `repair`, moves what does not decode to the corrupt index; otherwise changes nothing.
    pub fn check(&self, repair: bool) -> Result<CheckReport, StoreError> {
        let db = self.db()?;
        let mut report = CheckReport {
            repaired: repair,
            ..Default::default()
        };
        let mut damaged: Vec<(&'static str, Vec<u8>, Vec<u8>, StoreError)> = Vec::new();
        for family in keys::ALL_CFS.iter().copied().chain([DEFAULT_FAMILY]) {
            let it = if family == DEFAULT_FAMILY {
                db.iterator(IteratorMode::Start)
            } else {
                db.iterator_cf(Self::cf(&db, family)?, IteratorMode::Start)
            };
            for item in it {
                let (k, v) = item.map_err(|e| classify(&e))?;
                report.rows += 1;
                if family == keys::CF_INDEX && k.first() == Some(&keys::IX_CORRUPT) {
                    report.already_set_aside += 1;
                    continue;
                }
                if let Err(e) = check_row(family, &k, &v) {
                    damaged.push((family, k.to_vec(), v.to_vec(), e));
                }
            }
        }
        for (family, key, value, why) in damaged {
            report.damaged.push(CorruptEntry {
                family: family.to_string(),
                key: hex::encode(&key),
                at: ankusa_core::now_ms(),
                error: why.to_string(),
                size: value.len(),
            });
            if repair {
                self.set_aside_now(family, &key, &value, &why)?;
            }
        }
        Ok(report)
    }
}

/// Whether one row decodes as what its family and key say it is.
fn check_row(family: &str, k: &[u8], v: &[u8]) -> Result<(), StoreError> {
    let bad_key = || StoreError::Corrupt(format!("{family}: malformed key"));
    match family {
        keys::CF_HOOKS => {
            let seq = keys::be64(k).ok_or_else(bad_key)?;
            codec::decode_envelope(seq, v)?;
        }
        keys::CF_DELIVERIES => {
            keys::parse_delivery(k).ok_or_else(bad_key)?;
            DeliveryRow::decode(v)?;
        }
        keys::CF_INDEX => match k.first().copied() {
            Some(keys::IX_DUE) => {
                keys::parse_due(k).ok_or_else(bad_key)?;
            }
            Some(keys::IX_INFLIGHT) => {
                keys::parse_inflight(k).ok_or_else(bad_key)?;
            }
            Some(keys::IX_DEAD) => {
                index::parse_dead(k).ok_or_else(bad_key)?;
                DeadSummary::decode(v)?;
            }
            Some(keys::IX_DEDUPE) => {
                DedupeEntry::decode(v)?;
            }
            Some(keys::IX_DEDUPE_EXPIRY) => {
                keys::parse_dedupe_expiry(k).ok_or_else(bad_key)?;
            }
            Some(keys::IX_HOOK_ID) => {
                keys::be64(v).ok_or_else(|| {
                    StoreError::Corrupt("hook id index: value has the wrong length".into())
                })?;
            }
            Some(keys::IX_LANE_PENDING) => {
                keys::parse_lane_pending(k).ok_or_else(bad_key)?;
            }
            Some(keys::IX_LANE_HEAD) => {
                keys::be64(v).ok_or_else(|| {
                    StoreError::Corrupt("lane head: value has the wrong length".into())
                })?;
            }
            Some(keys::IX_DEAD_TENANT) => {
                keys::parse_dead_tenant(k).ok_or_else(bad_key)?;
            }
            Some(keys::IX_ARCHIVE_DUE) => {
                keys::parse_archive_seq(k).ok_or_else(bad_key)?;
            }
            Some(keys::IX_ARCHIVE_SEGMENT) => {
                keys::parse_archive_seq(k).ok_or_else(bad_key)?;
                ankusa_format::segment::SegmentRow::decode(v)?;
            }
            Some(keys::IX_ARCHIVE_HOOK) => {
                ankusa_format::segment::CatalogueEntry::decode(v)?;
            }
            _ => {}
        },
        _ => {
            if k.starts_with(keys::JOB_PREFIX) {
                super::job::StoredJob::decode(v)
                    .ok_or_else(|| StoreError::Corrupt("replay job: does not decode".into()))?;
            } else if k.starts_with(b"c:") && v.len() != 8 {
                return Err(StoreError::Corrupt(
                    "counter: value has the wrong length".into(),
                ));
            }
        }
    }
    Ok(())
}
