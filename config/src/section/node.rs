//! `node`: who this gateway is (instance name, region), where its state lives and which roles
//! it runs. Imports only the leaves (`error`, `rules`).

use std::collections::HashSet;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use crate::error::ConfigError;
use crate::rules::err;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Accepts webhooks on the ingest port.
    Edge,
    /// Delivers stored hooks to their sinks and runs replay jobs.
    Dispatch,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct NodeConfig {
    /// Name of this instance (a pod name under the operator); shipped in every queue message.
    pub instance: String,
    /// Root of the node's state; the store lives in `<data_dir>/<instance>/store`.
    pub data_dir: PathBuf,
    /// Free-form region label shipped in queue messages.
    pub region: Option<String>,
    pub roles: Vec<Role>,
}

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig {
            instance: "default".into(),
            data_dir: PathBuf::from("./ankusa-data"),
            region: None,
            roles: vec![Role::Edge, Role::Dispatch],
        }
    }
}

impl NodeConfig {
    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        if self.instance.is_empty()
            || self.instance.len() > 253
            || !self
                .instance
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        {
            return Err(err(
                format!("{path}.instance"),
                "must match [A-Za-z0-9._-]{1,253}",
            ));
        }
        if self.data_dir.as_os_str().is_empty() {
            return Err(err(format!("{path}.data_dir"), "must not be empty"));
        }
        if self.roles.is_empty() {
            return Err(err(
                format!("{path}.roles"),
                "must name at least one role (edge, dispatch)",
            ));
        }
        let unique: HashSet<_> = self.roles.iter().collect();
        if unique.len() != self.roles.len() {
            return Err(err(format!("{path}.roles"), "must not repeat a role"));
        }
        if let Some(r) = &self.region
            && (r.is_empty() || r.len() > 64)
        {
            return Err(err(format!("{path}.region"), "must be 1 to 64 characters"));
        }
        Ok(())
    }
}
