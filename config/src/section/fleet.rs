//! `fleet`: the pods of one Gateway as one dedupe domain. Every dedupe key has one owner among
//! `members` (rendezvous hashing over the member names, the gateway's `fleet` module); a pod
//! that receives a keyed hook it does not own forwards the commit to the owner over the fleet
//! listener (HTTP/2, mutual TLS with the Gateway's CA) and relays its answer. `previous` and
//! `handover_until` describe the membership before the last scale: until then, a key whose
//! owner moved is looked up at its previous owner first. Under the operator every field is
//! rendered; by hand, every pod gets the same `members` and its own `node.instance`.
//!
//! Imports only the leaves (`error`, `rules`).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use crate::error::ConfigError;
use crate::rules::{err, in_range};

/// What a pod does when a key's owner cannot be reached.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum FleetDedupe {
    /// `503 owner_unavailable` + `Retry-After`: never a local commit that could become a
    /// second hook.
    #[default]
    Strict,
    /// Commit locally and count it (`ankusa_fleet_local_fallback_total`): available, at the
    /// price of a possible second hook for that event.
    BestEffort,
}

/// The fleet listener's certificate (also its client certificate) and the CA both sides
/// check the other's against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct FleetTls {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    /// The Gateway's CA (PEM): a peer's certificate must chain to it.
    pub ca_file: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct FleetConfig {
    #[serde(default = "default_ip")]
    pub ip: IpAddr,
    #[serde(default = "default_port")]
    pub port: u16,
    pub tls: FleetTls,
    /// Every pod of the fleet, this one included: `node.instance` → its fleet URL
    /// (`https://host:port`).
    pub members: BTreeMap<String, String>,
    /// Member names before the last membership change (empty: no handover).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub previous: Vec<String>,
    /// Unix seconds until which `previous` owners are consulted (0: no handover).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub handover_until: u64,
    #[serde(default)]
    pub dedupe: FleetDedupe,
    /// Forwarded commits in flight from this pod at once; past it, `503 owner_unavailable`.
    #[serde(default = "default_max_in_flight")]
    pub max_in_flight: u32,
    /// Deadline of one forward (connect, the owner's commit and its answer).
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// `Retry-After` (seconds) of a `503 owner_unavailable`.
    #[serde(default = "default_retry_after_s")]
    pub retry_after_s: u32,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn default_ip() -> IpAddr {
    IpAddr::from([0, 0, 0, 0])
}

fn default_port() -> u16 {
    4004
}

fn default_max_in_flight() -> u32 {
    1024
}

fn default_timeout_ms() -> u64 {
    5_000
}

fn default_retry_after_s() -> u32 {
    2
}

/// Largest fleet: the owner of a key is computed over every member on every keyed request.
pub const MAX_FLEET_MEMBERS: usize = 256;

impl FleetConfig {
    pub(crate) fn validate(&self, path: &str, instance: &str) -> Result<(), ConfigError> {
        let f = |key: &str| format!("{path}.{key}");
        if self.members.is_empty() || self.members.len() > MAX_FLEET_MEMBERS {
            return Err(err(
                f("members"),
                format!("must name 1..={MAX_FLEET_MEMBERS} pods"),
            ));
        }
        for (name, url) in &self.members {
            let field = format!("{path}.members.{name}");
            if !member_name(name) {
                return Err(err(&field, "member name must match [A-Za-z0-9._-]{1,253}"));
            }
            if !fleet_url(url) {
                return Err(err(
                    &field,
                    "must be an https://host[:port] URL with no path, query or credentials",
                ));
            }
        }
        if !self.members.contains_key(instance) {
            return Err(err(f("members"), "must include this pod (node.instance)"));
        }
        for (i, name) in self.previous.iter().enumerate() {
            if !member_name(name) {
                return Err(err(
                    format!("{path}.previous[{i}]"),
                    "member name must match [A-Za-z0-9._-]{1,253}",
                ));
            }
        }
        if self.previous.len() > MAX_FLEET_MEMBERS {
            return Err(err(
                f("previous"),
                format!("must name at most {MAX_FLEET_MEMBERS} pods"),
            ));
        }
        if self.handover_until != 0 && self.previous.is_empty() {
            return Err(err(f("previous"), "is required with handover_until"));
        }
        if self.port == 0 {
            return Err(err(f("port"), "must be 1..=65535, got 0"));
        }
        in_range(&f("max_in_flight"), self.max_in_flight.into(), 1, 65_536)?;
        in_range(&f("timeout_ms"), self.timeout_ms, 100, 60_000)?;
        in_range(&f("retry_after_s"), self.retry_after_s.into(), 1, 3600)
    }

    /// `previous`, while the handover window is open at `now_s` (unix seconds).
    pub fn handover(&self, now_s: u64) -> Option<&[String]> {
        (!self.previous.is_empty() && now_s < self.handover_until).then_some(&self.previous)
    }
}

fn member_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

/// `https://host[:port]`: a host of DNS characters (or an IPv4 address, or a bracketed IPv6
/// one), nothing after the authority but an optional `/`.
fn fleet_url(s: &str) -> bool {
    let Some(rest) = s.strip_prefix("https://") else {
        return false;
    };
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.is_empty() || authority.len() > 300 {
        return false;
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let Some((h, after)) = v6.split_once(']') else {
            return false;
        };
        if h.parse::<std::net::Ipv6Addr>().is_err() {
            return false;
        }
        (h, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok_and(|p| p != 0));
    let host_ok = authority.starts_with('[')
        || (!host.is_empty()
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-.".contains(&b)));
    port_ok && host_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> FleetConfig {
        FleetConfig {
            ip: default_ip(),
            port: 4004,
            tls: FleetTls {
                cert_file: "/tls/tls.crt".into(),
                key_file: "/tls/tls.key".into(),
                ca_file: "/tls/ca.crt".into(),
            },
            members: [
                (
                    "gw-0".to_string(),
                    "https://gw-0.gw-pods.ns.svc:4004".to_string(),
                ),
                ("gw-1".to_string(), "https://127.0.0.1:4104".to_string()),
            ]
            .into(),
            previous: Vec::new(),
            handover_until: 0,
            dedupe: FleetDedupe::Strict,
            max_in_flight: 16,
            timeout_ms: 1000,
            retry_after_s: 2,
        }
    }

    #[test]
    fn a_valid_fleet_passes() {
        cfg().validate("fleet", "gw-0").unwrap();
    }

    #[test]
    fn this_pod_must_be_a_member() {
        let e = cfg().validate("fleet", "gw-9").unwrap_err();
        assert_eq!(e.field.as_deref(), Some("fleet.members"));
    }

    #[test]
    fn member_urls_are_https_authorities_only() {
        for bad in [
            "http://gw-1:4004",
            "https://user:pw@gw-1:4004",
            "https://gw-1:4004/path",
            "https://gw-1:0",
            "https://:4004",
            "https://gw 1:4004",
            "https://[::1:4004",
        ] {
            let mut c = cfg();
            c.members.insert("gw-1".into(), bad.into());
            let e = c.validate("fleet", "gw-0").unwrap_err();
            assert_eq!(e.field.as_deref(), Some("fleet.members.gw-1"), "{bad}");
            assert!(
                !e.to_string().contains(bad),
                "an error never echoes the value"
            );
        }
        let mut c = cfg();
        c.members.insert("gw-1".into(), "https://[::1]:4004".into());
        c.validate("fleet", "gw-0").unwrap();
    }

    #[test]
    fn handover_needs_previous_and_ends() {
        let mut c = cfg();
        c.handover_until = 100;
        let e = c.validate("fleet", "gw-0").unwrap_err();
        assert_eq!(e.field.as_deref(), Some("fleet.previous"));
        c.previous = vec!["gw-0".into()];
        c.validate("fleet", "gw-0").unwrap();
        assert!(c.handover(99).is_some());
        assert!(c.handover(100).is_none());
    }

    #[test]
    fn bounds_name_their_field() {
        let mut c = cfg();
        c.max_in_flight = 0;
        let e = c.validate("fleet", "gw-0").unwrap_err();
        assert_eq!(e.field.as_deref(), Some("fleet.max_in_flight"));
    }
}
