//! A webhook receiver for the operator's scenarios: `POST /hooks` recorded when its answer (a
//! status the test switches to make deliveries retry and dead-letter) is a success. A fixed
//! script over the one test HTTP receiver, `scripted`, which it imports.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::scripted::{self, Reply};

#[derive(Debug, Clone)]
pub struct Received {
    pub body: String,
    pub webhook_id: Option<String>,
}

#[derive(Default)]
struct Shared {
    status: AtomicU16,
    got: Mutex<Vec<Received>>,
    attempts: AtomicU64,
}

pub struct Receiver {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    _http: scripted::Receiver,
}

impl Receiver {
    /// Listens on `ip`, a free port, path `/hooks` (anything else is answered 404).
    pub async fn start(ip: &str) -> anyhow::Result<Receiver> {
        let shared = Arc::new(Shared {
            status: AtomicU16::new(200),
            ..Default::default()
        });
        let s = shared.clone();
        let http = scripted::Receiver::start_on(ip, move |_, req| {
            if req.path != "/hooks" {
                return Reply::status(404);
            }
            s.attempts.fetch_add(1, Ordering::Relaxed);
            let code = s.status.load(Ordering::Relaxed);
            if (200..300).contains(&code) {
                s.got.lock().unwrap().push(Received {
                    body: String::from_utf8_lossy(&req.body).into_owned(),
                    webhook_id: req.header("webhook-id"),
                });
            }
            Reply::status(code)
        })
        .await?;
        Ok(Receiver {
            addr: http.addr,
            shared,
            _http: http,
        })
    }

    pub fn url(&self) -> String {
        format!("http://{}/hooks", self.addr)
    }

    /// The status code answered from now on (200 accepts and records).
    pub fn answer(&self, status: u16) {
        self.shared.status.store(status, Ordering::Relaxed);
    }

    pub fn received(&self) -> Vec<Received> {
        self.shared.got.lock().unwrap().clone()
    }

    pub fn attempts(&self) -> u64 {
        self.shared.attempts.load(Ordering::Relaxed)
    }

    /// Waits until `pred` holds for the received hooks.
    pub async fn wait_for(&self, timeout: Duration, pred: impl Fn(&[Received]) -> bool) -> bool {
        let end = tokio::time::Instant::now() + timeout;
        loop {
            if pred(&self.received()) {
                return true;
            }
            if tokio::time::Instant::now() > end {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
