//! The HTTP sink: POSTs the raw body to a URL with the `x-ankusa-*` headers and a Standard
//! Webhooks signature, through a bounded pool per receiver address.
//!
//! Status mapping (the spec's table): 2xx ok; 400/401/403/404/410/413/422/451 permanent;
//! 408/429/5xx with `Retry-After` retry-after; 425 retry-after (header or a full-jitter pause);
//! 409 and everything else transient. At most `max_response_bytes` of a response is read;
//! redirects are never followed.

mod fair;
mod pool;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ankusa_config::{ConfigError, HttpMethod, HttpSinkConfig, HttpVersion};
use ankusa_core::{DeliveryCtx, Envelope, SinkError, full_jitter, now_ms};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use sha2::{Digest, Sha256};

use crate::BuildCtx;
pub use pool::{HttpPools, PoolStats};
use pool::{POOL_TIMEOUT, Pool, PoolKey};

pub struct HttpSink {
    url: url::Url,
    method: reqwest::Method,
    timeout: Duration,
    headers: Vec<(reqwest::header::HeaderName, reqwest::header::HeaderValue)>,
    keys: Vec<Vec<u8>>,
    allow_unsigned: bool,
    max_response_bytes: u64,
    cacert: Option<(PathBuf, Vec<u8>)>,
    insecure: bool,
    pool_size: u32,
    version: HttpVersion,
    policy: crate::egress::Policy,
    pools: Arc<HttpPools>,
}

impl HttpSink {
    /// The receiver as its pool is shared (`PoolKey` without the resolved address): sinks
    /// naming the same one share its `pool_size` connections.
    fn destination(&self) -> ::ankusa_core::Destination {
        let host = self.url.host_str().unwrap_or_default();
        let port = self.url.port_or_known_default().unwrap_or_default();
        let ca = self.cacert.as_ref().map(|(p, _)| p.display().to_string());
        ::ankusa_core::Destination {
            id: format!(
                "{}://{host}:{port} {:?} ca={} insecure={}",
                self.url.scheme(),
                self.version,
                ca.as_deref().unwrap_or("-"),
                self.insecure
            ),
            concurrency: self.pool_size.max(1),
        }
    }

    /// Builds the sink; `field` names it in errors (`sources.x.sinks[1]`).
    pub fn new(
        cfg: &HttpSinkConfig,
        ctx: &BuildCtx,
        pools: Arc<HttpPools>,
    ) -> Result<HttpSink, ConfigError> {
        let (field, egress) = (ctx.field, ctx.egress);
        let url = url::Url::parse(&cfg.url)
            .map_err(|e| ConfigError::field(format!("{field}.url"), e.to_string()))?;
        let mut keys = Vec::new();
        if let Some(s) = &cfg.secret {
            for (i, secret) in s.iter().enumerate() {
                keys.push(ankusa_verify::standard_webhooks_key(secret).map_err(|_| {
                    ConfigError::field(
                        format!("{field}.secret[{i}]"),
                        "is not a usable Standard Webhooks secret",
                    )
                })?);
            }
        }
        let mut headers = Vec::new();
        for (k, v) in &cfg.headers {
            let name = reqwest::header::HeaderName::from_bytes(k.as_bytes()).map_err(|_| {
                ConfigError::field(
                    format!("{field}.headers"),
                    format!("{k:?} is not a header name"),
                )
            })?;
            let value = reqwest::header::HeaderValue::from_str(v.expose()).map_err(|_| {
                ConfigError::field(
                    format!("{field}.headers.{k}"),
                    "is not a valid header value",
                )
            })?;
            headers.push((name, value));
        }
        let cacert = match &cfg.cacertfile {
            Some(p) => {
                // Through `files` (never one of the gateway's own files, at most 1 MiB); the
                // errors name the option, not the path.
                let cacert = format!("{field}.cacertfile");
                let pem = crate::files::read(&cacert, p).map_err(|e| {
                    let msg = e.to_string();
                    let why = msg.strip_prefix(&format!("{cacert}: ")).unwrap_or(&msg);
                    ConfigError::field(cacert.clone(), why)
                })?;
                reqwest::Certificate::from_pem(&pem).map_err(|_| {
                    ConfigError::field(cacert.clone(), "the file holds no PEM certificate")
                })?;
                Some((p.to_path_buf(), pem))
            }
            None => None,
        };
        let method = match cfg.method {
            HttpMethod::Post => reqwest::Method::POST,
            HttpMethod::Put => reqwest::Method::PUT,
            HttpMethod::Patch => reqwest::Method::PATCH,
        };
        Ok(HttpSink {
            url,
            method,
            timeout: Duration::from_millis(cfg.timeout_ms),
            headers,
            keys,
            allow_unsigned: cfg.allow_unsigned,
            max_response_bytes: cfg.max_response_bytes,
            cacert,
            insecure: cfg.allow_insecure_tls,
            pool_size: cfg.pool_size.unwrap_or(egress.pools.pool_size),
            version: cfg.http_version,
            policy: ctx.policy.clone(),
            pools,
        })
    }

    async fn attempt(&self, env: &Envelope, ctx: &DeliveryCtx) -> Result<(), SinkError> {
        // Defense in depth: the config loader refuses a sink with neither a secret nor
        // allow_unsigned, and one that slipped past is dead-lettered rather than sent unsigned.
        let allow_unsigned = self.allow_unsigned;
        if let Err(d) = self.policy.check_scheme(self.url.scheme()) {
            return Err(SinkError::Permanent(format!(
                "egress_denied: {}",
                d.as_str()
            )));
        }
        let host = self
            .url
            .host_str()
            .ok_or_else(|| SinkError::Permanent("url has no host".into()))?;
        let port = self
            .url
            .port_or_known_default()
            .ok_or_else(|| SinkError::Permanent("url has no port".into()))?;
        let addr = match self.policy.pick(host, port).await {
            // The host is not named: the URL may come from a Secret.
            Err(e) => {
                return Err(SinkError::Transient(format!(
                    "resolve url: the host did not resolve ({})",
                    e.kind()
                )));
            }
            Ok(Err(d)) => {
                return Err(SinkError::Permanent(format!(
                    "egress_denied: {}",
                    d.as_str()
                )));
            }
            Ok(Ok(a)) => a,
        };
        let key = PoolKey {
            host: host.to_string(),
            addr,
            cacert: self.cacert.as_ref().map(|(p, _)| p.clone()),
            insecure: self.insecure,
            size: self.pool_size,
            version: self.version,
            tls: self.url.scheme() == "https",
        };
        let pool = self.pools.get(
            key,
            &ctx.tenant_for_pools,
            self.cacert.as_ref().map(|(_, pem)| pem.as_slice()),
        )?;
        pool.in_flight.fetch_add(1, Ordering::SeqCst);
        let result = self.send(&pool, env, ctx, allow_unsigned).await;
        pool.in_flight.fetch_sub(1, Ordering::SeqCst);
        pool.last_used_ms.store(now_ms(), Ordering::Relaxed);
        result
    }

    /// The request headers, by precedence: forwarded provider headers, the stored
    /// `content-type`, this sink's configured headers, then the gateway's own (`x-ankusa-*`,
    /// trace context, the signature). A later one replaces an earlier one of the same name, so
    /// no header is sent twice.
    fn request_headers(
        &self,
        env: &Envelope,
        ctx: &DeliveryCtx,
        allow_unsigned: bool,
    ) -> Result<HeaderMap, SinkError> {
        let mut h = HeaderMap::new();
        for (name, value) in &ctx.forward_headers {
            if let (Ok(n), Ok(v)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                h.append(n, v);
            }
        }
        let set = |h: &mut HeaderMap, name: &'static str, value: &str| {
            if let Ok(v) = HeaderValue::from_str(value) {
                h.insert(HeaderName::from_static(name), v);
            }
        };
        if let Some(ct) = &env.content_type {
            set(&mut h, "content-type", ct);
        }
        for (name, value) in &self.headers {
            h.insert(name.clone(), value.clone());
        }
        let id = env.id.to_string();
        set(&mut h, "x-ankusa-id", &id);
        set(&mut h, "x-ankusa-source", &env.source_id);
        set(&mut h, "x-ankusa-idempotency-key", &env.idempotency_key());
        set(
            &mut h,
            "x-ankusa-verification",
            env.verification.status.as_str(),
        );
        set(&mut h, "x-ankusa-received-at", &env.received_at.to_string());
        set(
            &mut h,
            "x-ankusa-body-sha256",
            &hex::encode(Sha256::digest(&env.body)),
        );
        if env.verification.flagged {
            set(&mut h, "x-ankusa-verification-flagged", "true");
        }
        if env.tenant != "default" {
            set(&mut h, "x-ankusa-tenant", &env.tenant);
        }
        if let Some(k) = &env.dedupe_key {
            set(&mut h, "x-ankusa-dedupe-key", k);
        }
        if let Some(r) = &ctx.replay_id {
            set(&mut h, "x-ankusa-replay-id", r);
        }
        if let Some(k) = &ctx.ordering_key {
            set(&mut h, "x-ankusa-ordering-key", k);
        }
        // A provider's own trace headers are replaced, not forwarded beside ours.
        h.remove("traceparent");
        h.remove("tracestate");
        let trace = crate::message::trace_context(env, ctx);
        if let Some(tp) = trace.traceparent {
            set(&mut h, "traceparent", tp);
        }
        if let Some(ts) = trace.tracestate {
            set(&mut h, "tracestate", ts);
        }
        if !self.keys.is_empty() {
            let ts = (now_ms() / 1000) as i64;
            let sig = ankusa_verify::sign_standard_webhooks(&self.keys, &id, ts, &env.body);
            set(&mut h, "webhook-id", &id);
            set(&mut h, "webhook-timestamp", &ts.to_string());
            set(&mut h, "webhook-signature", &sig);
        } else if !allow_unsigned {
            return Err(SinkError::Permanent("unsigned_sink".into()));
        }
        Ok(h)
    }

    async fn send(
        &self,
        pool: &Pool,
        env: &Envelope,
        ctx: &DeliveryCtx,
        allow_unsigned: bool,
    ) -> Result<(), SinkError> {
        let _permit =
            match tokio::time::timeout(POOL_TIMEOUT, pool.permits.acquire(&env.tenant)).await {
                Ok(p) => p,
                _ => {
                    return Err(SinkError::Transient(
                        "transport: no pool connection within pool_timeout".into(),
                    ));
                }
            };
        let headers = match self.request_headers(env, ctx, allow_unsigned) {
            Ok(h) => h,
            Err(e) => return Err(e),
        };
        let req = pool
            .client
            .request(self.method.clone(), self.url.clone())
            .timeout(self.timeout)
            .headers(headers);
        let first = match tokio::time::timeout(POOL_TIMEOUT, pool.first_request()).await {
            Ok(first) => first,
            Err(_) => {
                return Err(SinkError::Transient(
                    "transport: no pool connection within pool_timeout".into(),
                ));
            }
        };
        let sent = req.body(env.body.clone()).send().await;
        if first.is_some() {
            pool.first_done();
        }
        drop(first);
        let resp =
            sent.map_err(|e| SinkError::Transient(format!("transport: {}", transport_class(e))))?;
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_retry_after);
        // Read at most max_response_bytes, then drop the response (closing the connection).
        let mut resp = resp;
        let mut read = 0u64;
        while read < self.max_response_bytes {
            match tokio::time::timeout(self.timeout, resp.chunk()).await {
                Ok(Ok(Some(c))) => read += c.len() as u64,
                _ => break,
            }
        }
        drop(resp);
        classify_status(status, retry_after, ctx.attempt)
    }
}

/// Maps a response status to the spec's outcome classes.
pub fn classify_status(
    status: u16,
    retry_after_ms: Option<u64>,
    attempt: u32,
) -> Result<(), SinkError> {
    match status {
        200..=299 => Ok(()),
        400 | 401 | 403 | 404 | 410 | 413 | 422 | 451 => {
            Err(SinkError::Permanent(format!("status {status}")))
        }
        408 | 429 | 500..=599 => match retry_after_ms {
            Some(ms) => Err(SinkError::RetryAfter {
                ms,
                reason: format!("status {status}"),
            }),
            None => Err(SinkError::Transient(format!("status {status}"))),
        },
        425 => Err(SinkError::RetryAfter {
            ms: retry_after_ms.unwrap_or_else(|| full_jitter(attempt)),
            reason: "status 425".into(),
        }),
        _ => Err(SinkError::Transient(format!("status {status}"))),
    }
}

/// A failed request in words that name no host: a refused certificate as its class
/// (rustls' text names the host it checked), a timeout, else the error and its causes.
fn transport_class(e: reqwest::Error) -> String {
    if let Some(line) = crate::tls::reqwest_handshake_class(&e) {
        return line;
    }
    if e.is_timeout() {
        return "timeout: no answer within timeout_ms".into();
    }
    error_chain(e)
}

/// The error and its causes, without the URL: "error sending request" alone does not tell a
/// refused connection from an untrusted certificate.
fn error_chain(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(&e);
    while let Some(c) = cause {
        let part = c.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        cause = c.source();
    }
    text
}

/// `Retry-After` as delta-seconds or an HTTP-date, in milliseconds from now (in
/// `ankusa-format`, where it is fuzzed).
pub use ankusa_format::http::parse_retry_after;

impl_sink!(HttpSink {
    type_name: "http",
    destination(self) -> Option<::ankusa_core::Destination> {
        Some(self.destination())
    },
});

#[cfg(test)]
mod tests {
    use super::*;

    /// A resolver that never answers (the name does not resolve).
    struct Nowhere;
    impl crate::egress::Resolve for Nowhere {
        fn resolve<'a>(
            &'a self,
            _: &'a str,
            _: u16,
        ) -> futures::future::BoxFuture<'a, std::io::Result<Vec<std::net::SocketAddr>>> {
            Box::pin(async {
                Err(std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "no such host planted-secret-host.example",
                ))
            })
        }
    }

    /// The URL may come from a Secret: a name that does not resolve is named by its field,
    /// never by its host.
    #[tokio::test]
    async fn an_unresolved_host_is_named_by_its_field() {
        let egress = ankusa_config::EgressConfig::default();
        let ctx = BuildCtx {
            field: "sources.s.sinks[0]",
            egress: &egress,
            policy: crate::egress::Policy::new(&egress, Arc::new(Nowhere)),
            forward_headers_max_bytes: 0,
            default_inflight: 1,
        };
        let mut cfg = HttpSinkConfig::new("https://planted-secret-host.example/hooks/T0K3N");
        cfg.allow_unsigned = true;
        let sink = HttpSink::new(
            &cfg,
            &ctx,
            HttpPools::new(&ankusa_config::PoolConfig::default()),
        )
        .expect("sink");
        let env = Envelope {
            id: uuid::Uuid::now_v7(),
            seq: 1,
            received_at: 1,
            tenant: "default".into(),
            source_id: "s".into(),
            headers: vec![],
            content_type: None,
            verification: ankusa_core::Verification::OK,
            dedupe_key: None,
            traceparent: None,
            tracestate: None,
            body: bytes::Bytes::from_static(b"{}"),
        };
        let dctx = DeliveryCtx {
            instance: "i".into(),
            region: None,
            attempt: 1,
            replay_id: None,
            forward_headers: vec![],
            tenant_for_pools: "default".into(),
            claim_check: None,
            ordering_key: None,
            traceparent: None,
            original_sha256: None,
        };
        match sink.attempt(&env, &dctx).await {
            Err(SinkError::Transient(m)) => {
                assert_eq!(
                    m,
                    "resolve url: the host did not resolve (entity not found)"
                );
            }
            other => panic!("expected a transient failure, got {other:?}"),
        }
    }

    #[test]
    fn status_table() {
        assert!(classify_status(204, None, 1).is_ok());
        for s in [400, 401, 403, 404, 410, 413, 422, 451] {
            assert!(
                matches!(classify_status(s, Some(5), 1), Err(SinkError::Permanent(_))),
                "{s}"
            );
        }
        for s in [408, 429, 500, 503] {
            assert_eq!(
                classify_status(s, Some(7000), 1),
                Err(SinkError::RetryAfter {
                    ms: 7000,
                    reason: format!("status {s}")
                })
            );
            assert!(matches!(
                classify_status(s, None, 1),
                Err(SinkError::Transient(_))
            ));
        }
        assert!(
            matches!(classify_status(425, None, 3), Err(SinkError::RetryAfter { ms, .. }) if (1..=2000).contains(&ms))
        );
        assert!(matches!(
            classify_status(409, Some(1), 1),
            Err(SinkError::Transient(_))
        ));
        assert!(matches!(
            classify_status(302, None, 1),
            Err(SinkError::Transient(_))
        ));
        assert!(matches!(
            classify_status(418, None, 1),
            Err(SinkError::Transient(_))
        ));
    }
}
