//! Client of each gateway pod's admin API (`http://<podIP>:<admin port>`, bearer token). The
//! bodies are the gateway's own wire types (`ankusa-api`).
//!
//! Every call has a short timeout; a pod that does not answer is reported per pod, never
//! fails a whole reconcile (the CloudNativePG pattern).

use std::time::Duration;

use ankusa_api::{
    CreateReplay, DeadLettered, FieldError, JobState, JobView, PatchReplay, ReloadReply,
    SourceDeliveries, Status,
};

/// One pod to talk to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodTarget {
    pub name: String,
    pub uid: String,
    pub ip: String,
    pub port: u16,
    pub token: String,
}

impl PodTarget {
    fn url(&self, path: &str) -> String {
        if self.ip.contains(':') {
            format!("http://[{}]:{}{path}", self.ip, self.port)
        } else {
            format!("http://{}:{}{path}", self.ip, self.port)
        }
    }
}

#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum AdminError {
    #[error("unreachable: {0}")]
    Unreachable(String),
    #[error("refused the config: {field}: {message}")]
    Refused { field: String, message: String },
    #[error("answered {status}: {body}")]
    Http { status: u16, body: String },
    #[error("unexpected answer: {0}")]
    Decode(String),
}

#[derive(Clone)]
pub struct AdminClient {
    http: reqwest::Client,
}

impl Default for AdminClient {
    fn default() -> Self {
        Self::new(Duration::from_secs(5))
    }
}

impl AdminClient {
    pub fn new(timeout: Duration) -> Self {
        AdminClient {
            http: reqwest::Client::builder()
                .timeout(timeout)
                .connect_timeout(Duration::from_secs(2))
                .no_proxy()
                .build()
                .expect("HTTP client builds"),
        }
    }

    async fn send(
        &self,
        t: &PodTarget,
        method: reqwest::Method,
        path: &str,
        body: Option<(&'static str, Vec<u8>)>,
    ) -> Result<(u16, Vec<u8>), AdminError> {
        let mut req = self.http.request(method, t.url(path)).bearer_auth(&t.token);
        if let Some((ct, b)) = body {
            req = req.header(reqwest::header::CONTENT_TYPE, ct).body(b);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| AdminError::Unreachable(without_url(&e)))?;
        let status = resp.status().as_u16();
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| AdminError::Unreachable(without_url(&e)))?;
        Ok((status, bytes.to_vec()))
    }

    fn decode<T: serde::de::DeserializeOwned>(status: u16, body: &[u8]) -> Result<T, AdminError> {
        if !(200..300).contains(&status) {
            return Err(AdminError::Http {
                status,
                body: String::from_utf8_lossy(body).chars().take(300).collect(),
            });
        }
        serde_json::from_slice(body).map_err(|e| AdminError::Decode(e.to_string()))
    }

    /// A JSON body.
    fn json(body: &impl serde::Serialize) -> Option<(&'static str, Vec<u8>)> {
        // Plain structs of strings and numbers always serialise.
        Some((
            "application/json",
            serde_json::to_vec(body).unwrap_or_default(),
        ))
    }

    pub async fn status(&self, t: &PodTarget) -> Result<Status, AdminError> {
        let (s, b) = self
            .send(t, reqwest::Method::GET, "/v1/status", None)
            .await?;
        Self::decode(s, &b)
    }

    /// Installs a config; a refusal names the field.
    pub async fn put_config(&self, t: &PodTarget, yaml: &str) -> Result<ReloadReply, AdminError> {
        let (s, b) = self
            .send(
                t,
                reqwest::Method::PUT,
                "/v1/config",
                Some(("application/yaml", yaml.as_bytes().to_vec())),
            )
            .await?;
        if s == 400
            && let Ok(e) = serde_json::from_slice::<FieldError>(&b)
            && e.error == "invalid_config"
        {
            return Err(AdminError::Refused {
                field: e.field.unwrap_or_default(),
                message: e.message,
            });
        }
        Self::decode(s, &b)
    }

    /// Creates a replay job (or finds the existing one with the same id and filter).
    pub async fn create_replay(
        &self,
        t: &PodTarget,
        body: &CreateReplay,
    ) -> Result<JobView, AdminError> {
        let (s, b) = self
            .send(t, reqwest::Method::POST, "/v1/replays", Self::json(body))
            .await?;
        Self::decode(s, &b)
    }

    /// A replay job; `None` when the pod does not know it.
    pub async fn get_replay(&self, t: &PodTarget, id: &str) -> Result<Option<JobView>, AdminError> {
        let (s, b) = self
            .send(t, reqwest::Method::GET, &format!("/v1/replays/{id}"), None)
            .await?;
        if s == 404 {
            return Ok(None);
        }
        Self::decode(s, &b).map(Some)
    }

    /// Sets a job's state (`cancelled`, `paused`, `running`); `None` when the pod does not
    /// know the job. A job already completed or cancelled is left as it is.
    pub async fn set_replay_state(
        &self,
        t: &PodTarget,
        id: &str,
        state: JobState,
    ) -> Result<Option<JobView>, AdminError> {
        let (s, b) = self
            .send(
                t,
                reqwest::Method::PATCH,
                &format!("/v1/replays/{id}"),
                Self::json(&PatchReplay::to(state)),
            )
            .await?;
        match s {
            404 => Ok(None),
            400 => {
                // `invalid_state`: the job already ended; report it as it is.
                self.get_replay(t, id).await
            }
            _ => Self::decode(s, &b).map(Some),
        }
    }

    pub async fn source_deliveries(
        &self,
        t: &PodTarget,
        id: &str,
    ) -> Result<SourceDeliveries, AdminError> {
        let (s, b) = self
            .send(
                t,
                reqwest::Method::GET,
                &format!("/v1/sources/{id}/deliveries"),
                None,
            )
            .await?;
        Self::decode(s, &b)
    }

    pub async fn dead_letter_source(
        &self,
        t: &PodTarget,
        id: &str,
    ) -> Result<DeadLettered, AdminError> {
        let (s, b) = self
            .send(
                t,
                reqwest::Method::POST,
                &format!("/v1/sources/{id}/dead_letter"),
                None,
            )
            .await?;
        Self::decode(s, &b)
    }
}

/// reqwest errors without the URL repeated (the pod is named next to the error anyway).
fn without_url(e: &reqwest::Error) -> String {
    let mut msg = if e.is_timeout() {
        "timed out".to_string()
    } else if e.is_connect() {
        "connection failed".to_string()
    } else {
        "request failed".to_string()
    };
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        msg = format!("{msg}: {s}");
        src = s.source();
        if msg.len() > 200 {
            break;
        }
    }
    msg
}
