//! The ingest stages before the body is trusted, in order: `limits` (the client's rate limit,
//! the route and its tenant, the method, the declared `Content-Length`), `source` (the source,
//! the tenant it answers, the header bytes) and `body` (the in-flight budget, then the read
//! within `http.max_body_bytes` and `http.body_timeout_ms`). Each refuses with its answer and
//! stores nothing; a refusal before `body` leaves the body unread.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, header};
use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use tokio::sync::OwnedSemaphorePermit;

use ankusa_config::HttpConfig;
use ankusa_format::request::route;

use super::Refused;
use super::client;
use super::state::EdgeState;
use crate::api_error::ApiError;
use crate::live::{Live, LiveSource};

/// Where a request goes, read from its URL and head.
pub(super) struct Route<'a> {
    /// The tenant the URL names (`{prefix}/:tenant/:source`).
    pub url_tenant: Option<&'a str>,
    pub source_id: &'a str,
    /// The declared `Content-Length`.
    pub declared: Option<u64>,
}

/// The source a request is for, and the tenant its hook belongs to.
pub(super) struct Target {
    pub source: Arc<LiveSource>,
    pub tenant: String,
    /// The tenant came from the URL.
    pub url_tenant: bool,
}

/// Stage 1: the client's rate limit (`400`, `429`), the route (`404`), its tenant's grammar
/// (`404`), the method (`405`) and the declared `Content-Length` (`400`, `413`).
pub(super) fn limits<'a>(
    edge: &EdgeState,
    live: &Live,
    parts: &'a Parts,
) -> Result<Route<'a>, Refused> {
    client_limit(edge, live, parts)?;
    let http = &live.config.http;
    let Some((url_tenant, source_id)) = route(parts.uri.path(), &http.prefix, http.routing) else {
        return Err(Refused::new("refused", ApiError::NotFound).counted("unknown_source"));
    };
    if let Some(t) = url_tenant
        && !ankusa_config::valid_id(t)
    {
        return Err(Refused::new("refused", ApiError::InvalidTenant).counted("invalid_tenant"));
    }
    if parts.method != Method::POST {
        return Err(Refused::new("refused", ApiError::MethodNotAllowed));
    }
    let declared = match parts.headers.get(header::CONTENT_LENGTH) {
        None => None,
        Some(len) => match len.to_str().ok().and_then(|s| s.parse::<u64>().ok()) {
            Some(n) if n > http.max_body_bytes => {
                let e = ApiError::PayloadTooLarge {
                    max_body_bytes: http.max_body_bytes,
                };
                return Err(Refused::new("refused", e).counted("payload_too_large"));
            }
            Some(n) => Some(n),
            None => return Err(invalid_header("content-length")),
        },
    };
    Ok(Route {
        url_tenant,
        source_id,
        declared,
    })
}

/// `http.client_rate_limit`, charged to the client's address (`client::address`) before
/// anything else is read.
fn client_limit(edge: &EdgeState, live: &Live, parts: &Parts) -> Result<(), Refused> {
    let Some(limit) = &live.config.http.client_rate_limit else {
        return Ok(());
    };
    let peer = parts
        .extensions
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|c| c.0.ip());
    let Some(client) = peer.and_then(|p| client::address(p, &parts.headers, &live.trusted_proxies))
    else {
        return Err(invalid_header("x-forwarded-for"));
    };
    let now_us = edge.clock.now_ms().saturating_mul(1000);
    edge.client_limiter
        .check(&client::key(client), limit, now_us)
        .map_err(|wait_ms| {
            let e = ApiError::ClientRateLimited {
                retry_after: wait_ms.div_ceil(1000),
            };
            Refused::new("rate_limited", e).counted("client_rate_limited")
        })
}

/// Stage 2: the source (`404`, also for a source pinned to another tenant than the URL's)
/// and the header bytes (`400`).
pub(super) fn source(
    live: &Live,
    headers: &HeaderMap,
    route: Route<'_>,
) -> Result<Target, Refused> {
    let unknown = || Refused::new("refused", ApiError::UnknownSource).counted("unknown_source");
    let source = live
        .sources
        .get(route.source_id)
        .cloned()
        .ok_or_else(unknown)?;
    let tenant = match route.url_tenant {
        Some(t) => {
            let pinned = source.cfg.tenant.as_deref().filter(|p| *p != "default");
            if pinned.is_some_and(|p| p != t) {
                return Err(unknown());
            }
            t.to_string()
        }
        None => source.tenant().to_string(),
    };
    if let Some(bad) = invalid_header_name(headers) {
        return Err(invalid_header(bad));
    }
    Ok(Target {
        source,
        tenant,
        url_tenant: route.url_tenant.is_some(),
    })
}

/// Stage 3: the body. Bytes of bodies held at once are bounded across connections: this
/// body's declared length (the most it may be, when chunked) is reserved before a byte of it
/// is read (`503 overload`); then it is read within the limit (`413`) and the timeout
/// (`400 body_read_failed`). The reservation is held until the request is answered.
pub(super) async fn body(
    edge: &EdgeState,
    http: &HttpConfig,
    declared: Option<u64>,
    body: Body,
) -> Result<(Bytes, OwnedSemaphorePermit), Refused> {
    let max = http.max_body_bytes;
    let reserve = u32::try_from(declared.unwrap_or(max).max(1)).unwrap_or(u32::MAX);
    let Ok(reserved) = edge.body_budget.clone().try_acquire_many_owned(reserve) else {
        return Err(Refused::new("overload", ApiError::Overload).counted("inflight_body_bytes"));
    };
    let timeout = Duration::from_millis(http.body_timeout_ms);
    match read_body(body, max, timeout).await {
        Ok(b) => Ok((b, reserved)),
        Err(BodyError::TooLarge) => {
            let e = ApiError::PayloadTooLarge {
                max_body_bytes: max,
            };
            Err(Refused::new("refused", e).counted("payload_too_large"))
        }
        Err(BodyError::Read(reason)) => {
            let e = ApiError::BodyReadFailed { reason };
            Err(Refused::new("refused", e).counted("body_read_failed"))
        }
    }
}

fn invalid_header(name: impl Into<String>) -> Refused {
    let e = ApiError::InvalidHeader {
        header: name.into(),
    };
    Refused::new("refused", e).counted("invalid_header")
}

/// The first header whose value has a byte outside 0x20..=0x7E and tab (no obs-text).
fn invalid_header_name(headers: &HeaderMap) -> Option<String> {
    for (name, value) in headers {
        let ok = value
            .as_bytes()
            .iter()
            .all(|&b| b == b'\t' || (0x20..=0x7e).contains(&b));
        let name_ok = name.as_str().bytes().all(|b| (0x21..=0x7e).contains(&b));
        if !ok || !name_ok {
            return Some(name.as_str().to_string());
        }
    }
    None
}

enum BodyError {
    TooLarge,
    Read(&'static str),
}

async fn read_body(body: Body, max: u64, timeout: Duration) -> Result<Bytes, BodyError> {
    let limited = Limited::new(body, max as usize);
    match tokio::time::timeout(timeout, limited.collect()).await {
        Err(_) => Err(BodyError::Read("timeout")),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) => {
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                Err(BodyError::TooLarge)
            } else {
                Err(BodyError::Read("read_error"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_bytes() {
        let mut h = HeaderMap::new();
        h.insert("x-ok", "plain\tvalue".parse().unwrap());
        assert_eq!(invalid_header_name(&h), None);
        h.insert(
            "x-bad",
            http::HeaderValue::from_bytes("caf\u{e9}".as_bytes()).unwrap(),
        );
        assert_eq!(invalid_header_name(&h), Some("x-bad".into()));
    }
}
