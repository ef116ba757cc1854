//! Client of each gateway pod's admin API (`https://<podIP>:<admin port>`, bearer token). The
//! bodies are the gateway's own wire types (`ankusa-api`).
//!
//! The pods serve a certificate of their Gateway's own CA (`crate::pki`); the operator trusts
//! only that CA's bundle for that Gateway's pods, and checks the certificate names the
//! Gateway's pod domain (`<headless Service>.<namespace>.svc`) whatever IP it dialled, so a
//! pod of another Gateway, or anything else on the pod network, cannot take a config push.
//!
//! No redirect is followed: a pod answering `3xx` gets an error, and nothing (no token, no
//! config) is sent to where it points.
//!
//! Every call has a short timeout; a pod that does not answer is reported per pod, never
//! fails a whole reconcile (the CloudNativePG pattern).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use ankusa_api::{
    CreateReplay, DeadLettered, FieldError, FilterTest, FilterTestResult, JobState, JobView,
    PatchReplay, ReloadReply, SourceDeliveries, Status,
};

/// One pod to talk to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodTarget {
    pub name: String,
    pub uid: String,
    pub ip: String,
    pub port: u16,
    pub token: String,
    /// HTTPS with this trust; plain HTTP when `None` (a gateway run outside the operator).
    pub tls: Option<Arc<AdminTrust>>,
}

/// What a Gateway's admin certificate must chain to and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AdminTrust {
    /// The Gateway's CA bundle (PEM; during a CA rotation, the new and the old CA).
    pub ca_pem: String,
    /// The DNS name the serving certificate must carry.
    pub server_name: String,
}

impl PodTarget {
    fn url(&self, path: &str) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        if self.ip.contains(':') {
            format!("{scheme}://[{}]:{}{path}", self.ip, self.port)
        } else {
            format!("{scheme}://{}:{}{path}", self.ip, self.port)
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

/// How long a pod has to answer a dry run (`filters_test`).
const FILTER_TEST_TIMEOUT: Duration = Duration::from_secs(60);

/// HTTPS clients kept per trust; past this many (CA rotations, deleted Gateways) they are
/// dropped and rebuilt on use.
const MAX_TLS_CLIENTS: usize = 256;

#[derive(Clone)]
pub struct AdminClient {
    http: reqwest::Client,
    timeout: Duration,
    tls: Arc<Mutex<HashMap<AdminTrust, reqwest::Client>>>,
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
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("HTTP client builds"),
            timeout,
            tls: Arc::default(),
        }
    }

    /// The client for a target: the plain one, or the HTTPS one of its Gateway's trust.
    fn client(&self, t: &PodTarget) -> Result<reqwest::Client, AdminError> {
        let Some(trust) = &t.tls else {
            return Ok(self.http.clone());
        };
        let mut clients = self.tls.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = clients.get(trust.as_ref()) {
            return Ok(c.clone());
        }
        let c = reqwest::Client::builder()
            .timeout(self.timeout)
            .connect_timeout(Duration::from_secs(2))
            .no_proxy()
            // A redirect would carry the token, and a PUT's whole config, elsewhere.
            .redirect(reqwest::redirect::Policy::none())
            .tls_backend_preconfigured(tls_config(trust)?)
            .build()
            .map_err(|e| AdminError::Unreachable(format!("HTTPS client: {e}")))?;
        if clients.len() >= MAX_TLS_CLIENTS {
            clients.clear();
        }
        clients.insert(trust.as_ref().clone(), c.clone());
        Ok(c)
    }

    async fn send(
        &self,
        t: &PodTarget,
        method: reqwest::Method,
        path: &str,
        body: Option<(&'static str, Vec<u8>)>,
    ) -> Result<(u16, Vec<u8>), AdminError> {
        self.send_within(t, method, path, body, None).await
    }

    /// `send`, with a longer deadline than the client's for a call that reads much.
    async fn send_within(
        &self,
        t: &PodTarget,
        method: reqwest::Method,
        path: &str,
        body: Option<(&'static str, Vec<u8>)>,
        timeout: Option<Duration>,
    ) -> Result<(u16, Vec<u8>), AdminError> {
        let mut req = self
            .client(t)?
            .request(method, t.url(path))
            .bearer_auth(&t.token);
        if let Some(d) = timeout {
            req = req.timeout(d);
        }
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

    /// A dry run of source `source_id`'s filters and transforms over the pod's archive (reads
    /// up to `limit` archived hooks, so it has a minute, not the usual few seconds).
    pub async fn filters_test(
        &self,
        t: &PodTarget,
        source_id: &str,
        body: &FilterTest,
    ) -> Result<FilterTestResult, AdminError> {
        let (s, b) = self
            .send_within(
                t,
                reqwest::Method::POST,
                &format!("/v1/sources/{source_id}/filters/test"),
                Self::json(body),
                Some(FILTER_TEST_TIMEOUT),
            )
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

/// rustls settings trusting only the Gateway's CA bundle, for its pod domain.
fn tls_config(trust: &AdminTrust) -> Result<rustls::ClientConfig, AdminError> {
    let unusable = |what: &str| AdminError::Unreachable(format!("the Gateway's admin CA {what}"));
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(trust.ca_pem.as_bytes()) {
        let cert = cert.map_err(|_| unusable("bundle is not valid PEM"))?;
        roots
            .add(cert)
            .map_err(|_| unusable("bundle holds an unusable certificate"))?;
    }
    if roots.is_empty() {
        return Err(unusable("bundle is empty"));
    }
    let provider = rustls::crypto::CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::aws_lc_rs::default_provider()));
    let inner = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|_| unusable("bundle cannot verify certificates"))?;
    let name = ServerName::try_from(trust.server_name.clone())
        .map_err(|_| unusable("server name is not a DNS name"))?;
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|_| unusable("settings have no TLS version"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(GatewayName { inner, name }))
        .with_no_client_auth();
    Ok(config)
}

/// The standard WebPKI checks (chain to the Gateway's CA, validity, key usage), against the
/// Gateway's pod domain instead of the dialled IP: pods are reached by IP, their shared
/// certificate names the domain.
#[derive(Debug)]
struct GatewayName {
    inner: Arc<WebPkiServerVerifier>,
    name: ServerName<'static>,
}

impl ServerCertVerifier for GatewayName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _dialled: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.inner
            .verify_server_cert(end_entity, intermediates, &self.name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}
