//! The HTTP sink against a receiver of the bench's own that answers `204` and offers HTTP/1.1
//! and HTTP/2 (the test kit's `scripted` receiver): `http` in plaintext (HTTP/1.1, and h2c with
//! `http_version: http2`) and `http-tls` over TLS with a private CA (`http1`, and `auto`, which
//! negotiates `h2` by ALPN). Each next to reqwest driving the same receiver alone with the same
//! protocol and pool, so the line shows what the sink adds (signing, the body digest, its
//! headers, the egress check and the pool's fair permits). Imports `measure` and `tls`.

use std::sync::Arc;

use ankusa_config::{HttpSinkConfig, HttpVersion, Secrets, SinkConfig};
use ankusa_core::Sink;
use ankusa_sinks::SinkBuilder;
use ankusa_testkit::scripted::{Offer, Receiver, Reply};
use serde_json::json;

use crate::measure::{BODY, BoxErr, CONCURRENCY, Rate, build, rate, through_sink};
use crate::tls::Pki;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn sink(
    builder: &SinkBuilder,
    url: &str,
    version: HttpVersion,
    pki: Option<&Pki>,
) -> Arc<dyn Sink> {
    let mut cfg = HttpSinkConfig::new(url);
    cfg.secret = Some(Secrets(vec![SECRET.into()]));
    cfg.http_version = version;
    cfg.pool_size = Some(CONCURRENCY as u32);
    cfg.cacertfile = pki.map(|p| p.ca_file.clone().into());
    build(builder, SinkConfig::Http(cfg))
}

/// reqwest alone: the same pool size and protocol, a 1 KiB POST each, `204` expected.
async fn alone(
    url: &str,
    n: u64,
    pki: Option<&Pki>,
    tune: impl FnOnce(reqwest::ClientBuilder) -> reqwest::ClientBuilder,
) -> Result<Rate, BoxErr> {
    let mut b = reqwest::Client::builder().pool_max_idle_per_host(CONCURRENCY);
    if let Some(p) = pki {
        b = b.add_root_certificate(reqwest::Certificate::from_pem(p.ca.pem.as_bytes())?);
    }
    let client = tune(b).build()?;
    let body = bytes::Bytes::from(vec![b'x'; BODY]);
    let _ = client.post(url).body(body.clone()).send().await;
    Ok(rate(n, |_| {
        let req = client
            .post(url)
            .header("content-type", "application/json")
            .body(body.clone());
        async move {
            let r = req.send().await.map_err(|e| e.to_string())?;
            if r.status().as_u16() == 204 {
                Ok(())
            } else {
                Err(format!("status {}", r.status()))
            }
        }
    })
    .await)
}

fn pair(name: &str, sink: Rate, alone: Rate, connections: usize) -> serde_json::Value {
    json!({
        name: {
            "sink_per_s": sink.0.round(),
            "sink_failed": sink.1,
            "alone_per_s": alone.0.round(),
            "alone_failed": alone.1,
            "sink_to_alone": ((sink.0 / alone.0) * 1000.0).round() / 1000.0,
            "receiver_connections": connections,
        }
    })
}

fn print(case: &str, n: u64, how: &str, rows: [serde_json::Value; 2]) {
    let mut v = json!({
        "sink": case,
        "deliveries": n,
        "body_bytes": BODY,
        "concurrency": CONCURRENCY,
        "how": how,
    });
    for row in rows {
        if let (Some(o), Some(r)) = (v.as_object_mut(), row.as_object()) {
            o.extend(r.clone());
        }
    }
    println!("{v}");
}

/// Plaintext: HTTP/1.1 (`auto`), then h2c (`http2`), each beside reqwest alone.
pub async fn plain(n: u64) -> Result<(), BoxErr> {
    let builder = SinkBuilder::new();
    let rx = Receiver::start_offering(Offer::Both, None, |_, _| Reply::status(204)).await;
    let url = rx.url("/hooks");
    let h1 = through_sink(sink(&builder, &url, HttpVersion::Auto, None), n).await;
    let h1_conns = rx.connections();
    let h1_alone = alone(&url, n, None, |b| b.http1_only()).await?;
    let before = rx.connections();
    let h2 = through_sink(sink(&builder, &url, HttpVersion::Http2, None), n).await;
    let h2_conns = rx.connections() - before;
    let h2_alone = alone(&url, n, None, |b| b.http2_prior_knowledge()).await?;
    print(
        "http",
        n,
        "http:// to a receiver of the bench's own; reqwest alone with the same protocol",
        [
            pair("http1", h1, h1_alone, h1_conns),
            pair("h2c", h2, h2_alone, h2_conns),
        ],
    );
    Ok(())
}

/// TLS: HTTP/1.1 (`http1`), then HTTP/2 negotiated by ALPN (`auto`), each beside reqwest alone.
pub async fn tls(n: u64) -> Result<(), BoxErr> {
    let pki = Pki::new(&["localhost"])?;
    let builder = SinkBuilder::new();
    let rx = Receiver::start_offering(
        Offer::Both,
        Some((pki.server.cert.as_bytes(), pki.server.key.as_bytes())),
        |_, _| Reply::status(204),
    )
    .await;
    let url = format!("https://localhost:{}/hooks", rx.addr.port());
    let h1 = through_sink(sink(&builder, &url, HttpVersion::Http1, Some(&pki)), n).await;
    let h1_conns = rx.connections();
    let h1_alone = alone(&url, n, Some(&pki), |b| b.http1_only()).await?;
    let before = rx.connections();
    let h2 = through_sink(sink(&builder, &url, HttpVersion::Auto, Some(&pki)), n).await;
    let h2_conns = rx.connections() - before;
    let h2_alone = alone(&url, n, Some(&pki), |b| b).await?;
    print(
        "http-tls",
        n,
        "https:// with a private CA; auto negotiates h2 by ALPN; reqwest alone with the same protocol",
        [
            pair("http1", h1, h1_alone, h1_conns),
            pair("h2", h2, h2_alone, h2_conns),
        ],
    );
    Ok(())
}
