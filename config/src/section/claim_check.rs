//! `claim_check`: where bodies too large for a queue message are checked in (the pod's data dir,
//! or a shared blob store every pod reads), the port that serves them to queue consumers, their
//! retention and the readers' tokens (`claim_token.rs`: a token for every tenant or for some).
//! Imports the leaves, `listener`, `storage` and `backup` (the store block's shape).

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use crate::claim_token::ClaimToken;
use crate::error::ConfigError;
use crate::rules::{err, in_range};
use crate::section::backup::BackupStoreConfig;
use crate::section::listener::{ConnectionLimits, tokens_off_loopback};
use crate::section::storage::{BlobStoreKind, blob_store};
use crate::section::token_review::TokenReviewConfig;

/// Where large bodies are checked in for queue sinks, and the port that serves them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct ClaimCheckConfig {
    pub enabled: bool,
    pub ip: IpAddr,
    pub port: u16,
    /// Days a checked-in body is kept by this node's sweeper, for claims in the data dir or a
    /// `store` of type `local` (absent: kept until deleted by hand).
    pub retention_days: Option<u32>,
    /// A blob store every pod of a fleet writes and reads claims in (same shape as
    /// `backup.store`: `type` with its `local`, `s3`, `gcs` or `azure` section). Absent: the
    /// node's own data dir, readable from this node only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<BackupStoreConfig>,
    /// With a `store` of type `s3`, `gcs` or `azure`: the bodies one tenant checks in within
    /// this many ms of each other share one pack object (default 10; 0 packs only what arrives
    /// together).
    pub pack_linger_ms: u32,
    /// A pack is written once its bodies reach this many bytes (default 16 MiB), without
    /// waiting out `pack_linger_ms`.
    pub pack_max_bytes: u64,
    /// The expiry of the bucket's lifecycle rule on `claims/`, declared so that a source whose
    /// retries could outlive its claims is refused (`retry_exceeds_claim_expiry`). Only with a
    /// `store` of type `s3`, `gcs` or `azure`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bucket_expiry_days: Option<u32>,
    /// Days a consumer is given to redeem a claim after its hook's last delivery, counted by
    /// the `bucket_expiry_days` rule (default 1).
    pub redeem_grace_days: u32,
    /// Bearer tokens readers must present, each for every tenant or for some
    /// (`crate::claim_token`); empty means the claim port is open (it binds loopback by
    /// default).
    pub tokens: Vec<ClaimToken>,
    /// Readers that present a Kubernetes ServiceAccount token, checked with `TokenReview`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_review: Option<TokenReviewConfig>,
    pub connections: ConnectionLimits,
}

impl Default for ClaimCheckConfig {
    fn default() -> Self {
        ClaimCheckConfig {
            enabled: true,
            ip: IpAddr::from([127, 0, 0, 1]),
            port: 4001,
            retention_days: None,
            store: None,
            pack_linger_ms: 10,
            pack_max_bytes: 16 * 1024 * 1024,
            bucket_expiry_days: None,
            redeem_grace_days: 1,
            tokens: Vec::new(),
            token_review: None,
            connections: ConnectionLimits {
                max_connections: 1024,
                ..ConnectionLimits::default()
            },
        }
    }
}

impl ClaimCheckConfig {
    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        self.connections.validate(&format!("{path}.connections"))?;
        for (i, t) in self.tokens.iter().enumerate() {
            t.validate(&format!("{path}.tokens[{i}]"))?;
        }
        if let Some(r) = &self.token_review {
            r.validate(&format!("{path}.token_review"))?;
        }
        if let Some(d) = self.retention_days {
            in_range(&format!("{path}.retention_days"), d.into(), 1, 36_500)?;
        }
        in_range(
            &format!("{path}.redeem_grace_days"),
            self.redeem_grace_days.into(),
            0,
            365,
        )?;
        in_range(
            &format!("{path}.pack_linger_ms"),
            self.pack_linger_ms.into(),
            0,
            1000,
        )?;
        in_range(
            &format!("{path}.pack_max_bytes"),
            self.pack_max_bytes,
            65_536,
            1 << 30,
        )?;
        if let Some(s) = &self.store {
            blob_store(&format!("{path}.store"), s.store_type, s.sections())?;
        }
        if let Some(d) = self.bucket_expiry_days {
            in_range(&format!("{path}.bucket_expiry_days"), d.into(), 1, 36_500)?;
            match &self.store {
                Some(s) if s.store_type != BlobStoreKind::Local => {}
                _ => {
                    return Err(err(
                        format!("{path}.bucket_expiry_days"),
                        "needs a store of type s3, gcs or azure (local claims use retention_days)",
                    ));
                }
            }
        }
        tokens_off_loopback(
            path,
            self.enabled,
            self.ip,
            self.tokens.is_empty() && self.token_review.is_none(),
            ": the port serves hook bodies (a token_review counts as a token)",
        )
    }
}
