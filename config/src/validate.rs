//! Validation of a whole config: every section's own rules (`section/*.rs`, each
//! `validate(&self, path)`), called in a fixed order, and the rules that relate two sections,
//! which only this module sees whole: the batcher's byte cap against `http.max_body_bytes`,
//! `wal` against `intake`, `backup` against `storage`, the listeners' ports, and for each
//! source its id against `http.prefix`, its tenant rules under `http.routing`, its retry
//! overrides over `dispatch.retry` and its sinks against `egress`; `lifecycle`'s sinks against
//! `egress` the same way, and `lifecycle` against `wal.type: none`.
//!
//! Every error names the field and the constraint, in the form `<field> must be <constraint>,
//! got <value>`, and quotes no string value. Imports `model`, the sections, `sinks`, `egress`
//! and the leaves; nothing but `load` and the crate root imports it.

use std::net::IpAddr;

use crate::egress::AddressPolicy;
use crate::error::ConfigError;
use crate::model::Config;
use crate::rules::{err, valid_id};
use crate::section::http::Routing;
use crate::section::node::Role;
use crate::section::source::SourceConfig;
use crate::section::verify::VerifyConfig;
use crate::section::wal::WalType;
use crate::sinks::{GooglePubsubSinkConfig, PubsubAuth, SinkConfig};

/// Validates a whole config.
pub fn validate(c: &Config) -> Result<(), ConfigError> {
    c.node.validate("node")?;
    c.log.validate("log")?;
    c.http.validate("http")?;
    c.admin.validate("admin")?;
    c.batcher.validate("batcher")?;
    commit_holds_a_body(c)?;
    c.rate_limits.validate("rate_limits")?;
    c.dispatch.validate("dispatch")?;
    c.egress.validate("egress")?;
    c.claim_check.validate("claim_check")?;
    c.quarantine.validate("quarantine")?;
    if let Some(s) = &c.storage {
        s.validate("storage")?;
    }
    c.queue.validate("queue")?;
    c.telemetry.validate("telemetry")?;
    durability(c)?;
    ports(c)?;
    for (id, s) in &c.sources {
        source(c, id, s)?;
    }
    lifecycle(c)?;
    fleet(c)?;
    direct_sources(c)
}

/// `fleet`: its own rules; refused under `wal.type: none`, where no store holds the hook a
/// key's owner would answer with (direct mode dedupes per pod).
fn fleet(c: &Config) -> Result<(), ConfigError> {
    let Some(f) = &c.fleet else {
        return Ok(());
    };
    if c.wal.wal_type == WalType::None {
        return Err(err(
            "fleet",
            "must be absent when wal.type is none (no store holds a key's first hook)",
        ));
    }
    f.validate("fleet", &c.node.instance)
}

/// `lifecycle`: its own rules, then each sink against `egress` like a source's. Refused under
/// `wal.type: none`, where no dispatch runs to deliver an event.
fn lifecycle(c: &Config) -> Result<(), ConfigError> {
    let Some(l) = &c.lifecycle else {
        return Ok(());
    };
    if c.wal.wal_type == WalType::None {
        return Err(err(
            "lifecycle",
            "must be absent when wal.type is none (no dispatch runs to deliver events)",
        ));
    }
    l.validate("lifecycle")?;
    // Events are not hooks: the trail's writer gives every lifecycle sink every event.
    for (i, sink) in l.sinks.iter().enumerate() {
        if !sink.routing().is_plain() {
            return Err(err(
                format!("lifecycle.sinks[{i}]"),
                "takes no filter or transform (every lifecycle sink gets every event)",
            ));
        }
    }
    sinks_against_egress(c, "lifecycle", &l.sinks)
}

/// Under `wal.type: none` every source needs a sink whose confirmation outlives the gateway
/// (`SinkConfig::durable`): with only the log or Redis, a `201` would promise nothing. Also
/// checked by a reload after the restart-pinned `wal` is put back, so a pushed config cannot
/// bring such a source in under a started direct node.
pub fn direct_sources(c: &Config) -> Result<(), ConfigError> {
    if c.wal.wal_type != WalType::None {
        return Ok(());
    }
    for (id, s) in &c.sources {
        if !s.sinks.iter().any(SinkConfig::durable) {
            return Err(err(
                format!("sources.{id}.sinks"),
                "needs at least one durable sink under wal.type none (log and redis are not durable)",
            ));
        }
        // A direct 201 means every sink confirmed the hook as received; a filter or a
        // transform would change what "every sink" and "the hook" are (docs/filters.md).
        for (i, sink) in s.sinks.iter().enumerate() {
            let r = sink.routing();
            if !r.is_plain() {
                let key = if r.filter.is_some() {
                    "filter"
                } else {
                    "transform"
                };
                return Err(err(
                    format!("sources.{id}.sinks[{i}].{key}"),
                    "is not supported under wal.type none",
                ));
            }
        }
    }
    Ok(())
}

/// A queued record counts its body plus 512 bytes of bookkeeping: the batcher's byte cap must
/// hold the largest body `http` accepts.
fn commit_holds_a_body(c: &Config) -> Result<(), ConfigError> {
    let need = c.http.max_body_bytes + 512;
    if c.batcher.max_queue_bytes < need {
        return Err(ConfigError::general(format!(
            "batcher.max_queue_bytes must be >= http.max_body_bytes + 512 ({need}), got {}",
            c.batcher.max_queue_bytes
        )));
    }
    Ok(())
}

/// `wal`, `intake` and `backup` together: dual needs an intake log, an intake log needs dual
/// (and its `tls:` passes `egress`), a backup needs a store.
fn durability(c: &Config) -> Result<(), ConfigError> {
    match (c.wal.wal_type, &c.intake) {
        (WalType::Dual, None) => {
            return Err(err("intake", "is required when wal.type is dual"));
        }
        (WalType::Disk | WalType::None, Some(_)) => {
            return Err(err(
                "intake",
                format!("is set but wal.type is {}", c.wal.wal_type.as_str()),
            ));
        }
        _ => {}
    }
    c.wal.validate("wal")?;
    if c.wal.wal_type == WalType::None {
        // Direct mode keeps no hook: nothing to archive or back up.
        if c.storage.is_some() {
            return Err(err(
                "storage",
                "must be absent when wal.type is none (no hook is stored, so none is archived)",
            ));
        }
        if c.backup.enabled {
            return Err(err(
                "backup.enabled",
                "must be false when wal.type is none (no hook is stored to back up)",
            ));
        }
    }
    if let Some(i) = &c.intake {
        i.validate("intake")?;
        let (log, at) = i.log_sink("intake")?;
        log.validate_tls(&at, c.egress.allow_insecure_tls)?;
    }
    if c.backup.enabled && c.backup.store.is_none() && c.storage.is_none() {
        return Err(err(
            "backup.store",
            "is required when backup is enabled and storage is not configured",
        ));
    }
    c.backup.validate("backup")
}

/// No two enabled listeners on one port of overlapping addresses.
fn ports(c: &Config) -> Result<(), ConfigError> {
    let mut used: Vec<(&str, IpAddr, u16)> = Vec::new();
    if c.has_role(Role::Edge) {
        used.push(("http.port", c.http.ip, c.http.port));
    }
    if c.admin.enabled {
        used.push(("admin.port", c.admin.ip, c.admin.port));
    }
    if c.claim_check.enabled {
        used.push(("claim_check.port", c.claim_check.ip, c.claim_check.port));
    }
    if let Some(f) = &c.fleet {
        used.push(("fleet.port", f.ip, f.port));
    }
    for (i, a) in used.iter().enumerate() {
        for b in &used[i + 1..] {
            let overlap = a.1 == b.1 || a.1.is_unspecified() || b.1.is_unspecified();
            if a.2 != 0 && a.2 == b.2 && overlap {
                return Err(ConfigError::general(format!(
                    "{} must differ from {} (both {})",
                    b.0, a.0, a.2
                )));
            }
        }
    }
    Ok(())
}

/// One source: its id (the key of `sources`), its own rules, then what it must agree with in
/// `http`, `dispatch` and `egress`.
fn source(c: &Config, id: &str, s: &SourceConfig) -> Result<(), ConfigError> {
    let p = format!("sources.{id}");
    if !valid_id(id) {
        return Err(err(&p, "source id must match [A-Za-z0-9_-]{1,64}"));
    }
    if c.http.prefix == "/" && (id == "health" || id == "ready") {
        return Err(err(
            &p,
            "with http.prefix: / a source cannot be named health or ready (those paths are the probes)",
        ));
    }
    s.validate(&p)?;
    tenant_path(c, &p, s)?;
    if let Some(r) = &s.retry {
        c.dispatch
            .retry
            .with_override(Some(r))
            .validate(&format!("{p}.retry"))?;
    }
    claim_expiry(c, &p, s)?;
    sinks_against_egress(c, &p, &s.sinks)
}

/// The error code (and message prefix) of a source whose deliveries could outlive its claims.
pub const RETRY_EXCEEDS_CLAIM_EXPIRY: &str = "retry_exceeds_claim_expiry";

/// A bucket's lifecycle rule deletes a claim `claim_check.bucket_expiry_days` after it was
/// written, whether or not its hook is still retrying: with a declared rule, a source with a
/// queue sink (the sinks that claim-check) must finish its retries, its DLQ retention and the
/// redeem grace inside it.
fn claim_expiry(c: &Config, p: &str, s: &SourceConfig) -> Result<(), ConfigError> {
    const DAY_MS: u64 = 86_400_000;
    let Some(days) = c.claim_check.bucket_expiry_days else {
        return Ok(());
    };
    let checks_in = |k: &SinkConfig| !matches!(k, SinkConfig::Log(_) | SinkConfig::Http(_));
    if !c.claim_check.enabled || !s.sinks.iter().any(checks_in) {
        return Ok(());
    }
    let horizon = c
        .dispatch
        .retry
        .with_override(s.retry.as_ref())
        .max_elapsed_ms;
    let dlq_days = c.queue.dlq.retention_days.unwrap_or(0);
    let need = horizon
        .saturating_add(u64::from(dlq_days) * DAY_MS)
        .saturating_add(u64::from(c.claim_check.redeem_grace_days) * DAY_MS);
    if need > u64::from(days) * DAY_MS {
        return Err(err(
            format!("{p}.retry.max_elapsed_ms"),
            format!(
                "{RETRY_EXCEEDS_CLAIM_EXPIRY}: the retry horizon ({horizon} ms) + queue.dlq.retention_days ({dlq_days}) + claim_check.redeem_grace_days ({}) outlast claim_check.bucket_expiry_days ({days})",
                c.claim_check.redeem_grace_days
            ),
        ));
    }
    Ok(())
}

/// Each sink of a list at `<p>.sinks[i]`: its TLS settings, its token endpoint and its literal
/// addresses against `egress`.
fn sinks_against_egress(c: &Config, p: &str, sinks: &[SinkConfig]) -> Result<(), ConfigError> {
    let policy = c.egress.address_policy();
    for (i, sink) in sinks.iter().enumerate() {
        let sp = format!("{p}.sinks[{i}]");
        sink.validate_tls(&sp, c.egress.allow_insecure_tls)?;
        if let SinkConfig::GooglePubsub(ps) = sink {
            metadata_token_endpoint(c, &sp, ps)?;
        }
        sink_egress(&policy, &sp, sink)?;
    }
    Ok(())
}

/// Under `routing: tenant_path` a shared source (no tenant) takes the tenant from the URL,
/// which its signature does not cover: it must verify, and keep a dedupe key, unless it
/// trusts the URL's tenant outright.
fn tenant_path(c: &Config, p: &str, s: &SourceConfig) -> Result<(), ConfigError> {
    if c.http.routing != Routing::TenantPath || !s.is_shared() || s.trust_url_tenant {
        return Ok(());
    }
    if s.verify == VerifyConfig::None {
        return Err(err(
            p,
            "a shared source (no tenant) under routing: tenant_path must verify signatures, \
             or set trust_url_tenant: true to accept any tenant named in the URL",
        ));
    }
    if s.dedupe.is_none() {
        return Err(err(
            format!("{p}.dedupe"),
            "is required for a source shared by URL tenants (routing: tenant_path, no tenant): \
             its signature does not cover the tenant in the URL, and only the dedupe key (kept \
             per source, not per tenant) stops a valid request re-posted under another \
             tenant's URL from becoming that tenant's hook; or set trust_url_tenant: true",
        ));
    }
    Ok(())
}

/// A broker or endpoint written as an IP literal in a range `egress` refuses can never be
/// reached: refused here, naming the field and the range (never the address). Names are
/// resolved and checked by the sink on every connect instead.
fn sink_egress(policy: &AddressPolicy, p: &str, sink: &SinkConfig) -> Result<(), ConfigError> {
    for t in sink.egress_targets() {
        if let Some(ip) = t.literal_ip()
            && let Err(denied) = policy.check_ip(ip)
        {
            return Err(err(format!("{p}.{}", t.field), denied.refusal()));
        }
    }
    Ok(())
}

/// The node's service-account token (`auth: metadata`) goes to Google, or to a host the node's
/// operator listed in `egress.metadata_token_hosts`: whoever writes a sink cannot point it at
/// their own server and collect the token.
fn metadata_token_endpoint(
    c: &Config,
    p: &str,
    s: &GooglePubsubSinkConfig,
) -> Result<(), ConfigError> {
    let Some(endpoint) = s.endpoint.as_ref() else {
        return Ok(());
    };
    if s.auth != PubsubAuth::Metadata {
        return Ok(());
    }
    let url = url::Url::parse(endpoint.expose())
        .map_err(|_| err(format!("{p}.endpoint"), "is not a URL"))?;
    let host = url.host_str().unwrap_or("").to_ascii_lowercase();
    let google =
        url.scheme() == "https" && (host == "googleapis.com" || host.ends_with(".googleapis.com"));
    let listed = c
        .egress
        .metadata_token_hosts
        .iter()
        .any(|h| h.eq_ignore_ascii_case(&host));
    if google || listed {
        return Ok(());
    }
    Err(err(
        format!("{p}.endpoint"),
        "auth: metadata sends the node's service-account token only to https://*.googleapis.com \
         or a host listed in egress.metadata_token_hosts (use auth: token or none for another \
         endpoint)",
    ))
}

#[cfg(test)]
mod tests;
