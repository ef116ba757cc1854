//! `wal.type: dual`: a hook is acked only once it is in this node's store (synced) AND its
//! intake record is confirmed by the replicated intake log. The committer starts the publish
//! between planning a batch and writing it, so the two halves run in parallel and the ack
//! waits for the slower.
//!
//! Every hook committed here carries a marker until the log confirms its record: a hook whose
//! publish failed (its provider got `503 intake_unavailable`) stays stored and is published by
//! the reconciler; a provider retry of it on a source with dedupe gets `503 intake_pending`
//! until then, and `201` with the first id after. Failed publishes in a row open a breaker:
//! new hooks are refused before anything is written, so nothing is acked that is not in both
//! places. A node that starts on an empty (or restored) store replays its own records from the
//! log first (`rebuild`).

mod jetstream;
mod kafka;
mod metrics;
mod rebuild;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI32, AtomicI64, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ankusa_config::{ConfigError, IntakeConfig, NatsSinkConfig};
use ankusa_core::now_ms;
use ankusa_format::intake::{IntakeDedupe, IntakeMeta, encode_intake, encode_intake_json};
use ankusa_store::WriteBatch;
use tokio::sync::oneshot;
use uuid::Uuid;

use ankusa_format::keys;

use ankusa_store::{Committed, IngestRecord, IngestResult, Store};

pub use jetstream::JetStreamLog;
pub use kafka::KafkaLog;
pub use metrics::IntakeMetrics;
pub use rebuild::RebuildReport;

const RECOVERING: u8 = 0;
const READY: u8 = 1;
const DOWN: u8 = 2;

/// Hooks the reconciler republishes per round.
const RECONCILE_BATCH: usize = 500;

/// The log behind the intake: Kafka or JetStream.
enum Log {
    Kafka(KafkaLog),
    /// Boxed: it keeps its sink config for reconnecting.
    JetStream(Box<JetStreamLog>),
}

impl Log {
    fn name(&self) -> &'static str {
        match self {
            Log::Kafka(_) => "kafka",
            Log::JetStream(_) => "jetstream",
        }
    }

    async fn publish(
        &self,
        node: &str,
        payloads: Vec<Vec<u8>>,
    ) -> Result<Vec<kafka::Position>, String> {
        match self {
            Log::Kafka(k) => k.publish(node, payloads).await,
            Log::JetStream(j) => j.publish(node, payloads).await,
        }
    }

    /// Blocking: call off the runtime's workers.
    fn end_offsets(
        &self,
        node: &str,
        rt: &tokio::runtime::Handle,
    ) -> Result<BTreeMap<i32, i64>, String> {
        match self {
            Log::Kafka(k) => k.end_offsets(),
            Log::JetStream(j) => rt.block_on(j.end_offsets(node)),
        }
    }

    /// Blocking: call off the runtime's workers.
    fn read_node(
        &self,
        node: &str,
        from: &BTreeMap<i32, i64>,
        rt: &tokio::runtime::Handle,
        f: impl FnMut(i32, i64, &[u8]) -> Result<(), String>,
    ) -> Result<u64, String> {
        match self {
            Log::Kafka(k) => k.read_node(node, from, f),
            Log::JetStream(j) => rt.block_on(j.read_node(node, from, f)),
        }
    }
}

struct PendingEntry {
    seq: u64,
    since_ms: u64,
    /// A publish of its record is under way (the commit's or the reconciler's).
    inflight: bool,
}

pub struct Intake {
    log: Log,
    rt: tokio::runtime::Handle,
    node: String,
    cfg: IntakeConfig,
    store: Arc<Store>,
    pub metrics: IntakeMetrics,
    state: AtomicU8,
    failures: AtomicU64,
    /// Unix ms the breaker opened (0: closed).
    opened_at: AtomicU64,
    pending: Mutex<HashMap<Uuid, PendingEntry>>,
    /// Seqs whose record the log confirmed and whose marker is still stored: deleted by the
    /// next commit's batch (no write of their own on the ack path) or the reconciler's round.
    settled: Mutex<Vec<u64>>,
    partition: AtomicI32,
    offset: AtomicI64,
    last_confirm_ms: AtomicU64,
    watermark: Mutex<Option<BTreeMap<i32, i64>>>,
}

/// A batch's publish, started before its synced write.
pub struct Publish {
    rx: oneshot::Receiver<Result<Vec<kafka::Position>, String>>,
    seqs: Vec<u64>,
    ids: Vec<Uuid>,
    started: Instant,
}

/// What the committer answers a record of a dual batch.
pub enum Answer {
    Ok(IngestResult),
    /// The local half is done, the log's is not: `503 intake_unavailable`.
    Unavailable,
    /// A retry of a hook whose record is not confirmed yet: `503 intake_pending`.
    Pending,
}

/// The log's client settings, checked, before any client exists: what `Intake::start` builds
/// its log from.
enum Plan<'a> {
    Kafka(rdkafka::ClientConfig, &'a ankusa_config::KafkaSinkConfig),
    /// Connects on first use (a server away at start is retried), so nothing more to check.
    JetStream(&'a NatsSinkConfig),
}

fn plan(cfg: &IntakeConfig) -> Result<Plan<'_>, ConfigError> {
    let timeout = Duration::from_millis(cfg.publish_timeout_ms);
    match (&cfg.kafka, &cfg.jetstream) {
        (Some(k), _) => Ok(Plan::Kafka(kafka::client_config(k, timeout)?, k)),
        (None, Some(j)) => Ok(Plan::JetStream(j)),
        (None, None) => Err(ConfigError::field(
            "intake",
            "needs intake.kafka or intake.jetstream",
        )),
    }
}

/// What `Intake::start` refuses of `cfg`, found without creating a client or connecting:
/// `ankusa check-config` runs this.
pub fn check(cfg: &IntakeConfig) -> Result<(), ConfigError> {
    plan(cfg).map(|_| ())
}

impl Intake {
    /// Refuses (a `ConfigError`) what `check` refuses, then creates the log's client.
    pub async fn start(
        cfg: &IntakeConfig,
        default_node: &str,
        store: Arc<Store>,
        registry: &prometheus::Registry,
    ) -> Result<Arc<Intake>, ConfigError> {
        let timeout = Duration::from_millis(cfg.publish_timeout_ms);
        let log = match plan(cfg)? {
            Plan::Kafka(client, k) => Log::Kafka(KafkaLog::new(client, k, timeout)?),
            Plan::JetStream(j) => Log::JetStream(Box::new(JetStreamLog::new(j, timeout))),
        };
        let node = cfg.node.clone().unwrap_or_else(|| default_node.to_string());
        Ok(Arc::new(Intake {
            log,
            rt: tokio::runtime::Handle::current(),
            node,
            cfg: cfg.clone(),
            store,
            metrics: IntakeMetrics::new(registry),
            state: AtomicU8::new(RECOVERING),
            failures: AtomicU64::new(0),
            opened_at: AtomicU64::new(0),
            pending: Mutex::new(HashMap::new()),
            settled: Mutex::new(Vec::new()),
            partition: AtomicI32::new(-1),
            offset: AtomicI64::new(-1),
            last_confirm_ms: AtomicU64::new(0),
            watermark: Mutex::new(None),
        }))
    }

    pub fn node(&self) -> &str {
        &self.node
    }

    pub fn retry_after_s(&self) -> u32 {
        self.cfg.retry_after_s
    }

    /// `recovering`, `ready` or `down`.
    pub fn state(&self) -> &'static str {
        match self.state.load(Ordering::SeqCst) {
            RECOVERING => "recovering",
            READY => "ready",
            _ => "down",
        }
    }

    fn settled(&self) -> std::sync::MutexGuard<'_, Vec<u64>> {
        self.settled.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn pending_map(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, PendingEntry>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether new hooks may be taken: not while recovering; with the breaker open, one try
    /// per `retry_after_s` (half-open), so the log coming back is noticed without a restart.
    pub fn admits(&self) -> bool {
        match self.state.load(Ordering::SeqCst) {
            RECOVERING => false,
            READY => true,
            _ => {
                let opened = self.opened_at.load(Ordering::SeqCst);
                let now = now_ms();
                let cool = u64::from(self.cfg.retry_after_s) * 1000;
                now.saturating_sub(opened) >= cool
                    && self
                        .opened_at
                        .compare_exchange(opened, now, Ordering::SeqCst, Ordering::SeqCst)
                        .is_ok()
            }
        }
    }

    /// Called from the commit, between planning and writing: marks every accepted hook
    /// pending (in the batch and in memory) and starts publishing their records.
    pub fn begin(
        self: &Arc<Self>,
        recs: &[IngestRecord],
        encoded: &[Vec<u8>],
        committed: &Committed,
        batch: &mut WriteBatch,
        rt: &tokio::runtime::Handle,
    ) -> Publish {
        let now = now_ms();
        for seq in std::mem::take(&mut *self.settled()) {
            batch.delete(keys::intake_pending(seq));
        }
        let mut payloads = Vec::new();
        let mut seqs = Vec::new();
        let mut ids = Vec::new();
        {
            let mut pending = self.pending_map();
            for ((rec, enc), res) in recs.iter().zip(encoded).zip(&committed.results) {
                let IngestResult::Accepted { id, seq } = *res else {
                    continue;
                };
                let meta = serde_json::to_vec(&meta_of(&self.node, seq, rec))
                    .expect("intake metadata serialises");
                payloads.push(encode_intake_json(&meta, enc));
                batch.put(keys::intake_pending(seq), meta);
                seqs.push(seq);
                ids.push(id);
                pending.insert(
                    id,
                    PendingEntry {
                        seq,
                        since_ms: now,
                        inflight: true,
                    },
                );
            }
            self.metrics.pending.set(pending.len() as i64);
        }
        let (tx, rx) = oneshot::channel();
        let me = self.clone();
        rt.spawn(async move {
            let r = if payloads.is_empty() {
                Ok(Vec::new())
            } else {
                me.log.publish(&me.node, payloads).await
            };
            let _ = tx.send(r);
        });
        Publish {
            rx,
            seqs,
            ids,
            started: Instant::now(),
        }
    }

    /// Waits for a batch's publish (its synced write is done) and says what each record is
    /// answered.
    pub async fn finish(&self, publish: Publish, results: &[IngestResult]) -> Vec<Answer> {
        let r = publish
            .rx
            .await
            .unwrap_or_else(|_| Err("publish: the task stopped".into()));
        self.metrics
            .publish_seconds
            .observe(publish.started.elapsed().as_secs_f64());
        let ok = match r {
            // Only duplicates in the batch: nothing was published, the breaker learns nothing.
            Ok(_) if publish.ids.is_empty() => true,
            Ok(positions) => {
                // Queued before the ids leave the pending map, so a reconciler round that
                // no longer finds an id there finds its seq here.
                self.settled().extend_from_slice(&publish.seqs);
                self.confirmed(&publish.ids, &positions);
                true
            }
            Err(e) => {
                self.failed("publish", &e, &publish.ids);
                false
            }
        };
        let pending = self.pending_map();
        results
            .iter()
            .map(|res| match *res {
                IngestResult::Accepted { .. } if !ok => Answer::Unavailable,
                IngestResult::Duplicate { id } if pending.contains_key(&id) => Answer::Pending,
                other => Answer::Ok(other),
            })
            .collect()
    }

    /// The batch's synced write failed: its hooks are not stored and were not acked. Their
    /// records may still reach the log; a rebuild then brings them back under their ids (the
    /// provider, told 503, retries: with dedupe the retry meets the same key).
    pub fn abandon(&self, publish: Publish) {
        let mut pending = self.pending_map();
        for id in &publish.ids {
            pending.remove(id);
        }
        self.metrics.pending.set(pending.len() as i64);
    }

    fn confirmed(&self, ids: &[Uuid], positions: &[kafka::Position]) {
        if let Some(&(p, off)) = positions.last() {
            self.partition.store(p, Ordering::SeqCst);
            self.offset.fetch_max(off, Ordering::SeqCst);
        }
        self.last_confirm_ms.store(now_ms(), Ordering::SeqCst);
        {
            let mut pending = self.pending_map();
            for id in ids {
                pending.remove(id);
            }
            self.metrics.pending.set(pending.len() as i64);
        }
        self.failures.store(0, Ordering::SeqCst);
        if self.state.load(Ordering::SeqCst) == DOWN {
            tracing::info!("intake log reachable again: taking new hooks");
            self.state.store(READY, Ordering::SeqCst);
            self.opened_at.store(0, Ordering::SeqCst);
        }
        self.metrics.ready.set(i64::from(self.state() == "ready"));
    }

    fn failed(&self, class: &'static str, e: &str, ids: &[Uuid]) {
        self.metrics.failures.with_label_values(&[class]).inc();
        {
            let mut pending = self.pending_map();
            for id in ids {
                if let Some(p) = pending.get_mut(id) {
                    p.inflight = false;
                }
            }
        }
        let n = self.failures.fetch_add(1, Ordering::SeqCst) + 1;
        if n >= u64::from(self.cfg.breaker_failures) && self.state.load(Ordering::SeqCst) != DOWN {
            tracing::error!(failures = n, error = %e, "intake log failing: refusing new hooks (503 intake_unavailable)");
            self.opened_at.store(now_ms(), Ordering::SeqCst);
            if self.state.load(Ordering::SeqCst) == READY {
                self.state.store(DOWN, Ordering::SeqCst);
            }
        } else {
            tracing::warn!(failures = n, error = %e, "intake publish failed");
        }
        self.metrics.ready.set(i64::from(self.state() == "ready"));
    }

    /// One reconciler round: publishes up to `RECONCILE_BATCH` hooks committed here whose
    /// record is not confirmed. Returns how many were confirmed.
    pub async fn reconcile_once(&self) -> Result<usize, String> {
        let store = self.store.clone();
        let done = std::mem::take(&mut *self.settled());
        let markers = tokio::task::spawn_blocking(move || {
            store.intake_settle(&done)?;
            store.intake_pending(RECONCILE_BATCH)
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
        let now = now_ms();
        let mut todo = Vec::new();
        {
            let mut pending = self.pending_map();
            let by_seq: HashMap<u64, Uuid> = pending.iter().map(|(id, p)| (p.seq, *id)).collect();
            // Confirmed since the settle above: their markers go with the next one.
            let settled: std::collections::HashSet<u64> = self.settled().iter().copied().collect();
            for (seq, meta) in markers {
                if settled.contains(&seq) {
                    continue;
                }
                match by_seq.get(&seq) {
                    Some(id) if pending.get(id).is_some_and(|p| p.inflight) => continue,
                    Some(id) => {
                        if let Some(p) = pending.get_mut(id) {
                            p.inflight = true;
                        }
                        todo.push((seq, Some(*id), meta));
                    }
                    None => todo.push((seq, None, meta)),
                }
            }
            // Markers found at start (or after a failed round): known from now on.
            let _ = now;
        }
        if todo.is_empty() {
            self.update_lag();
            return Ok(0);
        }
        let store = self.store.clone();
        let node = self.node.clone();
        let built = tokio::task::spawn_blocking(move || {
            let mut payloads = Vec::new();
            let mut seqs = Vec::new();
            let mut ids = Vec::new();
            let mut gone = Vec::new();
            for (seq, _, meta) in todo {
                let meta: IntakeMeta = match serde_json::from_slice(&meta) {
                    Ok(m) => m,
                    Err(_) => {
                        tracing::error!(seq, "intake marker does not decode: dropped");
                        gone.push(seq);
                        continue;
                    }
                };
                match store.get_hook(seq) {
                    // Delivered and removed meanwhile: nothing left to make durable.
                    Ok(None) => gone.push(seq),
                    Ok(Some(env)) => {
                        let enc = ankusa_store::encode_envelope(&env);
                        let meta = IntakeMeta {
                            node: node.clone(),
                            ..meta
                        };
                        payloads.push(encode_intake(&meta, &enc));
                        seqs.push(seq);
                        ids.push(env.id);
                    }
                    Err(e) => return Err(e.to_string()),
                }
            }
            store.intake_settle(&gone).map_err(|e| e.to_string())?;
            Ok((payloads, seqs, ids, gone))
        })
        .await
        .map_err(|e| e.to_string())??;
        let (payloads, seqs, ids, gone) = built;
        {
            let mut pending = self.pending_map();
            // Delivered everywhere and removed before its record made it to the log: nothing
            // is left to lose, so a retry of it is answered with its id at once.
            pending.retain(|_, p| !gone.contains(&p.seq));
            for (id, seq) in ids.iter().zip(&seqs) {
                pending.entry(*id).or_insert(PendingEntry {
                    seq: *seq,
                    since_ms: now,
                    inflight: true,
                });
            }
            self.metrics.pending.set(pending.len() as i64);
        }
        if payloads.is_empty() {
            return Ok(0);
        }
        let started = Instant::now();
        match self.log.publish(&self.node, payloads).await {
            Ok(positions) => {
                self.metrics
                    .publish_seconds
                    .observe(started.elapsed().as_secs_f64());
                self.confirmed(&ids, &positions);
                let store = self.store.clone();
                let n = seqs.len();
                tokio::task::spawn_blocking(move || store.intake_settle(&seqs))
                    .await
                    .map_err(|e| e.to_string())?
                    .map_err(|e| e.to_string())?;
                self.update_lag();
                Ok(n)
            }
            Err(e) => {
                self.failed("reconcile", &e, &ids);
                self.update_lag();
                Err(e)
            }
        }
    }

    fn update_lag(&self) {
        let now = now_ms();
        let pending = self.pending_map();
        let oldest = pending.values().map(|p| p.since_ms).min();
        let age = oldest.map(|o| now.saturating_sub(o) as f64 / 1000.0);
        self.metrics.reconcile_oldest_age.set(age.unwrap_or(0.0));
        self.metrics.reconcile_stuck.set(
            pending
                .values()
                .filter(|p| now.saturating_sub(p.since_ms) > 60_000)
                .count() as i64,
        );
        let lag = if pending.is_empty() {
            0.0
        } else {
            now.saturating_sub(self.last_confirm_ms.load(Ordering::SeqCst)) as f64 / 1000.0
        };
        self.metrics.offset_lag.set(lag);
        self.metrics.pending.set(pending.len() as i64);
    }

    /// Boot: rebuild the store from the log when it starts empty (or restored: from the
    /// backup's watermark), publish what an earlier run left pending, then take hooks.
    pub async fn recover(self: &Arc<Self>, rebuild_from: Option<BTreeMap<i32, i64>>) {
        if let Some(from) = rebuild_from {
            loop {
                let me = self.clone();
                let from2 = from.clone();
                match tokio::task::spawn_blocking(move || rebuild::run(&me, &from2)).await {
                    Ok(Ok(report)) => {
                        tracing::info!(
                            read = report.read,
                            restored = report.restored,
                            present = report.present,
                            skipped = report.skipped,
                            "intake: store rebuilt from the log"
                        );
                        break;
                    }
                    Ok(Err(e)) => {
                        self.metrics.failures.with_label_values(&["rebuild"]).inc();
                        tracing::error!(error = %e, "intake: rebuild from the log failed; retrying in 2 s");
                    }
                    Err(e) => tracing::error!(error = %e, "intake: rebuild task failed"),
                }
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        }
        loop {
            match self.reconcile_once().await {
                Ok(0) => break,
                Ok(_) => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "intake: boot reconcile failed; retrying");
                    tokio::time::sleep(Duration::from_millis(self.cfg.reconcile_interval_ms)).await;
                }
            }
        }
        self.state.store(READY, Ordering::SeqCst);
        self.metrics.ready.set(1);
        tracing::info!(node = %self.node, "intake log ready");
    }

    /// The live reconciler: runs until the process stops. While the breaker is open and
    /// nothing waits to be published, it probes the log every `retry_after_s`, so the node
    /// takes hooks again once the log is back, with or without traffic.
    pub async fn run_reconciler(self: Arc<Self>) {
        let every = Duration::from_millis(self.cfg.reconcile_interval_ms);
        let probe_every = Duration::from_secs(u64::from(self.cfg.retry_after_s));
        let mut last_probe = Instant::now();
        loop {
            tokio::time::sleep(every).await;
            if self.state.load(Ordering::SeqCst) == RECOVERING {
                continue;
            }
            if self.state.load(Ordering::SeqCst) == DOWN
                && self.pending_map().is_empty()
                && last_probe.elapsed() >= probe_every
            {
                last_probe = Instant::now();
                let me = self.clone();
                let probe = tokio::task::spawn_blocking(move || {
                    me.log.end_offsets(&me.node, &me.rt).map(|_| ())
                })
                .await
                .unwrap_or_else(|e| Err(e.to_string()));
                match probe {
                    Ok(()) => self.confirmed(&[], &[]),
                    Err(e) => tracing::debug!(error = %e, "intake probe failed"),
                }
            }
            loop {
                match self.reconcile_once().await {
                    Ok(n) if n >= RECONCILE_BATCH => continue,
                    Ok(_) => break,
                    Err(e) => {
                        tracing::debug!(error = %e, "intake reconcile round failed");
                        break;
                    }
                }
            }
        }
    }

    /// The watermark a backup records: with commits held off, the end of every partition, so
    /// every record of this node below it is in the store the checkpoint is taken of next.
    pub fn mark_blocking(&self) -> Option<serde_json::Value> {
        // Commits wait while the broker is asked: only when it is answering. A backup taken
        // without a watermark is still whole; a restore from it replays the whole log.
        if self.state.load(Ordering::SeqCst) != READY {
            tracing::warn!("intake: the log is not ready: this backup has no watermark");
            return None;
        }
        let ends = self
            .store
            .with_commits_paused(|| self.log.end_offsets(&self.node, &self.rt));
        match ends {
            Ok(ends) => {
                *self.watermark.lock().unwrap_or_else(|p| p.into_inner()) = Some(ends.clone());
                Some(serde_json::json!({ self.log.name(): { "partitions": ends } }))
            }
            Err(e) => {
                tracing::warn!(error = %e, "intake: no watermark for this backup (a restore replays the whole log)");
                None
            }
        }
    }

    /// `GET /v1/status` and `GET /v1/wal`'s `intake`.
    pub fn status(&self) -> ankusa_api::IntakeStatus {
        self.update_lag();
        let pending = self.pending_map().len() as u64;
        let p = self.partition.load(Ordering::SeqCst);
        let off = self.offset.load(Ordering::SeqCst);
        let wm = self
            .watermark
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .and_then(|w| w.get(&p).copied());
        ankusa_api::IntakeStatus {
            log: self.log.name().into(),
            node: self.node.clone(),
            state: self.state().into(),
            partition: (p >= 0).then_some(p),
            offset: (off >= 0).then_some(off),
            watermark: wm,
            pending,
            lag_seconds: self.metrics.offset_lag.get(),
            failures: self.failures.load(Ordering::SeqCst),
        }
    }
}

/// The backup's watermark parsed back: per partition, where a rebuild starts.
pub fn watermark_from(v: &serde_json::Value) -> Option<BTreeMap<i32, i64>> {
    let log = v.get("kafka").or_else(|| v.get("jetstream"))?;
    let parts = log.get("partitions")?.as_object()?;
    let mut out = BTreeMap::new();
    for (k, v) in parts {
        out.insert(k.parse().ok()?, v.as_i64()?);
    }
    Some(out)
}

fn meta_of(node: &str, seq: u64, rec: &IngestRecord) -> IntakeMeta {
    IntakeMeta {
        node: node.to_string(),
        seq,
        sinks: rec.sinks.iter().map(|s| s.to_string()).collect(),
        lanes: if rec.lanes.iter().any(Option::is_some) {
            rec.lanes.clone()
        } else {
            Vec::new()
        },
        dedupe: rec.dedupe.as_ref().map(|d| IntakeDedupe {
            key: d.key.clone(),
            ttl_ms: d.ttl_ms,
            source_wide: d.source_wide,
        }),
        skip_sinks: rec.skip_sinks.clone(),
    }
}

/// What a backup records of the intake log (`backup::IntakeMark`).
pub struct IntakeWatermark(pub Arc<Intake>);

impl crate::backup::IntakeMark for IntakeWatermark {
    fn mark(&self) -> futures::future::BoxFuture<'static, Option<serde_json::Value>> {
        let i = self.0.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || i.mark_blocking())
                .await
                .ok()
                .flatten()
        })
    }
}
