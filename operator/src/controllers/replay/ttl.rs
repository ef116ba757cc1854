//! `ttlSecondsAfterFinished` of a finished ReplayJob, as a Job's: once the job has been in a
//! final phase (Succeeded, Failed, Cancelled) that long after its `status.completionTime`, the
//! operator deletes it (its finalizer has nothing left to cancel on the pods).
//!
//! May import: `ankusa_crds` and `k8s_openapi::jiff` only (a pure leaf of the controller).

use std::time::Duration;

use ankusa_crds::{ReplayJob, ReplayPhase};
use k8s_openapi::jiff::Timestamp;

/// What the TTL asks of a ReplayJob now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ttl {
    /// No TTL, or the job has not finished: nothing to do.
    Keep,
    /// Finished, with this long to go.
    Wait(Duration),
    /// Finished longer ago than its TTL: delete it.
    Expired,
}

/// The TTL's verdict at `now`. A finished job without a readable `completionTime` counts from
/// `now` (the operator records one with every final phase, so this is a status written by
/// hand).
pub fn ttl(rj: &ReplayJob, now: Timestamp) -> Ttl {
    let Some(ttl) = rj.spec.ttl_seconds_after_finished else {
        return Ttl::Keep;
    };
    let Some(status) = &rj.status else {
        return Ttl::Keep;
    };
    if !status.phase.is_some_and(ReplayPhase::is_terminal) {
        return Ttl::Keep;
    }
    let finished = status
        .completion_time
        .as_deref()
        .and_then(|t| t.parse::<Timestamp>().ok())
        .unwrap_or(now);
    let age_ms = now
        .as_millisecond()
        .saturating_sub(finished.as_millisecond());
    let ttl_ms = i64::from(ttl) * 1000;
    if age_ms >= ttl_ms {
        Ttl::Expired
    } else {
        Ttl::Wait(Duration::from_millis((ttl_ms - age_ms) as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(ttl: Option<u32>, phase: &str, completed: Option<&str>) -> ReplayJob {
        let mut v = json!({
            "apiVersion": "ankusa.dev/v1alpha1", "kind": "ReplayJob",
            "metadata": {"name": "r", "namespace": "ns"},
            "spec": {"gatewayRef": {"name": "gw"}},
            "status": {"phase": phase},
        });
        if let Some(t) = ttl {
            v["spec"]["ttlSecondsAfterFinished"] = json!(t);
        }
        if let Some(c) = completed {
            v["status"]["completionTime"] = json!(c);
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_finished_job_is_deleted_after_its_ttl_and_a_running_one_never() {
        let now: Timestamp = "2026-12-03T12:00:00Z".parse().unwrap();
        let done = Some("2026-12-03T11:59:00Z");
        assert_eq!(ttl(&job(None, "Succeeded", done), now), Ttl::Keep);
        assert_eq!(ttl(&job(Some(30), "Running", done), now), Ttl::Keep);
        assert_eq!(ttl(&job(Some(30), "Succeeded", done), now), Ttl::Expired);
        assert_eq!(ttl(&job(Some(60), "Failed", done), now), Ttl::Expired);
        assert_eq!(
            ttl(&job(Some(90), "Cancelled", done), now),
            Ttl::Wait(Duration::from_secs(30))
        );
        assert_eq!(ttl(&job(Some(0), "Succeeded", None), now), Ttl::Expired);
        assert_eq!(
            ttl(&job(Some(10), "Succeeded", Some("not a time")), now),
            Ttl::Wait(Duration::from_secs(10))
        );
    }
}
