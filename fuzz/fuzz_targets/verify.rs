//! Every verifier scheme over derived headers and bodies.
//!
//! Half the inputs are free-form (arbitrary headers, the scheme's own names among them): the
//! verifier must not panic, and whenever it accepts, an independent HMAC computed here over the
//! documented signed content with the secret it names must be among the request's signatures,
//! and the timestamp within tolerance. The other half are signed correctly here (with decoy
//! signatures and noise headers around them): those must be accepted when the timestamp is in
//! the window and the secrets are usable, and refused with the documented reason otherwise.

#![no_main]

use ankusa_config::{
    HmacHash, HmacVerify, Preset, SecretDecode, Secrets, SigEncoding, SigParse, TimedPreset,
    VerifyConfig,
};
use ankusa_verify::{Verifier, VerifyFailure};
use arbitrary::Arbitrary;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use http::{HeaderMap, HeaderName, HeaderValue};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug, Clone, Copy, PartialEq)]
enum Scheme {
    Stripe,
    Github,
    Shopify,
    Slack,
    StandardWebhooks,
    /// Standard Webhooks under the `svix-*` names.
    Svix,
    Custom,
}

#[derive(Arbitrary, Debug)]
enum SecretSpec {
    Text(String),
    /// `whsec_` + base64 of these bytes.
    Whsec(Vec<u8>),
}

#[derive(Arbitrary, Debug)]
enum TplPart {
    Lit(String),
    Body,
    Ts,
    Header(u8),
}

#[derive(Arbitrary, Debug)]
struct CustomSpec {
    hash: u8,
    base64: bool,
    parse: u8,
    prefix: Option<String>,
    parts: Vec<TplPart>,
    /// A template written out as text instead (the parser's own grammar).
    raw_template: Option<String>,
    ts_header: bool,
    tolerance: Option<u16>,
    whsec: bool,
    /// `sig_key` / `version` (`v1` when absent).
    key: Option<String>,
}

#[derive(Arbitrary, Debug)]
struct Input {
    scheme: Scheme,
    custom: CustomSpec,
    secrets: Vec<SecretSpec>,
    tolerance: u16,
    now: u32,
    sign: bool,
    /// Signed mode: which secret signs, the timestamp's distance from now, hex case, decoys.
    signer: u8,
    skew: i32,
    upper: bool,
    decoys: Vec<Vec<u8>>,
    id: String,
    header_values: Vec<Vec<u8>>,
    /// Free mode: (name, value) pairs; names mostly from the schemes' own.
    headers: Vec<(u8, String, Vec<u8>)>,
    body: Vec<u8>,
}

/// Headers the schemes read, plus the custom descriptor's names and two unrelated ones.
const NAMES: &[&str] = &[
    "stripe-signature",
    "x-hub-signature-256",
    "x-shopify-hmac-sha256",
    "x-slack-signature",
    "x-slack-request-timestamp",
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
    "svix-id",
    "svix-timestamp",
    "svix-signature",
    "x-sig",
    "x-ts",
    "x-a",
    "x-b",
];
/// Headers a custom template may sign (never the signature header itself, which would sign
/// its own value).
const TPL_HEADERS: &[&str] = &["x-a", "x-b", "x-ts"];
const NOISE: &[&str] = &["x-noise-1", "x-noise-2", "user-agent"];

const CUSTOM_SIG: &str = "x-sig";
const CUSTOM_TS: &str = "x-ts";

fuzz_target!(|input: Input| run(input));

fn run(input: Input) {
    let secrets: Vec<String> = input
        .secrets
        .iter()
        .take(9)
        .map(|s| match s {
            SecretSpec::Text(t) => t.clone(),
            SecretSpec::Whsec(b) => format!("whsec_{}", STANDARD.encode(b)),
        })
        .collect();
    let now = 1_600_000_000i64 + i64::from(input.now);
    let tolerance = u64::from(input.tolerance);
    let scheme = input.scheme;
    let Some(desc) = descriptor(&input, &secrets) else {
        return;
    };
    let cfg = match scheme {
        Scheme::Stripe => VerifyConfig::Stripe(timed(&secrets, tolerance)),
        Scheme::Github => VerifyConfig::Github(Preset {
            secret: Secrets(secrets.clone()),
        }),
        Scheme::Shopify => VerifyConfig::Shopify(Preset {
            secret: Secrets(secrets.clone()),
        }),
        Scheme::Slack => VerifyConfig::Slack(timed(&secrets, tolerance)),
        Scheme::StandardWebhooks | Scheme::Svix => {
            VerifyConfig::StandardWebhooks(timed(&secrets, tolerance))
        }
        Scheme::Custom => VerifyConfig::Hmac(desc.cfg.clone()),
    };
    let verifier = match Verifier::new(&cfg) {
        Ok(Some(v)) => v,
        // A descriptor the verifier refuses to build: nothing to judge.
        Ok(None) | Err(_) => return,
    };
    let reference = Reference {
        scheme,
        desc: &desc,
        secrets: &secrets,
        tolerance,
    };

    let mut headers = HeaderMap::new();
    let expected_in_window;
    if input.sign {
        let Some(in_window) = sign(&input, &reference, now, &mut headers) else {
            return;
        };
        expected_in_window = Some(in_window);
    } else {
        expected_in_window = None;
        for (i, name, value) in &input.headers {
            let name = match NAMES.get(usize::from(*i)) {
                Some(n) => HeaderName::from_static(n),
                None => match HeaderName::from_bytes(name.as_bytes()) {
                    Ok(n) => n,
                    Err(_) => continue,
                },
            };
            if let Ok(v) = HeaderValue::from_bytes(value) {
                headers.append(name, v);
            }
        }
    }

    let got = verifier.verify(&headers, &input.body, now);
    if let Ok(v) = &got {
        assert!(
            reference.accepts(&headers, &input.body, now, v.secret_index),
            "accepted without a matching reference HMAC: {scheme:?} {headers:?} {got:?}"
        );
    }
    let Some(in_window) = expected_in_window else {
        return;
    };
    if !reference.usable() {
        assert_eq!(got, Err(VerifyFailure::BadSecret), "{scheme:?}");
    } else if !in_window {
        assert_eq!(
            got,
            Err(VerifyFailure::TimestampOutOfTolerance),
            "{scheme:?}"
        );
    } else {
        let v = got.unwrap_or_else(|e| panic!("correctly signed {scheme:?} refused: {e:?}"));
        assert!(v.secret_index <= usize::from(input.signer) % secrets.len().max(1));
    }
}

fn timed(secrets: &[String], tolerance: u64) -> TimedPreset {
    TimedPreset {
        secret: Secrets(secrets.to_vec()),
        tolerance_seconds: tolerance,
    }
}

/// The custom descriptor of an input, with its template as parts for the reference.
struct Descriptor {
    cfg: HmacVerify,
    template: Option<Vec<RefPart>>,
}

#[derive(Debug, Clone)]
enum RefPart {
    Lit(String),
    Body,
    Ts,
    Header(String),
}

fn descriptor(input: &Input, secrets: &[String]) -> Option<Descriptor> {
    let c = &input.custom;
    let signed = match &c.raw_template {
        Some(raw) => raw.clone(),
        None => {
            let mut s = String::new();
            for p in c.parts.iter().take(6) {
                match p {
                    // Literal braces would be tokens; the raw template covers those.
                    TplPart::Lit(l) => s.extend(l.chars().filter(|c| *c != '{' && *c != '}')),
                    TplPart::Body => s.push_str("{body}"),
                    TplPart::Ts => s.push_str("{ts}"),
                    TplPart::Header(i) => {
                        s.push_str("{header:");
                        s.push_str(TPL_HEADERS[usize::from(*i) % TPL_HEADERS.len()]);
                        s.push('}');
                    }
                }
            }
            s
        }
    };
    let key = c.key.clone().unwrap_or_else(|| "v1".into());
    let cfg = HmacVerify {
        secret: Secrets(secrets.to_vec()),
        signature_header: CUSTOM_SIG.into(),
        signed: signed.clone(),
        hash: match c.hash % 3 {
            0 => HmacHash::Sha256,
            1 => HmacHash::Sha512,
            _ => HmacHash::Sha1,
        },
        encoding: if c.base64 {
            SigEncoding::Base64
        } else {
            SigEncoding::Hex
        },
        sig_prefix: c.prefix.clone(),
        parse: match c.parse % 3 {
            0 => SigParse::Whole,
            1 => SigParse::CsvPairs,
            _ => SigParse::SpaceVersions,
        },
        sig_key: Some(key.clone()),
        version: Some(key),
        timestamp_header: c.ts_header.then(|| CUSTOM_TS.into()),
        tolerance_seconds: c.tolerance.map(u64::from),
        secret_decode: if c.whsec {
            SecretDecode::WhsecBase64
        } else {
            SecretDecode::Raw
        },
    };
    Some(Descriptor {
        template: parse_template(&signed),
        cfg,
    })
}

/// The documented template grammar: `{body}`, `{ts}`, `{header:<name>}`, literal text.
/// `None` where the verifier must refuse to build.
fn parse_template(t: &str) -> Option<Vec<RefPart>> {
    let mut out = Vec::new();
    let mut rest = t;
    while let Some(open) = rest.find('{') {
        let close = open + rest[open..].find('}')?;
        if open > 0 {
            out.push(RefPart::Lit(rest[..open].to_string()));
        }
        let token = &rest[open + 1..close];
        out.push(match token {
            "body" => RefPart::Body,
            "ts" => RefPart::Ts,
            _ => RefPart::Header(token.strip_prefix("header:")?.to_ascii_lowercase()),
        });
        rest = &rest[close + 1..];
    }
    if !rest.is_empty() {
        out.push(RefPart::Lit(rest.to_string()));
    }
    Some(out)
}

/// The independent judge: documented signed content, HMAC from the `hmac` crate.
struct Reference<'a> {
    scheme: Scheme,
    desc: &'a Descriptor,
    secrets: &'a [String],
    tolerance: u64,
}

impl Reference<'_> {
    fn hash(&self) -> HmacHash {
        match self.scheme {
            Scheme::Custom => self.desc.cfg.hash,
            _ => HmacHash::Sha256,
        }
    }

    fn key(&self, secret: &str) -> Option<Vec<u8>> {
        let whsec = |s: &str| {
            let b = STANDARD.decode(s.strip_prefix("whsec_")?).ok()?;
            (!b.is_empty()).then_some(b)
        };
        let key = match self.scheme {
            Scheme::StandardWebhooks | Scheme::Svix => {
                if secret.starts_with("whsec_") {
                    whsec(secret)?
                } else {
                    secret.as_bytes().to_vec()
                }
            }
            Scheme::Custom if self.desc.cfg.secret_decode == SecretDecode::WhsecBase64 => {
                whsec(secret)?
            }
            _ => secret.as_bytes().to_vec(),
        };
        (!key.is_empty()).then_some(key)
    }

    /// Every secret keys (1 to 8 of them): otherwise each request fails closed.
    fn usable(&self) -> bool {
        (1..=8).contains(&self.secrets.len()) && self.secrets.iter().all(|s| self.key(s).is_some())
    }

    fn mac(&self, secret: &str, msg: &[u8]) -> Vec<u8> {
        let key = self.key(secret).unwrap_or_default();
        fn run<M: Mac + hmac::digest::KeyInit>(key: &[u8], msg: &[u8]) -> Vec<u8> {
            let mut m = <M as Mac>::new_from_slice(key).expect("HMAC takes any key length");
            m.update(msg);
            m.finalize().into_bytes().to_vec()
        }
        match self.hash() {
            HmacHash::Sha256 => run::<Hmac<sha2::Sha256>>(&key, msg),
            HmacHash::Sha512 => run::<Hmac<sha2::Sha512>>(&key, msg),
            HmacHash::Sha1 => run::<Hmac<sha1::Sha1>>(&key, msg),
        }
    }

    fn std_names(&self, h: &HeaderMap) -> [&'static str; 3] {
        let webhook = ["webhook-id", "webhook-timestamp", "webhook-signature"];
        let svix = ["svix-id", "svix-timestamp", "svix-signature"];
        let any = |f: &[&str; 3]| f.iter().any(|n| h.contains_key(*n));
        if !any(&webhook) && any(&svix) {
            svix
        } else {
            webhook
        }
    }

    /// Whether a request the verifier accepted with secret `index` is one the documentation
    /// says is genuine.
    fn accepts(&self, h: &HeaderMap, body: &[u8], now: i64, index: usize) -> bool {
        let Some(secret) = self.secrets.get(index) else {
            return false;
        };
        if !self.usable() {
            return false;
        }
        let one = |name: &str| -> Option<&[u8]> {
            let mut all = h.get_all(name).iter();
            let v = all.next()?;
            all.next().is_none().then_some(v.as_bytes())
        };
        let text = |name: &str| one(name).and_then(|b| std::str::from_utf8(b).ok());
        let in_window = |ts: &[u8]| -> bool {
            let Ok(s) = std::str::from_utf8(ts) else {
                return false;
            };
            if s.is_empty() || s.len() > 18 || !s.bytes().all(|b| b.is_ascii_digit()) {
                return false;
            }
            s.parse::<i64>()
                .is_ok_and(|t| now.abs_diff(t) <= self.tolerance_for_scheme())
        };
        let hex_eq = |cand: &str, mac: &[u8]| {
            !cand.is_empty() && cand.eq_ignore_ascii_case(&hex::encode(mac))
        };
        let b64_eq = |cand: &str, mac: &[u8]| cand == STANDARD.encode(mac);
        match self.scheme {
            Scheme::Stripe => {
                let Some(v) = text("stripe-signature") else {
                    return false;
                };
                let pairs: Vec<(&str, &str)> = v
                    .split(',')
                    .filter_map(|p| p.split_once('='))
                    .map(|(k, v)| (k.trim(), v.trim()))
                    .collect();
                let ts: Vec<&str> = pairs.iter().filter(|p| p.0 == "t").map(|p| p.1).collect();
                let [t] = ts[..] else { return false };
                let mac = self.mac(secret, &[t.as_bytes(), b".", body].concat());
                in_window(t.as_bytes()) && pairs.iter().any(|(k, v)| *k == "v1" && hex_eq(v, &mac))
            }
            Scheme::Github => {
                let mac = self.mac(secret, body);
                text("x-hub-signature-256")
                    .and_then(|v| v.strip_prefix("sha256="))
                    .is_some_and(|v| hex_eq(v, &mac))
            }
            Scheme::Shopify => {
                let mac = self.mac(secret, body);
                text("x-shopify-hmac-sha256").is_some_and(|v| b64_eq(v, &mac))
            }
            Scheme::Slack => {
                let Some(ts) = one("x-slack-request-timestamp") else {
                    return false;
                };
                let mac = self.mac(secret, &[b"v0:", ts, b":", body].concat());
                in_window(ts)
                    && text("x-slack-signature")
                        .and_then(|v| v.strip_prefix("v0="))
                        .is_some_and(|v| hex_eq(v, &mac))
            }
            Scheme::StandardWebhooks | Scheme::Svix => {
                let [id, ts, sig] = self.std_names(h);
                let (Some(id), Some(ts)) = (one(id), one(ts)) else {
                    return false;
                };
                let mac = self.mac(secret, &[id, b".", ts, b".", body].concat());
                in_window(ts)
                    && text(sig).is_some_and(|v| {
                        v.split_ascii_whitespace()
                            .filter_map(|e| e.strip_prefix("v1,"))
                            .any(|c| b64_eq(c, &mac))
                    })
            }
            Scheme::Custom => self.custom_accepts(h, body, secret, &in_window),
        }
    }

    fn tolerance_for_scheme(&self) -> u64 {
        match self.scheme {
            Scheme::Custom => self.desc.cfg.tolerance_seconds.unwrap_or(u64::MAX),
            _ => self.tolerance,
        }
    }

    fn custom_accepts(
        &self,
        h: &HeaderMap,
        body: &[u8],
        secret: &str,
        in_window: &dyn Fn(&[u8]) -> bool,
    ) -> bool {
        let d = &self.desc.cfg;
        let Some(template) = &self.desc.template else {
            return false;
        };
        let one = |name: &str| -> Option<&[u8]> {
            let mut all = h.get_all(name).iter();
            let v = all.next()?;
            all.next().is_none().then_some(v.as_bytes())
        };
        let Some(value) = one(CUSTOM_SIG).and_then(|b| std::str::from_utf8(b).ok()) else {
            return false;
        };
        let key = d.sig_key.clone().unwrap_or_default();
        let pairs: Vec<(&str, &str)> = value
            .split(',')
            .filter_map(|p| p.split_once('='))
            .map(|(k, v)| (k.trim(), v.trim()))
            .collect();
        let candidates: Vec<&str> = match d.parse {
            SigParse::Whole => vec![value],
            SigParse::CsvPairs => pairs.iter().filter(|p| p.0 == key).map(|p| p.1).collect(),
            SigParse::SpaceVersions => value
                .split_ascii_whitespace()
                .filter_map(|e| e.split_once(','))
                .filter(|(v, _)| *v == key)
                .map(|(_, s)| s)
                .collect(),
        };
        let uses_ts = template.iter().any(|p| matches!(p, RefPart::Ts));
        let ts: Option<&[u8]> = if uses_ts || d.tolerance_seconds.is_some() {
            match (&d.timestamp_header, d.parse) {
                (Some(name), _) => one(name),
                (None, SigParse::CsvPairs) => {
                    let ts: Vec<&str> = pairs.iter().filter(|p| p.0 == "t").map(|p| p.1).collect();
                    match ts[..] {
                        [t] => Some(t.as_bytes()),
                        _ => None,
                    }
                }
                _ => None,
            }
        } else {
            None
        };
        if (uses_ts || d.tolerance_seconds.is_some()) && ts.is_none() {
            return false;
        }
        if d.tolerance_seconds.is_some() && !ts.is_some_and(in_window) {
            return false;
        }
        let mut msg = Vec::new();
        for p in template {
            match p {
                RefPart::Lit(l) => msg.extend_from_slice(l.as_bytes()),
                RefPart::Body => msg.extend_from_slice(body),
                RefPart::Ts => msg.extend_from_slice(ts.unwrap_or_default()),
                RefPart::Header(n) => match one(n) {
                    Some(v) => msg.extend_from_slice(v),
                    None => return false,
                },
            }
        }
        let mac = self.mac(secret, &msg);
        let prefix = d.sig_prefix.clone().unwrap_or_default();
        candidates.iter().any(|c| {
            c.strip_prefix(prefix.as_str())
                .is_some_and(|c| match d.encoding {
                    SigEncoding::Hex => !c.is_empty() && c.eq_ignore_ascii_case(&hex::encode(&mac)),
                    SigEncoding::Base64 => c == STANDARD.encode(&mac),
                })
        })
    }
}

/// Builds a correctly signed request into `h`; `Some(in_window)` says whether its timestamp is
/// within the tolerance (`true` for schemes without one). `None`: no signed form to build (no
/// secret to sign with, a template the reference cannot render).
fn sign(input: &Input, r: &Reference, now: i64, h: &mut HeaderMap) -> Option<bool> {
    let secrets = r.secrets;
    if secrets.is_empty() {
        return None;
    }
    let secret = &secrets[usize::from(input.signer) % secrets.len()];
    let ts = (now + i64::from(input.skew)).max(0);
    let ts_text = ts.to_string();
    let in_window = now.abs_diff(ts) <= r.tolerance;
    let body = &input.body;
    let enc_hex = |mac: &[u8]| {
        let s = hex::encode(mac);
        if input.upper {
            s.to_ascii_uppercase()
        } else {
            s
        }
    };
    let decoys = || input.decoys.iter().take(3).filter(|d| !d.is_empty());
    let mut put = |name: &str, value: &[u8]| {
        let v = HeaderValue::from_bytes(value).expect("signed header values are visible ASCII");
        h.append(
            HeaderName::from_bytes(name.as_bytes()).expect("header name"),
            v,
        );
    };
    let in_window = match r.scheme {
        Scheme::Stripe => {
            let mac = r.mac(secret, &[ts_text.as_bytes(), b".", body].concat());
            let mut v = format!("t={ts_text}");
            for d in decoys() {
                v.push_str(&format!(",v1={}", hex::encode(d)));
            }
            v.push_str(&format!(",v1={},v0={}", enc_hex(&mac), hex::encode(&mac)));
            put("stripe-signature", v.as_bytes());
            in_window
        }
        Scheme::Github => {
            let mac = r.mac(secret, body);
            put(
                "x-hub-signature-256",
                format!("sha256={}", enc_hex(&mac)).as_bytes(),
            );
            true
        }
        Scheme::Shopify => {
            let mac = r.mac(secret, body);
            put("x-shopify-hmac-sha256", STANDARD.encode(mac).as_bytes());
            true
        }
        Scheme::Slack => {
            let mac = r.mac(secret, &[b"v0:", ts_text.as_bytes(), b":", body].concat());
            put("x-slack-request-timestamp", ts_text.as_bytes());
            put(
                "x-slack-signature",
                format!("v0={}", enc_hex(&mac)).as_bytes(),
            );
            in_window
        }
        Scheme::StandardWebhooks | Scheme::Svix => {
            let id: String = input
                .id
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
                .take(40)
                .collect();
            let id = if id.is_empty() {
                "msg_1".to_string()
            } else {
                id
            };
            let mac = r.mac(
                secret,
                &[id.as_bytes(), b".", ts_text.as_bytes(), b".", body].concat(),
            );
            let mut entries: Vec<String> = decoys()
                .map(|d| format!("v1,{}", STANDARD.encode(d)))
                .collect();
            entries.push(format!("v1,{}", STANDARD.encode(&mac)));
            entries.push(format!("v2,{}", STANDARD.encode(&mac)));
            let family = if r.scheme == Scheme::Svix {
                "svix"
            } else {
                "webhook"
            };
            put(&format!("{family}-id"), id.as_bytes());
            put(&format!("{family}-timestamp"), ts_text.as_bytes());
            put(&format!("{family}-signature"), entries.join(" ").as_bytes());
            in_window
        }
        Scheme::Custom => {
            let d = &r.desc.cfg;
            let template = r.desc.template.as_ref()?;
            // Header values the template signs: visible ASCII, as a provider would send.
            let mut values: Vec<(String, Vec<u8>)> = Vec::new();
            for (i, name) in TPL_HEADERS.iter().enumerate() {
                if *name == CUSTOM_TS {
                    continue;
                }
                let v: Vec<u8> = input
                    .header_values
                    .get(i)
                    .map(|v| {
                        v.iter()
                            .copied()
                            .filter(|b| (0x21..0x7f).contains(b))
                            .collect()
                    })
                    .unwrap_or_default();
                values.push((name.to_string(), v));
            }
            let ts_from_header = d.timestamp_header.is_some();
            let mut msg = Vec::new();
            for p in template {
                match p {
                    RefPart::Lit(l) => msg.extend_from_slice(l.as_bytes()),
                    RefPart::Body => msg.extend_from_slice(body),
                    RefPart::Ts => msg.extend_from_slice(ts_text.as_bytes()),
                    RefPart::Header(n) if n == CUSTOM_TS && ts_from_header => {
                        msg.extend_from_slice(ts_text.as_bytes())
                    }
                    RefPart::Header(n) => {
                        let (_, v) = values.iter().find(|(name, _)| name == n)?;
                        msg.extend_from_slice(v);
                    }
                }
            }
            let mac = r.mac(secret, &msg);
            let encoded = match d.encoding {
                SigEncoding::Hex => enc_hex(&mac),
                SigEncoding::Base64 => STANDARD.encode(&mac),
            };
            let prefix = d.sig_prefix.clone().unwrap_or_default();
            let key = d.sig_key.clone().unwrap_or_default();
            // Prefix and key are free text here; a provider's are plain tokens. Anything
            // that would change how the header splits is not a signed form of this scheme.
            let visible = |s: &str| s.bytes().all(|b| (0x21..0x7f).contains(&b));
            let splits = match d.parse {
                SigParse::Whole => false,
                SigParse::CsvPairs => prefix.contains(',') || key.contains([',', '=']),
                SigParse::SpaceVersions => key.contains(','),
            };
            if !visible(&prefix) || !visible(&key) || splits || key.is_empty() || key == "t" {
                return None;
            }
            let sig = format!("{prefix}{encoded}");
            let value = match d.parse {
                SigParse::Whole => sig,
                SigParse::CsvPairs => {
                    let mut v = String::new();
                    if !ts_from_header {
                        v.push_str(&format!("t={ts_text},"));
                    }
                    for dec in decoys() {
                        v.push_str(&format!("{key}={prefix}{},", hex::encode(dec)));
                    }
                    v.push_str(&format!("{key}={sig}"));
                    v
                }
                SigParse::SpaceVersions => {
                    let mut v: Vec<String> = decoys()
                        .map(|dec| format!("{key},{prefix}{}", hex::encode(dec)))
                        .collect();
                    v.push(format!("{key},{sig}"));
                    v.join(" ")
                }
            };
            put(CUSTOM_SIG, value.as_bytes());
            if ts_from_header {
                put(CUSTOM_TS, ts_text.as_bytes());
            }
            for (name, v) in &values {
                if template
                    .iter()
                    .any(|p| matches!(p, RefPart::Header(n) if n == name))
                {
                    put(name, v);
                }
            }
            match d.tolerance_seconds {
                Some(t) => now.abs_diff(ts) <= t,
                None => true,
            }
        }
    };
    for (i, v) in input.header_values.iter().take(3).enumerate() {
        if let Ok(v) = HeaderValue::from_bytes(v) {
            h.append(HeaderName::from_static(NOISE[i % NOISE.len()]), v);
        }
    }
    Some(in_window)
}
