//! A small typed client of the admin API (`docs/admin-api.md`): dead letters, replay jobs and
//! the quarantine pen. Bearer tokens (tenant-limited ones work the same way: the API applies
//! their tenants), HTTPS with a CA bundle.

mod types;

use std::fmt;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

pub use types::{
    ArchiveWindow, DeadEntry, DeadPage, DlqQuery, ErrorClass, KIND_ARCHIVE, KIND_DLQ,
    KIND_LIFECYCLE, KIND_QUARANTINE, PenEntry, QuarantinePage, QuarantineQuery, ReplayFilter,
    ReplayJob, ReplayRequest, ReplayState,
};

use crate::errors::AdminError;
use crate::transport::{TlsConfigError, Transport, describe, join, read_capped};

/// The whole-request bound when none is set.
pub const DEFAULT_ADMIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Most bytes of an answer read: a DLQ page of 1000 entries is well under it.
const MAX_ANSWER_BYTES: u64 = 16 << 20;

/// A client of one node's admin API. Cheap to clone.
#[derive(Clone)]
pub struct AdminClient {
    base_url: String,
    token: String,
    timeout: Duration,
    transport: Transport,
}

impl fmt::Debug for AdminClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdminClient")
            .field("base_url", &self.base_url)
            .field("token", &"[redacted]")
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl AdminClient {
    /// A client of the admin API at `base_url` (e.g. `https://ankusa-0.ankusa-pods:4002`)
    /// sending `Authorization: Bearer <token>`; an empty token sends none (an open API).
    pub fn new(base_url: impl Into<String>, token: impl Into<String>) -> AdminClient {
        AdminClient {
            base_url: base_url.into(),
            token: token.into(),
            timeout: DEFAULT_ADMIN_TIMEOUT,
            transport: Transport::default(),
        }
    }

    /// Bounds each call as a whole.
    pub fn timeout(mut self, timeout: Duration) -> AdminClient {
        self.timeout = timeout;
        self
    }

    /// Trusts only the CA certificates of `pem` (e.g. `ca.crt` of the Gateway's admin TLS
    /// Secret).
    pub fn ca_bundle_pem(mut self, pem: impl AsRef<[u8]>) -> Result<AdminClient, TlsConfigError> {
        self.transport = Transport::with_ca_pem(pem.as_ref())?;
        Ok(self)
    }

    /// [`ca_bundle_pem`](Self::ca_bundle_pem) of a PEM file.
    pub fn ca_bundle_file(mut self, path: impl AsRef<Path>) -> Result<AdminClient, TlsConfigError> {
        self.transport = Transport::with_ca_file(path.as_ref())?;
        Ok(self)
    }

    /// `GET /v1/dlq`: a page of dead letters, newest first. Follow `next_cursor` until it is
    /// `None` (a sparse filter can return short, even empty, pages before the end).
    pub async fn list_dlq(&self, query: &DlqQuery) -> Result<DeadPage, AdminError> {
        self.call(
            reqwest::Method::GET,
            "/v1/dlq",
            &query.params(),
            None::<&()>,
        )
        .await
    }

    /// `POST /v1/replays`: creates a replay job (or returns the existing one of the same
    /// `job_id`, kind and filter).
    pub async fn create_replay(&self, request: &ReplayRequest) -> Result<ReplayJob, AdminError> {
        self.call(reqwest::Method::POST, "/v1/replays", &[], Some(request))
            .await
    }

    /// `GET /v1/replays/{id}`.
    pub async fn get_replay(&self, id: &str) -> Result<ReplayJob, AdminError> {
        let path = format!("/v1/replays/{}", path_segment(id)?);
        self.call(reqwest::Method::GET, &path, &[], None::<&()>)
            .await
    }

    /// `PATCH /v1/replays/{id}`: `Running` (resume), `Paused` or `Cancelled`.
    pub async fn patch_replay(
        &self,
        id: &str,
        state: ReplayState,
    ) -> Result<ReplayJob, AdminError> {
        let path = format!("/v1/replays/{}", path_segment(id)?);
        let body = types::PatchReplay { state };
        self.call(reqwest::Method::PATCH, &path, &[], Some(&body))
            .await
    }

    /// `GET /v1/quarantine`: the pen's entries, newest first, without bodies.
    pub async fn list_quarantine(
        &self,
        query: &QuarantineQuery,
    ) -> Result<QuarantinePage, AdminError> {
        self.call(
            reqwest::Method::GET,
            "/v1/quarantine",
            &query.params(),
            None::<&()>,
        )
        .await
    }

    async fn call<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        params: &[(&'static str, String)],
        body: Option<&B>,
    ) -> Result<T, AdminError> {
        let client = self.transport.client().map_err(transport_error)?;
        let mut url = reqwest::Url::parse(&join(&self.base_url, path)).map_err(|e| AdminError {
            code: "invalid_url".into(),
            status: None,
            retryable: false,
            field: None,
            message: Some(format!("the admin base URL does not parse: {e}")),
            scope: None,
        })?;
        if !params.is_empty() {
            url.query_pairs_mut()
                .extend_pairs(params.iter().map(|(k, v)| (*k, v.as_str())));
        }
        let mut req = client.request(method, url).timeout(self.timeout);
        if !self.token.is_empty() {
            req = req.bearer_auth(&self.token);
        }
        if let Some(b) = body {
            let json = serde_json::to_vec(b).map_err(|e| AdminError {
                code: "invalid_body".into(),
                status: None,
                retryable: false,
                field: None,
                message: Some(format!("cannot serialise the request: {e}")),
                scope: None,
            })?;
            req = req
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(json);
        }
        let resp = req.send().await.map_err(|e| transport_error(describe(e)))?;
        let status = resp.status().as_u16();
        let bytes = read_capped(resp, MAX_ANSWER_BYTES)
            .await
            .map_err(|e| transport_error(describe(e)))?;
        if (200..300).contains(&status) {
            return serde_json::from_slice(&bytes).map_err(|e| AdminError {
                code: "invalid_response".into(),
                status: Some(status),
                retryable: false,
                field: None,
                message: Some(format!("the answer is not the documented JSON: {e}")),
                scope: None,
            });
        }
        Err(api_error(status, &bytes))
    }
}

/// An error answer: its JSON `error` and extra fields, or `unexpected_status` without them.
fn api_error(status: u16, body: &[u8]) -> AdminError {
    let json: Option<serde_json::Map<String, serde_json::Value>> =
        serde_json::from_slice(body).ok();
    let text = |key: &str| {
        json.as_ref()
            .and_then(|j| j.get(key))
            .and_then(|v| v.as_str())
            .map(str::to_string)
    };
    AdminError {
        code: text("error").unwrap_or_else(|| "unexpected_status".into()),
        status: Some(status),
        retryable: AdminError::retryable_status(Some(status)),
        field: text("field"),
        message: text("message"),
        scope: text("scope"),
    }
}

fn transport_error(detail: String) -> AdminError {
    AdminError {
        code: "transport_error".into(),
        status: None,
        retryable: true,
        field: None,
        message: Some(detail),
        scope: None,
    }
}

/// A job id as one path segment: ids are UUIDs, so anything that could leave the segment is
/// refused rather than escaped.
fn path_segment(id: &str) -> Result<&str, AdminError> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(id)
    } else {
        Err(AdminError {
            code: "invalid_id".into(),
            status: None,
            retryable: false,
            field: Some("id".into()),
            message: Some("a replay id is [A-Za-z0-9_-]{1,128}".into()),
            scope: None,
        })
    }
}
