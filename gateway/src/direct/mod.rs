//! Direct mode (`wal.type: none`): the request publishes its hook to every sink of its source
//! concurrently, under one deadline (`wal.publish_timeout_ms`), and is answered `201` only once
//! every sink confirmed it (a broker's ack or confirm, an HTTP 2xx). Any refusal, a deadline
//! passed, or an open breaker answers `503 sink_unavailable`; sinks that confirmed keep their
//! copy, so the provider's retry is a duplicate there with the same idempotency key. Each sink
//! is called once per request: there is no retry here, the provider's retry is the retry.
//!
//! Nothing of the hook is stored. What stays: verification, rate limits and the ingest status
//! map (the edge), the claim check (a large body is checked in before any sink runs), dedupe
//! per pod in memory (`recent`), and one circuit breaker per sink key (the dispatch breaker's
//! rules and `dispatch.breaker_*` settings): while a sink's breaker is open no sink of the
//! source is called, so an outage does not fill the healthy sinks with copies.
//!
//! The publish runs in its own task: a provider that hangs up mid-publish does not cut a sink
//! off mid-confirm, and the breakers and dedupe still learn the outcome.
//!
//! Imports `live`, `metrics`, `telemetry` and dispatch's leaves (`breaker`, `attempt`,
//! `forward`); the edge calls it, `app.rs` builds it.

mod recent;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ankusa_config::WalConfig;
use ankusa_core::{ClaimCheck, DeliveryCtx, Envelope, SinkError, now_ms};
use ankusa_store::{IngestRecord, IngestResult};

use crate::dispatch::SinkKey;
use crate::dispatch::attempt::{self, Attempt};
use crate::dispatch::breaker::Breakers;
use crate::dispatch::forward;
use crate::live::{Live, LiveSource};
use crate::metrics::Metrics;
use crate::telemetry;

pub use recent::MAX_KEYS;
use recent::{Begin, Lead, Recent};

/// Breaker entries are swept of closed, healthy keys once per this many publishes.
const SWEEP_EVERY: u64 = 1024;

/// The hook was not taken: answer `503 sink_unavailable` with this `Retry-After`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unavailable {
    pub retry_after: u64,
}

/// Why a publish failed, as `ankusa_direct_publishes_total{outcome}` counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failed {
    Refused,
    Timeout,
    BreakerOpen { retry_after: u64 },
}

pub struct Direct {
    timeout: Duration,
    retry_after: u64,
    recent: Arc<Recent>,
    breakers: Mutex<Breakers>,
    publishes: AtomicU64,
    claim_check: Option<Arc<dyn ClaimCheck>>,
    metrics: Arc<Metrics>,
}

impl Direct {
    pub fn new(
        wal: &WalConfig,
        claim_check: Option<Arc<dyn ClaimCheck>>,
        metrics: Arc<Metrics>,
    ) -> Arc<Direct> {
        Arc::new(Direct {
            timeout: Duration::from_millis(wal.publish_timeout_ms),
            retry_after: u64::from(wal.retry_after_s),
            recent: Recent::new(MAX_KEYS),
            breakers: Mutex::default(),
            publishes: AtomicU64::new(0),
            claim_check,
            metrics,
        })
    }

    /// Publishes `record`'s hook to every sink of its source in `live`: `Accepted` once all
    /// confirmed, `Duplicate` for a dedupe key this pod confirmed within its TTL.
    pub async fn publish(
        self: &Arc<Self>,
        live: Arc<Live>,
        record: IngestRecord,
    ) -> Result<IngestResult, Unavailable> {
        let this = self.clone();
        let task = tokio::spawn(async move { this.publish_owned(live, record).await });
        task.await.unwrap_or_else(|e| {
            tracing::error!(error = %e, "direct publish task failed");
            Err(Unavailable {
                retry_after: self.retry_after,
            })
        })
    }

    async fn publish_owned(
        &self,
        live: Arc<Live>,
        record: IngestRecord,
    ) -> Result<IngestResult, Unavailable> {
        let started = Instant::now();
        let deadline = tokio::time::Instant::from_std(started + self.timeout);
        let ttl = record.dedupe.as_ref().map_or(0, |d| d.ttl_ms);
        let lead = match dedupe_key(&record) {
            None => None,
            Some(key) => match self.lead(key, deadline).await {
                Ok(lead) => Some(lead),
                Err(Ok(id)) => {
                    self.count("duplicate");
                    return Ok(IngestResult::Duplicate { id });
                }
                Err(Err(failed)) => return Err(self.refuse(failed)),
            },
        };
        let id = record.envelope.id;
        let result = self.publish_all(&live, record, deadline).await;
        self.metrics
            .direct
            .duration_seconds
            .observe(started.elapsed().as_secs_f64());
        if self
            .publishes
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(SWEEP_EVERY)
        {
            self.lock_breakers().sweep();
        }
        match result {
            Ok(()) => {
                if let Some(lead) = lead {
                    let now = now_ms();
                    lead.confirmed(id, now, now.saturating_add(ttl));
                }
                self.count("confirmed");
                Ok(IngestResult::Accepted { id, seq: 0 })
            }
            Err(failed) => Err(self.refuse(failed)),
        }
    }

    /// This request's turn to publish `key` (`Ok`), or the id a confirmed earlier request got
    /// (`Err(Ok)`), waiting for one in flight within the deadline.
    async fn lead(
        &self,
        key: String,
        deadline: tokio::time::Instant,
    ) -> Result<Lead, Result<uuid::Uuid, Failed>> {
        loop {
            match self.recent.begin(key.clone(), now_ms()) {
                Begin::Seen(id) => return Err(Ok(id)),
                Begin::Lead(l) => return Ok(l),
                // Confirmed (the next `begin` sees it) or given up (the next `begin` leads).
                Begin::Wait(mut rx) => {
                    if tokio::time::timeout_at(deadline, rx.changed())
                        .await
                        .is_err()
                    {
                        return Err(Err(Failed::Timeout));
                    }
                }
            }
        }
    }

    async fn publish_all(
        &self,
        live: &Live,
        record: IngestRecord,
        deadline: tokio::time::Instant,
    ) -> Result<(), Failed> {
        let IngestRecord {
            envelope, lanes, ..
        } = record;
        let env = Arc::new(envelope);
        let Some(src) = live.sources.get(&env.source_id) else {
            // Removed by a reload since the request began.
            return Err(Failed::Refused);
        };
        let keys = sink_keys(src, &env);
        let probes = self.admit(&keys, &live.config.dispatch)?;
        let claim = self.check_in(src, &env, deadline).await?;
        let attempts = src.sinks.iter().enumerate().map(|(i, sink)| {
            let name = src
                .cfg
                .sink_names
                .get(i)
                .cloned()
                .unwrap_or_else(|| format!("sinks[{i}]"));
            let span = attempt::deliver_span(&env, sink.type_name(), &name, 1, None);
            let ctx = DeliveryCtx {
                instance: live.config.node.instance.clone(),
                region: live.config.node.region.clone(),
                attempt: 1,
                replay_id: None,
                forward_headers: forward::forwarded(&env.headers, &src.cfg, Some(&self.metrics)),
                tenant_for_pools: env.tenant.clone(),
                claim_check: claim.clone(),
                ordering_key: lanes.get(i).cloned().flatten(),
                traceparent: telemetry::traceparent_of(&span),
                original_sha256: None,
            };
            attempt::run(Attempt {
                sink: sink.clone(),
                hook: env.clone(),
                ctx,
                claim_check: None,
                timeout: deadline.saturating_duration_since(tokio::time::Instant::now()),
                span,
            })
        });
        let results = futures::future::join_all(attempts).await;
        let timed_out = tokio::time::Instant::now() >= deadline;
        let now = now_ms();
        let mut failed = None;
        {
            let mut breakers = self.lock_breakers();
            for (i, r) in results.iter().enumerate() {
                breakers.record(
                    &keys[i],
                    &live.config.dispatch,
                    r,
                    probes[i],
                    now,
                    &self.metrics,
                );
            }
        }
        for (i, r) in results.iter().enumerate() {
            if let Err(e) = r {
                self.note_failure(src, i, e);
                failed = Some(if timed_out {
                    Failed::Timeout
                } else {
                    Failed::Refused
                });
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// Whether every sink's breaker lets an attempt start; for each, whether it runs as the
    /// half-open probe. Checked for all before any is taken, so a refusal leaves no breaker
    /// waiting on a probe that never runs.
    fn admit(
        &self,
        keys: &[SinkKey],
        d: &ankusa_config::DispatchConfig,
    ) -> Result<Vec<bool>, Failed> {
        use crate::dispatch::breaker::Gate;
        let now = now_ms();
        let mut breakers = self.lock_breakers();
        if let Some(until) = keys.iter().filter_map(|k| breakers.blocked(k, now)).max() {
            let retry_after = until.saturating_sub(now).div_ceil(1000).max(1);
            return Err(Failed::BreakerOpen { retry_after });
        }
        Ok(keys
            .iter()
            .map(|k| breakers.gate(k, now, 0, d, &self.metrics) == Gate::Probe)
            .collect())
    }

    /// The claim check of a body over the smallest inline limit of the source's sinks, written
    /// before any sink runs.
    async fn check_in(
        &self,
        src: &LiveSource,
        env: &Envelope,
        deadline: tokio::time::Instant,
    ) -> Result<Option<ankusa_core::ClaimCheckRef>, Failed> {
        let limit = src.sinks.iter().filter_map(|s| s.inline_max_bytes()).min();
        let (Some(limit), Some(cc)) = (limit, &self.claim_check) else {
            return Ok(None);
        };
        if env.body.len() as u64 <= limit {
            return Ok(None);
        }
        match tokio::time::timeout_at(deadline, cc.check_in(env)).await {
            Ok(Ok(r)) => Ok(Some(r)),
            Ok(Err(e)) => {
                tracing::warn!(source = %env.source_id, hook_id = %env.id, error = %e, "claim check-in failed: the hook is refused");
                Err(Failed::Refused)
            }
            Err(_) => Err(Failed::Timeout),
        }
    }

    fn note_failure(&self, src: &LiveSource, i: usize, e: &SinkError) {
        let sink_type = src.sink_types.get(i).copied().unwrap_or("unknown");
        let class = attempt::outcome(&Err(e.clone()));
        self.metrics
            .direct
            .sink_failures
            .with_label_values(&[sink_type, class])
            .inc();
        tracing::warn!(
            source = %src.id, sink = i, sink_type, class, error = %e,
            "direct publish: the sink did not confirm; answering 503"
        );
    }

    fn refuse(&self, failed: Failed) -> Unavailable {
        let (outcome, retry_after) = match failed {
            Failed::Refused => ("refused", self.retry_after),
            Failed::Timeout => ("timeout", self.retry_after),
            Failed::BreakerOpen { retry_after } => ("breaker_open", retry_after),
        };
        self.count(outcome);
        Unavailable { retry_after }
    }

    fn count(&self, outcome: &str) {
        self.metrics
            .direct
            .publishes
            .with_label_values(&[outcome])
            .inc();
    }

    fn lock_breakers(&self) -> std::sync::MutexGuard<'_, Breakers> {
        self.breakers.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The dedupe namespace of a keyed record: tenant (or `*` for a source-wide key), source, key.
fn dedupe_key(record: &IngestRecord) -> Option<String> {
    let d = record.dedupe.as_ref()?;
    let env = &record.envelope;
    let tenant = if d.source_wide { "*" } else { &env.tenant };
    Some(format!("{tenant}\0{}\0{}", env.source_id, d.key))
}

/// The breaker key of each sink of the source, for this hook's tenant.
fn sink_keys(src: &LiveSource, env: &Envelope) -> Vec<SinkKey> {
    (0..src.sinks.len())
        .map(|i| SinkKey {
            tenant: env.tenant.clone(),
            source: src.id.clone(),
            sink: i as u16,
            sink_type: src.sink_types.get(i).copied().unwrap_or("unknown").into(),
        })
        .collect()
}
