//! The claim client where the vectors cannot reach: an `https://` claim port trusted through a
//! CA bundle (and refused without it), the `size + 1` read bound against a server that never
//! stops sending, the whole-request timeout against one that trickles, and no token in `Debug`.

mod common;

use std::time::{Duration, Instant};

use ankusa_sdk::{ClaimClient, Error, Message, decode_message, to_hook};
use axum::Router;
use axum::routing::get;
use common::Pki;
use serde_json::json;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CLAIM_ID: &str = "0192f1c07a3e7b118c2d3e4f5a6b7c8d";

fn claim_message(body: &[u8]) -> Message {
    let m = json!({
        "v": 1, "id": "0192f1c0-7a3e-7b11-8c2d-3e4f5a6b7c8d", "source_id": "stripe",
        "tenant_id": "acme", "received_at": 1737500000000u64, "size": body.len(),
        "sha256": hex::encode(Sha256::digest(body)),
        "claim": format!("urn:ankusa:claim:v1:acme:{CLAIM_ID}"),
    });
    decode_message(m.to_string().as_bytes()).expect("a claim message")
}

async fn tls_claim_port(pki: &Pki, body: &'static [u8]) -> String {
    let app = Router::new().route("/v1/claims/{tenant}/{id}", get(move || async move { body }));
    let port = common::serve_tls(pki, app).await;
    format!("https://localhost:{port}")
}

#[tokio::test]
async fn an_https_claim_port_is_trusted_through_the_ca_bundle_only() {
    let pki = Pki::new("claim CA");
    let body: &'static [u8] = b"{\"big\":\"claim over TLS\"}";
    let url = tls_claim_port(&pki, body).await;
    let message = claim_message(body);

    let client = ClaimClient::new(&url)
        .ca_bundle_pem(&pki.ca_pem)
        .expect("a CA bundle");
    let hook = to_hook(&message, &client).await.expect("redeemed over TLS");
    assert_eq!(hook.body.as_ref(), body);

    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.crt");
    std::fs::write(&ca_file, &pki.ca_pem).unwrap();
    let from_file = ClaimClient::new(&url)
        .ca_bundle_file(&ca_file)
        .expect("a CA file");
    assert_eq!(
        to_hook(&message, &from_file).await.unwrap().body.as_ref(),
        body
    );

    for (what, client) in [
        ("no bundle", ClaimClient::new(&url)),
        (
            "another CA",
            ClaimClient::new(&url)
                .ca_bundle_pem(Pki::new("other CA").ca_pem)
                .unwrap(),
        ),
    ] {
        let e = to_hook(&message, &client).await.expect_err(what);
        assert_eq!(e.class(), "ClaimCheckUnavailableError", "{what}: {e}");
        assert!(e.retryable());
        assert_eq!(e.status(), None);
    }
}

#[test]
fn an_unusable_bundle_is_refused_when_given() {
    for pem in [
        "",
        "not a certificate",
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    ] {
        assert!(
            ClaimClient::new("https://x").ca_bundle_pem(pem).is_err(),
            "{pem:?}"
        );
    }
    let e = ClaimClient::new("https://x")
        .ca_bundle_file("/nonexistent/ca.crt")
        .unwrap_err();
    assert!(e.to_string().contains("/nonexistent/ca.crt"), "{e}");
}

/// A server that answers 200 with a 1 GiB content-length and writes until the client goes:
/// how many bytes it wrote.
async fn endless_server(trickle: Option<Duration>) -> (String, tokio::task::JoinHandle<u64>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        // The request first: an answer before it is not HTTP.
        let mut request = Vec::new();
        let mut buf = [0u8; 1024];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return 0,
                Ok(n) => request.extend_from_slice(&buf[..n]),
            }
        }
        let head = b"HTTP/1.1 200 OK\r\ncontent-length: 1073741824\r\n\r\n";
        if s.write_all(head).await.is_err() {
            return 0;
        }
        let chunk = vec![b'x'; if trickle.is_some() { 1 } else { 64 << 10 }];
        let mut written = 0u64;
        while s.write_all(&chunk).await.is_ok() {
            written += chunk.len() as u64;
            if let Some(d) = trickle {
                tokio::time::sleep(d).await;
            }
        }
        written
    });
    (url, task)
}

#[tokio::test]
async fn no_more_than_size_plus_one_bytes_are_read() {
    let (url, server) = endless_server(None).await;
    let message = claim_message(&[b'x'; 10]);
    let e = to_hook(&message, &ClaimClient::new(url)).await.unwrap_err();
    assert!(matches!(e, Error::ClaimIntegrity(_)), "{e}");
    let written = tokio::time::timeout(Duration::from_secs(20), server)
        .await
        .expect("the client hung up")
        .unwrap();
    // What the sockets' buffers took before the client hung up, far from the gigabyte.
    assert!(written < 64 << 20, "the server wrote {written} bytes");
}

#[tokio::test]
async fn the_timeout_bounds_the_whole_redemption_body_included() {
    let (url, _server) = endless_server(Some(Duration::from_millis(50))).await;
    let message = claim_message(&[b'x'; 100_000]);
    let client = ClaimClient::new(url).timeout(Duration::from_millis(500));
    let started = Instant::now();
    let e = to_hook(&message, &client).await.unwrap_err();
    assert!(matches!(e, Error::ClaimCheckUnavailable(_)), "{e}");
    assert!(e.retryable());
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn the_token_stays_out_of_debug_output() {
    let c = ClaimClient::new("http://x").token("reader-token-0123456789");
    assert!(!format!("{c:?}").contains("reader-token"), "{c:?}");
}
