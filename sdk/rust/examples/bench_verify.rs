//! The cost of verifying one delivery: `verify_signature` over a 1 KiB body with the headers of
//! an `http::HeaderMap`, one `whsec_` secret, in µs per call. Run it in release:
//!
//!     cargo run --release -p ankusa-sdk --example bench_verify

use std::hint::black_box;
use std::time::Instant;

use ankusa_sdk::{VerifyOptions, verify_signature};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};

fn main() {
    let key = [7u8; 32];
    let secret = format!("whsec_{}", STANDARD.encode(key));
    let body: Vec<u8> = (0..1024u32).map(|i| (i % 251) as u8).collect();
    let (id, ts) = ("0192f1c0-7a3e-7b11-8c2d-3e4f5a6b7c8d", 1764849600i64);
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(&key).expect("key");
    mac.update(format!("{id}.{ts}.").as_bytes());
    mac.update(&body);
    let signature = format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()));
    let mut headers = http::HeaderMap::new();
    headers.insert("webhook-id", id.parse().expect("id"));
    headers.insert("webhook-timestamp", ts.to_string().parse().expect("ts"));
    headers.insert("webhook-signature", signature.parse().expect("signature"));
    let secrets = [secret];
    let options = VerifyOptions {
        now: Some(ts),
        ..Default::default()
    };

    let verify = || {
        verify_signature(black_box(&headers), black_box(&body), &secrets, options)
            .expect("verifies")
    };
    for _ in 0..10_000 {
        verify();
    }
    let n = 200_000u32;
    let started = Instant::now();
    for _ in 0..n {
        black_box(verify());
    }
    let per_call = started.elapsed().as_secs_f64() * 1e6 / f64::from(n);
    println!("verify_signature, 1 KiB body, 1 secret: {per_call:.2} µs per call ({n} calls)");
}
