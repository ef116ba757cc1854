//! The admin client against a scripted admin API: what it sends (path, query, bearer token,
//! JSON body) and how every kind of answer maps to a typed result or an `AdminError` (the
//! API's code, status, retryable). The real gateway is `admin_e2e.rs`.

use std::sync::{Arc, Mutex};

use ankusa_sdk::{
    AdminClient, DlqQuery, ErrorClass, QuarantineQuery, ReplayFilter, ReplayRequest, ReplayState,
};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

const TOKEN: &str = "sdk-admin-token-0001";

/// Each request as `(method path?query, authorization, body)`; answers by path.
type Log = Arc<Mutex<Vec<(String, Option<String>, Value)>>>;

async fn answer(State(log): State<Log>, req: Request) -> Response {
    let target = format!("{} {}", req.method(), req.uri());
    let auth = req
        .headers()
        .get("authorization")
        .map(|v| v.to_str().unwrap().to_string());
    let body = axum::body::to_bytes(req.into_body(), 1 << 20)
        .await
        .unwrap();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    log.lock().unwrap().push((target.clone(), auth, body));
    let (status, body) = match target.split('?').next().unwrap() {
        "GET /v1/dlq" => (200, json!({
            "entries": [{"id": "0192f1c0-7a3e-7b11-8c2d-3e4f5a6b7c8d", "seq": 1042, "tenant": "acme",
                         "source_id": "stripe", "sink": 0, "sink_type": "http", "error_class": "permanent",
                         "reason": "http: permanent: status 410", "attempts": 1, "dead_at": 1737500123456u64,
                         "first_attempt_at": 1737500123000u64, "received_at": 1737500122990u64, "size": 1834,
                         "replay_id": null, "added_later": true}],
            "next_cursor": "AAABlJ3kXsAAAAAAAAAEEgAA", "total": null, "examined": 3}).to_string()),
        "POST /v1/replays" => (202, json!({
            "id": "0192f1d2-5c1e-7a40-9d7e-2b9c1f0e4a11", "kind": "dlq",
            "filter": {"tenant": "acme", "source_id": "stripe"}, "rate": 300, "max_lag_ms": 2000,
            "pause_after_dead": 20, "state": "running", "created_at": 1737500200000u64,
            "updated_at": 1737500200000u64, "moved": 0, "scanned": 0, "delivered": 0, "failed": 0,
            "outstanding": 0, "done": false}).to_string()),
        "PATCH /v1/replays/j1" => (200, json!({"id": "j1", "state": "paused"}).to_string()),
        "GET /v1/replays/missing" => (404, json!({"error": "replay_not_found"}).to_string()),
        "GET /v1/replays/busy" => (429, json!({"error": "too_many_jobs", "max_live_jobs": 64}).to_string()),
        "GET /v1/replays/garbled" => (200, "{\"id\":".to_string()),
        "GET /v1/replays/other" => (403, json!({"error": "forbidden", "scope": "tenant:beta"}).to_string()),
        "GET /v1/quarantine" => (503, json!({"error": "store_unavailable", "class": "io_error"}).to_string()),
        _ => (404, String::new()),
    };
    let mut r = Response::new(Body::from(Bytes::from(body)));
    *r.status_mut() = StatusCode::from_u16(status).unwrap();
    r
}

async fn api() -> (String, Log) {
    let log = Log::default();
    let app = Router::new().fallback(answer).with_state(log.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, log)
}

#[tokio::test]
async fn calls_send_the_documented_requests_and_read_typed_answers() {
    let (url, log) = api().await;
    let admin = AdminClient::new(&url, TOKEN);

    let page = admin
        .list_dlq(&DlqQuery {
            tenant: Some("acme".into()),
            error_class: Some(ErrorClass::Permanent),
            limit: Some(1),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(page.entries.len(), 1);
    assert_eq!(page.entries[0].error_class, ErrorClass::Permanent);
    assert_eq!(
        page.entries[0].reason.as_deref(),
        Some("http: permanent: status 410")
    );
    assert_eq!(
        page.next_cursor.as_deref(),
        Some("AAABlJ3kXsAAAAAAAAAEEgAA")
    );
    assert_eq!(page.total, None);

    let job = admin
        .create_replay(&ReplayRequest {
            job_id: Some("0192f1d2-5c1e-7a40-9d7e-2b9c1f0e4a11".into()),
            rate: Some(300),
            ..ReplayRequest::dlq(ReplayFilter {
                tenant: Some("acme".into()),
                source_id: Some("stripe".into()),
                ..Default::default()
            })
        })
        .await
        .unwrap();
    assert_eq!(job.state, ReplayState::Running);
    assert_eq!(job.filter.tenant.as_deref(), Some("acme"));
    assert_eq!(job.rate, 300);

    let paused = admin.patch_replay("j1", ReplayState::Paused).await.unwrap();
    assert_eq!(paused.state, ReplayState::Paused);

    let log = log.lock().unwrap().clone();
    assert_eq!(
        log[0].0,
        "GET /v1/dlq?tenant=acme&error_class=permanent&limit=1"
    );
    assert_eq!(log[1].0, "POST /v1/replays");
    assert_eq!(
        log[1].2,
        json!({"job_id": "0192f1d2-5c1e-7a40-9d7e-2b9c1f0e4a11", "kind": "dlq",
               "filter": {"tenant": "acme", "source_id": "stripe"}, "rate": 300})
    );
    assert_eq!(log[2].0, "PATCH /v1/replays/j1");
    assert_eq!(log[2].2, json!({"state": "paused"}));
    for (target, auth, _) in &log {
        assert_eq!(
            auth.as_deref(),
            Some(format!("Bearer {TOKEN}").as_str()),
            "{target}"
        );
    }
}

#[tokio::test]
async fn error_answers_keep_the_api_code_status_and_retryability() {
    let (url, log) = api().await;
    let admin = AdminClient::new(&url, TOKEN);
    let cases = [
        ("missing", "replay_not_found", Some(404), false),
        ("busy", "too_many_jobs", Some(429), true),
        ("garbled", "invalid_response", Some(200), false),
        ("other", "forbidden", Some(403), false),
        ("unrouted", "unexpected_status", Some(404), false),
    ];
    for (id, code, status, retryable) in cases {
        let e = admin.get_replay(id).await.expect_err(id);
        assert_eq!(
            (e.code(), e.status(), e.retryable()),
            (code, status, retryable),
            "{id}: {e}"
        );
    }
    let e = admin.get_replay("other").await.unwrap_err();
    assert_eq!(e.scope.as_deref(), Some("tenant:beta"));

    let e = admin
        .list_quarantine(&QuarantineQuery::default())
        .await
        .unwrap_err();
    assert_eq!(
        (e.code.as_str(), e.status, e.retryable),
        ("store_unavailable", Some(503), true)
    );

    // Refused before any request: a job id is one path segment.
    let before = log.lock().unwrap().len();
    let e = admin.get_replay("../v1/config").await.unwrap_err();
    assert_eq!(e.code, "invalid_id");
    assert_eq!(log.lock().unwrap().len(), before);

    // An open API: no token, no header.
    AdminClient::new(&url, "")
        .patch_replay("j1", ReplayState::Paused)
        .await
        .unwrap();
    assert_eq!(log.lock().unwrap().last().unwrap().1, None);
}

#[tokio::test]
async fn no_answer_is_a_retryable_transport_error() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let e = AdminClient::new(format!("http://127.0.0.1:{port}"), TOKEN)
        .list_dlq(&DlqQuery::default())
        .await
        .unwrap_err();
    assert_eq!(
        (e.code.as_str(), e.status, e.retryable),
        ("transport_error", None, true)
    );
    assert!(!e.to_string().contains(TOKEN), "{e}");
    let debug = format!("{:?}", AdminClient::new("http://x", TOKEN));
    assert!(!debug.contains(TOKEN), "{debug}");
}
