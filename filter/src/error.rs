//! The crate's two error types: [`CompileError`], an expression refused at load with where,
//! and [`EvalError`], an evaluation that failed or was cut off. Evaluation errors name
//! operators, functions and types only, never a value: the hook's body and headers are
//! hostile and may be secret, and these messages end up in logs and metrics.

use thiserror::Error;

/// An expression refused by [`Program::compile`](crate::Program::compile). Line and column
/// are 1-based; the column counts characters.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("line {line}, column {column}: {message}")]
pub struct CompileError {
    pub line: u32,
    pub column: u32,
    pub message: String,
}

/// Why an evaluation produced no result.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EvalError {
    /// The evaluation spent its whole cost budget (see the crate docs for the cost model).
    #[error("the evaluation cost more than its limit")]
    CostExceeded,
    /// A string, list or map being built, or the output, would pass `MAX_VALUE_BYTES`.
    #[error("a value built by the expression would be larger than 1 MiB")]
    ValueTooLarge,
    /// `m.k` or `m[k]` on a map without that key.
    #[error("no such key")]
    NoSuchKey,
    /// An operator or function applied to values of types it has no meaning for.
    #[error("`{op}` does not apply to {found}")]
    TypeMismatch { op: String, found: String },
    /// Integer arithmetic or conversion out of range.
    #[error("integer overflow")]
    Overflow,
    #[error("division by zero")]
    DivisionByZero,
    #[error("list index out of range")]
    IndexOutOfRange,
    /// A function given a value of the right type it still cannot use (`int("x")`, a map
    /// literal with a repeated key).
    #[error("`{op}`: {reason}")]
    InvalidArgument { op: String, reason: String },
    /// The result cannot be the output asked for: a filter that is not a bool, a NaN in
    /// JSON, a header name that HTTP forbids.
    #[error("invalid output: {0}")]
    InvalidOutput(String),
}

impl EvalError {
    /// A snake_case label for metrics.
    pub fn class(&self) -> &'static str {
        match self {
            EvalError::CostExceeded => "cost_exceeded",
            EvalError::ValueTooLarge => "value_too_large",
            EvalError::NoSuchKey => "no_such_key",
            EvalError::TypeMismatch { .. } => "type_mismatch",
            EvalError::Overflow => "overflow",
            EvalError::DivisionByZero => "division_by_zero",
            EvalError::IndexOutOfRange => "index_out_of_range",
            EvalError::InvalidArgument { .. } => "invalid_argument",
            EvalError::InvalidOutput(_) => "invalid_output",
        }
    }

    /// Limit errors end the evaluation: `&&`, `||` and macro accumulators absorb other
    /// errors (CEL's commutative logic), but absorbing these would let an expression keep
    /// spending after its budget ran out.
    pub(crate) fn is_fatal(&self) -> bool {
        matches!(self, EvalError::CostExceeded | EvalError::ValueTooLarge)
    }

    pub(crate) fn mismatch(op: &str, found: &[&str]) -> Self {
        EvalError::TypeMismatch {
            op: op.to_owned(),
            found: found.join(", "),
        }
    }

    pub(crate) fn invalid(op: &str, reason: &str) -> Self {
        EvalError::InvalidArgument {
            op: op.to_owned(),
            reason: reason.to_owned(),
        }
    }
}
