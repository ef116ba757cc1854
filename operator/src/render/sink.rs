//! A Sink → the gateway's typed `SinkConfig`: `options` + `type` + the values of `secretRefs`
//! (keys are option paths: `secret`, `url`, `sasl.password`) and `secretHeaders`,
//! deserialised by the gateway's own types, so a sink type the gateway gains is rendered
//! without a change here. Credentials written inline, Secrets aimed at non-credential options
//! and file options are refused (`render::credentials`, `render::files`). Also the render step
//! that renders each Sink the Gateway's Sources use, once.
//!
//! May import: `render::{rendered, secrets, credentials, files}`, `ankusa_config`,
//! `ankusa_crds`. Errors name the field relative to the spec, never a Secret's value.

use std::collections::BTreeMap;

use ankusa_config::SinkConfig;
use ankusa_crds::{Sink, SinkSpec, Source};
use kube::ResourceExt;

use crate::render::credentials::{check_sink_options, secret_ref_paths};
use crate::render::files;
use crate::render::rendered::{Rendered, SecretValues, SinkRender};
use crate::render::secrets::{secret_value, sink_secret_names};

/// Sets `a.b.c` in a JSON object, creating the intermediate objects.
fn set_path(
    obj: &mut serde_json::Map<String, serde_json::Value>,
    path: &str,
    value: serde_json::Value,
) -> Result<(), String> {
    let mut parts = path.split('.').peekable();
    let mut cur = obj;
    while let Some(part) = parts.next() {
        if part.is_empty() {
            return Err(format!("secretRefs key {path:?} is not a dot path"));
        }
        if parts.peek().is_none() {
            cur.insert(part.to_string(), value);
            return Ok(());
        }
        let next = cur
            .entry(part.to_string())
            .or_insert_with(|| serde_json::Value::Object(Default::default()));
        cur = match next {
            serde_json::Value::Object(m) => m,
            _ => {
                return Err(format!(
                    "secretRefs key {path:?}: options.{part} is not a map"
                ));
            }
        };
    }
    Ok(())
}

/// A Sink → the gateway's typed `SinkConfig`: `options` + `type` + the values of
/// `secretRefs` (keys are option paths: `secret`, `url`, `sasl.password`) and `secretHeaders`, deserialised by the gateway's own types (so a sink type
/// the gateway gains is rendered without changes here).
pub fn render_sink(sink: &Sink, secrets: &SecretValues) -> Result<SinkConfig, String> {
    render_sink_spec(&sink.spec, secrets)
}

/// [`render_sink`] of a Sink's spec alone (also the shape of the intake log of
/// `spec.durability`). Errors name the field relative to the spec (`options.brokers`,
/// `secretRefs.sasl.password`).
pub fn render_sink_spec(spec: &SinkSpec, secrets: &SecretValues) -> Result<SinkConfig, String> {
    files::refuse_path_keys(&spec.options, Some(spec.type_), "a Sink")?;
    let c = sink_from_object(spec, sink_object(spec, secrets)?)?;
    files::refuse_file_options(&c, "options", Some(spec.type_), "a Sink").map(|()| c)
}

/// A Sink spec's options with `type` and the Secret values filled in: the JSON object of the
/// gateway's sink entry, before its types read it.
pub(crate) fn sink_object(
    spec: &SinkSpec,
    secrets: &SecretValues,
) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    check_sink_options(&spec.options)?;
    let mut obj = spec.options.clone();
    obj.insert("type".into(), spec.type_.as_str().into());
    let allowed = secret_ref_paths(spec.type_);
    for (k, refs) in &spec.secret_refs {
        if !allowed.contains(&k.as_str()) {
            // The key is the Sink author's own text, not a Secret's value.
            return Err(if allowed.is_empty() {
                format!(
                    "secretRefs[{k:?}]: a {} sink takes no Secret references",
                    spec.type_.as_str()
                )
            } else {
                format!(
                    "secretRefs[{k:?}]: not a credential option of a {} sink (a Secret may fill: {})",
                    spec.type_.as_str(),
                    allowed.join(", ")
                )
            });
        }
        if refs.is_empty() {
            return Err(format!("secretRefs.{k} is empty"));
        }
        let values = refs
            .iter()
            .map(|r| secret_value(secrets, r))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("secretRefs.{k}: {e}"))?;
        let v = if values.len() == 1 {
            serde_json::Value::String(values.into_iter().next().unwrap_or_default())
        } else {
            values.into()
        };
        set_path(&mut obj, k, v)?;
    }
    if !spec.secret_headers.is_empty() {
        let headers = obj
            .entry("headers")
            .or_insert_with(|| serde_json::Value::Object(Default::default()));
        let serde_json::Value::Object(headers) = headers else {
            return Err("options.headers must be a map".into());
        };
        for (h, r) in &spec.secret_headers {
            let v = secret_value(secrets, r).map_err(|e| format!("secretHeaders.{h}: {e}"))?;
            headers.insert(h.clone(), v.into());
        }
    }
    Ok(obj)
}

fn sink_from_object(
    spec: &SinkSpec,
    obj: serde_json::Map<String, serde_json::Value>,
) -> Result<SinkConfig, String> {
    let value = serde_json::Value::Object(obj);
    serde_path_to_error::deserialize::<_, SinkConfig>(value).map_err(|e| {
        let path = e.path().to_string();
        // serde quotes the offending value ("invalid type: string \"...\""), and that value
        // may be a Secret's: the message reaches statuses, Events and logs.
        let inner = ankusa_config::value_free(&e.into_inner().to_string());
        if inner.contains("unknown variant") && (path == "." || path.is_empty() || path == "type") {
            format!(
                "type {} is not supported by this gateway version",
                spec.type_.as_str()
            )
        } else if path == "." || path.is_empty() {
            format!("options: {inner}")
        } else {
            format!("options.{path}: {inner}")
        }
    })
}

/// Each Sink the Sources use, rendered once: its config, or why it does not render, by Sink
/// name. Records each in `out.sinks` with the Sources using it, and in `out.secrets_used` the
/// Secrets of those that rendered. A Sink that does not exist is left out (the Source says so).
pub fn render_used(
    sources: &[&Source],
    sinks: &[Sink],
    secrets: &SecretValues,
    ambient_allowed: bool,
    out: &mut Rendered,
) -> BTreeMap<String, Result<SinkConfig, String>> {
    let by_name: BTreeMap<String, &Sink> = sinks.iter().map(|s| (s.name_any(), s)).collect();
    let mut configs: BTreeMap<String, Result<SinkConfig, String>> = BTreeMap::new();
    for src in sources {
        for r in &src.spec.sinks {
            let Some(sink) = by_name.get(&r.name) else {
                continue;
            };
            let entry = out
                .sinks
                .entry(r.name.clone())
                .or_insert_with(|| SinkRender {
                    generation: sink.metadata.generation,
                    used_by: Vec::new(),
                    error: None,
                });
            if !entry.used_by.contains(&src.name_any()) {
                entry.used_by.push(src.name_any());
            }
            if !configs.contains_key(&r.name) {
                let rendered = render_sink(sink, secrets)
                    .and_then(|c| files::refuse_ambient_identity(&c, ambient_allowed).map(|()| c));
                if let Err(e) = &rendered {
                    entry.error = Some(e.clone());
                } else {
                    out.secrets_used
                        .extend(sink_secret_names(sink).map(String::from));
                }
                configs.insert(r.name.clone(), rendered);
            }
        }
    }
    configs
}
