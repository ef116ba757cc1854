//! The writer: one task that takes queued events, gives each its id (a UUIDv7) and time,
//! appends them to the audit trail in one synced write, and only then commits each as a hook of
//! the lifecycle source (`live::LIFECYCLE_SOURCE`, hook id = event id, body = the CloudEvent,
//! `application/cloudevents+json`) through group commit, so dispatch delivers it to
//! `lifecycle.sinks` under `dispatch.retry`, its horizon, the breakers and the DLQ like any
//! hook. An event the trail refused is not delivered (dropped, `trail_failed`); one whose
//! commit keeps failing stays in the trail (dropped, `commit_failed`) and a `kind: lifecycle`
//! replay can send it. Also the sweeper that keeps the trail within `retention_days` and
//! `max_events`.
//!
//! Imports `commit`, `live`, `metrics`, `blocking` and `event`.

use std::sync::Arc;
use std::time::Duration;

use ankusa_core::{Envelope, now_ms};
use ankusa_store::{AuditEvent, IngestRecord, Store};
use bytes::Bytes;
use tokio::sync::mpsc;

use super::event::Event;
use crate::blocking::blocking;
use crate::commit::Committer;
use crate::live::{ConfigHandle, LIFECYCLE_SOURCE, LIFECYCLE_TENANT, LiveSource};
use crate::metrics::Metrics;

/// The content type of a lifecycle hook: a structured-mode CloudEvent.
pub const CONTENT_TYPE: &str = "application/cloudevents+json";
/// Events one trail write takes at most.
const BATCH: usize = 256;
/// Commits of one event tried at most (group commit answers `Overload` under a burst).
const COMMIT_TRIES: u32 = 5;
/// How often the sweeper runs.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

pub struct Writer {
    pub store: Arc<Store>,
    pub commit: Arc<Committer>,
    pub config: Arc<ConfigHandle>,
    pub metrics: Arc<Metrics>,
}

/// Starts the writer over `rx` and the trail's sweeper.
pub fn spawn(rx: mpsc::Receiver<Event>, w: Writer) {
    let w = Arc::new(w);
    tokio::spawn(run(rx, w.clone()));
    tokio::spawn(sweep_loop(w));
}

async fn run(mut rx: mpsc::Receiver<Event>, w: Arc<Writer>) {
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        while batch.len() < BATCH {
            match rx.try_recv() {
                Ok(e) => batch.push(e),
                Err(_) => break,
            }
        }
        w.write(batch).await;
    }
}

/// The hook that delivers a trail event: its id, its time, the CloudEvent as the body.
pub fn record(source: &LiveSource, e: &AuditEvent) -> Option<IngestRecord> {
    let id = uuid::Uuid::parse_str(&e.id).ok()?;
    let body = serde_json::to_vec(&e.event).ok()?;
    let mut env = Envelope::new(LIFECYCLE_TENANT, LIFECYCLE_SOURCE, Bytes::from(body));
    env.id = id;
    env.received_at = e.time_ms;
    env.content_type = Some(CONTENT_TYPE.to_string());
    env.traceparent = e
        .event
        .get("traceparent")
        .and_then(|t| t.as_str())
        .map(str::to_string);
    Some(IngestRecord {
        envelope: env,
        sinks: source.sink_types.clone(),
        lanes: Vec::new(),
        dedupe: None,
        skip_sinks: Vec::new(),
    })
}

impl Writer {
    async fn write(&self, events: Vec<Event>) {
        let mut live = self.config.live();
        if live.lifecycle.is_none() {
            // A reload emits under the config it installs just before installing it: give the
            // swap a moment before calling `lifecycle` off.
            tokio::time::sleep(Duration::from_millis(200)).await;
            live = self.config.live();
        }
        let Some(source) = live.lifecycle.clone() else {
            // Turned off by a reload after these were queued.
            self.dropped("off", events.len() as u64);
            return;
        };
        let now = now_ms();
        let instance = live.config.node.instance.clone();
        let trail: Vec<AuditEvent> = events
            .iter()
            .map(|e| {
                let id = uuid::Uuid::now_v7();
                AuditEvent {
                    id: id.to_string(),
                    event_type: e.kind.as_str().to_string(),
                    tenant: e.tenant.clone(),
                    time_ms: now,
                    event: e.cloudevent(&id, &instance, now),
                }
            })
            .collect();
        let store = self.store.clone();
        let written = trail.clone();
        if let Err(e) = blocking(move || store.audit_append(&written)).await {
            tracing::error!(error = %e, events = trail.len(), "lifecycle events could not be written to the audit trail; dropped");
            self.dropped("trail_failed", trail.len() as u64);
            return;
        }
        for e in &events {
            self.metrics
                .lifecycle
                .events
                .with_label_values(&[e.kind.as_str()])
                .inc();
        }
        let commits = trail
            .iter()
            .filter_map(|e| record(&source, e))
            .map(|rec| self.commit_one(rec));
        futures::future::join_all(commits).await;
    }

    /// Commits one event's hook, retrying a refused commit with a growing pause.
    async fn commit_one(&self, rec: IngestRecord) {
        let mut pause = Duration::from_millis(100);
        for attempt in 1..=COMMIT_TRIES {
            match self.commit.commit(rec.clone()).await {
                Ok(_) => return,
                Err(e) if attempt == COMMIT_TRIES => {
                    tracing::error!(error = %e, id = %rec.envelope.id, "a lifecycle event could not be committed for delivery; it stays in the audit trail (a kind: lifecycle replay sends it)");
                    self.dropped("commit_failed", 1);
                }
                Err(_) => {
                    tokio::time::sleep(pause).await;
                    pause *= 4;
                }
            }
        }
    }

    fn dropped(&self, reason: &str, n: u64) {
        self.metrics
            .lifecycle
            .dropped
            .with_label_values(&[reason])
            .inc_by(n);
    }
}

/// Keeps the trail within `lifecycle.retention_days` and `max_events` (when `lifecycle` is off
/// the trail is kept as it is: turning events off does not erase the record of past ones).
async fn sweep_loop(w: Arc<Writer>) {
    loop {
        if let Some(l) = w.config.live().config.lifecycle.clone() {
            let before = now_ms().saturating_sub(u64::from(l.retention_days) * 86_400_000);
            loop {
                let store = w.store.clone();
                match blocking(move || store.audit_sweep(before, l.max_events)).await {
                    Ok(s) if s.expired + s.over_count > 0 => {
                        tracing::info!(
                            expired = s.expired,
                            over_count = s.over_count,
                            "audit trail swept"
                        );
                        if s.expired + s.over_count < ankusa_store::AUDIT_MAX_EXAMINED as u64 {
                            break;
                        }
                    }
                    Ok(_) => break,
                    Err(e) => {
                        tracing::warn!(error = %e, "audit trail sweep failed; retried next pass");
                        break;
                    }
                }
            }
        }
        let store = w.store.clone();
        if let Ok(n) = blocking(move || store.audit_count()).await {
            w.metrics.lifecycle.trail_events.set(n);
        }
        tokio::time::sleep(SWEEP_EVERY).await;
    }
}
