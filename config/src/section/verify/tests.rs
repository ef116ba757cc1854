//! `verify`'s rules, through a whole config: secret lists and the custom HMAC descriptor.

use crate::testing::{log_source, with_source};
use crate::*;

#[test]
fn empty_secret_is_refused() {
    let mut s = log_source();
    s.verify = VerifyConfig::Github(Preset {
        secret: Secrets(vec!["new".into(), "".into()]),
    });
    let e = validate(&with_source(s)).unwrap_err();
    assert_eq!(
        e.field.as_deref(),
        Some("sources.s.verify.secret[1]"),
        "{e}"
    );
}

#[test]
fn nine_secrets_are_refused() {
    let mut s = log_source();
    s.verify = VerifyConfig::Github(Preset {
        secret: Secrets(vec!["k".into(); 9]),
    });
    assert!(
        validate(&with_source(s))
            .unwrap_err()
            .message
            .contains("at most 8")
    );
}

#[test]
fn hmac_descriptor_rules() {
    let mut h = HmacVerify {
        secret: Secrets::one("k"),
        signature_header: "X-Sig".into(),
        signed: "{ts}.{body}".into(),
        hash: HmacHash::Sha256,
        encoding: SigEncoding::Hex,
        sig_prefix: None,
        parse: SigParse::Whole,
        sig_key: None,
        version: None,
        timestamp_header: None,
        tolerance_seconds: None,
        secret_decode: SecretDecode::Raw,
    };
    let mut s = log_source();
    s.verify = VerifyConfig::Hmac(h.clone());
    assert!(
        validate(&with_source(s.clone()))
            .unwrap_err()
            .message
            .contains("{ts}")
    );
    h.timestamp_header = Some("X-Ts".into());
    s.verify = VerifyConfig::Hmac(h.clone());
    let e = validate(&with_source(s.clone())).unwrap_err();
    assert_eq!(
        e.field.as_deref(),
        Some("sources.s.verify.tolerance_seconds")
    );
    h.tolerance_seconds = Some(MAX_TOLERANCE_SECONDS + 1);
    s.verify = VerifyConfig::Hmac(h.clone());
    let e = validate(&with_source(s.clone())).unwrap_err();
    assert!(
        e.to_string()
            .contains("sources.s.verify.tolerance_seconds must be <= 3600")
    );
    h.tolerance_seconds = Some(300);
    s.verify = VerifyConfig::Hmac(h.clone());
    validate(&with_source(s.clone())).unwrap();
    for adjacent in [
        "{header:x-id}{body}",
        "{ts}.{body}{header:x-id}",
        "{body}{body}",
    ] {
        h.signed = adjacent.into();
        s.verify = VerifyConfig::Hmac(h.clone());
        let e = validate(&with_source(s.clone())).unwrap_err();
        assert_eq!(
            e.field.as_deref(),
            Some("sources.s.verify.signed"),
            "{adjacent}"
        );
        assert!(e.message.contains("ambiguous"), "{e}");
        assert!(!e.to_string().contains("x-id"), "{e}");
    }
    h.signed = "{header:x-id}.{body}".into();
    s.verify = VerifyConfig::Hmac(h.clone());
    validate(&with_source(s.clone())).unwrap();
    h.signed = "{bogus}".into();
    s.verify = VerifyConfig::Hmac(h);
    assert!(
        validate(&with_source(s))
            .unwrap_err()
            .message
            .contains("unknown token")
    );
}
