//! A private CA and a nats-server that requires TLS, for the NATS TLS tests (sinks/tests/
//! nats_tls.rs and gateway/tests/nats_tls.rs, which includes this file by path). The
//! certificates are made here with rcgen; the server's config file (TLS, one account with
//! JetStream, a password user and an NKey user) is written per test; the server is killed on
//! drop.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

/// The password user every test server knows.
pub const USER: &str = "ankusa";
pub const PASSWORD: &str = "s3cret-nats-pw";
/// The stream every test server's account gets (created by `create_stream`).
pub const SUBJECTS: &str = "hooks.>";

pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pub pem: String,
}

/// A certificate and its key, PEM.
pub struct Leaf {
    pub cert_pem: String,
    pub key_pem: String,
}

impl Ca {
    pub fn new(cn: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, cn);
        let key = KeyPair::generate().expect("CA key");
        let pem = params.self_signed(&key).expect("CA cert").pem();
        Ca {
            issuer: Issuer::new(params, key),
            pem,
        }
    }

    /// A certificate for `names` (DNS names or IP addresses) with subject `CN=cn`; `expired`
    /// puts its validity wholly in the past.
    pub fn leaf(&self, cn: &str, names: &[&str], expired: bool) -> Leaf {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names).expect("leaf params");
        params.distinguished_name.push(DnType::CommonName, cn);
        if expired {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        }
        let key = KeyPair::generate().expect("leaf key");
        let cert = params.signed_by(&key, &self.issuer).expect("leaf cert");
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }
}

/// What a test server is started with.
pub struct Spec<'a> {
    pub server: &'a Leaf,
    /// The CA clients' certificates must chain to (`verify: true`).
    pub client_ca: &'a Ca,
    /// Require a client certificate.
    pub verify: bool,
    /// An NKey user's public key (`U...`), besides the password user.
    pub nkey_user: Option<String>,
}

pub struct TlsNats {
    child: Option<Child>,
    pub port: u16,
    pub dir: PathBuf,
}

impl TlsNats {
    /// Writes the certificates and the config under `dir`, starts nats-server on
    /// 127.0.0.1:`port` with its JetStream store in `dir/js`, and waits for the port.
    pub fn start(dir: &Path, port: u16, spec: &Spec<'_>) -> TlsNats {
        let write = |name: &str, text: &str| {
            let p = dir.join(name);
            std::fs::write(&p, text).expect("write a server file");
            p
        };
        let cert = write("server-cert.pem", &spec.server.cert_pem);
        let key = write("server-key.pem", &spec.server.key_pem);
        let ca = write("server-ca.pem", &spec.client_ca.pem);
        let nkey = spec
            .nkey_user
            .as_ref()
            .map(|k| format!("{{nkey: \"{k}\"}}"))
            .unwrap_or_default();
        let conf = format!(
            r#"listen: "127.0.0.1:{port}"
jetstream {{ store_dir: "{js}" }}
tls {{
  cert_file: "{cert}"
  key_file: "{key}"
  ca_file: "{ca}"
  verify: {verify}
  timeout: 3
}}
accounts {{
  HOOKS {{
    jetstream: enabled
    users: [
      {{user: "{USER}", password: "{PASSWORD}"}}
      {nkey}
    ]
  }}
}}
"#,
            js = dir.join("js").display(),
            cert = cert.display(),
            key = key.display(),
            ca = ca.display(),
            verify = spec.verify,
        );
        let conf = write("nats.conf", &conf);
        let log = std::fs::File::create(dir.join("nats.log")).expect("log file");
        let child = Command::new("nats-server")
            .arg("-c")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone().expect("log file")))
            .stderr(Stdio::from(log))
            .spawn()
            .expect(
                "nats-server (Debian's nats-server package; tests/brokers/start.sh installs it)",
            );
        let n = TlsNats {
            child: Some(child),
            port,
            dir: dir.to_path_buf(),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "nats-server did not start: {}",
                std::fs::read_to_string(dir.join("nats.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        n
    }

    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("server-ca.pem")
    }

    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for TlsNats {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Connects as the password user over TLS trusting `ca_file` (with a client certificate when
/// the server verifies one) and creates stream `name` over `SUBJECTS` (the sink never creates
/// streams).
pub async fn create_stream(
    port: u16,
    ca_file: &Path,
    client: Option<(&Path, &Path)>,
    name: &str,
) -> async_nats::jetstream::stream::Stream {
    let mut opts = async_nats::ConnectOptions::with_user_and_password(USER.into(), PASSWORD.into())
        .require_tls(true)
        .add_root_certificates(ca_file.to_path_buf());
    if let Some((cert, key)) = client {
        opts = opts.add_client_certificate(cert.to_path_buf(), key.to_path_buf());
    }
    let nc = opts
        .connect(format!("tls://127.0.0.1:{port}"))
        .await
        .expect("the test's own client connects over TLS");
    async_nats::jetstream::new(nc)
        .create_stream(async_nats::jetstream::stream::Config {
            name: name.to_string(),
            subjects: vec![SUBJECTS.to_string()],
            storage: async_nats::jetstream::stream::StorageType::File,
            ..Default::default()
        })
        .await
        .expect("create the stream")
}

/// The Nats-Msg-Id (the hook id) of every message in `st`.
pub async fn stored_ids(st: &async_nats::jetstream::stream::Stream) -> Vec<String> {
    let n = st.get_info().await.expect("stream info").state.messages;
    let mut ids = Vec::new();
    for seq in 1..=n {
        if let Ok(m) = st.get_raw_message(seq).await {
            ids.push(
                m.headers
                    .get("Nats-Msg-Id")
                    .map(|v| v.as_str().to_string())
                    .unwrap_or_default(),
            );
        }
    }
    ids
}
