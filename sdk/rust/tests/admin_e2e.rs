//! The admin client against a REAL gateway (`$ANKUSA_BIN`, default
//! `$HOME/.cache/ankusa/target/debug/ankusa`) serving its admin API over TLS: a hook that
//! dead-letters at once (its sink is a closed port, one attempt), one the quarantine pen holds,
//! then every call of the client over the CA bundle, typed answers and typed refusals
//! (unknown token, a tenant-limited token, a bad filter, an unknown job, plain HTTP, an
//! untrusted CA).
//!
//! Skipped, with a message, only when `ANKUSA_BIN` is unset and the default binary does not
//! exist; `ANKUSA_REQUIRE_SDK_E2E=1` makes that a failure.

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ankusa_sdk::{
    AdminClient, AdminError, DlqQuery, QuarantineQuery, ReplayFilter, ReplayRequest, ReplayState,
};
use common::{Pki, free_port};

const ADMIN_TOKEN: &str = "sdk-e2e-admin-token-0001";
const ACME_TOKEN: &str = "sdk-e2e-acme-reader-0001";
const SINK_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// The gateway binary, or `None` when the run may skip.
fn binary() -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os("ANKUSA_BIN") {
        let bin = PathBuf::from(bin);
        assert!(bin.is_file(), "ANKUSA_BIN={} does not exist", bin.display());
        return Some(bin);
    }
    let default = PathBuf::from(std::env::var("HOME").unwrap_or_default())
        .join(".cache/ankusa/target/debug/ankusa");
    if default.is_file() {
        return Some(default);
    }
    assert!(
        std::env::var("ANKUSA_REQUIRE_SDK_E2E").as_deref() != Ok("1"),
        "ANKUSA_REQUIRE_SDK_E2E=1 but there is no gateway binary (set ANKUSA_BIN or build {})",
        default.display()
    );
    eprintln!(
        "skipping the admin end-to-end test: ANKUSA_BIN is unset and {} does not exist",
        default.display()
    );
    None
}

/// The running gateway; killed on drop.
struct Gateway {
    child: Child,
    dir: tempfile::TempDir,
    ingest: u16,
    admin: u16,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Gateway {
    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("gateway.log")).unwrap_or_default()
    }
}

fn config(closed_port: u16) -> String {
    format!(
        r#"egress: {{allow_http: true, allow_loopback: true}}
admin:
  tokens:
    - {{token: "{ADMIN_TOKEN}", scopes: ["*"]}}
    - {{token: "{ACME_TOKEN}", scopes: [dlq:read, replays:write, "tenant:acme"]}}
sources:
  doomed:
    tenant: acme
    retry: {{max_attempts: 1}}
    sinks:
      - {{type: http, url: "http://127.0.0.1:{closed_port}/gone", secret: "{SINK_SECRET}"}}
  pen:
    verify: {{type: github, secret: "the-source-has-this-one"}}
    on_verify_failure: quarantine
    sinks: [{{type: log}}]
"#
    )
}

async fn start(bin: &PathBuf, pki: &Pki) -> Gateway {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let config_path = write("ankusa.yml", &config(free_port()));
    let cert = write("tls.crt", &pki.cert_pem);
    let key = write("tls.key", &pki.key_pem);
    let log = std::fs::File::create(dir.path().join("gateway.log")).unwrap();
    let (ingest, admin, claims) = (free_port(), free_port(), free_port());
    let child = Command::new(bin)
        .arg("--config")
        .arg(&config_path)
        .env("ANKUSA_DATA_DIR", dir.path().join("data"))
        .env("ANKUSA_HTTP_IP", "127.0.0.1")
        .env("ANKUSA_HTTP_PORT", ingest.to_string())
        .env("ANKUSA_ADMIN_IP", "127.0.0.1")
        .env("ANKUSA_ADMIN_PORT", admin.to_string())
        .env("ANKUSA_CLAIM_CHECK_IP", "127.0.0.1")
        .env("ANKUSA_CLAIM_CHECK_PORT", claims.to_string())
        .env("ANKUSA_ADMIN_TLS_CERT_FILE", &cert)
        .env("ANKUSA_ADMIN_TLS_KEY_FILE", &key)
        .env_remove("ANKUSA_CONFIG")
        .env_remove("ANKUSA_ADMIN_TOKEN")
        .env_remove("RUST_LOG")
        .stdout(Stdio::from(log.try_clone().unwrap()))
        .stderr(Stdio::from(log))
        .spawn()
        .expect("start the gateway");
    let mut g = Gateway {
        child,
        dir,
        ingest,
        admin,
    };
    // The admin port is HTTPS only; the ingest port has `/ready` too.
    let plain = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = g.child.try_wait().unwrap() {
            panic!("the gateway exited with {status}:\n{}", g.log());
        }
        let ready = plain
            .get(format!("http://127.0.0.1:{}/ready", g.ingest))
            .send()
            .await
            .map(|r| r.status().as_u16() == 200)
            .unwrap_or(false);
        if ready {
            return g;
        }
        assert!(
            Instant::now() < deadline,
            "the gateway is not ready:\n{}",
            g.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn post(g: &Gateway, path: &str, headers: &[(&str, &str)], body: &str) -> serde_json::Value {
    let mut req = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{}{path}", g.ingest))
        .header("content-type", "application/json")
        .body(body.to_string());
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let r = req.send().await.unwrap();
    assert!(r.status().is_success(), "{path}: {}", r.status());
    r.json().await.unwrap()
}

/// Polls `f` until it gives `Some` (at most 30 s).
async fn eventually<T, F: AsyncFnMut() -> Option<T>>(what: &str, g: &Gateway, mut f: F) -> T {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within 30 s\n{}",
            g.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn assert_error(e: &AdminError, code: &str, status: u16, retryable: bool) {
    assert_eq!(
        (e.code.as_str(), e.status, e.retryable),
        (code, Some(status), retryable),
        "{e}"
    );
}

#[tokio::test]
async fn the_admin_client_against_a_running_gateway_over_tls() {
    let Some(bin) = binary() else {
        return;
    };
    let pki = Pki::new("sdk e2e admin CA");
    let g = start(&bin, &pki).await;
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.crt");
    std::fs::write(&ca_file, &pki.ca_pem).unwrap();
    let base = format!("https://localhost:{}", g.admin);
    let admin = AdminClient::new(&base, ADMIN_TOKEN)
        .ca_bundle_file(&ca_file)
        .expect("the CA bundle");

    let body = r#"{"id":"evt_1"}"#;
    let hook = post(&g, "/webhooks/doomed", &[], body).await;
    let hook_id = hook["id"].as_str().unwrap().to_string();
    let held = post(
        &g,
        "/webhooks/pen",
        &[
            ("x-hub-signature-256", "sha256=00"),
            ("x-github-event", "push"),
        ],
        r#"{"n":1}"#,
    )
    .await;
    assert_eq!(held["quarantined"], true, "{held}");

    // The DLQ: the hook dead-letters after its one attempt.
    let acme = DlqQuery {
        tenant: Some("acme".into()),
        ..Default::default()
    };
    let entry = eventually("the dead letter", &g, async || {
        let page = admin.list_dlq(&acme).await.expect("list the DLQ");
        page.entries.into_iter().find(|e| e.id == hook_id)
    })
    .await;
    assert_eq!(
        (
            entry.tenant.as_str(),
            entry.source_id.as_str(),
            entry.sink,
            entry.sink_type.as_str()
        ),
        ("acme", "doomed", 0, "http")
    );
    assert_eq!(entry.attempts, 1);
    assert!(
        entry.dead_at > 0 && entry.size == body.len() as u64,
        "{entry:?}"
    );

    // The pen.
    let pen = admin
        .list_quarantine(&QuarantineQuery::default())
        .await
        .expect("list the pen");
    assert_eq!(pen.entries.len(), 1, "{pen:?}");
    assert_eq!(pen.entries[0].id, held["id"].as_str().unwrap());
    assert_eq!(pen.entries[0].source_id, "pen");
    assert_eq!(pen.entries[0].reason, "no_matching_signature");
    assert_eq!(pen.total, Some(1));

    // A replay job: create, read, and pause (or find it completed already: one row is fast).
    let job = admin
        .create_replay(&ReplayRequest::dlq(ReplayFilter {
            tenant: Some("acme".into()),
            source_id: Some("doomed".into()),
            ..Default::default()
        }))
        .await
        .expect("create a replay");
    assert_eq!(job.kind, "dlq");
    assert_eq!(job.filter.source_id.as_deref(), Some("doomed"));
    let again = admin.get_replay(&job.id).await.expect("read the replay");
    assert_eq!(again.id, job.id);
    match admin.patch_replay(&job.id, ReplayState::Paused).await {
        Ok(paused) => {
            assert_eq!(paused.state, ReplayState::Paused);
            let cancelled = admin
                .patch_replay(&job.id, ReplayState::Cancelled)
                .await
                .expect("cancel");
            assert_eq!(cancelled.state, ReplayState::Cancelled);
            let e = admin
                .patch_replay(&job.id, ReplayState::Running)
                .await
                .unwrap_err();
            assert_error(&e, "invalid_state", 400, false);
        }
        Err(e) => {
            assert_error(&e, "invalid_state", 400, false);
            let done = admin.get_replay(&job.id).await.unwrap();
            assert_eq!(done.state, ReplayState::Completed);
        }
    }
    let e = admin
        .get_replay("0192f1d2-0000-7000-8000-000000000000")
        .await
        .unwrap_err();
    assert_error(&e, "replay_not_found", 404, false);

    // Refusals, typed.
    let e = admin
        .list_dlq(&DlqQuery {
            limit: Some(5000),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_error(&e, "invalid_filter", 400, false);
    assert_eq!(e.field.as_deref(), Some("limit"));
    let stranger = AdminClient::new(&base, "not-a-token-of-this-node")
        .ca_bundle_pem(&pki.ca_pem)
        .unwrap();
    let e = stranger.list_dlq(&DlqQuery::default()).await.unwrap_err();
    assert_error(&e, "unauthorized", 401, false);

    // A tenant-limited token: its tenant by default, another tenant refused by name.
    let acme_reader = AdminClient::new(&base, ACME_TOKEN)
        .ca_bundle_pem(&pki.ca_pem)
        .unwrap();
    let page = acme_reader
        .list_dlq(&DlqQuery::default())
        .await
        .expect("acme's DLQ");
    assert!(page.entries.iter().all(|e| e.tenant == "acme"), "{page:?}");
    let e = acme_reader
        .list_dlq(&DlqQuery {
            tenant: Some("beta".into()),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_error(&e, "forbidden", 403, false);
    assert_eq!(e.scope.as_deref(), Some("tenant:beta"));

    // TLS: plain HTTP is answered tls_required; a client without the CA gets no answer.
    let e = AdminClient::new(format!("http://127.0.0.1:{}", g.admin), ADMIN_TOKEN)
        .list_dlq(&DlqQuery::default())
        .await
        .unwrap_err();
    assert_error(&e, "tls_required", 400, false);
    let e = AdminClient::new(&base, ADMIN_TOKEN)
        .list_dlq(&DlqQuery::default())
        .await
        .unwrap_err();
    assert_eq!(
        (e.code.as_str(), e.status, e.retryable),
        ("transport_error", None, true)
    );

    // The example docs/sdk.md quotes, run as a user would, on a DLQ that holds letters.
    post(&g, "/webhooks/doomed", &[], body).await;
    eventually("a dead letter for the example", &g, async || {
        let page = admin
            .list_dlq(&DlqQuery {
                tenant: Some("acme".into()),
                ..Default::default()
            })
            .await
            .ok()?;
        (!page.entries.is_empty()).then_some(())
    })
    .await;
    let example = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.join("examples/admin_replay")))
        .filter(|p| p.exists())
        .expect("cargo test builds the examples beside the tests");
    let out = std::process::Command::new(example)
        .arg("acme")
        .env("ANKUSA_ADMIN_URL", &base)
        .env("ANKUSA_ADMIN_TOKEN", ADMIN_TOKEN)
        .env("ANKUSA_ADMIN_CA", &ca_file)
        .output()
        .expect("run examples/admin_replay");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("dead: ") && stdout.contains(" created"),
        "examples/admin_replay: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
