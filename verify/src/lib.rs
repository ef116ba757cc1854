//! Webhook signature verification for Ankusa's ingest edge, and Standard Webhooks signing for
//! outgoing deliveries. Pure functions: no IO, no clock (the caller passes `now_unix`).
//!
//! A [`Verifier`] is built once per config load from a source's `verify:` block and judges
//! each request's headers and raw body. Every scheme is a body HMAC; every secret of the
//! rotation list is tried, comparisons are constant-time, and anything odd (an unusable
//! secret, a repeated header, an unparsable value) fails closed — never a panic, never an
//! accept.
//!
//! Shared error order: `bad_secret` → `missing_header` / `malformed_header` (header present
//! more than once) in the scheme's header order → `invalid_timestamp` →
//! `timestamp_out_of_tolerance` → `malformed_header` (signature not in the scheme's format) →
//! `no_matching_signature`. Stripe and custom descriptors read their signature header before
//! the timestamp (the timestamp may be inside it).

mod github;
mod hmac_custom;
mod mac;
mod shopify;
mod slack;
mod standard_webhooks;
mod stripe;

use ankusa_config::{HmacHash, VerifyConfig};
use base64::Engine as _;
use http::{HeaderMap, HeaderName, HeaderValue};

use crate::mac::KeyRing;

pub use standard_webhooks::{sign_standard_webhooks, standard_webhooks_key};

/// Why a request's signature was not accepted. The edge answers `401` for every one of them;
/// `code()` is for logs and metrics only.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyFailure {
    /// A required header is absent (lowercase header name).
    #[error("missing header {0}")]
    MissingHeader(String),
    /// A header is present but unusable: repeated, not text, or not in the scheme's format
    /// (lowercase header name).
    #[error("malformed header {0}")]
    MalformedHeader(String),
    /// The signed timestamp is not integer seconds.
    #[error("invalid timestamp")]
    InvalidTimestamp,
    /// The signed timestamp is further from now than the tolerance (either direction).
    #[error("timestamp out of tolerance")]
    TimestampOutOfTolerance,
    /// No signature in the request matches any secret.
    #[error("no matching signature")]
    NoMatchingSignature,
    /// A configured secret cannot be used (none, empty, `whsec_` with bad base64): fail closed.
    #[error("bad secret")]
    BadSecret,
}

impl VerifyFailure {
    pub fn code(&self) -> &'static str {
        match self {
            VerifyFailure::MissingHeader(_) => "missing_header",
            VerifyFailure::MalformedHeader(_) => "malformed_header",
            VerifyFailure::InvalidTimestamp => "invalid_timestamp",
            VerifyFailure::TimestampOutOfTolerance => "timestamp_out_of_tolerance",
            VerifyFailure::NoMatchingSignature => "no_matching_signature",
            VerifyFailure::BadSecret => "bad_secret",
        }
    }
}

/// A `verify:` block the verifier cannot be built from. The config crate's validation refuses
/// all of these first; this is the verifier failing closed on its own.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifierBuildError {
    /// The custom descriptor's `signed` template does not parse, or is ambiguous (two
    /// tokens with no literal text between them). The message never quotes the template.
    #[error("verify.signed: {0}")]
    Template(&'static str),
    /// A header name in the custom descriptor is not a valid header name (the field is
    /// named, the value is not).
    #[error("verify.{field}: not a header name")]
    HeaderName { field: &'static str },
    /// The custom descriptor is inconsistent (e.g. `{ts}` with no timestamp source).
    #[error("verify: {0}")]
    Descriptor(&'static str),
}

/// A request whose signature matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verified {
    /// Which secret of the rotation list matched (0 = the first, newest).
    pub secret_index: usize,
}

/// A source's signature verifier, built once per config load.
#[derive(Clone)]
pub struct Verifier {
    kind: Kind,
    keys: KeyRing,
}

#[derive(Clone)]
enum Kind {
    Stripe { tolerance: u64 },
    Github,
    Shopify,
    Slack { tolerance: u64 },
    StandardWebhooks { tolerance: u64 },
    Hmac(Box<hmac_custom::Custom>),
}

impl Verifier {
    /// `None` for `VerifyConfig::None`. Unusable secrets do not fail the build; they make
    /// every `verify` answer `BadSecret`.
    pub fn new(cfg: &VerifyConfig) -> Result<Option<Verifier>, VerifierBuildError> {
        let sha256 = HmacHash::Sha256;
        let v = match cfg {
            VerifyConfig::None => return Ok(None),
            VerifyConfig::Stripe(p) => Verifier {
                kind: Kind::Stripe {
                    tolerance: p.tolerance_seconds,
                },
                keys: KeyRing::raw(sha256, &p.secret.0),
            },
            VerifyConfig::Github(p) => Verifier {
                kind: Kind::Github,
                keys: KeyRing::raw(sha256, &p.secret.0),
            },
            VerifyConfig::Shopify(p) => Verifier {
                kind: Kind::Shopify,
                keys: KeyRing::raw(sha256, &p.secret.0),
            },
            VerifyConfig::Slack(p) => Verifier {
                kind: Kind::Slack {
                    tolerance: p.tolerance_seconds,
                },
                keys: KeyRing::raw(sha256, &p.secret.0),
            },
            VerifyConfig::StandardWebhooks(p) => Verifier {
                kind: Kind::StandardWebhooks {
                    tolerance: p.tolerance_seconds,
                },
                keys: KeyRing::build(sha256, &p.secret.0, standard_webhooks_key),
            },
            VerifyConfig::Hmac(h) => {
                let (custom, keys) = hmac_custom::Custom::new(h)?;
                Verifier {
                    kind: Kind::Hmac(Box::new(custom)),
                    keys,
                }
            }
        };
        Ok(Some(v))
    }

    /// Judges one request. `now_unix`: seconds since the epoch from the caller's clock.
    pub fn verify(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        now_unix: i64,
    ) -> Result<Verified, VerifyFailure> {
        let keys = self.keys.keys()?;
        let req = Request {
            headers,
            body,
            now: now_unix,
        };
        let index = match &self.kind {
            Kind::Stripe { tolerance } => stripe::verify(keys, *tolerance, &req),
            Kind::Github => github::verify(keys, &req),
            Kind::Shopify => shopify::verify(keys, &req),
            Kind::Slack { tolerance } => slack::verify(keys, *tolerance, &req),
            Kind::StandardWebhooks { tolerance } => {
                standard_webhooks::verify(keys, *tolerance, &req)
            }
            Kind::Hmac(c) => c.verify(keys, headers, body, now_unix),
        }?;
        Ok(Verified {
            secret_index: index,
        })
    }

    pub fn scheme(&self) -> &'static str {
        match self.kind {
            Kind::Stripe { .. } => "stripe",
            Kind::Github => "github",
            Kind::Shopify => "shopify",
            Kind::Slack { .. } => "slack",
            Kind::StandardWebhooks { .. } => "standard_webhooks",
            Kind::Hmac(_) => "hmac",
        }
    }
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("scheme", &self.scheme())
            .field("secrets", &format_args!("[{} redacted]", self.keys.len()))
            .finish()
    }
}

// ---- helpers shared by the scheme modules ----

/// One request as a scheme's `verify` sees it: the headers, the raw body, now (Unix seconds).
#[derive(Clone, Copy)]
struct Request<'a> {
    headers: &'a HeaderMap,
    body: &'a [u8],
    now: i64,
}

/// A scheme's verdict: the index of the secret whose MAC matched.
type Matched = Result<usize, VerifyFailure>;

/// The scheme without a timestamp (GitHub, Shopify): the one header `name` holds an encoding
/// of the HMAC of the raw body, which `decode` reads (`None`: malformed).
fn body_mac(
    keys: &[mac::MacKey],
    req: &Request<'_>,
    name: &HeaderName,
    decode: impl Fn(&str) -> Option<Vec<u8>>,
) -> Matched {
    let value = text(one_header(req.headers, name)?, name)?;
    let sig = decode(value).ok_or_else(|| malformed(name))?;
    mac::find_match(keys, &[req.body], &[sig]).ok_or(VerifyFailure::NoMatchingSignature)
}

fn missing(name: &HeaderName) -> VerifyFailure {
    VerifyFailure::MissingHeader(name.as_str().to_owned())
}

fn malformed(name: &HeaderName) -> VerifyFailure {
    VerifyFailure::MalformedHeader(name.as_str().to_owned())
}

/// The single value of a header: `MissingHeader` if absent, `MalformedHeader` if repeated
/// (which of two values the provider signed is ambiguous).
fn one_header<'a>(
    headers: &'a HeaderMap,
    name: &HeaderName,
) -> Result<&'a HeaderValue, VerifyFailure> {
    let mut values = headers.get_all(name).iter();
    let first = values.next().ok_or_else(|| missing(name))?;
    if values.next().is_some() {
        return Err(malformed(name));
    }
    Ok(first)
}

/// A header value as text (visible ASCII and tab only), else `MalformedHeader`.
fn text<'a>(value: &'a HeaderValue, name: &HeaderName) -> Result<&'a str, VerifyFailure> {
    value.to_str().map_err(|_| malformed(name))
}

/// Integer seconds: 1 to 18 ASCII digits, nothing else (no sign, no space, no fraction).
fn parse_ts(raw: &[u8]) -> Result<i64, VerifyFailure> {
    if raw.is_empty() || raw.len() > 18 || !raw.iter().all(u8::is_ascii_digit) {
        return Err(VerifyFailure::InvalidTimestamp);
    }
    raw.iter()
        .try_fold(0i64, |n, d| {
            n.checked_mul(10)?.checked_add(i64::from(d - b'0'))
        })
        .ok_or(VerifyFailure::InvalidTimestamp)
}

/// `|now − ts| > tolerance` fails; equal passes.
fn check_tolerance(ts: i64, now: i64, tolerance: u64) -> Result<(), VerifyFailure> {
    if now.abs_diff(ts) > tolerance {
        return Err(VerifyFailure::TimestampOutOfTolerance);
    }
    Ok(())
}

/// `k=v,k=v` pairs (surrounding spaces trimmed; items without `=` skipped).
fn csv_pairs(value: &str) -> impl Iterator<Item = (&str, &str)> {
    value
        .split(',')
        .filter_map(|item| item.split_once('='))
        .map(|(k, v)| (k.trim(), v.trim()))
}

/// Hex in either case; `None` if not hex or empty.
fn decode_hex(s: &str) -> Option<Vec<u8>> {
    hex::decode(s).ok().filter(|b| !b.is_empty())
}

/// Standard (padded) base64; `None` if not base64 or empty.
fn decode_base64(s: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .ok()
        .filter(|b| !b.is_empty())
}

#[cfg(test)]
pub(crate) mod test_support {
    use http::{HeaderMap, HeaderName, HeaderValue};

    /// A header map from (name, value) pairs; a name given twice is appended twice.
    pub(crate) fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            let name = HeaderName::from_bytes(k.as_bytes()).expect("test header name");
            h.append(name, HeaderValue::from_str(v).expect("test header value"));
        }
        h
    }

    pub(crate) fn secrets(list: &[&str]) -> ankusa_config::Secrets {
        ankusa_config::Secrets(list.iter().map(|s| s.to_string()).collect())
    }

    /// The verifier of a scheme without a time window (GitHub, Shopify) over `list`.
    pub(crate) fn preset(
        scheme: fn(ankusa_config::Preset) -> ankusa_config::VerifyConfig,
        list: &[&str],
    ) -> crate::Verifier {
        let cfg = scheme(ankusa_config::Preset {
            secret: secrets(list),
        });
        crate::Verifier::new(&cfg).ok().flatten().expect("builds")
    }

    /// The verifier of a scheme with a 300 s window (Stripe, Slack, Standard Webhooks) over
    /// `list`.
    pub(crate) fn timed(
        scheme: fn(ankusa_config::TimedPreset) -> ankusa_config::VerifyConfig,
        list: &[&str],
    ) -> crate::Verifier {
        let cfg = scheme(ankusa_config::TimedPreset {
            secret: secrets(list),
            tolerance_seconds: 300,
        });
        crate::Verifier::new(&cfg).ok().flatten().expect("builds")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{headers, secrets};
    use ankusa_config::{Preset, TimedPreset};

    #[test]
    fn verifier_is_shareable() {
        fn assert_send_sync<T: Send + Sync + 'static>() {}
        assert_send_sync::<Verifier>();
        assert_send_sync::<VerifyFailure>();
    }

    #[test]
    fn none_builds_no_verifier() {
        assert!(matches!(Verifier::new(&VerifyConfig::None), Ok(None)));
    }

    #[test]
    fn scheme_names() {
        let p = Preset {
            secret: secrets(&["s"]),
        };
        let t = TimedPreset {
            secret: secrets(&["s"]),
            tolerance_seconds: 300,
        };
        let cases = [
            (VerifyConfig::Stripe(t.clone()), "stripe"),
            (VerifyConfig::Github(p.clone()), "github"),
            (VerifyConfig::Shopify(p), "shopify"),
            (VerifyConfig::Slack(t.clone()), "slack"),
            (VerifyConfig::StandardWebhooks(t), "standard_webhooks"),
        ];
        for (cfg, name) in cases {
            let v = Verifier::new(&cfg).ok().flatten().expect("builds");
            assert_eq!(v.scheme(), name);
        }
    }

    #[test]
    fn codes() {
        let all = [
            (VerifyFailure::MissingHeader("x".into()), "missing_header"),
            (
                VerifyFailure::MalformedHeader("x".into()),
                "malformed_header",
            ),
            (VerifyFailure::InvalidTimestamp, "invalid_timestamp"),
            (
                VerifyFailure::TimestampOutOfTolerance,
                "timestamp_out_of_tolerance",
            ),
            (VerifyFailure::NoMatchingSignature, "no_matching_signature"),
            (VerifyFailure::BadSecret, "bad_secret"),
        ];
        for (f, code) in all {
            assert_eq!(f.code(), code);
        }
    }

    #[test]
    fn debug_redacts_secrets() {
        let cfg = VerifyConfig::Github(Preset {
            secret: secrets(&["hunter2-secret", "old-one"]),
        });
        let v = Verifier::new(&cfg).ok().flatten().expect("builds");
        let s = format!("{v:?}");
        assert!(!s.contains("hunter2") && !s.contains("old-one"), "{s}");
        assert!(s.contains("github") && s.contains("2 redacted"), "{s}");
    }

    #[test]
    fn unusable_secret_fails_every_request_closed() {
        for list in [&[][..], &[""][..], &["ok", ""][..]] {
            let cfg = VerifyConfig::Github(Preset {
                secret: secrets(list),
            });
            let v = Verifier::new(&cfg).ok().flatten().expect("builds");
            let h = headers(&[("x-hub-signature-256", "sha256=00")]);
            assert_eq!(v.verify(&h, b"", 0), Err(VerifyFailure::BadSecret));
        }
    }

    #[test]
    fn timestamps() {
        assert_eq!(parse_ts(b"1614265330"), Ok(1614265330));
        assert_eq!(parse_ts(b"0"), Ok(0));
        assert_eq!(parse_ts(b"999999999999999999"), Ok(999_999_999_999_999_999));
        for bad in [
            &b""[..],
            b"1e9",
            b"-1",
            b"+1",
            b" 1",
            b"1.5",
            b"1614265330.0",
            b"9999999999999999999",
            b"\xff",
        ] {
            assert_eq!(
                parse_ts(bad),
                Err(VerifyFailure::InvalidTimestamp),
                "{bad:?}"
            );
        }
        assert_eq!(check_tolerance(100, 400, 300), Ok(()));
        assert_eq!(
            check_tolerance(100, 401, 300),
            Err(VerifyFailure::TimestampOutOfTolerance)
        );
        assert_eq!(
            check_tolerance(401, 100, 300),
            Err(VerifyFailure::TimestampOutOfTolerance)
        );
        assert_eq!(
            check_tolerance(0, i64::MIN, 300),
            Err(VerifyFailure::TimestampOutOfTolerance)
        );
        assert_eq!(check_tolerance(i64::MAX, i64::MIN, u64::MAX), Ok(()));
    }

    #[test]
    fn repeated_header_is_malformed() {
        let name = HeaderName::from_static("x-sig");
        let h = headers(&[("x-sig", "a"), ("x-sig", "b")]);
        assert_eq!(
            one_header(&h, &name),
            Err(VerifyFailure::MalformedHeader("x-sig".into()))
        );
        assert_eq!(
            one_header(&HeaderMap::new(), &name),
            Err(VerifyFailure::MissingHeader("x-sig".into()))
        );
    }
}
