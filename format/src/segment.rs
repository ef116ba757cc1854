//! Archive segments: many hooks packed into one blob-store object (`.seg`), its sibling index
//! (`.idx`), and the catalogue rows the store keeps about both.
//!
//! A segment is self-describing: a magic, a JSON header (node, seq range, count, receive-time
//! range) and the records, each its seq, its length and the stored envelope bytes unchanged
//! (`codec::encode_envelope`), so a body comes back byte-identical. The whole object's sha256
//! is kept in the index and in the store's catalogue; every read of a whole segment checks it,
//! and a ranged read of one record checks the record's own sha256. Decoding trusts nothing it
//! reads: every length is checked against what is left, every count against a cap.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::FormatError;
use crate::codec::{self, Envelope};

/// `ANKSEG` + format 1.
pub const SEGMENT_MAGIC: [u8; 8] = *b"ANKSEG\x00\x01";
pub const SEGMENT_FORMAT: u32 = 1;
/// Records one segment may hold.
pub const MAX_RECORDS: usize = 1_000_000;
/// Bytes of a segment's JSON header at most.
pub const MAX_HEADER_BYTES: usize = 64 * 1024;
/// Bytes of a segment (or an index) a node reads at most.
pub const MAX_SEGMENT_BYTES: u64 = 64 * 1024 * 1024;

fn corrupt(why: impl Into<String>) -> FormatError {
    FormatError::Corrupt(format!("archive segment: {}", why.into()))
}

/// A segment's header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentHeader {
    pub format: u32,
    /// `node.instance` of the node that wrote it.
    pub node: String,
    pub first_seq: u64,
    pub last_seq: u64,
    pub count: u64,
    pub min_received_at: u64,
    pub max_received_at: u64,
    pub created_at: u64,
}

/// Where one record sits in its segment: the envelope bytes at `offset..offset + len`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexEntry {
    pub seq: u64,
    pub id: Uuid,
    pub received_at: u64,
    pub offset: u64,
    pub len: u32,
    /// sha256 of the record's envelope bytes, hex.
    pub sha256: String,
}

/// The `.idx` object beside a segment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentIndex {
    pub format: u32,
    pub node: String,
    /// The segment object's key, relative to the store's root.
    pub segment: String,
    /// sha256 of the whole segment object, hex.
    pub sha256: String,
    pub size: u64,
    pub entries: Vec<IndexEntry>,
}

/// A packed segment, ready to upload.
#[derive(Debug, Clone)]
pub struct Packed {
    pub header: SegmentHeader,
    pub bytes: Vec<u8>,
    pub sha256: [u8; 32],
    pub entries: Vec<IndexEntry>,
}

/// Packs `(seq, encoded envelope, id, received_at)` records, in ascending seq order.
pub fn pack(node: &str, created_at: u64, records: &[(u64, &[u8], Uuid, u64)]) -> Packed {
    let first_seq = records.first().map(|r| r.0).unwrap_or(0);
    let last_seq = records.last().map(|r| r.0).unwrap_or(0);
    let header = SegmentHeader {
        format: SEGMENT_FORMAT,
        node: node.to_string(),
        first_seq,
        last_seq,
        count: records.len() as u64,
        min_received_at: records.iter().map(|r| r.3).min().unwrap_or(0),
        max_received_at: records.iter().map(|r| r.3).max().unwrap_or(0),
        created_at,
    };
    let head = serde_json::to_vec(&header).expect("segment header serialises");
    let body: usize = records.iter().map(|r| 12 + r.1.len()).sum();
    let mut bytes = Vec::with_capacity(12 + head.len() + body);
    bytes.extend_from_slice(&SEGMENT_MAGIC);
    bytes.extend_from_slice(&(head.len() as u32).to_be_bytes());
    bytes.extend_from_slice(&head);
    let mut entries = Vec::with_capacity(records.len());
    for (seq, env, id, received_at) in records {
        bytes.extend_from_slice(&seq.to_be_bytes());
        bytes.extend_from_slice(&(env.len() as u32).to_be_bytes());
        let offset = bytes.len() as u64;
        bytes.extend_from_slice(env);
        entries.push(IndexEntry {
            seq: *seq,
            id: *id,
            received_at: *received_at,
            offset,
            len: env.len() as u32,
            sha256: hex::encode(Sha256::digest(env)),
        });
    }
    let sha256: [u8; 32] = Sha256::digest(&bytes).into();
    Packed {
        header,
        bytes,
        sha256,
        entries,
    }
}

impl Packed {
    /// The `.idx` object for this segment stored under `segment_key`.
    pub fn index(&self, segment_key: &str) -> SegmentIndex {
        SegmentIndex {
            format: SEGMENT_FORMAT,
            node: self.header.node.clone(),
            segment: segment_key.to_string(),
            sha256: hex::encode(self.sha256),
            size: self.bytes.len() as u64,
            entries: self.entries.clone(),
        }
    }
}

/// One record of a decoded segment.
#[derive(Debug, Clone)]
pub struct Record {
    pub seq: u64,
    pub envelope: Envelope,
}

/// Checks a whole segment against its expected sha256 and decodes every record.
pub fn decode_segment(
    bytes: &[u8],
    expected_sha256: &[u8; 32],
) -> Result<(SegmentHeader, Vec<Record>), FormatError> {
    let got: [u8; 32] = Sha256::digest(bytes).into();
    if &got != expected_sha256 {
        return Err(corrupt(
            "sha256 mismatch (the object is not the segment that was written)",
        ));
    }
    decode_unchecked(bytes)
}

/// Decodes a segment without the sha256 check (the fuzz target's entry, and the check's
/// second half).
pub fn decode_unchecked(bytes: &[u8]) -> Result<(SegmentHeader, Vec<Record>), FormatError> {
    if bytes.len() as u64 > MAX_SEGMENT_BYTES {
        return Err(corrupt("larger than 64 MiB"));
    }
    if bytes.len() < 12 || bytes[..8] != SEGMENT_MAGIC {
        return Err(corrupt("not a segment (magic)"));
    }
    let head_len = u32::from_be_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize;
    if head_len > MAX_HEADER_BYTES || 12 + head_len > bytes.len() {
        return Err(corrupt("header length out of bounds"));
    }
    let header: SegmentHeader = serde_json::from_slice(&bytes[12..12 + head_len])
        .map_err(|_| corrupt("header does not decode"))?;
    if header.format != SEGMENT_FORMAT {
        return Err(corrupt(format!("unknown format {}", header.format)));
    }
    if header.count as usize > MAX_RECORDS || header.first_seq > header.last_seq {
        return Err(corrupt("header counts out of bounds"));
    }
    let mut at = 12 + head_len;
    let mut records = Vec::with_capacity((header.count as usize).min(4096));
    let mut prev: Option<u64> = None;
    while at < bytes.len() {
        if records.len() >= header.count as usize {
            return Err(corrupt("more records than the header counts"));
        }
        if bytes.len() - at < 12 {
            return Err(corrupt("truncated record header"));
        }
        let seq = u64::from_be_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        let len = u32::from_be_bytes(bytes[at + 8..at + 12].try_into().expect("4 bytes")) as usize;
        at += 12;
        if len > bytes.len() - at {
            return Err(corrupt("record length out of bounds"));
        }
        if seq < header.first_seq || seq > header.last_seq || prev.is_some_and(|p| seq <= p) {
            return Err(corrupt(
                "record seq out of order or outside the header's range",
            ));
        }
        prev = Some(seq);
        let envelope = codec::decode_envelope(seq, &bytes[at..at + len])?;
        records.push(Record { seq, envelope });
        at += len;
    }
    if records.len() as u64 != header.count {
        return Err(corrupt("fewer records than the header counts"));
    }
    Ok((header, records))
}

/// Checks one record read with a ranged GET against its catalogued sha256 and decodes it.
pub fn decode_record(
    seq: u64,
    bytes: &[u8],
    expected_sha256: &[u8; 32],
) -> Result<Envelope, FormatError> {
    let got: [u8; 32] = Sha256::digest(bytes).into();
    if &got != expected_sha256 {
        return Err(corrupt("record sha256 mismatch"));
    }
    codec::decode_envelope(seq, bytes)
}

/// Decodes an `.idx` object, checking every entry against the segment size it declares.
pub fn decode_index(bytes: &[u8]) -> Result<SegmentIndex, FormatError> {
    if bytes.len() as u64 > MAX_SEGMENT_BYTES {
        return Err(corrupt("index larger than 64 MiB"));
    }
    let idx: SegmentIndex =
        serde_json::from_slice(bytes).map_err(|_| corrupt("index does not decode"))?;
    if idx.format != SEGMENT_FORMAT {
        return Err(corrupt(format!("unknown index format {}", idx.format)));
    }
    if idx.entries.len() > MAX_RECORDS || idx.size > MAX_SEGMENT_BYTES {
        return Err(corrupt("index counts out of bounds"));
    }
    if parse_sha256(&idx.sha256).is_none() {
        return Err(corrupt("index sha256 is not 64 hex digits"));
    }
    let mut prev_end = 0u64;
    for e in &idx.entries {
        let end = e.offset.checked_add(e.len as u64);
        if e.offset < prev_end
            || end.is_none_or(|end| end > idx.size)
            || parse_sha256(&e.sha256).is_none()
        {
            return Err(corrupt("index entry out of bounds"));
        }
        prev_end = end.unwrap_or(u64::MAX);
    }
    Ok(idx)
}

pub fn parse_sha256(hex_text: &str) -> Option<[u8; 32]> {
    let v = hex::decode(hex_text).ok()?;
    v.try_into().ok()
}

/// The store's row about one uploaded segment (`keys::archive_segment(first_seq)`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentRow {
    /// The segment object's key (relative to the blob store's root).
    pub key: String,
    pub first_seq: u64,
    pub last_seq: u64,
    pub count: u64,
    pub size: u64,
    /// sha256 of the whole object, hex.
    pub sha256: String,
    pub min_received_at: u64,
    pub max_received_at: u64,
    pub created_at: u64,
}

impl SegmentRow {
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("segment row serialises")
    }
    pub fn decode(v: &[u8]) -> Result<SegmentRow, FormatError> {
        let row: SegmentRow = serde_json::from_slice(v)
            .map_err(|_| corrupt("catalogue segment row does not decode"))?;
        if parse_sha256(&row.sha256).is_none() || row.size > MAX_SEGMENT_BYTES {
            return Err(corrupt("catalogue segment row out of bounds"));
        }
        Ok(row)
    }
    pub fn sha256(&self) -> [u8; 32] {
        parse_sha256(&self.sha256).unwrap_or([0; 32])
    }
    /// Whether any hook of the segment was received in `[from, to)`.
    pub fn overlaps(&self, from: u64, to: u64) -> bool {
        self.max_received_at >= from && self.min_received_at < to
    }
}

/// The store's row about one archived hook (`keys::archive_hook(id)`): its segment and where
/// its record sits, for a ranged GET, and its tenant, so a tenant-limited reader is refused
/// before the blob store is touched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogueEntry {
    /// The segment's `first_seq` (the key of its `SegmentRow`).
    pub segment: u64,
    pub seq: u64,
    pub offset: u64,
    pub len: u32,
    pub received_at: u64,
    pub sha256: [u8; 32],
    /// The hook's tenant; `None` in entries written before it was recorded (and for a tenant
    /// longer than 255 bytes, which a valid id never is).
    pub tenant: Option<String>,
}

/// The fixed part; a tenant follows as one length byte and its bytes.
const CATALOGUE_ENTRY_LEN: usize = 8 * 4 + 4 + 32;

impl CatalogueEntry {
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(CATALOGUE_ENTRY_LEN + 65);
        v.extend_from_slice(&self.segment.to_be_bytes());
        v.extend_from_slice(&self.seq.to_be_bytes());
        v.extend_from_slice(&self.offset.to_be_bytes());
        v.extend_from_slice(&self.received_at.to_be_bytes());
        v.extend_from_slice(&self.len.to_be_bytes());
        v.extend_from_slice(&self.sha256);
        if let Some(t) = self.tenant.as_deref().filter(|t| t.len() <= 255) {
            v.push(t.len() as u8);
            v.extend_from_slice(t.as_bytes());
        }
        v
    }
    pub fn decode(v: &[u8]) -> Result<CatalogueEntry, FormatError> {
        if v.len() < CATALOGUE_ENTRY_LEN {
            return Err(corrupt("catalogue entry has the wrong length"));
        }
        let tenant = match &v[CATALOGUE_ENTRY_LEN..] {
            [] => None,
            [n, rest @ ..] if rest.len() == *n as usize => Some(
                std::str::from_utf8(rest)
                    .map_err(|_| corrupt("catalogue entry tenant is not UTF-8"))?
                    .to_string(),
            ),
            _ => return Err(corrupt("catalogue entry has the wrong length")),
        };
        let u = |i: usize| u64::from_be_bytes(v[i..i + 8].try_into().expect("8 bytes"));
        Ok(CatalogueEntry {
            segment: u(0),
            seq: u(8),
            offset: u(16),
            received_at: u(24),
            len: u32::from_be_bytes(v[32..36].try_into().expect("4 bytes")),
            sha256: v[36..68].try_into().expect("32 bytes"),
            tenant,
        })
    }
}

/// `dt=YYYY-MM-DD` of a unix-ms time (UTC), for the segment's key.
pub fn day_of(unix_ms: u64) -> String {
    let days = (unix_ms / 86_400_000) as i64;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn env(body: &'static [u8], at: u64) -> Envelope {
        Envelope {
            received_at: at,
            ..Envelope::new("t", "s", Bytes::from_static(body))
        }
    }

    fn packed() -> (Packed, Vec<Envelope>) {
        let envs = vec![env(b"{\"a\":1}", 10), env(b"\x00\xffbinary", 20)];
        let enc: Vec<Vec<u8>> = envs.iter().map(codec::encode_envelope).collect();
        let recs: Vec<(u64, &[u8], Uuid, u64)> = envs
            .iter()
            .zip(&enc)
            .enumerate()
            .map(|(i, (e, b))| (5 + i as u64, b.as_slice(), e.id, e.received_at))
            .collect();
        (pack("node-0", 99, &recs), envs)
    }

    #[test]
    fn round_trips_bodies_byte_for_byte_and_by_range() {
        let (p, envs) = packed();
        let (h, recs) = decode_segment(&p.bytes, &p.sha256).unwrap();
        assert_eq!((h.first_seq, h.last_seq, h.count), (5, 6, 2));
        assert_eq!((h.min_received_at, h.max_received_at), (10, 20));
        for (r, e) in recs.iter().zip(&envs) {
            assert_eq!(r.envelope.body, e.body);
            assert_eq!(r.envelope.id, e.id);
        }
        let idx = decode_index(&serde_json::to_vec(&p.index("k.seg")).unwrap()).unwrap();
        let e = &idx.entries[1];
        let range = &p.bytes[e.offset as usize..(e.offset + e.len as u64) as usize];
        let one = decode_record(e.seq, range, &parse_sha256(&e.sha256).unwrap()).unwrap();
        assert_eq!(one.body, envs[1].body);
    }

    #[test]
    fn a_flipped_byte_is_caught_by_the_sha256() {
        let (p, _) = packed();
        let mut bad = p.bytes.clone();
        let n = bad.len() - 3;
        bad[n] ^= 0x40;
        let e = decode_segment(&bad, &p.sha256).unwrap_err();
        assert!(e.to_string().contains("sha256"), "{e}");
    }

    #[test]
    fn hostile_lengths_are_refused_not_trusted() {
        let (p, _) = packed();
        for cut in [0, 7, 12, 20, p.bytes.len() - 1] {
            assert!(decode_unchecked(&p.bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut huge = p.bytes.clone();
        huge[8..12].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(decode_unchecked(&huge).is_err());
        let mut idx = p.index("k");
        idx.entries[0].offset = u64::MAX - 1;
        assert!(decode_index(&serde_json::to_vec(&idx).unwrap()).is_err());
    }

    #[test]
    fn catalogue_entries_and_days() {
        let c = CatalogueEntry {
            segment: 1,
            seq: 2,
            offset: 3,
            len: 4,
            received_at: 5,
            sha256: [7; 32],
            tenant: Some("acme".into()),
        };
        assert_eq!(CatalogueEntry::decode(&c.encode()).unwrap(), c);
        assert!(CatalogueEntry::decode(&[0; 3]).is_err());
        // An entry written before tenants were recorded: the fixed part alone.
        let legacy = CatalogueEntry {
            tenant: None,
            ..c.clone()
        };
        assert_eq!(legacy.encode().len(), CATALOGUE_ENTRY_LEN);
        assert_eq!(CatalogueEntry::decode(&legacy.encode()).unwrap(), legacy);
        let mut cut = c.encode();
        cut.pop();
        assert!(CatalogueEntry::decode(&cut).is_err());
        assert_eq!(day_of(0), "1970-01-01");
        assert_eq!(day_of(1_796_083_200_000), "2026-12-01");
        assert_eq!(day_of(951_782_400_000), "2000-02-29");
    }
}
