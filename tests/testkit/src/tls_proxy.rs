//! A relay of a test's (or the sink bench's) own: a listener on loopback that copies each
//! connection's bytes to a plaintext upstream (an emulator, a broker), either as it is or
//! terminating TLS with a server certificate from the test's private CA (optionally demanding
//! a client certificate). For a TLS endpoint the real server cannot offer itself, and for the
//! bench's plain-vs-TLS pairs that cross the same extra hop. Imports only `pki`.

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::pki::Pair;

/// A listener on loopback that copies each connection's bytes to `upstream` (an emulator
/// speaking plain HTTP, a broker), presenting `cert` (or plaintext: `relay`); with `client_ca`
/// it demands a client certificate signed by it. Stops on drop.
pub struct TlsProxy {
    pub port: u16,
    task: tokio::task::JoinHandle<()>,
}

impl TlsProxy {
    pub async fn start(cert: &Pair, client_ca: Option<&str>, upstream: u16) -> TlsProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        TlsProxy::serve(listener, cert, client_ca, upstream)
    }

    /// On a listener bound beforehand (a broker must be told the port it advertises first).
    pub fn serve(
        listener: tokio::net::TcpListener,
        cert: &Pair,
        client_ca: Option<&str>,
        upstream: u16,
    ) -> TlsProxy {
        let chain: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(cert.cert.as_bytes())
                .collect::<Result<_, _>>()
                .expect("server certificate PEM");
        let key = PrivateKeyDer::from_pem_slice(cert.key.as_bytes()).expect("server key PEM");
        let builder = rustls::ServerConfig::builder();
        let builder = match client_ca {
            Some(pem) => {
                let mut roots = rustls::RootCertStore::empty();
                for c in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                    roots.add(c.expect("CA PEM")).expect("trust anchor");
                }
                let verifier = rustls::server::WebPkiClientVerifier::builder(Arc::new(roots))
                    .build()
                    .expect("client verifier");
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let config = builder.with_single_cert(chain, key).expect("server config");
        Self::run(
            listener,
            Some(tokio_rustls::TlsAcceptor::from(Arc::new(config))),
            upstream,
        )
    }

    /// A plaintext relay on a listener bound beforehand: the same hop without the encryption.
    pub fn relay(listener: tokio::net::TcpListener, upstream: u16) -> TlsProxy {
        Self::run(listener, None, upstream)
    }

    fn run(
        listener: tokio::net::TcpListener,
        acceptor: Option<tokio_rustls::TlsAcceptor>,
        upstream: u16,
    ) -> TlsProxy {
        let port = listener.local_addr().expect("address").port();
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let _ = tcp.set_nodelay(true);
                    // Dialed once the client's side is up (after the handshake, for TLS).
                    let dial = async {
                        let up = tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await?;
                        up.set_nodelay(true)?;
                        Ok::<_, std::io::Error>(up)
                    };
                    match acceptor {
                        Some(acceptor) => {
                            // A refused handshake is the client's to report; the proxy just
                            // drops it.
                            let Ok(mut tls) = acceptor.accept(tcp).await else {
                                return;
                            };
                            let Ok(mut up) = dial.await else {
                                return;
                            };
                            let _ = tokio::io::copy_bidirectional(&mut tls, &mut up).await;
                        }
                        None => {
                            let mut tcp = tcp;
                            let Ok(mut up) = dial.await else {
                                return;
                            };
                            let _ = tokio::io::copy_bidirectional(&mut tcp, &mut up).await;
                        }
                    }
                });
            }
        });
        TlsProxy { port, task }
    }

    /// `https://localhost:<port>`: the name the certificates of these tests carry.
    pub fn origin(&self) -> String {
        format!("https://localhost:{}", self.port)
    }
}

impl Drop for TlsProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}
