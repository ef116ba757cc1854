//! Shared pieces of the benchmark binaries: a latency histogram, a keep-alive HTTP/1 load
//! generator, a no-op server (the ceiling of the HTTP stack), the durability floor (`floor`),
//! and starting the release `ankusa` binary on free ports.

pub mod cpu;
pub mod floor;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;

/// Microsecond latencies, kept whole (a few million entries at most).
#[derive(Default, Clone)]
pub struct Latencies(pub Vec<u32>);

impl Latencies {
    pub fn record(&mut self, d: Duration) {
        self.0.push(d.as_micros().min(u32::MAX as u128) as u32);
    }
    pub fn merge(&mut self, other: Latencies) {
        self.0.extend(other.0);
    }
    /// The q-quantile in milliseconds.
    pub fn quantile_ms(&mut self, q: f64) -> f64 {
        if self.0.is_empty() {
            return 0.0;
        }
        self.0.sort_unstable();
        let i = ((self.0.len() as f64 - 1.0) * q).round() as usize;
        self.0[i] as f64 / 1000.0
    }
}

/// What one request of the load looks like.
pub type MakeRequest = Arc<dyn Fn(u64) -> Request<Full<Bytes>> + Send + Sync>;

#[derive(Default)]
pub struct LoadResult {
    /// 2xx answers in the measured window.
    pub ok: u64,
    /// 2xx answers in all, warm-up and the requests in flight at the end included: what a
    /// peer must have passed on.
    pub all_ok: u64,
    pub refused: u64,
    pub errors: u64,
    pub elapsed: Duration,
    pub latencies: Latencies,
}

impl LoadResult {
    pub fn per_sec(&self) -> f64 {
        self.ok as f64 / self.elapsed.as_secs_f64()
    }

    /// The JSON line of a load case of 1 KiB bodies over `connections`.
    pub fn line(&mut self, case: &str, connections: usize) -> serde_json::Value {
        serde_json::json!({
            "case": case,
            "connections": connections,
            "body_bytes": 1024,
            "seconds": (self.elapsed.as_secs_f64() * 100.0).round() / 100.0,
            "accepted": self.ok,
            "accepted_per_s": self.per_sec().round(),
            "refused": self.refused,
            "errors": self.errors,
            "p50_ms": self.latencies.quantile_ms(0.50),
            "p99_ms": self.latencies.quantile_ms(0.99),
            "max_ms": self.latencies.quantile_ms(1.0),
        })
    }
}

/// Drives `connections` keep-alive HTTP/1 connections, each sending its next request as soon
/// as the previous answer arrived, for `duration` (after `warmup`). A 2xx counts as ok.
/// `per_conn_rate` paces each connection (requests per second) when set.
pub async fn closed_loop(
    addr: SocketAddr,
    connections: usize,
    warmup: Duration,
    duration: Duration,
    per_conn_rate: Option<f64>,
    make: MakeRequest,
) -> anyhow::Result<LoadResult> {
    let measuring = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let seq = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let (measuring, stop, seq, make) =
            (measuring.clone(), stop.clone(), seq.clone(), make.clone());
        tasks.push(tokio::spawn(async move {
            let mut lat = Latencies::default();
            let (mut ok, mut all_ok, mut refused, mut errors) = (0u64, 0u64, 0u64, 0u64);
            'reconnect: while !stop.load(Ordering::Relaxed) {
                let Ok(stream) = tokio::net::TcpStream::connect(addr).await else {
                    errors += 1;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let Ok((mut sender, conn)) =
                    hyper::client::conn::http1::handshake(TokioIo::new(stream)).await
                else {
                    errors += 1;
                    continue;
                };
                tokio::spawn(conn);
                let interval = per_conn_rate.map(|r| Duration::from_secs_f64(1.0 / r));
                let mut next = Instant::now();
                while !stop.load(Ordering::Relaxed) {
                    if let Some(iv) = interval {
                        next += iv;
                        let now = Instant::now();
                        if next > now {
                            tokio::time::sleep(next - now).await;
                        }
                    }
                    if sender.ready().await.is_err() {
                        errors += 1;
                        continue 'reconnect;
                    }
                    let req = make(seq.fetch_add(1, Ordering::Relaxed));
                    let t = Instant::now();
                    let resp = match sender.send_request(req).await {
                        Ok(r) => r,
                        Err(_) => {
                            errors += 1;
                            continue 'reconnect;
                        }
                    };
                    let status = resp.status();
                    if resp.into_body().collect().await.is_err() {
                        errors += 1;
                        continue 'reconnect;
                    }
                    all_ok += u64::from(status.is_success());
                    if measuring.load(Ordering::Relaxed) {
                        if status.is_success() {
                            ok += 1;
                            lat.record(t.elapsed());
                        } else {
                            refused += 1;
                        }
                    }
                }
            }
            (ok, all_ok, refused, errors, lat)
        }));
    }
    tokio::time::sleep(warmup).await;
    measuring.store(true, Ordering::SeqCst);
    let started = Instant::now();
    tokio::time::sleep(duration).await;
    measuring.store(false, Ordering::SeqCst);
    let elapsed = started.elapsed();
    stop.store(true, Ordering::SeqCst);
    let mut out = LoadResult {
        elapsed,
        ..LoadResult::default()
    };
    for t in tasks {
        let (ok, all_ok, refused, errors, lat) = t.await?;
        out.ok += ok;
        out.all_ok += all_ok;
        out.refused += refused;
        out.errors += errors;
        out.latencies.merge(lat);
    }
    Ok(out)
}

/// Runs a no-op HTTP server on the gateway's own stack (`serve_gateway_stack`) that reads the
/// body and answers `status` with the same small JSON body a `201` of the gateway carries.
/// Blocks; meant for a child process.
pub fn run_noop_server(addr: SocketAddr, status: u16) -> anyhow::Result<()> {
    let status = axum::http::StatusCode::from_u16(status).unwrap_or(axum::http::StatusCode::OK);
    serve_gateway_stack(
        addr,
        axum::Router::new().fallback(move |_body: Bytes| async move { accepted_reply(status) }),
    )
}

/// The reply of the no-op and floor servers: the JSON body of a gateway's `201`.
pub fn accepted_reply(
    status: axum::http::StatusCode,
) -> (axum::http::StatusCode, axum::Json<serde_json::Value>) {
    (
        status,
        axum::Json(serde_json::json!({
            "status": "accepted",
            "id": "01a2290a-306d-73ad-b310-cd19dd355968",
        })),
    )
}

/// Serves `app` the way the gateway serves ingest: `axum::serve` on a multi-thread tokio
/// runtime, TCP_NODELAY on every connection. Blocks.
pub fn serve_gateway_stack(addr: SocketAddr, app: axum::Router) -> anyhow::Result<()> {
    use axum::serve::ListenerExt;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await?.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        axum::serve(listener, app).await?;
        Ok(())
    })
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// The release `ankusa` binary next to this benchmark's own executable.
pub fn ankusa_bin() -> PathBuf {
    if let Ok(p) = std::env::var("ANKUSA_BIN") {
        return p.into();
    }
    let me = std::env::current_exe().expect("current exe");
    me.parent().expect("exe dir").join("ankusa")
}

/// A child process killed on drop.
pub struct ChildGuard(pub Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The benchmark's first argument as seconds per case (10 when absent or not a number).
pub fn seconds_arg() -> Duration {
    Duration::from_secs(
        std::env::args()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(10),
    )
}

/// Waits until `addr` accepts a connection; fails when `child` (the process that should
/// listen there) exits first or `timeout` passes.
pub fn wait_listening(
    addr: SocketAddr,
    child: &mut Child,
    timeout: Duration,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    while std::net::TcpStream::connect(addr).is_err() {
        if let Some(status) = child.try_wait()? {
            anyhow::bail!("the process meant to listen on {addr} exited: {status}");
        }
        if Instant::now() > deadline {
            anyhow::bail!("nothing accepted a connection on {addr} within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// Runs this benchmark's own executable as `<exe> <role> <port>` (a receiver or a no-op
/// server in its own process) and waits until it accepts connections.
pub fn spawn_self(role: &str) -> anyhow::Result<(ChildGuard, SocketAddr)> {
    spawn_self_on(role, free_port())
}

/// `spawn_self` on a port the caller chose (a sink's address that was closed until now).
pub fn spawn_self_on(role: &str, port: u16) -> anyhow::Result<(ChildGuard, SocketAddr)> {
    let mut child = ChildGuard(
        Command::new(std::env::current_exe()?)
            .args([role, &port.to_string()])
            .stdout(Stdio::null())
            .spawn()?,
    );
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    wait_listening(addr, &mut child.0, Duration::from_secs(10))
        .map_err(|e| anyhow::anyhow!("{role}: {e}"))?;
    Ok((child, addr))
}

pub struct GatewayProc {
    pub child: ChildGuard,
    pub ingest: SocketAddr,
    pub admin: SocketAddr,
    pub dir: tempfile::TempDir,
}

/// Starts the release gateway with `config` on free ports and waits for `/ready`.
pub fn start_gateway(config: &str) -> anyhow::Result<GatewayProc> {
    start_gateway_in(config, tempfile::tempdir()?)
}

/// `start_gateway` with its config and data dir in `dir` (e.g. a temp dir on tmpfs).
pub fn start_gateway_in(config: &str, dir: tempfile::TempDir) -> anyhow::Result<GatewayProc> {
    let data = dir.path().join("data");
    let g = spawn_gateway(config, dir, &data)?;
    wait_http_ok(g.admin, "/ready", Duration::from_secs(60))?;
    Ok(g)
}

/// Starts the release gateway with `config` (written to `dir`) on the data dir `data` and free
/// ports, without waiting for it to be ready.
pub fn spawn_gateway(
    config: &str,
    dir: tempfile::TempDir,
    data: &std::path::Path,
) -> anyhow::Result<GatewayProc> {
    let cfg = dir.path().join("ankusa.yml");
    std::fs::write(&cfg, config)?;
    let ingest = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let admin = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let claims = free_port();
    let child = Command::new(ankusa_bin())
        .arg("--config")
        .arg(&cfg)
        .env("ANKUSA_DATA_DIR", data)
        .env("ANKUSA_HTTP_IP", "127.0.0.1")
        .env("ANKUSA_HTTP_PORT", ingest.port().to_string())
        .env("ANKUSA_ADMIN_PORT", admin.port().to_string())
        .env("ANKUSA_CLAIM_CHECK_PORT", claims.to_string())
        .env("ANKUSA_LOG_LEVEL", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()?;
    Ok(GatewayProc {
        child: ChildGuard(child),
        ingest,
        admin,
        dir,
    })
}

/// Polls `GET path` until it answers 200.
pub fn wait_http_ok(addr: SocketAddr, path: &str, timeout: Duration) -> anyhow::Result<()> {
    wait_http_ok_every(addr, path, timeout, Duration::from_millis(20))
}

/// `wait_http_ok`, asking every `interval`.
pub fn wait_http_ok_every(
    addr: SocketAddr,
    path: &str,
    timeout: Duration,
    interval: Duration,
) -> anyhow::Result<()> {
    use std::io::{Read, Write};
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(mut s) = std::net::TcpStream::connect(addr) {
            let _ = write!(
                s,
                "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            );
            let mut buf = String::new();
            let _ = s.read_to_string(&mut buf);
            if buf.starts_with("HTTP/1.1 200") {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            anyhow::bail!("{addr}{path} not ready after {timeout:?}");
        }
        std::thread::sleep(interval);
    }
}

/// GET a document (the admin API's JSON, `/metrics`, a receiver's stats) over one connection.
pub async fn get_bytes(addr: SocketAddr, path: &str) -> anyhow::Result<Bytes> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let req = Request::get(path)
        .header("host", "bench")
        .body(Full::new(Bytes::new()))?;
    let resp = sender.send_request(req).await?;
    Ok(resp.into_body().collect().await?.to_bytes())
}

/// GET a JSON document from the admin API.
pub async fn get_json(addr: SocketAddr, path: &str) -> anyhow::Result<serde_json::Value> {
    Ok(serde_json::from_slice(&get_bytes(addr, path).await?)?)
}

/// The admin API's Prometheus text.
pub async fn metrics_text(admin: SocketAddr) -> anyhow::Result<String> {
    Ok(String::from_utf8_lossy(&get_bytes(admin, "/metrics").await?).into_owned())
}

/// The value of the sample `name` (a metric name with its labels, if any) in Prometheus text;
/// 0 when absent.
pub fn metric_value(text: &str, name: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// A 1 KiB JSON body with a counter in it.
pub fn body_1k(n: u64) -> Bytes {
    let head = format!("{{\"id\":\"evt_{n}\",\"type\":\"invoice.paid\",\"pad\":\"");
    let pad = 1024 - head.len() - 2;
    let mut s = head;
    s.push_str(&"x".repeat(pad));
    s.push_str("\"}");
    Bytes::from(s)
}

/// The multi-thread tokio runtime a benchmark drives its load from.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

/// Requests of 1 KiB hooks to `path`, signed with the Standard Webhooks `secret`.
pub fn signed_requests(path: &'static str, secret: &str) -> anyhow::Result<MakeRequest> {
    let key = ankusa_verify::standard_webhooks_key(secret).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(Arc::new(move |n| signed_request(path, &key, n)))
}

/// A Standard Webhooks signed POST of a 1 KiB body to `path`.
pub fn signed_request(path: &str, secret_key: &[u8], n: u64) -> Request<Full<Bytes>> {
    let body = body_1k(n);
    let id = format!("msg_{n}");
    let ts = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let sig = ankusa_verify::sign_standard_webhooks(&[secret_key.to_vec()], &id, ts, &body);
    Request::post(path)
        .header("host", "bench")
        .header("content-type", "application/json")
        .header("webhook-id", id)
        .header("webhook-timestamp", ts.to_string())
        .header("webhook-signature", sig)
        .body(Full::new(body))
        .expect("request")
}

/// A suffix for queue, topic and stream names no other run of a benchmark uses.
pub fn suffix() -> String {
    format!(
        "{}{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() % 1_000_000)
            .unwrap_or(0)
    )
}

/// Prints one JSON line.
pub fn emit(v: serde_json::Value) {
    println!("{v}");
}

/// A receiver process: answers 200 after `delay`; `GET /stats?path=/x` reports how many
/// deliveries to `/x` arrived (all paths without `path`) and their receipt→delivery latency
/// (from `x-ankusa-received-at` to the answer), `GET /reset` clears the figures. Blocks.
pub fn run_receiver(addr: SocketAddr, delay: Duration) -> anyhow::Result<()> {
    use std::collections::HashMap;
    use std::sync::Mutex;
    type Stats = Arc<Mutex<HashMap<String, (u64, Latencies)>>>;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let stats: Stats = Arc::default();
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        loop {
            let (stream, _) = listener.accept().await?;
            let _ = stream.set_nodelay(true);
            let stats = stats.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                    let stats = stats.clone();
                    async move {
                        let path = req.uri().path().to_string();
                        let query = req.uri().query().unwrap_or("").to_string();
                        let received_at = req
                            .headers()
                            .get("x-ankusa-received-at")
                            .and_then(|v| v.to_str().ok())
                            .and_then(|v| v.parse::<u64>().ok());
                        let _ = req.into_body().collect().await;
                        let body = match path.as_str() {
                            "/stats" => {
                                let want = query.strip_prefix("path=");
                                let s = stats.lock().expect("lock");
                                let mut count = 0;
                                let mut lat = Latencies::default();
                                for (p, (n, l)) in s.iter() {
                                    if want.is_none_or(|w| w == p) {
                                        count += n;
                                        lat.merge(l.clone());
                                    }
                                }
                                serde_json::json!({"count": count, "p50_ms": lat.quantile_ms(0.5), "p99_ms": lat.quantile_ms(0.99)}).to_string()
                            }
                            "/reset" => {
                                stats.lock().expect("lock").clear();
                                "{}".into()
                            }
                            _ => {
                                if !delay.is_zero() {
                                    tokio::time::sleep(delay).await;
                                }
                                let mut s = stats.lock().expect("lock");
                                let e = s.entry(path).or_default();
                                e.0 += 1;
                                if let Some(at) = received_at {
                                    let now = std::time::SystemTime::now()
                                        .duration_since(std::time::UNIX_EPOCH)
                                        .map(|d| d.as_millis() as u64)
                                        .unwrap_or(0);
                                    e.1.record(Duration::from_millis(now.saturating_sub(at)));
                                }
                                String::new()
                            }
                        };
                        Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(Bytes::from(body))))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), svc).await;
            });
        }
    })
}

/// Bytes of the files under `dir` (a store's disk use).
pub fn dir_bytes(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}
