//! Fixtures for the store's own tests and, with the `testing` feature, for the gateway's
//! tests: a store in a temp dir, a hook to ingest, rows delivered or killed. Test code only
//! (compiled under `cfg(test)` or the `testing` feature); imports the store's public surface.

use crate::{Claimed, Envelope, ErrorClass, IngestRecord, IngestResult, Outcome, Store};

/// A hook of `tenant`/`source` with an empty JSON body, received at 1.
pub fn ingest_test_envelope(tenant: &str, source: &str) -> Envelope {
    Envelope {
        received_at: 1,
        ..Envelope::new(tenant, source, bytes::Bytes::from_static(b"{}"))
    }
}

/// `ingest_test_envelope` as one record for `commit_ingest`, to a single `log` sink.
pub fn ingest_test_record(tenant: &str, source: &str) -> IngestRecord {
    IngestRecord {
        envelope: ingest_test_envelope(tenant, source),
        sinks: vec!["log"],
        lanes: vec![],
        dedupe: None,
        skip_sinks: Vec::new(),
    }
}

pub fn temp_store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(&dir.path().join("store")).expect("open store");
    (dir, store)
}

/// Marks every claimed row delivered.
pub fn deliver(s: &Store, claimed: &[Claimed]) {
    let out: Vec<_> = claimed
        .iter()
        .map(|c| Outcome::Delivered {
            seq: c.seq,
            sink: c.sink,
            row: c.row.clone(),
        })
        .collect();
    s.apply_outcomes(&out, &Default::default()).unwrap();
}

/// Ingests `n` hooks for tenant and kills each at dead_at = base + i.
pub fn seed_dead(s: &Store, tenant: &str, source: &str, n: usize, base: u64, class: ErrorClass) {
    let recs: Vec<_> = (0..n)
        .map(|_| IngestRecord {
            envelope: ingest_test_envelope(tenant, source),
            sinks: vec!["http"],
            lanes: vec![],
            dedupe: None,
            skip_sinks: Vec::new(),
        })
        .collect();
    for r in s.commit_ingest(&recs, 1, false).unwrap() {
        assert!(matches!(r, IngestResult::Accepted { .. }));
    }
    let (claimed, _) = s.claim_due(tenant, 1, n, u64::MAX).unwrap();
    let outcomes: Vec<_> = claimed
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut row = c.row.clone();
            row.dead_at = Some(base + i as u64);
            row.error_class = Some(class);
            row.last_error = Some("boom".into());
            Outcome::Dead {
                seq: c.seq,
                sink: c.sink,
                row,
            }
        })
        .collect();
    s.apply_outcomes(&outcomes, &Default::default()).unwrap();
}
