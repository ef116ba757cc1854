//! The egress address policy: which IP addresses a sink may connect to, and where each sink
//! connects. One classifier (the IANA special-purpose registries) serves every sink: the HTTP
//! sink checks the address it resolved on each attempt, the broker and queue sinks check every
//! address their brokers' names resolve to on each connect (`ankusa-sinks`' `egress.rs`), and
//! config validation refuses a broker written as a literal address in a refused range, naming
//! the field and the range, never the address.
//!
//! This module is pure (no resolver, no I/O), so the operator, which links no sink, validates
//! with the same rules the gateway enforces. It imports the `egress` section's settings and
//! `rules`; the sink configs (`sinks/`) import it for `EgressTarget`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::Serialize;

use crate::rules::{cidr_contains, parse_cidr};
use crate::section::egress::EgressConfig;

/// Why a destination was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Denied {
    /// An `http://` URL without `egress.allow_http` (HTTP sinks only).
    Scheme,
    Loopback,
    Private,
    LinkLocal,
    /// Unspecified, multicast, broadcast, documentation or otherwise not a unicast host.
    NotUnicast,
}

impl Denied {
    /// The reason class as it appears in delivery errors (`egress_denied: <class>`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Denied::Scheme => "http_not_allowed",
            Denied::Loopback => "loopback",
            Denied::Private => "private",
            Denied::LinkLocal => "link_local",
            Denied::NotUnicast => "not_unicast",
        }
    }

    /// The `egress` key that allows this class, if one does (`not_unicast` only passes
    /// through `egress.allow_cidrs`).
    pub fn allowance(&self) -> Option<&'static str> {
        match self {
            Denied::Scheme => Some("egress.allow_http"),
            Denied::Loopback => Some("egress.allow_loopback"),
            Denied::Private => Some("egress.allow_private"),
            Denied::LinkLocal => Some("egress.allow_link_local"),
            Denied::NotUnicast => None,
        }
    }

    /// A config error's message for an address of this class (the field names the address).
    pub fn refusal(&self) -> String {
        let what = match self {
            Denied::Scheme => "is an http:// URL",
            Denied::Loopback => "is a loopback address",
            Denied::Private => "is a private address",
            Denied::LinkLocal => "is a link-local address (the cloud metadata address is one)",
            Denied::NotUnicast => {
                "is not a unicast host address (unspecified, multicast, reserved or documentation)"
            }
        };
        match self.allowance() {
            Some(key) => format!(
                "{what} ({}), which the egress policy refuses: set {key}: true, or cover it with \
                 egress.allow_cidrs",
                self.as_str()
            ),
            None => format!(
                "{what} ({}), which the egress policy refuses unless egress.allow_cidrs covers it",
                self.as_str()
            ),
        }
    }
}

impl std::fmt::Display for Denied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The address half of `egress`: which ranges may be reached. Serialises to its allowances,
/// so the sinks can key shared connections by the policy that admitted them (a reload that
/// narrows the policy opens, and checks, new ones).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AddressPolicy {
    allow_loopback: bool,
    allow_private: bool,
    allow_link_local: bool,
    allow: Vec<(IpAddr, u8)>,
}

impl AddressPolicy {
    /// The policy of `cfg`. A CIDR that does not parse is skipped here; validation refuses it
    /// (`egress.allow_cidrs[i]`) before any sink is built.
    pub fn new(cfg: &EgressConfig) -> AddressPolicy {
        AddressPolicy {
            allow_loopback: cfg.allow_loopback,
            allow_private: cfg.allow_private,
            allow_link_local: cfg.allow_link_local,
            allow: cfg
                .allow_cidrs
                .iter()
                .filter_map(|c| parse_cidr(c))
                .collect(),
        }
    }

    /// Whether one address may be reached.
    pub fn check_ip(&self, ip: IpAddr) -> Result<(), Denied> {
        let ip = canonical(ip);
        if self
            .allow
            .iter()
            .any(|(net, len)| cidr_contains(*net, *len, ip))
        {
            return Ok(());
        }
        match classify(ip) {
            None => Ok(()),
            Some(Denied::Loopback) if self.allow_loopback => Ok(()),
            Some(Denied::Private) if self.allow_private => Ok(()),
            Some(Denied::LinkLocal) if self.allow_link_local => Ok(()),
            Some(d) => Err(d),
        }
    }
}

impl EgressConfig {
    pub fn address_policy(&self) -> AddressPolicy {
        AddressPolicy::new(self)
    }
}

/// Where a sink connects: one broker entry or endpoint. `field` is relative to the sink
/// (`brokers[0]`, `url`, `endpoint`); `host` is a name or an IP literal (without brackets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressTarget {
    pub field: String,
    pub host: String,
    pub port: u16,
}

impl EgressTarget {
    /// The address when `host` is written as an IP literal (checked without resolving).
    pub fn literal_ip(&self) -> Option<IpAddr> {
        self.host.parse().ok()
    }

    /// A `host:port` entry, optionally `scheme://`-prefixed (Kafka brokers, NATS servers);
    /// `None` when it has no host. Any userinfo is dropped, never kept.
    pub(crate) fn from_entry(field: String, entry: &str, default_port: u16) -> Option<Self> {
        let rest = entry.split_once("://").map_or(entry, |(_, r)| r);
        let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
        let rest = rest.trim_end_matches('/');
        let (host, port) = split_host_port(rest, default_port)?;
        (!host.is_empty()).then(|| EgressTarget {
            field,
            host: host.to_ascii_lowercase(),
            port,
        })
    }

    /// A URL's host and port (`default_port` when the URL has none and its scheme has no
    /// known default); `None` when it does not parse or has no host.
    pub(crate) fn from_url(field: String, raw: &str, default_port: u16) -> Option<Self> {
        let u = url::Url::parse(raw).ok()?;
        let host = u.host_str()?.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return None;
        }
        Some(EgressTarget {
            field,
            host: host.to_ascii_lowercase(),
            port: u.port_or_known_default().unwrap_or(default_port),
        })
    }
}

/// `host:port`, `[v6]:port`, `host`, `[v6]` or a bare IPv6 literal.
fn split_host_port(s: &str, default_port: u16) -> Option<(&str, u16)> {
    if let Some(r) = s.strip_prefix('[') {
        let (host, after) = r.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None if after.is_empty() => default_port,
            None => return None,
        };
        return Some((host, port));
    }
    match s.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => Some((host, port.parse().ok()?)),
        _ => Some((s, default_port)),
    }
}

/// An IPv4-mapped IPv6 address is judged as the IPv4 address it carries.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    }
}

/// The range an address belongs to, when it is not a globally reachable unicast address.
pub fn classify(ip: IpAddr) -> Option<Denied> {
    match ip {
        IpAddr::V4(a) => classify_v4(a),
        IpAddr::V6(a) => classify_v6(a),
    }
}

/// IPv4 per the IANA IPv4 Special-Purpose Address Registry: every block not globally
/// reachable is refused; of the globally reachable special blocks only the anycast services
/// (AS112 `192.31.196.0/24`, `192.175.48.0/24`, AMT `192.52.193.0/24`) pass.
fn classify_v4(a: Ipv4Addr) -> Option<Denied> {
    let o = a.octets();
    let n = u32::from(a);
    let within = |net: u32, len: u32| n & (u32::MAX << (32 - len)) == net;
    if o[0] == 127 {
        Some(Denied::Loopback)
    } else if o[0] == 10
        || within(0xac10_0000, 12) // 172.16/12
        || within(0xc0a8_0000, 16) // 192.168/16
        || within(0x6440_0000, 10) // 100.64/10, carrier-grade NAT
        || within(0xc612_0000, 15)
    // 198.18/15, benchmarking: used inside networks, routed nowhere
    {
        Some(Denied::Private)
    } else if within(0xa9fe_0000, 16) {
        // 169.254/16, the cloud metadata address 169.254.169.254 included.
        Some(Denied::LinkLocal)
    } else if o[0] == 0 // "this network"
        || within(0xc000_0000, 24) // 192.0.0/24, IETF protocol assignments
        || within(0xc000_0200, 24) // TEST-NET-1
        || within(0xc633_6400, 24) // TEST-NET-2
        || within(0xcb00_7100, 24) // TEST-NET-3
        || within(0xc058_6300, 24) // 192.88.99/24, the retired 6to4 relay anycast
        || o[0] >= 224
    // multicast 224/4, reserved 240/4, broadcast
    {
        Some(Denied::NotUnicast)
    } else {
        None
    }
}

/// IPv6 per the IANA IPv6 Special-Purpose Address Registry. Only global unicast (`2000::/3`)
/// outside the special blocks passes; addresses that carry an IPv4 address (NAT64's
/// `64:ff9b::/96`, IPv4-compatible `::a.b.c.d`, 6to4 `2002::/16`) are judged by the IPv4
/// address they reach as well.
fn classify_v6(a: Ipv6Addr) -> Option<Denied> {
    let n = u128::from(a);
    let within = |net: u128, len: u32| n & (u128::MAX << (128 - len)) == net;
    let s = a.segments();
    let embedded = |bits: u128| Ipv4Addr::from((bits & 0xffff_ffff) as u32);
    if a.is_loopback() {
        Some(Denied::Loopback)
    } else if a.is_unspecified() {
        Some(Denied::NotUnicast)
    } else if within(0, 96) {
        // IPv4-compatible (deprecated): never a host of its own.
        Some(classify_v4(embedded(n)).unwrap_or(Denied::NotUnicast))
    } else if within(0x0064_ff9b << 96, 96) {
        // NAT64, well-known prefix: a translator reaches the IPv4 address inside.
        classify_v4(embedded(n))
    } else if within(0x0064_ff9b_0001 << 80, 48) {
        // NAT64, local-use prefix: translated inside one network.
        Some(Denied::Private)
    } else if within(0x2002 << 112, 16) {
        // 6to4 (deprecated): the IPv4 address sits in bits 16..48.
        Some(classify_v4(embedded(n >> 80)).unwrap_or(Denied::NotUnicast))
    } else if (s[0] & 0xfe00) == 0xfc00 || (s[0] & 0xffc0) == 0xfec0 {
        // Unique local fc00::/7 (fd00:ec2::254, a cloud metadata address, included) and the
        // deprecated site-local fec0::/10.
        Some(Denied::Private)
    } else if (s[0] & 0xffc0) == 0xfe80 {
        Some(Denied::LinkLocal)
    } else if (s[0] & 0xe000) != 0x2000 // outside global unicast: multicast, discard-only
        // 100::/64, the dummy prefix 100:0:0:1::/64 and every unassigned block
        || within(0x2001 << 112, 23) // IETF protocol assignments: Teredo, benchmarking, ORCHID
        || within(0x2001_0db8 << 96, 32) // documentation
        || within(0x3fff << 112, 20) // documentation (RFC 9637)
        || within(0x5f00 << 112, 16)
    // segment routing SIDs
    {
        Some(Denied::NotUnicast)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(cfg: EgressConfig) -> AddressPolicy {
        AddressPolicy::new(&cfg)
    }

    #[test]
    fn denies_special_ranges_by_default() {
        let p = policy(EgressConfig::default());
        for (ip, why) in [
            ("127.0.0.1", Denied::Loopback),
            ("::1", Denied::Loopback),
            ("10.1.2.3", Denied::Private),
            ("172.16.0.1", Denied::Private),
            ("192.168.1.1", Denied::Private),
            ("100.64.0.1", Denied::Private),
            ("fd00:ec2::254", Denied::Private),
            ("169.254.169.254", Denied::LinkLocal),
            ("fe80::1", Denied::LinkLocal),
            ("0.0.0.0", Denied::NotUnicast),
            ("::ffff:127.0.0.1", Denied::Loopback),
            ("64:ff9b::a9fe:a9fe", Denied::LinkLocal),
            ("64:ff9b::10.0.0.1", Denied::Private),
            ("64:ff9b:1::1", Denied::Private),
            ("::127.0.0.1", Denied::Loopback),
            ("::8.8.8.8", Denied::NotUnicast),
            ("2002:7f00:1::", Denied::Loopback),
            ("2002:a9fe:a9fe::1", Denied::LinkLocal),
            ("2002:808:808::1", Denied::NotUnicast),
            ("fec0::1", Denied::Private),
            ("198.18.0.1", Denied::Private),
            ("192.0.0.8", Denied::NotUnicast),
            ("192.88.99.1", Denied::NotUnicast),
            ("2001::1", Denied::NotUnicast),
            ("3fff::1", Denied::NotUnicast),
            ("100::1", Denied::NotUnicast),
            ("ff02::1", Denied::NotUnicast),
        ] {
            assert_eq!(p.check_ip(ip.parse().unwrap()), Err(why), "{ip}");
        }
        assert_eq!(p.check_ip("93.184.216.34".parse().unwrap()), Ok(()));
        assert_eq!(
            p.check_ip("64:ff9b::93.184.216.34".parse().unwrap()),
            Ok(())
        );
        assert_eq!(p.check_ip("2606:2800:220:1::1".parse().unwrap()), Ok(()));
    }

    #[test]
    fn allowances_open_their_range_only() {
        let p = policy(EgressConfig {
            allow_loopback: true,
            ..Default::default()
        });
        assert_eq!(p.check_ip("127.0.0.1".parse().unwrap()), Ok(()));
        assert_eq!(p.check_ip("::1".parse().unwrap()), Ok(()));
        assert_eq!(
            p.check_ip("10.0.0.1".parse().unwrap()),
            Err(Denied::Private)
        );
        let p = policy(EgressConfig {
            allow_private: true,
            allow_link_local: true,
            ..Default::default()
        });
        assert_eq!(p.check_ip("10.0.0.1".parse().unwrap()), Ok(()));
        assert_eq!(p.check_ip("169.254.169.254".parse().unwrap()), Ok(()));
        assert_eq!(
            p.check_ip("127.0.0.1".parse().unwrap()),
            Err(Denied::Loopback)
        );
        let p = policy(EgressConfig {
            allow_cidrs: vec!["10.9.0.0/16".into(), "224.0.0.1".into()],
            ..Default::default()
        });
        assert_eq!(p.check_ip("10.9.3.4".parse().unwrap()), Ok(()));
        assert_eq!(p.check_ip("224.0.0.1".parse().unwrap()), Ok(()));
        assert_eq!(
            p.check_ip("10.8.3.4".parse().unwrap()),
            Err(Denied::Private)
        );
    }

    #[test]
    fn refusals_name_the_class_and_the_key_that_allows_it() {
        let m = Denied::Loopback.refusal();
        assert!(
            m.contains("(loopback)") && m.contains("egress.allow_loopback"),
            "{m}"
        );
        let m = Denied::NotUnicast.refusal();
        assert!(
            m.contains("not_unicast") && m.contains("egress.allow_cidrs"),
            "{m}"
        );
    }

    #[test]
    fn targets_from_entries_and_urls() {
        let t = |e: &str| EgressTarget::from_entry("brokers[0]".into(), e, 9092);
        let hp = |e: &str| t(e).map(|t| (t.host, t.port));
        assert_eq!(hp("k:9093"), Some(("k".into(), 9093)));
        assert_eq!(
            hp("tcp://K.example:9093/"),
            Some(("k.example".into(), 9093))
        );
        assert_eq!(hp("[::1]:9093"), Some(("::1".into(), 9093)));
        assert_eq!(hp("[fe80::1]"), Some(("fe80::1".into(), 9092)));
        assert_eq!(hp("nats://10.0.0.1"), Some(("10.0.0.1".into(), 9092)));
        assert_eq!(hp("user:pw@127.0.0.1:1"), Some(("127.0.0.1".into(), 1)));
        assert_eq!(hp("::1"), Some(("::1".into(), 9092)));
        assert_eq!(hp(":9092"), None);
        assert_eq!(
            t("127.0.0.1:9092").and_then(|t| t.literal_ip()),
            Some("127.0.0.1".parse().unwrap())
        );
        assert_eq!(t("kafka:9092").and_then(|t| t.literal_ip()), None);
        let u =
            |raw: &str| EgressTarget::from_url("url".into(), raw, 6379).map(|t| (t.host, t.port));
        assert_eq!(
            u("redis://:pw@127.0.0.1/0"),
            Some(("127.0.0.1".into(), 6379))
        );
        assert_eq!(u("amqp://u:p@[::1]:5673/%2f"), Some(("::1".into(), 5673)));
        assert_eq!(u("https://sqs.example"), Some(("sqs.example".into(), 443)));
        assert_eq!(u("not a url"), None);
    }
}

/// The classifier against the IANA special-purpose registries written out as data: for any
/// address, the most specific block containing it decides.
#[cfg(test)]
mod registry {
    use super::*;
    use proptest::prelude::*;

    use Denied::{LinkLocal as L, Loopback as O, NotUnicast as N, Private as P};

    /// (block, verdict); `None` is allowed. Embedding blocks are handled in `reference`.
    const V4: &[(&str, Option<Denied>)] = &[
        ("0.0.0.0/0", None),
        ("0.0.0.0/8", Some(N)),
        ("10.0.0.0/8", Some(P)),
        ("100.64.0.0/10", Some(P)),
        ("127.0.0.0/8", Some(O)),
        ("169.254.0.0/16", Some(L)),
        ("172.16.0.0/12", Some(P)),
        ("192.0.0.0/24", Some(N)),
        ("192.0.2.0/24", Some(N)),
        ("192.31.196.0/24", None),
        ("192.52.193.0/24", None),
        ("192.88.99.0/24", Some(N)),
        ("192.168.0.0/16", Some(P)),
        ("192.175.48.0/24", None),
        ("198.18.0.0/15", Some(P)),
        ("198.51.100.0/24", Some(N)),
        ("203.0.113.0/24", Some(N)),
        ("224.0.0.0/4", Some(N)),
        ("240.0.0.0/4", Some(N)),
        ("255.255.255.255/32", Some(N)),
    ];

    const V6: &[(&str, Option<Denied>)] = &[
        ("::/0", Some(N)),
        ("2000::/3", None),
        ("::1/128", Some(O)),
        ("::/128", Some(N)),
        ("64:ff9b:1::/48", Some(P)),
        ("100::/64", Some(N)),
        ("100:0:0:1::/64", Some(N)),
        ("2001::/23", Some(N)),
        ("2001::/32", Some(N)),
        ("2001:db8::/32", Some(N)),
        ("2620:4f:8000::/48", None),
        ("3fff::/20", Some(N)),
        ("5f00::/16", Some(N)),
        ("fc00::/7", Some(P)),
        ("fe80::/10", Some(L)),
        ("fec0::/10", Some(P)),
        ("ff00::/8", Some(N)),
    ];

    fn table_lookup(table: &[(&str, Option<Denied>)], ip: IpAddr) -> Option<Denied> {
        let mut best: Option<(u8, Option<Denied>)> = None;
        for (cidr, verdict) in table {
            let (net, len) = parse_cidr(cidr).expect("reference block parses");
            if cidr_contains(net, len, ip) && best.as_ref().is_none_or(|(l, _)| len >= *l) {
                best = Some((len, *verdict));
            }
        }
        best.and_then(|(_, v)| v)
    }

    fn reference(ip: IpAddr) -> Option<Denied> {
        match ip {
            IpAddr::V4(_) => table_lookup(V4, ip),
            IpAddr::V6(a) => {
                let n = u128::from(a);
                let v4 = |bits: u128| IpAddr::V4(Ipv4Addr::from((bits & 0xffff_ffff) as u32));
                if let Some(m) = a.to_ipv4_mapped() {
                    table_lookup(V4, IpAddr::V4(m))
                } else if n >> 32 == 0 && n > 1 {
                    Some(table_lookup(V4, v4(n)).unwrap_or(N))
                } else if n >> 32 == 0x0064_ff9b << 64 {
                    table_lookup(V4, v4(n))
                } else if n >> 112 == 0x2002 {
                    Some(table_lookup(V4, v4(n >> 80)).unwrap_or(N))
                } else {
                    table_lookup(V6, ip)
                }
            }
        }
    }

    /// Addresses drawn inside the registry's blocks (and at their edges) as often as anywhere.
    fn address() -> impl Strategy<Value = IpAddr> {
        let v4_blocks: Vec<(u32, u8)> = V4
            .iter()
            .filter_map(|(c, _)| match parse_cidr(c) {
                Some((IpAddr::V4(n), l)) => Some((u32::from(n), l)),
                _ => None,
            })
            .collect();
        let v6_blocks: Vec<(u128, u8)> = V6
            .iter()
            .map(|(c, _)| *c)
            .chain(["64:ff9b::/96", "2002::/16", "::/96", "::ffff:0:0/96"])
            .filter_map(|c| match parse_cidr(c) {
                Some((IpAddr::V6(n), l)) => Some((u128::from(n), l)),
                _ => None,
            })
            .collect();
        prop_oneof![
            any::<u32>().prop_map(|n| IpAddr::V4(Ipv4Addr::from(n))),
            any::<u128>().prop_map(|n| IpAddr::V6(Ipv6Addr::from(n))),
            (
                proptest::sample::select(v4_blocks),
                any::<u32>(),
                any::<bool>()
            )
                .prop_map(|((net, len), host, edge)| {
                    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
                    let host = if edge { host & 1 } else { host };
                    IpAddr::V4(Ipv4Addr::from(net | (host & !mask)))
                }),
            (
                proptest::sample::select(v6_blocks),
                any::<u128>(),
                any::<u32>()
            )
                .prop_map(|((net, len), host, v4)| {
                    let mask = if len == 0 {
                        0
                    } else {
                        u128::MAX << (128 - len)
                    };
                    // Half the time the host part is an IPv4 address in the low bits, so the
                    // embedding blocks carry interesting IPv4 addresses.
                    let host = if host & 1 == 0 { u128::from(v4) } else { host };
                    IpAddr::V6(Ipv6Addr::from(net | (host & !mask)))
                }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]
        #[test]
        fn classifier_matches_the_registry(ip in address()) {
            prop_assert_eq!(classify(canonical(ip)), reference(ip), "{}", ip);
        }
    }
}
