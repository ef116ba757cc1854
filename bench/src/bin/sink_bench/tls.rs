//! The TLS pieces of the `*-tls` cases: a private CA with a server certificate (from the test
//! kit's `pki`), its CA file where a sink's `tls.ca_file` reads it, and relays of the bench's
//! own (the test kit's `TlsProxy`) in front of a broker or an emulator, one plain and one
//! terminating TLS, so both runs of a case cross the same extra hop and differ only in the
//! encryption. Imports `measure`.

use std::path::PathBuf;

use ankusa_config::SinkTls;
use ankusa_testkit::pki::{Ca, Pair, write};
use ankusa_testkit::tls_proxy::TlsProxy;

use crate::measure::BoxErr;

/// A CA and one server certificate, with the CA file in a directory removed on drop.
pub struct Pki {
    pub dir: tempfile::TempDir,
    pub ca: Ca,
    pub server: Pair,
    pub ca_file: PathBuf,
}

impl Pki {
    /// A CA and a server certificate for `names` (DNS names or IP addresses).
    pub fn new(names: &[&str]) -> Result<Pki, BoxErr> {
        let dir = tempfile::tempdir()?;
        let ca = Ca::new("ankusa bench CA");
        let server = ca.server(names, false);
        let ca_file = write(dir.path(), "ca.crt", &ca.pem);
        Ok(Pki {
            dir,
            ca,
            server,
            ca_file,
        })
    }

    /// `tls:` trusting this CA.
    pub fn sink_tls(&self) -> SinkTls {
        SinkTls {
            ca_file: Some(self.ca_file.clone().into()),
            ..SinkTls::default()
        }
    }
}

/// A listener on a free loopback port, bound before the relay serves it (a broker is told the
/// port it advertises first).
pub async fn bind_loopback() -> Result<(tokio::net::TcpListener, u16), BoxErr> {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = l.local_addr()?.port();
    Ok((l, port))
}

/// A plain relay and a TLS relay (a certificate for `localhost`) in front of 127.0.0.1:
/// `upstream`; stopped on drop.
pub struct Relays {
    pub pki: Pki,
    pub plain: TlsProxy,
    pub tls: TlsProxy,
}

impl Relays {
    pub async fn start(upstream: u16) -> Result<Relays, BoxErr> {
        let pki = Pki::new(&["localhost"])?;
        let (listener, _) = bind_loopback().await?;
        let plain = TlsProxy::relay(listener, upstream);
        let tls = TlsProxy::start(&pki.server, None, upstream).await;
        Ok(Relays { pki, plain, tls })
    }

    /// `http://127.0.0.1:<plain relay>` and `https://localhost:<TLS relay>`.
    pub fn origins(&self) -> [String; 2] {
        [
            format!("http://127.0.0.1:{}", self.plain.port),
            self.tls.origin(),
        ]
    }
}
