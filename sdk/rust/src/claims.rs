//! Claim redemption: the body of a claim-checked queue message, fetched from the gateway's claim
//! port (`GET /v1/claims/<tenant>/<claim_id>`) and checked against the message's `size` and
//! `sha256` before anyone sees it.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use sha2::{Digest, Sha256};

use crate::claim_ref::ClaimRef;
use crate::errors::{
    ClaimCheckUnavailableError, ClaimIntegrityError, ClaimNotFoundError, ClaimRejectedError, Error,
};
use crate::hook::Hook;
use crate::message::{Message, MessageBody};
use crate::transport::{TlsConfigError, Transport, describe, join, read_capped};

/// The whole-request bound when none is set: connect, answer and body.
pub const DEFAULT_CLAIM_TIMEOUT: Duration = Duration::from_secs(10);

/// A client of one gateway's claim port. Cheap to clone (the connection pool is shared).
#[derive(Clone)]
pub struct ClaimClient {
    base_url: String,
    token: Option<String>,
    timeout: Duration,
    transport: Transport,
}

impl fmt::Debug for ClaimClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The token stays out of logs.
        f.debug_struct("ClaimClient")
            .field("base_url", &self.base_url)
            .field("token", &self.token.as_ref().map(|_| "[redacted]"))
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl ClaimClient {
    /// A client of the claim port at `base_url` (e.g. `http://ankusa:4001`).
    pub fn new(base_url: impl Into<String>) -> ClaimClient {
        ClaimClient {
            base_url: base_url.into(),
            token: None,
            timeout: DEFAULT_CLAIM_TIMEOUT,
            transport: Transport::default(),
        }
    }

    /// Sends `Authorization: Bearer <token>` (a `claim_check.tokens` entry).
    pub fn token(mut self, token: impl Into<String>) -> ClaimClient {
        self.token = Some(token.into());
        self
    }

    /// Bounds each redemption as a whole: connecting, the answer and its body.
    pub fn timeout(mut self, timeout: Duration) -> ClaimClient {
        self.timeout = timeout;
        self
    }

    /// Trusts only the CA certificates of `pem` for an `https://` claim port.
    pub fn ca_bundle_pem(mut self, pem: impl AsRef<[u8]>) -> Result<ClaimClient, TlsConfigError> {
        self.transport = Transport::with_ca_pem(pem.as_ref())?;
        Ok(self)
    }

    /// [`ca_bundle_pem`](Self::ca_bundle_pem) of a PEM file.
    pub fn ca_bundle_file(mut self, path: impl AsRef<Path>) -> Result<ClaimClient, TlsConfigError> {
        self.transport = Transport::with_ca_file(path.as_ref())?;
        Ok(self)
    }

    /// Fetches the claim `claim` and checks it has `size` bytes of digest `sha256` (lowercase
    /// hex). Reads at most `size + 1` bytes.
    pub async fn redeem(&self, claim: &ClaimRef, size: u64, sha256: &str) -> Result<Bytes, Error> {
        let unavailable = |status: Option<u16>, detail: String| -> Error {
            ClaimCheckUnavailableError::new(status, detail).into()
        };
        let client = self.transport.client().map_err(|e| unavailable(None, e))?;
        let mut req = client
            .get(join(&self.base_url, &claim.path()))
            .timeout(self.timeout);
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| unavailable(None, describe(e)))?;
        let status = resp.status().as_u16();
        match status {
            200 => {}
            404 => return Err(ClaimNotFoundError::new().into()),
            408 | 429 | 300..=399 | 500..=599 => {
                return Err(unavailable(
                    Some(status),
                    format!("the claim gateway answered {status}"),
                ));
            }
            _ => return Err(ClaimRejectedError::new(status).into()),
        }
        let body = read_capped(resp, size)
            .await
            .map_err(|e| unavailable(None, describe(e)))?;
        if body.len() as u64 != size {
            return Err(ClaimIntegrityError::new(format!(
                "the claim has {}{} bytes, the message says {size}",
                body.len(),
                if body.len() as u64 > size {
                    " or more"
                } else {
                    ""
                }
            ))
            .into());
        }
        if hex::encode(Sha256::digest(&body)) != sha256 {
            return Err(
                ClaimIntegrityError::new("the claim does not match the message's sha256").into(),
            );
        }
        Ok(Bytes::from(body))
    }
}

/// The hook of `message`, its body in hand: the inline body as it is (no request), or the claim
/// redeemed through `client` and checked against the message's `size` and `sha256`.
///
/// Errors: [`ClaimNotFoundError`] (gone: dead-letter), [`ClaimCheckUnavailableError`]
/// (retryable: requeue with a delay), [`ClaimRejectedError`] (fix the token),
/// [`ClaimIntegrityError`] (other bytes than the message names).
pub async fn to_hook(message: &Message, client: &ClaimClient) -> Result<Hook, Error> {
    let body = match &message.body {
        MessageBody::Inline(b) => b.clone(),
        MessageBody::Claim(claim) => client.redeem(claim, message.size, &message.sha256).await?,
    };
    Ok(Hook::from_message(message, body))
}
