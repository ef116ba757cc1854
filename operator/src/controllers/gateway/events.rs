//! The Events of the Gateway controller, one per transition (never one per poll: a requeue
//! every few seconds must not repeat them): on the Gateway, Ready reached, a config refused,
//! a pod's intake log down, its backups stale, its reload refused, its config pushed; on a
//! Source, programmed, refused, its first hooks quarantined, its pen near full.
//!
//! May import: `context`, `status` (the transitions read off old and new statuses).

use ankusa_crds::condition::QUARANTINE_NEAR_FULL;
use ankusa_crds::{Condition, Gateway, GatewayStatus, Source, SourceStatus};
use kube::runtime::events::EventType;

use crate::context::Ctx;
use crate::render::Rendered;
use crate::status::gateway::{
    backup_interval_ms, backup_stale, find as cond, intake_down, short_hash as short,
};

/// The Gateway's Events between `old` and `new`.
pub async fn gateway_events(
    ctx: &Ctx,
    gw: &Gateway,
    old: &GatewayStatus,
    new: &GatewayStatus,
    rendered: &Rendered,
) {
    let was_ready = cond(&old.conditions, "Ready").is_some_and(|c| c.is_true());
    let is_ready = cond(&new.conditions, "Ready").is_some_and(|c| c.is_true());
    if is_ready && !was_ready {
        ctx.event(
            gw,
            EventType::Normal,
            "Programmed",
            new.programmed.clone().unwrap_or_default() + " pods run the rendered config",
        )
        .await;
    }
    if let Some(e) = &rendered.error {
        let old_msg = cond(&old.conditions, "Degraded").and_then(|c| c.message.clone());
        if old_msg.as_deref() != Some(e.as_str()) {
            ctx.event(gw, EventType::Warning, "InvalidConfig", e.clone())
                .await;
        }
    }
    let interval = backup_interval_ms(gw);
    for p in &new.pods {
        let before = old.pods.iter().find(|o| o.name == p.name);
        if intake_down(p) && !before.is_some_and(intake_down) {
            ctx.event(
                gw,
                EventType::Warning,
                "IntakeDown",
                format!(
                    "{}: the intake log does not confirm its publishes; new hooks get 503 intake_unavailable",
                    p.name
                ),
            )
            .await;
        }
        if let Some(i) = interval
            && backup_stale(p, i)
            && !before.is_some_and(|b| backup_stale(b, i))
        {
            let why = p
                .backup_last_error
                .as_deref()
                .filter(|_| p.backup_failures.is_some_and(|f| f > 0))
                .map(|e| format!("the last one failed: {e}"))
                .unwrap_or_else(|| {
                    format!("none for {} s", p.backup_age_seconds.unwrap_or_default())
                });
            ctx.event(
                gw,
                EventType::Warning,
                "BackupStale",
                format!("{}: backups are stale ({why})", p.name),
            )
            .await;
        }
        if let Some(e) = &p.last_error
            && e.contains("refused the config")
            && before.and_then(|b| b.last_error.as_ref()) != Some(e)
        {
            ctx.event(
                gw,
                EventType::Warning,
                "ConfigRefused",
                format!("{}: {e}", p.name),
            )
            .await;
        }
        if p.programmed && !before.is_some_and(|b| b.programmed && b.config_hash == p.config_hash) {
            ctx.event(
                gw,
                EventType::Normal,
                "ConfigPushed",
                format!("{} runs config {}", p.name, short(p.config_hash.as_deref())),
            )
            .await;
        }
    }
}

/// Events of the quarantine transitions: the first hooks of this source held in a pen (a
/// secret rotation gone wrong, or forgeries), and a pen reaching its near-full mark.
async fn quarantine_events(ctx: &Ctx, src: &Source, old: &SourceStatus, new: &SourceStatus) {
    let had = old.quarantine.as_ref().is_some_and(|q| q.entries > 0);
    if let Some(q) = new.quarantine.as_ref().filter(|q| q.entries > 0 && !had) {
        let pods: Vec<String> = q
            .pods
            .iter()
            .map(|p| format!("{} ({})", p.pod, p.entries))
            .collect();
        ctx.event(
            src,
            EventType::Warning,
            "Quarantined",
            format!(
                "{} hooks failed verification and are held in the quarantine pen of {}; once the source \
                 verifies them (its secrets fixed), release them with a ReplayJob of kind quarantine",
                q.entries,
                pods.join(", ")
            ),
        )
        .await;
    }
    let near = |st: &SourceStatus| {
        cond(&st.conditions, QUARANTINE_NEAR_FULL).is_some_and(Condition::is_true)
    };
    if near(new) && !near(old) {
        let msg = cond(&new.conditions, QUARANTINE_NEAR_FULL)
            .and_then(|c| c.message.clone())
            .unwrap_or_default();
        ctx.event(src, EventType::Warning, QUARANTINE_NEAR_FULL, msg)
            .await;
    }
}

/// A Source's Events between `old` and `new`.
pub async fn source_events(ctx: &Ctx, src: &Source, old: &SourceStatus, new: &SourceStatus) {
    quarantine_events(ctx, src, old, new).await;
    let was = cond(&old.conditions, "Ready");
    let now = cond(&new.conditions, "Ready");
    if let Some(n) = now {
        let changed = was
            .is_none_or(|w| w.status != n.status || w.reason != n.reason || w.message != n.message);
        if !changed {
            return;
        }
        match n.reason.as_deref() {
            Some("Programmed")
                if !was.is_some_and(|w| {
                    w.is_true() && w.observed_generation == n.observed_generation
                }) =>
            {
                ctx.event(
                    src,
                    EventType::Normal,
                    "Programmed",
                    n.message.clone().unwrap_or_default(),
                )
                .await
            }
            Some("RenderFailed") | Some("GatewayConfigInvalid") => {
                ctx.event(
                    src,
                    EventType::Warning,
                    "RenderFailed",
                    n.message.clone().unwrap_or_default(),
                )
                .await
            }
            _ => {}
        }
    }
}
