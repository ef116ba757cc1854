//! Which sinks get a hook: each sink entry's `filter` (a CEL program, `ankusa_filter`),
//! evaluated once when the hook is recorded, before its commit. A sink whose filter is false
//! gets no delivery row; one whose filter cannot be evaluated follows its `on_filter_error`
//! (`deliver` by default: a filter bug never loses a hook). The hook is stored and answered
//! either way. `activation` is what an expression sees, shared with the transforms that run at
//! delivery and with the dry run.

use ankusa_config::{CompiledRouting, OnFilterError};
use ankusa_core::Envelope;
use ankusa_filter::{Activation, DEFAULT_MAX_COST};

use crate::live::LiveSource;
use crate::metrics::Metrics;

/// The hook's body as JSON for the expressions that read it: `None` when it is not JSON.
pub fn json_body(env: &Envelope) -> Option<serde_json::Value> {
    serde_json::from_slice(&env.body).ok()
}

/// What an expression over `env` sees; `body` is `json_body(env)` when an expression reads it.
pub fn activation<'a>(env: &'a Envelope, body: Option<&'a serde_json::Value>) -> Activation<'a> {
    Activation {
        body,
        headers: &env.headers,
        source: &env.source_id,
        tenant: &env.tenant,
        verification: env.verification.status.as_str(),
        received_at: env.received_at,
        size: env.body.len() as u64,
    }
}

/// How one sink's filter decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Matched,
    Filtered,
    /// The filter failed to evaluate; `deliver` tells what `on_filter_error` made of it.
    Error {
        deliver: bool,
        class: &'static str,
    },
}

impl Decision {
    pub fn delivers(self) -> bool {
        matches!(
            self,
            Decision::Matched | Decision::Error { deliver: true, .. }
        )
    }

    pub fn label(self) -> &'static str {
        match self {
            Decision::Matched => "matched",
            Decision::Filtered => "filtered",
            Decision::Error { deliver: true, .. } => "error_delivered",
            Decision::Error { deliver: false, .. } => "error_skipped",
        }
    }
}

/// Runs one sink entry's filter (none: matched).
pub fn decide(route: &CompiledRouting, act: &Activation<'_>) -> Decision {
    let Some(filter) = &route.filter else {
        return Decision::Matched;
    };
    match filter.eval_filter(act, DEFAULT_MAX_COST) {
        Ok(true) => Decision::Matched,
        Ok(false) => Decision::Filtered,
        Err(e) => Decision::Error {
            deliver: route.on_filter_error == OnFilterError::Deliver,
            class: e.class(),
        },
    }
}

/// Whether sink `sink` of `source` takes `env` under its current filter (a `dlq` replay asks
/// before it moves a dead row back). A sink that is gone or has no filter takes it.
pub fn admits(source: &LiveSource, sink: u16, env: &Envelope) -> bool {
    let Some(route) = source.routes.get(sink as usize) else {
        return true;
    };
    let Some(filter) = &route.filter else {
        return true;
    };
    let body = if filter.reads_body() {
        json_body(env)
    } else {
        None
    };
    decide(route, &activation(env, body.as_ref())).delivers()
}

/// The sink indexes of `source` whose filter turns `env` away (ascending; empty when every
/// sink takes it, and at once when the source has no filter).
pub fn skipped_sinks(source: &LiveSource, env: &Envelope, metrics: &Metrics) -> Vec<u16> {
    if source.routes.iter().all(|r| r.filter.is_none()) {
        return Vec::new();
    }
    let reads_body = source.routes.iter().any(|r| {
        r.filter
            .as_ref()
            .is_some_and(ankusa_filter::Program::reads_body)
    });
    let body = if reads_body { json_body(env) } else { None };
    let act = activation(env, body.as_ref());
    let mut skipped = Vec::new();
    for (i, route) in source.routes.iter().enumerate() {
        if route.filter.is_none() {
            continue;
        }
        let d = decide(route, &act);
        let sink_type = source.sink_types.get(i).copied().unwrap_or("unknown");
        metrics
            .filters
            .results
            .with_label_values(&[sink_type, d.label()])
            .inc();
        if let Decision::Error { class, .. } = d {
            metrics.filters.errors.with_label_values(&[class]).inc();
            tracing::debug!(source = %source.id, sink = i, class, "a sink filter failed to evaluate");
        }
        if !d.delivers() {
            skipped.push(i as u16);
        }
    }
    if skipped.len() == source.sink_types.len() {
        metrics.filters.unrouted.inc();
    }
    skipped
}
