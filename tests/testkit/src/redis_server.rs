//! A TLS redis-server of a test's (or the sink bench's) own, with certificates from the
//! test's private CA (`pki`), `requirepass` and an ACL user: used by the sinks' Redis TLS tests,
//! the gateway's reload test and the bench's `redis-tls` case. Imports `pki` and `ports`.
//!
//! The server also listens in plaintext on loopback, for the test's own subscriber and for
//! `CONFIG SET`: the redis crate of these tests is built without TLS (the sink dials TLS
//! itself), and the sink under test only ever connects to the TLS port (the bench's plaintext
//! run uses the other one).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::pki::{Pair, write};
use crate::ports::{free_port, wait_ports_blocking};

/// `requirepass`: the `default` user's password.
pub const DEFAULT_PASSWORD: &str = "default-pw-4711";
/// The ACL user the sinks authenticate as (`rediss://hooks:<password>@...`).
pub const ACL_USER: &str = "hooks";
pub const ACL_PASSWORD: &str = "hooks-pw-0815";

/// One redis-server: TLS on `tls_port`, plaintext on `plain_port` (loopback only), killed on
/// drop.
pub struct TlsRedis {
    child: Child,
    pub tls_port: u16,
    pub plain_port: u16,
    pub dir: PathBuf,
}

impl TlsRedis {
    /// Starts redis-server with `server` as its certificate, trusting `client_ca` for client
    /// certificates (required when `auth_clients`).
    pub fn start(dir: &Path, server: &Pair, client_ca: &str, auth_clients: bool) -> TlsRedis {
        let cert = write(dir, "redis-server.crt", &server.cert);
        let key = write(dir, "redis-server.key", &server.key);
        let ca = write(dir, "redis-client-ca.crt", client_ca);
        let tls_port = free_port();
        let plain_port = free_port();
        let log = std::fs::File::create(dir.join("redis.log")).expect("log");
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1"])
            .args(["--port", &plain_port.to_string()])
            .args(["--tls-port", &tls_port.to_string()])
            .arg("--tls-cert-file")
            .arg(&cert)
            .arg("--tls-key-file")
            .arg(&key)
            .arg("--tls-ca-cert-file")
            .arg(&ca)
            .args([
                "--tls-auth-clients",
                if auth_clients { "yes" } else { "no" },
            ])
            .args(["--requirepass", DEFAULT_PASSWORD])
            .args([
                "--user",
                ACL_USER,
                "on",
                &format!(">{ACL_PASSWORD}"),
                "~*",
                "&*",
                "+@all",
            ])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone().expect("log")))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("redis-server (with TLS) on PATH");
        let mut r = TlsRedis {
            child,
            tls_port,
            plain_port,
            dir: dir.to_path_buf(),
        };
        r.wait_listening();
        r
    }

    fn wait_listening(&mut self) {
        let (child, dir) = (&mut self.child, &self.dir);
        wait_ports_blocking(
            &[self.tls_port, self.plain_port],
            Duration::from_secs(10),
            || {
                let status = child.try_wait().ok().flatten()?;
                Some(format!("redis-server exited ({status})"))
            },
            || std::fs::read_to_string(dir.join("redis.log")).unwrap_or_default(),
        );
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("redis.log")).unwrap_or_default()
    }

    /// The plaintext URL as the default user, for the test's subscriber and admin commands.
    pub fn plain_url(&self) -> String {
        self.plain_url_as(&format!(":{DEFAULT_PASSWORD}"))
    }

    /// `redis://<userinfo>@127.0.0.1:<plaintext port>/0`.
    pub fn plain_url_as(&self, userinfo: &str) -> String {
        format!("redis://{userinfo}@127.0.0.1:{}/0", self.plain_port)
    }

    /// `rediss://<userinfo>@<host>:<tls port>/0`.
    pub fn tls_url(&self, userinfo: &str, host: &str) -> String {
        format!("rediss://{userinfo}@{host}:{}/0", self.tls_port)
    }

    /// Swaps the server's certificate (`CONFIG SET tls-cert-file/tls-key-file`): how the
    /// expired-certificate case is fixed on the server's side.
    pub async fn replace_certificate(&self, pair: &Pair) {
        let cert = write(&self.dir, "redis-server-2.crt", &pair.cert);
        let key = write(&self.dir, "redis-server-2.key", &pair.key);
        let client = redis::Client::open(self.plain_url()).expect("url");
        let mut c = client
            .get_multiplexed_async_connection()
            .await
            .expect("plaintext admin connection");
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("tls-cert-file")
            .arg(cert.to_str().expect("utf-8 path"))
            .arg("tls-key-file")
            .arg(key.to_str().expect("utf-8 path"))
            .query_async(&mut c)
            .await
            .expect("CONFIG SET the certificate");
    }
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
