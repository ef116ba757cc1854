//! The four controllers and the watches that wake them.
//!
//! Gateway reconciles are triggered by the Gateway, what it owns (StatefulSet, Services,
//! NetworkPolicy, the config Secret), its pods and volume claims (by label), its Sources, the
//! Sinks those use and those of its `spec.lifecycle`, and every Secret they (or the Gateway)
//! reference; the mappers read reflector stores of Sources, Sinks and Gateways kept by this
//! module.

pub mod gateway;
pub mod replay;
pub mod sink;
pub mod source;

use std::sync::Arc;

use ankusa_crds::names::{GATEWAY_LABEL, MANAGED_BY, MANAGED_BY_LABEL, USABLE, USABLE_LABEL};
use ankusa_crds::{Gateway, ReplayJob, Sink, Source};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};

use crate::context::Ctx;
use crate::render;
use crate::resources;

fn api<K>(ctx: &Ctx, ns: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    match ns {
        Some(ns) => Api::namespaced(ctx.client.clone(), ns),
        None => Api::all(ctx.client.clone()),
    }
}

/// A reflector store fed by its own watch.
fn store<K>(api: Api<K>) -> (Store<K>, impl std::future::Future<Output = ()>)
where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store();
    let drive = reflector(writer, watcher(api, watcher::Config::default()))
        .default_backoff()
        .touched_objects()
        .for_each(|_| futures::future::ready(()));
    (reader, drive)
}

use kube::runtime::reflector::reflector;

/// Gateways using a Sink: through the Sources that deliver to it, and those sending their
/// lifecycle events to it (`spec.lifecycle.sinks`).
pub fn gateways_of_sink(
    sink: &Sink,
    sources: &[Arc<Source>],
    gateways: &[Arc<Gateway>],
) -> Vec<ObjectRef<Gateway>> {
    let ns = sink.namespace().unwrap_or_default();
    let name = sink.name_any();
    let mut out: Vec<ObjectRef<Gateway>> = sources
        .iter()
        .filter(|s| s.namespace().as_deref() == Some(ns.as_str()))
        .filter(|s| s.spec.sinks.iter().any(|r| r.name == name))
        .map(|s| ObjectRef::new(&s.spec.gateway_ref.name).within(&ns))
        .collect();
    out.extend(
        gateways
            .iter()
            .filter(|g| g.namespace().as_deref() == Some(ns.as_str()))
            .filter(|g| render::lifecycle_sink_names(g).any(|n| n == name))
            .map(|g| ObjectRef::from_obj(g.as_ref())),
    );
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out.dedup();
    out
}

/// Gateways whose rendered config depends on a Secret.
pub fn gateways_of_secret(
    secret: &Secret,
    gateways: &[Arc<Gateway>],
    sources: &[Arc<Source>],
    sinks: &[Arc<Sink>],
) -> Vec<ObjectRef<Gateway>> {
    let ns = secret.namespace().unwrap_or_default();
    let name = secret.name_any();
    let mut out = Vec::new();
    // Owned (config Secret, generated admin token).
    for o in secret.owner_references() {
        if resources::is_gateway_ref(o) {
            out.push(ObjectRef::new(&o.name).within(&ns));
        }
    }
    let in_ns = |n: Option<String>| n.as_deref() == Some(ns.as_str());
    for g in gateways.iter().filter(|g| in_ns(g.namespace())) {
        if g.spec
            .admin_token_secret_ref
            .as_ref()
            .is_some_and(|r| r.name == name)
            || render::gateway_secret_names(g).any(|n| n == name)
        {
            out.push(ObjectRef::from_obj(g.as_ref()));
        }
    }
    for s in sources.iter().filter(|s| in_ns(s.namespace())) {
        if render::source_secret_names(s).any(|n| n == name) {
            out.push(ObjectRef::new(&s.spec.gateway_ref.name).within(&ns));
        }
    }
    for k in sinks.iter().filter(|k| in_ns(k.namespace())) {
        if render::sink_secret_names(k).any(|n| n == name) {
            out.extend(gateways_of_sink(k, sources, gateways));
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out.dedup();
    out
}

/// Runs every controller until `shutdown` resolves. `namespace` limits the watches.
pub async fn run(
    ctx: Arc<Ctx>,
    namespace: Option<String>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let ns = namespace.as_deref();
    let (sources, drive_sources) = store::<Source>(api(&ctx, ns));
    let (sinks, drive_sinks) = store::<Sink>(api(&ctx, ns));
    let (gateways, drive_gateways) = store::<Gateway>(api(&ctx, ns));
    let shutdown = futures::future::FutureExt::shared(Box::pin(shutdown));
    let wc = watcher::Config::default;
    let managed = || wc().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY}"));
    let usable = || wc().labels(&format!("{USABLE_LABEL}={USABLE}"));

    let gateway_ctl = {
        let (s1, s2, k1, g1, g2) = (
            sources.clone(),
            sources.clone(),
            sinks.clone(),
            gateways.clone(),
            gateways.clone(),
        );
        Controller::new(api::<Gateway>(&ctx, ns), wc())
            .owns(api::<StatefulSet>(&ctx, ns), managed())
            .owns(api::<Deployment>(&ctx, ns), managed())
            .owns(api::<Service>(&ctx, ns), managed())
            .owns(api::<NetworkPolicy>(&ctx, ns), managed())
            .watches(api::<Pod>(&ctx, ns), managed(), |p: Pod| {
                let ns = p.namespace()?;
                let gw = p.labels().get(GATEWAY_LABEL)?.clone();
                Some(ObjectRef::<Gateway>::new(&gw).within(&ns))
            })
            // A claim being deleted under its pod (the pod is then replaced, see
            // `resources::volume_lost`).
            .watches(
                api::<PersistentVolumeClaim>(&ctx, ns),
                managed(),
                |c: PersistentVolumeClaim| {
                    let ns = c.namespace()?;
                    let gw = c.labels().get(GATEWAY_LABEL)?.clone();
                    Some(ObjectRef::<Gateway>::new(&gw).within(&ns))
                },
            )
            .watches(api::<Source>(&ctx, ns), wc(), |s: Source| {
                Some(ObjectRef::<Gateway>::new(&s.spec.gateway_ref.name).within(&s.namespace()?))
            })
            .watches(api::<Sink>(&ctx, ns), wc(), move |k: Sink| {
                gateways_of_sink(&k, &s1.state(), &g2.state())
            })
            // Only Secrets that opted in, and the operator's own: not every Secret's data.
            .watches(api::<Secret>(&ctx, ns), usable(), {
                let (g1, s2, k1) = (g1.clone(), s2.clone(), k1.clone());
                move |sec: Secret| gateways_of_secret(&sec, &g1.state(), &s2.state(), &k1.state())
            })
            .watches(api::<Secret>(&ctx, ns), managed(), move |sec: Secret| {
                gateways_of_secret(&sec, &g1.state(), &s2.state(), &k1.state())
            })
            .graceful_shutdown_on(shutdown.clone())
            .run(gateway::reconcile, gateway::error_policy, ctx.clone())
            .for_each(|r| {
                if let Err(e) = r {
                    tracing::debug!(error = %e, "gateway controller");
                }
                futures::future::ready(())
            })
    };
    let source_ctl = Controller::new(api::<Source>(&ctx, ns), wc())
        .graceful_shutdown_on(shutdown.clone())
        .run(source::reconcile, source::error_policy, ctx.clone())
        .for_each(|_| futures::future::ready(()));
    let sink_ctl = {
        let k1 = sinks.clone();
        Controller::new(api::<Sink>(&ctx, ns), wc())
            .watches(api::<Source>(&ctx, ns), wc(), |s: Source| {
                let ns = s.namespace().unwrap_or_default();
                s.spec
                    .sinks
                    .iter()
                    .map(|r| ObjectRef::<Sink>::new(&r.name).within(&ns))
                    .collect::<Vec<_>>()
            })
            .watches(api::<Gateway>(&ctx, ns), wc(), move |g: Gateway| {
                let ns = g.namespace().unwrap_or_default();
                k1.state()
                    .iter()
                    .filter(|k| k.namespace().as_deref() == Some(ns.as_str()))
                    .map(|k| ObjectRef::from_obj(k.as_ref()))
                    .collect::<Vec<_>>()
            })
            .graceful_shutdown_on(shutdown.clone())
            .run(sink::reconcile, sink::error_policy, ctx.clone())
            .for_each(|_| futures::future::ready(()))
    };
    let replay_ctl = Controller::new(api::<ReplayJob>(&ctx, ns), wc())
        .graceful_shutdown_on(shutdown.clone())
        .run(replay::reconcile, replay::error_policy, ctx.clone())
        .for_each(|_| futures::future::ready(()));
    let stores = async {
        tokio::select! {
            _ = drive_sources => {}
            _ = drive_sinks => {}
            _ = drive_gateways => {}
            _ = shutdown.clone() => {}
        }
    };
    tokio::join!(gateway_ctl, source_ctl, sink_ctl, replay_ctl, stores);
}
