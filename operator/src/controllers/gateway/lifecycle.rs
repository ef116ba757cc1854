//! The Kubernetes side of a Gateway's lifecycle events, run in stage 5 (`publish`):
//!
//! - the pods report the failing deliveries of their lifecycle source (`ankusa:lifecycle`) by
//!   sink index only: [`name_lifecycle_failures`] names them after the Sinks of
//!   `spec.lifecycle`, so those Sinks' statuses show them like any other delivery error;
//! - Events, each once per transition, never once per hook, pod or poll:
//!   `LifecycleNotRendered` (Warning, on the Gateway) when `spec.lifecycle` stops rendering or
//!   the reason changes, `LifecycleConfigured` (Normal) when it renders again;
//!   `DeadLetterBurst` (Warning, on the Gateway) and `BreakerOpened` / `BreakerClosed`
//!   (Warning / Normal, on the Sink; on the Gateway when the Sink cannot be read), aggregated
//!   over the pods by `crate::signals`. They name Gateways, Sinks and pods: never a URL or a
//!   credential.
//!
//! May import: `context`, `render`, `signals`, `status`.

use std::collections::BTreeSet;
use std::time::Instant;

use ankusa_api::SinkFailure;
use ankusa_crds::{Gateway, GatewayStatus, Sink, Source};
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::events::EventType;

use crate::context::Ctx;
use crate::render::rendered::{Outcome, Rendered, source_id};
use crate::signals::{BreakerChange, Burst, PodDlq};
use crate::status::gateway::find as cond;
use crate::status::lifecycle::LIFECYCLE_EVENTS;

/// The pods' id of the internal source of lifecycle events.
pub const LIFECYCLE_SOURCE: &str = "ankusa:lifecycle";

/// Names the failures of the lifecycle source's sinks after `spec.lifecycle.sinks`, when the
/// pods run the section rendered from it (a kept previous section may list other Sinks).
pub fn name_lifecycle_failures(
    gw: &Gateway,
    rendered: &Rendered,
    failing: &mut [(String, Vec<SinkFailure>)],
) {
    let Some(spec) = gw.spec.lifecycle.as_ref() else {
        return;
    };
    if rendered.lifecycle != Some(Outcome::Current) {
        return;
    }
    for f in failing.iter_mut().flat_map(|(_, fs)| fs.iter_mut()) {
        if f.source == LIFECYCLE_SOURCE && f.name.is_none() {
            f.name = spec.sinks.get(usize::from(f.sink)).map(|r| r.name.clone());
        }
    }
}

/// The Sinks whose breaker one pod reports open (by name: the pod's own, else through the
/// Source with that id, by position, as `status::gateway::delivery_errors` matches them).
pub fn open_sinks(failing: &[SinkFailure], sources: &[&Source]) -> BTreeSet<String> {
    failing
        .iter()
        .filter(|f| f.breaker_open)
        .filter_map(|f| {
            f.name.clone().or_else(|| {
                let src = sources.iter().find(|s| source_id(s) == f.source)?;
                src.spec
                    .sinks
                    .get(usize::from(f.sink))
                    .map(|r| r.name.clone())
            })
        })
        .collect()
}

/// What one poll adds to the Gateway's memory: the burst and the breaker changes to announce.
pub fn remember(
    ctx: &Ctx,
    gw: &Gateway,
    status: &GatewayStatus,
    failing: &[(String, Vec<SinkFailure>)],
    answered: &[String],
    sources: &[&Source],
    now: Instant,
) -> (Option<Burst>, Vec<BreakerChange>) {
    let answered_pod = |p: &str| answered.iter().any(|a| a == p);
    let dlq: Vec<PodDlq> = status
        .pods
        .iter()
        .map(|p| PodDlq {
            pod: &p.name,
            uid: p.uid.as_deref(),
            rows: p
                .dlq
                .as_ref()
                .map(|d| d.rows)
                .filter(|_| answered_pod(&p.name)),
        })
        .collect();
    let breakers: Vec<(&str, Option<BTreeSet<String>>)> = status
        .pods
        .iter()
        .map(|p| {
            let open = answered_pod(&p.name).then(|| {
                failing
                    .iter()
                    .find(|(pod, _)| *pod == p.name)
                    .map(|(_, fs)| open_sinks(fs, sources))
                    .unwrap_or_default()
            });
            (p.name.as_str(), open)
        })
        .collect();
    let mut memory = ctx.signals.lock().unwrap_or_else(|p| p.into_inner());
    let g = memory.gateway(&memory_key(gw));
    (g.dlq.observe(&dlq, now), g.breakers.observe(&breakers))
}

/// The Gateway's key in `Ctx::signals`.
pub fn memory_key(gw: &Gateway) -> String {
    format!("{}/{}", gw.namespace().unwrap_or_default(), gw.name_any())
}

/// `DeadLetterBurst`'s note.
pub fn burst_message(b: &Burst) -> String {
    const SHOWN: usize = 5;
    let minutes = b.over.as_secs().div_ceil(60).max(1);
    let mut pods: Vec<String> = b
        .pods
        .iter()
        .take(SHOWN)
        .map(|(p, n)| format!("{p} (+{n})"))
        .collect();
    if b.pods.len() > SHOWN {
        pods.push(format!("and {} more pods", b.pods.len() - SHOWN));
    }
    format!(
        "{} deliveries dead-lettered in the last {minutes} min on {}; the pods' DLQs hold {} rows \
         (status.pods[].dlq): once their sinks take them, replay them with a ReplayJob of kind dlq",
        b.added,
        pods.join(", "),
        b.total
    )
}

/// `BreakerOpened` / `BreakerClosed` as (type, reason, note on the Sink).
pub fn breaker_event(gw: &str, c: &BreakerChange) -> (EventType, &'static str, String) {
    match c {
        BreakerChange::Opened { open_on, pods, .. } => (
            EventType::Warning,
            "BreakerOpened",
            format!(
                "circuit breaker open on {open_on} of {pods} pods of Gateway {gw}: deliveries to this sink wait \
                 for a probe to pass (status.conditions Degraded says why they fail)"
            ),
        ),
        BreakerChange::Closed { .. } => (
            EventType::Normal,
            "BreakerClosed",
            format!(
                "circuit breaker closed on every pod of Gateway {gw}: deliveries to this sink resume"
            ),
        ),
    }
}

/// The lifecycle Events of one reconcile (see the module's header).
pub async fn events(
    ctx: &Ctx,
    gw: &Gateway,
    old: &GatewayStatus,
    new: &GatewayStatus,
    failing: &[(String, Vec<SinkFailure>)],
    answered: &[String],
    sources: &[&Source],
) {
    section_events(ctx, gw, old, new).await;
    let (burst, changes) = remember(ctx, gw, new, failing, answered, sources, Instant::now());
    if let Some(b) = burst {
        tracing::info!(gateway = %gw.name_any(), added = b.added, "dead-letter burst");
        ctx.event(gw, EventType::Warning, "DeadLetterBurst", burst_message(&b))
            .await;
    }
    let ns = gw.namespace().unwrap_or_default();
    let sinks: Api<Sink> = Api::namespaced(ctx.client.clone(), &ns);
    for c in &changes {
        let name = match c {
            BreakerChange::Opened { sink, .. } | BreakerChange::Closed { sink } => sink,
        };
        let (type_, reason, note) = breaker_event(&gw.name_any(), c);
        tracing::info!(gateway = %gw.name_any(), sink = %name, reason, "breaker transition");
        match sinks.get_opt(name).await {
            Ok(Some(sink)) => ctx.event(&sink, type_, reason, note).await,
            other => {
                if let Err(e) = other {
                    tracing::warn!(sink = %name, error = %e, "could not read the Sink for its event");
                }
                ctx.event(gw, type_, reason, format!("Sink {name}: {note}"))
                    .await
            }
        }
    }
}

/// `LifecycleNotRendered` / `LifecycleConfigured` on the transitions of `LifecycleEvents`.
async fn section_events(ctx: &Ctx, gw: &Gateway, old: &GatewayStatus, new: &GatewayStatus) {
    let Some(now) = cond(&new.conditions, LIFECYCLE_EVENTS) else {
        return;
    };
    let was = cond(&old.conditions, LIFECYCLE_EVENTS);
    if !now.is_true() {
        if was.is_none_or(|w| w.is_true() || w.message != now.message) {
            ctx.event(
                gw,
                EventType::Warning,
                "LifecycleNotRendered",
                now.message.clone().unwrap_or_default(),
            )
            .await;
        }
    } else if was.is_some_and(|w| !w.is_true()) {
        ctx.event(
            gw,
            EventType::Normal,
            "LifecycleConfigured",
            now.message.clone().unwrap_or_default(),
        )
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn failure(source: &str, sink: u16, name: Option<&str>, open: bool) -> SinkFailure {
        serde_json::from_value(serde_json::json!({
            "source": source, "sink": sink, "name": name, "type": "http",
            "error": "http 503", "at": 1, "since": 1, "failures": 5, "breaker_open": open,
        }))
        .expect("a failure")
    }

    #[test]
    fn messages_name_pods_and_counts_only() {
        let b = Burst {
            added: 140,
            over: Duration::from_secs(130),
            pods: (0..7).map(|i| (format!("gw-{i}"), 20)).collect(),
            total: 900,
        };
        let m = burst_message(&b);
        assert!(
            m.starts_with(
                "140 deliveries dead-lettered in the last 3 min on gw-0 (+20), gw-1 (+20)"
            ),
            "{m}"
        );
        assert!(
            m.contains("and 2 more pods") && m.contains("900 rows"),
            "{m}"
        );
        let (t, r, n) = breaker_event(
            "gw",
            &BreakerChange::Opened {
                sink: "k".into(),
                open_on: 2,
                pods: 3,
            },
        );
        assert_eq!((t, r), (EventType::Warning, "BreakerOpened"));
        assert!(
            n.starts_with("circuit breaker open on 2 of 3 pods of Gateway gw"),
            "{n}"
        );
    }

    #[test]
    fn lifecycle_failures_are_named_after_the_current_specs_sinks() {
        let gw: Gateway = crate::testing::object(serde_json::json!({
            "metadata": {"name": "gw", "namespace": "ns"},
            "spec": {"lifecycle": {"sinks": [{"name": "audit"}, {"name": "ops"}]}},
        }));
        let mut rendered = crate::render::render(&crate::render::Inputs {
            gateway: &gw,
            sources: &[],
            sinks: &[],
            secrets: &Default::default(),
            admin_token: "operator-admin-token-0123456789",
            scrape_token: None,
            previous: None,
        });
        let fresh = || {
            vec![(
                "gw-0".to_string(),
                vec![
                    failure(LIFECYCLE_SOURCE, 1, None, true),
                    failure("orders", 1, None, true),
                ],
            )]
        };
        // The Sinks do not exist: the pods run no section of this spec, nothing is named.
        let mut failing = fresh();
        name_lifecycle_failures(&gw, &rendered, &mut failing);
        assert!(failing[0].1.iter().all(|f| f.name.is_none()));
        rendered.lifecycle = Some(Outcome::Current);
        let mut failing = fresh();
        name_lifecycle_failures(&gw, &rendered, &mut failing);
        assert_eq!(failing[0].1[0].name.as_deref(), Some("ops"));
        assert_eq!(failing[0].1[1].name, None);
        assert_eq!(
            open_sinks(&failing[0].1, &[])
                .into_iter()
                .collect::<Vec<_>>(),
            vec!["ops"]
        );
    }

    #[test]
    fn open_sinks_are_named_by_the_pod_or_through_the_source() {
        let src: Source = crate::testing::object(serde_json::json!({
            "metadata": {"name": "orders", "namespace": "ns"},
            "spec": {"gatewayRef": {"name": "gw"}, "sinks": [{"name": "a"}, {"name": "b"}]},
        }));
        let fs = [
            failure("orders", 1, None, true),
            failure("orders", 0, Some("a"), false),
            failure("x", 0, Some("named"), true),
            failure("gone", 0, None, true),
        ];
        let open = open_sinks(&fs, &[&src]);
        assert_eq!(open.into_iter().collect::<Vec<_>>(), vec!["b", "named"]);
    }
}
