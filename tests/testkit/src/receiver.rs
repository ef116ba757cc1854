//! A webhook receiver: records what the gateways deliver; its answer can be switched to a
//! failure to make deliveries retry and dead-letter.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;

#[derive(Debug, Clone)]
pub struct Received {
    pub body: String,
    pub webhook_id: Option<String>,
}

#[derive(Default)]
struct Shared {
    status: AtomicU16,
    got: Mutex<Vec<Received>>,
    attempts: std::sync::atomic::AtomicU64,
}

pub struct Receiver {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

async fn hook(State(s): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> StatusCode {
    s.attempts.fetch_add(1, Ordering::Relaxed);
    let code = StatusCode::from_u16(s.status.load(Ordering::Relaxed)).unwrap_or(StatusCode::OK);
    if code.is_success() {
        s.got.lock().unwrap().push(Received {
            body: String::from_utf8_lossy(&body).into_owned(),
            webhook_id: headers
                .get("webhook-id")
                .and_then(|v| v.to_str().ok())
                .map(String::from),
        });
    }
    code
}

impl Receiver {
    /// Listens on `ip`, a free port, path `/hooks`.
    pub async fn start(ip: &str) -> anyhow::Result<Receiver> {
        let shared = Arc::new(Shared {
            status: AtomicU16::new(200),
            ..Default::default()
        });
        let listener = tokio::net::TcpListener::bind((ip, 0)).await?;
        let addr = listener.local_addr()?;
        let app = Router::new()
            .route("/hooks", post(hook))
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Receiver { addr, shared, task })
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

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}
