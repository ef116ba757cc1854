//! `VerifiedDelivery` in an axum router (tower `oneshot`): the handler runs only for a delivery
//! whose signature holds, sees the body byte for byte, and every refusal is the documented
//! status with `{"error": code}`; secrets come from the app's own state through `FromRef`.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use ankusa_sdk::ReceiveOptions;
use ankusa_sdk::axum::{Receiver, VerifiedDelivery};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, FromRef, State};
use axum::http::{Request, StatusCode};
use axum::routing::post;
use common::{SECRET, now, sign};
use tower::ServiceExt;

const HOOK_ID: &str = "0192f1c0-7a3e-7b11-8c2d-3e4f5a6b7c8d";

/// An application's own state, holding the receiver among other things.
#[derive(Clone)]
struct App {
    receiver: Receiver,
    handled: Arc<AtomicUsize>,
}

impl FromRef<App> for Receiver {
    fn from_ref(app: &App) -> Receiver {
        app.receiver.clone()
    }
}

async fn hooks(
    State(app): State<App>,
    VerifiedDelivery(d): VerifiedDelivery,
) -> (StatusCode, Bytes) {
    app.handled.fetch_add(1, Ordering::SeqCst);
    assert!(d.signed);
    (StatusCode::ACCEPTED, d.body)
}

fn app(options: ReceiveOptions) -> (Router, Arc<AtomicUsize>) {
    let handled = Arc::new(AtomicUsize::new(0));
    let router = Router::new()
        .route("/hooks", post(hooks))
        .layer(DefaultBodyLimit::max(1024))
        .with_state(App {
            receiver: Receiver::new(options),
            handled: handled.clone(),
        });
    (router, handled)
}

fn delivery(body: &'static [u8], signed_body: &[u8], id: Option<&str>) -> Request<Body> {
    let ts = now();
    let mut r = Request::post("/hooks")
        .header("content-type", "application/json")
        .header("webhook-id", HOOK_ID)
        .header("webhook-timestamp", ts.to_string())
        .header("webhook-signature", sign(SECRET, HOOK_ID, ts, signed_body))
        .header("x-ankusa-source", "stripe");
    if let Some(id) = id {
        r = r.header("x-ankusa-id", id);
    }
    r.body(Body::from(body)).unwrap()
}

async fn send(router: &Router, req: Request<Body>) -> (StatusCode, Bytes) {
    let resp = router.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    (
        status,
        axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap(),
    )
}

#[tokio::test]
async fn a_signed_delivery_reaches_the_handler_with_its_raw_body() {
    let (router, handled) = app(ReceiveOptions::with_secrets([SECRET]));
    // Not canonical JSON on purpose: the handler gets the bytes that were signed.
    let body: &'static [u8] = b"{ \"id\" : \"evt_1\",\n\"type\":\"invoice.paid\" }";
    let (status, echoed) = send(&router, delivery(body, body, Some(HOOK_ID))).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(&echoed[..], body);
    assert_eq!(handled.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn refusals_answer_the_status_and_code_and_never_run_the_handler() {
    let (router, handled) = app(ReceiveOptions::with_secrets([SECRET]));
    let body: &'static [u8] = b"{\"id\":\"evt_1\"}";
    let cases = [
        (
            "tampered",
            delivery(body, b"{\"id\":\"evt_2\"}", Some(HOOK_ID)),
            401,
            "no_matching_signature",
        ),
        (
            "no hook id",
            delivery(body, body, None),
            400,
            "missing_header",
        ),
        (
            "other hook id",
            delivery(body, body, Some("0192f1c0-0000-7000-8000-000000000000")),
            400,
            "id_mismatch",
        ),
        (
            "unsigned",
            Request::post("/hooks")
                .header("x-ankusa-id", HOOK_ID)
                .body(Body::from(body))
                .unwrap(),
            401,
            "missing_header",
        ),
        (
            "over the body limit",
            Request::post("/hooks")
                .body(Body::from(vec![b'x'; 4096]))
                .unwrap(),
            413,
            "body_too_large",
        ),
    ];
    for (what, req, status, code) in cases {
        let (got, answer) = send(&router, req).await;
        assert_eq!(got.as_u16(), status, "{what}");
        let answer: serde_json::Value = serde_json::from_slice(&answer).unwrap();
        assert_eq!(answer, serde_json::json!({"error": code}), "{what}");
    }
    assert_eq!(handled.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_receiver_without_secrets_is_closed() {
    let (router, handled) = app(ReceiveOptions::default());
    let body: &'static [u8] = b"{}";
    let (status, answer) = send(&router, delivery(body, body, Some(HOOK_ID))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(&answer[..], br#"{"error":"invalid_secret"}"#);
    assert_eq!(handled.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn the_receiver_itself_can_be_the_state() {
    async fn h(VerifiedDelivery(d): VerifiedDelivery) -> String {
        d.idempotency_key(true)
    }
    let router = Router::new()
        .route("/hooks", post(h))
        .with_state(Receiver::new(ReceiveOptions::with_secrets([SECRET])));
    let body: &'static [u8] = b"x";
    let (status, key) = send(&router, delivery(body, body, Some(HOOK_ID))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(&key[..], HOOK_ID.as_bytes());
}
