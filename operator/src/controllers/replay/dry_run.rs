//! A ReplayJob with `dryRun: true`: nothing is replayed. Every pod of the Gateway is asked
//! `POST /v1/sources/{id}/filters/test` over its own archive for the job's window (the request
//! built by `render::dry_run`), and the status sums what each sink of the Source would get
//! (`status::dry_run`). The run is read-only, so a pass that cannot reach every pod simply asks
//! them all again on the next one; it ends when every pod answered (`Succeeded`) or one
//! refused the request (`Failed`).
//!
//! `apply` writes the status this answers. May import: `admin`, `context`, crate `pods`,
//! `admin_tls`, `render::dry_run`, `resources`, `status::dry_run`, and the sibling
//! `controllers::replay::pods`.

use std::collections::BTreeSet;

use ankusa_crds::{Gateway, ReplayJob, ReplayJobStatus, Source};
use kube::ResourceExt;
use kube::api::{Api, ListParams};

use crate::admin::AdminError;
use crate::admin_tls::admin_access;
use crate::context::{Ctx, Result};
use crate::controllers::replay::pods::Fleet;
use crate::pods::gateway_pods;
use crate::render::dry_run::build_dry_run;
use crate::resources;
use crate::status::dry_run::{DryRunReport, PodAnswer, PodDryRun, dry_run_status};

/// Asks every pod once and answers the job's new status; `Err` of the inner result: the spec
/// is refused (the field and why) before any pod is asked.
pub async fn ask_pods(
    ctx: &Ctx,
    rj: &ReplayJob,
    gw: &Gateway,
    old: &ReplayJobStatus,
    job_id: &str,
    now: &str,
) -> Result<std::result::Result<ReplayJobStatus, String>> {
    let ns = rj.namespace().unwrap_or_default();
    let sources = Api::<Source>::namespaced(ctx.client.clone(), &ns)
        .list(&ListParams::default())
        .await?
        .items;
    let req = match build_dry_run(&rj.spec, &sources) {
        Ok(r) => r,
        Err(e) => return Ok(Err(e)),
    };
    let fleet = Fleet {
        access: admin_access(ctx, gw).await?,
        pods: gateway_pods(&ctx.client, gw).await?,
        gw,
    };
    let mut names: BTreeSet<String> = resources::pod_names(gw, gw.spec.replicas)
        .into_iter()
        .collect();
    names.extend(fleet.pods.iter().map(|p| p.name_any()));
    let asks = names.iter().map(|name| async {
        let Some(t) = fleet.target(name) else {
            return PodDryRun {
                pod: name.clone(),
                pod_uid: None,
                answer: PodAnswer::Waiting("pod not running".into()),
            };
        };
        let r = ctx.admin.filters_test(&t, &req.source_id, &req.body).await;
        ctx.metrics.pod_call("filters_test", &r);
        let answer = match r {
            Ok(v) => PodAnswer::Counted(v),
            // Not there yet (a pod still loading the Source) or busy: asked again next pass.
            Err(
                e @ AdminError::Http {
                    status: 404 | 429, ..
                },
            ) => PodAnswer::Waiting(e.to_string()),
            Err(e @ AdminError::Http { status, .. }) if (400..500).contains(&status) => {
                PodAnswer::Refused(e.to_string())
            }
            Err(e) => PodAnswer::Waiting(e.to_string()),
        };
        PodDryRun {
            pod: name.clone(),
            pod_uid: Some(t.uid.clone()),
            answer,
        }
    });
    let pods = futures::future::join_all(asks).await;
    let request = serde_json::json!({
        "path": format!("/v1/sources/{}/filters/test", req.source_id),
        "body": req.body,
    });
    let report = DryRunReport {
        job_id,
        request,
        sink_names: &req.sink_names,
        pods,
    };
    Ok(Ok(dry_run_status(old, report, rj.metadata.generation, now)))
}
