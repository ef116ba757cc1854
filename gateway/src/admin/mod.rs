//! The admin API (default `127.0.0.1:4002`; docs/admin-api.md is its contract).
//!
//! `/health` and `/ready` (the `probes` router the caller passes in) are open; `/metrics`
//! (scope `metrics:read`) and every `/v1` route need a bearer token with the route's scope
//! when `admin.tokens` is set
//! (the config refuses an open admin API off loopback). A token holding `tenant:<id>` scopes
//! (and not `tenant:*` or `*`) sees and acts on those tenants' dead letters, jobs and hooks
//! only: another tenant's job is `404`, naming another tenant is `403`. Node-wide routes
//! (status, config, wal, a source's deliveries) need a token that is not tenant-limited.
//!
//! One router per resource: `node` (metrics, status, config, wal, corrupt rows), `hooks`,
//! `archive`, `dlq`, `sources`, `filter_test` (a dry run of sink filters), `replays`, `quarantine`,
//! `lifecycle` (the audit trail). Every handler takes a `Caller<Scope>`
//! (`caller`: token, scope and tenant checks, once), its query as `Params` and its body as
//! `JsonBody` (`params`), and returns `Result<Json<T>, ApiError>` with `T` from `ankusa-api`.
//! They reach the node only through `AdminState` (`state`).
//!
//! Its files import `state`, `caller`, `params`, `api_error` and the subsystems whose handles
//! the state holds; nothing outside `admin` imports them but the router.

mod archive;
mod caller;
mod dlq;
mod filter_test;
mod hooks;
mod lifecycle;
mod node;
mod params;
mod quarantine;
mod replays;
mod sources;
mod state;

use std::sync::Arc;

use axum::Router;

pub use state::AdminState;

/// The admin listener's router: `probes` (`/health`, `/ready`, with their own state) and one
/// router per resource over `state`.
pub fn router(state: AdminState, probes: Router) -> Router {
    Router::new()
        .merge(node::router())
        .merge(hooks::router())
        .merge(lifecycle::router())
        .merge(archive::router())
        .merge(dlq::router())
        .merge(sources::router())
        .merge(filter_test::router())
        .merge(replays::router())
        .merge(quarantine::router())
        .with_state(Arc::new(state))
        .merge(probes)
}
