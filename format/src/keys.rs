//! Key bytes of every family. The gateway's store and this crate are the only code that knows
//! them (the store's public API speaks tenants, seqs, `LaneId`s and `DueCursor`s); they live
//! here rather than in the store so the key parsers can be fuzzed without RocksDB.
//! `docs/storage.md` documents the same layout.
//!
//! Integers are big-endian so byte order is numeric order. Tenant, source and dedupe-key
//! components end with 0x00, which none of them contains (ids are `[A-Za-z0-9_-]`, dedupe
//! keys come from validated header bytes or are hashed), so every prefix is unambiguous.

/// Column family names.
pub const CF_HOOKS: &str = "hooks";
pub const CF_DELIVERIES: &str = "deliveries";
pub const CF_INDEX: &str = "index";
pub const ALL_CFS: [&str; 3] = [CF_HOOKS, CF_DELIVERIES, CF_INDEX];
/// The quarantine pen: a family of its own, so its bodies never sit in the index's SST files
/// (scanned by dispatch) and a store made before the pen opens read-only without it.
pub const CF_QUARANTINE: &str = "quarantine";
/// The lifecycle events' audit trail: a family of its own, so a store made before the trail
/// gains it at its next open and opens read-only without it, and its sweeps never touch the
/// families dispatch scans.
pub const CF_AUDIT: &str = "audit";

/// `default` family: metadata and counters.
pub const META_NEXT_SEQ: &[u8] = b"m:next_seq";
pub const META_FORMAT: &[u8] = b"m:format_version";
pub const META_STORE_ID: &[u8] = b"m:store_id";
pub const META_READY_PROBE: &[u8] = b"m:ready_probe";
pub const FORMAT_VERSION: u64 = 1;
/// The last audit seq used (8 bytes big-endian; written with each append, never merged).
pub const META_AUDIT_SEQ: &[u8] = b"m:audit_seq";
/// Events held in the audit trail (a counter: merge operands are i64 deltas).
pub const C_AUDIT_EVENTS: &[u8] = b"c:audit_events";

/// `audit`: `<time_ms:8><seq:8>` → the stored event (JSON). Time first, so a `since`/`until`
/// window is one range and retention deletes from the front; the seq orders events of one
/// millisecond and keeps keys unique.
pub fn audit(time_ms: u64, seq: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&time_ms.to_be_bytes());
    k[8..].copy_from_slice(&seq.to_be_bytes());
    k
}

/// (time_ms, seq) of an audit key.
pub fn parse_audit(k: &[u8]) -> Option<(u64, u64)> {
    if k.len() != 16 {
        return None;
    }
    Some((be64(&k[..8])?, be64(&k[8..])?))
}

/// Counter keys, `c:...` (merge operands are i64 deltas).
pub const C_HOOKS: &[u8] = b"c:hooks";
pub const C_HOOK_BYTES: &[u8] = b"c:hook_bytes";
pub const C_PENDING: &[u8] = b"c:pending";
pub const C_DEAD: &[u8] = b"c:dead";
/// Rows set aside in the corrupt index since the store was made.
pub const C_CORRUPT: &[u8] = b"c:corrupt";

pub fn c_pending_tenant(tenant: &str) -> Vec<u8> {
    [b"c:pending:".as_slice(), tenant.as_bytes()].concat()
}

pub fn c_dead_tenant(tenant: &str) -> Vec<u8> {
    [b"c:dead:".as_slice(), tenant.as_bytes()].concat()
}

pub fn c_pending_source(source: &str) -> Vec<u8> {
    [b"c:pending_src:".as_slice(), source.as_bytes()].concat()
}

pub fn c_dead_source(source: &str) -> Vec<u8> {
    [b"c:dead_src:".as_slice(), source.as_bytes()].concat()
}

/// Rows a replay job moved that were since delivered / dead-lettered again.
pub fn c_job_delivered(id: &str) -> Vec<u8> {
    format!("c:job:{id}:delivered").into_bytes()
}

pub fn c_job_failed(id: &str) -> Vec<u8> {
    format!("c:job:{id}:failed").into_bytes()
}

/// The pen's entries and the bytes of their stored envelopes.
pub const C_PEN_ENTRIES: &[u8] = b"c:quarantine_entries";
pub const C_PEN_BYTES: &[u8] = b"c:quarantine_bytes";

/// `quarantine` family: a summary per entry, by time: `s<received_at:8><id:16>` → summary.
pub const PEN_SUMMARY: u8 = b's';
/// `quarantine` family: the whole envelope: `e<id:16>` → encoded envelope.
pub const PEN_ENVELOPE: u8 = b'e';

pub fn pen_summary(received_at: u64, id: &uuid::Uuid) -> [u8; 25] {
    let mut k = [0u8; 25];
    k[0] = PEN_SUMMARY;
    k[1..9].copy_from_slice(&received_at.to_be_bytes());
    k[9..].copy_from_slice(id.as_bytes());
    k
}

/// (received_at, id) of a summary key.
pub fn parse_pen_summary(k: &[u8]) -> Option<(u64, uuid::Uuid)> {
    if k.len() != 25 || k[0] != PEN_SUMMARY {
        return None;
    }
    let id = uuid::Uuid::from_slice(&k[9..]).ok()?;
    Some((be64(&k[1..9])?, id))
}

pub fn pen_envelope(id: &uuid::Uuid) -> [u8; 17] {
    let mut k = [0u8; 17];
    k[0] = PEN_ENVELOPE;
    k[1..].copy_from_slice(id.as_bytes());
    k
}

/// `quarantine` family: the entries and bytes one (source, tenant) pair holds:
/// `u<source>\0<tenant>` → `<entries:8><bytes:8>`. Present only while the pair holds entries.
pub const PEN_SHARE: u8 = b'u';

pub fn pen_share(source: &str, tenant: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(2 + source.len() + tenant.len());
    k.push(PEN_SHARE);
    k.extend_from_slice(source.as_bytes());
    k.push(0);
    k.extend_from_slice(tenant.as_bytes());
    k
}

/// (source, tenant) of a share key.
pub fn parse_pen_share(k: &[u8]) -> Option<(&str, &str)> {
    if k.first() != Some(&PEN_SHARE) {
        return None;
    }
    let nul = k[1..].iter().position(|&b| b == 0)? + 1;
    let source = std::str::from_utf8(&k[1..nul]).ok()?;
    let tenant = std::str::from_utf8(&k[nul + 1..]).ok()?;
    (!tenant.contains('\0')).then_some((source, tenant))
}

/// Replay jobs: `j:<job id>` in `default`.
pub fn job(id: &str) -> Vec<u8> {
    [b"j:".as_slice(), id.as_bytes()].concat()
}
pub const JOB_PREFIX: &[u8] = b"j:";

/// Default CF: a hook committed here under `wal.type: dual` whose intake record the log has not
/// confirmed yet (value: the record's metadata, JSON). Deleted once confirmed.
pub const INTAKE_PENDING_PREFIX: &[u8] = b"n:";

pub fn intake_pending(seq: u64) -> [u8; 10] {
    let mut k = [0u8; 10];
    k[..2].copy_from_slice(INTAKE_PENDING_PREFIX);
    k[2..].copy_from_slice(&seq.to_be_bytes());
    k
}

pub fn parse_intake_pending(k: &[u8]) -> Option<u64> {
    let rest = k.strip_prefix(INTAKE_PENDING_PREFIX)?;
    Some(u64::from_be_bytes(rest.try_into().ok()?))
}

/// `hooks`: `<seq:8>` → encoded envelope.
pub fn hook(seq: u64) -> [u8; 8] {
    seq.to_be_bytes()
}

/// `deliveries`: `<seq:8><sink:2>` → delivery row.
pub fn delivery(seq: u64, sink: u16) -> [u8; 10] {
    let mut k = [0u8; 10];
    k[..8].copy_from_slice(&seq.to_be_bytes());
    k[8..].copy_from_slice(&sink.to_be_bytes());
    k
}

pub fn parse_delivery(k: &[u8]) -> Option<(u64, u16)> {
    if k.len() != 10 {
        return None;
    }
    Some((be64(&k[..8])?, u16::from_be_bytes([k[8], k[9]])))
}

/// Index family prefixes.
pub const IX_DUE: u8 = b'd';
pub const IX_INFLIGHT: u8 = b'f';
pub const IX_DEAD: u8 = b'x';
pub const IX_DEAD_TENANT: u8 = b'X';
pub const IX_DEDUPE: u8 = b'u';
pub const IX_DEDUPE_EXPIRY: u8 = b'e';
pub const IX_HOOK_ID: u8 = b'i';
pub const IX_LANE_PENDING: u8 = b'P';
pub const IX_LANE_HEAD: u8 = b'H';
/// Archive obligations (`a<seq:8>`), uploaded segments (`S<first_seq:8>`) and archived hooks
/// (`c<uuid:16>`).
pub const IX_ARCHIVE_DUE: u8 = b'a';
pub const IX_ARCHIVE_SEGMENT: u8 = b'S';
pub const IX_ARCHIVE_HOOK: u8 = b'c';

fn tenant_prefix(tag: u8, tenant: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(2 + tenant.len() + 18);
    k.push(tag);
    k.extend_from_slice(tenant.as_bytes());
    k.push(0);
    k
}

fn push_at_seq_sink(k: &mut Vec<u8>, at: u64, seq: u64, sink: u16) {
    k.extend_from_slice(&at.to_be_bytes());
    k.extend_from_slice(&seq.to_be_bytes());
    k.extend_from_slice(&sink.to_be_bytes());
}

/// Due index, per tenant: `d<tenant>\0<due_at:8><seq:8><sink:2>` → empty.
pub fn due(tenant: &str, due_at: u64, seq: u64, sink: u16) -> Vec<u8> {
    let mut k = tenant_prefix(IX_DUE, tenant);
    push_at_seq_sink(&mut k, due_at, seq, sink);
    k
}

/// First key of a tenant's due rows.
pub fn due_tenant_prefix(tenant: &str) -> Vec<u8> {
    tenant_prefix(IX_DUE, tenant)
}

/// The first due key of `tenant` at or after `due_at`, given any key of that tenant's range
/// (`from`): a scan resume point rewound to a row due earlier.
pub fn due_rewound(from: &[u8], due_at: u64) -> Option<Vec<u8>> {
    if from.first() != Some(&IX_DUE) {
        return None;
    }
    let nul = from[1..].iter().position(|&b| b == 0)? + 1;
    // Only a tenant the store could have written (found by the fuzz target `store_codec`: a
    // damaged key rewound to a "due key" that no parser accepts).
    std::str::from_utf8(&from[1..nul]).ok()?;
    let mut k = from[..=nul].to_vec();
    push_at_seq_sink(&mut k, due_at, 0, 0);
    Some(k)
}

/// (tenant, due_at, seq, sink) of a due key.
pub fn parse_due(k: &[u8]) -> Option<(&str, u64, u64, u16)> {
    parse_tenant_at_seq_sink(k, IX_DUE)
}

fn parse_tenant_at_seq_sink(k: &[u8], tag: u8) -> Option<(&str, u64, u64, u16)> {
    if k.first() != Some(&tag) || k.len() < 1 + 1 + 18 {
        return None;
    }
    let nul = k[1..].iter().position(|&b| b == 0)? + 1;
    let tenant = std::str::from_utf8(&k[1..nul]).ok()?;
    let rest = &k[nul + 1..];
    if rest.len() != 18 {
        return None;
    }
    Some((
        tenant,
        be64(&rest[..8])?,
        be64(&rest[8..16])?,
        u16::from_be_bytes([rest[16], rest[17]]),
    ))
}

/// In-flight (claimed) rows: `f<seq:8><sink:2>` → empty. Re-dued at startup.
pub fn inflight(seq: u64, sink: u16) -> [u8; 11] {
    let mut k = [0u8; 11];
    k[0] = IX_INFLIGHT;
    k[1..9].copy_from_slice(&seq.to_be_bytes());
    k[9..].copy_from_slice(&sink.to_be_bytes());
    k
}

pub fn parse_inflight(k: &[u8]) -> Option<(u64, u16)> {
    if k.len() != 11 || k[0] != IX_INFLIGHT {
        return None;
    }
    parse_delivery(&k[1..])
}

/// Dead index, all tenants: `x<dead_at:8><seq:8><sink:2>` → dead summary.
pub fn dead(dead_at: u64, seq: u64, sink: u16) -> Vec<u8> {
    let mut k = Vec::with_capacity(19);
    k.push(IX_DEAD);
    push_at_seq_sink(&mut k, dead_at, seq, sink);
    k
}

pub fn parse_dead(k: &[u8]) -> Option<(u64, u64, u16)> {
    if k.len() != 19 || k[0] != IX_DEAD {
        return None;
    }
    Some((
        be64(&k[1..9])?,
        be64(&k[9..17])?,
        u16::from_be_bytes([k[17], k[18]]),
    ))
}

/// Dead index, per tenant: `X<tenant>\0<dead_at:8><seq:8><sink:2>` → dead summary.
pub fn dead_tenant(tenant: &str, dead_at: u64, seq: u64, sink: u16) -> Vec<u8> {
    let mut k = tenant_prefix(IX_DEAD_TENANT, tenant);
    push_at_seq_sink(&mut k, dead_at, seq, sink);
    k
}

pub fn dead_tenant_prefix(tenant: &str) -> Vec<u8> {
    tenant_prefix(IX_DEAD_TENANT, tenant)
}

pub fn parse_dead_tenant(k: &[u8]) -> Option<(&str, u64, u64, u16)> {
    parse_tenant_at_seq_sink(k, IX_DEAD_TENANT)
}

/// Dedupe scope and key: `u<tenant>\0<source>\0<key>` → dedupe entry.
pub fn dedupe(tenant: &str, source: &str, key: &str) -> Vec<u8> {
    let mut k = tenant_prefix(IX_DEDUPE, tenant);
    k.extend_from_slice(source.as_bytes());
    k.push(0);
    k.extend_from_slice(key.as_bytes());
    k
}

/// Dedupe expiry: `e<expires_at:8><dedupe key without its tag>` → empty. An empty
/// `dedupe_key` (never built by `dedupe`) gives the bare expiry prefix rather than a panic.
pub fn dedupe_expiry(expires_at: u64, dedupe_key: &[u8]) -> Vec<u8> {
    let untagged = dedupe_key.get(1..).unwrap_or_default();
    let mut k = Vec::with_capacity(9 + untagged.len());
    k.push(IX_DEDUPE_EXPIRY);
    k.extend_from_slice(&expires_at.to_be_bytes());
    k.extend_from_slice(untagged);
    k
}

/// (expires_at, the dedupe key it guards) of an expiry key.
pub fn parse_dedupe_expiry(k: &[u8]) -> Option<(u64, Vec<u8>)> {
    if k.len() < 10 || k[0] != IX_DEDUPE_EXPIRY {
        return None;
    }
    let mut dk = Vec::with_capacity(k.len() - 8);
    dk.push(IX_DEDUPE);
    dk.extend_from_slice(&k[9..]);
    Some((be64(&k[1..9])?, dk))
}

/// An ordering lane: `<tenant>\0<source>\0<sink:2><key>\0`. Keys never contain 0x00 (they
/// come from validated header bytes or are hashed), so the last 0x00 ends the lane.
pub fn lane_id(tenant: &str, source: &str, sink: u16, key: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(tenant.len() + source.len() + key.len() + 5);
    k.extend_from_slice(tenant.as_bytes());
    k.push(0);
    k.extend_from_slice(source.as_bytes());
    k.push(0);
    k.extend_from_slice(&sink.to_be_bytes());
    k.extend_from_slice(key.as_bytes());
    k.push(0);
    k
}

/// The tenant of a lane id.
pub fn lane_tenant(lane: &[u8]) -> Option<&str> {
    let nul = lane.iter().position(|&b| b == 0)?;
    std::str::from_utf8(&lane[..nul]).ok()
}

/// The sink index of a lane id (`<tenant>\0<source>\0<sink:2>...`).
pub fn lane_sink(lane: &[u8]) -> Option<u16> {
    let first = lane.iter().position(|&b| b == 0)?;
    let second = first + 1 + lane[first + 1..].iter().position(|&b| b == 0)?;
    let s = lane.get(second + 1..second + 3)?;
    Some(u16::from_be_bytes([s[0], s[1]]))
}

/// A lane's waiting rows: `P<lane id><seq:8>` → empty. Only the head of a lane is due.
pub fn lane_pending(lane: &[u8], seq: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + lane.len() + 8);
    k.push(IX_LANE_PENDING);
    k.extend_from_slice(lane);
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

pub fn lane_pending_prefix(lane: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + lane.len());
    k.push(IX_LANE_PENDING);
    k.extend_from_slice(lane);
    k
}

/// (lane id, seq) of a lane-pending key.
pub fn parse_lane_pending(k: &[u8]) -> Option<(&[u8], u64)> {
    if k.first() != Some(&IX_LANE_PENDING) || k.len() < 1 + 5 + 8 {
        return None;
    }
    let (lane, seq) = k[1..].split_at(k.len() - 9);
    if lane.last() != Some(&0) {
        return None;
    }
    Some((lane, be64(seq)?))
}

/// A lane's head: `H<lane id>` → `<seq:8>`. Present while the lane has a due or claimed head.
pub fn lane_head(lane: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + lane.len());
    k.push(IX_LANE_HEAD);
    k.extend_from_slice(lane);
    k
}

/// Rows that did not decode, set aside: `z<family>\0<original key>` → `CorruptRow`.
pub const IX_CORRUPT: u8 = b'z';

pub fn corrupt(family: &str, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(2 + family.len() + key.len());
    k.push(IX_CORRUPT);
    k.extend_from_slice(family.as_bytes());
    k.push(0);
    k.extend_from_slice(key);
    k
}

/// (family, original key) of a corrupt-index key.
pub fn parse_corrupt(k: &[u8]) -> Option<(&str, &[u8])> {
    if k.first() != Some(&IX_CORRUPT) {
        return None;
    }
    let nul = k[1..].iter().position(|&b| b == 0)? + 1;
    let family = std::str::from_utf8(&k[1..nul]).ok()?;
    Some((family, &k[nul + 1..]))
}

/// A hook still to archive: `a<seq:8>` → empty.
pub fn archive_due(seq: u64) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[0] = IX_ARCHIVE_DUE;
    k[1..].copy_from_slice(&seq.to_be_bytes());
    k
}

/// An uploaded segment: `S<first_seq:8>` → `SegmentRow`.
pub fn archive_segment(first_seq: u64) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[0] = IX_ARCHIVE_SEGMENT;
    k[1..].copy_from_slice(&first_seq.to_be_bytes());
    k
}

/// An archived hook: `c<uuid:16>` → `CatalogueEntry`.
pub fn archive_hook(id: &uuid::Uuid) -> [u8; 17] {
    let mut k = [0u8; 17];
    k[0] = IX_ARCHIVE_HOOK;
    k[1..].copy_from_slice(id.as_bytes());
    k
}

/// The seq of an `a`/`S` key.
pub fn parse_archive_seq(k: &[u8]) -> Option<u64> {
    match k.first() {
        Some(&IX_ARCHIVE_DUE) | Some(&IX_ARCHIVE_SEGMENT) => be64(&k[1..]),
        _ => None,
    }
}

/// Counters of the archive: hooks waiting for a segment, hooks and segments catalogued.
pub const C_ARCHIVE_PENDING: &[u8] = b"c:archive_pending";
pub const C_ARCHIVED: &[u8] = b"c:archived";
pub const C_SEGMENTS: &[u8] = b"c:segments";
/// Body bytes of dead rows (each dead row counts its hook's body once).
pub const C_DEAD_BYTES: &[u8] = b"c:dead_bytes";
/// Set once `C_DEAD_BYTES` has been computed from the dead rows (stores made before it).
pub const META_DEAD_BYTES_V1: &[u8] = b"m:dead_bytes_v1";

/// Hook id → seq: `i<uuid:16>` → `<seq:8>`.
pub fn hook_id(id: &uuid::Uuid) -> [u8; 17] {
    let mut k = [0u8; 17];
    k[0] = IX_HOOK_ID;
    k[1..].copy_from_slice(id.as_bytes());
    k
}

/// A big-endian u64 of exactly eight stored bytes; `None` for any other length, so a damaged
/// row can never make a reader index past its end.
pub fn be64(b: &[u8]) -> Option<u64> {
    <[u8; 8]>::try_from(b).ok().map(u64::from_be_bytes)
}

/// The smallest key greater than every key starting with `prefix`.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0xff; prefix.len() + 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_keys_sort_by_tenant_then_time_then_seq() {
        let a = due("acme", 5, 9, 0);
        let b = due("acme", 6, 1, 0);
        let c = due("acme", 6, 1, 1);
        let d = due("acmf", 0, 0, 0);
        assert!(a < b && b < c && c < d);
        assert!(
            due("a", u64::MAX, 0, 0) < due("aa", 0, 0, 0),
            "\\0 ends a tenant before any id byte"
        );
        assert_eq!(parse_due(&b), Some(("acme", 6, 1, 0)));
        let mut resume = due("acme", 9, 3, 1);
        resume.push(0);
        assert_eq!(due_rewound(&resume, 6), Some(due("acme", 6, 0, 0)));
        // A damaged key whose tenant is not UTF-8 has no due key to rewind to (fuzz crash
        // store_codec 9f85b625).
        assert_eq!(due_rewound(&[IX_DUE, 255, 91, 0], 0), None);
        assert_eq!(
            due_rewound(&due_tenant_prefix("acme"), 6),
            Some(due("acme", 6, 0, 0))
        );
    }

    #[test]
    fn round_trips() {
        assert_eq!(parse_delivery(&delivery(7, 3)), Some((7, 3)));
        assert_eq!(parse_inflight(&inflight(7, 3)), Some((7, 3)));
        assert_eq!(parse_dead(&dead(1, 2, 3)), Some((1, 2, 3)));
        assert_eq!(
            parse_dead_tenant(&dead_tenant("t", 1, 2, 3)),
            Some(("t", 1, 2, 3))
        );
        let dk = dedupe("t", "s", "evt_1");
        assert_eq!(parse_dedupe_expiry(&dedupe_expiry(42, &dk)), Some((42, dk)));
        assert_eq!(prefix_end(b"d"), b"e".to_vec());
        let lane = lane_id("t", "s", 256, "cus_1");
        assert_eq!(lane_tenant(&lane), Some("t"));
        assert_eq!(lane_sink(&lane), Some(256));
        assert_eq!(
            parse_lane_pending(&lane_pending(&lane, 9)),
            Some((lane.as_slice(), 9))
        );
        assert!(lane_pending(&lane, 9) < lane_pending(&lane, 10));
        assert!(
            lane_pending(&lane_id("t", "s", 0, ""), u64::MAX)
                < lane_pending(&lane_id("t", "s", 0, "a"), 0)
        );
        assert_eq!(prefix_end(&[1, 0xff]), vec![2]);
        assert_eq!(
            parse_corrupt(&corrupt("deliveries", &[0, 1, 0])),
            Some(("deliveries", [0u8, 1, 0].as_slice()))
        );
        assert_eq!(be64(&[1, 2, 3]), None);
        let id = uuid::Uuid::from_u128(7);
        assert_eq!(parse_pen_summary(&pen_summary(42, &id)), Some((42, id)));
        assert!(pen_summary(41, &uuid::Uuid::max()) < pen_summary(42, &uuid::Uuid::nil()));
        assert_eq!(parse_pen_summary(&pen_envelope(&id)), None);
        assert_eq!(
            parse_pen_share(&pen_share("gh", "acme")),
            Some(("gh", "acme"))
        );
        assert_eq!(parse_pen_share(&pen_envelope(&id)), None);
        assert_eq!(parse_pen_share(b"ugh"), None, "no tenant separator");
        assert!(pen_share("gh", "x") > pen_summary(u64::MAX, &uuid::Uuid::max()).to_vec());
    }
}
