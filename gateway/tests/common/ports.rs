//! Ports for test servers that restart. Shared by the gateway's and the sinks' tests (the
//! sinks' `common` includes this file by path).

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
