//! Range and cross-key rules. Every error names the field and the constraint, in the form
//! `<field> must be <constraint>, got <value>`.

use std::collections::HashSet;
use std::net::IpAddr;

use base64::Engine;

use crate::error::ConfigError;
use crate::model::*;
use crate::secrets::{MAX_SECRETS, Secrets};

/// Tenant and source ids: `[A-Za-z0-9_-]{1,64}`.
pub fn valid_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// An HTTP header name (RFC 9110 token).
pub fn valid_header_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

pub(crate) fn at_least<T: PartialOrd + std::fmt::Display>(
    field: &str,
    v: T,
    min: T,
) -> Result<(), ConfigError> {
    if v < min {
        return Err(ConfigError::general(format!(
            "{field} must be >= {min}, got {v}"
        )));
    }
    Ok(())
}

fn at_most<T: PartialOrd + std::fmt::Display>(
    field: &str,
    v: T,
    max: T,
) -> Result<(), ConfigError> {
    if v > max {
        return Err(ConfigError::general(format!(
            "{field} must be <= {max}, got {v}"
        )));
    }
    Ok(())
}

fn err(field: impl Into<String>, msg: impl Into<String>) -> ConfigError {
    ConfigError::field(field, msg)
}

/// Validates a whole config.
pub fn validate(c: &Config) -> Result<(), ConfigError> {
    node(c)?;
    http(c)?;
    admin(c)?;
    commit(c)?;
    rate_limits(&c.rate_limits)?;
    dispatch(&c.dispatch)?;
    egress(&c.egress)?;
    claim_check(c)?;
    c.quarantine.validate()?;
    if let Some(s) = &c.storage {
        crate::storage::validate_storage(s)?;
    }
    crate::storage::validate_queue(&c.queue)?;
    crate::durability::validate_durability(c)?;
    ports(c)?;
    for (id, s) in &c.sources {
        source(c, id, s)?;
    }
    Ok(())
}

fn node(c: &Config) -> Result<(), ConfigError> {
    let n = &c.node;
    if n.instance.is_empty()
        || n.instance.len() > 253
        || !n
            .instance
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    {
        return Err(err("node.instance", "must match [A-Za-z0-9._-]{1,253}"));
    }
    if n.data_dir.as_os_str().is_empty() {
        return Err(err("node.data_dir", "must not be empty"));
    }
    if n.roles.is_empty() {
        return Err(err(
            "node.roles",
            "must name at least one role (edge, dispatch)",
        ));
    }
    let unique: HashSet<_> = n.roles.iter().collect();
    if unique.len() != n.roles.len() {
        return Err(err("node.roles", "must not repeat a role"));
    }
    if let Some(r) = &n.region
        && (r.is_empty() || r.len() > 64)
    {
        return Err(err("node.region", "must be 1 to 64 characters"));
    }
    if let Err(e) = c.log.level.parse::<LevelCheck>() {
        return Err(err("log.level", e));
    }
    Ok(())
}

/// Accepts what a `tracing` env filter accepts, in the common forms, without depending on it.
struct LevelCheck;
impl std::str::FromStr for LevelCheck {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.trim().is_empty() {
            return Err("must not be empty".into());
        }
        for directive in s.split(',') {
            let level = directive
                .rsplit('=')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            let known = ["trace", "debug", "info", "warn", "error", "off"];
            if directive.contains('=') || known.contains(&level.as_str()) {
                if directive.contains('=') && !known.contains(&level.as_str()) {
                    return Err("a target=level directive names an unknown level (expected trace, debug, info, warn, error or off)".to_string());
                }
            } else {
                return Err(
                    "must be a level (trace, debug, info, warn, error, off) or target=level list"
                        .to_string(),
                );
            }
        }
        Ok(LevelCheck)
    }
}

fn http(c: &Config) -> Result<(), ConfigError> {
    let h = &c.http;
    at_least("http.max_body_bytes", h.max_body_bytes, 1)?;
    at_most("http.max_body_bytes", h.max_body_bytes, 1 << 30)?;
    at_least("http.body_timeout_ms", h.body_timeout_ms, 1)?;
    if !h.prefix.starts_with('/') || (h.prefix.len() > 1 && h.prefix.ends_with('/')) {
        return Err(err("http.prefix", "must start with / and not end with /"));
    }
    if h.prefix
        .contains(|ch: char| ch.is_whitespace() || ch == '?' || ch == '#' || ch == '%')
    {
        return Err(err("http.prefix", "must be a plain path"));
    }
    at_least(
        "http.max_inflight_body_bytes",
        h.max_inflight_body_bytes,
        h.max_body_bytes,
    )?;
    if let Some(l) = &h.client_rate_limit {
        rate_limit("http.client_rate_limit", l)?;
    }
    for (i, cidr) in h.trusted_proxies.iter().enumerate() {
        if parse_cidr(cidr).is_none() {
            return Err(err(
                format!("http.trusted_proxies[{i}]"),
                "must be an address or a CIDR (10.0.0.0/8, 2001:db8::/32)",
            ));
        }
    }
    connections("http.connections", &h.connections)?;
    connections("admin.connections", &c.admin.connections)?;
    connections("claim_check.connections", &c.claim_check.connections)?;
    Ok(())
}

fn connections(path: &str, l: &crate::ConnectionLimits) -> Result<(), ConfigError> {
    at_least(
        &format!("{path}.max_connections"),
        l.max_connections as u64,
        1,
    )?;
    at_least(
        &format!("{path}.header_read_timeout_ms"),
        l.header_read_timeout_ms,
        100,
    )?;
    at_least(&format!("{path}.idle_timeout_ms"), l.idle_timeout_ms, 100)?;
    at_least(&format!("{path}.max_headers"), l.max_headers as u64, 8)?;
    at_most(&format!("{path}.max_headers"), l.max_headers as u64, 1000)?;
    at_least(
        &format!("{path}.max_header_bytes"),
        l.max_header_bytes as u64,
        8192,
    )?;
    at_most(
        &format!("{path}.max_header_bytes"),
        l.max_header_bytes as u64,
        1 << 20,
    )?;
    Ok(())
}

/// Scopes an admin token may carry.
pub const ADMIN_SCOPES: &[&str] = &[
    "*",
    "dlq:read",
    "dlq:write",
    "replays:write",
    "config:read",
    "config:write",
    "hooks:read",
    "tenant:*",
];

fn admin(c: &Config) -> Result<(), ConfigError> {
    let a = &c.admin;
    for (i, t) in a.tokens.iter().enumerate() {
        if t.token.len() < 16 {
            return Err(err(
                format!("admin.tokens[{i}].token"),
                format!("must be at least 16 characters, got {}", t.token.len()),
            ));
        }
        if t.scopes.is_empty() {
            return Err(err(
                format!("admin.tokens[{i}].scopes"),
                "must list at least one scope",
            ));
        }
        for (j, s) in t.scopes.iter().enumerate() {
            let ok = ADMIN_SCOPES.contains(&s.as_str())
                || s.strip_prefix("tenant:").is_some_and(valid_id);
            if !ok {
                return Err(err(
                    format!("admin.tokens[{i}].scopes[{j}]"),
                    format!(
                        "unknown scope (expected one of {}, or tenant:<id>)",
                        ADMIN_SCOPES.join(", ")
                    ),
                ));
            }
        }
    }
    if a.enabled && a.tokens.is_empty() && !a.ip.is_loopback() {
        return Err(err(
            "admin.tokens",
            format!(
                "must hold at least one token when admin.ip is not a loopback address (got {})",
                a.ip
            ),
        ));
    }
    if let Some(tls) = &a.tls {
        for (field, path) in [("cert_file", &tls.cert_file), ("key_file", &tls.key_file)] {
            if path.as_os_str().is_empty() {
                return Err(err(format!("admin.tls.{field}"), "must name a PEM file"));
            }
        }
    }
    Ok(())
}

fn commit(c: &Config) -> Result<(), ConfigError> {
    let b = &c.batcher;
    at_least("batcher.partitions", b.partitions, 1)?;
    at_most("batcher.partitions", b.partitions, 64)?;
    at_least("batcher.max_batch", b.max_batch, 1)?;
    at_most("batcher.max_batch", b.max_batch, 100_000)?;
    at_most("batcher.max_delay_ms", b.max_delay_ms, 1_000)?;
    at_least("batcher.max_queue", b.max_queue, 1)?;
    at_least("batcher.max_wait_ms", b.max_wait_ms, 1)?;
    // A queued record counts its body plus 512 bytes of bookkeeping.
    let need = c.http.max_body_bytes + 512;
    if b.max_queue_bytes < need {
        return Err(ConfigError::general(format!(
            "batcher.max_queue_bytes must be >= http.max_body_bytes + 512 ({need}), got {}",
            b.max_queue_bytes
        )));
    }
    Ok(())
}

fn rate_limit(field: &str, r: &RateLimit) -> Result<(), ConfigError> {
    if !(r.rate.is_finite() && r.rate > 0.0) {
        return Err(ConfigError::general(format!(
            "{field}.rate must be > 0, got {}",
            r.rate
        )));
    }
    at_least(&format!("{field}.burst"), r.burst, 1)
}

fn rate_limits(r: &RateLimitsConfig) -> Result<(), ConfigError> {
    if let Some(d) = &r.default {
        rate_limit("rate_limits.default", d)?;
    }
    for (t, l) in &r.tenants {
        if !valid_id(t) {
            return Err(err(
                format!("rate_limits.tenants.{t}"),
                "tenant id must match [A-Za-z0-9_-]{1,64}",
            ));
        }
        rate_limit(&format!("rate_limits.tenants.{t}"), l)?;
    }
    Ok(())
}

fn retry(field: &str, r: &RetryConfig) -> Result<(), ConfigError> {
    at_least(&format!("{field}.base_ms"), r.base_ms, 1)?;
    if r.max_ms < r.base_ms {
        return Err(ConfigError::general(format!(
            "{field}.max_ms must be >= {field}.base_ms ({}), got {}",
            r.base_ms, r.max_ms
        )));
    }
    if let Some(n) = r.max_attempts {
        at_least(&format!("{field}.max_attempts"), n, 1)?;
    }
    at_least(&format!("{field}.max_elapsed_ms"), r.max_elapsed_ms, 1)
}

fn dispatch(d: &DispatchConfig) -> Result<(), ConfigError> {
    at_least("dispatch.concurrency", d.concurrency, 1)?;
    at_most("dispatch.concurrency", d.concurrency, 65_536)?;
    at_least("dispatch.max_inflight", d.max_inflight, 1)?;
    at_least("dispatch.max_inflight_bytes", d.max_inflight_bytes, 1)?;
    at_least("dispatch.batch", d.batch, 1)?;
    at_most("dispatch.batch", d.batch, 10_000)?;
    at_least("dispatch.attempt_timeout_ms", d.attempt_timeout_ms, 1)?;
    at_least("dispatch.max_retry_after_ms", d.max_retry_after_ms, 1)?;
    retry("dispatch.retry", &d.retry)?;
    tenant_window("dispatch.tenants.default", &d.tenants.default)?;
    for (t, w) in &d.tenants.overrides {
        if !valid_id(t) {
            return Err(err(
                format!("dispatch.tenants.overrides.{t}"),
                "tenant id must match [A-Za-z0-9_-]{1,64}",
            ));
        }
        tenant_window(&format!("dispatch.tenants.overrides.{t}"), w)?;
    }
    if let Some(n) = d.sink_concurrency {
        at_least("dispatch.sink_concurrency", n, 1)?;
    }
    at_least("dispatch.breaker_open_ms", d.breaker_open_ms, 1)?;
    if d.breaker_max_open_ms < d.breaker_open_ms {
        return Err(ConfigError::general(format!(
            "dispatch.breaker_max_open_ms must be >= dispatch.breaker_open_ms ({}), got {}",
            d.breaker_open_ms, d.breaker_max_open_ms
        )));
    }
    Ok(())
}

fn tenant_window(field: &str, w: &TenantWindow) -> Result<(), ConfigError> {
    if let Some(n) = w.max_inflight {
        at_least(&format!("{field}.max_inflight"), n, 1)?;
    }
    if let Some(n) = w.max_inflight_bytes {
        at_least(&format!("{field}.max_inflight_bytes"), n, 1)?;
    }
    if let Some(n) = w.concurrency {
        at_least(&format!("{field}.concurrency"), n, 1)?;
    }
    Ok(())
}

/// Parses `addr/prefix` (or a bare address) into (network address, prefix length).
pub fn parse_cidr(s: &str) -> Option<(IpAddr, u8)> {
    let (addr, len) = match s.split_once('/') {
        Some((a, l)) => (a.parse::<IpAddr>().ok()?, l.parse::<u8>().ok()?),
        None => {
            let a = s.parse::<IpAddr>().ok()?;
            (a, if a.is_ipv4() { 32 } else { 128 })
        }
    };
    let max = if addr.is_ipv4() { 32 } else { 128 };
    (len <= max).then_some((addr, len))
}

/// Whether `ip` lies in `net/len` (both of one family; an IPv4-mapped IPv6 address is not
/// unwrapped here).
pub fn cidr_contains(net: IpAddr, len: u8, ip: IpAddr) -> bool {
    match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(a)) => {
            let mask = u32::MAX
                .checked_shl(32 - u32::from(len.min(32)))
                .unwrap_or(0);
            u32::from(n) & mask == u32::from(a) & mask
        }
        (IpAddr::V6(n), IpAddr::V6(a)) => {
            let mask = u128::MAX
                .checked_shl(128 - u32::from(len.min(128)))
                .unwrap_or(0);
            u128::from(n) & mask == u128::from(a) & mask
        }
        _ => false,
    }
}

fn egress(e: &EgressConfig) -> Result<(), ConfigError> {
    for (i, c) in e.allow_cidrs.iter().enumerate() {
        if parse_cidr(c).is_none() {
            return Err(err(
                format!("egress.allow_cidrs[{i}]"),
                "must be an address or addr/prefix",
            ));
        }
    }
    for (i, h) in e.metadata_token_hosts.iter().enumerate() {
        let ok = !h.is_empty()
            && h.len() <= 253
            && h.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
        if !ok {
            return Err(err(
                format!("egress.metadata_token_hosts[{i}]"),
                "must be a host name (no scheme, port or path)",
            ));
        }
    }
    at_least("egress.pools.pool_size", e.pools.pool_size, 1)?;
    at_least("egress.pools.max_pools", e.pools.max_pools, 1)?;
    at_least(
        "egress.pools.max_pools_per_tenant",
        e.pools.max_pools_per_tenant,
        1,
    )?;
    at_least("egress.pools.pool_max_idle_ms", e.pools.pool_max_idle_ms, 1)
}

fn claim_check(c: &Config) -> Result<(), ConfigError> {
    let cc = &c.claim_check;
    for (i, t) in cc.tokens.iter().enumerate() {
        if t.token.trim().len() < 16 {
            return Err(err(
                format!("claim_check.tokens[{i}]"),
                format!(
                    "must be at least 16 characters, got {}",
                    t.token.trim().len()
                ),
            ));
        }
        if let Some(tenants) = &t.tenants {
            if tenants.is_empty() {
                return Err(err(
                    format!("claim_check.tokens[{i}].tenants"),
                    "must name at least one tenant (leave it out for every tenant)",
                ));
            }
            if let Some(j) = tenants.iter().position(|x| !valid_id(x)) {
                return Err(err(
                    format!("claim_check.tokens[{i}].tenants[{j}]"),
                    "is not a tenant id ([A-Za-z0-9_-]{1,64})",
                ));
            }
        }
    }
    if cc.enabled && cc.tokens.is_empty() && !cc.ip.is_loopback() {
        return Err(err(
            "claim_check.tokens",
            format!(
                "must hold at least one token when claim_check.ip is not a loopback address (got {}): the port serves hook bodies",
                cc.ip
            ),
        ));
    }
    Ok(())
}

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

/// Checks a secret list: 1..=8 entries, none empty. `whsec` says each must be a
/// Standard Webhooks secret (`whsec_<base64>` or raw bytes) whose base64 part decodes.
pub(crate) fn secrets(field: &str, s: &Secrets, whsec: bool) -> Result<(), ConfigError> {
    if s.is_empty() {
        return Err(err(field, "must hold at least one secret"));
    }
    if s.len() > MAX_SECRETS {
        return Err(err(
            field,
            format!("must hold at most {MAX_SECRETS} secrets, got {}", s.len()),
        ));
    }
    for (i, v) in s.iter().enumerate() {
        let f = if s.len() == 1 {
            field.to_string()
        } else {
            format!("{field}[{i}]")
        };
        if v.is_empty() {
            return Err(err(
                f,
                "must not be empty (an empty HMAC key would verify anything; is a ${VAR:-} unset?)",
            ));
        }
        if whsec && let Some(b64) = v.strip_prefix("whsec_") {
            match base64::engine::general_purpose::STANDARD.decode(b64) {
                Ok(k) if !k.is_empty() => {}
                _ => return Err(err(f, "must be whsec_ followed by base64 of the key")),
            }
        }
    }
    Ok(())
}

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
    if let Some(t) = &s.tenant
        && !valid_id(t)
    {
        return Err(err(format!("{p}.tenant"), "must match [A-Za-z0-9_-]{1,64}"));
    }
    verify(&p, &s.verify)?;
    match s.on_verify_failure {
        // Nothing fails verification without a scheme: the pen would never hold anything.
        OnVerifyFailure::Quarantine if s.verify == VerifyConfig::None => {
            return Err(err(
                format!("{p}.on_verify_failure"),
                "quarantine needs a verify scheme (verify.type is none)",
            ));
        }
        OnVerifyFailure::AcceptFlag if s.verify == VerifyConfig::None => {
            return Err(err(
                format!("{p}.on_verify_failure"),
                "accept_flag needs a verify scheme (verify.type is none)",
            ));
        }
        _ => {}
    }
    let shared = s.tenant.as_deref().is_none_or(|t| t == "default");
    if c.http.routing == Routing::TenantPath
        && shared
        && s.verify == VerifyConfig::None
        && !s.trust_url_tenant
    {
        return Err(err(
            &p,
            "a shared source (no tenant) under routing: tenant_path must verify signatures, \
             or set trust_url_tenant: true to accept any tenant named in the URL",
        ));
    }
    if c.http.routing == Routing::TenantPath
        && shared
        && s.verify != VerifyConfig::None
        && !s.trust_url_tenant
        && s.dedupe.is_none()
    {
        return Err(err(
            format!("{p}.dedupe"),
            "is required for a source shared by URL tenants (routing: tenant_path, no tenant): \
             its signature does not cover the tenant in the URL, and only the dedupe key (kept \
             per source, not per tenant) stops a valid request re-posted under another \
             tenant's URL from becoming that tenant's hook; or set trust_url_tenant: true",
        ));
    }
    if let Some(d) = &s.dedupe {
        let n = d.preset.is_some() as u8 + d.header.is_some() as u8 + d.json.is_some() as u8;
        if n != 1 {
            return Err(err(
                format!("{p}.dedupe"),
                "must name exactly one of preset, header, json",
            ));
        }
        if let Some(h) = &d.header
            && !valid_header_name(h)
        {
            return Err(err(
                format!("{p}.dedupe.header"),
                "is not a header name (letters, digits and !#$%&'*+-.^_`|~ only)",
            ));
        }
        if let Some(j) = &d.json
            && (j.is_empty() || j.split('.').any(str::is_empty))
        {
            return Err(err(
                format!("{p}.dedupe.json"),
                "must be a dot path like data.id",
            ));
        }
        at_least(&format!("{p}.dedupe.ttl_seconds"), d.ttl_seconds, 1)?;
    }
    if let Some(list) = &s.forward_headers {
        for (i, h) in list.iter().enumerate() {
            if !valid_header_name(h) {
                return Err(err(
                    format!("{p}.forward_headers[{i}]"),
                    "is not a header name (letters, digits and !#$%&'*+-.^_`|~ only)",
                ));
            }
        }
    }
    if let Some(r) = &s.retry {
        retry(
            &format!("{p}.retry"),
            &c.dispatch.retry.with_override(Some(r)),
        )?;
    }
    if s.sinks.is_empty() {
        return Err(err(format!("{p}.sinks"), "must list at least one sink"));
    }
    sink_names(&p, s)?;
    let policy = c.egress.address_policy();
    for (i, sink) in s.sinks.iter().enumerate() {
        let sp = format!("{p}.sinks[{i}]");
        sink.validate(&sp)?;
        sink.validate_tls(&sp, c.egress.allow_insecure_tls)?;
        if let crate::SinkConfig::GooglePubsub(ps) = sink {
            metadata_token_endpoint(c, &sp, ps)?;
        }
        sink_egress(&policy, &sp, sink)?;
    }
    Ok(())
}

/// Longest entry of `sink_names` (a Kubernetes object name is at most 253 bytes).
const MAX_SINK_NAME: usize = 253;

/// `sink_names`, when given, names every sink once: it is reported back (`GET /v1/status`),
/// so a name must be short plain text.
fn sink_names(p: &str, s: &SourceConfig) -> Result<(), ConfigError> {
    if s.sink_names.is_empty() {
        return Ok(());
    }
    if s.sink_names.len() != s.sinks.len() {
        return Err(err(
            format!("{p}.sink_names"),
            format!(
                "must name each of the {} sinks (got {} names)",
                s.sinks.len(),
                s.sink_names.len()
            ),
        ));
    }
    for (i, n) in s.sink_names.iter().enumerate() {
        if n.is_empty() || n.len() > MAX_SINK_NAME || n.chars().any(char::is_control) {
            return Err(err(
                format!("{p}.sink_names[{i}]"),
                format!("must be 1 to {MAX_SINK_NAME} bytes without control characters"),
            ));
        }
    }
    Ok(())
}

/// A broker or endpoint written as an IP literal in a range `egress` refuses can never be
/// reached: refused here, naming the field and the range (never the address). Names are
/// resolved and checked by the sink on every connect instead.
fn sink_egress(
    policy: &crate::AddressPolicy,
    p: &str,
    sink: &crate::SinkConfig,
) -> Result<(), ConfigError> {
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
    s: &crate::GooglePubsubSinkConfig,
) -> Result<(), ConfigError> {
    let Some(endpoint) = s.endpoint.as_ref() else {
        return Ok(());
    };
    if s.auth != crate::PubsubAuth::Metadata {
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

/// The widest signature window accepted: a captured request replays for this long.
pub const MAX_TOLERANCE_SECONDS: u64 = 3600;

fn tolerance(field: &str, t: u64) -> Result<(), ConfigError> {
    at_least(field, t, 1)?;
    at_most(field, t, MAX_TOLERANCE_SECONDS)
}

fn verify(p: &str, v: &VerifyConfig) -> Result<(), ConfigError> {
    let f = format!("{p}.verify.secret");
    match v {
        VerifyConfig::None => Ok(()),
        VerifyConfig::Github(x) | VerifyConfig::Shopify(x) => secrets(&f, &x.secret, false),
        VerifyConfig::Stripe(x) | VerifyConfig::Slack(x) => {
            secrets(&f, &x.secret, false)?;
            tolerance(
                &format!("{p}.verify.tolerance_seconds"),
                x.tolerance_seconds,
            )
        }
        VerifyConfig::StandardWebhooks(x) => {
            secrets(&f, &x.secret, true)?;
            tolerance(
                &format!("{p}.verify.tolerance_seconds"),
                x.tolerance_seconds,
            )
        }
        VerifyConfig::Hmac(h) => hmac(p, h),
    }
}

fn hmac(p: &str, h: &HmacVerify) -> Result<(), ConfigError> {
    let v = format!("{p}.verify");
    secrets(
        &format!("{v}.secret"),
        &h.secret,
        h.secret_decode == SecretDecode::WhsecBase64,
    )?;
    if h.secret_decode == SecretDecode::WhsecBase64 {
        for (i, s) in h.secret.iter().enumerate() {
            if !s.starts_with("whsec_") {
                return Err(err(
                    format!("{v}.secret[{i}]"),
                    "secret_decode: whsec_base64 needs secrets starting with whsec_",
                ));
            }
        }
    }
    if !valid_header_name(&h.signature_header) {
        return Err(err(format!("{v}.signature_header"), "is not a header name"));
    }
    let tokens = signed_tokens(&h.signed).map_err(|e| err(format!("{v}.signed"), e))?;
    let has_ts_source = h.timestamp_header.is_some() || h.parse == SigParse::CsvPairs;
    if tokens.iter().any(|t| t == "ts") && !has_ts_source {
        return Err(err(
            format!("{v}.signed"),
            "uses {ts} but there is no timestamp: set timestamp_header, or parse: csv_pairs with a t= pair",
        ));
    }
    if !tokens.iter().any(|t| t == "body") {
        return Err(err(format!("{v}.signed"), "must include {body}"));
    }
    for t in &tokens {
        if let Some(name) = t.strip_prefix("header:")
            && !valid_header_name(name)
        {
            return Err(err(
                format!("{v}.signed"),
                "a {header:<name>} token names no valid header name".to_string(),
            ));
        }
    }
    match h.parse {
        SigParse::CsvPairs if h.sig_key.as_deref().is_none_or(str::is_empty) => {
            return Err(err(
                format!("{v}.sig_key"),
                "is required with parse: csv_pairs",
            ));
        }
        SigParse::SpaceVersions if h.version.as_deref().is_none_or(str::is_empty) => {
            return Err(err(
                format!("{v}.version"),
                "is required with parse: space_versions",
            ));
        }
        _ => {}
    }
    if let Some(th) = &h.timestamp_header
        && !valid_header_name(th)
    {
        return Err(err(
            format!("{v}.timestamp_header"),
            "is not a header name (letters, digits and !#$%&'*+-.^_`|~ only)",
        ));
    }
    if tokens.iter().any(|t| t == "ts") && h.tolerance_seconds.is_none() {
        return Err(err(
            format!("{v}.tolerance_seconds"),
            format!(
                "is required when signed uses {{ts}}: without a window a captured request \
                 verifies forever (at most {MAX_TOLERANCE_SECONDS})"
            ),
        ));
    }
    if let Some(t) = h.tolerance_seconds {
        tolerance(&format!("{v}.tolerance_seconds"), t)?;
        if !has_ts_source {
            return Err(err(
                format!("{v}.tolerance_seconds"),
                "needs a timestamp (timestamp_header or csv_pairs)",
            ));
        }
    }
    Ok(())
}

/// The `{...}` tokens of a signed-string template. Two tokens with no literal text between
/// them (`{header:x}{body}`) are refused: bytes could move from one value to the other and
/// the signature would still match. Messages never quote the template.
pub fn signed_tokens(tpl: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut rest = tpl;
    while let Some(start) = rest.find('{') {
        let Some(end) = rest[start..].find('}') else {
            return Err("a `{` without a closing `}`".to_string());
        };
        if start == 0 && !out.is_empty() {
            return Err(
                "has two tokens with no literal text between them: the boundary between \
                 their values is ambiguous (put a separator such as `.` between them)"
                    .to_string(),
            );
        }
        let tok = &rest[start + 1..start + end];
        if tok != "body" && tok != "ts" && !tok.starts_with("header:") {
            return Err("unknown token (expected {body}, {ts} or {header:<name>})".to_string());
        }
        out.push(tok.to_string());
        rest = &rest[start + end + 1..];
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sinks::*;

    fn with_source(s: SourceConfig) -> Config {
        let mut c = Config::default();
        c.sources.insert("s".into(), s);
        c
    }

    fn log_source() -> SourceConfig {
        SourceConfig::with_sinks(vec![SinkConfig::Log(LogSinkConfig::default())])
    }

    #[test]
    fn a_metadata_token_goes_to_google_or_a_listed_host_only() {
        use crate::{GooglePubsubSinkConfig, PubsubAuth, SecretUrl};
        let with = |endpoint: Option<&str>, auth: PubsubAuth, hosts: &[&str]| {
            let mut ps = GooglePubsubSinkConfig::new("proj", "topic");
            ps.auth = auth;
            ps.endpoint = endpoint.map(SecretUrl::new);
            if auth == PubsubAuth::Token {
                ps.token = Some(crate::Secret::new("t0ken"));
            }
            let mut c = with_source(SourceConfig::with_sinks(vec![SinkConfig::GooglePubsub(ps)]));
            c.egress.metadata_token_hosts = hosts.iter().map(|h| h.to_string()).collect();
            validate(&c)
        };
        let m = PubsubAuth::Metadata;
        with(None, m, &[]).unwrap();
        with(Some("https://pubsub.googleapis.com"), m, &[]).unwrap();
        with(Some("https://europe-west1-pubsub.googleapis.com"), m, &[]).unwrap();
        for bad in [
            "https://collector.example.com",
            "http://pubsub.googleapis.com",
            "https://googleapis.com.example.com",
            "https://pubsub.googleapis.com.evil.test",
        ] {
            let e = with(Some(bad), m, &[]).unwrap_err();
            assert_eq!(
                e.field.as_deref(),
                Some("sources.s.sinks[0].endpoint"),
                "{bad}"
            );
            assert!(!e.to_string().contains("example.com") && !e.to_string().contains("evil"));
        }
        with(
            Some("https://psc.example.internal"),
            m,
            &["psc.example.internal"],
        )
        .unwrap();
        with(
            Some("https://collector.example.com"),
            PubsubAuth::Token,
            &[],
        )
        .unwrap();
        // The emulator on loopback: refused by the default egress policy (the field and the
        // class named, not the address), allowed with egress.allow_loopback.
        let e = with(Some("http://127.0.0.1:8085"), PubsubAuth::None, &[]).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("sources.s.sinks[0].endpoint"));
        assert!(e.message.contains("loopback") && !e.to_string().contains("127.0.0.1"));
        let mut ps = GooglePubsubSinkConfig::new("proj", "topic");
        ps.auth = PubsubAuth::None;
        ps.endpoint = Some(SecretUrl::new("http://127.0.0.1:8085"));
        let mut c = with_source(SourceConfig::with_sinks(vec![SinkConfig::GooglePubsub(ps)]));
        c.egress.allow_loopback = true;
        validate(&c).unwrap();
        let e = with(None, m, &["https://x"]).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("egress.metadata_token_hosts[0]"));
    }

    #[test]
    fn broker_addresses_written_as_refused_literals_are_refused_by_field_and_class() {
        use crate::{
            GooglePubsubSinkConfig, KafkaSinkConfig, NatsSinkConfig, PubsubAuth,
            RabbitmqSinkConfig, RedisSinkConfig, SecretUrl, SqsSinkConfig,
        };
        let check = |sink: SinkConfig, egress: EgressConfig| {
            let mut c = with_source(SourceConfig::with_sinks(vec![sink]));
            c.egress = egress;
            validate(&c)
        };
        let kafka = |b: &[&str]| {
            SinkConfig::Kafka(KafkaSinkConfig::new(
                b.iter().map(|s| s.to_string()).collect(),
                "hooks",
            ))
        };
        let mut sqs = SqsSinkConfig::new("https://sqs.us-east-1.amazonaws.com/1/q");
        sqs.endpoint = Some(SecretUrl::new("http://[fd00:ec2::254]:4566"));
        let mut pubsub = GooglePubsubSinkConfig::new("proj", "topic");
        pubsub.auth = PubsubAuth::None;
        pubsub.endpoint = Some(SecretUrl::new("http://169.254.169.254"));
        let cases = [
            (
                kafka(&["kafka.example:9092", "127.0.0.1:9092"]),
                "brokers[1]",
                "loopback",
            ),
            (
                SinkConfig::Rabbitmq(RabbitmqSinkConfig::new(
                    "amqp://guest:s3cret@10.1.2.3:5672/%2f",
                    "ex",
                )),
                "url",
                "private",
            ),
            (
                SinkConfig::Nats(NatsSinkConfig::new(vec!["nats://[::1]:4222".into()], "a.b")),
                "servers[0]",
                "loopback",
            ),
            (
                SinkConfig::Redis(RedisSinkConfig::new("redis://:s3cret@192.168.0.9/0", "c")),
                "url",
                "private",
            ),
            (SinkConfig::Sqs(sqs), "endpoint", "private"),
            (SinkConfig::GooglePubsub(pubsub), "endpoint", "link_local"),
            (kafka(&["0.0.0.0:9092"]), "brokers[0]", "not_unicast"),
        ];
        for (sink, field, class) in cases {
            let e = check(sink.clone(), EgressConfig::default()).unwrap_err();
            assert_eq!(
                e.field.as_deref(),
                Some(format!("sources.s.sinks[0].{field}").as_str()),
                "{e}"
            );
            let text = e.to_string();
            assert!(text.contains(&format!("({class})")), "{text}");
            for value in [
                "127.0.0.1",
                "10.1.2.3",
                "::1",
                "192.168",
                "fd00",
                "169.254",
                "s3cret",
            ] {
                assert!(!text.contains(value), "{text} shows {value}");
            }
            // The flag of its class (or a CIDR covering it) lets the same config load.
            let open = EgressConfig {
                allow_loopback: class == "loopback",
                allow_private: class == "private",
                allow_link_local: class == "link_local",
                allow_cidrs: if class == "not_unicast" {
                    vec!["0.0.0.0/32".into()]
                } else {
                    vec![]
                },
                ..Default::default()
            };
            check(sink.clone(), open).unwrap();
            // Another class's flag does not.
            let other = EgressConfig {
                allow_loopback: class != "loopback",
                allow_private: class != "private",
                allow_link_local: class != "link_local",
                ..Default::default()
            };
            assert!(check(sink, other).is_err(), "{field} {class}");
        }
        // A name is not resolved at load: the sink checks what it resolves to on each connect.
        check(kafka(&["localhost:9092"]), EgressConfig::default()).unwrap();
        check(
            SinkConfig::Redis(RedisSinkConfig::new("redis://redis.internal:6379/0", "c")),
            EgressConfig::default(),
        )
        .unwrap();
    }

    #[test]
    fn defaults_are_valid() {
        validate(&Config::default()).unwrap();
        validate(&with_source(log_source())).unwrap();
    }

    #[test]
    fn empty_secret_is_refused() {
        let mut s = log_source();
        s.verify = VerifyConfig::Github(Preset {
            secret: Secrets(vec!["new".into(), "".into()]),
        });
        let e = validate(&with_source(s)).unwrap_err();
        assert_eq!(
            e.field.as_deref(),
            Some("sources.s.verify.secret[1]"),
            "{e}"
        );
    }

    #[test]
    fn nine_secrets_are_refused() {
        let mut s = log_source();
        s.verify = VerifyConfig::Github(Preset {
            secret: Secrets(vec!["k".into(); 9]),
        });
        assert!(
            validate(&with_source(s))
                .unwrap_err()
                .message
                .contains("at most 8")
        );
    }

    #[test]
    fn sink_names_name_every_sink_once_in_plain_text() {
        let mut s = log_source();
        s.sink_names = vec!["orders".into()];
        validate(&with_source(s.clone())).unwrap();
        s.sink_names = vec!["a".into(), "b".into()];
        let e = validate(&with_source(s.clone())).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("sources.s.sink_names"));
        assert!(
            e.message.contains("each of the 1 sinks (got 2 names)"),
            "{e}"
        );
        for bad in [String::new(), "x".repeat(254), "a\nb".into()] {
            s.sink_names = vec![bad];
            let e = validate(&with_source(s.clone())).unwrap_err();
            assert_eq!(e.field.as_deref(), Some("sources.s.sink_names[0]"));
        }
    }

    #[test]
    fn quarantine_needs_a_scheme_and_sane_bounds() {
        let mut s = log_source();
        s.on_verify_failure = OnVerifyFailure::Quarantine;
        let e = validate(&with_source(s.clone())).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("sources.s.on_verify_failure"));
        assert!(e.message.contains("needs a verify scheme"), "{e}");
        s.verify = VerifyConfig::Github(Preset {
            secret: Secrets::one("k"),
        });
        let mut c = with_source(s);
        validate(&c).unwrap();
        assert_eq!(c.quarantine, crate::QuarantineConfig::default());
        // The section's own bounds (`quarantine.rs`) are part of the whole config's.
        c.quarantine.rate = 0.0;
        let e = validate(&c).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("quarantine.rate"));
        c.quarantine.rate = 0.5;
        c.quarantine.max_bytes_per_source = Some(c.quarantine.max_bytes + 1);
        let e = validate(&c).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("quarantine.max_bytes_per_source"));
        c.quarantine.max_bytes_per_source = Some(1);
        validate(&c).unwrap();
    }

    #[test]
    fn unsigned_http_sink_is_refused() {
        let s = SourceConfig::with_sinks(vec![SinkConfig::Http(HttpSinkConfig::new(
            "https://x.test/h",
        ))]);
        let e = validate(&with_source(s)).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("sources.s.sinks[0].secret"));
        let mut h = HttpSinkConfig::new("https://x.test/h");
        h.secret = Some(Secrets::one("whsec_!!notbase64"));
        let e = validate(&with_source(SourceConfig::with_sinks(vec![
            SinkConfig::Http(h),
        ])))
        .unwrap_err();
        assert!(e.message.contains("base64"), "{e}");
    }

    #[test]
    fn shared_unverified_source_under_tenant_path_is_refused() {
        let mut c = with_source(log_source());
        c.http.routing = Routing::TenantPath;
        assert!(validate(&c).is_err());
        c.sources.get_mut("s").unwrap().trust_url_tenant = true;
        validate(&c).unwrap();
    }

    #[test]
    fn open_admin_off_loopback_is_refused() {
        let mut c = Config::default();
        c.admin.ip = "0.0.0.0".parse().unwrap();
        assert_eq!(
            validate(&c).unwrap_err().field.as_deref(),
            Some("admin.tokens")
        );
    }

    #[test]
    fn hmac_descriptor_rules() {
        let mut h = HmacVerify {
            secret: Secrets::one("k"),
            signature_header: "X-Sig".into(),
            signed: "{ts}.{body}".into(),
            hash: HmacHash::Sha256,
            encoding: SigEncoding::Hex,
            sig_prefix: None,
            parse: SigParse::Whole,
            sig_key: None,
            version: None,
            timestamp_header: None,
            tolerance_seconds: None,
            secret_decode: SecretDecode::Raw,
        };
        let mut s = log_source();
        s.verify = VerifyConfig::Hmac(h.clone());
        assert!(
            validate(&with_source(s.clone()))
                .unwrap_err()
                .message
                .contains("{ts}")
        );
        h.timestamp_header = Some("X-Ts".into());
        s.verify = VerifyConfig::Hmac(h.clone());
        let e = validate(&with_source(s.clone())).unwrap_err();
        assert_eq!(
            e.field.as_deref(),
            Some("sources.s.verify.tolerance_seconds")
        );
        h.tolerance_seconds = Some(MAX_TOLERANCE_SECONDS + 1);
        s.verify = VerifyConfig::Hmac(h.clone());
        let e = validate(&with_source(s.clone())).unwrap_err();
        assert!(
            e.to_string()
                .contains("sources.s.verify.tolerance_seconds must be <= 3600")
        );
        h.tolerance_seconds = Some(300);
        s.verify = VerifyConfig::Hmac(h.clone());
        validate(&with_source(s.clone())).unwrap();
        for adjacent in [
            "{header:x-id}{body}",
            "{ts}.{body}{header:x-id}",
            "{body}{body}",
        ] {
            h.signed = adjacent.into();
            s.verify = VerifyConfig::Hmac(h.clone());
            let e = validate(&with_source(s.clone())).unwrap_err();
            assert_eq!(
                e.field.as_deref(),
                Some("sources.s.verify.signed"),
                "{adjacent}"
            );
            assert!(e.message.contains("ambiguous"), "{e}");
            assert!(!e.to_string().contains("x-id"), "{e}");
        }
        h.signed = "{header:x-id}.{body}".into();
        s.verify = VerifyConfig::Hmac(h.clone());
        validate(&with_source(s.clone())).unwrap();
        h.signed = "{bogus}".into();
        s.verify = VerifyConfig::Hmac(h);
        assert!(
            validate(&with_source(s))
                .unwrap_err()
                .message
                .contains("unknown token")
        );
    }

    #[test]
    fn ids_and_headers() {
        assert!(valid_id("acme_1-x"));
        assert!(!valid_id(""));
        assert!(!valid_id("a.b"));
        assert!(!valid_id(&"a".repeat(65)));
        assert!(valid_header_name("X-Hub-Signature-256"));
        assert!(!valid_header_name("bad header"));
    }
}
