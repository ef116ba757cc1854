//! A dry-run ReplayJob's status from each pod's answer to `POST /v1/sources/{id}/filters/test`:
//! every pod answered → `Succeeded` with the counts summed (`status.dryRun`); a pod refused
//! the request (a 4xx other than "not there yet") → `Failed`, naming the pod and the
//! gateway's error; otherwise `Running`, waiting for the pods that did not answer. Pure: the
//! controller asks the pods and writes what this returns.
//!
//! May import: `status::replay` (conditions, records), `ankusa_api`, `ankusa_crds`.

use ankusa_api::FilterTestResult;
use ankusa_crds::{DryRunSinkStatus, DryRunStatus, ReplayJobStatus, ReplayPhase, ReplayPodStatus};

use crate::status::conditions::fraction;
use crate::status::replay::replay_conditions;

/// What one pod said.
#[derive(Debug, Clone, PartialEq)]
pub enum PodAnswer {
    Counted(FilterTestResult),
    /// It refused the request: asking again would give the same answer.
    Refused(String),
    /// Not running, unreachable, or not ready for it yet.
    Waiting(String),
}

/// One pod's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct PodDryRun {
    pub pod: String,
    pub pod_uid: Option<String>,
    pub answer: PodAnswer,
}

/// What the status is made of besides the answers.
#[derive(Debug, Clone)]
pub struct DryRunReport<'a> {
    pub job_id: &'a str,
    /// The request every pod was sent (`status.request`).
    pub request: serde_json::Value,
    /// The Source's Sink names, by position.
    pub sink_names: &'a [String],
    pub pods: Vec<PodDryRun>,
}

fn count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The counts of every pod that answered, summed sink by sink (by position).
fn sum(sink_names: &[String], answers: &[&FilterTestResult]) -> DryRunStatus {
    let mut out = DryRunStatus {
        sinks: sink_names
            .iter()
            .map(|n| DryRunSinkStatus {
                name: n.clone(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    for r in answers {
        out.examined = out.examined.saturating_add(count(r.examined));
        out.truncated |= r.truncated;
        out.corrupt_segments = out
            .corrupt_segments
            .saturating_add(count(r.corrupt_segments));
        for s in &r.sinks {
            let Some(t) = out.sinks.get_mut(s.index as usize) else {
                continue;
            };
            t.matched = t.matched.saturating_add(count(s.matched));
            t.filtered = t.filtered.saturating_add(count(s.filtered));
            for (class, n) in &s.filter_errors {
                *t.filter_errors.entry(class.clone()).or_default() += count(*n);
            }
            for (class, n) in &s.transform_errors {
                *t.transform_errors.entry(class.clone()).or_default() += count(*n);
            }
        }
    }
    out
}

fn record(p: &PodDryRun, job_id: &str, now: &str) -> ReplayPodStatus {
    let (state, scanned, done, last_error) = match &p.answer {
        PodAnswer::Counted(r) => ("completed", count(r.examined), true, None),
        PodAnswer::Refused(e) => ("refused", 0, false, Some(e.clone())),
        PodAnswer::Waiting(e) => ("unknown", 0, false, Some(e.clone())),
    };
    ReplayPodStatus {
        pod: p.pod.clone(),
        pod_uid: p.pod_uid.clone(),
        job_id: job_id.to_string(),
        state: state.into(),
        scanned,
        done,
        last_error,
        updated_at: Some(now.to_string()),
        ..Default::default()
    }
}

/// The status after asking every pod (see the module header).
pub fn dry_run_status(
    old: &ReplayJobStatus,
    report: DryRunReport<'_>,
    generation: Option<i64>,
    now: &str,
) -> ReplayJobStatus {
    let total = report.pods.len() as i32;
    let counted: Vec<&FilterTestResult> = report
        .pods
        .iter()
        .filter_map(|p| match &p.answer {
            PodAnswer::Counted(r) => Some(r),
            _ => None,
        })
        .collect();
    let done = counted.len() as i32;
    let refused: Vec<String> = report
        .pods
        .iter()
        .filter_map(|p| match &p.answer {
            PodAnswer::Refused(e) => Some(format!("{}: {e}", p.pod)),
            _ => None,
        })
        .collect();
    let waiting: Vec<String> = report
        .pods
        .iter()
        .filter_map(|p| match &p.answer {
            PodAnswer::Waiting(e) => Some(format!("{}: {e}", p.pod)),
            _ => None,
        })
        .collect();
    let totals = sum(report.sink_names, &counted);
    let (phase, message) = if !refused.is_empty() {
        (
            ReplayPhase::Failed,
            format!("the dry run was refused: {}", refused.join("; ")),
        )
    } else if total > 0 && done == total {
        let per_sink: Vec<String> = totals
            .sinks
            .iter()
            .map(|s| format!("{} {} of {}", s.name, s.matched, totals.examined))
            .collect();
        (
            ReplayPhase::Succeeded,
            format!(
                "dry run over {} archived hooks on {total} pods{}: {}",
                totals.examined,
                if totals.truncated { " (truncated)" } else { "" },
                per_sink.join(", ")
            ),
        )
    } else if total == 0 {
        (
            ReplayPhase::Pending,
            "the Gateway has no pods yet".to_string(),
        )
    } else {
        (
            ReplayPhase::Running,
            format!(
                "{done}/{total} pods answered; waiting for {}",
                waiting.join("; ")
            ),
        )
    };
    let degraded =
        (!waiting.is_empty() && phase == ReplayPhase::Running).then(|| waiting.join("; "));
    let pods = report
        .pods
        .iter()
        .map(|p| record(p, report.job_id, now))
        .collect();
    ReplayJobStatus {
        observed_generation: generation,
        conditions: replay_conditions(&old.conditions, phase, &message, degraded, generation, now),
        phase: Some(phase),
        progress: Some(fraction(done, total)),
        job_id: Some(report.job_id.to_string()),
        request: Some(report.request),
        start_time: old.start_time.clone().or_else(|| Some(now.to_string())),
        completion_time: phase.is_terminal().then(|| now.to_string()),
        pods,
        message: Some(message),
        dry_run: Some(totals),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ankusa_api::SinkTestResult;
    use std::collections::BTreeMap;

    fn answer(examined: u64, matched: [u64; 2], truncated: bool) -> PodAnswer {
        PodAnswer::Counted(FilterTestResult {
            source: "orders".into(),
            examined,
            truncated,
            corrupt_segments: 0,
            sinks: (0..2)
                .map(|i| SinkTestResult {
                    index: i,
                    name: format!("sinks[{i}]"),
                    matched: matched[i as usize],
                    filtered: examined - matched[i as usize],
                    filter_errors: if i == 0 {
                        BTreeMap::from([("no_such_key".to_string(), 1)])
                    } else {
                        BTreeMap::new()
                    },
                    ..Default::default()
                })
                .collect(),
        })
    }

    fn pod(name: &str, answer: PodAnswer) -> PodDryRun {
        PodDryRun {
            pod: name.into(),
            pod_uid: Some(format!("uid-{name}")),
            answer,
        }
    }

    fn status(pods: Vec<PodDryRun>) -> ReplayJobStatus {
        let names = ["paid".to_string(), "all".to_string()];
        dry_run_status(
            &ReplayJobStatus::default(),
            DryRunReport {
                job_id: "j",
                request: serde_json::json!({}),
                sink_names: &names,
                pods,
            },
            Some(1),
            "T",
        )
    }

    #[test]
    fn every_pod_counted_sums_by_sink() {
        let st = status(vec![
            pod("g-0", answer(10, [4, 10], false)),
            pod("g-1", answer(5, [1, 5], true)),
        ]);
        assert_eq!(st.phase, Some(ReplayPhase::Succeeded));
        assert_eq!(st.progress.as_deref(), Some("2/2"));
        let d = st.dry_run.unwrap();
        assert_eq!((d.examined, d.truncated), (15, true));
        assert_eq!(
            d.sinks
                .iter()
                .map(|s| (s.name.as_str(), s.matched, s.filtered))
                .collect::<Vec<_>>(),
            [("paid", 5, 10), ("all", 15, 0)]
        );
        assert_eq!(d.sinks[0].filter_errors["no_such_key"], 2);
        assert!(d.sinks[1].filter_errors.is_empty());
        assert!(st.pods.iter().all(|p| p.done && p.state == "completed"));
        assert_eq!(st.pods[0].scanned, 10);
        assert!(st.completion_time.is_some());
        assert!(st.message.unwrap().starts_with(
            "dry run over 15 archived hooks on 2 pods (truncated): paid 5 of 15, all 15 of 15"
        ));
    }

    #[test]
    fn a_refusal_fails_and_a_silent_pod_is_waited_for() {
        let st = status(vec![
            pod("g-0", answer(10, [4, 10], false)),
            pod("g-1", PodAnswer::Waiting("pod not running".into())),
        ]);
        assert_eq!(st.phase, Some(ReplayPhase::Running));
        assert_eq!(st.completion_time, None);
        assert!(
            st.message
                .as_deref()
                .unwrap()
                .contains("g-1: pod not running")
        );
        let st = status(vec![
            pod("g-0", answer(10, [4, 10], false)),
            pod(
                "g-1",
                PodAnswer::Refused("answered 409: archive_not_configured".into()),
            ),
        ]);
        assert_eq!(st.phase, Some(ReplayPhase::Failed));
        assert!(st.completion_time.is_some());
        assert!(
            st.message.as_deref().unwrap().contains("g-1: answered 409"),
            "{:?}",
            st.message
        );
        assert_eq!(status(vec![]).phase, Some(ReplayPhase::Pending));
    }
}
