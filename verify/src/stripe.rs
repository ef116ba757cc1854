//! Stripe: `Stripe-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>...][,v0=<hex>]`.
//! Signed string `{t}.{body}`, HMAC-SHA256, hex. Any `v1` entry may match (Stripe sends one
//! per active endpoint secret while rolling); other schemes (`v0`) are ignored. The endpoint
//! secret (`whsec_...`) is used as raw bytes, not base64-decoded. `t` must be within the
//! tolerance of now.
//!
//! Order: missing / repeated header → no `t` or `t` twice (malformed) → invalid timestamp →
//! out of tolerance → no matching signature.

use http::HeaderName;

use crate::mac::{MacKey, find_match};
use crate::{
    Matched, Request, VerifyFailure, check_tolerance, csv_pairs, decode_hex, malformed, one_header,
    parse_ts, text,
};

static SIGNATURE: HeaderName = HeaderName::from_static("stripe-signature");

pub(crate) fn verify(keys: &[MacKey], tolerance: u64, req: &Request<'_>) -> Matched {
    let Request { headers, body, now } = *req;
    let value = text(one_header(headers, &SIGNATURE)?, &SIGNATURE)?;
    let mut t = None;
    let mut candidates = Vec::new();
    for (k, v) in csv_pairs(value) {
        match k {
            "t" => {
                if t.is_some() {
                    return Err(malformed(&SIGNATURE));
                }
                t = Some(v);
            }
            "v1" => candidates.extend(decode_hex(v)),
            _ => {}
        }
    }
    let t = t.ok_or_else(|| malformed(&SIGNATURE))?;
    check_tolerance(parse_ts(t.as_bytes())?, now, tolerance)?;
    find_match(keys, &[t.as_bytes(), b".", body], &candidates)
        .ok_or(VerifyFailure::NoMatchingSignature)
}

#[cfg(test)]
mod tests {
    use crate::test_support::headers;
    use crate::{Verified, Verifier, VerifyFailure};
    use ankusa_config::VerifyConfig;

    // Stripe's docs ("Verify webhook signatures manually", docs.stripe.com/webhooks) describe
    // the scheme but publish no fixed secret/payload/signature triple. The timestamp is the
    // one in the docs' example header (t=1492774577); the expected signatures were computed
    // independently with Python:
    //   python3 -c 'import hmac,hashlib; print(hmac.new(b"whsec_test_secret", b"1492774577.{\"id\": \"evt_test_webhook\", \"object\": \"event\"}", hashlib.sha256).hexdigest())'
    //   (and the same with b"whsec_old_secret")
    const T: i64 = 1492774577;
    const BODY: &[u8] = br#"{"id": "evt_test_webhook", "object": "event"}"#;
    const SECRET: &str = "whsec_test_secret";
    const SIG: &str = "c137b1b62277d523cf8fed4dfbd0170a9a5b8a380e00cc3711d4bf0652f2ce7a";
    const OLD_SECRET: &str = "whsec_old_secret";
    const OLD_SIG: &str = "52320f930420b8ccb95092a79c17be52d55e34e87d4372a190a34598e3b362fc";

    fn verifier(list: &[&str]) -> Verifier {
        crate::test_support::timed(VerifyConfig::Stripe, list)
    }

    fn check(v: &Verifier, header: &str, now: i64) -> Result<Verified, VerifyFailure> {
        v.verify(&headers(&[("Stripe-Signature", header)]), BODY, now)
    }

    #[test]
    fn python_vector() {
        let v = verifier(&[SECRET]);
        assert_eq!(
            check(&v, &format!("t={T},v1={SIG}"), T),
            Ok(Verified { secret_index: 0 })
        );
        // Upper-case hex and spaces around pairs are accepted.
        let upper = SIG.to_uppercase();
        assert_eq!(
            check(&v, &format!("t={T}, v1={upper}"), T + 10),
            Ok(Verified { secret_index: 0 })
        );
    }

    #[test]
    fn any_v1_entry_may_match_and_v0_is_ignored() {
        let v = verifier(&[SECRET]);
        let bogus = "0".repeat(64);
        let h = format!("t={T},v1={bogus},v1=nothex,v1={SIG},v0={bogus}");
        assert_eq!(check(&v, &h, T), Ok(Verified { secret_index: 0 }));
        assert_eq!(
            check(&v, &format!("t={T},v0={SIG}"), T),
            Err(VerifyFailure::NoMatchingSignature)
        );
        assert_eq!(
            check(&v, &format!("t={T}"), T),
            Err(VerifyFailure::NoMatchingSignature)
        );
    }

    #[test]
    fn wrong_secret() {
        let v = verifier(&["whsec_someone_else"]);
        assert_eq!(
            check(&v, &format!("t={T},v1={SIG}"), T),
            Err(VerifyFailure::NoMatchingSignature)
        );
    }

    #[test]
    fn body_and_timestamp_are_signed() {
        let v = verifier(&[SECRET]);
        let h = headers(&[("stripe-signature", &format!("t={T},v1={SIG}"))]);
        assert_eq!(
            v.verify(&h, b"{}", T),
            Err(VerifyFailure::NoMatchingSignature)
        );
        let moved = T + 1;
        assert_eq!(
            check(&v, &format!("t={moved},v1={SIG}"), T),
            Err(VerifyFailure::NoMatchingSignature)
        );
    }

    #[test]
    fn rotation() {
        let v = verifier(&[SECRET, OLD_SECRET]);
        assert_eq!(
            check(&v, &format!("t={T},v1={OLD_SIG}"), T),
            Ok(Verified { secret_index: 1 })
        );
        assert_eq!(
            check(&v, &format!("t={T},v1={SIG}"), T),
            Ok(Verified { secret_index: 0 })
        );
        // Stripe rolling its own secret sends both signatures.
        assert_eq!(
            check(&v, &format!("t={T},v1={OLD_SIG},v1={SIG}"), T),
            Ok(Verified { secret_index: 0 })
        );
    }

    #[test]
    fn missing_and_malformed_header() {
        let v = verifier(&[SECRET]);
        assert_eq!(
            v.verify(&headers(&[]), BODY, T),
            Err(VerifyFailure::MissingHeader("stripe-signature".into()))
        );
        let m = Err(VerifyFailure::MalformedHeader("stripe-signature".into()));
        assert_eq!(check(&v, "garbage", T), m);
        assert_eq!(check(&v, &format!("v1={SIG}"), T), m);
        assert_eq!(check(&v, &format!("t={T},t={T},v1={SIG}"), T), m);
        let twice = headers(&[
            ("stripe-signature", &format!("t={T},v1={SIG}")),
            ("stripe-signature", &format!("t={T},v1={SIG}")),
        ]);
        assert_eq!(v.verify(&twice, BODY, T), m);
    }

    #[test]
    fn timestamps() {
        let v = verifier(&[SECRET]);
        let h = format!("t={T},v1={SIG}");
        assert_eq!(check(&v, &h, T + 300), Ok(Verified { secret_index: 0 }));
        assert_eq!(check(&v, &h, T - 300), Ok(Verified { secret_index: 0 }));
        // Stale: signed more than 300 s ago; future: signed more than 300 s ahead.
        assert_eq!(
            check(&v, &h, T + 301),
            Err(VerifyFailure::TimestampOutOfTolerance)
        );
        assert_eq!(
            check(&v, &h, T - 301),
            Err(VerifyFailure::TimestampOutOfTolerance)
        );
        for bad in ["1492774577.5", "abc", "", "-1492774577"] {
            assert_eq!(
                check(&v, &format!("t={bad},v1={SIG}"), T),
                Err(VerifyFailure::InvalidTimestamp),
                "{bad}"
            );
        }
    }
}
