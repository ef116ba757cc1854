//! The RabbitMQ sink against the machine's broker (5672): `rabbitmq` (next to a lapin confirm
//! channel alone, mandatory persistent publishes to a durable queue) and `rabbitmq-tls` (the
//! sink through a plain relay and through a TLS relay of the bench's own to the same broker).
//! Imports `measure` and `tls`.

use ankusa_config::{RabbitmqSinkConfig, SinkConfig};
use ankusa_sinks::SinkBuilder;
use ankusa_testkit::brokers::{rabbit_teardown, rabbit_topology};
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};

use crate::measure::{BoxErr, build, line, message_payload, rate, suffix, through_sink, tls_line};
use crate::tls::Relays;

const URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

/// A connection to the broker with a durable topic exchange (as the sink declares it) and a
/// durable queue bound to all of it.
async fn topology(exchange: &str, queue: &str) -> Result<(Connection, Channel), BoxErr> {
    let conn = Connection::connect(URL, ConnectionProperties::default()).await?;
    let ch = conn.create_channel().await?;
    rabbit_topology(&ch, exchange, queue, "#", FieldTable::default()).await?;
    Ok((conn, ch))
}

pub async fn plain(n: u64) -> Result<(), BoxErr> {
    let sfx = suffix();
    let exchange = format!("bench.{sfx}");
    let queue = format!("bench.q.{sfx}");
    let (conn, ch) = topology(&exchange, &queue).await?;
    let builder = SinkBuilder::new();
    let sink = build(
        &builder,
        SinkConfig::Rabbitmq(RabbitmqSinkConfig::new(URL, &exchange)),
    );
    let s = through_sink(sink, n).await;
    let pc = conn.create_channel().await?;
    pc.confirm_select(ConfirmSelectOptions::default()).await?;
    let payload = message_payload();
    let a = rate(n, |_| {
        let (pc, exchange, payload) = (&pc, &exchange, &payload);
        async move {
            let c = pc
                .basic_publish(
                    exchange.as_str().into(),
                    "ankusa.bench".into(),
                    BasicPublishOptions {
                        mandatory: true,
                        immediate: false,
                    },
                    payload,
                    BasicProperties::default().with_delivery_mode(2),
                )
                .await
                .map_err(|e| e.to_string())?
                .await
                .map_err(|e| e.to_string())?;
            if c.is_ack() {
                Ok(())
            } else {
                Err("nack".into())
            }
        }
    })
    .await;
    line(
        "rabbitmq",
        n,
        s,
        a,
        "lapin confirm channel, mandatory persistent publishes to a durable queue",
        None,
    );
    rabbit_teardown(&ch, &exchange, &queue).await?;
    Ok(())
}

/// The RabbitMQ sink through a plain relay and through a TLS relay to the same broker.
pub async fn tls(n: u64) -> Result<(), BoxErr> {
    let relays = Relays::start(5672).await?;
    let sfx = suffix();
    let exchange = format!("bench.tls.{sfx}");
    let queue = format!("bench.tls.q.{sfx}");
    let (_conn, ch) = topology(&exchange, &queue).await?;
    let builder = SinkBuilder::new();
    let plain = build(
        &builder,
        SinkConfig::Rabbitmq(RabbitmqSinkConfig::new(
            format!("amqp://guest:guest@127.0.0.1:{}/%2f", relays.plain.port),
            &exchange,
        )),
    );
    let mut cfg = RabbitmqSinkConfig::new(
        format!("amqps://guest:guest@localhost:{}/%2f", relays.tls.port),
        &exchange,
    );
    cfg.tls = Some(relays.pki.sink_tls());
    let tls = build(&builder, SinkConfig::Rabbitmq(cfg));
    let p = through_sink(plain, n).await;
    let t = through_sink(tls, n).await;
    tls_line(
        "rabbitmq-tls",
        n,
        p,
        t,
        "amqp:// via a plain relay vs amqps:// via a TLS relay, same broker and exchange",
    );
    rabbit_teardown(&ch, &exchange, &queue).await?;
    Ok(())
}
