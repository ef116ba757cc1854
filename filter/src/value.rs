//! Runtime values of one evaluation. Strings, lists and maps either borrow (from the hook's
//! JSON body, the activation or the program's literals: `'a`) or are built by the
//! evaluation and reference-counted, so reading `body.data.object` never copies and passing
//! a built list around never clones it. Also equality and ordering, which are charged to
//! the meter because comparing two large lists is work the expression asked for.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::rc::Rc;

use serde_json::Value as Json;

use crate::cost::Meter;
use crate::error::EvalError;
use crate::limits::{ELEM_BYTES, MAX_VALUE_DEPTH};

#[derive(Clone, Debug)]
pub(crate) enum Value<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Double(f64),
    Str(Str<'a>),
    Bytes(Bytes<'a>),
    List(List<'a>),
    Map(Map<'a>),
}

#[derive(Clone, Debug)]
pub(crate) enum Str<'a> {
    Ref(&'a str),
    Own(Rc<str>),
}

#[derive(Clone, Debug)]
pub(crate) enum Bytes<'a> {
    Ref(&'a [u8]),
    Own(Rc<[u8]>),
}

#[derive(Clone, Debug)]
pub(crate) enum List<'a> {
    Json(&'a [Json]),
    Own(Rc<OwnedList<'a>>),
}

#[derive(Clone, Debug, Default)]
pub(crate) struct OwnedList<'a> {
    pub(crate) items: Vec<Value<'a>>,
    /// Size estimate: `ELEM_BYTES` per item plus what the items own.
    pub(crate) bytes: usize,
}

#[derive(Clone, Debug)]
pub(crate) enum Map<'a> {
    Json(&'a serde_json::Map<String, Json>),
    Own(Rc<OwnedMap<'a>>),
}

#[derive(Clone, Debug, Default)]
pub(crate) struct OwnedMap<'a> {
    pub(crate) entries: BTreeMap<Key<'a>, Value<'a>>,
    pub(crate) bytes: usize,
}

/// A map key. Ints and uints with the same value are the same key (CEL's numeric keys).
#[derive(Clone, Debug)]
pub(crate) enum Key<'a> {
    Bool(bool),
    Int(i64),
    Uint(u64),
    Str(Str<'a>),
}

impl<'a> Value<'a> {
    /// The JSON value as a CEL value, in O(1): arrays and objects stay borrowed.
    pub(crate) fn from_json(j: &'a Json) -> Self {
        match j {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Bool(*b),
            Json::Number(n) => {
                if let Some(i) = n.as_i64() {
                    Value::Int(i)
                } else if let Some(u) = n.as_u64() {
                    Value::Uint(u)
                } else {
                    Value::Double(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            Json::String(s) => Value::Str(Str::Ref(s)),
            Json::Array(a) => Value::List(List::Json(a)),
            Json::Object(m) => Value::Map(Map::Json(m)),
        }
    }

    pub(crate) fn string(s: String) -> Self {
        Value::Str(Str::Own(Rc::from(s)))
    }

    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Uint(_) => "uint",
            Value::Double(_) => "double",
            Value::Str(_) => "string",
            Value::Bytes(_) => "bytes",
            Value::List(_) => "list",
            Value::Map(_) => "map",
        }
    }

    /// Bytes this value owns beyond its own slot (borrowed data costs nothing to hold).
    pub(crate) fn heap_bytes(&self) -> usize {
        match self {
            Value::Str(Str::Own(s)) => s.len(),
            Value::Bytes(Bytes::Own(b)) => b.len(),
            Value::List(List::Own(l)) => l.bytes,
            Value::Map(Map::Own(m)) => m.bytes,
            _ => 0,
        }
    }

    fn is_number(&self) -> bool {
        matches!(self, Value::Int(_) | Value::Uint(_) | Value::Double(_))
    }
}

impl Str<'_> {
    pub(crate) fn as_str(&self) -> &str {
        match self {
            Str::Ref(s) => s,
            Str::Own(s) => s,
        }
    }
}

impl Bytes<'_> {
    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            Bytes::Ref(b) => b,
            Bytes::Own(b) => b,
        }
    }
}

impl<'a> List<'a> {
    pub(crate) fn len(&self) -> usize {
        match self {
            List::Json(a) => a.len(),
            List::Own(l) => l.items.len(),
        }
    }

    pub(crate) fn get(&self, i: usize) -> Option<Value<'a>> {
        match self {
            List::Json(a) => a.get(i).map(Value::from_json),
            List::Own(l) => l.items.get(i).cloned(),
        }
    }

    /// The size estimate of the list's items.
    pub(crate) fn bytes(&self) -> usize {
        match self {
            List::Json(a) => a.len().saturating_mul(ELEM_BYTES),
            List::Own(l) => l.bytes,
        }
    }

    pub(crate) fn iter(&self) -> Iter<'a> {
        match self {
            List::Json(a) => Iter::Json(a.iter()),
            List::Own(l) => Iter::Own(Rc::clone(l), 0),
        }
    }
}

impl<'a> Map<'a> {
    pub(crate) fn len(&self) -> usize {
        match self {
            Map::Json(m) => m.len(),
            Map::Own(m) => m.entries.len(),
        }
    }

    pub(crate) fn get(&self, key: &Key<'a>) -> Option<Value<'a>> {
        match (self, key) {
            (Map::Json(m), Key::Str(s)) => m.get(s.as_str()).map(Value::from_json),
            (Map::Json(_), _) => None,
            (Map::Own(m), _) => m.entries.get(key).cloned(),
        }
    }

    pub(crate) fn get_field(&self, field: &'a str) -> Option<Value<'a>> {
        self.get(&Key::Str(Str::Ref(field)))
    }

    /// The map's entries, copied out (cheap: values are borrowed or reference-counted).
    pub(crate) fn entries(&self) -> Vec<(Key<'a>, Value<'a>)> {
        match self {
            Map::Json(m) => m
                .iter()
                .map(|(k, v)| (Key::Str(Str::Ref(k)), Value::from_json(v)))
                .collect(),
            Map::Own(m) => m
                .entries
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }

    /// The map's keys, as a macro iterates them.
    pub(crate) fn keys(&self) -> Iter<'a> {
        match self {
            Map::Json(m) => Iter::JsonKeys(m.keys()),
            // Built maps are small (literals, headers): listing their keys is cheap.
            Map::Own(m) => Iter::Keys(m.entries.keys().cloned().collect::<Vec<_>>().into_iter()),
        }
    }
}

pub(crate) enum Iter<'a> {
    Json(std::slice::Iter<'a, Json>),
    Own(Rc<OwnedList<'a>>, usize),
    JsonKeys(serde_json::map::Keys<'a>),
    Keys(std::vec::IntoIter<Key<'a>>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = Value<'a>;

    fn next(&mut self) -> Option<Value<'a>> {
        match self {
            Iter::Json(it) => it.next().map(Value::from_json),
            Iter::Own(l, i) => {
                let item = l.items.get(*i).cloned();
                *i += 1;
                item
            }
            Iter::JsonKeys(it) => it.next().map(|k| Value::Str(Str::Ref(k))),
            Iter::Keys(it) => it.next().map(|k| k.into_value()),
        }
    }
}

impl<'a> Key<'a> {
    /// The key a map literal entry gets; CEL keys are bool, int, uint or string.
    pub(crate) fn for_insert(v: &Value<'a>) -> Result<Key<'a>, EvalError> {
        match v {
            Value::Bool(b) => Ok(Key::Bool(*b)),
            Value::Int(i) => Ok(Key::Int(*i)),
            Value::Uint(u) => Ok(Key::Uint(*u)),
            Value::Str(s) => Ok(Key::Str(s.clone())),
            other => Err(EvalError::mismatch("map key", &[other.type_name()])),
        }
    }

    /// The key a lookup (`m[k]`, `k in m`) looks for; `None` when no key can equal it (a
    /// double with a fraction). Numbers are compared by value, like `==`.
    pub(crate) fn for_lookup(v: &Value<'a>, op: &str) -> Result<Option<Key<'a>>, EvalError> {
        match v {
            Value::Double(d) => Ok(integral(*d)),
            Value::Bool(_) | Value::Int(_) | Value::Uint(_) | Value::Str(_) => {
                Key::for_insert(v).map(Some)
            }
            other => Err(EvalError::mismatch(op, &["map", other.type_name()])),
        }
    }

    pub(crate) fn into_value(self) -> Value<'a> {
        match self {
            Key::Bool(b) => Value::Bool(b),
            Key::Int(i) => Value::Int(i),
            Key::Uint(u) => Value::Uint(u),
            Key::Str(s) => Value::Str(s),
        }
    }

    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Key::Str(s) => Some(s.as_str()),
            _ => None,
        }
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        match self {
            Key::Str(Str::Own(s)) => s.len(),
            _ => 0,
        }
    }

    fn rank(&self) -> (u8, i128) {
        match self {
            Key::Bool(b) => (0, i128::from(*b)),
            Key::Int(i) => (1, i128::from(*i)),
            Key::Uint(u) => (1, i128::from(*u)),
            Key::Str(_) => (2, 0),
        }
    }
}

fn integral(d: f64) -> Option<Key<'static>> {
    if d.fract() != 0.0 || !d.is_finite() {
        return None;
    }
    if (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&d) {
        Some(Key::Int(d as i64))
    } else if (0.0..18_446_744_073_709_551_616.0).contains(&d) {
        Some(Key::Uint(d as u64))
    } else {
        None
    }
}

impl Ord for Key<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Key::Str(a), Key::Str(b)) => a.as_str().cmp(b.as_str()),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl PartialOrd for Key<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Key<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Key<'_> {}

/// Numeric comparison across int, uint and double, exact (no rounding of large ints);
/// `None` when a double is NaN or a value is not a number.
pub(crate) fn num_cmp(a: &Value<'_>, b: &Value<'_>) -> Option<Ordering> {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => Some(x.cmp(y)),
        (Value::Uint(x), Value::Uint(y)) => Some(x.cmp(y)),
        (Value::Int(x), Value::Uint(y)) => Some(i128::from(*x).cmp(&i128::from(*y))),
        (Value::Uint(x), Value::Int(y)) => Some(i128::from(*x).cmp(&i128::from(*y))),
        (Value::Double(x), Value::Double(y)) => x.partial_cmp(y),
        (Value::Int(x), Value::Double(y)) => int_double(i128::from(*x), *y),
        (Value::Uint(x), Value::Double(y)) => int_double(i128::from(*x), *y),
        (Value::Double(x), Value::Int(y)) => int_double(i128::from(*y), *x).map(Ordering::reverse),
        (Value::Double(x), Value::Uint(y)) => int_double(i128::from(*y), *x).map(Ordering::reverse),
        _ => None,
    }
}

/// Compares integer `i` with double `d` without converting `i` to a (rounding) double.
fn int_double(i: i128, d: f64) -> Option<Ordering> {
    // Beyond ±2^64 no i64 or u64 can reach d.
    const BOUND: f64 = 18_446_744_073_709_551_616.0;
    if d.is_nan() {
        return None;
    }
    if d >= BOUND {
        return Some(Ordering::Less);
    }
    if d <= -BOUND {
        return Some(Ordering::Greater);
    }
    let whole = d.trunc();
    match i.cmp(&(whole as i128)) {
        Ordering::Equal => 0.0f64.partial_cmp(&(d - whole)),
        other => Some(other),
    }
}

/// CEL `==`: heterogeneous (numbers by value across types, other types never equal), deep
/// for lists and maps.
pub(crate) fn equals<'a>(
    a: &Value<'a>,
    b: &Value<'a>,
    meter: &mut Meter,
    depth: usize,
) -> Result<bool, EvalError> {
    if depth > MAX_VALUE_DEPTH {
        return Err(EvalError::ValueTooLarge);
    }
    Ok(match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Str(x), Value::Str(y)) => {
            let (x, y) = (x.as_str(), y.as_str());
            if x.len() != y.len() {
                return Ok(false);
            }
            meter.charge_len(x.len())?;
            x == y
        }
        (Value::Bytes(x), Value::Bytes(y)) => {
            let (x, y) = (x.as_slice(), y.as_slice());
            if x.len() != y.len() {
                return Ok(false);
            }
            meter.charge_len(x.len())?;
            x == y
        }
        (Value::List(x), Value::List(y)) => {
            if x.len() != y.len() {
                return Ok(false);
            }
            for (p, q) in x.iter().zip(y.iter()) {
                meter.charge(1)?;
                if !equals(&p, &q, meter, depth + 1)? {
                    return Ok(false);
                }
            }
            true
        }
        (Value::Map(x), Value::Map(y)) => {
            if x.len() != y.len() {
                return Ok(false);
            }
            for key in x.keys() {
                meter.charge(1)?;
                let Some(k) = Key::for_lookup(&key, "==")? else {
                    return Ok(false);
                };
                let (Some(p), Some(q)) = (x.get(&k), y.get(&k)) else {
                    return Ok(false);
                };
                if !equals(&p, &q, meter, depth + 1)? {
                    return Ok(false);
                }
            }
            true
        }
        _ => num_cmp(a, b) == Some(Ordering::Equal),
    })
}

/// CEL ordering (`<` and friends): numbers across types, strings, bytes, bools; `Ok(None)`
/// when a NaN makes every comparison false; anything else is a type mismatch.
pub(crate) fn compare(
    a: &Value<'_>,
    b: &Value<'_>,
    meter: &mut Meter,
    op: &str,
) -> Result<Option<Ordering>, EvalError> {
    if a.is_number() && b.is_number() {
        return Ok(num_cmp(a, b));
    }
    match (a, b) {
        (Value::Str(x), Value::Str(y)) => {
            meter.charge_len(x.as_str().len().min(y.as_str().len()))?;
            Ok(Some(x.as_str().cmp(y.as_str())))
        }
        (Value::Bytes(x), Value::Bytes(y)) => {
            meter.charge_len(x.as_slice().len().min(y.as_slice().len()))?;
            Ok(Some(x.as_slice().cmp(y.as_slice())))
        }
        (Value::Bool(x), Value::Bool(y)) => Ok(Some(x.cmp(y))),
        _ => Err(EvalError::mismatch(op, &[a.type_name(), b.type_name()])),
    }
}
