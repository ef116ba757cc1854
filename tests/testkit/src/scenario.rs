//! What the operator's two scenario suites (`operator/tests/e2e.rs` on the local control
//! plane, `operator/tests/node.rs` on a real node) share: the multi-threaded runtime a
//! scenario runs in, and a JetStream stream for a Gateway's intake log, created with the NATS
//! protocol itself (one request to `$JS.API.STREAM.CREATE.<name>`) so no NATS client crate is
//! needed.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Creates a file-backed stream `name` taking `<subject>.>` on the nats-server at `addr`.
/// Errors name what failed; a refusal carries the server's answer.
pub async fn create_stream(addr: &str, name: &str, subject: &str) -> anyhow::Result<()> {
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .with_context(|| format!("nats-server at {addr}"))?;
    let body =
        serde_json::json!({"name": name, "subjects": [format!("{subject}.>")], "storage": "file"})
            .to_string();
    let req = format!(
        "CONNECT {{\"verbose\":false,\"pedantic\":false,\"headers\":false}}\r\nSUB _INBOX.testkit 1\r\nPUB $JS.API.STREAM.CREATE.{name} _INBOX.testkit {}\r\n{body}\r\nPING\r\n",
        body.len()
    );
    s.write_all(req.as_bytes()).await.context("nats write")?;
    let mut got = String::new();
    let end = Instant::now() + Duration::from_secs(10);
    // The answer is one MSG line and its JSON payload line.
    while !got.contains("stream_create_response") || !got.ends_with("\r\n") {
        if Instant::now() >= end {
            bail!("no answer to the stream create: {got}");
        }
        let mut buf = [0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
            .await
            .context("nats answers")?
            .context("nats read")?;
        if n == 0 {
            bail!("nats closed the connection: {got}");
        }
        got.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    if got.contains("\"error\"") {
        bail!("stream create refused: {got}");
    }
    Ok(())
}

/// A multi-threaded runtime with `workers` threads for one scenario.
pub fn scenario_runtime(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}
