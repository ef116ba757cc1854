//! A nats-server with JetStream of a test's (or the sink bench's) own, on loopback: plaintext
//! or requiring TLS (certificates from the test's private CA, `pki`), in the default account or
//! in one account with a password user and an NKey user. Its config file, store (`<dir>/js`)
//! and log are kept in the test's directory, so a restart (`kill` then `spawn`, or `start`
//! again with a renewed certificate) finds its streams again; killed on drop. Used by the
//! sinks' NATS TLS tests, the gateway's broker-restart, dual and NATS TLS tests and the bench's
//! `nats-tls` case. Imports `pki` and `ports`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::pki::{Ca, Pair, write};
use crate::ports::wait_ports_blocking;

/// The password user of a server with `users`.
pub const USER: &str = "ankusa";
pub const PASSWORD: &str = "s3cret-nats-pw";
/// The subjects of the stream `create_stream` makes.
pub const SUBJECTS: &str = "hooks.>";

/// What a test server is started with.
pub struct Spec<'a> {
    /// The server's certificate: the server requires TLS. None: plaintext.
    pub server: Option<&'a Pair>,
    /// The CA clients' certificates must chain to (with `verify: true`).
    pub client_ca: Option<&'a Ca>,
    /// Require a client certificate.
    pub verify: bool,
    /// The account `HOOKS` (JetStream enabled) with the password user, instead of the default
    /// account without users.
    pub users: bool,
    /// An NKey user's public key (`U...`), besides the password user.
    pub nkey_user: Option<String>,
}

impl Spec<'_> {
    /// Plaintext, the default account, no users.
    pub fn plain() -> Spec<'static> {
        Spec {
            server: None,
            client_ca: None,
            verify: false,
            users: false,
            nkey_user: None,
        }
    }
}

pub struct NatsServer {
    child: Option<Child>,
    conf: PathBuf,
    tls: bool,
    pub port: u16,
    pub dir: PathBuf,
}

impl NatsServer {
    /// Writes the certificates and the config under `dir` (created if missing), starts
    /// nats-server on 127.0.0.1:`port` with its JetStream store in `dir/js`, and waits for the
    /// port.
    pub fn start(dir: &Path, port: u16, spec: &Spec<'_>) -> NatsServer {
        std::fs::create_dir_all(dir).expect("the server's directory");
        let mut tls = String::new();
        if let Some(server) = spec.server {
            let cert = write(dir, "server-cert.pem", &server.cert);
            let key = write(dir, "server-key.pem", &server.key);
            let ca = spec
                .client_ca
                .map(|ca| {
                    let path = write(dir, "server-ca.pem", &ca.pem);
                    format!("  ca_file: \"{}\"\n", path.display())
                })
                .unwrap_or_default();
            tls = format!(
                "tls {{\n  cert_file: \"{}\"\n  key_file: \"{}\"\n{ca}  verify: {}\n  timeout: 3\n}}\n",
                cert.display(),
                key.display(),
                spec.verify,
            );
        }
        let accounts = if spec.users {
            let nkey = spec
                .nkey_user
                .as_ref()
                .map(|k| format!("{{nkey: \"{k}\"}}"))
                .unwrap_or_default();
            format!(
                "accounts {{\n  HOOKS {{\n    jetstream: enabled\n    users: [\n      \
                 {{user: \"{USER}\", password: \"{PASSWORD}\"}}\n      {nkey}\n    ]\n  }}\n}}\n"
            )
        } else {
            String::new()
        };
        let conf = format!(
            "listen: \"127.0.0.1:{port}\"\njetstream {{ store_dir: \"{}\" }}\n{tls}{accounts}",
            dir.join("js").display(),
        );
        let mut n = NatsServer {
            child: None,
            conf: write(dir, "nats.conf", &conf),
            tls: spec.server.is_some(),
            port,
            dir: dir.to_path_buf(),
        };
        n.spawn();
        n
    }

    /// Starts the server (again, after `kill`) on the same config, port and store, and waits
    /// for the port.
    pub fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("nats.log"))
            .expect("log file");
        let child = Command::new("nats-server")
            .arg("-c")
            .arg(&self.conf)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone().expect("log file")))
            .stderr(Stdio::from(log))
            .spawn()
            .expect(
                "nats-server (Debian's nats-server package; tests/brokers/start.sh installs it)",
            );
        // Held before the wait: a server that never listens is still killed on drop.
        let child = self.child.insert(child);
        let dir = &self.dir;
        wait_ports_blocking(
            &[self.port],
            Duration::from_secs(10),
            || {
                let status = child.try_wait().ok().flatten()?;
                Some(format!("nats-server exited ({status})"))
            },
            || std::fs::read_to_string(dir.join("nats.log")).unwrap_or_default(),
        );
    }

    /// `nats://127.0.0.1:<port>`, or `tls://` for a server that requires TLS.
    pub fn url(&self) -> String {
        let scheme = if self.tls { "tls" } else { "nats" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// The CA file clients' certificates are checked against (with a `client_ca`).
    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("server-ca.pem")
    }

    /// SIGKILL: a crash, nothing flushed.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for NatsServer {
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
