//! The configuration's sections: one file per top-level key (and per shape several keys
//! share), each holding the section's types, their defaults (`Default` impls and serde
//! default functions, nowhere else) and its own rules, `validate(&self, path)`, whose errors
//! name fields under `path`.
//!
//! A section's rules look at the section alone. Rules that relate two sections (a source's
//! sinks and `egress`, `intake` and `wal`, the batcher's byte cap and `http.max_body_bytes`)
//! are `validate.rs`'s, which also calls each section's `validate` in order.
//!
//! A section may import the leaves (`error`, `rules`, `secrets`, `scalar`, `file_paths`,
//! `claim_token`), `sinks` (a source's sinks, the intake log) and another section's file for a
//! shape they share (`listener`, `storage`'s blob store and its `cloud_stores`); never `model`,
//! `validate` or `egress` (the policy built from `section::egress`).

pub(crate) mod admin;
pub(crate) mod backup;
pub(crate) mod batcher;
pub(crate) mod claim_check;
pub(crate) mod cloud_stores;
pub(crate) mod dedupe;
pub(crate) mod dispatch;
pub(crate) mod egress;
pub(crate) mod fleet;
pub(crate) mod http;
pub(crate) mod lifecycle;
pub(crate) mod listener;
pub(crate) mod log;
pub(crate) mod node;
pub(crate) mod quarantine;
pub(crate) mod queue;
pub(crate) mod rate_limits;
pub(crate) mod source;
pub(crate) mod storage;
pub(crate) mod telemetry;
pub(crate) mod token_review;
pub(crate) mod verify;
pub(crate) mod wal;
