//! What backups need from the store: its id (`m:store_id`, a UUID written at first open), a
//! RocksDB checkpoint (a consistent copy of the live database, SST files hard-linked), and a
//! digest over every key and value of every column family, so a test can say a restored store
//! holds exactly what the checkpoint held.

use std::path::Path;

use rocksdb::{DB, IteratorMode, Options};
use sha2::{Digest, Sha256};

use super::{Store, StoreError, classify, keys};

impl Store {
    /// This store's id: written with the format stamp of a new store, or at the first open of
    /// a store made before ids (`check_format`).
    pub fn store_id(&self) -> Result<uuid::Uuid, StoreError> {
        let db = self.db()?;
        let v = db
            .get(keys::META_STORE_ID)
            .map_err(|e| classify(&e))?
            .ok_or_else(|| StoreError::Corrupt("m:store_id is missing".into()))?;
        uuid::Uuid::from_slice(&v)
            .map_err(|_| StoreError::Corrupt("m:store_id is not a UUID".into()))
    }

    /// A checkpoint of the live database in `dir` (which must not exist). Memtables are
    /// flushed first, so the copy holds every write acknowledged before the call.
    pub fn checkpoint(&self, dir: &Path) -> Result<(), StoreError> {
        let db = self.db()?;
        let cp = rocksdb::checkpoint::Checkpoint::new(&db).map_err(|e| classify(&e))?;
        cp.create_checkpoint(dir).map_err(|e| classify(&e))
    }

    /// sha256 over every (family, key, value) of every column family, in order.
    pub fn content_digest(&self) -> Result<[u8; 32], StoreError> {
        let db = self.db()?;
        digest_db(&db, &self.path)
    }
}

fn digest_db(db: &DB, path: &Path) -> Result<[u8; 32], StoreError> {
    let mut names = DB::list_cf(&Options::default(), path).map_err(|e| classify(&e))?;
    names.sort();
    let mut h = Sha256::new();
    for name in &names {
        let cf = Store::cf(db, name)?;
        h.update((name.len() as u64).to_be_bytes());
        h.update(name.as_bytes());
        for item in db.iterator_cf(&cf, IteratorMode::Start) {
            let (k, v) = item.map_err(|e| classify(&e))?;
            h.update((k.len() as u64).to_be_bytes());
            h.update(&k);
            h.update((v.len() as u64).to_be_bytes());
            h.update(&v);
        }
    }
    Ok(h.finalize().into())
}

#[cfg(test)]
mod tests {
    use super::super::test_util::temp_store;
    use super::*;

    #[test]
    fn a_checkpoint_holds_what_the_store_held() {
        let (d, s) = temp_store();
        let id = s.store_id().unwrap();
        crate::test_util::seed_dead(&s, "t", "src", 3, 100, super::super::ErrorClass::Permanent);
        let before = s.content_digest().unwrap();
        let cp = d.path().join("cp");
        s.checkpoint(&cp).unwrap();
        let copy = Store::open_read_only(&cp).unwrap();
        assert_eq!(copy.content_digest().unwrap(), before);
        assert_eq!(copy.store_id().unwrap(), id);
        s.probe().unwrap();
        assert_ne!(
            s.content_digest().unwrap(),
            before,
            "a write changes the digest"
        );
    }
}
