//! The egress guard of every librdkafka client Ankusa makes (the Kafka sink's producers, the
//! intake log's producer and reader). librdkafka resolves broker names itself, again at each
//! reconnect, and connects to whatever brokers the cluster advertises in any later metadata
//! answer; checking names before handing them over leaves both unchecked. So every TCP
//! connection librdkafka opens goes through librdkafka's connect callback: the callback gets
//! the address librdkafka resolved, checks it against the client's egress policy, and makes the
//! `connect()` itself only when the address is allowed; a refused address gets `EACCES` (librdkafka
//! treats it as a failed connect and retries later, checked again) and is counted by its class.
//! The address checked is the address connected to: no lookup comes between them.
//!
//! The `rdkafka` crate has no wrapper for the callback and builds librdkafka's configuration
//! inside its constructors, so `create` builds the client **without brokers**, installs the
//! callback on the client's own configuration, and only then gives it its brokers
//! (`rd_kafka_brokers_add`). The unsafe code of the sinks' Kafka support is all in this module;
//! each block says why it is sound. The argument reads librdkafka 2.12.1's source (rdkafka-sys
//! 4.10.0, pinned in the workspace): re-read it on an upgrade.
//!
//! The callback finds its client's policy by the client's opaque pointer (the address of the
//! client's context, set by rdkafka at creation and unique while the client lives): a client
//! with no registered guard (none should exist) is refused every connection.

use std::collections::HashMap;
use std::ffi::CString;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use ankusa_config::{AddressPolicy, Denied};
use libc::{c_char, c_int, c_void, sockaddr};
use rdkafka::ClientConfig;
use rdkafka::error::KafkaResult;
use rdkafka_sys as rdsys;

/// One client's egress policy, and the class of the last connection it refused (what a failed
/// produce reports: the address itself is never kept).
pub struct Guard {
    policy: AddressPolicy,
    last: Mutex<Option<Denied>>,
    /// When a refusal was last logged (ms since the epoch): at most one log line a minute.
    logged_ms: AtomicU64,
    /// `sink` or `intake`, for the log line.
    role: &'static str,
}

impl Guard {
    pub fn new(policy: AddressPolicy, role: &'static str) -> Arc<Guard> {
        Arc::new(Guard {
            policy,
            last: Mutex::new(None),
            logged_ms: AtomicU64::new(0),
            role,
        })
    }

    /// The class of the last connection this client's guard refused.
    pub fn last_refusal(&self) -> Option<Denied> {
        *self.last.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether librdkafka may connect to `ip`; a refusal is noted, counted and logged.
    fn admit(&self, ip: IpAddr) -> bool {
        let Err(denied) = self.policy.check_ip(ip) else {
            return true;
        };
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(denied);
        REFUSED[class_index(denied)].fetch_add(1, Ordering::Relaxed);
        let now = ankusa_core::now_ms();
        let before = self.logged_ms.load(Ordering::Relaxed);
        if now.saturating_sub(before) >= 60_000
            && self
                .logged_ms
                .compare_exchange(before, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            tracing::warn!(
                client = self.role,
                class = denied.as_str(),
                "kafka: librdkafka was refused a connection to a broker address the egress policy \
                 refuses (resolved or advertised); at most one such line a minute"
            );
        }
        false
    }
}

/// The classes a refusal can have (`Denied::Scheme` is the HTTP sinks' only).
const CLASSES: [Denied; 4] = [
    Denied::Loopback,
    Denied::Private,
    Denied::LinkLocal,
    Denied::NotUnicast,
];

fn class_index(d: Denied) -> usize {
    CLASSES.iter().position(|c| *c == d).unwrap_or(3)
}

/// Connections librdkafka was refused since the process started, by class.
static REFUSED: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];

/// Connections refused by the guard of any Kafka client of this process, by class
/// (`loopback`, `private`, `link_local`, `not_unicast`), for a counter of the gateway's.
pub fn refused_connects() -> Vec<(&'static str, u64)> {
    CLASSES
        .iter()
        .enumerate()
        .map(|(i, c)| (c.as_str(), REFUSED[i].load(Ordering::Relaxed)))
        .collect()
}

/// The guards of the live clients, by opaque pointer; each entry carries the id of its `Armed`,
/// so a stale removal cannot take a newer client's entry at a reused address.
type Guards = HashMap<usize, (u64, Arc<Guard>)>;
static GUARDS: LazyLock<Mutex<Guards>> = LazyLock::new(|| Mutex::new(HashMap::new()));
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn guard_of(key: usize) -> Option<Arc<Guard>> {
    GUARDS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&key)
        .map(|(_, g)| g.clone())
}

/// A client's registration; removed when dropped (after the client, see `Guarded`).
struct Armed {
    key: usize,
    id: u64,
}

impl Drop for Armed {
    fn drop(&mut self) {
        let mut guards = GUARDS.lock().unwrap_or_else(|p| p.into_inner());
        if guards.get(&self.key).is_some_and(|(id, _)| *id == self.id) {
            guards.remove(&self.key);
        }
    }
}

/// A librdkafka client whose connections go through its guard. Derefs to the client.
pub struct Guarded<T> {
    // Declared first, so dropped first: the client is destroyed (its broker threads joined)
    // before its guard is unregistered.
    client: T,
    _armed: Armed,
    guard: Arc<Guard>,
}

impl<T> Deref for Guarded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.client
    }
}

impl<T> Guarded<T> {
    pub fn guard(&self) -> &Guard {
        &self.guard
    }
}

/// Why a guarded client could not be made: class words, never a config value.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    /// librdkafka refused a setting (the key is named, never its value).
    #[error("client_setup: librdkafka refused the setting {0}")]
    Setting(String),
    #[error("client_setup: librdkafka could not create the client ({0})")]
    Client(&'static str),
    #[error("client_setup: no broker address librdkafka could use in brokers")]
    NoBroker,
}

/// The class of an rdkafka error at client creation, without its text (which may carry a
/// setting's value).
fn create_error(e: rdkafka::error::KafkaError) -> CreateError {
    use rdkafka::error::KafkaError as E;
    match e {
        E::ClientConfig(_, _, key, _) => CreateError::Setting(key),
        E::ClientCreation(_) => CreateError::Client("rd_kafka_new failed"),
        _ => CreateError::Client("unexpected error"),
    }
}

/// Makes a client with `make` from `config` minus its `bootstrap.servers`, installs the guard,
/// then adds the brokers. `native` gives the made client's librdkafka handle
/// (`|p| p.client().native_ptr()`).
pub fn create<T>(
    config: &ClientConfig,
    guard: Arc<Guard>,
    make: impl FnOnce(&ClientConfig) -> KafkaResult<T>,
    native: impl Fn(&T) -> *mut rdsys::RDKafka,
) -> Result<Guarded<T>, CreateError> {
    let brokers = config.get("bootstrap.servers").unwrap_or("").to_string();
    let brokers = CString::new(brokers).map_err(|_| CreateError::NoBroker)?;
    let mut bare = config.clone();
    bare.remove("bootstrap.servers");
    let client = make(&bare).map_err(create_error)?;
    let rk = native(&client);
    // SAFETY: `rk` is the live handle of `client`, which this function owns. `rd_kafka_opaque`
    // only reads the opaque pointer rdkafka stored in the handle's config at creation.
    let key = unsafe { rdsys::rd_kafka_opaque(rk) } as usize;
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    GUARDS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key, (id, guard.clone()));
    let armed = Armed { key, id };
    // SAFETY: `rd_kafka_conf(rk)` is the handle's own configuration (`&rk->rk_conf`, a field
    // of the heap-allocated handle, not a const object: the `const` of the getter is advice),
    // valid while the handle lives. The callback setter writes the `connect_cb` field and a bit
    // of the config's `modified` set. No other thread reads either now: the client was made
    // without brokers, so no broker thread that connects exists yet, and librdkafka reads
    // `connect_cb` only when a broker thread connects (rdkafka_transport.c,
    // `rd_kafka_transport_connect`) and `modified` only at creation and in a broker thread's
    // metadata request. The broker threads `rd_kafka_brokers_add` starts below are created
    // after this write (thread creation orders it before anything they do), and so are the
    // threads of brokers learned later (made by those threads).
    unsafe {
        let conf = rdsys::rd_kafka_conf(rk) as *mut rdsys::rd_kafka_conf_t;
        rdsys::rd_kafka_conf_set_connect_cb(conf, Some(on_connect));
    }
    // SAFETY: `rk` is live; `brokers` is a NUL-terminated string librdkafka copies.
    let added = unsafe { rdsys::rd_kafka_brokers_add(rk, brokers.as_ptr()) };
    if added <= 0 {
        return Err(CreateError::NoBroker);
    }
    Ok(Guarded {
        client,
        _armed: armed,
        guard,
    })
}

/// librdkafka's connect callback: connects `sockfd` to `addr` when the guard of the client
/// (`opaque`) admits the address; otherwise an errno. librdkafka's sockets are non-blocking,
/// so `EINPROGRESS` is a started connect (0), as in librdkafka's own connect.
unsafe extern "C" fn on_connect(
    sockfd: c_int,
    addr: *const sockaddr,
    addrlen: c_int,
    _id: *const c_char,
    opaque: *mut c_void,
) -> c_int {
    // SAFETY: librdkafka passes the address it resolved and its length in bytes
    // (`RD_SOCKADDR_INX_LEN`); `peer_ip` checks the length against the family before reading.
    let Some(ip) = (unsafe { peer_ip(addr, addrlen) }) else {
        return libc::EAFNOSUPPORT;
    };
    // Nothing may unwind into librdkafka: a panic here refuses the connection.
    let admitted =
        std::panic::catch_unwind(|| guard_of(opaque as usize).is_some_and(|g| g.admit(ip)))
            .unwrap_or(false);
    if !admitted {
        return libc::EACCES;
    }
    // SAFETY: `sockfd` is the socket librdkafka made for this connection and `addr`/`addrlen`
    // the address it gave us, both valid for the duration of this call.
    let r = unsafe { libc::connect(sockfd, addr, addrlen as libc::socklen_t) };
    if r == 0 {
        return 0;
    }
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::EINPROGRESS) => 0,
        Some(e) => e,
        None => libc::ECONNREFUSED,
    }
}

/// The IP address of a socket address of `len` bytes (IPv4 or IPv6); `None` for any other
/// family or a length too short for the family.
///
/// # Safety
/// `addr` is null or points to at least `len` readable bytes.
unsafe fn peer_ip(addr: *const sockaddr, len: c_int) -> Option<IpAddr> {
    if addr.is_null() || len < 0 {
        return None;
    }
    let len = len as usize;
    if len < std::mem::size_of::<libc::sa_family_t>() {
        return None;
    }
    // SAFETY (this and the reads below): `addr` points to `len` readable bytes, each read is
    // no longer than `len` (checked first), and `read_unaligned` makes no alignment
    // assumption about librdkafka's buffer.
    let family = unsafe { std::ptr::read_unaligned(&raw const (*addr).sa_family) };
    match c_int::from(family) {
        libc::AF_INET if len >= std::mem::size_of::<libc::sockaddr_in>() => {
            let sin = unsafe { std::ptr::read_unaligned(addr as *const libc::sockaddr_in) };
            Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(
                sin.sin_addr.s_addr,
            ))))
        }
        libc::AF_INET6 if len >= std::mem::size_of::<libc::sockaddr_in6>() => {
            let sin6 = unsafe { std::ptr::read_unaligned(addr as *const libc::sockaddr_in6) };
            Some(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    fn raw(addr: SocketAddr) -> (Vec<u8>, c_int) {
        match addr {
            SocketAddr::V4(a) => {
                let sin = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: a.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from(*a.ip()).to_be(),
                    },
                    sin_zero: [0; 8],
                };
                let n = std::mem::size_of::<libc::sockaddr_in>();
                // SAFETY: a plain-old-data struct viewed as its bytes.
                let bytes = unsafe { std::slice::from_raw_parts(&raw const sin as *const u8, n) };
                (bytes.to_vec(), n as c_int)
            }
            SocketAddr::V6(a) => {
                let sin6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: a.port().to_be(),
                    sin6_flowinfo: 0,
                    sin6_addr: libc::in6_addr {
                        s6_addr: a.ip().octets(),
                    },
                    sin6_scope_id: 0,
                };
                let n = std::mem::size_of::<libc::sockaddr_in6>();
                // SAFETY: a plain-old-data struct viewed as its bytes.
                let bytes = unsafe { std::slice::from_raw_parts(&raw const sin6 as *const u8, n) };
                (bytes.to_vec(), n as c_int)
            }
        }
    }

    #[test]
    fn socket_addresses_are_read_by_family_and_length() {
        for a in ["127.0.0.2:9092", "[fe80::1]:9092", "[::ffff:10.0.0.1]:1"] {
            let a: SocketAddr = a.parse().unwrap();
            let (bytes, n) = raw(a);
            // The buffer is offset by one byte: no alignment is assumed.
            let mut shifted = vec![0u8; bytes.len() + 1];
            shifted[1..].copy_from_slice(&bytes);
            let p = shifted[1..].as_ptr() as *const sockaddr;
            // SAFETY: `p` points to `n` readable bytes.
            assert_eq!(unsafe { peer_ip(p, n) }, Some(a.ip()));
            // SAFETY: as above; a shorter length is refused before any read past it.
            assert_eq!(unsafe { peer_ip(p, n - 1) }, None);
        }
        // SAFETY: null is refused before any read.
        assert_eq!(unsafe { peer_ip(std::ptr::null(), 16) }, None);
    }

    #[test]
    fn a_guard_admits_by_class_and_counts_refusals() {
        let policy = ankusa_config::EgressConfig {
            allow_cidrs: vec!["127.0.0.1/32".into()],
            ..Default::default()
        }
        .address_policy();
        let g = Guard::new(policy, "sink");
        let before = refused_connects();
        assert!(g.admit("127.0.0.1".parse().unwrap()));
        assert!(g.admit("93.184.216.34".parse().unwrap()));
        assert_eq!(g.last_refusal(), None);
        assert!(!g.admit("127.0.0.2".parse().unwrap()));
        assert!(!g.admit("169.254.169.254".parse().unwrap()));
        assert_eq!(g.last_refusal(), Some(Denied::LinkLocal));
        let after = refused_connects();
        let grew = |class: &str| {
            let get = |v: &[(&str, u64)]| v.iter().find(|(c, _)| *c == class).unwrap().1;
            get(&after) - get(&before)
        };
        // Other tests of this binary may refuse in parallel: at least ours are counted.
        assert!(grew("loopback") >= 1 && grew("link_local") >= 1);
    }

    #[test]
    fn an_unregistered_client_is_refused() {
        let a: SocketAddr = "93.184.216.34:9092".parse().unwrap();
        let (bytes, n) = raw(a);
        // No socket is touched: the refusal comes before connect(). -1 is no descriptor.
        // SAFETY: the address is `n` readable bytes; the opaque is a key no guard has.
        let r = unsafe {
            on_connect(
                -1,
                bytes.as_ptr() as *const sockaddr,
                n,
                std::ptr::null(),
                usize::MAX as *mut c_void,
            )
        };
        assert_eq!(r, libc::EACCES);
    }
}
