//! Rebuilding a store from the intake log: every record of this node from the given offsets
//! whose hook id the store does not hold is committed again, with its original id, sink rows,
//! lanes and dedupe key. A record whose id is present (restored from a backup, or replayed
//! twice) is skipped, so no hook gets a second id; a dedupe key already taken collapses it.

use std::collections::BTreeMap;

use ankusa_core::now_ms;
use ankusa_format::intake::decode_intake;
use ankusa_store::{Dedupe, IngestRecord};

use super::Intake;

/// Records committed per synced write.
const BATCH: usize = 256;

#[derive(Debug, Default, Clone, Copy)]
pub struct RebuildReport {
    /// Records of this node read.
    pub read: u64,
    /// Hooks committed again.
    pub restored: u64,
    /// Records whose hook was already in the store.
    pub present: u64,
    /// Records that do not decode, or name a sink type this build does not know.
    pub skipped: u64,
}

/// Sink type names as `IngestRecord` holds them (a record read back is hostile: an unknown
/// name is refused, not leaked into a `'static`).
fn sink_type(name: &str) -> Option<&'static str> {
    ankusa_config::SINK_TYPES
        .iter()
        .copied()
        .find(|t| *t == name)
}

pub(super) fn run(intake: &Intake, from: &BTreeMap<i32, i64>) -> Result<RebuildReport, String> {
    let store = &intake.store;
    let mut report = RebuildReport::default();
    let mut recs: Vec<IngestRecord> = Vec::new();
    let mut encoded: Vec<Vec<u8>> = Vec::new();
    let flush = |recs: &mut Vec<IngestRecord>,
                 encoded: &mut Vec<Vec<u8>>,
                 report: &mut RebuildReport|
     -> Result<(), String> {
        if recs.is_empty() {
            return Ok(());
        }
        let committed = store
            .commit_encoded(recs, encoded, now_ms(), false)
            .map_err(|e| format!("commit: {e}"))?;
        for r in committed.results {
            match r {
                ankusa_store::IngestResult::Accepted { .. } => report.restored += 1,
                ankusa_store::IngestResult::Duplicate { .. } => report.present += 1,
            }
        }
        recs.clear();
        encoded.clear();
        Ok(())
    };
    // Ids of the batch not committed yet (a record the log holds twice, republished by a
    // reconciler, can fall in one batch); committed ones are found in the store, so the set
    // never holds more than one batch.
    let mut ids_here = std::collections::HashSet::new();
    intake
        .log
        .read_node(&intake.node, from, &intake.rt, |_p, _off, payload| {
            report.read += 1;
            let rec = match decode_intake(payload) {
                Ok(r) if r.meta.node == intake.node => r,
                _ => {
                    report.skipped += 1;
                    return Ok(());
                }
            };
            let id = rec.envelope.id;
            if ids_here.contains(&id) || store.has_hook_id(&id).map_err(|e| e.to_string())? {
                report.present += 1;
                return Ok(());
            }
            let sinks: Option<Vec<&'static str>> =
                rec.meta.sinks.iter().map(|s| sink_type(s)).collect();
            let Some(sinks) = sinks else {
                report.skipped += 1;
                return Ok(());
            };
            ids_here.insert(id);
            recs.push(IngestRecord {
                envelope: rec.envelope,
                sinks,
                lanes: rec.meta.lanes,
                dedupe: rec.meta.dedupe.map(|d| Dedupe {
                    key: d.key,
                    ttl_ms: d.ttl_ms,
                    source_wide: d.source_wide,
                }),
                skip_sinks: rec.meta.skip_sinks,
            });
            encoded.push(rec.encoded_envelope);
            if recs.len() >= BATCH {
                flush(&mut recs, &mut encoded, &mut report)?;
            }
            Ok(())
        })?;
    flush(&mut recs, &mut encoded, &mut report)?;
    Ok(report)
}
