//! Shopify: `X-Shopify-Hmac-SHA256: <base64>`, HMAC-SHA256 of the raw body with the app's
//! client secret, standard base64. No timestamp.
//!
//! Order: missing / repeated header → malformed (not base64) → no match.

use http::HeaderName;

use crate::mac::MacKey;
use crate::{Matched, Request, body_mac, decode_base64};

static SIGNATURE: HeaderName = HeaderName::from_static("x-shopify-hmac-sha256");

pub(crate) fn verify(keys: &[MacKey], req: &Request<'_>) -> Matched {
    body_mac(keys, req, &SIGNATURE, decode_base64)
}

#[cfg(test)]
mod tests {
    use crate::test_support::headers;
    use crate::{Verified, Verifier, VerifyFailure};
    use ankusa_config::VerifyConfig;

    // Shopify's docs ("Verify webhooks", shopify.dev/docs/apps/build/webhooks/subscribe/https)
    // describe the scheme (base64 HMAC-SHA256 of the raw body) but publish no fixed vector.
    // Computed independently with Python:
    //   python3 -c 'import hmac,hashlib,base64; print(base64.b64encode(hmac.new(b"shpss_test_secret", b"{\"id\":820982911946154508}", hashlib.sha256).digest()).decode())'
    //   (and the same with b"shpss_new_secret")
    const BODY: &[u8] = br#"{"id":820982911946154508}"#;
    const SECRET: &str = "shpss_test_secret";
    const SIG: &str = "AU5n5C4JV1EbE8g4yEzV+ZHbqkXpM29HXkzNAa5zicA=";
    const NEW_SECRET: &str = "shpss_new_secret";
    const NEW_SIG: &str = "W/aDV7AhPR/ewOrjs/+rsnWqQCIkLsxYtxZJ8X0C0nM=";

    fn verifier(list: &[&str]) -> Verifier {
        crate::test_support::preset(VerifyConfig::Shopify, list)
    }

    fn check(v: &Verifier, sig: &str) -> Result<Verified, VerifyFailure> {
        v.verify(&headers(&[("X-Shopify-Hmac-SHA256", sig)]), BODY, 0)
    }

    #[test]
    fn python_vector() {
        let v = verifier(&[SECRET]);
        assert_eq!(v.scheme(), "shopify");
        assert_eq!(check(&v, SIG), Ok(Verified { secret_index: 0 }));
        let h = headers(&[("x-shopify-hmac-sha256", SIG)]);
        assert_eq!(
            v.verify(&h, b"{}", 0),
            Err(VerifyFailure::NoMatchingSignature)
        );
    }

    #[test]
    fn wrong_secret() {
        assert_eq!(
            check(&verifier(&["shpss_other"]), SIG),
            Err(VerifyFailure::NoMatchingSignature)
        );
    }

    #[test]
    fn rotation() {
        let v = verifier(&[NEW_SECRET, SECRET]);
        assert_eq!(check(&v, SIG), Ok(Verified { secret_index: 1 }));
        assert_eq!(check(&v, NEW_SIG), Ok(Verified { secret_index: 0 }));
    }

    #[test]
    fn missing_and_malformed_header() {
        let v = verifier(&[SECRET]);
        assert_eq!(
            v.verify(&headers(&[]), BODY, 0),
            Err(VerifyFailure::MissingHeader("x-shopify-hmac-sha256".into()))
        );
        let m = Err(VerifyFailure::MalformedHeader(
            "x-shopify-hmac-sha256".into(),
        ));
        for bad in [
            "",
            "not base64!",
            "AU5n5C4JV1EbE8g4yEzV+ZHbqkXpM29HXkzNAa5zicA",
            "sha256=AU5n",
        ] {
            assert_eq!(check(&v, bad), m, "{bad}");
        }
    }
}
