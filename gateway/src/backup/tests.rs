//! Backups against a local blob store: a restore holds exactly what the checkpoint held, SST
//! files are uploaded once, old backups are pruned, a failed backup leaves `LATEST` alone, and
//! foreign, shared-prefix and damaged backups are refused.

use std::path::Path;
use std::sync::Arc;

use ankusa_store::test_util::seed_dead;
use ankusa_store::{ErrorClass, Store};

use super::restore::{Paths, restore_into};
use super::*;

fn config(dir: &Path, keep: u32) -> Config {
    let yaml = format!(
        "node:\n  instance: gw-0\n  data_dir: {}\nbackup:\n  enabled: true\n  keep: {keep}\n  store:\n    type: local\n    local:\n      dir: {}\n  key_prefix: team-a\nsources: {{}}\n",
        dir.join("data").display(),
        dir.join("blobs").display()
    );
    ankusa_config::from_rendered_yaml(&yaml).expect("config")
}

fn open_store(c: &Config) -> Arc<Store> {
    Arc::new(Store::open(&ankusa_store::store_path(c)).expect("open"))
}

fn backup(store: &Arc<Store>, c: &Config, intake: Option<Arc<dyn IntakeMark>>) -> Backup {
    Backup::new(store.clone(), c, Arc::new(Metrics::new()), intake, None).expect("backup")
}

/// Paths of a restore into a second, empty data dir.
fn fresh_paths(dir: &Path) -> Paths {
    let inst = dir.join("restored").join("gw-0");
    Paths::at(&inst, &inst.join("store"))
}

fn digest_at(path: &Path) -> [u8; 32] {
    Store::open_read_only(path)
        .expect("open read-only")
        .content_digest()
        .expect("digest")
}

struct Mark(serde_json::Value);
impl IntakeMark for Mark {
    fn mark(&self) -> BoxFuture<'static, Option<serde_json::Value>> {
        let v = self.0.clone();
        Box::pin(async move { Some(v) })
    }
}

fn blob_of(c: &Config) -> BlobStore {
    target(c).expect("target").0
}

#[tokio::test]
async fn a_restored_store_holds_exactly_what_the_checkpoint_held() {
    let d = tempfile::tempdir().unwrap();
    let c = config(d.path(), 3);
    let s = open_store(&c);
    seed_dead(&s, "t1", "src", 20, 1_000, ErrorClass::Permanent);
    seed_dead(&s, "t2", "src", 5, 2_000, ErrorClass::Transient);
    let mark = serde_json::json!({"partition": 0, "offset": 42});
    let b = backup(&s, &c, Some(Arc::new(Mark(mark.clone()))));
    let done = b.backup_now().await.unwrap();
    assert_eq!(
        done.uploaded, done.files,
        "the first backup uploads everything"
    );
    let held = s.content_digest().unwrap();
    assert!(!b.scratch.exists(), "the scratch checkpoint is removed");

    let paths = fresh_paths(d.path());
    let restored = restore_into(&blob_of(&c), b.layout(), &paths)
        .await
        .unwrap()
        .expect("a backup to restore");
    assert_eq!(restored.backup_id, done.backup_id);
    assert_eq!(restored.intake, Some(mark));
    assert_eq!(
        digest_at(&paths.store),
        held,
        "every key and value of every family"
    );
    assert!(!paths.marker.exists() && !paths.tmp.exists());
    let r = Store::open(&paths.store).unwrap();
    assert_eq!(r.store_id().unwrap(), s.store_id().unwrap());
    assert_eq!(r.totals().unwrap(), s.totals().unwrap());
    drop(r);

    // A store that is there is not restored over.
    assert_eq!(
        restore_into(&blob_of(&c), b.layout(), &paths)
            .await
            .unwrap(),
        None
    );
    let st = b.status();
    assert_eq!((st.runs, st.failures, st.store.as_str()), (1, 0, "local"));
    assert!(st.last_success_at.is_some());
}

#[tokio::test]
async fn sst_files_are_uploaded_once_and_old_backups_pruned() {
    let d = tempfile::tempdir().unwrap();
    let c = config(d.path(), 2);
    let s = open_store(&c);
    let b = backup(&s, &c, None);
    let blob = blob_of(&c);
    let mut ids = Vec::new();
    let mut last = None;
    for i in 0..4 {
        seed_dead(&s, "t", "src", 10, 1_000 * i, ErrorClass::Permanent);
        let done = b.backup_now().await.unwrap();
        if i > 0 {
            assert!(
                done.uploaded < done.files,
                "earlier SST files reused: {done:?}"
            );
        }
        ids.push(done.backup_id.clone());
        last = Some(s.content_digest().unwrap());
    }
    let manifests = blob.list(&b.layout().manifests_dir(), 100).await.unwrap();
    let kept: Vec<_> = manifests
        .iter()
        .filter_map(|l| b.layout().manifest_id(&l.key).map(String::from))
        .collect();
    assert_eq!(kept, ids[2..].to_vec(), "the newest two");
    // Every stored file is used by a kept manifest, and every used file is there.
    let mut used = HashSet::new();
    for id in &kept {
        for f in b.manifest(id).await.unwrap().files {
            used.insert(f.key);
        }
    }
    let mut stored = HashSet::new();
    for dir in [b.layout().files_dir(), b.layout().runs_dir()] {
        for l in blob.list(&dir, 10_000).await.unwrap() {
            stored.insert(l.key);
        }
    }
    assert_eq!(stored, used);
    let paths = fresh_paths(d.path());
    restore_into(&blob, b.layout(), &paths)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(Some(digest_at(&paths.store)), last);
}

#[tokio::test]
async fn a_backup_that_fails_mid_way_leaves_latest_on_the_previous_one() {
    let d = tempfile::tempdir().unwrap();
    let c = config(d.path(), 3);
    let s = open_store(&c);
    let b = backup(&s, &c, None);
    seed_dead(&s, "t", "src", 10, 1_000, ErrorClass::Permanent);
    let first = b.backup_now().await.unwrap();
    let first_digest = s.content_digest().unwrap();
    let latest_key = d.path().join("blobs").join(b.layout().latest());
    let latest_before = std::fs::read(&latest_key).unwrap();

    // The files go up, the manifest cannot (its directory is a file): as if the process died
    // between the uploads and the manifest.
    seed_dead(&s, "t", "src", 10, 2_000, ErrorClass::Permanent);
    let mdir = d.path().join("blobs").join(b.layout().manifests_dir());
    let moved = d.path().join("manifests-away");
    std::fs::rename(&mdir, &moved).unwrap();
    std::fs::write(mdir.to_str().unwrap().trim_end_matches('/'), b"x").unwrap();
    assert!(b.backup_now().await.is_err());
    assert_eq!(std::fs::read(&latest_key).unwrap(), latest_before);
    assert_eq!(b.status().failures, 1);
    assert!(b.status().last_error.is_some());

    // The store is back: a restore gets the first backup, whatever the failed one uploaded.
    std::fs::remove_file(mdir.to_str().unwrap().trim_end_matches('/')).unwrap();
    std::fs::rename(&moved, &mdir).unwrap();
    let paths = fresh_paths(d.path());
    let r = restore_into(&blob_of(&c), b.layout(), &paths)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(r.backup_id, first.backup_id);
    assert_eq!(digest_at(&paths.store), first_digest);

    // The next backup works and prunes what the failed one left.
    let third = b.backup_now().await.unwrap();
    assert_eq!(b.status().failures, 0);
    let runs = blob_of(&c)
        .list(&b.layout().runs_dir(), 1000)
        .await
        .unwrap();
    assert!(
        runs.iter()
            .all(|l| l.key.contains(&first.backup_id) || l.key.contains(&third.backup_id)),
        "the failed run's files are gone: {runs:?}"
    );
}

#[tokio::test]
async fn a_foreign_or_moved_latest_is_never_overwritten() {
    let d = tempfile::tempdir().unwrap();
    let c = config(d.path(), 3);
    let s = open_store(&c);
    let b = backup(&s, &c, None);
    b.backup_now().await.unwrap();
    let latest_key = d.path().join("blobs").join(b.layout().latest());
    let latest = std::fs::read(&latest_key).unwrap();

    // Another store, same prefix and instance.
    let d2 = tempfile::tempdir().unwrap();
    let mut c2 = config(d2.path(), 3);
    c2.backup = c.backup.clone();
    let s2 = open_store(&c2);
    let metrics = Arc::new(Metrics::new());
    let b2 = Backup::new(s2.clone(), &c2, metrics.clone(), None, None).unwrap();
    let e = b2.backup_now().await.unwrap_err();
    assert_eq!(e.refusal(), Some("foreign_backup"), "{e}");
    assert!(b2.status().last_error.unwrap().contains("foreign_backup"));
    assert_eq!(
        metrics
            .backup
            .refused
            .with_label_values(&["foreign_backup"])
            .get(),
        1
    );
    assert_eq!(std::fs::read(&latest_key).unwrap(), latest, "untouched");

    // The same store written by a second writer: the first refuses to go on.
    let other = backup(&s, &c, None);
    other.backup_now().await.unwrap();
    let e = b.backup_now().await.unwrap_err();
    assert_eq!(e.refusal(), Some("prefix_shared"), "{e}");
}

#[tokio::test]
async fn a_damaged_backup_refuses_to_restore_and_leaves_no_store() {
    let d = tempfile::tempdir().unwrap();
    let c = config(d.path(), 3);
    let s = open_store(&c);
    seed_dead(&s, "t", "src", 10, 1_000, ErrorClass::Permanent);
    let b = backup(&s, &c, None);
    b.backup_now().await.unwrap();
    let files = blob_of(&c)
        .list(&b.layout().files_dir(), 100)
        .await
        .unwrap();
    let sst = files
        .iter()
        .find(|l| l.key.ends_with(".sst"))
        .expect("an sst");
    let path = d.path().join("blobs").join(&sst.key);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[0] ^= 1;
    std::fs::write(&path, &bytes).unwrap();

    let paths = fresh_paths(d.path());
    let e = restore_into(&blob_of(&c), b.layout(), &paths)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("store_restore_failed: check "), "{e}");
    assert!(e.contains(".sst") && e.contains("sha256"), "{e}");
    assert!(!paths.store.exists() && !paths.tmp.exists() && !paths.marker.exists());

    // A damaged LATEST too.
    std::fs::write(d.path().join("blobs").join(b.layout().latest()), b"{").unwrap();
    let e = restore_into(&blob_of(&c), b.layout(), &paths)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("store_restore_failed: check LATEST"), "{e}");
}

#[tokio::test]
async fn an_interrupted_restore_starts_over_and_no_backup_starts_empty() {
    let d = tempfile::tempdir().unwrap();
    let c = config(d.path(), 3);
    let s = open_store(&c);
    let b = backup(&s, &c, None);
    let paths = fresh_paths(d.path());
    assert_eq!(
        restore_into(&blob_of(&c), b.layout(), &paths)
            .await
            .unwrap(),
        None,
        "no LATEST: a first boot"
    );
    seed_dead(&s, "t", "src", 3, 1_000, ErrorClass::Permanent);
    b.backup_now().await.unwrap();
    // A crash mid-restore: the marker and half a store.
    std::fs::create_dir_all(&paths.store).unwrap();
    std::fs::write(paths.store.join("000001.sst"), b"half").unwrap();
    std::fs::write(&paths.marker, b"").unwrap();
    restore_into(&blob_of(&c), b.layout(), &paths)
        .await
        .unwrap()
        .expect("restored again");
    assert_eq!(digest_at(&paths.store), s.content_digest().unwrap());
    assert!(!paths.marker.exists());
    // A marker with no LATEST any more is not a first boot.
    std::fs::remove_file(d.path().join("blobs").join(b.layout().latest())).unwrap();
    std::fs::write(&paths.marker, b"").unwrap();
    let e = restore_into(&blob_of(&c), b.layout(), &paths)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("read LATEST"), "{e}");
}

#[test]
fn backups_are_switched_on_from_the_environment() {
    struct Env(&'static str);
    impl ankusa_config::interpolate::Lookup for Env {
        fn env(&self, k: &str) -> Option<String> {
            (k == "ANKUSA_BACKUP_ENABLED").then(|| self.0.to_string())
        }
        fn file(&self, _: &str) -> std::io::Result<String> {
            Err(std::io::ErrorKind::NotFound.into())
        }
    }
    let mut c = Config::default();
    ankusa_config::apply_env_overrides(&mut c, &Env("true")).unwrap();
    assert!(c.backup.enabled);
    ankusa_config::apply_env_overrides(&mut c, &Env("false")).unwrap();
    assert!(!c.backup.enabled);
    let e = ankusa_config::apply_env_overrides(&mut c, &Env("yes")).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("ANKUSA_BACKUP_ENABLED"));
}

#[tokio::test]
async fn a_latest_put_whose_answer_was_lost_is_not_another_writer() {
    let d = tempfile::tempdir().unwrap();
    let c = config(d.path(), 3);
    let s = open_store(&c);
    let b = backup(&s, &c, None);
    b.backup_now().await.unwrap();
    // LATEST moved to a backup this node had tried to write (its put landed, its answer did
    // not): not `prefix_shared`.
    let other = backup(&s, &c, None);
    let landed = other.backup_now().await.unwrap();
    b.state().attempted_latest = Some(landed.backup_id.clone());
    b.backup_now().await.unwrap();
}
