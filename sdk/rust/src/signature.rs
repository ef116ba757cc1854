//! Standard Webhooks verification: the `webhook-id`, `webhook-timestamp` and
//! `webhook-signature` headers over the raw body, checked in the contract's order so the same
//! input fails with the same code in every SDK.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::errors::{InvalidSignatureError, SignatureErrorKind as Kind};
use crate::headers::{Headers, non_empty};

/// The window of `webhook-timestamp` around now when none is given.
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(300);

const SECRET_PREFIX: &str = "whsec_";

/// How [`verify_signature`] judges time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerifyOptions {
    /// Unix seconds to judge the timestamp against; `None`: the system clock.
    pub now: Option<i64>,
    /// How far `webhook-timestamp` may be from now, either way (300 s by default).
    pub tolerance: Duration,
}

impl Default for VerifyOptions {
    fn default() -> Self {
        VerifyOptions {
            now: None,
            tolerance: DEFAULT_TOLERANCE,
        }
    }
}

/// What a verified signature vouches for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedHeaders {
    /// `webhook-id`: the hook id the signature covers.
    pub id: String,
    /// `webhook-timestamp`, unix seconds.
    pub timestamp: i64,
}

/// Verifies a Standard Webhooks signature over the raw `body`.
///
/// `secrets` are tried in turn (rotation: any may match); a secret starting with `whsec_` is
/// the base64 of the key, any other string is its own UTF-8 bytes. Every secret is checked for
/// validity first, so a broken one is reported even when another would match. The comparison
/// is constant-time.
pub fn verify_signature<H, S>(
    headers: &H,
    body: &[u8],
    secrets: &[S],
    options: VerifyOptions,
) -> Result<SignedHeaders, InvalidSignatureError>
where
    H: Headers + ?Sized,
    S: AsRef<str>,
{
    let keys = decode_secrets(secrets)?;
    let id = required(headers, "webhook-id")?;
    let ts_text = required(headers, "webhook-timestamp")?;
    let signatures = required(headers, "webhook-signature")?;
    let timestamp = parse_timestamp(ts_text)?;
    let now = options.now.unwrap_or_else(system_now);
    let tolerance = i128::from(options.tolerance.as_secs());
    let distance = match timestamp {
        Some(ts) => (i128::from(now) - i128::from(ts)).abs(),
        // An integer beyond i64 is as far from now as it gets.
        None => i128::MAX,
    };
    if distance > tolerance {
        return Err(InvalidSignatureError::new(
            Kind::TimestampOutOfTolerance,
            "webhook-timestamp",
            format!("more than {} s from now", options.tolerance.as_secs()),
        ));
    }
    // In range, so it fitted in an i64.
    let timestamp = timestamp.unwrap_or_default();
    let candidates: Vec<Vec<u8>> = signatures
        .split(' ')
        .filter_map(|entry| entry.strip_prefix("v1,"))
        .filter_map(|b64| STANDARD.decode(b64).ok())
        .collect();
    let mut matched = subtle::Choice::from(0u8);
    for key in &keys {
        let tag = sign_raw(key, id, ts_text, body);
        for candidate in &candidates {
            // Every pair is compared, so the time taken does not say which one matched.
            matched |= tag.as_slice().ct_eq(candidate.as_slice());
        }
    }
    if !bool::from(matched) {
        return Err(InvalidSignatureError::new(
            Kind::NoMatchingSignature,
            "webhook-signature",
            format!(
                "none of {} v1 signature(s) matches any of {} secret(s)",
                candidates.len(),
                keys.len()
            ),
        ));
    }
    Ok(SignedHeaders {
        id: id.to_string(),
        timestamp,
    })
}

/// The HMAC-SHA256 of `<id>.<timestamp>.<body>`, as the signer computed it over the header's
/// own text.
fn sign_raw(key: &[u8], id: &str, timestamp: &str, body: &[u8]) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body);
    mac.finalize().into_bytes().to_vec()
}

/// The key bytes of each secret; the first unusable one fails (named by position, never by
/// value).
fn decode_secrets<S: AsRef<str>>(secrets: &[S]) -> Result<Vec<Vec<u8>>, InvalidSignatureError> {
    let bad = |detail: String| InvalidSignatureError::new(Kind::InvalidSecret, "secrets", detail);
    if secrets.is_empty() {
        return Err(bad("no secret configured".into()));
    }
    let n = secrets.len();
    secrets
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let s = s.as_ref();
            let key = match s.strip_prefix(SECRET_PREFIX) {
                Some(b64) => STANDARD.decode(b64).map_err(|_| {
                    bad(format!(
                        "secret {} of {n} is not standard base64 after whsec_",
                        i + 1
                    ))
                })?,
                None => s.as_bytes().to_vec(),
            };
            if key.is_empty() {
                return Err(bad(format!("secret {} of {n} is empty", i + 1)));
            }
            Ok(key)
        })
        .collect()
}

fn required<'a, H: Headers + ?Sized>(
    headers: &'a H,
    name: &'static str,
) -> Result<&'a str, InvalidSignatureError> {
    non_empty(headers, name).ok_or_else(|| {
        InvalidSignatureError::new(Kind::MissingHeader, name, format!("{name} is missing"))
    })
}

/// An optionally signed decimal integer: `Ok(None)` when it is one but beyond an `i64`.
fn parse_timestamp(text: &str) -> Result<Option<i64>, InvalidSignatureError> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(InvalidSignatureError::new(
            Kind::InvalidTimestamp,
            "webhook-timestamp",
            "not a decimal integer of unix seconds",
        ));
    }
    Ok(text.parse::<i64>().ok())
}

fn system_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    fn reference() -> [(&'static str, &'static str); 3] {
        [
            ("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek"),
            ("webhook-timestamp", "1614265330"),
            (
                "webhook-signature",
                "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
            ),
        ]
    }

    #[test]
    fn the_specification_vector_verifies() {
        let opts = VerifyOptions {
            now: Some(1614265330),
            ..Default::default()
        };
        let ok =
            verify_signature(&reference(), br#"{"test": 2432232314}"#, &[SECRET], opts).unwrap();
        assert_eq!(ok.timestamp, 1614265330);
    }

    #[test]
    fn a_huge_timestamp_is_out_of_tolerance_not_a_crash() {
        let mut h = reference();
        h[1].1 = "99999999999999999999999999999";
        let e = verify_signature(&h, b"", &[SECRET], VerifyOptions::default()).unwrap_err();
        assert_eq!(e.code(), "timestamp_out_of_tolerance");
    }

    #[test]
    fn errors_never_carry_the_secret() {
        let e = verify_signature(
            &reference(),
            b"",
            &["whsec_!!secret!!"],
            VerifyOptions::default(),
        )
        .unwrap_err();
        assert_eq!(e.code(), "invalid_secret");
        assert!(!e.to_string().contains("secret!!"), "{e}");
    }
}
