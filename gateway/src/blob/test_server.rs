//! A scripted HTTP server on 127.0.0.1 for the unit tests of the stores' auth: it records each
//! request (method, path and query, headers, body) and answers what the test's closure says.
//! It stands in for token endpoints (OAuth2, the metadata server) and, where a test checks
//! only the `Authorization` a store sends, for the store.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};

#[derive(Clone, Debug)]
pub struct Seen {
    pub method: Method,
    pub uri: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

type Script = dyn Fn(&Seen) -> (u16, String) + Send + Sync;

pub struct Server {
    pub base: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    /// Serves `script`'s `(status, JSON body)` for every request.
    pub async fn start(script: impl Fn(&Seen) -> (u16, String) + Send + Sync + 'static) -> Server {
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let script: Arc<Script> = Arc::new(script);
        let (rec, run) = (seen.clone(), script.clone());
        let app = axum::Router::new().fallback(
            move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                let (rec, run) = (rec.clone(), run.clone());
                async move {
                    let s = Seen {
                        method,
                        uri: uri.to_string(),
                        headers,
                        body,
                    };
                    let (status, body) = run(&s);
                    rec.lock().expect("lock").push(s);
                    let mut r: Response = body.into_response();
                    *r.status_mut() = StatusCode::from_u16(status).expect("status");
                    r.headers_mut().insert(
                        "content-type",
                        axum::http::HeaderValue::from_static("application/json"),
                    );
                    r
                }
            },
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Server { base, seen, task }
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("lock").clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}
