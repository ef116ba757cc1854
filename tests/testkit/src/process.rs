//! Child processes that never outlive the test: they get SIGKILL when the thread that
//! spawned them dies (PR_SET_PDEATHSIG), and are stopped with SIGTERM then SIGKILL.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

/// Spawns `cmd` with stdout and stderr appended to `log`. Call from async code on a runtime
/// worker thread (not a blocking-pool thread, whose exit would kill the child).
pub fn spawn(mut cmd: Command, log: &Path) -> std::io::Result<Child> {
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    let err = out.try_clone()?;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .kill_on_drop(true);
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn()
}

/// Runs `cmd` to its end with `stdin` as its input (none: `/dev/null`) and its output
/// captured.
pub async fn output_with_input(
    mut cmd: Command,
    stdin: Option<&str>,
) -> std::io::Result<std::process::Output> {
    use tokio::io::AsyncWriteExt;
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn()?;
    if let (Some(input), Some(mut w)) = (stdin, child.stdin.take()) {
        w.write_all(input.as_bytes()).await?;
        drop(w);
    }
    child.wait_with_output().await
}

/// SIGTERM, then SIGKILL after `grace`; waits for the exit.
pub async fn stop(child: &mut Child, grace: Duration) {
    if let Some(pid) = child.id() {
        // SAFETY: signalling our own child by its pid.
        unsafe {
            libc::kill(pid as i32, libc::SIGTERM);
        }
        if tokio::time::timeout(grace, child.wait()).await.is_ok() {
            return;
        }
    }
    let _ = child.kill().await;
}

/// SIGKILL now (a crash).
pub fn kill9(child: &Child) {
    if let Some(pid) = child.id() {
        // SAFETY: signalling our own child by its pid.
        unsafe {
            libc::kill(pid as i32, libc::SIGKILL);
        }
    }
}

/// A free TCP port on `ip` (bound then released).
pub fn free_port(ip: &str) -> u16 {
    let l = std::net::TcpListener::bind((ip, 0)).expect("bind a free port");
    l.local_addr().expect("local addr").port()
}

/// Whether `port` can be bound on every one of `ips` right now.
pub fn port_free_on(ips: &[String], port: u16) -> bool {
    ips.iter()
        .all(|ip| std::net::TcpListener::bind((ip.as_str(), port)).is_ok())
}
