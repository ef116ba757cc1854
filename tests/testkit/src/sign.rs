//! Provider signatures for test hooks.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// GitHub's `X-Hub-Signature-256` value: `sha256=<hex of HMAC-SHA256(secret, body)>`.
pub fn github(secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("any key length");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}
