//! A Sink → the gateway's typed `SinkConfig`: the options (the typed field named after `type`,
//! or the deprecated `options` map) + `type` + the values of `secretRefs`
//! (keys are option paths: `secret`, `url`, `sasl.password`) and `secretHeaders`,
//! deserialised by the gateway's own type of that sink, so errors name the option. Credentials written inline, Secrets aimed at non-credential options
//! and file options are refused (`render::credentials`, `render::files`). Also the render step
//! that renders each Sink the Gateway's Sources use, once.
//!
//! May import: `render::{rendered, secrets, credentials, files}`, `ankusa_config`,
//! `ankusa_crds`. Errors name the field relative to the spec, never a Secret's value.

use std::collections::BTreeMap;

use ankusa_config::SinkConfig;
use ankusa_crds::sink::{Options, OptionsFrom};
use ankusa_crds::{Sink, SinkSpec, Source};
use kube::ResourceExt;

use crate::render::credentials::{check_sink_options, secret_ref_paths};
use crate::render::files;
use crate::render::rendered::{Rendered, SecretValues};
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
/// `secretRefs` (keys are option paths: `secret`, `url`, `sasl.password`) and `secretHeaders`, deserialised by the gateway's own type of that sink (so a sink type
/// the gateway gains is rendered without changes here).
pub fn render_sink(sink: &Sink, secrets: &SecretValues) -> Result<SinkConfig, String> {
    render_sink_spec(&sink.spec, secrets)
}

/// [`render_sink`] of a Sink's spec alone (also the shape of the intake log of
/// `spec.durability`). Errors name the field relative to the spec (`kafka.brokers`, or
/// `options.brokers` for the deprecated map; `secretRefs.sasl.password`).
pub fn render_sink_spec(spec: &SinkSpec, secrets: &SecretValues) -> Result<SinkConfig, String> {
    let (options, from) = spec.resolved_options()?;
    let field = |e: String| match from {
        OptionsFrom::Typed => typed_field_error(e, spec.type_.field()),
        OptionsFrom::Deprecated => e,
    };
    files::refuse_path_keys(&options, Some(spec.type_), "a Sink").map_err(field)?;
    // A Sink's options would be silently replaced by each Source's entry: refused instead.
    if let Some(k) = ankusa_crds::sink::ROUTING_KEYS
        .iter()
        .find(|k| options.contains_key(**k))
    {
        return Err(field(format!(
            "options.{k}: is set per Source, on its sinks entry (spec.sinks[].filter, onFilterError, transform), not on a Sink"
        )));
    }
    let c = sink_from_object(spec, sink_object_of(spec, options, secrets).map_err(field)?)
        .map_err(field)?;
    files::refuse_file_options(&c, "options", Some(spec.type_), "a Sink")
        .map(|()| c)
        .map_err(field)
}

/// An error about the options (`options.x: ...`) of a Sink that set them in its typed field
/// (`kafka.x: ...`).
pub fn typed_field_error(e: String, field: &str) -> String {
    match e.strip_prefix("options") {
        Some(rest) if rest.starts_with(['.', ':', '[']) => format!("{field}{rest}"),
        _ => e,
    }
}

/// A Sink spec's options with `type` and the Secret values filled in: the JSON object of the
/// gateway's sink entry, before its types read it.
pub(crate) fn sink_object(
    spec: &SinkSpec,
    secrets: &SecretValues,
) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    let (options, _) = spec.resolved_options()?;
    sink_object_of(spec, options, secrets)
}

fn sink_object_of(
    spec: &SinkSpec,
    options: Options,
    secrets: &SecretValues,
) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    check_sink_options(&options)?;
    let mut obj = options;
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
    mut obj: serde_json::Map<String, serde_json::Value>,
) -> Result<SinkConfig, String> {
    use ankusa_config::{
        GooglePubsubSinkConfig, HttpSinkConfig, KafkaSinkConfig, LogSinkConfig, NatsSinkConfig,
        RabbitmqSinkConfig, RedisSinkConfig, SqsSinkConfig,
    };
    use ankusa_crds::SinkType as T;
    // Read by the type's own struct, not the tagged enum: serde reads a tagged enum's fields
    // from a buffer that forgets where they were, so an error would name no option.
    obj.remove("type");
    let value = serde_json::Value::Object(obj);
    fn read<C: serde::de::DeserializeOwned>(v: serde_json::Value) -> Result<C, String> {
        serde_path_to_error::deserialize::<_, C>(v).map_err(|e| {
            let path = e.path().to_string();
            // serde quotes the offending value ("invalid type: string \"...\""), and that
            // value may be a Secret's: the message reaches statuses, Events and logs.
            let inner = ankusa_config::value_free(&e.into_inner().to_string());
            // An unknown key's error sits on the map holding it: name the key itself.
            let mut at = match path.as_str() {
                "." | "" => "options".to_string(),
                p => format!("options.{p}"),
            };
            if let Some(key) = inner
                .strip_prefix("unknown field `")
                .and_then(|r| r.split('`').next())
            {
                at = format!("{at}.{key}");
            }
            format!("{at}: {inner}")
        })
    }
    Ok(match spec.type_ {
        T::Http => SinkConfig::Http(read::<HttpSinkConfig>(value)?),
        T::Log => SinkConfig::Log(read::<LogSinkConfig>(value)?),
        T::Kafka => SinkConfig::Kafka(read::<KafkaSinkConfig>(value)?),
        T::Rabbitmq => SinkConfig::Rabbitmq(read::<RabbitmqSinkConfig>(value)?),
        T::Nats => SinkConfig::Nats(read::<NatsSinkConfig>(value)?),
        T::Redis => SinkConfig::Redis(read::<RedisSinkConfig>(value)?),
        T::Sqs => SinkConfig::Sqs(read::<SqsSinkConfig>(value)?),
        T::GooglePubsub => SinkConfig::GooglePubsub(read::<GooglePubsubSinkConfig>(value)?),
    })
}

/// [`render_sink`], then the rule on the pods' ambient cloud identity
/// (`files::refuse_ambient_identity`): what every user of a Sink (a Source, the Gateway's
/// `spec.lifecycle`) places in the config.
pub fn render_checked(
    sink: &Sink,
    secrets: &SecretValues,
    ambient_allowed: bool,
) -> Result<SinkConfig, String> {
    render_sink(sink, secrets).and_then(|c| {
        files::refuse_ambient_identity(&c, ambient_allowed)
            .map(|()| c)
            .map_err(|e| match sink.spec.resolved_options() {
                Ok((_, OptionsFrom::Typed)) => typed_field_error(e, sink.spec.type_.field()),
                _ => e,
            })
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
            let entry = out.sink_entry(sink);
            if !entry.used_by.contains(&src.name_any()) {
                entry.used_by.push(src.name_any());
            }
            if !configs.contains_key(&r.name) {
                let rendered = render_checked(sink, secrets, ambient_allowed);
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
