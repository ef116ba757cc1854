//! Issue 25 on a real control plane, driven with `kubectl` where a user would act: a Sink that
//! names a file of the pod (`sasl.token_file` aimed at the pod's own config) is refused, naming
//! the option, and nothing of it reaches the pods; and a `<gw>-admin-token` planted after the
//! operator's own was deleted — with a forged controller reference to the Gateway — is never
//! used: the Gateway reports `ForeignObject`, the pods' config does not hold the planted token
//! (the pods refuse it), and once its author removes it the operator writes a fresh one.

use super::*;

/// Base64 of text, as `kubectl get -o json` shows Secret data.
fn b64(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// Pod `pod`'s file of the config Secret the operator writes, decoded.
async fn rendered_config(h: &Harness, pod: u8) -> String {
    let secret = get_json(h, "secret/gw-config").await;
    let data = secret["data"][format!("gw-{pod}.yaml")].as_str().unwrap();
    use base64::Engine;
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(data)
            .unwrap(),
    )
    .unwrap()
}

/// `GET <path>` on pod 0's admin API with `token`; the status code.
async fn admin_status_code(h: &Harness, token: &str) -> u16 {
    let ca = get_json(h, "secret/gw-admin-tls").await["data"]["ca.crt"]
        .as_str()
        .unwrap()
        .to_string();
    use base64::Engine;
    let ca = String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(ca)
            .unwrap(),
    )
    .unwrap();
    let host = format!("gw-0.gw-pods.{}.svc", h.ns);
    let ip: std::net::IpAddr = h.pod_ip("gw", 0).parse().unwrap();
    let client =
        ankusa_testkit::admin_client(&ca, &host, std::net::SocketAddr::new(ip, h.admin_port))
            .unwrap();
    let url = format!("https://{host}:{}/v1/status", h.admin_port);
    let r = client.get(&url).bearer_auth(token).send().await.unwrap();
    r.status().as_u16()
}

#[test]
fn l_no_file_from_a_sink_and_no_planted_admin_token() {
    scenario("l", async |h| {
        h.apply(&gateway_yaml(h, 1, None)).await.unwrap();
        wait_ready(h, "gateway/gw", "120s").await;

        // (a) A Kafka Sink whose OAUTHBEARER token is "read from" the pod's own config file.
        let leak_path = "/etc/ankusa/gw-0.yaml";
        h.apply(&format!(
            "apiVersion: ankusa.dev/v1alpha1\nkind: Sink\nmetadata:\n  name: receiver\nspec:\n  type: kafka\n  options:\n    brokers: [\"127.0.0.1:9092\"]\n    topic: hooks\n    security_protocol: sasl_plaintext\n    sasl:\n      mechanism: oauthbearer\n      token_file: {leak_path}\n"
        ))
        .await
        .unwrap();
        h.apply(&github_secret_yaml(&[("old", GH_OLD)]))
            .await
            .unwrap();
        h.apply(&source_yaml("orders", &["old"], "receiver"))
            .await
            .unwrap();
        let refused = sink_refused(h, "options.sasl.token_file").await;
        let msg = refused["message"].as_str().unwrap();
        assert!(
            msg.contains("a file path is not accepted from a Sink")
                && msg.contains("secretRefs[\"sasl.token\"]")
                && !msg.contains(leak_path),
            "{msg}"
        );
        // Let the controllers write what they will: nothing of the Sink reaches the pods.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let rendered = rendered_config(h, 0).await;
        assert!(
            !rendered.contains("token_file") && !rendered.contains(leak_path),
            "{rendered}"
        );
        let source = get_json(h, "source/orders").await;
        let ready = source["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Ready")
            .unwrap();
        assert_eq!(ready["reason"], "RenderFailed", "{ready:#}");
        let operator_token = admin_token(h).await;
        let loaded = admin_get(h, 0, &operator_token, "/v1/config").await;
        assert!(!loaded.to_string().contains("token_file"), "{loaded:#}");

        // (b) The operator's token Secret is deleted and a look-alike planted in its place, with
        // a controller reference to the Gateway as the operator would write it.
        let gw = get_json(h, "gateway/gw").await;
        let uid = gw["metadata"]["uid"].as_str().unwrap();
        const PLANTED: &str = "planted-admin-token-0123456789abcdef0123456789abcdef";
        let planted = format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: gw-admin-token\n  labels:\n    app.kubernetes.io/managed-by: ankusa-operator\n    ankusa.dev/gateway: gw\n  ownerReferences:\n  - apiVersion: ankusa.dev/v1alpha1\n    kind: Gateway\n    name: gw\n    uid: {uid}\n    controller: true\n    blockOwnerDeletion: true\ntype: Opaque\ndata:\n  token: {}\n",
            b64(PLANTED)
        );
        // A running operator re-creates its own token within milliseconds of the deletion
        // (it watches its Secrets), before `kubectl` can create another: the look-alike goes
        // in while the operator is down, as during an upgrade. The restarted operator knows its
        // token only from the record in the Gateway's status.
        h.stop_operator().await;
        h.kubectl(&["delete", "secret", "gw-admin-token"])
            .await
            .unwrap();
        h.apply(&planted).await.unwrap();
        let t0 = Instant::now();
        h.start_operator().await.unwrap();
        let degraded = gateway_degraded(h, "gw", "ForeignObject").await;
        let msg = degraded["message"].as_str().unwrap();
        assert!(msg.contains("Secret gw-admin-token"), "{msg}");
        eprintln!(
            "[e2e] planted token refused after {:.1}s: {msg}",
            t0.elapsed().as_secs_f64()
        );
        let events = events_where(h, "reason=ForeignObject").await;
        assert!(events.contains("gw-admin-token"), "{events}");
        // Not used: not in the pods' config, and the pod does not take it; it still takes
        // the operator's own.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let rendered = rendered_config(h, 0).await;
        assert!(
            !rendered.contains(PLANTED),
            "the planted token reached the config"
        );
        assert_eq!(admin_status_code(h, PLANTED).await, 401);
        assert_eq!(admin_status_code(h, &operator_token).await, 200);
        let still = get_json(h, "secret/gw-admin-token").await;
        assert_eq!(
            still["data"]["token"],
            b64(PLANTED).as_str(),
            "left as planted"
        );

        // Its author removes it: the operator writes a fresh token and the Gateway recovers.
        let t1 = Instant::now();
        h.kubectl(&["delete", "secret", "gw-admin-token"])
            .await
            .unwrap();
        h.apply(&sink_yaml("receiver", "http://127.0.0.1:9/never"))
            .await
            .unwrap();
        h.apply(SIGNING_SECRET).await.unwrap();
        wait_ready(h, "gateway/gw", "90s").await;
        wait_ready(h, "source/orders", "60s").await;
        let fresh = admin_token(h).await;
        assert!(fresh != PLANTED && fresh != operator_token && fresh.len() == 64);
        assert!(rendered_config(h, 0).await.contains(&fresh));
        assert_eq!(admin_status_code(h, &fresh).await, 200);
        eprintln!(
            "[e2e] fresh token written and the Gateway Ready again after {:.1}s",
            t1.elapsed().as_secs_f64()
        );

        // What the operator's writes of its Secrets rely on: a server-side apply carrying the
        // resourceVersion it read is refused once the object changed (or was replaced) since.
        let config = get_json(h, "secret/gw-config").await;
        let read_at = config["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_string();
        h.kubectl(&["label", "secret", "gw-config", "probe=1"])
            .await
            .unwrap();
        let stale = format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: gw-config\n  resourceVersion: \"{read_at}\"\n  labels:\n    probe: \"2\"\n"
        );
        let e = h
            .kubectl_stdin(
                &[
                    "apply",
                    "--server-side",
                    "--force-conflicts",
                    "--field-manager=probe",
                    "-f",
                    "-",
                ],
                &stale,
            )
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("Conflict") || e.contains("has been modified"),
            "{e}"
        );
    });
}
