//! Reconcilers against a mocked API server (tower-test): finalizer and error paths that are
//! awkward to provoke on a real cluster. Each test answers the requests it expects and
//! asserts what was sent; anything unexpected is answered 404 and recorded.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ankusa_crds::{Gateway, ReplayJob, Source};
use ankusa_operator::context::{Ctx, Settings};
use ankusa_operator::controllers::{gateway, replay, sink, source};
use ankusa_operator::metrics::Metrics;
use http::{Request, Response};
use http_body_util::BodyExt;
use kube::client::Body;
use kube::runtime::controller::Action;
use serde_json::{Value, json};

#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    content_type: String,
    body: Value,
}

type Handler = dyn Fn(&Seen) -> Option<(u16, Value)> + Send + Sync;

/// The path of a request without its query.
fn route(s: &Seen) -> &str {
    s.path.split('?').next().unwrap_or_default()
}

/// Answers what every reconcile of a Gateway's dependents reads: the Gateway (admin port
/// `admin_port`), its token Secret, its pods; and accepts events.
fn gateway_world(s: &Seen, admin_port: u16) -> Option<(u16, Value)> {
    match (s.method.as_str(), route(s)) {
        ("GET", "/apis/ankusa.dev/v1alpha1/namespaces/ns/gateways/gw") => {
            Some((200, gateway_obj(admin_port)))
        }
        ("GET", "/api/v1/namespaces/ns/secrets/tok") => Some((200, token_secret())),
        ("GET", "/api/v1/namespaces/ns/secrets/gw-admin-ca") => Some((200, ca_secret())),
        ("GET", "/api/v1/namespaces/ns/pods") => Some((200, pod_list("127.0.0.1"))),
        ("GET", "/apis/apps/v1/namespaces/ns/statefulsets/gw") => Some((200, statefulset())),
        // The config Secret, created by the operator: the object as created.
        ("POST", "/api/v1/namespaces/ns/secrets") => Some((201, s.body.clone())),
        ("POST", p) if p.contains("/events") => Some((201, s.body.clone())),
        _ => None,
    }
}

/// [`gateway_world`] with no Source or Sink in the namespace, taking every write.
fn gateway_alone(s: &Seen, port: u16) -> Option<(u16, Value)> {
    gateway_world(s, port).or_else(|| match (s.method.as_str(), route(s)) {
        ("GET", "/apis/ankusa.dev/v1alpha1/namespaces/ns/sources") => {
            Some((200, list("SourceList", vec![])))
        }
        ("GET", "/apis/ankusa.dev/v1alpha1/namespaces/ns/sinks") => {
            Some((200, list("SinkList", vec![])))
        }
        ("PATCH", p) if p.ends_with("/gateways/gw/status") => Some((200, gateway_obj(port))),
        ("PATCH", _) => Some((200, s.body.clone())),
        _ => None,
    })
}

/// One Gateway reconcile of `gateway_obj(port)` (which must succeed); every request made.
async fn reconcile_gateway(
    port: u16,
    client: kube::Client,
    seen: &Arc<Mutex<Vec<Seen>>>,
) -> Vec<Seen> {
    let gw: Gateway = serde_json::from_value(gateway_obj(port)).unwrap();
    gateway::reconcile(Arc::new(gw), ctx(client)).await.unwrap();
    seen.lock().unwrap().clone()
}

/// A mocked API server: `handler` answers what it knows; the rest is 404 (recorded).
fn mock(handler: Box<Handler>) -> (kube::Client, Arc<Mutex<Vec<Seen>>>) {
    let (svc, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let rec = seen.clone();
    tokio::spawn(async move {
        while let Some((req, send)) = handle.next_request().await {
            let method = req.method().to_string();
            let path = req
                .uri()
                .path_and_query()
                .map(|p| p.to_string())
                .unwrap_or_default();
            let content_type = req
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            let bytes = req.into_body().collect().await.unwrap().to_bytes();
            let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let s = Seen {
                method,
                path,
                content_type,
                body,
            };
            let (code, answer) = handler(&s).unwrap_or_else(|| {
                (
                    404,
                    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                           "reason": "NotFound", "code": 404, "message": "not found"}),
                )
            });
            rec.lock().unwrap().push(s);
            send.send_response(
                Response::builder()
                    .status(code)
                    .header("content-type", "application/json")
                    .body(Body::from(serde_json::to_vec(&answer).unwrap()))
                    .unwrap(),
            );
        }
    });
    (kube::Client::new(svc, "ns"), seen)
}

fn ctx(client: kube::Client) -> Arc<Ctx> {
    Arc::new(Ctx::new(
        client,
        Arc::new(Metrics::default()),
        Settings::default(),
        "test".into(),
    ))
}

fn replay_job(finalizers: &[&str], deleting: bool, status: Value) -> ReplayJob {
    let mut v = json!({
        "apiVersion": "ankusa.dev/v1alpha1", "kind": "ReplayJob",
        "metadata": {"name": "r", "namespace": "ns", "uid": "0b7f9f0e-1111-4222-8333-444455556666",
                     "generation": 1, "finalizers": finalizers},
        "spec": {"gatewayRef": {"name": "gw"}, "filter": {"source": "orders"}},
        "status": status,
    });
    if deleting {
        v["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    }
    serde_json::from_value(v).unwrap()
}

fn gateway_obj(admin_port: u16) -> Value {
    json!({
        "apiVersion": "ankusa.dev/v1alpha1", "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "ns", "uid": "g-uid", "generation": 1,
                     "resourceVersion": "41"},
        "spec": {"replicas": 2, "ports": {"http": 4000, "admin": admin_port},
                 "adminTokenSecretRef": {"name": "tok", "key": "token"}},
        "status": {"ownership": {"adminCa": owned(&ca_secret())}},
    })
}

/// The ownership record of a Secret the operator wrote (`status.ownership.*`).
fn owned(secret: &Value) -> Value {
    let s: k8s_openapi::api::core::v1::Secret = serde_json::from_value(secret.clone()).unwrap();
    json!({"uid": s.metadata.uid, "sha256": ankusa_operator::ownership::fingerprint(s.data.as_ref())})
}

/// The Gateway's StatefulSet (its pods' controller), 2 replicas.
fn statefulset() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
           "metadata": {"name": "gw", "namespace": "ns", "uid": "sts-uid", "ownerReferences": [
               {"apiVersion": "ankusa.dev/v1alpha1", "kind": "Gateway", "name": "gw", "uid": "g-uid", "controller": true}]},
           "spec": {"replicas": 2, "selector": {}, "serviceName": "gw-pods", "template": {}},
           "status": {"replicas": 2}})
}

/// The controller reference the StatefulSet controller puts on its pods.
fn sts_owner() -> Value {
    json!([{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "gw", "uid": "sts-uid", "controller": true}])
}

/// A Status-write of the Gateway controller (not an ownership record): server-side apply.
fn is_gateway_status_write(s: &Seen) -> bool {
    s.method == "PATCH"
        && s.path.contains("/gateways/gw/status")
        && s.content_type.contains("apply-patch")
}

fn token_secret() -> Value {
    use base64::Engine;
    json!({"apiVersion": "v1", "kind": "Secret",
           "metadata": {"name": "tok", "namespace": "ns", "labels": {"ankusa.dev/usable": "true"}},
           "data": {"token": base64::engine::general_purpose::STANDARD.encode("admin-token-0123456789")}})
}

/// The Gateway's admin CA and the serving certificate its pods present, issued once per test
/// binary the way the operator does.
fn pki() -> &'static ankusa_operator::pki::Issued {
    static PKI: std::sync::OnceLock<ankusa_operator::pki::Issued> = std::sync::OnceLock::new();
    PKI.get_or_init(|| {
        let names = ["gw-pods.ns.svc".to_string(), "*.gw-pods.ns.svc".to_string()];
        ankusa_operator::pki::ensure(None, None, "ca", &names, time::OffsetDateTime::now_utc())
            .unwrap()
    })
}

fn ca_secret() -> Value {
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    json!({"apiVersion": "v1", "kind": "Secret",
           "metadata": {"name": "gw-admin-ca", "namespace": "ns", "uid": "ca-uid", "ownerReferences": [
               {"apiVersion": "ankusa.dev/v1alpha1", "kind": "Gateway", "name": "gw", "uid": "g-uid", "controller": true}]},
           "data": {"ca.crt": b64(&pki().ca.bundle_pem), "ca.key": b64(&pki().ca.key_pem)}})
}

fn pod_list(ip: &str) -> Value {
    let pod = |n: u8| {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": format!("gw-{n}"), "namespace": "ns", "uid": format!("pod-uid-{n}"),
                            "ownerReferences": sts_owner()},
               "spec": {"containers": [{"name": "gateway"}]},
               "status": {"phase": "Running", "podIP": ip,
                          "conditions": [{"type": "Ready", "status": "True"}]}})
    };
    json!({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": [pod(0), pod(1)]})
}

fn paths(seen: &Arc<Mutex<Vec<Seen>>>) -> Vec<String> {
    seen.lock()
        .unwrap()
        .iter()
        .map(|s| format!("{} {}", s.method, s.path.split('?').next().unwrap_or("")))
        .collect()
}

/// A pod admin API that records `PATCH /v1/replays/{id}` bodies and answers GETs.
async fn admin_server(deliveries_pending: i64) -> (u16, Arc<Mutex<Vec<(String, String)>>>) {
    use axum::routing::{get, patch, post};
    let calls = Arc::new(Mutex::new(Vec::new()));
    let c1 = calls.clone();
    let c2 = calls.clone();
    let c3 = calls.clone();
    let app = axum::Router::new()
        .route(
            "/v1/replays/{id}",
            patch(move |axum::extract::Path(id): axum::extract::Path<String>, body: String| async move {
                c1.lock().unwrap().push((format!("PATCH {id}"), body));
                axum::Json(json!({"id": id, "state": "cancelled"}))
            }),
        )
        .route(
            "/v1/sources/{id}/deliveries",
            get(move |axum::extract::Path(id): axum::extract::Path<String>| async move {
                c2.lock().unwrap().push((format!("GET deliveries {id}"), String::new()));
                axum::Json(json!({"pending": deliveries_pending, "dead": 0}))
            }),
        )
        .route(
            "/v1/sources/{id}/dead_letter",
            post(move |axum::extract::Path(id): axum::extract::Path<String>| async move {
                c3.lock().unwrap().push((format!("POST dead_letter {id}"), String::new()));
                axum::Json(json!({"dead_lettered": deliveries_pending, "more": false, "pending": 0, "dead": deliveries_pending}))
            }),
        );
    (serve_tls(app).await, calls)
}

/// Serves `app` over HTTPS with the Gateway's serving certificate, as a pod does.
async fn serve_tls(app: axum::Router) -> u16 {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(pki().leaf.cert_pem.as_bytes())
            .collect::<Result<_, _>>()
            .unwrap();
    let key = PrivateKeyDer::from_pem_slice(pki().leaf.key_pem.as_bytes()).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = l.accept().await {
            let (acceptor, app) = (acceptor.clone(), app.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let svc = hyper_util::service::TowerToHyperService::new(app);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    port
}

#[tokio::test]
async fn replay_job_gets_its_finalizer_first() {
    let (client, seen) = mock(Box::new(|s| {
        (s.method == "PATCH"
            && s.path
                .starts_with("/apis/ankusa.dev/v1alpha1/namespaces/ns/replayjobs/r"))
        .then(|| {
            (
                200,
                serde_json::to_value(replay_job(&["ankusa.dev/cancel-replay"], false, json!({})))
                    .unwrap(),
            )
        })
    }));
    let action = replay::reconcile(Arc::new(replay_job(&[], false, json!({}))), ctx(client))
        .await
        .unwrap();
    assert_eq!(action, Action::await_change());
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].content_type, "application/json-patch+json");
    let ops = seen[0].body.as_array().unwrap();
    assert_eq!(ops[0]["op"], "test");
    assert_eq!(ops[1]["op"], "add");
    assert_eq!(ops[1]["value"], json!(["ankusa.dev/cancel-replay"]));
}

#[tokio::test]
async fn a_finished_replay_job_is_left_alone() {
    let (client, seen) = mock(Box::new(|_| None));
    let rj = replay_job(
        &["ankusa.dev/cancel-replay"],
        false,
        json!({"phase": "Succeeded"}),
    );
    let action = replay::reconcile(Arc::new(rj), ctx(client)).await.unwrap();
    assert_eq!(
        action,
        Action::await_change(),
        "terminal phases do not requeue"
    );
    assert!(paths(&seen).is_empty(), "no API call: {:?}", paths(&seen));
}

#[tokio::test]
async fn deleting_a_finished_replay_job_only_drops_the_finalizer() {
    let (client, seen) = mock(Box::new(|s| {
        (s.method == "PATCH").then(|| {
            (
                200,
                serde_json::to_value(replay_job(&[], true, json!({}))).unwrap(),
            )
        })
    }));
    let rj = replay_job(
        &["ankusa.dev/cancel-replay"],
        true,
        json!({"phase": "Failed"}),
    );
    replay::reconcile(Arc::new(rj), ctx(client)).await.unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    let ops = seen[0].body.as_array().unwrap();
    assert_eq!(
        (ops[0]["op"].as_str(), ops[1]["op"].as_str()),
        (Some("test"), Some("remove"))
    );
    assert_eq!(ops[1]["path"], "/metadata/finalizers/0");
}

#[tokio::test]
async fn deleting_a_running_replay_job_cancels_it_on_every_pod_first() {
    let (port, calls) = admin_server(0).await;
    let (client, seen) = mock(Box::new(move |s| {
        gateway_world(s, port).or_else(|| match (s.method.as_str(), route(s)) {
            ("PATCH", "/apis/ankusa.dev/v1alpha1/namespaces/ns/replayjobs/r") => Some((
                200,
                serde_json::to_value(replay_job(&[], true, json!({}))).unwrap(),
            )),
            _ => None,
        })
    }));
    let running = json!({"phase": "Running", "pods": [
        {"pod": "gw-0", "podUid": "pod-uid-0", "jobId": "0b7f9f0e-1111-4222-8333-444455556666", "state": "running"},
        {"pod": "gw-1", "podUid": "pod-uid-1", "jobId": "0b7f9f0e-1111-4222-8333-444455556666", "state": "running"}]});
    let rj = replay_job(&["ankusa.dev/cancel-replay"], true, running);
    replay::reconcile(Arc::new(rj), ctx(client)).await.unwrap();
    let calls = calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 2, "both pods asked: {calls:?}");
    for (what, body) in &calls {
        assert_eq!(what, "PATCH 0b7f9f0e-1111-4222-8333-444455556666");
        assert_eq!(
            serde_json::from_str::<Value>(body).unwrap(),
            json!({"state": "cancelled"})
        );
    }
    let p = paths(&seen);
    assert_eq!(
        p.last().unwrap(),
        "PATCH /apis/ankusa.dev/v1alpha1/namespaces/ns/replayjobs/r",
        "finalizer removed last: {p:?}"
    );
}

#[tokio::test]
async fn an_unreachable_pod_keeps_the_replay_finalizer() {
    // The pods' IP answers nothing: cancellation cannot be confirmed, the finalizer stays.
    let (client, seen) = mock(Box::new(move |s| gateway_world(s, 9)));
    let running = json!({"phase": "Running", "pods": [
        {"pod": "gw-0", "podUid": "pod-uid-0", "jobId": "j", "state": "running"}]});
    let c = ctx(client);
    let err = replay::reconcile(
        Arc::new(replay_job(&["ankusa.dev/cancel-replay"], true, running)),
        c.clone(),
    )
    .await
    .unwrap_err();
    assert!(err.is_waiting(), "{err}");
    assert!(err.to_string().contains("gw-0"), "{err}");
    assert!(
        !paths(&seen).iter().any(|p| p.starts_with("PATCH")),
        "finalizer kept"
    );
    // The error policy retries soon and counts it as waiting, not as a failure.
    let action = replay::error_policy(Arc::new(replay_job(&[], false, json!({}))), &err, c.clone());
    assert_eq!(action, Action::requeue(Duration::from_secs(3)));
    assert!(c.metrics.render().contains(
        r#"ankusa_operator_reconcile_errors_total{controller="replayjob",error="waiting"} 1"#
    ));
}

fn source_obj(annotations: BTreeMap<&str, &str>) -> Source {
    serde_json::from_value(json!({
        "apiVersion": "ankusa.dev/v1alpha1", "kind": "Source",
        "metadata": {"name": "orders", "namespace": "ns", "uid": "s-uid", "generation": 1,
                     "finalizers": ["ankusa.dev/drain-deliveries"],
                     "deletionTimestamp": "2026-01-01T00:00:00Z",
                     "annotations": annotations},
        "spec": {"gatewayRef": {"name": "gw"}, "sinks": [{"name": "k"}]},
    }))
    .unwrap()
}

#[tokio::test]
async fn a_source_whose_gateway_is_gone_is_released() {
    let (client, seen) = mock(Box::new(|s| {
        (s.method == "PATCH").then(|| {
            (
                200,
                serde_json::to_value(source_obj(BTreeMap::new())).unwrap(),
            )
        })
    }));
    source::reconcile(Arc::new(source_obj(BTreeMap::new())), ctx(client))
        .await
        .unwrap();
    let p = paths(&seen);
    assert_eq!(
        p,
        vec![
            "GET /apis/ankusa.dev/v1alpha1/namespaces/ns/gateways/gw".to_string(),
            "PATCH /apis/ankusa.dev/v1alpha1/namespaces/ns/sources/orders".to_string(),
        ]
    );
}

#[tokio::test]
async fn a_source_with_queued_deliveries_waits_and_says_where() {
    let (port, calls) = admin_server(4).await;
    let (client, seen) = mock(Box::new(move |s| {
        gateway_world(s, port).or_else(|| match (s.method.as_str(), route(s)) {
            ("PATCH", "/apis/ankusa.dev/v1alpha1/namespaces/ns/sources/orders/status") => Some((
                200,
                serde_json::to_value(source_obj(BTreeMap::new())).unwrap(),
            )),
            _ => None,
        })
    }));
    let err = source::reconcile(Arc::new(source_obj(BTreeMap::new())), ctx(client))
        .await
        .unwrap_err();
    assert!(err.is_waiting(), "{err}");
    assert_eq!(calls.lock().unwrap().len(), 2, "asked both pods");
    let seen = seen.lock().unwrap().clone();
    let status = seen
        .iter()
        .find(|s| s.path.contains("/sources/orders/status"))
        .expect("drain status written");
    assert_eq!(status.content_type, "application/apply-patch+yaml");
    assert!(
        status
            .path
            .contains("fieldManager=ankusa-operator%2Fsource"),
        "{}",
        status.path
    );
    let drain = &status.body["status"]["drain"];
    assert_eq!(drain["pending"], 8);
    assert_eq!(drain["phase"], "Draining");
    assert!(
        !seen
            .iter()
            .any(|s| s.method == "PATCH" && s.path.ends_with("/sources/orders")),
        "finalizer kept"
    );
}

#[tokio::test]
async fn the_dead_letter_annotation_moves_them_and_releases_the_source() {
    let (port, calls) = admin_server(4).await;
    let ann = BTreeMap::from([("ankusa.dev/deliveries", "dead_letter")]);
    let obj = serde_json::to_value(source_obj(ann.clone())).unwrap();
    let (client, seen) = mock(Box::new(move |s| {
        gateway_world(s, port).or_else(|| match (s.method.as_str(), route(s)) {
            ("PATCH", "/apis/ankusa.dev/v1alpha1/namespaces/ns/sources/orders") => {
                Some((200, obj.clone()))
            }
            _ => None,
        })
    }));
    source::reconcile(Arc::new(source_obj(ann)), ctx(client))
        .await
        .unwrap();
    let calls = calls.lock().unwrap().clone();
    assert_eq!(
        calls
            .iter()
            .filter(|(c, _)| c == "POST dead_letter orders")
            .count(),
        2
    );
    assert!(
        paths(&seen)
            .contains(&"PATCH /apis/ankusa.dev/v1alpha1/namespaces/ns/sources/orders".to_string())
    );
}

#[tokio::test]
async fn a_missing_admin_token_marks_the_gateway_degraded() {
    let gw: Gateway = serde_json::from_value(gateway_obj(4002)).unwrap();
    let (client, seen) = mock(Box::new(|s| {
        (s.method == "PATCH" && s.path.contains("/gateways/gw/status"))
            .then(|| (200, gateway_obj(4002)))
    }));
    let action = gateway::reconcile(Arc::new(gw), ctx(client)).await.unwrap();
    assert_eq!(action, Action::requeue(Duration::from_secs(30)));
    let seen = seen.lock().unwrap().clone();
    let st = seen
        .iter()
        .find(|s| is_gateway_status_write(s))
        .expect("status written");
    let conds = st.body["status"]["conditions"].as_array().unwrap();
    let degraded = conds.iter().find(|c| c["type"] == "Degraded").unwrap();
    assert_eq!(degraded["status"], "True");
    assert_eq!(degraded["reason"], "AdminTokenMissing");
    // It looks (the foreign-object check reads names), but writes nothing.
    assert!(
        !seen
            .iter()
            .any(|s| s.method != "GET" && s.path.contains("statefulsets")),
        "nothing rolled out without a token"
    );
}

#[tokio::test]
async fn an_api_error_is_returned_and_counted() {
    let gw: Gateway = serde_json::from_value(gateway_obj(4002)).unwrap();
    let (client, _seen) = mock(Box::new(|s| match s.path.split('?').next().unwrap() {
        "/api/v1/namespaces/ns/secrets/tok" => Some((200, token_secret())),
        _ => Some((
            500,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 500, "message": "etcd is sad"}),
        )),
    }));
    let c = ctx(client);
    let err = gateway::reconcile(Arc::new(gw.clone()), c.clone())
        .await
        .unwrap_err();
    assert_eq!(err.label(), "kube", "{err}");
    let action = gateway::error_policy(Arc::new(gw), &err, c.clone());
    assert_eq!(action, Action::requeue(Duration::from_secs(10)));
    let m = c.metrics.render();
    assert!(
        m.contains(
            r#"ankusa_operator_reconcile_errors_total{controller="gateway",error="kube"} 1"#
        ),
        "{m}"
    );
    assert!(
        m.contains(r#"ankusa_operator_reconcile_total{controller="gateway"} 1"#),
        "{m}"
    );
}

const TLS_FAILURE: &str = "redis: not_connected: tls_handshake: invalid peer certificate: \
                           UnknownIssuer (server certificate: subject CN=redis.internal)";

/// A pod admin API whose `GET /v1/status` reports the `redis` Sink `k` of source `orders`
/// failing (`failures` in a row; none when 0), and which takes any config push.
async fn failing_pod(failures: u64) -> u16 {
    use axum::routing::get;
    let failing = if failures == 0 {
        json!([])
    } else {
        json!([{"source": "orders", "sink": 0, "name": "k", "type": "redis",
                "error": TLS_FAILURE, "at": 1_767_225_660_000u64, "since": 1_767_225_600_000u64,
                "failures": failures, "breaker_open": false}])
    };
    let app = axum::Router::new()
        .route(
            "/v1/status",
            get(move || {
                let failing = failing.clone();
                async move {
                    axum::Json(json!({"instance": "gw-0", "config_hash": "old",
                                      "failing_sinks": failing}))
                }
            }),
        )
        .route(
            "/v1/config",
            axum::routing::put(|| async {
                axum::Json(json!({"changed": true, "config_hash": "new", "generation": 2}))
            }),
        );
    serve_tls(app).await
}

fn list(kind: &str, items: Vec<Value>) -> Value {
    json!({"apiVersion": "ankusa.dev/v1alpha1", "kind": kind, "metadata": {}, "items": items})
}

fn orders_source() -> Value {
    json!({"apiVersion": "ankusa.dev/v1alpha1", "kind": "Source",
           "metadata": {"name": "orders", "namespace": "ns", "uid": "s-uid", "generation": 1},
           "spec": {"gatewayRef": {"name": "gw"}, "sinks": [{"name": "k"}]}})
}

fn redis_sink(status: Value) -> Value {
    json!({"apiVersion": "ankusa.dev/v1alpha1", "kind": "Sink",
           "metadata": {"name": "k", "namespace": "ns", "uid": "k-uid", "generation": 1,
                        "finalizers": ["ankusa.dev/sink-in-use"]},
           "spec": {"type": "redis",
                    "redis": {"url": "rediss://redis.internal:6380", "channel": "hooks"}},
           "status": status})
}

/// Runs a whole Gateway reconcile against pods reporting `failures`; the Gateway status it
/// wrote.
async fn gateway_status_with(failures: u64) -> Value {
    let port = failing_pod(failures).await;
    let (client, seen) = mock(Box::new(move |s| {
        gateway_world(s, port).or_else(|| match (s.method.as_str(), route(s)) {
            ("GET", "/apis/ankusa.dev/v1alpha1/namespaces/ns/sources") => {
                Some((200, list("SourceList", vec![orders_source()])))
            }
            ("GET", "/apis/ankusa.dev/v1alpha1/namespaces/ns/sinks") => {
                Some((200, list("SinkList", vec![redis_sink(json!({}))])))
            }
            ("PATCH", p) if p.ends_with("/gateways/gw/status") => Some((200, gateway_obj(port))),
            ("PATCH", p) if p.ends_with("/sources/orders/status") => Some((200, orders_source())),
            // Server-side apply of what the Gateway owns: the object as applied.
            ("PATCH", _) => Some((200, s.body.clone())),
            _ => None,
        })
    }));
    let seen = reconcile_gateway(port, client, &seen).await;
    seen.iter()
        .find(|s| is_gateway_status_write(s))
        .expect("Gateway status written")
        .body["status"]
        .clone()
}

/// Runs a Sink reconcile of `k` (with `old` status) seeing the Gateway with `gw_status`;
/// the Sink status written (if any) and the events (type, reason, note).
async fn sink_reconcile(
    gw_status: Value,
    old: Value,
) -> (Option<Value>, Vec<(String, String, String)>) {
    let mut gw = gateway_obj(4002);
    gw["status"] = gw_status;
    let (client, seen) = mock(Box::new(move |s| match (s.method.as_str(), route(s)) {
        ("GET", "/apis/ankusa.dev/v1alpha1/namespaces/ns/sources") => {
            Some((200, list("SourceList", vec![orders_source()])))
        }
        ("GET", "/apis/ankusa.dev/v1alpha1/namespaces/ns/gateways") => {
            Some((200, list("GatewayList", vec![gw.clone()])))
        }
        ("PATCH", "/apis/ankusa.dev/v1alpha1/namespaces/ns/sinks/k/status") => {
            Some((200, redis_sink(json!({}))))
        }
        ("POST", p) if p.contains("/events") => Some((201, s.body.clone())),
        _ => None,
    }));
    let sink: ankusa_crds::Sink = serde_json::from_value(redis_sink(old)).unwrap();
    sink::reconcile(Arc::new(sink), ctx(client)).await.unwrap();
    let seen = seen.lock().unwrap().clone();
    let status = seen
        .iter()
        .find(|s| s.path.contains("/sinks/k/status"))
        .map(|s| s.body["status"].clone());
    let events = seen
        .iter()
        .filter(|s| s.method == "POST" && s.path.contains("/events"))
        .map(|s| {
            let text = |k: &str| s.body[k].as_str().unwrap_or_default().to_string();
            (text("type"), text("reason"), text("note"))
        })
        .collect();
    (status, events)
}

/// The condition of type `t` in `status` (which must carry it).
fn condition(status: &Value, t: &str) -> Value {
    status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == t)
        .unwrap_or_else(|| panic!("no condition {t} in {status}"))
        .clone()
}

fn degraded(status: &Value) -> Value {
    condition(status, "Degraded")
}

#[tokio::test]
async fn a_pods_sink_failure_reaches_the_sink_status_once_as_an_event() {
    // The Gateway controller reads the failure from both pods' status.
    let gw_status = gateway_status_with(4).await;
    let k = &gw_status["sinks"][0];
    assert_eq!(k["name"], "k", "{gw_status}");
    assert_eq!(k["failingPods"], 2);
    let errors = k["deliveryErrors"].as_array().unwrap();
    assert_eq!(errors.len(), 2);
    assert_eq!(errors[0]["pod"], "gw-0");
    assert_eq!(errors[1]["pod"], "gw-1");
    assert_eq!(errors[0]["error"], TLS_FAILURE);
    assert_eq!(errors[0]["failures"], 4);
    assert_eq!(errors[0]["since"], "2026-01-01T00:00:00Z");

    // The Sink controller makes it the Sink's Degraded condition, and says so once.
    let (status, events) = sink_reconcile(gw_status.clone(), json!({})).await;
    let status = status.expect("Sink status written");
    let d = degraded(&status);
    assert_eq!(d["status"], "True");
    assert_eq!(d["reason"], "DeliveryFailing");
    assert_eq!(
        d["message"],
        format!("gw/gw-0: {TLS_FAILURE} (4 failures); gw/gw-1: {TLS_FAILURE} (4 failures)")
    );
    assert_eq!(status["failingPods"], 2);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        (events[0].0.as_str(), events[0].1.as_str()),
        ("Warning", "DeliveryFailing")
    );
    assert!(events[0].2.contains("tls_handshake"), "{events:?}");

    // The next poll sees the same: nothing written, no second event.
    let (again, events) = sink_reconcile(gw_status, status.clone()).await;
    assert!(again.is_none() && events.is_empty(), "{again:?} {events:?}");

    // The pods deliver again: Degraded clears, with a Normal event.
    let healed = gateway_status_with(0).await;
    assert!(
        healed["sinks"][0].get("deliveryErrors").is_none(),
        "{healed}"
    );
    let (status, events) = sink_reconcile(healed, status).await;
    let status = status.expect("Sink status written");
    assert_eq!(degraded(&status)["status"], "False");
    assert_eq!(status["failingPods"], 0);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        (events[0].0.as_str(), events[0].1.as_str()),
        ("Normal", "Delivering")
    );
}

/// A pod admin API whose `GET /v1/status` adds `extra` to a plain status, and which takes any
/// config push.
async fn status_pod(extra: Value) -> u16 {
    use axum::routing::get;
    let mut status = json!({"instance": "gw-0", "config_hash": "old", "failing_sinks": []});
    for (k, v) in extra.as_object().unwrap() {
        status[k] = v.clone();
    }
    let app = axum::Router::new()
        .route(
            "/v1/status",
            get(move || {
                let status = status.clone();
                async move { axum::Json(status) }
            }),
        )
        .route(
            "/v1/config",
            axum::routing::put(|| async {
                axum::Json(json!({"changed": true, "config_hash": "new", "generation": 2}))
            }),
        );
    serve_tls(app).await
}

fn quarantining_source() -> Value {
    json!({"apiVersion": "ankusa.dev/v1alpha1", "kind": "Source",
           "metadata": {"name": "orders", "namespace": "ns", "uid": "s-uid", "generation": 1},
           "spec": {"gatewayRef": {"name": "gw"}, "onVerifyFailure": "quarantine",
                    "sinks": [{"name": "k"}]}})
}

/// One Gateway reconcile with both pods answering `extra` in their status and Source
/// `orders` as `source`; every request the operator made.
async fn gateway_reconcile_seeing(extra: Value, source: Value) -> Vec<Seen> {
    let port = status_pod(extra).await;
    let (client, seen) = mock(Box::new(move |s| {
        gateway_world(s, port).or_else(|| match (s.method.as_str(), route(s)) {
            ("GET", "/apis/ankusa.dev/v1alpha1/namespaces/ns/sources") => {
                Some((200, list("SourceList", vec![source.clone()])))
            }
            ("GET", "/apis/ankusa.dev/v1alpha1/namespaces/ns/sinks") => {
                Some((200, list("SinkList", vec![redis_sink(json!({}))])))
            }
            ("PATCH", p) if p.ends_with("/gateways/gw/status") => Some((200, gateway_obj(port))),
            ("PATCH", p) if p.ends_with("/sources/orders/status") => Some((200, source.clone())),
            ("PATCH", _) => Some((200, s.body.clone())),
            _ => None,
        })
    }));
    reconcile_gateway(port, client, &seen).await
}

fn events_of(seen: &[Seen]) -> Vec<(String, String, String)> {
    seen.iter()
        .filter(|s| s.method == "POST" && s.path.contains("/events"))
        .map(|s| {
            let text = |k: &str| s.body[k].as_str().unwrap_or_default().to_string();
            (text("type"), text("reason"), text("note"))
        })
        .collect()
}

#[tokio::test]
async fn one_status_poll_fills_the_sources_quarantine_and_the_pods_archive_and_dlq() {
    let pen = json!({"entries": 6, "bytes": 850, "max_bytes": 1000,
                     "oldest_received_at": 1_767_225_600_000u64,
                     "sources": [{"source": "orders", "entries": 5, "bytes": 800,
                                  "oldest_received_at": 1_767_225_601_000u64},
                                 {"source": "other", "entries": 1, "bytes": 50}]});
    let extra = json!({
        "quarantine": pen,
        "archive": {"store": "s3", "pending": 3, "segments": 2, "archived": 40,
                    "last_upload_at": 1_767_225_660_000u64, "failures": 4,
                    "last_error": "s3: PUT archive/v1/...: status 403 AccessDenied"},
        "dlq": {"rows": 12, "bytes": 3400, "full": true},
    });
    let seen = gateway_reconcile_seeing(extra, quarantining_source()).await;
    // Each pod was asked once.
    let src = seen
        .iter()
        .find(|s| s.path.contains("/sources/orders/status"))
        .expect("Source status written");
    assert!(
        src.path.contains("fieldManager=ankusa-operator%2Fgateway"),
        "{}",
        src.path
    );
    let q = &src.body["status"]["quarantine"];
    assert_eq!(
        (
            q["entries"].as_i64(),
            q["bytes"].as_i64(),
            q["podsWithEntries"].as_i64()
        ),
        (Some(10), Some(1600), Some(2)),
        "{q}"
    );
    assert_eq!(q["oldest"], "2026-01-01T00:00:01Z");
    let pods = q["pods"].as_array().unwrap();
    assert_eq!(pods.len(), 2);
    assert_eq!(pods[0]["pod"], "gw-0");
    assert_eq!(
        (
            pods[0]["entries"].as_i64(),
            pods[0]["penBytes"].as_i64(),
            pods[0]["penMaxBytes"].as_i64()
        ),
        (Some(5), Some(850), Some(1000))
    );
    let near = condition(&src.body["status"], "QuarantineNearFull");
    assert_eq!(near["status"], "True");
    assert!(
        near["message"]
            .as_str()
            .unwrap()
            .contains("gw/gw-0: 850 bytes of 1000 bytes (85%)"),
        "{near}"
    );
    let events = events_of(&seen);
    assert!(
        events.iter().any(|(t, r, n)| t == "Warning"
            && r == "Quarantined"
            && n.starts_with("10 hooks failed verification")),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|(t, r, _)| t == "Warning" && r == "QuarantineNearFull"),
        "{events:?}"
    );

    let gw = seen
        .iter()
        .find(|s| is_gateway_status_write(s))
        .expect("Gateway status written");
    let p0 = &gw.body["status"]["pods"][0];
    assert_eq!(p0["archive"]["pending"], 3);
    assert_eq!(p0["archive"]["failures"], 4);
    assert_eq!(p0["archive"]["lastUploadAt"], "2026-01-01T00:01:00Z");
    assert_eq!(p0["dlq"], json!({"rows": 12, "bytes": 3400, "full": true}));
    let degraded = degraded(&gw.body["status"]);
    assert_eq!(degraded["reason"], "DlqFull", "{degraded}");

    // A source that does not quarantine and has no entries shows nothing of it.
    let seen = gateway_reconcile_seeing(
        json!({"quarantine": {"entries": 0, "bytes": 0, "max_bytes": 1000}}),
        orders_source(),
    )
    .await;
    let src = seen
        .iter()
        .find(|s| s.path.contains("/sources/orders/status"))
        .expect("Source status written");
    assert!(
        src.body["status"].get("quarantine").is_none(),
        "{}",
        src.body
    );
    assert!(
        !src.body["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "QuarantineNearFull")
    );
    assert!(events_of(&seen).iter().all(|(_, r, _)| r != "Quarantined"));
}

/// A pod admin API that records `POST /v1/replays` bodies and answers each with `view` (the
/// job id taken from the request).
async fn replay_pod(view: Value) -> (u16, Arc<Mutex<Vec<Value>>>) {
    use axum::routing::post;
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let b = bodies.clone();
    let app = axum::Router::new().route(
        "/v1/replays",
        post(move |axum::Json(body): axum::Json<Value>| {
            let mut view = view.clone();
            let b = b.clone();
            async move {
                view["id"] = body["job_id"].clone();
                b.lock().unwrap().push(body);
                (axum::http::StatusCode::CREATED, axum::Json(view))
            }
        }),
    );
    (serve_tls(app).await, bodies)
}

/// One reconcile of a ReplayJob with `spec` (finalizer present) against pods answering `view`:
/// the bodies the pods got and the status written.
async fn replay_reconcile(spec: Value, view: Value) -> (Vec<Value>, Value) {
    let (port, bodies) = replay_pod(view).await;
    let rj = json!({
        "apiVersion": "ankusa.dev/v1alpha1", "kind": "ReplayJob",
        "metadata": {"name": "r", "namespace": "ns", "uid": "0b7f9f0e-1111-4222-8333-444455556666",
                     "generation": 1, "finalizers": ["ankusa.dev/cancel-replay"]},
        "spec": spec,
    });
    let answer = rj.clone();
    let (client, seen) = mock(Box::new(move |s| {
        gateway_world(s, port).or_else(|| match (s.method.as_str(), route(s)) {
            ("GET", "/apis/ankusa.dev/v1alpha1/namespaces/ns/sources") => {
                Some((200, list("SourceList", vec![orders_source()])))
            }
            ("PATCH", "/apis/ankusa.dev/v1alpha1/namespaces/ns/replayjobs/r/status") => {
                Some((200, answer.clone()))
            }
            _ => None,
        })
    }));
    let rj: ReplayJob = serde_json::from_value(rj).unwrap();
    replay::reconcile(Arc::new(rj), ctx(client)).await.unwrap();
    let status = seen
        .lock()
        .unwrap()
        .iter()
        .find(|s| s.path.contains("/replayjobs/r/status"))
        .expect("status written")
        .body["status"]
        .clone();
    let bodies = bodies.lock().unwrap().clone();
    (bodies, status)
}

#[tokio::test]
async fn an_archive_replay_sends_its_window_and_fails_on_a_corrupt_segment() {
    let spec = json!({"gatewayRef": {"name": "gw"}, "kind": "archive", "filter": {"source": "orders"},
                      "archive": {"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T06:00:00Z", "sinks": ["k"]}});
    let view = json!({"kind": "archive", "state": "completed", "moved": 6, "scanned": 9, "released": 6, "skipped": 2,
                      "corrupt_segments": 1, "delivered": 6, "failed": 0, "outstanding": 0, "done": true});
    let (bodies, st) = replay_reconcile(spec, view).await;
    assert_eq!(bodies.len(), 2, "one per pod");
    for b in &bodies {
        assert_eq!(
            b,
            &json!({"job_id": "0b7f9f0e-1111-4222-8333-444455556666", "kind": "archive",
                    "filter": {"source_id": "orders"},
                    "from": 1_767_225_600_000u64, "to": 1_767_247_200_000u64, "sinks": [0]})
        );
    }
    assert_eq!(st["phase"], "Failed", "{st:#}");
    assert!(
        st["message"]
            .as_str()
            .unwrap()
            .starts_with("2 archive segments on gw-0, gw-1 did not check out"),
        "{st:#}"
    );
    assert_eq!(
        (
            st["moved"].as_i64(),
            st["released"].as_i64(),
            st["skipped"].as_i64(),
            st["corruptSegments"].as_i64()
        ),
        (Some(12), Some(12), Some(4), Some(2))
    );
    for p in st["pods"].as_array().unwrap() {
        assert_eq!(
            (
                p["moved"].as_i64(),
                p["released"].as_i64(),
                p["skipped"].as_i64(),
                p["corruptSegments"].as_i64()
            ),
            (Some(6), Some(6), Some(2), Some(1)),
            "{p}"
        );
    }
    assert_eq!(st["request"]["kind"], "archive");
}

#[tokio::test]
async fn a_quarantine_replay_counts_what_it_released_and_skipped() {
    let spec = json!({"gatewayRef": {"name": "gw"}, "kind": "quarantine",
                      "filter": {"source": "orders", "since": "2026-01-01T00:00:00Z"}});
    let view = json!({"kind": "quarantine", "state": "completed", "moved": 4, "scanned": 7, "released": 4,
                      "skipped": 3, "delivered": 4, "failed": 0, "outstanding": 0, "done": true});
    let (bodies, st) = replay_reconcile(spec, view).await;
    assert_eq!(
        bodies[0],
        json!({"job_id": "0b7f9f0e-1111-4222-8333-444455556666", "kind": "quarantine",
               "filter": {"source_id": "orders", "since": 1_767_225_600_000u64}})
    );
    assert_eq!(st["phase"], "Succeeded", "{st:#}");
    assert_eq!(
        (st["released"].as_i64(), st["skipped"].as_i64()),
        (Some(8), Some(6))
    );
    assert!(st.get("corruptSegments").is_none(), "{st:#}");
    let m = st["message"].as_str().unwrap();
    assert!(
        m.starts_with("8 quarantined hooks released (8 deliveries) on 2 pods; 6 skipped"),
        "{m}"
    );
    for p in st["pods"].as_array().unwrap() {
        assert_eq!(
            (p["released"].as_i64(), p["skipped"].as_i64()),
            (Some(4), Some(3)),
            "{p}"
        );
    }
}

/// Pods `gw-0` (Pending, its claim gone) and `gw-1` (ready, its claim there), both with their
/// data volume claims.
fn pods_with_claims(ip: &str) -> Value {
    let pod = |n: u8, ready: bool| {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": format!("gw-{n}"), "namespace": "ns", "uid": format!("pod-uid-{n}"),
                            "ownerReferences": sts_owner()},
               "spec": {"containers": [{"name": "gateway"}],
                        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": format!("data-gw-{n}")}}]},
               "status": {"phase": if ready { "Running" } else { "Pending" }, "podIP": ip,
                          "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}})
    };
    json!({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": [pod(0, false), pod(1, true)]})
}

#[tokio::test]
async fn a_pod_whose_volume_claim_is_gone_is_deleted_so_it_comes_back_on_a_new_one() {
    let port = failing_pod(0).await;
    let (client, seen) = mock(Box::new(move |s| {
        match (s.method.as_str(), route(s)) {
            ("GET", "/api/v1/namespaces/ns/pods") => {
                return Some((200, pods_with_claims("127.0.0.1")));
            }
            ("GET", "/api/v1/namespaces/ns/persistentvolumeclaims") => {
                return Some((
                    200,
                    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaimList", "metadata": {},
                    "items": [{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                               "metadata": {"name": "data-gw-1", "namespace": "ns", "uid": "c-1"}}]}),
                ));
            }
            ("DELETE", "/api/v1/namespaces/ns/pods/gw-0") => return Some((200, s.body.clone())),
            _ => {}
        }
        gateway_alone(s, port)
    }));
    let seen = reconcile_gateway(port, client, &seen).await;
    let deletes: Vec<&Seen> = seen.iter().filter(|s| s.method == "DELETE").collect();
    assert_eq!(
        deletes.len(),
        1,
        "only gw-0: {:?}",
        deletes.iter().map(|s| &s.path).collect::<Vec<_>>()
    );
    assert!(
        deletes[0]
            .path
            .starts_with("/api/v1/namespaces/ns/pods/gw-0")
    );
    assert_eq!(
        deletes[0].body["preconditions"]["uid"], "pod-uid-0",
        "only the pod that was read: {}",
        deletes[0].body
    );
    // gw-0's claim was asked for by name before the verdict (it could exist unlabelled).
    assert!(seen.iter().any(|s| s.method == "GET"
        && route(s) == "/api/v1/namespaces/ns/persistentvolumeclaims/data-gw-0"));
    let events = events_of(&seen);
    assert!(
        events.iter().any(|(t, r, n)| t == "Warning"
            && r == "VolumeReplaced"
            && n.contains("gw-0")
            && n.contains("data-gw-0")),
        "{events:?}"
    );
}

// Issue 25: what the operator trusts is what it recorded writing, not an owner reference; pods
// are the StatefulSet's within its ordinals; the admin client follows no redirect.

/// A namespace a test can plant in: Secrets by name (a POST creates one with a fresh uid, or
/// answers 409 when the name is taken; an apply stores the body; a GET answers what is there),
/// and the Gateway `gw` (generated admin token) whose status takes the operator's writes:
/// ownership records as JSON merge patches with their `resourceVersion` precondition, the
/// Gateway controller's status by server-side apply.
struct World {
    secrets: Mutex<BTreeMap<String, Value>>,
    gateway: Mutex<Value>,
    uids: std::sync::atomic::AtomicU64,
}

fn fresh_gateway() -> Value {
    json!({
        "apiVersion": "ankusa.dev/v1alpha1", "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "ns", "uid": "g-uid", "generation": 1,
                     "resourceVersion": "1"},
        "spec": {"replicas": 1, "ports": {"http": 4000, "admin": 4002}},
    })
}

/// RFC 7386 JSON merge patch.
fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
}

impl World {
    fn new(gateway: Value, secrets: &[Value]) -> Arc<World> {
        Arc::new(World {
            secrets: Mutex::new(
                secrets
                    .iter()
                    .map(|s| {
                        (
                            s["metadata"]["name"].as_str().unwrap().to_string(),
                            s.clone(),
                        )
                    })
                    .collect(),
            ),
            gateway: Mutex::new(gateway),
            uids: Default::default(),
        })
    }

    fn gateway(&self) -> Gateway {
        serde_json::from_value(self.gateway.lock().unwrap().clone()).unwrap()
    }

    fn bump(g: &mut Value) {
        let rv: u64 = g["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        g["metadata"]["resourceVersion"] = json!((rv + 1).to_string());
    }

    fn answer(&self, s: &Seen) -> Option<(u16, Value)> {
        let secret_path = "/api/v1/namespaces/ns/secrets";
        match (s.method.as_str(), route(s)) {
            ("GET", "/apis/ankusa.dev/v1alpha1/namespaces/ns/gateways/gw")
            | ("GET", "/apis/ankusa.dev/v1alpha1/namespaces/ns/gateways/gw/status") => {
                Some((200, self.gateway.lock().unwrap().clone()))
            }
            ("PATCH", "/apis/ankusa.dev/v1alpha1/namespaces/ns/gateways/gw/status") => {
                let mut g = self.gateway.lock().unwrap();
                if s.content_type.contains("merge-patch") {
                    let want = &s.body["metadata"]["resourceVersion"];
                    if !want.is_null() && *want != g["metadata"]["resourceVersion"] {
                        return Some((
                            409,
                            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                   "reason": "Conflict", "code": 409, "message": "conflict"}),
                        ));
                    }
                    let mut patch = s.body.clone();
                    patch.as_object_mut().unwrap().remove("metadata");
                    merge(&mut g, &patch);
                } else {
                    let ownership = g["status"]["ownership"].clone();
                    g["status"] = s.body["status"].clone();
                    if !ownership.is_null() {
                        g["status"]["ownership"] = ownership;
                    }
                }
                World::bump(&mut g);
                Some((200, g.clone()))
            }
            ("GET", p) if p.starts_with(&format!("{secret_path}/")) => {
                let name = p.rsplit('/').next().unwrap();
                self.secrets
                    .lock()
                    .unwrap()
                    .get(name)
                    .map(|v| (200, v.clone()))
            }
            ("POST", p) if p == secret_path => {
                let mut body = s.body.clone();
                let name = body["metadata"]["name"].as_str().unwrap().to_string();
                let mut secrets = self.secrets.lock().unwrap();
                if secrets.contains_key(&name) {
                    return Some((
                        409,
                        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                               "reason": "AlreadyExists", "code": 409, "message": "exists"}),
                    ));
                }
                let n = self.uids.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                body["metadata"]["uid"] = json!(format!("created-{n}"));
                secrets.insert(name, body.clone());
                Some((201, body))
            }
            ("PATCH", p) if p.starts_with(&format!("{secret_path}/")) => {
                let name = p.rsplit('/').next().unwrap().to_string();
                let mut secrets = self.secrets.lock().unwrap();
                let mut body = s.body.clone();
                body["metadata"]["uid"] = secrets
                    .get(&name)
                    .map(|o| o["metadata"]["uid"].clone())
                    .unwrap_or(json!("applied"));
                secrets.insert(name, body.clone());
                Some((200, body))
            }
            ("GET", "/apis/ankusa.dev/v1alpha1/namespaces/ns/sources") => {
                Some((200, list("SourceList", vec![])))
            }
            ("GET", "/apis/ankusa.dev/v1alpha1/namespaces/ns/sinks") => {
                Some((200, list("SinkList", vec![])))
            }
            ("POST", p) if p.contains("/events") => Some((201, s.body.clone())),
            // Services, NetworkPolicy, StatefulSet: the object as applied.
            ("PATCH", _) => Some((200, s.body.clone())),
            _ => None,
        }
    }
}

/// One Gateway reconcile of the world's Gateway as a watch cache would hand it over.
async fn reconcile_world(world: &Arc<World>) -> (Action, Vec<Seen>) {
    let w = world.clone();
    let (client, seen) = mock(Box::new(move |s| w.answer(s)));
    let action = gateway::reconcile(Arc::new(world.gateway()), ctx(client))
        .await
        .unwrap();
    let seen = seen.lock().unwrap().clone();
    (action, seen)
}

/// A Secret `name` holding `token`, with a controller reference to the Gateway (anyone who
/// may create Secrets and read the Gateway's uid can write one).
fn planted_token(token: &str) -> Value {
    use base64::Engine;
    json!({"apiVersion": "v1", "kind": "Secret",
           "metadata": {"name": "gw-admin-token", "namespace": "ns", "uid": "planted-uid",
                        "ownerReferences": [{"apiVersion": "ankusa.dev/v1alpha1", "kind": "Gateway",
                                             "name": "gw", "uid": "g-uid", "controller": true}]},
           "data": {"token": base64::engine::general_purpose::STANDARD.encode(token)}})
}

fn foreign_condition(world: &World) -> Value {
    let g = world.gateway.lock().unwrap().clone();
    g["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Degraded").cloned())
        .unwrap_or(Value::Null)
}

fn writes_of_secrets(seen: &[Seen]) -> Vec<String> {
    seen.iter()
        .filter(|s| s.method != "GET" && route(s).starts_with("/api/v1/namespaces/ns/secrets"))
        .map(|s| format!("{} {}", s.method, route(s)))
        .collect()
}

#[tokio::test]
async fn a_secret_planted_before_the_first_pass_is_refused_not_adopted() {
    let world = World::new(fresh_gateway(), &[planted_token("attacker-token")]);
    let (action, seen) = reconcile_world(&world).await;
    assert_eq!(action, Action::requeue(Duration::from_secs(10)));
    let degraded = foreign_condition(&world);
    assert_eq!(degraded["reason"], "ForeignObject", "{degraded:#}");
    let msg = degraded["message"].as_str().unwrap();
    assert!(
        msg.contains("Secret gw-admin-token") && msg.contains("not created by the operator"),
        "{msg}"
    );
    // Nothing written: no Secret, no StatefulSet; the planted one is untouched.
    assert_eq!(writes_of_secrets(&seen), Vec::<String>::new());
    assert!(
        !seen
            .iter()
            .any(|s| s.method == "PATCH" && s.path.contains("statefulsets"))
    );
    assert_eq!(
        world.secrets.lock().unwrap()["gw-admin-token"],
        planted_token("attacker-token")
    );
    let events = events_of(&seen);
    assert!(
        events.iter().any(|(t, r, n)| t == "Warning"
            && r == "ForeignObject"
            && n.contains("gw-admin-token")),
        "{events:?}"
    );
    assert!(!format!("{seen:?}").contains("attacker-token"));
}

#[tokio::test]
async fn the_operator_records_before_it_creates_and_refuses_a_replanted_token() {
    let world = World::new(fresh_gateway(), &[]);
    let (_, seen) = reconcile_world(&world).await;
    // The token Secret was created, and its hash recorded before it was.
    let post = seen
        .iter()
        .position(|s| s.method == "POST" && s.body["metadata"]["name"] == "gw-admin-token")
        .expect("the token Secret created");
    let posted: k8s_openapi::api::core::v1::Secret =
        serde_json::from_value(seen[post].body.clone()).unwrap();
    let fp = ankusa_operator::ownership::fingerprint(posted.data.as_ref());
    assert!(
        seen[..post]
            .iter()
            .any(|s| s.content_type.contains("merge-patch")
                && s.body["status"]["ownership"]["adminToken"]["sha256"] == fp.as_str()),
        "recorded ahead of the create"
    );
    let own = world.gateway.lock().unwrap()["status"]["ownership"].clone();
    assert_eq!(own["adminToken"]["sha256"], fp.as_str(), "{own:#}");
    assert_eq!(
        own["adminToken"]["uid"],
        world.secrets.lock().unwrap()["gw-admin-token"]["metadata"]["uid"]
    );
    assert!(own["adminToken"]["previousSha256"].is_null(), "{own:#}");
    for role in ["adminCa", "config", "scrape"] {
        assert!(own[role]["sha256"].is_string(), "{role}: {own:#}");
    }
    // The pods' config carries the token the operator created.
    let config = world.secrets.lock().unwrap()["gw-config"].clone();
    let token = ankusa_operator::ownership::secret_text(&posted, "token").unwrap();
    let yaml = String::from_utf8(
        serde_json::from_value::<k8s_openapi::ByteString>(config["data"]["gw-0.yaml"].clone())
            .unwrap()
            .0,
    )
    .unwrap();
    assert!(yaml.contains(&token));

    // A second pass (the operator restarted, say) finds everything its own: no write.
    let (_, seen) = reconcile_world(&world).await;
    assert_eq!(writes_of_secrets(&seen), Vec::<String>::new());
    assert_ne!(foreign_condition(&world)["reason"], "ForeignObject");

    // Deleted and re-planted with a forged controller reference: refused, never used.
    world
        .secrets
        .lock()
        .unwrap()
        .insert("gw-admin-token".into(), planted_token("attacker-token"));
    let (action, seen) = reconcile_world(&world).await;
    assert_eq!(action, Action::requeue(Duration::from_secs(10)));
    let degraded = foreign_condition(&world);
    assert_eq!(degraded["reason"], "ForeignObject", "{degraded:#}");
    assert!(
        degraded["message"].as_str().unwrap().contains("replaced"),
        "{degraded:#}"
    );
    assert_eq!(writes_of_secrets(&seen), Vec::<String>::new());
    let config = world.secrets.lock().unwrap()["gw-config"].to_string();
    use base64::Engine;
    assert!(!config.contains(&base64::engine::general_purpose::STANDARD.encode("attacker-token")));

    // Its owner deletes it: the operator writes a fresh token.
    world.secrets.lock().unwrap().remove("gw-admin-token");
    reconcile_world(&world).await;
    let fresh = world.secrets.lock().unwrap()["gw-admin-token"].clone();
    let fresh: k8s_openapi::api::core::v1::Secret = serde_json::from_value(fresh).unwrap();
    assert_ne!(
        ankusa_operator::ownership::secret_text(&fresh, "token"),
        Some(token)
    );
    assert_ne!(foreign_condition(&world)["reason"], "ForeignObject");
}

#[tokio::test]
async fn a_ca_or_config_changed_in_place_is_refused() {
    let world = World::new(fresh_gateway(), &[]);
    reconcile_world(&world).await;
    for name in ["gw-admin-ca", "gw-config"] {
        let before = world.secrets.lock().unwrap()[name].clone();
        let mut changed = before.clone();
        changed["data"]["extra"] = json!("cGxhbnRlZA==");
        world
            .secrets
            .lock()
            .unwrap()
            .insert(name.into(), changed.clone());
        let (_, seen) = reconcile_world(&world).await;
        let degraded = foreign_condition(&world);
        assert_eq!(degraded["reason"], "ForeignObject", "{name}: {degraded:#}");
        assert!(
            degraded["message"]
                .as_str()
                .unwrap()
                .contains(&format!("Secret {name} "))
        );
        assert_eq!(
            writes_of_secrets(&seen),
            Vec::<String>::new(),
            "{name} left alone"
        );
        assert_eq!(world.secrets.lock().unwrap()[name], changed);
        world.secrets.lock().unwrap().insert(name.into(), before);
        reconcile_world(&world).await;
        assert_ne!(
            foreign_condition(&world)["reason"],
            "ForeignObject",
            "{name}: {:#}",
            foreign_condition(&world)
        );
    }
}

#[tokio::test]
async fn an_admin_token_secret_that_did_not_opt_in_is_not_used() {
    let mut tok = token_secret();
    tok["metadata"]["labels"] = json!({});
    let (client, seen) = mock(Box::new(move |s| match (s.method.as_str(), route(s)) {
        ("GET", "/api/v1/namespaces/ns/secrets/tok") => Some((200, tok.clone())),
        ("PATCH", p) if p.ends_with("/gateways/gw/status") => Some((200, gateway_obj(4002))),
        _ => None,
    }));
    let gw: Gateway = serde_json::from_value(gateway_obj(4002)).unwrap();
    gateway::reconcile(Arc::new(gw), ctx(client)).await.unwrap();
    let seen = seen.lock().unwrap().clone();
    let st = seen
        .iter()
        .find(|s| is_gateway_status_write(s))
        .expect("status written");
    let degraded = degraded(&st.body["status"]);
    assert_eq!(degraded["reason"], "AdminTokenMissing");
    assert!(
        degraded["message"]
            .as_str()
            .unwrap()
            .contains("adminTokenSecretRef: Secret tok is not labelled ankusa.dev/usable=true"),
        "{degraded:#}"
    );
}

#[tokio::test]
async fn a_planted_pod_beyond_the_replicas_gets_no_config_and_no_call() {
    let port = failing_pod(0).await;
    let (client, seen) = mock(Box::new(move |s| {
        if s.method == "GET" && route(s) == "/api/v1/namespaces/ns/pods" {
            let mut pods = pod_list("127.0.0.1");
            let mut planted = pods["items"][0].clone();
            planted["metadata"]["name"] = json!("gw-99999");
            planted["metadata"]["uid"] = json!("planted");
            pods["items"].as_array_mut().unwrap().push(planted);
            return Some((200, pods));
        }
        gateway_alone(s, port)
    }));
    let seen = reconcile_gateway(port, client, &seen).await;
    let config = seen
        .iter()
        .find(|s| s.method == "POST" && s.body["metadata"]["name"] == "gw-config")
        .expect("config Secret created");
    let keys: Vec<&String> = config.body["data"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["gw-0.yaml", "gw-1.yaml"]);
    let st = seen.iter().find(|s| is_gateway_status_write(s)).unwrap();
    let polled: Vec<&str> = st.body["status"]["pods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(polled, ["gw-0", "gw-1"]);
}

/// Serves `app` over plain HTTP on loopback.
async fn serve_plain(app: axum::Router) -> u16 {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(async move {
        let _ = axum::serve(l, app).await;
    });
    port
}

#[tokio::test]
async fn the_admin_client_follows_no_redirect() {
    use ankusa_operator::admin::{AdminClient, AdminError, AdminTrust, PodTarget};
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    // Where a redirect would lead: anything it receives is recorded.
    let got = Arc::new(Mutex::new(Vec::<String>::new()));
    let recorder = |got: Arc<Mutex<Vec<String>>>| {
        axum::Router::new().fallback(move |req: axum::extract::Request| {
            let got = got.clone();
            async move {
                got.lock()
                    .unwrap()
                    .push(format!("{} {}", req.method(), req.uri()));
                axum::Json(json!({"changed": true, "config_hash": "x", "generation": 1}))
            }
        })
    };
    let redirect_to = |scheme: &'static str, port: u16| {
        axum::Router::new().fallback(move || async move {
            (
                http::StatusCode::TEMPORARY_REDIRECT,
                [(
                    http::header::LOCATION,
                    format!("{scheme}://127.0.0.1:{port}/v1/config"),
                )],
            )
        })
    };
    let tls_sink = serve_tls(recorder(got.clone())).await;
    let plain_sink = serve_plain(recorder(got.clone())).await;
    let tls_pod = serve_tls(redirect_to("https", tls_sink)).await;
    let plain_pod = serve_plain(redirect_to("http", plain_sink)).await;
    let trust = AdminTrust {
        ca_pem: pki().ca.bundle_pem.clone(),
        server_name: "gw-pods.ns.svc".into(),
    };
    let target = |port: u16, tls: bool| PodTarget {
        name: "gw-0".into(),
        uid: "u".into(),
        ip: "127.0.0.1".into(),
        port,
        token: "admin-token-0123456789".into(),
        tls: tls.then(|| Arc::new(trust.clone())),
    };
    let client = AdminClient::new(Duration::from_secs(5));
    for t in [target(tls_pod, true), target(plain_pod, false)] {
        match client.put_config(&t, "sources: {}\n").await {
            Err(AdminError::Http { status: 307, .. }) => {}
            other => panic!("a redirect was not refused: {other:?}"),
        }
        match client.status(&t).await {
            Err(AdminError::Http { status: 307, .. }) => {}
            other => panic!("a redirect was not refused: {other:?}"),
        }
    }
    // Both redirect targets answer: nothing reached them.
    assert!(client.status(&target(tls_sink, true)).await.is_err());
    let reached = got.lock().unwrap().clone();
    assert_eq!(reached, ["GET /v1/status"], "only the direct call above");
}

/// The pods' config file of `gw-0` in the world.
fn pod_config(world: &World) -> String {
    let config = world.secrets.lock().unwrap()["gw-config"].clone();
    String::from_utf8(
        serde_json::from_value::<k8s_openapi::ByteString>(config["data"]["gw-0.yaml"].clone())
            .unwrap()
            .0,
    )
    .unwrap()
}

fn scrape_token_of(world: &World) -> String {
    let s = world.secrets.lock().unwrap()["gw-scrape"].clone();
    let s: k8s_openapi::api::core::v1::Secret = serde_json::from_value(s).unwrap();
    ankusa_operator::ownership::secret_text(&s, "token").unwrap()
}

#[tokio::test]
async fn the_scrape_token_is_kept_rendered_with_metrics_read_and_a_planted_one_is_refused() {
    let world = World::new(fresh_gateway(), &[]);
    reconcile_world(&world).await;
    let token = scrape_token_of(&world);
    assert_eq!(token.len(), 64);
    let ca = world.secrets.lock().unwrap()["gw-admin-ca"]["data"]["ca.crt"].clone();
    assert_eq!(
        world.secrets.lock().unwrap()["gw-scrape"]["data"]["ca.crt"],
        ca,
        "the scrape Secret carries the admin CA bundle"
    );
    let c = ankusa_operator::render::parse_rendered(&pod_config(&world)).unwrap();
    let scopes: Vec<Vec<String>> = c
        .admin
        .tokens
        .iter()
        .filter(|t| t.token == token)
        .map(|t| t.scopes.clone())
        .collect();
    assert_eq!(scopes, vec![vec!["metrics:read".to_string()]]);

    // Kept across passes, nothing rewritten.
    let (_, seen) = reconcile_world(&world).await;
    assert_eq!(writes_of_secrets(&seen), Vec::<String>::new());
    assert_eq!(scrape_token_of(&world), token);

    // Replaced by one with a forged controller reference: refused, its token never rendered.
    let mut planted = planted_token("attacker-scrape-token-0123456789");
    planted["metadata"]["name"] = json!("gw-scrape");
    world
        .secrets
        .lock()
        .unwrap()
        .insert("gw-scrape".into(), planted);
    let (_, seen) = reconcile_world(&world).await;
    let degraded = foreign_condition(&world);
    assert_eq!(degraded["reason"], "ForeignObject", "{degraded:#}");
    assert!(
        degraded["message"]
            .as_str()
            .unwrap()
            .contains("Secret gw-scrape "),
        "{degraded:#}"
    );
    assert_eq!(writes_of_secrets(&seen), Vec::<String>::new());
    assert!(!pod_config(&world).contains("attacker-scrape-token"));

    // Deleted: a fresh token, rendered in place of the old one.
    world.secrets.lock().unwrap().remove("gw-scrape");
    reconcile_world(&world).await;
    let fresh = scrape_token_of(&world);
    assert_ne!(fresh, token);
    assert_ne!(foreign_condition(&world)["reason"], "ForeignObject");
    let yaml = pod_config(&world);
    assert!(yaml.contains(&fresh) && !yaml.contains(&token));
}
