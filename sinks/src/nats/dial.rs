//! Where the NATS sink's client may connect. async-nats resolves a server's name itself at each
//! connect, so the pool it is given holds no names: when the sink dials, each configured server
//! is resolved through the egress policy, and the pool holds one entry per address that passed,
//! written as that address (`nats://10.0.0.5:4222`, scheme and user info kept; at most
//! `MAX_PER_SERVER` per server), plus `NOWHERE`. Before every connect, the first one and each
//! reconnect alike, async-nats asks the sink's callback (`pick`), which resolves the names
//! again through the policy and hands back a pooled address the name still resolves to: the
//! address checked is the address connected to. When every server is refused the pick is
//! `NOWHERE` (a name no resolver answers: the attempt connects nowhere) and the refusal is
//! recorded for the deliveries; when a name now resolves only to addresses the pool lacks (the
//! server moved), the pick is `NOWHERE` too and the connection is marked `Moved`, so the next
//! delivery drops it and dials anew with fresh addresses.
//!
//! With TLS the certificate is checked against the configured server's name, not the address
//! dialed (`names`, handed to the verifier in sinks/src/tls.rs). Servers a cluster advertises
//! (`connect_urls`) never enter the pool (`ignore_discovered_servers`), and the callback only
//! picks addresses of configured servers.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use async_nats::{ReconnectToServer, Server, ServerAddr};

use crate::egress::{EgressError, EgressTarget, Policy};

/// A server no resolver answers for (RFC 6761 reserves `.invalid`), in the pool so the callback
/// may pick it (the client refuses a pick from outside its pool).
pub const NOWHERE: &str = "nats://egress-refused.invalid:4222";

/// Addresses of one configured server kept in the pool (a name answering with more is cut).
const MAX_PER_SERVER: usize = 8;

/// Why the client's last connect attempt went nowhere, for the deliveries that find it down.
#[derive(Debug, Clone)]
pub enum Miss {
    /// The policy refused every configured server (or a name did not resolve).
    Refused(EgressError),
    /// A server's name resolves to addresses the pool lacks: redial.
    Moved,
}

pub type LastMiss = Arc<Mutex<Option<Miss>>>;

/// One configured server: its field and name, and its pooled addresses.
struct Configured {
    target: EgressTarget,
    literals: Vec<(SocketAddr, ServerAddr)>,
}

/// The servers of one dial: what the client is given and what the callback picks from.
pub struct Pool {
    servers: Vec<Configured>,
    nowhere: ServerAddr,
    /// The first connect's pick (a reachable address when a server has several).
    first: Mutex<Option<ServerAddr>>,
}

impl Pool {
    /// Resolves and checks each configured server; `Err` is the first refusal. A server's
    /// every address must pass, as at any check.
    pub async fn build(
        policy: &Policy,
        configured: Vec<(ServerAddr, EgressTarget)>,
    ) -> Result<Pool, String> {
        let mut servers = Vec::with_capacity(configured.len());
        for (addr, target) in configured {
            let resolved = policy
                .check_target(&target)
                .await
                .map_err(|e| e.to_string())?;
            let mut literals = Vec::new();
            for sa in resolved.into_iter().take(MAX_PER_SERVER) {
                let ip = ankusa_config::egress::canonical(sa.ip());
                let lit = literal(&addr, ip)
                    .ok_or_else(|| format!("{}: is not a NATS server address", target.field))?;
                if !literals
                    .iter()
                    .any(|(a, _)| *a == SocketAddr::new(ip, sa.port()))
                {
                    literals.push((SocketAddr::new(ip, sa.port()), lit));
                }
            }
            servers.push(Configured { target, literals });
        }
        let nowhere: ServerAddr = NOWHERE
            .parse()
            .map_err(|e| format!("internal: {NOWHERE}: {e}"))?;
        let first = servers
            .iter()
            .flat_map(|s| s.literals.first())
            .map(|(_, l)| l.clone())
            .next();
        Ok(Pool {
            servers,
            nowhere,
            first: Mutex::new(first),
        })
    }

    /// What the client is given: every pooled address, then `NOWHERE`.
    pub fn addrs(&self) -> Vec<ServerAddr> {
        self.servers
            .iter()
            .flat_map(|s| s.literals.iter().map(|(_, l)| l.clone()))
            .chain([self.nowhere.clone()])
            .collect()
    }

    /// The configured name of each pooled address whose server was named by a DNS name: the
    /// name a TLS certificate is checked against.
    pub fn names(&self) -> HashMap<IpAddr, String> {
        let mut names = HashMap::new();
        for s in &self.servers {
            if s.target.literal_ip().is_none() {
                for (a, _) in &s.literals {
                    names.entry(a.ip()).or_insert_with(|| s.target.host.clone());
                }
            }
        }
        names
    }

    /// When a server has several addresses, makes the first connect go to one that accepts TCP
    /// (async-nats tries one address per connect, and the first connect is tried once): each is
    /// probed, in order, with a plain TCP connect closed at once.
    pub async fn prefer_reachable(&self, timeout: std::time::Duration) {
        let all: Vec<&(SocketAddr, ServerAddr)> = self
            .servers
            .iter()
            .flat_map(|s| s.literals.iter())
            .collect();
        if all.len() < 2 {
            return;
        }
        for (sa, lit) in all {
            if let Ok(Ok(_)) =
                tokio::time::timeout(timeout, tokio::net::TcpStream::connect(sa)).await
            {
                *self.first.lock().unwrap_or_else(|p| p.into_inner()) = Some(lit.clone());
                return;
            }
        }
    }
}

/// `addr` with its host replaced by `ip` (scheme, port and user info kept).
fn literal(addr: &ServerAddr, ip: IpAddr) -> Option<ServerAddr> {
    let mut url = addr.clone().into_inner();
    url.set_ip_host(ip).ok()?;
    ServerAddr::from_url(url).ok()
}

/// The callback's choice for one connect attempt. The first attempt takes the address the dial
/// just checked; each later one resolves the configured servers through the policy again
/// (fewest failed attempts first, as the client's own selection would) and takes a pooled
/// address the name still resolves to.
pub async fn pick(policy: Policy, pool: Arc<Pool>, state: Vec<Server>) -> Result<ServerAddr, Miss> {
    if let Some(first) = pool.first.lock().unwrap_or_else(|p| p.into_inner()).take() {
        return Ok(first);
    }
    let failures = |a: &ServerAddr| {
        state
            .iter()
            .find(|s| &s.addr == a)
            .map_or(0, |s| s.failed_attempts)
    };
    let mut order: Vec<&Configured> = pool.servers.iter().collect();
    order.sort_by_key(|s| {
        s.literals
            .iter()
            .map(|(_, l)| failures(l))
            .min()
            .unwrap_or(0)
    });
    let mut refused = None;
    let mut moved = false;
    for s in order {
        match policy.check_target(&s.target).await {
            Ok(now) => {
                let now: Vec<SocketAddr> = now
                    .into_iter()
                    .map(|a| SocketAddr::new(ankusa_config::egress::canonical(a.ip()), a.port()))
                    .collect();
                let best = s
                    .literals
                    .iter()
                    .filter(|(a, _)| now.contains(a))
                    .min_by_key(|(_, l)| failures(l));
                match best {
                    Some((_, l)) => return Ok(l.clone()),
                    None => moved = true,
                }
            }
            Err(e) => {
                refused.get_or_insert(e);
            }
        }
    }
    match (refused, moved) {
        (_, true) => Err(Miss::Moved),
        (Some(e), false) => Err(Miss::Refused(e)),
        // No configured server at all: config validation refuses that.
        (None, false) => Err(Miss::Moved),
    }
}

/// What the client is told: the picked address, or `NOWHERE` with the miss recorded for the
/// deliveries that find the connection down.
pub fn settle(picked: Result<ServerAddr, Miss>, pool: &Pool, last: &LastMiss) -> ReconnectToServer {
    let mut last = last.lock().unwrap_or_else(|p| p.into_inner());
    let addr = match picked {
        Ok(addr) => {
            *last = None;
            addr
        }
        Err(miss) => {
            match &miss {
                Miss::Refused(e) => tracing::warn!(
                    error = %e,
                    "NATS reconnect goes nowhere: no configured server passes the egress check"
                ),
                Miss::Moved => tracing::info!(
                    "NATS reconnect goes nowhere: a server's name resolves to new addresses; \
                     the next delivery redials"
                ),
            }
            *last = Some(miss);
            pool.nowhere.clone()
        }
    };
    ReconnectToServer { addr, delay: None }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    use futures::future::BoxFuture;

    /// 127.0.0.1 and 127.0.0.3 for every name, or only 127.0.0.9 once moved.
    struct Names(AtomicBool);
    impl crate::egress::Resolve for Names {
        fn resolve<'a>(
            &'a self,
            _: &'a str,
            port: u16,
        ) -> BoxFuture<'a, std::io::Result<Vec<SocketAddr>>> {
            let ips: Vec<IpAddr> = if self.0.load(Ordering::SeqCst) {
                vec!["127.0.0.9".parse().unwrap()]
            } else {
                vec!["127.0.0.1".parse().unwrap(), "127.0.0.3".parse().unwrap()]
            };
            Box::pin(async move {
                Ok(ips
                    .into_iter()
                    .map(|ip| SocketAddr::new(ip, port))
                    .collect())
            })
        }
    }

    fn target(host: &str) -> EgressTarget {
        EgressTarget {
            field: "servers[0]".into(),
            host: host.into(),
            port: 4222,
        }
    }

    #[tokio::test]
    async fn the_pool_holds_checked_addresses_and_picks_only_those() {
        let moved = Arc::new(Names(AtomicBool::new(false)));
        let egress = ankusa_config::EgressConfig {
            allow_cidrs: vec!["127.0.0.0/28".into()],
            ..Default::default()
        };
        let policy = Policy::new(&egress, moved.clone());
        let addr: ServerAddr = "tls://user:pw@nats.example:4222".parse().unwrap();
        let pool = Arc::new(
            Pool::build(&policy, vec![(addr, target("nats.example"))])
                .await
                .unwrap(),
        );
        let addrs: Vec<String> = pool
            .addrs()
            .iter()
            .map(|a| a.as_url_str().to_string())
            .collect();
        assert_eq!(
            addrs,
            [
                "tls://user:pw@127.0.0.1:4222",
                "tls://user:pw@127.0.0.3:4222",
                NOWHERE
            ]
        );
        assert_eq!(
            pool.names().get(&"127.0.0.3".parse::<IpAddr>().unwrap()),
            Some(&"nats.example".to_string())
        );
        // The first connect takes the first address, later ones a still-resolving one.
        let first = pick(policy.clone(), pool.clone(), vec![]).await.unwrap();
        assert_eq!(first.host(), "127.0.0.1");
        let again = pick(policy.clone(), pool.clone(), vec![]).await.unwrap();
        assert!(pool.addrs().contains(&again));
        // The name moves to an address the pool lacks: nowhere, and the connection is marked.
        moved.0.store(true, Ordering::SeqCst);
        let miss = pick(policy.clone(), pool.clone(), vec![])
            .await
            .unwrap_err();
        assert!(matches!(miss, Miss::Moved), "{miss:?}");
        let last = LastMiss::default();
        let told = settle(Err(miss), &pool, &last);
        assert_eq!(told.addr.as_url_str(), NOWHERE);
        assert!(matches!(*last.lock().unwrap(), Some(Miss::Moved)));
        // A policy that refuses the name: nowhere, with the refusal.
        let strict = Policy::new(&ankusa_config::EgressConfig::default(), moved);
        let miss = pick(strict, pool.clone(), vec![]).await.unwrap_err();
        assert!(
            matches!(&miss, Miss::Refused(e) if e.to_string() == "egress_denied: loopback (servers[0])"),
            "{miss:?}"
        );
    }
}
