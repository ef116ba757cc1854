//! CEL (Common Expression Language) filters and transforms over a webhook, with hard limits.
//!
//! A [`Program`] is compiled once per config load from an expression and a [`Kind`]
//! (a filter producing a bool, a transform producing a JSON value, or a headers map), then
//! evaluated per hook against an [`Activation`]: the JSON body (borrowed, never converted),
//! the headers, and the gateway's facts (`source`, `tenant`, `verification`,
//! `received_at`, `size`). The `cel` crate is used only as the parser; checking and
//! evaluation are this crate's, because every evaluation must be bounded in cost and size
//! whatever the expression and whatever the hook.
//!
//! # Language
//!
//! Literals (null, bool, int, uint, double, string, bytes), list and map literals, `a.b` on
//! maps, `has(a.b)`, `a[i]` (list by int or uint, map by key), `! - * / % + < <= > >= == !=
//! && || ?: in`, `size` (global and method; a string's size counts characters), the string
//! methods `contains`, `startsWith`, `endsWith`, `lowerAscii`, `upperAscii` and `matches`
//! (method or global; the pattern must be a string literal, compiled at load by the linear-
//! time `regex` crate), the conversions `int`, `uint`, `double`, `string`, and the macros
//! `all`, `exists`, `exists_one`, `map` (2 and 3 arguments) and `filter` (a map iterates
//! its keys). Anything else is refused at compile time.
//!
//! Semantics follow CEL: `&&`/`||` are commutative over errors (`false && error` is false,
//! `true || error` is true); `?:` evaluates only the branch taken; int and uint arithmetic
//! is checked; `==`/`!=` compare numbers by value across int, uint and double and say
//! "not equal" for values of different types; ordering different types is an error; a JSON
//! number is an int when it fits i64, else a uint when it fits u64, else a double; a missing
//! key is an error ([`EvalError::NoSuchKey`]; test with `has()` or `in` first). One
//! deliberate difference: `has(x.f)` is false, not an error, when `x` is null or not a map,
//! so `has(body.type)` works on a hook whose body is not JSON (`body` is then null).
//!
//! # Limits
//!
//! At compile time: [`MAX_SOURCE_BYTES`] of text, parser depth [`MAX_DEPTH`],
//! [`MAX_NODES`] after macro expansion, tree depth 128, macros nested at most 2 deep, regex
//! programs and DFA caches of at most 1 MiB. Static types refuse what cannot work (unknown
//! names, wrong arity, `size + "a"`, a filter whose result is known not to be a bool).
//! [`Program::compile`] runs on a thread of its own with a 64 MiB stack (reserved, not
//! committed): the generated parser recurses deeply, several MiB at the depth limit in a
//! debug build. Evaluation recursion is bounded by the tree depth and fits a small stack.
//!
//! At evaluation, a budget (`max_cost`, usually [`DEFAULT_MAX_COST`]) is charged before the
//! work it pays for: 1 per node evaluated; 1 per macro iteration (plus its nodes); ceil(len/8)
//! per string (or bytes) created or scanned (`contains`, `startsWith`, `endsWith`, `size`,
//! comparisons, `int()` of a string...; `lowerAscii`/`upperAscii` pay for the scan and the
//! new string); 1 per list element or map entry created, copied or compared (a `map` or
//! `filter` result is appended to in place: 1 per element, not a copy per step); 1 per
//! header when `headers` is first read; 1 per node of the output (headers: 1 per header plus
//! ceil(len/8) of its name and value). `matches` pays ceil(len/8) times a weight fixed at
//! compile time: 1 for a pattern compiling to at most 8 KiB (ordinary patterns; Unicode
//! classes such as `\w` are larger, ~64 KiB, weight 8), doubling with each doubling of the
//! compiled size, up to 128 at the 1 MiB limit. The regex crate never backtracks, but when
//! its lazy DFA gives up it simulates the NFA, whose work per byte grows with the pattern:
//! the weight keeps the worst case within the budget. Exhausting the budget is
//! [`EvalError::CostExceeded`]. Any string, list or map built, and
//! the output, is at most [`MAX_VALUE_BYTES`] (lists and maps estimated at 16 bytes per
//! element plus their strings), else [`EvalError::ValueTooLarge`]. Reading the body costs
//! nothing per byte: `body.type == "x"` on a 1 MiB body costs a handful of units.

mod activation;
mod check;
mod cost;
mod error;
mod eval;
mod functions;
mod ir;
mod limits;
mod lower;
mod output;
mod pos;
mod types;
mod value;

#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::Arc;

pub use activation::Activation;
pub use error::{CompileError, EvalError};
pub use ir::Kind;
pub use limits::{
    DEFAULT_MAX_COST, MAX_DEPTH, MAX_HEADERS, MAX_NODES, MAX_SOURCE_BYTES, MAX_VALUE_BYTES,
};

use crate::cost::Meter;
use crate::ir::Compiled;
use crate::value::Value;

/// A compiled expression. Cheap to clone (shared), `Send` and `Sync`.
#[derive(Clone)]
pub struct Program {
    inner: Arc<Inner>,
}

struct Inner {
    source: String,
    kind: Kind,
    compiled: Compiled,
}

impl fmt::Debug for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Program")
            .field("kind", &self.inner.kind)
            .field("source", &self.inner.source)
            .finish()
    }
}

impl Program {
    /// Parses and checks `src` as a program producing `kind`.
    pub fn compile(src: &str, kind: Kind) -> Result<Program, CompileError> {
        let compiled = check::compile(src, kind)?;
        Ok(Program {
            inner: Arc::new(Inner {
                source: src.to_owned(),
                kind,
                compiled,
            }),
        })
    }

    pub fn source(&self) -> &str {
        &self.inner.source
    }

    pub fn kind(&self) -> Kind {
        self.inner.kind
    }

    /// Whether the expression reads `body`, so callers parse the JSON body only when needed.
    pub fn reads_body(&self) -> bool {
        self.inner.compiled.reads_body
    }

    /// Evaluates to a bool; any other result is [`EvalError::InvalidOutput`].
    pub fn eval_filter(&self, act: &Activation<'_>, max_cost: u64) -> Result<bool, EvalError> {
        let mut meter = Meter::new(max_cost);
        let v = self.run(act, &mut meter)?;
        output::to_bool(&v)
    }

    /// Evaluates to a JSON value (NaN, infinities, bytes and non-string map keys are
    /// [`EvalError::InvalidOutput`]).
    pub fn eval_json(
        &self,
        act: &Activation<'_>,
        max_cost: u64,
    ) -> Result<serde_json::Value, EvalError> {
        let mut meter = Meter::new(max_cost);
        let v = self.run(act, &mut meter)?;
        output::to_json(&v, &mut meter)
    }

    /// Evaluates to headers: a `map(string, string)` of at most [`MAX_HEADERS`] entries
    /// whose names (lower-cased) and values are valid for HTTP, else
    /// [`EvalError::InvalidOutput`]. In the map's key order.
    pub fn eval_headers(
        &self,
        act: &Activation<'_>,
        max_cost: u64,
    ) -> Result<Vec<(String, String)>, EvalError> {
        let mut meter = Meter::new(max_cost);
        let v = self.run(act, &mut meter)?;
        output::to_headers(&v, &mut meter)
    }

    fn run<'a>(&'a self, act: &Activation<'a>, meter: &mut Meter) -> Result<Value<'a>, EvalError> {
        let c = &self.inner.compiled;
        eval::run(&c.root, c.slots, act, meter)
    }

    /// The cost an evaluation spent, for the tests of the cost model.
    #[cfg(test)]
    pub(crate) fn cost_of(&self, act: &Activation<'_>) -> Result<u64, EvalError> {
        let mut meter = Meter::new(u64::MAX);
        self.run(act, &mut meter)?;
        Ok(meter.used())
    }
}
