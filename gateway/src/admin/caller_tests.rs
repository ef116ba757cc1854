//! The `Caller` extractor, driven as axum drives it (`from_request_parts` over a request's
//! head): each scope, with and without a node-wide route, and each tenant case of
//! docs/admin-api.md ("Authentication", "Scopes", "Tenant-limited tokens").

use ankusa_config::AdminToken;
use axum::extract::FromRequestParts;
use axum::http::Request;

use super::*;

struct Tokens(Vec<AdminToken>);

impl TokenSource for Tokens {
    fn with_tokens<R>(&self, f: impl FnOnce(&[AdminToken]) -> R) -> R {
        f(&self.0)
    }
}

fn tokens(list: &[(&str, &[&str])]) -> Tokens {
    Tokens(
        list.iter()
            .map(|(token, scopes)| AdminToken {
                token: token.to_string(),
                scopes: scopes.iter().map(|s| s.to_string()).collect(),
            })
            .collect(),
    )
}

async fn call<S: Scope>(state: &Tokens, auth: Option<&str>) -> Result<Caller<S>, ApiError> {
    let mut req = Request::builder().uri("/v1/anything");
    if let Some(a) = auth {
        req = req.header("authorization", a);
    }
    let (mut parts, ()) = req.body(()).unwrap().into_parts();
    Caller::<S>::from_request_parts(&mut parts, state).await
}

const OPS: &str = "ops-token-0123456789";
const ACME: &str = "acme-token-0123456789";
const TWO: &str = "two-tenants-0123456789";
const ALL: &str = "all-tenants-0123456789";
const STAR: &str = "star-token-0123456789";

fn state() -> Tokens {
    tokens(&[
        (OPS, &["dlq:read", "config:read"]),
        (
            ACME,
            &["dlq:read", "dlq:write", "hooks:read", "tenant:acme"],
        ),
        (
            TWO,
            &["dlq:read", "config:read", "tenant:acme", "tenant:beta"],
        ),
        (ALL, &["dlq:read", "tenant:acme", "tenant:*"]),
        (STAR, &["*"]),
    ])
}

fn bearer(t: &str) -> String {
    format!("Bearer {t}")
}

#[tokio::test]
async fn without_tokens_every_caller_holds_every_scope_and_tenant() {
    let open = tokens(&[]);
    let c = call::<NodeWide<ConfigWrite>>(&open, None).await.unwrap();
    assert_eq!(c.tenants, Tenants::All);
    assert!(
        call::<ReplaysWrite>(&open, Some("Bearer whatever"))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn a_missing_malformed_or_unknown_token_is_401() {
    let s = state();
    for auth in [
        None,
        Some(OPS.to_string()),
        Some(format!("bearer {OPS}")),
        Some(format!("Basic {OPS}")),
        Some("Bearer not-a-configured-token".to_string()),
        Some(format!("Bearer {OPS}x")),
    ] {
        let e = call::<DlqRead>(&s, auth.as_deref()).await.unwrap_err();
        assert_eq!(e, ApiError::Unauthorized, "{auth:?}");
    }
    // Surrounding spaces of the presented token are ignored.
    assert!(
        call::<DlqRead>(&s, Some(&format!("Bearer  {OPS} ")))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn each_scope_needs_itself_or_star() {
    let s = state();
    async fn check<S: Scope>(s: &Tokens) {
        let held: [(&str, &[&str]); 2] = [
            (OPS, &["dlq:read", "config:read"]),
            (ACME, &["dlq:read", "dlq:write", "hooks:read"]),
        ];
        for (token, scopes) in held {
            let r = call::<S>(s, Some(&bearer(token))).await;
            if scopes.contains(&S::NAME) {
                assert!(r.is_ok(), "{token} {}", S::NAME);
            } else {
                assert_eq!(r.unwrap_err(), ApiError::forbidden(S::NAME), "{token}");
            }
        }
        assert!(
            call::<S>(s, Some(&bearer(STAR))).await.is_ok(),
            "{}",
            S::NAME
        );
    }
    check::<ConfigRead>(&s).await;
    check::<ConfigWrite>(&s).await;
    check::<HooksRead>(&s).await;
    check::<DlqRead>(&s).await;
    check::<DlqWrite>(&s).await;
    check::<ReplaysWrite>(&s).await;
    assert_eq!(
        (ConfigRead::NAME, ConfigWrite::NAME, HooksRead::NAME),
        ("config:read", "config:write", "hooks:read")
    );
    assert_eq!(
        (DlqRead::NAME, DlqWrite::NAME, ReplaysWrite::NAME),
        ("dlq:read", "dlq:write", "replays:write")
    );
    // A tenant scope grants nothing by itself.
    let e = call::<ReplaysWrite>(&s, Some(&bearer(ACME)))
        .await
        .unwrap_err();
    assert_eq!(e, ApiError::forbidden("replays:write"));
}

#[tokio::test]
async fn a_node_wide_route_refuses_a_tenant_limited_token() {
    let s = state();
    let e = call::<NodeWide<DlqRead>>(&s, Some(&bearer(ACME)))
        .await
        .unwrap_err();
    assert_eq!(e, ApiError::forbidden("tenant:*"));
    assert_eq!(e.body()["scope"], "tenant:*");
    let e = call::<NodeWide<ConfigRead>>(&s, Some(&bearer(TWO)))
        .await
        .unwrap_err();
    assert_eq!(e, ApiError::forbidden("tenant:*"));
    // Without the route's scope, the scope is named first.
    let e = call::<NodeWide<ConfigRead>>(&s, Some(&bearer(ACME)))
        .await
        .unwrap_err();
    assert_eq!(e, ApiError::forbidden("config:read"));
    // `tenant:*`, `*` and no tenant scope at all see every tenant.
    for t in [ALL, STAR, OPS] {
        let c = call::<NodeWide<DlqRead>>(&s, Some(&bearer(t)))
            .await
            .unwrap();
        assert_eq!(c.tenants, Tenants::All, "{t}");
    }
    // The same tenant-limited token passes a route that is not node-wide.
    assert!(call::<DlqRead>(&s, Some(&bearer(ACME))).await.is_ok());
}

#[tokio::test]
async fn a_tenant_filter_resolves_to_the_callers_tenants() {
    let s = state();
    let acme = call::<DlqRead>(&s, Some(&bearer(ACME))).await.unwrap();
    let two = call::<DlqRead>(&s, Some(&bearer(TWO))).await.unwrap();
    let all = call::<DlqRead>(&s, Some(&bearer(ALL))).await.unwrap();

    // One tenant: naming none means it; naming it is it; naming another is 403 naming it.
    assert_eq!(acme.resolve_tenant(None), Ok(Some("acme".into())));
    assert_eq!(
        acme.resolve_tenant(Some("acme".into())),
        Ok(Some("acme".into()))
    );
    let e = acme.resolve_tenant(Some("beta".into())).unwrap_err();
    assert_eq!(e, ApiError::forbidden("tenant:beta"));
    assert_eq!(e.status(), 403);

    // Several: one must be named.
    assert_eq!(
        two.resolve_tenant(Some("beta".into())),
        Ok(Some("beta".into()))
    );
    let e = two.resolve_tenant(None).unwrap_err();
    assert_eq!(
        e,
        ApiError::filter("tenant", "this token holds several tenants: name one")
    );
    assert_eq!(e.status(), 400);

    // All tenants: the filter is what the request names.
    assert_eq!(all.resolve_tenant(None), Ok(None));
    assert_eq!(
        all.resolve_tenant(Some("zeta".into())),
        Ok(Some("zeta".into()))
    );
}

#[tokio::test]
async fn a_limited_caller_sees_only_its_tenants_rows() {
    let s = state();
    let acme = call::<DlqRead>(&s, Some(&bearer(ACME))).await.unwrap();
    assert!(acme.sees(Some("acme")));
    assert!(!acme.sees(Some("beta")));
    // A job without a tenant filter, an archive entry without a recorded tenant.
    assert!(!acme.sees(None));
    let two = call::<DlqRead>(&s, Some(&bearer(TWO))).await.unwrap();
    assert!(two.sees(Some("beta")) && two.sees(Some("acme")) && !two.sees(Some("gamma")));
    for t in [ALL, STAR, OPS] {
        let c = call::<DlqRead>(&s, Some(&bearer(t))).await.unwrap();
        assert!(c.sees(None) && c.sees(Some("anyone")), "{t}");
    }
}

#[tokio::test]
async fn a_metrics_read_token_grants_the_scrape_and_nothing_else() {
    const SCRAPE: &str = "scrape-token-0123456789";
    let s = tokens(&[
        (SCRAPE, &["metrics:read"]),
        (OPS, &["dlq:read", "config:read"]),
    ]);
    assert_eq!(MetricsRead::NAME, "metrics:read");
    let c = call::<NodeWide<MetricsRead>>(&s, Some(&bearer(SCRAPE)))
        .await
        .unwrap();
    assert_eq!(c.tenants, Tenants::All);
    async fn refused<S: Scope>(s: &Tokens) {
        let e = call::<S>(s, Some(&bearer(SCRAPE))).await.unwrap_err();
        assert_eq!(e, ApiError::forbidden(S::NAME));
    }
    refused::<ConfigRead>(&s).await;
    refused::<ConfigWrite>(&s).await;
    refused::<HooksRead>(&s).await;
    refused::<DlqRead>(&s).await;
    refused::<DlqWrite>(&s).await;
    refused::<ReplaysWrite>(&s).await;
    // Other scopes do not grant the scrape; no token is 401; `*` grants it.
    let e = call::<NodeWide<MetricsRead>>(&s, Some(&bearer(OPS)))
        .await
        .unwrap_err();
    assert_eq!(e, ApiError::forbidden("metrics:read"));
    let e = call::<NodeWide<MetricsRead>>(&s, None).await.unwrap_err();
    assert_eq!(e, ApiError::Unauthorized);
    let star = tokens(&[(STAR, &["*"])]);
    assert!(
        call::<NodeWide<MetricsRead>>(&star, Some(&bearer(STAR)))
            .await
            .is_ok()
    );
    // A tenant-limited token with the scope is refused: metrics are about the whole node.
    let limited = tokens(&[(ACME, &["metrics:read", "tenant:acme"])]);
    let e = call::<NodeWide<MetricsRead>>(&limited, Some(&bearer(ACME)))
        .await
        .unwrap_err();
    assert_eq!(e, ApiError::forbidden("tenant:*"));
}
