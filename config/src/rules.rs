//! The primitives every validation uses: the error constructor, range checks, and the shapes
//! of ids, header names, dot paths, CIDRs and URLs. Every message names the field and the
//! constraint, in the form `<field> must be <constraint>, got <value>` for numbers, and never
//! quotes a string value (a Secret may fill it).
//!
//! A leaf: it imports only `error`, so each section (`section/*.rs`), each sink
//! (`sinks/*.rs`), the egress policy and the cross-section rules (`validate.rs`) can use it
//! without reaching into each other.

use std::net::IpAddr;

use crate::error::ConfigError;

/// A refusal that names its field: `<field>: <msg>`.
pub(crate) fn err(field: impl Into<String>, msg: impl Into<String>) -> ConfigError {
    ConfigError::field(field, msg)
}

/// `<field> must be >= <min>, got <v>`.
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

/// `<field> must be <= <max>, got <v>`.
pub(crate) fn at_most<T: PartialOrd + std::fmt::Display>(
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

/// `<field>: must be <lo>..=<hi>, got <v>`.
/// A reader's `tenants` at `path`: absent (every tenant), or at least one tenant id.
pub(crate) fn tenant_list(path: &str, tenants: Option<&[String]>) -> Result<(), ConfigError> {
    let Some(tenants) = tenants else {
        return Ok(());
    };
    if tenants.is_empty() {
        return Err(err(
            path,
            "must name at least one tenant (leave it out for every tenant)",
        ));
    }
    if let Some(j) = tenants.iter().position(|x| !valid_id(x)) {
        return Err(err(
            format!("{path}[{j}]"),
            "is not a tenant id ([A-Za-z0-9_-]{1,64})",
        ));
    }
    Ok(())
}

pub(crate) fn in_range(field: &str, v: u64, lo: u64, hi: u64) -> Result<(), ConfigError> {
    if !(lo..=hi).contains(&v) {
        return Err(err(field, format!("must be {lo}..={hi}, got {v}")));
    }
    Ok(())
}

/// Tenant and source ids: `[A-Za-z0-9_-]{1,64}`.
pub fn valid_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A map keyed by tenant (`rate_limits.tenants`, `dispatch.tenants.overrides`): `field` is the
/// entry's path, which names the key.
pub(crate) fn tenant_key(field: &str, tenant: &str) -> Result<(), ConfigError> {
    if !valid_id(tenant) {
        return Err(err(field, "tenant id must match [A-Za-z0-9_-]{1,64}"));
    }
    Ok(())
}

/// An HTTP header name (RFC 9110 token).
pub fn valid_header_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// A key naming a request header (`dedupe.header`, `forward_headers[i]`, ...).
pub(crate) fn header_name(field: impl Into<String>, name: &str) -> Result<(), ConfigError> {
    if !valid_header_name(name) {
        return Err(err(
            field,
            "is not a header name (letters, digits and !#$%&'*+-.^_`|~ only)",
        ));
    }
    Ok(())
}

/// A key naming a field of the JSON body by its dot path (`data.object.id`).
pub(crate) fn dot_path(field: impl Into<String>, path: &str) -> Result<(), ConfigError> {
    if path.is_empty() || path.split('.').any(str::is_empty) {
        return Err(err(field, "must be a dot path like data.id"));
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

/// A URL with one of `schemes` and a host. Value-free messages (a Secret may fill the URL):
/// the parse error's text is the url crate's fixed wording, never the input.
pub(crate) fn url_with_scheme(
    field: &str,
    raw: &str,
    schemes: &[&str],
) -> Result<url::Url, ConfigError> {
    let u = url::Url::parse(raw).map_err(|e| err(field, format!("is not a URL ({e})")))?;
    if !schemes.contains(&u.scheme()) {
        return Err(err(
            field,
            format!("must use one of the schemes {}", schemes.join(", ")),
        ));
    }
    if u.host().is_none() {
        return Err(err(field, "must name a host"));
    }
    Ok(u)
}

#[cfg(test)]
mod tests {
    use super::*;

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
