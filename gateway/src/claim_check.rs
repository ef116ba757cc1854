//! The claim check: bodies too large for a queue message are checked in once per hook to a
//! local blob store under the data dir, and readers redeem them from the claim port with
//! `GET|HEAD /v1/claims/:tenant/:claim_id` (one `Range` supported). The message carries
//! `urn:ankusa:claim:v1:<tenant>:<claim_id>` and the body's sha256; readers check the digest.
//!
//! A write is a temp file, fsync, rename, then a directory fsync, so a claim that a delivered
//! message names survives power loss. Claims outlive their hook (a consumer redeems after the
//! delivery); `claim_check.retention_days` bounds how long.
//!
//! Readers: with `claim_check.tokens` set, a request needs one of them (`401` otherwise); a
//! token limited to some tenants (`{token, tenants}`) gets `403 forbidden` for a claim of any
//! other tenant, decided from the URL's tenant before the store is touched, so the answer is
//! the same whether the claim exists or not.
//!
//! Imports `api_error` only (its refusals); the claim port's listener is `app.rs`'s.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use ankusa_config::ClaimToken;
use ankusa_core::{ClaimCheck, ClaimCheckRef, Envelope};
use axum::Router;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::future::BoxFuture;
use sha2::{Digest, Sha256};

use crate::api_error::ApiError;

pub struct LocalClaimCheck {
    dir: PathBuf,
    tokens: Vec<ClaimToken>,
}

/// Why a reader is refused before the claim is looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    /// No token, or not one of `claim_check.tokens` (`401`).
    Unauthorized,
    /// A token limited to other tenants (`403`).
    OtherTenant,
}

impl LocalClaimCheck {
    pub fn new(dir: PathBuf, tokens: Vec<ClaimToken>) -> std::io::Result<Arc<LocalClaimCheck>> {
        ankusa_store::create_dir_synced(&dir)?;
        Ok(Arc::new(LocalClaimCheck { dir, tokens }))
    }

    /// The claim id of a hook: its id, so every sink and retry share one claim.
    pub fn claim_id(env: &Envelope) -> String {
        env.id.simple().to_string()
    }

    fn path(&self, tenant: &str, claim_id: &str) -> Option<PathBuf> {
        let ok = |s: &str| ankusa_config::valid_id(s);
        (ok(tenant) && ok(claim_id)).then(|| self.dir.join(tenant).join(claim_id))
    }

    fn write(&self, env: &Envelope) -> std::io::Result<ClaimCheckRef> {
        let claim_id = Self::claim_id(env);
        let sha = hex::encode(Sha256::digest(&env.body));
        let path = self.path(&env.tenant, &claim_id).ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "bad tenant or claim id")
        })?;
        let reference = ClaimCheckRef {
            urn: format!("urn:ankusa:claim:v1:{}:{claim_id}", env.tenant),
            sha256: sha,
        };
        if std::fs::metadata(&path).is_ok_and(|m| m.len() == env.body.len() as u64) {
            return Ok(reference);
        }
        let dir = path.parent().expect("claim path has a tenant directory");
        ankusa_store::create_dir_synced(dir)?;
        // Two sinks may check in the same hook at once: each writes its own temp file (the
        // process id alone would be shared), and `create_new` never truncates another's.
        static WRITER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let writer = WRITER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = dir.join(format!(".{claim_id}.tmp-{}-{writer}", std::process::id()));
        {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)?;
            f.write_all(&env.body)?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, &path)?;
        std::fs::File::open(dir)?.sync_all()?;
        Ok(reference)
    }

    /// Checks the bearer token of a request for `tenant`'s claim: one of the configured
    /// tokens (compared in constant time), and one that may read that tenant. Nothing of the
    /// store is looked at. No tokens configured: every request is admitted.
    fn admit(&self, headers: &HeaderMap, tenant: &str) -> Result<(), Refusal> {
        if self.tokens.is_empty() {
            return Ok(());
        }
        let presented = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .ok_or(Refusal::Unauthorized)?;
        use subtle::ConstantTimeEq;
        let found = self.tokens.iter().find(|t| {
            t.token.len() == presented.len()
                && bool::from(t.token.as_bytes().ct_eq(presented.as_bytes()))
        });
        match found {
            None => Err(Refusal::Unauthorized),
            Some(t) if t.allows(tenant) => Ok(()),
            Some(_) => Err(Refusal::OtherTenant),
        }
    }

    /// Deletes claims older than `days`; returns how many.
    pub fn sweep(&self, days: u32) -> std::io::Result<usize> {
        let cutoff = SystemTime::now() - Duration::from_secs(u64::from(days) * 86_400);
        let mut n = 0;
        for tenant in std::fs::read_dir(&self.dir)? {
            let tenant = tenant?;
            if !tenant.file_type()?.is_dir() {
                continue;
            }
            for f in std::fs::read_dir(tenant.path())? {
                let f = f?;
                if f.metadata()?.modified()? < cutoff {
                    std::fs::remove_file(f.path())?;
                    n += 1;
                }
            }
        }
        Ok(n)
    }
}

impl ClaimCheck for LocalClaimCheck {
    fn check_in<'a>(&'a self, env: &'a Envelope) -> BoxFuture<'a, Result<ClaimCheckRef, String>> {
        Box::pin(async move {
            let env = env.clone();
            let this = LocalClaimCheck {
                dir: self.dir.clone(),
                tokens: Vec::new(),
            };
            tokio::task::spawn_blocking(move || this.write(&env))
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| format!("claim check-in failed: {e}"))
        })
    }
}

pub fn router(claims: Arc<LocalClaimCheck>) -> Router {
    Router::new()
        .route(
            "/health",
            get(|| async { axum::Json(serde_json::json!({ "status": "ok" })) }),
        )
        .route("/v1/claims/{tenant}/{claim_id}", get(redeem).head(redeem))
        .with_state(claims)
}

/// Parses one `bytes=a-b`, `bytes=a-` or `bytes=-n` range against `len`.
/// `Ok(None)`: no usable Range header (serve it all); `Err(())`: unsatisfiable (`416`).
fn parse_range(v: &str, len: u64) -> Result<Option<(u64, u64)>, ()> {
    let Some(spec) = v.trim().strip_prefix("bytes=") else {
        return Ok(None);
    };
    if spec.contains(',') {
        return Ok(None);
    }
    let Some((a, b)) = spec.split_once('-') else {
        return Ok(None);
    };
    let (start, end) = match (a.trim(), b.trim()) {
        ("", n) => {
            let n: u64 = n.parse().map_err(|_| ())?;
            if n == 0 {
                return Err(());
            }
            (len.saturating_sub(n), len.saturating_sub(1))
        }
        (s, "") => (s.parse().map_err(|_| ())?, len.saturating_sub(1)),
        (s, e) => {
            let (s, e): (u64, u64) = (s.parse().map_err(|_| ())?, e.parse().map_err(|_| ())?);
            if e < s {
                return Err(());
            }
            (s, e.min(len.saturating_sub(1)))
        }
    };
    if len == 0 || start >= len {
        return Err(());
    }
    Ok(Some((start, end)))
}

async fn redeem(
    State(claims): State<Arc<LocalClaimCheck>>,
    method: Method,
    headers: HeaderMap,
    UrlPath((tenant, claim_id)): UrlPath<(String, String)>,
) -> Result<Response, ApiError> {
    match claims.admit(&headers, &tenant) {
        Ok(()) => {}
        Err(Refusal::Unauthorized) => return Err(ApiError::Unauthorized),
        Err(Refusal::OtherTenant) => return Err(ApiError::Forbidden { scope: None }),
    }
    let Some(path) = claims.path(&tenant, &claim_id) else {
        return Err(ApiError::ClaimNotFound);
    };
    let range = headers
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    let head = method == Method::HEAD;
    let read = tokio::task::spawn_blocking(move || read_claim(&path, range.as_deref(), head)).await;
    match read {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => Err(ApiError::ClaimNotFound),
        _ => Err(ApiError::StoreUnavailable { class: None }),
    }
}

fn read_claim(path: &Path, range: Option<&str>, head: bool) -> std::io::Result<Response> {
    let mut f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    let common = |mut r: Response| {
        let h = r.headers_mut();
        h.insert(header::ACCEPT_RANGES, "bytes".parse().expect("static"));
        h.insert(
            header::CONTENT_TYPE,
            "application/octet-stream".parse().expect("static"),
        );
        h.insert(
            header::CACHE_CONTROL,
            "private, max-age=31536000, immutable"
                .parse()
                .expect("static"),
        );
        r
    };
    let (status, start, end) = match range.map(|r| parse_range(r, len)) {
        Some(Err(())) => {
            let mut r = common(StatusCode::RANGE_NOT_SATISFIABLE.into_response());
            r.headers_mut().insert(
                header::CONTENT_RANGE,
                format!("bytes */{len}").parse().expect("ascii"),
            );
            return Ok(r);
        }
        Some(Ok(Some((s, e)))) => (StatusCode::PARTIAL_CONTENT, s, e),
        _ => (StatusCode::OK, 0, len.saturating_sub(1)),
    };
    let n = if len == 0 { 0 } else { end - start + 1 };
    let mut body = Vec::new();
    if !head && n > 0 {
        f.seek(SeekFrom::Start(start))?;
        body.reserve(n as usize);
        f.take(n).read_to_end(&mut body)?;
    }
    let mut r = common((status, body).into_response());
    r.headers_mut().insert(header::CONTENT_LENGTH, n.into());
    if status == StatusCode::PARTIAL_CONTENT {
        r.headers_mut().insert(
            header::CONTENT_RANGE,
            format!("bytes {start}-{end}/{len}").parse().expect("ascii"),
        );
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        assert_eq!(parse_range("bytes=0-9", 100), Ok(Some((0, 9))));
        assert_eq!(parse_range("bytes=90-", 100), Ok(Some((90, 99))));
        assert_eq!(parse_range("bytes=-10", 100), Ok(Some((90, 99))));
        assert_eq!(parse_range("bytes=95-200", 100), Ok(Some((95, 99))));
        assert_eq!(parse_range("bytes=100-", 100), Err(()));
        assert_eq!(parse_range("bytes=5-1", 100), Err(()));
        assert_eq!(parse_range("bytes=0-1,5-6", 100), Ok(None));
        assert_eq!(parse_range("items=0-1", 100), Ok(None));
    }

    #[tokio::test]
    async fn check_in_is_idempotent_and_redeemable() {
        let d = tempfile::tempdir().unwrap();
        let claims = LocalClaimCheck::new(d.path().join("claims"), vec![]).unwrap();
        let mut env = ankusa_store::test_util::ingest_test_envelope("acme", "src");
        env.body = bytes::Bytes::from(vec![7u8; 100_000]);
        let a = claims.check_in(&env).await.unwrap();
        let b = claims.check_in(&env).await.unwrap();
        assert_eq!(a, b);
        assert!(a.urn.starts_with("urn:ankusa:claim:v1:acme:"));
        assert_eq!(a.sha256, hex::encode(Sha256::digest(&env.body)));
        let id = LocalClaimCheck::claim_id(&env);
        let path = claims.path("acme", &id).unwrap();
        let r = read_claim(&path, Some("bytes=10-19"), false).unwrap();
        assert_eq!(r.status(), StatusCode::PARTIAL_CONTENT);
        assert_eq!(r.headers()[header::CONTENT_RANGE], "bytes 10-19/100000");
        assert_eq!(claims.sweep(1).unwrap(), 0);
        assert!(claims.path("../etc", "x").is_none());
    }

    #[test]
    fn tokens_limited_to_tenants() {
        let d = tempfile::tempdir().unwrap();
        let claims = LocalClaimCheck::new(
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
            claims.admit(&HeaderMap::new(), "acme"),
            Err(Refusal::Unauthorized)
        );
        assert_eq!(
            claims.admit(&bearer("wrong-token-00000000"), "acme"),
            Err(Refusal::Unauthorized)
        );
        assert_eq!(
            claims.admit(&bearer("every-tenant-reader-0"), "beta"),
            Ok(())
        );
        assert_eq!(
            claims.admit(&bearer("acme-only-reader-0000"), "acme"),
            Ok(())
        );
        assert_eq!(
            claims.admit(&bearer(" acme-only-reader-0000 "), "acme"),
            Ok(())
        );
        assert_eq!(
            claims.admit(&bearer("acme-only-reader-0000"), "beta"),
            Err(Refusal::OtherTenant)
        );
        let open = LocalClaimCheck::new(d.path().join("open"), vec![]).unwrap();
        assert_eq!(open.admit(&HeaderMap::new(), "beta"), Ok(()));
    }
}
