//! The Google Cloud Pub/Sub sink: publishes the queue message with REST `topics.publish` and
//! answers `Ok` only on a 200 naming one message id per message sent. Deliveries are batched
//! (up to 1 000 messages / 7.5 MB of data per request); `batch: false` publishes one per
//! request.
//!
//! | Outcome | Result |
//! |---|---|
//! | data + attributes + ordering key over `max_message_bytes` | permanent `message_too_large`, never batched |
//! | `INVALID_ARGUMENT` | permanent (a batch is bisected first to find the bad message) |
//! | `PERMISSION_DENIED`, `UNAUTHENTICATED`, `NOT_FOUND` | permanent config (a batch is not split) |
//! | `RESOURCE_EXHAUSTED`, any 429 / 503 | retry_after, full jitter per message |
//! | any other Google error (`UNAVAILABLE`, `INTERNAL`) | transient |
//! | a non-200 that is not a Google error document | transient `status <n>` (429/503: retry_after) |
//! | a 200 without one id per message, a transport failure | transient |
//! | the token source has no token | transient `no_credentials`, no request |
//! | the endpoint resolves to an address `egress` refuses | transient `egress_denied: <class> (endpoint)`, no request |
//! | TLS handshake refused (`tls:` CA, name, expiry, client certificate) | transient `not_connected: tls_handshake: <why> [subject ..., names ...]` |
//! | `tls:` files unreadable or not PEM | transient `not_connected: tls_setup: tls.ca_file: ...`, no request |
//!
//! Publishes go through a client whose resolver answers only with addresses the egress policy
//! allows (`egress::PolicyDns`) and, with `tls:`, verifies the endpoint with the shared rustls
//! settings (`tls::client_config_with_peer`: a private CA, a client certificate, `server_name`)
//! read when the sink is built (at start and at each reload); an endpoint written as an IP
//! literal is checked before each request. The metadata server (`auth: metadata`) is the
//! node's own, link-local by design and named by `GCE_METADATA_HOST`, never by a sink: tokens
//! come through a client without the policy (or the sink's `tls:`).
//!
//! Bisection: a batch refused with `INVALID_ARGUMENT` is split in two, left half first (order
//! is kept), and a refused half is split again until the refused message stands alone; at most
//! 2·(⌈log₂ n⌉ + 1) splits per batch, after which unresolved messages are transient
//! `batch_rejected` and retry in other batches.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ankusa_config::{ConfigError, GooglePubsubSinkConfig, PubsubAuth, Secret, SecretUrl};
use ankusa_core::{DeliveryCtx, Envelope, SinkError, full_jitter};
use base64::Engine;
use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use tokio::sync::Mutex;

use crate::batcher::{BatchStats, Batcher, Flush, Item};
use crate::egress::{AddressPolicy, EgressError, Policy};
use crate::message::{self, Limits};
use crate::tls::{PeerCert, TlsSetupError};
use crate::util::{call_failed, code_word};
use crate::{BuildCtx, Rest, SinkBuilder};

pub const DEFAULT_ENDPOINT: &str = ankusa_config::DEFAULT_PUBSUB_ENDPOINT;

/// Pub/Sub's limit on an attribute value and on an ordering key.
const MAX_ATTRIBUTE_VALUE: usize = 1024;

/// One message ready for `topics.publish`.
pub struct PubsubMessage {
    data: Vec<u8>,
    attributes: Vec<(&'static str, String)>,
    ordering_key: Option<String>,
}

impl PubsubMessage {
    /// A message as published; the sink builds these from hooks (tools and tests may too).
    pub fn new(
        data: Vec<u8>,
        attributes: Vec<(&'static str, String)>,
        ordering_key: Option<String>,
    ) -> Self {
        PubsubMessage {
            data,
            attributes,
            ordering_key,
        }
    }

    fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert(
            "data".into(),
            Value::String(base64::engine::general_purpose::STANDARD.encode(&self.data)),
        );
        let attrs: Map<String, Value> = self
            .attributes
            .iter()
            .map(|(k, v)| ((*k).to_string(), Value::String(v.clone())))
            .collect();
        m.insert("attributes".into(), Value::Object(attrs));
        if let Some(k) = &self.ordering_key {
            m.insert("orderingKey".into(), Value::String(k.clone()));
        }
        Value::Object(m)
    }
}

/// Where bearer tokens come from.
pub enum TokenSource {
    None,
    Static(String),
    /// The metadata server's default service account, cached until a minute before expiry.
    Metadata {
        host: String,
        cached: Mutex<Option<(String, Instant)>>,
    },
}

impl TokenSource {
    pub fn from_config(cfg: &GooglePubsubSinkConfig) -> Self {
        match cfg.auth {
            PubsubAuth::None => TokenSource::None,
            PubsubAuth::Token => TokenSource::Static(
                cfg.token
                    .as_ref()
                    .map(|t| t.expose().to_string())
                    .unwrap_or_default(),
            ),
            PubsubAuth::Metadata => TokenSource::Metadata {
                host: std::env::var("GCE_METADATA_HOST")
                    .unwrap_or_else(|_| "metadata.google.internal".into()),
                cached: Mutex::new(None),
            },
        }
    }

    async fn token(&self, http: &reqwest::Client) -> Result<Option<String>, String> {
        match self {
            TokenSource::None => Ok(None),
            TokenSource::Static(t) => Ok(Some(t.clone())),
            TokenSource::Metadata { host, cached } => {
                let mut cached = cached.lock().await;
                if let Some((t, until)) = cached.as_ref()
                    && Instant::now() < *until
                {
                    return Ok(Some(t.clone()));
                }
                let url = format!(
                    "http://{host}/computeMetadata/v1/instance/service-accounts/default/token"
                );
                let resp = http
                    .get(&url)
                    .header("Metadata-Flavor", "Google")
                    .timeout(Duration::from_secs(5))
                    .send()
                    .await
                    .map_err(|e| format!("no_credentials: metadata server: {}", e.without_url()))?;
                if !resp.status().is_success() {
                    return Err(format!(
                        "no_credentials: metadata server answered {}",
                        resp.status().as_u16()
                    ));
                }
                let text = crate::reply::text(resp, 64 << 10)
                    .await
                    .map_err(|e| format!("no_credentials: metadata reply: {e}"))?;
                let v: Value = serde_json::from_str(&text)
                    .map_err(|_| "no_credentials: metadata reply is not JSON".to_string())?;
                let token = v
                    .get("access_token")
                    .and_then(Value::as_str)
                    .ok_or("no_credentials: metadata reply has no access_token")?
                    .to_string();
                let ttl = v.get("expires_in").and_then(Value::as_u64).unwrap_or(300);
                let until = Instant::now() + Duration::from_secs(ttl.saturating_sub(60).max(1));
                *cached = Some((token.clone(), until));
                Ok(Some(token))
            }
        }
    }
}

pub struct PubsubClient {
    http: reqwest::Client,
    /// Where tokens from the metadata server are fetched (no egress policy: see the header).
    token_http: reqwest::Client,
    /// The endpoint is an IP literal the egress policy refuses: every publish fails with this.
    refused: Option<EgressError>,
    /// The `tls:` files could not be read or parsed: every publish fails with this.
    tls_setup: Option<TlsSetupError>,
    /// The certificate the endpoint last presented, for a refused handshake's error.
    peer: PeerCert,
    url: String,
    tokens: TokenSource,
    timeout: Duration,
    stats: Arc<BatchStats>,
}

/// How one publish request ended.
enum Outcome {
    Ok,
    /// `INVALID_ARGUMENT`: some message of the request is invalid.
    Invalid(String),
    /// Everything else, classified for every message of the request.
    Failed(SinkError),
}

/// The status and Google's error status name: the message beside it is not kept (it may quote
/// the request or a credential's id).
fn classify(status: u16, google: Option<&str>, attempt: u32) -> Outcome {
    let reason = match google {
        Some(g) => format!("pubsub {status} {}", code_word(g)),
        None => format!("status {status}"),
    };
    match google {
        Some("INVALID_ARGUMENT") => return Outcome::Invalid(reason),
        Some("PERMISSION_DENIED" | "UNAUTHENTICATED" | "NOT_FOUND") => {
            return Outcome::Failed(SinkError::PermanentConfig(reason));
        }
        Some("RESOURCE_EXHAUSTED") => {
            return Outcome::Failed(SinkError::RetryAfter {
                ms: full_jitter(attempt),
                reason,
            });
        }
        _ => {}
    }
    if status == 429 || status == 503 {
        return Outcome::Failed(SinkError::RetryAfter {
            ms: full_jitter(attempt),
            reason,
        });
    }
    Outcome::Failed(SinkError::Transient(reason))
}

/// A reply that is not a success, classified by its status and Google's status name alone.
fn failure(status: u16, reply: Option<&Value>, attempt: u32) -> Outcome {
    let google = reply
        .and_then(|v| v.get("error"))
        .and_then(|e| e.get("status"))
        .and_then(Value::as_str);
    classify(status, google, attempt)
}

/// The bisection budget for a batch of `n`: 2 · (⌈log₂ n⌉ + 1).
pub fn split_budget(n: usize) -> usize {
    let log = if n <= 1 {
        0
    } else {
        (usize::BITS - (n - 1).leading_zeros()) as usize
    };
    2 * (log + 1)
}

impl PubsubClient {
    async fn publish(&self, items: &[Item<PubsubMessage>]) -> Outcome {
        let attempt = items.iter().map(|i| i.attempt).max().unwrap_or(1);
        if let Some(e) = &self.refused {
            return Outcome::Failed(SinkError::Transient(e.to_string()));
        }
        if let Some(e) = &self.tls_setup {
            return Outcome::Failed(SinkError::Transient(format!(
                "not_connected: tls_setup: {e}"
            )));
        }
        let token = match self.tokens.token(&self.token_http).await {
            Ok(t) => t,
            Err(e) => return Outcome::Failed(SinkError::Transient(e)),
        };
        let body = json!({
            "messages": items.iter().map(|i| i.payload.to_json()).collect::<Vec<_>>()
        });
        let mut req = self.http.post(&self.url).timeout(self.timeout).json(&body);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let resp = match req.send().await {
            Ok(r) => r,
            Err(e) => return Outcome::Failed(call_failed(e, self.timeout, &self.peer)),
        };
        let status = resp.status().as_u16();
        let text = match crate::reply::text(resp, crate::reply::MAX_REPLY_BYTES).await {
            Ok(t) => t,
            Err(e) => return Outcome::Failed(SinkError::Transient(e)),
        };
        let parsed: Option<Value> = serde_json::from_str(&text).ok();
        if status == 200 {
            let ids = parsed
                .as_ref()
                .and_then(|v| v.get("messageIds"))
                .and_then(Value::as_array)
                .map(Vec::len);
            return if ids == Some(items.len()) {
                Outcome::Ok
            } else {
                Outcome::Failed(SinkError::Transient(format!(
                    "unexpected_reply: {} message ids for {} messages",
                    ids.unwrap_or(0),
                    items.len()
                )))
            };
        }
        failure(status, parsed.as_ref(), attempt)
    }

    /// Publishes a batch and settles each message, bisecting on `INVALID_ARGUMENT`.
    pub async fn publish_batch(&self, items: &[Item<PubsubMessage>]) -> Vec<Result<(), SinkError>> {
        let n = items.len();
        let mut results: Vec<Option<Result<(), SinkError>>> = (0..n).map(|_| None).collect();
        let mut budget = split_budget(n);
        // Depth first, left half before right, so messages are published in order.
        let mut stack = vec![(0usize, n)];
        while let Some((lo, hi)) = stack.pop() {
            match self.publish(&items[lo..hi]).await {
                Outcome::Ok => (lo..hi).for_each(|i| results[i] = Some(Ok(()))),
                Outcome::Failed(e) => {
                    for (i, it) in items.iter().enumerate().take(hi).skip(lo) {
                        results[i] = Some(Err(match &e {
                            SinkError::RetryAfter { reason, .. } => SinkError::RetryAfter {
                                ms: full_jitter(it.attempt),
                                reason: reason.clone(),
                            },
                            other => other.clone(),
                        }));
                    }
                }
                Outcome::Invalid(reason) if hi - lo == 1 => {
                    results[lo] = Some(Err(SinkError::Permanent(reason)));
                }
                Outcome::Invalid(reason) if budget == 0 => {
                    for r in results.iter_mut().take(hi).skip(lo) {
                        *r = Some(Err(SinkError::Transient(format!(
                            "batch_rejected: {reason}"
                        ))));
                    }
                }
                Outcome::Invalid(_) => {
                    budget -= 1;
                    self.stats
                        .bisections
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let mid = lo + (hi - lo) / 2;
                    stack.push((mid, hi));
                    stack.push((lo, mid));
                }
            }
        }
        results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(SinkError::Transient("batch_rejected".into()))))
            .collect()
    }
}

struct PubsubFlush(Arc<PubsubClient>);

impl Flush<PubsubMessage> for PubsubFlush {
    fn flush<'a>(
        &'a self,
        items: &'a [Item<PubsubMessage>],
    ) -> BoxFuture<'a, Vec<Result<(), SinkError>>> {
        Box::pin(self.0.publish_batch(items))
    }
}

/// A client with no egress policy of its own (tools and tests; the sink builds its client with
/// `checked_client`): `http` serves publishes and tokens.
pub fn client(
    cfg: &GooglePubsubSinkConfig,
    http: reqwest::Client,
    stats: Arc<BatchStats>,
) -> Arc<PubsubClient> {
    Arc::new(client_with(cfg, http.clone(), http, None, stats))
}

/// The sink's client: publishes through `rest.http`, which resolves through the policy and
/// verifies with the sink's `tls:`; a refused IP-literal endpoint fails every publish; tokens
/// come through `token_http`.
fn checked_client(
    cfg: &GooglePubsubSinkConfig,
    rest: Rest,
    token_http: reqwest::Client,
    policy: &Policy,
    stats: Arc<BatchStats>,
) -> PubsubClient {
    let refused = policy.refused_literal(&cfg.egress_targets());
    let mut c = client_with(cfg, rest.http, token_http, refused, stats);
    c.tls_setup = rest.setup_error;
    c.peer = rest.peer;
    c
}

fn client_with(
    cfg: &GooglePubsubSinkConfig,
    http: reqwest::Client,
    token_http: reqwest::Client,
    refused: Option<EgressError>,
    stats: Arc<BatchStats>,
) -> PubsubClient {
    let endpoint = cfg
        .endpoint
        .as_ref()
        .map_or(DEFAULT_ENDPOINT, SecretUrl::expose);
    PubsubClient {
        http,
        token_http,
        refused,
        tls_setup: None,
        peer: PeerCert::default(),
        url: format!(
            "{}/v1/projects/{}/topics/{}:publish",
            endpoint.trim_end_matches('/'),
            cfg.project,
            cfg.topic
        ),
        tokens: TokenSource::from_config(cfg),
        timeout: Duration::from_millis(cfg.timeout_ms),
        stats,
    }
}

pub struct PubsubSink {
    client: Arc<PubsubClient>,
    batcher: Option<Arc<Batcher<PubsubMessage>>>,
    ordering_key: Option<String>,
    limits: Limits,
    reported_inline: u64,
}

impl PubsubSink {
    /// Builds the sink. With batching on it joins the batcher of every sink publishing to the
    /// same topic with the same credentials and batching options.
    pub(crate) fn build(
        cfg: &GooglePubsubSinkConfig,
        ctx: &BuildCtx,
        builder: &SinkBuilder,
    ) -> Result<PubsubSink, ConfigError> {
        let rest = builder.rest_client(ctx, cfg.tls.as_ref())?;
        let rest_key = rest.key.clone();
        let client = Arc::new(checked_client(
            cfg,
            rest,
            builder.http.clone(),
            &ctx.policy,
            builder.pubsub_stats.clone(),
        ));
        #[derive(serde::Serialize)]
        struct Destination<'a> {
            /// The batcher publishes through the client of the policy it was made under.
            egress: &'a AddressPolicy,
            /// ... and of the `tls:` settings (and material) it was made with.
            client: &'a str,
            endpoint: &'a str,
            project: &'a str,
            topic: &'a str,
            auth: PubsubAuth,
            token: &'a Option<Secret>,
            timeout_ms: u64,
        }
        let destination = Destination {
            egress: ctx.policy.addresses(),
            client: &rest_key,
            endpoint: cfg
                .endpoint
                .as_ref()
                .map_or(DEFAULT_ENDPOINT, SecretUrl::expose),
            project: &cfg.project,
            topic: &cfg.topic,
            auth: cfg.auth,
            token: &cfg.token,
            timeout_ms: cfg.timeout_ms,
        };
        let batcher = builder.pubsub.for_sink(
            "pubsub",
            &destination,
            cfg.batch_options(),
            ctx,
            || Arc::new(PubsubFlush(client.clone())),
            client.stats.clone(),
        )?;
        let limits = Limits {
            inline_max: cfg.inline_max_bytes,
            max_message: cfg.max_message_bytes,
        };
        Ok(PubsubSink {
            client,
            batcher,
            ordering_key: cfg.message_ordering_key.clone(),
            limits,
            reported_inline: limits.reported_inline_max(ctx.forward_headers_max_bytes),
        })
    }

    async fn attempt(&self, env: &Envelope, ctx: &DeliveryCtx) -> Result<(), SinkError> {
        let mut attributes = message::attributes(env, ctx);
        // Pub/Sub refuses attribute values over 1024 bytes. The trace pair is also in the
        // message, so an oversized one is left out; any other would fail the whole batch, so it
        // is refused here, before the batch.
        attributes.retain(|(k, v)| {
            !(matches!(*k, "traceparent" | "tracestate") && v.len() > MAX_ATTRIBUTE_VALUE)
        });
        if let Some((k, v)) = attributes
            .iter()
            .find(|(_, v)| v.len() > MAX_ATTRIBUTE_VALUE)
        {
            return Err(SinkError::Permanent(format!(
                "invalid attribute: {k} is {} bytes, Pub/Sub takes at most {MAX_ATTRIBUTE_VALUE}",
                v.len()
            )));
        }
        // An ordered sink's lane key is the orderingKey; else the sink's static one, if any.
        let ordering_key = match message::lane_key(ctx) {
            Some(k) => Some(k.to_string()),
            None if ctx.ordering_key.is_some() => Some(message::tenant_source_key(env)),
            None => self.ordering_key.clone(),
        };
        if let Some(k) = ordering_key
            .as_ref()
            .filter(|k| k.len() > MAX_ATTRIBUTE_VALUE)
        {
            return Err(SinkError::Permanent(format!(
                "invalid ordering key: {} bytes, Pub/Sub takes at most {MAX_ATTRIBUTE_VALUE}",
                k.len()
            )));
        }
        let overhead = message::attributes_len(&attributes)
            + ordering_key.as_ref().map_or(0, |k| k.len() as u64);
        let prepared = message::prepare(env, ctx, self.limits, overhead)?;
        let bytes = prepared.json.len() as u64;
        let msg = PubsubMessage {
            data: prepared.json,
            attributes,
            ordering_key: ordering_key.clone(),
        };
        match &self.batcher {
            Some(b) => {
                b.submit(msg, bytes, &env.tenant, ordering_key, ctx.attempt)
                    .await
            }
            None => {
                let items = [Item {
                    payload: msg,
                    attempt: ctx.attempt,
                }];
                self.client
                    .publish_batch(&items)
                    .await
                    .pop()
                    .unwrap_or_else(|| Err(SinkError::Transient("no result".into())))
            }
        }
    }
}

impl_sink!(PubsubSink {
    type_name: "google_pubsub",
    batching_rest
});

#[cfg(test)]
mod tests {
    use super::*;

    /// Google's error messages can quote the request or a credential's id: only the status and
    /// the error status name reach the error.
    #[test]
    fn a_planted_secret_in_a_reply_never_reaches_the_text() {
        let reply: Value = serde_json::from_str(
            r#"{"error":{"code":403,"status":"PERMISSION_DENIED",
                "message":"User planted-secret@svc lacks pubsub.topics.publish"}}"#,
        )
        .unwrap();
        match failure(403, Some(&reply), 1) {
            Outcome::Failed(SinkError::PermanentConfig(m)) => {
                assert_eq!(m, "pubsub 403 PERMISSION_DENIED")
            }
            _ => panic!("expected a permanent config failure"),
        }
        match failure(500, None, 1) {
            Outcome::Failed(SinkError::Transient(m)) => assert_eq!(m, "status 500"),
            _ => panic!("expected a transient failure"),
        }
    }

    #[test]
    fn budget() {
        assert_eq!(split_budget(1), 2);
        assert_eq!(split_budget(2), 4);
        assert_eq!(split_budget(1000), 22);
        assert_eq!(split_budget(1024), 22);
        assert_eq!(split_budget(1025), 24);
    }

    #[test]
    fn table() {
        assert!(matches!(
            classify(400, Some("INVALID_ARGUMENT"), 1),
            Outcome::Invalid(_)
        ));
        assert!(matches!(
            classify(404, Some("NOT_FOUND"), 1),
            Outcome::Failed(SinkError::PermanentConfig(_))
        ));
        assert!(matches!(
            classify(429, Some("RESOURCE_EXHAUSTED"), 1),
            Outcome::Failed(SinkError::RetryAfter { .. })
        ));
        assert!(matches!(
            classify(500, Some("INTERNAL"), 1),
            Outcome::Failed(SinkError::Transient(_))
        ));
        assert!(matches!(
            classify(503, None, 1),
            Outcome::Failed(SinkError::RetryAfter { .. })
        ));
    }
}
