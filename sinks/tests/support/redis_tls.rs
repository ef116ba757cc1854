//! A TLS redis-server of the test's own, with a private CA the test makes (rcgen): server
//! certificates for any name (or expired), client certificates, `requirepass` and an ACL user.
//! Shared by the sinks' Redis TLS tests and the gateway's reload test, each including this file
//! by path (like `ports.rs`); both crates have `common::free_port` at their root.
//!
//! The server also listens in plaintext on loopback, for the test's own subscriber and for
//! `CONFIG SET`: the redis crate of these tests is built without TLS (the sink dials TLS
//! itself), and the sink under test only ever connects to the TLS port.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};

/// `requirepass`: the `default` user's password.
pub const DEFAULT_PASSWORD: &str = "default-pw-4711";
/// The ACL user the sinks authenticate as (`rediss://hooks:<password>@...`).
pub const ACL_USER: &str = "hooks";
pub const ACL_PASSWORD: &str = "hooks-pw-0815";

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
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .expect("server params");
        params.distinguished_name.push(DnType::CommonName, names[0]);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        if expired {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2020, 12, 31);
        }
        self.sign(params)
    }

    /// A client certificate, CN `name`.
    pub fn client(&self, name: &str) -> Pair {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("client params");
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.sign(params)
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

/// Writes `text` to `dir/name` and returns the path.
pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write PEM");
    p
}

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
        let tls_port = crate::common::free_port();
        let plain_port = crate::common::free_port();
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
        let deadline = Instant::now() + Duration::from_secs(10);
        let open = |p: u16| std::net::TcpStream::connect(("127.0.0.1", p)).is_ok();
        while !(open(self.tls_port) && open(self.plain_port)) {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("redis-server exited ({status}):\n{}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "redis-server did not listen:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("redis.log")).unwrap_or_default()
    }

    /// The plaintext URL, for the test's subscriber and admin commands.
    pub fn plain_url(&self) -> String {
        format!(
            "redis://:{DEFAULT_PASSWORD}@127.0.0.1:{}/0",
            self.plain_port
        )
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
