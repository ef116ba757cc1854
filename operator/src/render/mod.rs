//! Gateway + Sources + Sinks + Secret values → the gateway's own `Config`, per pod.
//!
//! Pure functions only. The config is built from `ankusa_config` types and validated with the
//! gateway's own `validate()`; the YAML the pods read is `Config::to_yaml()`, never a template.
//!
//! [`render`] runs, in order: the Gateway's base (`gateway`: settings, claim check, archive,
//! durability; a refusal there refuses the Gateway), its `spec.lifecycle` (`lifecycle`,
//! validated with the base; a refusal there only leaves the previous section or none), the
//! Sinks its Sources use (`sink`, each once), its Sources (`source`, oldest first, each
//! validated alone with the base), then the whole config once (`source::validate_whole`) and
//! the rule that it names no file (`files`).
//!
//! A Source that cannot be rendered (a missing Secret, a bad option, a config the gateway would
//! refuse) never disappears from the pods' config: dropping it would dead-letter its queued
//! deliveries as `source_gone`. It keeps the version the pods last received (read back from
//! the config Secret) and reports `Degraded`; a Source that never rendered stays out.
//!
//! One module per concern: `rendered` (inputs and outputs, a leaf), `secrets` (Secret values
//! and which Secrets each part reads), `credentials` (what counts as one in a Sink's options),
//! `gateway`, `archive`, `bucket` (the buckets of the archive, backups and claims), `durability`, `lifecycle`, `sink`, `source`, `files` (what a manifest may make a
//! pod read), `replay` (a ReplayJob's request), `dry_run` (a dry-run ReplayJob's request). This file only runs them in order and
//! re-exports what the controllers and tests use.
//!
//! May import: its own modules, `resources` (via `rendered`), `ankusa_config`, `ankusa_crds`,
//! `ankusa_api` (via `replay`); never `context`, the controllers or anything that does I/O.

pub mod archive;
pub mod bucket;
pub mod credentials;
pub mod dry_run;
pub mod durability;
pub mod files;
pub mod fleet;
pub mod gateway;
pub mod lifecycle;
pub mod rendered;
pub mod replay;
pub mod secrets;
pub mod sink;
pub mod source;

pub use archive::{archive_storage, local_archive_dir};
pub use credentials::{check_sink_options, secret_ref_paths};
pub use durability::{
    Durability, durability, durability_field, durability_fingerprint, is_durability_field,
};
pub use gateway::base_config;
pub use rendered::{
    Inputs, Outcome, PodConfig, Rendered, SecretValues, SinkRender, SourceRender, desired_configs,
    parse_rendered, source_id, source_of,
};
pub use secrets::{
    NOT_USABLE, durability_secret_names, gateway_secret_names, lifecycle_sink_names,
    referenced_secrets, secret_value, sink_secret_names, source_secret_names,
};
pub use sink::{render_checked, render_sink, render_sink_spec};
pub use source::render_source;

use std::collections::{BTreeMap, BTreeSet};

/// Renders the whole config of a Gateway.
pub fn render(inputs: &Inputs) -> Rendered {
    let mut out = Rendered {
        base: None,
        error: None,
        sources: BTreeMap::new(),
        sinks: BTreeMap::new(),
        secrets_used: BTreeSet::new(),
        lifecycle: None,
        fleet: None,
    };
    let mut base = match gateway::render_base(inputs, &mut out.secrets_used) {
        Ok(base) => base,
        Err(e) => {
            out.error = Some(e);
            return out;
        }
    };
    let ambient_allowed = files::ambient_identity_allowed(inputs.gateway);
    lifecycle::place(inputs, ambient_allowed, &mut base, &mut out);
    let sources = source::own_sources(inputs);
    let sink_configs = sink::render_used(
        &sources,
        inputs.sinks,
        inputs.secrets,
        ambient_allowed,
        &mut out,
    );
    source::place_all(
        &sources,
        &sink_configs,
        inputs,
        ambient_allowed,
        &mut base,
        &mut out,
    );
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    out.fleet = fleet::fleet(inputs.gateway, inputs.previous, now_s);
    match source::validate_whole(&mut base, &mut out, inputs.previous) {
        Ok(()) => out.base = Some(base),
        Err(e) => out.error = Some(e),
    }
    out
}
