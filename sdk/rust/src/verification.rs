//! How the gateway's edge judged a hook's provider signature, and the one trust rule.

use serde::{Deserialize, Serialize};

/// The ingest verification of a hook: `x-ankusa-verification` (+ `-flagged`) of an HTTP
/// delivery, `verification` of a queue message.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Verification {
    /// `ok`, `failed` or `skipped`; kept as sent, even a status this SDK does not know.
    pub status: String,
    /// Accepted although the check failed (`on_verify_failure: accept_flag`).
    pub flagged: bool,
}

impl Verification {
    /// True only for `{"status": "ok", "flagged": false}`: a flagged, failed or skipped hook,
    /// and a status this SDK does not know, are not to be trusted.
    pub fn is_trusted(&self) -> bool {
        self.status == "ok" && !self.flagged
    }
}

/// The trust rule over an optional verification: a hook without one (a node older than the
/// field) is not trusted.
pub(crate) fn trusted(v: Option<&Verification>) -> bool {
    v.is_some_and(Verification::is_trusted)
}

/// The key a consumer dedupes on: `key`, or `key#replay:<replay_id>` when a replay must be
/// processed again rather than dropped as a duplicate.
pub(crate) fn idempotency_key(key: &str, replay_id: Option<&str>, include_replay: bool) -> String {
    match replay_id {
        Some(r) if include_replay => format!("{key}#replay:{r}"),
        _ => key.to_string(),
    }
}
