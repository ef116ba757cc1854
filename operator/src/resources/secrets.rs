//! The Secrets a Gateway owns: the per-pod config (`<gw>-config`), the generated admin token
//! (`<gw>-admin-token`, and the random token itself), the admin CA (`<gw>-admin-ca`) and the
//! pods' admin serving certificate (`<gw>-admin-tls`), and the scrape Secret (`<gw>-scrape`).
//!
//! May import: `resources::names`, `pki` (the certificate files), `ankusa_crds`.

use std::collections::BTreeMap;

use ankusa_crds::Gateway;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;

use crate::pki::{CaFiles, Issued};
use crate::resources::names::{
    admin_ca_secret_name, admin_tls_secret_name, admin_token_secret_name, config_secret_name, meta,
    scrape_secret_name,
};

/// The per-pod config Secret: one key `<pod>.yaml` per pod.
pub fn config_secret(gw: &Gateway, files: &BTreeMap<String, String>) -> Secret {
    Secret {
        metadata: meta(gw, config_secret_name(gw)),
        type_: Some("Opaque".into()),
        data: Some(
            files
                .iter()
                .map(|(k, v)| (k.clone(), ByteString(v.clone().into_bytes())))
                .collect(),
        ),
        ..Default::default()
    }
}

fn secret_of(gw: &Gateway, name: String, type_: &str, files: &[(&str, &str)]) -> Secret {
    Secret {
        metadata: meta(gw, name),
        type_: Some(type_.into()),
        data: Some(
            files
                .iter()
                .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Default::default()
    }
}

/// The admin CA Secret (`ca.crt`: the trust bundle, `ca.key`).
pub fn admin_ca_secret(gw: &Gateway, ca: &CaFiles) -> Secret {
    secret_of(
        gw,
        admin_ca_secret_name(gw),
        "Opaque",
        &[("ca.crt", &ca.bundle_pem), ("ca.key", &ca.key_pem)],
    )
}

/// The pods' admin serving certificate, with the CA bundle that verifies it (`ca.crt`), for
/// clients other than the operator.
pub fn admin_tls_secret(gw: &Gateway, issued: &Issued) -> Secret {
    secret_of(
        gw,
        admin_tls_secret_name(gw),
        "kubernetes.io/tls",
        &[
            ("tls.crt", &issued.leaf.cert_pem),
            ("tls.key", &issued.leaf.key_pem),
            ("ca.crt", &issued.ca.bundle_pem),
        ],
    )
}

/// The generated admin token Secret (created once, never rotated by the operator).
pub fn admin_token_secret(gw: &Gateway, token: &str) -> Secret {
    Secret {
        metadata: meta(gw, admin_token_secret_name(gw)),
        type_: Some("Opaque".into()),
        data: Some(BTreeMap::from([(
            "token".to_string(),
            ByteString(token.as_bytes().to_vec()),
        )])),
        ..Default::default()
    }
}

/// The scrape Secret: `token` (rendered into every pod's `admin.tokens` with scope
/// `metrics:read` only) and `ca.crt` (the admin CA bundle that verifies the pods), the two
/// things a Prometheus needs to scrape the admin port's `/metrics`.
pub fn scrape_secret(gw: &Gateway, token: &str, ca_bundle: &str) -> Secret {
    secret_of(
        gw,
        scrape_secret_name(gw),
        "Opaque",
        &[("token", token), ("ca.crt", ca_bundle)],
    )
}

/// A random token: 256 bits from the operating system's CSPRNG, as 64 hex characters. It guards
/// the admin API (config pushes carry secrets), so never from a fast, predictable PRNG.
pub fn random_token() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(hex::encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::random_token;

    #[test]
    fn tokens_are_256_bits_of_hex_and_differ() {
        let a = random_token().expect("the OS random source");
        let b = random_token().expect("the OS random source");
        assert_eq!(a.len(), 64);
        assert!(
            a.bytes()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_ne!(a, b);
    }
}
