//! The NATS JetStream sink: publishes the queue message to a subject and answers `Ok` only on
//! the stream's publish ack (`{"stream": .., "seq": n}` with `n > 0`).
//!
//! | Outcome | Result |
//! |---|---|
//! | message + headers over `max_message_bytes` | permanent `message_too_large`, no server call |
//! | message + headers over the server's `max_payload` | permanent `max_payload_exceeded`, no server call |
//! | no stream covers the subject (no responders) | transient `no_stream` (the sink never creates streams) |
//! | an error ack (it carries `seq: 0`), a permission violation | transient `publish refused: <kind> [(JetStream error <code>)]`; the server's own description is not kept |
//! | no ack within `publish_timeout_ms` | transient `publish_timeout` |
//! | the connection is not up | transient `not_connected` (the client reconnects, 2 s backoff at most) |
//! | a server's name resolves to an address `egress` refuses | transient `not_connected: egress_denied: <class> (servers[i])`; nothing dialed |
//! | the dial fails | transient `not_connected: <step>: <kind>`, the step being `tcp_connect`, `tls_handshake` (with the server certificate's subject and names when the certificate was refused), `auth` (the server's authorization violation), `connect_timeout`, `resolve` or `tls_setup` / `auth.credentials_file` (a file the sink could not read) |
//!
//! Error texts are class words: what the server sent (an `-ERR` line, a JetStream error's
//! description) is never passed on.
//!
//! The egress policy is checked before every connect, and the connect goes to the address
//! checked (nats/dial.rs): the client's pool holds the configured servers' checked addresses,
//! never names, and its `reconnect_to_server_callback` (asked before every attempt, the first
//! included) resolves the names through the policy again and picks a pooled address they
//! still resolve to, or, when none passes, a server that cannot resolve so the attempt connects
//! nowhere. The client dials only the configured servers: `ignore_discovered_servers` keeps the
//! ones a server advertises (`connect_urls`) out of the pool, since nothing checked them
//! (sinks/tests/nats.rs `nats_advertised_servers_are_never_dialed`); list every server to fail
//! over to.
//!
//! TLS (`tls: true` or the shared `tls:` settings) is required, not merely accepted: the client
//! upgrades after the server's INFO and refuses a server that does not. The certificate is
//! checked by sinks/src/tls.rs's verifier against `tls.server_name` when set, else the
//! configured server's name (the client dials an address, so it sends no SNI: NATS upgrades to
//! TLS after its INFO line, so no SNI router can sit in front of it anyway); the verifier also
//! notes the certificate it saw, so a refused handshake names it.
//!
//! Every publish carries `Nats-Msg-Id` = the hook id, or `<id>:replay:<replay_id>` on a replay,
//! so JetStream's duplicate window collapses a re-send while a deliberate replay is stored.

mod dial;

use std::sync::Arc;
use std::time::Duration;

use ankusa_config::{NatsAuth, NatsSinkConfig, NatsTls, SinkTls};
use ankusa_core::{DeliveryCtx, Envelope, SinkError};
use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::message::PublishMessage;
use async_nats::{ConnectOptions, HeaderMap, ServerAddr};
use bytes::Bytes;
use futures::future::BoxFuture;

use crate::BuildCtx;
use crate::conn::{Conn, Registry, Slot, scrub};
use crate::egress::{EgressTarget, Policy};
use crate::message::{self, Limits};
use crate::tls::{PeerCert, client_config_for_names, handshake_error};
use dial::{LastMiss, Miss, Pool};

#[derive(Clone)]
pub struct NatsConn {
    client: async_nats::Client,
    js: async_nats::jetstream::Context,
    /// Why the client's last connect attempt went nowhere (nats/dial.rs).
    refusal: LastMiss,
}

impl Conn for NatsConn {
    fn close(self) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let _ = tokio::time::timeout(Duration::from_secs(2), self.client.drain()).await;
        })
    }
}

pub struct NatsSink {
    slot: Arc<Slot<NatsConn>>,
    cfg: NatsSinkConfig,
    limits: Limits,
    reported_inline: u64,
    secrets: Vec<String>,
    policy: Policy,
}

impl NatsSink {
    pub fn new(cfg: &NatsSinkConfig, ctx: &BuildCtx, registry: &Registry<NatsConn>) -> NatsSink {
        let auth = cfg.auth.clone().unwrap_or_default();
        let key_pem = match &cfg.tls {
            NatsTls::Settings(t) => t.key_pem.clone(),
            NatsTls::Enabled(_) => None,
        };
        let secrets: Vec<String> = [
            &auth.password,
            &auth.token,
            &auth.nkey_seed,
            &auth.jwt,
            &key_pem,
        ]
        .into_iter()
        .flatten()
        .map(|s| s.expose().to_string())
        .collect();
        #[derive(serde::Serialize)]
        struct Key<'a> {
            servers: &'a [String],
            auth: &'a NatsAuth,
            tls: &'a NatsTls,
            publish_timeout_ms: u64,
            egress: &'a ankusa_config::AddressPolicy,
        }
        let key = crate::shared_key(
            "nats",
            &Key {
                servers: &cfg.servers,
                auth: &auth,
                tls: &cfg.tls,
                publish_timeout_ms: cfg.publish_timeout_ms,
                egress: ctx.policy.addresses(),
            },
        );
        let limits = Limits {
            inline_max: cfg.inline_max_bytes,
            max_message: cfg.max_message_bytes,
        };
        NatsSink {
            slot: registry.slot("nats", &key, cfg.idle_timeout_ms, 2_000),
            cfg: cfg.clone(),
            limits,
            reported_inline: limits.reported_inline_max(ctx.forward_headers_max_bytes),
            secrets,
            policy: ctx.policy.clone(),
        }
    }

    fn scrub(&self, text: String) -> String {
        let s: Vec<&str> = self.secrets.iter().map(String::as_str).collect();
        scrub(text, &s)
    }

    async fn open(&self) -> Result<NatsConn, String> {
        let mut servers = Vec::new();
        for (i, s) in self.cfg.servers.iter().enumerate() {
            // The address as the client reads it; the error names the entry, not its value
            // (config validation has checked the form already).
            let a: ServerAddr = s
                .parse()
                .map_err(|_| format!("servers[{i}] is not a NATS server address"))?;
            let target = EgressTarget {
                field: format!("servers[{i}]"),
                host: a.host().to_string(),
                port: a.port(),
            };
            servers.push((a, target));
        }
        // A `tls://` entry makes the client upgrade even with `tls` off: it gets the same
        // verifier (system roots), so its failures read the same.
        let tls: Option<std::borrow::Cow<'_, SinkTls>> = self.cfg.tls.settings().or_else(|| {
            servers
                .iter()
                .any(|(a, _)| a.tls_required())
                .then(|| std::borrow::Cow::Owned(SinkTls::default()))
        });
        // The client is given checked addresses, never names; the callback below picks one
        // for every connect (nats/dial.rs).
        let pool = Arc::new(Pool::build(&self.policy, servers).await?);
        pool.prefer_reachable(Duration::from_secs(2)).await;
        let addrs = pool.addrs();
        let refusal = LastMiss::default();
        let peer = PeerCert::default();
        let mut opts = ConnectOptions::new()
            .name("ankusa")
            .connection_timeout(Duration::from_secs(CONNECT_TIMEOUT_S))
            .require_tls(self.cfg.tls.settings().is_some())
            .ignore_discovered_servers()
            // Reconnect quickly at first, then every 2 s while the server is away.
            .reconnect_delay_callback(|attempts| {
                Duration::from_millis((attempts as u64 * 250).min(2_000))
            })
            .reconnect_to_server_callback({
                let (policy, pool) = (self.policy.clone(), pool.clone());
                let refusal = refusal.clone();
                move |state, _info| {
                    // The check runs on a task of its own: the client wants a `Sync` future,
                    // and the resolver's is not (a task handle is).
                    let check = tokio::spawn(dial::pick(policy.clone(), pool.clone(), state));
                    let (pool, refusal) = (pool.clone(), refusal.clone());
                    async move {
                        let picked = check.await.unwrap_or(Err(Miss::Moved));
                        Some(dial::settle(picked, &pool, &refusal))
                    }
                }
            });
        let peer = match tls {
            Some(t) => {
                // Built at every dial, so a rotated CA or client certificate file is read.
                let (config, seen) = client_config_for_names(&t, &pool.names())
                    .map_err(|e| format!("tls_setup: {e}"))?;
                opts = opts.tls_client_config(config);
                seen
            }
            None => peer,
        };
        if let Some(a) = &self.cfg.auth {
            if let Some(path) = &a.credentials_file {
                // Read through `files` (never one of the gateway's own files, at most 1 MiB);
                // the file's text never reaches the error: only the step and the I/O kind.
                let creds = crate::files::read_to_string("auth.credentials_file", path)
                    .map_err(|e| e.to_string())?;
                opts = opts.credentials(&creds).map_err(|e| {
                    format!(
                        "auth.credentials_file: cannot read a JWT and an NKey seed from the file \
                         ({})",
                        e.kind()
                    )
                })?;
            } else if let (Some(u), Some(p)) = (&a.username, &a.password) {
                opts = opts.user_and_password(u.expose().to_string(), p.expose().to_string());
            } else if let Some(t) = &a.token {
                opts = opts.token(t.expose().to_string());
            } else if let Some(seed) = &a.nkey_seed {
                let seed = seed.expose();
                match &a.jwt {
                    Some(jwt) => {
                        let kp = Arc::new(
                            nkeys::KeyPair::from_seed(seed)
                                .map_err(|_| "auth.nkey_seed is not an nkey seed".to_string())?,
                        );
                        opts = opts.jwt(jwt.expose().to_string(), move |nonce| {
                            let kp = kp.clone();
                            async move { kp.sign(&nonce).map_err(async_nats::AuthError::new) }
                        });
                    }
                    None => opts = opts.nkey(seed.to_string()),
                }
            }
        }
        let client = opts.connect(addrs).await.map_err(|e| {
            let step = connect_error(&e, &peer);
            // `Slot` logs the dial's failure; this says which server and step at debug.
            tracing::debug!(subject = %self.cfg.subject, error = %step, "NATS connect failed");
            self.scrub(step)
        })?;
        let js = async_nats::jetstream::context::ContextBuilder::new()
            .timeout(Duration::from_millis(self.cfg.publish_timeout_ms))
            .build(client.clone());
        Ok(NatsConn {
            client,
            js,
            refusal,
        })
    }

    async fn attempt(&self, env: &Envelope, ctx: &DeliveryCtx) -> Result<(), SinkError> {
        let attrs = message::attributes(env, ctx);
        let mut headers = HeaderMap::new();
        for (k, v) in &attrs {
            headers.insert(*k, v.as_str());
        }
        let msg_id = message::dedupe_id(env, ctx);
        headers.insert("Nats-Msg-Id", msg_id.as_str());
        // NATS counts the header block (NATS/1.0 line, `name: value\r\n` lines) in max_payload.
        let overhead = 12
            + attrs
                .iter()
                .map(|(k, v)| (k.len() + v.len() + 4) as u64)
                .sum::<u64>()
            + (13 + msg_id.len() + 4) as u64;
        let prepared = message::prepare(env, ctx, self.limits, overhead)?;
        let lease = self.slot.get(|| self.open()).await?;
        let conn = &lease.conn;
        if conn.client.connection_state() != async_nats::connection::State::Connected {
            let refusal = conn
                .refusal
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            return Err(SinkError::Transient(match refusal {
                Some(Miss::Refused(e)) => format!("not_connected: {e} (reconnecting)"),
                Some(Miss::Moved) => {
                    // Its pool holds addresses the names no longer resolve to: dial anew.
                    lease.invalidate();
                    "not_connected: a server's name resolves to new addresses (redialing)".into()
                }
                None => "not_connected: the NATS connection is down (reconnecting)".into(),
            }));
        }
        let payload = Bytes::from(prepared.json);
        let max_payload = conn.client.server_info().max_payload as u64;
        let total = payload.len() as u64 + overhead;
        if max_payload > 0 && total > max_payload {
            return Err(SinkError::Permanent(format!(
                "max_payload_exceeded: {total} bytes, server max_payload {max_payload}"
            )));
        }
        let publish = PublishMessage::build().payload(payload).headers(headers);
        let ack = match conn
            .js
            .send_publish(self.cfg.subject.clone(), publish)
            .await
        {
            Ok(f) => f.await,
            Err(e) => Err(e),
        };
        match ack {
            Ok(a) if a.sequence > 0 => Ok(()),
            Ok(_) => Err(SinkError::Transient(
                "publish refused: the stream's ack carries seq 0".into(),
            )),
            Err(e) => Err(self.classify(e)),
        }
    }

    fn classify(&self, e: async_nats::jetstream::context::PublishError) -> SinkError {
        match e.kind() {
            PublishErrorKind::MaxPayloadExceeded => {
                SinkError::Permanent("max_payload_exceeded: over the server's max_payload".into())
            }
            PublishErrorKind::StreamNotFound => SinkError::Transient(format!(
                "no_stream: no stream covers subject {}",
                self.cfg.subject
            )),
            PublishErrorKind::TimedOut => SinkError::Transient(format!(
                "publish_timeout: no ack within {} ms",
                self.cfg.publish_timeout_ms
            )),
            PublishErrorKind::BrokenPipe => {
                SinkError::Transient("not_connected: connection lost before the ack".into())
            }
            kind => SinkError::Transient(format!("publish refused: {kind}{}", js_code(&e))),
        }
    }
}

/// ` (JetStream error <code>)` when the server answered with a JetStream API error: its code,
/// not its description.
fn js_code(e: &async_nats::jetstream::context::PublishError) -> String {
    std::error::Error::source(e)
        .and_then(|s| s.downcast_ref::<async_nats::jetstream::Error>())
        .map(|j| format!(" (JetStream error {})", j.error_code().0))
        .unwrap_or_default()
}

/// How long one dial (TCP, INFO, TLS, CONNECT/PONG) may take.
const CONNECT_TIMEOUT_S: u64 = 5;

/// A JetStream connection described by a NATS sink's keys, for what is not a sink: the intake
/// log of `wal.type: dual`. That log is the node's own infrastructure, named by whoever runs
/// the node, so it is held to the intake policy (`egress::intake_egress`: loopback and private
/// addresses allowed, link-local and non-unicast refused), not to the sinks' `egress`.
pub async fn intake_connect(
    cfg: &NatsSinkConfig,
) -> Result<(async_nats::Client, async_nats::jetstream::Context), String> {
    let egress = crate::egress::intake_egress();
    let ctx = BuildCtx {
        field: "intake.jetstream",
        egress: &egress,
        policy: Policy::new(&egress, Arc::new(crate::egress::SystemResolver)),
        forward_headers_max_bytes: 0,
        default_inflight: 1,
    };
    let sink = NatsSink::new(cfg, &ctx, &Registry::default());
    let conn = sink.open().await?;
    Ok((conn.client, conn.js))
}

/// A failed dial as `<step>: <kind>`: which step failed (`tcp_connect`, `tls_handshake`,
/// `auth`, ...) is what an operator fixes, so it leads. async-nats files both a refused TCP
/// connect and a refused handshake under `Io`; the rustls error inside tells them apart. No
/// text the server sent is kept.
fn connect_error(e: &async_nats::ConnectError, peer: &PeerCert) -> String {
    use async_nats::ConnectErrorKind as K;
    match e.kind() {
        K::AuthorizationViolation => {
            "auth: authorization violation (the server refused the credentials in auth)".into()
        }
        K::Authentication => {
            "auth: the nonce could not be signed (auth.nkey_seed, auth.jwt or the .creds file)"
                .into()
        }
        K::TimedOut => format!(
            "connect_timeout: the NATS handshake did not finish within {CONNECT_TIMEOUT_S} s"
        ),
        K::Dns => "resolve: a server's name did not resolve".into(),
        K::Tls => "tls_setup: the client could not set up TLS".into(),
        _ => {
            let io = std::error::Error::source(e).and_then(|s| s.downcast_ref::<std::io::Error>());
            match io {
                Some(io) if io.get_ref().is_some_and(|i| i.is::<rustls::Error>()) => {
                    handshake_error(io, peer)
                }
                Some(io) => {
                    use std::io::ErrorKind as Io;
                    match io.kind() {
                        Io::ConnectionRefused
                        | Io::HostUnreachable
                        | Io::NetworkUnreachable
                        | Io::AddrNotAvailable
                        | Io::TimedOut => format!("tcp_connect: {}", io.kind()),
                        _ => format!("connect: {}", io.kind()),
                    }
                }
                None => format!("connect: {}", e.kind()),
            }
        }
    }
}

impl_sink!(NatsSink {
    type_name: "nats",
    inline_max_bytes(self) -> Option<u64> {
        Some(self.reported_inline)
    },
});

#[cfg(test)]
mod tests {
    use super::*;

    /// What the server or the transport said (an `-ERR` line, an I/O error's text) does not
    /// reach the error: the step and the kind do.
    #[test]
    fn a_planted_secret_in_a_failure_never_reaches_the_text() {
        let planted = || std::io::Error::other("-ERR 'planted-secret-token rejected'");
        let e = async_nats::ConnectError::with_source(async_nats::ConnectErrorKind::Io, planted());
        let text = connect_error(&e, &PeerCert::default());
        assert!(!text.contains("planted"), "{text}");
        assert!(text.starts_with("connect: "), "{text}");
        let refused = async_nats::ConnectError::with_source(
            async_nats::ConnectErrorKind::Io,
            std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "planted-secret"),
        );
        assert_eq!(
            connect_error(&refused, &PeerCert::default()),
            "tcp_connect: connection refused"
        );
        for kind in [
            async_nats::ConnectErrorKind::Dns,
            async_nats::ConnectErrorKind::Tls,
            async_nats::ConnectErrorKind::AuthorizationViolation,
        ] {
            let e = async_nats::ConnectError::with_source(kind, planted());
            let text = connect_error(&e, &PeerCert::default());
            assert!(!text.contains("planted"), "{text}");
        }
        let publish = async_nats::jetstream::context::PublishError::with_source(
            PublishErrorKind::Other,
            planted(),
        );
        assert_eq!(js_code(&publish), "");
    }
}
