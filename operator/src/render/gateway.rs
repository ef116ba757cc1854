//! The Gateway's own part of the config: listeners, data dir, the operator's admin token, the
//! scrape token (scope `metrics:read` only), `spec.settings`, the claim check's reader tokens, then `spec.archive` (`storage:`) and
//! `spec.durability` (`wal`, `intake`, `backup`). Each step is validated by the gateway's own
//! rules as it is added, so a refusal names the part that brought it (`settings refused ...`,
//! `spec.archive.bucket: ...`, `spec.durability.intake: ...`). A base that does not pass
//! refuses the whole Gateway: no Source is placed.
//!
//! May import: `render::{rendered, secrets, archive, bucket, durability}`, `ankusa_config`,
//! `ankusa_crds`.

use std::collections::BTreeSet;

use ankusa_config::{AdminToken, Config};
use ankusa_crds::Gateway;
use ankusa_crds::names::DATA_MOUNT;
use kube::ResourceExt;

use crate::render::archive::{archive_field, archive_storage};
use crate::render::bucket::store_block;
use crate::render::durability::{durability, durability_field, is_durability_field};
use crate::render::rendered::{Inputs, SecretValues};
use crate::render::secrets::{durability_secret_names, secret_value};

/// The Gateway's own part of the config: listeners, data dir, admin token, settings.
pub fn base_config(gw: &Gateway, admin_token: &str) -> Config {
    let spec = &gw.spec;
    let mut c = Config::default();
    c.node.instance = gw.name_any();
    c.node.data_dir = DATA_MOUNT.into();
    c.http.ip = [0, 0, 0, 0].into();
    c.http.port = spec.ports.http;
    c.admin.ip = [0, 0, 0, 0].into();
    c.admin.port = spec.ports.admin;
    c.claim_check.port = spec.ports.claims;
    if let Some(cc) = &spec.settings.claim_check {
        if let Some(on) = cc.enabled {
            c.claim_check.enabled = on;
        }
        c.claim_check.retention_days = cc.retention_days;
    }
    c.admin.tokens = vec![AdminToken {
        token: admin_token.to_string(),
        scopes: vec!["*".into()],
    }];
    let s = &spec.settings;
    if let Some(l) = &s.log {
        c.log = l.clone();
    }
    if let Some(o) = s.telemetry.as_ref().and_then(|t| t.otlp.as_ref()) {
        c.telemetry.otlp.endpoint = Some(o.endpoint.clone());
        if let Some(r) = o.sampling_ratio {
            c.telemetry.otlp.sampling_ratio = r;
        }
        if let Some(n) = &o.service_name {
            c.telemetry.otlp.service_name = n.clone();
        }
    }
    if let Some(h) = &s.http {
        if let Some(v) = h.max_body_bytes {
            c.http.max_body_bytes = v;
        }
        if let Some(v) = h.routing {
            c.http.routing = v;
        }
        if let Some(v) = &h.prefix {
            c.http.prefix = v.clone();
        }
        if let Some(v) = h.body_timeout_ms {
            c.http.body_timeout_ms = v;
        }
        if let Some(v) = h.max_inflight_body_bytes {
            c.http.max_inflight_body_bytes = v;
        }
        if let Some(v) = h.client_rate_limit {
            c.http.client_rate_limit = Some(v);
        }
        if let Some(v) = &h.trusted_proxies {
            c.http.trusted_proxies = v.clone();
        }
        if let Some(v) = &h.connections {
            c.http.connections = v.clone();
        }
    }
    if let Some(r) = &s.region {
        c.node.region = Some(r.clone());
    }
    if let Some(b) = &s.batcher {
        c.batcher = b.clone();
    }
    if let Some(r) = &s.rate_limits {
        c.rate_limits = r.clone();
    }
    if let Some(d) = &s.dispatch {
        c.dispatch = d.clone();
    }
    if let Some(e) = &s.egress {
        c.egress = e.gateway.clone();
    }
    if let Some(q) = &s.quarantine {
        c.quarantine = q.clone();
    }
    if let Some(q) = &s.queue {
        c.queue = q.clone();
    }
    c
}

/// The scope of the scrape token: `/metrics` and nothing else.
pub const SCRAPE_SCOPE: &str = "metrics:read";

/// The scrape token's entry in `admin.tokens`.
pub fn scrape_token(token: &str) -> AdminToken {
    AdminToken {
        token: token.to_string(),
        scopes: vec![SCRAPE_SCOPE.into()],
    }
}

/// The claim check's readers: Secret-held tokens and ServiceAccounts checked with a
/// TokenReview (through the in-cluster API address and the token the pod template projects for
/// them); with either, the claim port listens on the pod network so consumers in other pods can
/// redeem claims.
fn claim_tokens(
    c: &mut Config,
    cc: &ankusa_crds::ClaimCheckSettings,
    secrets: &SecretValues,
) -> Result<(), String> {
    let mut tokens = Vec::with_capacity(cc.token_secret_refs.len());
    for (i, r) in cc.token_secret_refs.iter().enumerate() {
        let v = secret_value(secrets, r)
            .map_err(|e| format!("spec.settings.claim_check.token_secret_refs[{i}]: {e}"))?;
        tokens.push(ankusa_config::ClaimToken::new(v));
    }
    c.claim_check.token_review = cc.token_review.as_ref().map(|r| {
        ankusa_config::TokenReviewConfig::in_cluster(
            r.audience
                .as_deref()
                .unwrap_or(ankusa_crds::DEFAULT_CLAIM_AUDIENCE),
            r.service_accounts
                .iter()
                .map(|a| ankusa_config::ServiceAccountReader {
                    namespace: a.namespace.clone(),
                    name: a.name.clone(),
                    tenants: a.tenants.clone(),
                })
                .collect(),
        )
    });
    if !tokens.is_empty() || c.claim_check.token_review.is_some() {
        c.claim_check.ip = [0, 0, 0, 0].into();
    }
    c.claim_check.tokens = tokens;
    Ok(())
}

/// The claim check's shared bucket and its declared expiry. Only `s3`: a store on the pod's
/// own volume would be lost with it, which is what the data dir already is.
fn claim_store(
    c: &mut Config,
    cc: &ankusa_crds::ClaimCheckSettings,
    secrets: &SecretValues,
) -> Result<(), String> {
    const AT: &str = "spec.settings.claim_check.store";
    c.claim_check.bucket_expiry_days = cc.bucket_expiry_days;
    if let Some(d) = cc.redeem_grace_days {
        c.claim_check.redeem_grace_days = d;
    }
    if let Some(ms) = cc.pack_linger_ms {
        c.claim_check.pack_linger_ms = ms;
    }
    if let Some(n) = cc.pack_max_bytes {
        c.claim_check.pack_max_bytes = n;
    }
    let Some(st) = &cc.store else {
        return Ok(());
    };
    let store = store_block(
        AT,
        st,
        secrets,
        "claims on the pod's own volume are lost with it (leave store out for that)",
    )?;
    c.claim_check.store = Some(store);
    Ok(())
}

/// The base config of the Gateway (no Source yet), or why its settings are refused. Records
/// in `secrets_used` the Secrets that went in.
pub fn render_base(inputs: &Inputs, secrets_used: &mut BTreeSet<String>) -> Result<Config, String> {
    let gw = inputs.gateway;
    if let Some(r) = &gw.spec.admin_token_secret_ref {
        secrets_used.insert(r.name.clone());
    }
    let mut base = base_config(gw, inputs.admin_token);
    if let Some(t) = inputs.scrape_token {
        base.admin.tokens.push(scrape_token(t));
    }
    if let Some(cc) = &gw.spec.settings.claim_check {
        secrets_used.extend(cc.token_secret_refs.iter().map(|r| r.name.clone()));
        claim_tokens(&mut base, cc, inputs.secrets)?;
        let store_creds = cc.store.iter().filter_map(|s| s.credentials.as_ref());
        secrets_used.extend(store_creds.flat_map(|c| c.refs().map(|(_, r)| r.name.clone())));
        claim_store(&mut base, cc, inputs.secrets)?;
    }
    ankusa_config::validate(&base)
        .map_err(|e| format!("settings refused by the gateway's validation: {e}"))?;
    if let Some(c) = gw
        .spec
        .archive
        .as_ref()
        .and_then(|a| a.credentials.as_ref())
    {
        secrets_used.extend(c.refs().map(|(_, r)| r.name.clone()));
    }
    base.storage = archive_storage(gw, inputs.secrets)?;
    ankusa_config::validate(&base).map_err(|e| {
        // The settings passed above: what is refused is the archive.
        let field = e
            .field
            .as_deref()
            .map(archive_field)
            .unwrap_or_else(|| "spec.archive".into());
        format!(
            "{field}: refused by the gateway's validation: {}",
            e.message
        )
    })?;
    direct_rules(gw)?;
    if gw.is_direct() && !claim_check_asked(gw) {
        // A direct pod's claims live on an emptyDir, gone with the pod: bodies stay inline
        // unless the Gateway asks for claims knowing that (docs/operator.md).
        base.claim_check.enabled = false;
    }
    secrets_used.extend(durability_secret_names(gw).map(String::from));
    let d = durability(gw, inputs.secrets)?;
    base.wal = d.wal;
    base.intake = d.intake;
    base.backup = d.backup;
    ankusa_config::validate(&base).map_err(|e| {
        // What passed above is fine: what is refused is `spec.durability`.
        let field = e
            .field
            .as_deref()
            .filter(|f| is_durability_field(f))
            .map(durability_field)
            .unwrap_or_else(|| "spec.durability".into());
        format!(
            "{field}: refused by the gateway's validation: {}",
            e.message
        )
    })?;
    Ok(base)
}

/// What a direct Gateway cannot have, and what only a direct Gateway can: each refusal names
/// its field.
fn direct_rules(gw: &Gateway) -> Result<(), String> {
    if gw.is_direct() {
        if gw.spec.archive.is_some() {
            return Err("spec.archive: is for durability modes disk and dual (a direct Gateway stores no hook)".into());
        }
    } else if gw.spec.autoscaling.is_some() {
        return Err("spec.autoscaling: is for spec.durability.mode direct (the pods of a disk or dual Gateway each own a volume; scale them with spec.replicas)".into());
    }
    Ok(())
}

/// Whether `spec.settings.claim_check.enabled` is set to true.
fn claim_check_asked(gw: &Gateway) -> bool {
    gw.spec
        .settings
        .claim_check
        .as_ref()
        .and_then(|c| c.enabled)
        .unwrap_or(false)
}
