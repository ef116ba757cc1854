//! The checked program the evaluator runs: the parser's AST lowered to a smaller tree with
//! identifiers resolved (activation variables by name, macro variables to slots), calls
//! resolved to builtins and `matches()` patterns compiled. Built once per config load and
//! then only read, from any thread.

use regex::Regex;

/// What a program produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A bool: whether the hook passes.
    Filter,
    /// Any JSON-able value: a transformed body.
    Value,
    /// A `map(string, string)` of headers to add.
    Headers,
}

#[derive(Debug)]
pub(crate) struct Compiled {
    pub(crate) root: Node,
    /// How many macro-variable slots evaluation needs (two per nesting level).
    pub(crate) slots: usize,
    pub(crate) reads_body: bool,
}

#[derive(Debug)]
pub(crate) enum Node {
    Lit(Lit),
    Var(Var),
    /// A macro variable: the iteration variable or the accumulator, by slot.
    Local(usize),
    List(Vec<Node>),
    Map(Vec<(Node, Node)>),
    /// `operand.field`, or `has(operand.field)` when `test`.
    Select {
        operand: Box<Node>,
        field: Box<str>,
        test: bool,
    },
    Index(Box<Node>, Box<Node>),
    Unary(UnOp, Box<Node>),
    Binary(BinOp, Box<Node>, Box<Node>),
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    Cond(Box<Node>, Box<Node>, Box<Node>),
    /// A builtin function; a method's receiver is the first argument.
    Call(Func, Vec<Node>),
    /// `subject.matches(regex)`; scanning costs `weight` times a plain string scan.
    Matches {
        subject: Box<Node>,
        regex: Regex,
        weight: u64,
    },
    Comprehension(Box<Comprehension>),
    /// `accumulator + [elem]` in a `map`/`filter` loop step: appends in place, so building
    /// an n-element result costs O(n) rather than the O(n²) of copying each step.
    Append {
        accu: usize,
        elem: Box<Node>,
    },
}

#[derive(Debug)]
pub(crate) struct Comprehension {
    pub(crate) range: Node,
    pub(crate) iter: usize,
    pub(crate) accu: usize,
    pub(crate) init: Node,
    pub(crate) cond: Node,
    pub(crate) step: Node,
    pub(crate) result: Node,
}

#[derive(Debug)]
pub(crate) enum Lit {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Double(f64),
    Str(Box<str>),
    Bytes(Box<[u8]>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Var {
    Body,
    Headers,
    Source,
    Tenant,
    Verification,
    ReceivedAt,
    Size,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnOp {
    Not,
    Neg,
    /// The macros' loop condition: false only for a false bool, so an error in one
    /// iteration does not stop `all`/`exists` from finding a deciding element later.
    NotStrictlyFalse,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
}

impl BinOp {
    pub(crate) fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::In => "in",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Func {
    Size,
    Contains,
    StartsWith,
    EndsWith,
    LowerAscii,
    UpperAscii,
    Int,
    Uint,
    Double,
    String,
}

impl Func {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Func::Size => "size",
            Func::Contains => "contains",
            Func::StartsWith => "startsWith",
            Func::EndsWith => "endsWith",
            Func::LowerAscii => "lowerAscii",
            Func::UpperAscii => "upperAscii",
            Func::Int => "int",
            Func::Uint => "uint",
            Func::Double => "double",
            Func::String => "string",
        }
    }
}
