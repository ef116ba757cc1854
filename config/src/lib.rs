//! Ankusa's gateway configuration: the schema, `${...}` interpolation, validation,
//! redaction and the config hash. One definition, used by the gateway (which parses it) and
//! the operator (which renders it from custom resources).
//!
//! The modules, leaves first (each imports only modules listed before it):
//! - `error`, `scalar`, `file_paths`, `error_class`: leaves.
//! - `rules`: the validation primitives (the error constructor, ranges, ids, header names,
//!   dot paths, CIDRs, URLs).
//! - `secrets`, `claim_token`, `interpolate`: value types and `${...}` resolution.
//! - `section::egress`, then `egress`: the address policy built from it, and where each sink
//!   connects.
//! - `sinks/`: one file per sink type, over `sinks/shared.rs` and `sinks/tls.rs`.
//! - `section/`: one file per section: its types, defaults and own `validate(&self, path)`;
//!   a source and the intake log import `sinks`.
//! - `model`: the root `Config` over the sections, its hash and YAML form.
//! - `validate`: the order sections are checked in, and the rules between sections.
//! - `redact`, `file_guard`, `load`: what is done with a whole config.
//!
//! Other crates use the names re-exported here, never a module path (except the public
//! `egress`, `interpolate` and `scalar`).

mod claim_token;
pub mod egress;
mod error;
mod error_class;
mod file_guard;
mod file_paths;
pub mod interpolate;
mod load;
mod model;
mod redact;
mod rules;
pub mod scalar;
mod secrets;
mod section;
mod sinks;
#[cfg(test)]
mod testing;
mod validate;

pub use claim_token::ClaimToken;
pub use egress::{AddressPolicy, Denied, EgressTarget};
pub use error::ConfigError;
pub use error_class::ErrorClass;
pub use file_guard::{OWN_FILE_REFUSAL, OwnFiles, check_file_options};
pub use file_paths::{FilePath, file_options};
pub use load::{
    Loaded, apply_env_overrides, from_rendered_yaml, from_yaml_str, from_yaml_value, load_file,
    value_free,
};
pub use model::Config;
pub use redact::{redacted_json, redacted_source};
pub use rules::{cidr_contains, parse_cidr, valid_header_name, valid_id};
pub use secrets::{MAX_SECRETS, Secret, SecretUrl, Secrets, redact_url};
pub use section::admin::{ADMIN_SCOPES, AdminConfig, AdminTls, AdminToken};
pub use section::backup::{BackupConfig, BackupStoreConfig};
pub use section::batcher::CommitConfig;
pub use section::claim_check::ClaimCheckConfig;
pub use section::cloud_stores::{
    AzureStoreConfig, DEFAULT_GCS_ENDPOINT, GcsCredentials, GcsStoreConfig,
};
pub use section::dedupe::{DedupeConfig, DedupePreset, default_dedupe_ttl};
pub use section::dispatch::{
    DispatchConfig, RetryConfig, RetryOverride, TenantWindow, TenantWindows,
};
pub use section::egress::{EgressConfig, PoolConfig};
pub use section::fleet::{FleetConfig, FleetDedupe, FleetTls, MAX_FLEET_MEMBERS};
pub use section::http::{HttpConfig, Routing};
pub use section::lifecycle::LifecycleConfig;
pub use section::listener::ConnectionLimits;
pub use section::log::{LogConfig, LogFormat};
pub use section::node::{NodeConfig, Role};
pub use section::quarantine::{DEFAULT_QUARANTINE_BODY_BYTES, PenShares, QuarantineConfig};
pub use section::queue::{DlqBounds, QueueConfig};
pub use section::rate_limits::{RateLimit, RateLimitsConfig};
pub use section::source::{OnVerifyFailure, SourceConfig};
pub use section::storage::{
    ArchiveAt, BlobStoreKind, BlobStoreType, DEFAULT_ROLL_BYTES, LocalStoreConfig, MAX_ROLL_BYTES,
    S3StoreConfig, StorageConfig, StoreSection,
};
pub use section::telemetry::{DEFAULT_SERVICE_NAME, OtlpConfig, OtlpProtocol, TelemetryConfig};
pub use section::token_review::{ServiceAccountReader, TokenReviewConfig};
pub use section::verify::{
    HmacHash, HmacVerify, MAX_TOLERANCE_SECONDS, Preset, SecretDecode, SigEncoding, SigParse,
    TimedPreset, VerifyConfig, signed_tokens,
};
pub use section::wal::{IntakeConfig, WalConfig, WalType};
pub use sinks::*;
pub use validate::{RETRY_EXCEEDS_CLAIM_EXPIRY, direct_sources, validate};

/// Exit code of a process refused for its configuration (`EX_CONFIG` of sysexits.h).
pub const EXIT_CONFIG: i32 = 78;
