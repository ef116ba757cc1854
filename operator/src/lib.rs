//! Ankusa's Kubernetes operator.
//!
//! Thin reconcilers over pure functions:
//! - [`render`]: Gateway + Sources + Sinks + Secret values → the gateway's own `Config` per pod,
//!   and a ReplayJob's request (pure);
//! - [`resources`]: the StatefulSet, Services, NetworkPolicy and Secrets a Gateway owns (pure);
//! - [`status`]: every kind's status from what was rendered and what the pods report (pure);
//! - [`ownership`]: which of those Secrets are the operator's own (recorded, not owner
//!   references);
//! - [`pods`]: which pods are a Gateway's (its StatefulSet's, within its ordinals), and how to
//!   reach their admin API;
//! - [`admin`]: the client of each pod's admin API, over HTTPS;
//! - [`pki`] and [`admin_tls`]: each Gateway's admin CA and serving certificate;
//! - [`scrape`]: each Gateway's scrape Secret (the `metrics:read` token and the CA bundle);
//! - [`context`]: what every reconciler shares (client, events, metrics, settings, the one
//!   status write);
//! - [`signals`]: the memory between polls that aggregates the pods' dead-letter bursts and
//!   breaker transitions into a few Kubernetes Events (pure, a leaf);
//! - [`controllers`]: one reconciler per kind, each staged as guard → inputs → children →
//!   pods → status;
//! - [`server`]: `/metrics` and `/health`; [`leader`]: Lease-based leader election;
//! - [`logging`]: the log filter and line format; [`selftest`]: what `helm test` runs (the
//!   operator answers ready, the four CRDs are served).
//!
//! Imports go one way: the controllers use everything below them; `status` uses `render` and
//! `resources`; `render` uses `resources`; `resources` and `context` use neither.

pub mod admin;
pub mod admin_tls;
pub mod context;
pub mod controllers;
pub mod leader;
pub mod logging;
pub mod metrics;
pub mod ownership;
pub mod pki;
pub mod pods;
pub mod render;
pub mod resources;
pub mod scrape;
pub mod selftest;
pub mod server;
pub mod signals;
pub mod status;
#[cfg(test)]
mod testing;
