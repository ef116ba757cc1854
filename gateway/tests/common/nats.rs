//! A nats-server with JetStream of a test's own, on loopback, keeping its store in a directory
//! so a restart (after `kill9`) finds its streams again.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Nats {
    child: Option<Child>,
    pub port: u16,
    dir: std::path::PathBuf,
}

impl Nats {
    pub fn start(port: u16, dir: &std::path::Path) -> Nats {
        let mut n = Nats {
            child: None,
            port,
            dir: dir.to_path_buf(),
        };
        n.spawn();
        n
    }

    /// Starts it again on the same port and store.
    pub fn spawn(&mut self) {
        let child = Command::new("nats-server")
            .args([
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-js",
                "-sd",
            ])
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect(
                "nats-server (Debian's nats-server package; tests/brokers/start.sh installs it)",
            );
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "nats-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        self.kill9();
    }
}
