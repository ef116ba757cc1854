//! Dispatch and the HTTP sink through the real binary, against a scripted local receiver:
//! the delivery contract (verified with an independent Standard Webhooks implementation),
//! the status table's classes, retries, the horizon, hung attempts and the egress policy.

mod common;

use std::time::{Duration, Instant};

use common::receiver::{Receiver, Reply};
use common::*;
use serde_json::Value;

const SINK_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// A gateway whose sources POST to `receiver`; `sources` is the YAML of extra sources.
fn config(egress: &str, dispatch: &str, sources: &str) -> String {
    format!("egress: {egress}\ndispatch: {dispatch}\nsources:\n{sources}")
}

fn http_source(id: &str, url: &str, extra: &str) -> String {
    format!(
        "  {id}:\n{extra}    sinks:\n      - type: http\n        url: {url}\n        secret: {SINK_SECRET}\n        timeout_ms: 2000\n"
    )
}

const OPEN_EGRESS: &str = "{allow_http: true, allow_loopback: true}";

async fn hook(c: &reqwest::Client, g: &Gateway, id: &str) -> Option<Value> {
    let r = c
        .get(g.admin_url(&format!("/v1/hooks/{id}")))
        .send()
        .await
        .unwrap();
    if r.status().as_u16() == 404 {
        return None;
    }
    Some(r.json().await.unwrap())
}

/// Waits until the hook's first delivery row satisfies `pred`.
async fn wait_row(
    c: &reqwest::Client,
    g: &Gateway,
    id: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(h) = hook(c, g, id).await
            && pred(&h["deliveries"][0])
        {
            return h["deliveries"][0].clone();
        }
        assert!(
            Instant::now() < deadline,
            "row of {id} never matched; last {:?}\n{}",
            hook(c, g, id).await,
            g.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn ingest(
    c: &reqwest::Client,
    g: &Gateway,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> String {
    let mut r = c.post(g.url(path)).body(body.to_string());
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    let resp = r.send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 201, "ingest {path}");
    let v: Value = resp.json().await.unwrap();
    v["id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn delivers_at_once_with_the_whole_contract_and_an_interoperable_signature() {
    let rx = Receiver::start(|_, _| Reply::status(200)).await;
    let src = http_source(
        "gh",
        &rx.url("/deliveries"),
        "    tenant: acme\n    dedupe: {header: x-event-id}\n",
    );
    let g = Gateway::start(&config(OPEN_EGRESS, "{}", &src));
    let c = client();
    let body = r#"{"action":"opened","n":1}"#;
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let t0 = Instant::now();
    let id = ingest(
        &c,
        &g,
        "/webhooks/gh",
        &[
            ("content-type", "application/json"),
            ("x-github-event", "push"),
            ("x-event-id", "evt_42"),
            ("traceparent", traceparent),
            ("authorization", "Bearer provider-secret"),
            ("x-ankusa-id", "forged"),
        ],
        body,
    )
    .await;
    let acked = t0.elapsed();
    let got = rx
        .wait_for(Duration::from_secs(10), |r| !r.is_empty())
        .await;
    let r = &got[0];
    let latency = r.at.duration_since(t0).saturating_sub(acked);
    assert!(
        latency < Duration::from_millis(250),
        "delivery waited {latency:?} after the ack: a poll delay?"
    );

    assert_eq!(&r.body[..], body.as_bytes(), "raw body verbatim");
    assert_eq!(r.header("x-ankusa-id").as_deref(), Some(id.as_str()));
    assert_eq!(r.header("x-ankusa-source").as_deref(), Some("gh"));
    assert_eq!(r.header("x-ankusa-tenant").as_deref(), Some("acme"));
    assert_eq!(
        r.header("x-ankusa-idempotency-key").as_deref(),
        Some("acme:gh:evt_42")
    );
    assert_eq!(r.header("x-ankusa-dedupe-key").as_deref(), Some("evt_42"));
    assert_eq!(
        r.header("x-ankusa-verification").as_deref(),
        Some("skipped")
    );
    assert!(r.header("x-ankusa-verification-flagged").is_none());
    assert!(r.header("x-ankusa-replay-id").is_none());
    let received_at: u64 = r.header("x-ankusa-received-at").unwrap().parse().unwrap();
    assert!(received_at > 1_700_000_000_000);
    use sha2::Digest;
    assert_eq!(
        r.header("x-ankusa-body-sha256").unwrap(),
        hex::encode(sha2::Sha256::digest(body.as_bytes()))
    );
    assert_eq!(r.header("traceparent").as_deref(), Some(traceparent));
    assert_eq!(
        r.header("content-type").as_deref(),
        Some("application/json")
    );
    assert_eq!(
        r.header("x-github-event").as_deref(),
        Some("push"),
        "provider headers forwarded"
    );
    assert!(
        r.header("authorization").is_none(),
        "auth headers are never forwarded"
    );
    assert_ne!(r.header("x-ankusa-id").as_deref(), Some("forged"));
    assert_eq!(r.header("webhook-id").as_deref(), Some(id.as_str()));

    // The signature verifies with an independent implementation (crate standardwebhooks).
    let wh = standardwebhooks::Webhook::new(SINK_SECRET).unwrap();
    wh.verify(&r.body, &r.headers)
        .expect("signature verifies with standardwebhooks");
    let other = standardwebhooks::Webhook::new("whsec_c2VjcmV0LW90aGVy").unwrap();
    assert!(other.verify(&r.body, &r.headers).is_err());

    // The hook is deleted once its only row is delivered.
    let deadline = Instant::now() + Duration::from_secs(5);
    while hook(&c, &g, &id).await.is_some() {
        assert!(Instant::now() < deadline, "hook not reclaimed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn every_status_lands_in_its_class() {
    let rx = Receiver::start(|_, r| {
        let code: u16 = r.path.trim_start_matches("/s").parse().unwrap_or(200);
        match code {
            408 | 429 | 500 | 503 => Reply::status(code).header("retry-after", "2"),
            599 => Reply::status(503).header("retry-after", "3600"),
            302 => Reply::status(302).header("location", "/elsewhere"),
            _ => Reply::status(code),
        }
    })
    .await;
    let codes = [
        400u16, 401, 403, 404, 410, 413, 422, 451, 408, 429, 500, 503, 599, 425, 409, 302, 418,
    ];
    let mut sources = String::new();
    for code in codes {
        // Retry-After is "no sooner than, or the backoff if later": the codes that carry one
        // get a short backoff so the Retry-After decides; the others a long one.
        let retry = match code {
            408 | 429 | 500 | 503 | 599 | 425 => {
                "    retry: {base_ms: 100, max_ms: 100, jitter: false}\n"
            }
            _ => "    retry: {base_ms: 60000, max_ms: 60000, jitter: false}\n",
        };
        sources.push_str(&http_source(
            &format!("s{code}"),
            &rx.url(&format!("/s{code}")),
            retry,
        ));
    }
    let g = Gateway::start(&config(
        OPEN_EGRESS,
        "{max_retry_after_ms: 3000, breaker_failures: 0}",
        &sources,
    ));
    let c = client();
    let mut ids = Vec::new();
    for code in codes {
        ids.push((
            code,
            ingest(&c, &g, &format!("/webhooks/s{code}"), &[], "{}").await,
        ));
    }
    for (code, id) in ids {
        let row = wait_row(&c, &g, &id, |r| {
            r["attempts"].as_u64() == Some(1) && r["state"] != "inflight"
        })
        .await;
        let first = row["first_attempt_at"].as_u64().unwrap();
        let due_in = row["due_at"].as_u64().unwrap().saturating_sub(first);
        let err = row["last_error"].as_str().unwrap_or("");
        match code {
            400 | 401 | 403 | 404 | 410 | 413 | 422 | 451 => {
                assert_eq!(row["state"], "dead", "{code}: {row}");
                assert_eq!(row["error_class"], "permanent", "{code}");
                assert!(err.contains(&format!("status {code}")), "{code}: {err}");
            }
            408 | 429 | 500 | 503 => {
                assert_eq!(row["state"], "pending", "{code}: {row}");
                assert!(
                    (1_900..=2_600).contains(&due_in),
                    "{code}: Retry-After 2 s honoured, due in {due_in} ms"
                );
            }
            599 => {
                assert_eq!(row["state"], "pending");
                assert!(
                    (2_900..=3_600).contains(&due_in),
                    "Retry-After capped at 3 s, due in {due_in} ms"
                );
            }
            425 => {
                assert_eq!(row["state"], "pending");
                assert!(
                    (100..=700).contains(&due_in),
                    "425 without Retry-After: a full-jitter pause (<= 500 ms), got {due_in}"
                );
            }
            409 | 302 | 418 => {
                assert_eq!(row["state"], "pending", "{code}: transient");
                assert!(
                    (59_000..=61_000).contains(&due_in),
                    "{code}: the retry policy's backoff, got {due_in}"
                );
            }
            _ => unreachable!(),
        }
    }
    assert!(
        rx.received().iter().all(|r| r.path != "/elsewhere"),
        "redirects are never followed"
    );
}

#[tokio::test]
async fn retries_run_when_due_and_the_horizon_dead_letters() {
    let rx = Receiver::start(|n, r| match r.path.as_str() {
        "/flaky" if n <= 2 => Reply::status(500),
        "/flaky" => Reply::status(204),
        "/down" => Reply::status(500),
        "/throttled" => Reply::status(429).header("retry-after", "1"),
        _ => Reply::status(200),
    })
    .await;
    let sources = [
        http_source(
            "flaky",
            &rx.url("/flaky"),
            "    retry: {base_ms: 50, max_ms: 200}\n",
        ),
        http_source(
            "down",
            &rx.url("/down"),
            "    retry: {base_ms: 50, max_ms: 100, max_elapsed_ms: 600}\n",
        ),
        http_source(
            "throttled",
            &rx.url("/throttled"),
            "    retry: {base_ms: 50, max_elapsed_ms: 600}\n",
        ),
    ]
    .concat();
    let g = Gateway::start(&config(OPEN_EGRESS, "{breaker_failures: 0}", &sources));
    let c = client();
    let flaky = ingest(&c, &g, "/webhooks/flaky", &[], "{}").await;
    let got = rx
        .wait_for(Duration::from_secs(10), |r| {
            r.iter().filter(|x| x.path == "/flaky").count() >= 3
        })
        .await;
    let tries: Vec<_> = got.iter().filter(|x| x.path == "/flaky").collect();
    assert!(
        tries
            .iter()
            .all(|t| t.header("x-ankusa-id").as_deref() == Some(flaky.as_str()))
    );
    assert!(
        tries[1].at.duration_since(tries[0].at) >= Duration::from_millis(25),
        "backoff between attempts"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while hook(&c, &g, &flaky).await.is_some() {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let down = ingest(&c, &g, "/webhooks/down", &[], "{}").await;
    let row = wait_row(&c, &g, &down, |r| r["state"] == "dead").await;
    assert_eq!(row["error_class"], "transient");
    let lived = row["dead_at"].as_u64().unwrap() - row["first_attempt_at"].as_u64().unwrap();
    assert!(
        (600..2_000).contains(&lived),
        "dead-lettered at the 600 ms horizon, after {lived} ms"
    );
    assert!(row["attempts"].as_u64().unwrap() >= 3, "{row}");

    let thr = ingest(&c, &g, "/webhooks/throttled", &[], "{}").await;
    let row = wait_row(&c, &g, &thr, |r| r["state"] == "dead").await;
    assert_eq!(row["error_class"], "throttled", "{row}");
    let lived = row["dead_at"].as_u64().unwrap() - row["first_attempt_at"].as_u64().unwrap();
    assert!(
        lived < 1_500,
        "a Retry-After past the horizon is cut at the horizon ({lived} ms)"
    );
}

#[tokio::test]
async fn a_hung_attempt_is_cut_and_its_slot_reused() {
    let rx = Receiver::start(|n, _| {
        if n == 1 {
            Reply::status(200).delay(Duration::from_secs(30))
        } else {
            Reply::status(200)
        }
    })
    .await;
    let mut src = http_source("s", &rx.url("/hang"), "    retry: {base_ms: 60000}\n");
    src = src.replace("timeout_ms: 2000", "timeout_ms: 60000");
    let g = Gateway::start(&config(
        OPEN_EGRESS,
        "{concurrency: 1, attempt_timeout_ms: 400, tenants: {default: {concurrency: 1}}}",
        &src,
    ));
    let c = client();
    let first = ingest(&c, &g, "/webhooks/s", &[], "{\"n\":1}").await;
    rx.wait_for(Duration::from_secs(5), |r| r.len() == 1).await;
    let second = ingest(&c, &g, "/webhooks/s", &[], "{\"n\":2}").await;
    let got = rx.wait_for(Duration::from_secs(5), |r| r.len() >= 2).await;
    assert_eq!(
        got[1].header("x-ankusa-id").as_deref(),
        Some(second.as_str()),
        "the slot was freed"
    );
    let row = wait_row(&c, &g, &first, |r| {
        r["attempts"].as_u64() == Some(1) && r["state"] == "pending"
    })
    .await;
    assert!(
        row["last_error"]
            .as_str()
            .unwrap()
            .contains("attempt_timeout"),
        "{row}"
    );
}

#[tokio::test]
async fn egress_policy_and_bounded_responses() {
    let rx = Receiver::start(|_, r| match r.path.as_str() {
        "/huge" => Reply::status(200).body(10 << 20),
        _ => Reply::status(200),
    })
    .await;
    // Loopback denied: the default policy.
    let denied = http_source("denied", &rx.url("/x"), "");
    let g = Gateway::start(&config("{allow_http: true}", "{}", &denied));
    let c = client();
    let id = ingest(&c, &g, "/webhooks/denied", &[], "{}").await;
    let row = wait_row(&c, &g, &id, |r| r["state"] == "dead").await;
    assert_eq!(row["error_class"], "permanent");
    assert!(
        row["last_error"]
            .as_str()
            .unwrap()
            .contains("egress_denied: loopback"),
        "{row}"
    );
    // http refused unless allowed.
    drop(g);
    let g = Gateway::start(&config("{allow_loopback: true}", "{}", &denied));
    let id = ingest(&c, &g, "/webhooks/denied", &[], "{}").await;
    let row = wait_row(&c, &g, &id, |r| r["state"] == "dead").await;
    assert!(
        row["last_error"]
            .as_str()
            .unwrap()
            .contains("egress_denied: http_not_allowed"),
        "{row}"
    );
    assert_eq!(rx.count(), 0, "nothing was sent to a denied destination");
    drop(g);

    // A 10 MB response is read only up to max_response_bytes: memory stays flat.
    let huge = http_source("huge", &rx.url("/huge"), "");
    let g = Gateway::start(&config(OPEN_EGRESS, "{}", &huge));
    let rss = |pid: u32| -> u64 {
        let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        s.lines()
            .find(|l| l.starts_with("VmRSS:"))
            .unwrap()
            .split_whitespace()
            .nth(1)
            .unwrap()
            .parse()
            .unwrap()
    };
    let pid = g.pid().unwrap();
    ingest(&c, &g, "/webhooks/huge", &[], "{}").await;
    rx.wait_for(Duration::from_secs(10), |r| r.len() == 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = rss(pid);
    for i in 0..20 {
        ingest(&c, &g, "/webhooks/huge", &[], &format!("{{\"i\":{i}}}")).await;
    }
    rx.wait_for(Duration::from_secs(20), |r| r.len() == 21)
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let grown = rss(pid).saturating_sub(before);
    assert!(
        grown < 40 * 1024,
        "20 × 10 MB responses grew RSS by {grown} KiB"
    );
}

/// Writes a private CA and a leaf for `localhost` (a DNS name only, so `https://127.0.0.1`
/// does not match it) with the openssl CLI; returns (CA PEM path, leaf PEM, leaf key PEM).
fn private_ca(dir: &std::path::Path) -> (std::path::PathBuf, Vec<u8>, Vec<u8>) {
    let run = |args: &[&str]| {
        let out = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("openssl on PATH");
        assert!(out.status.success(), "openssl {args:?}: {out:?}");
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    run(&[
        &["req", "-x509"][..],
        &ec[..],
        &[
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=ankusa test CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign",
        ],
    ]
    .concat());
    run(&[
        &["req"][..],
        &ec[..],
        &[
            "-keyout",
            "leaf.key",
            "-out",
            "leaf.csr",
            "-subj",
            "/CN=localhost",
        ],
    ]
    .concat());
    std::fs::write(
        dir.join("leaf.ext"),
        "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        "leaf.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "leaf.pem",
        "-days",
        "2",
        "-extfile",
        "leaf.ext",
    ]);
    (
        dir.join("ca.pem"),
        std::fs::read(dir.join("leaf.pem")).unwrap(),
        std::fs::read(dir.join("leaf.key")).unwrap(),
    )
}

#[tokio::test]
async fn https_receivers_are_verified_against_the_system_roots_or_a_private_ca() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, leaf, key) = private_ca(dir.path());
    let rx = Receiver::start_tls(&leaf, &key, |_, _| Reply::status(200)).await;
    let port = rx.addr.port();
    let at = |host: &str, path: &str| format!("https://{host}:{port}{path}");
    let ca = path_str(&ca);
    let sources = [
        // Signed by a CA the system does not trust: refused, retried as transient.
        http_source("untrusted", &at("localhost", "/untrusted"), ""),
        // The private CA named by cacertfile: delivered.
        http_source("private_ca", &at("localhost", "/private_ca"), "")
            + &format!("        cacertfile: {ca}\n"),
        // Trusted CA but the name does not match the certificate: refused.
        http_source("wrong_name", &at("127.0.0.1", "/wrong_name"), "")
            + &format!("        cacertfile: {ca}\n"),
        // Verification switched off: delivered.
        http_source("insecure", &at("localhost", "/insecure"), "")
            + "        allow_insecure_tls: true\n",
    ]
    .concat();
    let g = Gateway::start(&config("{allow_loopback: true}", "{}", &sources));
    let c = client();
    let mut ids = std::collections::HashMap::new();
    for s in ["untrusted", "private_ca", "wrong_name", "insecure"] {
        ids.insert(
            s,
            ingest(&c, &g, &format!("/webhooks/{s}"), &[], "{}").await,
        );
    }
    let got = rx.wait_for(Duration::from_secs(20), |r| r.len() >= 2).await;
    let mut paths: Vec<_> = got.iter().map(|r| r.path.clone()).collect();
    paths.sort();
    assert_eq!(paths, ["/insecure", "/private_ca"]);
    assert!(got.iter().all(|r| r.header("webhook-signature").is_some()));
    let causes: [(&str, &[&str]); 2] = [
        ("untrusted", &["UnknownIssuer"]),
        ("wrong_name", &["NotValidForName", "not valid for name"]),
    ];
    for (s, cause) in causes {
        let row = wait_row(&c, &g, &ids[s], |r| {
            r["attempts"].as_u64().unwrap_or(0) >= 1 && r["last_error"].is_string()
        })
        .await;
        assert_ne!(row["state"], "dead", "a TLS failure is transient: {row}");
        let err = row["last_error"].as_str().unwrap();
        assert!(
            err.contains("transport") && cause.iter().any(|c| err.contains(c)),
            "{s}: {err}"
        );
    }
    assert_eq!(
        rx.count(),
        2,
        "nothing reached the receiver over an unverified connection"
    );
}
