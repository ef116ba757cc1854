//! Receives Ankusa HTTP deliveries with axum. The `VerifiedDelivery` extractor checks the
//! Standard Webhooks signature over the raw body before the handler runs: a request it refuses
//! is answered 401 (signature) or 400 (not an Ankusa delivery) with `{"error": "<code>"}`.
//!
//!     ANKUSA_WEBHOOK_SECRET=whsec_... cargo run -p ankusa-sdk --features axum --example receive_axum
//!     cargo run -p ankusa-sdk --features axum --example receive_axum -- --self-test

use std::process::ExitCode;

use ankusa_sdk::ReceiveOptions;
use ankusa_sdk::axum::{Receiver, VerifiedDelivery};
use axum::Router;
use axum::http::StatusCode;
use axum::routing::post;

async fn hooks(VerifiedDelivery(delivery): VerifiedDelivery) -> StatusCode {
    // Dedupe on the idempotency key: a hook can be delivered more than once.
    let key = delivery.idempotency_key(false);
    // The provider's own signature, as the gateway judged it: act only on trusted hooks.
    if !delivery.is_trusted() {
        println!(
            "hook {} not verified at the edge: held for review",
            delivery.id
        );
        return StatusCode::ACCEPTED;
    }
    // Only now parse the body: these are the bytes that were signed.
    match serde_json::from_slice::<serde_json::Value>(&delivery.body) {
        Ok(event) => println!("hook {} (key {key}): {}", delivery.id, event["type"]),
        Err(_) => println!(
            "hook {} (key {key}): {} bytes",
            delivery.id,
            delivery.body.len()
        ),
    }
    StatusCode::ACCEPTED
}

fn app(secret: String) -> Router {
    Router::new()
        .route("/hooks", post(hooks))
        .with_state(Receiver::new(ReceiveOptions::with_secrets([secret])))
}

#[tokio::main]
async fn main() -> ExitCode {
    if std::env::args().any(|a| a == "--self-test") {
        return self_test().await;
    }
    let Ok(secret) = std::env::var("ANKUSA_WEBHOOK_SECRET") else {
        eprintln!("set ANKUSA_WEBHOOK_SECRET to the http sink's secret (whsec_...)");
        return ExitCode::from(2);
    };
    let listener = tokio::net::TcpListener::bind("0.0.0.0:8080")
        .await
        .expect("bind :8080");
    println!("listening on http://0.0.0.0:8080/hooks");
    axum::serve(listener, app(secret)).await.expect("serve");
    ExitCode::SUCCESS
}

/// Serves the app on a free port and posts it a delivery signed the way the gateway signs
/// (HMAC-SHA256 over `<id>.<timestamp>.<body>`, computed here without the SDK), then the same
/// delivery with one byte changed: 202, then 401.
async fn self_test() -> ExitCode {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use hmac::{Hmac, Mac};

    let key = b"a 32-byte key for the self-test!";
    let secret = format!("whsec_{}", STANDARD.encode(key));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/hooks", listener.local_addr().expect("address"));
    tokio::spawn(axum::serve(listener, app(secret)).into_future());

    let id = "0192f1c0-7a3e-7b11-8c2d-3e4f5a6b7c8d";
    let timestamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs()
        .to_string();
    let body = br#"{"id":"evt_1","type":"invoice.paid"}"#;
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(key).expect("key");
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body);
    let signature = format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()));

    let client = reqwest::Client::new();
    let mut statuses = Vec::new();
    for body in [&body[..], br#"{"id":"evt_1","type":"invoice.void"}"#] {
        let response = client
            .post(&url)
            .header("content-type", "application/json")
            .header("webhook-id", id)
            .header("webhook-timestamp", &timestamp)
            .header("webhook-signature", &signature)
            .header("x-ankusa-id", id)
            .header("x-ankusa-source", "stripe")
            .header("x-ankusa-verification", "ok")
            .body(body.to_vec())
            .send()
            .await
            .expect("post");
        statuses.push(response.status().as_u16());
    }
    println!(
        "self-test: signed {}, tampered {}",
        statuses[0], statuses[1]
    );
    if statuses == [202, 401] {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
