//! `GET /v1/lifecycle`: a page of the audit trail of lifecycle events, oldest first.

use serde::{Deserialize, Serialize};

/// One event of the trail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LifecycleEntry {
    /// The CloudEvent's `id` (also the id of the hook that delivered it).
    pub id: String,
    /// The CloudEvent's `type`.
    #[serde(rename = "type")]
    pub event_type: String,
    /// The tenant the event concerns; absent for a node-wide event (a config change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// Unix milliseconds of the event's `time`.
    pub time: u64,
    /// The CloudEvent as delivered (structured mode).
    pub event: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LifecyclePage {
    pub events: Vec<LifecycleEntry>,
    /// Pass back as `cursor` for the next page; `None` when the window is read to its end.
    pub next_cursor: Option<String>,
}
