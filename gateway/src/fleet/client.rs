//! The fleet's client: one pooled HTTP/2 client over mutual TLS (the pod's certificate, the
//! Gateway's CA), shared by every forward. At most `max_in_flight` forwards run at once;
//! past it a forward fails at once (the caller answers `503`), so a slow owner cannot pile
//! requests up on the pods in front of it.

use std::sync::Arc;
use std::time::Duration;

use ankusa_config::FleetConfig;
use tokio::sync::Semaphore;

use super::wire::{COMMIT_PATH, CommitAnswer, LOOKUP_PATH, Lookup, LookupAnswer};
use crate::tls::{ReloadingCert, TlsError, load_ca};

/// Largest answer read from a peer (answers are a few dozen bytes).
const MAX_ANSWER: usize = 16 << 10;

/// Why a forward or lookup got no answer to relay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerError {
    /// No connection, a TLS failure, a timeout, the in-flight bound, or an answer that is not
    /// the protocol's.
    Unavailable,
    /// The owner refused the commit: its status, JSON `error` code and `Retry-After`.
    Refused {
        status: u16,
        code: String,
        retry_after: Option<u64>,
    },
}

pub struct FleetClient {
    http: reqwest::Client,
    in_flight: Arc<Semaphore>,
}

impl FleetClient {
    /// Built once at start from `fleet.tls` (the certificate files are re-read as they
    /// rotate; the CA is read now).
    pub fn new(cfg: &FleetConfig) -> Result<FleetClient, TlsError> {
        let ca = Arc::new(load_ca("fleet.tls", &cfg.tls.ca_file)?);
        let cert = ReloadingCert::load_files("fleet.tls", &cfg.tls.cert_file, &cfg.tls.key_file)?;
        let tls = cert.mutual_client(&ca)?;
        let http = reqwest::Client::builder()
            .use_preconfigured_tls(tls)
            .http2_prior_knowledge()
            .http2_keep_alive_interval(Duration::from_secs(10))
            .http2_keep_alive_timeout(Duration::from_secs(5))
            .http2_keep_alive_while_idle(true)
            .pool_idle_timeout(Duration::from_secs(90))
            .connect_timeout(Duration::from_millis(cfg.timeout_ms.min(2_000)))
            .timeout(Duration::from_millis(cfg.timeout_ms))
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .build()
            .map_err(|_| TlsError::Invalid {
                section: "fleet.tls",
                field: "cert_file",
                reason: "cannot build the fleet client with this certificate",
            })?;
        Ok(FleetClient {
            http,
            in_flight: Arc::new(Semaphore::new(cfg.max_in_flight as usize)),
        })
    }

    /// Commits a forwarded record (`wire::encode_commit`) at the owner `base_url`.
    pub async fn commit(&self, base_url: &str, body: Vec<u8>) -> Result<CommitAnswer, PeerError> {
        let _slot = self
            .in_flight
            .try_acquire()
            .map_err(|_| PeerError::Unavailable)?;
        let url = format!("{}{COMMIT_PATH}", base_url.trim_end_matches('/'));
        let resp = self
            .http
            .post(url)
            .header("content-type", "application/octet-stream")
            .body(body)
            .send()
            .await
            .map_err(|e| {
                tracing::debug!(error = %e, "fleet forward failed");
                PeerError::Unavailable
            })?;
        answer(resp).await
    }

    /// Asks `base_url` which hook holds a dedupe key (the handover's look-up).
    pub async fn lookup(&self, base_url: &str, q: &Lookup) -> Result<LookupAnswer, PeerError> {
        let _slot = self
            .in_flight
            .try_acquire()
            .map_err(|_| PeerError::Unavailable)?;
        let url = format!("{}{LOOKUP_PATH}", base_url.trim_end_matches('/'));
        let resp = self.http.post(url).json(q).send().await.map_err(|e| {
            tracing::debug!(error = %e, "fleet lookup failed");
            PeerError::Unavailable
        })?;
        answer(resp).await
    }
}

/// A `200` with the expected JSON, or the peer's refusal (status, code, `Retry-After`).
async fn answer<T: serde::de::DeserializeOwned>(resp: reqwest::Response) -> Result<T, PeerError> {
    let status = resp.status();
    let retry_after = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let bytes = read_bounded(resp).await?;
    if status.is_success() {
        return serde_json::from_slice(&bytes).map_err(|_| PeerError::Unavailable);
    }
    #[derive(serde::Deserialize)]
    struct ErrorBody {
        error: String,
    }
    let code = serde_json::from_slice::<ErrorBody>(&bytes)
        .map(|b| b.error)
        .map_err(|_| PeerError::Unavailable)?;
    // A code is relayed only when it is one of ours in shape (a bounded token).
    if code.is_empty()
        || code.len() > 64
        || !code.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
    {
        return Err(PeerError::Unavailable);
    }
    Err(PeerError::Refused {
        status: status.as_u16(),
        code,
        retry_after,
    })
}

async fn read_bounded(mut resp: reqwest::Response) -> Result<Vec<u8>, PeerError> {
    let mut out = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|_| PeerError::Unavailable)? {
        if out.len() + chunk.len() > MAX_ANSWER {
            return Err(PeerError::Unavailable);
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}
