//! Each operation of the contract, through the SDK's public API only, its result as the JSON
//! the cases name.

use std::time::Duration;

use ankusa_sdk::{
    ClaimClient, ClaimRef, Delivery, DeliveryHeaders, Error, Hook, LifecycleEvent, Message,
    MessageBody, ReceiveOptions, Verification, VerifyOptions, decode_lifecycle_event,
    decode_lifecycle_message, decode_message, parse_headers, receive_delivery, to_hook,
    verify_signature,
};
use serde_json::{Value, json};

use crate::json::{Json, body_bytes};
use crate::mock::{MockGateway, Reply, closed_port_url};

/// What an operation returned: a JSON result and, for results with a `body` key, the bytes.
pub struct Actual {
    pub value: Value,
    /// `None`: the result has no body key; `Some(None)`: a `null` body.
    pub body: Option<Option<Vec<u8>>>,
}

impl Actual {
    fn plain(value: Value) -> Actual {
        Actual { value, body: None }
    }
}

/// The outcome of one case: the SDK's answer, or a case the runner cannot run (why).
pub type Outcome = Result<Result<Actual, Error>, String>;

/// Whether the runner compares the mock's requests for this case.
pub struct Context<'a> {
    pub gateway: &'a MockGateway,
    pub compare_requests: bool,
}

pub async fn run(operation: &str, input: &Json, ctx: &mut Context<'_>) -> Outcome {
    match operation {
        "verify_signature" => verify(input),
        "parse_headers" => Ok(parse_headers(&headers(input)?)
            .map(|h| Actual::plain(headers_value(&h)))
            .map_err(Error::from)),
        "receive_delivery" => receive(input),
        "decode_message" => Ok(decode_message(&body_bytes(need(input, "message")?)?)
            .map(message_actual)
            .map_err(Error::from)),
        "trusted" => over_hook(input, |m| json!(m.is_trusted()), |h| json!(h.is_trusted())),
        "idempotency_key" => {
            let include = match input.get("include_replay") {
                None => false,
                Some(Json::Bool(b)) => *b,
                Some(_) => return Err("malformed case: include_replay is not a boolean".into()),
            };
            over_hook(
                input,
                |m| json!(m.idempotency_key(include)),
                |h| json!(h.idempotency_key(include)),
            )
        }
        "parse_claim_ref" => {
            let r = string(input, "ref")?;
            Ok(ClaimRef::parse(&r)
                .map(|c| {
                    Actual::plain(json!({"urn": c.urn, "tenant": c.tenant, "claim_id": c.claim_id}))
                })
                .map_err(Error::from))
        }
        "redeem_claim" => redeem(input, ctx).await,
        "decode_lifecycle_event" => lifecycle(input),
        other => Err(format!("unknown operation {other:?}")),
    }
}

fn need<'a>(input: &'a Json, key: &str) -> Result<&'a Json, String> {
    input
        .get(key)
        .ok_or_else(|| format!("malformed case: input.{key} is missing"))
}

fn string(input: &Json, key: &str) -> Result<String, String> {
    match need(input, key)? {
        Json::String(s) => Ok(s.clone()),
        _ => Err(format!("malformed case: input.{key} is not a string")),
    }
}

fn optional_i64(input: &Json, key: &str) -> Result<Option<i64>, String> {
    match input.get(key) {
        None | Some(Json::Null) => Ok(None),
        Some(j) => j
            .to_value()
            .as_i64()
            .map(Some)
            .ok_or_else(|| format!("malformed case: input.{key} is not an integer")),
    }
}

fn headers(input: &Json) -> Result<Vec<(String, String)>, String> {
    match need(input, "headers")? {
        Json::Object(pairs) => pairs
            .iter()
            .map(|(k, v)| match v {
                Json::String(s) => Ok((k.clone(), s.clone())),
                _ => Err(format!("malformed case: header {k} is not a string")),
            })
            .collect(),
        _ => Err("malformed case: input.headers is not an object".into()),
    }
}

fn secrets(input: &Json) -> Result<Vec<String>, String> {
    match input.get("secrets") {
        None | Some(Json::Null) => Ok(Vec::new()),
        Some(Json::Array(a)) => a
            .iter()
            .map(|s| match s {
                Json::String(s) => Ok(s.clone()),
                _ => Err("malformed case: a secret is not a string".to_string()),
            })
            .collect(),
        Some(_) => Err("malformed case: input.secrets is not an array".into()),
    }
}

fn tolerance(input: &Json) -> Result<Duration, String> {
    Ok(match optional_i64(input, "tolerance_s")? {
        Some(s) => {
            Duration::from_secs(u64::try_from(s).map_err(|_| "malformed case: tolerance_s < 0")?)
        }
        None => ankusa_sdk::DEFAULT_TOLERANCE,
    })
}

fn verify(input: &Json) -> Outcome {
    let body = body_bytes(need(input, "body")?)?;
    let options = VerifyOptions {
        now: optional_i64(input, "now")?,
        tolerance: tolerance(input)?,
    };
    Ok(
        verify_signature(&headers(input)?, &body, &secrets(input)?, options)
            .map(|s| Actual::plain(json!({"id": s.id, "timestamp": s.timestamp})))
            .map_err(Error::from),
    )
}

fn receive(input: &Json) -> Outcome {
    let body = body_bytes(need(input, "body")?)?;
    let allow_unsigned = match input.get("allow_unsigned") {
        None | Some(Json::Null) => false,
        Some(Json::Bool(b)) => *b,
        Some(_) => return Err("malformed case: allow_unsigned is not a boolean".into()),
    };
    let options = ReceiveOptions {
        secrets: secrets(input)?,
        allow_unsigned,
        now: optional_i64(input, "now")?,
        tolerance: tolerance(input)?,
    };
    Ok(receive_delivery(&headers(input)?, &body, &options).map(delivery_actual))
}

fn verification_value(v: Option<&Verification>) -> Value {
    v.map(|v| json!({"status": v.status, "flagged": v.flagged}))
        .unwrap_or(Value::Null)
}

fn headers_value(h: &DeliveryHeaders) -> Value {
    json!({
        "id": h.id, "source_id": h.source_id, "tenant_id": h.tenant_id, "tenant": h.tenant(),
        "idempotency_key": h.idempotency_key, "dedupe_key": h.dedupe_key,
        "replay_id": h.replay_id, "ordering_key": h.ordering_key, "content_type": h.content_type,
        "verification": verification_value(h.verification.as_ref()),
        "received_at": h.received_at, "body_sha256": h.body_sha256,
    })
}

fn delivery_actual(d: Delivery) -> Actual {
    let mut value = headers_value(&d);
    value["signed"] = json!(d.signed);
    Actual {
        value,
        body: Some(Some(d.body.to_vec())),
    }
}

fn message_actual(m: Message) -> Actual {
    let claim = m
        .claim()
        .map(|c| json!({"urn": c.urn, "tenant": c.tenant, "claim_id": c.claim_id}))
        .unwrap_or(Value::Null);
    let value = json!({
        "v": m.v, "id": m.id, "source_id": m.source_id, "tenant_id": m.tenant_id,
        "tenant": m.tenant(), "received_at": m.received_at, "content_type": m.content_type,
        "size": m.size, "sha256": m.sha256, "dedupe_key": m.dedupe_key, "replay_id": m.replay_id,
        "idempotency_key": m.idempotency_key,
        "verification": verification_value(m.verification.as_ref()),
        "headers": m.headers, "instance": m.instance, "region": m.region,
        "traceparent": m.traceparent, "tracestate": m.tracestate, "ordering_key": m.ordering_key,
        "claim": claim,
    });
    let body = match &m.body {
        MessageBody::Inline(b) => Some(b.to_vec()),
        MessageBody::Claim(_) => None,
    };
    Actual {
        value,
        body: Some(body),
    }
}

/// `trusted` and `idempotency_key`: the SDK's own method over a decoded message or parsed
/// headers.
fn over_hook(
    input: &Json,
    of_message: impl Fn(&Message) -> Value,
    of_headers: impl Fn(&DeliveryHeaders) -> Value,
) -> Outcome {
    match (input.get("message"), input.get("headers")) {
        (Some(m), None) => Ok(decode_message(&body_bytes(m)?)
            .map(|m| Actual::plain(of_message(&m)))
            .map_err(Error::from)),
        (None, Some(_)) => Ok(parse_headers(&headers(input)?)
            .map(|h| Actual::plain(of_headers(&h)))
            .map_err(Error::from)),
        _ => Err("malformed case: input holds one of message and headers".into()),
    }
}

fn hook_actual(h: Hook) -> Actual {
    let value = json!({
        "id": h.id, "source_id": h.source_id, "tenant_id": h.tenant_id,
        "idempotency_key": h.idempotency_key,
        "verification": verification_value(h.verification.as_ref()),
        "size": h.size, "sha256": h.sha256,
    });
    Actual {
        value,
        body: Some(Some(h.body.to_vec())),
    }
}

fn reply(gateway: &Json) -> Result<Reply, String> {
    let status = gateway
        .get("status")
        .and_then(|s| s.to_value().as_u64())
        .and_then(|s| u16::try_from(s).ok())
        .ok_or("malformed case: gateway.status is not an HTTP status")?;
    let headers = match gateway.get("headers") {
        None | Some(Json::Null) => Vec::new(),
        Some(Json::Object(pairs)) => pairs
            .iter()
            .map(|(k, v)| match v {
                Json::String(s) => Ok((k.clone(), s.clone())),
                _ => Err(format!(
                    "malformed case: gateway header {k} is not a string"
                )),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("malformed case: gateway.headers is not an object".into()),
    };
    let body = match gateway.get("body") {
        None | Some(Json::Null) => Vec::new(),
        Some(b) => body_bytes(b)?,
    };
    let delay = match gateway.get("delay_ms") {
        None | Some(Json::Null) => Duration::ZERO,
        Some(d) => Duration::from_millis(
            d.to_value()
                .as_u64()
                .ok_or("malformed case: delay_ms is not an integer")?,
        ),
    };
    Ok(Reply {
        status,
        headers,
        body,
        delay,
    })
}

async fn redeem(input: &Json, ctx: &mut Context<'_>) -> Outcome {
    let gateway = need(input, "gateway")?;
    let base = if gateway.get("unreachable") == Some(&Json::Bool(true)) {
        ctx.gateway.reset(Reply::default());
        closed_port_url().map_err(|e| format!("cannot find a closed port: {e}"))?
    } else if let Some(Json::String(url)) = gateway.get("url") {
        ctx.compare_requests = false;
        url.clone()
    } else {
        ctx.gateway.reset(reply(gateway)?);
        ctx.gateway.url()
    };
    let timeout = optional_i64(input, "timeout_ms")?.unwrap_or(5000);
    let mut client = ClaimClient::new(base).timeout(Duration::from_millis(
        u64::try_from(timeout).map_err(|_| "malformed case: timeout_ms < 0")?,
    ));
    match input.get("token") {
        None | Some(Json::Null) => {}
        Some(Json::String(t)) => client = client.token(t.clone()),
        Some(_) => return Err("malformed case: token is not a string".into()),
    }
    let message = match decode_message(&body_bytes(need(input, "message")?)?) {
        Ok(m) => m,
        Err(e) => return Ok(Err(e.into())),
    };
    Ok(to_hook(&message, &client).await.map(hook_actual))
}

fn event_actual(e: LifecycleEvent) -> Actual {
    Actual::plain(json!({
        "id": e.id, "type": e.event_type, "source": e.source, "time": e.time,
        "subject": e.subject, "specversion": e.specversion, "datacontenttype": e.datacontenttype,
        "traceparent": e.traceparent, "data": e.data, "known": e.known,
    }))
}

fn lifecycle(input: &Json) -> Outcome {
    match (input.get("event"), input.get("message")) {
        (Some(e), None) => Ok(decode_lifecycle_event(&body_bytes(e)?)
            .map(event_actual)
            .map_err(Error::from)),
        (None, Some(m)) => Ok(decode_lifecycle_message(&body_bytes(m)?).map(event_actual)),
        _ => Err("malformed case: input holds one of event and message".into()),
    }
}
