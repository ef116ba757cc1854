//! `Gateway`: a StatefulSet of gateway pods, each with its own RocksDB volume, configured from
//! the `Source` and `Sink` objects that refer to it.

use std::collections::BTreeMap;

use ankusa_config::{
    CommitConfig, DispatchConfig, EgressConfig, LogConfig, QuarantineConfig, QueueConfig,
    RateLimitsConfig, Routing,
};
use k8s_openapi::api::core::v1::{
    Affinity, LocalObjectReference, ResourceRequirements, Toleration, TopologySpreadConstraint,
};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod autoscaling;
mod blob;
mod claim_readers;
mod fleet;
mod lifecycle;
mod operate;
mod status;

pub use autoscaling::AutoscalingSpec;
pub use blob::{ArchiveCredentials, ArchiveSpec, BackupStoreSpec};
pub use claim_readers::{ClaimReaderAccount, ClaimTokenReview, DEFAULT_CLAIM_AUDIENCE};
pub use fleet::{FleetDedupeMode, FleetSpec};
pub use lifecycle::{LifecycleSpec, MAX_LIFECYCLE_SINKS};
pub use operate::{DisruptionSpec, MonitorSpec, MonitoringSpec, OtlpSettings, TelemetrySettings};
pub use status::{
    GatewayPodStatus, GatewayStatus, OwnedSecret, OwnershipRecord, PodArchiveStatus, PodDlqStatus,
    RenderedSink, SinkDeliveryError,
};

use crate::common::{SecretKeyRef, StringMap, optional_free_form_object, strip_defaults};

/// A fleet of Ankusa gateway pods.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "ankusa.dev",
    version = "v1alpha1",
    kind = "Gateway",
    namespaced,
    status = "GatewayStatus",
    shortname = "agw",
    category = "ankusa",
    doc = "A fleet of Ankusa gateway pods (a StatefulSet, one RocksDB volume per pod)",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    ),
    printcolumn(name = "Desired", type_ = "integer", json_path = ".spec.replicas"),
    printcolumn(name = "Ready", type_ = "integer", json_path = ".status.readyReplicas"),
    printcolumn(
        name = "Programmed",
        type_ = "string",
        json_path = ".status.programmed",
        description = "pods running the current rendered config / pods"
    ),
    printcolumn(
        name = "Status",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Message",
        type_ = "string",
        priority = 1,
        json_path = ".status.conditions[?(@.type==\"Ready\")].message"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct GatewaySpec {
    /// Number of gateway pods; each is an independent all-role node with its own store.
    #[serde(default = "default_replicas")]
    #[schemars(range(min = 0))]
    pub replicas: i32,
    /// Container image of the gateway (default: the operator's `--gateway-image`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// `Always`, `IfNotPresent` or `Never` (default: Kubernetes' rule for the image tag).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["Always", "IfNotPresent", "Never"]))]
    pub image_pull_policy: Option<String>,
    /// The persistent volume each pod keeps its store on.
    #[serde(default)]
    pub storage: StorageSpec,
    /// Container resources. Absent: requests `cpu: 250m`, `memory: 512Mi`, limit `memory:
    /// 1Gi` (no CPU limit: a throttled pod misses its ack deadlines); given, it replaces
    /// those defaults whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// The pods' ports: ingest, admin and claim check.
    #[serde(default)]
    pub ports: PortsSpec,
    /// The admin API bearer token (scope `*`) the operator uses to push config and run replays.
    /// Absent: the operator creates a Secret `<gateway>-admin-token` holding a random one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_token_secret_ref: Option<SecretKeyRef>,
    /// Gateway-wide settings. Each section has the keys of the same section of the gateway's
    /// config file (snake_case, see the configuration reference); absent keys take the
    /// gateway's defaults.
    #[serde(default)]
    pub settings: GatewaySettings,
    /// Overrides merged into the pod template.
    #[serde(default)]
    pub pod_template: PodTemplateOverrides,
    /// Seconds a pod gets to finish in-flight work after SIGTERM.
    #[serde(default = "default_grace")]
    pub termination_grace_period_seconds: i64,
    /// The ingest Service.
    #[serde(default)]
    pub service: ServiceSpec,
    /// The NetworkPolicy the operator puts around the pods (on by default).
    #[serde(default)]
    pub network_policy: NetworkPolicySpec,
    /// The PodDisruptionBudget the operator puts over the pods (on by default,
    /// `maxUnavailable: 1`).
    #[serde(default)]
    pub disruption: DisruptionSpec,
    /// ServiceMonitor / PodMonitor objects scraping the pods' admin `/metrics` (off by
    /// default).
    #[serde(default)]
    pub monitoring: MonitoringSpec,
    /// Lifecycle events of the pods (CloudEvents: sources changed, hooks dead-lettered,
    /// breakers opened, replays finished): the Sinks they go to and the audit trail's bounds.
    /// Absent: none. A Sink that does not render leaves the pods' lifecycle section as it was
    /// (or out) and never refuses the Gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<LifecycleSpec>,
    /// The archive: every pod packs the hooks it accepts into segments in a blob store (an S3
    /// bucket, or a directory on its own volume), so they can be sent again by a ReplayJob of
    /// kind `archive` and evicted from a full DLQ without being lost. Absent: no archive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive: Option<ArchiveSpec>,
    /// How far an acked hook survives the loss of its pod's volume: `mode: dual` also writes
    /// every hook to a replicated intake log (Kafka or NATS JetStream) before acking it, and
    /// `backup` uploads checkpoints of each pod's store. A pod that comes back on an empty
    /// volume restores its last backup and replays its records from the intake log. Absent:
    /// `mode: disk`, no backups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub durability: Option<DurabilitySpec>,
    /// A HorizontalPodAutoscaler over the pods, for `durability.mode: direct` only (a direct
    /// Gateway is a stateless Deployment; a disk or dual Gateway's pods each own a volume and
    /// are scaled by `replicas`). Given, it owns the replica count and `replicas` is ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaling: Option<AutoscalingSpec>,
    /// The pods as one dedupe domain: a provider's retry that lands on another pod is answered
    /// with the first hook's id (see `FleetSpec`). On by default (`dedupe: strict`).
    #[serde(default)]
    pub fleet: FleetSpec,
}

/// `spec.durability`: the gateway's `wal`, `intake` and `backup` sections, per pod.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[x_kube(
    validation = Rule::new("(has(self.mode) && self.mode == 'dual') == has(self.intake)")
        .message("durability.intake is required for mode dual, and only for it"),
    validation = Rule::new("!has(self.backup) || !has(self.mode) || self.mode != 'direct'")
        .message("durability.backup is for modes disk and dual (a direct Gateway stores no hook)"),
    validation = Rule::new("(has(self.mode) && self.mode == 'direct') || !(has(self.publishTimeoutMs) || has(self.retryAfterS))")
        .message("durability.publishTimeoutMs and retryAfterS are for mode direct only")
)]
#[serde(rename_all = "camelCase")]
pub struct DurabilitySpec {
    /// `disk` (default: a hook is acked once synced to the pod's own volume), `dual` (acked
    /// once synced there AND confirmed by the intake log, so losing the volume loses nothing
    /// acked) or `direct` (no store: acked once every sink of its source confirmed it; the pods
    /// are a Deployment with no volume). The mode of an existing Gateway cannot change.
    #[serde(default)]
    pub mode: DurabilityMode,
    /// `mode: direct`: the one deadline (ms, 100 to 60000, default 8000) for every sink of a
    /// hook to confirm it; past it the provider gets `503` and retries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 100, max = 60000))]
    pub publish_timeout_ms: Option<u64>,
    /// `mode: direct`: the `Retry-After` (seconds, 1 to 3600, default 2) of that `503`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 3600))]
    pub retry_after_s: Option<u32>,
    /// The intake log of `mode: dual`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intake: Option<IntakeSpec>,
    /// Checkpoints of each pod's store in an S3 bucket; a pod starting on an empty volume
    /// restores the latest one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<BackupSpec>,
}

/// When a hook is acked (the gateway's `wal.type`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DurabilityMode {
    /// After a synced commit to the pod's own volume.
    #[default]
    Disk,
    /// After the synced commit AND a confirmed publish to the intake log.
    Dual,
    /// No store: after every sink of the hook's source confirmed it (`wal.type: none`).
    Direct,
}

/// The intake log's kind.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum IntakeType {
    /// A Kafka topic (`acks=all`, idempotent producer), keyed by the pod name.
    Kafka,
    /// NATS JetStream: subject `<subject>.<pod>` of a stream that must exist.
    Jetstream,
}

/// The intake log connection: the shape of a Sink of type `kafka` or `nats`. `options` takes
/// the keys of that Sink's options (Kafka: `brokers`, `topic`, `security_protocol`,
/// `sasl.mechanism`, `tls`; JetStream: `servers`, `subject`, `tls`), credentials come from
/// Secrets through `secretRefs` (`sasl.username`, `sasl.password`, `auth.token`,
/// `tls.key_pem`, ...), exactly as for a Sink.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[x_kube(
    validation = Rule::new("!has(self.kafka) || self.type == 'kafka'")
        .message("intake.kafka is for type kafka"),
    validation = Rule::new("!has(self.jetstream) || self.type == 'jetstream'")
        .message("intake.jetstream is for type jetstream"),
    validation = Rule::new("!has(self.options) || !(has(self.kafka) || has(self.jetstream))")
        .message("intake.options (deprecated) and intake.kafka / intake.jetstream cannot both be set")
)]
#[serde(rename_all = "camelCase")]
pub struct IntakeSpec {
    /// The log: `kafka` (a topic) or `jetstream` (a NATS JetStream stream).
    #[serde(rename = "type")]
    pub type_: IntakeType,
    /// Deprecated (use `kafka` or `jetstream`; read for one more release): the connection as
    /// a free-form map with the keys of a Kafka or NATS Sink's options (snake_case).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_free_form_object")]
    pub options: Option<crate::sink::Options>,
    /// The Kafka connection of `type: kafka`: the options of a Kafka Sink.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::sink::options::kafka")]
    pub kafka: Option<crate::sink::Options>,
    /// The JetStream connection of `type: jetstream`: the options of a NATS Sink.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::sink::options::nats")]
    pub jetstream: Option<crate::sink::Options>,
    /// Options whose values come from Secrets, by option path, as a Sink's `secretRefs`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub secret_refs: BTreeMap<String, Vec<SecretKeyRef>>,
    /// How long an ack waits for the broker's confirmation (ms; default 5000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publish_timeout_ms: Option<u64>,
    /// Failed publishes in a row that make the pod answer new hooks `503 intake_unavailable`
    /// (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breaker_failures: Option<u32>,
    /// `Retry-After` of those answers (s; default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_s: Option<u32>,
    /// How often a pod republishes hooks the log has not confirmed (ms; default 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconcile_interval_ms: Option<u64>,
}

impl IntakeSpec {
    /// The connection options, the field they came from (`kafka`, `jetstream` or the
    /// deprecated `options`), after the rules the CRD declares in CEL (re-checked here for
    /// servers without it). Errors name the field under `spec.durability.intake`.
    pub fn resolved_options(&self) -> Result<(crate::sink::Options, &'static str), String> {
        let own = match self.type_ {
            IntakeType::Kafka => "kafka",
            IntakeType::Jetstream => "jetstream",
        };
        for (f, v) in [
            ("kafka", self.kafka.is_some()),
            ("jetstream", self.jetstream.is_some()),
        ] {
            if v && f != own {
                return Err(format!("{f}: is for type {f}, and type is {own}"));
            }
        }
        let typed = match self.type_ {
            IntakeType::Kafka => self.kafka.as_ref(),
            IntakeType::Jetstream => self.jetstream.as_ref(),
        };
        match (typed, &self.options) {
            (Some(_), Some(o)) if !o.is_empty() => Err(format!(
                "options: deprecated, and {own} is set too: move its keys to {own}"
            )),
            (Some(t), _) => Ok((t.clone(), own)),
            (None, Some(o)) => Ok((o.clone(), "options")),
            (None, None) => Ok((crate::sink::Options::new(), own)),
        }
    }
}

/// Backups of each pod's store.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupSpec {
    /// Default true.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Time between two backups of a pod (ms; default 60000); a clean stop writes one more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_ms: Option<u64>,
    /// Backups kept per pod (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep: Option<u32>,
    /// Where backups go. Absent: the archive's bucket (`spec.archive`, which must be of type
    /// `s3`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<BackupStoreSpec>,
    /// Prefix of every object key (`<keyPrefix>/backup/<pod>/...`); default
    /// `<namespace>/<gateway>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_prefix: Option<String>,
}

fn default_replicas() -> i32 {
    3
}

fn default_grace() -> i64 {
    60
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StorageSpec {
    /// Size of each pod's volume (a Kubernetes quantity).
    #[serde(default = "default_storage_size")]
    #[schemars(regex(
        pattern = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
    ))]
    pub size: String,
    /// Storage class of the volumes (default: the cluster's default class).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,
}

fn default_storage_size() -> String {
    "10Gi".into()
}

impl Default for StorageSpec {
    fn default() -> Self {
        StorageSpec {
            size: default_storage_size(),
            storage_class_name: None,
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PortsSpec {
    /// Ingest port (`http.port`).
    #[serde(default = "default_http_port")]
    pub http: u16,
    /// Admin API port (`admin.port`), reached by the operator on each pod's IP.
    #[serde(default = "default_admin_port")]
    pub admin: u16,
    /// Claim-check port (`claim_check.port`): consumers redeem large bodies here, at
    /// `<instance>.<gateway>-pods:<port>` (the message's `instance` is the pod name).
    #[serde(default = "default_claims_port")]
    pub claims: u16,
    /// Fleet port (`fleet.port`): the pods forward keyed hooks to each other here (mutual
    /// TLS, reached from the Gateway's own pods only).
    #[serde(default = "default_fleet_port")]
    pub fleet: u16,
}

fn default_fleet_port() -> u16 {
    4004
}

fn default_claims_port() -> u16 {
    4001
}

fn default_http_port() -> u16 {
    4000
}

fn default_admin_port() -> u16 {
    4002
}

impl Default for PortsSpec {
    fn default() -> Self {
        PortsSpec {
            http: default_http_port(),
            admin: default_admin_port(),
            claims: default_claims_port(),
            fleet: default_fleet_port(),
        }
    }
}

/// The ingest Service in front of the pods.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceSpec {
    /// `ClusterIP` (default), `NodePort` or `LoadBalancer`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["ClusterIP", "NodePort", "LoadBalancer"]))]
    pub type_: Option<String>,
    /// Annotations of the ingest Service (a cloud load balancer's settings, say).
    #[serde(default, skip_serializing_if = "StringMap::is_empty")]
    pub annotations: StringMap,
}

/// The NetworkPolicy `<gateway>` the operator renders around the pods: the ingest port open
/// to all, the admin port only from the operator's pods (and the namespaces listed for
/// scraping `/metrics`, which the admin port serves), the claim-check port only from the
/// namespaces listed. Namespaces are matched by their `kubernetes.io/metadata.name` label.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkPolicySpec {
    /// Render the NetworkPolicy (default true). Switched off, the operator deletes the one it
    /// created and leaves the pods open to whatever the cluster's other policies allow.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Namespaces whose pods may redeem claims on the claim-check port. Absent: the
    /// Gateway's own namespace; empty: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(inner(length(max = 63), regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")))]
    pub claim_check_namespaces: Option<Vec<String>>,
    /// Namespaces whose pods may reach the admin port besides the operator, for a Prometheus
    /// scraping `/metrics` there. The whole port is opened to them (a NetworkPolicy knows
    /// ports, not paths); every `/v1` route still needs the admin token.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(inner(length(max = 63), regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")))]
    pub metrics_namespaces: Vec<String>,
}

fn default_true() -> bool {
    true
}

impl Default for NetworkPolicySpec {
    fn default() -> Self {
        NetworkPolicySpec {
            enabled: true,
            claim_check_namespaces: None,
            metrics_namespaces: Vec::new(),
        }
    }
}

/// The `http:` keys a Gateway may set; addresses and ports belong to the operator.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct HttpSettings {
    /// Largest accepted request body, in bytes (default 8000000); a larger declared
    /// `Content-Length` is `413` unread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_body_bytes: Option<u64>,
    /// `path` (`POST {prefix}/:source`) or `tenant_path` (`POST {prefix}/:tenant/:source`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing: Option<Routing>,
    /// Path prefix of ingest URLs (default `/webhooks`): starts with `/`, does not end with
    /// one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^/.*[^/]$"))]
    pub prefix: Option<String>,
    /// Time allowed to receive the whole request body, in ms (default 30000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub body_timeout_ms: Option<u64>,
    /// Request bodies being read at once, in bytes, across all connections of a pod; past it
    /// a request is `503 overload` before its body is read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_inflight_body_bytes: Option<u64>,
    /// A rate limit per client IP, applied before the body is read (absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_rate_limit: Option<ankusa_config::RateLimit>,
    /// Proxies (CIDRs) whose `X-Forwarded-For` names the client for `client_rate_limit` (a
    /// load balancer in front of the ingest Service); the header of anyone else is ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trusted_proxies: Option<Vec<String>>,
    /// Connection limits of the ingest listener (`max_connections`, header and idle
    /// timeouts, header size and count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections: Option<ankusa_config::ConnectionLimits>,
}

/// Gateway-wide settings: sections of the gateway config file, embedded as the gateway's own
/// types (one definition). `http` and `claim_check` take the keys listed on them (the
/// listener addresses and ports are the operator's); docs/operator.md lists which gateway
/// keys a Gateway sets and which it does not, and why.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[schemars(transform = strip_defaults)]
pub struct GatewaySettings {
    /// The gateway's `log` section: level and format of the pods' logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<LogConfig>,
    /// The ingest listener's limits (`max_body_bytes`, `client_rate_limit`, `connections`,
    /// ...); its address and port are `spec.ports.http`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpSettings>,
    /// The pods' `node.region`: a free-form label shipped in queue messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batcher: Option<CommitConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limits: Option<RateLimitsConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatch: Option<DispatchConfig>,
    /// Where sinks may connect: HTTP receivers, brokers and queue endpoints (https and public
    /// addresses only by default); and `allowAmbientIdentity`, whether Sinks may use the pods'
    /// ambient cloud identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<EgressSettings>,
    /// The claim check: where bodies over a queue sink's inline limit are kept and served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_check: Option<ClaimCheckSettings>,
    /// The quarantine pen of Sources with `onVerifyFailure: quarantine`: `burst`, `rate` (per
    /// source) and `max_bytes` (the whole pen of a pod).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quarantine: Option<QuarantineConfig>,
    /// Bounds of the dead-letter queue (`dlq: {retention_days, max_rows, max_bytes}`): past
    /// one, archived dead rows are evicted; unarchived ones make new hooks `503 dlq_full`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueConfig>,
    /// OpenTelemetry trace export of the pods (`otlp: {endpoint, sampling_ratio,
    /// service_name}`); read at start, so a change rolls the pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub telemetry: Option<TelemetrySettings>,
}

/// `settings.egress`: the gateway's own `egress` section, plus one key the operator alone
/// reads (camelCase, as it is no key of the gateway's config file).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct EgressSettings {
    #[serde(flatten)]
    pub gateway: EgressConfig,
    /// Let a Sink of type `sqs` without static credentials, or `google_pubsub` with
    /// `auth: metadata`, use the pods' ambient cloud identity (environment, web identity,
    /// the node's metadata server). Default false: such a Sink is refused, naming the option,
    /// since it would act with whatever identity the pods' ServiceAccount or node carries,
    /// which the Sink's author was never given.
    #[serde(
        default,
        rename = "allowAmbientIdentity",
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub allow_ambient_identity: bool,
}

/// Claim-check settings. The claim port listens on the pod network only when reader tokens
/// are given: without them it stays on the pod's loopback, so bodies are never served
/// unauthenticated to the cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimCheckSettings {
    /// Off: a body over a sink's inline limit is refused by that sink (`message_too_large`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Days a checked-in body is kept (absent: until deleted by hand).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_days: Option<u32>,
    /// Bearer tokens consumers present to `GET /v1/claims/...`, one Secret key each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub token_secret_refs: Vec<SecretKeyRef>,
    /// Consumers that present their own ServiceAccount's token, checked with a TokenReview
    /// (the pods' ServiceAccount needs `create` on `tokenreviews`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_review: Option<ClaimTokenReview>,
    /// A bucket every pod writes claims to and serves them from, so a claim redeems through
    /// any pod and outlives the pod that wrote it (type `s3`). Absent: each pod's own volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<BackupStoreSpec>,
    /// With a `store`: bodies one tenant checks in within this many ms share one pack object
    /// (0–1000, default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 1000))]
    pub pack_linger_ms: Option<u32>,
    /// With a `store`: a pack is written once its bodies reach this many bytes (64 KiB–1 GiB,
    /// default 16 MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 65536, max = 1073741824))]
    pub pack_max_bytes: Option<u64>,
    /// The expiry of the bucket's lifecycle rule on `claims/`, declared so that a Source whose
    /// retries could outlive its claims is refused (`retry_exceeds_claim_expiry`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket_expiry_days: Option<u32>,
    /// Days a consumer is given to redeem a claim after its hook's last delivery (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redeem_grace_days: Option<u32>,
}

/// What a Gateway may add to its pods.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodTemplateOverrides {
    /// Labels added to every gateway pod (the operator's own labels win).
    #[serde(default, skip_serializing_if = "StringMap::is_empty")]
    pub labels: StringMap,
    /// Annotations added to every gateway pod.
    #[serde(default, skip_serializing_if = "StringMap::is_empty")]
    pub annotations: StringMap,
    /// The pods' affinity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    /// Tolerations of the pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// Node labels the pods must run on.
    #[serde(default, skip_serializing_if = "StringMap::is_empty")]
    pub node_selector: StringMap,
    /// The pods' PriorityClass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    /// How the pods spread over the cluster. Absent: one constraint spreading them over
    /// nodes (`kubernetes.io/hostname`, `maxSkew: 1`, `whenUnsatisfiable: ScheduleAnyway`,
    /// selecting the Gateway's pods); given, it replaces that default (an empty list: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_spread_constraints: Option<Vec<TopologySpreadConstraint>>,
    /// Secrets (in the Gateway's namespace) holding the registry credentials to pull the
    /// gateway image.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<LocalObjectReference>,
    /// Only a name the operator's policy allows (`--allowed-service-accounts`, chart value
    /// `gatewayPolicy.allowedServiceAccounts`); any other refuses the Gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
}
