//! The egress policy of the HTTP sink. Every attempt resolves the destination and checks the
//! resolved address; the connection is then pinned to that address (the TLS name is still the
//! URL's host), so a name that rebinds to a denied address between attempts is refused.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use ankusa_config::{EgressConfig, cidr_contains as contains, parse_cidr};
use futures::future::BoxFuture;

/// Why a destination was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denied {
    Scheme,
    Loopback,
    Private,
    LinkLocal,
    /// Unspecified, multicast, broadcast, documentation or otherwise not a unicast host.
    NotUnicast,
}

impl Denied {
    pub fn as_str(&self) -> &'static str {
        match self {
            Denied::Scheme => "http_not_allowed",
            Denied::Loopback => "loopback",
            Denied::Private => "private",
            Denied::LinkLocal => "link_local",
            Denied::NotUnicast => "not_unicast",
        }
    }
}

/// Resolves host names; injectable so tests can make a name rebind.
pub trait Resolve: Send + Sync {
    fn resolve<'a>(
        &'a self,
        host: &'a str,
        port: u16,
    ) -> BoxFuture<'a, std::io::Result<Vec<SocketAddr>>>;
}

/// The system resolver (getaddrinfo on a blocking thread).
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve<'a>(
        &'a self,
        host: &'a str,
        port: u16,
    ) -> BoxFuture<'a, std::io::Result<Vec<SocketAddr>>> {
        Box::pin(async move { Ok(tokio::net::lookup_host((host, port)).await?.collect()) })
    }
}

#[derive(Clone)]
pub struct Policy {
    allow_http: bool,
    allow_loopback: bool,
    allow_private: bool,
    allow_link_local: bool,
    allow: Vec<(IpAddr, u8)>,
    resolver: Arc<dyn Resolve>,
}

impl Policy {
    pub fn new(cfg: &EgressConfig, resolver: Arc<dyn Resolve>) -> Policy {
        Policy {
            allow_http: cfg.allow_http,
            allow_loopback: cfg.allow_loopback,
            allow_private: cfg.allow_private,
            allow_link_local: cfg.allow_link_local,
            allow: cfg
                .allow_cidrs
                .iter()
                .filter_map(|c| parse_cidr(c))
                .collect(),
            resolver,
        }
    }

    pub fn check_scheme(&self, scheme: &str) -> Result<(), Denied> {
        match scheme {
            "https" => Ok(()),
            "http" if self.allow_http => Ok(()),
            _ => Err(Denied::Scheme),
        }
    }

    /// Whether one address may be reached.
    pub fn check_ip(&self, ip: IpAddr) -> Result<(), Denied> {
        let ip = canonical(ip);
        if self.allow.iter().any(|(net, len)| contains(*net, *len, ip)) {
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

    /// Resolves `host` and returns the first allowed address. `Ok(Err(denied))` means every
    /// address was refused (permanent); `Err` means the name did not resolve (transient).
    pub async fn pick(&self, host: &str, port: u16) -> std::io::Result<Result<SocketAddr, Denied>> {
        let trimmed = host.trim_start_matches('[').trim_end_matches(']');
        let addrs = match trimmed.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, port)],
            Err(_) => self.resolver.resolve(host, port).await?,
        };
        if addrs.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "name resolved to no address",
            ));
        }
        let mut first_denial = None;
        for a in addrs {
            match self.check_ip(a.ip()) {
                Ok(()) => return Ok(Ok(SocketAddr::new(canonical(a.ip()), a.port()))),
                Err(d) => {
                    first_denial.get_or_insert(d);
                }
            }
        }
        Ok(Err(first_denial.unwrap_or(Denied::NotUnicast)))
    }
}

/// An IPv4-mapped IPv6 address is judged as the IPv4 address it carries.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    }
}

fn classify(ip: IpAddr) -> Option<Denied> {
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
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn policy(cfg: EgressConfig) -> Policy {
        Policy::new(&cfg, Arc::new(SystemResolver))
    }

    #[test]
    fn denies_private_ranges_by_default() {
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
        assert_eq!(p.check_scheme("http"), Err(Denied::Scheme));
        assert_eq!(p.check_scheme("https"), Ok(()));
    }

    #[test]
    fn allowances_open_their_range_only() {
        let p = policy(EgressConfig {
            allow_loopback: true,
            allow_http: true,
            ..Default::default()
        });
        assert_eq!(p.check_ip("127.0.0.1".parse().unwrap()), Ok(()));
        assert_eq!(
            p.check_ip("10.0.0.1".parse().unwrap()),
            Err(Denied::Private)
        );
        assert_eq!(p.check_scheme("http"), Ok(()));
        let p = policy(EgressConfig {
            allow_cidrs: vec!["10.9.0.0/16".into()],
            ..Default::default()
        });
        assert_eq!(p.check_ip("10.9.3.4".parse().unwrap()), Ok(()));
        assert_eq!(
            p.check_ip("10.8.3.4".parse().unwrap()),
            Err(Denied::Private)
        );
    }

    /// Answers a public address first and a private one afterwards: a rebinding name.
    struct Rebinding(AtomicUsize);
    impl Resolve for Rebinding {
        fn resolve<'a>(
            &'a self,
            _: &'a str,
            port: u16,
        ) -> BoxFuture<'a, std::io::Result<Vec<SocketAddr>>> {
            let n = self.0.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                let ip: IpAddr = if n == 0 {
                    "93.184.216.34".parse().unwrap()
                } else {
                    "10.0.0.7".parse().unwrap()
                };
                Ok(vec![SocketAddr::new(ip, port)])
            })
        }
    }

    #[tokio::test]
    async fn a_name_that_rebinds_is_caught_on_the_next_attempt() {
        let p = Policy::new(
            &EgressConfig::default(),
            Arc::new(Rebinding(AtomicUsize::new(0))),
        );
        assert!(p.pick("hooks.example.com", 443).await.unwrap().is_ok());
        assert_eq!(
            p.pick("hooks.example.com", 443).await.unwrap(),
            Err(Denied::Private)
        );
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
            if contains(net, len, ip) && best.as_ref().is_none_or(|(l, _)| len >= *l) {
                best = Some((len, verdict.clone()));
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
