//! The NATS JetStream sink: publishes the queue message to a subject and answers `Ok` only on
//! the stream's publish ack (`{"stream": .., "seq": n}` with `n > 0`).
//!
//! | Outcome | Result |
//! |---|---|
//! | message + headers over `max_message_bytes` | permanent `message_too_large`, no server call |
//! | message + headers over the server's `max_payload` | permanent `max_payload_exceeded`, no server call |
//! | no stream covers the subject (no responders) | transient `no_stream` (the sink never creates streams) |
//! | an error ack (it carries `seq: 0`), a permission violation | transient, with the server's description |
//! | no ack within `publish_timeout_ms` | transient `publish_timeout` |
//! | the connection is not up | transient `not_connected` (the client reconnects, 2 s backoff at most) |
//! | a server's name resolves to an address `egress` refuses | transient `not_connected: egress_denied: <class> (servers[i])`; nothing dialed |
//! | the dial fails | transient `not_connected: <step>: ...`, the step being `tcp_connect`, `tls_handshake` (with the server certificate's subject and names when the certificate was refused), `auth` (the server's authorization violation), `connect_timeout`, `resolve` or `tls_setup` / `auth.credentials_file` (a file the sink could not read) |
//!
//! The egress policy is checked before every connect: when the sink dials, and before each
//! reconnect of the client (its `reconnect_to_server_callback` picks a server whose addresses
//! all pass, or, when none does, a server that cannot resolve so the attempt connects
//! nowhere). The client dials only the configured servers: the ones a server advertises
//! (`connect_urls`) are ignored, since nothing checked them; list every server to fail over
//! to.
//!
//! TLS (`tls: true` or the shared `tls:` settings) is required, not merely accepted: the client
//! upgrades after the server's INFO and refuses a server that does not. The certificate is
//! checked by sinks/src/tls.rs's verifier (against `tls.server_name` when set; SNI stays the
//! dialed host, async-nats takes no other), which also notes the certificate it saw, so a
//! refused handshake names it.
//!
//! Every publish carries `Nats-Msg-Id` = the hook id, or `<id>:replay:<replay_id>` on a replay,
//! so JetStream's duplicate window collapses a re-send while a deliberate replay is stored.

use std::sync::Arc;
use std::time::Duration;

use ankusa_config::{NatsAuth, NatsSinkConfig, NatsTls, SinkTls};
use ankusa_core::{DeliveryCtx, Envelope, SinkError};
use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::message::PublishMessage;
use async_nats::{ConnectOptions, HeaderMap, ReconnectToServer, Server, ServerAddr};
use bytes::Bytes;
use futures::future::BoxFuture;

use crate::BuildCtx;
use crate::conn::{Conn, Registry, Slot, scrub};
use crate::egress::{EgressError, EgressTarget, Policy};
use crate::message::{self, Limits};
use crate::tls::{PeerCert, client_config_with_peer, handshake_error};

/// A server no resolver answers for (RFC 6761 reserves `.invalid`). When the egress policy
/// refuses every configured server, the reconnect callback hands the client this one, so the
/// attempt fails at name resolution and connects nowhere; the next attempt checks again.
const NOWHERE: &str = "nats://egress-refused.invalid:4222";

/// Why the client's last reconnect attempt connected nowhere (the policy's refusal, or a
/// name that did not resolve), for the deliveries that find it disconnected.
type Refusal = Arc<std::sync::Mutex<Option<EgressError>>>;

#[derive(Clone)]
pub struct NatsConn {
    client: async_nats::Client,
    js: async_nats::jetstream::Context,
    refusal: Refusal,
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
        let targets: Vec<EgressTarget> = servers.iter().map(|(_, t)| t.clone()).collect();
        // Before the client is pointed at the servers; the callback below checks each
        // reconnect.
        self.policy
            .check_targets(&targets)
            .await
            .map_err(|e| e.to_string())?;
        let nowhere: ServerAddr = NOWHERE
            .parse()
            .map_err(|e| format!("internal: {NOWHERE}: {e}"))?;
        let mut addrs: Vec<ServerAddr> = servers.iter().map(|(a, _)| a.clone()).collect();
        // In the pool so that the callback may pick it (the client refuses a pick from outside
        // its pool). The callback picks every server, so the client's own selection, which
        // would take an unchecked server, never runs.
        addrs.push(nowhere.clone());
        let refusal: Refusal = Arc::default();
        // A `tls://` entry makes the client upgrade even with `tls` off: it gets the same
        // verifier (system roots), so its failures read the same.
        let tls: Option<std::borrow::Cow<'_, SinkTls>> = self.cfg.tls.settings().or_else(|| {
            servers
                .iter()
                .any(|(a, _)| a.tls_required())
                .then(|| std::borrow::Cow::Owned(SinkTls::default()))
        });
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
                let (policy, servers) = (self.policy.clone(), Arc::new(servers));
                let refusal = refusal.clone();
                move |pool, _info| {
                    // The check runs on a task of its own: the client wants a `Sync` future,
                    // and the resolver's is not (a task handle is).
                    let check = tokio::spawn(pick_server(policy.clone(), servers.clone(), pool));
                    let (nowhere, refusal) = (nowhere.clone(), refusal.clone());
                    async move { settle(check.await.unwrap_or(Err(None)), nowhere, &refusal) }
                }
            });
        let peer = match tls {
            Some(t) => {
                // Built at every dial, so a rotated CA or client certificate file is read.
                let (config, seen) =
                    client_config_with_peer(&t).map_err(|e| format!("tls_setup: {e}"))?;
                opts = opts.tls_client_config(config);
                seen
            }
            None => peer,
        };
        if let Some(a) = &self.cfg.auth {
            if let Some(path) = &a.credentials_file {
                // The file's text never reaches the error: only the step and the I/O kind.
                opts = opts.credentials_file(path).await.map_err(|e| {
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
                Some(e) => format!("not_connected: {e} (reconnecting)"),
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
            Ok(a) => Err(SinkError::Transient(format!(
                "publish refused: ack from stream {:?} with seq 0",
                a.stream
            ))),
            Err(e) => Err(self.classify(e)),
        }
    }

    fn classify(&self, e: async_nats::jetstream::context::PublishError) -> SinkError {
        match e.kind() {
            PublishErrorKind::MaxPayloadExceeded => {
                SinkError::Permanent(format!("max_payload_exceeded: {e}"))
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
            _ => SinkError::Transient(self.scrub(format!("publish refused: {e}"))),
        }
    }
}

/// How long one dial (TCP, INFO, TLS, CONNECT/PONG) may take.
const CONNECT_TIMEOUT_S: u64 = 5;

/// A failed dial as `<step>: <why>`: which step failed (`tcp_connect`, `tls_handshake`,
/// `auth`, ...) is what an operator fixes, so it leads. async-nats files both a refused TCP
/// connect and a refused handshake under `Io`; the rustls error inside tells them apart.
/// A JetStream connection described by a NATS sink's keys, for what is not a sink: the intake
/// log of `wal.type: dual`. That log is the node's own infrastructure, named by whoever runs
/// the node, so any address it names is dialled (the egress policy guards the destinations a
/// source's config names, not this).
pub async fn intake_connect(
    cfg: &NatsSinkConfig,
) -> Result<(async_nats::Client, async_nats::jetstream::Context), String> {
    let egress = ankusa_config::EgressConfig {
        allow_loopback: true,
        allow_private: true,
        allow_link_local: true,
        ..Default::default()
    };
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
        K::Dns => format!("resolve: {e}"),
        K::Tls => format!("tls_setup: {e}"),
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
                        | Io::TimedOut => format!("tcp_connect: {io}"),
                        _ => format!("connect: {io}"),
                    }
                }
                None => format!("connect: {e}"),
            }
        }
    }
}

/// The reconnect callback's choice: the configured server (fewest failed attempts first, as
/// the client's own selection would) whose addresses all pass the egress policy, else the
/// first refusal (`None` when the pool held no configured server).
async fn pick_server(
    policy: Policy,
    servers: Arc<Vec<(ServerAddr, EgressTarget)>>,
    pool: Vec<Server>,
) -> Result<ServerAddr, Option<EgressError>> {
    let failures = |a: &ServerAddr| {
        pool.iter()
            .find(|s| &s.addr == a)
            .map_or(0, |s| s.failed_attempts)
    };
    let mut order: Vec<&(ServerAddr, EgressTarget)> = servers.iter().collect();
    order.sort_by_key(|(a, _)| failures(a));
    let mut first = None;
    for (addr, target) in order {
        match policy.check_target(target).await {
            Ok(_) => return Ok(addr.clone()),
            Err(e) => {
                first.get_or_insert(e);
            }
        }
    }
    Err(first)
}

/// What the client is told: the picked server, or `nowhere` with the refusal recorded for the
/// deliveries that find the connection down.
fn settle(
    picked: Result<ServerAddr, Option<EgressError>>,
    nowhere: ServerAddr,
    refusal: &Refusal,
) -> Option<ReconnectToServer> {
    let mut last = refusal.lock().unwrap_or_else(|p| p.into_inner());
    let addr = match picked {
        Ok(addr) => {
            *last = None;
            addr
        }
        Err(e) => {
            if let Some(e) = &e {
                tracing::warn!(error = %e, "NATS reconnect goes nowhere: no configured server passes the egress check");
            }
            *last = e;
            nowhere
        }
    };
    Some(ReconnectToServer { addr, delay: None })
}

impl_sink!(NatsSink {
    type_name: "nats",
    inline_max_bytes(self) -> Option<u64> {
        Some(self.reported_inline)
    },
});
