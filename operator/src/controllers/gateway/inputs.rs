//! Stage 2 of the Gateway reconcile: everything the render and the rest read. The Sources and
//! Sinks of the namespace; the Secrets the Gateway, its Sources and their Sinks reference
//! (only those labelled `ankusa.dev/usable`: the label is read before the data, so a Secret
//! that did not opt in is never fetched); the config the pods last received (the config
//! Secret's files, for the render's fallback); the render; the Gateway's pods and, from both,
//! the config each pod should run.
//!
//! May import: `context`, `pods`, `render`, `resources`, and `guard` (what it read).

use std::collections::{BTreeMap, BTreeSet};

use ankusa_crds::names::{USABLE, USABLE_LABEL};
use ankusa_crds::{Gateway, Sink, Source};
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::ResourceExt;
use kube::api::{Api, ListParams};

use crate::context::{Ctx, Result};
use crate::controllers::gateway::guard::Admitted;
use crate::pods::{direct_pods_of, gateway_pods_of};
use crate::render::{
    self, Inputs, PodConfig, Rendered, SecretValues, desired_configs, parse_rendered,
    referenced_secrets,
};
use crate::resources;

/// What the later stages read.
pub struct Loaded {
    /// The Sources of the namespace (each stage picks the Gateway's own).
    pub sources: Vec<Source>,
    pub rendered: Rendered,
    /// The config Secret's files as read (by key `<pod>.yaml`).
    pub existing_files: BTreeMap<String, String>,
    /// The Gateway's pods (`crate::pods`), by name.
    pub pods: Vec<Pod>,
    /// The config each pod should run, by pod name.
    pub desired: BTreeMap<String, PodConfig>,
    /// The config Secret's files as they should be (`<pod>.yaml` per ordinal, or a direct
    /// Gateway's one shared `<gateway>.yaml`).
    pub files: BTreeMap<String, String>,
}

pub async fn load(ctx: &Ctx, gw: &Gateway, admitted: &Admitted) -> Result<Loaded> {
    let ns = admitted.ns.as_str();
    let sources = Api::<Source>::namespaced(ctx.client.clone(), ns)
        .list(&ListParams::default())
        .await?
        .items;
    let sinks = Api::<Sink>::namespaced(ctx.client.clone(), ns)
        .list(&ListParams::default())
        .await?
        .items;
    let secrets = fetch_secrets(ctx, ns, &referenced_secrets(gw, &sources, &sinks)).await?;
    let existing_files = secret_files(admitted.config_secret.as_ref());
    let previous = existing_files
        .values()
        .next()
        .and_then(|y| parse_rendered(y));
    let rendered = render::render(&Inputs {
        gateway: gw,
        sources: &sources,
        sinks: &sinks,
        secrets: &secrets,
        admin_token: &admitted.access.token,
        scrape_token: Some(&admitted.scrape_token),
        previous: previous.as_ref(),
    });
    let (pods, desired, files) = if gw.is_direct() {
        let pods = direct_pods_of(&ctx.client, gw, admitted.deployment.as_ref()).await?;
        let (desired, files) = direct_configs(gw, &rendered, &pods, &existing_files);
        (pods, desired, files)
    } else {
        let pods = gateway_pods_of(&ctx.client, gw, admitted.statefulset.as_ref()).await?;
        let (desired, files) = ordinal_configs(gw, &rendered, &pods, &existing_files);
        (pods, desired, files)
    };
    Ok(Loaded {
        sources,
        rendered,
        existing_files,
        pods,
        desired,
        files,
    })
}

/// The config of each ordinal up to the larger of `spec.replicas` and the pods that exist (a
/// scale-down's pods keep theirs while they drain), and the config Secret's file per pod.
fn ordinal_configs(
    gw: &Gateway,
    rendered: &Rendered,
    pods: &[Pod],
    existing: &BTreeMap<String, String>,
) -> (BTreeMap<String, PodConfig>, BTreeMap<String, String>) {
    let ordinals = pods
        .iter()
        .filter_map(|p| resources::ordinal(gw, &p.name_any()))
        .max()
        .map_or(0, |o| o + 1);
    let pod_names = resources::pod_names(gw, gw.spec.replicas.max(ordinals));
    let desired = desired_configs(rendered, &pod_names, existing);
    let files = desired
        .iter()
        .map(|(p, c)| (resources::config_key(p), c.yaml.clone()))
        .collect();
    (desired, files)
}

/// A direct Gateway's one config (`<gateway>.yaml`, `node.instance` set per pod from its
/// name by the environment, which the reported hash does not cover) and, for each pod, that
/// config as what it should run.
fn direct_configs(
    gw: &Gateway,
    rendered: &Rendered,
    pods: &[Pod],
    existing: &BTreeMap<String, String>,
) -> (BTreeMap<String, PodConfig>, BTreeMap<String, String>) {
    let name = gw.name_any();
    let Some(shared) =
        desired_configs(rendered, std::slice::from_ref(&name), existing).remove(&name)
    else {
        return Default::default();
    };
    let desired = pods
        .iter()
        .map(|p| (p.name_any(), shared.clone()))
        .collect();
    let files = BTreeMap::from([(resources::config_key(&name), shared.yaml)]);
    (desired, files)
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
