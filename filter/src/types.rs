//! Static types and the typing rules of the supported operators and functions. `Dyn` stands
//! for anything not known before evaluation (the body, or an element of it): a rule refuses
//! only what is certain to fail, so every `Dyn` operand passes and is checked at run time.

use std::fmt;

use crate::ir::{BinOp, Func, UnOp};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ty {
    Dyn,
    Null,
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    List(Box<Ty>),
    Map(Box<Ty>, Box<Ty>),
}

impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ty::Dyn => f.write_str("dyn"),
            Ty::Null => f.write_str("null"),
            Ty::Bool => f.write_str("bool"),
            Ty::Int => f.write_str("int"),
            Ty::Uint => f.write_str("uint"),
            Ty::Double => f.write_str("double"),
            Ty::String => f.write_str("string"),
            Ty::Bytes => f.write_str("bytes"),
            Ty::List(e) => write!(f, "list({e})"),
            Ty::Map(k, v) => write!(f, "map({k}, {v})"),
        }
    }
}

impl Ty {
    pub(crate) fn list(elem: Ty) -> Ty {
        Ty::List(Box::new(elem))
    }

    pub(crate) fn map(key: Ty, value: Ty) -> Ty {
        Ty::Map(Box::new(key), Box::new(value))
    }

    fn is_numeric(&self) -> bool {
        matches!(self, Ty::Int | Ty::Uint | Ty::Double)
    }

    /// A string, or possibly one.
    pub(crate) fn stringy(&self) -> bool {
        matches!(self, Ty::String | Ty::Dyn)
    }

    fn boolish(&self) -> bool {
        matches!(self, Ty::Bool | Ty::Dyn)
    }
}

/// The type of a value that is `a` or `b`: the type both share, else `Dyn`.
pub(crate) fn join(a: &Ty, b: &Ty) -> Ty {
    match (a, b) {
        _ if a == b => a.clone(),
        (Ty::List(x), Ty::List(y)) => Ty::list(join(x, y)),
        (Ty::Map(k1, v1), Ty::Map(k2, v2)) => Ty::map(join(k1, k2), join(v1, v2)),
        _ => Ty::Dyn,
    }
}

pub(crate) fn join_all<'t>(mut tys: impl Iterator<Item = &'t Ty>) -> Ty {
    match tys.next() {
        None => Ty::Dyn,
        Some(first) => tys.fold(first.clone(), |acc, t| join(&acc, t)),
    }
}

pub(crate) fn unary(op: UnOp, t: &Ty) -> Result<Ty, String> {
    match op {
        UnOp::Not if t.boolish() => Ok(Ty::Bool),
        UnOp::Neg if matches!(t, Ty::Int | Ty::Double | Ty::Dyn) => Ok(t.clone()),
        UnOp::NotStrictlyFalse => Ok(Ty::Bool),
        UnOp::Not => Err(format!("`!` does not apply to {t}")),
        UnOp::Neg => Err(format!("`-` does not apply to {t}")),
    }
}

pub(crate) fn logic(op: &str, l: &Ty, r: &Ty) -> Result<Ty, String> {
    if l.boolish() && r.boolish() {
        Ok(Ty::Bool)
    } else {
        Err(format!("`{op}` does not apply to {l} and {r}"))
    }
}

pub(crate) fn conditional(c: &Ty, t: &Ty, f: &Ty) -> Result<Ty, String> {
    if c.boolish() {
        Ok(join(t, f))
    } else {
        Err(format!("the condition of `?:` must be a bool, this is {c}"))
    }
}

pub(crate) fn binary(op: BinOp, l: &Ty, r: &Ty) -> Result<Ty, String> {
    let found = match op {
        // Equality is heterogeneous: values of different types are simply not equal.
        BinOp::Eq | BinOp::Ne => return Ok(Ty::Bool),
        BinOp::In => {
            return match r {
                Ty::List(_) | Ty::Map(..) | Ty::Dyn => Ok(Ty::Bool),
                _ => Err(format!(
                    "`in` needs a list or a map on its right, this is {r}"
                )),
            };
        }
        BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => orderable(l, r).then_some(Ty::Bool),
        BinOp::Add => add(l, r),
        BinOp::Sub | BinOp::Mul | BinOp::Div => arith(l, r, true),
        BinOp::Rem => arith(l, r, false),
    };
    found.ok_or_else(|| format!("`{}` does not apply to {l} and {r}", op.symbol()))
}

fn orderable(l: &Ty, r: &Ty) -> bool {
    let scalar = |t: &Ty| {
        matches!(
            t,
            Ty::Dyn | Ty::Bool | Ty::Int | Ty::Uint | Ty::Double | Ty::String | Ty::Bytes
        )
    };
    scalar(l)
        && scalar(r)
        && (*l == Ty::Dyn || *r == Ty::Dyn || l == r || (l.is_numeric() && r.is_numeric()))
}

fn add(l: &Ty, r: &Ty) -> Option<Ty> {
    let summable = |t: &Ty| matches!(t, Ty::Int | Ty::Uint | Ty::Double | Ty::String | Ty::Bytes);
    match (l, r) {
        (Ty::Dyn, Ty::Dyn) => Some(Ty::Dyn),
        (Ty::Dyn, Ty::List(_)) | (Ty::List(_), Ty::Dyn) => Some(Ty::list(Ty::Dyn)),
        (Ty::Dyn, t) | (t, Ty::Dyn) => summable(t).then(|| t.clone()),
        (Ty::List(a), Ty::List(b)) => Some(Ty::list(join(a, b))),
        _ => (l == r && summable(l)).then(|| l.clone()),
    }
}

fn arith(l: &Ty, r: &Ty, double_ok: bool) -> Option<Ty> {
    let ok = |t: &Ty| matches!(t, Ty::Int | Ty::Uint) || (double_ok && *t == Ty::Double);
    match (l, r) {
        (Ty::Dyn, Ty::Dyn) => Some(Ty::Dyn),
        (Ty::Dyn, t) | (t, Ty::Dyn) => ok(t).then(|| t.clone()),
        _ => (l == r && ok(l)).then(|| l.clone()),
    }
}

/// A type a map key can have (CEL: bool, int, uint, string).
pub(crate) fn key_type(t: &Ty) -> bool {
    matches!(t, Ty::Dyn | Ty::Bool | Ty::Int | Ty::Uint | Ty::String)
}

pub(crate) fn index(c: &Ty, i: &Ty) -> Result<Ty, String> {
    match c {
        Ty::List(e) if matches!(i, Ty::Int | Ty::Uint | Ty::Dyn) => Ok((**e).clone()),
        Ty::List(_) => Err(format!("a list is indexed by an int, not {i}")),
        Ty::Map(k, v) => {
            let same_kind = **k == Ty::Dyn
                || *i == Ty::Dyn
                || **k == *i
                || (matches!(**k, Ty::Int | Ty::Uint) && matches!(i, Ty::Int | Ty::Uint));
            if key_type(i) && same_kind {
                Ok((**v).clone())
            } else {
                Err(format!("a {c} is indexed by {k}, not {i}"))
            }
        }
        Ty::Dyn if key_type(i) => Ok(Ty::Dyn),
        Ty::Dyn => Err(format!("nothing is indexed by {i}")),
        _ => Err(format!("`[]` does not apply to {c}")),
    }
}

/// `operand.field`, or `has(operand.field)` when `test`. `has()` on null is false rather
/// than an error, so `has(body.x)` works on a hook whose body is not JSON.
pub(crate) fn select(t: &Ty, field: &str, test: bool) -> Result<Ty, String> {
    match t {
        Ty::Map(k, v) if k.stringy() => Ok(if test { Ty::Bool } else { (**v).clone() }),
        Ty::Dyn => Ok(if test { Ty::Bool } else { Ty::Dyn }),
        Ty::Null if test => Ok(Ty::Bool),
        _ if test => Err(format!(
            "has() tests a field of a map, `{field}` is on a {t}"
        )),
        _ => Err(format!("`.{field}` selects a field of a map, this is {t}")),
    }
}

/// The type of a macro's iteration variable: a list's elements, a map's keys.
pub(crate) fn iter_elem(t: &Ty) -> Result<Ty, String> {
    match t {
        Ty::List(e) => Ok((**e).clone()),
        Ty::Map(k, _) => Ok((**k).clone()),
        Ty::Dyn => Ok(Ty::Dyn),
        _ => Err(format!("a macro iterates a list or a map, this is {t}")),
    }
}

/// Why a call was refused: the call itself (unknown, arity, receiver), or one argument.
pub(crate) enum CallError {
    Call(String),
    Arg(usize, String),
}

/// How the call of a known function is written, for the messages of misuses.
pub(crate) fn usage(name: &str) -> Option<&'static str> {
    Some(match name {
        "size" => "size(x) or x.size()",
        "contains" => "s.contains(t)",
        "startsWith" => "s.startsWith(t)",
        "endsWith" => "s.endsWith(t)",
        "lowerAscii" => "s.lowerAscii()",
        "upperAscii" => "s.upperAscii()",
        "matches" => "s.matches(\"pattern\") or matches(s, \"pattern\")",
        "int" => "int(x)",
        "uint" => "uint(x)",
        "double" => "double(x)",
        "string" => "string(x)",
        "has" => "has(m.field)",
        "all" => "list.all(x, predicate)",
        "exists" => "list.exists(x, predicate)",
        "exists_one" | "existsOne" => "list.exists_one(x, predicate)",
        "map" => "list.map(x, expr) or list.map(x, predicate, expr)",
        "filter" => "list.filter(x, predicate)",
        _ => return None,
    })
}

/// Resolves the call `name(args)`, or `recv.name(args)`, to a builtin and its result type.
pub(crate) fn function(
    name: &str,
    recv: Option<&Ty>,
    args: &[Ty],
) -> Result<(Func, Ty), CallError> {
    let sized = |t: &Ty| {
        matches!(
            t,
            Ty::Dyn | Ty::String | Ty::Bytes | Ty::List(_) | Ty::Map(..)
        )
    };
    let not_for = |f: &str, t: &Ty| CallError::Call(format!("`{f}` does not apply to {t}"));
    match (name, recv, args) {
        ("size", None, [a]) if sized(a) => Ok((Func::Size, Ty::Int)),
        ("size", None, [a]) => Err(CallError::Arg(0, format!("`size` does not apply to {a}"))),
        ("size", Some(r), []) if sized(r) => Ok((Func::Size, Ty::Int)),
        ("size", Some(r), []) => Err(not_for(name, r)),
        ("contains" | "startsWith" | "endsWith", Some(r), [a]) => {
            if !r.stringy() {
                return Err(not_for(name, r));
            }
            if !a.stringy() {
                return Err(CallError::Arg(
                    0,
                    format!("`{name}` takes a string, not {a}"),
                ));
            }
            let f = match name {
                "contains" => Func::Contains,
                "startsWith" => Func::StartsWith,
                _ => Func::EndsWith,
            };
            Ok((f, Ty::Bool))
        }
        ("lowerAscii" | "upperAscii", Some(r), []) if r.stringy() => {
            let f = if name == "lowerAscii" {
                Func::LowerAscii
            } else {
                Func::UpperAscii
            };
            Ok((f, Ty::String))
        }
        ("lowerAscii" | "upperAscii", Some(r), []) => Err(not_for(name, r)),
        ("int" | "uint" | "double" | "string", None, [a]) => {
            let (f, out) = match name {
                "int" => (Func::Int, Ty::Int),
                "uint" => (Func::Uint, Ty::Uint),
                "double" => (Func::Double, Ty::Double),
                _ => (Func::String, Ty::String),
            };
            let ok = match a {
                Ty::Dyn | Ty::Int | Ty::Uint | Ty::Double | Ty::String => true,
                Ty::Bytes | Ty::Bool => f == Func::String,
                _ => false,
            };
            if ok {
                Ok((f, out))
            } else {
                Err(CallError::Arg(0, format!("`{name}` cannot convert {a}")))
            }
        }
        _ => Err(CallError::Call(match usage(name) {
            Some(how) => format!("`{name}` is not called like this; write {how}"),
            None => format!("unknown function `{name}`"),
        })),
    }
}
