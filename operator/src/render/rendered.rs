//! What rendering reads and what it produces: the [`Inputs`], each Source's and Sink's
//! outcome, the [`Rendered`] config and, from it, what each pod should run ([`PodConfig`],
//! [`desired_configs`]). Plain data and the small pure functions over it.
//!
//! May import: `resources` (the config Secret's key of a pod), `ankusa_config`, `ankusa_crds`.
//! Every other `render` module may import this one; it imports none of them.

use std::collections::{BTreeMap, BTreeSet};

use ankusa_config::Config;
use ankusa_crds::{Gateway, Sink, Source};
use kube::ResourceExt;

use crate::resources;

/// Secret values by Secret name, then key (raw bytes of `data`).
pub type SecretValues = BTreeMap<String, BTreeMap<String, Vec<u8>>>;

/// Everything rendering reads.
pub struct Inputs<'a> {
    pub gateway: &'a Gateway,
    /// Sources of the namespace (those of other gateways are skipped).
    pub sources: &'a [Source],
    /// Sinks of the namespace.
    pub sinks: &'a [Sink],
    pub secrets: &'a SecretValues,
    /// The admin API token the operator uses (rendered with scope `*`).
    pub admin_token: &'a str,
    /// The scrape token of `<gateway>-scrape` (rendered with scope `metrics:read` only).
    pub scrape_token: Option<&'a str>,
    /// The config the pods last received, for the fallback described above.
    pub previous: Option<&'a Config>,
}

/// How one Source made it into the config.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Rendered from its current spec.
    Current,
    /// Its current spec failed to render; the pods keep the previous version.
    Previous(String),
    /// Failed to render and never rendered before: not in the config.
    Missing(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct SourceRender {
    /// The source id in the config.
    pub id: String,
    pub generation: Option<i64>,
    pub outcome: Outcome,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SinkRender {
    pub generation: Option<i64>,
    /// Sources (object names) that deliver to it (empty for a Sink only `spec.lifecycle`
    /// uses).
    pub used_by: Vec<String>,
    /// Why it could not be rendered.
    pub error: Option<String>,
}

impl Rendered {
    /// The record of Sink `sink`, made (unused, no error) the first time a Source or the
    /// lifecycle names it.
    pub fn sink_entry(&mut self, sink: &ankusa_crds::Sink) -> &mut SinkRender {
        use kube::ResourceExt;
        self.sinks
            .entry(sink.name_any())
            .or_insert_with(|| SinkRender {
                generation: sink.metadata.generation,
                used_by: Vec::new(),
                error: None,
            })
    }
}

#[derive(Debug, Clone)]
pub struct Rendered {
    /// The config without `node.instance` (set per pod); `None` when the Gateway's own
    /// settings are refused (`error` says why).
    pub base: Option<Config>,
    pub error: Option<String>,
    /// By Source object name.
    pub sources: BTreeMap<String, SourceRender>,
    /// By Sink object name (sinks used by this gateway's sources or its `spec.lifecycle`).
    pub sinks: BTreeMap<String, SinkRender>,
    /// Secrets whose values went into the config.
    pub secrets_used: BTreeSet<String>,
    /// How `spec.lifecycle` made it into the config (`None`: the Gateway has none): from its
    /// current spec, or (when that does not render) the section the pods last received, or
    /// not at all; never a refusal of the Gateway.
    pub lifecycle: Option<Outcome>,
    /// The `fleet` section every pod gets (`render::fleet`), beside its own `node.instance`.
    pub fleet: Option<ankusa_config::FleetConfig>,
}

impl Rendered {
    /// The config of one pod: `node.instance` is the pod name.
    pub fn for_pod(&self, pod: &str) -> Option<Config> {
        let mut c = self.base.clone()?;
        c.node.instance = pod.to_string();
        c.fleet = self.fleet.clone();
        Some(c)
    }
}

/// Does this Source belong to this Gateway?
pub fn source_of(source: &Source, gateway: &str) -> bool {
    source.spec.gateway_ref.name == gateway
}

/// The source id of a Source: `spec.id` or its name.
pub fn source_id(source: &Source) -> String {
    source.spec.id.clone().unwrap_or_else(|| source.name_any())
}

/// Parses a config the operator rendered earlier (the config Secret's content).
pub fn parse_rendered(yaml: &str) -> Option<Config> {
    ankusa_config::from_rendered_yaml(yaml).ok()
}

/// What is desired of one pod: the hash and YAML of its config.
#[derive(Debug, Clone)]
pub struct PodConfig {
    pub hash: String,
    pub yaml: String,
}

/// The config each pod should run: freshly rendered, or (when the Gateway's own config is
/// refused) what the config Secret already holds.
pub fn desired_configs(
    rendered: &Rendered,
    pods: &[String],
    existing: &BTreeMap<String, String>,
) -> BTreeMap<String, PodConfig> {
    let mut out = BTreeMap::new();
    for p in pods {
        if rendered.base.is_some() {
            if let Some(c) = rendered.for_pod(p) {
                out.insert(
                    p.clone(),
                    PodConfig {
                        hash: c.hash(),
                        yaml: c.to_yaml(),
                    },
                );
            }
        } else if let Some(yaml) = existing.get(&resources::config_key(p))
            && let Some(c) = parse_rendered(yaml)
        {
            out.insert(
                p.clone(),
                PodConfig {
                    hash: c.hash(),
                    yaml: yaml.clone(),
                },
            );
        }
    }
    out
}
