//! Consumes one Ankusa queue message: decode it, have its body in hand (a claim check redeemed
//! from the gateway's claim port, checked against the message's digest), dedupe and trust it.
//! Whatever the broker (Kafka value, SQS body, ...), the message bytes are the same.
//!
//!     cargo run -p ankusa-sdk --example consume_message -- message.json
//!     ANKUSA_CLAIM_URL=http://ankusa:4001 ANKUSA_CLAIM_TOKEN=... \
//!         cargo run -p ankusa-sdk --example consume_message -- message.json
//!
//! Exit status: 0 handled, 3 dead-letter it (permanent), 75 requeue it with a delay.

use std::process::ExitCode;
use std::time::Duration;

use ankusa_sdk::{ClaimClient, decode_message, to_hook};

const DEAD_LETTER: u8 = 3;
const REQUEUE: u8 = 75;

#[tokio::main]
async fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: consume_message <message file>");
        return ExitCode::from(2);
    };
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("cannot read {path}: {e}");
            return ExitCode::from(2);
        }
    };

    // Bytes that do not decode fail the same way every time: dead-letter, never requeue.
    let message = match decode_message(&bytes) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("dead-letter: {e}");
            return ExitCode::from(DEAD_LETTER);
        }
    };

    let url = std::env::var("ANKUSA_CLAIM_URL").unwrap_or_else(|_| "http://127.0.0.1:4001".into());
    let mut claims = ClaimClient::new(url).timeout(Duration::from_secs(10));
    if let Ok(token) = std::env::var("ANKUSA_CLAIM_TOKEN") {
        claims = claims.token(token);
    }

    // An inline body needs no request; a claim is fetched and checked against size and sha256.
    let hook = match to_hook(&message, &claims).await {
        Ok(hook) => hook,
        Err(e) if e.retryable() => {
            eprintln!("requeue with a delay: {e}");
            return ExitCode::from(REQUEUE);
        }
        Err(e) => {
            eprintln!("dead-letter ({}): {e}", e.class());
            return ExitCode::from(DEAD_LETTER);
        }
    };

    // Delivery is at-least-once: dedupe on this key (add `true` to process replays again).
    let key = hook.idempotency_key(false);
    println!(
        "hook {} of {}/{}: {} bytes, key {key}, trusted {}",
        hook.id,
        hook.tenant(),
        hook.source_id.as_deref().unwrap_or("?"),
        hook.body.len(),
        hook.is_trusted(),
    );
    ExitCode::SUCCESS
}
