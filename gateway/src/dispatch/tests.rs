//! The scheduler end to end over a real store: a panicking sink, and the cost of a scan.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use ankusa_config::{Config, DispatchConfig, LogSinkConfig, SinkConfig, SourceConfig};
use ankusa_core::{DeliveryCtx, Sink, now_ms};
use ankusa_sinks::SinkBuilder;
use ankusa_store::{IngestRecord, IngestResult};
use futures::future::BoxFuture;

use super::*;
use crate::live::{Live, LiveSource};

struct PanicSink;
impl Sink for PanicSink {
    fn deliver<'a>(
        &'a self,
        _: &'a Envelope,
        _: &'a DeliveryCtx,
    ) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(async { panic!("boom in a sink") })
    }
    fn type_name(&self) -> &'static str {
        "log"
    }
}

struct CountSink(Arc<AtomicUsize>);
impl Sink for CountSink {
    fn deliver<'a>(
        &'a self,
        _: &'a Envelope,
        _: &'a DeliveryCtx,
    ) -> BoxFuture<'a, Result<(), SinkError>> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { Ok(()) })
    }
    fn type_name(&self) -> &'static str {
        "log"
    }
}

fn source(id: &str, sink: Arc<dyn Sink>) -> (String, Arc<LiveSource>) {
    let cfg = SourceConfig::with_sinks(vec![SinkConfig::Log(LogSinkConfig::default())]);
    (
        id.into(),
        Arc::new(LiveSource {
            id: id.into(),
            cfg,
            verifier: None,
            sinks: vec![sink],
            sink_types: vec!["log"],
            sink_digests: vec![0],
            routes: Vec::new(),
        }),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_sink_is_a_failed_attempt_and_dispatch_keeps_running() {
    let (_d, store) = ankusa_store::test_util::temp_store();
    let store = Arc::new(store);
    let delivered = Arc::new(AtomicUsize::new(0));
    let mut config = Config::default();
    config.dispatch.retry.base_ms = 10;
    config.dispatch.retry.max_ms = 20;
    config.dispatch.breaker_failures = 0;
    let sources = [
        source("bad", Arc::new(PanicSink)),
        source("good", Arc::new(CountSink(delivered.clone()))),
    ]
    .into_iter()
    .collect();
    let live = Live {
        config,
        file_hash: "h".into(),
        generation: 1,
        loaded_at: 0,
        sources,
        trusted_proxies: Vec::new(),
        lifecycle: None,
    };
    let metrics = Arc::new(Metrics::new());
    let handle = ConfigHandle::new(live, None, Arc::new(SinkBuilder::new()));
    let d = Dispatcher::start(Context {
        store: store.clone(),
        config: handle,
        metrics,
        tokio: tokio::runtime::Handle::current(),
        claim_check: None,
        feedback: None,
        lifecycle: None,
    })
    .unwrap();
    let recs: Vec<IngestRecord> = (0..20)
        .map(|i| IngestRecord {
            envelope: ankusa_store::test_util::ingest_test_envelope(
                "t",
                if i % 2 == 0 { "bad" } else { "good" },
            ),
            sinks: vec!["log"],
            lanes: vec![],
            dedupe: None,
            skip_sinks: Vec::new(),
        })
        .collect();
    let results = store.commit_ingest(&recs, now_ms(), false).unwrap();
    d.wake(vec!["t".into()], now_ms());
    let deadline = Instant::now() + Duration::from_secs(10);
    while delivered.load(Ordering::SeqCst) < 10 {
        assert!(
            Instant::now() < deadline,
            "good deliveries stalled behind a panicking sink"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The panicking source's rows are retried, with the panic recorded as the failure.
    let IngestResult::Accepted { seq, .. } = results[0] else {
        panic!()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let rows = store.rows_of(seq).unwrap();
        if rows[0].1.attempts >= 2 {
            assert!(
                rows[0]
                    .1
                    .last_error
                    .as_deref()
                    .unwrap()
                    .contains("sink panicked: boom in a sink")
            );
            break;
        }
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let d2 = d.clone();
    tokio::task::spawn_blocking(move || d2.shutdown(Duration::from_secs(2)))
        .await
        .unwrap();
}

/// A scan costs the tenants with work due, not the tenants there are: one tenant with
/// many due rows beside a thousand tenants due next week visits one tenant per scan.
#[test]
fn a_scan_visits_only_tenants_with_due_work() {
    let (_d, store) = ankusa_store::test_util::temp_store();
    let store = Arc::new(store);
    let now = now_ms();
    let week = 7 * 24 * 3_600_000;
    let idle: Vec<IngestRecord> = (0..1000)
        .map(|i| ankusa_store::test_util::ingest_test_record(&format!("idle-{i}"), "s"))
        .collect();
    store.commit_ingest(&idle, now + week, false).unwrap();
    for _ in 0..4 {
        let hot: Vec<IngestRecord> = (0..2500)
            .map(|_| ankusa_store::test_util::ingest_test_record("hot", "s"))
            .collect();
        store.commit_ingest(&hot, now, false).unwrap();
    }
    let d = DispatchConfig::default();
    let scans = measure_scans(store, &d, 5).unwrap();
    for s in &scans {
        assert_eq!(
            s.visited, 1,
            "only the tenant with due work is read: {scans:?}"
        );
        assert_eq!(s.claimed, d.batch as usize);
    }
}
