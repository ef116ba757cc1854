//! `ankusa-operator selftest`: what the chart's `helm test` pod runs, in the operator's own
//! image. Two checks, in order, each failure with its own exit code and a message naming what
//! failed (2 stays clap's usage error):
//! 1. the operator answers `200` on its `/ready` URL (retried until the deadline) → else
//!    [`EXIT_NOT_READY`];
//! 2. each of the four CRDs (`ankusa_crds::all()`) exists, is `Established`, serves
//!    `v1alpha1`, and its plural is listed by API discovery under `ankusa.dev/v1alpha1` → else
//!    [`EXIT_CRD`]; an API error that is not "not found" (forbidden, unreachable) →
//!    [`EXIT_API`].
//!
//! It only reads: a `get` on each CRD by name (the test pod's ClusterRole allows that and
//! nothing else) and the discovery document, which every authenticated client may read.

use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;

/// The operator did not answer `200` on its ready URL before the deadline.
pub const EXIT_NOT_READY: i32 = 3;
/// A CRD is missing, not established, or not served.
pub const EXIT_CRD: i32 = 4;
/// The API server refused or could not be reached (no client, forbidden, ...).
pub const EXIT_API: i32 = 5;

/// What `selftest` checks.
#[derive(Debug, Clone)]
pub struct Options {
    /// The operator's `/ready` URL (`http://<release>-ankusa-operator-metrics.<ns>.svc:8080/ready`);
    /// `None` skips the readiness check.
    pub ready_url: Option<String>,
    /// How long the readiness check keeps trying.
    pub timeout: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum SelftestError {
    #[error("operator not ready: GET {url} did not answer 200 within {waited_s}s (last: {last})")]
    NotReady {
        url: String,
        waited_s: u64,
        last: String,
    },
    #[error("CRD {crd} is not installed (get customresourcedefinitions/{crd}: 404)")]
    CrdMissing { crd: String },
    #[error("CRD {crd} is not established ({reason})")]
    CrdNotEstablished { crd: String, reason: String },
    #[error("CRD {crd} does not serve {version}")]
    CrdNotServed { crd: String, version: String },
    #[error("API discovery of {api_version} does not list {plural} (CRD {crd})")]
    NotDiscovered {
        crd: String,
        api_version: String,
        plural: String,
    },
    #[error("Kubernetes API: {what}: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("Kubernetes client: {0}")]
    Client(String),
}

impl SelftestError {
    /// The process exit code of this failure.
    pub fn exit_code(&self) -> i32 {
        match self {
            SelftestError::NotReady { .. } => EXIT_NOT_READY,
            SelftestError::CrdMissing { .. }
            | SelftestError::CrdNotEstablished { .. }
            | SelftestError::CrdNotServed { .. }
            | SelftestError::NotDiscovered { .. } => EXIT_CRD,
            SelftestError::Api { .. } | SelftestError::Client(_) => EXIT_API,
        }
    }
}

/// Runs both checks; the client is built (from `KUBECONFIG` or the pod's ServiceAccount) only
/// after the operator answered ready.
pub async fn run(opts: &Options) -> Result<(), SelftestError> {
    if let Some(url) = &opts.ready_url {
        check_ready(url, opts.timeout).await?;
    }
    let client = kube::Client::try_default()
        .await
        .map_err(|e| SelftestError::Client(e.to_string()))?;
    check_crds(&client).await
}

/// `GET url` until it answers `200`, or `timeout` has passed.
pub async fn check_ready(url: &str, timeout: Duration) -> Result<(), SelftestError> {
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .map_err(|e| SelftestError::Client(format!("HTTP client: {e}")))?;
    let start = Instant::now();
    loop {
        let last = match http.get(url).send().await {
            Ok(r) if r.status().is_success() => {
                tracing::info!(%url, status = r.status().as_u16(), "operator ready");
                return Ok(());
            }
            Ok(r) => format!("status {}", r.status().as_u16()),
            Err(e) => format!("{e}"),
        };
        if start.elapsed() >= timeout {
            return Err(SelftestError::NotReady {
                url: url.to_string(),
                waited_s: start.elapsed().as_secs(),
                last,
            });
        }
        tracing::info!(%url, %last, "operator not ready yet");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Each of the four CRDs: installed, established, serving the version, discovered.
pub async fn check_crds(client: &kube::Client) -> Result<(), SelftestError> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let api_version = format!("{}/{}", ankusa_crds::GROUP, ankusa_crds::VERSION);
    for (_, want) in ankusa_crds::all() {
        let name = want.metadata.name.clone().unwrap_or_default();
        let have = match crds.get(&name).await {
            Ok(c) => c,
            Err(kube::Error::Api(s)) if s.code == 404 => {
                return Err(SelftestError::CrdMissing { crd: name });
            }
            Err(source) => {
                return Err(SelftestError::Api {
                    what: format!("get customresourcedefinitions/{name}"),
                    source,
                });
            }
        };
        established(&have)?;
        let serves = have
            .spec
            .versions
            .iter()
            .any(|v| v.name == ankusa_crds::VERSION && v.served);
        if !serves {
            return Err(SelftestError::CrdNotServed {
                crd: name,
                version: ankusa_crds::VERSION.to_string(),
            });
        }
        tracing::info!(crd = %name, "CRD established and served");
    }
    let listed = client
        .list_api_group_resources(&api_version)
        .await
        .map_err(|source| match source {
            kube::Error::Api(s) if s.code == 404 => SelftestError::NotDiscovered {
                crd: "all four".into(),
                api_version: api_version.clone(),
                plural: "any resource".into(),
            },
            source => SelftestError::Api {
                what: format!("discovery of {api_version}"),
                source,
            },
        })?;
    for (_, want) in ankusa_crds::all() {
        let plural = want.spec.names.plural.clone();
        if !listed.resources.iter().any(|r| r.name == plural) {
            return Err(SelftestError::NotDiscovered {
                crd: want.metadata.name.clone().unwrap_or_default(),
                api_version,
                plural,
            });
        }
    }
    tracing::info!(%api_version, "all four resources discovered");
    Ok(())
}

/// The CRD's `Established` condition is `True` (names accepted, served by the API server).
fn established(crd: &CustomResourceDefinition) -> Result<(), SelftestError> {
    let name = crd.metadata.name.clone().unwrap_or_default();
    let cond = crd
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Established"));
    match cond {
        Some(c) if c.status == "True" => Ok(()),
        Some(c) => Err(SelftestError::CrdNotEstablished {
            crd: name,
            reason: format!(
                "Established={}: {} {}",
                c.status,
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default()
            ),
        }),
        None => Err(SelftestError::CrdNotEstablished {
            crd: name,
            reason: "no Established condition yet".into(),
        }),
    }
}
