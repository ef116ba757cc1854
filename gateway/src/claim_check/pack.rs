//! A claim pack: the bodies one tenant checked in together, as one object — an uncompressed ZIP
//! whose first entry is `index.bin` (big-endian `u64` offset and `u64` length of each body's
//! bytes in the object), then one entry per body (named by its claim id), then
//! `manifest.json`. `index.bin` comes first at a fixed place (its data starts at byte
//! [`INDEX_AT`]), so a reader finds a body with two ranged reads and no directory scan; any ZIP
//! tool lists and extracts a pack as it is.
//!
//! Names: a pack id is the check-in time (48 bits of unix ms) and 64 random bits; a claim id is
//! the pack id with the body's position in its last 16 bits, written as a ULID (26 uppercase
//! Crockford base32 digits). A pack's key is `claims/tenant=<t>/dt=<day of the time>/<pack id
//! as the ULID of position 0>`, so the claim id alone names the object and the entry. A leaf.

use bytes::{BufMut, Bytes, BytesMut};

/// The most bodies in one pack: positions are 16 bits, and a classic ZIP holds 65 535 entries
/// (the bodies plus the index and the manifest).
pub const MAX_ENTRIES: usize = 65_000;
/// Where `index.bin`'s bytes start: its local header (30 bytes) and its name (9).
pub const INDEX_AT: u64 = 30 + INDEX_NAME.len() as u64;
const INDEX_NAME: &str = "index.bin";
const MANIFEST_NAME: &str = "manifest.json";
const CROCKFORD: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
const LOCAL_SIG: u32 = 0x0403_4b50;
const CENTRAL_SIG: u32 = 0x0201_4b50;
const END_SIG: u32 = 0x0605_4b50;

/// A pack id: `unix_ms << 80 | random << 16` (position bits zero).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PackId(u128);

impl PackId {
    pub fn new(unix_ms: u64, random: u64) -> PackId {
        PackId(((unix_ms as u128 & 0xFFFF_FFFF_FFFF) << 80) | ((random as u128) << 16))
    }

    pub fn unix_ms(self) -> u64 {
        (self.0 >> 80) as u64
    }

    /// The claim id of the body at `position`.
    pub fn claim(self, position: u16) -> String {
        ulid(self.0 | u128::from(position))
    }

    /// The pack's object key under `tenant`.
    pub fn key(self, tenant: &str) -> String {
        let day = ankusa_format::segment::day_of(self.unix_ms());
        format!("claims/tenant={tenant}/dt={day}/{}", ulid(self.0))
    }
}

/// The pack and position a claim id names; `None` for anything but 26 canonical ULID digits.
pub fn parse_claim(claim_id: &str) -> Option<(PackId, u16)> {
    let b = claim_id.as_bytes();
    if b.len() != 26 || b[0] > b'7' {
        return None;
    }
    let mut v: u128 = 0;
    for &c in b {
        let digit = CROCKFORD.iter().position(|&d| d == c)?;
        v = (v << 5) | digit as u128;
    }
    Some((PackId(v & !0xFFFF), (v & 0xFFFF) as u16))
}

fn ulid(v: u128) -> String {
    (0..26)
        .map(|i| CROCKFORD[((v >> (125 - 5 * i)) & 31) as usize] as char)
        .collect()
}

/// One body of a pack, with what the manifest says of it.
pub struct Entry {
    pub hook_id: String,
    pub body: Bytes,
    pub sha256: String,
}

/// The pack object of `entries` (at most [`MAX_ENTRIES`]; the caller splits).
pub fn build(id: PackId, tenant: &str, entries: &[Entry]) -> Bytes {
    let names: Vec<String> = (0..entries.len()).map(|i| id.claim(i as u16)).collect();
    let manifest = serde_json::json!({
        "v": 1,
        "pack_id": ulid(id.0),
        "tenant": tenant,
        "created_at_ms": id.unix_ms(),
        "entries": entries.iter().zip(&names).map(|(e, name)| serde_json::json!({
            "claim_id": name,
            "hook_id": e.hook_id,
            "size": e.body.len(),
            "sha256": e.sha256,
        })).collect::<Vec<_>>(),
    })
    .to_string();
    // Where each body's bytes will start: after the index entry and the bodies before it.
    let mut at = INDEX_AT + 16 * entries.len() as u64;
    let mut index = BytesMut::with_capacity(16 * entries.len());
    for (e, name) in entries.iter().zip(&names) {
        at += 30 + name.len() as u64;
        index.put_u64(at);
        index.put_u64(e.body.len() as u64);
        at += e.body.len() as u64;
    }
    let files: Vec<(&str, &[u8])> = std::iter::once((INDEX_NAME, &index[..]))
        .chain(
            names
                .iter()
                .map(String::as_str)
                .zip(entries.iter().map(|e| &e.body[..])),
        )
        .chain(std::iter::once((MANIFEST_NAME, manifest.as_bytes())))
        .collect();
    zip(&files, id.unix_ms())
}

/// A stored (uncompressed) ZIP of `files`, in order, without data descriptors or extra fields.
fn zip(files: &[(&str, &[u8])], unix_ms: u64) -> Bytes {
    let (time, date) = dos_time(unix_ms);
    let size: usize = files.iter().map(|(n, d)| 76 + 2 * n.len() + d.len()).sum();
    let mut out = BytesMut::with_capacity(size + 22);
    let mut central = BytesMut::new();
    for (name, data) in files {
        let offset = out.len() as u32;
        let crc = crc32fast::hash(data);
        out.put_u32_le(LOCAL_SIG);
        put_common(
            &mut out,
            time,
            date,
            crc,
            data.len() as u32,
            name.len() as u16,
        );
        out.put_slice(name.as_bytes());
        out.put_slice(data);
        central.put_u32_le(CENTRAL_SIG);
        central.put_u16_le(20);
        put_common(
            &mut central,
            time,
            date,
            crc,
            data.len() as u32,
            name.len() as u16,
        );
        central.put_u16_le(0); // comment length
        central.put_u16_le(0); // disk
        central.put_u16_le(0); // internal attributes
        central.put_u32_le(0o100644 << 16); // a regular file, rw-r--r--
        central.put_u32_le(offset);
        central.put_slice(name.as_bytes());
    }
    let central_at = out.len() as u32;
    let count = files.len() as u16;
    out.put_slice(&central);
    out.put_u32_le(END_SIG);
    out.put_u32_le(0); // this disk, the directory's disk
    out.put_u16_le(count);
    out.put_u16_le(count);
    out.put_u32_le(central.len() as u32);
    out.put_u32_le(central_at);
    out.put_u16_le(0);
    out.freeze()
}

/// The fields a local header and a directory entry share, from "version needed" on.
fn put_common(out: &mut BytesMut, time: u16, date: u16, crc: u32, len: u32, name_len: u16) {
    out.put_u16_le(10); // version needed: stored entries
    out.put_u16_le(0); // flags
    out.put_u16_le(0); // method: stored
    out.put_u16_le(time);
    out.put_u16_le(date);
    out.put_u32_le(crc);
    out.put_u32_le(len);
    out.put_u32_le(len);
    out.put_u16_le(name_len);
    out.put_u16_le(0); // extra field length
}

/// MS-DOS time and date (UTC) of `unix_ms`; 1980-01-01 for anything before.
fn dos_time(unix_ms: u64) -> (u16, u16) {
    let secs = unix_ms / 1000;
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = civil(days as i64);
    if y < 1980 {
        return (0, (1 << 5) | 1);
    }
    let time = ((rem / 3600) << 11) | (((rem % 3600) / 60) << 5) | ((rem % 60) / 2);
    let date = (((y - 1980) as u64) << 9) | ((m as u64) << 5) | d as u64;
    (time as u16, date.min(u16::MAX as u64) as u16)
}

/// The civil date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// The number of bodies a pack holds, from its first [`INDEX_AT`] bytes (`index.bin`'s local
/// header); `None` when they are not a pack's.
pub fn count_from_header(head: &[u8]) -> Option<usize> {
    if head.len() < INDEX_AT as usize
        || u32::from_le_bytes(head[0..4].try_into().ok()?) != LOCAL_SIG
        || &head[30..INDEX_AT as usize] != INDEX_NAME.as_bytes()
        || u16::from_le_bytes(head[8..10].try_into().ok()?) != 0
    {
        return None;
    }
    let len = u32::from_le_bytes(head[22..26].try_into().ok()?) as usize;
    (len.is_multiple_of(16) && len / 16 <= MAX_ENTRIES).then_some(len / 16)
}

/// The `(offset, length)` of every body, from `index.bin`'s bytes.
pub fn parse_index(index: &[u8]) -> Vec<(u64, u64)> {
    index
        .chunks_exact(16)
        .map(|c| {
            let (o, l) = c.split_at(8);
            let word = |b: &[u8]| b.iter().fold(0u64, |v, &x| (v << 8) | u64::from(x));
            (word(o), word(l))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(n: usize) -> Vec<Entry> {
        (0..n)
            .map(|i| Entry {
                hook_id: format!("hook-{i}"),
                body: Bytes::from(vec![i as u8; 1000 + i * 37]),
                sha256: format!("sha-{i}"),
            })
            .collect()
    }

    #[test]
    fn claim_ids_name_their_pack_and_position() {
        let id = PackId::new(1_765_000_000_123, 0xDEAD_BEEF_0123_4567);
        let claim = id.claim(513);
        assert_eq!(claim.len(), 26);
        assert!(claim.bytes().all(|b| CROCKFORD.contains(&b)));
        assert_eq!(parse_claim(&claim), Some((id, 513)));
        assert_eq!(id.unix_ms(), 1_765_000_000_123);
        assert_eq!(
            id.key("acme"),
            format!("claims/tenant=acme/dt=2025-12-06/{}", id.claim(0))
        );
        assert_eq!(parse_claim(&claim.to_lowercase()), None);
        assert_eq!(parse_claim("8ZZZZZZZZZZZZZZZZZZZZZZZZZ"), None);
        assert_eq!(parse_claim("0123456789abcdef0123456789abcdef"), None);
        assert_eq!(parse_claim("ILOU0000000000000000000000"), None);
    }

    #[test]
    fn a_body_is_found_from_the_header_and_the_index() {
        let id = PackId::new(1_765_000_000_000, 42);
        let e = entries(5);
        let pack = build(id, "acme", &e);
        let count = count_from_header(&pack[..INDEX_AT as usize]).unwrap();
        assert_eq!(count, 5);
        let at = INDEX_AT as usize;
        let index = parse_index(&pack[at..at + 16 * count]);
        for (i, (o, l)) in index.iter().enumerate() {
            assert_eq!(&pack[*o as usize..(o + l) as usize], &e[i].body[..]);
        }
        assert_eq!(
            count_from_header(b"PK\x03\x04 not a pack header at all......."),
            None
        );
    }

    #[test]
    fn dos_dates() {
        // 2026-12-06 20:55:24 UTC
        let (t, d) = dos_time(1_796_590_524_000);
        assert_eq!((d >> 9) + 1980, 2026);
        assert_eq!((d >> 5) & 15, 12);
        assert_eq!(d & 31, 6);
        assert_eq!((t >> 11, (t >> 5) & 63, (t & 31) * 2), (20, 55, 24));
        assert_eq!(dos_time(0), (0, 33));
    }

    /// Python's `zipfile` (an independent reader) lists the entries, checks every CRC and reads
    /// the manifest.
    #[test]
    fn a_pack_is_a_zip_any_tool_reads() {
        let id = PackId::new(1_765_000_000_000, 7);
        let e = entries(3);
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("pack.zip");
        std::fs::write(&path, build(id, "acme", &e)).unwrap();
        let script = "import sys, zipfile, json\n\
                      z = zipfile.ZipFile(sys.argv[1])\n\
                      assert z.testzip() is None\n\
                      names = z.namelist()\n\
                      m = json.loads(z.read('manifest.json'))\n\
                      print(len(names), names[0], names[-1], len(z.read(names[2])), m['entries'][1]['claim_id'] == names[2])";
        let out = std::process::Command::new("python3")
            .args(["-c", script])
            .arg(&path)
            .output()
            .expect("python3");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "5 index.bin manifest.json 1037 True"
        );
    }
}
