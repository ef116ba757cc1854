//! The NATS JetStream sink: `nats` (the machine's nats-server on 4222, next to async-nats
//! publishing alone and awaiting the stream ack) and `nats-tls` (two nats-servers of the
//! bench's own from the test kit, JetStream with file storage, one requiring TLS). Imports
//! `measure` and `tls`.

use std::path::Path;

use ankusa_config::{NatsSinkConfig, NatsTls, SinkConfig};
use ankusa_sinks::SinkBuilder;
use ankusa_testkit::nats_server::{NatsServer, Spec};
use ankusa_testkit::ports::free_port;
use async_nats::jetstream::{self, stream};
use bytes::Bytes;

use crate::measure::{BoxErr, build, line, message_payload, rate, suffix, through_sink, tls_line};
use crate::tls::Pki;

/// Stream `name` over `subjects`, file storage, through a client connected to `url` (over TLS
/// trusting `ca` when given).
async fn create_stream(
    url: &str,
    ca: Option<&Path>,
    name: &str,
    subjects: &str,
) -> Result<jetstream::Context, BoxErr> {
    let mut opts = async_nats::ConnectOptions::new();
    if let Some(ca) = ca {
        opts = opts
            .require_tls(true)
            .add_root_certificates(ca.to_path_buf());
    }
    let js = jetstream::new(opts.connect(url).await?);
    js.create_stream(stream::Config {
        name: name.into(),
        subjects: vec![subjects.into()],
        storage: stream::StorageType::File,
        ..Default::default()
    })
    .await?;
    Ok(js)
}

pub async fn plain(n: u64) -> Result<(), BoxErr> {
    let server = "nats://127.0.0.1:4222";
    let sfx = suffix();
    let name = format!("BENCH_{sfx}");
    let js = create_stream(server, None, &name, &format!("bench.{sfx}.>")).await?;
    let subject = format!("bench.{sfx}.events");
    let builder = SinkBuilder::new();
    let sink = build(
        &builder,
        SinkConfig::Nats(NatsSinkConfig::new(vec![server.into()], &subject)),
    );
    let s = through_sink(sink, n).await;
    let payload = Bytes::from(message_payload());
    let a = rate(n, |_| {
        let (js, subject, payload) = (&js, &subject, payload.clone());
        async move {
            js.publish(subject.clone(), payload)
                .await
                .map_err(|e| e.to_string())?
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
    })
    .await;
    line(
        "nats",
        n,
        s,
        a,
        "async-nats JetStream publish awaiting the stream ack, file storage",
        None,
    );
    js.delete_stream(&name).await?;
    Ok(())
}

/// The NATS sink over TLS against plaintext: two identical servers (JetStream, file storage),
/// one connection each, so the ratio is the encryption of the stream, not handshakes.
pub async fn tls(n: u64) -> Result<(), BoxErr> {
    let pki = Pki::new(&["127.0.0.1"])?;
    let plain_server =
        NatsServer::start(&pki.dir.path().join("plain"), free_port(), &Spec::plain());
    let tls_server = NatsServer::start(
        &pki.dir.path().join("tls"),
        free_port(),
        &Spec {
            server: Some(&pki.server),
            ..Spec::plain()
        },
    );
    let (plain, tls) = (plain_server.url(), tls_server.url());
    create_stream(&plain, None, "BENCH", "bench.>").await?;
    create_stream(&tls, Some(&pki.ca_file), "BENCH", "bench.>").await?;
    let builder = SinkBuilder::new();
    let plain_sink = build(
        &builder,
        SinkConfig::Nats(NatsSinkConfig::new(vec![plain], "bench.events")),
    );
    let mut cfg = NatsSinkConfig::new(vec![tls], "bench.events");
    cfg.tls = NatsTls::Settings(pki.sink_tls());
    let tls_sink = build(&builder, SinkConfig::Nats(cfg));
    let p = through_sink(plain_sink, n).await;
    let t = through_sink(tls_sink, n).await;
    tls_line(
        "nats-tls",
        n,
        p,
        t,
        "two nats-servers started by the bench (JetStream, file storage), one with TLS",
    );
    Ok(())
}
