//! Config loading through the binary: refusals name the field and exit 78; hot reload swaps a
//! secret with no restart and no failed request; a bad reload keeps the old config.

mod common;

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

fn check(config: &str, env: &[(&str, &str)]) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c.yml");
    std::fs::write(&p, config).unwrap();
    let mut c = Command::new(BIN);
    c.arg("check-config")
        .arg("--config")
        .arg(&p)
        .env_remove("ANKUSA_CONFIG");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout),
    )
}

#[test]
fn refused_configs_name_the_field_and_exit_78() {
    let (code, err) = check(
        "sources:\n  s:\n    sinks: [{type: log}]\n    sinkz: []\n",
        &[],
    );
    assert_eq!(code, 78, "{err}");
    assert!(err.contains("sources.s") && err.contains("sinkz"), "{err}");

    let (code, err) = check(
        "sources:\n  s:\n    verify: {type: github, secret: \"${ANKUSA_TEST_UNSET_SECRET}\"}\n    sinks: [{type: log}]\n",
        &[],
    );
    assert_eq!(code, 78, "{err}");
    assert!(
        err.contains("sources.s.verify.secret") && err.contains("ANKUSA_TEST_UNSET_SECRET"),
        "{err}"
    );

    let (code, err) = check(
        "sources:\n  s:\n    verify: {type: stripe, secret: [\"new\", \"${OLD:-}\"]}\n    sinks: [{type: log}]\n",
        &[],
    );
    assert_eq!(code, 78, "{err}");
    assert!(
        err.contains("sources.s.verify.secret[1]") && err.contains("must not be empty"),
        "{err}"
    );

    let (code, err) = check("dispatch:\n  concurrency: 0\n", &[]);
    assert_eq!(code, 78);
    assert!(
        err.contains("dispatch.concurrency must be >= 1, got 0"),
        "{err}"
    );

    let (code, out) = check(
        "sources:\n  s:\n    verify: {type: github, secret: \"${GH:-fallback}\"}\n    sinks: [{type: log}]\n",
        &[],
    );
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("config OK") && out.contains("sources=s"),
        "{out}"
    );

    // A broker written as an address the egress policy refuses: the field and the range are
    // named, the address (and the URL's password) never.
    let redis = "sources:\n  s:\n    sinks: [{type: redis, url: \"redis://:s3cret-pw@127.0.0.1:6379/0\", channel: c}]\n";
    let (code, err) = check(redis, &[]);
    assert_eq!(code, 78, "{err}");
    assert!(
        err.contains("sources.s.sinks[0].url")
            && err.contains("loopback")
            && err.contains("egress.allow_loopback"),
        "{err}"
    );
    assert!(
        !err.contains("127.0.0.1") && !err.contains("s3cret-pw"),
        "{err}"
    );
    let (code, out) = check(&format!("egress: {{allow_loopback: true}}\n{redis}"), &[]);
    assert_eq!(code, 0, "{out}");
    let (code, err) = check(
        "sources:\n  s:\n    sinks: [{type: kafka, brokers: [\"kafka.example:9092\", \"10.0.0.8:9092\"], topic: t}]\n",
        &[],
    );
    assert_eq!(code, 78, "{err}");
    assert!(
        err.contains("sources.s.sinks[0].brokers[1]") && err.contains("private"),
        "{err}"
    );
    assert!(!err.contains("10.0.0.8"), "{err}");

    // `run` refuses the same way, before binding anything.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c.yml");
    std::fs::write(&p, "http: {port: 4000, bogus: true}\n").unwrap();
    let out = Command::new(BIN).arg("--config").arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(78));
    assert!(String::from_utf8_lossy(&out.stderr).contains("http.bogus"));
}

#[test]
fn print_config_redacts_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c.yml");
    std::fs::write(
        &p,
        "sources:\n  s:\n    verify: {type: github, secret: topsecretvalue}\n    sinks:\n      - type: http\n        url: https://hooks.example.com/in?token=abc\n        secret: whsec_c2VjcmV0\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .arg("print-config")
        .arg("--config")
        .arg(&p)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    for leak in ["topsecretvalue", "whsec_c2VjcmV0", "abc"] {
        assert!(!text.contains(leak), "{leak} leaked:\n{text}");
    }
    assert!(text.contains("github") && text.contains("hooks.example.com"));
}

const A: &str = "whsec_QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUE=";
const B: &str = "whsec_QkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkI=";

fn sw_config(secrets: &[&str]) -> String {
    let list: Vec<String> = secrets.iter().map(|s| format!("\"{s}\"")).collect();
    format!(
        "node: {{roles: [edge]}}\nsources:\n  sw:\n    verify: {{type: standard_webhooks, secret: [{}]}}\n    sinks: [{{type: log}}]\n",
        list.join(", ")
    )
}

async fn send(c: &reqwest::Client, g: &Gateway, secret: &str, n: u64) -> u16 {
    let body = format!("{{\"n\":{n}}}");
    let mut r = c.post(g.url("/webhooks/sw")).body(body.clone());
    for (k, v) in
        standard_webhooks_headers(secret, &format!("msg_{n}"), now_secs(), body.as_bytes())
    {
        r = r.header(k, v);
    }
    match r.send().await {
        Ok(resp) => resp.status().as_u16(),
        Err(_) => 0,
    }
}

async fn wait_generation(c: &reqwest::Client, g: &Gateway, want: u64) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if g.admin_json(c, "/v1/status").await["generation"].as_u64() == Some(want) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "generation {want} not reached:\n{}",
            g.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn hot_reload_rotates_a_secret_without_restart_or_failed_request() {
    let g = Gateway::start(&sw_config(&[A]));
    let pid = g.pid();
    let c = client();
    let before = g.admin_json(&c, "/v1/status").await;
    assert_eq!(before["generation"], 1);

    // A provider keeps sending hooks signed with A through the whole rotation.
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(AtomicU64::new(0));
    let sender = {
        let (stop, sent, failures, c, url_g) = (
            stop.clone(),
            sent.clone(),
            failures.clone(),
            c.clone(),
            (g.ingest, g.admin),
        );
        tokio::spawn(async move {
            let mut n = 1_000_000;
            while !stop.load(Ordering::SeqCst) {
                n += 1;
                let body = format!("{{\"n\":{n}}}");
                let mut r = c
                    .post(format!("http://{}/webhooks/sw", url_g.0))
                    .body(body.clone());
                for (k, v) in
                    standard_webhooks_headers(A, &format!("msg_{n}"), now_secs(), body.as_bytes())
                {
                    r = r.header(k, v);
                }
                let s = r.send().await.map(|r| r.status().as_u16()).unwrap_or(0);
                sent.fetch_add(1, Ordering::SeqCst);
                if s != 201 {
                    failures.fetch_add(1, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(3)).await;
            }
        })
    };

    // Rotation window: both secrets verify.
    assert_eq!(send(&c, &g, B, 1).await, 401, "B is not valid yet");
    g.write_config(&sw_config(&[B, A]));
    wait_generation(&c, &g, 2).await;
    assert_eq!(send(&c, &g, B, 2).await, 201);
    assert_eq!(send(&c, &g, A, 3).await, 201);
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::SeqCst);
    sender.await.unwrap();
    assert!(sent.load(Ordering::SeqCst) > 20, "the sender ran");
    assert_eq!(
        failures.load(Ordering::SeqCst),
        0,
        "no request failed during the reload"
    );

    // The old secret removed: A is refused now. SIGHUP triggers the reload this time.
    std::fs::write(&g.config_path, sw_config(&[B])).unwrap();
    let _ = Command::new("kill")
        .arg("-HUP")
        .arg(pid.unwrap().to_string())
        .status();
    wait_generation(&c, &g, 3).await;
    assert_eq!(send(&c, &g, A, 4).await, 401);
    assert_eq!(send(&c, &g, B, 5).await, 201);
    assert_eq!(g.pid(), pid, "no restart");
    let st = g.admin_json(&c, "/v1/status").await;
    assert_ne!(st["config_hash"], before["config_hash"]);
    assert!(st["last_reload_error"].is_null());
}

#[tokio::test]
async fn a_bad_reload_keeps_the_old_config_and_reports_the_error() {
    let g = Gateway::start(&sw_config(&[A]));
    let c = client();
    let before = g.admin_json(&c, "/v1/status").await;
    g.write_config("node: {roles: [edge]}\nsources:\n  sw:\n    verify: {type: standard_webhooks, secret: [\"\"]}\n    sinks: [{type: log}]\n");
    let deadline = Instant::now() + Duration::from_secs(15);
    let st = loop {
        let st = g.admin_json(&c, "/v1/status").await;
        if !st["last_reload_error"].is_null() {
            break st;
        }
        assert!(
            Instant::now() < deadline,
            "no reload error reported:\n{}",
            g.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let msg = st["last_reload_error"]["message"].as_str().unwrap();
    assert!(msg.contains("sources.sw.verify.secret"), "{msg}");
    assert_eq!(st["generation"], before["generation"]);
    assert_eq!(st["config_hash"], before["config_hash"]);
    assert_eq!(send(&c, &g, A, 1).await, 201, "the old config still serves");

    // Without admin tokens a push is refused: any local process could replace the config.
    let r = c
        .put(g.admin_url("/v1/config"))
        .body(sw_config(&[B]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"], "token_required");

    // With a token (configured here through the file) the push works, and refuses a bad config
    // naming the field.
    const TOKEN: &str = "push-token-0123456789";
    let with_token = |secret: &str| {
        format!(
            "{}admin: {{tokens: [{{token: \"{TOKEN}\", scopes: [\"*\"]}}]}}\n",
            sw_config(&[secret])
        )
    };
    g.write_config(&with_token(A));
    let deadline = Instant::now() + Duration::from_secs(15);
    while c
        .get(g.admin_url("/v1/status"))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
        != 401
    {
        assert!(
            Instant::now() < deadline,
            "tokens not applied:\n{}",
            g.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let r = c
        .put(g.admin_url("/v1/config"))
        .bearer_auth(TOKEN)
        .body("http: {prot: 1}\n")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"], "invalid_config");
    assert_eq!(v["field"], "http.prot");
    // And installs a good one.
    let r = c
        .put(g.admin_url("/v1/config"))
        .bearer_auth(TOKEN)
        .body(with_token(B))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(send(&c, &g, B, 2).await, 201);

    // A pushed config is taken literally: a reference is text, never resolved (the pod's files
    // and environment are not the pusher's to read). The new token is the reference's text.
    const LITERAL: &str = "${file:/etc/passwd}${HOME}";
    let r = c
        .put(g.admin_url("/v1/config"))
        .bearer_auth(TOKEN)
        .body(format!(
            "{}admin: {{tokens: [{{token: \"{LITERAL}\", scopes: [\"*\"]}}]}}\n",
            sw_config(&[B])
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{}", r.text().await.unwrap());
    let status = |token: &'static str| c.get(g.admin_url("/v1/status")).bearer_auth(token).send();
    assert_eq!(status(LITERAL).await.unwrap().status().as_u16(), 200);
    assert_eq!(status(TOKEN).await.unwrap().status().as_u16(), 401);
}

#[test]
fn the_embedded_config_runs_a_demo_source() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .arg("check-config")
        .current_dir(dir.path())
        .env_remove("ANKUSA_CONFIG")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("sources=demo"));
}

/// The YAML blocks of `docs/` as one config each: whole files as they are; a `sinks:` list, a
/// `verify:` or a `dedupe:` alone inside a source.
fn doc_configs(doc: &str) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../docs")
            .join(doc),
    )
    .unwrap();
    let mut out = Vec::new();
    let mut block: Option<(usize, String)> = None;
    for (n, line) in text.lines().enumerate() {
        match (&mut block, line.trim_start()) {
            (None, "```yaml") => block = Some((n + 1, String::new())),
            (Some(_), "```") => {
                let (at, yaml) = block.take().unwrap();
                let first = yaml.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
                let indented = |y: &str, by: usize| -> String {
                    y.lines()
                        .map(|l| format!("{}{l}\n", " ".repeat(by)))
                        .collect()
                };
                let in_source = |y: &str| {
                    format!(
                        "sources:\n  doc:\n{}    sinks: [{{type: log}}]\n",
                        indented(y, 4)
                    )
                };
                let lines: Vec<&str> = yaml.lines().filter(|l| !l.trim().is_empty()).collect();
                let key = first.split(':').next().unwrap_or("");
                let alone = key == "verify" || key == "dedupe";
                if first.starts_with("    sinks:") {
                    out.push((at, format!("sources:\n  doc:\n{yaml}")));
                } else if key == "sinks" {
                    out.push((at, format!("sources:\n  doc:\n{}", indented(&yaml, 4))));
                } else if alone
                    && lines.len() > 1
                    && lines.iter().all(|l| l.starts_with(&format!("{key}:")))
                {
                    // One line per alternative.
                    out.extend(lines.iter().map(|l| (at, in_source(l))));
                } else if alone {
                    out.push((at, in_source(&yaml)));
                } else {
                    out.push((at, yaml));
                }
            }
            (Some((_, yaml)), _) => {
                yaml.push_str(line);
                yaml.push('\n');
            }
            _ => {}
        }
    }
    out
}

#[test]
fn the_configuration_and_sink_examples_in_the_docs_load() {
    let dir = tempfile::tempdir().unwrap();
    // Every `${VAR}` gets a value that passes any check a secret or token meets (a whsec_ key
    // is valid base64 and long enough for a token); `${file:...}` reads a file that exists.
    let value = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let file = dir.path().join("secret");
    std::fs::write(&file, value).unwrap();
    // `check-config` opens certificate files as `run` does: the examples' paths (a Secret
    // volume on a pod) point at a pair that exists here.
    let ca = ankusa_testkit::pki::Ca::new("docs CA");
    let pair = ca.server(&["localhost"], false);
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&cert, &pair.cert).unwrap();
    std::fs::write(&key, &pair.key).unwrap();
    std::fs::write(dir.path().join("ca.crt"), &ca.pem).unwrap();
    // A GCS store's `credentials: /path` is read at start too: a throwaway service-account key.
    let sa_key = dir.path().join("gcs-key.json");
    std::fs::write(
        &sa_key,
        throwaway_service_account("https://oauth2.googleapis.com/token").0,
    )
    .unwrap();
    let mut checked = 0;
    for doc in [
        "configuration.md",
        "sinks.md",
        "delivery.md",
        "admin-api.md",
    ] {
        for (line, config) in doc_configs(doc) {
            let (config, names) = with_refs_resolvable(&config, &file);
            let config = with_cert_files(&config, &cert, &key);
            let config = with_key_file(&config, &sa_key);
            // An Azure SAS variable gets a SAS's shape (`sv=...&sig=...`).
            let sas = "sv=2021-08-06&ss=b&srt=co&sp=racwdl&sig=c2lnbmF0dXJl";
            let env: Vec<(&str, &str)> = names
                .iter()
                .map(|n| (n.as_str(), if n.contains("SAS") { sas } else { value }))
                .collect();
            let (code, out) = check(&config, &env);
            assert_eq!(code, 0, "docs/{doc} line {line}:\n{config}\n{out}");
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} examples found");
}

/// Points every `credentials:` given as an absolute path (a GCS service-account key) at `key`.
fn with_key_file(config: &str, key: &std::path::Path) -> String {
    config
        .lines()
        .map(|l| {
            let indent = &l[..l.len() - l.trim_start().len()];
            match l.trim_start().strip_prefix("credentials: /") {
                Some(_) => format!("{indent}credentials: {}", key.display()),
                None => l.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// Points every `cert_file:` and `key_file:` at `cert` and `key`.
fn with_cert_files(config: &str, cert: &std::path::Path, key: &std::path::Path) -> String {
    config
        .lines()
        .map(|l| {
            let indent = &l[..l.len() - l.trim_start().len()];
            match l.trim_start() {
                t if t.starts_with("cert_file:") => {
                    format!("{indent}cert_file: {}", cert.display())
                }
                t if t.starts_with("key_file:") => format!("{indent}key_file: {}", key.display()),
                // The CA beside the pair (`fleet.tls.ca_file`).
                t if t.starts_with("ca_file:") => format!(
                    "{indent}ca_file: {}",
                    key.with_file_name("ca.crt").display()
                ),
                _ => l.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// Points every `${file:...}` at `file` and lists the variables of `${VAR}` / `${VAR:-d}`.
fn with_refs_resolvable(config: &str, file: &std::path::Path) -> (String, Vec<String>) {
    let mut out = String::new();
    let mut names = Vec::new();
    let mut rest = config;
    while let Some(start) = rest.find("${") {
        let Some(len) = rest[start..].find('}') else {
            break;
        };
        let inner = &rest[start + 2..start + len];
        out.push_str(&rest[..start]);
        if inner.starts_with("file:") {
            out.push_str(&format!("${{file:{}}}", file.display()));
        } else {
            names.push(inner.split(":-").next().unwrap_or(inner).to_string());
            out.push_str(&rest[start..=start + len]);
        }
        rest = &rest[start + len + 1..];
    }
    out.push_str(rest);
    (out, names)
}

/// A sink option that names a file the gateway reads on the sink's behalf may not name the
/// gateway's own files: `check-config` refuses a Kafka `sasl.token_file` aimed at the config
/// file itself (directly, through `..`, through a symlink) or at another file of its directory,
/// naming the option and never the path; a token file in a directory of its own passes.
#[test]
fn a_sink_token_file_naming_the_config_file_is_refused() {
    let conf = tempfile::tempdir().unwrap();
    let keys = tempfile::tempdir().unwrap();
    let path = conf.path().join("gw.yml");
    let token = keys.path().join("token");
    std::fs::write(&token, "a-bearer-token").unwrap();
    let link = keys.path().join("link");
    std::os::unix::fs::symlink(&path, &link).unwrap();
    let conf_name = conf
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_string();
    let run = |token_file: &std::path::Path| {
        let config = format!(
            "egress: {{allow_loopback: true}}\nsources:\n  s:\n    sinks:\n      - type: kafka\n        \
             brokers: [\"127.0.0.1:9093\"]\n        topic: hooks\n        security_protocol: sasl_plaintext\n        \
             sasl: {{mechanism: oauthbearer, token_file: \"{}\"}}\n",
            token_file.display()
        );
        std::fs::write(&path, config).unwrap();
        let out = Command::new(BIN)
            .arg("check-config")
            .arg("--config")
            .arg(&path)
            .env_remove("ANKUSA_CONFIG")
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).to_string()
                + &String::from_utf8_lossy(&out.stdout),
        )
    };
    for bad in [
        path.clone(),
        conf.path().join("other.pem"),
        keys.path().join(format!("../{conf_name}/gw.yml")),
        link.clone(),
    ] {
        let (code, err) = run(&bad);
        assert_eq!(code, 78, "{}: {err}", bad.display());
        assert!(
            err.contains(
                "sources.s.sinks[0].sasl.token_file: names a file under the gateway's own \
                 config or TLS directory"
            ),
            "{}: {err}",
            bad.display()
        );
        assert!(!err.contains(&conf_name), "the path is quoted: {err}");
    }
    let (code, out) = run(&token);
    assert_eq!(code, 0, "{out}");
}
