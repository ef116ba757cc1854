//! Ankusa's gateway: verifies, dedupes and durably stores provider webhooks, then delivers
//! each at least once to every sink of its source.
//!
//! A hook travels edge → batcher → store → dispatch → sink: `edge` answers the provider only
//! after the `batcher` has fsynced the hook into the `store`; `dispatch` claims due delivery
//! rows and runs `sink` attempts; `replay` moves dead rows back; `admin` exposes it all.

pub mod admin;
pub mod app;
pub mod batcher;
pub mod claims;
pub mod cli;
pub mod dispatch;
pub mod edge;
pub mod metrics;
pub mod probes;
pub mod replay;
pub mod runtime;
pub mod store;
