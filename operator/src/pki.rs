//! The admin API's private PKI: one CA per Gateway and one serving certificate its pods share.
//!
//! `ensure` looks at what the Secrets hold and answers what they should hold: it keeps what
//! is valid and issues only what is missing, damaged, about to expire or no longer matches.
//! A CA is replaced a year before it expires; the old CA certificate stays in the trust bundle
//! (`ca.crt`) until it expires itself, so pods still serving a certificate of the old CA
//! (their Secret volume not yet refreshed) are trusted through the switch. A serving
//! certificate lives 90 days and is re-issued 30 days before it ends.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, PublicKeyData,
};
use time::{Duration, OffsetDateTime};
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;
use x509_parser::pem::Pem;

pub const CA_VALIDITY: Duration = Duration::days(3650);
pub const CA_RENEW_BEFORE: Duration = Duration::days(365);
pub const LEAF_VALIDITY: Duration = Duration::days(90);
pub const LEAF_RENEW_BEFORE: Duration = Duration::days(30);
/// Clock skew between the operator and the pods that a fresh certificate tolerates.
const BACKDATE: Duration = Duration::minutes(5);

/// The CA Secret's content (`ca.crt`: the trust bundle, current CA first; `ca.key`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CaFiles {
    pub bundle_pem: String,
    pub key_pem: String,
}

/// The serving Secret's content (`tls.crt`, `tls.key`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LeafFiles {
    pub cert_pem: String,
    pub key_pem: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issued {
    pub ca: CaFiles,
    pub leaf: LeafFiles,
    pub ca_changed: bool,
    pub leaf_changed: bool,
}

#[derive(Debug, thiserror::Error)]
#[error("admin certificate: {step} failed ({source})")]
pub struct PkiError {
    step: &'static str,
    source: rcgen::Error,
}

fn step(step: &'static str) -> impl FnOnce(rcgen::Error) -> PkiError {
    move |source| PkiError { step, source }
}

/// The notAfter (unix seconds) of the current CA of a trust bundle (its first certificate),
/// or `None` when the bundle holds none that parses.
pub fn ca_not_after(bundle_pem: &str) -> Option<i64> {
    let pem = Pem::iter_from_buffer(bundle_pem.as_bytes())
        .map_while(Result::ok)
        .next()?;
    let cert = pem.parse_x509().ok()?;
    Some(cert.validity().not_after.timestamp())
}

/// What the Secrets should hold at `now` for a CA named `ca_name` and a serving certificate
/// for `names` (DNS names, the first one its common name).
pub fn ensure(
    ca: Option<&CaFiles>,
    leaf: Option<&LeafFiles>,
    ca_name: &str,
    names: &[String],
    now: OffsetDateTime,
) -> Result<Issued, PkiError> {
    let bundle: Vec<Pem> = ca
        .map(|c| {
            Pem::iter_from_buffer(c.bundle_pem.as_bytes())
                .map_while(Result::ok)
                .collect()
        })
        .unwrap_or_default();
    let ca_key = ca.and_then(|c| KeyPair::from_pem(&c.key_pem).ok());
    let current_ok = match (bundle.first(), &ca_key) {
        (Some(pem), Some(key)) => pem
            .parse_x509()
            .is_ok_and(|c| c.is_ca() && key_matches(&c, key) && fresh(&c, now, CA_RENEW_BEFORE)),
        _ => false,
    };
    // Old CA certificates stay trusted until they expire; damaged ones go.
    let still_valid = |p: &Pem| p.parse_x509().is_ok_and(|c| fresh(&c, now, Duration::ZERO));
    let (ca_files, ca_key, ca_changed) = match (current_ok, ca_key) {
        (true, Some(key)) => {
            let kept: Vec<&Pem> = bundle.iter().filter(|p| still_valid(p)).collect();
            let files = CaFiles {
                bundle_pem: kept.iter().map(|p| pem_text(p)).collect(),
                key_pem: key.serialize_pem(),
            };
            let changed = ca.is_none_or(|c| c.bundle_pem != files.bundle_pem);
            (files, key, changed)
        }
        _ => {
            let key = KeyPair::generate().map_err(step("generating the CA key"))?;
            let mut params =
                CertificateParams::new(Vec::<String>::new()).map_err(step("CA parameters"))?;
            params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
            params.distinguished_name.push(
                DnType::CommonName,
                format!("{ca_name} {}", now.unix_timestamp()),
            );
            params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
            params.not_before = now - BACKDATE;
            params.not_after = now + CA_VALIDITY;
            let cert = params.self_signed(&key).map_err(step("signing the CA"))?;
            let mut bundle_pem = pem_block(cert.der());
            bundle_pem.extend(bundle.iter().filter(|p| still_valid(p)).map(pem_text));
            let files = CaFiles {
                bundle_pem,
                key_pem: key.serialize_pem(),
            };
            (files, key, true)
        }
    };
    let current_pem = Pem::iter_from_buffer(ca_files.bundle_pem.as_bytes())
        .map_while(Result::ok)
        .next();
    let current = current_pem.as_ref().and_then(|p| p.parse_x509().ok());
    let leaf_key = leaf.and_then(|l| KeyPair::from_pem(&l.key_pem).ok());
    // Signed by the current CA: a new CA means a new serving certificate.
    let leaf_ok = match (leaf, &leaf_key, &current) {
        (Some(l), Some(key), Some(issuer)) => Pem::iter_from_buffer(l.cert_pem.as_bytes())
            .next()
            .and_then(Result::ok)
            .is_some_and(|p| {
                p.parse_x509().is_ok_and(|c| {
                    key_matches(&c, key)
                        && fresh(&c, now, LEAF_RENEW_BEFORE)
                        && c.verify_signature(Some(issuer.public_key())).is_ok()
                        && dns_names(&c) == sorted(names)
                        && client_auth(&c)
                })
            }),
        _ => false,
    };
    if leaf_ok && let Some(l) = leaf {
        return Ok(Issued {
            ca: ca_files,
            leaf: l.clone(),
            ca_changed,
            leaf_changed: false,
        });
    }
    let issuer = Issuer::from_ca_cert_pem(&ca_files.bundle_pem, ca_key)
        .map_err(step("reading the CA certificate"))?;
    let key = KeyPair::generate().map_err(step("generating the serving key"))?;
    let mut params = CertificateParams::new(names.to_vec()).map_err(step("serving names"))?;
    if let Some(first) = names.first() {
        params
            .distinguished_name
            .push(DnType::CommonName, first.clone());
    }
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    // Also a client certificate: the pods present it to each other on the fleet listener.
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    params.use_authority_key_identifier_extension = true;
    params.not_before = now - BACKDATE;
    params.not_after = now + LEAF_VALIDITY;
    let cert = params
        .signed_by(&key, &issuer)
        .map_err(step("signing the serving certificate"))?;
    Ok(Issued {
        ca: ca_files,
        leaf: LeafFiles {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        },
        ca_changed,
        leaf_changed: true,
    })
}

fn pem_text(p: &Pem) -> String {
    pem_block(&p.contents)
}

/// One certificate as PEM, always in the same layout, so a kept bundle compares equal.
fn pem_block(der: &[u8]) -> String {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

fn key_matches(c: &X509Certificate<'_>, key: &KeyPair) -> bool {
    c.public_key().subject_public_key.data.as_ref() == key.der_bytes()
}

/// Valid at `now` and for at least `margin` more.
fn fresh(c: &X509Certificate<'_>, now: OffsetDateTime, margin: Duration) -> bool {
    let v = c.validity();
    v.not_before.timestamp() <= now.unix_timestamp()
        && v.not_after.timestamp() > (now + margin).unix_timestamp()
}

/// Whether the certificate may authenticate a client (a serving certificate issued before the
/// fleet needed it has `serverAuth` only, and is re-issued).
fn client_auth(c: &X509Certificate<'_>) -> bool {
    c.extended_key_usage()
        .ok()
        .flatten()
        .is_some_and(|e| e.value.client_auth)
}

fn dns_names(c: &X509Certificate<'_>) -> Vec<String> {
    let mut out: Vec<String> = c
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|san| {
            san.value
                .general_names
                .iter()
                .filter_map(|n| match n {
                    GeneralName::DNSName(d) => Some(d.to_string()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

fn sorted(names: &[String]) -> Vec<String> {
    let mut v = names.to_vec();
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        vec!["gw-pods.ns.svc".into(), "*.gw-pods.ns.svc".into()]
    }

    fn parse(pem: &str) -> Vec<Pem> {
        Pem::iter_from_buffer(pem.as_bytes())
            .map_while(Result::ok)
            .collect()
    }

    fn not_after(pem: &str) -> i64 {
        parse(pem)[0]
            .parse_x509()
            .unwrap()
            .validity()
            .not_after
            .timestamp()
    }

    fn signed_by(leaf: &str, ca: &str) -> bool {
        let l = &parse(leaf)[0];
        let c = &parse(ca)[0];
        let c = c.parse_x509().unwrap();
        l.parse_x509()
            .unwrap()
            .verify_signature(Some(c.public_key()))
            .is_ok()
    }

    #[test]
    fn the_ca_expiry_is_the_current_cas_not_after() {
        let now = OffsetDateTime::now_utc();
        let first = ensure(None, None, "ankusa admin CA ns/gw", &names(), now).unwrap();
        let t = ca_not_after(&first.ca.bundle_pem).unwrap();
        assert_eq!(t, not_after(&first.ca.bundle_pem));
        assert_eq!(t, (now + CA_VALIDITY).unix_timestamp());
        // Renewed: the new CA comes first in the bundle, the old one stays behind it.
        let renewed = ensure(
            Some(&first.ca),
            Some(&first.leaf),
            "ankusa admin CA ns/gw",
            &names(),
            now + CA_VALIDITY - CA_RENEW_BEFORE + Duration::days(1),
        )
        .unwrap();
        assert!(renewed.ca_changed);
        assert!(ca_not_after(&renewed.ca.bundle_pem).unwrap() > t);
        assert_eq!(ca_not_after("no certificate here"), None);
    }

    #[test]
    fn issues_once_then_keeps_what_is_valid() {
        let now = OffsetDateTime::now_utc();
        let first = ensure(None, None, "ankusa admin CA ns/gw", &names(), now).unwrap();
        assert!(first.ca_changed && first.leaf_changed);
        assert!(signed_by(&first.leaf.cert_pem, &first.ca.bundle_pem));
        let again = ensure(
            Some(&first.ca),
            Some(&first.leaf),
            "ankusa admin CA ns/gw",
            &names(),
            now + Duration::days(59),
        )
        .unwrap();
        assert!(!again.ca_changed && !again.leaf_changed);
        assert_eq!(again.ca, first.ca);
        assert_eq!(again.leaf, first.leaf);
    }

    #[test]
    fn serving_certificate_is_renewed_before_it_expires_by_the_same_ca() {
        let now = OffsetDateTime::now_utc();
        let first = ensure(None, None, "ca", &names(), now).unwrap();
        let later = now + LEAF_VALIDITY - LEAF_RENEW_BEFORE + Duration::days(1);
        let renewed = ensure(Some(&first.ca), Some(&first.leaf), "ca", &names(), later).unwrap();
        assert!(!renewed.ca_changed && renewed.leaf_changed);
        assert!(not_after(&renewed.leaf.cert_pem) > not_after(&first.leaf.cert_pem));
        assert!(signed_by(&renewed.leaf.cert_pem, &first.ca.bundle_pem));
    }

    #[test]
    fn ca_is_replaced_before_it_expires_and_the_old_one_stays_trusted() {
        let now = OffsetDateTime::now_utc();
        let first = ensure(None, None, "ca", &names(), now).unwrap();
        let later = now + CA_VALIDITY - CA_RENEW_BEFORE + Duration::days(1);
        let rotated = ensure(Some(&first.ca), Some(&first.leaf), "ca", &names(), later).unwrap();
        assert!(rotated.ca_changed && rotated.leaf_changed);
        let bundle = parse(&rotated.ca.bundle_pem);
        assert_eq!(bundle.len(), 2, "new CA first, the old one kept");
        assert_eq!(bundle[1].contents, parse(&first.ca.bundle_pem)[0].contents);
        assert!(signed_by(&rotated.leaf.cert_pem, &rotated.ca.bundle_pem));
        assert!(!signed_by(&rotated.leaf.cert_pem, &first.ca.bundle_pem));
        // Once the old CA has expired it leaves the bundle.
        let much_later = now + CA_VALIDITY + Duration::days(1);
        let pruned = ensure(
            Some(&rotated.ca),
            Some(&rotated.leaf),
            "ca",
            &names(),
            much_later,
        )
        .unwrap();
        assert!(pruned.ca_changed);
        assert_eq!(parse(&pruned.ca.bundle_pem).len(), 1);
        assert_eq!(bundle[0].contents, parse(&pruned.ca.bundle_pem)[0].contents);
        assert!(signed_by(&pruned.leaf.cert_pem, &pruned.ca.bundle_pem));
    }

    #[test]
    fn damaged_or_foreign_content_is_replaced() {
        let now = OffsetDateTime::now_utc();
        let first = ensure(None, None, "ca", &names(), now).unwrap();
        // A serving certificate of another CA (planted, or left from an old Gateway).
        let other = ensure(None, None, "other", &names(), now).unwrap();
        let fixed = ensure(Some(&first.ca), Some(&other.leaf), "ca", &names(), now).unwrap();
        assert!(!fixed.ca_changed && fixed.leaf_changed);
        assert!(signed_by(&fixed.leaf.cert_pem, &first.ca.bundle_pem));
        // A key that does not match its certificate.
        let mixed = LeafFiles {
            cert_pem: first.leaf.cert_pem.clone(),
            key_pem: other.leaf.key_pem.clone(),
        };
        assert!(
            ensure(Some(&first.ca), Some(&mixed), "ca", &names(), now)
                .unwrap()
                .leaf_changed
        );
        // Other names (the Gateway's Services renamed).
        let renamed = ensure(
            Some(&first.ca),
            Some(&first.leaf),
            "ca",
            &["x-pods.ns.svc".to_string()],
            now,
        )
        .unwrap();
        assert!(renamed.leaf_changed);
        // Garbage in the CA Secret: a new CA, and a new serving certificate under it.
        let junk = CaFiles {
            bundle_pem: "junk".into(),
            key_pem: "junk".into(),
        };
        let fresh = ensure(Some(&junk), Some(&first.leaf), "ca", &names(), now).unwrap();
        assert!(fresh.ca_changed && fresh.leaf_changed);
        assert!(signed_by(&fresh.leaf.cert_pem, &fresh.ca.bundle_pem));
    }
}
