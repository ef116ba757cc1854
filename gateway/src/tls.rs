//! TLS for the admin listener (`admin.tls`) and the fleet listener and its client (`fleet.tls`,
//! mutual). The certificate and key are PEM files, re-read
//! when they change: on Kubernetes they come from a Secret volume the operator rotates, and
//! the kubelet swaps the files in place, so a rotation needs no restart. A file that turns
//! unreadable or invalid keeps the previous certificate in service (and is logged), so a
//! half-written rotation never takes the admin API down.
//!
//! A client that speaks plain HTTP to a TLS listener is answered `400 tls_required` in plain
//! HTTP and the connection closed, so a misconfigured client gets a clear answer instead of
//! a reset.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use ankusa_config::AdminTls;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// How often the files' metadata is looked at, at most (a handshake triggers the look).
const RECHECK: Duration = Duration::from_secs(1);

/// The first byte of every TLS connection: a handshake record.
const TLS_HANDSHAKE: u8 = 0x16;

const TLS_REQUIRED: &[u8] = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: 24\r\n\r\n{\"error\":\"tls_required\"}";

/// Errors name the config key (`admin.tls.cert_file`, `fleet.tls.ca_file`), never a path or
/// a file's content.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TlsError {
    #[error("{section}.{field}: cannot read the file ({kind})")]
    Read {
        section: &'static str,
        field: &'static str,
        kind: io::ErrorKind,
    },
    #[error("{section}.{field}: {reason}")]
    Invalid {
        section: &'static str,
        field: &'static str,
        reason: &'static str,
    },
}

/// The listener's certificate, loaded from its files and reloaded when they change.
#[derive(Debug)]
pub struct ReloadingCert {
    section: &'static str,
    cert_file: PathBuf,
    key_file: PathBuf,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    stamp: Stamp,
    key: Arc<CertifiedKey>,
    checked: Instant,
}

/// What tells a file changed: modification time and length of both files (through
/// symlinks, which is how a Secret volume swaps them).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp([Option<(SystemTime, u64)>; 2]);

impl Stamp {
    fn of(cert: &Path, key: &Path) -> Stamp {
        let one = |p: &Path| {
            std::fs::metadata(p)
                .ok()
                .and_then(|m| Some((m.modified().ok()?, m.len())))
        };
        Stamp([one(cert), one(key)])
    }
}

impl ReloadingCert {
    /// Loads the files; an error names the field and the failure, never a path's content.
    pub fn load(tls: &AdminTls) -> Result<ReloadingCert, TlsError> {
        ReloadingCert::load_files("admin.tls", &tls.cert_file, &tls.key_file)
    }

    /// `load` for the pair of files under `section` (`fleet.tls`).
    pub fn load_files(
        section: &'static str,
        cert_file: &Path,
        key_file: &Path,
    ) -> Result<ReloadingCert, TlsError> {
        let stamp = Stamp::of(cert_file, key_file);
        let key = load_pair(section, cert_file, key_file)?;
        Ok(ReloadingCert {
            section,
            cert_file: cert_file.to_path_buf(),
            key_file: key_file.to_path_buf(),
            state: Mutex::new(State {
                stamp,
                key: Arc::new(key),
                checked: Instant::now(),
            }),
        })
    }

    /// The certificate to serve, re-read first when the files changed since the last look.
    pub fn current(&self) -> Arc<CertifiedKey> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if s.checked.elapsed() >= RECHECK {
            s.checked = Instant::now();
            let stamp = Stamp::of(&self.cert_file, &self.key_file);
            if stamp != s.stamp {
                match load_pair(self.section, &self.cert_file, &self.key_file) {
                    Ok(k) => {
                        tracing::info!(section = self.section, "TLS certificate reloaded");
                        s.key = Arc::new(k);
                        s.stamp = stamp;
                    }
                    // Keep the stamp: the next look tries again (a rotation may be mid-write).
                    Err(e) => {
                        tracing::warn!(section = self.section, error = %e, "TLS certificate not reloaded; the previous one stays")
                    }
                }
            }
        }
        s.key.clone()
    }

    /// A TLS acceptor serving this certificate (HTTP/1.1 only, as the listener is).
    pub fn acceptor(self) -> Result<tokio_rustls::TlsAcceptor, TlsError> {
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|_| TlsError::Invalid {
                section: self.section,
                field: "cert_file",
                reason: "no TLS protocol version is available",
            })?
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(self));
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
    }
}

impl ReloadingCert {
    /// A TLS acceptor for the fleet listener: HTTP/2 only, and a client certificate that
    /// chains to `ca` (the Gateway's CA, PEM) is required.
    pub fn mutual_acceptor(
        self,
        ca: &Arc<rustls::RootCertStore>,
    ) -> Result<tokio_rustls::TlsAcceptor, TlsError> {
        let section = self.section;
        let invalid = |reason| TlsError::Invalid {
            section,
            field: "ca_file",
            reason,
        };
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(ca.clone(), provider())
                .build()
                .map_err(|_| invalid("holds no usable CA certificate"))?;
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|_| invalid("no TLS protocol version is available"))?
            .with_client_cert_verifier(verifier)
            .with_cert_resolver(Arc::new(self));
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
    }

    /// A client config presenting this certificate and trusting `ca` only (HTTP/2).
    pub fn mutual_client(
        self,
        ca: &Arc<rustls::RootCertStore>,
    ) -> Result<rustls::ClientConfig, TlsError> {
        let section = self.section;
        let mut config = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|_| TlsError::Invalid {
                section,
                field: "cert_file",
                reason: "no TLS protocol version is available",
            })?
            .with_root_certificates(ca.clone())
            .with_client_cert_resolver(Arc::new(self));
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(config)
    }
}

/// Reads a CA bundle (PEM) for `section.ca_file`.
pub fn load_ca(section: &'static str, path: &Path) -> Result<rustls::RootCertStore, TlsError> {
    let pem = std::fs::read(path).map_err(|e| TlsError::Read {
        section,
        field: "ca_file",
        kind: e.kind(),
    })?;
    let invalid = |reason| TlsError::Invalid {
        section,
        field: "ca_file",
        reason,
    };
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|_| invalid("is not valid PEM"))?;
        roots
            .add(cert)
            .map_err(|_| invalid("holds a certificate that does not parse"))?;
    }
    if roots.is_empty() {
        return Err(invalid("holds no certificate"));
    }
    Ok(roots)
}

impl rustls::client::ResolvesClientCert for ReloadingCert {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

fn load_pair(section: &'static str, cert: &Path, key: &Path) -> Result<CertifiedKey, TlsError> {
    let read = |field: &'static str, path: &Path| {
        std::fs::read(path).map_err(|e| TlsError::Read {
            section,
            field,
            kind: e.kind(),
        })
    };
    let cert_pem = read("cert_file", cert)?;
    let key_pem = read("key_file", key)?;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|_| TlsError::Invalid {
            section,
            field: "cert_file",
            reason: "is not valid PEM",
        })?;
    if chain.is_empty() {
        return Err(TlsError::Invalid {
            section,
            field: "cert_file",
            reason: "holds no certificate",
        });
    }
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|_| TlsError::Invalid {
        section,
        field: "key_file",
        reason: "holds no private key (PKCS#8, PKCS#1 or SEC1 PEM expected)",
    })?;
    let signer = provider()
        .key_provider
        .load_private_key(key)
        .map_err(|_| TlsError::Invalid {
            section,
            field: "key_file",
            reason: "holds a private key of an unsupported kind",
        })?;
    let pair = CertifiedKey::new(chain, signer);
    pair.keys_match().map_err(|_| TlsError::Invalid {
        section,
        field: "key_file",
        reason: "does not match the certificate in cert_file",
    })?;
    Ok(pair)
}

/// The process's rustls provider (aws-lc-rs, installed at start), or aws-lc-rs.
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    rustls::crypto::CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
}

/// Why a connection did not get past TLS.
pub enum Refused {
    /// Nothing arrived before the deadline.
    Timeout,
    /// Plain HTTP (answered `400 tls_required`), a failed handshake, or a closed socket.
    Other,
}

/// Waits for the client's first byte: a TLS handshake goes on, anything else is answered
/// `400 tls_required`. The whole handshake must end within `deadline`.
pub async fn accept(
    acceptor: &tokio_rustls::TlsAcceptor,
    mut stream: TcpStream,
    deadline: Duration,
) -> Result<tokio_rustls::server::TlsStream<TcpStream>, Refused> {
    let handshake = async {
        let mut first = [0u8; 1];
        match stream.peek(&mut first).await {
            Ok(1) if first[0] == TLS_HANDSHAKE => {}
            Ok(1) => {
                let _ = stream.write_all(TLS_REQUIRED).await;
                let _ = stream.shutdown().await;
                return Err(Refused::Other);
            }
            _ => return Err(Refused::Other),
        }
        acceptor.accept(stream).await.map_err(|e| {
            tracing::debug!(error = %e, "admin TLS handshake failed");
            Refused::Other
        })
    };
    tokio::time::timeout(deadline, handshake)
        .await
        .unwrap_or(Err(Refused::Timeout))
}
