//! Standard Webhooks (standardwebhooks.com; Svix): headers `webhook-id`,
//! `webhook-timestamp` (integer seconds), `webhook-signature`, or `svix-id`,
//! `svix-timestamp`, `svix-signature` when no `webhook-*` one is present (all three always
//! from the same family). Signed string `{id}.{timestamp}.{body}`, HMAC-SHA256, standard
//! base64. The signature header holds space-separated `v1,<base64>` entries (one per key
//! while rotating); entries of other versions are ignored. Key: `whsec_<base64>` decoded,
//! any other secret is its own bytes.
//!
//! Order (inventory §2.18): bad secret → missing `id`, `timestamp`, `signature` (in that
//! order) → invalid timestamp → out of tolerance (|now − ts| > tolerance; equal passes) →
//! no matching signature. A repeated header is malformed where it would be missing; a
//! signature header that is not text is malformed after the timestamp checks.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use http::HeaderName;

use ankusa_config::HmacHash;

use crate::mac::{MacKey, find_match};
use crate::{
    Matched, Request, VerifyFailure, check_tolerance, decode_base64, one_header, parse_ts, text,
};

static WEBHOOK: [HeaderName; 3] = [
    HeaderName::from_static("webhook-id"),
    HeaderName::from_static("webhook-timestamp"),
    HeaderName::from_static("webhook-signature"),
];
static SVIX: [HeaderName; 3] = [
    HeaderName::from_static("svix-id"),
    HeaderName::from_static("svix-timestamp"),
    HeaderName::from_static("svix-signature"),
];

/// The Standard Webhooks key of a secret: `whsec_<base64>` decodes (standard, padded
/// base64), any other string is its own bytes. An empty key or bad base64 is `BadSecret`.
pub fn standard_webhooks_key(secret: &str) -> Result<Vec<u8>, VerifyFailure> {
    let key = match secret.strip_prefix("whsec_") {
        Some(b64) => STANDARD.decode(b64).map_err(|_| VerifyFailure::BadSecret)?,
        None => secret.as_bytes().to_vec(),
    };
    if key.is_empty() {
        return Err(VerifyFailure::BadSecret);
    }
    Ok(key)
}

/// The value of a `webhook-signature` header for an outgoing delivery: one `v1,<base64>`
/// entry per key, in key order, space-separated.
pub fn sign_standard_webhooks(
    keys: &[Vec<u8>],
    msg_id: &str,
    timestamp: i64,
    body: &[u8],
) -> String {
    let ts = timestamp.to_string();
    let parts: [&[u8]; 5] = [msg_id.as_bytes(), b".", ts.as_bytes(), b".", body];
    keys.iter()
        // MacKey::new never refuses a key (HMAC takes any length); nothing is skipped.
        .filter_map(|k| MacKey::new(HmacHash::Sha256, k))
        .map(|m| format!("v1,{}", STANDARD.encode(m.compute(&parts))))
        .collect::<Vec<_>>()
        .join(" ")
}

pub(crate) fn verify(keys: &[MacKey], tolerance: u64, req: &Request<'_>) -> Matched {
    let Request { headers, body, now } = *req;
    let any = |family: &[HeaderName; 3]| family.iter().any(|n| headers.contains_key(n));
    let [id_name, ts_name, sig_name] = if !any(&WEBHOOK) && any(&SVIX) {
        &SVIX
    } else {
        &WEBHOOK
    };
    let id = one_header(headers, id_name)?.as_bytes();
    let ts = one_header(headers, ts_name)?.as_bytes();
    let sig = one_header(headers, sig_name)?;
    check_tolerance(parse_ts(ts)?, now, tolerance)?;
    let candidates: Vec<Vec<u8>> = text(sig, sig_name)?
        .split_ascii_whitespace()
        .filter_map(|entry| entry.strip_prefix("v1,"))
        .filter_map(decode_base64)
        .collect();
    find_match(keys, &[id, b".", ts, b".", body], &candidates)
        .ok_or(VerifyFailure::NoMatchingSignature)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::headers;
    use crate::{Verified, Verifier};
    use ankusa_config::VerifyConfig;
    use http::HeaderMap;

    // Inventory §2.18: conformance/cases/signature.json case `signature.ok.reference` (the
    // Standard Webhooks / Svix reference example; reproduced with Python's hmac before pasting).
    const ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const TS: i64 = 1614265330;
    const BODY: &[u8] = br#"{"test": 2432232314}"#;
    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const SIG: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
    // A second key for rotation, computed with Python:
    //   python3 -c 'import hmac,hashlib,base64; print(base64.b64encode(hmac.new(b"another-32-byte-key-for-rotation", b"msg_p5jXN8AQM9LWM0D4loKWxJek.1614265330.{\"test\": 2432232314}", hashlib.sha256).digest()).decode())'
    //   (the secret is "whsec_" + base64 of that key; "raw-secret" likewise as raw bytes)
    const NEW_SECRET: &str = "whsec_YW5vdGhlci0zMi1ieXRlLWtleS1mb3Itcm90YXRpb24=";
    const NEW_SIG: &str = "v1,hkK/uQTyqEI3bNe3aQOrUQ65Ogx4Qh39RwtcSbJSB0Y=";
    const RAW_SIG: &str = "v1,vY2jbnFdNOobaMZSCUxhI7K9Riv9fkQ36MbUMEQSbJw=";

    fn verifier(list: &[&str]) -> Verifier {
        crate::test_support::timed(VerifyConfig::StandardWebhooks, list)
    }

    fn hdrs(prefix: &str, ts: &str, sig: &str) -> HeaderMap {
        headers(&[
            (&format!("{prefix}-id"), ID),
            (&format!("{prefix}-timestamp"), ts),
            (&format!("{prefix}-signature"), sig),
        ])
    }

    fn ok(i: usize) -> Result<Verified, VerifyFailure> {
        Ok(Verified { secret_index: i })
    }

    #[test]
    fn reference_vector_and_window() {
        let v = verifier(&[SECRET]);
        assert_eq!(v.scheme(), "standard_webhooks");
        for prefix in ["webhook", "svix"] {
            let h = hdrs(prefix, "1614265330", SIG);
            assert_eq!(v.verify(&h, BODY, TS), ok(0), "{prefix}");
            assert_eq!(v.verify(&h, BODY, 1614265630), ok(0), "{prefix}");
            assert_eq!(
                v.verify(&h, BODY, 1614265631),
                Err(VerifyFailure::TimestampOutOfTolerance),
                "{prefix}"
            );
            // Future timestamps: the same window the other way.
            assert_eq!(v.verify(&h, BODY, TS - 300), ok(0), "{prefix}");
            assert_eq!(
                v.verify(&h, BODY, TS - 301),
                Err(VerifyFailure::TimestampOutOfTolerance),
                "{prefix}"
            );
            assert_eq!(
                v.verify(&h, b"{\"test\": 2432232315}", TS),
                Err(VerifyFailure::NoMatchingSignature)
            );
        }
    }

    #[test]
    fn sign_reproduces_reference() {
        let key = standard_webhooks_key(SECRET).expect("decodes");
        assert_eq!(
            sign_standard_webhooks(std::slice::from_ref(&key), ID, TS, BODY),
            SIG
        );
        let new = standard_webhooks_key(NEW_SECRET).expect("decodes");
        let both = sign_standard_webhooks(&[new, key], ID, TS, BODY);
        assert_eq!(both, format!("{NEW_SIG} {SIG}"));
        assert_eq!(sign_standard_webhooks(&[], ID, TS, BODY), "");
        // What we sign, we verify (with either key).
        let v = verifier(&[SECRET]);
        assert_eq!(
            v.verify(&hdrs("webhook", "1614265330", &both), BODY, TS),
            ok(0)
        );
    }

    #[test]
    fn keys() {
        assert_eq!(
            standard_webhooks_key("raw-secret"),
            Ok(b"raw-secret".to_vec())
        );
        assert_eq!(standard_webhooks_key("whsec_AAEC"), Ok(vec![0, 1, 2]));
        for bad in ["", "whsec_", "whsec_!!notbase64", "whsec_AAE"] {
            assert_eq!(
                standard_webhooks_key(bad),
                Err(VerifyFailure::BadSecret),
                "{bad:?}"
            );
        }
        let v = verifier(&["raw-secret"]);
        assert_eq!(
            v.verify(&hdrs("webhook", "1614265330", RAW_SIG), BODY, TS),
            ok(0)
        );
    }

    #[test]
    fn entries_and_versions() {
        let v = verifier(&[SECRET]);
        let sig_b64 = &SIG[3..];
        let check = |sig: &str| v.verify(&hdrs("webhook", "1614265330", sig), BODY, TS);
        assert_eq!(check(&format!("v1,Zm9v {SIG}  v2,xyz")), ok(0));
        // Only `v1,` entries count.
        for other in [
            format!("v2,{sig_b64}"),
            format!("v1a,{sig_b64}"),
            format!("V1,{sig_b64}"),
            sig_b64.to_owned(),
        ] {
            assert_eq!(
                check(&other),
                Err(VerifyFailure::NoMatchingSignature),
                "{other}"
            );
        }
        assert_eq!(check(""), Err(VerifyFailure::NoMatchingSignature));
        assert_eq!(check("v1,!!!"), Err(VerifyFailure::NoMatchingSignature));
    }

    #[test]
    fn tampered_signature() {
        let v = verifier(&[SECRET]);
        // The last byte changed (…1OE= → …1OA=), and the signature truncated.
        for bad in [
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA=",
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ",
        ] {
            assert_eq!(
                v.verify(&hdrs("webhook", "1614265330", bad), BODY, TS),
                Err(VerifyFailure::NoMatchingSignature)
            );
        }
    }

    #[test]
    fn wrong_secret() {
        let v = verifier(&[NEW_SECRET]);
        assert_eq!(
            v.verify(&hdrs("webhook", "1614265330", SIG), BODY, TS),
            Err(VerifyFailure::NoMatchingSignature)
        );
    }

    #[test]
    fn rotation() {
        let v = verifier(&[NEW_SECRET, SECRET]);
        assert_eq!(
            v.verify(&hdrs("webhook", "1614265330", SIG), BODY, TS),
            ok(1)
        );
        assert_eq!(
            v.verify(&hdrs("svix", "1614265330", NEW_SIG), BODY, TS),
            ok(0)
        );
    }

    #[test]
    fn error_order() {
        // bad secret first, even with no headers at all.
        let bad = verifier(&["whsec_!!notbase64"]);
        assert_eq!(
            bad.verify(&HeaderMap::new(), BODY, TS),
            Err(VerifyFailure::BadSecret)
        );
        let rotation_with_bad = verifier(&[SECRET, "whsec_"]);
        assert_eq!(
            rotation_with_bad.verify(&hdrs("webhook", "1614265330", SIG), BODY, TS),
            Err(VerifyFailure::BadSecret)
        );

        let v = verifier(&[SECRET]);
        let missing = |n: &str| Err(VerifyFailure::MissingHeader(n.into()));
        assert_eq!(v.verify(&HeaderMap::new(), BODY, TS), missing("webhook-id"));
        assert_eq!(
            v.verify(&headers(&[("webhook-signature", SIG)]), BODY, TS),
            missing("webhook-id")
        );
        assert_eq!(
            v.verify(
                &headers(&[("webhook-id", ID), ("webhook-signature", SIG)]),
                BODY,
                TS
            ),
            missing("webhook-timestamp")
        );
        assert_eq!(
            v.verify(
                &headers(&[("webhook-id", ID), ("webhook-timestamp", "x")]),
                BODY,
                TS
            ),
            missing("webhook-signature")
        );
        assert_eq!(
            v.verify(&headers(&[("svix-timestamp", "1")]), BODY, TS),
            missing("svix-id")
        );
        // Families never mix: one webhook-* header selects the webhook family.
        let mixed = headers(&[
            ("webhook-id", ID),
            ("svix-timestamp", "1614265330"),
            ("svix-signature", SIG),
        ]);
        assert_eq!(v.verify(&mixed, BODY, TS), missing("webhook-timestamp"));

        // invalid timestamp before tolerance before signature.
        assert_eq!(
            v.verify(&hdrs("webhook", "1614265330.0", "v1,junk"), BODY, TS),
            Err(VerifyFailure::InvalidTimestamp)
        );
        assert_eq!(
            v.verify(&hdrs("webhook", "abc", SIG), BODY, TS),
            Err(VerifyFailure::InvalidTimestamp)
        );
        assert_eq!(
            v.verify(&hdrs("webhook", "1614265330", "v1,junk"), BODY, TS + 301),
            Err(VerifyFailure::TimestampOutOfTolerance)
        );
        assert_eq!(
            v.verify(&hdrs("webhook", "1614265330", "v1,junk"), BODY, TS),
            Err(VerifyFailure::NoMatchingSignature)
        );
    }

    #[test]
    fn malformed_headers() {
        let v = verifier(&[SECRET]);
        let mut h = hdrs("webhook", "1614265330", SIG);
        h.append(
            "webhook-signature",
            http::HeaderValue::from_static("v1,Zm9v"),
        );
        assert_eq!(
            v.verify(&h, BODY, TS),
            Err(VerifyFailure::MalformedHeader("webhook-signature".into()))
        );
        let mut h = hdrs("webhook", "1614265330", SIG);
        h.insert(
            "webhook-signature",
            http::HeaderValue::from_bytes(b"v1,caf\xe9").expect("obs-text is a valid header value"),
        );
        assert_eq!(
            v.verify(&h, BODY, TS),
            Err(VerifyFailure::MalformedHeader("webhook-signature".into()))
        );
        let mut h = hdrs("webhook", "1614265330", SIG);
        h.append("webhook-id", http::HeaderValue::from_static("msg_other"));
        assert_eq!(
            v.verify(&h, BODY, TS),
            Err(VerifyFailure::MalformedHeader("webhook-id".into()))
        );
    }
}
