//! The backup's key layout, its manifest and `LATEST`, and the checks a restore runs on them.
//!
//! ```text
//! <key_prefix>/backup/<node>/LATEST                          -> the newest complete backup
//! <key_prefix>/backup/<node>/manifests/<backup_id>.json      one per backup
//! <key_prefix>/backup/<node>/files/<number>-<sha256>.sst     SST/blob files, uploaded once
//! <key_prefix>/backup/<node>/runs/<backup_id>/<name>         MANIFEST-*, CURRENT, OPTIONS-*, *.log
//! ```
//!
//! SST and blob files never change once written, so one keyed by its content is uploaded once
//! and shared by every backup that holds it (the sha256 in the key also keeps apart two files
//! of one number, which a store restored from an older backup can write again). The other
//! files change with every checkpoint and go under the backup's own id.
//!
//! A restore reads `LATEST` and a manifest from a bucket: both are treated as hostile. Every
//! file must be a plain RocksDB file name, sized within the cap, with a sha256, at exactly the
//! key this layout gives it; nothing in them can name a path outside the restore directory.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::archive::key_segment;

/// The manifest and `LATEST` format.
pub const FORMAT: u32 = 1;
/// A backup file larger than this is refused (the backup fails, saying which file).
pub const MAX_FILE_BYTES: u64 = 64 << 20;
/// Files one manifest may list.
pub const MAX_FILES: usize = 100_000;
/// Bounds of the two JSON documents a restore downloads before it trusts anything.
pub const MAX_MANIFEST_BYTES: u64 = 32 << 20;
pub const MAX_LATEST_BYTES: u64 = 64 << 10;

/// One file of a backup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileEntry {
    /// The file's name in the store directory (`000042.sst`, `CURRENT`, ...).
    pub name: String,
    /// Where it is in the blob store.
    pub key: String,
    pub size: u64,
    /// Lowercase hex.
    pub sha256: String,
}

/// One backup: what a restore needs to rebuild the store directory, and where the intake log
/// stood when the checkpoint was taken.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub format: u32,
    /// A UUIDv7: backups of one node sort by time.
    pub backup_id: String,
    /// `m:store_id` of the store backed up.
    pub store_id: String,
    pub created_at_ms: u64,
    pub files: Vec<FileEntry>,
    /// `IntakeMark::mark`'s value (`wal.type: dual`), null when none.
    pub intake: Option<serde_json::Value>,
}

/// The pointer at the newest complete backup, written after its manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Latest {
    pub format: u32,
    pub backup_id: String,
    pub store_id: String,
    pub created_at_ms: u64,
    /// The manifest's key.
    pub manifest: String,
}

/// Whether a file is uploaded once (content-keyed) or with each backup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Shared,
    PerBackup,
}

/// The kind of a RocksDB file name a backup carries; `None` for anything else (a name with a
/// path separator, `..`, a lock or info log file, ...).
pub fn file_kind(name: &str) -> Option<FileKind> {
    let digits = |s: &str| (1..=20).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit());
    if name == "CURRENT" || name == "IDENTITY" {
        return Some(FileKind::PerBackup);
    }
    if let Some(n) = name
        .strip_prefix("MANIFEST-")
        .or_else(|| name.strip_prefix("OPTIONS-"))
    {
        return digits(n).then_some(FileKind::PerBackup);
    }
    let (stem, ext) = name.rsplit_once('.')?;
    if !digits(stem) {
        return None;
    }
    match ext {
        "sst" | "blob" => Some(FileKind::Shared),
        "log" => Some(FileKind::PerBackup),
        _ => None,
    }
}

/// A backup id is a canonical (lowercase, hyphenated) UUID.
pub fn valid_id(id: &str) -> bool {
    uuid::Uuid::parse_str(id).is_ok_and(|u| u.hyphenated().to_string() == id)
}

fn valid_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Keys of one node's backups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    base: String,
}

impl Layout {
    pub fn new(key_prefix: Option<&str>, instance: &str) -> Layout {
        let node = key_segment(instance);
        let base = match key_prefix {
            Some(p) if !p.is_empty() => format!("{p}/backup/{node}"),
            _ => format!("backup/{node}"),
        };
        Layout { base }
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    pub fn latest(&self) -> String {
        format!("{}/LATEST", self.base)
    }

    pub fn manifests_dir(&self) -> String {
        format!("{}/manifests/", self.base)
    }

    pub fn manifest(&self, backup_id: &str) -> String {
        format!("{}{backup_id}.json", self.manifests_dir())
    }

    /// The backup id of a manifest key, if it is one.
    pub fn manifest_id<'a>(&self, key: &'a str) -> Option<&'a str> {
        let id = key
            .strip_prefix(self.base.as_str())?
            .strip_prefix("/manifests/")?
            .strip_suffix(".json")?;
        valid_id(id).then_some(id)
    }

    pub fn files_dir(&self) -> String {
        format!("{}/files/", self.base)
    }

    pub fn runs_dir(&self) -> String {
        format!("{}/runs/", self.base)
    }

    /// Where a file of a backup goes: content-keyed for SST/blob files, under the backup's id
    /// for the rest. `None` for a name that is not a RocksDB file name.
    pub fn file_key(&self, backup_id: &str, name: &str, sha256: &str) -> Option<String> {
        Some(match file_kind(name)? {
            FileKind::Shared => {
                let (stem, ext) = name.rsplit_once('.')?;
                format!("{}{stem}-{sha256}.{ext}", self.files_dir())
            }
            FileKind::PerBackup => format!("{}{backup_id}/{name}", self.runs_dir()),
        })
    }
}

/// Where and what kind of JSON error (serde's message can quote the input; this does not).
fn json_error(e: &serde_json::Error) -> String {
    format!(
        "{:?} error at line {} column {}",
        e.classify(),
        e.line(),
        e.column()
    )
}

/// `LATEST` read from the store: parsed and checked, or why not.
pub fn parse_latest(bytes: &[u8], layout: &Layout) -> Result<Latest, String> {
    let l: Latest = serde_json::from_slice(bytes)
        .map_err(|e| format!("LATEST does not parse: {}", json_error(&e)))?;
    if l.format != FORMAT {
        return Err(format!(
            "LATEST has format {}, this release reads {FORMAT}",
            l.format
        ));
    }
    if !valid_id(&l.backup_id) || !valid_id(&l.store_id) {
        return Err("LATEST: backup_id or store_id is not a UUID".into());
    }
    if l.manifest != layout.manifest(&l.backup_id) {
        return Err("LATEST: the manifest key is not this node's manifest of that backup".into());
    }
    Ok(l)
}

/// A manifest read from the store: parsed and checked against the `LATEST` that named it.
pub fn parse_manifest(bytes: &[u8], layout: &Layout, latest: &Latest) -> Result<Manifest, String> {
    let m: Manifest = serde_json::from_slice(bytes)
        .map_err(|e| format!("the manifest does not parse: {}", json_error(&e)))?;
    check_manifest(&m, layout)?;
    if m.backup_id != latest.backup_id || m.store_id != latest.store_id {
        return Err("the manifest's backup_id or store_id differs from LATEST's".into());
    }
    Ok(m)
}

/// What a restore requires of a manifest before it downloads anything.
pub fn check_manifest(m: &Manifest, layout: &Layout) -> Result<(), String> {
    if m.format != FORMAT {
        return Err(format!(
            "manifest format {} (this release reads {FORMAT})",
            m.format
        ));
    }
    if !valid_id(&m.backup_id) || !valid_id(&m.store_id) {
        return Err("manifest: backup_id or store_id is not a UUID".into());
    }
    if m.files.is_empty() || m.files.len() > MAX_FILES {
        return Err(format!(
            "manifest: {} files (1..={MAX_FILES} expected)",
            m.files.len()
        ));
    }
    let mut names = HashSet::new();
    for (i, f) in m.files.iter().enumerate() {
        // The name is quoted only once it is known to be a plain file name.
        if file_kind(&f.name).is_none() {
            return Err(format!("manifest file #{i}: not a RocksDB file name"));
        }
        if !names.insert(f.name.as_str()) {
            return Err(format!("manifest file {}: listed twice", f.name));
        }
        if f.size > MAX_FILE_BYTES {
            return Err(format!(
                "manifest file {}: size {} over the {MAX_FILE_BYTES}-byte cap",
                f.name, f.size
            ));
        }
        if !valid_sha256(&f.sha256) {
            return Err(format!(
                "manifest file {}: sha256 is not 64 hex digits",
                f.name
            ));
        }
        if layout.file_key(&m.backup_id, &f.name, &f.sha256).as_deref() != Some(f.key.as_str()) {
            return Err(format!(
                "manifest file {}: its key is not where this backup keeps it",
                f.name
            ));
        }
    }
    if !names.contains("CURRENT") || !names.iter().any(|n| n.starts_with("MANIFEST-")) {
        return Err("manifest: no CURRENT or MANIFEST-* file".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    const ID: &str = "0190aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee";
    const STORE: &str = "0190aaaa-bbbb-7ccc-8ddd-000000000001";

    fn layout() -> Layout {
        Layout::new(Some("team-a"), "gw-0")
    }

    fn entry(name: &str) -> FileEntry {
        FileEntry {
            name: name.into(),
            key: layout().file_key(ID, name, SHA).unwrap(),
            size: 10,
            sha256: SHA.into(),
        }
    }

    fn manifest() -> Manifest {
        Manifest {
            format: FORMAT,
            backup_id: ID.into(),
            store_id: STORE.into(),
            created_at_ms: 1,
            files: [
                "CURRENT",
                "MANIFEST-000005",
                "OPTIONS-000007",
                "000004.log",
                "000009.sst",
            ]
            .into_iter()
            .map(entry)
            .collect(),
            intake: None,
        }
    }

    #[test]
    fn names_are_plain_rocksdb_file_names() {
        for ok in [
            "CURRENT",
            "IDENTITY",
            "MANIFEST-000005",
            "OPTIONS-12",
            "000009.sst",
            "1.blob",
            "000004.log",
        ] {
            assert!(file_kind(ok).is_some(), "{ok}");
        }
        for bad in [
            "",
            "LOCK",
            "LOG",
            "LOG.old.1",
            "../000009.sst",
            "a/000009.sst",
            "/CURRENT",
            "000009.sst/..",
            "MANIFEST-",
            "MANIFEST-00x",
            "x.sst",
            ".sst",
            "000009.SST",
            "000009.sst\0",
            "CURRENT ",
            "OPTIONS-1/2",
        ] {
            assert!(file_kind(bad).is_none(), "{bad:?}");
        }
        assert_eq!(file_kind("000009.sst"), Some(FileKind::Shared));
        assert_eq!(file_kind("000004.log"), Some(FileKind::PerBackup));
    }

    #[test]
    fn keys_follow_the_layout() {
        let l = layout();
        assert_eq!(l.latest(), "team-a/backup/gw-0/LATEST");
        assert_eq!(
            l.file_key(ID, "000009.sst", SHA).unwrap(),
            format!("team-a/backup/gw-0/files/000009-{SHA}.sst")
        );
        assert_eq!(
            l.file_key(ID, "CURRENT", SHA).unwrap(),
            format!("team-a/backup/gw-0/runs/{ID}/CURRENT")
        );
        assert_eq!(l.manifest_id(&l.manifest(ID)), Some(ID));
        assert_eq!(l.manifest_id("team-a/backup/gw-0/manifests/x.json"), None);
        assert_eq!(Layout::new(None, "a b").latest(), "backup/a_b/LATEST");
        assert_eq!(Layout::new(None, "..").latest(), "backup/node/LATEST");
    }

    #[test]
    fn a_sane_manifest_passes() {
        check_manifest(&manifest(), &layout()).unwrap();
        let latest = Latest {
            format: FORMAT,
            backup_id: ID.into(),
            store_id: STORE.into(),
            created_at_ms: 1,
            manifest: layout().manifest(ID),
        };
        let bytes = serde_json::to_vec(&manifest()).unwrap();
        assert_eq!(
            parse_manifest(&bytes, &layout(), &latest).unwrap(),
            manifest()
        );
        let lb = serde_json::to_vec(&latest).unwrap();
        assert_eq!(parse_latest(&lb, &layout()).unwrap(), latest);
    }

    #[test]
    fn hostile_manifests_are_refused() {
        let l = layout();
        type Damage = Box<dyn Fn(&mut Manifest)>;
        let cases: Vec<(&str, Damage)> = vec![
            (
                "traversal",
                Box::new(|m| m.files[4].name = "../../etc/000009.sst".into()),
            ),
            (
                "separator",
                Box::new(|m| m.files[4].name = "x/000009.sst".into()),
            ),
            (
                "absolute",
                Box::new(|m| m.files[0].name = "/CURRENT".into()),
            ),
            ("a lock file", Box::new(|m| m.files[4].name = "LOCK".into())),
            ("twice", Box::new(|m| m.files[4] = entry("CURRENT"))),
            (
                "too large",
                Box::new(|m| m.files[4].size = MAX_FILE_BYTES + 1),
            ),
            ("bad sha", Box::new(|m| m.files[4].sha256 = "ZZ".into())),
            (
                "uppercase sha",
                Box::new(|m| m.files[4].sha256 = SHA.to_uppercase()),
            ),
            (
                "foreign key",
                Box::new(|m| m.files[4].key = "team-b/backup/gw-0/files/x.sst".into()),
            ),
            (
                "shared key of another file",
                Box::new(|m| m.files[4].key = layout().file_key(ID, "000010.sst", SHA).unwrap()),
            ),
            (
                "no CURRENT",
                Box::new(|m| {
                    m.files.remove(0);
                }),
            ),
            (
                "no MANIFEST",
                Box::new(|m| {
                    m.files.remove(1);
                }),
            ),
            ("empty", Box::new(|m| m.files.clear())),
            ("bad id", Box::new(|m| m.backup_id = "../x".into())),
            ("bad store id", Box::new(|m| m.store_id = "x".into())),
            ("format", Box::new(|m| m.format = 2)),
        ];
        for (what, f) in cases {
            let mut m = manifest();
            f(&mut m);
            assert!(check_manifest(&m, &l).is_err(), "{what}");
        }
        // Unknown fields and junk do not parse; LATEST must name this node's manifest.
        let latest = Latest {
            format: FORMAT,
            backup_id: ID.into(),
            store_id: STORE.into(),
            created_at_ms: 1,
            manifest: "team-a/backup/gw-1/manifests/x.json".into(),
        };
        assert!(parse_latest(&serde_json::to_vec(&latest).unwrap(), &l).is_err());
        assert!(parse_latest(b"{\"format\":1}", &l).is_err());
        assert!(parse_latest(b"\xff\xfe", &l).is_err());
        let mut v = serde_json::to_value(manifest()).unwrap();
        v["extra"] = serde_json::json!(1);
        let good_latest = Latest {
            manifest: l.manifest(ID),
            ..latest.clone()
        };
        assert!(parse_manifest(&serde_json::to_vec(&v).unwrap(), &l, &good_latest).is_err());
        // A manifest of another store than LATEST says.
        let other = Latest {
            store_id: ID.into(),
            ..good_latest
        };
        let bytes = serde_json::to_vec(&manifest()).unwrap();
        assert!(parse_manifest(&bytes, &l, &other).is_err());
    }
}
