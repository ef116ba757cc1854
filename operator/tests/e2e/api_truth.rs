//! Issue 27 on a real control plane: what `kubectl apply` refuses before anything runs, each
//! refusal naming the field — a Sink with a misspelled option (the typed option fields are
//! structural, so the unknown field is refused), a ReplayJob with `rate: 10^9` (a schema
//! bound), a Source with a bad id (a pattern) and one with two dedupe forms (a `oneOf`) — and
//! the rules that need CEL, which this 1.20 server cannot run, re-checked by the operator: a
//! Sink whose option field is for another type reports `InvalidSpec` naming it. And
//! `kubectl explain` of three nested fields, compared with the committed output.

use super::*;

/// `kubectl apply` of `yaml` must fail; kubectl's message.
async fn refused(h: &Harness, what: &str, yaml: &str) -> String {
    match h.apply(yaml).await {
        Ok(out) => panic!("{what}: kubectl apply accepted it: {out}"),
        Err(e) => {
            let msg = e.to_string();
            eprintln!("[api] {what}: {msg}");
            msg
        }
    }
}

/// Compares `kubectl explain` output with `e2e/explain/<name>.txt`; `ANKUSA_BLESS=1` writes
/// the file instead.
fn compare_explain(name: &str, out: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/e2e/explain")
        .join(format!("{name}.txt"));
    if std::env::var_os("ANKUSA_BLESS").is_some() {
        std::fs::write(&path, out).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with ANKUSA_BLESS=1 to write it)",
            path.display()
        )
    });
    assert_eq!(
        out.trim_end(),
        want.trim_end(),
        "kubectl explain {name} differs from {} (ANKUSA_BLESS=1 rewrites it)",
        path.display()
    );
}

#[test]
fn k_the_api_refuses_bad_manifests_before_anything_runs() {
    scenario("api-truth", async |h| {
        let typo = resource_yaml(
            "Sink",
            "typo",
            "  type: http\n  http:\n    urll: https://receiver.example/hooks\n    timeout_ms: 2000\n",
        );
        let msg = refused(h, "misspelled sink option", &typo).await;
        assert!(msg.contains("urll"), "{msg}");
        assert!(
            msg.contains("spec.http") || msg.contains("Sink.spec.http"),
            "{msg}"
        );
        let no_sink = h.kubectl(&["get", "sinks", "-o", "name"]).await.unwrap();
        assert!(!no_sink.contains("typo"), "{no_sink}");

        let fast = resource_yaml(
            "ReplayJob",
            "too-fast",
            "  gatewayRef:\n    name: gw\n  rate: 1000000000\n",
        );
        let msg = refused(h, "replay rate 10^9", &fast).await;
        assert!(msg.contains("spec.rate"), "{msg}");
        assert!(msg.contains("100000"), "{msg}");

        let bad_id = resource_yaml(
            "Source",
            "bad-id",
            "  gatewayRef:\n    name: gw\n  id: \"orders/../admin\"\n  sinks:\n  - name: receiver\n",
        );
        let msg = refused(h, "source id", &bad_id).await;
        assert!(msg.contains("spec.id"), "{msg}");

        let two_dedupes = resource_yaml(
            "Source",
            "two-dedupes",
            "  gatewayRef:\n    name: gw\n  dedupe:\n    header: X-Event-Id\n    json: data.id\n  sinks:\n  - name: receiver\n",
        );
        let msg = refused(h, "two dedupe forms", &two_dedupes).await;
        assert!(msg.contains("spec.dedupe"), "{msg}");

        let no_sinks = resource_yaml(
            "Source",
            "no-sinks",
            "  gatewayRef:\n    name: gw\n  sinks: []\n",
        );
        let msg = refused(h, "a source without sinks", &no_sinks).await;
        assert!(msg.contains("spec.sinks"), "{msg}");

        // A CEL rule on 1.25+; here the operator's re-check names the field in the status.
        let wrong = resource_yaml(
            "Sink",
            "wrong-field",
            "  type: http\n  kafka:\n    brokers: [\"kafka:9092\"]\n    topic: hooks\n",
        );
        h.apply(&wrong)
            .await
            .expect("1.20 has no CEL: the server takes it");
        let cond = eventually(
            "the operator's re-check of spec.kafka",
            Duration::from_secs(60),
            || async {
                let s = get_json(h, "sink/wrong-field").await;
                let ready = s["status"]["conditions"]
                    .as_array()?
                    .iter()
                    .find(|c| c["type"] == "Ready")?
                    .clone();
                (ready["reason"] == "InvalidSpec").then_some(ready)
            },
        )
        .await;
        assert_eq!(cond["status"], "False", "{cond}");
        let m = cond["message"].as_str().unwrap();
        assert!(
            m.starts_with("spec.kafka:") && m.contains("spec.http"),
            "{m}"
        );

        // The deprecated `options` map still works, with a Warning naming the field to use.
        let old_style = resource_yaml(
            "Sink",
            "old-style",
            "  type: http\n  options:\n    url: https://receiver.example/hooks\n    allow_unsigned: true\n",
        );
        h.apply(&old_style).await.unwrap();
        let events = eventually(
            "a DeprecatedOptions event",
            Duration::from_secs(60),
            || async {
                let ev = events_where(h, "involvedObject.name=old-style").await;
                ev.contains("DeprecatedOptions").then_some(ev)
            },
        )
        .await;
        assert!(events.contains("spec.http"), "{events}");

        for field in [
            "sink.spec.kafka.sasl",
            "sink.spec.http.timeout_ms",
            "replayjob.spec.rate",
        ] {
            let out = h.kubectl(&["explain", field]).await.unwrap();
            compare_explain(field, &out);
        }
    });
}
