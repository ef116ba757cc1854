//! Status computation: conditions (keeping `lastTransitionTime` while a status holds), the
//! `programmed` counts, and the ReplayJob phase. Pure functions.

use ankusa_crds::condition::{DEGRADED, PROGRESSING, READY};
use ankusa_crds::{Condition, ReplayKind, ReplayPhase, ReplayPodStatus};

/// Now, RFC 3339 to the second.
pub fn now_rfc3339() -> String {
    use k8s_openapi::jiff::{Timestamp, Unit};
    Timestamp::now()
        .round(Unit::Second)
        .unwrap_or_else(|_| Timestamp::now())
        .to_string()
}

/// Unix milliseconds as RFC 3339 to the second; `None` for 0 or a time out of range.
pub fn rfc3339_from_ms(ms: u64) -> Option<String> {
    use k8s_openapi::jiff::{Timestamp, Unit};
    let t = Timestamp::from_millisecond(i64::try_from(ms).ok().filter(|m| *m > 0)?).ok()?;
    Some(t.round(Unit::Second).unwrap_or(t).to_string())
}

/// The three conditions every status carries, from (status, reason, message) triples.
pub struct Conds {
    pub ready: (bool, &'static str, String),
    pub progressing: (bool, &'static str, String),
    pub degraded: (bool, &'static str, String),
}

impl Conds {
    /// In effect: Ready for `reason`, nothing under way, nothing wrong.
    pub fn done(reason: &'static str, message: String) -> Conds {
        Conds {
            ready: (true, reason, message.clone()),
            progressing: (false, reason, message),
            degraded: (false, "AsExpected", String::new()),
        }
    }

    /// Work under way (`reason`), not Ready yet, nothing wrong.
    pub fn under_way(reason: &'static str, message: String) -> Conds {
        Conds {
            ready: (false, reason, message.clone()),
            progressing: (true, reason, message),
            degraded: (false, "AsExpected", String::new()),
        }
    }

    /// Stuck on `reason`: not Ready, Progressing `Blocked`, Degraded.
    pub fn blocked(reason: &'static str, message: String) -> Conds {
        Conds {
            ready: (false, reason, message.clone()),
            progressing: (false, "Blocked", message.clone()),
            degraded: (true, reason, message),
        }
    }
}

/// Builds the condition list, keeping each condition's `lastTransitionTime` from `old` when
/// its status did not change.
pub fn conditions(
    old: &[Condition],
    c: Conds,
    generation: Option<i64>,
    now: &str,
) -> Vec<Condition> {
    [
        (READY, c.ready),
        (PROGRESSING, c.progressing),
        (DEGRADED, c.degraded),
    ]
    .into_iter()
    .map(|(t, c)| condition(old, t, c, generation, now))
    .collect()
}

/// One condition of type `type_` from (status, reason, message), keeping its
/// `lastTransitionTime` from `old` when its status did not change.
pub fn condition(
    old: &[Condition],
    type_: &str,
    (status, reason, message): (bool, &str, String),
    generation: Option<i64>,
    now: &str,
) -> Condition {
    let mut cond = Condition::new(type_, status, reason, message);
    cond.observed_generation = generation;
    let prev = old.iter().find(|o| o.type_ == type_);
    cond.last_transition_time = match prev {
        Some(p) if p.status == cond.status && p.last_transition_time.is_some() => {
            p.last_transition_time.clone()
        }
        _ => Some(now.to_string()),
    };
    cond
}

/// Two condition lists are equal but for transition times.
pub fn same_conditions(a: &[Condition], b: &[Condition]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.type_ == y.type_
                && x.status == y.status
                && x.reason == y.reason
                && x.message == y.message
                && x.observed_generation == y.observed_generation
        })
}

/// `n/m`.
pub fn fraction(n: i32, m: i32) -> String {
    format!("{n}/{m}")
}

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
    /// `quarantine` and `archive`: what the pods skipped.
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
    let skipped = (kind != ReplayKind::Dlq).then(|| sum(|p| p.skipped));
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
            ReplayKind::Dlq => format!("{delivered} deliveries replayed on {total} pods"),
            ReplayKind::Archive => format!(
                "{} sent again ({delivered} deliveries) on {total} pods{}",
                plural(released.unwrap_or(0), "archived hook", "archived hooks"),
                match skipped.unwrap_or(0) {
                    0 => String::new(),
                    n => format!("; {n} skipped (source gone or no matching sink)"),
                }
            ),
            ReplayKind::Quarantine => format!(
                "{} released ({delivered} deliveries) on {total} pods{}",
                plural(
                    released.unwrap_or(0),
                    "quarantined hook",
                    "quarantined hooks"
                ),
                match skipped.unwrap_or(0) {
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
        skipped,
        corrupt_segments,
        message,
        degraded,
    }
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
    fn conditions_keep_transition_time_while_status_holds() {
        let c = || Conds {
            ready: (true, "Programmed", "3/3".into()),
            progressing: (false, "Idle", "".into()),
            degraded: (false, "Healthy", "".into()),
        };
        let first = conditions(&[], c(), Some(1), "2026-01-01T00:00:00Z");
        assert!(
            first
                .iter()
                .all(|x| x.last_transition_time.as_deref() == Some("2026-01-01T00:00:00Z"))
        );
        let second = conditions(&first, c(), Some(2), "2026-01-02T00:00:00Z");
        assert_eq!(
            second[0].last_transition_time.as_deref(),
            Some("2026-01-01T00:00:00Z")
        );
        assert_eq!(second[0].observed_generation, Some(2));
        let mut flipped = c();
        flipped.ready = (false, "Programming", "1/3".into());
        let third = conditions(&second, flipped, Some(2), "2026-01-03T00:00:00Z");
        assert_eq!(third[0].status, "False");
        assert_eq!(
            third[0].last_transition_time.as_deref(),
            Some("2026-01-03T00:00:00Z")
        );
        assert_eq!(
            third[1].last_transition_time.as_deref(),
            Some("2026-01-01T00:00:00Z")
        );
        assert!(!same_conditions(&second, &first), "generation differs");
        assert!(same_conditions(
            &conditions(&first, c(), Some(1), "x"),
            &first
        ));
    }

    #[test]
    fn unix_ms_as_rfc3339() {
        assert_eq!(
            rfc3339_from_ms(1_767_225_600_400).as_deref(),
            Some("2026-01-01T00:00:00Z")
        );
        assert_eq!(rfc3339_from_ms(0), None);
        assert_eq!(rfc3339_from_ms(u64::MAX), None);
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
        // Dlq jobs carry none of them.
        let a = replay_aggregate(ReplayKind::Dlq, &ar);
        assert_eq!(
            (a.released, a.skipped, a.corrupt_segments),
            (None, None, None)
        );
    }
}
