//! Ankusa's Kubernetes operator.
//!
//! Thin reconcilers over pure functions:
//! - [`render`]: Gateway + Sources + Sinks + Secret values → the gateway's own `Config` per pod;
//! - [`resources`]: the StatefulSet, Services and Secrets a Gateway owns;
//! - [`ownership`]: which of those are the operator's own (recorded, not owner references);
//! - [`pods`]: which pods are a Gateway's (its StatefulSet's, within its ordinals);
//! - [`status`]: conditions, `programmed` counts, the ReplayJob phase;
//! - [`admin`]: the client of each pod's admin API, over HTTPS;
//! - [`pki`] and [`admin_tls`]: each Gateway's admin CA and serving certificate;
//! - [`controllers`]: one reconciler per kind;
//! - [`server`]: `/metrics` and `/health`; [`leader`]: Lease-based leader election.

pub mod admin;
pub mod admin_tls;
pub mod context;
pub mod controllers;
pub mod leader;
pub mod metrics;
pub mod ownership;
pub mod pki;
pub mod pods;
pub mod render;
pub mod resources;
pub mod server;
pub mod status;
