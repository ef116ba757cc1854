//! `spec.lifecycle` → the config's `lifecycle` section: each referenced Sink rendered exactly
//! as a Source's sinks are (`sink::render_checked`: options, `secretRefs`, the credential,
//! file and ambient-identity rules), the bounds copied, and the section validated by the
//! gateway's own rules against the Gateway's base (its egress policy, its `wal.type`).
//!
//! A section that does not render never refuses the Gateway: losing hook delivery over a
//! misconfigured events sink would be the worse failure. The pods keep the section they last
//! received (read back from the config Secret, when it still passes the rules), else run
//! without one; [`place`] records which, and why, in `Rendered::lifecycle` (the Gateway's
//! `LifecycleEvents` condition). Errors name `spec.lifecycle.sinks[i]` and the Sink, never a
//! Secret's value.
//!
//! May import: `render::{rendered, sink, secrets, files}`, `ankusa_config`, `ankusa_crds`.

use std::collections::{BTreeMap, BTreeSet};

use ankusa_config::{Config, ConfigError, LifecycleConfig, WalType};
use ankusa_crds::Sink;
use ankusa_crds::gateway::LifecycleSpec;
use kube::ResourceExt;

use crate::render::files;
use crate::render::rendered::{Inputs, Outcome, Rendered};
use crate::render::secrets::sink_secret_names;
use crate::render::sink::render_checked;

/// Places the Gateway's lifecycle section in `base` (which holds no Source yet): its current
/// spec when it renders and passes validation, else the pods' previous section when that
/// passes, else none. Records the outcome in `out.lifecycle`, each referenced Sink in
/// `out.sinks` and the Secrets that went in in `out.secrets_used`.
pub fn place(inputs: &Inputs, ambient_allowed: bool, base: &mut Config, out: &mut Rendered) {
    let Some(spec) = &inputs.gateway.spec.lifecycle else {
        return;
    };
    let outcome = match current(spec, inputs, ambient_allowed, base, out) {
        Ok(section) => {
            base.lifecycle = Some(section);
            Outcome::Current
        }
        Err(e) => {
            let kept = inputs
                .previous
                .and_then(|p| p.lifecycle.as_ref())
                .map(|p| previous_ok(p, base).map(|()| p.clone()));
            match kept {
                Some(Ok(p)) => {
                    base.lifecycle = Some(p);
                    Outcome::Previous(e)
                }
                Some(Err(why)) => Outcome::Missing(format!(
                    "{e}; the section the pods ran before is refused too: {why}"
                )),
                None => Outcome::Missing(e),
            }
        }
    };
    if let Outcome::Previous(e) | Outcome::Missing(e) = &outcome {
        tracing::warn!(
            gateway = %inputs.gateway.name_any(),
            kept = matches!(outcome, Outcome::Previous(_)),
            error = %e,
            "lifecycle section not rendered"
        );
    }
    out.lifecycle = Some(outcome);
}

/// The section from the current spec, or the first reason it does not render.
fn current(
    spec: &LifecycleSpec,
    inputs: &Inputs,
    ambient_allowed: bool,
    base: &Config,
    out: &mut Rendered,
) -> Result<LifecycleConfig, String> {
    spec.check()?;
    if base.wal.wal_type == WalType::None {
        return Err(
            "spec.lifecycle: not available with spec.durability.mode direct (no dispatch runs on the pods to deliver events)"
                .into(),
        );
    }
    let by_name: BTreeMap<String, &Sink> = inputs.sinks.iter().map(|s| (s.name_any(), s)).collect();
    let mut sinks = Vec::with_capacity(spec.sinks.len());
    let mut secrets = BTreeSet::new();
    let mut first_error = None;
    for (i, r) in spec.sinks.iter().enumerate() {
        let at = format!("spec.lifecycle.sinks[{i}]");
        let Some(sink) = by_name.get(&r.name) else {
            first_error.get_or_insert(format!("{at}: Sink {} not found", r.name));
            continue;
        };
        let entry = out.sink_entry(sink);
        match render_checked(sink, inputs.secrets, ambient_allowed) {
            Ok(c) => {
                sinks.push(c);
                secrets.extend(sink_secret_names(sink).map(String::from));
            }
            Err(e) => {
                first_error.get_or_insert(format!("{at}: Sink {}: {e}", r.name));
                entry.error = Some(e);
            }
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    let mut section = LifecycleConfig::with_sinks(sinks);
    if let Some(v) = spec.retention_days {
        section.retention_days = v;
    }
    if let Some(v) = spec.max_events {
        section.max_events = v;
    }
    if let Some(v) = spec.max_per_minute {
        section.max_per_minute = v;
    }
    validate_with(base, &section).map_err(|e| refusal(&e, spec))?;
    out.secrets_used.extend(secrets);
    Ok(section)
}

/// The gateway's verdict on `base` with `section` as its lifecycle.
fn validate_with(base: &Config, section: &LifecycleConfig) -> Result<(), ConfigError> {
    let mut probe = base.clone();
    probe.lifecycle = Some(section.clone());
    ankusa_config::validate(&probe)
}

/// A previous section is kept only if it names no file (as a Source's previous version) and
/// the Gateway's base still takes it (a Gateway turned `direct` takes none).
fn previous_ok(prev: &LifecycleConfig, base: &Config) -> Result<(), String> {
    for (i, sink) in prev.sinks.iter().enumerate() {
        files::refuse_file_options(
            sink,
            &format!("lifecycle.sinks[{i}].options"),
            None,
            "a Sink",
        )?;
    }
    validate_with(base, prev).map_err(|e| format!("refused by the gateway's validation: {e}"))
}

/// A refusal of the section by the gateway's validation, named in the spec's terms: a sink's
/// field with its Sink (`spec.lifecycle.sinks[1] (Sink audit).servers[0]: ...`), a bound by
/// its camelCase key. The gateway's messages carry no value of a credential.
fn refusal(e: &ConfigError, spec: &LifecycleSpec) -> String {
    let field = e.field.as_deref().unwrap_or("lifecycle");
    let named = match field.strip_prefix("lifecycle.sinks[") {
        Some(rest) => {
            let (i, tail) = rest.split_once(']').unwrap_or((rest, ""));
            let sink = i
                .parse::<usize>()
                .ok()
                .and_then(|i| spec.sinks.get(i))
                .map(|r| format!(" (Sink {})", r.name))
                .unwrap_or_default();
            format!("spec.lifecycle.sinks[{i}]{sink}{tail}")
        }
        None => field
            .replacen("lifecycle", "spec.lifecycle", 1)
            .replace("retention_days", "retentionDays")
            .replace("max_events", "maxEvents")
            .replace("max_per_minute", "maxPerMinute"),
    };
    format!(
        "{named}: refused by the gateway's validation: {}",
        e.message
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(names: &[&str]) -> LifecycleSpec {
        LifecycleSpec {
            sinks: names
                .iter()
                .map(|n| ankusa_crds::LocalRef {
                    name: n.to_string(),
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_base_without_dispatch_takes_no_lifecycle_current_or_previous() {
        let gw: ankusa_crds::Gateway = crate::testing::object(serde_json::json!({
            "metadata": {"name": "gw", "namespace": "ns"},
            "spec": {"lifecycle": {"sinks": [{"name": "audit"}]}},
        }));
        let audit: Sink = crate::testing::object(serde_json::json!({
            "metadata": {"name": "audit", "namespace": "ns", "generation": 1},
            "spec": {"type": "log"},
        }));
        let previous = Config {
            lifecycle: Some(LifecycleConfig::with_sinks(vec![
                ankusa_config::SinkConfig::Log(Default::default()),
            ])),
            ..Default::default()
        };
        let sinks = [audit];
        let secrets = Default::default();
        let inputs = |previous| Inputs {
            gateway: &gw,
            sources: &[],
            sinks: &sinks,
            secrets: &secrets,
            admin_token: "operator-admin-token-0123456789",
            scrape_token: None,
            previous,
        };
        let place_on = |wal: WalType, previous| {
            let mut base = Config::default();
            base.wal.wal_type = wal;
            let mut out = crate::render::render(&inputs(None));
            out.lifecycle = None;
            place(&inputs(previous), false, &mut base, &mut out);
            (base.lifecycle, out.lifecycle)
        };
        let (section, outcome) = place_on(WalType::default(), None);
        assert_eq!(outcome, Some(Outcome::Current));
        assert_eq!(section.map(|l| l.sinks.len()), Some(1));
        // What `spec.durability.mode: direct` renders: no dispatch, so no lifecycle.
        let (section, outcome) = place_on(WalType::None, Some(&previous));
        assert!(section.is_none());
        let Some(Outcome::Missing(e)) = outcome else {
            panic!("{outcome:?}")
        };
        assert!(
            e.starts_with("spec.lifecycle: not available with spec.durability.mode direct")
                && e.contains("the section the pods ran before is refused too"),
            "{e}"
        );
    }

    #[test]
    fn refusals_name_the_sink_and_the_camel_case_bound() {
        let s = spec(&["audit", "ops"]);
        let e = ConfigError::field("lifecycle.sinks[1].servers[0]", "must not be loopback");
        assert_eq!(
            refusal(&e, &s),
            "spec.lifecycle.sinks[1] (Sink ops).servers[0]: refused by the gateway's validation: must not be loopback"
        );
        let e = ConfigError::field("lifecycle.max_events", "must be >= 1000");
        assert_eq!(
            refusal(&e, &s),
            "spec.lifecycle.maxEvents: refused by the gateway's validation: must be >= 1000"
        );
        let e = ConfigError::field("lifecycle.sinks[7]", "x");
        assert!(refusal(&e, &s).starts_with("spec.lifecycle.sinks[7]: "));
    }
}
