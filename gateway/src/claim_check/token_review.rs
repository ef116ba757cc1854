//! Claim readers with Kubernetes ServiceAccount tokens (`claim_check.token_review`): a bearer
//! token that is none of the static `tokens` is sent to the API server as a `TokenReview` for
//! the configured audience; an authenticated `system:serviceaccount:<ns>:<name>` listed in
//! `service_accounts` reads the tenants it is given. Answers are cached per token (a digest of
//! it, never the token) for `cache_ttl_s`, refusals for at most 10 s; at most
//! [`MAX_REVIEWS`] reviews are in flight, so a flood of made-up tokens costs the API server a
//! bounded rate. A leaf but for `api_error`'s sibling refusals, which `mod.rs` maps.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ankusa_config::{ConfigError, TokenReviewConfig};
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;

use crate::metrics::ClaimMetrics;

/// Reviews in flight at most; more wait up to the review timeout.
const MAX_REVIEWS: usize = 16;
/// Most answers cached.
const CACHE_MAX: usize = 10_000;
/// A refusal is remembered at most this long (a token minted a moment later must work).
const REFUSAL_TTL: Duration = Duration::from_secs(10);
/// The longest token sent for review (a projected token is about 1 KiB).
const MAX_TOKEN: usize = 8192;

/// Who a token is, as far as the claim port cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reviewed {
    /// An authenticated ServiceAccount listed in `service_accounts`: the tenants it reads
    /// (`None`: every tenant).
    Reader(Option<Vec<String>>),
    /// An authenticated ServiceAccount not listed: `403`.
    NotAReader,
    /// Not a token of this cluster for this audience: `401`.
    Refused,
}

/// The API server could not answer (`503 auth_unavailable`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable;

pub struct TokenReviewer {
    http: reqwest::Client,
    url: String,
    token_file: PathBuf,
    audience: String,
    readers: HashMap<String, Option<Vec<String>>>,
    ttl: Duration,
    timeout: Duration,
    permits: Semaphore,
    cache: Mutex<HashMap<[u8; 32], (Instant, Reviewed)>>,
    metrics: ClaimMetrics,
}

impl TokenReviewer {
    /// Built from `cfg` (the CA bundle read, the address resolved) without contacting the API
    /// server, by a start and by `check-config` alike.
    pub fn new(
        cfg: &TokenReviewConfig,
        metrics: ClaimMetrics,
    ) -> Result<TokenReviewer, ConfigError> {
        const AT: &str = "claim_check.token_review";
        let url = match &cfg.api_server {
            Some(u) => u.trim_end_matches('/').to_string(),
            None => in_cluster_url().ok_or_else(|| {
                ConfigError::general(format!(
                    "{AT}.api_server: absent, and KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT are not set (not in a pod)"
                ))
            })?,
        };
        let pem = std::fs::read(&cfg.ca_file).map_err(|e| {
            ConfigError::general(format!("{AT}.ca_file: cannot be read: {}", e.kind()))
        })?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem)
            .ok()
            .filter(|c| !c.is_empty())
            .ok_or_else(|| {
                ConfigError::general(format!("{AT}.ca_file: holds no PEM certificate"))
            })?;
        let http = reqwest::Client::builder()
            .tls_certs_only(certs)
            .timeout(Duration::from_millis(cfg.timeout_ms.into()))
            .connect_timeout(Duration::from_millis(cfg.timeout_ms.into()))
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .build()
            .map_err(|e| {
                ConfigError::general(format!("{AT}: cannot build the HTTP client: {e}"))
            })?;
        Ok(TokenReviewer {
            http,
            url: format!("{url}/apis/authentication.k8s.io/v1/tokenreviews"),
            token_file: cfg.token_file.clone(),
            audience: cfg.audience.clone(),
            readers: cfg
                .service_accounts
                .iter()
                .map(|sa| (sa.username(), sa.tenants.clone()))
                .collect(),
            ttl: Duration::from_secs(cfg.cache_ttl_s.into()),
            timeout: Duration::from_millis(cfg.timeout_ms.into()),
            permits: Semaphore::new(MAX_REVIEWS),
            cache: Mutex::new(HashMap::new()),
            metrics,
        })
    }

    /// Who presented `token`: from the cache, or from a review.
    pub async fn review(&self, token: &str) -> Result<Reviewed, Unavailable> {
        if token.len() > MAX_TOKEN || token.split('.').count() != 3 {
            // Not a JWT: no ServiceAccount token looks like this; the API server is not asked.
            return Ok(Reviewed::Refused);
        }
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(hit) = self.cached(&digest) {
            return Ok(hit);
        }
        let _permit = tokio::time::timeout(self.timeout, self.permits.acquire())
            .await
            .map_err(|_| Unavailable)?
            .map_err(|_| Unavailable)?;
        if let Some(hit) = self.cached(&digest) {
            return Ok(hit);
        }
        let asked = self.ask(token).await;
        let outcome = match &asked {
            Err(Unavailable) => "unavailable",
            Ok(None) => "refused",
            Ok(Some(u)) if self.readers.contains_key(u) => "reader",
            Ok(Some(_)) => "not_listed",
        };
        self.metrics
            .token_reviews
            .with_label_values(&[outcome])
            .inc();
        let verdict = match asked? {
            None => Reviewed::Refused,
            Some(u) => match self.readers.get(&u) {
                Some(tenants) => Reviewed::Reader(tenants.clone()),
                None => Reviewed::NotAReader,
            },
        };
        let ttl = match verdict {
            Reviewed::Refused => self.ttl.min(REFUSAL_TTL),
            _ => self.ttl,
        };
        if !ttl.is_zero() {
            let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            if cache.len() >= CACHE_MAX {
                let now = Instant::now();
                cache.retain(|_, (until, _)| *until > now);
                if cache.len() >= CACHE_MAX {
                    cache.clear();
                }
            }
            cache.insert(digest, (Instant::now() + ttl, verdict.clone()));
        }
        Ok(verdict)
    }

    fn cached(&self, digest: &[u8; 32]) -> Option<Reviewed> {
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache
            .get(digest)
            .filter(|(until, _)| *until > Instant::now())
            .map(|(_, v)| v.clone())
    }

    /// The user name the API server authenticated `token` as, for this audience; `None` when
    /// it did not.
    async fn ask(&self, token: &str) -> Result<Option<String>, Unavailable> {
        let own = tokio::fs::read_to_string(&self.token_file)
            .await
            .map_err(|e| {
                tracing::warn!(error = %e.kind(), "claim_check.token_review.token_file cannot be read");
                Unavailable
            })?;
        let review = serde_json::json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token, "audiences": [self.audience]},
        });
        let r = self
            .http
            .post(&self.url)
            .bearer_auth(own.trim())
            .json(&review)
            .send()
            .await
            .map_err(|e| {
                tracing::warn!(error = %e.without_url(), "TokenReview request failed");
                Unavailable
            })?;
        let status = r.status();
        if !status.is_success() {
            // 401/403: the gateway's own credential or its RBAC (tokenreviews create).
            tracing::warn!(
                status = status.as_u16(),
                "the API server refused a TokenReview"
            );
            return Err(Unavailable);
        }
        let v: serde_json::Value = r.json().await.map_err(|_| {
            tracing::warn!("the API server's TokenReview answer is not JSON");
            Unavailable
        })?;
        let st = &v["status"];
        if st["authenticated"] != serde_json::Value::Bool(true) {
            return Ok(None);
        }
        // A server that ignores `audiences` answers without them: such a token is not proven
        // to be meant for us.
        let for_us = st["audiences"]
            .as_array()
            .is_some_and(|a| a.iter().any(|x| x.as_str() == Some(&self.audience)));
        if !for_us {
            return Ok(None);
        }
        Ok(st["user"]["username"].as_str().map(str::to_string))
    }
}

/// `https://<KUBERNETES_SERVICE_HOST>:<KUBERNETES_SERVICE_PORT>` inside a pod.
fn in_cluster_url() -> Option<String> {
    let host = std::env::var("KUBERNETES_SERVICE_HOST").ok()?;
    let port = std::env::var("KUBERNETES_SERVICE_PORT").ok()?;
    let port: u16 = port.parse().ok()?;
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host
    };
    Some(format!("https://{host}:{port}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ca_and_the_address_are_config_errors() {
        let d = tempfile::tempdir().unwrap();
        let yaml = format!(
            "audience: ankusa-claims\napi_server: https://127.0.0.1:6443\nca_file: {}\nservice_accounts: [{{namespace: a, name: b}}]",
            d.path().join("missing.crt").display()
        );
        let cfg: TokenReviewConfig = serde_yaml_ng::from_str(&yaml).unwrap();
        let e = TokenReviewer::new(&cfg, ClaimMetrics::unregistered())
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("claim_check.token_review.ca_file"), "{e}");
        std::fs::write(d.path().join("missing.crt"), "not a certificate").unwrap();
        let e = TokenReviewer::new(&cfg, ClaimMetrics::unregistered())
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("holds no PEM certificate"), "{e}");
    }
}
