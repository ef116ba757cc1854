//! A Source's status: what the Gateway controller owns of it (how it was rendered, on how many
//! pods it runs, its ingest path, its share of the pods' quarantine pens and
//! `QuarantineNearFull`), the drain the Source controller reports while its deletion waits on
//! queued deliveries, and the status of a Source whose Gateway does not exist. Also what of a
//! status changes with every forged request ([`steady_part`]). Pure functions.
//!
//! May import: `status::conditions`, `render` (how the Source rendered), `ankusa_api` (the
//! pens the pods report), `ankusa_crds`.

use ankusa_api::PenStatus;
use ankusa_config::OnVerifyFailure;
use ankusa_crds::condition::QUARANTINE_NEAR_FULL;
use ankusa_crds::names::{DELIVERIES_ANNOTATION, DELIVERIES_DEAD_LETTER};
use ankusa_crds::source::{DrainStatus, QueuedOnPod};
use ankusa_crds::{QuarantineOnPod, Source, SourceQuarantine, SourceStatus};

use crate::render::rendered::{Outcome, SourceRender, source_id};
use crate::status::conditions::{
    Conds, condition, conditions, fraction, rfc3339_from_ms, same_conditions,
};

/// What a Source's status needs to know of its Gateway.
#[derive(Debug, Clone, Copy)]
pub struct GatewayView<'a> {
    /// Why the Gateway's own config is refused, if it is.
    pub error: Option<&'a str>,
    /// Pods running the config rendered for them.
    pub programmed: i32,
    /// `spec.replicas`.
    pub desired: i32,
    /// `http.prefix` of the ingest URL.
    pub prefix: &'a str,
    /// The Gateway's name (for messages naming its pods).
    pub gateway: &'a str,
    /// The quarantine pen of each pod that answered, by pod name.
    pub pens: &'a [(String, PenStatus)],
}

/// A pen at or over this share of its `max_bytes` makes its Sources' `QuarantineNearFull`
/// True.
pub const QUARANTINE_NEAR_FULL_PERCENT: u64 = 80;

/// Pods a Source's `status.quarantine.pods` lists (the fullest first); the totals count all.
pub const MAX_QUARANTINE_PODS: usize = 10;

/// Pods a `QuarantineNearFull` message names.
const NEAR_FULL_MESSAGE_PODS: usize = 3;

fn near_full(pen: &PenStatus) -> bool {
    pen.max_bytes > 0
        && u128::try_from(pen.bytes.max(0)).unwrap_or(0) * 100
            >= u128::from(pen.max_bytes) * u128::from(QUARANTINE_NEAR_FULL_PERCENT)
}

/// `812 bytes`, `3.4 KiB`, `850.0 MiB`, `1.0 GiB`.
fn human_bytes(bytes: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    UNITS
        .iter()
        .find(|(_, size)| bytes >= *size)
        .map(|(unit, size)| format!("{:.1} {unit}", bytes as f64 / *size as f64))
        .unwrap_or_else(|| format!("{bytes} bytes"))
}

/// This source's share of the pods' pens: with `onVerifyFailure: quarantine`, or while any
/// pod holds entries of it; `None` otherwise.
pub fn source_quarantine(
    id: &str,
    quarantine_mode: bool,
    pens: &[(String, PenStatus)],
) -> Option<SourceQuarantine> {
    let mut q = SourceQuarantine::default();
    let mut oldest: Option<u64> = None;
    for (pod, pen) in pens {
        let Some(mine) = pen.sources.iter().find(|s| s.source == id) else {
            continue;
        };
        if mine.entries <= 0 {
            continue;
        }
        q.entries += mine.entries;
        q.bytes += mine.bytes;
        q.pods_with_entries += 1;
        if let Some(t) = mine.oldest_received_at {
            oldest = Some(oldest.map_or(t, |o| o.min(t)));
        }
        q.pods.push(QuarantineOnPod {
            pod: pod.clone(),
            entries: mine.entries,
            bytes: mine.bytes,
            oldest: mine.oldest_received_at.and_then(rfc3339_from_ms),
            pen_bytes: pen.bytes,
            pen_max_bytes: i64::try_from(pen.max_bytes).unwrap_or(i64::MAX),
        });
    }
    if q.entries == 0 && !quarantine_mode {
        return None;
    }
    q.oldest = oldest.and_then(rfc3339_from_ms);
    q.pods
        .sort_by(|a, b| b.entries.cmp(&a.entries).then_with(|| a.pod.cmp(&b.pod)));
    q.pods.truncate(MAX_QUARANTINE_PODS);
    Some(q)
}

/// `QuarantineNearFull` of a Source with `onVerifyFailure: quarantine`: True while some pod's
/// pen (every source's entries) holds `QUARANTINE_NEAR_FULL_PERCENT` of its `max_bytes`.
pub fn quarantine_near_full(
    gateway: &str,
    pens: &[(String, PenStatus)],
) -> (bool, &'static str, String) {
    if pens.is_empty() {
        return (
            false,
            "NoReport",
            "no pod has reported its quarantine pen yet".to_string(),
        );
    }
    let full: Vec<&(String, PenStatus)> = pens.iter().filter(|(_, p)| near_full(p)).collect();
    if full.is_empty() {
        return (
            false,
            "BelowThreshold",
            format!(
                "every pod's quarantine pen holds less than {QUARANTINE_NEAR_FULL_PERCENT}% of quarantine.max_bytes"
            ),
        );
    }
    let mut parts: Vec<String> = full
        .iter()
        .take(NEAR_FULL_MESSAGE_PODS)
        .map(|(pod, p)| {
            let pct =
                u128::try_from(p.bytes.max(0)).unwrap_or(0) * 100 / u128::from(p.max_bytes.max(1));
            format!(
                "{gateway}/{pod}: {} of {} ({pct}%)",
                human_bytes(u64::try_from(p.bytes.max(0)).unwrap_or(0)),
                human_bytes(p.max_bytes)
            )
        })
        .collect();
    if full.len() > NEAR_FULL_MESSAGE_PODS {
        parts.push(format!(
            "and {} more pods",
            full.len() - NEAR_FULL_MESSAGE_PODS
        ));
    }
    (
        true,
        "PenNearFull",
        format!(
            "quarantine pen near full on {}; at max_bytes new quarantined hooks get 503 quarantine_full: \
             release them with a ReplayJob of kind quarantine once the source verifies them, or purge them \
             (DELETE /v1/quarantine)",
            parts.join("; ")
        ),
    )
}

/// A Source's status (the fields the gateway controller owns) from how it was rendered and
/// how many pods run the rendered config.
pub fn source_status(
    src: &Source,
    sr: Option<&SourceRender>,
    gw: GatewayView,
    old: &SourceStatus,
    now: &str,
) -> SourceStatus {
    let (gateway_error, programmed_pods, desired, prefix) =
        (gw.error, gw.programmed, gw.desired, gw.prefix);
    let generation = src.metadata.generation;
    let id = sr.map(|s| s.id.clone()).unwrap_or_else(|| source_id(src));
    let current = sr.is_some_and(|s| s.outcome == Outcome::Current);
    let programmed = if current && gateway_error.is_none() {
        programmed_pods
    } else {
        0
    };
    let failure = match sr.map(|s| &s.outcome) {
        Some(Outcome::Previous(e)) => Some(format!(
            "{e}; the pods keep the previously rendered version"
        )),
        Some(Outcome::Missing(e)) => Some(e.clone()),
        _ => None,
    };
    let deleting = src.metadata.deletion_timestamp.is_some();
    let conds = if deleting {
        let m = src
            .status
            .as_ref()
            .and_then(|s| s.drain.as_ref())
            .and_then(|d| d.message.clone())
            .unwrap_or_else(|| "deleting: queued deliveries drain first".into());
        Conds::under_way("Draining", m)
    } else if let Some(e) = gateway_error {
        Conds::blocked("GatewayConfigInvalid", e.to_string())
    } else if let Some(f) = failure {
        Conds::blocked("RenderFailed", f)
    } else {
        let m = format!(
            "generation {} programmed on {programmed}/{desired} pods",
            generation.unwrap_or(0)
        );
        if programmed >= desired {
            Conds::done("Programmed", m)
        } else {
            Conds::under_way("Programming", m)
        }
    };
    let quarantine_mode = src.spec.on_verify_failure == Some(OnVerifyFailure::Quarantine);
    let mut conditions = conditions(&old.conditions, conds, generation, now);
    if quarantine_mode {
        let (status, reason, message) = quarantine_near_full(gw.gateway, gw.pens);
        conditions.push(condition(
            &old.conditions,
            QUARANTINE_NEAR_FULL,
            (status, reason, message),
            generation,
            now,
        ));
    }
    SourceStatus {
        observed_generation: generation,
        conditions,
        programmed: Some(fraction(programmed, desired)),
        programmed_replicas: programmed,
        replicas: desired,
        path: Some(format!("{prefix}/{id}")),
        quarantine: source_quarantine(&id, quarantine_mode, gw.pens),
        source_id: Some(id),
        drain: None,
    }
}

/// Two Source statuses are equal in what the Gateway controller writes, but for transition
/// times.
pub fn same(a: &SourceStatus, b: &SourceStatus) -> bool {
    same_conditions(&a.conditions, &b.conditions)
        && a.observed_generation == b.observed_generation
        && a.programmed == b.programmed
        && a.programmed_replicas == b.programmed_replicas
        && a.replicas == b.replicas
        && a.source_id == b.source_id
        && a.path == b.path
        && a.quarantine == b.quarantine
}
/// A Source status without its quarantine counts (kept: whether it has entries at all).
pub fn steady_part(st: &SourceStatus) -> SourceStatus {
    let mut st = st.clone();
    if let Some(q) = &mut st.quarantine {
        *q = SourceQuarantine {
            entries: q.entries.min(1),
            ..Default::default()
        };
    }
    st
}

/// A Source whose Gateway does not exist: only its conditions, `Degraded` with
/// `GatewayNotFound`.
pub fn gateway_missing(src: &Source, old: &SourceStatus, now: &str) -> SourceStatus {
    let msg = format!("Gateway {} not found", src.spec.gateway_ref.name);
    SourceStatus {
        observed_generation: src.metadata.generation,
        conditions: conditions(
            &old.conditions,
            Conds::blocked("GatewayNotFound", msg),
            src.metadata.generation,
            now,
        ),
        ..Default::default()
    }
}

/// The drain status from what each pod answered; `None` when nothing is queued anywhere
/// (the Source may go).
pub fn drain_status(dead_letter: bool, pods: Vec<QueuedOnPod>) -> Option<DrainStatus> {
    let pending: i64 = pods.iter().filter_map(|p| p.pending).sum();
    let unknown: Vec<&str> = pods
        .iter()
        .filter(|p| p.pending.is_none())
        .map(|p| p.pod.as_str())
        .collect();
    if pending == 0 && unknown.is_empty() {
        return None;
    }
    let where_: Vec<String> = pods
        .iter()
        .filter(|p| p.pending.unwrap_or(0) > 0)
        .map(|p| format!("{} on {}", p.pending.unwrap_or(0), p.pod))
        .collect();
    let mut message = if dead_letter {
        format!("dead-lettering {pending} queued deliveries")
    } else {
        format!(
            "waiting for {pending} queued deliveries to drain ({}); annotate {DELIVERIES_ANNOTATION}={DELIVERIES_DEAD_LETTER} to dead-letter them",
            where_.join(", ")
        )
    };
    if !unknown.is_empty() {
        message.push_str(&format!("; no answer from {}", unknown.join(", ")));
    }
    Some(DrainStatus {
        phase: if dead_letter {
            "DeadLettering"
        } else {
            "Draining"
        }
        .into(),
        pending,
        pods,
        message: Some(message),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::object;
    use serde_json::json;

    fn q(pod: &str, pending: Option<i64>) -> QueuedOnPod {
        QueuedOnPod {
            pod: pod.into(),
            pending,
            ..Default::default()
        }
    }

    #[test]
    fn drained_only_when_every_pod_answered_zero() {
        assert!(drain_status(false, vec![q("g-0", Some(0)), q("g-1", Some(0))]).is_none());
        let d = drain_status(false, vec![q("g-0", Some(3)), q("g-1", Some(0))]).unwrap();
        assert_eq!((d.phase.as_str(), d.pending), ("Draining", 3));
        assert!(d.message.as_ref().unwrap().contains("3 on g-0"), "{d:?}");
        assert!(
            d.message
                .unwrap()
                .contains("ankusa.dev/deliveries=dead_letter")
        );
        let d = drain_status(false, vec![q("g-0", Some(0)), q("g-1", None)]).unwrap();
        assert!(d.message.unwrap().contains("no answer from g-1"));
        let d = drain_status(true, vec![q("g-0", Some(2))]).unwrap();
        assert_eq!(d.phase, "DeadLettering");
    }

    #[test]
    fn a_source_without_its_gateway_says_so_and_nothing_else() {
        let src: Source = object(json!({
            "metadata": {"name": "orders", "namespace": "ns", "generation": 2},
            "spec": {"gatewayRef": {"name": "gone"}, "sinks": []},
        }));
        let st = gateway_missing(&src, &SourceStatus::default(), "T");
        assert_eq!(st.observed_generation, Some(2));
        let ready = st.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!(ready.reason.as_deref(), Some("GatewayNotFound"));
        assert_eq!(ready.message.as_deref(), Some("Gateway gone not found"));
        assert_eq!((st.programmed.as_ref(), st.path.as_ref()), (None, None));
        // Asked again later: the same conditions, so nothing to write.
        let again = gateway_missing(&src, &st, "T2");
        assert!(same_conditions(&st.conditions, &again.conditions));
    }

    #[test]
    fn quarantine_counts_are_not_steady_but_having_entries_is() {
        let with = |entries: i64, bytes: i64| SourceStatus {
            quarantine: Some(SourceQuarantine {
                entries,
                bytes,
                pods_with_entries: 1,
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(same(
            &steady_part(&with(3, 300)),
            &steady_part(&with(7, 900))
        ));
        assert!(!same(
            &steady_part(&with(0, 0)),
            &steady_part(&with(1, 100))
        ));
        assert!(!same(&with(3, 300), &with(7, 900)));
    }
}
