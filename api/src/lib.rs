//! The admin API's wire types: the bodies the gateway's admin handlers accept and answer, and
//! the operator sends and reads. One definition for both sides, so a change that one side does
//! not follow is a compile error rather than a field silently read as its default.
//!
//! Plain serde data and the rules that belong to the contract (limits, filter checks); no HTTP
//! here, so the operator links nothing of the gateway's. Types the operator reads are lenient
//! where a gateway of another version may leave a field out (`#[serde(default)]`).

mod dlq;
mod filter_test;
mod hook;
mod lifecycle;
mod node;
mod replay;
mod store;

pub use dlq::{DeadEntry, DeadFilter, DeadPage, DeleteDead, FilterError};
pub use filter_test::{
    DEFAULT_FILTER_TEST_LIMIT, FilterTest, FilterTestResult, FilterTestWindow,
    MAX_FILTER_TEST_LIMIT, MAX_FILTER_TEST_SAMPLES, SampleHook, SinkRoutingTry, SinkTestResult,
    TestSample,
};
pub use hook::{ArchivedHook, DeliveryView, HookVerification, HookView};
pub use lifecycle::{LifecycleEntry, LifecyclePage};
pub use node::{
    ArchiveStatus, BackupStatus, DlqStatus, FieldError, Health, IntakeStatus, MAX_SINK_ERROR_BYTES,
    PenSourceStatus, PenStatus, Ready, ReloadError, ReloadReply, SinkFailure, Status,
};
pub use replay::{
    ArchiveWindow, CreateReplay, DEFAULT_MAX_LAG_MS, DEFAULT_PAUSE_AFTER_DEAD, DEFAULT_RATE,
    JobList, JobState, JobView, KIND_ARCHIVE, KIND_DLQ, KIND_LIFECYCLE, KIND_QUARANTINE,
    MAX_ARCHIVE_SINKS, MAX_RATE, PatchReplay, ReplayJob, TopLevelFilter, check_rate,
};
pub use store::{
    CorruptRow, CorruptRows, DeliveryCounts, PenEntry, QuarantinePage, QuarantinePurged, WalStatus,
};

/// `GET /v1/sources/{id}/deliveries`: a source's queued (pending or in flight) and dead rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SourceDeliveries {
    pub pending: i64,
    pub dead: i64,
}

/// `POST /v1/sources/{id}/dead_letter`: what moved, and what is left.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeadLettered {
    pub dead_lettered: i64,
    pub more: bool,
    pub pending: i64,
    pub dead: i64,
}
