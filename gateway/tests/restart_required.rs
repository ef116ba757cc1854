//! A hot reload that changes keys the running process reads only at start (`wal`, `intake`,
//! `storage`, ...) applies the rest and reports them, through the real binary: in the reload's
//! answer and `GET /v1/status` (`restart_required`), a warning naming them, and the gauge
//! `ankusa_config_restart_required`; the running values stay (no intake log is started). A
//! reload that puts them back clears all three.

mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

/// A disk-WAL gateway with one source; `extra` adds top-level sections, `more_sources` sources.
fn config(extra: &str, more_sources: &str) -> String {
    format!("{extra}sources:\n  first:\n    sinks: [{{type: log}}]\n{more_sources}")
}

async fn reload(c: &reqwest::Client, g: &Gateway) -> Value {
    let r = c
        .post(g.admin_url("/v1/config/reload"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    r.json().await.unwrap()
}

/// Waits until `/v1/status` lists `source` (the file watcher may reload before the POST does).
async fn wait_source(c: &reqwest::Client, g: &Gateway, source: &str, present: bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let st = g.admin_json(c, "/v1/status").await;
        let has = st["sources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s == source);
        if has == present {
            return st;
        }
        assert!(Instant::now() < deadline, "{st}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_of_restart_pinned_keys_reports_them_and_keeps_the_running_values() {
    let c = client();
    let g = Gateway::start(&config("", ""));
    let st = g.admin_json(&c, "/v1/status").await;
    assert_eq!(st["restart_required"], serde_json::json!([]), "{st}");
    assert_eq!(
        metric(&g.metrics(&c).await, "ankusa_config_restart_required "),
        0.0
    );

    // wal → dual with an intake log (a closed loopback port: nothing may connect to it),
    // an archive, and a new source (which applies at once).
    let closed = free_port();
    let archive = path_str(&g.dir.path().join("archive"));
    let pinned = format!(
        "wal: {{type: dual}}\n\
         intake:\n  kafka: {{brokers: [\"127.0.0.1:{closed}\"], topic: ankusa-intake}}\n\
         storage: {{type: local, local: {{dir: \"{archive}\"}}}}\n"
    );
    g.write_config(&config(&pinned, "  second:\n    sinks: [{type: log}]\n"));
    let r = reload(&c, &g).await;
    assert_eq!(
        r["restart_required"],
        serde_json::json!(["wal", "intake", "storage"]),
        "{r}"
    );
    let st = wait_source(&c, &g, "second", true).await;
    assert_eq!(st["restart_required"], r["restart_required"], "{st}");
    // The running values stay: no intake log, no archive.
    assert!(st.get("intake").is_none_or(Value::is_null), "{st}");
    assert!(st.get("archive").is_none_or(Value::is_null), "{st}");
    let wal = g.admin_json(&c, "/v1/wal").await;
    assert!(wal.get("intake").is_none_or(Value::is_null), "{wal}");
    assert_eq!(
        metric(&g.metrics(&c).await, "ankusa_config_restart_required "),
        1.0
    );
    let log = g.log();
    let warned = log.lines().any(|l| {
        l.contains("WARN")
            && l.contains("only a restart applies")
            && l.contains("wal, intake, storage")
    });
    assert!(warned, "a warning names the keys:\n{}", g.log_tail());
    // Hooks are still taken, under the running (disk) WAL.
    let r = c
        .post(g.url("/webhooks/second"))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);

    // Back to the start values (the new source kept): nothing waits for a restart.
    g.write_config(&config("", "  second:\n    sinks: [{type: log}]\n"));
    let r = reload(&c, &g).await;
    assert_eq!(r["restart_required"], serde_json::json!([]), "{r}");
    let st = g.admin_json(&c, "/v1/status").await;
    assert_eq!(st["restart_required"], serde_json::json!([]), "{st}");
    assert_eq!(
        metric(&g.metrics(&c).await, "ankusa_config_restart_required "),
        0.0
    );
}
