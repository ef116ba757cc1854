//! A Gateway's status, computed from what was rendered and what each pod's `GET /v1/status`
//! said: the three conditions (the first trouble found names `Degraded`, in the order of
//! [`gateway_status`]) and `RestartRequired` (pods waiting for a restart to apply changed
//! start-only settings), the replica counts, each rendered Sink with the pods' delivery errors,
//! each pod's config hash, archive, DLQ, backups and intake log. Also what of a status changes
//! with every poll ([`steady_part`]), so the controller can space out writes that change only
//! that. Pure functions.
//!
//! May import: `status::{conditions, lifecycle}`, `render` (the rendered config's outcome), `resources`
//! (the selector), `ankusa_api` (the pods' status), `ankusa_crds`.

use std::collections::BTreeMap;

use ankusa_api::{MAX_SINK_ERROR_BYTES, SinkFailure};
use ankusa_crds::{
    Condition, Gateway, GatewayPodStatus, GatewayStatus, PodArchiveStatus, PodDlqStatus,
    RenderedSink, SinkDeliveryError, Source,
};

use crate::context::truncate;
use crate::render::rendered::{Outcome, Rendered, source_id};
use crate::resources;
use crate::status::conditions::{
    Conds, condition, conditions, fraction, rfc3339_from_ms, same_conditions,
};
use crate::status::lifecycle::{LIFECYCLE_NOT_RENDERED, lifecycle_trouble};

/// The archive and DLQ parts of a pod's `GET /v1/status`, as the Gateway's status shows them.
pub fn pod_archive_dlq(s: &ankusa_api::Status) -> (Option<PodArchiveStatus>, Option<PodDlqStatus>) {
    let archive = s.archive.as_ref().map(|a| PodArchiveStatus {
        pending: a.pending,
        archived: a.archived,
        last_upload_at: a.last_upload_at.and_then(rfc3339_from_ms),
        failures: i64::try_from(a.failures).unwrap_or(i64::MAX),
        last_error: a
            .last_error
            .clone()
            .map(|e| truncate(e, MAX_SINK_ERROR_BYTES)),
    });
    let dlq = s.dlq.as_ref().map(|d| PodDlqStatus {
        rows: d.rows,
        bytes: d.bytes,
        full: d.full,
    });
    (archive, dlq)
}

/// The backup and intake parts of a pod's `GET /v1/status`, as the Gateway's status shows
/// them (`backupAgeSeconds`, `lastBackupAt`, `restoredFrom`, `intakeState`, ...).
pub fn pod_durability(s: &ankusa_api::Status, st: &mut GatewayPodStatus) {
    if let Some(b) = &s.backup {
        st.backup_age_seconds = Some(i64::try_from(b.age_seconds).unwrap_or(i64::MAX));
        st.last_backup_at = b.last_success_at.and_then(rfc3339_from_ms);
        st.backup_failures = Some(i64::try_from(b.failures).unwrap_or(i64::MAX));
        st.backup_last_error = b
            .last_error
            .clone()
            .map(|e| truncate(e, MAX_SINK_ERROR_BYTES));
        st.restored_from = b.restored_from.clone().map(|r| truncate(r, 128));
    }
    if let Some(i) = &s.intake {
        st.intake_state = Some(truncate(i.state.clone(), 32));
        let lag = if i.lag_seconds.is_finite() && i.lag_seconds > 0.0 {
            // Whole seconds; `as` saturates.
            i.lag_seconds.floor() as i64
        } else {
            0
        };
        st.intake_lag_seconds = Some(lag);
        st.intake_pending = Some(i64::try_from(i.pending).unwrap_or(i64::MAX));
    }
}

/// Interval of a Gateway's backups (ms), when they are on.
pub fn backup_interval_ms(gw: &Gateway) -> Option<u64> {
    let b = gw.spec.durability.as_ref()?.backup.as_ref()?;
    b.enabled.then(|| b.interval_ms.unwrap_or(60_000))
}

/// A pod's backups are stale: older than `BACKUP_STALE_INTERVALS` intervals, or the last one
/// failed.
pub fn backup_stale(p: &GatewayPodStatus, interval_ms: u64) -> bool {
    let limit = (interval_ms / 1000).saturating_mul(BACKUP_STALE_INTERVALS);
    p.backup_failures.is_some_and(|f| f > 0)
        || p.backup_age_seconds
            .is_some_and(|a| u64::try_from(a).unwrap_or(0) > limit)
}

/// A pod's intake log is down: it answers new hooks `503 intake_unavailable`.
pub fn intake_down(p: &GatewayPodStatus) -> bool {
    p.intake_state.as_deref() == Some("down")
}

/// Backups older than this many intervals make the Gateway `Degraded` (`BackupStale`).
pub const BACKUP_STALE_INTERVALS: u64 = 3;

/// A pod's record from one answer of its `GET /v1/status`: the config it runs, what needs a
/// restart, its last refused reload, archive, DLQ, backups and intake log.
pub fn pod_from_report(st: &mut GatewayPodStatus, s: &ankusa_api::Status) {
    (st.archive, st.dlq) = pod_archive_dlq(s);
    pod_durability(s, st);
    st.config_hash = Some(s.config_hash.clone());
    st.restart_required = s.restart_required.clone();
    if let Some(e) = &s.last_reload_error {
        st.last_error = Some(format!("last reload refused: {}", e.message));
    }
}

/// Most pods a Gateway lists per Sink in `deliveryErrors` (`failingPods` counts them all): the
/// status stays small however many pods fail.
pub const MAX_DELIVERY_ERRORS: usize = 5;

/// Fills each rendered Sink's `deliveryErrors` and `failingPods` from what the pods report
/// (`failing_sinks` of `GET /v1/status`, by pod name). A pod names the Sink as its config does
/// (`sink_names`); a config rendered before it had them is matched through the Source with
/// that id, by position. Of a pod's failures for one Sink (several Sources may deliver to it)
/// the one with the most failures in a row is shown.
pub fn delivery_errors(
    sinks: &mut [RenderedSink],
    pods: &[(String, Vec<SinkFailure>)],
    sources: &[&Source],
) {
    let sink_name = |f: &SinkFailure| -> Option<String> {
        f.name.clone().or_else(|| {
            let src = sources.iter().find(|s| source_id(s) == f.source)?;
            src.spec.sinks.get(f.sink as usize).map(|r| r.name.clone())
        })
    };
    // Sink name -> pod -> its worst failure.
    let mut by_sink: BTreeMap<String, BTreeMap<&str, &SinkFailure>> = BTreeMap::new();
    for (pod, failing) in pods {
        for f in failing {
            let Some(name) = sink_name(f) else {
                continue;
            };
            let slot = by_sink.entry(name).or_default().entry(pod.as_str());
            let worse = |old: &SinkFailure| (f.failures, f.at) > (old.failures, old.at);
            match slot {
                std::collections::btree_map::Entry::Vacant(v) => {
                    v.insert(f);
                }
                std::collections::btree_map::Entry::Occupied(mut o) => {
                    if worse(o.get()) {
                        o.insert(f);
                    }
                }
            }
        }
    }
    for sink in sinks.iter_mut() {
        let of_pods = by_sink.remove(&sink.name).unwrap_or_default();
        sink.failing_pods = of_pods.len() as i32;
        sink.delivery_errors = of_pods
            .into_iter()
            .take(MAX_DELIVERY_ERRORS)
            .map(|(pod, f)| SinkDeliveryError {
                pod: pod.to_string(),
                source: truncate(f.source.clone(), 64),
                // The pod caps it already; a pod of another version might not.
                error: truncate(f.error.clone(), MAX_SINK_ERROR_BYTES),
                since: rfc3339_from_ms(f.since),
                failures: i64::try_from(f.failures).unwrap_or(i64::MAX),
                breaker_open: f.breaker_open,
            })
            .collect();
    }
}

/// The status of a Gateway stopped before anything was applied: not Ready, not Progressing,
/// `Degraded` with `reason`; the rest of the status as it was.
pub fn blocked_status(gw: &Gateway, reason: &'static str, msg: &str, now: &str) -> GatewayStatus {
    let old = gw.status.clone().unwrap_or_default();
    GatewayStatus {
        observed_generation: gw.metadata.generation,
        conditions: conditions(
            &old.conditions,
            Conds {
                ready: (false, reason, msg.to_string()),
                progressing: (false, reason, msg.to_string()),
                degraded: (true, reason, msg.to_string()),
            },
            gw.metadata.generation,
            now,
        ),
        selector: Some(resources::selector_string(gw)),
        ..old
    }
}

/// How many pods the Gateway should run: `spec.replicas`, or, under a direct Gateway's
/// autoscaler, the pods it runs kept within the autoscaler's bounds.
pub fn desired_replicas(gw: &Gateway, running: i32) -> i32 {
    match &gw.spec.autoscaling {
        Some(a) if gw.is_direct() => {
            let min = a
                .min_replicas
                .unwrap_or(ankusa_crds::AutoscalingSpec::DEFAULT_MIN_REPLICAS)
                .min(a.max_replicas);
            running.clamp(min, a.max_replicas)
        }
        _ => gw.spec.replicas,
    }
}

/// A condition as (status, reason, message).
type Cond = (bool, &'static str, String);

/// The Gateway's status from what was rendered and what the pods report.
pub fn gateway_status(
    gw: &Gateway,
    rendered: &Rendered,
    pods: Vec<GatewayPodStatus>,
    storage_note: Option<String>,
    old: &GatewayStatus,
    now: &str,
) -> GatewayStatus {
    let replicas = pods.len() as i32;
    let desired = desired_replicas(gw, replicas);
    let ready = pods.iter().filter(|p| p.ready).count() as i32;
    let programmed = pods.iter().filter(|p| p.programmed).count() as i32;
    let ready_c = if let Some(e) = &rendered.error {
        (false, "InvalidConfig", e.clone())
    } else if ready < desired {
        (
            false,
            "PodsNotReady",
            format!("{ready}/{desired} pods ready"),
        )
    } else if programmed < desired {
        (
            false,
            "Programming",
            format!("{programmed}/{desired} pods run the rendered config"),
        )
    } else {
        (
            true,
            "Programmed",
            format!("{programmed}/{desired} pods ready and running the rendered config"),
        )
    };
    let all_good = rendered.error.is_none() && ready >= desired && programmed >= desired;
    let progressing = if all_good {
        (false, "Stable", "nothing to roll out".to_string())
    } else if replicas != desired {
        (
            true,
            "Scaling",
            format!("{replicas} pods, {desired} desired"),
        )
    } else if rendered.error.is_some() {
        (
            false,
            "Blocked",
            "the Gateway's settings are refused".to_string(),
        )
    } else {
        (true, "RollingOut", ready_c.2.clone())
    };
    let degraded = degraded(gw, rendered, &pods, storage_note);
    let mut conds = conditions(
        &old.conditions,
        Conds {
            ready: ready_c,
            progressing,
            degraded,
        },
        gw.metadata.generation,
        now,
    );
    conds.push(condition(
        &old.conditions,
        RESTART_REQUIRED,
        restart_required(&pods),
        gw.metadata.generation,
        now,
    ));
    GatewayStatus {
        observed_generation: gw.metadata.generation,
        conditions: conds,
        replicas,
        ready_replicas: ready,
        programmed_replicas: programmed,
        programmed: Some(fraction(programmed, desired)),
        selector: Some(resources::selector_string(gw)),
        sources: rendered
            .sources
            .values()
            .filter(|s| !matches!(s.outcome, Outcome::Missing(_)))
            .count() as i32,
        sinks: rendered
            .sinks
            .iter()
            .map(|(name, s)| RenderedSink {
                name: name.clone(),
                observed_generation: s.generation,
                error: s.error.clone(),
                // Filled from the pods' reports (`delivery_errors`).
                delivery_errors: Vec::new(),
                failing_pods: 0,
            })
            .collect(),
        pods,
        // Written by `ownership` alone; kept here so that statuses compare equal.
        ownership: old.ownership.clone(),
    }
}

/// Condition type: `True` while a pod runs with settings older than its config, because the
/// keys that changed apply only at a restart (the pods' `restart_required`). The operator
/// rolls the pods for such a change (`resources::statefulset::restart_fingerprint`), which
/// clears it.
pub const RESTART_REQUIRED: &str = "RestartRequired";

/// `RestartRequired`: which pods wait for a restart, and for which keys.
fn restart_required(pods: &[GatewayPodStatus]) -> Cond {
    let waiting: Vec<String> = pods
        .iter()
        .filter(|p| !p.restart_required.is_empty())
        .map(|p| format!("{} ({})", p.name, p.restart_required.join(", ")))
        .collect();
    if waiting.is_empty() {
        (false, "AsExpected", String::new())
    } else {
        (
            true,
            "PinnedSettingsChanged",
            format!(
                "settings that apply only after a pod restart changed on {}; they run their start values until the pods roll",
                waiting.join(", ")
            ),
        )
    }
}

/// The names of the pods for which `pred` holds, joined with `, ` (empty: none).
fn pods_where(pods: &[GatewayPodStatus], pred: impl Fn(&GatewayPodStatus) -> bool) -> String {
    pods.iter()
        .filter(|p| pred(p))
        .map(|p| p.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `Degraded`: the first trouble found, in this order: the render refused, pods' errors, an
/// intake log down, a restart required, a DLQ full, archive uploads failing, backups stale,
/// `spec.lifecycle` not rendered, a storage change ignored.
fn degraded(
    gw: &Gateway,
    rendered: &Rendered,
    pods: &[GatewayPodStatus],
    storage_note: Option<String>,
) -> Cond {
    if let Some(e) = &rendered.error {
        return (true, "InvalidConfig", e.clone());
    }
    let pod_errors: Vec<String> = pods
        .iter()
        .filter(|p| p.last_error.as_deref().is_some_and(|e| e != "not running"))
        .map(|p| format!("{}: {}", p.name, p.last_error.clone().unwrap_or_default()))
        .collect();
    if !pod_errors.is_empty() {
        return (true, "PodErrors", pod_errors.join("; "));
    }
    let down = pods_where(pods, intake_down);
    if !down.is_empty() {
        return (
            true,
            "IntakeDown",
            format!(
                "the intake log does not confirm publishes from {down} (status.pods[].intakeState down): \
                 they answer new hooks 503 intake_unavailable until it is back"
            ),
        );
    }
    let restart: Vec<String> = pods
        .iter()
        .filter(|p| !p.restart_required.is_empty())
        .map(|p| format!("{} ({})", p.name, p.restart_required.join(", ")))
        .collect();
    if !restart.is_empty() {
        return (
            true,
            "RestartRequired",
            format!(
                "settings that apply only after a pod restart changed on {}",
                restart.join(", ")
            ),
        );
    }
    let dlq_full = pods_where(pods, |p| p.dlq.as_ref().is_some_and(|d| d.full));
    if !dlq_full.is_empty() {
        return (
            true,
            "DlqFull",
            format!(
                "the dead-letter queue of {dlq_full} is over a spec.settings.queue.dlq bound with nothing archived to evict: \
                 new hooks get 503 dlq_full until the archive catches up (or replay or purge the DLQ)"
            ),
        );
    }
    let archive_failing = pods_where(pods, |p| {
        p.archive
            .as_ref()
            .is_some_and(|a| a.failures >= ARCHIVE_FAILING_AFTER)
    });
    if !archive_failing.is_empty() {
        return (
            true,
            "ArchiveFailing",
            format!(
                "archive uploads keep failing on {archive_failing} (status.pods[].archive.lastError); hooks wait on the pods' volumes"
            ),
        );
    }
    let stale = backup_interval_ms(gw)
        .map(|i| pods_where(pods, |p| backup_stale(p, i)))
        .unwrap_or_default();
    if !stale.is_empty() {
        let dual = gw
            .spec
            .durability
            .as_ref()
            .is_some_and(|d| d.mode == ankusa_crds::DurabilityMode::Dual);
        let then = if dual {
            "a pod that loses its volume restores an older backup and replays the rest from the intake log"
        } else {
            "a pod that loses its volume now loses the hooks acked since its last backup"
        };
        return (
            true,
            "BackupStale",
            format!(
                "backups of {stale} are older than {BACKUP_STALE_INTERVALS} × spec.durability.backup.intervalMs or failing \
                 (status.pods[].backupLastError): {then}"
            ),
        );
    }
    if let Some(m) = lifecycle_trouble(gw, rendered) {
        return (true, LIFECYCLE_NOT_RENDERED, m);
    }
    match storage_note {
        Some(n) => (true, "StorageChangeIgnored", n),
        None => (false, "AsExpected", String::new()),
    }
}

/// Failed archive uploads in a row on a pod that make the Gateway `Degraded`
/// (`ArchiveFailing`): one failure is retried with back-off and usually passes.
pub const ARCHIVE_FAILING_AFTER: i64 = 3;

/// A Gateway status without what changes with every poll: the delivery errors, and the
/// pods' archive and DLQ counts (kept: whether uploads fail long enough to degrade the
/// Gateway, and whether the DLQ is full).
pub fn steady_part(st: &GatewayStatus) -> GatewayStatus {
    let mut st = st.clone();
    for s in &mut st.sinks {
        s.delivery_errors.clear();
        s.failing_pods = 0;
    }
    for p in &mut st.pods {
        if let Some(a) = &mut p.archive {
            *a = PodArchiveStatus {
                // Only whether they degrade the Gateway.
                failures: if a.failures >= ARCHIVE_FAILING_AFTER {
                    ARCHIVE_FAILING_AFTER
                } else {
                    0
                },
                ..Default::default()
            };
        }
        if let Some(d) = &mut p.dlq {
            *d = PodDlqStatus {
                full: d.full,
                ..Default::default()
            };
        }
        // Ages and counts move with every poll; whether they degrade the Gateway is in its
        // conditions.
        p.backup_age_seconds = None;
        p.last_backup_at = None;
        p.backup_failures = p.backup_failures.map(|f| f.min(1));
        p.intake_lag_seconds = None;
        p.intake_pending = p.intake_pending.map(|n| n.min(1));
    }
    st
}

/// Two Gateway statuses are equal but for the conditions' transition times.
pub fn same_status(a: &GatewayStatus, b: &GatewayStatus) -> bool {
    same_conditions(&a.conditions, &b.conditions)
        && GatewayStatus {
            conditions: vec![],
            ..a.clone()
        } == GatewayStatus {
            conditions: vec![],
            ..b.clone()
        }
}

/// Whether the status says Ready (every desired pod ready and running the rendered config).
pub fn is_ready(st: &GatewayStatus) -> bool {
    find(&st.conditions, "Ready").is_some_and(Condition::is_true)
}

/// The first 12 characters of a config hash (as a pod reported it), for messages.
pub fn short_hash(h: Option<&str>) -> &str {
    let h = h.unwrap_or("");
    h.char_indices().nth(12).map_or(h, |(i, _)| &h[..i])
}

/// The condition of type `t`.
pub fn find<'a>(conditions: &'a [Condition], t: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::object;
    use serde_json::json;

    fn gw(replicas: i32) -> Gateway {
        object(json!({
            "metadata": {"name": "gw", "namespace": "ns", "generation": 4},
            "spec": {"replicas": replicas},
            "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Programmed",
                                       "message": "2/2", "lastTransitionTime": "T0"}],
                       "replicas": 2, "programmedReplicas": 2},
        }))
    }

    #[test]
    fn a_blocked_gateway_keeps_the_rest_of_its_status() {
        let st = blocked_status(&gw(2), "ForeignObject", "Secret gw-config exists", "T1");
        assert_eq!(st.observed_generation, Some(4));
        assert_eq!((st.replicas, st.programmed_replicas), (2, 2));
        let ready = find(&st.conditions, "Ready").unwrap();
        assert!(!ready.is_true());
        assert_eq!(ready.reason.as_deref(), Some("ForeignObject"));
        assert_eq!(ready.last_transition_time.as_deref(), Some("T1"));
        let degraded = find(&st.conditions, "Degraded").unwrap();
        assert!(degraded.is_true());
        assert_eq!(degraded.message.as_deref(), Some("Secret gw-config exists"));
        assert!(!is_ready(&st));
        assert_eq!(
            st.selector.as_deref(),
            Some(resources::selector_string(&gw(2)).as_str())
        );
    }

    #[test]
    fn a_pod_report_fills_the_pods_record() {
        let s: ankusa_api::Status = serde_json::from_value(json!({
            "instance": "gw-0",
            "config_hash": "abc",
            "restart_required": ["node.data_dir"],
            "last_reload_error": {"message": "sources.x.tenant must match"},
        }))
        .unwrap();
        let mut st = GatewayPodStatus::default();
        pod_from_report(&mut st, &s);
        assert_eq!(st.config_hash.as_deref(), Some("abc"));
        assert_eq!(st.restart_required, vec!["node.data_dir".to_string()]);
        assert_eq!(
            st.last_error.as_deref(),
            Some("last reload refused: sources.x.tenant must match")
        );
        assert!(st.archive.is_none() && st.dlq.is_none() && st.intake_state.is_none());
    }

    #[test]
    fn pods_reporting_restart_required_make_the_condition_true() {
        let g = gw(2);
        let r = crate::render::render(&crate::render::Inputs {
            gateway: &g,
            sources: &[],
            sinks: &[],
            secrets: &Default::default(),
            admin_token: "operator-admin-token-0123456789",
            scrape_token: None,
            previous: None,
        });
        let pod = |n: u8, restart: &[&str]| GatewayPodStatus {
            name: format!("gw-{n}"),
            ready: true,
            programmed: true,
            restart_required: restart.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        };
        let st = gateway_status(
            &g,
            &r,
            vec![pod(0, &[]), pod(1, &[])],
            None,
            &Default::default(),
            "T1",
        );
        let c = find(&st.conditions, RESTART_REQUIRED).unwrap();
        assert!(!c.is_true());
        assert_eq!(c.reason.as_deref(), Some("AsExpected"));
        let st = gateway_status(
            &g,
            &r,
            vec![pod(0, &["wal", "intake"]), pod(1, &[])],
            None,
            &st,
            "T2",
        );
        let c = find(&st.conditions, RESTART_REQUIRED).unwrap();
        assert!(c.is_true());
        assert_eq!(c.reason.as_deref(), Some("PinnedSettingsChanged"));
        let msg = c.message.as_deref().unwrap_or_default();
        assert!(
            msg.contains("gw-0 (wal, intake)") && !msg.contains("gw-1"),
            "{msg}"
        );
        assert_eq!(c.last_transition_time.as_deref(), Some("T2"));
        // The pods run what they were given otherwise: Ready stays.
        assert!(is_ready(&st));
    }

    #[test]
    fn statuses_differing_only_in_transition_times_are_the_same() {
        let a = blocked_status(&gw(2), "R", "m", "T1");
        let b = blocked_status(&gw(2), "R", "m", "T2");
        assert!(same_status(&a, &b));
        let c = blocked_status(&gw(2), "R", "other", "T1");
        assert!(!same_status(&a, &c));
    }
}
