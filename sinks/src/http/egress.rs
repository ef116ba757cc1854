//! The egress policy of the HTTP sink. Every attempt resolves the destination and checks the
//! resolved address; the connection is then pinned to that address (the TLS name is still the
//! URL's host), so a name that rebinds to a denied address between attempts is refused.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use ankusa_config::{EgressConfig, parse_cidr};
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

fn contains(net: IpAddr, len: u8, ip: IpAddr) -> bool {
    match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(a)) => {
            let mask = if len == 0 {
                0
            } else {
                u32::MAX << (32 - len as u32)
            };
            u32::from(n) & mask == u32::from(a) & mask
        }
        (IpAddr::V6(n), IpAddr::V6(a)) => {
            let mask = if len == 0 {
                0
            } else {
                u128::MAX << (128 - len as u32)
            };
            u128::from(n) & mask == u128::from(a) & mask
        }
        _ => false,
    }
}

fn classify(ip: IpAddr) -> Option<Denied> {
    match ip {
        IpAddr::V4(a) => classify_v4(a),
        IpAddr::V6(a) => classify_v6(a),
    }
}

fn classify_v4(a: Ipv4Addr) -> Option<Denied> {
    let o = a.octets();
    if a.is_loopback() {
        Some(Denied::Loopback)
    } else if a.is_private() || (o[0] == 100 && (o[1] & 0xc0) == 64) {
        // 10/8, 172.16/12, 192.168/16 and the carrier-grade NAT range 100.64/10.
        Some(Denied::Private)
    } else if a.is_link_local() {
        // 169.254/16, the cloud metadata address 169.254.169.254 included.
        Some(Denied::LinkLocal)
    } else if a.is_unspecified()
        || a.is_multicast()
        || a.is_broadcast()
        || a.is_documentation()
        || o[0] == 0
        || o[0] >= 240
    {
        Some(Denied::NotUnicast)
    } else {
        None
    }
}

fn classify_v6(a: Ipv6Addr) -> Option<Denied> {
    let s = a.segments();
    if a.is_loopback() {
        Some(Denied::Loopback)
    } else if (s[0] & 0xfe00) == 0xfc00 {
        // Unique local fc00::/7 (fd00:ec2::254, a cloud metadata address, included).
        Some(Denied::Private)
    } else if (s[0] & 0xffc0) == 0xfe80 {
        Some(Denied::LinkLocal)
    } else if a.is_unspecified() || a.is_multicast() || (s[0] == 0x2001 && s[1] == 0x0db8) {
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
        ] {
            assert_eq!(p.check_ip(ip.parse().unwrap()), Err(why), "{ip}");
        }
        assert_eq!(p.check_ip("93.184.216.34".parse().unwrap()), Ok(()));
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
