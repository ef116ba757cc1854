//! A Source → the gateway's `SourceConfig` (its sinks resolved by name, its verify secrets
//! read), and the render step that places the Gateway's Sources in the config, oldest first.
//!
//! Each Source is checked once, alone: its part is validated by the gateway's own rules in a
//! probe holding the Gateway's settings and that Source only, so a render costs one
//! validation per Source plus one of the whole ([`validate_whole`]), not one of every Source
//! placed so far. A Source that fails keeps its previous version (`render::files::fallback`)
//! and is named in its own status; so is one that a rule across Sources refuses in the whole.
//!
//! May import: `render::{rendered, secrets, files}`, `ankusa_config`, `ankusa_crds`.

use std::collections::BTreeMap;

use ankusa_config::{
    Config, DedupeConfig, HmacVerify, OnVerifyFailure, Preset, RetryOverride, RoutingKeys,
    SinkConfig, SourceConfig, TimedPreset, VerifyConfig,
};
use ankusa_crds::source::{HmacSpec, RetrySpec};
use ankusa_crds::{SecretKeyRef, Source, SourceSpec, VerifyType};
use kube::ResourceExt;

use crate::render::files;
use crate::render::rendered::{
    Inputs, Outcome, Rendered, SecretValues, SourceRender, source_id, source_of,
};
use crate::render::secrets::{secret_value, source_secret_names};

fn secrets_of(
    refs: &[SecretKeyRef],
    secrets: &SecretValues,
) -> Result<ankusa_config::Secrets, String> {
    if refs.is_empty() {
        return Err("verify.secretRefs must name at least one Secret key".into());
    }
    let values = refs
        .iter()
        .map(|r| secret_value(secrets, r))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("verify.secretRefs: {e}"))?;
    Ok(ankusa_config::Secrets(values))
}

fn verify_config(spec: &SourceSpec, secrets: &SecretValues) -> Result<VerifyConfig, String> {
    let v = &spec.verify;
    let timed = |secret| TimedPreset {
        secret,
        tolerance_seconds: v.tolerance_seconds.unwrap_or(300),
    };
    if v.type_ != VerifyType::Hmac && v.hmac.is_some() {
        return Err("verify.hmac is only for type: hmac".into());
    }
    Ok(match v.type_ {
        VerifyType::None => {
            if !v.secret_refs.is_empty() {
                return Err("verify.secretRefs given but verify.type is none".into());
            }
            VerifyConfig::None
        }
        VerifyType::Stripe => VerifyConfig::Stripe(timed(secrets_of(&v.secret_refs, secrets)?)),
        VerifyType::Slack => VerifyConfig::Slack(timed(secrets_of(&v.secret_refs, secrets)?)),
        VerifyType::StandardWebhooks => {
            VerifyConfig::StandardWebhooks(timed(secrets_of(&v.secret_refs, secrets)?))
        }
        VerifyType::Github => VerifyConfig::Github(Preset {
            secret: secrets_of(&v.secret_refs, secrets)?,
        }),
        VerifyType::Shopify => VerifyConfig::Shopify(Preset {
            secret: secrets_of(&v.secret_refs, secrets)?,
        }),
        VerifyType::Hmac => {
            let h: &HmacSpec = v
                .hmac
                .as_ref()
                .ok_or("verify.hmac is required for type: hmac")?;
            VerifyConfig::Hmac(HmacVerify {
                secret: secrets_of(&v.secret_refs, secrets)?,
                signature_header: h.signature_header.clone(),
                signed: h.signed.clone().unwrap_or_else(|| "{body}".into()),
                hash: h.hash.unwrap_or(ankusa_config::HmacHash::Sha256),
                encoding: h.encoding.unwrap_or(ankusa_config::SigEncoding::Hex),
                sig_prefix: h.sig_prefix.clone(),
                parse: h.parse.unwrap_or_default(),
                sig_key: h.sig_key.clone(),
                version: h.version.clone(),
                timestamp_header: h.timestamp_header.clone(),
                tolerance_seconds: v.tolerance_seconds,
                secret_decode: h.secret_decode.unwrap_or_default(),
            })
        }
    })
}

fn retry_override(r: &RetrySpec) -> RetryOverride {
    RetryOverride {
        base_ms: r.base_ms,
        max_ms: r.max_ms,
        max_attempts: r.max_attempts,
        jitter: r.jitter,
        max_elapsed_ms: r.max_elapsed_ms,
    }
}

/// One Source → the gateway's `SourceConfig`, its sinks resolved from `sinks` (by name).
pub fn render_source(
    source: &Source,
    sinks: &BTreeMap<String, Result<SinkConfig, String>>,
    secrets: &SecretValues,
) -> Result<SourceConfig, String> {
    let spec = &source.spec;
    if spec.sinks.is_empty() {
        return Err("sinks must name at least one Sink".into());
    }
    let mut rendered_sinks = Vec::with_capacity(spec.sinks.len());
    for (i, r) in spec.sinks.iter().enumerate() {
        match sinks.get(&r.name) {
            None => return Err(format!("sinks[{i}]: Sink {} not found", r.name)),
            Some(Err(e)) => return Err(format!("sinks[{i}]: Sink {}: {e}", r.name)),
            Some(Ok(s)) => {
                let mut s = s.clone();
                s.set_routing(RoutingKeys {
                    filter: r.filter.clone(),
                    on_filter_error: r.on_filter_error.unwrap_or_default(),
                    transform: r.transform.clone(),
                });
                rendered_sinks.push(s);
            }
        }
    }
    let mut sc = SourceConfig::with_sinks(rendered_sinks);
    // The pods report a sink's delivery failures under these names (`GET /v1/status`), which
    // is how they reach the Sink's status.
    sc.sink_names = spec.sinks.iter().map(|r| r.name.clone()).collect();
    sc.tenant = spec.tenant.clone();
    sc.trust_url_tenant = spec.trust_url_tenant;
    sc.verify = verify_config(spec, secrets)?;
    sc.on_verify_failure = spec.on_verify_failure.unwrap_or(OnVerifyFailure::Reject);
    sc.dedupe = spec.dedupe.as_ref().map(|d| DedupeConfig {
        preset: d.preset,
        header: d.header.clone(),
        json: d.json.clone(),
        ttl_seconds: d
            .ttl_seconds
            .unwrap_or_else(ankusa_config::default_dedupe_ttl),
    });
    sc.forward_headers = spec.forward_headers.clone();
    if let Some(v) = spec.max_headers {
        sc.max_headers = v;
    }
    if let Some(v) = spec.forward_headers_max_bytes {
        sc.forward_headers_max_bytes = v;
    }
    sc.retry = spec.retry.as_ref().map(retry_override);
    Ok(sc)
}

/// The Gateway's Sources, oldest first, so that of two with one id the later is refused.
pub fn own_sources<'a>(inputs: &Inputs<'a>) -> Vec<&'a Source> {
    let gw_name = inputs.gateway.name_any();
    let mut sources: Vec<&Source> = inputs
        .sources
        .iter()
        .filter(|s| source_of(s, &gw_name))
        .collect();
    sources.sort_by(|a, b| {
        (
            a.metadata.creation_timestamp.as_ref().map(|t| t.0),
            a.name_any(),
        )
            .cmp(&(
                b.metadata.creation_timestamp.as_ref().map(|t| t.0),
                b.name_any(),
            ))
    });
    sources
}

/// Places each Source in `base` (which holds none yet): its current spec when it renders and
/// passes validation alone, else what [`files::fallback`] keeps of its previous version.
/// Records each outcome in `out.sources`.
pub fn place_all(
    sources: &[&Source],
    sink_configs: &BTreeMap<String, Result<SinkConfig, String>>,
    inputs: &Inputs,
    ambient_allowed: bool,
    base: &mut Config,
    out: &mut Rendered,
) {
    // The Gateway's settings alone: each Source is validated in it by itself.
    let mut probe = base.clone();
    let mut ids_taken: BTreeMap<String, String> = BTreeMap::new();
    for src in sources {
        let name = src.name_any();
        let id = source_id(src);
        let rendered = if let Some(other) = ids_taken.get(&id) {
            Err(format!(
                "source id {id:?} is already used by Source {other}"
            ))
        } else {
            render_source(src, sink_configs, inputs.secrets).and_then(|sc| {
                files::check_source(&sc, ambient_allowed)?;
                validate_alone(&mut probe, &id, sc)
            })
        };
        let outcome = match rendered {
            Ok(sc) => {
                out.secrets_used
                    .extend(source_secret_names(src).map(String::from));
                base.sources.insert(id.clone(), sc);
                Outcome::Current
            }
            Err(e) => {
                let prev = inputs
                    .previous
                    .and_then(|p| p.sources.get(&id))
                    .filter(|_| !ids_taken.contains_key(&id));
                keep_previous(base, &id, prev, e)
            }
        };
        ids_taken.entry(id.clone()).or_insert_with(|| name.clone());
        out.sources.insert(
            name,
            SourceRender {
                id,
                generation: src.metadata.generation,
                outcome,
            },
        );
    }
}

/// One Source's part, validated with the Gateway's settings (`probe` holds no other Source).
fn validate_alone(probe: &mut Config, id: &str, sc: SourceConfig) -> Result<SourceConfig, String> {
    probe.sources.insert(id.to_string(), sc.clone());
    let verdict = ankusa_config::validate(probe);
    probe.sources.clear();
    verdict
        .map(|()| sc)
        .map_err(|e| format!("refused by the gateway's validation: {e}"))
}

/// A Source whose current spec is refused for `error`: its previous version goes into `base`
/// when [`files::fallback`] keeps it.
fn keep_previous(
    base: &mut Config,
    id: &str,
    prev: Option<&SourceConfig>,
    error: String,
) -> Outcome {
    let (kept, outcome) = files::fallback(prev, error);
    if let Some(prev) = kept {
        base.sources.insert(id.to_string(), prev.clone());
    }
    outcome
}

/// The source id a gateway config field belongs to (`sources.<id>` or below it).
fn source_of_field(field: &str) -> Option<&str> {
    let rest = field.strip_prefix("sources.")?;
    rest.split(['.', '[']).next().filter(|id| !id.is_empty())
}

/// The whole config, by the gateway's own validation, once. Each Source passed alone, so
/// only a rule across Sources can refuse it here; the Source such a refusal names (if it was
/// placed from its current spec) then falls back as if refused alone, and the rest is
/// validated again: at most once more per Source. Any other refusal refuses the render.
pub fn validate_whole(
    base: &mut Config,
    out: &mut Rendered,
    previous: Option<&Config>,
) -> Result<(), String> {
    for _ in 0..=out.sources.len() {
        let Err(e) = ankusa_config::validate(base) else {
            return files::refuse_any_file_option(base);
        };
        let named = e.field.as_deref().and_then(source_of_field);
        let current = out
            .sources
            .values_mut()
            .find(|s| Some(s.id.as_str()) == named && s.outcome == Outcome::Current);
        let Some(sr) = current else {
            return Err(format!("config refused by the gateway's validation: {e}"));
        };
        base.sources.remove(&sr.id);
        let prev = previous.and_then(|p| p.sources.get(&sr.id));
        sr.outcome = keep_previous(
            base,
            &sr.id,
            prev,
            format!("refused by the gateway's validation: {e}"),
        );
    }
    Err("config refused by the gateway's validation".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_name_their_source() {
        assert_eq!(source_of_field("sources.orders"), Some("orders"));
        assert_eq!(
            source_of_field("sources.orders.verify.secret[1]"),
            Some("orders")
        );
        assert_eq!(source_of_field("sources.o-1[0]"), Some("o-1"));
        assert_eq!(source_of_field("sources."), None);
        assert_eq!(source_of_field("http.prefix"), None);
    }
}
