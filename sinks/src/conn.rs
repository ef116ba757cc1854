//! Broker connection lifecycle, shared by the Kafka, RabbitMQ, NATS and Redis sinks.
//!
//! A `Slot` holds at most one live connection to one broker with one set of credentials. It
//! dials on first use (one dial at a time; concurrent callers wait for it), hands out clones of
//! the connection, forgets it when a sink reports it broken (the next delivery redials), refuses
//! for `retry_ms` after a failed dial (so a dead broker is not hammered by every delivery), and
//! is closed by the reaper after `idle_timeout_ms` with no delivery through it and nothing in
//! flight. `Registry` keys slots by a digest of the broker address and credentials, so sinks
//! rebuilt by a config reload find the connection the old sinks used, and no password ever
//! becomes part of a name.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ankusa_core::SinkError;
use futures::future::BoxFuture;
use sha2::{Digest, Sha256};

/// A connection a slot can hold: cheap to clone (a handle), closed gracefully by `close`.
pub trait Conn: Clone + Send + Sync + 'static {
    fn close(self) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }
}

enum State<C> {
    Closed,
    Open { conn: C, generation: u64 },
    Failed { at: Instant, error: String },
}

pub struct Slot<C: Conn> {
    /// `kind:digest`, safe for logs.
    label: String,
    state: Mutex<State<C>>,
    dial: tokio::sync::Mutex<()>,
    generation: AtomicU64,
    in_flight: AtomicUsize,
    last_used: Mutex<Instant>,
    idle_timeout_ms: AtomicU64,
    retry_ms: AtomicU64,
}

/// Keeps a slot marked busy (the reaper leaves it alone) for as long as a delivery uses it.
pub struct Lease<'a, C: Conn> {
    slot: &'a Slot<C>,
    pub conn: C,
    pub generation: u64,
}

impl<C: Conn> Drop for Lease<'_, C> {
    fn drop(&mut self) {
        *self
            .slot
            .last_used
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Instant::now();
        self.slot.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

impl<C: Conn> Lease<'_, C> {
    /// Reports this connection broken: the next delivery dials a new one.
    pub fn invalidate(&self) {
        self.slot.invalidate(self.generation);
    }
}

impl<C: Conn> Slot<C> {
    pub fn new(label: String, idle_timeout_ms: u64, retry_ms: u64) -> Self {
        Slot {
            label,
            state: Mutex::new(State::Closed),
            dial: tokio::sync::Mutex::new(()),
            generation: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            last_used: Mutex::new(Instant::now()),
            idle_timeout_ms: AtomicU64::new(idle_timeout_ms),
            retry_ms: AtomicU64::new(retry_ms),
        }
    }

    pub fn label(&self) -> &str {
        &self.label
    }

    /// Takes the timings of the most recently built sink using this slot.
    pub fn configure(&self, idle_timeout_ms: u64, retry_ms: u64) {
        self.idle_timeout_ms
            .store(idle_timeout_ms, Ordering::Relaxed);
        self.retry_ms.store(retry_ms, Ordering::Relaxed);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<C>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lease(&self, conn: C, generation: u64) -> Lease<'_, C> {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        Lease {
            slot: self,
            conn,
            generation,
        }
    }

    fn current(&self) -> Result<Option<(C, u64)>, SinkError> {
        match &*self.lock() {
            State::Open { conn, generation } => Ok(Some((conn.clone(), *generation))),
            State::Failed { at, error }
                if at.elapsed() < Duration::from_millis(self.retry_ms.load(Ordering::Relaxed)) =>
            {
                Err(SinkError::Transient(format!("not_connected: {error}")))
            }
            _ => Ok(None),
        }
    }

    /// The live connection, dialing with `open` when there is none. `open`'s error text must
    /// already be free of credentials.
    pub async fn get<F, Fut>(&self, open: F) -> Result<Lease<'_, C>, SinkError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<C, String>>,
    {
        if let Some((c, g)) = self.current()? {
            return Ok(self.lease(c, g));
        }
        let _dialing = self.dial.lock().await;
        // Another caller may have dialed (or failed) while this one waited.
        if let Some((c, g)) = self.current()? {
            return Ok(self.lease(c, g));
        }
        match open().await {
            Ok(conn) => {
                let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
                *self.lock() = State::Open {
                    conn: conn.clone(),
                    generation,
                };
                tracing::debug!(connection = %self.label, "broker connection opened");
                Ok(self.lease(conn, generation))
            }
            Err(error) => {
                tracing::warn!(connection = %self.label, %error, "broker connection failed");
                *self.lock() = State::Failed {
                    at: Instant::now(),
                    error: error.clone(),
                };
                Err(SinkError::Transient(format!("not_connected: {error}")))
            }
        }
    }

    /// Forgets the connection of `generation` (if it is still the current one) and closes it.
    pub fn invalidate(&self, generation: u64) {
        let old = {
            let mut st = self.lock();
            match &*st {
                State::Open { generation: g, .. } if *g == generation => {
                    std::mem::replace(&mut *st, State::Closed)
                }
                _ => return,
            }
        };
        if let State::Open { conn, .. } = old {
            tracing::info!(connection = %self.label, "broker connection dropped after an error; the next delivery redials");
            spawn_close(conn);
        }
    }

    /// Closes the connection when nothing is in flight and the last delivery is older than the
    /// idle timeout (0 keeps it for good). Returns whether the slot now holds no connection.
    pub fn reap(&self, now: Instant) -> bool {
        let idle_ms = self.idle_timeout_ms.load(Ordering::Relaxed);
        let last = *self.last_used.lock().unwrap_or_else(|p| p.into_inner());
        let mut st = self.lock();
        let open = matches!(&*st, State::Open { .. });
        if !open {
            return true;
        }
        if idle_ms == 0
            || self.in_flight.load(Ordering::SeqCst) > 0
            || now.saturating_duration_since(last) < Duration::from_millis(idle_ms)
        {
            return false;
        }
        if let State::Open { conn, .. } = std::mem::replace(&mut *st, State::Closed) {
            drop(st);
            tracing::info!(connection = %self.label, idle_ms, "idle broker connection closed");
            spawn_close(conn);
        }
        true
    }

    pub fn is_open(&self) -> bool {
        matches!(&*self.lock(), State::Open { .. })
    }
}

fn spawn_close<C: Conn>(conn: C) {
    match tokio::runtime::Handle::try_current() {
        Ok(h) => {
            h.spawn(conn.close());
        }
        Err(_) => drop(conn),
    }
}

/// Slots by key. Holds them strongly, so a reload that drops the old sinks before building the
/// new ones keeps the connection; the reaper removes slots that are closed and unused.
pub struct Registry<C: Conn> {
    slots: Mutex<HashMap<String, Arc<Slot<C>>>>,
}

impl<C: Conn> Default for Registry<C> {
    fn default() -> Self {
        Registry {
            slots: Mutex::new(HashMap::new()),
        }
    }
}

impl<C: Conn> Registry<C> {
    /// The slot for `key` (a `digest`), created on first request.
    pub fn slot(&self, kind: &str, key: &str, idle_timeout_ms: u64, retry_ms: u64) -> Arc<Slot<C>> {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let slot = slots
            .entry(key.to_string())
            .or_insert_with(|| {
                Arc::new(Slot::new(
                    format!("{kind}:{}", &key[..key.len().min(12)]),
                    idle_timeout_ms,
                    retry_ms,
                ))
            })
            .clone();
        slot.configure(idle_timeout_ms, retry_ms);
        slot
    }

    /// Closes idle connections; forgets slots no sink holds any more.
    pub fn reap(&self, now: Instant) {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.retain(|_, s| {
            let closed = s.reap(now);
            !(closed && Arc::strong_count(s) == 1)
        });
    }

    pub fn len(&self) -> usize {
        self.slots.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn open_count(&self) -> usize {
        self.slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .filter(|s| s.is_open())
            .count()
    }
}

/// A key for a connection: SHA-256 over the parts (address, credentials, options), hex. The
/// parts never leave this function, so a password in them cannot reach a log or a name.
pub fn digest(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_be_bytes());
        h.update(p.as_bytes());
    }
    hex::encode(h.finalize())
}

/// The password of a URL's userinfo, as written and percent-decoded, for `scrub`.
pub fn url_secrets(raw: &str) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(u) = url::Url::parse(raw)
        && let Some(p) = u.password()
    {
        out.push(p.to_string());
        let decoded: String = url::form_urlencoded::parse(format!("p={p}").as_bytes())
            .map(|(_, v)| v.into_owned())
            .collect();
        if decoded != p {
            out.push(decoded);
        }
    }
    out
}

/// Removes every occurrence of the given secrets from a client library's error text.
pub fn scrub(text: impl Into<String>, secrets: &[&str]) -> String {
    let mut t = text.into();
    for s in secrets {
        if s.len() >= 3 {
            t = t.replace(s, "[redacted]");
            // Libraries may print the percent-encoded form of a URL's userinfo.
            let enc = url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
            if enc != *s {
                t = t.replace(&enc, "[redacted]");
            }
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone)]
    struct Fake(u32);
    impl Conn for Fake {}

    #[tokio::test]
    async fn dial_once_reuse_invalidate_and_reap() {
        let slot: Slot<Fake> = Slot::new("t:1".into(), 50, 1000);
        let dials = AtomicUsize::new(0);
        let open = || async {
            dials.fetch_add(1, Ordering::SeqCst);
            Ok(Fake(1))
        };
        let g1 = slot.get(open).await.unwrap().generation;
        let l2 = slot.get(open).await.unwrap();
        assert_eq!(dials.load(Ordering::SeqCst), 1);
        assert_eq!(l2.conn.0, 1);
        // Busy: never reaped.
        assert!(!slot.reap(Instant::now() + Duration::from_secs(10)));
        l2.invalidate();
        drop(l2);
        assert!(!slot.is_open());
        let l3 = slot.get(open).await.unwrap();
        assert_eq!(dials.load(Ordering::SeqCst), 2);
        assert!(l3.generation > g1);
        drop(l3);
        assert!(!slot.reap(Instant::now()));
        assert!(slot.reap(Instant::now() + Duration::from_millis(60)));
        assert!(!slot.is_open());
    }

    #[tokio::test]
    async fn failed_dial_backs_off() {
        let slot: Slot<Fake> = Slot::new("t:2".into(), 0, 60_000);
        let e = slot
            .get(|| async { Err::<Fake, _>("refused".to_string()) })
            .await
            .err()
            .unwrap();
        assert!(matches!(e, SinkError::Transient(ref m) if m.contains("not_connected")));
        // Within retry_ms: no new dial.
        let e = slot
            .get(|| async { panic!("must not dial") })
            .await
            .err()
            .unwrap();
        assert!(matches!(e, SinkError::Transient(_)));
    }

    #[test]
    fn scrub_removes_secrets() {
        assert_eq!(
            scrub("auth p@ss w0rd failed for p%40ss+w0rd", &["p@ss w0rd"]),
            "auth [redacted] failed for [redacted]"
        );
    }
}
