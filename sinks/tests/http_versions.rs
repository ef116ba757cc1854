//! The HTTP sink's `http_version` against receivers of the test's own that offer HTTP/1.1,
//! HTTP/2 or both, in plaintext and over TLS with a private CA: `auto` speaks HTTP/2 to a TLS
//! receiver that offers `h2` by ALPN and HTTP/1.1 otherwise; `http1` never speaks HTTP/2;
//! `http2` is h2c with prior knowledge on `http://` and `h2` only on `https://`, and a receiver
//! without HTTP/2 fails the attempt as transient with nothing delivered. Concurrent deliveries
//! over HTTP/2 share one pooled connection; the signature and the `x-ankusa-*` headers arrive
//! the same over both versions.

mod common;

use std::sync::Arc;

use ankusa_config::{EgressConfig, HttpSinkConfig, HttpVersion, SinkConfig};
use ankusa_core::{Sink, SinkError};
use ankusa_sinks::SinkBuilder;
use ankusa_testkit::pki::{self, Ca};
use ankusa_testkit::scripted::{Offer, Receiver, Reply};
use common::*;
use reqwest::Version;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// Loopback and plain `http://` allowed.
fn egress() -> EgressConfig {
    EgressConfig {
        allow_loopback: true,
        allow_http: true,
        ..EgressConfig::default()
    }
}

struct Tls {
    ca: Ca,
    dir: tempfile::TempDir,
}

impl Tls {
    fn new() -> Tls {
        Tls {
            ca: Ca::new("ankusa http2 test CA"),
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    async fn receiver(&self, offer: Offer) -> Receiver {
        let pair = self.ca.server(&["localhost"], false);
        Receiver::start_offering(
            offer,
            Some((pair.cert.as_bytes(), pair.key.as_bytes())),
            |_, _| Reply::status(204),
        )
        .await
    }

    fn config(&self, r: &Receiver, version: HttpVersion) -> HttpSinkConfig {
        let mut cfg = config(
            format!("https://localhost:{}/hooks", r.addr.port()),
            version,
        );
        cfg.cacertfile = Some(pki::write(self.dir.path(), "ca.pem", &self.ca.pem).into());
        cfg
    }
}

fn config(url: String, version: HttpVersion) -> HttpSinkConfig {
    let mut cfg = HttpSinkConfig::new(url);
    cfg.secret = Some(ankusa_config::Secrets(vec![SECRET.into()]));
    cfg.http_version = version;
    cfg.pool_size = Some(8);
    cfg
}

fn sink(builder: &SinkBuilder, cfg: HttpSinkConfig) -> Arc<dyn Sink> {
    init();
    build_with(builder, SinkConfig::Http(cfg), egress())
}

async fn plain(offer: Offer) -> Receiver {
    Receiver::start_offering(offer, None, |_, _| Reply::status(204)).await
}

fn plain_config(r: &Receiver, version: HttpVersion) -> HttpSinkConfig {
    config(format!("http://127.0.0.1:{}/hooks", r.addr.port()), version)
}

/// Delivers `n` hooks at once; every one must succeed.
async fn deliver_all(sink: &Arc<dyn Sink>, n: usize) {
    let runs = (0..n).map(|i| {
        let sink = sink.clone();
        async move {
            let env = hook(format!(r#"{{"n":{i}}}"#).as_bytes());
            sink.deliver(&env, &ctx()).await
        }
    });
    for (i, r) in futures::future::join_all(runs)
        .await
        .into_iter()
        .enumerate()
    {
        r.unwrap_or_else(|e| panic!("delivery {i}: {e:?}"));
    }
}

fn versions(r: &Receiver) -> Vec<Version> {
    r.received().iter().map(|x| x.version).collect()
}

/// The signed headers a receiver checks arrive over HTTP/2 as over HTTP/1.1.
fn assert_signed(r: &Receiver) {
    for got in r.received() {
        let id = got.header("webhook-id").expect("webhook-id");
        let ts = got.header("webhook-timestamp").expect("webhook-timestamp");
        let sig = got.header("webhook-signature").expect("webhook-signature");
        let key = ankusa_verify::standard_webhooks_key(SECRET).expect("key");
        let ts_num: i64 = ts.parse().expect("timestamp");
        assert_eq!(
            ankusa_verify::sign_standard_webhooks(&[key], &id, ts_num, &got.body),
            sig,
            "the signature verifies over {:?}",
            got.version
        );
        assert_eq!(got.header("x-ankusa-id").as_deref(), Some(id.as_str()));
        assert_eq!(got.header("x-ankusa-source").as_deref(), Some("stripe"));
    }
}

#[tokio::test]
async fn auto_speaks_http2_to_a_tls_receiver_that_offers_it_over_one_pooled_connection() {
    let tls = Tls::new();
    let r = tls.receiver(Offer::Both).await;
    let s = sink(&SinkBuilder::new(), tls.config(&r, HttpVersion::Auto));
    deliver_all(&s, 40).await;
    assert_eq!(versions(&r), vec![Version::HTTP_2; 40]);
    // 40 at once through a pool of 8 permits: multiplexed on one connection, not eight.
    assert_eq!(r.connections(), 1, "one HTTP/2 connection carries the pool");
    assert_signed(&r);
    deliver_all(&s, 10).await;
    assert_eq!(r.connections(), 1, "the connection is reused");
}

#[tokio::test]
async fn auto_falls_back_to_http1_where_the_tls_receiver_offers_only_http1() {
    let tls = Tls::new();
    let r = tls.receiver(Offer::Http1).await;
    let s = sink(&SinkBuilder::new(), tls.config(&r, HttpVersion::Auto));
    deliver_all(&s, 20).await;
    assert_eq!(versions(&r), vec![Version::HTTP_11; 20]);
    // HTTP/1.1 carries one request at a time per connection: the burst needs several.
    assert!(
        r.connections() > 1,
        "HTTP/1.1 does not multiplex, got {} connection(s)",
        r.connections()
    );
    assert_signed(&r);
}

#[tokio::test]
async fn http1_never_speaks_http2_even_where_it_is_offered() {
    let tls = Tls::new();
    let r = tls.receiver(Offer::Both).await;
    let s = sink(&SinkBuilder::new(), tls.config(&r, HttpVersion::Http1));
    deliver_all(&s, 5).await;
    assert_eq!(versions(&r), vec![Version::HTTP_11; 5]);
}

#[tokio::test]
async fn http2_over_tls_to_an_http1_only_receiver_is_transient_and_delivers_nothing() {
    let tls = Tls::new();
    let r = tls.receiver(Offer::Http1).await;
    let s = sink(&SinkBuilder::new(), tls.config(&r, HttpVersion::Http2));
    let got = s.deliver(&hook(b"{}"), &ctx()).await;
    assert!(
        matches!(&got, Err(SinkError::Transient(m)) if m.starts_with("transport: ")),
        "{got:?}"
    );
    assert_eq!(r.count(), 0);
    // The same receiver, once it offers h2, takes the next attempt.
    let r2 = tls.receiver(Offer::Http2).await;
    let s2 = sink(&SinkBuilder::new(), tls.config(&r2, HttpVersion::Http2));
    deliver_all(&s2, 3).await;
    assert_eq!(versions(&r2), vec![Version::HTTP_2; 3]);
}

#[tokio::test]
async fn http2_over_plain_http_is_h2c_with_prior_knowledge() {
    let r = plain(Offer::Both).await;
    let s = sink(&SinkBuilder::new(), plain_config(&r, HttpVersion::Http2));
    deliver_all(&s, 40).await;
    assert_eq!(versions(&r), vec![Version::HTTP_2; 40]);
    assert_eq!(r.connections(), 1, "one h2c connection carries the pool");
    assert_signed(&r);

    // An h2c-only receiver (no HTTP/1.1 at all) takes it the same.
    let only = plain(Offer::Http2).await;
    let s = sink(&SinkBuilder::new(), plain_config(&only, HttpVersion::Http2));
    deliver_all(&s, 3).await;
    assert_eq!(versions(&only), vec![Version::HTTP_2; 3]);
}

#[tokio::test]
async fn auto_over_plain_http_is_http1_and_h2c_to_an_http1_receiver_fails() {
    let r = plain(Offer::Both).await;
    let s = sink(&SinkBuilder::new(), plain_config(&r, HttpVersion::Auto));
    deliver_all(&s, 5).await;
    assert_eq!(versions(&r), vec![Version::HTTP_11; 5]);

    let old = plain(Offer::Http1).await;
    let s = sink(&SinkBuilder::new(), plain_config(&old, HttpVersion::Http2));
    let got = s.deliver(&hook(b"{}"), &ctx()).await;
    assert!(
        matches!(&got, Err(SinkError::Transient(m)) if m.starts_with("transport: ")),
        "{got:?}"
    );
    assert_eq!(old.count(), 0);
}

/// Forwarded provider headers that HTTP/2 forbids are dropped from an HTTP/2 request rather
/// than failing it; the rest are forwarded.
#[tokio::test]
async fn connection_headers_a_provider_sent_do_not_break_an_http2_request() {
    let r = plain(Offer::Http2).await;
    let s = sink(&SinkBuilder::new(), plain_config(&r, HttpVersion::Http2));
    let mut c = ctx();
    for (k, v) in [
        ("connection", "keep-alive"),
        ("keep-alive", "timeout=5"),
        ("transfer-encoding", "chunked"),
        ("upgrade", "h2c"),
        ("te", "gzip"),
    ] {
        c.forward_headers.push((k.into(), v.into()));
    }
    s.deliver(&hook(b"{}"), &c)
        .await
        .expect("delivered over h2c");
    let got = &r.received()[0];
    assert_eq!(got.version, Version::HTTP_2);
    assert_eq!(got.header("x-github-event").as_deref(), Some("push"));
    for k in [
        "connection",
        "keep-alive",
        "transfer-encoding",
        "upgrade",
        "te",
    ] {
        assert_eq!(got.header(k), None, "{k} is not sent over HTTP/2");
    }
}

/// Sinks of the same receiver with different versions get pools of their own: an `http1`
/// sink beside an `auto` one does not pin the other to HTTP/1.1.
#[tokio::test]
async fn versions_do_not_share_a_pool() {
    let tls = Tls::new();
    let r = tls.receiver(Offer::Both).await;
    let builder = SinkBuilder::new();
    let one = sink(&builder, tls.config(&r, HttpVersion::Http1));
    let two = sink(&builder, tls.config(&r, HttpVersion::Auto));
    deliver_all(&one, 3).await;
    deliver_all(&two, 3).await;
    let v = versions(&r);
    assert_eq!(v.iter().filter(|x| **x == Version::HTTP_11).count(), 3);
    assert_eq!(v.iter().filter(|x| **x == Version::HTTP_2).count(), 3);
}
