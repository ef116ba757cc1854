//! The operator's half of lifecycle events: `Gateway.spec.lifecycle` rendered into every pod's
//! `lifecycle` section (pure render tests), a Sink that does not render reported without
//! refusing the Gateway, and the aggregated Kubernetes Events of dead-letter bursts and breaker
//! transitions, driven through whole Gateway reconciles against a mocked API server
//! (tower-test, the shape of `mock_api.rs`) and pods' admin APIs whose reports change between
//! polls.

use std::sync::{Arc, Mutex};

use ankusa_config::{Config, SinkConfig};
use ankusa_crds::GatewayPodStatus;
use ankusa_crds::{Gateway, Sink, Source};
use ankusa_operator::context::{Ctx, Settings};
use ankusa_operator::controllers::{gateway, gateways_of_sink};
use ankusa_operator::metrics::Metrics;
use ankusa_operator::render::{self, Inputs, Outcome, SecretValues, referenced_secrets};
use ankusa_operator::status::gateway::gateway_status;
use ankusa_operator::status::lifecycle::{LIFECYCLE_EVENTS, lifecycle_condition};
use common::{meta, object, secrets};
use http::{Request, Response};
use http_body_util::BodyExt;
use kube::client::Body;
use serde_json::{Value, json};

mod common;

const TOKEN: &str = "operator-admin-token-0123456789";
const SIGNING: &str = "whsec_c2VjcmV0LWtleS1ieXRlcw==";

fn gateway(spec: Value) -> Gateway {
    object(
        json!({"name": "gw", "namespace": "ns", "uid": "g-uid", "generation": 1}),
        spec,
    )
}

fn sink(name: &str, spec: Value) -> Sink {
    object(meta(name, 2), spec)
}

fn events_sink() -> Sink {
    sink(
        "events",
        json!({"type": "http", "http": {"url": "https://ops.example.com/ankusa-events"},
               "secretRefs": {"secret": [{"name": "signing", "key": "whsec"}]}}),
    )
}

fn audit_sink() -> Sink {
    sink("audit", json!({"type": "log"}))
}

fn with_lifecycle(lifecycle: Value) -> Gateway {
    gateway(json!({"replicas": 2, "lifecycle": lifecycle}))
}

fn render_with(
    gw: &Gateway,
    sources: &[Source],
    sinks: &[Sink],
    secrets: &SecretValues,
    previous: Option<&Config>,
) -> render::Rendered {
    render::render(&Inputs {
        gateway: gw,
        sources,
        sinks,
        secrets,
        admin_token: TOKEN,
        scrape_token: None,
        previous,
    })
}

fn signing() -> SecretValues {
    secrets(&[("signing", "whsec", SIGNING)])
}

#[test]
fn the_lifecycle_sinks_render_into_every_pods_lifecycle_section() {
    let gw = with_lifecycle(json!({
        "sinks": [{"name": "events"}, {"name": "audit"}],
        "retentionDays": 7, "maxEvents": 5000, "maxPerMinute": 10}));
    let sinks = [events_sink(), audit_sink()];
    // The Secrets the lifecycle Sinks read are fetched, with no Source in the namespace.
    let wanted = referenced_secrets(&gw, &[], &sinks);
    assert!(wanted.contains("signing"), "{wanted:?}");
    let r = render_with(&gw, &[], &sinks, &signing(), None);
    assert_eq!(r.error, None);
    assert_eq!(r.lifecycle, Some(Outcome::Current));
    assert!(r.secrets_used.contains("signing"));
    // Both Sinks are rendered for this Gateway: their status counts them.
    assert_eq!(r.sinks.keys().collect::<Vec<_>>(), vec!["audit", "events"]);
    assert!(
        r.sinks
            .values()
            .all(|s| s.error.is_none() && s.used_by.is_empty())
    );
    for pod in ["gw-0", "gw-1"] {
        let c = r.for_pod(pod).expect("a config");
        let l = c.lifecycle.as_ref().expect("a lifecycle section");
        assert_eq!(
            (l.retention_days, l.max_events, l.max_per_minute),
            (7, 5000, 10)
        );
        assert_eq!(l.sinks.len(), 2);
        match &l.sinks[0] {
            SinkConfig::Http(h) => {
                assert_eq!(h.url, "https://ops.example.com/ankusa-events");
                assert_eq!(h.secret.as_ref().expect("signed").0, vec![SIGNING]);
            }
            other => panic!("unexpected sink {other:?}"),
        }
        assert!(matches!(l.sinks[1], SinkConfig::Log(_)));
    }
    // Absent bounds keep the gateway's defaults; the YAML the pods read parses back.
    let gw = with_lifecycle(json!({"sinks": [{"name": "audit"}]}));
    let r = render_with(&gw, &[], &sinks, &signing(), None);
    let c = r.for_pod("gw-0").unwrap();
    let back = render::parse_rendered(&c.to_yaml()).expect("parses");
    let l = back.lifecycle.expect("kept");
    assert_eq!(
        (l.retention_days, l.max_events, l.max_per_minute),
        (30, 100_000, 60)
    );
    // No `spec.lifecycle`: no section, no condition.
    let gw = gateway(json!({"replicas": 2}));
    let r = render_with(&gw, &[], &sinks, &signing(), None);
    assert!(r.lifecycle.is_none() && r.for_pod("gw-0").unwrap().lifecycle.is_none());
    assert!(lifecycle_condition(&gw, &r).is_none());
}

fn orders() -> Source {
    object(
        meta("orders", 3),
        json!({"gatewayRef": {"name": "gw"}, "sinks": [{"name": "audit"}]}),
    )
}

fn ready_pods() -> Vec<GatewayPodStatus> {
    (0..2)
        .map(|i| GatewayPodStatus {
            name: format!("gw-{i}"),
            ready: true,
            programmed: true,
            ..Default::default()
        })
        .collect()
}

#[test]
fn a_missing_sink_leaves_lifecycle_out_and_says_so_without_refusing_the_gateway() {
    let gw = with_lifecycle(json!({"sinks": [{"name": "audit"}, {"name": "nope"}]}));
    let r = render_with(&gw, &[orders()], &[audit_sink()], &signing(), None);
    // The hooks flow: the Gateway renders, its Source with it.
    assert_eq!(r.error, None);
    assert_eq!(r.sources["orders"].outcome, Outcome::Current);
    let c = r.for_pod("gw-0").unwrap();
    assert!(c.lifecycle.is_none());
    assert!(c.sources.contains_key("orders"));
    let Some(Outcome::Missing(e)) = &r.lifecycle else {
        panic!("{:?}", r.lifecycle)
    };
    assert_eq!(e, "spec.lifecycle.sinks[1]: Sink nope not found");

    let (ok, reason, msg) = lifecycle_condition(&gw, &r).expect("a condition");
    assert!(!ok);
    assert_eq!(reason, "NotConfigured");
    assert!(
        msg.starts_with("spec.lifecycle.sinks[1]: Sink nope not found"),
        "{msg}"
    );
    let st = gateway_status(&gw, &r, ready_pods(), None, &Default::default(), "T");
    let find = |t: &str| {
        st.conditions
            .iter()
            .find(|c| c.type_ == t)
            .cloned()
            .unwrap()
    };
    assert!(
        find("Ready").is_true(),
        "lifecycle never makes the Gateway not Ready"
    );
    let d = find("Degraded");
    assert!(d.is_true());
    assert_eq!(d.reason.as_deref(), Some("LifecycleNotRendered"));
    assert!(d.message.unwrap().contains("spec.lifecycle.sinks[1]"));
    assert_eq!(LIFECYCLE_EVENTS, "LifecycleEvents");
}

#[test]
fn a_sink_that_stops_rendering_keeps_the_pods_previous_section() {
    let gw = with_lifecycle(json!({"sinks": [{"name": "events"}]}));
    let sinks = [events_sink()];
    let first = render_with(&gw, &[], &sinks, &signing(), None);
    let previous = first.for_pod("gw-0").unwrap();
    // The Secret is gone: the pods keep what they ran, and the condition names the field.
    let r = render_with(&gw, &[], &sinks, &SecretValues::new(), Some(&previous));
    assert_eq!(r.error, None);
    let Some(Outcome::Previous(e)) = &r.lifecycle else {
        panic!("{:?}", r.lifecycle)
    };
    assert!(
        e.starts_with(
            "spec.lifecycle.sinks[0]: Sink events: secretRefs.secret: Secret signing not found"
        ),
        "{e}"
    );
    assert_eq!(
        r.sinks["events"]
            .error
            .as_deref()
            .map(|e| e.contains("signing")),
        Some(true)
    );
    assert_eq!(r.for_pod("gw-0").unwrap().lifecycle, previous.lifecycle);
    let (ok, reason, msg) = lifecycle_condition(&gw, &r).unwrap();
    assert_eq!((ok, reason), (false, "PreviousKept"));
    assert!(
        msg.ends_with("the pods keep the lifecycle section they ran before"),
        "{msg}"
    );
    assert!(!msg.contains(SIGNING));
}

#[test]
fn lifecycle_sinks_follow_every_rule_of_a_sources_sinks() {
    // The egress policy: a loopback broker is refused, named by field and Sink, no address.
    let local = sink(
        "local",
        json!({"type": "nats", "nats": {"servers": ["nats://127.0.0.1:4222"], "subject": "ankusa.lifecycle"}}),
    );
    let gw = with_lifecycle(json!({"sinks": [{"name": "local"}]}));
    let r = render_with(&gw, &[], &[local], &signing(), None);
    let Some(Outcome::Missing(e)) = &r.lifecycle else {
        panic!("{:?}", r.lifecycle)
    };
    assert!(
        e.starts_with("spec.lifecycle.sinks[0] (Sink local).servers"),
        "{e}"
    );
    assert!(!e.contains("127.0.0.1"), "{e}");
    // The pods' ambient identity, unless the Gateway allows it.
    let sqs = sink(
        "queue",
        json!({"type": "sqs", "sqs": {"queue_url": "https://sqs.us-east-1.amazonaws.com/123456789012/events",
                                      "region": "us-east-1"}}),
    );
    let gw = with_lifecycle(json!({"sinks": [{"name": "queue"}]}));
    let r = render_with(&gw, &[], std::slice::from_ref(&sqs), &signing(), None);
    let Some(Outcome::Missing(e)) = &r.lifecycle else {
        panic!("{:?}", r.lifecycle)
    };
    assert!(
        e.starts_with("spec.lifecycle.sinks[0]: Sink queue: sqs.access_key_id"),
        "{e}"
    );
    let gw = gateway(json!({"lifecycle": {"sinks": [{"name": "queue"}]},
                            "settings": {"egress": {"allowAmbientIdentity": true}}}));
    let r = render_with(&gw, &[], &[sqs], &signing(), None);
    assert_eq!(r.lifecycle, Some(Outcome::Current));
    // A file path from a manifest.
    let kafka = sink(
        "kafka",
        json!({"type": "kafka", "options": {"brokers": ["kafka.example.com:9092"], "topic": "t",
                                             "sasl": {"mechanism": "oauthbearer", "token_file": "/etc/ankusa/gw-0.yaml"}}}),
    );
    let gw = with_lifecycle(json!({"sinks": [{"name": "kafka"}]}));
    let r = render_with(&gw, &[], &[kafka], &signing(), None);
    let Some(Outcome::Missing(e)) = &r.lifecycle else {
        panic!("{:?}", r.lifecycle)
    };
    assert!(
        e.contains("options.sasl.token_file: a file path is not accepted"),
        "{e}"
    );
    assert!(!e.contains("/etc/ankusa"), "{e}");
}

#[test]
fn a_sink_change_wakes_the_gateways_sending_it_lifecycle_events() {
    let gws = [
        Arc::new(with_lifecycle(json!({"sinks": [{"name": "events"}]}))),
        Arc::new(object::<Gateway>(meta("other", 1), json!({}))),
    ];
    let refs = gateways_of_sink(&events_sink(), &[], &gws);
    assert_eq!(refs.len(), 1);
    assert_eq!(refs[0].name, "gw");
    assert!(gateways_of_sink(&audit_sink(), &[], &gws).is_empty());
}

// ---- Whole reconciles against a mocked API server --------------------------------------

#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    body: Value,
}

type Handler = dyn Fn(&Seen) -> Option<(u16, Value)> + Send + Sync;

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
            let bytes = req.into_body().collect().await.unwrap().to_bytes();
            let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let s = Seen { method, path, body };
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

fn pki() -> &'static ankusa_operator::pki::Issued {
    static PKI: std::sync::OnceLock<ankusa_operator::pki::Issued> = std::sync::OnceLock::new();
    PKI.get_or_init(|| {
        let names = ["gw-pods.ns.svc".to_string(), "*.gw-pods.ns.svc".to_string()];
        ankusa_operator::pki::ensure(None, None, "ca", &names, time::OffsetDateTime::now_utc())
            .unwrap()
    })
}

fn b64(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn ca_secret() -> Value {
    json!({"apiVersion": "v1", "kind": "Secret",
           "metadata": {"name": "gw-admin-ca", "namespace": "ns", "uid": "ca-uid", "ownerReferences": [
               {"apiVersion": "ankusa.dev/v1alpha1", "kind": "Gateway", "name": "gw", "uid": "g-uid", "controller": true}]},
           "data": {"ca.crt": b64(&pki().ca.bundle_pem), "ca.key": b64(&pki().ca.key_pem)}})
}

fn token_secret() -> Value {
    json!({"apiVersion": "v1", "kind": "Secret",
           "metadata": {"name": "tok", "namespace": "ns", "labels": {"ankusa.dev/usable": "true"}},
           "data": {"token": b64("admin-token-0123456789")}})
}

/// The Gateway: 2 pods, lifecycle events to Sink `k`, which Source `orders` uses too.
fn gateway_obj(admin_port: u16) -> Value {
    let ca: k8s_openapi::api::core::v1::Secret = serde_json::from_value(ca_secret()).unwrap();
    json!({
        "apiVersion": "ankusa.dev/v1alpha1", "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "ns", "uid": "g-uid", "generation": 1,
                     "resourceVersion": "41"},
        "spec": {"replicas": 2, "ports": {"http": 4000, "admin": admin_port},
                 "adminTokenSecretRef": {"name": "tok", "key": "token"},
                 "lifecycle": {"sinks": [{"name": "k"}]}},
        "status": {"ownership": {"adminCa": {
            "uid": ca.metadata.uid,
            "sha256": ankusa_operator::ownership::fingerprint(ca.data.as_ref())}}},
    })
}

fn statefulset() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
           "metadata": {"name": "gw", "namespace": "ns", "uid": "sts-uid", "ownerReferences": [
               {"apiVersion": "ankusa.dev/v1alpha1", "kind": "Gateway", "name": "gw", "uid": "g-uid", "controller": true}]},
           "spec": {"replicas": 2, "selector": {}, "serviceName": "gw-pods", "template": {}},
           "status": {"replicas": 2}})
}

fn pod_list() -> Value {
    let pod = |n: u8| {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": format!("gw-{n}"), "namespace": "ns", "uid": format!("pod-uid-{n}"),
                            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "gw",
                                                 "uid": "sts-uid", "controller": true}]},
               "spec": {"containers": [{"name": "gateway"}]},
               "status": {"phase": "Running", "podIP": "127.0.0.1",
                          "conditions": [{"type": "Ready", "status": "True"}]}})
    };
    json!({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": [pod(0), pod(1)]})
}

fn list(kind: &str, items: Vec<Value>) -> Value {
    json!({"apiVersion": "ankusa.dev/v1alpha1", "kind": kind, "metadata": {}, "items": items})
}

fn orders_source() -> Value {
    json!({"apiVersion": "ankusa.dev/v1alpha1", "kind": "Source",
           "metadata": {"name": "orders", "namespace": "ns", "uid": "s-uid", "generation": 1},
           "spec": {"gatewayRef": {"name": "gw"}, "sinks": [{"name": "k"}]}})
}

fn redis_sink() -> Value {
    json!({"apiVersion": "ankusa.dev/v1alpha1", "kind": "Sink",
           "metadata": {"name": "k", "namespace": "ns", "uid": "k-uid", "generation": 1},
           "spec": {"type": "redis",
                    "redis": {"url": "rediss://redis.internal:6380", "channel": "hooks"}}})
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

/// Both pods' admin API (one server: both pods are at 127.0.0.1): `GET /v1/status` answers
/// what `report` holds at the time, and any config push is taken.
async fn pods(report: Arc<Mutex<Value>>) -> u16 {
    use axum::routing::{get, put};
    let app = axum::Router::new()
        .route(
            "/v1/status",
            get(move || {
                let r = report.lock().unwrap().clone();
                async move { axum::Json(r) }
            }),
        )
        .route(
            "/v1/config",
            put(|| async {
                axum::Json(json!({"changed": true, "config_hash": "new", "generation": 2}))
            }),
        );
    serve_tls(app).await
}

/// A pod's report: `dlq` dead rows, and the lifecycle sink `k` failing with its breaker
/// `open` or not failing at all.
fn report(dlq: i64, breaker_open: Option<bool>) -> Value {
    let failing = match breaker_open {
        None => json!([]),
        Some(open) => json!([{"source": "ankusa:lifecycle", "sink": 0, "type": "redis",
                              "error": "redis: not_connected: connection refused",
                              "at": 1_767_225_660_000u64, "since": 1_767_225_600_000u64,
                              "failures": 9, "breaker_open": open}]),
    };
    json!({"instance": "gw-0", "config_hash": "old", "failing_sinks": failing,
           "dlq": {"rows": dlq, "bytes": dlq * 100, "full": false}})
}

/// The world of the reconciles: the Gateway, its Source and Sink, and whatever is written.
fn world(s: &Seen, port: u16) -> Option<(u16, Value)> {
    let route = s.path.split('?').next().unwrap_or_default();
    match (s.method.as_str(), route) {
        ("GET", "/apis/ankusa.dev/v1alpha1/namespaces/ns/gateways/gw") => {
            Some((200, gateway_obj(port)))
        }
        ("GET", "/api/v1/namespaces/ns/secrets/tok") => Some((200, token_secret())),
        ("GET", "/api/v1/namespaces/ns/secrets/gw-admin-ca") => Some((200, ca_secret())),
        ("GET", "/api/v1/namespaces/ns/pods") => Some((200, pod_list())),
        ("GET", "/apis/apps/v1/namespaces/ns/statefulsets/gw") => Some((200, statefulset())),
        ("GET", "/apis/ankusa.dev/v1alpha1/namespaces/ns/sources") => {
            Some((200, list("SourceList", vec![orders_source()])))
        }
        ("GET", "/apis/ankusa.dev/v1alpha1/namespaces/ns/sinks") => {
            Some((200, list("SinkList", vec![redis_sink()])))
        }
        ("GET", "/apis/ankusa.dev/v1alpha1/namespaces/ns/sinks/k") => Some((200, redis_sink())),
        ("POST", "/api/v1/namespaces/ns/secrets") => Some((201, s.body.clone())),
        ("POST", p) if p.contains("/events") => Some((201, s.body.clone())),
        ("PATCH", p) if p.ends_with("/gateways/gw/status") => Some((200, gateway_obj(port))),
        ("PATCH", p) if p.ends_with("/sources/orders/status") => Some((200, orders_source())),
        ("PATCH", _) => Some((200, s.body.clone())),
        _ => None,
    }
}

/// (type, reason, kind and name of the object it is about, note) of each Event posted since
/// `from`.
fn events_since(
    seen: &Arc<Mutex<Vec<Seen>>>,
    from: usize,
) -> Vec<(String, String, String, String)> {
    seen.lock().unwrap()[from..]
        .iter()
        .filter(|s| s.method == "POST" && s.path.contains("/events"))
        .filter(|s| {
            let r = s.body["reason"].as_str().unwrap_or_default();
            r.starts_with("Breaker") || r.starts_with("DeadLetter") || r.starts_with("Lifecycle")
        })
        .map(|s| {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
            let regarding = &s.body["regarding"];
            (
                text(&s.body["type"]),
                text(&s.body["reason"]),
                format!("{}/{}", text(&regarding["kind"]), text(&regarding["name"])),
                text(&s.body["note"]),
            )
        })
        .collect()
}

#[tokio::test]
async fn dead_letter_bursts_and_breakers_are_announced_once_across_the_pods() {
    let report_now = Arc::new(Mutex::new(report(10, Some(true))));
    let port = pods(report_now.clone()).await;
    let (client, seen) = mock(Box::new(move |s| world(s, port)));
    // One operator: its memory lasts from one reconcile to the next.
    let ctx = Arc::new(Ctx::new(
        client,
        Arc::new(Metrics::default()),
        Settings::default(),
        "test".into(),
    ));
    let gw: Gateway = serde_json::from_value(gateway_obj(port)).unwrap();
    let gw = Arc::new(gw);
    let reconcile = |r: Value| {
        *report_now.lock().unwrap() = r;
        let from = seen.lock().unwrap().len();
        let (gw, ctx, seen) = (gw.clone(), ctx.clone(), seen.clone());
        async move {
            gateway::reconcile(gw, ctx).await.unwrap();
            events_since(&seen, from)
        }
    };

    // Both pods hold the lifecycle sink's breaker open: one Event, on the Sink, with the spread.
    let ev = reconcile(report(10, Some(true))).await;
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(
        (ev[0].0.as_str(), ev[0].1.as_str()),
        ("Warning", "BreakerOpened")
    );
    assert_eq!(ev[0].2, "Sink/k");
    assert!(
        ev[0]
            .3
            .starts_with("circuit breaker open on 2 of 2 pods of Gateway gw"),
        "{ev:?}"
    );
    let written = seen.lock().unwrap().clone();
    let status = written
        .iter()
        .rev()
        .find(|s| {
            s.method == "PATCH"
                && s.path.contains("/gateways/gw/status")
                && s.body["status"]["conditions"].is_array()
        })
        .expect("Gateway status written");
    let conds = status.body["status"]["conditions"].as_array().unwrap();
    let lc = conds
        .iter()
        .find(|c| c["type"] == "LifecycleEvents")
        .expect("LifecycleEvents");
    assert_eq!(lc["status"], "True", "{lc}");
    assert_eq!(lc["message"], "lifecycle events go to Sink k");
    // The pods' lifecycle failures reach the Sink's entry, named after it.
    let k = &status.body["status"]["sinks"][0];
    assert_eq!(k["name"], "k");
    assert_eq!(k["failingPods"], 2, "{k}");

    // 60 more dead rows on each pod (120 in all), breaker still open: one burst, no repeat.
    let ev = reconcile(report(70, Some(true))).await;
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(
        (ev[0].0.as_str(), ev[0].1.as_str(), ev[0].2.as_str()),
        ("Warning", "DeadLetterBurst", "Gateway/gw")
    );
    assert!(
        ev[0].3.starts_with(
            "120 deliveries dead-lettered in the last 1 min on gw-0 (+60), gw-1 (+60)"
        ),
        "{ev:?}"
    );
    assert!(!ev[0].3.contains("redis.internal"), "{ev:?}");

    // Hundreds more within the window and the breaker closes: only the close is announced.
    let ev = reconcile(report(400, None)).await;
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(
        (ev[0].0.as_str(), ev[0].1.as_str(), ev[0].2.as_str()),
        ("Normal", "BreakerClosed", "Sink/k")
    );

    // Nothing changes: nothing is announced.
    let ev = reconcile(report(400, None)).await;
    assert!(ev.is_empty(), "{ev:?}");
}
