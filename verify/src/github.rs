//! GitHub: `X-Hub-Signature-256: sha256=<hex>`, HMAC-SHA256 of the raw body with the
//! webhook secret, hex (either case accepted). No timestamp.
//!
//! Order: missing / repeated header → malformed (no `sha256=` prefix, not hex) → no match.

use http::HeaderName;

use crate::mac::MacKey;
use crate::{Matched, Request, body_mac, decode_hex};

static SIGNATURE: HeaderName = HeaderName::from_static("x-hub-signature-256");

pub(crate) fn verify(keys: &[MacKey], req: &Request<'_>) -> Matched {
    body_mac(keys, req, &SIGNATURE, |value| {
        value.strip_prefix("sha256=").and_then(decode_hex)
    })
}

#[cfg(test)]
mod tests {
    use crate::test_support::headers;
    use crate::{Verified, Verifier, VerifyFailure};
    use ankusa_config::VerifyConfig;

    // GitHub Docs, "Validating webhook deliveries" (docs.github.com/en/webhooks/using-webhooks/
    // validating-webhook-deliveries), "Testing the webhook payload validation": secret
    // "It's a Secret to Everybody", payload "Hello, World!", expected signature below.
    const SECRET: &str = "It's a Secret to Everybody";
    const BODY: &[u8] = b"Hello, World!";
    const SIG: &str = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
    // For rotation, computed with Python:
    //   python3 -c 'import hmac,hashlib; print(hmac.new(b"new-secret", b"Hello, World!", hashlib.sha256).hexdigest())'
    const NEW_SECRET: &str = "new-secret";
    const NEW_SIG: &str = "sha256=693585aa43518a80e267fbc0ace9296f035480e1a1b11cd09cf6a9b8a7ef0330";

    fn verifier(list: &[&str]) -> Verifier {
        crate::test_support::preset(VerifyConfig::Github, list)
    }

    fn check(v: &Verifier, sig: &str, body: &[u8]) -> Result<Verified, VerifyFailure> {
        v.verify(&headers(&[("X-Hub-Signature-256", sig)]), body, 0)
    }

    #[test]
    fn documented_example() {
        let v = verifier(&[SECRET]);
        assert_eq!(v.scheme(), "github");
        assert_eq!(check(&v, SIG, BODY), Ok(Verified { secret_index: 0 }));
        let upper = format!("sha256={}", SIG["sha256=".len()..].to_uppercase());
        assert_eq!(check(&v, &upper, BODY), Ok(Verified { secret_index: 0 }));
        assert_eq!(
            check(&v, SIG, b"Hello, World?"),
            Err(VerifyFailure::NoMatchingSignature)
        );
    }

    #[test]
    fn tampered_signature() {
        let v = verifier(&[SECRET]);
        // Last hex digit changed (…3e17 → …3e16), and one byte short.
        let last = SIG.replace("3e17", "3e16");
        let short = &SIG[..SIG.len() - 2];
        for bad in [last.as_str(), short] {
            assert_eq!(
                check(&v, bad, BODY),
                Err(VerifyFailure::NoMatchingSignature),
                "{bad}"
            );
        }
    }

    #[test]
    fn wrong_secret() {
        assert_eq!(
            check(&verifier(&["not it"]), SIG, BODY),
            Err(VerifyFailure::NoMatchingSignature)
        );
    }

    #[test]
    fn rotation() {
        let v = verifier(&[NEW_SECRET, SECRET]);
        assert_eq!(check(&v, SIG, BODY), Ok(Verified { secret_index: 1 }));
        assert_eq!(check(&v, NEW_SIG, BODY), Ok(Verified { secret_index: 0 }));
    }

    #[test]
    fn missing_and_malformed_header() {
        let v = verifier(&[SECRET]);
        assert_eq!(
            v.verify(&headers(&[("x-hub-signature", "sha1=00")]), BODY, 0),
            Err(VerifyFailure::MissingHeader("x-hub-signature-256".into()))
        );
        let m = Err(VerifyFailure::MalformedHeader("x-hub-signature-256".into()));
        let bare = &SIG["sha256=".len()..];
        for bad in [
            bare,
            "sha256=",
            "sha256=xyz",
            "sha1=01dc10d0c83e72ed246219cdd91669667fe2ca59",
            "SHA256=00",
        ] {
            assert_eq!(check(&v, bad, BODY), m, "{bad}");
        }
        let twice = headers(&[("x-hub-signature-256", SIG), ("x-hub-signature-256", SIG)]);
        assert_eq!(v.verify(&twice, BODY, 0), m);
    }
}
