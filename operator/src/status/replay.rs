//! A ReplayJob's status from its per-pod job records: the phase and counts
//! ([`replay_aggregate`]), the conditions of a phase, and the whole status in each of the
//! controller's outcomes (waiting for its Gateway, refused before it started, running or done).
//! Pure functions: the controller does the pod calls and writes what these return.
//!
//! May import: `status::conditions`, `ankusa_api` (the pods' job views), `ankusa_crds`.

use ankusa_api::{CreateReplay, JobView};
use ankusa_crds::{Condition, ReplayJobStatus, ReplayKind, ReplayPhase, ReplayPodStatus};

use crate::status::conditions::{Conds, conditions, fraction};

/// Aggregate of the per-pod job records of a ReplayJob.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayAggregate {
    pub phase: ReplayPhase,
    pub done: i32,
    pub total: i32,
    pub moved: i64,
    pub delivered: i64,
    pub failed: i64,
    /// `archive`: hooks sent again; `quarantine`: entries released.
    pub released: Option<i64>,
    /// What the pods skipped (`dlq`: dead rows their sink's filter turns away).
    pub skipped: Option<i64>,
    /// `archive`: segments that did not check out.
    pub corrupt_segments: Option<i64>,
    pub message: String,
    /// Some pod needs attention (unreachable, paused itself, refused the job).
    pub degraded: Option<String>,
}

fn plural(n: i64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The phase of a ReplayJob from its per-pod records (pods that currently exist):
/// every pod done → `Succeeded`, or `Failed` when replayed deliveries dead-lettered again or
/// (`archive`) a segment was corrupt, its hooks not sent; any pod's job cancelled →
/// `Cancelled`; otherwise `Running`. No pods → `Pending`.
pub fn replay_aggregate(kind: ReplayKind, pods: &[ReplayPodStatus]) -> ReplayAggregate {
    let total = pods.len() as i32;
    let done = pods.iter().filter(|p| p.done).count() as i32;
    let moved = pods.iter().map(|p| p.moved).sum();
    let delivered = pods.iter().map(|p| p.delivered).sum();
    let failed: i64 = pods.iter().map(|p| p.failed).sum();
    let sum = |f: fn(&ReplayPodStatus) -> Option<i64>| -> i64 { pods.iter().filter_map(f).sum() };
    let released = (kind != ReplayKind::Dlq).then(|| sum(|p| p.released));
    let skipped_n = sum(|p| p.skipped);
    let corrupt_segments = (kind == ReplayKind::Archive).then(|| sum(|p| p.corrupt_segments));
    let corrupt_on: Vec<&str> = pods
        .iter()
        .filter(|p| p.corrupt_segments.unwrap_or(0) > 0)
        .map(|p| p.pod.as_str())
        .collect();
    let errors: Vec<String> = pods
        .iter()
        .filter_map(|p| p.last_error.as_ref().map(|e| format!("{}: {e}", p.pod)))
        .collect();
    let paused: Vec<&str> = pods
        .iter()
        .filter(|p| p.state == "paused")
        .map(|p| p.pod.as_str())
        .collect();
    let cancelled = pods.iter().any(|p| p.state == "cancelled");
    let degraded = if !errors.is_empty() {
        Some(errors.join("; "))
    } else if !paused.is_empty() {
        Some(format!(
            "paused on {} (deliveries keep dead-lettering; fix the sink, then `kubectl annotate replayjob <name> ankusa.dev/resume=now`)",
            paused.join(", ")
        ))
    } else {
        None
    };
    let (phase, message) = if total == 0 {
        (
            ReplayPhase::Pending,
            "no gateway pods to replay on".to_string(),
        )
    } else if cancelled {
        (
            ReplayPhase::Cancelled,
            "the job was cancelled on a pod".to_string(),
        )
    } else if done == total && !corrupt_on.is_empty() {
        (
            ReplayPhase::Failed,
            format!(
                "{} on {} did not check out (sha256 or index): their hooks were not sent ({} others sent again, {delivered} deliveries)",
                plural(
                    corrupt_segments.unwrap_or(0),
                    "archive segment",
                    "archive segments"
                ),
                corrupt_on.join(", "),
                released.unwrap_or(0)
            ),
        )
    } else if done == total && failed > 0 {
        (
            ReplayPhase::Failed,
            format!("{failed} of {moved} replayed deliveries dead-lettered again"),
        )
    } else if done == total {
        let message = match kind {
            ReplayKind::Dlq => format!(
                "{delivered} deliveries replayed on {total} pods{}",
                match skipped_n {
                    0 => String::new(),
                    n => format!("; {n} left dead (their sink's filter turns the hook away)"),
                }
            ),
            ReplayKind::Archive => format!(
                "{} sent again ({delivered} deliveries) on {total} pods{}",
                plural(released.unwrap_or(0), "archived hook", "archived hooks"),
                match skipped_n {
                    0 => String::new(),
                    n => format!("; {n} skipped (source gone or no matching sink or filter)"),
                }
            ),
            ReplayKind::Quarantine => format!(
                "{} released ({delivered} deliveries) on {total} pods{}",
                plural(
                    released.unwrap_or(0),
                    "quarantined hook",
                    "quarantined hooks"
                ),
                match skipped_n {
                    0 => String::new(),
                    n => format!(
                        "; {n} skipped (still failing verification, they stay quarantined; or already accepted)"
                    ),
                }
            ),
        };
        (ReplayPhase::Succeeded, message)
    } else {
        (
            ReplayPhase::Running,
            format!("{done}/{total} pods done, {moved} moved, {delivered} delivered"),
        )
    };
    ReplayAggregate {
        phase,
        done,
        total,
        moved,
        delivered,
        failed,
        released,
        skipped: Some(skipped_n),
        corrupt_segments,
        message,
        degraded,
    }
}

/// Status conditions of a ReplayJob in a phase.
pub fn replay_conditions(
    old: &[Condition],
    phase: ReplayPhase,
    message: &str,
    degraded: Option<String>,
    generation: Option<i64>,
    now: &str,
) -> Vec<Condition> {
    let m = message.to_string();
    let ready = match phase {
        ReplayPhase::Succeeded => (true, "Succeeded", m.clone()),
        ReplayPhase::Failed => (false, "Failed", m.clone()),
        ReplayPhase::Cancelled => (false, "Cancelled", m.clone()),
        ReplayPhase::Running => (false, "Running", m.clone()),
        ReplayPhase::Pending => (false, "Pending", m.clone()),
    };
    let progressing = if phase.is_terminal() {
        (false, "Complete", m.clone())
    } else {
        (true, ready.1, m.clone())
    };
    let degraded = match (phase, degraded) {
        (ReplayPhase::Failed, _) => (true, "Failed", m),
        (_, Some(d)) => (true, "PodErrors", d),
        _ => (false, "AsExpected", String::new()),
    };
    conditions(
        old,
        Conds {
            ready,
            progressing,
            degraded,
        },
        generation,
        now,
    )
}

/// The kind of a request sent earlier (`status.request`).
pub fn request_kind(body: &CreateReplay) -> ReplayKind {
    match body.kind.as_str() {
        ankusa_api::KIND_ARCHIVE => ReplayKind::Archive,
        ankusa_api::KIND_QUARANTINE => ReplayKind::Quarantine,
        _ => ReplayKind::Dlq,
    }
}

/// The record of a pod not asked yet.
pub fn new_record(pod: &str, job_id: &str) -> ReplayPodStatus {
    ReplayPodStatus {
        pod: pod.to_string(),
        job_id: job_id.to_string(),
        state: "unknown".into(),
        ..Default::default()
    }
}

/// A pod's record from what it answered about the job.
pub fn update_from_view(rec: &mut ReplayPodStatus, kind: ReplayKind, v: &JobView, now: &str) {
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    rec.state = v.job.state.as_str().to_string();
    rec.moved = count(v.job.moved);
    rec.scanned = count(v.job.scanned);
    rec.released = (kind != ReplayKind::Dlq).then(|| count(v.job.released));
    rec.skipped = Some(count(v.job.skipped));
    rec.corrupt_segments = (kind == ReplayKind::Archive).then(|| count(v.job.corrupt_segments));
    rec.delivered = v.delivered;
    rec.failed = v.failed;
    rec.outstanding = v.outstanding;
    rec.done = v.done;
    rec.last_error = None;
    rec.updated_at = Some(now.to_string());
}

/// `old` in `phase` for `message`, nothing started (no pod asked).
fn unstarted(
    old: &ReplayJobStatus,
    phase: ReplayPhase,
    message: &str,
    generation: Option<i64>,
    now: &str,
) -> ReplayJobStatus {
    let conditions = replay_conditions(&old.conditions, phase, message, None, generation, now);
    ReplayJobStatus {
        observed_generation: generation,
        conditions,
        phase: Some(phase),
        message: Some(message.to_string()),
        ..old.clone()
    }
}

/// `Pending` on `message` (the Gateway it names does not exist): nothing started.
pub fn pending_status(
    old: &ReplayJobStatus,
    message: &str,
    generation: Option<i64>,
    now: &str,
) -> ReplayJobStatus {
    unstarted(old, ReplayPhase::Pending, message, generation, now)
}

/// `Failed` before anything started: the spec is refused (`why`); terminal, like a failed
/// prerequisite.
pub fn refused_status(
    old: &ReplayJobStatus,
    why: &str,
    job_id: &str,
    generation: Option<i64>,
    now: &str,
) -> ReplayJobStatus {
    ReplayJobStatus {
        job_id: Some(job_id.to_string()),
        completion_time: Some(now.to_string()),
        ..unstarted(old, ReplayPhase::Failed, why, generation, now)
    }
}

/// [`refused_status`] whose `Ready` and `Degraded` conditions carry `reason` (say
/// `DirectGateway`) instead of `Failed`, for a refusal a client should tell apart.
pub fn refused_status_because(
    old: &ReplayJobStatus,
    reason: &str,
    why: &str,
    job_id: &str,
    generation: Option<i64>,
    now: &str,
) -> ReplayJobStatus {
    let mut st = refused_status(old, why, job_id, generation, now);
    for c in st
        .conditions
        .iter_mut()
        .filter(|c| c.type_ == "Ready" || c.type_ == "Degraded")
    {
        c.reason = Some(reason.to_string());
    }
    st
}

/// What the pods said of a started job, for [`job_status`].
#[derive(Debug, Clone)]
pub struct JobReport {
    pub job_id: String,
    /// The request sent to every pod, as `status.request` keeps it.
    pub request: serde_json::Value,
    pub kind: ReplayKind,
    /// One record per pod.
    pub records: Vec<ReplayPodStatus>,
    /// The spec no longer gives `request` (ReplayJob specs are immutable).
    pub spec_changed: bool,
}

/// Said in `Degraded` while the spec differs from the request the job started with.
pub const SPEC_CHANGED: &str = "the spec changed after the job started; ReplayJob specs are immutable, the original request is kept (create a new ReplayJob)";

/// The status of a started job from its pods' records, and their aggregate.
pub fn job_status(
    old: &ReplayJobStatus,
    report: JobReport,
    generation: Option<i64>,
    now: &str,
) -> (ReplayJobStatus, ReplayAggregate) {
    let agg = replay_aggregate(report.kind, &report.records);
    let degraded = match (report.spec_changed, agg.degraded.clone()) {
        (true, Some(d)) => Some(format!("{SPEC_CHANGED}; {d}")),
        (true, None) => Some(SPEC_CHANGED.to_string()),
        (false, d) => d,
    };
    let status = ReplayJobStatus {
        observed_generation: generation,
        conditions: replay_conditions(
            &old.conditions,
            agg.phase,
            &agg.message,
            degraded,
            generation,
            now,
        ),
        phase: Some(agg.phase),
        progress: Some(fraction(agg.done, agg.total)),
        job_id: Some(report.job_id),
        request: Some(report.request),
        start_time: old.start_time.clone().or_else(|| Some(now.to_string())),
        completion_time: agg.phase.is_terminal().then(|| now.to_string()),
        moved: agg.moved,
        delivered: agg.delivered,
        failed: agg.failed,
        released: agg.released,
        skipped: agg.skipped,
        corrupt_segments: agg.corrupt_segments,
        pods: report.records,
        message: Some(agg.message.clone()),
        dry_run: None,
    };
    (status, agg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(
        name: &str,
        state: &str,
        done: bool,
        moved: i64,
        delivered: i64,
        failed: i64,
    ) -> ReplayPodStatus {
        ReplayPodStatus {
            pod: name.into(),
            job_id: "j".into(),
            state: state.into(),
            moved,
            delivered,
            failed,
            done,
            ..Default::default()
        }
    }

    #[test]
    fn replay_phases() {
        assert_eq!(
            replay_aggregate(ReplayKind::Dlq, &[]).phase,
            ReplayPhase::Pending
        );
        let running = [
            pod("g-0", "completed", true, 3, 3, 0),
            pod("g-1", "running", false, 1, 0, 0),
        ];
        let a = replay_aggregate(ReplayKind::Dlq, &running);
        assert_eq!((a.phase, a.done, a.total), (ReplayPhase::Running, 1, 2));
        let ok = [
            pod("g-0", "completed", true, 3, 3, 0),
            pod("g-1", "completed", true, 2, 2, 0),
        ];
        let a = replay_aggregate(ReplayKind::Dlq, &ok);
        assert_eq!(a.phase, ReplayPhase::Succeeded);
        assert_eq!((a.moved, a.delivered, a.failed), (5, 5, 0));
        let failed = [
            pod("g-0", "completed", true, 3, 2, 1),
            pod("g-1", "completed", true, 2, 2, 0),
        ];
        assert_eq!(
            replay_aggregate(ReplayKind::Dlq, &failed).phase,
            ReplayPhase::Failed
        );
        let cancelled = [
            pod("g-0", "cancelled", false, 0, 0, 0),
            pod("g-1", "completed", true, 2, 2, 0),
        ];
        assert_eq!(
            replay_aggregate(ReplayKind::Dlq, &cancelled).phase,
            ReplayPhase::Cancelled
        );
        let mut unreachable = running.clone();
        unreachable[1].last_error = Some("connection refused".into());
        let a = replay_aggregate(ReplayKind::Dlq, &unreachable);
        assert_eq!(a.phase, ReplayPhase::Running);
        assert!(a.degraded.unwrap().contains("g-1: connection refused"));
        let paused = [pod("g-0", "paused", false, 3, 0, 3)];
        assert!(
            replay_aggregate(ReplayKind::Dlq, &paused)
                .degraded
                .unwrap()
                .contains("paused on g-0")
        );
    }

    #[test]
    fn archive_and_quarantine_phases_carry_their_counts() {
        let with = |p: ReplayPodStatus, released, skipped, corrupt| ReplayPodStatus {
            released,
            skipped,
            corrupt_segments: corrupt,
            ..p
        };
        // Quarantine: entries still failing verification are skipped; the job succeeds.
        let q = [
            with(
                pod("g-0", "completed", true, 4, 4, 0),
                Some(4),
                Some(2),
                None,
            ),
            with(
                pod("g-1", "completed", true, 1, 1, 0),
                Some(1),
                Some(0),
                None,
            ),
        ];
        let a = replay_aggregate(ReplayKind::Quarantine, &q);
        assert_eq!(a.phase, ReplayPhase::Succeeded);
        assert_eq!(
            (a.released, a.skipped, a.corrupt_segments),
            (Some(5), Some(2), None)
        );
        assert!(
            a.message.starts_with("5 quarantined hooks released"),
            "{}",
            a.message
        );
        assert!(a.message.contains("2 skipped"), "{}", a.message);
        // Archive: a corrupt segment fails the job though every pod finished.
        let mut ar = [
            with(
                pod("g-0", "completed", true, 6, 6, 0),
                Some(6),
                Some(0),
                Some(0),
            ),
            with(
                pod("g-1", "completed", true, 6, 6, 0),
                Some(3),
                Some(1),
                Some(0),
            ),
        ];
        let a = replay_aggregate(ReplayKind::Archive, &ar);
        assert_eq!(a.phase, ReplayPhase::Succeeded);
        assert_eq!(
            (a.released, a.skipped, a.corrupt_segments),
            (Some(9), Some(1), Some(0))
        );
        assert!(
            a.message
                .starts_with("9 archived hooks sent again (12 deliveries) on 2 pods; 1 skipped"),
            "{}",
            a.message
        );
        ar[1].corrupt_segments = Some(2);
        let a = replay_aggregate(ReplayKind::Archive, &ar);
        assert_eq!(a.phase, ReplayPhase::Failed);
        assert!(
            a.message.starts_with(
                "2 archive segments on g-1 did not check out (sha256 or index): their hooks were not sent (9 others sent again, 12 deliveries)"
            ),
            "{}",
            a.message
        );
        // Dlq jobs carry no release or segment counts; their skipped rows are the filtered.
        let a = replay_aggregate(ReplayKind::Dlq, &ar);
        assert_eq!(
            (a.released, a.skipped, a.corrupt_segments),
            (None, Some(1), None)
        );
    }

    fn report(records: Vec<ReplayPodStatus>, spec_changed: bool) -> JobReport {
        JobReport {
            job_id: "j".into(),
            request: serde_json::json!({"job_id": "j", "kind": "dlq"}),
            kind: ReplayKind::Dlq,
            records,
            spec_changed,
        }
    }

    #[test]
    fn a_job_status_keeps_its_start_and_says_when_the_spec_changed() {
        let old = ReplayJobStatus {
            start_time: Some("2025-12-31T00:00:00Z".into()),
            ..Default::default()
        };
        let running = vec![pod("g-0", "running", false, 1, 0, 0)];
        let (st, agg) = job_status(&old, report(running.clone(), false), Some(2), "T");
        assert_eq!(agg.phase, ReplayPhase::Running);
        assert_eq!(st.phase, Some(ReplayPhase::Running));
        assert_eq!(st.start_time.as_deref(), Some("2025-12-31T00:00:00Z"));
        assert_eq!(st.completion_time, None);
        assert_eq!(st.progress.as_deref(), Some("0/1"));
        assert_eq!(st.observed_generation, Some(2));
        assert_eq!(st.job_id.as_deref(), Some("j"));
        let degraded = st
            .conditions
            .iter()
            .find(|c| c.type_ == "Degraded")
            .unwrap();
        assert!(!degraded.is_true());
        let (st, _) = job_status(&old, report(running, true), Some(2), "T");
        let degraded = st
            .conditions
            .iter()
            .find(|c| c.type_ == "Degraded")
            .unwrap();
        assert!(degraded.is_true());
        assert_eq!(degraded.message.as_deref(), Some(SPEC_CHANGED));
        let done = vec![pod("g-0", "completed", true, 2, 2, 0)];
        let (st, _) = job_status(&Default::default(), report(done, false), Some(1), "T");
        assert_eq!(st.phase, Some(ReplayPhase::Succeeded));
        assert_eq!(
            (st.start_time.as_deref(), st.completion_time.as_deref()),
            (Some("T"), Some("T"))
        );
    }

    #[test]
    fn pending_and_refused_statuses() {
        let old = ReplayJobStatus::default();
        let p = pending_status(&old, "Gateway gw not found", Some(1), "T");
        assert_eq!(p.phase, Some(ReplayPhase::Pending));
        assert_eq!(p.message.as_deref(), Some("Gateway gw not found"));
        assert_eq!(p.completion_time, None);
        let ready = p.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!(ready.reason.as_deref(), Some("Pending"));
        let r = refused_status(&old, "rate must be >= 1", "j", Some(1), "T");
        assert_eq!(r.phase, Some(ReplayPhase::Failed));
        assert_eq!(r.job_id.as_deref(), Some("j"));
        assert_eq!(r.completion_time.as_deref(), Some("T"));
        let degraded = r.conditions.iter().find(|c| c.type_ == "Degraded").unwrap();
        assert!(degraded.is_true());
        assert_eq!(degraded.reason.as_deref(), Some("Failed"));
        let d = refused_status_because(&old, "DirectGateway", "direct", "j", Some(1), "T");
        assert_eq!(d.phase, Some(ReplayPhase::Failed));
        for t in ["Ready", "Degraded"] {
            let c = d.conditions.iter().find(|c| c.type_ == t).unwrap();
            assert_eq!(c.reason.as_deref(), Some("DirectGateway"), "{t}");
        }
    }
}
