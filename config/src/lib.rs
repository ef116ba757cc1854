//! Ankusa's gateway configuration: the schema, `${...}` interpolation, validation,
//! redaction and the config hash. One definition, used by the gateway (which parses it) and
//! the operator (which renders it from custom resources).

mod claim_token;
pub mod durability;
pub mod egress;
mod error;
mod file_guard;
mod file_paths;
pub mod interpolate;
mod load;
mod model;
mod quarantine;
mod redact;
pub mod scalar;
mod secrets;
#[cfg(test)]
mod sink_url_tests;
mod sinks;
mod storage;
mod validate;

pub use claim_token::ClaimToken;
pub use durability::{BackupConfig, BackupStoreConfig, IntakeConfig, WalConfig, WalType};
pub use egress::{AddressPolicy, Denied, EgressTarget};
pub use error::ConfigError;
pub use file_guard::{OWN_FILE_REFUSAL, OwnFiles, check_file_options};
pub use file_paths::{FilePath, file_options};
pub use load::{
    Loaded, apply_env_overrides, from_rendered_yaml, from_yaml_str, from_yaml_value, load_file,
    value_free,
};
pub use model::*;
pub use quarantine::{DEFAULT_QUARANTINE_BODY_BYTES, PenShares, QuarantineConfig};
pub use redact::{redact_url, redacted_json};
pub use secrets::{MAX_SECRETS, Secret, SecretUrl, Secrets};
pub use sinks::*;
pub use storage::{
    ArchiveAt, BlobStoreType, DEFAULT_ROLL_BYTES, DlqBounds, LocalStoreConfig, MAX_ROLL_BYTES,
    QueueConfig, S3StoreConfig, StorageConfig,
};
pub use validate::{
    ADMIN_SCOPES, cidr_contains, parse_cidr, signed_tokens, valid_header_name, valid_id, validate,
};

/// Exit code of a process refused for its configuration (`EX_CONFIG` of sysexits.h).
pub const EXIT_CONFIG: i32 = 78;

impl Config {
    /// SHA-256 (lowercase hex) of the canonical JSON form. The gateway reports the hash of the
    /// file it loaded (after interpolation, before environment overrides); the operator
    /// computes the same function over the config it rendered, so equal hashes mean a pod runs
    /// exactly the rendered config.
    pub fn hash(&self) -> String {
        use sha2::{Digest, Sha256};
        let bytes = serde_json::to_vec(self).expect("config serialises to JSON");
        hex::encode(Sha256::digest(bytes))
    }

    /// The YAML text the gateway parses back into an equal `Config`. Literal `${` in values
    /// (a secret may contain one) is escaped as `$${` so that loading does not interpolate it.
    pub fn to_yaml(&self) -> String {
        let mut tree = serde_yaml_ng::to_value(self).expect("config serialises to YAML");
        escape_references(&mut tree);
        serde_yaml_ng::to_string(&tree).expect("config serialises to YAML")
    }

    pub fn has_role(&self, role: Role) -> bool {
        self.node.roles.contains(&role)
    }

    /// The quarantine pen's byte shares in force: `QuarantineConfig::shares` over the sources
    /// with `on_verify_failure: quarantine`.
    pub fn pen_shares(&self) -> PenShares {
        self.quarantine.shares(
            self.sources
                .values()
                .filter(|s| s.on_verify_failure == OnVerifyFailure::Quarantine)
                .map(|s| s.tenant.as_deref().unwrap_or("default")),
        )
    }
}

fn escape_references(v: &mut serde_yaml_ng::Value) {
    use serde_yaml_ng::Value;
    match v {
        Value::String(s) if s.contains("${") => *s = s.replace("${", "$${"),
        Value::Sequence(items) => items.iter_mut().for_each(escape_references),
        Value::Mapping(m) => m.iter_mut().for_each(|(_, v)| escape_references(v)),
        Value::Tagged(t) => escape_references(&mut t.value),
        _ => {}
    }
}
