//! The SQS sink: sends the queue message to a standard or FIFO queue over the SQS JSON
//! protocol, SigV4-signed, and answers `Ok` only on SQS's 200 for that message with an
//! `MD5OfMessageBody` matching the body sent. Deliveries are batched (`SendMessageBatch`, up to
//! 10 entries, settled per entry); `batch: false` sends one `SendMessage` per delivery.
//!
//! | Outcome | Result |
//! |---|---|
//! | body + attributes over `max_message_bytes` | permanent `message_too_large`, no request |
//! | `InvalidMessageContents`, `InvalidParameterValue`, `MissingParameter`, `InvalidAttributeName`, `InvalidAttributeValue` | permanent `sqs <status> <code>: <message>` |
//! | `AccessDenied`, `QueueDoesNotExist`, `InvalidClientTokenId`, `UnrecognizedClientException`, `SignatureDoesNotMatch`, `InvalidAccessKeyId`, `MissingAuthenticationToken` | permanent config |
//! | throttling codes, any 429 / 503 | retry_after, full jitter |
//! | any other SQS error (5xx, expired token) | transient |
//! | a non-2xx that is not an SQS error document | transient `status <n>` (429/503: retry_after) |
//! | a 200 with another MD5, an entry missing from the reply, no credentials, transport | transient |
//! | the endpoint resolves to an address `egress` refuses | transient `egress_denied: <class> (endpoint)`, no request |
//! | TLS handshake refused (`tls:` CA, name, expiry, client certificate) | transient `not_connected: tls_handshake: <why> [subject ..., names ...]` |
//! | `tls:` files unreadable or not PEM | transient `not_connected: tls_setup: tls.ca_file: ...`, no request |
//!
//! Requests go through a client whose resolver answers only with addresses the egress policy
//! allows (`egress::PolicyDns`) and, with `tls:`, verifies the endpoint with the shared rustls
//! settings (`tls::client_config_with_peer`: a private CA, a client certificate, `server_name`)
//! read when the sink is built (at start and at each reload); an endpoint written as an IP
//! literal is checked before each request, since no resolver is asked for it.
//!
//! FIFO (URL ends `.fifo`): MessageGroupId = `message_group_id` or `<tenant>/<source_id>`;
//! MessageDeduplicationId = the hook id, or `<id>:replay:<replay_id>`. A standard queue gets
//! no deduplication id, and a group id only when `message_group_id` is set. An entry's `Id` in
//! a batch is its position, since a hook id may appear twice (an original and its replay).

use std::sync::Arc;
use std::time::Duration;

use ankusa_config::{ConfigError, Secret, SecretUrl, SqsSinkConfig};
use ankusa_core::{DeliveryCtx, Envelope, SinkError, full_jitter};
use futures::future::BoxFuture;
use md5::{Digest, Md5};
use serde_json::{Map, Value, json};

use crate::aws::{CredentialSource, region_from_host, sign_headers};
use crate::batcher::{Batcher, Flush, Item};
use crate::egress::{AddressPolicy, EgressError, Policy};
use crate::message::{self, Limits};
use crate::tls::{PeerCert, TlsSetupError};
use crate::util::{call_failed, code_word};
use crate::{BuildCtx, Rest, SinkBuilder};

/// One message ready for SQS.
pub struct SqsEntry {
    body: String,
    attributes: Vec<(&'static str, String)>,
    group_id: Option<String>,
    dedup_id: Option<String>,
    md5: String,
}

impl SqsEntry {
    fn to_json(&self) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("MessageBody".into(), Value::String(self.body.clone()));
        let mut attrs = Map::new();
        for (k, v) in &self.attributes {
            attrs.insert(
                (*k).to_string(),
                json!({"DataType": "String", "StringValue": v}),
            );
        }
        m.insert("MessageAttributes".into(), Value::Object(attrs));
        if let Some(g) = &self.group_id {
            m.insert("MessageGroupId".into(), Value::String(g.clone()));
        }
        if let Some(d) = &self.dedup_id {
            m.insert("MessageDeduplicationId".into(), Value::String(d.clone()));
        }
        m
    }
}

/// The queue's client: endpoint, region, credentials; shared by a batcher and the sinks.
pub struct SqsClient {
    http: reqwest::Client,
    queue_url: String,
    endpoint: String,
    region: String,
    creds: CredentialSource,
    timeout: Duration,
    /// The endpoint is an IP literal the egress policy refuses: every request fails with this.
    refused: Option<EgressError>,
    /// The `tls:` files could not be read or parsed: every request fails with this.
    tls_setup: Option<TlsSetupError>,
    /// The certificate the endpoint last presented, for a refused handshake's error.
    peer: PeerCert,
}

/// Why a request as a whole failed, classified as the spec's table says. The text is the
/// status and the error code: SQS's message is not kept (it may quote the request, the access
/// key id or the signature's canonical request).
fn classify(status: u16, code: Option<&str>, attempt: u32) -> SinkError {
    let reason = match code {
        Some(c) => format!("sqs {status} {}", code_word(c)),
        None => format!("status {status}"),
    };
    if let Some(c) = code {
        match c {
            "InvalidMessageContents"
            | "InvalidParameterValue"
            | "MissingParameter"
            | "InvalidAttributeName"
            | "InvalidAttributeValue" => return SinkError::Permanent(reason),
            "AccessDenied"
            | "AccessDeniedException"
            | "QueueDoesNotExist"
            | "InvalidClientTokenId"
            | "UnrecognizedClientException"
            | "SignatureDoesNotMatch"
            | "InvalidAccessKeyId"
            | "MissingAuthenticationToken" => return SinkError::PermanentConfig(reason),
            "Throttling"
            | "ThrottlingException"
            | "RequestThrottled"
            | "TooManyRequestsException"
            | "ServiceUnavailable"
            | "KmsThrottled" => {
                return SinkError::RetryAfter {
                    ms: full_jitter(attempt),
                    reason,
                };
            }
            _ => {}
        }
    }
    if status == 429 || status == 503 {
        return SinkError::RetryAfter {
            ms: full_jitter(attempt),
            reason,
        };
    }
    SinkError::Transient(reason)
}

/// A reply that is not a success, classified by its status and error code alone.
fn failure(status: u16, query_error: Option<&str>, text: &str, attempt: u32) -> SinkError {
    let parsed: Option<Value> = serde_json::from_str(text).ok();
    let code = parsed.as_ref().and_then(|v| error_code(v, query_error));
    classify(status, code.as_deref(), attempt)
}

/// The error code of an SQS JSON error: `__type` after its `#`, or the query-compatible
/// `x-amzn-query-error` header's code (`AWS.SimpleQueueService.NonExistentQueue` means
/// `QueueDoesNotExist`).
fn error_code(body: &Value, query_error: Option<&str>) -> Option<String> {
    if let Some(q) = query_error {
        let code = q.split(';').next().unwrap_or(q);
        let code = match code {
            "AWS.SimpleQueueService.NonExistentQueue" => "QueueDoesNotExist",
            other => other.rsplit('.').next().unwrap_or(other),
        };
        if !code.is_empty() {
            return Some(code.to_string());
        }
    }
    let t = body
        .get("__type")
        .or_else(|| body.get("code"))
        .and_then(Value::as_str)?;
    Some(t.rsplit('#').next().unwrap_or(t).to_string())
}

enum Reply {
    Ok(Value),
    Failed(SinkError),
}

impl SqsClient {
    async fn call(&self, target: &str, payload: &Value, attempt: u32) -> Reply {
        if let Some(e) = &self.refused {
            return Reply::Failed(SinkError::Transient(e.to_string()));
        }
        if let Some(e) = &self.tls_setup {
            return Reply::Failed(SinkError::Transient(format!(
                "not_connected: tls_setup: {e}"
            )));
        }
        let creds = match self.creds.get().await {
            Ok(c) => c,
            Err(e) => return Reply::Failed(SinkError::Transient(e)),
        };
        let body = match serde_json::to_vec(payload) {
            Ok(b) => b,
            Err(e) => return Reply::Failed(SinkError::Transient(format!("encode: {e}"))),
        };
        let url = format!("{}/", self.endpoint.trim_end_matches('/'));
        let target = format!("AmazonSQS.{target}");
        let base = [
            ("content-type", "application/x-amz-json-1.0"),
            ("x-amz-target", target.as_str()),
        ];
        let signed = match sign_headers(creds, &self.region, "sqs", "POST", &url, &base, &body) {
            Ok(h) => h,
            Err(e) => return Reply::Failed(SinkError::Transient(e)),
        };
        let mut req = self.http.post(&url).timeout(self.timeout).body(body);
        for (k, v) in base {
            req = req.header(k, v);
        }
        for (k, v) in &signed {
            req = req.header(k.as_str(), v.as_str());
        }
        let resp = match req.send().await {
            Ok(r) => r,
            Err(e) => return Reply::Failed(call_failed(e, self.timeout, &self.peer)),
        };
        let status = resp.status().as_u16();
        let query_error = resp
            .headers()
            .get("x-amzn-query-error")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let text = match crate::reply::text(resp, crate::reply::MAX_REPLY_BYTES).await {
            Ok(t) => t,
            Err(e) => return Reply::Failed(SinkError::Transient(e)),
        };
        let parsed: Option<Value> = serde_json::from_str(&text).ok();
        if (200..300).contains(&status) {
            return match parsed {
                Some(v) => Reply::Ok(v),
                None => Reply::Failed(SinkError::Transient(
                    "unexpected_reply: the reply is not JSON".into(),
                )),
            };
        }
        Reply::Failed(failure(status, query_error.as_deref(), &text, attempt))
    }

    /// One `SendMessage`.
    pub async fn send_one(&self, e: &SqsEntry, attempt: u32) -> Result<(), SinkError> {
        let mut m = e.to_json();
        m.insert("QueueUrl".into(), Value::String(self.queue_url.clone()));
        match self.call("SendMessage", &Value::Object(m), attempt).await {
            Reply::Failed(err) => Err(err),
            Reply::Ok(v) => check_md5(&v, &e.md5),
        }
    }

    /// One `SendMessageBatch`, answered per entry.
    pub async fn send_batch(&self, items: &[Item<SqsEntry>]) -> Vec<Result<(), SinkError>> {
        let entries: Vec<Value> = items
            .iter()
            .enumerate()
            .map(|(i, it)| {
                let mut m = it.payload.to_json();
                m.insert("Id".into(), Value::String(i.to_string()));
                Value::Object(m)
            })
            .collect();
        let payload = json!({"QueueUrl": self.queue_url, "Entries": entries});
        let attempt = items.iter().map(|i| i.attempt).max().unwrap_or(1);
        let v = match self.call("SendMessageBatch", &payload, attempt).await {
            Reply::Ok(v) => v,
            Reply::Failed(err) => {
                // The whole request failed: each entry gets that failure, with its own
                // jitter draw.
                return items
                    .iter()
                    .map(|it| match &err {
                        SinkError::RetryAfter { reason, .. } => Err(SinkError::RetryAfter {
                            ms: full_jitter(it.attempt),
                            reason: reason.clone(),
                        }),
                        other => Err(other.clone()),
                    })
                    .collect();
            }
        };
        let expected: Vec<(&str, u32)> = items
            .iter()
            .map(|i| (i.payload.md5.as_str(), i.attempt))
            .collect();
        settle_batch(&v, &expected)
    }
}

/// Reads a `SendMessageBatch` reply entry by entry (`Id` is the entry's position):
/// `Successful` with the MD5 of the body sent is `Ok`; another MD5, or an entry absent from
/// the reply, is transient; a `Failed` entry is classified by its code alone.
pub fn settle_batch(reply: &Value, expected: &[(&str, u32)]) -> Vec<Result<(), SinkError>> {
    let mut results: Vec<Result<(), SinkError>> = expected
        .iter()
        .map(|_| {
            Err(SinkError::Transient(
                "unexpected_reply: entry absent from the SendMessageBatch reply".into(),
            ))
        })
        .collect();
    let index = |e: &Value| -> Option<usize> {
        e.get("Id")
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<usize>().ok())
            .filter(|i| *i < expected.len())
    };
    if let Some(ok) = reply.get("Successful").and_then(Value::as_array) {
        for e in ok {
            if let Some(i) = index(e) {
                results[i] = check_md5(e, expected[i].0);
            }
        }
    }
    if let Some(failed) = reply.get("Failed").and_then(Value::as_array) {
        for e in failed {
            if let Some(i) = index(e) {
                let code = e.get("Code").and_then(Value::as_str).unwrap_or("Unknown");
                // An entry's failure has no HTTP status of its own (the batch was a 200), so
                // only its code classifies it.
                results[i] = Err(classify(200, Some(code), expected[i].1));
            }
        }
    }
    results
}

fn check_md5(reply: &Value, expected: &str) -> Result<(), SinkError> {
    match reply.get("MD5OfMessageBody").and_then(Value::as_str) {
        Some(m) if m.eq_ignore_ascii_case(expected) => Ok(()),
        Some(m) => Err(SinkError::Transient(format!(
            "md5_mismatch: SQS stored a body with MD5 {m}, sent {expected}"
        ))),
        None => Err(SinkError::Transient(
            "unexpected_reply: no MD5OfMessageBody".into(),
        )),
    }
}

struct SqsFlush(Arc<SqsClient>);

impl Flush<SqsEntry> for SqsFlush {
    fn flush<'a>(
        &'a self,
        items: &'a [Item<SqsEntry>],
    ) -> BoxFuture<'a, Vec<Result<(), SinkError>>> {
        Box::pin(self.0.send_batch(items))
    }
}

pub struct SqsSink {
    client: Arc<SqsClient>,
    batcher: Option<Arc<Batcher<SqsEntry>>>,
    fifo: bool,
    group_id: Option<String>,
    limits: Limits,
    reported_inline: u64,
}

/// Builds the client a sink (and its batcher) uses, with no egress policy of its own (tools
/// and tests; the sink builds its client with `checked_client`).
pub fn client(cfg: &SqsSinkConfig, http: reqwest::Client) -> Arc<SqsClient> {
    Arc::new(client_with(cfg, http, None))
}

/// The sink's client: `rest.http` resolves through the policy and verifies with the sink's
/// `tls:`, and a refused IP-literal endpoint fails every request.
fn checked_client(cfg: &SqsSinkConfig, rest: Rest, policy: &Policy) -> SqsClient {
    let mut c = client_with(
        cfg,
        rest.http,
        policy.refused_literal(&cfg.egress_targets()),
    );
    c.tls_setup = rest.setup_error;
    c.peer = rest.peer;
    c
}

fn client_with(
    cfg: &SqsSinkConfig,
    http: reqwest::Client,
    refused: Option<EgressError>,
) -> SqsClient {
    let queue = url::Url::parse(cfg.queue_url.expose()).ok();
    let endpoint = cfg
        .endpoint
        .as_ref()
        .map(|e| e.expose().to_string())
        .unwrap_or_else(|| {
            queue
                .as_ref()
                .map(|u| u.origin().ascii_serialization())
                .unwrap_or_default()
        });
    let region = cfg
        .region
        .clone()
        .or_else(|| {
            queue
                .as_ref()
                .and_then(|u| u.host_str().and_then(region_from_host))
        })
        .or_else(|| std::env::var("AWS_REGION").ok())
        .or_else(|| std::env::var("AWS_DEFAULT_REGION").ok())
        .unwrap_or_else(|| "us-east-1".into());
    SqsClient {
        http,
        queue_url: cfg.queue_url.expose().to_string(),
        endpoint,
        region,
        creds: CredentialSource::from_config(
            cfg.access_key_id.as_ref().map(Secret::expose),
            cfg.secret_access_key.as_ref().map(Secret::expose),
            cfg.session_token.as_ref().map(Secret::expose),
        ),
        timeout: Duration::from_millis(cfg.timeout_ms),
        refused,
        tls_setup: None,
        peer: PeerCert::default(),
    }
}

impl SqsSink {
    /// Builds the sink. With batching on it joins the batcher of every sink sending to the
    /// same queue with the same credentials and batching options.
    pub(crate) fn build(
        cfg: &SqsSinkConfig,
        ctx: &BuildCtx,
        builder: &SinkBuilder,
    ) -> Result<SqsSink, ConfigError> {
        let rest = builder.rest_client(ctx, cfg.tls.as_ref())?;
        let rest_key = rest.key.clone();
        let client = Arc::new(checked_client(cfg, rest, &ctx.policy));
        #[derive(serde::Serialize)]
        struct Destination<'a> {
            /// The batcher sends through the client of the policy it was made under.
            egress: &'a AddressPolicy,
            /// ... and of the `tls:` settings (and material) it was made with.
            client: &'a str,
            queue_url: &'a SecretUrl,
            endpoint: &'a Option<SecretUrl>,
            region: &'a Option<String>,
            access_key_id: &'a Option<Secret>,
            secret_access_key: &'a Option<Secret>,
            session_token: &'a Option<Secret>,
            timeout_ms: u64,
        }
        let destination = Destination {
            egress: ctx.policy.addresses(),
            client: &rest_key,
            queue_url: &cfg.queue_url,
            endpoint: &cfg.endpoint,
            region: &cfg.region,
            access_key_id: &cfg.access_key_id,
            secret_access_key: &cfg.secret_access_key,
            session_token: &cfg.session_token,
            timeout_ms: cfg.timeout_ms,
        };
        let batcher = builder.sqs.for_sink(
            "sqs",
            &destination,
            cfg.batch_options(),
            ctx,
            || Arc::new(SqsFlush(client.clone())),
            builder.sqs_stats.clone(),
        )?;
        let limits = Limits {
            inline_max: cfg.inline_max_bytes,
            max_message: cfg.max_message_bytes,
        };
        Ok(SqsSink {
            client,
            batcher,
            fifo: cfg.is_fifo(),
            group_id: cfg.message_group_id.clone(),
            limits,
            reported_inline: limits.reported_inline_max(ctx.forward_headers_max_bytes),
        })
    }

    async fn attempt(&self, env: &Envelope, ctx: &DeliveryCtx) -> Result<(), SinkError> {
        let mut attributes = message::attributes(env, ctx);
        // SQS takes at most 10 attributes; the trace pair goes first (the message body carries
        // it too).
        for name in ["tracestate", "traceparent"] {
            if attributes.len() > 10 {
                attributes.retain(|(k, _)| *k != name);
            }
        }
        // SQS counts each attribute's name, type ("String") and value.
        let overhead: u64 = attributes
            .iter()
            .map(|(k, v)| (k.len() + "String".len() + v.len()) as u64)
            .sum();
        let prepared = message::prepare(env, ctx, self.limits, overhead)?;
        // The message is JSON, so UTF-8: a valid SQS body.
        let body = String::from_utf8(prepared.json)
            .map_err(|_| SinkError::Permanent("message is not UTF-8".into()))?;
        let md5 = hex::encode(Md5::digest(body.as_bytes()));
        let bytes = body.len() as u64 + overhead;
        let (group_id, dedup_id) = if self.fifo {
            (
                Some(match message::lane_key(ctx) {
                    // An ordered sink's group is its lane.
                    Some(k) => k.to_string(),
                    None => self
                        .group_id
                        .clone()
                        .unwrap_or_else(|| message::tenant_source_key(env)),
                }),
                Some(message::dedupe_id(env, ctx)),
            )
        } else {
            (self.group_id.clone(), None)
        };
        let entry = SqsEntry {
            body,
            attributes,
            group_id: group_id.clone(),
            dedup_id,
            md5,
        };
        match &self.batcher {
            // Only FIFO groups are ordered; a standard queue's group id (fair queues) is not.
            Some(b) => {
                let order = if self.fifo { group_id } else { None };
                b.submit(entry, bytes, &env.tenant, order, ctx.attempt)
                    .await
            }
            None => self.client.send_one(&entry, ctx.attempt).await,
        }
    }
}

impl_sink!(SqsSink {
    type_name: "sqs",
    batching_rest
});

#[cfg(test)]
mod tests {
    use super::*;

    /// SQS's messages can quote the request (a SignatureDoesNotMatch carries the canonical
    /// request, with the access key id): only the status and the code reach the error.
    #[test]
    fn a_planted_secret_in_a_reply_never_reaches_the_text() {
        let reply = r#"{"__type":"com.amazon.coral.service#SignatureDoesNotMatch",
            "message":"The request signature we calculated does not match. AKIAPLANTED planted-secret"}"#;
        match failure(403, None, reply, 1) {
            SinkError::PermanentConfig(m) => assert_eq!(m, "sqs 403 SignatureDoesNotMatch"),
            other => panic!("{other:?}"),
        }
        match failure(502, None, "<html>planted-secret</html>", 1) {
            SinkError::Transient(m) => assert_eq!(m, "status 502"),
            other => panic!("{other:?}"),
        }
        let batch = serde_json::json!({"Failed": [
            {"Id": "0", "Code": "InvalidParameterValue", "Message": "planted-secret value"}
        ]});
        let r = settle_batch(&batch, &[("x", 1)]);
        assert!(matches!(&r[0], Err(SinkError::Permanent(m)) if !m.contains("planted")));
    }

    #[test]
    fn error_table() {
        assert!(matches!(
            classify(400, Some("InvalidParameterValue"), 1),
            SinkError::Permanent(_)
        ));
        assert!(matches!(
            classify(400, Some("QueueDoesNotExist"), 1),
            SinkError::PermanentConfig(_)
        ));
        assert!(matches!(
            classify(403, Some("SignatureDoesNotMatch"), 1),
            SinkError::PermanentConfig(_)
        ));
        assert!(matches!(
            classify(400, Some("ThrottlingException"), 1),
            SinkError::RetryAfter { .. }
        ));
        assert!(matches!(
            classify(500, Some("InternalError"), 1),
            SinkError::Transient(_)
        ));
        assert!(matches!(
            classify(503, None, 1),
            SinkError::RetryAfter { .. }
        ));
        assert!(matches!(
            classify(502, None, 1),
            SinkError::Transient(ref r) if r.starts_with("status 502")
        ));
    }

    #[test]
    fn batch_reply_is_settled_per_entry() {
        let md5 = |s: &str| hex::encode(Md5::digest(s.as_bytes()));
        let (a, b, c, d, e, f) = (md5("a"), md5("b"), md5("c"), md5("d"), md5("e"), md5("f"));
        let reply = json!({
            "Successful": [
                {"Id": "0", "MessageId": "m0", "MD5OfMessageBody": a},
                {"Id": "1", "MessageId": "m1", "MD5OfMessageBody": "0000"},
            ],
            "Failed": [
                {"Id": "2", "SenderFault": true, "Code": "InvalidParameterValue", "Message": "bad"},
                {"Id": "3", "SenderFault": false, "Code": "ThrottlingException", "Message": "slow"},
                {"Id": "4", "SenderFault": false, "Code": "InternalError", "Message": "oops"},
            ]
        });
        let expected = [
            (a.as_str(), 1),
            (b.as_str(), 1),
            (c.as_str(), 1),
            (d.as_str(), 3),
            (e.as_str(), 1),
            (f.as_str(), 1),
        ];
        let r = settle_batch(&reply, &expected);
        assert!(r[0].is_ok());
        assert!(matches!(&r[1], Err(SinkError::Transient(m)) if m.starts_with("md5_mismatch")));
        assert!(
            matches!(&r[2], Err(SinkError::Permanent(m)) if m.contains("InvalidParameterValue"))
        );
        assert!(matches!(&r[3], Err(SinkError::RetryAfter { ms, .. }) if (1..=2000).contains(ms)));
        assert!(matches!(&r[4], Err(SinkError::Transient(m)) if m.contains("InternalError")));
        assert!(matches!(&r[5], Err(SinkError::Transient(m)) if m.starts_with("unexpected_reply")));
    }

    #[test]
    fn codes_from_json_and_query_header() {
        let v = json!({"__type": "com.amazonaws.sqs#QueueDoesNotExist", "message": "x"});
        assert_eq!(error_code(&v, None).as_deref(), Some("QueueDoesNotExist"));
        assert_eq!(
            error_code(
                &json!({}),
                Some("AWS.SimpleQueueService.NonExistentQueue;Sender")
            )
            .as_deref(),
            Some("QueueDoesNotExist")
        );
    }
}
