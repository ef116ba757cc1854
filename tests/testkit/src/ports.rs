//! Loopback ports for test servers (gateways, brokers, proxies) and waiting for them to listen.
//! Used by the gateway's and the sinks' tests and the sink bench; imports nothing of the crate.

use std::time::{Duration, Instant};

/// A loopback port free right now, taken below the kernel's ephemeral range (32768 and up by
/// default). A gateway restarted after `kill -9` binds the same ports again; a port from the
/// ephemeral range may meanwhile have become the local end of any outbound connection on the
/// machine, and the restart would fail with "address in use".
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const LOW: u32 = 20_000;
    const SPAN: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    // Start where this process's id points, so test binaries that follow each other do not
    // walk the same ports.
    let start = std::process::id().wrapping_mul(7919) % SPAN;
    for _ in 0..SPAN {
        let port = (LOW + (start + NEXT.fetch_add(1, Ordering::Relaxed)) % SPAN) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {LOW}..{}", LOW + SPAN)
}

/// Whether something accepts connections on 127.0.0.1:`port`.
pub fn port_open(port: u16) -> bool {
    std::net::TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_millis(200),
    )
    .is_ok()
}

/// Waits (polling, without blocking the runtime) until 127.0.0.1:`port` accepts connections;
/// panics after `timeout`.
pub async fn wait_port(port: u16, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while !port_open(port) {
        assert!(
            Instant::now() < deadline,
            "port {port} did not open in {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Blocks until every port of `ports` accepts connections on 127.0.0.1, or `exited` says the
/// server exited (its text is the panic message), or `timeout` passes (then `log` is shown).
pub fn wait_ports_blocking(
    ports: &[u16],
    timeout: Duration,
    mut exited: impl FnMut() -> Option<String>,
    log: impl Fn() -> String,
) {
    let deadline = Instant::now() + timeout;
    let open = |p: u16| std::net::TcpStream::connect(("127.0.0.1", p)).is_ok();
    while !ports.iter().all(|p| open(*p)) {
        if let Some(why) = exited() {
            panic!("{why}:\n{}", log());
        }
        assert!(
            Instant::now() < deadline,
            "ports {ports:?} did not open in {timeout:?}:\n{}",
            log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
