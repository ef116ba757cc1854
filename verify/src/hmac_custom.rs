//! Custom body HMAC (`verify.type: hmac`), described by the source's descriptor:
//! - signature in `signature_header`; `sig_prefix` (e.g. `sha256=`) stripped from each
//!   signature; `parse: whole` (the value is the signature), `csv_pairs` (`k=v,k=v`; every
//!   `sig_key` pair is a candidate, `t` is the timestamp when there is no
//!   `timestamp_header`) or `space_versions` (space-separated `version,sig` entries; those
//!   of `version` are candidates);
//! - signed string from the `signed` template: `{body}`, `{ts}`, `{header:<name>}` tokens
//!   and literal text;
//! - `hash` sha256 | sha512 | sha1, `encoding` hex | base64;
//! - `tolerance_seconds`, only enforced when set (the timestamp must then be integer
//!   seconds; a `{ts}` without tolerance is signed as sent);
//! - `secret_decode` raw (the secret's bytes) | whsec_base64 (`whsec_` + base64 of the key).
//!
//! Order: bad secret → missing / repeated headers (signature, timestamp, then the template's
//! headers in template order) → malformed signature header (not text; for `whole`, no prefix
//! or not decodable; for `csv_pairs`, no `t` or `t` twice when `t` is the timestamp) →
//! invalid timestamp → out of tolerance → no match.

use ankusa_config::{HmacVerify, SecretDecode, SigEncoding, SigParse};
use http::{HeaderMap, HeaderName};

use crate::mac::{KeyRing, MacKey, find_match};
use crate::{
    VerifierBuildError, VerifyFailure, check_tolerance, csv_pairs, decode_base64, decode_hex,
    malformed, one_header, parse_ts, standard_webhooks_key, text,
};

/// A compiled descriptor.
#[derive(Clone)]
pub(crate) struct Custom {
    signature_header: HeaderName,
    template: Vec<Part>,
    encoding: SigEncoding,
    sig_prefix: String,
    parse: Parse,
    /// Where the timestamp comes from; `None` when nothing uses it.
    timestamp: Option<TsSource>,
    tolerance: Option<u64>,
}

#[derive(Clone)]
enum Part {
    Literal(String),
    Body,
    Ts,
    Header(HeaderName),
}

#[derive(Clone)]
enum Parse {
    Whole,
    CsvPairs { sig_key: String },
    SpaceVersions { version: String },
}

#[derive(Clone)]
enum TsSource {
    Header(HeaderName),
    CsvT,
}

fn header_name(field: &'static str, name: &str) -> Result<HeaderName, VerifierBuildError> {
    HeaderName::from_bytes(name.as_bytes()).map_err(|_| VerifierBuildError::HeaderName { field })
}

fn required(v: &Option<String>, why: &'static str) -> Result<String, VerifierBuildError> {
    v.clone()
        .filter(|s| !s.is_empty())
        .ok_or(VerifierBuildError::Descriptor(why))
}

/// Splits a `signed` template into literal text and tokens. Two tokens with no literal text
/// between them (`{header:x}{body}`) are refused: bytes could move from one value into the
/// other (a header's tail becoming the body's head) and the signature would still match.
fn parse_template(tpl: &str) -> Result<Vec<Part>, VerifierBuildError> {
    let mut parts = Vec::new();
    let mut rest = tpl;
    while let Some(start) = rest.find('{') {
        let Some(len) = rest[start..].find('}') else {
            return Err(VerifierBuildError::Template("a `{` without a closing `}`"));
        };
        if start > 0 {
            parts.push(Part::Literal(rest[..start].to_owned()));
        } else if parts.last().is_some_and(|p| !matches!(p, Part::Literal(_))) {
            return Err(VerifierBuildError::Template(
                "two tokens with no literal text between them: the boundary is ambiguous",
            ));
        }
        let token = &rest[start + 1..start + len];
        parts.push(match token {
            "body" => Part::Body,
            "ts" => Part::Ts,
            _ => match token.strip_prefix("header:") {
                Some(name) => Part::Header(header_name("signed", name)?),
                None => {
                    return Err(VerifierBuildError::Template(
                        "unknown token (expected {body}, {ts}, {header:<name>})",
                    ));
                }
            },
        });
        rest = &rest[start + len + 1..];
    }
    if !rest.is_empty() {
        parts.push(Part::Literal(rest.to_owned()));
    }
    Ok(parts)
}

impl Custom {
    pub(crate) fn new(h: &HmacVerify) -> Result<(Custom, KeyRing), VerifierBuildError> {
        let signature_header = header_name("signature_header", &h.signature_header)?;
        let template = parse_template(&h.signed)?;
        if !template.iter().any(|p| matches!(p, Part::Body)) {
            // A signature that does not cover the body would authenticate any body.
            return Err(VerifierBuildError::Descriptor("signed must include {body}"));
        }
        let parse = match h.parse {
            SigParse::Whole => Parse::Whole,
            SigParse::CsvPairs => Parse::CsvPairs {
                sig_key: required(&h.sig_key, "parse: csv_pairs needs sig_key")?,
            },
            SigParse::SpaceVersions => Parse::SpaceVersions {
                version: required(&h.version, "parse: space_versions needs version")?,
            },
        };
        let timestamp_header = h
            .timestamp_header
            .as_deref()
            .map(|n| header_name("timestamp_header", n))
            .transpose()?;
        let needs_ts =
            template.iter().any(|p| matches!(p, Part::Ts)) || h.tolerance_seconds.is_some();
        let timestamp = match (needs_ts, timestamp_header, &parse) {
            (false, _, _) => None,
            (true, Some(name), _) => Some(TsSource::Header(name)),
            (true, None, Parse::CsvPairs { .. }) => Some(TsSource::CsvT),
            (true, None, _) => {
                return Err(VerifierBuildError::Descriptor(
                    "{ts} or tolerance_seconds needs timestamp_header or parse: csv_pairs",
                ));
            }
        };
        let keys = match h.secret_decode {
            SecretDecode::Raw => KeyRing::raw(h.hash, &h.secret.0),
            SecretDecode::WhsecBase64 => KeyRing::build(h.hash, &h.secret.0, |s| {
                if s.starts_with("whsec_") {
                    standard_webhooks_key(s)
                } else {
                    Err(VerifyFailure::BadSecret)
                }
            }),
        };
        let custom = Custom {
            signature_header,
            template,
            encoding: h.encoding,
            sig_prefix: h.sig_prefix.clone().unwrap_or_default(),
            parse,
            timestamp,
            tolerance: h.tolerance_seconds,
        };
        Ok((custom, keys))
    }

    pub(crate) fn verify(
        &self,
        keys: &[MacKey],
        headers: &HeaderMap,
        body: &[u8],
        now: i64,
    ) -> Result<usize, VerifyFailure> {
        let sig_value = one_header(headers, &self.signature_header)?;
        let ts_header = match &self.timestamp {
            Some(TsSource::Header(name)) => Some(one_header(headers, name)?.as_bytes()),
            _ => None,
        };
        let mut signed_headers = Vec::new();
        for part in &self.template {
            if let Part::Header(name) = part {
                signed_headers.push(one_header(headers, name)?.as_bytes());
            }
        }

        let (candidates, csv_t) = self.candidates(text(sig_value, &self.signature_header)?)?;
        let ts = match &self.timestamp {
            None => None,
            Some(TsSource::Header(_)) => ts_header,
            Some(TsSource::CsvT) => Some(
                csv_t
                    .ok_or_else(|| malformed(&self.signature_header))?
                    .as_bytes(),
            ),
        };
        if let (Some(tolerance), Some(ts)) = (self.tolerance, ts) {
            check_tolerance(parse_ts(ts)?, now, tolerance)?;
        }

        let mut signed_headers = signed_headers.into_iter();
        let mut parts: Vec<&[u8]> = Vec::with_capacity(self.template.len());
        for part in &self.template {
            // The build guarantees a timestamp for {ts} and a value per {header:..}; should
            // that ever not hold, nothing is accepted.
            parts.push(match part {
                Part::Literal(s) => s.as_bytes(),
                Part::Body => body,
                Part::Ts => ts.ok_or(VerifyFailure::NoMatchingSignature)?,
                Part::Header(_) => signed_headers
                    .next()
                    .ok_or(VerifyFailure::NoMatchingSignature)?,
            });
        }
        find_match(keys, &parts, &candidates).ok_or(VerifyFailure::NoMatchingSignature)
    }

    /// The decoded candidate signatures of the header value and, for `csv_pairs` when it
    /// is the timestamp source, the `t` pair.
    fn candidates<'a>(
        &self,
        value: &'a str,
    ) -> Result<(Vec<Vec<u8>>, Option<&'a str>), VerifyFailure> {
        let decode = |s: &str| {
            let s = s.strip_prefix(self.sig_prefix.as_str())?;
            match self.encoding {
                SigEncoding::Hex => decode_hex(s),
                SigEncoding::Base64 => decode_base64(s),
            }
        };
        match &self.parse {
            Parse::Whole => {
                let sig = decode(value).ok_or_else(|| malformed(&self.signature_header))?;
                Ok((vec![sig], None))
            }
            Parse::CsvPairs { sig_key } => {
                let t_is_ts = matches!(self.timestamp, Some(TsSource::CsvT));
                let mut t = None;
                let mut candidates = Vec::new();
                for (k, v) in csv_pairs(value) {
                    if k == "t" && t_is_ts && t.replace(v).is_some() {
                        return Err(malformed(&self.signature_header));
                    }
                    if k == sig_key {
                        candidates.extend(decode(v));
                    }
                }
                Ok((candidates, t))
            }
            Parse::SpaceVersions { version } => {
                let candidates = value
                    .split_ascii_whitespace()
                    .filter_map(|entry| entry.split_once(','))
                    .filter(|(v, _)| v == version)
                    .filter_map(|(_, sig)| decode(sig))
                    .collect();
                Ok((candidates, None))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{headers, secrets};
    use crate::{Verified, Verifier};
    use ankusa_config::{HmacHash, VerifyConfig};

    fn desc(secret: &[&str], signature_header: &str, signed: &str) -> HmacVerify {
        HmacVerify {
            secret: secrets(secret),
            signature_header: signature_header.into(),
            signed: signed.into(),
            hash: HmacHash::Sha256,
            encoding: SigEncoding::Hex,
            sig_prefix: None,
            parse: SigParse::Whole,
            sig_key: None,
            version: None,
            timestamp_header: None,
            tolerance_seconds: None,
            secret_decode: SecretDecode::Raw,
        }
    }

    fn build(d: HmacVerify) -> Verifier {
        let v = Verifier::new(&VerifyConfig::Hmac(d))
            .ok()
            .flatten()
            .expect("builds");
        assert_eq!(v.scheme(), "hmac");
        v
    }

    fn build_err(d: HmacVerify) -> VerifierBuildError {
        match Verifier::new(&VerifyConfig::Hmac(d)) {
            Err(e) => e,
            Ok(_) => panic!("expected a build error"),
        }
    }

    fn ok(i: usize) -> Result<Verified, VerifyFailure> {
        Ok(Verified { secret_index: i })
    }

    // GitHub Docs, "Validating webhook deliveries": secret "It's a Secret to Everybody",
    // payload "Hello, World!". The sha1 value (legacy `X-Hub-Signature: sha1=`) is not in the
    // docs; computed with Python:
    //   python3 -c 'import hmac,hashlib; print(hmac.new(b"It'"'"'s a Secret to Everybody", b"Hello, World!", hashlib.sha1).hexdigest())'
    const GH_SECRET: &str = "It's a Secret to Everybody";
    const GH_BODY: &[u8] = b"Hello, World!";
    const GH_SIG: &str = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
    const GH_SHA1: &str = "sha1=01dc10d0c83e72ed246219cdd91669667fe2ca59";

    fn github_like(secret: &[&str]) -> Verifier {
        let mut d = desc(secret, "X-Hub-Signature-256", "{body}");
        d.sig_prefix = Some("sha256=".into());
        build(d)
    }

    #[test]
    fn github_via_descriptor() {
        let v = github_like(&[GH_SECRET]);
        let h = headers(&[("x-hub-signature-256", GH_SIG)]);
        assert_eq!(v.verify(&h, GH_BODY, 0), ok(0));
        assert_eq!(
            v.verify(&h, b"Hello", 0),
            Err(VerifyFailure::NoMatchingSignature)
        );
        // Rotation: [new, old].
        assert_eq!(
            github_like(&["new", GH_SECRET]).verify(&h, GH_BODY, 0),
            ok(1)
        );
        assert_eq!(
            github_like(&[GH_SECRET, "old"]).verify(&h, GH_BODY, 0),
            ok(0)
        );
        // Wrong secret, missing, malformed.
        assert_eq!(
            github_like(&["nope"]).verify(&h, GH_BODY, 0),
            Err(VerifyFailure::NoMatchingSignature)
        );
        assert_eq!(
            v.verify(&headers(&[]), GH_BODY, 0),
            Err(VerifyFailure::MissingHeader("x-hub-signature-256".into()))
        );
        for bad in [&GH_SIG[7..], "sha256=zz", "sha256="] {
            let h = headers(&[("x-hub-signature-256", bad)]);
            assert_eq!(
                v.verify(&h, GH_BODY, 0),
                Err(VerifyFailure::MalformedHeader("x-hub-signature-256".into()))
            );
        }
    }

    #[test]
    fn sha1_hex_with_prefix() {
        let mut d = desc(&[GH_SECRET], "X-Hub-Signature", "{body}");
        d.hash = HmacHash::Sha1;
        d.sig_prefix = Some("sha1=".into());
        let v = build(d);
        assert_eq!(
            v.verify(&headers(&[("x-hub-signature", GH_SHA1)]), GH_BODY, 0),
            ok(0)
        );
    }

    // Stripe: the python-computed vector of stripe.rs (secret "whsec_test_secret", raw).
    const STRIPE_T: i64 = 1492774577;
    const STRIPE_BODY: &[u8] = br#"{"id": "evt_test_webhook", "object": "event"}"#;
    const STRIPE_SIG: &str = "c137b1b62277d523cf8fed4dfbd0170a9a5b8a380e00cc3711d4bf0652f2ce7a";

    fn stripe_like(secret: &[&str]) -> Verifier {
        let mut d = desc(secret, "Stripe-Signature", "{ts}.{body}");
        d.parse = SigParse::CsvPairs;
        d.sig_key = Some("v1".into());
        d.tolerance_seconds = Some(300);
        build(d)
    }

    #[test]
    fn csv_pairs_reproduces_stripe() {
        let v = stripe_like(&["whsec_test_secret"]);
        let check =
            |value: &str, now| v.verify(&headers(&[("stripe-signature", value)]), STRIPE_BODY, now);
        let good = format!("t={STRIPE_T},v1=00,v1={STRIPE_SIG},v0=ff");
        assert_eq!(check(&good, STRIPE_T), ok(0));
        assert_eq!(check(&good, STRIPE_T + 300), ok(0));
        assert_eq!(
            check(&good, STRIPE_T + 301),
            Err(VerifyFailure::TimestampOutOfTolerance)
        );
        assert_eq!(
            check(&good, STRIPE_T - 301),
            Err(VerifyFailure::TimestampOutOfTolerance)
        );
        assert_eq!(
            check(&format!("t=x,v1={STRIPE_SIG}"), STRIPE_T),
            Err(VerifyFailure::InvalidTimestamp)
        );
        let m = Err(VerifyFailure::MalformedHeader("stripe-signature".into()));
        assert_eq!(check(&format!("v1={STRIPE_SIG}"), STRIPE_T), m);
        assert_eq!(
            check(&format!("t=1,t={STRIPE_T},v1={STRIPE_SIG}"), STRIPE_T),
            m
        );
        assert_eq!(
            check(&format!("t={STRIPE_T},v0={STRIPE_SIG}"), STRIPE_T),
            Err(VerifyFailure::NoMatchingSignature)
        );
        let rotated = stripe_like(&["whsec_new", "whsec_test_secret"]);
        let h = headers(&[("stripe-signature", good.as_str())]);
        assert_eq!(rotated.verify(&h, STRIPE_BODY, STRIPE_T), ok(1));
        assert_eq!(
            stripe_like(&["whsec_new"]).verify(&h, STRIPE_BODY, STRIPE_T),
            Err(VerifyFailure::NoMatchingSignature)
        );
    }

    #[test]
    fn tolerance_only_enforced_when_set() {
        // {ts} from a header, no tolerance: the timestamp is signed as sent, never judged.
        let mut d = desc(&["whsec_test_secret"], "X-Sig", "{ts}.{body}");
        d.timestamp_header = Some("X-Ts".into());
        let v = build(d.clone());
        let h = headers(&[("x-sig", STRIPE_SIG), ("x-ts", "1492774577")]);
        assert_eq!(v.verify(&h, STRIPE_BODY, 4_000_000_000), ok(0));
        assert_eq!(
            v.verify(&headers(&[("x-sig", STRIPE_SIG)]), STRIPE_BODY, 0),
            Err(VerifyFailure::MissingHeader("x-ts".into()))
        );
        d.tolerance_seconds = Some(60);
        let v = build(d);
        assert_eq!(v.verify(&h, STRIPE_BODY, STRIPE_T + 60), ok(0));
        assert_eq!(
            v.verify(&h, STRIPE_BODY, 4_000_000_000),
            Err(VerifyFailure::TimestampOutOfTolerance)
        );
        assert_eq!(
            v.verify(&h, STRIPE_BODY, STRIPE_T - 61),
            Err(VerifyFailure::TimestampOutOfTolerance)
        );
        let h = headers(&[("x-sig", STRIPE_SIG), ("x-ts", "1492774577.0")]);
        assert_eq!(
            v.verify(&h, STRIPE_BODY, STRIPE_T),
            Err(VerifyFailure::InvalidTimestamp)
        );
    }

    // Standard Webhooks reference vector (inventory §2.18).
    const SW_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const SW_BODY: &[u8] = br#"{"test": 2432232314}"#;
    const SW_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const SW_SIG: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    fn sw_like(secret: &[&str]) -> Verifier {
        let mut d = desc(
            secret,
            "webhook-signature",
            "{header:webhook-id}.{ts}.{body}",
        );
        d.encoding = SigEncoding::Base64;
        d.parse = SigParse::SpaceVersions;
        d.version = Some("v1".into());
        d.timestamp_header = Some("webhook-timestamp".into());
        d.tolerance_seconds = Some(300);
        d.secret_decode = SecretDecode::WhsecBase64;
        build(d)
    }

    #[test]
    fn space_versions_whsec_reproduces_standard_webhooks() {
        let v = sw_like(&[SW_SECRET]);
        let h = |sig: &str| {
            headers(&[
                ("webhook-id", SW_ID),
                ("webhook-timestamp", "1614265330"),
                ("webhook-signature", sig),
            ])
        };
        assert_eq!(v.verify(&h(SW_SIG), SW_BODY, 1614265330), ok(0));
        assert_eq!(v.verify(&h(SW_SIG), SW_BODY, 1614265630), ok(0));
        assert_eq!(
            v.verify(&h(SW_SIG), SW_BODY, 1614265631),
            Err(VerifyFailure::TimestampOutOfTolerance)
        );
        assert_eq!(
            v.verify(&h(&format!("v2,abc {SW_SIG}")), SW_BODY, 1614265330),
            ok(0)
        );
        assert_eq!(
            v.verify(&h(&SW_SIG.replace("v1,", "v2,")), SW_BODY, 1614265330),
            Err(VerifyFailure::NoMatchingSignature)
        );
        assert_eq!(
            sw_like(&["whsec_AAEC", SW_SECRET]).verify(&h(SW_SIG), SW_BODY, 1614265330),
            ok(1)
        );
        let no_id = headers(&[
            ("webhook-timestamp", "1614265330"),
            ("webhook-signature", SW_SIG),
        ]);
        assert_eq!(
            v.verify(&no_id, SW_BODY, 1614265330),
            Err(VerifyFailure::MissingHeader("webhook-id".into()))
        );
        // whsec_base64 fails closed on a secret without the prefix or with bad base64.
        for bad in ["MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_!!", "whsec_"] {
            assert_eq!(
                sw_like(&[bad]).verify(&h(SW_SIG), SW_BODY, 1614265330),
                Err(VerifyFailure::BadSecret),
                "{bad}"
            );
        }
    }

    // sha512 / base64 over "{header:x-id}:{body}"; no provider vector, computed with Python:
    //   python3 -c 'import hmac,hashlib,base64; print(base64.b64encode(hmac.new(b"custom-secret", b"evt_42:{\"ok\":true}", hashlib.sha512).digest()).decode())'
    const S512_SIG: &str =
        "NUyPMVyJyHshUzkiJMffCrp8Lm8krycuY99l7iJci1r/LPzkhH1wK/8hdocfJZo09cDQOfUtjAd8x/ouc3hfJg==";

    fn sha512_like(secret: &[&str]) -> Verifier {
        let mut d = desc(secret, "X-Sig", "{header:X-Id}:{body}");
        d.hash = HmacHash::Sha512;
        d.encoding = SigEncoding::Base64;
        build(d)
    }

    #[test]
    fn sha512_base64_with_header_token() {
        let v = sha512_like(&["custom-secret"]);
        let body = br#"{"ok":true}"#;
        let h = headers(&[("x-sig", S512_SIG), ("x-id", "evt_42")]);
        assert_eq!(v.verify(&h, body, 0), ok(0));
        // The header is signed.
        let other = headers(&[("x-sig", S512_SIG), ("x-id", "evt_43")]);
        assert_eq!(
            v.verify(&other, body, 0),
            Err(VerifyFailure::NoMatchingSignature)
        );
        // A {header:..} the request lacks is a missing header.
        let no_id = headers(&[("x-sig", S512_SIG)]);
        assert_eq!(
            v.verify(&no_id, body, 0),
            Err(VerifyFailure::MissingHeader("x-id".into()))
        );
        assert_eq!(
            sha512_like(&["new", "custom-secret"]).verify(&h, body, 0),
            ok(1)
        );
        assert_eq!(
            sha512_like(&["nope"]).verify(&h, body, 0),
            Err(VerifyFailure::NoMatchingSignature)
        );
        let hexed = headers(&[("x-sig", "abcdef"), ("x-id", "evt_42")]);
        assert_eq!(
            v.verify(&hexed, body, 0),
            Err(VerifyFailure::MalformedHeader("x-sig".into()))
        );
    }

    #[test]
    fn template_parsing() {
        let parts = parse_template("a{body}}b{ts}-{header:X-Y}").expect("parses");
        let shape: Vec<String> = parts
            .iter()
            .map(|p| match p {
                Part::Literal(s) => format!("lit:{s}"),
                Part::Body => "body".into(),
                Part::Ts => "ts".into(),
                Part::Header(n) => format!("header:{n}"),
            })
            .collect();
        assert_eq!(
            shape,
            ["lit:a", "body", "lit:}b", "ts", "lit:-", "header:x-y"]
        );
    }

    #[test]
    fn build_errors() {
        let base = desc(&["s"], "X-Sig", "{body}");
        let with = |f: &dyn Fn(&mut HmacVerify)| {
            let mut d = base.clone();
            f(&mut d);
            build_err(d)
        };
        assert!(matches!(
            with(&|d| d.signed = "{body".into()),
            VerifierBuildError::Template(_)
        ));
        assert!(matches!(
            with(&|d| d.signed = "{bdy}".into()),
            VerifierBuildError::Template(_)
        ));
        assert!(matches!(
            with(&|d| d.signed = "{header:bad name}.{body}".into()),
            VerifierBuildError::HeaderName { .. }
        ));
        for adjacent in ["{header:x-id}{body}", "{body}{ts}", "a{ts}.{body}{body}b"] {
            let e = with(&|d| d.signed = adjacent.into());
            assert!(
                matches!(e, VerifierBuildError::Template(m) if m.contains("ambiguous")),
                "{adjacent}: {e}"
            );
            assert!(!e.to_string().contains("x-id"), "{e}");
        }
        let e = with(&|d| d.signed = "{secretish}.{body}".into());
        assert!(!e.to_string().contains("secretish"), "{e}");
        let e = with(&|d| d.signature_header = "bad secretish".into());
        assert_eq!(e.to_string(), "verify.signature_header: not a header name");
        assert!(matches!(
            with(&|d| d.signature_header = "bad header".into()),
            VerifierBuildError::HeaderName { .. }
        ));
        assert!(matches!(
            with(&|d| d.signed = "{header:x-id}".into()),
            VerifierBuildError::Descriptor(_)
        ));
        assert!(matches!(
            with(&|d| d.signed = "{ts}.{body}".into()),
            VerifierBuildError::Descriptor(_)
        ));
        assert!(matches!(
            with(&|d| d.tolerance_seconds = Some(300)),
            VerifierBuildError::Descriptor(_)
        ));
        assert!(matches!(
            with(&|d| d.parse = SigParse::CsvPairs),
            VerifierBuildError::Descriptor(_)
        ));
        assert!(matches!(
            with(&|d| {
                d.parse = SigParse::SpaceVersions;
                d.version = Some(String::new());
            }),
            VerifierBuildError::Descriptor(_)
        ));
    }
}
