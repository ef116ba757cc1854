//! The Redis pub/sub sink: `PUBLISH <channel> <message>`. The reply is the number of
//! subscribers the message was handed to, and zero is an error (`no_subscribers`, transient),
//! so a hook nobody heard runs into the retry policy and the DLQ instead of being recorded as
//! delivered. Pub/sub keeps no copy, so the sink is not durable (`durable()` is false).
//!
//! | Outcome | Result |
//! |---|---|
//! | `PUBLISH` answered n > 0 | `Ok` |
//! | `PUBLISH` answered 0 | transient `no_subscribers` |
//! | TCP connect refused or timed out | transient `not_connected: tcp_connect: <kind>` |
//! | TLS handshake refused (unknown issuer, wrong name, expired, client certificate missing) | transient `not_connected: tls_handshake: <why> [subject ..., names ...]` |
//! | `AUTH` refused (`WRONGPASS`, `NOAUTH`, `NOPERM`) | transient `not_connected: auth: <code>` |
//! | connection closed or broken mid-publish | transient `not_connected: <class>` / `redis: <class>` |
//!
//! A `<class>` is the server's error code (`WRONGPASS`, `READONLY`, `ERR`, ...) or the kind of
//! a client-side failure: the server's error text is never passed on.
//! | the server's name resolves to an address `egress` refuses | transient `not_connected: egress_denied: <class> (url)`, no connection |
//! | no reply within `publish_timeout_ms` | transient `publish_timeout` |
//!
//! Pub/sub has no headers: the metadata travels only inside the message.
//!
//! The sink dials itself, in steps each failure names: the server's addresses checked against
//! the egress policy (and the TCP connect made to one of those checked addresses, so a second
//! lookup cannot move it), TCP connect, the TLS handshake for `rediss://` (rustls, with the
//! shared `tls:` settings: CA bundle, client certificate, `server_name` for SNI and the name
//! check), then the redis crate takes the stream and sends `HELLO`/`AUTH` with the URL's ACL
//! user and password. The redis crate's own TLS dial would do the same handshake but fold the
//! steps into one I/O error and cannot check a name other than the URL's host. Credentials
//! never reach an error: errors are class words, and the password is scrubbed besides.
//!
//! The multiplexed connection never reconnects by itself (a broken one is dropped and the next
//! delivery dials), so every connection is checked, and a rotated CA or certificate file is
//! read at the next dial.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ankusa_config::{RedisSinkConfig, SinkTls};
use ankusa_core::{DeliveryCtx, Envelope, SinkError};
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, IntoConnectionInfo, RedisConnectionInfo};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::BuildCtx;
use crate::conn::{Conn, Registry, Slot, digest, scrub, url_secrets};
use crate::egress::{EgressTarget, Policy};
use crate::message::{self, Limits};
use crate::tls;

/// How long TCP connect, the TLS handshake and `AUTH` may each take.
const DIAL_TIMEOUT: Duration = Duration::from_secs(5);

/// The task that reads the connection's replies; ends when the last clone of the connection
/// is dropped (the redis crate leaves spawning it, and stopping it, to whoever built the
/// connection from a stream).
struct Driver(tokio::task::AbortHandle);

impl Drop for Driver {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[derive(Clone)]
pub struct RedisConn(MultiplexedConnection, #[allow(dead_code)] Arc<Driver>);

impl Conn for RedisConn {}

pub struct RedisSink {
    slot: Arc<Slot<RedisConn>>,
    url: String,
    channel: String,
    limits: Limits,
    timeout: Duration,
    secrets: Vec<String>,
    policy: Policy,
    targets: Vec<EgressTarget>,
    /// `Some` for `rediss://` (the default settings when the config has no `tls:`).
    tls: Option<SinkTls>,
}

/// The part of a sink's `tls:` that tells two connections apart, for the slot key (hashed,
/// never shown): the PEM text itself, since a changed `ca_pem` must dial anew.
fn tls_key(t: Option<&SinkTls>) -> String {
    let Some(t) = t else {
        return String::new();
    };
    let pem = |s: &Option<ankusa_config::Secret>| s.as_ref().map(|s| s.expose().to_string());
    format!(
        "{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{}",
        t.ca_file,
        t.cert_file,
        t.key_file,
        pem(&t.ca_pem),
        pem(&t.cert_pem),
        pem(&t.key_pem),
        t.server_name,
        t.insecure_skip_verify
    )
}

impl RedisSink {
    pub fn new(cfg: &RedisSinkConfig, ctx: &BuildCtx, registry: &Registry<RedisConn>) -> RedisSink {
        let key = digest(&[
            "redis",
            cfg.url.expose(),
            &cfg.publish_timeout_ms.to_string(),
            &crate::policy_key(&ctx.policy),
            &tls_key(cfg.tls.as_ref()),
        ]);
        let rediss = cfg.url.expose().starts_with("rediss:");
        RedisSink {
            slot: registry.slot("redis", &key, cfg.idle_timeout_ms, 1_000),
            url: cfg.url.expose().to_string(),
            channel: cfg.channel.clone(),
            limits: Limits {
                inline_max: cfg.inline_max_bytes,
                max_message: u64::MAX,
            },
            timeout: Duration::from_millis(cfg.publish_timeout_ms),
            secrets: url_secrets(cfg.url.expose()),
            policy: ctx.policy.clone(),
            targets: cfg.egress_targets(),
            tls: rediss.then(|| cfg.tls.clone().unwrap_or_default()),
        }
    }

    fn scrub(&self, text: String) -> String {
        let s: Vec<&str> = self.secrets.iter().map(String::as_str).collect();
        scrub(text, &s)
    }

    async fn open(&self) -> Result<RedisConn, String> {
        let url = url::Url::parse(&self.url).map_err(|e| format!("url: does not parse ({e})"))?;
        let host = url
            .host_str()
            .ok_or("url: names no host")?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let info = redis_settings(url.clone())
            .map_err(|e| format!("url: the redis client refuses it ({})", redis_class(&e)))?;
        // Resolved and checked here, and the connect goes to one of these addresses, so the
        // name cannot resolve elsewhere between the check and the connect.
        let target = self.targets.first().ok_or("url: names no host")?;
        let addrs = self
            .policy
            .check_target(target)
            .await
            .map_err(|e| e.to_string())?;
        let tcp = tcp_connect(&addrs).await?;
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(DIAL_TIMEOUT))
            .set_response_timeout(Some(self.timeout));
        match &self.tls {
            None => self.handshake(&info, tcp, config, false).await,
            Some(t) => {
                let stream = tls_connect(t, &host, tcp).await?;
                self.handshake(&info, stream, config, true).await
            }
        }
    }

    /// `HELLO`/`AUTH`/`SELECT` over the connected stream; a refusal is the `auth` step.
    async fn handshake<S>(
        &self,
        info: &RedisConnectionInfo,
        stream: S,
        config: AsyncConnectionConfig,
        over_tls: bool,
    ) -> Result<RedisConn, String>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let setup = tokio::time::timeout(
            DIAL_TIMEOUT,
            MultiplexedConnection::new_with_config(info, stream, config),
        )
        .await
        .map_err(|_| {
            format!(
                "auth: no answer to HELLO/AUTH within {} ms",
                DIAL_TIMEOUT.as_millis()
            )
        })?;
        match setup {
            Ok((conn, driver)) => {
                let task = tokio::spawn(driver);
                Ok(RedisConn(conn, Arc::new(Driver(task.abort_handle()))))
            }
            Err(e) => Err(self.scrub(setup_error(&e, over_tls))),
        }
    }

    async fn attempt(&self, env: &Envelope, ctx: &DeliveryCtx) -> Result<(), SinkError> {
        let prepared = message::prepare(env, ctx, self.limits, 0)?;
        let lease = self.slot.get(|| self.open()).await?;
        let mut conn = lease.conn.0.clone();
        let reply = tokio::time::timeout(
            self.timeout,
            redis::cmd("PUBLISH")
                .arg(&self.channel)
                .arg(&prepared.json)
                .query_async::<i64>(&mut conn),
        )
        .await;
        match reply {
            Err(_) => {
                // A multiplexed connection that stopped answering is replaced.
                lease.invalidate();
                Err(SinkError::Transient(format!(
                    "publish_timeout: no reply within {} ms",
                    self.timeout.as_millis()
                )))
            }
            Ok(Ok(0)) => Err(SinkError::Transient(format!(
                "no_subscribers: nobody is subscribed to {}",
                self.channel
            ))),
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => {
                let broken = e.is_io_error()
                    || e.is_connection_dropped()
                    || e.is_connection_refusal()
                    || e.is_timeout()
                    || e.is_unrecoverable_error();
                if broken {
                    lease.invalidate();
                    Err(SinkError::Transient(format!(
                        "not_connected: {}",
                        redis_class(&e)
                    )))
                } else if e.code() == Some("NOAUTH") {
                    // The URL has no password and the server wants one.
                    Err(SinkError::Transient(format!("auth: {}", redis_class(&e))))
                } else {
                    Err(SinkError::Transient(format!("redis: {}", redis_class(&e))))
                }
            }
        }
    }
}

/// The redis crate's view of the URL (ACL user and password, database, protocol). The crate is
/// built without its own TLS, so a `rediss://` URL is read as `redis://`: the TLS is ours.
fn redis_settings(mut url: url::Url) -> redis::RedisResult<RedisConnectionInfo> {
    if url.scheme() == "rediss" {
        // Both schemes are non-special, so the change cannot fail; the check is for clarity.
        let _ = url.set_scheme("redis");
    }
    Ok(url
        .as_str()
        .into_connection_info()?
        .redis_settings()
        .clone())
}

/// The first of the checked addresses that accepts, within `DIAL_TIMEOUT` each.
async fn tcp_connect(addrs: &[SocketAddr]) -> Result<TcpStream, String> {
    let mut last = String::from("no address");
    for a in addrs {
        match tokio::time::timeout(DIAL_TIMEOUT, TcpStream::connect(a)).await {
            Ok(Ok(s)) => {
                // Small PUBLISH frames: no reason to wait for a full segment.
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Ok(Err(e)) => last = e.kind().to_string(),
            Err(_) => last = format!("timed out after {} ms", DIAL_TIMEOUT.as_millis()),
        }
    }
    Err(format!("tcp_connect: {last}"))
}

/// The TLS handshake: SNI and the name check use `tls.server_name`, else the URL's host.
async fn tls_connect(
    t: &SinkTls,
    host: &str,
    tcp: TcpStream,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, String> {
    let (config, peer) = tls::client_config_with_peer(t).map_err(|e| format!("tls_setup: {e}"))?;
    let name = t.server_name.as_deref().unwrap_or(host);
    let server_name = ServerName::try_from(name.to_string()).map_err(|_| {
        "tls_setup: tls.server_name (else the URL's host) is not a DNS name or an IP address"
            .to_string()
    })?;
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    match tokio::time::timeout(DIAL_TIMEOUT, connector.connect(server_name, tcp)).await {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(tls::handshake_error(&e, &peer)),
        Err(_) => Err(format!(
            "tls_handshake: no answer within {} ms",
            DIAL_TIMEOUT.as_millis()
        )),
    }
}

/// Names the step a failed connection setup stopped at. With TLS 1.3 a server that wants a
/// client certificate refuses it only after the client's side of the handshake is done, so
/// that refusal surfaces here, on the first command, as a TLS alert.
fn setup_error(e: &redis::RedisError, over_tls: bool) -> String {
    // Over RESP2 the redis crate drops the server's `WRONGPASS` reply for its own
    // AuthenticationFailed; the server sends that reply for a wrong user or password only
    // (or when no password is set at all), so it is named here.
    if e.kind() == redis::ErrorKind::AuthenticationFailed {
        return "auth: AUTH refused: wrong user name or password (WRONGPASS), or the server has \
                no password set"
            .into();
    }
    if matches!(e.code(), Some("WRONGPASS" | "NOAUTH" | "NOPERM")) {
        return format!("auth: {}", redis_class(e));
    }
    // The text only classifies: it is not passed on.
    if over_tls && e.is_io_error() && e.to_string().contains("alert") {
        return "tls_handshake: the server refused the handshake (a TLS alert; a client \
                certificate may be required: tls.cert_file)"
            .into();
    }
    format!("setup: {}", redis_class(e))
}

/// A redis error in class words: the server's error code (`WRONGPASS`, `READONLY`, `ERR`),
/// else the kind of failure (`io: timed out`, `io: connection dropped`, `parse error`, ...).
/// The server's text is not kept: an error reply may quote the command, which carries the
/// message.
pub fn redis_class(e: &redis::RedisError) -> String {
    if let Some(code) = e.code() {
        return code.to_string();
    }
    if e.is_timeout() {
        "io: timed out".into()
    } else if e.is_connection_refusal() {
        "io: connection refused".into()
    } else if e.is_connection_dropped() {
        "io: connection dropped".into()
    } else {
        // The crate's fixed word for the kind (`I/O error`, `parse error`, ...).
        e.category().to_string()
    }
}

impl_sink!(RedisSink {
    type_name: "redis",
    durable(self) -> bool {
        false
    },
    inline_max_bytes(self) -> Option<u64> {
        Some(self.limits.inline_max)
    },
});

#[cfg(test)]
mod tests {
    use super::*;

    /// A server error reply keeps its code; the text after it (which may quote the command,
    /// the message, or a password) does not reach the error.
    #[test]
    fn a_planted_secret_in_a_server_reply_never_reaches_the_text() {
        for (reply, code) in [
            (
                &b"-WRONGPASS planted-secret-pw is not the password\r\n"[..],
                "WRONGPASS",
            ),
            (
                &b"-ERR unknown command 'planted-secret', with args\r\n"[..],
                "ERR",
            ),
        ] {
            let e = redis::parse_redis_value(reply)
                .expect("a RESP error reply")
                .extract_error()
                .expect_err("an error");
            assert_eq!(redis_class(&e), code);
            for text in [setup_error(&e, false), setup_error(&e, true)] {
                assert!(!text.contains("planted"), "{text}");
            }
        }
        let io: redis::RedisError =
            std::io::Error::new(std::io::ErrorKind::ConnectionReset, "planted-secret").into();
        assert_eq!(redis_class(&io), "io: connection dropped");
    }
}
