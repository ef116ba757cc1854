//! Unit tests: shared helpers here, one file per area.

mod compile_errors;
mod filters;
mod hostile;
mod semantics;
mod transforms;

use std::time::{Duration, Instant};

use serde_json::Value as Json;

use crate::{Activation, CompileError, DEFAULT_MAX_COST, EvalError, Kind, Program};

pub(super) fn activation<'a>(
    body: Option<&'a Json>,
    headers: &'a [(String, String)],
) -> Activation<'a> {
    Activation {
        body,
        headers,
        source: "stripe",
        tenant: "acme",
        verification: "ok",
        received_at: 1_700_000_000_000,
        size: 1234,
    }
}

pub(super) fn compile(src: &str, kind: Kind) -> Program {
    Program::compile(src, kind).unwrap_or_else(|e| panic!("`{src}` should compile: {e}"))
}

pub(super) fn filter(src: &str, body: &Json) -> Result<bool, EvalError> {
    compile(src, Kind::Filter).eval_filter(&activation(Some(body), &[]), DEFAULT_MAX_COST)
}

pub(super) fn value(src: &str, body: &Json) -> Result<Json, EvalError> {
    compile(src, Kind::Value).eval_json(&activation(Some(body), &[]), DEFAULT_MAX_COST)
}

pub(super) fn compile_error(src: &str, kind: Kind) -> CompileError {
    match Program::compile(src, kind) {
        Ok(p) => panic!("`{src}` should not compile: {p:?}"),
        Err(e) => e,
    }
}

/// Runs `f`, asserting it returns within a sanity bound (not a benchmark: a runaway
/// evaluation takes minutes, a bounded one milliseconds; 5 s leaves room for a busy machine).
pub(super) fn bounded<T>(f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = f();
    let took = start.elapsed();
    assert!(took < Duration::from_secs(5), "took {took:?}");
    out
}
