//! The egress policy every sink obeys: the `egress` config over the address classes of
//! `ankusa_config::egress` (one classifier for all), with a resolver.
//!
//! How each kind of sink applies it, on every connect:
//! - HTTP (`http/`) resolves the URL's host on every attempt, takes the first allowed address
//!   and pins the connection to it (`Policy::pick`).
//! - Kafka: every connection librdkafka makes passes the connect guard (kafka/connect.rs),
//!   which checks the address librdkafka resolved and connects to it itself; the names are
//!   checked too, before the producer is made (`Policy::check_targets`), for errors that name
//!   the field.
//! - RabbitMQ and Redis check a name (`Policy::check_target`: every address it resolves to must
//!   be allowed) and dial one of the addresses they checked themselves, then hand the stream to
//!   the client library: no second lookup.
//! - NATS checks the servers before the first connect and before each reconnect (the client's
//!   server-selection callback); the client then resolves the name itself (see docs/sinks.md,
//!   Egress, for that window and what closes it).
//! - SQS and Pub/Sub send through a client whose resolver answers only with checked
//!   addresses (`PolicyDns`), so the connection goes to an address that was checked.
//!
//! A broker or queue sink's refusal is a connect failure like any other (transient, retried,
//! the hook stays queued): `not_connected: egress_denied: <class> (<field>)`. Unlike an HTTP
//! sink's refusal (permanent: one receiver URL per sink), it stands for a connection every hook
//! of the sink shares; it is fixed by a policy change or a DNS fix, and dead-lettering every
//! queued hook meanwhile would turn that fix into a mass replay.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use ankusa_config::EgressConfig;
pub use ankusa_config::{AddressPolicy, Denied, EgressTarget};
use futures::future::BoxFuture;

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

/// Why a broker or endpoint may not be connected to. The text names the field and the class,
/// never the host or address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EgressError {
    #[error("egress_denied: {denied} ({field})")]
    Denied { field: String, denied: Denied },
    /// `reason` is the I/O error's kind, never the resolver's text (which may name the host).
    #[error("resolve {field}: the name did not resolve ({reason})")]
    Unresolved { field: String, reason: String },
}

/// The address policy of the intake log (`wal.type: dual`, Kafka or JetStream): the node's own
/// infrastructure, named by whoever runs the node, so loopback and private addresses are
/// allowed; link-local (the cloud metadata service) and non-unicast addresses are not, whatever
/// a cluster advertises or a name resolves to.
pub fn intake_egress() -> EgressConfig {
    EgressConfig {
        allow_loopback: true,
        allow_private: true,
        ..Default::default()
    }
}

/// `intake_egress` as address rules (the Kafka intake's connect guard).
pub fn intake_policy() -> AddressPolicy {
    intake_egress().address_policy()
}

impl EgressError {
    /// The refused class, when the policy refused (not when the name did not resolve).
    pub fn denied(&self) -> Option<Denied> {
        match self {
            EgressError::Denied { denied, .. } => Some(*denied),
            EgressError::Unresolved { .. } => None,
        }
    }
}

#[derive(Clone)]
pub struct Policy {
    allow_http: bool,
    addresses: Arc<AddressPolicy>,
    resolver: Arc<dyn Resolve>,
}

impl Policy {
    pub fn new(cfg: &EgressConfig, resolver: Arc<dyn Resolve>) -> Policy {
        Policy {
            allow_http: cfg.allow_http,
            addresses: Arc::new(cfg.address_policy()),
            resolver,
        }
    }

    /// The address rules alone (what a shared connection is keyed by, besides its address).
    pub fn addresses(&self) -> &AddressPolicy {
        &self.addresses
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
        self.addresses.check_ip(ip)
    }

    /// Resolves `host` and returns the first allowed address. `Ok(Err(denied))` means every
    /// address was refused (permanent); `Err` means the name did not resolve (transient).
    /// The HTTP sink pins its connection to the address returned.
    pub async fn pick(&self, host: &str, port: u16) -> std::io::Result<Result<SocketAddr, Denied>> {
        let addrs = self.resolve(host, port).await?;
        let mut first_denial = None;
        for a in addrs {
            match self.check_ip(a.ip()) {
                Ok(()) => {
                    let ip = ankusa_config::egress::canonical(a.ip());
                    return Ok(Ok(SocketAddr::new(ip, a.port())));
                }
                Err(d) => {
                    first_denial.get_or_insert(d);
                }
            }
        }
        Ok(Err(first_denial.unwrap_or(Denied::NotUnicast)))
    }

    /// Resolves one broker or endpoint and checks every address it resolves to: a client
    /// library that resolves the name again may take any of them, so one refused address
    /// refuses the name. Returns the addresses.
    pub async fn check_target(&self, t: &EgressTarget) -> Result<Vec<SocketAddr>, EgressError> {
        let addrs = self
            .resolve(&t.host, t.port)
            .await
            .map_err(|e| EgressError::Unresolved {
                field: t.field.clone(),
                reason: e.kind().to_string(),
            })?;
        for a in &addrs {
            if let Err(denied) = self.check_ip(a.ip()) {
                return Err(EgressError::Denied {
                    field: t.field.clone(),
                    denied,
                });
            }
        }
        Ok(addrs)
    }

    /// `check_target` for each of a sink's targets, in order; the first failure wins.
    pub async fn check_targets(&self, targets: &[EgressTarget]) -> Result<(), EgressError> {
        for t in targets {
            self.check_target(t).await?;
        }
        Ok(())
    }

    /// The first target written as an IP literal that the policy refuses. A client connects
    /// to a literal without asking any resolver, so the REST sinks check these before each
    /// request (config validation refuses them at load too).
    pub fn refused_literal(&self, targets: &[EgressTarget]) -> Option<EgressError> {
        targets.iter().find_map(|t| {
            let denied = self.check_ip(t.literal_ip()?).err()?;
            Some(EgressError::Denied {
                field: t.field.clone(),
                denied,
            })
        })
    }

    /// The addresses of `host` (an IP literal, bracketed or not, is its own address).
    async fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
        let trimmed = host.trim_start_matches('[').trim_end_matches(']');
        let addrs = match trimmed.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, port)],
            Err(_) => self.resolver.resolve(trimmed, port).await?,
        };
        if addrs.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "name resolved to no address",
            ));
        }
        Ok(addrs)
    }
}

/// The resolver of the SQS and Pub/Sub REST client: answers only when every address of the
/// name is allowed, so the client connects to an address the policy checked (no second
/// lookup). A refusal reaches the sink as an `EgressError` inside reqwest's error
/// (`egress_refusal`).
pub struct PolicyDns(pub Policy);

impl reqwest::dns::Resolve for PolicyDns {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.0.clone();
        let target = EgressTarget {
            field: "endpoint".into(),
            host: name.as_str().to_string(),
            // reqwest puts the URL's port (or the scheme's) in place of 0.
            port: 0,
        };
        Box::pin(async move {
            let addrs = policy.check_target(&target).await?;
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// The `EgressError` somewhere in an error's chain (reqwest wraps its resolver's error).
pub fn egress_refusal<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a EgressError> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(found) = err.downcast_ref::<EgressError>() {
            return Some(found);
        }
        cur = err.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn policy(cfg: EgressConfig) -> Policy {
        Policy::new(&cfg, Arc::new(SystemResolver))
    }

    #[test]
    fn scheme_needs_allow_http() {
        let p = policy(EgressConfig::default());
        assert_eq!(p.check_scheme("http"), Err(Denied::Scheme));
        assert_eq!(p.check_scheme("https"), Ok(()));
        assert_eq!(
            p.check_ip("127.0.0.1".parse().unwrap()),
            Err(Denied::Loopback)
        );
        let p = policy(EgressConfig {
            allow_http: true,
            allow_loopback: true,
            ..Default::default()
        });
        assert_eq!(p.check_scheme("http"), Ok(()));
        assert_eq!(p.check_ip("127.0.0.1".parse().unwrap()), Ok(()));
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
        let t = target("brokers[0]", "kafka.example.com", 9092);
        assert_eq!(
            p.check_target(&t).await,
            Err(EgressError::Denied {
                field: "brokers[0]".into(),
                denied: Denied::Private
            })
        );
    }

    /// A fixed table of names.
    struct Table(HashMap<&'static str, Vec<&'static str>>);
    impl Resolve for Table {
        fn resolve<'a>(
            &'a self,
            host: &'a str,
            port: u16,
        ) -> BoxFuture<'a, std::io::Result<Vec<SocketAddr>>> {
            let found = self.0.get(host).map(|ips| {
                ips.iter()
                    .map(|ip| SocketAddr::new(ip.parse().unwrap(), port))
                    .collect()
            });
            Box::pin(async move {
                found.ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "nxdomain"))
            })
        }
    }

    fn target(field: &str, host: &str, port: u16) -> EgressTarget {
        EgressTarget {
            field: field.into(),
            host: host.into(),
            port,
        }
    }

    #[tokio::test]
    async fn every_address_of_a_broker_name_must_be_allowed() {
        let names = Table(HashMap::from([
            (
                "public.example",
                vec!["93.184.216.34", "2606:2800:220:1::1"],
            ),
            ("split.example", vec!["93.184.216.34", "10.0.0.7"]),
            ("loop.example", vec!["127.0.0.1", "::1"]),
            ("meta.example", vec!["169.254.169.254"]),
        ]));
        let resolver: Arc<dyn Resolve> = Arc::new(names);
        let strict = Policy::new(&EgressConfig::default(), resolver.clone());
        fn denied<T>(field: &str, d: Denied) -> Result<T, EgressError> {
            Err(EgressError::Denied {
                field: field.into(),
                denied: d,
            })
        }
        assert_eq!(
            strict
                .check_target(&target("url", "public.example", 6379))
                .await
                .map(|a| a.len()),
            Ok(2)
        );
        // One refused address refuses the name: the library may connect to any of them.
        assert_eq!(
            strict
                .check_target(&target("brokers[1]", "split.example", 9092))
                .await,
            denied("brokers[1]", Denied::Private)
        );
        assert_eq!(
            strict
                .check_target(&target("servers[0]", "loop.example", 4222))
                .await,
            denied("servers[0]", Denied::Loopback)
        );
        assert_eq!(
            strict
                .check_target(&target("endpoint", "meta.example", 80))
                .await,
            denied("endpoint", Denied::LinkLocal)
        );
        // Literals, bracketed or not, are checked without the resolver.
        assert_eq!(
            strict.check_target(&target("url", "[::1]", 5672)).await,
            denied("url", Denied::Loopback)
        );
        assert_eq!(
            strict.check_target(&target("url", "10.1.1.1", 5672)).await,
            denied("url", Denied::Private)
        );
        // A name that does not resolve is not a refusal: retried like any failed connect.
        let e = strict
            .check_target(&target("url", "gone.example", 6379))
            .await
            .unwrap_err();
        assert_eq!(e.denied(), None);
        assert!(e.to_string().starts_with("resolve url:"), "{e}");
        // The first refusal of a sink's targets is reported, by field.
        assert_eq!(
            strict
                .check_targets(&[
                    target("brokers[0]", "public.example", 9092),
                    target("brokers[1]", "loop.example", 9092),
                ])
                .await,
            denied("brokers[1]", Denied::Loopback)
        );
        // Each flag opens its own class only.
        let open = Policy::new(
            &EgressConfig {
                allow_loopback: true,
                allow_private: true,
                ..Default::default()
            },
            resolver,
        );
        assert!(
            open.check_target(&target("u", "loop.example", 1))
                .await
                .is_ok()
        );
        assert!(
            open.check_target(&target("u", "split.example", 1))
                .await
                .is_ok()
        );
        assert_eq!(
            open.check_target(&target("u", "meta.example", 1)).await,
            denied("u", Denied::LinkLocal)
        );
    }

    #[tokio::test]
    async fn localhost_is_loopback_to_the_system_resolver() {
        let p = policy(EgressConfig::default());
        let e = p
            .check_target(&target("url", "localhost", 6379))
            .await
            .unwrap_err();
        assert_eq!(e.denied(), Some(Denied::Loopback));
        assert_eq!(e.to_string(), "egress_denied: loopback (url)");
        let p = policy(EgressConfig {
            allow_loopback: true,
            ..Default::default()
        });
        assert!(
            p.check_target(&target("url", "localhost", 6379))
                .await
                .is_ok()
        );
    }

    #[test]
    fn refused_literals_are_found_without_resolving() {
        let p = policy(EgressConfig::default());
        let ts = [
            target("endpoint", "sqs.example", 443),
            target("queue_url", "fd00::1", 443),
        ];
        assert_eq!(
            p.refused_literal(&ts),
            Some(EgressError::Denied {
                field: "queue_url".into(),
                denied: Denied::Private
            })
        );
        assert_eq!(p.refused_literal(&ts[..1]), None);
    }

    #[test]
    fn a_refusal_is_found_inside_an_error_chain() {
        #[derive(Debug)]
        struct Outer(EgressError);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("error sending request")
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let inner = EgressError::Denied {
            field: "endpoint".into(),
            denied: Denied::Loopback,
        };
        let outer = Outer(inner.clone());
        assert_eq!(egress_refusal(&outer), Some(&inner));
        assert_eq!(egress_refusal(&std::io::Error::other("x")), None);
    }
}
