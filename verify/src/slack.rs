//! Slack: `X-Slack-Signature: v0=<hex>`, HMAC-SHA256 with the signing secret over
//! `v0:{ts}:{body}`, where `ts` is `X-Slack-Request-Timestamp` (integer seconds, within the
//! tolerance of now).
//!
//! Order: missing / repeated timestamp header → missing / repeated signature header → invalid
//! timestamp → out of tolerance → malformed signature (no `v0=`, not hex) → no match.

use http::HeaderName;

use crate::mac::{MacKey, find_match};
use crate::{
    Matched, Request, VerifyFailure, check_tolerance, decode_hex, malformed, one_header, parse_ts,
    text,
};

static SIGNATURE: HeaderName = HeaderName::from_static("x-slack-signature");
static TIMESTAMP: HeaderName = HeaderName::from_static("x-slack-request-timestamp");

pub(crate) fn verify(keys: &[MacKey], tolerance: u64, req: &Request<'_>) -> Matched {
    let Request { headers, body, now } = *req;
    let ts = one_header(headers, &TIMESTAMP)?.as_bytes();
    let sig = one_header(headers, &SIGNATURE)?;
    check_tolerance(parse_ts(ts)?, now, tolerance)?;
    let sig = text(sig, &SIGNATURE)?
        .strip_prefix("v0=")
        .and_then(decode_hex)
        .ok_or_else(|| malformed(&SIGNATURE))?;
    find_match(keys, &[b"v0:", ts, b":", body], &[sig]).ok_or(VerifyFailure::NoMatchingSignature)
}

#[cfg(test)]
mod tests {
    use crate::test_support::headers;
    use crate::{Verified, Verifier, VerifyFailure};
    use ankusa_config::VerifyConfig;

    // Slack's docs, "Verifying requests from Slack" (api.slack.com/authentication/
    // verifying-requests-from-slack, now docs.slack.dev), the worked example. Note the body's
    // `command=%2Fwebhook-collect`: that is what the docs' signature is computed over
    // (reproduced with Python's hmac before pasting).
    const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
    const TS: i64 = 1531420618;
    const BODY: &[u8] = b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
    const SIG: &str = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";
    // For rotation, computed with Python over the same basestring:
    //   python3 -c 'import hmac,hashlib; print(hmac.new(b"new-slack-secret", b"v0:1531420618:" + BODY, hashlib.sha256).hexdigest())'
    const NEW_SECRET: &str = "new-slack-secret";
    const NEW_SIG: &str = "v0=96a3160b2302c7cef3d90405fc0c9df1d3d3482059bec604106331e99218af25";

    fn verifier(list: &[&str]) -> Verifier {
        crate::test_support::timed(VerifyConfig::Slack, list)
    }

    fn check(v: &Verifier, ts: &str, sig: &str, now: i64) -> Result<Verified, VerifyFailure> {
        let h = headers(&[
            ("X-Slack-Request-Timestamp", ts),
            ("X-Slack-Signature", sig),
        ]);
        v.verify(&h, BODY, now)
    }

    #[test]
    fn documented_example() {
        let v = verifier(&[SECRET]);
        assert_eq!(v.scheme(), "slack");
        assert_eq!(
            check(&v, "1531420618", SIG, TS + 60),
            Ok(Verified { secret_index: 0 })
        );
        let h = headers(&[
            ("x-slack-request-timestamp", "1531420618"),
            ("x-slack-signature", SIG),
        ]);
        assert_eq!(
            v.verify(&h, b"token=other", TS),
            Err(VerifyFailure::NoMatchingSignature)
        );
        // The timestamp is signed.
        assert_eq!(
            check(&v, "1531420619", SIG, TS),
            Err(VerifyFailure::NoMatchingSignature)
        );
    }

    #[test]
    fn wrong_secret() {
        let v = verifier(&["8f742231b10e8888abcd99yyyzzz85a6"]);
        assert_eq!(
            check(&v, "1531420618", SIG, TS),
            Err(VerifyFailure::NoMatchingSignature)
        );
    }

    #[test]
    fn rotation() {
        let v = verifier(&[NEW_SECRET, SECRET]);
        assert_eq!(
            check(&v, "1531420618", SIG, TS),
            Ok(Verified { secret_index: 1 })
        );
        assert_eq!(
            check(&v, "1531420618", NEW_SIG, TS),
            Ok(Verified { secret_index: 0 })
        );
    }

    #[test]
    fn missing_and_malformed_headers() {
        let v = verifier(&[SECRET]);
        assert_eq!(
            v.verify(&headers(&[("x-slack-signature", SIG)]), BODY, TS),
            Err(VerifyFailure::MissingHeader(
                "x-slack-request-timestamp".into()
            ))
        );
        assert_eq!(
            v.verify(
                &headers(&[("x-slack-request-timestamp", "1531420618")]),
                BODY,
                TS
            ),
            Err(VerifyFailure::MissingHeader("x-slack-signature".into()))
        );
        let m = Err(VerifyFailure::MalformedHeader("x-slack-signature".into()));
        let bare = &SIG[3..];
        for bad in [bare, "v0=", "v0=not-hex", "v1=a2114d57"] {
            assert_eq!(check(&v, "1531420618", bad, TS), m, "{bad}");
        }
    }

    #[test]
    fn timestamps() {
        let v = verifier(&[SECRET]);
        assert_eq!(
            check(&v, "1531420618", SIG, TS + 300),
            Ok(Verified { secret_index: 0 })
        );
        assert_eq!(
            check(&v, "1531420618", SIG, TS + 301),
            Err(VerifyFailure::TimestampOutOfTolerance)
        );
        assert_eq!(
            check(&v, "1531420618", SIG, TS - 301),
            Err(VerifyFailure::TimestampOutOfTolerance)
        );
        for bad in ["1531420618.0", "", "now", "-1"] {
            assert_eq!(
                check(&v, bad, SIG, TS),
                Err(VerifyFailure::InvalidTimestamp),
                "{bad:?}"
            );
        }
        // A stale timestamp is reported before a malformed signature.
        assert_eq!(
            check(&v, "1", "junk", TS),
            Err(VerifyFailure::TimestampOutOfTolerance)
        );
    }
}
