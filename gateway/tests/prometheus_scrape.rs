//! A real Prometheus (Debian's `prometheus`, /usr/bin/prometheus) scrapes a running gateway
//! through the configuration docs/operations.md documents for a Prometheus without the
//! operator (HTTPS with the gateway's CA and `server_name`, a `credentials_file` holding a
//! `metrics:read`-only token), and evaluates `AnkusaDlqGrowing` with the expression of
//! deploy/monitoring/ankusa-rules.yaml (its `for` shortened): the target is up, and the alert
//! fires once the test makes the DLQ grow.
//!
//! Without /usr/bin/prometheus the test fails when `ANKUSA_REQUIRE_CONTROL_PLANE=1` (set by
//! scripts/test) and is skipped with a message otherwise (deploy/monitoring/install-promtool.sh
//! installs it).

mod common;
mod monitoring_support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ankusa_testkit::pki::Ca;
use common::receiver::{Receiver, Reply};
use common::*;
use monitoring_support::*;
use serde_json::Value;

const PROMETHEUS: &str = "/usr/bin/prometheus";
const ROOT: &str = "root-token-0123456789";
const SCRAPE: &str = "scrape-token-0123456789";
const SINK_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// A Prometheus process, killed (and waited for) on drop.
struct Prometheus {
    child: Child,
    url: String,
    log: PathBuf,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    fn log_tail(&self) -> String {
        let s = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    async fn api(&self, c: &reqwest::Client, path: &str) -> Option<Value> {
        let r = c.get(format!("{}{path}", self.url)).send().await.ok()?;
        r.json().await.ok()
    }
}

/// The first ```yaml block of `### Prometheus without the operator` in docs/operations.md.
fn documented_scrape_config() -> String {
    let doc = read("docs/operations.md");
    let at = doc
        .find("### Prometheus without the operator")
        .expect("docs/operations.md: `### Prometheus without the operator`");
    let rest = &doc[at..];
    let blocks: Vec<&str> = rest.split("```yaml\n").skip(1).collect();
    // The first block is the admin token example; the second is the scrape configuration.
    let block = blocks
        .iter()
        .find(|b| b.starts_with("global:"))
        .expect("a ```yaml block starting with `global:`");
    block.split("```").next().unwrap_or_default().to_string()
}

/// `text` with `from` replaced by `to`; `from` must be there (the doc and the test move
/// together).
fn swap(text: &str, from: &str, to: &str) -> String {
    assert!(
        text.contains(from),
        "the documented scrape config no longer holds `{from}`:\n{text}"
    );
    text.replace(from, to)
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write");
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_prometheus_scrapes_with_the_documented_config_and_the_dlq_alert_fires() {
    if !Path::new(PROMETHEUS).exists() {
        let msg = format!(
            "{PROMETHEUS} is missing: install Debian's prometheus (deploy/monitoring/install-promtool.sh)"
        );
        assert!(
            std::env::var("ANKUSA_REQUIRE_CONTROL_PLANE").as_deref() != Ok("1"),
            "{msg}"
        );
        eprintln!("SKIPPED: {msg}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();

    // The gateway: HTTPS admin API (a CA of the test's, a certificate for the pods' name),
    // a scrape token with `metrics:read` only, a sink that always fails and a short horizon.
    let server_name = "webhooks-pods.ankusa-test.svc";
    let ca = Ca::new("admin CA");
    let pair = ca.server(&[server_name], false);
    let cert_file = write(dir.path(), "tls.crt", &pair.cert);
    let key_file = write(dir.path(), "tls.key", &pair.key);
    let ca_file = write(dir.path(), "ca.crt", &ca.pem);
    let token_file = write(dir.path(), "token", SCRAPE);
    let failing = Receiver::start(|_, _| Reply::status(500)).await;
    let config = format!(
        r#"
egress: {{allow_http: true, allow_loopback: true}}
dispatch: {{breaker_failures: 0}}
admin:
  tokens:
    - {{token: {ROOT}, scopes: ["*"]}}
    - {{token: {SCRAPE}, scopes: ["metrics:read"]}}
sources:
  s:
    retry: {{base_ms: 20, max_ms: 50, max_elapsed_ms: 300, jitter: false}}
    sinks:
      - type: http
        url: {url}
        secret: {SINK_SECRET}
"#,
        url = failing.url("/in"),
    );
    let g = Gateway::start_with(
        &config,
        &[
            ("ANKUSA_ADMIN_TLS_CERT_FILE", &path_str(&cert_file)),
            ("ANKUSA_ADMIN_TLS_KEY_FILE", &path_str(&key_file)),
        ],
    );

    // The rule as the rules file has it, `for` shortened.
    let rule = alert("AnkusaDlqGrowing");
    let rules_file = write(
        dir.path(),
        "rules.yaml",
        &serde_yaml_ng::to_string(&serde_json::json!({
            "groups": [{
                "name": "ankusa-dlq",
                "rules": [{
                    "alert": "AnkusaDlqGrowing",
                    "expr": rule.expr,
                    "for": "2s",
                    "labels": rule.labels,
                    "annotations": rule.annotations,
                }],
            }],
        }))
        .unwrap(),
    );

    // The documented config, with this test's paths, address and intervals.
    let mut prom_config = documented_scrape_config();
    for (from, to) in [
        ("30s", "1s".to_string()),
        (
            "/etc/prometheus/rules/ankusa-rules.yaml",
            path_str(&rules_file),
        ),
        ("/etc/prometheus/ankusa/ca.crt", path_str(&ca_file)),
        ("/etc/prometheus/ankusa/token", path_str(&token_file)),
        ("webhooks-pods.default.svc", server_name.to_string()),
        ("10.0.0.5:4002", g.admin.to_string()),
    ] {
        prom_config = swap(&prom_config, from, &to);
    }
    let config_file = write(dir.path(), "prometheus.yml", &prom_config);

    let port = free_port();
    let log = dir.path().join("prometheus.log");
    let out = std::fs::File::create(&log).unwrap();
    let child = Command::new(PROMETHEUS)
        .arg(format!("--config.file={}", path_str(&config_file)))
        .arg(format!(
            "--storage.tsdb.path={}",
            path_str(&dir.path().join("tsdb"))
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::from(out.try_clone().unwrap()))
        .stderr(Stdio::from(out))
        .spawn()
        .expect("start prometheus");
    let prom = Prometheus {
        child,
        url: format!("http://127.0.0.1:{port}"),
        log,
    };
    let c = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .no_proxy()
        .build()
        .unwrap();

    // The target is up: TLS verified against the CA by server_name, the token accepted.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let t = prom.api(&c, "/api/v1/targets").await;
        let target = t.as_ref().map(|t| t["data"]["activeTargets"][0].clone());
        if let Some(t) = &target
            && t["health"] == "up"
        {
            assert_eq!(t["labels"]["job"], "ankusa", "{t}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "target not up within 60 s: {target:?}\n{}",
            prom.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let q = prom
        .api(&c, "/api/v1/query?query=ankusa_ready")
        .await
        .expect("query");
    assert_eq!(q["data"]["result"][0]["value"][1], "1", "{q}");
    let alerts = prom.api(&c, "/api/v1/alerts").await.expect("alerts");
    assert_eq!(alerts["data"]["alerts"], serde_json::json!([]), "{alerts}");

    // The DLQ grows: hooks to the failing sink reach their horizon.
    let ingest = client();
    post_ids(&ingest, &g, "/webhooks/s", 3, |i| format!("{{\"i\":{i}}}")).await;
    let deadline = Instant::now() + Duration::from_secs(120);
    let firing = loop {
        let a = prom.api(&c, "/api/v1/alerts").await;
        let found = a.as_ref().and_then(|a| {
            a["data"]["alerts"]
                .as_array()?
                .iter()
                .find(|x| x["labels"]["alertname"] == "AnkusaDlqGrowing" && x["state"] == "firing")
                .cloned()
        });
        if let Some(f) = found {
            break f;
        }
        assert!(
            Instant::now() < deadline,
            "AnkusaDlqGrowing not firing within 120 s: {a:?}\n{}",
            prom.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(firing["labels"]["severity"], "warning", "{firing}");
    assert_eq!(firing["labels"]["job"], "ankusa", "{firing}");
    assert!(
        firing["annotations"]["runbook_url"]
            .as_str()
            .is_some_and(|u| u.ends_with("docs/runbooks/dlq.md")),
        "{firing}"
    );
    drop(prom);
}
