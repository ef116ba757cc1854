//! The queue sinks' `tls:` settings turned into what their client libraries take: the PEM
//! material (`material`) for clients that want bytes, or a rustls `ClientConfig`
//! (`client_config`) for clients that take one. Errors name the setting (`tls.ca_file: cannot
//! read the file (not found)`), never a path's content or a key.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use ankusa_config::SinkTls;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum TlsSetupError {
    /// A `*_file` that could not be read, or that names the gateway's own files
    /// (`crate::files`): `tls.ca_file: cannot read the file (not found)`.
    #[error(transparent)]
    File(#[from] crate::files::FileReadError),
    #[error("tls.{key}: {reason}")]
    Invalid {
        key: &'static str,
        reason: &'static str,
    },
}

/// The PEM bytes of a sink's TLS settings, read from files or taken from the config.
#[derive(Default, Clone)]
pub struct TlsMaterial {
    pub ca_pem: Option<Vec<u8>>,
    pub cert_pem: Option<Vec<u8>>,
    pub key_pem: Option<Vec<u8>>,
}

impl std::fmt::Debug for TlsMaterial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsMaterial")
            .field("ca_pem", &self.ca_pem.as_ref().map(Vec::len))
            .field("cert_pem", &self.cert_pem.as_ref().map(Vec::len))
            .field("key_pem", &self.key_pem.as_ref().map(|_| "[redacted]"))
            .finish()
    }
}

fn pick(
    key: &'static str,
    file: Option<&std::path::Path>,
    pem: Option<&str>,
) -> Result<Option<Vec<u8>>, TlsSetupError> {
    match (file, pem) {
        (Some(p), _) => Ok(Some(crate::files::read(&format!("tls.{key}"), p)?)),
        (None, Some(s)) => Ok(Some(s.as_bytes().to_vec())),
        (None, None) => Ok(None),
    }
}

/// Reads the settings' files (at every connect, so a rotated file is picked up).
pub fn material(t: &SinkTls) -> Result<TlsMaterial, TlsSetupError> {
    Ok(TlsMaterial {
        ca_pem: pick(
            "ca_file",
            t.ca_file.as_deref(),
            t.ca_pem.as_ref().map(|s| s.expose()),
        )?,
        cert_pem: pick(
            "cert_file",
            t.cert_file.as_deref(),
            t.cert_pem.as_ref().map(|s| s.expose()),
        )?,
        key_pem: pick(
            "key_file",
            t.key_file.as_deref(),
            t.key_pem.as_ref().map(|s| s.expose()),
        )?,
    })
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    rustls::crypto::CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
}

fn certs(key: &'static str, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, TlsSetupError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|_| TlsSetupError::Invalid {
            key,
            reason: "is not valid PEM",
        })?;
    if certs.is_empty() {
        return Err(TlsSetupError::Invalid {
            key,
            reason: "holds no certificate",
        });
    }
    Ok(certs)
}

/// A rustls client config: the CA bundle (else the system's roots), the client certificate,
/// and no verification at all only with `insecure_skip_verify` (which validation allows only
/// under `egress.allow_insecure_tls`). The server name is the connector's to set.
pub fn client_config(t: &SinkTls) -> Result<rustls::ClientConfig, TlsSetupError> {
    client_config_with_peer(t).map(|(config, _)| config)
}

/// `client_config`, and where its verifier notes the certificate the server presented, so a
/// refused handshake can name it (`handshake_error`). Build one per connection: the note is
/// the last certificate seen.
pub fn client_config_with_peer(
    t: &SinkTls,
) -> Result<(rustls::ClientConfig, PeerCert), TlsSetupError> {
    client_config_for_names(t, &HashMap::new())
}

/// `client_config_with_peer` for a client that dials addresses rather than names (the NATS
/// sink's pool): a certificate presented at an address in `names` is checked against that
/// address's configured name (`tls.server_name`, when set, still wins).
pub fn client_config_for_names(
    t: &SinkTls,
    names: &HashMap<IpAddr, String>,
) -> Result<(rustls::ClientConfig, PeerCert), TlsSetupError> {
    let m = material(t)?;
    let provider = provider();
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|_| TlsSetupError::Invalid {
            key: "ca_file",
            reason: "no TLS protocol version is available",
        })?;
    let algorithms = provider.signature_verification_algorithms;
    let inner: Option<Arc<dyn ServerCertVerifier>> = if t.insecure_skip_verify {
        None
    } else {
        let mut roots = rustls::RootCertStore::empty();
        match &m.ca_pem {
            Some(pem) => {
                for c in certs("ca_file", pem)? {
                    roots.add(c).map_err(|_| TlsSetupError::Invalid {
                        key: "ca_file",
                        reason: "holds a certificate that cannot be a trust anchor",
                    })?;
                }
            }
            None => {
                let found = rustls_native_certs::load_native_certs();
                roots.add_parsable_certificates(found.certs);
                if roots.is_empty() {
                    return Err(TlsSetupError::Invalid {
                        key: "ca_file",
                        reason: "not set, and the system has no CA certificates",
                    });
                }
            }
        }
        let verifier =
            rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|_| TlsSetupError::Invalid {
                    key: "ca_file",
                    reason: "holds no usable trust anchor",
                })?;
        Some(verifier)
    };
    // `server_name` replaces the name the certificate is checked against (a client that sends
    // the host it dialed as SNI, such as async-nats, then still accepts a certificate issued for
    // the configured name).
    let name = match &t.server_name {
        Some(n) => Some(
            ServerName::try_from(n.clone()).map_err(|_| TlsSetupError::Invalid {
                key: "server_name",
                reason: "is not a DNS name or an IP address",
            })?,
        ),
        None => None,
    };
    let by_address = names
        .iter()
        .filter_map(|(ip, n)| Some((*ip, ServerName::try_from(n.clone()).ok()?)))
        .collect();
    let peer = PeerCert::default();
    let builder = builder
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Noting {
            inner,
            algorithms,
            peer: peer.clone(),
            name,
            by_address,
        }));
    let config = match (&m.cert_pem, &m.key_pem) {
        (Some(cert), Some(key)) => {
            let chain = certs("cert_file", cert)?;
            let key = PrivateKeyDer::from_pem_slice(key).map_err(|_| TlsSetupError::Invalid {
                key: "key_file",
                reason: "holds no private key (PKCS#8, PKCS#1 or SEC1 PEM expected)",
            })?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|_| TlsSetupError::Invalid {
                    key: "key_file",
                    reason: "does not match the client certificate",
                })?
        }
        _ => builder.with_no_client_auth(),
    };
    Ok((config, peer))
}

/// The subject (and DNS names) of the last certificate a server presented to one config's
/// verifier, as text: what a handshake error names so the operator can tell which server (or
/// which of its certificates) was refused. A certificate is public; nothing secret is kept.
#[derive(Debug, Clone, Default)]
pub struct PeerCert(Arc<Mutex<Option<String>>>);

impl PeerCert {
    pub fn get(&self) -> Option<String> {
        self.0.lock().ok().and_then(|g| g.clone())
    }

    fn note(&self, der: &[u8]) {
        let text = match x509_parser::parse_x509_certificate(der) {
            Ok((_, cert)) => {
                let mut t = format!("subject {}", cert.subject());
                let names: Vec<String> = cert
                    .subject_alternative_name()
                    .ok()
                    .flatten()
                    .map(|ext| {
                        ext.value
                            .general_names
                            .iter()
                            .filter_map(|n| match n {
                                x509_parser::extensions::GeneralName::DNSName(d) => {
                                    Some(d.to_string())
                                }
                                _ => None,
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                if !names.is_empty() {
                    t.push_str(&format!(", names {}", names.join(" ")));
                }
                t
            }
            Err(_) => "not parseable as X.509".to_string(),
        };
        if let Ok(mut g) = self.0.lock() {
            *g = Some(text);
        }
    }
}

/// One line for a failed TLS handshake: `tls_handshake: <why>`, with the server certificate
/// (`subject CN=..., names ...`) when the certificate is what was refused (unknown issuer,
/// wrong name, expired). Never key material: rustls' errors carry none.
pub fn handshake_error(e: &std::io::Error, peer: &PeerCert) -> String {
    let rustls_error = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>());
    match rustls_error {
        Some(rustls::Error::InvalidCertificate(c)) => {
            let why = match c {
                rustls::CertificateError::UnknownIssuer => {
                    "server certificate not issued by a trusted CA (tls.ca_file / ca_pem)"
                        .to_string()
                }
                rustls::CertificateError::NotValidForName
                | rustls::CertificateError::NotValidForNameContext { .. } => {
                    "server certificate not valid for the server name (tls.server_name, else the \
                     URL's host)"
                        .to_string()
                }
                rustls::CertificateError::Expired
                | rustls::CertificateError::ExpiredContext { .. } => {
                    "server certificate expired".to_string()
                }
                rustls::CertificateError::NotValidYet
                | rustls::CertificateError::NotValidYetContext { .. } => {
                    "server certificate not valid yet".to_string()
                }
                other => format!("server certificate refused ({other:?})"),
            };
            match peer.get() {
                Some(cert) => format!("tls_handshake: {why} [{cert}]"),
                None => format!("tls_handshake: {why}"),
            }
        }
        Some(rustls::Error::AlertReceived(alert)) => format!(
            "tls_handshake: the server refused the handshake ({alert:?}; a client certificate \
             may be required: tls.cert_file)"
        ),
        Some(other) => format!("tls_handshake: {other}"),
        None => format!("tls_handshake: {e}"),
    }
}

/// Dials one of `addrs` (addresses the egress policy checked: no lookup of its own) and runs
/// one TLS handshake for `host` with a sink's settings, for a client whose own handshake errors
/// do not name the server certificate (librdkafka's OpenSSL text): `Err` is the line
/// `handshake_error` words (`tls_handshake: ... [subject ...]`), or `tcp_connect: <kind>`.
pub async fn probe(
    addrs: &[std::net::SocketAddr],
    host: &str,
    t: &SinkTls,
    timeout: std::time::Duration,
) -> Result<(), String> {
    let (config, peer) = client_config_with_peer(t).map_err(|e| format!("tls_setup: {e}"))?;
    let name = ServerName::try_from(host.to_string())
        .map_err(|_| "tls_handshake: the broker's host is not a DNS name or an IP address")?;
    let dial = async {
        let tcp = tokio::net::TcpStream::connect(addrs)
            .await
            .map_err(|e| format!("tcp_connect: {}", e.kind()))?;
        tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .map(drop)
            .map_err(|e| handshake_error(&e, &peer))
    };
    match tokio::time::timeout(timeout, dial).await {
        Ok(r) => r,
        Err(_) => Err("tls_handshake: timed out".into()),
    }
}

/// A REST call (SQS, Pub/Sub) that failed at the TLS handshake, worded as `handshake_error`
/// words it; `None` when the failure was anything else. reqwest hands the handshake's
/// `io::Error` (rustls' error inside) up through the connector's error chain.
pub fn reqwest_handshake_error(e: &reqwest::Error, peer: &PeerCert) -> Option<String> {
    let r = rustls_error(e)?;
    let io = std::io::Error::new(std::io::ErrorKind::InvalidData, r);
    Some(handshake_error(&io, peer))
}

/// A refused handshake inside a REST or HTTP client's error, as one class word line:
/// `tls_handshake: invalid peer certificate: UnknownIssuer`. rustls' own text is not used: it
/// names the host the certificate was checked against (which may come from a Secret).
pub fn reqwest_handshake_class(e: &reqwest::Error) -> Option<String> {
    Some(match rustls_error(e)? {
        rustls::Error::InvalidCertificate(c) => {
            use rustls::CertificateError as C;
            let word = match c {
                C::NotValidForName | C::NotValidForNameContext { .. } => "NotValidForName".into(),
                C::Expired | C::ExpiredContext { .. } => "Expired".into(),
                C::NotValidYet | C::NotValidYetContext { .. } => "NotValidYet".into(),
                C::Other(_) => "Other".into(),
                other => format!("{other:?}"),
            };
            format!("tls_handshake: invalid peer certificate: {word}")
        }
        rustls::Error::AlertReceived(a) => format!("tls_handshake: alert received: {a:?}"),
        rustls::Error::General(_) | rustls::Error::Other(_) => "tls_handshake: failed".into(),
        other => format!("tls_handshake: {other:?}"),
    })
}

/// The rustls error somewhere in a REST or HTTP client's error chain.
fn rustls_error(e: &reqwest::Error) -> Option<rustls::Error> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(r) = err.downcast_ref::<rustls::Error>() {
            return Some(r.clone());
        }
        // An `io::Error`'s `source()` skips the error it wraps (it answers that error's own
        // source), and the connectors wrap the handshake's error in one or more of them.
        cur = match err
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => err.source(),
        };
    }
    None
}

/// Notes each certificate the server presents, then lets the real verifier decide; with
/// `insecure_skip_verify` (no verifier) the certificate is not checked. Signatures are checked
/// either way, with the provider's algorithms (those the real verifier checks them with): the
/// handshake stays a handshake.
#[derive(Debug)]
struct Noting {
    inner: Option<Arc<dyn ServerCertVerifier>>,
    algorithms: rustls::crypto::WebPkiSupportedAlgorithms,
    peer: PeerCert,
    /// `tls.server_name`, checked instead of the name the client dialed.
    name: Option<ServerName<'static>>,
    /// The configured name of an address the client dialed instead of the name.
    by_address: HashMap<IpAddr, ServerName<'static>>,
}

impl ServerCertVerifier for Noting {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.peer.note(end_entity);
        let Some(inner) = &self.inner else {
            return Ok(ServerCertVerified::assertion());
        };
        let dialed = match server_name {
            ServerName::IpAddress(ip) => self.by_address.get(&IpAddr::from(*ip)),
            _ => None,
        };
        let name = self.name.as_ref().or(dialed).unwrap_or(server_name);
        inner.verify_server_cert(end_entity, intermediates, name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }

    fn requires_raw_public_keys(&self) -> bool {
        self.inner
            .as_ref()
            .is_some_and(|inner| inner.requires_raw_public_keys())
    }

    fn root_hint_subjects(&self) -> Option<&[rustls::DistinguishedName]> {
        self.inner.as_ref()?.root_hint_subjects()
    }
}
