//! The store's value decoders and key parsers over arbitrary bytes (what a damaged or foreign
//! row holds): no panic; whatever decodes re-encodes to something that decodes the same; keys
//! built from arbitrary parts parse back to those parts. Archive segments, their indexes and
//! catalogue rows too (what a blob store hands back is as hostile as a damaged row), and the
//! intake records of `wal.type: dual` (what a rebuild reads back from a broker).

#![no_main]

use ankusa_format::codec::{
    self, CorruptRow, DeadSummary, DedupeEntry, DeliveryRow, Envelope, ErrorClass, RowState,
    Verification,
};
use ankusa_format::keys;
use ankusa_format::segment::{self, CatalogueEntry, SegmentRow};
use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
enum Case {
    /// Stored values.
    Envelope(u64, Vec<u8>),
    Row(Vec<u8>),
    Summary(Vec<u8>),
    Dedupe(Vec<u8>),
    Corrupt(Vec<u8>),
    /// An archive segment, an `.idx` object, catalogue rows.
    Segment(Vec<u8>),
    SegmentIndex(Vec<u8>),
    Catalogue(Vec<u8>, Vec<u8>),
    /// A packed segment with one flipped byte.
    Packed(Vec<Vec<u8>>, u32),
    /// A record read back from the intake log, and a pending marker's key.
    Intake(Vec<u8>),
    /// A stored key of any family.
    Key(Vec<u8>, u64),
    /// Keys and values built from parts.
    Parts(Parts),
}

#[derive(Arbitrary, Debug)]
struct Parts {
    tenant: String,
    source: String,
    key: String,
    family: String,
    raw: Vec<u8>,
    a: u64,
    b: u64,
    sink: u16,
    id: [u8; 16],
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    flags: u8,
    attempts: u32,
}

fuzz_target!(|case: Case| match case {
    Case::Intake(v) => {
        if let Ok(r) = ankusa_format::intake::decode_intake(&v) {
            let again = ankusa_format::intake::decode_intake(
                &ankusa_format::intake::encode_intake(&r.meta, &r.encoded_envelope),
            )
            .expect("an encoded record decodes");
            assert_eq!(again.meta, r.meta);
            assert_eq!(again.envelope, r.envelope);
        }
        if let Some(seq) = keys::parse_intake_pending(&v) {
            assert_eq!(keys::intake_pending(seq).as_slice(), v.as_slice());
        }
    }
    Case::Envelope(seq, v) => {
        if let Ok(e) = codec::decode_envelope(seq, &v) {
            let again = codec::decode_envelope(seq, &codec::encode_envelope(&e))
                .expect("an encoded envelope decodes");
            assert_eq!(again, e);
        }
    }
    Case::Row(v) => {
        if let Ok(r) = DeliveryRow::decode(&v) {
            assert_eq!(DeliveryRow::decode(&r.encode()).expect("re-decodes"), r);
        }
    }
    Case::Summary(v) => {
        if let Ok(s) = DeadSummary::decode(&v) {
            assert_eq!(DeadSummary::decode(&s.encode()).expect("re-decodes"), s);
        }
    }
    Case::Dedupe(v) => {
        if let Ok(d) = DedupeEntry::decode(&v) {
            // Fixed width: the encoding is the bytes.
            assert_eq!(d.encode().as_slice(), v.as_slice());
        }
    }
    Case::Corrupt(v) => {
        if let Ok(c) = CorruptRow::decode(&v) {
            assert_eq!(CorruptRow::decode(&c.encode()).expect("re-decodes"), c);
        }
    }
    Case::Segment(v) => {
        if let Ok((h, recs)) = segment::decode_unchecked(&v) {
            assert_eq!(recs.len() as u64, h.count);
        }
    }
    Case::SegmentIndex(v) => {
        if let Ok(idx) = segment::decode_index(&v) {
            for e in &idx.entries {
                assert!(e.offset + e.len as u64 <= idx.size);
            }
        }
    }
    Case::Catalogue(entry, row) => {
        if let Ok(c) = CatalogueEntry::decode(&entry) {
            assert_eq!(c.encode(), entry);
        }
        if let Ok(r) = SegmentRow::decode(&row) {
            assert_eq!(SegmentRow::decode(&r.encode()).expect("re-decodes"), r);
        }
    }
    Case::Packed(bodies, flip) => packed(bodies, flip),
    Case::Key(k, at) => parse_key(&k, at),
    Case::Parts(p) => build(p),
});

/// Every parser over one key; what parses is rebuilt to the same bytes.
fn parse_key(k: &[u8], at: u64) {
    let _ = keys::be64(k);
    if let Some((seq, sink)) = keys::parse_delivery(k) {
        assert_eq!(keys::delivery(seq, sink).as_slice(), k);
    }
    if let Some((t, due_at, seq, sink)) = keys::parse_due(k) {
        assert_eq!(keys::due(t, due_at, seq, sink), k);
    }
    if let Some(r) = keys::due_rewound(k, at) {
        let (t, due_at, seq, sink) = keys::parse_due(&r).expect("a rewound key is a due key");
        assert_eq!((due_at, seq, sink), (at, 0, 0));
        assert!(k.starts_with(&keys::due_tenant_prefix(t)));
    }
    if let Some((seq, sink)) = keys::parse_inflight(k) {
        assert_eq!(keys::inflight(seq, sink).as_slice(), k);
    }
    if let Some((dead_at, seq, sink)) = keys::parse_dead(k) {
        assert_eq!(keys::dead(dead_at, seq, sink), k);
    }
    if let Some((t, dead_at, seq, sink)) = keys::parse_dead_tenant(k) {
        assert_eq!(keys::dead_tenant(t, dead_at, seq, sink), k);
    }
    if let Some((expires_at, dk)) = keys::parse_dedupe_expiry(k) {
        assert_eq!(keys::dedupe_expiry(expires_at, &dk), k);
    }
    let _ = keys::lane_tenant(k);
    let _ = keys::lane_sink(k);
    if let Some((lane, seq)) = keys::parse_lane_pending(k) {
        assert_eq!(keys::lane_pending(lane, seq), k);
    }
    if let Some((family, key)) = keys::parse_corrupt(k) {
        assert_eq!(keys::corrupt(family, key), k);
    }
    // A dedupe key as the expiry sweep takes it, whatever the index held.
    let _ = keys::dedupe_expiry(at, k);
    if !k.is_empty() && k.iter().any(|&b| b != 0xff) {
        let end = keys::prefix_end(k);
        assert!(end.as_slice() > k);
        assert!([k, &[0xff; 4][..]].concat() < end);
    }
}

/// Ids and dedupe keys never hold 0x00 (the separator); the key layout relies on it.
fn id(s: &str) -> String {
    s.chars().filter(|&c| c != '\0').collect()
}

fn build(p: Parts) {
    let (t, s, key) = (id(&p.tenant), id(&p.source), id(&p.key));
    let family = id(&p.family);
    let (a, b, sink) = (p.a, p.b, p.sink);

    assert_eq!(
        keys::parse_delivery(&keys::delivery(a, sink)),
        Some((a, sink))
    );
    assert_eq!(
        keys::parse_inflight(&keys::inflight(a, sink)),
        Some((a, sink))
    );
    assert_eq!(
        keys::parse_due(&keys::due(&t, a, b, sink)),
        Some((t.as_str(), a, b, sink))
    );
    assert_eq!(
        keys::parse_dead(&keys::dead(a, b, sink)),
        Some((a, b, sink))
    );
    assert_eq!(
        keys::parse_dead_tenant(&keys::dead_tenant(&t, a, b, sink)),
        Some((t.as_str(), a, b, sink))
    );
    let dk = keys::dedupe(&t, &s, &key);
    assert_eq!(
        keys::parse_dedupe_expiry(&keys::dedupe_expiry(a, &dk)),
        Some((a, dk))
    );
    let lane = keys::lane_id(&t, &s, sink, &key);
    assert_eq!(keys::lane_tenant(&lane), Some(t.as_str()));
    assert_eq!(keys::lane_sink(&lane), Some(sink));
    assert_eq!(
        keys::parse_lane_pending(&keys::lane_pending(&lane, a)),
        Some((lane.as_slice(), a))
    );
    assert_eq!(
        keys::parse_corrupt(&keys::corrupt(&family, &p.raw)),
        Some((family.as_str(), p.raw.as_slice()))
    );
    assert!(keys::due(&t, a, b, sink).starts_with(&keys::due_tenant_prefix(&t)));
    assert!(keys::dead_tenant(&t, a, b, sink) < keys::prefix_end(&keys::dead_tenant_prefix(&t)));

    let uuid = uuid::Uuid::from_bytes(p.id);
    let entry = DedupeEntry {
        id: uuid,
        expires_at: a,
    };
    assert_eq!(DedupeEntry::decode(&entry.encode()), Ok(entry));

    let class = match p.flags % 3 {
        0 => ErrorClass::Permanent,
        1 => ErrorClass::Throttled,
        _ => ErrorClass::Transient,
    };
    let opt = |bit: u8, s: &str| (p.flags & bit != 0).then(|| s.to_string());
    let row = DeliveryRow {
        sink_type: s.clone(),
        tenant: t.clone(),
        source_id: s.clone(),
        hook_id: uuid,
        size: a,
        state: match p.flags % 3 {
            0 => RowState::Pending,
            1 => RowState::Inflight,
            _ => RowState::Dead,
        },
        attempts: p.attempts,
        first_attempt_at: (p.flags & 8 != 0).then_some(b),
        due_at: b,
        last_error: opt(16, &p.key),
        error_class: (p.flags & 32 != 0).then_some(class),
        dead_at: (p.flags & 64 != 0).then_some(a),
        replay_id: opt(128, &p.family),
        lane: opt(4, &p.key),
    };
    assert_eq!(DeliveryRow::decode(&row.encode()), Ok(row));
    let summary = DeadSummary {
        tenant: p.tenant.clone(),
        source_id: p.source.clone(),
        sink,
        sink_type: p.family.clone(),
        error_class: class,
        hook_id: uuid,
    };
    assert_eq!(DeadSummary::decode(&summary.encode()), Ok(summary));

    let env = Envelope {
        id: uuid,
        seq: a,
        received_at: b,
        headers: p.headers.clone(),
        content_type: opt(1, &p.family),
        verification: Verification::OK,
        dedupe_key: opt(2, &p.key),
        traceparent: opt(4, &p.source),
        tracestate: opt(8, &p.tenant),
        ..Envelope::new(&p.tenant, &p.source, bytes::Bytes::from(p.body.clone()))
    };
    assert_eq!(
        codec::decode_envelope(a, &codec::encode_envelope(&env)),
        Ok(env)
    );
}

/// A segment packed from arbitrary bodies decodes back to them; with one byte flipped its
/// sha256 refuses it, and the unchecked decoder never panics on it.
fn packed(bodies: Vec<Vec<u8>>, flip: u32) {
    let envs: Vec<Envelope> = bodies
        .into_iter()
        .take(64)
        .enumerate()
        .map(|(i, b)| Envelope {
            received_at: i as u64,
            ..Envelope::new("t", "s", bytes::Bytes::from(b))
        })
        .collect();
    let enc: Vec<Vec<u8>> = envs.iter().map(codec::encode_envelope).collect();
    let recs: Vec<(u64, &[u8], uuid::Uuid, u64)> = envs
        .iter()
        .zip(&enc)
        .enumerate()
        .map(|(i, (e, b))| (i as u64 + 1, b.as_slice(), e.id, e.received_at))
        .collect();
    let p = segment::pack("node", 1, &recs);
    let (_, back) = segment::decode_segment(&p.bytes, &p.sha256).expect("a packed segment decodes");
    assert_eq!(back.len(), envs.len());
    for (r, e) in back.iter().zip(&envs) {
        assert_eq!(r.envelope.body, e.body);
    }
    let mut bad = p.bytes.clone();
    let at = flip as usize % bad.len();
    bad[at] ^= 1 << (flip % 8);
    assert!(segment::decode_segment(&bad, &p.sha256).is_err());
    let _ = segment::decode_unchecked(&bad);
}
