//! Claims in a blob store every pod of a fleet writes and reads (`claim_check.store`), in packs
//! (`pack.rs`, written by `packer.rs`): one object per tenant per dispatch round at
//! `claims/tenant=<t>/dt=<yyyy-mm-dd>/<pack_id>`, the day of the check-in (read back from the
//! claim id, so any pod finds the object from the URL alone), never under `key_prefix`. A read
//! is two ranged reads of the pack — its index (kept in memory afterwards: the claims of one
//! pack are redeemed together) and the body's bytes, or the range of them a reader asked for.
//! A bucket lifecycle rule on `claims/` bounds how long claims live
//! (`claim_check.bucket_expiry_days` declares it).
//!
//! Claims written before packs (one object per claim, named by the hook's id in 32 hex digits)
//! are still read. Imports the leaves `claim_ref`, `pack` and `range`, `packer`, `blob` and
//! `api_error`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ankusa_core::{ClaimCheckRef, Envelope};
use axum::response::Response;
use uuid::Uuid;

use super::claim_ref::valid;
use super::pack::{self, INDEX_AT};
use super::packer::Packer;
use super::range::{Plan, serve};
use crate::api_error::ApiError;
use crate::blob::{BlobError, BlobStore};
use crate::metrics::ClaimMetrics;

/// Most pack indexes kept in memory (each 16 bytes per body).
const INDEXES_MAX: usize = 4096;

/// A pack's `(offset, length)` of each body.
type Index = Arc<Vec<(u64, u64)>>;

pub struct BlobClaims {
    store: Arc<BlobStore>,
    packer: Arc<Packer>,
    /// The largest claim read back (the largest body ingest accepts).
    max_bytes: u64,
    indexes: Mutex<HashMap<String, Index>>,
}

impl BlobClaims {
    /// Claims in `store`, packed for `linger` or up to `pack_max_bytes`.
    pub fn new(
        store: BlobStore,
        max_bytes: u64,
        linger: Duration,
        pack_max_bytes: u64,
        metrics: ClaimMetrics,
    ) -> Self {
        let store = Arc::new(store);
        BlobClaims {
            packer: Packer::new(store.clone(), linger, pack_max_bytes, metrics),
            store,
            max_bytes,
            indexes: Mutex::new(HashMap::new()),
        }
    }

    pub fn kind(&self) -> &'static str {
        self.store.kind()
    }

    /// The object key of a claim written before packs; `None` for a tenant or id no such
    /// claim can have.
    pub fn single_key(tenant: &str, claim_id: &str) -> Option<String> {
        if !valid(tenant, claim_id) || claim_id.len() != 32 {
            return None;
        }
        let id = Uuid::try_parse(claim_id).ok()?;
        let day = match id.get_timestamp() {
            Some(ts) => {
                let (secs, nanos) = ts.to_unix();
                ankusa_format::segment::day_of(secs * 1000 + u64::from(nanos / 1_000_000))
            }
            None => "undated".to_string(),
        };
        Some(format!("claims/tenant={tenant}/dt={day}/{claim_id}"))
    }

    /// Checks `env`'s body in to its tenant's open pack; answers once the pack is stored.
    pub async fn write(&self, env: &Envelope) -> Result<ClaimCheckRef, String> {
        if !ankusa_config::valid_id(&env.tenant) {
            return Err("claim check-in failed: bad tenant".to_string());
        }
        self.packer.check_in(env).await
    }

    /// The claim port's answer for one claim.
    pub async fn read(
        &self,
        tenant: &str,
        claim_id: &str,
        range: Option<&str>,
        head: bool,
    ) -> Result<Response, ApiError> {
        let Some((pack, position)) =
            pack::parse_claim(claim_id).filter(|_| valid(tenant, claim_id))
        else {
            return self.read_single(tenant, claim_id, range, head).await;
        };
        let key = pack.key(tenant);
        let index = self.index(&key).await?;
        let &(offset, len) = index
            .get(usize::from(position))
            .ok_or(ApiError::ClaimNotFound)?;
        let plan = match Plan::of(len, range, head) {
            Ok(p) => p,
            Err(refused) => return Ok(refused.response()),
        };
        let body = match plan.read() {
            Some((start, n)) => {
                let n = u32::try_from(n).map_err(|_| ApiError::ClaimNotFound)?;
                let bytes = self
                    .store
                    .get_range(&key, offset + start, n)
                    .await
                    .map_err(|e| self.refusal(e))?;
                bytes.to_vec()
            }
            None => Vec::new(),
        };
        Ok(plan.respond(body))
    }

    /// A pack's index: from memory, or read from the object's first bytes.
    async fn index(&self, key: &str) -> Result<Index, ApiError> {
        if let Some(i) = self
            .indexes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
        {
            return Ok(i.clone());
        }
        let head = self
            .store
            .get_range(key, 0, INDEX_AT as u32)
            .await
            .map_err(|e| self.refusal(e))?;
        let not_a_pack = || {
            tracing::warn!(store = self.kind(), "a claim object is not a pack");
            ApiError::ClaimNotFound
        };
        let count = pack::count_from_header(&head).ok_or_else(not_a_pack)?;
        let raw = self
            .store
            .get_range(key, INDEX_AT, (16 * count) as u32)
            .await
            .map_err(|e| self.refusal(e))?;
        let index = pack::parse_index(&raw);
        // An index whose entries point into the index or past the largest body is not ours.
        let bodies_at = INDEX_AT + 16 * count as u64;
        if index.len() != count
            || index
                .iter()
                .any(|&(o, l)| o < bodies_at || l > self.max_bytes || o.checked_add(l).is_none())
        {
            return Err(not_a_pack());
        }
        let index = Arc::new(index);
        let mut cache = self.indexes.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= INDEXES_MAX {
            cache.clear();
        }
        cache.insert(key.to_string(), index.clone());
        Ok(index)
    }

    /// A claim written before packs: its object read whole (claims are bounded by
    /// `http.max_body_bytes`) and the range cut from it.
    async fn read_single(
        &self,
        tenant: &str,
        claim_id: &str,
        range: Option<&str>,
        head: bool,
    ) -> Result<Response, ApiError> {
        let key = Self::single_key(tenant, claim_id).ok_or(ApiError::ClaimNotFound)?;
        let bytes = self
            .store
            .get(&key, self.max_bytes)
            .await
            .map_err(|e| self.refusal(e))?;
        serve(bytes.len() as u64, range, head, |start, n| {
            Ok(bytes[start as usize..(start + n) as usize].to_vec())
        })
    }

    /// A store's error as the claim port's answer.
    fn refusal(&self, e: BlobError) -> ApiError {
        match e {
            BlobError::NotFound { .. } => ApiError::ClaimNotFound,
            e @ BlobError::Refused { .. } => {
                tracing::warn!(store = self.kind(), error = %e, "claim store refused a read");
                ApiError::StoreForbidden
            }
            e => {
                tracing::warn!(store = self.kind(), error = %e, "claim store read failed");
                ApiError::StoreUnavailable { class: None }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_claims_written_before_packs() {
        let id = Uuid::now_v7().simple().to_string();
        let key = BlobClaims::single_key("acme", &id).unwrap();
        let today = ankusa_format::segment::day_of(ankusa_core::now_ms());
        assert_eq!(key, format!("claims/tenant=acme/dt={today}/{id}"));
        assert!(BlobClaims::single_key("../x", &id).is_none());
        assert!(BlobClaims::single_key("acme", "short").is_none());
        assert!(BlobClaims::single_key("acme", &"z".repeat(32)).is_none());
        let untimed = Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef)
            .simple()
            .to_string();
        assert_eq!(
            BlobClaims::single_key("acme", &untimed).unwrap(),
            format!("claims/tenant=acme/dt=undated/{untimed}")
        );
    }

    async fn body_of(r: Response) -> (u16, Vec<u8>) {
        let status = r.status().as_u16();
        let b = axum::body::to_bytes(r.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, b.to_vec())
    }

    /// Bodies checked in together share a pack; each is read back by its claim id alone (the
    /// whole, a range, a HEAD), a position past the pack's end and an object that is not a
    /// pack are `404`.
    #[tokio::test]
    async fn claims_read_back_from_their_pack() {
        let d = tempfile::tempdir().unwrap();
        let store = BlobStore::Local(crate::blob::LocalStore::new(d.path().to_path_buf()));
        let claims = BlobClaims::new(
            store,
            1 << 20,
            Duration::from_millis(50),
            1 << 24,
            ClaimMetrics::unregistered(),
        );
        let hooks: Vec<Envelope> = (0..3u8)
            .map(|i| {
                let mut env = ankusa_store::test_util::ingest_test_envelope("acme", "src");
                env.body = bytes::Bytes::from(vec![i; 5000 + usize::from(i)]);
                env
            })
            .collect();
        let refs = futures::future::join_all(hooks.iter().map(|h| claims.write(h))).await;
        let ids: Vec<String> = refs
            .into_iter()
            .map(|r| r.unwrap().urn.rsplit(':').next().unwrap().to_string())
            .collect();
        assert_eq!(ids[0][..22], ids[2][..22], "one pack");
        for (id, env) in ids.iter().zip(&hooks) {
            let (status, body) = body_of(claims.read("acme", id, None, false).await.unwrap()).await;
            assert_eq!((status, &body[..]), (200, &env.body[..]));
        }
        let r = claims
            .read("acme", &ids[1], Some("bytes=10-19"), false)
            .await
            .unwrap();
        assert_eq!(r.headers()["content-range"], "bytes 10-19/5001");
        assert_eq!(body_of(r).await, (206, vec![1u8; 10]));
        let r = claims.read("acme", &ids[2], None, true).await.unwrap();
        assert_eq!(r.headers()["content-length"], "5002");
        assert!(body_of(r).await.1.is_empty());
        let r = claims
            .read("acme", &ids[2], Some("bytes=5002-"), false)
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 416);
        // Position 3 of a pack of 3; another tenant's key; an object that is not a pack.
        let (pack, _) = pack::parse_claim(&ids[0]).unwrap();
        let past = pack.claim(3);
        assert_eq!(
            claims.read("acme", &past, None, false).await.err(),
            Some(ApiError::ClaimNotFound)
        );
        assert_eq!(
            claims.read("beta", &ids[0], None, false).await.err(),
            Some(ApiError::ClaimNotFound)
        );
        let forged = pack::PackId::new(ankusa_core::now_ms(), 99);
        claims
            .store
            .put(&forged.key("acme"), bytes::Bytes::from(vec![b'P'; 200]))
            .await
            .unwrap();
        assert_eq!(
            claims
                .read("acme", &forged.claim(0), None, false)
                .await
                .err(),
            Some(ApiError::ClaimNotFound)
        );
    }
}
