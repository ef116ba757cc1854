//! One delivery attempt: `bind` resolves a claimed row to a sink of its source as the source
//! is now (by index, or the one sink of the row's type if the sinks were reordered), applies
//! the sink entry's `transform` (`transform.rs`) and builds what the sink is told
//! (`DeliveryCtx`); `run` checks a large body in to the claim check when
//! the source's sinks need it, delivers, and turns a timeout or a panic into a failed attempt.
//! Nothing here touches the scheduler's state.
//!
//! With `telemetry.otlp`, each attempt is a `deliver` span, a child of the context stored with
//! the hook (its `ingest` span, or the provider's `traceparent`), so it joins the hook's trace
//! however much later it runs; the sink sends the `deliver` span's own context on
//! (`DeliveryCtx::traceparent`).

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use ankusa_core::{ClaimCheck, DeliveryCtx, Envelope, Sink, SinkError};
use futures::FutureExt;
use tracing::field::Empty;
use tracing::{Instrument, Span};

use super::{Claim, forward, transform};
use crate::live::Live;
use crate::metrics::Metrics;
use crate::telemetry;

/// An attempt ready to run.
pub struct Attempt {
    pub sink: Arc<dyn Sink>,
    pub hook: Arc<Envelope>,
    pub ctx: DeliveryCtx,
    /// Set when the body is over the smallest inline limit of the source's sinks: it is
    /// checked in (once per hook) before the delivery.
    pub claim_check: Option<Arc<dyn ClaimCheck>>,
    pub timeout: Duration,
    /// The attempt's `deliver` span (disabled when traces are not exported).
    pub span: Span,
}

/// Binds the row to a sink of its source in `live`. `Err` is why it cannot be delivered any
/// more (the source or the sink is gone): a permanent failure.
pub fn bind(
    claim: &Claim,
    live: &Live,
    claim_check: Option<&Arc<dyn ClaimCheck>>,
    metrics: &Metrics,
    timeout: Duration,
) -> Result<Attempt, String> {
    let row = &claim.row;
    let Some(src) = live.source(&row.source_id) else {
        return Err(format!("source_gone: {}", row.source_id));
    };
    let same_type = |(_, s): &(usize, &Arc<dyn Sink>)| s.type_name() == row.sink_type;
    let at = claim.sink as usize;
    let (index, sink) = match src.sinks.get(at).map(|s| (at, s)).filter(same_type) {
        Some((i, s)) => (i, s.clone()),
        None => {
            let mut of_type = src.sinks.iter().enumerate().filter(same_type);
            match (of_type.next(), of_type.next()) {
                (Some((i, s)), None) => (i, s.clone()),
                _ => return Err(format!("sink_gone: {} {}", claim.sink, row.sink_type)),
            }
        }
    };
    let transform_failed = |class: &'static str| {
        metrics
            .filters
            .transform_errors
            .with_label_values(&[class])
            .inc();
        format!("transform_failed: sinks[{index}] {class}")
    };
    let sent = match src.routes.get(index).filter(|r| r.transforms()) {
        Some(route) => transform::apply(route, &claim.hook).map_err(transform_failed)?,
        None => transform::Transformed {
            hook: claim.hook.clone(),
            headers: Vec::new(),
            original_sha256: None,
        },
    };
    // A body larger than the smallest inline limit of the source's sinks is checked in once
    // per hook (inside the attempt's deadline) and every sink gets the reference.
    let inline_limit = src.sinks.iter().filter_map(|s| s.inline_max_bytes()).min();
    // The claim check holds a hook's body as received (one claim per hook id): a transformed
    // body always travels inline, so it must fit this sink's limit.
    let needs_check_in = match &sent.original_sha256 {
        None => inline_limit.is_some_and(|l| claim.hook.body.len() as u64 > l),
        Some(_)
            if sink
                .inline_max_bytes()
                .is_some_and(|l| sent.hook.body.len() as u64 > l) =>
        {
            return Err(transform_failed("too_large"));
        }
        Some(_) => false,
    };
    let sink_name = src
        .cfg
        .sink_names
        .get(claim.sink as usize)
        .cloned()
        .unwrap_or_else(|| format!("sinks[{}]", claim.sink));
    let span = deliver_span(
        &claim.hook,
        sink.type_name(),
        &sink_name,
        row.attempts + 1,
        row.replay_id.as_deref(),
    );
    let ctx = DeliveryCtx {
        instance: live.config.node.instance.clone(),
        region: live.config.node.region.clone(),
        attempt: row.attempts + 1,
        replay_id: row.replay_id.clone(),
        forward_headers: transform::merge_headers(
            forward::forwarded(&claim.hook.headers, &src.cfg, Some(metrics)),
            sent.headers,
        ),
        tenant_for_pools: row.tenant.clone(),
        claim_check: None,
        ordering_key: row.lane.clone(),
        traceparent: telemetry::traceparent_of(&span),
        original_sha256: sent.original_sha256,
    };
    Ok(Attempt {
        sink,
        hook: sent.hook,
        ctx,
        claim_check: if needs_check_in {
            claim_check.cloned()
        } else {
            None
        },
        timeout,
        span,
    })
}

/// The `deliver` span of one attempt of `hook` (disabled unless traces are exported), a child
/// of the context stored with the hook.
pub fn deliver_span(
    hook: &Envelope,
    sink_type: &'static str,
    sink_name: &str,
    attempt: u32,
    replay_id: Option<&str>,
) -> Span {
    let span = tracing::info_span!(
        target: telemetry::TARGET,
        "deliver",
        otel.kind = "producer",
        source = %hook.source_id,
        tenant = %hook.tenant,
        hook_id = %hook.id,
        "sink.type" = sink_type,
        "sink.name" = %sink_name,
        attempt,
        replay_id,
        outcome = Empty,
        otel.status_code = Empty,
    );
    telemetry::set_remote_parent(
        &span,
        hook.traceparent.as_deref(),
        hook.tracestate.as_deref(),
    );
    span
}

/// Runs the attempt under its deadline. A timeout and a panic inside the sink are transient
/// failures, so a hung or broken sink never stalls dispatch.
pub async fn run(a: Attempt) -> Result<(), SinkError> {
    let Attempt {
        sink,
        hook,
        mut ctx,
        claim_check,
        timeout,
        span,
    } = a;
    let attempt = async {
        if let Some(cc) = claim_check {
            ctx.claim_check = Some(cc.check_in(&hook).await.map_err(SinkError::Transient)?);
        }
        sink.deliver(&hook, &ctx).await
    };
    let deadline = tokio::time::timeout(timeout, AssertUnwindSafe(attempt).catch_unwind())
        .instrument(span.clone())
        .await;
    let result = match deadline {
        Err(_) => Err(SinkError::Transient(format!(
            "attempt_timeout: {} ms",
            timeout.as_millis()
        ))),
        Ok(Err(panic)) => {
            let msg = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown".into());
            Err(SinkError::Transient(format!("sink panicked: {msg}")))
        }
        Ok(Ok(r)) => r,
    };
    if !span.is_disabled() {
        span.record("outcome", outcome(&result));
        if result.is_err() {
            span.record("otel.status_code", "error");
        }
    }
    result
}

/// The `deliver` span's `outcome`: the class of the result, never its text (which may name a
/// broker or quote an answer).
pub fn outcome(r: &Result<(), SinkError>) -> &'static str {
    match r {
        Ok(()) => "delivered",
        Err(SinkError::Permanent(_)) => "permanent",
        Err(SinkError::PermanentConfig(_)) => "permanent_config",
        Err(SinkError::RetryAfter { .. }) => "retry_after",
        Err(SinkError::Transient(_)) => "transient",
    }
}
