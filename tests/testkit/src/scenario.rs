//! What the operator's two scenario suites (`operator/tests/e2e.rs` on the local control
//! plane, `operator/tests/node.rs` on a real node) share: the multi-threaded runtime a
//! scenario runs in, and JetStream streams (for an intake log or a direct Gateway's sink)
//! created and read back with the NATS protocol itself (`$JS.API.STREAM.*` requests) so no
//! NATS client crate is needed.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Creates a file-backed stream `name` taking `<subject>.>` on the nats-server at `addr`.
/// Errors name what failed; a refusal carries the server's answer.
pub async fn create_stream(addr: &str, name: &str, subject: &str) -> anyhow::Result<()> {
    let body =
        serde_json::json!({"name": name, "subjects": [format!("{subject}.>")], "storage": "file"});
    let answer = js_request(addr, &format!("STREAM.CREATE.{name}"), &body).await?;
    if answer.get("error").is_some() {
        bail!("stream create refused: {answer}");
    }
    Ok(())
}

/// The `Nats-Msg-Id` of every message stream `name` holds, in stream order (one JetStream API
/// request per message: for the few thousand a scenario publishes).
pub async fn stream_msg_ids(addr: &str, name: &str) -> anyhow::Result<Vec<String>> {
    use base64::Engine;
    let info = js_request(addr, &format!("STREAM.INFO.{name}"), &serde_json::json!({})).await?;
    let (first, last) = (
        info["state"]["first_seq"].as_u64().unwrap_or(1),
        info["state"]["last_seq"].as_u64().unwrap_or(0),
    );
    let mut ids = Vec::new();
    for seq in first..=last {
        let m = js_request(
            addr,
            &format!("STREAM.MSG.GET.{name}"),
            &serde_json::json!({"seq": seq}),
        )
        .await?;
        let Some(hdrs) = m["message"]["hdrs"].as_str() else {
            continue;
        };
        let hdrs = base64::engine::general_purpose::STANDARD
            .decode(hdrs)
            .context("message headers")?;
        let id = String::from_utf8_lossy(&hdrs)
            .lines()
            .find_map(|l| l.strip_prefix("Nats-Msg-Id:").map(|v| v.trim().to_string()));
        ids.extend(id);
    }
    Ok(ids)
}

/// One JetStream API request (`$JS.API.<api>`) with the NATS protocol itself: its JSON answer.
async fn js_request(
    addr: &str,
    api: &str,
    body: &serde_json::Value,
) -> anyhow::Result<serde_json::Value> {
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .with_context(|| format!("nats-server at {addr}"))?;
    let body = body.to_string();
    let req = format!(
        "CONNECT {{\"verbose\":false,\"pedantic\":false,\"headers\":false}}\r\nSUB _INBOX.testkit 1\r\nPUB $JS.API.{api} _INBOX.testkit {}\r\n{body}\r\nPING\r\n",
        body.len()
    );
    s.write_all(req.as_bytes()).await.context("nats write")?;
    let mut got = Vec::new();
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        // The answer is one `MSG <subject> <sid> <len>` line and its payload.
        if let Some(v) = msg_payload(&got) {
            return serde_json::from_slice(v).context("JetStream answer");
        }
        if Instant::now() >= end {
            bail!("no answer to {api}: {}", String::from_utf8_lossy(&got));
        }
        let mut buf = [0u8; 16384];
        let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
            .await
            .context("nats answers")?
            .context("nats read")?;
        if n == 0 {
            bail!(
                "nats closed the connection: {}",
                String::from_utf8_lossy(&got)
            );
        }
        got.extend_from_slice(&buf[..n]);
    }
}

/// The payload of the first complete `MSG` in `buf`.
fn msg_payload(buf: &[u8]) -> Option<&[u8]> {
    let start = buf.windows(4).position(|w| w == b"MSG ")?;
    let line_end = start + buf[start..].windows(2).position(|w| w == b"\r\n")?;
    let line = std::str::from_utf8(&buf[start..line_end]).ok()?;
    let len: usize = line.split_whitespace().last()?.parse().ok()?;
    let from = line_end + 2;
    buf.get(from..from + len)
}

/// A multi-threaded runtime with `workers` threads for one scenario.
pub fn scenario_runtime(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}
