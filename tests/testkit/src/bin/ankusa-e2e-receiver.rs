//! The webhook consumer of the real-node suite, run as a pod: it checks the Standard Webhooks
//! signature of every delivery independently of the gateway's code (HMAC-SHA256 over
//! `{webhook-id}.{webhook-timestamp}.{body}` with the keys in `RECEIVER_SECRETS`), records the
//! hook ids (`x-ankusa-id`) it accepted and the ones whose signature did not verify, and answers
//! with a status the test can switch (`PUT /answer/<code>`) to simulate an outage.
//!
//! Env: `RECEIVER_SECRETS` (comma-separated, `whsec_<base64>` or raw), `RECEIVER_ADDR`
//! (default `0.0.0.0:8080`). Routes: `POST /hooks`, `GET /stats`, `PUT /answer/{code}`,
//! `GET /health`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post, put};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

#[derive(Default)]
struct Shared {
    keys: Vec<Vec<u8>>,
    answer: AtomicU16,
    attempts: AtomicU64,
    /// Hook id → deliveries accepted (a redelivery of the same id counts again).
    delivered: Mutex<HashMap<String, u64>>,
    /// Hook ids (or `?` when absent) whose signature did not verify.
    bad: Mutex<Vec<String>>,
}

fn header<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// Whether one `v1,<base64>` entry of `webhook-signature` matches one key.
fn verified(keys: &[Vec<u8>], h: &HeaderMap, body: &[u8]) -> bool {
    let (Some(id), Some(ts), Some(sig)) = (
        header(h, "webhook-id"),
        header(h, "webhook-timestamp"),
        header(h, "webhook-signature"),
    ) else {
        return false;
    };
    let wanted: Vec<Vec<u8>> = sig
        .split(' ')
        .filter_map(|e| e.strip_prefix("v1,"))
        .filter_map(|b| STANDARD.decode(b).ok())
        .collect();
    keys.iter().any(|k| {
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(k) else {
            return false;
        };
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(ts.as_bytes());
        mac.update(b".");
        mac.update(body);
        let got = mac.finalize().into_bytes();
        wanted.iter().any(|w| w.as_slice() == got.as_slice())
    })
}

async fn hook(State(s): State<Arc<Shared>>, h: HeaderMap, body: Bytes) -> StatusCode {
    s.attempts.fetch_add(1, Ordering::Relaxed);
    let id = header(&h, "x-ankusa-id").unwrap_or("?").to_string();
    if !verified(&s.keys, &h, &body) {
        s.bad.lock().unwrap_or_else(|p| p.into_inner()).push(id);
        return StatusCode::BAD_REQUEST;
    }
    let code = StatusCode::from_u16(s.answer.load(Ordering::Relaxed)).unwrap_or(StatusCode::OK);
    if code.is_success() {
        *s.delivered
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(id)
            .or_default() += 1;
    }
    code
}

async fn stats(State(s): State<Arc<Shared>>) -> Json<serde_json::Value> {
    let delivered = s
        .delivered
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let bad = s.bad.lock().unwrap_or_else(|p| p.into_inner()).clone();
    Json(serde_json::json!({
        "attempts": s.attempts.load(Ordering::Relaxed),
        "answer": s.answer.load(Ordering::Relaxed),
        "delivered": delivered,
        "bad_signatures": bad,
    }))
}

async fn answer(State(s): State<Arc<Shared>>, Path(code): Path<u16>) -> StatusCode {
    if StatusCode::from_u16(code).is_err() {
        return StatusCode::BAD_REQUEST;
    }
    s.answer.store(code, Ordering::Relaxed);
    StatusCode::NO_CONTENT
}

fn key(secret: &str) -> anyhow::Result<Vec<u8>> {
    Ok(match secret.strip_prefix("whsec_") {
        Some(b64) => STANDARD.decode(b64)?,
        None => secret.as_bytes().to_vec(),
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let keys = std::env::var("RECEIVER_SECRETS")
        .unwrap_or_default()
        .split(',')
        .filter(|s| !s.is_empty())
        .map(key)
        .collect::<anyhow::Result<Vec<_>>>()?;
    anyhow::ensure!(!keys.is_empty(), "RECEIVER_SECRETS is empty");
    let addr = std::env::var("RECEIVER_ADDR").unwrap_or_else(|_| "0.0.0.0:8080".into());
    let shared = Arc::new(Shared {
        keys,
        answer: AtomicU16::new(200),
        ..Default::default()
    });
    let app = Router::new()
        .route("/hooks", post(hook))
        .route("/stats", get(stats))
        .route("/answer/{code}", put(answer))
        .route("/health", get(|| async { "ok" }))
        .with_state(shared);
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    eprintln!("ankusa-e2e-receiver listening on {addr}");
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            term.recv().await;
        })
        .await?;
    Ok(())
}
