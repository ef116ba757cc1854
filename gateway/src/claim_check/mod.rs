//! The claim check: bodies too large for a queue message are checked in once per hook — to the
//! node's data dir (`local.rs`), or to a blob store every pod of a fleet shares
//! (`claim_check.store`, `blob.rs`) — and readers redeem them from the claim port with
//! `GET|HEAD /v1/claims/:tenant/:claim_id` (one `Range` supported, `range.rs`). The message
//! carries `urn:ankusa:claim:v1:<tenant>:<claim_id>` and the body's sha256 (`claim_ref.rs`);
//! readers check the digest.
//!
//! Readers: with `claim_check.tokens` set, a request needs one of them (`401` otherwise); a
//! token limited to some tenants (`{token, tenants}`) gets `403 forbidden` for a claim of any
//! other tenant, decided from the URL's tenant before the store is touched, so the answer is
//! the same whether the claim exists or not.
//!
//! Imports its children, `blob` (the store a `store` block builds) and `api_error` (its
//! refusals); the claim port's listener is `app.rs`'s.

mod blob;
mod claim_ref;
mod local;
mod pack;
mod packer;
mod range;
mod token_review;

use std::path::PathBuf;
use std::sync::Arc;

use ankusa_config::{ClaimCheckConfig, ClaimToken, ConfigError};
use ankusa_core::{ClaimCheck, ClaimCheckRef, Envelope};
use axum::Router;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, Method, header};
use axum::response::Response;
use axum::routing::get;
use futures::future::BoxFuture;

use crate::api_error::ApiError;
use crate::blob::BlobStore;
use crate::metrics::ClaimMetrics;

pub use blob::BlobClaims;
pub use claim_ref::claim_id;
pub use local::LocalClaims;
pub use token_review::TokenReviewer;

/// Where claims are kept, and who may read them.
pub struct Claims {
    store: ClaimStore,
    tokens: Vec<ClaimToken>,
    /// ServiceAccount readers (`claim_check.token_review`), set once after construction.
    review: std::sync::OnceLock<TokenReviewer>,
}

enum ClaimStore {
    /// Files: the node's data dir, or a `store` of type `local`.
    Local(Arc<LocalClaims>),
    /// Objects in an S3, GCS or Azure store.
    Blob(BlobClaims),
}

/// Why a reader is refused before the claim is looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    /// No token, or not one of `claim_check.tokens` (`401`).
    Unauthorized,
    /// A token limited to other tenants, or a ServiceAccount not allowed to read (`403`).
    OtherTenant,
    /// The API server did not answer a TokenReview (`503 auth_unavailable`).
    AuthUnavailable,
}

impl Claims {
    /// Claims as files under `dir`.
    pub fn local(dir: PathBuf, tokens: Vec<ClaimToken>) -> std::io::Result<Arc<Claims>> {
        Ok(Arc::new(Claims {
            store: ClaimStore::Local(Arc::new(LocalClaims::new(dir)?)),
            tokens,
            review: std::sync::OnceLock::new(),
        }))
    }

    /// Claims in a blob store, packed as `cfg` says; `store` of type `local` keeps them as
    /// files in its directory. `max_bytes` is the largest body ingest accepts.
    pub fn in_store(
        store: BlobStore,
        cfg: &ClaimCheckConfig,
        max_bytes: u64,
        metrics: ClaimMetrics,
    ) -> std::io::Result<Arc<Claims>> {
        let store = match store {
            BlobStore::Local(l) => {
                ClaimStore::Local(Arc::new(LocalClaims::new(l.dir().join("claims"))?))
            }
            other => ClaimStore::Blob(BlobClaims::new(
                other,
                max_bytes,
                std::time::Duration::from_millis(cfg.pack_linger_ms.into()),
                cfg.pack_max_bytes,
                metrics,
            )),
        };
        Ok(Arc::new(Claims {
            store,
            tokens: cfg.tokens.clone(),
            review: std::sync::OnceLock::new(),
        }))
    }

    /// `data_dir`, `local`, `s3`, `gcs` or `azure`: where this node keeps claims.
    pub fn kind(&self) -> &'static str {
        match &self.store {
            ClaimStore::Local(_) => "local",
            ClaimStore::Blob(b) => b.kind(),
        }
    }

    /// The files of a local claim store (its sweeper's); `None` for a blob store, whose bucket
    /// lifecycle rule sweeps.
    pub fn local_files(&self) -> Option<Arc<LocalClaims>> {
        match &self.store {
            ClaimStore::Local(l) => Some(l.clone()),
            ClaimStore::Blob(_) => None,
        }
    }

    /// Lets readers present ServiceAccount tokens, checked by `reviewer` (once; a second
    /// call is ignored).
    pub fn set_token_review(&self, reviewer: TokenReviewer) {
        let _ = self.review.set(reviewer);
    }

    /// Checks the bearer token of a request for `tenant`'s claim: one of the configured
    /// tokens (compared in constant time) that may read that tenant, or else a ServiceAccount
    /// token the API server authenticates (`token_review`). Nothing of the store is looked at.
    /// Neither configured: every request is admitted.
    async fn admit(&self, headers: &HeaderMap, tenant: &str) -> Result<(), Refusal> {
        let review = self.review.get();
        if self.tokens.is_empty() && review.is_none() {
            return Ok(());
        }
        let presented = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or(Refusal::Unauthorized)?;
        use subtle::ConstantTimeEq;
        let found = self.tokens.iter().find(|t| {
            t.token.len() == presented.len()
                && bool::from(t.token.as_bytes().ct_eq(presented.as_bytes()))
        });
        match (found, review) {
            (Some(t), _) if t.allows(tenant) => Ok(()),
            (Some(_), _) => Err(Refusal::OtherTenant),
            (None, None) => Err(Refusal::Unauthorized),
            (None, Some(r)) => match r.review(presented).await {
                Ok(token_review::Reviewed::Reader(tenants)) => {
                    if tenants.is_none_or(|t| t.iter().any(|x| x == tenant)) {
                        Ok(())
                    } else {
                        Err(Refusal::OtherTenant)
                    }
                }
                Ok(token_review::Reviewed::NotAReader) => Err(Refusal::OtherTenant),
                Ok(token_review::Reviewed::Refused) => Err(Refusal::Unauthorized),
                Err(token_review::Unavailable) => Err(Refusal::AuthUnavailable),
            },
        }
    }
}

impl ClaimCheck for Claims {
    fn check_in<'a>(&'a self, env: &'a Envelope) -> BoxFuture<'a, Result<ClaimCheckRef, String>> {
        Box::pin(async move {
            match &self.store {
                ClaimStore::Local(l) => {
                    let (l, env) = (l.clone(), env.clone());
                    tokio::task::spawn_blocking(move || l.write(&env))
                        .await
                        .map_err(|e| e.to_string())?
                        .map_err(|e| format!("claim check-in failed: {e}"))
                }
                ClaimStore::Blob(b) => b.write(env).await,
            }
        })
    }
}

/// The blob store of a `claim_check.store` block: built (clients, key files read) without
/// contacting it, by a start and by `check-config` alike; its errors are config errors.
pub fn store_of(block: &ankusa_config::BackupStoreConfig) -> Result<BlobStore, ConfigError> {
    BlobStore::from_block(block, "claim_check.store").map_err(ConfigError::general)
}

pub fn router(claims: Arc<Claims>) -> Router {
    Router::new()
        .route(
            "/health",
            get(|| async { axum::Json(serde_json::json!({ "status": "ok" })) }),
        )
        .route("/v1/claims/{tenant}/{claim_id}", get(redeem).head(redeem))
        .with_state(claims)
}

async fn redeem(
    State(claims): State<Arc<Claims>>,
    method: Method,
    headers: HeaderMap,
    UrlPath((tenant, claim_id)): UrlPath<(String, String)>,
) -> Result<Response, ApiError> {
    match claims.admit(&headers, &tenant).await {
        Ok(()) => {}
        Err(Refusal::Unauthorized) => return Err(ApiError::Unauthorized),
        Err(Refusal::OtherTenant) => return Err(ApiError::Forbidden { scope: None }),
        Err(Refusal::AuthUnavailable) => return Err(ApiError::AuthUnavailable),
    }
    if !claim_ref::valid(&tenant, &claim_id) {
        return Err(ApiError::ClaimNotFound);
    }
    let range = headers
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    let head = method == Method::HEAD;
    match &claims.store {
        ClaimStore::Blob(b) => b.read(&tenant, &claim_id, range.as_deref(), head).await,
        ClaimStore::Local(l) => {
            let l = l.clone();
            let read = tokio::task::spawn_blocking(move || {
                l.read(&tenant, &claim_id, range.as_deref(), head)
            })
            .await;
            match read {
                Ok(Ok(r)) => Ok(r),
                Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                    Err(ApiError::ClaimNotFound)
                }
                _ => Err(ApiError::StoreUnavailable { class: None }),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::StatusCode;
    use sha2::{Digest, Sha256};

    #[tokio::test]
    async fn check_in_is_idempotent_and_redeemable() {
        let d = tempfile::tempdir().unwrap();
        let claims = Claims::local(d.path().join("claims"), vec![]).unwrap();
        let mut env = ankusa_store::test_util::ingest_test_envelope("acme", "src");
        env.body = bytes::Bytes::from(vec![7u8; 100_000]);
        let a = claims.check_in(&env).await.unwrap();
        let b = claims.check_in(&env).await.unwrap();
        assert_eq!(a, b);
        assert!(a.urn.starts_with("urn:ankusa:claim:v1:acme:"));
        assert_eq!(a.sha256, hex::encode(Sha256::digest(&env.body)));
        let files = claims.local_files().unwrap();
        let r = files
            .read("acme", &claim_id(&env), Some("bytes=10-19"), false)
            .unwrap();
        assert_eq!(r.status(), StatusCode::PARTIAL_CONTENT);
        assert_eq!(r.headers()[header::CONTENT_RANGE], "bytes 10-19/100000");
        assert_eq!(files.sweep(1).unwrap(), 0);
        assert!(files.path("../etc", "x").is_none());
    }

    #[tokio::test]
    async fn a_local_store_block_keeps_claims_in_its_directory() {
        let d = tempfile::tempdir().unwrap();
        let store = BlobStore::Local(crate::blob::LocalStore::new(d.path().to_path_buf()));
        let claims = Claims::in_store(
            store,
            &ClaimCheckConfig::default(),
            1 << 20,
            ClaimMetrics::unregistered(),
        )
        .unwrap();
        let mut env = ankusa_store::test_util::ingest_test_envelope("acme", "src");
        env.body = bytes::Bytes::from(vec![3u8; 5000]);
        claims.check_in(&env).await.unwrap();
        let on_disk = d.path().join("claims/acme").join(claim_id(&env));
        assert_eq!(std::fs::read(on_disk).unwrap(), vec![3u8; 5000]);
    }

    #[tokio::test]
    async fn tokens_limited_to_tenants() {
        let d = tempfile::tempdir().unwrap();
        let claims = Claims::local(
            d.path().join("claims"),
            vec![
                ClaimToken::new("every-tenant-reader-0"),
                ClaimToken::for_tenants("acme-only-reader-0000", &["acme"]),
            ],
        )
        .unwrap();
        let bearer = |t: &str| {
            let mut h = HeaderMap::new();
            h.insert(
                header::AUTHORIZATION,
                format!("Bearer {t}").parse().unwrap(),
            );
            h
        };
        assert_eq!(
            claims.admit(&HeaderMap::new(), "acme").await,
            Err(Refusal::Unauthorized)
        );
        assert_eq!(
            claims.admit(&bearer("wrong-token-00000000"), "acme").await,
            Err(Refusal::Unauthorized)
        );
        assert_eq!(
            claims.admit(&bearer("every-tenant-reader-0"), "beta").await,
            Ok(())
        );
        assert_eq!(
            claims.admit(&bearer("acme-only-reader-0000"), "acme").await,
            Ok(())
        );
        assert_eq!(
            claims
                .admit(&bearer(" acme-only-reader-0000 "), "acme")
                .await,
            Ok(())
        );
        assert_eq!(
            claims.admit(&bearer("acme-only-reader-0000"), "beta").await,
            Err(Refusal::OtherTenant)
        );
        let open = Claims::local(d.path().join("open"), vec![]).unwrap();
        assert_eq!(open.admit(&HeaderMap::new(), "beta").await, Ok(()));
    }
}
