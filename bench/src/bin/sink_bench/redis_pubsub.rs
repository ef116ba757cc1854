//! The Redis sink: `redis` (the machine's redis-server on 6379, next to a multiplexed
//! connection publishing alone) and `redis-tls` (a redis-server of the bench's own from the test
//! kit with a TLS and a plaintext port, the same sink over each). Both publish to a channel
//! with one subscriber draining it. Imports `measure` and `tls`.

use ankusa_config::{RedisSinkConfig, SinkConfig};
use ankusa_sinks::SinkBuilder;
use ankusa_testkit::redis_server::{ACL_PASSWORD, ACL_USER, TlsRedis};
use futures::StreamExt;

use crate::measure::{BoxErr, build, line, message_payload, rate, suffix, through_sink, tls_line};
use crate::tls::Pki;

/// A subscriber to `channel` (through `url`) that drains what is published; aborted on drop.
struct Drain(tokio::task::JoinHandle<()>);

impl Drain {
    async fn start(url: &str, channel: &str) -> Result<Drain, BoxErr> {
        let mut ps = redis::Client::open(url)?.get_async_pubsub().await?;
        ps.subscribe(channel).await?;
        Ok(Drain(tokio::spawn(async move {
            let mut s = ps.on_message();
            while s.next().await.is_some() {}
        })))
    }
}

impl Drop for Drain {
    fn drop(&mut self) {
        self.0.abort();
    }
}

pub async fn plain(n: u64) -> Result<(), BoxErr> {
    let url = "redis://127.0.0.1:6379/0";
    let channel = format!("bench.{}", suffix());
    let _drain = Drain::start(url, &channel).await?;
    let builder = SinkBuilder::new();
    let sink = build(
        &builder,
        SinkConfig::Redis(RedisSinkConfig::new(url, &channel)),
    );
    let s = through_sink(sink, n).await;
    let conn = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    let payload = message_payload();
    let a = rate(n, |_| {
        let (mut conn, channel, payload) = (conn.clone(), &channel, &payload);
        async move {
            redis::cmd("PUBLISH")
                .arg(channel)
                .arg(payload)
                .query_async::<i64>(&mut conn)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
    })
    .await;
    line(
        "redis",
        n,
        s,
        a,
        "redis multiplexed connection, PUBLISH to a channel with one subscriber",
        None,
    );
    Ok(())
}

/// The Redis sink over `rediss://` against plaintext, same server, same subscriber: what TLS
/// costs per delivery. One multiplexed connection either way, so the ratio is the encryption
/// of the stream, not handshakes.
pub async fn tls(n: u64) -> Result<(), BoxErr> {
    let pki = Pki::new(&["localhost"])?;
    let server = TlsRedis::start(pki.dir.path(), &pki.server, &pki.ca.pem, false);
    let user = format!("{ACL_USER}:{ACL_PASSWORD}");
    let plain = server.plain_url_as(&user);
    let tls = server.tls_url(&user, "localhost");
    let channel = format!("bench.tls.{}", suffix());
    let _drain = Drain::start(&plain, &channel).await?;
    let builder = SinkBuilder::new();
    let plain_sink = build(
        &builder,
        SinkConfig::Redis(RedisSinkConfig::new(&plain, &channel)),
    );
    let mut cfg = RedisSinkConfig::new(&tls, &channel);
    cfg.tls = Some(pki.sink_tls());
    let tls_sink = build(&builder, SinkConfig::Redis(cfg));
    let p = through_sink(plain_sink, n).await;
    let t = through_sink(tls_sink, n).await;
    tls_line(
        "redis-tls",
        n,
        p,
        t,
        "redis-server started by the bench, TLS and plaintext ports, one subscriber",
    );
    Ok(())
}
