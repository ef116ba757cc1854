//! HTTP connection pools: one per receiver address and TLS profile, shared by every HTTP sink
//! posting there, bounded per instance and per tenant; idle pools are closed by `sweep`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ankusa_config::{HttpVersion, PoolConfig};
use ankusa_core::{SinkError, now_ms};

use super::fair::FairPermits;
use crate::egress::{Resolve, SystemResolver};

/// Counters for the `ankusa_http_pool_*_total` series, read by the gateway's `/metrics` (the
/// `ankusa_http_pools` gauge is `HttpPools::len`).
#[derive(Debug, Default)]
pub struct PoolStats {
    pub closed_idle: AtomicU64,
    pub closed_lru: AtomicU64,
    pub refused_tenant: AtomicU64,
    pub refused_instance: AtomicU64,
}

/// How long an attempt waits for a free connection of its pool.
pub(super) const POOL_TIMEOUT: Duration = Duration::from_secs(5);
/// A connection idle this long is not reused.
const CONN_MAX_IDLE: Duration = Duration::from_secs(30);
/// An HTTP/2 connection in use is pinged this often, and dropped when a ping goes
/// unanswered this long.
const H2_PING_INTERVAL: Duration = Duration::from_secs(20);
const H2_PING_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct PoolKey {
    pub host: String,
    pub addr: SocketAddr,
    pub cacert: Option<PathBuf>,
    pub insecure: bool,
    pub size: u32,
    pub version: HttpVersion,
    /// `https://`: the version may be chosen by ALPN.
    pub tls: bool,
}

pub(super) struct Pool {
    pub client: reqwest::Client,
    /// Connection slots, handed out round robin across tenants.
    pub permits: Arc<FairPermits>,
    pub last_used_ms: AtomicU64,
    pub in_flight: AtomicUsize,
    /// `https://` under `auto`: until a first request has been answered (and ALPN chose the
    /// version), requests go one at a time, so a burst on a new pool does not dial a
    /// connection per request before it is known that one HTTP/2 connection carries them all.
    first: Option<tokio::sync::Mutex<()>>,
    answered: AtomicBool,
    tenant: String,
}

impl Pool {
    /// Waits for this pool's first request to be answered, unless that already happened; the
    /// guard returned, if any, makes this request the first (drop it once it is answered).
    pub async fn first_request(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        let gate = self.first.as_ref()?;
        if self.answered.load(Ordering::Acquire) {
            return None;
        }
        let guard = gate.lock().await;
        (!self.answered.load(Ordering::Acquire)).then_some(guard)
    }

    /// The first request finished (answered or failed): the others go at once from now on.
    pub fn first_done(&self) {
        self.answered.store(true, Ordering::Release);
    }
}

/// One connection pool per receiver address and TLS profile, shared by every sink posting
/// there. Bounded per instance and per tenant; idle pools are closed by `sweep`.
pub struct HttpPools {
    pools: Mutex<HashMap<PoolKey, Arc<Pool>>>,
    cfg: Mutex<PoolConfig>,
    stats: PoolStats,
    pub(crate) resolver: Arc<dyn Resolve>,
}

impl HttpPools {
    pub fn new(cfg: &PoolConfig) -> Arc<HttpPools> {
        Self::with_resolver(cfg, Arc::new(SystemResolver))
    }

    pub fn with_resolver(cfg: &PoolConfig, resolver: Arc<dyn Resolve>) -> Arc<HttpPools> {
        Arc::new(HttpPools {
            pools: Mutex::new(HashMap::new()),
            cfg: Mutex::new(cfg.clone()),
            stats: PoolStats::default(),
            resolver,
        })
    }

    /// Counters for the `ankusa_http_pool*` series.
    pub fn stats(&self) -> &PoolStats {
        &self.stats
    }

    /// Takes new limits from a reloaded config.
    pub fn set_config(&self, cfg: &PoolConfig) {
        *self.cfg.lock().unwrap_or_else(|p| p.into_inner()) = cfg.clone();
    }

    fn config(&self) -> PoolConfig {
        self.cfg.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(super) fn get(
        &self,
        key: PoolKey,
        tenant: &str,
        cacert_pem: Option<&[u8]>,
    ) -> Result<Arc<Pool>, SinkError> {
        let cfg = self.config();
        let mut pools = self.pools.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = pools.get(&key) {
            return Ok(p.clone());
        }
        let of_tenant = pools.values().filter(|p| p.tenant == tenant).count();
        if of_tenant >= cfg.max_pools_per_tenant as usize
            && !evict_idle(&mut pools, Some(tenant), &self.stats)
        {
            self.stats.refused_tenant.fetch_add(1, Ordering::Relaxed);
            return Err(SinkError::Transient(
                "unavailable: pool_limit (tenant)".into(),
            ));
        }
        if pools.len() >= cfg.max_pools as usize && !evict_idle(&mut pools, None, &self.stats) {
            self.stats.refused_instance.fetch_add(1, Ordering::Relaxed);
            return Err(SinkError::Transient("unavailable: pool_limit".into()));
        }
        let mut b = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .pool_max_idle_per_host(key.size as usize)
            .pool_idle_timeout(CONN_MAX_IDLE)
            .connect_timeout(Duration::from_secs(5))
            .user_agent(concat!("ankusa/", env!("CARGO_PKG_VERSION")))
            // A proxy from HTTP(S)_PROXY would connect to the destination by name on our behalf,
            // past the address this pool was pinned to after the egress check.
            .no_proxy()
            .resolve(&key.host, key.addr);
        if let Some(pem) = cacert_pem {
            let cert = reqwest::Certificate::from_pem(pem).map_err(|e| {
                SinkError::PermanentConfig(format!("cacertfile: {}", e.without_url()))
            })?;
            b = b.add_root_certificate(cert);
        }
        if key.insecure {
            b = b.danger_accept_invalid_certs(true);
        }
        b = match key.version {
            // reqwest offers `h2` and `http/1.1` by ALPN on `https://`, HTTP/1.1 on `http://`.
            HttpVersion::Auto => b,
            HttpVersion::Http1 => b.http1_only(),
            HttpVersion::Http2 => b.http2_prior_knowledge(),
        };
        // One HTTP/2 connection carries every stream of the pool (bounded by its permits):
        // the window follows the measured bandwidth-delay product instead of 64 KiB, and
        // pings find a connection a middlebox dropped before a delivery waits on it.
        b = b
            .http2_adaptive_window(true)
            .http2_keep_alive_interval(H2_PING_INTERVAL)
            .http2_keep_alive_timeout(H2_PING_TIMEOUT);
        let client = b
            .build()
            .map_err(|e| SinkError::Transient(format!("http client: {}", e.without_url())))?;
        let pool = Arc::new(Pool {
            client,
            permits: FairPermits::new(key.size as usize),
            last_used_ms: AtomicU64::new(now_ms()),
            in_flight: AtomicUsize::new(0),
            first: (key.version == HttpVersion::Auto && key.tls)
                .then(|| tokio::sync::Mutex::new(())),
            answered: AtomicBool::new(false),
            tenant: tenant.to_string(),
        });
        pools.insert(key, pool.clone());
        Ok(pool)
    }

    /// Closes pools with nothing in flight for `pool_max_idle_ms`.
    pub fn sweep(&self) {
        let idle = self.config().pool_max_idle_ms;
        let now = now_ms();
        let mut pools = self.pools.lock().unwrap_or_else(|p| p.into_inner());
        let before = pools.len();
        pools.retain(|_, p| {
            p.in_flight.load(Ordering::SeqCst) > 0
                || now.saturating_sub(p.last_used_ms.load(Ordering::Relaxed)) < idle
        });
        let closed = before - pools.len();
        self.stats
            .closed_idle
            .fetch_add(closed as u64, Ordering::Relaxed);
    }

    pub fn len(&self) -> usize {
        self.pools.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Closes the least recently used pool with nothing in flight (of `tenant`, if given).
fn evict_idle(
    pools: &mut HashMap<PoolKey, Arc<Pool>>,
    tenant: Option<&str>,
    stats: &PoolStats,
) -> bool {
    let victim = pools
        .iter()
        .filter(|(_, p)| {
            p.in_flight.load(Ordering::SeqCst) == 0 && tenant.is_none_or(|t| p.tenant == t)
        })
        .min_by_key(|(_, p)| p.last_used_ms.load(Ordering::Relaxed))
        .map(|(k, _)| k.clone());
    match victim {
        Some(k) => {
            pools.remove(&k);
            stats.closed_lru.fetch_add(1, Ordering::Relaxed);
            true
        }
        None => false,
    }
}
