//! The HTTP client setup the claim and admin clients share: rustls, roots from a CA bundle when
//! one is given (only those: a private gateway CA, not the public ones), redirects never
//! followed, and a body read that stops at a byte limit.

use std::path::Path;
use std::sync::{Arc, OnceLock};

/// A CA bundle that cannot be used: unreadable, no certificate in it, or one rustls refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("CA bundle: {0}")]
pub struct TlsConfigError(String);

/// A lazily built `reqwest::Client`, shared by the clones of a claim or admin client.
#[derive(Debug, Clone, Default)]
pub(crate) struct Transport {
    roots: Option<Arc<Vec<reqwest::Certificate>>>,
    client: Arc<OnceLock<Result<reqwest::Client, String>>>,
}

impl Transport {
    /// A transport that trusts only the certificates of `pem` (one or more PEM certificates).
    /// The client is built now, so a bundle rustls refuses fails here, not at the first call.
    pub(crate) fn with_ca_pem(pem: &[u8]) -> Result<Transport, TlsConfigError> {
        let certs = reqwest::Certificate::from_pem_bundle(pem)
            .map_err(|e| TlsConfigError(format!("not PEM certificates: {e}")))?;
        if certs.is_empty() {
            return Err(TlsConfigError("holds no PEM certificate".into()));
        }
        let t = Transport {
            roots: Some(Arc::new(certs)),
            client: Arc::default(),
        };
        t.client().map_err(TlsConfigError)?;
        Ok(t)
    }

    /// [`with_ca_pem`](Self::with_ca_pem) of a file's content.
    pub(crate) fn with_ca_file(path: &Path) -> Result<Transport, TlsConfigError> {
        let pem = std::fs::read(path)
            .map_err(|e| TlsConfigError(format!("cannot read {}: {e}", path.display())))?;
        Self::with_ca_pem(&pem)
    }

    /// The client; built on first use.
    pub(crate) fn client(&self) -> Result<&reqwest::Client, String> {
        self.client
            .get_or_init(|| {
                let mut b = reqwest::Client::builder()
                    // A body comes only from the gateway that was configured.
                    .redirect(reqwest::redirect::Policy::none());
                if let Some(roots) = &self.roots {
                    b = b.tls_certs_only(roots.iter().cloned());
                }
                b.build()
                    .map_err(|e| format!("cannot build the HTTP client: {e}"))
            })
            .as_ref()
            .map_err(Clone::clone)
    }
}

/// Reads `resp`'s body, keeping at most `limit + 1` bytes: one byte past the limit tells the
/// caller the body is too long, without reading (or holding) the rest.
pub(crate) async fn read_capped(
    mut resp: reqwest::Response,
    limit: u64,
) -> Result<Vec<u8>, reqwest::Error> {
    // Never trust a length from the other side for the allocation.
    let mut out = Vec::with_capacity(limit.min(1 << 20) as usize);
    while let Some(chunk) = resp.chunk().await? {
        let room = (limit.saturating_add(1)).saturating_sub(out.len() as u64) as usize;
        out.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if out.len() as u64 > limit {
            break;
        }
    }
    Ok(out)
}

/// The URL of `path` under `base` (trailing slashes of `base` ignored).
pub(crate) fn join(base: &str, path: &str) -> String {
    format!("{}{path}", base.trim_end_matches('/'))
}

/// What went wrong without an answer, with its causes; never the URL (it may hold userinfo).
pub(crate) fn describe(e: reqwest::Error) -> String {
    let what = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "cannot connect"
    } else if e.is_body() || e.is_decode() {
        "the answer broke off"
    } else if e.is_builder() {
        "invalid URL"
    } else {
        "request failed"
    };
    let e = e.without_url();
    let mut out = format!("{what}: {e}");
    let mut cause = std::error::Error::source(&e);
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}
