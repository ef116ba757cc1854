//! The test HTTP receiver: records every request and answers what the test's script says
//! (status, headers, delay, body size), over HTTP or TLS. The gateway's black-box tests use it
//! as their webhook consumer; `receiver` is the operator tests' fixed-answer view of it.
//! Imports nothing of the crate.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Version};
use axum::response::Response;

#[derive(Clone, Debug)]
pub struct Received {
    pub path: String,
    /// The HTTP version the request came over.
    pub version: Version,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub at: Instant,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(String::from)
    }
}

#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub delay: Duration,
    /// Bytes of response body to stream back.
    pub body_bytes: usize,
}

impl Reply {
    pub fn status(status: u16) -> Reply {
        Reply {
            status,
            headers: vec![],
            delay: Duration::ZERO,
            body_bytes: 0,
        }
    }
    pub fn header(mut self, k: &str, v: &str) -> Reply {
        self.headers.push((k.into(), v.into()));
        self
    }
    pub fn delay(mut self, d: Duration) -> Reply {
        self.delay = d;
        self
    }
    pub fn body(mut self, n: usize) -> Reply {
        self.body_bytes = n;
        self
    }
}

/// The HTTP versions a receiver of `start_offering` serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offer {
    /// HTTP/1.1 only (over TLS, ALPN `http/1.1`).
    Http1,
    /// HTTP/2 only: h2c with prior knowledge, or ALPN `h2`.
    Http2,
    /// Over TLS, ALPN `h2` and `http/1.1` (the client picks); in plaintext HTTP/1.1, or h2c
    /// when the connection opens with the HTTP/2 preface.
    Both,
}

pub type Script = Arc<dyn Fn(usize, &Received) -> Reply + Send + Sync>;

#[derive(Clone)]
struct St {
    received: Arc<Mutex<Vec<Received>>>,
    script: Arc<Mutex<Script>>,
}

pub struct Receiver {
    pub addr: SocketAddr,
    received: Arc<Mutex<Vec<Received>>>,
    script: Arc<Mutex<Script>>,
    task: tokio::task::JoinHandle<()>,
    /// TCP connections accepted (counted by `start_offering` and `start_tls` only).
    connections: Arc<AtomicUsize>,
}

impl Receiver {
    /// Starts on 127.0.0.1 answering every request with `script`.
    pub async fn start(
        script: impl Fn(usize, &Received) -> Reply + Send + Sync + 'static,
    ) -> Receiver {
        Self::start_on("127.0.0.1", script)
            .await
            .expect("bind the receiver")
    }

    /// Starts on `ip` (a free port) answering every request with `script`.
    pub async fn start_on(
        ip: &str,
        script: impl Fn(usize, &Received) -> Reply + Send + Sync + 'static,
    ) -> std::io::Result<Receiver> {
        Self::serve(ip, script, |listener, app| async move {
            let _ = axum::serve(listener, app).await;
        })
        .await
    }

    /// Binds `ip` and runs `serve` with the listener and the recording app.
    async fn serve<F: std::future::Future<Output = ()> + Send + 'static>(
        ip: &str,
        script: impl Fn(usize, &Received) -> Reply + Send + Sync + 'static,
        serve: impl FnOnce(tokio::net::TcpListener, axum::Router) -> F,
    ) -> std::io::Result<Receiver> {
        let received = Arc::new(Mutex::new(Vec::new()));
        let script: Arc<Mutex<Script>> = Arc::new(Mutex::new(Arc::new(script)));
        let st = St {
            received: received.clone(),
            script: script.clone(),
        };
        let app = axum::Router::new().fallback(handle).with_state(st);
        let listener = tokio::net::TcpListener::bind((ip, 0)).await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(serve(listener, app));
        Ok(Receiver {
            addr,
            received,
            script,
            task,
            connections: Arc::default(),
        })
    }

    /// Like `start`, over TLS (HTTP/1.1) with the given PEM certificate chain and PKCS#8 key.
    pub async fn start_tls(
        cert_pem: &[u8],
        key_pem: &[u8],
        script: impl Fn(usize, &Received) -> Reply + Send + Sync + 'static,
    ) -> Receiver {
        Self::start_offering(Offer::Http1, Some((cert_pem, key_pem)), script).await
    }

    /// Like `start`, serving the HTTP versions of `offer`, over TLS when `tls` holds a PEM
    /// certificate chain and PKCS#8 key; counts the TLS or TCP connections it accepts.
    pub async fn start_offering(
        offer: Offer,
        tls: Option<(&[u8], &[u8])>,
        script: impl Fn(usize, &Received) -> Reply + Send + Sync + 'static,
    ) -> Receiver {
        use tower::Service;

        let acceptor = tls.map(|(cert, key)| tls_acceptor(cert, key, offer));
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = connections.clone();
        let mut receiver = Self::serve("127.0.0.1", script, |listener, app| async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                counted.fetch_add(1, Ordering::SeqCst);
                let acceptor = acceptor.clone();
                let app = app.clone();
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req| app.clone().call(req));
                    match acceptor {
                        Some(acceptor) => {
                            // A client that rejects our certificate (or offers none of our
                            // protocols) aborts the handshake: nothing to serve.
                            let Ok(stream) = acceptor.accept(tcp).await else {
                                return;
                            };
                            let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2".as_slice());
                            serve_connection(stream, h2, svc).await;
                        }
                        None => {
                            let h2 = match offer {
                                Offer::Http1 => false,
                                Offer::Http2 => true,
                                Offer::Both => opens_with_h2_preface(&tcp).await,
                            };
                            serve_connection(tcp, h2, svc).await;
                        }
                    }
                });
            }
        })
        .await
        .expect("bind the receiver");
        receiver.connections = connections;
        receiver
    }

    /// TCP connections accepted so far (`start_offering` and `start_tls` receivers).
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub fn set(&self, script: impl Fn(usize, &Received) -> Reply + Send + Sync + 'static) {
        *self.script.lock().unwrap() = Arc::new(script);
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    pub fn count(&self) -> usize {
        self.received.lock().unwrap().len()
    }

    /// Waits until `pred` holds over what was received.
    pub async fn wait_for(
        &self,
        timeout: Duration,
        pred: impl Fn(&[Received]) -> bool,
    ) -> Vec<Received> {
        let deadline = Instant::now() + timeout;
        loop {
            let r = self.received();
            if pred(&r) {
                return r;
            }
            if Instant::now() > deadline {
                panic!(
                    "receiver condition not met after {timeout:?}; got {} requests",
                    r.len()
                );
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A rustls acceptor for the certificate and key, offering `offer`'s protocols by ALPN.
fn tls_acceptor(cert_pem: &[u8], key_pem: &[u8], offer: Offer) -> tokio_rustls::TlsAcceptor {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};

    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(key_pem).unwrap();
    let mut tls = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    tls.alpn_protocols = match offer {
        Offer::Http1 => vec![b"http/1.1".to_vec()],
        Offer::Http2 => vec![b"h2".to_vec()],
        Offer::Both => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
    };
    tokio_rustls::TlsAcceptor::from(Arc::new(tls))
}

/// Serves one connection as HTTP/2 (`h2`) or HTTP/1.1.
async fn serve_connection<I, S>(io: I, h2: bool, svc: S)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    S: hyper::service::Service<
            hyper::Request<hyper::body::Incoming>,
            Response = Response,
            Error = std::convert::Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let io = hyper_util::rt::TokioIo::new(io);
    if h2 {
        let _ = hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
            .serve_connection(io, svc)
            .await;
    } else {
        let _ = hyper::server::conn::http1::Builder::new()
            .serve_connection(io, svc)
            .await;
    }
}

/// Whether a plaintext connection opens with the HTTP/2 client preface (h2c with prior
/// knowledge), read without consuming it.
async fn opens_with_h2_preface(tcp: &tokio::net::TcpStream) -> bool {
    const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n";
    let mut buf = [0u8; 16];
    for _ in 0..1000 {
        let n = tcp.peek(&mut buf).await.unwrap_or(0);
        if n == 0 || n >= PREFACE.len() || !PREFACE.starts_with(&buf[..n]) {
            return n >= PREFACE.len() && buf.starts_with(PREFACE);
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    false
}

async fn handle(State(st): State<St>, req: axum::extract::Request) -> Response {
    let (parts, body) = req.into_parts();
    let body = axum::body::to_bytes(body, 64 << 20)
        .await
        .unwrap_or_default();
    let rec = Received {
        path: parts.uri.path().to_string(),
        version: parts.version,
        headers: parts.headers,
        body,
        at: Instant::now(),
    };
    let n = {
        let mut r = st.received.lock().unwrap();
        r.push(rec.clone());
        r.len()
    };
    let script = st.script.lock().unwrap().clone();
    let reply = script(n, &rec);
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let body = if reply.body_bytes > 0 {
        let chunks = reply.body_bytes.div_ceil(65_536);
        let stream = futures::stream::iter(
            (0..chunks).map(|_| Ok::<_, std::io::Error>(Bytes::from(vec![b'r'; 65_536]))),
        );
        Body::from_stream(stream)
    } else {
        Body::empty()
    };
    let mut resp = Response::new(body);
    *resp.status_mut() = StatusCode::from_u16(reply.status).unwrap();
    for (k, v) in reply.headers {
        resp.headers_mut().insert(
            axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    resp
}
