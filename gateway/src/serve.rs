//! The accept loop of every listener (ingest, admin, claim check), in place of `axum::serve`,
//! which runs hyper without a timer: no header timeout, no idle timeout, no connection cap.
//!
//! Per connection: a request's head (request line and headers) must arrive within
//! `header_read_timeout_ms` of its first byte (of the accept, for a connection's first
//! request), and a keep-alive connection waiting for its next request is closed after
//! `idle_timeout_ms`. hyper's own header timeout is not used: its timer starts as soon as a
//! connection waits for a head, so it would also cut idle keep-alive connections at the
//! header timeout. hyper enforces the head's size (`max_header_bytes`) and header count
//! (`max_headers`), answering `431`.
//!
//! Per listener: at most `max_connections` open. Past it a new connection is answered `503`
//! (`overload`, `Retry-After: 1`, `Connection: close`) by a small bounded set of refusal tasks;
//! when those are busy too, accepting pauses until a slot frees. An accept error (such as
//! running out of file descriptors) pauses accepting briefly; it never ends the listener.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use ankusa_config::ConnectionLimits;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, Semaphore, watch};

use crate::metrics::Metrics;

/// Refusals written at once when a listener is full; past it, accepting pauses.
const REFUSERS: usize = 64;
/// Time a refusal may take to write before the connection is simply closed.
const REFUSAL_WRITE: Duration = Duration::from_secs(1);
/// Time open connections get to finish their request on shutdown.
const DRAIN: Duration = Duration::from_secs(10);

const REFUSAL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: 20\r\n\r\n{\"error\":\"overload\"}";

/// One listener's name (a metric label) and limits.
#[derive(Clone)]
pub struct Listener {
    pub name: &'static str,
    pub limits: ConnectionLimits,
    pub metrics: Arc<Metrics>,
    /// Serve HTTPS only (the admin listener with `admin.tls`, the fleet listener).
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    /// Serve HTTP/2 instead of HTTP/1.1 (the fleet listener: its peers multiplex forwards
    /// over one connection, pinged while idle instead of timed out).
    pub http2: bool,
}

/// Serves `router` on `listener` until `stop` turns true, then gives open connections
/// `DRAIN` to finish their requests.
pub async fn serve(
    listener: TcpListener,
    router: axum::Router,
    opts: Listener,
    mut stop: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(opts.limits.max_connections as usize));
    let refusers = Arc::new(Semaphore::new(REFUSERS));
    let open = opts
        .metrics
        .listeners
        .connections
        .with_label_values(&[opts.name]);
    let conns = tokio_util_like::TaskCount::default();
    loop {
        if slots.available_permits() == 0 && refusers.available_permits() == 0 {
            // Full, and every refusal slot busy: let the kernel's backlog hold new clients.
            tokio::select! {
                _ = slots.clone().acquire_owned() => {}
                _ = refusers.clone().acquire_owned() => {}
                _ = stopped(&mut stop) => break,
            }
            continue;
        }
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(listener = opts.name, error = %e, "accept failed; pausing accepts for 100 ms");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = stopped(&mut stop) => break,
        };
        // Answers are small single writes; Nagle would only hold them back.
        let _ = stream.set_nodelay(true);
        match slots.clone().try_acquire_owned() {
            Ok(slot) => {
                open.inc();
                let (router, opts, stop, open, guard) = (
                    router.clone(),
                    opts.clone(),
                    stop.clone(),
                    open.clone(),
                    conns.enter(),
                );
                tokio::spawn(async move {
                    match opts.tls.clone() {
                        None => connection(stream, peer, router, &opts, stop).await,
                        Some(acceptor) => {
                            let deadline =
                                Duration::from_millis(opts.limits.header_read_timeout_ms);
                            match crate::tls::accept(&acceptor, stream, deadline).await {
                                Ok(tls) if opts.http2 => {
                                    connection_h2(tls, peer, router, &opts, stop).await
                                }
                                Ok(tls) => connection(tls, peer, router, &opts, stop).await,
                                Err(crate::tls::Refused::Timeout) => opts
                                    .metrics
                                    .listeners
                                    .timeouts
                                    .with_label_values(&[opts.name, "tls_handshake"])
                                    .inc(),
                                Err(crate::tls::Refused::Other) => {}
                            }
                        }
                    }
                    open.dec();
                    drop(slot);
                    drop(guard);
                });
            }
            Err(_) => {
                opts.metrics
                    .listeners
                    .connections_refused
                    .with_label_values(&[opts.name])
                    .inc();
                if let Ok(r) = refusers.clone().try_acquire_owned() {
                    tokio::spawn(async move {
                        refuse(stream).await;
                        drop(r);
                    });
                }
            }
        }
    }
    drop(listener);
    if tokio::time::timeout(DRAIN, conns.idle()).await.is_err() {
        tracing::warn!(
            listener = opts.name,
            "connections still open after the drain period; closing them"
        );
    }
}

/// Resolves once `stop` turns true (or its sender is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

async fn refuse(mut stream: TcpStream) {
    let _ = tokio::time::timeout(REFUSAL_WRITE, async {
        stream.write_all(REFUSAL).await?;
        stream.shutdown().await
    })
    .await;
}

/// What a connection's watchdog reads: milliseconds since the connection opened.
#[derive(Default)]
struct Activity {
    /// Last time bytes arrived or a request finished.
    last: AtomicU64,
    /// When the head being read started (first byte), `u64::MAX` when none is being read.
    head_started: AtomicU64,
    /// Requests being handled.
    in_flight: AtomicU32,
    /// Woken when a head starts, so the watchdog moves its deadline earlier.
    changed: Notify,
}

struct Clock(Instant);

impl Clock {
    fn ms(&self) -> u64 {
        self.0.elapsed().as_millis() as u64
    }
}

async fn connection<S>(
    stream: S,
    peer: SocketAddr,
    router: axum::Router,
    opts: &Listener,
    mut stop: watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let clock = Arc::new(Clock(Instant::now()));
    let activity = Arc::new(Activity::default());
    // The first request's head is timed from the accept.
    activity.head_started.store(0, Ordering::SeqCst);
    let io = Tracked {
        inner: stream,
        activity: activity.clone(),
        clock: clock.clone(),
    };
    let service = {
        let (activity, clock) = (activity.clone(), clock.clone());
        hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
            activity.head_started.store(u64::MAX, Ordering::SeqCst);
            activity.in_flight.fetch_add(1, Ordering::SeqCst);
            // The watchdog may be sleeping toward this head's deadline; it must look again.
            activity.changed.notify_one();
            req.extensions_mut().insert(ConnectInfo(peer));
            let (router, activity, clock) = (router.clone(), activity.clone(), clock.clone());
            async move {
                let resp = tower::ServiceExt::oneshot(router, req).await;
                activity.last.store(clock.ms(), Ordering::SeqCst);
                activity.in_flight.fetch_sub(1, Ordering::SeqCst);
                // Idle time starts now: the watchdog's next deadline is `last + idle`.
                activity.changed.notify_one();
                resp
            }
        })
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(None)
        .keep_alive(true)
        .max_headers(opts.limits.max_headers as usize)
        .max_header_size(opts.limits.max_header_bytes as usize)
        .max_buf_size((opts.limits.max_header_bytes as usize).max(8192));
    let conn = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(conn);
    let timeout = tokio::select! {
        res = conn.as_mut() => {
            if let Err(e) = res
                && !e.is_incomplete_message()
            {
                tracing::debug!(listener = opts.name, error = %e, "connection ended with an error");
            }
            return;
        }
        kind = watchdog(&activity, &clock, &opts.limits) => kind,
        _ = stopped(&mut stop) => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(DRAIN, conn).await;
            return;
        }
    };
    opts.metrics
        .listeners
        .timeouts
        .with_label_values(&[opts.name, timeout])
        .inc();
    // Dropping the connection closes the socket.
}

/// Streams one fleet connection carries at once (the client's own bound is
/// `fleet.max_in_flight`).
const H2_STREAMS: u32 = 1024;

/// An HTTP/2 connection: idle peers are pinged rather than timed out (a forward's pool keeps
/// one connection per owner open), one that stops answering pings is closed.
async fn connection_h2<S>(
    stream: S,
    peer: SocketAddr,
    router: axum::Router,
    opts: &Listener,
    mut stop: watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
        req.extensions_mut().insert(ConnectInfo(peer));
        tower::ServiceExt::oneshot(router.clone(), req)
    });
    let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    builder
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(Duration::from_secs(10)))
        .keep_alive_timeout(Duration::from_secs(20))
        .max_concurrent_streams(H2_STREAMS)
        .max_header_list_size(opts.limits.max_header_bytes);
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    tokio::select! {
        res = conn.as_mut() => {
            if let Err(e) = res {
                tracing::debug!(listener = opts.name, error = %e, "connection ended with an error");
            }
        }
        _ = stopped(&mut stop) => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(DRAIN, conn).await;
        }
    }
}

/// Resolves with the kind of timeout that ends the connection: `header_read` or `idle`.
async fn watchdog(activity: &Activity, clock: &Clock, limits: &ConnectionLimits) -> &'static str {
    let header = limits.header_read_timeout_ms;
    let idle = limits.idle_timeout_ms;
    loop {
        let now = clock.ms();
        let started = activity.head_started.load(Ordering::SeqCst);
        let (deadline, kind) = if started != u64::MAX {
            (started.saturating_add(header), "header_read")
        } else if activity.in_flight.load(Ordering::SeqCst) == 0 {
            (
                activity.last.load(Ordering::SeqCst).saturating_add(idle),
                "idle",
            )
        } else {
            // A request is being handled: its body has its own timeout, the answer none to
            // wait for here. Look again when something changes or after a while.
            (now.saturating_add(idle.max(1000)), "")
        };
        if !kind.is_empty() && now >= deadline {
            return kind;
        }
        let wait = Duration::from_millis(deadline.saturating_sub(now).max(1));
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = activity.changed.notified() => {}
        }
    }
}

/// The socket, noting when bytes arrive: a first byte after an idle spell starts a head.
struct Tracked<S> {
    inner: S,
    activity: Arc<Activity>,
    clock: Arc<Clock>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Tracked<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let res = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = res
            && buf.filled().len() > before
        {
            let now = self.clock.ms();
            let a = &self.activity;
            a.last.store(now, Ordering::SeqCst);
            if a.in_flight.load(Ordering::SeqCst) == 0
                && a.head_started
                    .compare_exchange(u64::MAX, now, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
            {
                a.changed.notify_one();
            }
        }
        res
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Tracked<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Counting the connection tasks of a listener, to wait for them on shutdown.
mod tokio_util_like {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::sync::Notify;

    #[derive(Default, Clone)]
    pub struct TaskCount(Arc<(AtomicUsize, Notify)>);

    pub struct Guard(Arc<(AtomicUsize, Notify)>);

    impl TaskCount {
        pub fn enter(&self) -> Guard {
            self.0.0.fetch_add(1, Ordering::SeqCst);
            Guard(self.0.clone())
        }

        /// Resolves once no task is left.
        pub async fn idle(&self) {
            loop {
                let notified = self.0.1.notified();
                if self.0.0.load(Ordering::SeqCst) == 0 {
                    return;
                }
                notified.await;
            }
        }
    }

    impl Drop for Guard {
        fn drop(&mut self) {
            if self.0.0.fetch_sub(1, Ordering::SeqCst) == 1 {
                self.0.1.notify_waiters();
            }
        }
    }
}
