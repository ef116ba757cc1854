//! Dead letters: the one filter that selects them (a DLQ page or delete, a replay job), and
//! the page of `GET /v1/dlq`.

use ankusa_config::ErrorClass;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Which dead letters a request or a replay job means. Every field is optional; set fields
/// combine with AND. Stored with each replay job, so fields are only ever added.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeadFilter {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_id: Option<String>,
    /// One hook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<Uuid>,
    /// A sink index of the source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sink: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_class: Option<ErrorClass>,
    /// Dead-lettered at or after (unix ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
    /// Dead-lettered at or before (unix ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<u64>,
}

/// A filter the API refuses: `400 invalid_filter` with `field` and `message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterError {
    pub field: &'static str,
    pub message: String,
}

impl FilterError {
    pub fn new(field: &'static str, message: impl Into<String>) -> Self {
        FilterError {
            field,
            message: message.into(),
        }
    }
}

impl DeadFilter {
    /// Only a tenant (or nothing) is set: the page's total is a counter.
    pub fn only_tenant(&self) -> bool {
        self.source_id.is_none()
            && self.id.is_none()
            && self.sink.is_none()
            && self.error_class.is_none()
            && self.since.is_none()
            && self.until.is_none()
    }

    /// A tenant id as a filter names it.
    pub fn check_tenant(tenant: &str) -> Result<(), FilterError> {
        if !ankusa_config::valid_id(tenant) {
            return Err(FilterError::new("tenant", "must match [A-Za-z0-9_-]{1,64}"));
        }
        Ok(())
    }

    /// The rules a replay job's filter is held to.
    pub fn check(&self) -> Result<(), FilterError> {
        if let Some(t) = &self.tenant {
            Self::check_tenant(t)?;
        }
        if let (Some(s), Some(u)) = (self.since, self.until)
            && s > u
        {
            return Err(FilterError::new("since", "must not be after until"));
        }
        Ok(())
    }
}

/// One dead letter of `GET /v1/dlq`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeadEntry {
    pub id: Uuid,
    pub seq: u64,
    pub tenant: String,
    pub source_id: String,
    pub sink: u16,
    pub sink_type: String,
    pub error_class: ErrorClass,
    pub reason: Option<String>,
    pub attempts: u32,
    pub dead_at: u64,
    pub first_attempt_at: Option<u64>,
    pub received_at: Option<u64>,
    pub size: u64,
    pub replay_id: Option<String>,
}

/// `GET /v1/dlq`: newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeadPage {
    pub entries: Vec<DeadEntry>,
    /// Opaque position after this page; `None` when the scan reached the end.
    pub next_cursor: Option<String>,
    /// Exact where it is free (a counter, or a filtered first page that reached the end).
    pub total: Option<u64>,
    /// Keys this request examined.
    pub examined: usize,
}

/// `DELETE /v1/dlq`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteDead {
    pub deleted: usize,
    pub bytes: u64,
    /// Matching dead rows left in place because their hook is not archived (an archive is
    /// configured and has not caught up, or none is configured and the bounds' reaper asked).
    #[serde(default)]
    pub unarchived: usize,
    /// The request stopped at its limit or at the examination bound: call again.
    pub more: bool,
}
