//! A Sink's status, from the Gateways that render it (`status.sinks` of each: how it was
//! rendered, on how many pods, and which pods fail to deliver to it) and what uses it (Sources,
//! and Gateways sending their lifecycle events there); and the status of a Sink whose deletion waits on the Sources still using it. Pure
//! functions.
//!
//! May import: `status::conditions`, `ankusa_crds`.

use ankusa_crds::condition::DEGRADED;
use ankusa_crds::{Gateway, Sink, SinkDeliveryError, SinkStatus, Source, find_condition};
use kube::ResourceExt;

use crate::status::conditions::{Conds, conditions, fraction, same_conditions};

/// What uses a Sink: the Sources that deliver to it (their names), then the Gateways that send
/// their lifecycle events to it (`<gateway>/lifecycle`; no object name holds a `/`).
pub fn users(sink: &Sink, sources: &[Source], gateways: &[Gateway]) -> Vec<String> {
    let name = sink.name_any();
    let sources = sources
        .iter()
        .filter(|s| s.spec.sinks.iter().any(|r| r.name == name))
        .map(|s| s.name_any());
    let gateways = gateways
        .iter()
        .filter(|g| {
            g.spec
                .lifecycle
                .as_ref()
                .is_some_and(|l| l.sink_names().any(|n| n == name))
        })
        .map(|g| format!("{}{LIFECYCLE_USER}", g.name_any()));
    sources.chain(gateways).collect()
}

/// The suffix of a Gateway's entry among a Sink's users: its lifecycle events go there.
pub const LIFECYCLE_USER: &str = "/lifecycle";

/// The `Degraded` reason while some pod's latest delivery to the Sink failed.
pub const DELIVERY_FAILING: &str = "DeliveryFailing";

/// Pods the `DeliveryFailing` message names; the rest are counted. With errors of at most
/// 512 bytes this keeps the message near 2 KB, far under a condition's 32768.
pub const MESSAGE_PODS: usize = 3;

/// `gw/pod-0: redis: not_connected: tls_handshake: ... (5 failures, circuit breaker open)`,
/// the first `MESSAGE_PODS` of `failing` (gateway name, error), then `and N more pods`.
fn delivery_message(failing: &[(String, &SinkDeliveryError)], total: usize) -> String {
    let mut parts: Vec<String> = failing
        .iter()
        .take(MESSAGE_PODS)
        .map(|(gw, e)| {
            let n = e.failures;
            let mut m = format!(
                "{gw}/{}: {} ({n} failure{}",
                e.pod,
                e.error,
                if n == 1 { "" } else { "s" }
            );
            if e.breaker_open {
                m.push_str(", circuit breaker open");
            }
            m.push(')');
            m
        })
        .collect();
    let shown = parts.len();
    if total > shown {
        let more = total - shown;
        parts.push(format!(
            "and {more} more pod{}",
            if more == 1 { "" } else { "s" }
        ));
    }
    parts.join("; ")
}

/// The Sink's status from the Gateways' view of it.
pub fn sink_status(
    sink: &Sink,
    gateways: &[Gateway],
    used_by: &[String],
    old: &SinkStatus,
    now: &str,
) -> SinkStatus {
    let name = sink.name_any();
    let generation = sink.metadata.generation;
    let mut programmed = 0;
    let mut desired = 0;
    let mut errors = Vec::new();
    let mut stale = Vec::new();
    let mut failing: Vec<(String, &SinkDeliveryError)> = Vec::new();
    let mut failing_pods = 0;
    for gw in gateways {
        let Some(st) = gw.status.as_ref() else {
            continue;
        };
        let Some(entry) = st.sinks.iter().find(|s| s.name == name) else {
            continue;
        };
        desired += gw.spec.replicas;
        failing_pods += entry.failing_pods.max(entry.delivery_errors.len() as i32);
        failing.extend(entry.delivery_errors.iter().map(|e| (gw.name_any(), e)));
        if let Some(e) = &entry.error {
            errors.push(format!("{}: {e}", gw.name_any()));
        } else if entry.observed_generation == generation {
            programmed += st.programmed_replicas;
        } else {
            stale.push(gw.name_any());
        }
    }
    // The rules the CRD declares in CEL, re-checked for servers without it (< 1.25).
    let mut conds = if let Err(e) = sink.spec.resolved_options() {
        Conds::blocked("InvalidSpec", e)
    } else if !errors.is_empty() {
        Conds::blocked("RenderFailed", errors.join("; "))
    } else if used_by.is_empty() {
        Conds {
            ready: (
                true,
                "NotReferenced",
                "no Source delivers to this sink".to_string(),
            ),
            progressing: (false, "Idle", String::new()),
            degraded: (false, "AsExpected", String::new()),
        }
    } else if desired == 0 && stale.is_empty() {
        Conds::under_way(
            "Pending",
            "waiting for the Gateway to render it".to_string(),
        )
    } else {
        let m = format!("programmed on {programmed}/{desired} pods");
        if programmed >= desired && stale.is_empty() {
            Conds::done("Programmed", m)
        } else {
            Conds::under_way("Programming", m)
        }
    };
    // Deliveries failing is a state of the destination, not of the Sink's programming: it
    // makes the Sink Degraded and leaves Ready alone. A refused render says more, and a Sink
    // no Source uses has no deliveries.
    let failing_pods = if used_by.is_empty() { 0 } else { failing_pods };
    if failing_pods > 0 && !conds.degraded.0 {
        conds.degraded = (
            true,
            DELIVERY_FAILING,
            delivery_message(&failing, failing_pods as usize),
        );
    }
    SinkStatus {
        observed_generation: generation,
        conditions: conditions(&old.conditions, conds, generation, now),
        programmed: Some(fraction(programmed, desired)),
        programmed_replicas: programmed,
        replicas: desired,
        used_by: (!used_by.is_empty()).then(|| used_by.join(",")),
        failing_pods,
    }
}

/// Whether the Sink's `Degraded` condition says its deliveries fail.
pub fn delivery_failing(st: &SinkStatus) -> bool {
    find_condition(&st.conditions, DEGRADED)
        .is_some_and(|c| c.is_true() && c.reason.as_deref() == Some(DELIVERY_FAILING))
}

/// Whether `new` differs from `old` in what the Sink controller writes.
pub fn changed(old: &SinkStatus, new: &SinkStatus) -> bool {
    !same_conditions(&old.conditions, &new.conditions)
        || old.programmed != new.programmed
        || old.used_by != new.used_by
        || old.observed_generation != new.observed_generation
        || old.failing_pods != new.failing_pods
}

/// Why a Sink being deleted waits: the Sources still delivering to it, the Gateways still
/// sending their lifecycle events to it.
pub fn in_use_message(used_by: &[String]) -> String {
    let (gateways, sources): (Vec<&str>, Vec<&str>) = used_by
        .iter()
        .map(String::as_str)
        .partition(|u| u.ends_with(LIFECYCLE_USER));
    let gateways: Vec<&str> = gateways
        .iter()
        .filter_map(|g| g.strip_suffix(LIFECYCLE_USER))
        .collect();
    let mut users = Vec::new();
    if !sources.is_empty() {
        users.push(format!("Source {}", sources.join(", ")));
    }
    if !gateways.is_empty() {
        users.push(format!(
            "the lifecycle events of Gateway {} (spec.lifecycle.sinks)",
            gateways.join(", ")
        ));
    }
    format!(
        "still used by {}: remove it from their sinks first (their queued deliveries would be dead-lettered as sink_gone)",
        users.join(" and ")
    )
}

/// The conditions of a Sink whose deletion waits on its users (`Degraded`, `InUse`).
pub fn in_use_conditions(
    sink: &Sink,
    old: &SinkStatus,
    message: &str,
    now: &str,
) -> Vec<ankusa_crds::Condition> {
    conditions(
        &old.conditions,
        Conds::blocked("InUse", message.to_string()),
        sink.metadata.generation,
        now,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::object;
    use serde_json::json;

    fn sink() -> Sink {
        object(json!({
            "metadata": {"name": "redis", "namespace": "ns", "generation": 2},
            "spec": {"type": "redis", "options": {}},
        }))
    }

    fn source(name: &str, sinks: &[&str]) -> Source {
        let refs: Vec<_> = sinks.iter().map(|n| json!({"name": n})).collect();
        object(json!({
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"gatewayRef": {"name": "gw"}, "sinks": refs},
        }))
    }

    #[test]
    fn users_are_the_sources_naming_the_sink() {
        let sources = [
            source("a", &["redis"]),
            source("b", &["http"]),
            source("c", &["http", "redis"]),
        ];
        assert_eq!(users(&sink(), &sources, &[]), vec!["a", "c"]);
    }

    fn gateway(name: &str, lifecycle: &[&str]) -> Gateway {
        let refs: Vec<_> = lifecycle.iter().map(|n| json!({"name": n})).collect();
        object(json!({
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"lifecycle": {"sinks": refs}},
        }))
    }

    #[test]
    fn a_gateways_lifecycle_uses_the_sink_too() {
        let sources = [source("a", &["redis"])];
        let gateways = [
            gateway("gw", &["http", "redis"]),
            gateway("other", &["http"]),
        ];
        let used = users(&sink(), &sources, &gateways);
        assert_eq!(used, vec!["a", "gw/lifecycle"]);
        let m = in_use_message(&used);
        assert!(
            m.starts_with(
                "still used by Source a and the lifecycle events of Gateway gw (spec.lifecycle.sinks): "
            ),
            "{m}"
        );
        let only = users(&sink(), &[], &gateways);
        let st = sink_status(&sink(), &gateways, &only, &SinkStatus::default(), "T");
        assert_eq!(st.used_by.as_deref(), Some("gw/lifecycle"));
        let ready = find_condition(&st.conditions, "Ready").unwrap();
        assert_ne!(ready.reason.as_deref(), Some("NotReferenced"));
        assert!(
            in_use_message(&only).starts_with("still used by the lifecycle events of Gateway gw ")
        );
    }

    #[test]
    fn a_sink_in_use_is_blocked_and_names_its_users() {
        let m = in_use_message(&["a".into(), "c".into()]);
        assert!(m.starts_with("still used by Source a, c: "), "{m}");
        let conds = in_use_conditions(&sink(), &SinkStatus::default(), &m, "T");
        let ready = find_condition(&conds, "Ready").unwrap();
        assert_eq!(ready.reason.as_deref(), Some("InUse"));
        assert!(find_condition(&conds, DEGRADED).unwrap().is_true());
        let st = SinkStatus {
            conditions: conds,
            ..Default::default()
        };
        assert!(!changed(&st, &st.clone()));
        assert!(changed(
            &st,
            &SinkStatus {
                failing_pods: 1,
                ..st.clone()
            }
        ));
        assert!(!delivery_failing(&st));
    }
}
