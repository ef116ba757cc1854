//! Test support: a Standard Webhooks signer written independently of the SDK, a private CA,
//! a TLS server for it, and free ports.
#![allow(dead_code)]

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use sha2::Sha256;

pub const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// `v1,<base64 HMAC-SHA256(key, "<id>.<ts>.<body>")>` with the key of a `whsec_` secret.
pub fn sign(secret: &str, id: &str, ts: i64, body: &[u8]) -> String {
    let key = STANDARD
        .decode(secret.strip_prefix("whsec_").expect("a whsec_ secret"))
        .expect("base64");
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).expect("key");
    mac.update(format!("{id}.{ts}.").as_bytes());
    mac.update(body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// A private CA and one serving certificate for `localhost` and `127.0.0.1`.
pub struct Pki {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

impl Pki {
    pub fn new(name: &str) -> Pki {
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, name);
        let ca_key = KeyPair::generate().unwrap();
        let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
        let issuer = Issuer::new(ca, ca_key);
        let mut leaf =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        leaf.distinguished_name
            .push(DnType::CommonName, "localhost");
        let key = KeyPair::generate().unwrap();
        let cert_pem = leaf.signed_by(&key, &issuer).unwrap().pem();
        Pki {
            ca_pem,
            cert_pem,
            key_pem: key.serialize_pem(),
        }
    }

    /// A rustls server config serving the leaf certificate.
    pub fn server_config(&self) -> Arc<rustls::ServerConfig> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let certs = vec![CertificateDer::from_pem_slice(self.cert_pem.as_bytes()).unwrap()];
        let key = PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes()).unwrap();
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap();
        Arc::new(config)
    }
}

/// Serves `app` over TLS (HTTP/1.1) on 127.0.0.1 (port 0); its port.
pub async fn serve_tls(pki: &Pki, app: axum::Router) -> u16 {
    use hyper_util::rt::TokioIo;
    use tower::ServiceExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let acceptor = tokio_rustls::TlsAcceptor::from(pki.server_config());
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let (acceptor, app) = (acceptor.clone(), app.clone());
            tokio::spawn(async move {
                // A client that does not trust the CA ends the handshake: nothing to serve.
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        app.clone().oneshot(req.map(axum::body::Body::new))
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    port
}

/// A port free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
