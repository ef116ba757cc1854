//! Shopify: `X-Shopify-Hmac-SHA256: <base64>`, HMAC-SHA256 of the raw body with the app's
//! client secret, standard base64. No timestamp.
//!
//! Order: missing / repeated header → malformed (not base64) → no match.

use http::{HeaderMap, HeaderName};

use crate::mac::{MacKey, find_match};
use crate::{VerifyFailure, decode_base64, malformed, one_header, text};

static SIGNATURE: HeaderName = HeaderName::from_static("x-shopify-hmac-sha256");

pub(crate) fn verify(
    keys: &[MacKey],
    headers: &HeaderMap,
    body: &[u8],
) -> Result<usize, VerifyFailure> {
    let value = text(one_header(headers, &SIGNATURE)?, &SIGNATURE)?;
    let sig = decode_base64(value).ok_or_else(|| malformed(&SIGNATURE))?;
    find_match(keys, &[body], &[sig]).ok_or(VerifyFailure::NoMatchingSignature)
}

#[cfg(test)]
mod tests {
    use crate::test_support::{headers, secrets};
    use crate::{Verified, Verifier, VerifyFailure};
    use ankusa_config::{Preset, VerifyConfig};

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
        let cfg = VerifyConfig::Shopify(Preset {
            secret: secrets(list),
        });
        Verifier::new(&cfg).ok().flatten().expect("builds")
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
