//! The operators and builtin functions over runtime values. Each charges the meter and
//! checks sizes before it allocates, so a chain like `s + s + s` over a large body string
//! stops at the limit instead of after building the value.

use std::cmp::Ordering;
use std::rc::Rc;

use regex::Regex;

use crate::cost::{Meter, check_size};
use crate::error::EvalError;
use crate::ir::{BinOp, Func};
use crate::limits::ELEM_BYTES;
use crate::value::{Bytes, Key, List, OwnedList, Str, Value, compare, equals};

fn mismatch(op: &str, values: &[&Value<'_>]) -> EvalError {
    let names: Vec<&str> = values.iter().map(|v| v.type_name()).collect();
    EvalError::mismatch(op, &names)
}

fn int_len(n: usize) -> Value<'static> {
    Value::Int(i64::try_from(n).unwrap_or(i64::MAX))
}

pub(crate) fn binary<'a>(
    op: BinOp,
    l: Value<'a>,
    r: Value<'a>,
    m: &mut Meter,
) -> Result<Value<'a>, EvalError> {
    let sym = op.symbol();
    let ordered = |m: &mut Meter, accept: fn(Ordering) -> bool| {
        compare(&l, &r, m, sym).map(|o| Value::Bool(o.is_some_and(accept)))
    };
    match op {
        BinOp::Eq => Ok(Value::Bool(equals(&l, &r, m, 0)?)),
        BinOp::Ne => Ok(Value::Bool(!equals(&l, &r, m, 0)?)),
        BinOp::Lt => ordered(m, Ordering::is_lt),
        BinOp::Le => ordered(m, Ordering::is_le),
        BinOp::Gt => ordered(m, Ordering::is_gt),
        BinOp::Ge => ordered(m, Ordering::is_ge),
        BinOp::In => contained(&l, &r, m).map(Value::Bool),
        BinOp::Add => add(l, r, m),
        BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Rem => arith(op, &l, &r),
    }
}

fn arith<'a>(op: BinOp, l: &Value<'a>, r: &Value<'a>) -> Result<Value<'a>, EvalError> {
    let zero = || EvalError::DivisionByZero;
    match (l, r) {
        (Value::Int(a), Value::Int(b)) => {
            let (a, b) = (*a, *b);
            let out = match op {
                BinOp::Sub => a.checked_sub(b),
                BinOp::Mul => a.checked_mul(b),
                BinOp::Div if b == 0 => return Err(zero()),
                BinOp::Div => a.checked_div(b),
                BinOp::Rem if b == 0 => return Err(zero()),
                BinOp::Rem => a.checked_rem(b),
                _ => a.checked_add(b),
            };
            out.map(Value::Int).ok_or(EvalError::Overflow)
        }
        (Value::Uint(a), Value::Uint(b)) => {
            let (a, b) = (*a, *b);
            let out = match op {
                BinOp::Sub => a.checked_sub(b),
                BinOp::Mul => a.checked_mul(b),
                BinOp::Div | BinOp::Rem if b == 0 => return Err(zero()),
                BinOp::Div => a.checked_div(b),
                BinOp::Rem => a.checked_rem(b),
                _ => a.checked_add(b),
            };
            out.map(Value::Uint).ok_or(EvalError::Overflow)
        }
        (Value::Double(a), Value::Double(b)) => match op {
            BinOp::Sub => Ok(Value::Double(a - b)),
            BinOp::Mul => Ok(Value::Double(a * b)),
            // IEEE: x / 0.0 is an infinity, which only the output conversion refuses.
            BinOp::Div => Ok(Value::Double(a / b)),
            _ => Err(mismatch(op.symbol(), &[l, r])),
        },
        _ => Err(mismatch(op.symbol(), &[l, r])),
    }
}

fn add<'a>(l: Value<'a>, r: Value<'a>, m: &mut Meter) -> Result<Value<'a>, EvalError> {
    match (l, r) {
        (Value::Int(a), Value::Int(b)) => {
            a.checked_add(b).map(Value::Int).ok_or(EvalError::Overflow)
        }
        (Value::Uint(a), Value::Uint(b)) => {
            a.checked_add(b).map(Value::Uint).ok_or(EvalError::Overflow)
        }
        (Value::Double(a), Value::Double(b)) => Ok(Value::Double(a + b)),
        (Value::Str(a), Value::Str(b)) => {
            let (a, b) = (a.as_str(), b.as_str());
            let len = a.len().saturating_add(b.len());
            check_size(len)?;
            m.charge_len(len)?;
            let mut s = String::with_capacity(len);
            s.push_str(a);
            s.push_str(b);
            Ok(Value::string(s))
        }
        (Value::Bytes(a), Value::Bytes(b)) => {
            let (a, b) = (a.as_slice(), b.as_slice());
            let len = a.len().saturating_add(b.len());
            check_size(len)?;
            m.charge_len(len)?;
            let mut v = Vec::with_capacity(len);
            v.extend_from_slice(a);
            v.extend_from_slice(b);
            Ok(Value::Bytes(Bytes::Own(Rc::from(v))))
        }
        (Value::List(a), Value::List(b)) => concat(a, b, m),
        (l, r) => Err(mismatch("+", &[&l, &r])),
    }
}

/// `a + b` on lists: extends `a` in place when nothing else holds it (charging `b`'s
/// items), else copies both (charging all items).
fn concat<'a>(a: List<'a>, b: List<'a>, m: &mut Meter) -> Result<Value<'a>, EvalError> {
    let bytes = a.bytes().saturating_add(b.bytes());
    check_size(bytes)?;
    if let List::Own(mut rc) = a {
        if let Some(owned) = Rc::get_mut(&mut rc) {
            m.charge_count(b.len())?;
            owned.items.extend(b.iter());
            owned.bytes = bytes;
            return Ok(Value::List(List::Own(rc)));
        }
        return concat_copy(&List::Own(rc), &b, bytes, m);
    }
    concat_copy(&a, &b, bytes, m)
}

fn concat_copy<'a>(
    a: &List<'a>,
    b: &List<'a>,
    bytes: usize,
    m: &mut Meter,
) -> Result<Value<'a>, EvalError> {
    m.charge_count(a.len().saturating_add(b.len()))?;
    let mut items = Vec::with_capacity(a.len() + b.len());
    items.extend(a.iter());
    items.extend(b.iter());
    Ok(Value::List(List::Own(Rc::new(OwnedList { items, bytes }))))
}

/// Appends one item to a macro's accumulator list, in place when the accumulator is not
/// shared (the evaluator takes it out of its slot for this).
pub(crate) fn append<'a>(
    acc: Value<'a>,
    item: Value<'a>,
    m: &mut Meter,
) -> Result<Value<'a>, EvalError> {
    let Value::List(list) = acc else {
        return Err(mismatch("+", &[&acc, &Value::List(List::Json(&[]))]));
    };
    let bytes = list
        .bytes()
        .saturating_add(ELEM_BYTES)
        .saturating_add(item.heap_bytes());
    check_size(bytes)?;
    let mut rc = match list {
        List::Own(rc) => rc,
        json @ List::Json(_) => {
            m.charge_count(json.len())?;
            Rc::new(OwnedList {
                items: json.iter().collect(),
                bytes: json.bytes(),
            })
        }
    };
    if Rc::get_mut(&mut rc).is_none() {
        m.charge_count(rc.items.len())?;
    }
    m.charge(1)?;
    let owned = Rc::make_mut(&mut rc);
    owned.items.push(item);
    owned.bytes = bytes;
    Ok(Value::List(List::Own(rc)))
}

/// `x in list` (by `==`) and `k in map` (by key).
fn contained<'a>(x: &Value<'a>, container: &Value<'a>, m: &mut Meter) -> Result<bool, EvalError> {
    match container {
        Value::List(list) => {
            for item in list.iter() {
                m.charge(1)?;
                if equals(x, &item, m, 0)? {
                    return Ok(true);
                }
            }
            Ok(false)
        }
        Value::Map(map) => Ok(match Key::for_lookup(x, "in")? {
            Some(k) => map.get(&k).is_some(),
            None => false,
        }),
        _ => Err(mismatch("in", &[x, container])),
    }
}

pub(crate) fn index<'a>(c: Value<'a>, i: Value<'a>) -> Result<Value<'a>, EvalError> {
    match (&c, &i) {
        (Value::List(l), Value::Int(_) | Value::Uint(_)) => {
            let at = match i {
                Value::Int(n) => usize::try_from(n).ok(),
                Value::Uint(n) => usize::try_from(n).ok(),
                _ => None,
            };
            at.and_then(|at| l.get(at))
                .ok_or(EvalError::IndexOutOfRange)
        }
        (Value::Map(map), _) => match Key::for_lookup(&i, "[]")? {
            Some(k) => map.get(&k).ok_or(EvalError::NoSuchKey),
            None => Err(EvalError::NoSuchKey),
        },
        _ => Err(mismatch("[]", &[&c, &i])),
    }
}

pub(crate) fn size<'a>(v: &Value<'a>, m: &mut Meter) -> Result<Value<'a>, EvalError> {
    match v {
        Value::Str(s) => {
            let s = s.as_str();
            m.charge_len(s.len())?;
            Ok(int_len(s.chars().count()))
        }
        Value::Bytes(b) => Ok(int_len(b.as_slice().len())),
        Value::List(l) => Ok(int_len(l.len())),
        Value::Map(map) => Ok(int_len(map.len())),
        other => Err(mismatch("size", &[other])),
    }
}

/// contains, startsWith, endsWith: charged for scanning the receiver.
pub(crate) fn string_test<'a>(
    f: Func,
    recv: &Value<'a>,
    arg: &Value<'a>,
    m: &mut Meter,
) -> Result<Value<'a>, EvalError> {
    let (Value::Str(s), Value::Str(t)) = (recv, arg) else {
        return Err(mismatch(f.name(), &[recv, arg]));
    };
    let (s, t) = (s.as_str(), t.as_str());
    m.charge_len(s.len())?;
    let found = match f {
        Func::StartsWith => s.starts_with(t),
        Func::EndsWith => s.ends_with(t),
        _ => s.contains(t),
    };
    Ok(Value::Bool(found))
}

/// lowerAscii, upperAscii: charged for the scan and for the new string.
pub(crate) fn ascii_case<'a>(
    f: Func,
    recv: &Value<'a>,
    m: &mut Meter,
) -> Result<Value<'a>, EvalError> {
    let Value::Str(s) = recv else {
        return Err(mismatch(f.name(), &[recv]));
    };
    let s = s.as_str();
    check_size(s.len())?;
    m.charge_len(s.len())?;
    m.charge_len(s.len())?;
    Ok(Value::string(if f == Func::UpperAscii {
        s.to_ascii_uppercase()
    } else {
        s.to_ascii_lowercase()
    }))
}

/// `matches`: an unanchored search, like RE2's partial match; charged `weight` times the
/// scan of a string (see `REGEX_WEIGHT_UNIT`).
pub(crate) fn matches<'a>(
    recv: &Value<'a>,
    re: &Regex,
    weight: u64,
    m: &mut Meter,
) -> Result<Value<'a>, EvalError> {
    let Value::Str(s) = recv else {
        return Err(mismatch("matches", &[recv]));
    };
    let s = s.as_str();
    m.charge(
        u64::try_from(s.len())
            .unwrap_or(u64::MAX)
            .div_ceil(8)
            .saturating_mul(weight),
    )?;
    Ok(Value::Bool(re.is_match(s)))
}

pub(crate) fn convert<'a>(f: Func, v: Value<'a>, m: &mut Meter) -> Result<Value<'a>, EvalError> {
    let name = f.name();
    let unparsable = |what: &str| EvalError::invalid(name, &format!("the string is not {what}"));
    match (f, v) {
        (Func::Int, Value::Int(i)) => Ok(Value::Int(i)),
        (Func::Int, Value::Uint(u)) => i64::try_from(u)
            .map(Value::Int)
            .map_err(|_| EvalError::Overflow),
        // The range check is on the truncated value; NaN fails both comparisons.
        (Func::Int, Value::Double(d))
            if (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&d) =>
        {
            Ok(Value::Int(d as i64))
        }
        (Func::Int, Value::Double(_)) => Err(EvalError::Overflow),
        (Func::Int, Value::Str(s)) => {
            m.charge_len(s.as_str().len())?;
            s.as_str()
                .parse()
                .map(Value::Int)
                .map_err(|_| unparsable("an int"))
        }
        (Func::Uint, Value::Uint(u)) => Ok(Value::Uint(u)),
        (Func::Uint, Value::Int(i)) => u64::try_from(i)
            .map(Value::Uint)
            .map_err(|_| EvalError::Overflow),
        (Func::Uint, Value::Double(d)) if d > -1.0 && d < 18_446_744_073_709_551_616.0 => {
            Ok(Value::Uint(d as u64))
        }
        (Func::Uint, Value::Double(_)) => Err(EvalError::Overflow),
        (Func::Uint, Value::Str(s)) => {
            m.charge_len(s.as_str().len())?;
            s.as_str()
                .parse()
                .map(Value::Uint)
                .map_err(|_| unparsable("a uint"))
        }
        (Func::Double, Value::Double(d)) => Ok(Value::Double(d)),
        (Func::Double, Value::Int(i)) => Ok(Value::Double(i as f64)),
        (Func::Double, Value::Uint(u)) => Ok(Value::Double(u as f64)),
        (Func::Double, Value::Str(s)) => {
            m.charge_len(s.as_str().len())?;
            s.as_str()
                .parse()
                .map(Value::Double)
                .map_err(|_| unparsable("a double"))
        }
        (Func::String, Value::Str(s)) => Ok(Value::Str(s)),
        (Func::String, Value::Bytes(b)) => {
            let b = b.as_slice();
            check_size(b.len())?;
            m.charge_len(b.len())?;
            let s = std::str::from_utf8(b)
                .map_err(|_| EvalError::invalid(name, "the bytes are not UTF-8"))?;
            Ok(Value::string(s.to_owned()))
        }
        (Func::String, Value::Bool(b)) => {
            Ok(Value::Str(Str::Ref(if b { "true" } else { "false" })))
        }
        (Func::String, v @ (Value::Int(_) | Value::Uint(_) | Value::Double(_))) => {
            let s = match v {
                Value::Int(i) => i.to_string(),
                Value::Uint(u) => u.to_string(),
                Value::Double(d) => d.to_string(),
                _ => String::new(),
            };
            m.charge_len(s.len())?;
            Ok(Value::string(s))
        }
        (_, v) => Err(mismatch(name, &[&v])),
    }
}
