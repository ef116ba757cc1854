//! The restart tests' driver: a broker process the test kills (SIGKILL) and starts again while
//! hooks flow, deliveries retried the way dispatch retries them, and the checks that follow
//! (every hook found afterwards, some attempt failed in between). For an in-memory emulator
//! (moto, the Pub/Sub emulator) the restart is staged: deliveries held while the consumer takes
//! what was acknowledged, and again while the emulator comes back and is set up anew.

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ankusa_core::{Envelope, Sink};

use super::{Owned, ctx, hook, wait_port};

/// Hook ids a test's consumer has seen.
pub type Ids = Arc<Mutex<HashSet<String>>>;

/// Lets a restart task hold deliveries back for a moment (to drain an in-memory emulator
/// before killing it, or to recreate its queue after the restart), and records which hooks were
/// acknowledged.
#[derive(Clone, Default)]
pub struct Gate {
    pub lock: Arc<tokio::sync::RwLock<()>>,
    pub acked: Ids,
}

/// A broker process of the test's own that `start` makes (again), listening on `port`.
#[derive(Clone)]
pub struct Restartable {
    server: Arc<Mutex<Owned>>,
    start: Arc<dyn Fn() -> Owned + Send + Sync>,
    pub port: u16,
    /// How long the broker may take to listen after a start.
    up_within: Duration,
}

impl Restartable {
    /// Starts the broker and waits (at most `up_within`) until it listens on `port`.
    pub async fn start(
        port: u16,
        up_within: Duration,
        start: impl Fn() -> Owned + Send + Sync + 'static,
    ) -> Restartable {
        let r = Restartable {
            server: Arc::new(Mutex::new(start())),
            start: Arc::new(start),
            port,
            up_within,
        };
        wait_port(port, up_within).await;
        r
    }

    /// SIGKILL now.
    pub fn kill(&self) {
        self.server.lock().unwrap().kill();
    }

    /// Starts the broker again (without waiting for it to listen).
    pub fn respawn(&self) {
        *self.server.lock().unwrap() = (self.start)();
    }

    /// The restart task of a durable broker: after `after`, SIGKILL, down for `down`, started
    /// again.
    pub fn crash(&self, after: Duration, down: Duration) -> impl Future<Output = ()> + use<> {
        let me = self.clone();
        async move {
            tokio::time::sleep(after).await;
            me.kill();
            tokio::time::sleep(down).await;
            me.respawn();
        }
    }

    /// The restart task of an in-memory emulator: after 400 ms deliveries are held until the
    /// consumer has `received` every acknowledged hook (20 s at most), the emulator is killed;
    /// 800 ms later, deliveries held again, it is started, and `ready` (recreating its topic or
    /// queue) runs once it listens.
    pub fn crash_emulator<F>(
        &self,
        gate: Gate,
        received: Ids,
        ready: F,
    ) -> impl Future<Output = ()> + use<F>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let me = self.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(400)).await;
            {
                let _hold = gate.lock.write().await;
                // The emulator keeps nothing: let the consumer take what was acknowledged.
                let deadline = Instant::now() + Duration::from_secs(20);
                loop {
                    let acked = gate.acked.lock().unwrap().clone();
                    if acked.is_subset(&received.lock().unwrap()) || Instant::now() > deadline {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                me.kill();
            }
            tokio::time::sleep(Duration::from_millis(800)).await;
            let _hold = gate.lock.write().await;
            me.respawn();
            wait_port(me.port, me.up_within).await;
            ready.await;
        }
    }
}

/// A consumer task that keeps adding the hook ids `poll` returns to `ids`; abort it at the end.
pub fn collect_ids<F, Fut>(ids: Ids, poll: F) -> tokio::task::JoinHandle<()>
where
    F: Fn() -> Fut + Send + 'static,
    Fut: Future<Output = Vec<String>> + Send + 'static,
{
    tokio::spawn(async move {
        loop {
            let got = poll().await;
            ids.lock().unwrap().extend(got);
        }
    })
}

/// What a restart run delivered.
pub struct Delivered {
    pub hooks: Vec<Envelope>,
    /// Attempts that failed (and were retried).
    pub failures: usize,
    /// The first failures' texts.
    pub reasons: Vec<String>,
}

impl Delivered {
    /// Every hook is among `ids` (what the broker holds afterwards) and the restart made some
    /// attempt fail; prints the run as `what`.
    pub fn none_lost(&self, what: &str, ids: &HashSet<String>) {
        for h in &self.hooks {
            assert!(
                ids.contains(&h.id.to_string()),
                "hook {} lost ({} ids found)",
                h.id,
                ids.len()
            );
        }
        assert!(self.failures > 0, "the restart caused no failed delivery");
        eprintln!(
            "{what}: {} hooks, {} ids found, {} failed attempts retried, e.g. {:?}",
            self.hooks.len(),
            ids.len(),
            self.failures,
            self.reasons
        );
    }

    /// Waits (20 s at most) until the consumer has `received` every hook, then as `none_lost`.
    pub async fn all_received(&self, what: &str, received: &Ids) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let missing = self
                .hooks
                .iter()
                .filter(|h| !received.lock().unwrap().contains(&h.id.to_string()))
                .count();
            if missing == 0 {
                break;
            }
            assert!(Instant::now() < deadline, "{missing} hooks lost");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let ids = received.lock().unwrap().clone();
        self.none_lost(what, &ids);
    }
}

/// Delivers `n` hooks through `sink` the way dispatch would: each one retried after a failure
/// until it succeeds or `deadline` passes; `during` runs concurrently (it kills and restarts the
/// broker).
pub async fn deliver_through_restart<F>(
    sink: Arc<dyn Sink>,
    n: usize,
    pause: Duration,
    deadline: Duration,
    gate: Gate,
    during: F,
) -> Delivered
where
    F: Future<Output = ()> + Send + 'static,
{
    let chaos = tokio::spawn(during);
    let end = Instant::now() + deadline;
    let mut out = Delivered {
        hooks: Vec::new(),
        failures: 0,
        reasons: Vec::new(),
    };
    for i in 0..n {
        let env = hook(format!("{{\"n\":{i}}}").as_bytes());
        let mut c = ctx();
        loop {
            assert!(
                Instant::now() < end,
                "hook {i} not delivered before the deadline"
            );
            let held = gate.lock.read().await;
            let r = tokio::time::timeout(Duration::from_secs(10), sink.deliver(&env, &c)).await;
            drop(held);
            let reason = match r {
                Ok(Ok(())) => {
                    gate.acked.lock().unwrap().insert(env.id.to_string());
                    break;
                }
                Ok(Err(e)) => {
                    assert!(
                        !e.is_permanent(),
                        "a broker restart is never permanent: {e}"
                    );
                    e.to_string()
                }
                Err(_) => "attempt timed out (dispatch's attempt_timeout)".into(),
            };
            out.failures += 1;
            if out.reasons.len() < 5 {
                out.reasons.push(reason);
            }
            c.attempt += 1;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        out.hooks.push(env);
        tokio::time::sleep(pause).await;
    }
    chaos.await.expect("the restart task");
    out
}
