//! Claims in a blob store every pod of a fleet writes and reads (`claim_check.store`): one
//! object per claim at `claims/tenant=<t>/dt=<yyyy-mm-dd>/<claim_id>`, the day the hook was
//! received (read back from its time-ordered id, so any pod finds the key from the URL alone),
//! never under `key_prefix`. The store answers only once it holds the object, so the claim a
//! message names is stored before the message is published. A bucket lifecycle rule on
//! `claims/` bounds how long claims live (`claim_check.bucket_expiry_days` declares it).
//! Imports the leaves `claim_ref` and `range`, `blob` and `api_error`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ankusa_core::{ClaimCheckRef, Envelope};
use axum::response::Response;
use uuid::Uuid;

use super::claim_ref::{claim_id, reference, valid};
use super::range::serve;
use crate::api_error::ApiError;
use crate::blob::{BlobError, BlobStore};

/// A hook's claim written within this long is not written again by its other sinks and retries.
const WRITTEN_TTL: Duration = Duration::from_secs(600);
/// Most hook ids remembered as written.
const WRITTEN_MAX: usize = 65_536;

pub struct BlobClaims {
    store: BlobStore,
    /// The largest claim read back (the largest body ingest accepts).
    max_bytes: u64,
    written: Mutex<HashMap<Uuid, Instant>>,
}

impl BlobClaims {
    pub fn new(store: BlobStore, max_bytes: u64) -> BlobClaims {
        BlobClaims {
            store,
            max_bytes,
            written: Mutex::new(HashMap::new()),
        }
    }

    pub fn kind(&self) -> &'static str {
        self.store.kind()
    }

    /// The object key of a claim; `None` for a tenant or id no claim can have.
    pub fn key(tenant: &str, claim_id: &str) -> Option<String> {
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

    fn recently_written(&self, id: Uuid) -> bool {
        let w = self.written.lock().unwrap_or_else(|p| p.into_inner());
        w.get(&id).is_some_and(|at| at.elapsed() < WRITTEN_TTL)
    }

    fn remember(&self, id: Uuid) {
        let mut w = self.written.lock().unwrap_or_else(|p| p.into_inner());
        if w.len() >= WRITTEN_MAX {
            w.retain(|_, at| at.elapsed() < WRITTEN_TTL);
            if w.len() >= WRITTEN_MAX {
                w.clear();
            }
        }
        w.insert(id, Instant::now());
    }

    /// Writes `env`'s body (again, when this process did not write it in the last minutes: a
    /// replay long after the first delivery renews an object the lifecycle rule may have taken).
    pub async fn write(&self, env: &Envelope) -> Result<ClaimCheckRef, String> {
        let reference = reference(env);
        if self.recently_written(env.id) {
            return Ok(reference);
        }
        let key = Self::key(&env.tenant, &claim_id(env))
            .ok_or_else(|| "claim check-in failed: bad tenant or claim id".to_string())?;
        self.store
            .put(&key, env.body.clone())
            .await
            .map_err(|e| format!("claim check-in failed: {e}"))?;
        self.remember(env.id);
        Ok(reference)
    }

    /// The claim port's answer for one claim. The object is read whole (claims are bounded by
    /// `http.max_body_bytes`) and the range cut from it.
    pub async fn read(
        &self,
        tenant: &str,
        claim_id: &str,
        range: Option<&str>,
        head: bool,
    ) -> Result<Response, ApiError> {
        let key = Self::key(tenant, claim_id).ok_or(ApiError::ClaimNotFound)?;
        let bytes = match self.store.get(&key, self.max_bytes).await {
            Ok(b) => b,
            Err(BlobError::NotFound { .. }) => return Err(ApiError::ClaimNotFound),
            Err(e @ BlobError::Refused { .. }) => {
                tracing::warn!(store = self.kind(), error = %e, "claim store refused a read");
                return Err(ApiError::StoreForbidden);
            }
            Err(e) => {
                tracing::warn!(store = self.kind(), error = %e, "claim store read failed");
                return Err(ApiError::StoreUnavailable { class: None });
            }
        };
        serve(bytes.len() as u64, range, head, |start, n| {
            Ok(bytes[start as usize..(start + n) as usize].to_vec())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_come_from_the_url_alone() {
        let id = Uuid::now_v7().simple().to_string();
        let key = BlobClaims::key("acme", &id).unwrap();
        let today = ankusa_format::segment::day_of(ankusa_core::now_ms());
        assert_eq!(key, format!("claims/tenant=acme/dt={today}/{id}"));
        assert!(BlobClaims::key("../x", &id).is_none());
        assert!(BlobClaims::key("acme", "short").is_none());
        assert!(BlobClaims::key("acme", &"z".repeat(32)).is_none());
        let untimed = Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef)
            .simple()
            .to_string();
        assert_eq!(
            BlobClaims::key("acme", &untimed).unwrap(),
            format!("claims/tenant=acme/dt=undated/{untimed}")
        );
    }
}
