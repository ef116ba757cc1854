//! Status computation, one module per kind, the way linkerd's policy controller keeps status
//! apart from the code that talks to the API server: every function here is pure (inputs in,
//! a status out, `now` passed in), so each condition and count is unit-tested without a
//! cluster. The controllers read, call these, and write what they return.
//!
//! - [`conditions`]: the three conditions every status carries, `n/m`, RFC 3339 times;
//! - [`gateway`]: a Gateway's status from its render and its pods' reports;
//! - [`source`]: a Source's status (programming, quarantine, drain, missing Gateway);
//! - [`sink`]: a Sink's status from the Gateways that render it;
//! - [`lifecycle`]: a Gateway's `LifecycleEvents` condition;
//! - [`replay`]: a ReplayJob's phase and status from its per-pod records;
//! - [`dry_run`]: a dry-run ReplayJob's status from its pods' answers.
//!
//! May import: `render` (what was rendered), `resources` (names), `context::truncate`,
//! `ankusa_api`, `ankusa_crds`; never the controllers, `pods` or anything that does I/O.

pub mod conditions;
pub mod dry_run;
pub mod gateway;
pub mod lifecycle;
pub mod replay;
pub mod sink;
pub mod source;

pub use conditions::{
    Conds, condition, conditions, fraction, now_rfc3339, rfc3339_from_ms, same_conditions,
};
