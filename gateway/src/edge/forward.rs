//! Stage 7a, with `fleet`: a keyed hook is committed by its key's owner pod. On the pod that
//! received the request (`route`): another pod's key is forwarded to it and its answer
//! relayed; a key of this pod's during a handover is first looked up at its previous owner
//! (`consult`, also run by the owner for a forwarded hook). An owner that does not answer is
//! `503 owner_unavailable` — never a local commit that could become a second hook — unless
//! `fleet.dedupe: best_effort`, which commits here and counts it.

use std::time::Instant;

use ankusa_config::{FleetConfig, FleetDedupe};
use ankusa_store::{IngestRecord, IngestResult};

use super::Refused;
use super::state::EdgeState;
use crate::api_error::ApiError;
use crate::fleet::{self, FleetClient, PeerError, Plan, wire};
use crate::live::Live;

/// What the fleet made of a keyed record.
pub(super) enum Routed {
    /// Commit it here.
    Here,
    /// Answered elsewhere: the owner's commit, or the previous owner's holder of the key.
    Answered(IngestResult),
}

/// The fleet's client, config and plan for a keyed record (`None`: no fleet, or no key).
fn planned<'a>(
    edge: &'a EdgeState,
    live: &'a Live,
    rec: &IngestRecord,
) -> Option<(&'a FleetClient, &'a FleetConfig, Plan<'a>)> {
    let (Some(client), Some(cfg)) = (&edge.fleet, &live.config.fleet) else {
        return None;
    };
    let dkey = rec.dedupe_key()?;
    let now_s = edge.clock.now_ms() / 1000;
    let plan = fleet::plan(cfg, &live.config.node.instance, &dkey, now_s);
    Some((client, cfg, plan))
}

/// For the pod that received the request.
pub(super) async fn route(
    edge: &EdgeState,
    live: &Live,
    rec: &IngestRecord,
) -> Result<Routed, Refused> {
    match planned(edge, live, rec) {
        Some((client, cfg, Plan::Forward { url, .. })) => {
            forward(edge, client, cfg, &live.config.node.instance, url, rec).await
        }
        Some((client, cfg, Plan::Local { consult: Some(url) })) => {
            look_up(edge, client, cfg, url, rec).await
        }
        _ => Ok(Routed::Here),
    }
}

/// For the owner of a forwarded record: only the handover's look-up (a forward never hops
/// twice, whatever this pod's member list says).
pub(super) async fn consult(
    edge: &EdgeState,
    live: &Live,
    rec: &IngestRecord,
) -> Result<Routed, Refused> {
    match planned(edge, live, rec) {
        Some((client, cfg, Plan::Local { consult: Some(url) })) => {
            look_up(edge, client, cfg, url, rec).await
        }
        _ => Ok(Routed::Here),
    }
}

async fn forward(
    edge: &EdgeState,
    client: &FleetClient,
    cfg: &FleetConfig,
    instance: &str,
    url: &str,
    rec: &IngestRecord,
) -> Result<Routed, Refused> {
    let m = &edge.metrics.fleet;
    let body = wire::encode_commit(instance, rec);
    let started = Instant::now();
    let answered = client.commit(url, body).await;
    m.forward_seconds.observe(started.elapsed().as_secs_f64());
    match answered {
        Ok(a) if a.duplicate => {
            m.forwarded.with_label_values(&["duplicate"]).inc();
            Ok(Routed::Answered(IngestResult::Duplicate { id: a.id }))
        }
        Ok(a) => {
            m.forwarded.with_label_values(&["accepted"]).inc();
            // The seq is the owner's; the answer carries the id only.
            Ok(Routed::Answered(IngestResult::Accepted {
                id: a.id,
                seq: 0,
            }))
        }
        Err(PeerError::Refused {
            code, retry_after, ..
        }) => {
            m.forwarded.with_label_values(&["refused"]).inc();
            Err(relayed(cfg, &code, retry_after))
        }
        Err(PeerError::Unavailable) => {
            m.forwarded.with_label_values(&["unavailable"]).inc();
            unavailable(edge, cfg)
        }
    }
}

async fn look_up(
    edge: &EdgeState,
    client: &FleetClient,
    cfg: &FleetConfig,
    url: &str,
    rec: &IngestRecord,
) -> Result<Routed, Refused> {
    let Some(q) = wire::Lookup::of(rec) else {
        return Ok(Routed::Here);
    };
    let m = &edge.metrics.fleet;
    match client.lookup(url, &q).await {
        Ok(wire::LookupAnswer { id: Some(id) }) => {
            m.handover_lookups.with_label_values(&["found"]).inc();
            Ok(Routed::Answered(IngestResult::Duplicate { id }))
        }
        Ok(wire::LookupAnswer { id: None }) => {
            m.handover_lookups.with_label_values(&["absent"]).inc();
            Ok(Routed::Here)
        }
        Err(_) => {
            m.handover_lookups.with_label_values(&["unavailable"]).inc();
            unavailable(edge, cfg)
        }
    }
}

/// No answer from the pod that knows the key.
fn unavailable(edge: &EdgeState, cfg: &FleetConfig) -> Result<Routed, Refused> {
    match cfg.dedupe {
        FleetDedupe::BestEffort => {
            edge.metrics.fleet.local_fallback.inc();
            tracing::warn!(
                "a key's owner did not answer; committed here (fleet.dedupe: best_effort)"
            );
            Ok(Routed::Here)
        }
        FleetDedupe::Strict => Err(Refused::new(
            "owner_unavailable",
            ApiError::OwnerUnavailable {
                retry_after: cfg.retry_after_s.into(),
            },
        )
        .counted("owner_unavailable")),
    }
}

/// The owner's own refusal, as it gave it; anything else (a config the two pods do not
/// share yet, an unknown code) is the owner being unavailable.
fn relayed(cfg: &FleetConfig, code: &str, retry_after: Option<u64>) -> Refused {
    let retry = retry_after.unwrap_or(cfg.retry_after_s.into());
    let e = match code {
        "overload" => ApiError::Overload,
        "store_unavailable" => ApiError::StoreWriteFailed,
        "dlq_full" => ApiError::DlqFull,
        "intake_unavailable" => ApiError::IntakeUnavailable { retry_after: retry },
        "intake_pending" => ApiError::IntakePending { retry_after: retry },
        _ => ApiError::OwnerUnavailable {
            retry_after: cfg.retry_after_s.into(),
        },
    };
    let outcome = e.code();
    Refused::new(outcome, e)
}
