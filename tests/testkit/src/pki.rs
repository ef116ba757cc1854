//! A private CA for TLS tests and the sink bench, made with rcgen: server certificates for any
//! names (or expired), client certificates, and leaves with a subject of the test's choosing.
//! The one CA maker of the workspace's tests (the NATS, Redis, RabbitMQ, Kafka, SQS, Pub/Sub and
//! admin TLS tests, the bench's TLS cases). Imports nothing of the crate.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};

/// A private CA.
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pub pem: String,
}

/// A certificate and its key, PEM.
pub struct Pair {
    pub cert: String,
    pub key: String,
}

impl Ca {
    pub fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().expect("CA key");
        let pem = params.self_signed(&key).expect("CA cert").pem();
        Ca {
            issuer: Issuer::new(params, key),
            pem,
        }
    }

    /// A server certificate for `names` (DNS names or IP addresses), CN the first name;
    /// `expired`: valid only in 2020.
    pub fn server(&self, names: &[&str], expired: bool) -> Pair {
        let mut params = subject(names[0], names, expired);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.sign(params)
    }

    /// A client certificate, CN `name`.
    pub fn client(&self, name: &str) -> Pair {
        let mut params = subject(name, &[], false);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.sign(params)
    }

    /// A certificate for `names` with subject `CN=cn` and no key usage restriction (a server or
    /// a client); `expired`: valid only in 2020.
    pub fn leaf(&self, cn: &str, names: &[&str], expired: bool) -> Pair {
        self.sign(subject(cn, names, expired))
    }

    fn sign(&self, params: CertificateParams) -> Pair {
        let key = KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &self.issuer).expect("sign");
        Pair {
            cert: cert.pem(),
            key: key.serialize_pem(),
        }
    }
}

fn subject(cn: &str, names: &[&str], expired: bool) -> CertificateParams {
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let mut params = CertificateParams::new(names).expect("certificate params");
    params.distinguished_name.push(DnType::CommonName, cn);
    if expired {
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(2020, 12, 31);
    }
    params
}

/// Writes `text` to `dir/name` and returns the path.
pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write a test file");
    p
}
