//! What every reconciler shares: the client, the event recorder, metrics, the pods' admin
//! API client, settings; the error type; helpers to reach a Gateway's pods.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::PatchParams;
use kube::runtime::events::{Event as KEvent, EventType, Recorder, Reporter};
use kube::{Client, Resource, ResourceExt};

use crate::admin::{AdminClient, PodTarget};
use crate::metrics::Metrics;
use crate::resources;

/// Field manager of everything the operator applies.
pub const MANAGER: &str = "ankusa-operator";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<kube::runtime::finalizer::Error<Error>>),
    /// Waiting on something outside (queued deliveries draining, a pod answering); retried.
    #[error("waiting: {0}")]
    Waiting(String),
    #[error("{0}")]
    Invalid(String),
}

impl Error {
    /// Metric label.
    pub fn label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::Finalizer(e) => match e.as_ref() {
                kube::runtime::finalizer::Error::CleanupFailed(Error::Waiting(_))
                | kube::runtime::finalizer::Error::ApplyFailed(Error::Waiting(_)) => "waiting",
                _ => "finalizer",
            },
            Error::Waiting(_) => "waiting",
            Error::Invalid(_) => "invalid",
        }
    }

    pub fn is_waiting(&self) -> bool {
        self.label() == "waiting"
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Operator settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Image of gateway pods whose Gateway names none.
    pub gateway_image: String,
    /// Fastest re-poll of a running ReplayJob.
    pub replay_poll: Duration,
    /// Who may reach the pods' admin port, and which ServiceAccounts a Gateway may name.
    pub policy: resources::Policy,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            gateway_image: format!("ghcr.io/ankusa/ankusa:{}", env!("CARGO_PKG_VERSION")),
            replay_poll: Duration::from_secs(1),
            policy: resources::Policy::default(),
        }
    }
}

pub struct Ctx {
    pub client: Client,
    pub recorder: Recorder,
    pub metrics: Arc<Metrics>,
    pub admin: AdminClient,
    pub settings: Settings,
    /// Last pod poll per object (`kind/ns/name`), so a status write does not re-poll at once.
    pub last_poll: Mutex<HashMap<String, Instant>>,
}

impl Ctx {
    pub fn new(
        client: Client,
        metrics: Arc<Metrics>,
        settings: Settings,
        instance: String,
    ) -> Self {
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: MANAGER.into(),
                instance: Some(instance),
            },
        );
        Ctx {
            client,
            recorder,
            metrics,
            admin: AdminClient::default(),
            settings,
            last_poll: Mutex::new(HashMap::new()),
        }
    }

    /// Publishes an event; failures are logged, never fail a reconcile.
    pub async fn event<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        type_: EventType,
        reason: &str,
        note: impl Into<String>,
    ) {
        let ev = KEvent {
            type_,
            reason: reason.into(),
            note: Some(truncate(note.into(), 1000)),
            action: reason.into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&ev, &obj.object_ref(&())).await {
            tracing::warn!(error = %e, reason, "could not publish event");
        }
    }

    /// Time since the last poll of `key`, recording now when it is at least `min` (or never).
    pub fn poll_due(&self, key: &str, min: Duration) -> Option<Duration> {
        let mut m = self.last_poll.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        match m.get(key) {
            Some(t) if now.duration_since(*t) < min => Some(min - now.duration_since(*t)),
            _ => {
                m.insert(key.to_string(), now);
                None
            }
        }
    }

    pub fn forget_poll(&self, key: &str) {
        self.last_poll
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
    }
}

pub fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
    s
}

pub fn pod_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// What the operator needs to call a Gateway's pods: its admin token and TLS trust.
#[derive(Clone)]
pub struct AdminAccess {
    pub token: String,
    pub tls: Arc<crate::admin::AdminTrust>,
}

/// Where to reach a pod's admin API, when it runs and has an IP.
pub fn pod_target(p: &Pod, port: u16, access: &AdminAccess) -> Option<PodTarget> {
    if p.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let st = p.status.as_ref()?;
    if st.phase.as_deref() != Some("Running") {
        return None;
    }
    Some(PodTarget {
        name: p.name_any(),
        uid: p.uid().unwrap_or_default(),
        ip: st.pod_ip.clone().filter(|ip| !ip.is_empty())?,
        port,
        token: access.token.clone(),
        tls: Some(access.tls.clone()),
    })
}

/// Server-side apply params of the operator.
pub fn apply_params() -> PatchParams {
    PatchParams::apply(MANAGER).force()
}

/// Server-side apply params of one controller's status writes.
pub fn status_params(controller: &str) -> PatchParams {
    PatchParams::apply(&format!("{MANAGER}/{controller}")).force()
}
