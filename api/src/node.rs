//! The node: its status (what the operator reads to know a pod runs its config), a config
//! push or reload, and the error body every refusal carries.

use ankusa_config::Role;
use serde::{Deserialize, Serialize};

/// `GET /v1/status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    pub instance: String,
    #[serde(default)]
    pub version: String,
    /// `Config::hash` of the file as written: what the operator compares with what it rendered.
    pub config_hash: String,
    #[serde(default)]
    pub generation: u64,
    #[serde(default)]
    pub loaded_at: u64,
    #[serde(default)]
    pub last_reload_error: Option<ReloadError>,
    /// Fields changed by a reload that take effect only after a restart.
    #[serde(default)]
    pub restart_required: Vec<String>,
    #[serde(default)]
    pub sources: Vec<String>,
    #[serde(default)]
    pub config_path: Option<String>,
    #[serde(default)]
    pub roles: Vec<Role>,
}

/// The last reload that was refused (the previous config stayed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReloadError {
    #[serde(default)]
    pub at: u64,
    pub message: String,
}

/// `PUT /v1/config` and `POST /v1/config/reload`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReloadReply {
    pub changed: bool,
    pub config_hash: String,
    #[serde(default)]
    pub generation: u64,
    #[serde(default)]
    pub restart_required: Vec<String>,
}

/// A refusal that names a field: `400 invalid_config` (a pushed or reloaded config) and
/// `400 invalid_filter`. `field` is `null` when the error is not about one key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldError {
    pub error: String,
    #[serde(default)]
    pub field: Option<String>,
    #[serde(default)]
    pub message: String,
}
