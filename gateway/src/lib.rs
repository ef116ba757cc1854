//! Ankusa's gateway: verifies, dedupes and durably stores provider webhooks, then delivers
//! each at least once to every sink of its source.
//!
//! A hook travels edge → commit → store → dispatch → sink: `edge` answers the provider only
//! after group `commit` has fsynced the hook into the `store`; `dispatch` claims due delivery
//! rows and runs attempts against the sinks of `ankusa-sinks`; `replay` moves dead rows back;
//! `admin` exposes it all. `quarantine` holds the hooks a source's `on_verify_failure:
//! quarantine` keeps instead of refusing, until a replay job releases them. `archive` packs hooks
//! into segments in a `blob` store (and bounds the DLQ by what is archived). `live` is the config
//! in force and its reloads. `telemetry` exports the spans of a hook's way (ingest, each
//! delivery attempt, replay steps) over OTLP when `telemetry.otlp` asks for it.

pub mod admin;
pub mod api_error;
pub mod app;
pub mod archive;
pub mod asyncapi;
pub mod backup;
pub mod blob;
mod blocking;
pub mod claim_check;
pub mod cli;
pub mod commit;
pub mod direct;
pub mod dispatch;
pub mod edge;
mod egress_metrics;
pub mod fleet;
pub mod hook;
pub mod intake;
pub mod lifecycle;
pub mod live;
pub mod metrics;
pub mod probes;
pub mod quarantine;
pub mod replay;
pub mod serve;
pub mod telemetry;
pub mod tls;
