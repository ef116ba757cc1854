//! Deliveries per second through each queue sink with 1 KiB bodies and 32 deliveries in flight
//! (dispatch's default concurrency), next to the same broker driven alone by the same client
//! library with the same acknowledgement rule, so a broker that is itself the limit shows as
//! such. Prints one JSON line per sink.
//!
//!     tests/brokers/start.sh /tmp/brokers
//!     cargo run --release -p ankusa-bench --bin sink-bench [kafka,kafka-tls,rabbitmq,rabbitmq-tls,nats,nats-tls,redis,redis-tls,sqs,sqs-tls,pubsub,pubsub-tls,http,http-tls]
//!
//! `http` and `http-tls` need no broker: the HTTP sink over HTTP/1.1 and HTTP/2 (h2c in
//! plaintext, `h2` by ALPN over TLS) to a receiver of the bench's own.
//!
//! `redis-tls` starts its own redis-server (TLS and plaintext ports, a private CA) and prints
//! the Redis sink's rate over each and their ratio; `nats-tls` does the same with two
//! nats-servers of its own (one requiring TLS). `rabbitmq-tls` and `kafka-tls` put a relay of
//! the bench's own in front of the broker (the machine's RabbitMQ; a Tansu of the bench's own
//! per relay, advertising it), once plain and once terminating TLS, so both runs cross the same
//! extra hop and differ only in the encryption; `sqs-tls` and `pubsub-tls` do the same in front
//! of moto_server and the Pub/Sub emulator. The servers, relays and the CA are the test kit's
//! (`ankusa-testkit`, feature `brokers`), the same the sink tests use.
//!
//! Modules: `measure` (rates, the sink factory, the JSON lines) and `tls` (CA, relays) are
//! leaves; one module per broker holds its plain and its TLS case and imports only those two.
//! Each case runs as a task of its own, so a broker that is not up fails that case, not the
//! run.

mod http;
mod kafka;
mod measure;
mod nats;
mod pubsub;
mod rabbitmq;
mod redis_pubsub;
mod sqs;
mod tls;

use futures::future::BoxFuture;

use measure::BoxErr;

type Case = fn(u64) -> BoxFuture<'static, Result<(), BoxErr>>;

/// Every case: its name on the command line, its deliveries, the case.
const CASES: [(&str, u64, Case); 14] = [
    ("kafka", 20_000, |n| Box::pin(kafka::plain(n))),
    ("kafka-tls", 20_000, |n| Box::pin(kafka::tls(n))),
    ("rabbitmq", 20_000, |n| Box::pin(rabbitmq::plain(n))),
    ("rabbitmq-tls", 20_000, |n| Box::pin(rabbitmq::tls(n))),
    ("nats", 20_000, |n| Box::pin(nats::plain(n))),
    ("nats-tls", 20_000, |n| Box::pin(nats::tls(n))),
    ("redis", 40_000, |n| Box::pin(redis_pubsub::plain(n))),
    ("redis-tls", 40_000, |n| Box::pin(redis_pubsub::tls(n))),
    ("sqs", 500, |n| Box::pin(sqs::plain(n))),
    ("sqs-tls", 500, |n| Box::pin(sqs::tls(n))),
    ("pubsub", 10_000, |n| Box::pin(pubsub::plain(n))),
    ("pubsub-tls", 10_000, |n| Box::pin(pubsub::tls(n))),
    ("http", 20_000, |n| Box::pin(http::plain(n))),
    ("http-tls", 20_000, |n| Box::pin(http::tls(n))),
];

#[tokio::main]
async fn main() {
    ankusa_sinks::install_crypto_provider();
    let arg = std::env::args().nth(1).unwrap_or_default();
    if arg == "-h" || arg == "--help" {
        let names: Vec<&str> = CASES.iter().map(|(name, _, _)| *name).collect();
        println!(
            "sink-bench [CASE,...]: one JSON line per case (all when none is named).\n\
             cases: {}\nneeds the brokers: tests/brokers/start.sh <statedir>",
            names.join(",")
        );
        return;
    }
    let only: Vec<&str> = arg.split(',').filter(|s| !s.is_empty()).collect();
    if let Some(unknown) = only
        .iter()
        .find(|o| !CASES.iter().any(|(name, _, _)| name == *o))
    {
        eprintln!("sink-bench: no case {unknown:?} (see --help)");
        std::process::exit(2);
    }
    let mut failed = false;
    for (name, n, case) in CASES {
        if !only.is_empty() && !only.contains(&name) {
            continue;
        }
        let why = match tokio::spawn(case(n)).await {
            Ok(Ok(())) => continue,
            Ok(Err(e)) => e.to_string(),
            Err(e) => format!("the case panicked: {e}"),
        };
        eprintln!("{name}: {why} (are the brokers up? tests/brokers/start.sh <statedir>)");
        failed = true;
    }
    if failed {
        std::process::exit(1);
    }
}
