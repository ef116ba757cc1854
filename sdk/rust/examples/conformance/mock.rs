//! The mock claim gateway of `redeem_claim` cases: a real HTTP server on 127.0.0.1 (port 0)
//! that answers every request with the case's `gateway` (after its `delay_ms`) and records the
//! requests it got.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::{Map, Value, json};

/// The answer of every request.
#[derive(Debug, Clone, Default)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub delay: Duration,
}

#[derive(Default)]
struct Shared {
    reply: Reply,
    requests: Vec<Value>,
}

#[derive(Clone)]
pub struct MockGateway {
    pub addr: SocketAddr,
    shared: Arc<Mutex<Shared>>,
}

impl MockGateway {
    pub async fn start() -> std::io::Result<MockGateway> {
        let shared = Arc::new(Mutex::new(Shared::default()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let app = Router::new().fallback(answer).with_state(shared.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(MockGateway { addr, shared })
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Answers with `reply` from now on, and forgets the requests recorded so far.
    pub fn reset(&self, reply: Reply) {
        let mut s = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        s.reply = reply;
        s.requests.clear();
    }

    /// `{method, path, headers}` of each request since the last reset, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.shared
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .requests
            .clone()
    }
}

async fn answer(State(shared): State<Arc<Mutex<Shared>>>, req: Request) -> Response {
    let reply = {
        let mut s = shared.lock().unwrap_or_else(|p| p.into_inner());
        let mut headers = Map::new();
        for (name, value) in req.headers() {
            headers
                .entry(name.as_str().to_string())
                .or_insert_with(|| json!(String::from_utf8_lossy(value.as_bytes())));
        }
        s.requests.push(json!({
            "method": req.method().as_str(),
            "path": req.uri().path(),
            "headers": headers,
        }));
        s.reply.clone()
    };
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let mut resp = Response::new(Body::from(reply.body));
    *resp.status_mut() =
        StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    for (k, v) in reply.headers {
        if let (Ok(k), Ok(v)) = (
            HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(&v),
        ) {
            resp.headers_mut().append(k, v);
        }
    }
    resp
}

/// A loopback URL where nothing listens: a port bound and released.
pub fn closed_port_url() -> std::io::Result<String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = l.local_addr()?;
    drop(l);
    Ok(format!("http://{addr}"))
}
