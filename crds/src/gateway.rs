//! `Gateway`: a StatefulSet of gateway pods, each with its own RocksDB volume, configured from
//! the `Source` and `Sink` objects that refer to it.

use std::collections::BTreeMap;

use ankusa_config::{
    ArchiveAt, BlobStoreType, CommitConfig, DispatchConfig, EgressConfig, LogConfig,
    QuarantineConfig, QueueConfig, RateLimitsConfig, Routing,
};
use k8s_openapi::api::core::v1::{Affinity, ResourceRequirements, Toleration};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{
    Condition, SecretKeyRef, StringMap, conditions_schema, free_form_object, strip_defaults,
};

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
    pub replicas: i32,
    /// Container image of the gateway (default: the operator's `--gateway-image`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<String>,
    /// The persistent volume each pod keeps its store on.
    #[serde(default)]
    pub storage: StorageSpec,
    /// Container resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
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
}

/// `spec.durability`: the gateway's `wal`, `intake` and `backup` sections, per pod.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[x_kube(
    validation = Rule::new("(has(self.mode) && self.mode == 'dual') == has(self.intake)")
        .message("durability.intake is required for mode dual, and only for it")
)]
#[serde(rename_all = "camelCase")]
pub struct DurabilitySpec {
    /// `disk` (default: a hook is acked once synced to the pod's own volume) or `dual` (acked
    /// once synced there AND confirmed by the intake log, so losing the volume loses nothing
    /// acked).
    #[serde(default)]
    pub mode: DurabilityMode,
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
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IntakeSpec {
    #[serde(rename = "type")]
    pub type_: IntakeType,
    /// The connection, with the keys of a Kafka or NATS Sink's options (snake_case).
    #[serde(default)]
    #[schemars(schema_with = "free_form_object")]
    pub options: serde_json::Map<String, serde_json::Value>,
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

/// A bucket for backups: the S3 fields of `spec.archive`. Type `local` is refused: a backup
/// on the pod's own volume goes with it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[x_kube(
    validation = Rule::new("self.type == 's3'")
        .message("durability.backup.store.type must be s3: a local backup stays on the pod's own volume and is lost with it"),
    validation = Rule::new("self.type != 's3' || has(self.bucket)")
        .message("durability.backup.store.bucket is required for type s3")
)]
#[serde(rename_all = "camelCase")]
pub struct BackupStoreSpec {
    /// `s3` (an S3-compatible bucket).
    #[serde(rename = "type")]
    pub type_: BlobStoreType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket: Option<String>,
    /// An S3-compatible endpoint; default: AWS's endpoint of the region. No credentials in
    /// the URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Signing region; default `us-east-1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Path-style addressing; default true with an `endpoint`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force_path_style: Option<bool>,
    /// Static credentials, each a key of a Secret labelled `ankusa.dev/usable=true`. Absent:
    /// the pods' environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<ArchiveCredentials>,
    /// Per S3 request, connect to response (ms; default 30000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// Where the pods archive hooks (the gateway's `storage:` section, per pod). Credentials come
/// from Secrets only.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[x_kube(
    validation = Rule::new("self.type != 's3' || has(self.bucket)")
        .message("archive.bucket is required for type s3"),
    validation = Rule::new("self.type != 'local' || (!has(self.bucket) && !has(self.endpoint) && !has(self.region) && !has(self.forcePathStyle) && !has(self.credentials) && !has(self.timeoutMs))")
        .message("archive.bucket, endpoint, region, forcePathStyle, credentials and timeoutMs are for type s3 only")
)]
#[serde(rename_all = "camelCase")]
pub struct ArchiveSpec {
    /// `s3` (an S3-compatible bucket: AWS, MinIO, R2, ...) or `local` (the directory
    /// `archive` on each pod's own volume, which goes with the volume).
    #[serde(rename = "type")]
    pub type_: BlobStoreType,
    /// When a hook is archived: `settled` (default: once every delivery is delivered or dead)
    /// or `ack` (at once, hooks still retrying included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive_at: Option<ArchiveAt>,
    /// The bucket (`s3`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket: Option<String>,
    /// An S3-compatible endpoint (`https://minio.storage:9000`); default: AWS's endpoint of
    /// the region. No credentials in the URL: give them in `credentials`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Signing region; default `us-east-1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Path-style addressing (`<endpoint>/<bucket>/<key>`); default true with an `endpoint`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force_path_style: Option<bool>,
    /// Prefix of every object key (`<keyPrefix>/archive/v1/dt=<day>/<pod>/...`); default
    /// `<namespace>/<gateway>`, so Gateways sharing a bucket never write the same keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_prefix: Option<String>,
    /// Static credentials, each a key of a Secret labelled `ankusa.dev/usable=true`. Absent:
    /// the pods' environment (web identity, instance metadata).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<ArchiveCredentials>,
    /// A segment is closed at this size (bytes; default 16 MiB, at most 32 MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roll_bytes: Option<u64>,
    /// ... or when its oldest hook has waited this long (ms; default 30000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roll_ms: Option<u64>,
    /// How often each pod looks for hooks to archive (ms; default 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_ms: Option<u64>,
    /// Per S3 request, connect to response (ms; default 30000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// S3 credentials as Secret keys (`accessKeyId` and `secretAccessKey` together).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ArchiveCredentials {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_key_id: Option<SecretKeyRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_access_key: Option<SecretKeyRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_token: Option<SecretKeyRef>,
}

impl ArchiveCredentials {
    /// `(field, reference)` of each credential given, by its name in the spec.
    pub fn refs(&self) -> impl Iterator<Item = (&'static str, &SecretKeyRef)> {
        [
            ("accessKeyId", &self.access_key_id),
            ("secretAccessKey", &self.secret_access_key),
            ("sessionToken", &self.session_token),
        ]
        .into_iter()
        .filter_map(|(f, r)| Some((f, r.as_ref()?)))
    }
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
    /// `<instance>.<gateway>-headless:<port>` (the message's `instance` is the pod name).
    #[serde(default = "default_claims_port")]
    pub claims: u16,
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
        }
    }
}

/// The ingest Service in front of the pods.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceSpec {
    /// `ClusterIP` (default), `NodePort` or `LoadBalancer`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_body_bytes: Option<u64>,
    /// `path` (`POST {prefix}/:source`) or `tenant_path` (`POST {prefix}/:tenant/:source`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing: Option<Routing>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_timeout_ms: Option<u64>,
}

/// Gateway-wide settings: sections of the gateway config file, embedded as the gateway's own
/// types (one definition), so every key documented for the config file works here.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[schemars(transform = strip_defaults)]
pub struct GatewaySettings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<LogConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpSettings>,
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
}

/// What a Gateway may add to its pods.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodTemplateOverrides {
    #[serde(default, skip_serializing_if = "StringMap::is_empty")]
    pub labels: StringMap,
    #[serde(default, skip_serializing_if = "StringMap::is_empty")]
    pub annotations: StringMap,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    #[serde(default, skip_serializing_if = "StringMap::is_empty")]
    pub node_selector: StringMap,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    /// Only a name the operator's policy allows (`--allowed-service-accounts`, chart value
    /// `gatewayPolicy.allowedServiceAccounts`); any other refuses the Gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
}

/// What the operator last saw of one pod.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GatewayPodStatus {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_ip: Option<String>,
    /// The pod's Ready condition.
    pub ready: bool,
    /// The pod runs the config rendered for it.
    pub programmed: bool,
    /// `config_hash` the pod reports (`GET /v1/status`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_hash: Option<String>,
    /// The hash of the config rendered for this pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_hash: Option<String>,
    /// Settings the pod changed on reload but can only apply after a restart.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restart_required: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The pod's archive, when `spec.archive` is set (counts refreshed at most every 20 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive: Option<PodArchiveStatus>,
    /// The pod's dead-letter queue (counts refreshed at most every 20 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dlq: Option<PodDlqStatus>,
    /// Seconds since the pod's last successful backup (since it started, before the first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_age_seconds: Option<i64>,
    /// When the pod's last backup completed (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_backup_at: Option<String>,
    /// Failed backups in a row (0 once one succeeds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_failures: Option<i64>,
    /// The last backup's error (never a credential).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_last_error: Option<String>,
    /// The backup this pod restored when it started on an empty volume (manifest id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored_from: Option<String>,
    /// The intake log under `mode: dual`: `recovering` (replaying at start), `ready`, or
    /// `down` (publishes keep failing: new hooks get `503 intake_unavailable`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intake_state: Option<String>,
    /// Age of the oldest hook committed on the pod whose publish the log has not confirmed
    /// (whole seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intake_lag_seconds: Option<i64>,
    /// Hooks committed on the pod whose publish the log has not confirmed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intake_pending: Option<i64>,
}

/// A pod's archive (`archive` of its `GET /v1/status`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodArchiveStatus {
    /// Hooks accepted and not yet in an uploaded segment.
    pub pending: i64,
    /// Hooks archived on this pod.
    #[serde(default)]
    pub archived: i64,
    /// When the last segment was uploaded (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_upload_at: Option<String>,
    /// Failed uploads in a row (0 once one succeeds).
    #[serde(default)]
    pub failures: i64,
    /// The last upload's error (never a credential).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// A pod's dead-letter queue (`dlq` of its `GET /v1/status`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodDlqStatus {
    pub rows: i64,
    pub bytes: i64,
    /// Over a `queue.dlq` bound with nothing archived to evict: the pod answers new hooks
    /// `503 dlq_full` until the archive catches up.
    #[serde(default)]
    pub full: bool,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GatewayStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
    /// Pods that exist (scale subresource).
    #[serde(default)]
    pub replicas: i32,
    #[serde(default)]
    pub ready_replicas: i32,
    /// Pods whose loaded config hash equals the one rendered for them.
    #[serde(default)]
    pub programmed_replicas: i32,
    /// `programmedReplicas/replicas` for `kubectl get`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub programmed: Option<String>,
    /// Label selector of the pods (scale subresource).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// Sources rendered into the config.
    #[serde(default)]
    pub sources: i32,
    /// Sinks rendered into the config (read by the Sink controller for their status).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sinks: Vec<RenderedSink>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pods: Vec<GatewayPodStatus>,
    /// The Secrets the operator itself wrote under this Gateway's names, and what it wrote
    /// there. Only an object matching its record is used; anything else under those names is
    /// `ForeignObject`, whatever its owner references say. Written by the operator alone
    /// (the status subresource).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ownership: Option<OwnershipRecord>,
}

/// What the operator wrote into the Secrets it reads back: the generated admin token, the
/// admin CA and the per-pod config.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OwnershipRecord {
    /// `<gateway>-admin-token` (absent with `adminTokenSecretRef`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_token: Option<OwnedSecret>,
    /// `<gateway>-admin-ca`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_ca: Option<OwnedSecret>,
    /// `<gateway>-config`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<OwnedSecret>,
}

/// One Secret the operator wrote: its uid and the sha256 of its `data`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OwnedSecret {
    /// The uid of the object the operator created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// sha256 of the `data` the operator wrote last (hex, over the sorted keys and values).
    pub sha256: String,
    /// sha256 of the `data` it held before that write, while the write may not have landed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_sha256: Option<String>,
}

/// A Sink as this Gateway rendered it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RenderedSink {
    pub name: String,
    /// The Sink's `metadata.generation` that was rendered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Why it could not be rendered (its Sources keep their previous version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Pods whose latest delivery attempt to this Sink failed (`failing_sinks` of their
    /// `GET /v1/status`), by pod name; at most 5, `failingPods` counts them all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delivery_errors: Vec<SinkDeliveryError>,
    /// Pods whose latest delivery attempt to this Sink failed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failing_pods: i32,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

/// A pod's latest failed delivery to a Sink. The error is the gateway's own text, which names
/// the failing step (`not_connected: tls_handshake: ...`) and never a credential.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SinkDeliveryError {
    pub pod: String,
    /// The source id whose delivery failed (of several, the one with the most failures).
    pub source: String,
    /// `<sink type>: <error>`, as the delivery row records it (at most 512 bytes).
    pub error: String,
    /// When the failures began: the first failed attempt since the last success (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// Failed attempts in a row.
    pub failures: i64,
    /// The pod's circuit breaker for the sink is open: its deliveries are parked.
    #[serde(default)]
    pub breaker_open: bool,
}
