//! Who calls an admin route, decided once per request by the `Caller<S>` extractor before the
//! handler runs: the bearer token (`401 unauthorized`), the route's scope `S`
//! (`403 forbidden` naming it), and for a node-wide route a token that is not tenant-limited
//! (`403` naming `tenant:*`). The handler then holds the caller's tenants and asks it which
//! tenant a filter acts on (`resolve_tenant`) and whether a row is the caller's to see
//! (`sees`).
//!
//! Without `admin.tokens` every caller holds every scope (validation allows that on loopback
//! only). Tokens are read from the state per request and compared in constant time.
//!
//! A leaf of `admin`: it imports only `api_error`; the state it reads is any `TokenSource`.

use std::marker::PhantomData;

use ankusa_config::AdminToken;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};

use crate::api_error::ApiError;

/// The tokens in force, as the router's state holds them.
pub trait TokenSource: Send + Sync {
    fn with_tokens<R>(&self, f: impl FnOnce(&[AdminToken]) -> R) -> R;
}

impl<T: TokenSource> TokenSource for std::sync::Arc<T> {
    fn with_tokens<R>(&self, f: impl FnOnce(&[AdminToken]) -> R) -> R {
        (**self).with_tokens(f)
    }
}

/// A route's scope (docs/admin-api.md, "Scopes").
pub trait Scope: 'static {
    const NAME: &'static str;
    /// The route is about the whole node: a tenant-limited token is refused.
    const NODE_WIDE: bool = false;
}

macro_rules! scopes {
    ($($(#[$doc:meta])* $ty:ident = $name:literal;)*) => {$(
        $(#[$doc])*
        pub struct $ty;
        impl Scope for $ty {
            const NAME: &'static str = $name;
        }
    )*};
}

scopes! {
    /// `GET /v1/status`, `/v1/config`, `/v1/wal`, `/v1/store/corrupt`.
    ConfigRead = "config:read";
    /// `PUT /v1/config`, `POST /v1/config/reload`.
    ConfigWrite = "config:write";
    /// `GET /v1/hooks/{id}`, `/v1/archive/hooks/{id}`.
    HooksRead = "hooks:read";
    /// Dead letters, the pen, replay jobs, a source's deliveries.
    DlqRead = "dlq:read";
    /// Deleting dead letters and pen entries, dead-lettering a source's queue.
    DlqWrite = "dlq:write";
    /// Creating and changing replay jobs.
    ReplaysWrite = "replays:write";
    /// `GET /metrics` (whenever `admin.tokens` is set): the only route it grants, so a
    /// Prometheus scrape token reads nothing else.
    MetricsRead = "metrics:read";
}

/// Scope `S` on a node-wide route.
pub struct NodeWide<S>(PhantomData<S>);

impl<S: Scope> Scope for NodeWide<S> {
    const NAME: &'static str = S::NAME;
    const NODE_WIDE: bool = true;
}

/// A caller of a node-wide route.
pub type NodeCaller<S> = Caller<NodeWide<S>>;

/// The tenants a caller may act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tenants {
    All,
    Only(Vec<String>),
}

/// An authenticated caller holding scope `S`.
pub struct Caller<S> {
    tenants: Tenants,
    scope: PhantomData<fn() -> S>,
}

impl<S> std::fmt::Debug for Caller<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caller")
            .field("tenants", &self.tenants)
            .finish()
    }
}

impl<S: Scope, St: TokenSource> FromRequestParts<St> for Caller<S> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &St) -> Result<Self, ApiError> {
        let scopes = state.with_tokens(|tokens| authenticate(tokens, &parts.headers))?;
        if !scopes.iter().any(|s| s == "*" || s == S::NAME) {
            return Err(ApiError::forbidden(S::NAME));
        }
        let tenants = tenants_of(&scopes);
        if S::NODE_WIDE && tenants != Tenants::All {
            return Err(ApiError::forbidden("tenant:*"));
        }
        Ok(Caller {
            tenants,
            scope: PhantomData,
        })
    }
}

/// The presented token's scopes (all of them on an API without tokens).
fn authenticate(tokens: &[AdminToken], headers: &HeaderMap) -> Result<Vec<String>, ApiError> {
    if tokens.is_empty() {
        return Ok(vec!["*".into()]);
    }
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .ok_or(ApiError::Unauthorized)?;
    let found = tokens.iter().find(|t| {
        use subtle::ConstantTimeEq;
        t.token.len() == presented.len()
            && bool::from(t.token.as_bytes().ct_eq(presented.as_bytes()))
    });
    found
        .map(|t| t.scopes.clone())
        .ok_or(ApiError::Unauthorized)
}

fn tenants_of(scopes: &[String]) -> Tenants {
    if scopes.iter().any(|s| s == "*" || s == "tenant:*") {
        return Tenants::All;
    }
    let only: Vec<String> = scopes
        .iter()
        .filter_map(|s| s.strip_prefix("tenant:"))
        .map(String::from)
        .collect();
    if only.is_empty() {
        Tenants::All
    } else {
        Tenants::Only(only)
    }
}

impl<S> Caller<S> {
    /// The tenant a tenant-filtered request acts on: the one it names (if the caller holds
    /// it), or a limited token's only tenant.
    pub fn resolve_tenant(&self, named: Option<String>) -> Result<Option<String>, ApiError> {
        match (&self.tenants, named) {
            (Tenants::All, named) => Ok(named),
            (Tenants::Only(list), Some(t)) if list.contains(&t) => Ok(Some(t)),
            (Tenants::Only(_), Some(t)) => Err(ApiError::forbidden(format!("tenant:{t}"))),
            (Tenants::Only(list), None) if list.len() == 1 => Ok(Some(list[0].clone())),
            (Tenants::Only(_), None) => Err(ApiError::filter(
                "tenant",
                "this token holds several tenants: name one",
            )),
        }
    }

    /// The tenants a list without a tenant filter is limited to: `None` for a node-wide
    /// caller (everything, node-wide rows included), else the token's tenants.
    pub fn tenant_list(&self) -> Option<Vec<String>> {
        match &self.tenants {
            Tenants::All => None,
            Tenants::Only(list) => Some(list.clone()),
        }
    }

    /// Whether a row of `tenant` (`None`: a job without a tenant filter, an entry without a
    /// recorded tenant) is the caller's to see.
    pub fn sees(&self, tenant: Option<&str>) -> bool {
        match &self.tenants {
            Tenants::All => true,
            Tenants::Only(list) => tenant.is_some_and(|t| list.iter().any(|x| x == t)),
        }
    }
}

#[cfg(test)]
#[path = "caller_tests.rs"]
mod tests;
