//! Secret values as rendering sees them, and which Secrets each part of a Gateway's config
//! reads: the Gateway's own settings (claim-check tokens, archive and `spec.durability`
//! credentials), its Sources' verify secrets and the `secretRefs`/`secretHeaders` of their
//! Sinks and of the Sinks of its `spec.lifecycle`.
//! The Gateway controller fetches exactly these (and only those labelled usable); its
//! watches map a changed Secret back to the Gateways that read it.
//!
//! May import: `render::rendered` (`SecretValues`, `source_of`), `ankusa_crds`. Errors name the Secret and the
//! key, never a value.

use std::collections::BTreeSet;

use ankusa_crds::{Gateway, SecretKeyRef, Sink, Source};
use kube::ResourceExt;

use crate::render::rendered::{SecretValues, source_of};

/// The entry `SecretValues` holds for a Secret that exists without the opt-in label: no data,
/// only this key (Secret data keys are `[-._a-zA-Z0-9]+`, so no real key looks like it).
pub const NOT_USABLE: &str = "\0not-usable";

/// Resolves one Secret key to text (a trailing newline, as `--from-file` leaves, is dropped).
pub fn secret_value(secrets: &SecretValues, r: &SecretKeyRef) -> Result<String, String> {
    let Some(data) = secrets.get(&r.name) else {
        return Err(format!("Secret {} not found", r.name));
    };
    if data.contains_key(NOT_USABLE) {
        return Err(format!(
            "Secret {} is not labelled {}={} (a Secret is used only when it opts in)",
            r.name,
            ankusa_crds::names::USABLE_LABEL,
            ankusa_crds::names::USABLE
        ));
    }
    let Some(bytes) = data.get(&r.key) else {
        return Err(format!("Secret {} has no key {:?}", r.name, r.key));
    };
    let text = std::str::from_utf8(bytes)
        .map_err(|_| format!("Secret {} key {:?} is not UTF-8 text", r.name, r.key))?;
    let text = text.trim_end_matches(['\n', '\r']);
    if text.is_empty() {
        return Err(format!("Secret {} key {:?} is empty", r.name, r.key));
    }
    Ok(text.to_string())
}

/// Secrets a Source refers to (directly; its sinks' are in [`sink_secret_names`]).
pub fn source_secret_names(source: &Source) -> impl Iterator<Item = &str> {
    source
        .spec
        .verify
        .secret_refs
        .iter()
        .map(|r| r.name.as_str())
}

pub fn sink_secret_names(sink: &Sink) -> impl Iterator<Item = &str> {
    sink.spec
        .secret_refs
        .values()
        .flatten()
        .map(|r| r.name.as_str())
        .chain(sink.spec.secret_headers.values().map(|r| r.name.as_str()))
}

/// Secrets a Gateway's own settings read (the admin token is fetched on its own): the
/// claim check's reader tokens, the archive's credentials and those of `spec.durability`.
pub fn gateway_secret_names(gw: &Gateway) -> impl Iterator<Item = &str> {
    let claim = gw.spec.settings.claim_check.iter().flat_map(|cc| {
        let store = cc.store.iter().filter_map(|s| s.credentials.as_ref());
        cc.token_secret_refs
            .iter()
            .map(|r| r.name.as_str())
            .chain(store.flat_map(|c| c.refs().map(|(_, r)| r.name.as_str())))
    });
    let archive = gw
        .spec
        .archive
        .iter()
        .filter_map(|a| a.credentials.as_ref())
        .flat_map(|c| c.refs().map(|(_, r)| r.name.as_str()));
    claim.chain(archive).chain(durability_secret_names(gw))
}

/// Secrets `spec.durability` reads: the intake log's `secretRefs` and the backup store's
/// credentials.
pub fn durability_secret_names(gw: &Gateway) -> impl Iterator<Item = &str> {
    let d = gw.spec.durability.as_ref();
    let intake = d
        .and_then(|d| d.intake.as_ref())
        .into_iter()
        .flat_map(|i| i.secret_refs.values().flatten().map(|r| r.name.as_str()));
    let backup = d
        .and_then(|d| d.backup.as_ref())
        .and_then(|b| b.store.as_ref())
        .and_then(|s| s.credentials.as_ref())
        .into_iter()
        .flat_map(|c| c.refs().map(|(_, r)| r.name.as_str()));
    intake.chain(backup)
}

/// The Sinks a Gateway's `spec.lifecycle` refers to (names; their Secrets are read like a
/// Source's sinks').
pub fn lifecycle_sink_names(gw: &Gateway) -> impl Iterator<Item = &str> {
    gw.spec.lifecycle.iter().flat_map(|l| l.sink_names())
}

/// Secrets referenced by a Gateway's own settings, its Sources, the Sinks they use and the
/// Sinks of its `spec.lifecycle`.
pub fn referenced_secrets(gw: &Gateway, sources: &[Source], sinks: &[Sink]) -> BTreeSet<String> {
    let name = gw.name_any();
    let mut out: BTreeSet<String> = gateway_secret_names(gw).map(String::from).collect();
    let mut sink_names: BTreeSet<String> = lifecycle_sink_names(gw).map(String::from).collect();
    for s in sources.iter().filter(|s| source_of(s, &name)) {
        out.extend(source_secret_names(s).map(String::from));
        sink_names.extend(s.spec.sinks.iter().map(|r| r.name.clone()));
    }
    for s in sinks.iter().filter(|s| sink_names.contains(&s.name_any())) {
        out.extend(sink_secret_names(s).map(String::from));
    }
    out
}
