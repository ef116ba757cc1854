//! The Redis pub/sub sink: `PUBLISH <channel> <message>`. The reply is the number of
//! subscribers the message was handed to, and zero is an error (`no_subscribers`, transient),
//! so a hook nobody heard runs into the retry policy and the DLQ instead of being recorded as
//! delivered. Pub/sub keeps no copy, so the sink is not durable (`durable()` is false).
//!
//! | Outcome | Result |
//! |---|---|
//! | `PUBLISH` answered n > 0 | `Ok` |
//! | `PUBLISH` answered 0 | transient `no_subscribers` |
//! | connection refused, timed out, closed, `WRONGPASS` | transient (`not_connected: ...` / `redis: ...`) |
//! | the server's name resolves to an address `egress` refuses | transient `not_connected: egress_denied: <class> (url)`, no connection |
//! | no reply within `publish_timeout_ms` | transient `publish_timeout` |
//!
//! Pub/sub has no headers: the metadata travels only inside the message.
//!
//! Each dial checks the server's addresses against the egress policy first; the multiplexed
//! connection never reconnects by itself (a broken one is dropped and the next delivery
//! dials), so every connection is checked.

use std::sync::Arc;
use std::time::Duration;

use ankusa_config::RedisSinkConfig;
use ankusa_core::{DeliveryCtx, Envelope, SinkError};
use redis::AsyncConnectionConfig;
use redis::aio::MultiplexedConnection;

use crate::BuildCtx;
use crate::conn::{Conn, Registry, Slot, digest, scrub, url_secrets};
use crate::egress::{EgressTarget, Policy};
use crate::message::{self, Limits};

#[derive(Clone)]
pub struct RedisConn(MultiplexedConnection);

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
}

impl RedisSink {
    pub fn new(cfg: &RedisSinkConfig, ctx: &BuildCtx, registry: &Registry<RedisConn>) -> RedisSink {
        let key = digest(&[
            "redis",
            cfg.url.expose(),
            &cfg.publish_timeout_ms.to_string(),
            &crate::policy_key(&ctx.policy),
        ]);
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
        }
    }

    fn scrub(&self, text: String) -> String {
        let s: Vec<&str> = self.secrets.iter().map(String::as_str).collect();
        scrub(text, &s)
    }

    async fn open(&self) -> Result<RedisConn, String> {
        // Before the client is pointed at the server; it resolves the name again itself.
        self.policy
            .check_targets(&self.targets)
            .await
            .map_err(|e| e.to_string())?;
        let client =
            redis::Client::open(self.url.as_str()).map_err(|e| self.scrub(format!("url: {e}")))?;
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(5)))
            .set_response_timeout(Some(self.timeout));
        let conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(|e| self.scrub(format!("{e}")))?;
        Ok(RedisConn(conn))
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
                    Err(SinkError::Transient(
                        self.scrub(format!("not_connected: {e}")),
                    ))
                } else {
                    Err(SinkError::Transient(self.scrub(format!("redis: {e}"))))
                }
            }
        }
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
