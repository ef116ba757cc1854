//! Lifecycle and operational events (docs/lifecycle.md): CloudEvents 1.0 the node emits about
//! itself — sources created, updated or deleted by a reload or a pushed config, hooks
//! dead-lettered, sink breakers opened and closed, replay jobs finished or paused, quarantine
//! counts per interval — kept in the store's audit trail and delivered to `lifecycle.sinks`
//! through the normal dispatch path.
//!
//! The path, in order: a producer calls `Emitter::emit` (never blocks; drops over the per-type
//! ceiling or a full queue, counted) → `writer` gives the event its id and time, appends it to
//! the audit trail (synced) → commits it as a hook of the reserved source
//! `live::LIFECYCLE_SOURCE` through group commit → dispatch delivers it like any hook. The one
//! invariant: nothing is delivered that the trail does not hold. Rows of the lifecycle source
//! never produce events themselves (no loops).
//!
//! `event` (types and the CloudEvent JSON), `emit` (the emitter, the ceiling, interval counts),
//! `writer` (trail, commit, sweeper), `diff` (config changes as events). Imports `commit`,
//! `live`, `metrics`, `blocking`; imported by `app`, `dispatch`, `replay` and `admin`, never the
//! other way.

pub mod diff;
pub mod emit;
pub mod event;
pub mod writer;

use std::sync::Mutex;
use std::time::Duration;

pub use emit::Emitter;
pub use event::{Event, EventType};

use crate::live::ConfigHandle;

/// How long a quarantine count interval is while `lifecycle` is off (nothing is counted then;
/// the flusher only waits this long before looking at the config again).
pub const COUNT_INTERVAL: Duration = Duration::from_secs(60);

/// Emits `source.*` events for every reload or pushed config that changes sources (a refused
/// change installs nothing, so it emits nothing).
pub fn watch_reloads(handle: &ConfigHandle, emitter: Emitter) {
    let last = Mutex::new(handle.live().config.sources.clone());
    handle.on_reload(Box::new(move |live| {
        let mut last = last.lock().unwrap_or_else(|p| p.into_inner());
        for e in diff::source_events(&last, &live.config.sources) {
            emitter.emit_in(live, e);
        }
        *last = live.config.sources.clone();
    }));
}

/// Emits the interval counts (`Emitter::count`) every `lifecycle.count_interval_s`, read from
/// the config in force at the start of each interval (a reload applies from the next one).
pub fn spawn_count_flush(emitter: Emitter) {
    tokio::spawn(async move {
        loop {
            let interval = emitter.count_interval().unwrap_or(COUNT_INTERVAL);
            tokio::time::sleep(interval).await;
            emitter.flush_counts(interval.as_secs());
        }
    });
}
