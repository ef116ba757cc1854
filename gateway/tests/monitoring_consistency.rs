//! The monitoring files against the running code (deploy/monitoring, docs/runbooks):
//!
//! - every metric an alert rule or a dashboard panel uses is served by a real gateway that has
//!   done some work: a sink that never answers in time (attempts cut at the attempt timeout,
//!   retries, an open breaker, rows dead-lettered at a short retry horizon), the intake log (`wal.type: dual`, JetStream on 127.0.0.1:4222),
//!   a quarantine pen filled to its cap, a connection refused at `max_connections`, a refused
//!   unknown source. The scrape is made with a token holding only `metrics:read`. Metrics only
//!   the operator exports (`ankusa_operator_*`) are checked against operator/src/metrics.rs.
//! - every alert has a `runbook_url` to an existing docs/runbooks page that names it, every
//!   runbook page names only alerts that exist, and the alerts table of docs/operations.md
//!   lists exactly the alerts.
//!
//! `a_metric_the_code_does_not_serve_is_caught` shows the check fails on a made-up name. The
//! chart renders the rules (with its threshold values) and the dashboard only when asked.

mod common;
mod monitoring_support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use common::receiver::{Receiver, Reply};
use common::*;
use monitoring_support::*;

const ROOT: &str = "root-token-0123456789";
const SCRAPE: &str = "scrape-token-0123456789";
const SINK_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const SOURCE_SECRET: &str = "the-source-has-this-one";
const MAX_CONNECTIONS: usize = 8;

/// Labelled counters whose series exist only once their event has happened and that this test
/// does not bring about: a failed store write (it needs a failing volume), a sink's permanent
/// configuration failure (a refused credential of a cloud sink). For these the name must be
/// registered by the gateway's code instead.
const ONLY_AFTER_THEIR_EVENT: [&str; 2] = [
    "ankusa_store_write_failures_total",
    "ankusa_dispatch_config_errors_total",
];

/// `(where, metric)` for every metric name a rule or a dashboard panel uses.
fn used_metrics() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for r in rules() {
        let name = r.alert.or(r.record).unwrap_or_default();
        for m in metric_names(&r.expr) {
            out.push((format!("rule {name}"), m));
        }
    }
    for (title, expr) in dashboard_targets() {
        for m in metric_names(&expr) {
            out.push((format!("dashboard panel \"{title}\""), m));
        }
    }
    out
}

/// The names used that neither the scrape nor the operator's source has.
fn missing(used: &[(String, String)], scraped: &BTreeSet<String>) -> Vec<String> {
    let operator = registered_in("operator/src/metrics.rs");
    let gateway = registered_in("gateway/src");
    let mut problems = Vec::new();
    for (at, m) in used {
        let ok = if m.starts_with("ankusa_operator_") {
            let base = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| m.strip_suffix(s))
                .unwrap_or(m);
            operator.contains(m) || operator.contains(base)
        } else if ONLY_AFTER_THEIR_EVENT.contains(&m.as_str()) {
            gateway.contains(m)
        } else {
            scraped.contains(m)
        };
        if !ok {
            problems.push(format!("{at} uses `{m}`, which is not served"));
        }
    }
    problems
}

fn report(what: &str, problems: &[String]) {
    assert!(
        problems.is_empty(),
        "{what}: {} problem(s):\n  - {}",
        problems.len(),
        problems.join("\n  - ")
    );
}

async fn create_stream(name: &str, subject: &str) {
    let client = async_nats::connect("nats://127.0.0.1:4222")
        .await
        .expect("NATS on 127.0.0.1:4222 (tests/brokers/start.sh)");
    let js = async_nats::jetstream::new(client);
    js.get_or_create_stream(async_nats::jetstream::stream::Config {
        name: name.into(),
        subjects: vec![format!("{subject}.>")],
        ..Default::default()
    })
    .await
    .expect("stream");
}

/// A gateway that has done the work the rules and the dashboard look at; its scrape, read
/// with the `metrics:read` token.
async fn busy_gateway_scrape() -> String {
    // Every attempt is cut at the attempt timeout (a transient failure).
    let failing =
        Receiver::start(|_, _| Reply::status(500).delay(Duration::from_millis(400))).await;
    let suffix = format!("{}_{}", std::process::id(), fastrand::u32(..));
    let subject = format!("mon_{suffix}");
    create_stream(&format!("MON_{suffix}"), &subject).await;
    let config = format!(
        r#"
egress: {{allow_http: true, allow_loopback: true}}
http: {{connections: {{max_connections: {MAX_CONNECTIONS}}}}}
dispatch: {{attempt_timeout_ms: 100, breaker_failures: 2, breaker_open_ms: 100, breaker_max_open_ms: 200}}
wal: {{type: dual}}
intake:
  jetstream: {{servers: ["nats://127.0.0.1:4222"], subject: {subject}}}
quarantine: {{burst: 100000, rate: 100000, max_bytes: 3000}}
admin:
  tokens:
    - {{token: {ROOT}, scopes: ["*"]}}
    - {{token: {SCRAPE}, scopes: ["metrics:read"]}}
sources:
  s:
    retry: {{base_ms: 20, max_ms: 50, max_elapsed_ms: 600, jitter: false}}
    sinks:
      - type: http
        url: {url}
        secret: {SINK_SECRET}
  gh:
    verify: {{type: github, secret: "{SOURCE_SECRET}"}}
    on_verify_failure: quarantine
    sinks:
      - type: http
        url: {url}
        secret: {SINK_SECRET}
"#,
        url = failing.url("/in"),
    );
    let g = Gateway::start(&config);
    let c = client();

    // Hooks to the failing sink, one unknown source, hooks the source cannot verify until the
    // pen is full.
    post_ids(&c, &g, "/webhooks/s", 5, |i| format!("{{\"i\":{i}}}")).await;
    let r = c.post(g.url("/webhooks/nowhere")).body("{}").send().await;
    assert_eq!(r.unwrap().status().as_u16(), 404);
    let mut full = false;
    for i in 0..200 {
        let body = format!("{{\"n\":{i},\"pad\":\"{}\"}}", "x".repeat(200));
        let r = c
            .post(g.url("/webhooks/gh"))
            .header("content-type", "application/json")
            .header("x-github-event", "push")
            .header("x-github-delivery", format!("d-{i}"))
            .header(
                "x-hub-signature-256",
                github_signature("another-secret", body.as_bytes()),
            )
            .body(body)
            .send()
            .await
            .expect("post");
        if r.status().as_u16() == 503 {
            full = true;
            break;
        }
    }
    assert!(full, "the pen never filled:\n{}", g.log_tail());

    // A connection refused at max_connections.
    let mut held = Vec::new();
    for _ in 0..MAX_CONNECTIONS {
        held.push(tokio::net::TcpStream::connect(g.ingest).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _refused = tokio::net::TcpStream::connect(g.ingest).await;
    tokio::time::sleep(Duration::from_millis(300)).await;

    // A DLQ row (the horizon is 600 ms).
    let deadline = Instant::now() + Duration::from_secs(30);
    let text = loop {
        let text = g.metrics_as(&c, SCRAPE).await;
        if metric(&text, "ankusa_dlq_rows ") >= 1.0 {
            break text;
        }
        assert!(
            Instant::now() < deadline,
            "no DLQ row within 30 s:\n{text}\n{}",
            g.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    drop(held);

    // The scrape token reads metrics only; /metrics needs a token.
    let r = c.get(g.admin_url("/metrics")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let r = c
        .get(g.admin_url("/v1/status"))
        .bearer_auth(SCRAPE)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    assert_eq!(
        r.json::<serde_json::Value>().await.unwrap()["scope"],
        "config:read"
    );
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_of_the_rules_and_the_dashboard_is_served() {
    let text = busy_gateway_scrape().await;
    // The gauges this issue added are there with sensible values.
    assert_eq!(metric(&text, "ankusa_ready "), 1.0, "{text}");
    let (free, size) = (
        metric(&text, "ankusa_store_volume_free_bytes "),
        metric(&text, "ankusa_store_volume_size_bytes "),
    );
    assert!(size > 0.0 && free > 0.0 && free <= size, "{free} / {size}");

    let used = used_metrics();
    assert!(used.len() >= 60, "only {} uses found", used.len());
    let scraped = scraped_names(&text);
    report(
        "metrics of deploy/monitoring not served by a running gateway",
        &missing(&used, &scraped),
    );

    // It does fail: a rule naming a metric that does not exist is reported.
    let made_up = vec![(
        "rule Made".to_string(),
        "ankusa_dlq_rows_that_do_not_exist".to_string(),
    )];
    assert_eq!(missing(&made_up, &scraped).len(), 1);
}

#[test]
fn a_metric_the_code_does_not_serve_is_caught() {
    let names = metric_names(
        r#"sum by (sink) (rate(ankusa_made_up_total{result="ankusa_not_a_metric"}[5m])) / ankusa_x_bucket > 0"#,
    );
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        ["ankusa_made_up_total", "ankusa_x_bucket"]
    );
    let used = vec![
        ("rule A".to_string(), "ankusa_made_up_total".to_string()),
        ("rule B".to_string(), "ankusa_operator_made_up".to_string()),
        ("rule C".to_string(), "ankusa_dlq_rows".to_string()),
    ];
    let scraped: BTreeSet<String> = ["ankusa_dlq_rows".to_string()].into();
    let problems = missing(&used, &scraped);
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[0].contains("ankusa_made_up_total"));
    assert!(problems[1].contains("ankusa_operator_made_up"));
}

/// `Ankusa<Name>` words of a text.
fn alert_names_in(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (at, _) in text.match_indices("Ankusa") {
        let word: String = text[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        if word.len() > 6 && word[6..].starts_with(|c: char| c.is_ascii_uppercase()) {
            out.insert(word);
        }
    }
    out
}

#[test]
fn every_alert_has_a_runbook_that_names_it_and_runbooks_name_only_alerts() {
    let alerts: BTreeMap<String, String> = rules()
        .into_iter()
        .filter_map(|r| {
            let url = r
                .annotations
                .get("runbook_url")
                .cloned()
                .unwrap_or_default();
            r.alert.map(|a| (a, url))
        })
        .collect();
    assert!(alerts.len() >= 29, "{} alerts", alerts.len());
    let dir = root().join("docs/runbooks");
    let pages: BTreeMap<String, String> = std::fs::read_dir(&dir)
        .expect("docs/runbooks")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".md"))
        .map(|n| {
            let text = read(&format!("docs/runbooks/{n}"));
            (n, text)
        })
        .collect();
    let mut problems = Vec::new();
    let mut named = BTreeSet::new();
    for (alert, url) in &alerts {
        let page = url
            .split('#')
            .next()
            .and_then(|u| u.rsplit_once("/docs/runbooks/"))
            .map(|(_, p)| p.to_string());
        match page {
            None => problems.push(format!(
                "{alert}: runbook_url `{url}` does not point into docs/runbooks/"
            )),
            Some(p) if !pages.contains_key(&p) || p == "README.md" => problems.push(format!(
                "{alert}: runbook_url `{url}` names no runbook page (docs/runbooks/{p})"
            )),
            Some(p) if !alert_names_in(&pages[&p]).contains(alert) => problems.push(format!(
                "{alert}: its runbook docs/runbooks/{p} does not name it"
            )),
            Some(_) => {}
        }
    }
    for (page, text) in &pages {
        for a in alert_names_in(text) {
            if !alerts.contains_key(&a) {
                problems.push(format!(
                    "docs/runbooks/{page} names `{a}`, which is no alert"
                ));
            }
            named.insert(a);
        }
    }
    for a in alerts.keys() {
        if !named.contains(a) {
            problems.push(format!("{a} is named by no runbook page"));
        }
    }
    // The alerts table of docs/operations.md lists exactly the alerts.
    let ops = alert_names_in(&read("docs/operations.md"));
    for a in alerts.keys().filter(|a| !ops.contains(*a)) {
        problems.push(format!(
            "{a} is missing from the alerts table of docs/operations.md"
        ));
    }
    for a in ops.iter().filter(|a| !alerts.contains_key(*a)) {
        problems.push(format!("docs/operations.md names `{a}`, which is no alert"));
    }
    report("alerts and runbooks", &problems);
}

/// helm from charts/fetch-helm.sh (`$ANKUSA_HELM`, else its cache), if it is there.
fn helm() -> Option<std::path::PathBuf> {
    let p = std::env::var_os("ANKUSA_HELM")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|h| std::path::Path::new(&h).join(".cache/ankusa/helm/helm"))
        })?;
    p.exists().then_some(p)
}

fn helm_template(helm: &std::path::Path, sets: &[&str]) -> Vec<serde_yaml_ng::Value> {
    let mut cmd = std::process::Command::new(helm);
    cmd.arg("template")
        .arg("ankusa")
        .arg(root().join("charts/ankusa"));
    for s in sets {
        cmd.arg("--set").arg(s);
    }
    let out = cmd.output().expect("run helm");
    assert!(
        out.status.success(),
        "helm template: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .split("\n---")
        .filter_map(|d| serde_yaml_ng::from_str::<serde_yaml_ng::Value>(d).ok())
        .filter(|v| v.get("kind").is_some())
        .collect()
}

#[test]
fn the_chart_renders_the_rules_and_the_dashboard_only_when_asked_with_its_values() {
    let Some(helm) = helm() else {
        let msg = "helm is missing: run charts/fetch-helm.sh";
        assert!(
            std::env::var("ANKUSA_REQUIRE_CONTROL_PLANE").as_deref() != Ok("1"),
            "{msg}"
        );
        eprintln!("SKIPPED: {msg}");
        return;
    };
    // The chart's objects of `kind` whose name ends with `suffix`.
    let kind = |docs: &[serde_yaml_ng::Value], kind: &str, suffix: &str| {
        docs.iter()
            .find(|d| {
                d["kind"].as_str() == Some(kind)
                    && d["metadata"]["name"]
                        .as_str()
                        .is_some_and(|n| n.ends_with(suffix))
            })
            .cloned()
    };
    let off = helm_template(&helm, &[]);
    assert!(kind(&off, "PrometheusRule", "-rules").is_none());
    assert!(kind(&off, "ConfigMap", "-dashboard").is_none());

    let on = helm_template(
        &helm,
        &[
            "monitoring.rules.enabled=true",
            "monitoring.rules.labels.release=kps",
            "monitoring.rules.thresholds.backlogOldestDueSeconds=900",
            "monitoring.dashboard.enabled=true",
            "monitoring.dashboard.labelValue=yes",
        ],
    );
    let rule = kind(&on, "PrometheusRule", "-rules").expect("a PrometheusRule");
    assert_eq!(
        rule["apiVersion"].as_str(),
        Some("monitoring.coreos.com/v1")
    );
    assert_eq!(rule["metadata"]["labels"]["release"].as_str(), Some("kps"));
    let rendered: Vec<&serde_yaml_ng::Value> = rule["spec"]["groups"]
        .as_sequence()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_sequence().into_iter().flatten())
        .collect();
    assert_eq!(rendered.len(), rules().len());
    let stale = rendered
        .iter()
        .find(|r| r["alert"].as_str() == Some("AnkusaBacklogStale"))
        .expect("AnkusaBacklogStale");
    assert!(
        stale["expr"].as_str().unwrap_or_default().contains("> 900"),
        "{stale:?}"
    );
    assert!(alert("AnkusaBacklogStale").expr.contains("> 300"));

    let cm = kind(&on, "ConfigMap", "-dashboard").expect("the dashboard ConfigMap");
    assert_eq!(
        cm["metadata"]["labels"]["grafana_dashboard"].as_str(),
        Some("yes")
    );
    let json = cm["data"]["ankusa-dashboard.json"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(
        json.trim_end(),
        read("deploy/monitoring/ankusa-dashboard.json").trim_end()
    );
}
