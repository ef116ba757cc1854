//! Gateway → config Secret (one key per pod), Services, NetworkPolicy, StatefulSet; pushes
//! each pod's config to its admin API and reads back, in the same `GET /v1/status`, the loaded
//! hash, the sinks whose deliveries fail there, its quarantine pen, its archive and its DLQ;
//! writes the status of the Gateway (with each Sink's delivery errors, which the Sink
//! controller turns into the Sink's condition, and each pod's archive and DLQ) and of its
//! Sources (with their quarantined hooks per pod). A Gateway naming a ServiceAccount the
//! policy does not allow, or colliding with an object it does not own, is refused before
//! anything is applied.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use ankusa_api::{MAX_SINK_ERROR_BYTES, PenStatus, SinkFailure};
use ankusa_config::OnVerifyFailure;
use ankusa_crds::condition::QUARANTINE_NEAR_FULL;
use ankusa_crds::names::{USABLE, USABLE_LABEL};
use ankusa_crds::{
    Condition, Gateway, GatewayPodStatus, GatewayStatus, PodArchiveStatus, PodDlqStatus,
    QuarantineOnPod, RenderedSink, Sink, SinkDeliveryError, Source, SourceQuarantine, SourceStatus,
};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, DeleteParams, ListParams, Patch, Preconditions};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::context::{
    AdminAccess, Ctx, Error, Result, apply_params, pod_ready, pod_target, status_params, truncate,
};
use crate::ownership::{self, Ledger, Role};
use crate::render::{self, Inputs, Outcome, Rendered, SecretValues, SourceRender};
use crate::resources;
use crate::status::{
    Conds, condition, conditions, fraction, now_rfc3339, rfc3339_from_ms, same_conditions,
};

pub const CONTROLLER: &str = "gateway";

/// What is desired of one pod: the hash and YAML of its config.
#[derive(Debug, Clone)]
pub struct PodConfig {
    pub hash: String,
    pub yaml: String,
}

pub async fn reconcile(gw: Arc<Gateway>, ctx: Arc<Ctx>) -> Result<Action> {
    let _timer = ctx.metrics.reconcile(CONTROLLER);
    if gw.meta().deletion_timestamp.is_some() {
        ctx.forget_poll(&delivery_write_key(&gw));
        // Owned objects go with it (ownerReferences); Sources wait for their own finalizer.
        return Ok(Action::await_change());
    }
    let ns = gw
        .namespace()
        .ok_or_else(|| Error::Invalid("Gateway without namespace".into()))?;
    let mut ledger = Ledger::start(&ctx, &gw).await?;
    if let Some(msg) = resources::service_account_refusal(&gw, &ctx.settings.policy) {
        refuse(&ctx, &gw, "ServiceAccountNotAllowed", msg).await?;
        // Only an edit of the Gateway (or the operator's own flags, read at start) can
        // change the verdict.
        return Ok(Action::await_change());
    }
    let client = ctx.client.clone();
    let secrets_api: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let existing = secrets_api
        .get_opt(&resources::config_secret_name(&gw))
        .await?;
    let sts_api: Api<StatefulSet> = Api::namespaced(client.clone(), &ns);
    let existing_sts = sts_api.get_opt(&resources::statefulset_name(&gw)).await?;
    if let Some(msg) = ownership::foreign_object(
        &ctx,
        &gw,
        &mut ledger,
        existing.as_ref(),
        existing_sts.as_ref(),
    )
    .await?
    {
        refuse(&ctx, &gw, "ForeignObject", msg).await?;
        return Ok(Action::requeue(Duration::from_secs(10)));
    }
    let token = match ownership::admin_token(&ctx, &gw, &mut ledger).await {
        Ok(t) => t,
        Err(Error::Invalid(msg)) => {
            write_gateway_status(&ctx, &gw, blocked_status(&gw, "AdminTokenMissing", &msg)).await?;
            return Ok(Action::requeue(Duration::from_secs(30)));
        }
        Err(e) => return Err(e),
    };
    // Before the StatefulSet: the pods mount the serving certificate.
    let access = AdminAccess {
        tls: crate::admin_tls::ensure(&ctx, &gw, &mut ledger).await?,
        token: token.clone(),
    };
    let sources = Api::<Source>::namespaced(client.clone(), &ns)
        .list(&ListParams::default())
        .await?
        .items;
    let sinks = Api::<Sink>::namespaced(client.clone(), &ns)
        .list(&ListParams::default())
        .await?
        .items;
    let secrets = fetch_secrets(&ctx, &ns, &referenced_secrets(&gw, &sources, &sinks)).await?;

    let existing_files = secret_files(existing.as_ref());
    let previous = existing_files
        .values()
        .next()
        .and_then(|y| render::parse_rendered(y));
    let rendered = render::render(&Inputs {
        gateway: &gw,
        sources: &sources,
        sinks: &sinks,
        secrets: &secrets,
        admin_token: &token,
        previous: previous.as_ref(),
    });

    let pods = crate::pods::gateway_pods_of(&client, &gw, existing_sts.as_ref()).await?;
    let ordinals = pods
        .iter()
        .filter_map(|p| resources::ordinal(&gw, &p.name_any()))
        .max()
        .map_or(0, |o| o + 1);
    let pod_names = resources::pod_names(&gw, gw.spec.replicas.max(ordinals));
    let desired = desired_configs(&rendered, &pod_names, &existing_files);

    // The config Secret first, so a pod the StatefulSet adds finds its file.
    if rendered.base.is_some() {
        let files: BTreeMap<String, String> = desired
            .iter()
            .map(|(p, c)| (resources::config_key(p), c.yaml.clone()))
            .collect();
        if files != existing_files {
            tracing::info!(gateway = %gw.name_any(), namespace = %ns, pods = files.len(), "config Secret updated");
            let desired = resources::config_secret(&gw, &files);
            ownership::write_secret(
                &ctx,
                &gw,
                &mut ledger,
                Role::Config,
                existing.as_ref(),
                desired,
            )
            .await?;
        }
    }
    let svc_api: Api<Service> = Api::namespaced(client.clone(), &ns);
    for svc in [
        resources::headless_service(&gw),
        resources::ingest_service(&gw),
    ] {
        svc_api
            .patch(&svc.name_any(), &apply_params(), &Patch::Apply(&svc))
            .await?;
    }
    // Before the StatefulSet, so a new pod's admin port is never open to the cluster.
    sync_network_policy(&ctx, &ns, &gw).await?;
    let mut sts = resources::statefulset(&gw, &ctx.settings.gateway_image);
    let storage_note = keep_claim_templates(&mut sts, existing_sts.as_ref());
    // The pods open their intake log and backup store when they start: a change there (a
    // rotated Secret included) rolls them. A config that does not render keeps the last.
    let fingerprint = match &rendered.base {
        Some(c) => render::durability_fingerprint(c, &token),
        None => existing_sts
            .as_ref()
            .and_then(resources::durability_fingerprint_of),
    };
    resources::set_durability_fingerprint(&mut sts, fingerprint.as_deref());
    sts_api
        .patch(&sts.name_any(), &apply_params(), &Patch::Apply(&sts))
        .await?;

    // Best effort: a failure here (an older chart's RBAC without volume claims) must not stop
    // the rest of the reconcile.
    if let Err(e) = replace_lost_volumes(&ctx, &gw, &pods).await {
        tracing::warn!(gateway = %gw.name_any(), namespace = %ns, error = %e, "checking the pods' volume claims failed");
    }

    // Push and observe every pod.
    let observed = futures::future::join_all(
        pods.iter()
            .map(|p| observe_pod(&ctx, &gw, p, desired.get(&p.name_any()), &access)),
    )
    .await;

    let mut failing = Vec::with_capacity(observed.len());
    let mut pens = Vec::new();
    let observed: Vec<GatewayPodStatus> = observed
        .into_iter()
        .map(|(pod, report)| {
            failing.push((pod.name.clone(), report.failing));
            if let Some(pen) = report.pen {
                pens.push((pod.name.clone(), pen));
            }
            pod
        })
        .collect();
    let now = now_rfc3339();
    let old = gw.status.clone().unwrap_or_default();
    let mut status = gateway_status(&gw, &rendered, observed, storage_note, &old, &now);
    let own_sources: Vec<&Source> = sources
        .iter()
        .filter(|s| render::source_of(s, &gw.name_any()))
        .collect();
    delivery_errors(&mut status.sinks, &failing, &own_sources);
    gateway_events(&ctx, &gw, &old, &status, &rendered).await;
    let converged = status
        .conditions
        .iter()
        .any(|c| c.type_ == "Ready" && c.is_true());
    let programmed = status.programmed_replicas;
    let gw_name = gw.name_any();
    if !same_status(&old, &status) && status_write_due(&ctx, &gw, &old, &status) {
        write_gateway_status(&ctx, &gw, status).await?;
    }
    for src in sources
        .iter()
        .filter(|s| render::source_of(s, &gw.name_any()))
    {
        let sr = rendered.sources.get(&src.name_any());
        let old = src.status.clone().unwrap_or_default();
        let prefix = rendered
            .base
            .as_ref()
            .map(|c| c.http.prefix.clone())
            .unwrap_or_else(|| "/webhooks".into());
        let view = GatewayView {
            error: rendered.error.as_deref(),
            programmed,
            desired: gw.spec.replicas,
            prefix: &prefix,
            gateway: &gw_name,
            pens: &pens,
        };
        let new = source_status(src, sr, view, &old, &now);
        source_events(&ctx, src, &old, &new).await;
        if !same_source_status(&old, &new) && source_write_due(&ctx, src, &old, &new) {
            let api: Api<Source> = Api::namespaced(client.clone(), &ns);
            let body = json!({
                "apiVersion": "ankusa.dev/v1alpha1",
                "kind": "Source",
                "status": new,
            });
            api.patch_status(
                &src.name_any(),
                &status_params(CONTROLLER),
                &Patch::Apply(&body),
            )
            .await?;
        }
    }
    Ok(if converged {
        // Re-check now and then: a pod may have reloaded an older file.
        Action::requeue(Duration::from_secs(20))
    } else {
        Action::requeue(Duration::from_secs(3))
    })
}

pub fn error_policy(_gw: Arc<Gateway>, err: &Error, ctx: Arc<Ctx>) -> Action {
    ctx.metrics.error(CONTROLLER, err.label());
    tracing::warn!(error = %err, "gateway reconcile failed");
    Action::requeue(Duration::from_secs(if err.is_waiting() { 3 } else { 10 }))
}

/// Stops a Gateway before anything is applied: `Degraded` with `reason`, and a Warning Event
/// when the message is new (a requeue must not repeat it every few seconds).
async fn refuse(ctx: &Ctx, gw: &Gateway, reason: &'static str, msg: String) -> Result<()> {
    let old = gw.status.clone().unwrap_or_default();
    let reported = cond(&old.conditions, "Degraded").and_then(|c| c.message.clone());
    if reported.as_deref() != Some(msg.as_str()) {
        ctx.event(gw, EventType::Warning, reason, msg.clone()).await;
    }
    write_gateway_status(ctx, gw, blocked_status(gw, reason, &msg)).await
}

/// Applies the Gateway's NetworkPolicy, or, when `spec.networkPolicy.enabled` is false,
/// deletes the one this Gateway owns. Only that one: a same-named policy someone else made is
/// left alone, and the uid precondition keeps a policy created between the read and the delete
/// safe.
async fn sync_network_policy(ctx: &Ctx, ns: &str, gw: &Gateway) -> Result<()> {
    let api: Api<NetworkPolicy> = Api::namespaced(ctx.client.clone(), ns);
    let name = resources::network_policy_name(gw);
    if gw.spec.network_policy.enabled {
        let np = resources::network_policy(gw, &ctx.settings.policy);
        api.patch(&name, &apply_params(), &Patch::Apply(&np))
            .await?;
        return Ok(());
    }
    let Some(existing) = api.get_metadata_opt(&name).await? else {
        return Ok(());
    };
    if !resources::owned_by(&existing.metadata, gw) {
        return Ok(());
    }
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: existing.metadata.uid.clone(),
            resource_version: None,
        }),
        ..Default::default()
    };
    match api.delete(&name, &params).await {
        Ok(_) => {
            tracing::info!(
                gateway = %gw.name_any(),
                namespace = %ns,
                "NetworkPolicy removed (spec.networkPolicy.enabled: false)"
            );
            ctx.event(
                gw,
                EventType::Normal,
                "NetworkPolicyRemoved",
                format!("NetworkPolicy {name} deleted: spec.networkPolicy.enabled is false"),
            )
            .await;
            Ok(())
        }
        // Gone already, or replaced by another object since the read.
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Secrets referenced by a Gateway's claim-check settings, its Sources and the Sinks they use.
pub fn referenced_secrets(gw: &Gateway, sources: &[Source], sinks: &[Sink]) -> BTreeSet<String> {
    let name = gw.name_any();
    let mut out: BTreeSet<String> = render::gateway_secret_names(gw).map(String::from).collect();
    let mut sink_names = BTreeSet::new();
    for s in sources.iter().filter(|s| render::source_of(s, &name)) {
        out.extend(render::source_secret_names(s).map(String::from));
        sink_names.extend(s.spec.sinks.iter().map(|r| r.name.clone()));
    }
    for s in sinks.iter().filter(|s| sink_names.contains(&s.name_any())) {
        out.extend(render::sink_secret_names(s).map(String::from));
    }
    out
}

async fn fetch_secrets(ctx: &Ctx, ns: &str, names: &BTreeSet<String>) -> Result<SecretValues> {
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), ns);
    let mut out = SecretValues::new();
    for n in names {
        let Some(meta) = api.get_metadata_opt(n).await? else {
            continue;
        };
        // The label is read before the data: a Secret that did not opt in is never fetched.
        let usable = meta.labels().get(USABLE_LABEL).map(String::as_str) == Some(USABLE);
        if !usable {
            out.insert(
                n.clone(),
                BTreeMap::from([(render::NOT_USABLE.to_string(), Vec::new())]),
            );
            continue;
        }
        if let Some(s) = api.get_opt(n).await? {
            out.insert(
                n.clone(),
                s.data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.0))
                    .collect(),
            );
        }
    }
    Ok(out)
}

/// The text files of a config Secret.
pub fn secret_files(s: Option<&Secret>) -> BTreeMap<String, String> {
    s.and_then(|s| s.data.as_ref())
        .map(|d| {
            d.iter()
                .filter_map(|(k, v)| Some((k.clone(), String::from_utf8(v.0.clone()).ok()?)))
                .collect()
        })
        .unwrap_or_default()
}

/// The config each pod should run: freshly rendered, or (when the Gateway's own config is
/// refused) what the config Secret already holds.
pub fn desired_configs(
    rendered: &Rendered,
    pods: &[String],
    existing: &BTreeMap<String, String>,
) -> BTreeMap<String, PodConfig> {
    let mut out = BTreeMap::new();
    for p in pods {
        if rendered.base.is_some() {
            if let Some(c) = rendered.for_pod(p) {
                out.insert(
                    p.clone(),
                    PodConfig {
                        hash: c.hash(),
                        yaml: c.to_yaml(),
                    },
                );
            }
        } else if let Some(yaml) = existing.get(&resources::config_key(p))
            && let Some(c) = render::parse_rendered(yaml)
        {
            out.insert(
                p.clone(),
                PodConfig {
                    hash: c.hash(),
                    yaml: yaml.clone(),
                },
            );
        }
    }
    out
}

/// Volume claim templates cannot change on a StatefulSet: keep the existing ones and say so.
fn keep_claim_templates(
    desired: &mut StatefulSet,
    existing: Option<&StatefulSet>,
) -> Option<String> {
    let existing = existing?.spec.as_ref()?.volume_claim_templates.clone()?;
    let spec = desired.spec.as_mut()?;
    let storage = |v: &[k8s_openapi::api::core::v1::PersistentVolumeClaim]| {
        v.first().and_then(|c| c.spec.as_ref()).map(|s| {
            (
                s.storage_class_name.clone(),
                s.resources.as_ref().and_then(|r| r.requests.clone()),
            )
        })
    };
    let note = (storage(&existing) != storage(spec.volume_claim_templates.as_deref().unwrap_or(&[])))
        .then(|| {
            "spec.storage changed: volume claim templates of a StatefulSet are immutable, existing volumes keep their size and class".to_string()
        });
    spec.volume_claim_templates = Some(existing);
    note
}

/// What one `GET /v1/status` of a pod says beyond its own status: read once per poll, handed
/// to the Sinks (failing deliveries) and the Sources (their quarantined hooks).
#[derive(Debug, Clone, Default)]
pub struct PodReport {
    /// Sinks whose latest delivery attempt failed there.
    pub failing: Vec<SinkFailure>,
    /// Its quarantine pen (a pod of a version without one reports none).
    pub pen: Option<PenStatus>,
}

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

/// Deletes the pods that lost their volume claim (see [`resources::volume_lost`]), so that
/// the StatefulSet controller recreates each with a new, empty claim from the template; the
/// gateway then restores its backup and rebuilds from the intake log. One Event per pod.
async fn replace_lost_volumes(ctx: &Ctx, gw: &Gateway, pods: &[Pod]) -> Result<()> {
    let ns = gw.namespace().unwrap_or_default();
    let api: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &ns);
    let listed = api
        .list_metadata(&ListParams::default().labels(&resources::selector_string(gw)))
        .await?;
    let protected = gw.spec.durability.as_ref().is_some_and(|d| {
        d.mode == ankusa_crds::DurabilityMode::Dual || d.backup.as_ref().is_some_and(|b| b.enabled)
    });
    for pod in pods {
        let name = pod.name_any();
        if resources::ordinal(gw, &name).is_none() {
            continue;
        }
        let claim_name = resources::claim_name(&name);
        let claim = match listed.items.iter().find(|c| c.name_any() == claim_name) {
            Some(m) => Some(PersistentVolumeClaim {
                metadata: m.metadata.clone(),
                ..Default::default()
            }),
            // Not labelled as ours (made by hand before the pod?): ask for it by name.
            None => api.get_opt(&claim_name).await?,
        };
        let Some(why) = resources::volume_lost(pod, claim.as_ref(), pod_ready(pod), protected)
        else {
            continue;
        };
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: pod.uid(),
                resource_version: None,
            }),
            ..Default::default()
        };
        let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
        match pods_api.delete(&name, &params).await {
            Ok(_) => {
                let then = if protected {
                    "it comes back on a new, empty volume and restores itself"
                } else {
                    "it comes back on a new, empty volume (no spec.durability backup or dual mode: it starts empty)"
                };
                tracing::warn!(gateway = %gw.name_any(), pod = %name, reason = %why, "pod deleted to replace its volume");
                ctx.event(
                    gw,
                    EventType::Warning,
                    "VolumeReplaced",
                    format!("{name}: {why}; pod deleted so the StatefulSet recreates it with a new claim: {then}"),
                )
                .await;
            }
            // Gone already, or replaced since the read.
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Polls one pod (pushing its config when it runs another): what it runs, its archive and
/// DLQ, and the report for the Sinks and Sources.
async fn observe_pod(
    ctx: &Ctx,
    gw: &Gateway,
    pod: &Pod,
    desired: Option<&PodConfig>,
    access: &AdminAccess,
) -> (GatewayPodStatus, PodReport) {
    let mut report = PodReport::default();
    let mut st = GatewayPodStatus {
        name: pod.name_any(),
        uid: pod.uid(),
        pod_ip: pod.status.as_ref().and_then(|s| s.pod_ip.clone()),
        ready: pod_ready(pod),
        programmed: false,
        desired_hash: desired.map(|d| d.hash.clone()),
        ..Default::default()
    };
    let Some(target) = pod_target(pod, gw.spec.ports.admin, access) else {
        st.last_error = Some("not running".into());
        return (st, report);
    };
    let status = ctx.admin.status(&target).await;
    ctx.metrics.pod_call("status", &status);
    match status {
        Err(e) => st.last_error = Some(e.to_string()),
        Ok(s) => {
            report.failing = s.failing_sinks.clone();
            report.pen = s.quarantine.clone();
            (st.archive, st.dlq) = pod_archive_dlq(&s);
            pod_durability(&s, &mut st);
            st.config_hash = Some(s.config_hash.clone());
            st.restart_required = s.restart_required.clone();
            if let Some(e) = &s.last_reload_error {
                st.last_error = Some(format!("last reload refused: {}", e.message));
            }
            if let Some(d) = desired.filter(|d| d.hash != s.config_hash) {
                let r = ctx.admin.put_config(&target, &d.yaml).await;
                ctx.metrics.pod_call("put_config", &r);
                match r {
                    Ok(r) => {
                        tracing::info!(pod = %target.name, hash = %short(Some(&r.config_hash)), changed = r.changed, "config pushed");
                        st.config_hash = Some(r.config_hash);
                        st.restart_required = r.restart_required;
                        st.last_error = None;
                    }
                    Err(e) => {
                        tracing::warn!(pod = %target.name, error = %e, "config push failed");
                        st.last_error = Some(e.to_string());
                    }
                }
            }
        }
    }
    st.programmed = desired.is_some_and(|d| st.config_hash.as_deref() == Some(d.hash.as_str()));
    (st, report)
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
            let src = sources.iter().find(|s| render::source_id(s) == f.source)?;
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

fn blocked_status(gw: &Gateway, reason: &'static str, msg: &str) -> GatewayStatus {
    let old = gw.status.clone().unwrap_or_default();
    let now = now_rfc3339();
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
            &now,
        ),
        selector: Some(resources::selector_string(gw)),
        ..old
    }
}

/// The Gateway's status from what was rendered and what the pods report.
pub fn gateway_status(
    gw: &Gateway,
    rendered: &Rendered,
    pods: Vec<GatewayPodStatus>,
    storage_note: Option<String>,
    old: &GatewayStatus,
    now: &str,
) -> GatewayStatus {
    let desired = gw.spec.replicas;
    let replicas = pods.len() as i32;
    let ready = pods.iter().filter(|p| p.ready).count() as i32;
    let programmed = pods.iter().filter(|p| p.programmed).count() as i32;
    let pod_errors: Vec<String> = pods
        .iter()
        .filter(|p| p.last_error.as_deref().is_some_and(|e| e != "not running"))
        .map(|p| format!("{}: {}", p.name, p.last_error.clone().unwrap_or_default()))
        .collect();
    let restart: Vec<String> = pods
        .iter()
        .filter(|p| !p.restart_required.is_empty())
        .map(|p| format!("{} ({})", p.name, p.restart_required.join(", ")))
        .collect();
    let dlq_full: Vec<&str> = pods
        .iter()
        .filter(|p| p.dlq.as_ref().is_some_and(|d| d.full))
        .map(|p| p.name.as_str())
        .collect();
    let archive_failing: Vec<&str> = pods
        .iter()
        .filter(|p| {
            p.archive
                .as_ref()
                .is_some_and(|a| a.failures >= ARCHIVE_FAILING_AFTER)
        })
        .map(|p| p.name.as_str())
        .collect();
    let intake_down_pods: Vec<&str> = pods
        .iter()
        .filter(|p| intake_down(p))
        .map(|p| p.name.as_str())
        .collect();
    let backup_stale_pods: Vec<&str> = backup_interval_ms(gw)
        .map(|i| {
            pods.iter()
                .filter(|p| backup_stale(p, i))
                .map(|p| p.name.as_str())
                .collect()
        })
        .unwrap_or_default();
    let dual = gw
        .spec
        .durability
        .as_ref()
        .is_some_and(|d| d.mode == ankusa_crds::DurabilityMode::Dual);
    let all_good = rendered.error.is_none() && ready >= desired && programmed >= desired;
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
    let degraded = if let Some(e) = &rendered.error {
        (true, "InvalidConfig", e.clone())
    } else if !pod_errors.is_empty() {
        (true, "PodErrors", pod_errors.join("; "))
    } else if !intake_down_pods.is_empty() {
        (
            true,
            "IntakeDown",
            format!(
                "the intake log does not confirm publishes from {} (status.pods[].intakeState down): \
                 they answer new hooks 503 intake_unavailable until it is back",
                intake_down_pods.join(", ")
            ),
        )
    } else if !restart.is_empty() {
        (
            true,
            "RestartRequired",
            format!(
                "settings that apply only after a pod restart changed on {}",
                restart.join(", ")
            ),
        )
    } else if !dlq_full.is_empty() {
        (
            true,
            "DlqFull",
            format!(
                "the dead-letter queue of {} is over a spec.settings.queue.dlq bound with nothing archived to evict: \
                 new hooks get 503 dlq_full until the archive catches up (or replay or purge the DLQ)",
                dlq_full.join(", ")
            ),
        )
    } else if !archive_failing.is_empty() {
        (
            true,
            "ArchiveFailing",
            format!(
                "archive uploads keep failing on {} (status.pods[].archive.lastError); hooks wait on the pods' volumes",
                archive_failing.join(", ")
            ),
        )
    } else if !backup_stale_pods.is_empty() {
        let then = if dual {
            "a pod that loses its volume restores an older backup and replays the rest from the intake log"
        } else {
            "a pod that loses its volume now loses the hooks acked since its last backup"
        };
        (
            true,
            "BackupStale",
            format!(
                "backups of {} are older than {BACKUP_STALE_INTERVALS} × spec.durability.backup.intervalMs or failing \
                 (status.pods[].backupLastError): {then}",
                backup_stale_pods.join(", ")
            ),
        )
    } else if let Some(n) = storage_note {
        (true, "StorageChangeIgnored", n)
    } else {
        (false, "AsExpected", String::new())
    };
    GatewayStatus {
        observed_generation: gw.metadata.generation,
        conditions: conditions(
            &old.conditions,
            Conds {
                ready: ready_c,
                progressing,
                degraded,
            },
            gw.metadata.generation,
            now,
        ),
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

/// Least time between two Gateway status writes that change only delivery errors or the
/// pods' archive and DLQ counts (and between two Source status writes that change only
/// quarantine counts).
pub const DELIVERY_WRITE_EVERY: Duration = Duration::from_secs(20);

/// Failed archive uploads in a row on a pod that make the Gateway `Degraded`
/// (`ArchiveFailing`): one failure is retried with back-off and usually passes.
pub const ARCHIVE_FAILING_AFTER: i64 = 3;

fn delivery_write_key(gw: &Gateway) -> String {
    format!(
        "gateway-delivery/{}/{}",
        gw.namespace().unwrap_or_default(),
        gw.name_any()
    )
}

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

/// Whether a changed status is written now. Delivery errors change with every failed attempt
/// (the count, the text; a flaky receiver makes a pod's entry come and go), archive and DLQ
/// counts with every hook, and each write wakes this controller and the Sink controller
/// again: a status that differs only there is written at most every `DELIVERY_WRITE_EVERY`
/// (the first failure at once), the next poll after that catching up. Any other change is
/// written at once, with the counts as they are.
fn status_write_due(ctx: &Ctx, gw: &Gateway, old: &GatewayStatus, new: &GatewayStatus) -> bool {
    !same_status(&steady_part(old), &steady_part(new))
        || ctx
            .poll_due(&delivery_write_key(gw), DELIVERY_WRITE_EVERY)
            .is_none()
}

fn same_status(a: &GatewayStatus, b: &GatewayStatus) -> bool {
    same_conditions(&a.conditions, &b.conditions)
        && GatewayStatus {
            conditions: vec![],
            ..a.clone()
        } == GatewayStatus {
            conditions: vec![],
            ..b.clone()
        }
}

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
    let id = sr
        .map(|s| s.id.clone())
        .unwrap_or_else(|| render::source_id(src));
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

fn same_source_status(a: &SourceStatus, b: &SourceStatus) -> bool {
    same_conditions(&a.conditions, &b.conditions)
        && a.observed_generation == b.observed_generation
        && a.programmed == b.programmed
        && a.programmed_replicas == b.programmed_replicas
        && a.replicas == b.replicas
        && a.source_id == b.source_id
        && a.path == b.path
        && a.quarantine == b.quarantine
}

fn quarantine_write_key(src: &Source) -> String {
    format!(
        "source-quarantine/{}/{}",
        src.namespace().unwrap_or_default(),
        src.name_any()
    )
}

/// A Source status without its quarantine counts (kept: whether it has entries at all).
fn source_steady_part(st: &SourceStatus) -> SourceStatus {
    let mut st = st.clone();
    if let Some(q) = &mut st.quarantine {
        *q = SourceQuarantine {
            entries: q.entries.min(1),
            ..Default::default()
        };
    }
    st
}

/// Whether a changed Source status is written now: quarantine counts change with every forged
/// or mis-signed request and each write wakes the Gateway controller again, so a status that
/// differs only in them is written at most every `DELIVERY_WRITE_EVERY`; the first entry, the
/// last one leaving, and any other change at once.
fn source_write_due(ctx: &Ctx, src: &Source, old: &SourceStatus, new: &SourceStatus) -> bool {
    let key = quarantine_write_key(src);
    if new.quarantine.is_none() {
        ctx.forget_poll(&key);
    }
    !same_source_status(&source_steady_part(old), &source_steady_part(new))
        || ctx.poll_due(&key, DELIVERY_WRITE_EVERY).is_none()
}

async fn write_gateway_status(ctx: &Ctx, gw: &Gateway, mut status: GatewayStatus) -> Result<()> {
    status.ownership = None; // `ownership` writes it, under its own field manager
    let api: Api<Gateway> =
        Api::namespaced(ctx.client.clone(), &gw.namespace().unwrap_or_default());
    let body = json!({
        "apiVersion": "ankusa.dev/v1alpha1",
        "kind": "Gateway",
        "status": status,
    });
    api.patch_status(
        &gw.name_any(),
        &status_params(CONTROLLER),
        &Patch::Apply(&body),
    )
    .await?;
    Ok(())
}

fn cond<'a>(s: &'a [ankusa_crds::Condition], t: &str) -> Option<&'a ankusa_crds::Condition> {
    s.iter().find(|c| c.type_ == t)
}

async fn gateway_events(
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

fn short(h: Option<&str>) -> &str {
    h.map(|h| &h[..h.len().min(12)]).unwrap_or("")
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

async fn source_events(ctx: &Ctx, src: &Source, old: &SourceStatus, new: &SourceStatus) {
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
