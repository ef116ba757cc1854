//! The evaluator: walks the checked program over one activation, charging one cost unit per
//! node and one per macro iteration. Errors are values where CEL makes them so: `&&`, `||`
//! and macro accumulators hold them, and a later operand may still decide the result, except
//! for the limit errors, which end the evaluation at once.

use std::collections::BTreeMap;
use std::mem;
use std::rc::Rc;

use crate::activation::Activation;
use crate::cost::{Meter, check_size};
use crate::error::EvalError;
use crate::functions;
use crate::ir::{Comprehension, Func, Lit, Node, UnOp, Var};
use crate::limits::ELEM_BYTES;
use crate::value::{Bytes, Key, List, Map, OwnedList, OwnedMap, Str, Value};

type Outcome<'a> = Result<Value<'a>, EvalError>;

/// Evaluates `root` against `act`; `slots` is the program's macro-variable count.
pub(crate) fn run<'a>(
    root: &'a Node,
    slots: usize,
    act: &Activation<'a>,
    meter: &mut Meter,
) -> Outcome<'a> {
    let mut ev = Evaluator {
        act,
        meter,
        locals: Vec::with_capacity(slots),
        headers: None,
    };
    ev.eval(root)
}

struct Evaluator<'a, 'r> {
    act: &'r Activation<'a>,
    meter: &'r mut Meter,
    /// Macro variables by slot. They hold errors as well as values: an `exists` whose
    /// predicate failed on one element may still find a true one later.
    locals: Vec<Outcome<'a>>,
    /// `headers` as a map, built on first use.
    headers: Option<Value<'a>>,
}

/// Keeps a limit error, or turns any other into a value for `&&`/`||` to weigh.
fn absorbable(r: Outcome<'_>) -> Result<Outcome<'_>, EvalError> {
    match r {
        Err(e) if e.is_fatal() => Err(e),
        other => Ok(other),
    }
}

impl<'a> Evaluator<'a, '_> {
    fn eval(&mut self, node: &'a Node) -> Outcome<'a> {
        self.meter.charge(1)?;
        match node {
            Node::Lit(lit) => Ok(literal(lit)),
            Node::Var(var) => self.var(*var),
            Node::Local(slot) => self.local(*slot),
            Node::List(items) => self.list(items),
            Node::Map(entries) => self.map(entries),
            Node::Select {
                operand,
                field,
                test,
            } => {
                let v = self.eval(operand)?;
                match (v, *test) {
                    (Value::Map(m), true) => Ok(Value::Bool(m.get_field(field).is_some())),
                    // has() on null or on a non-map is false, not an error (see crate docs).
                    (_, true) => Ok(Value::Bool(false)),
                    (Value::Map(m), false) => m.get_field(field).ok_or(EvalError::NoSuchKey),
                    (other, false) => Err(EvalError::mismatch(
                        &format!(".{field}"),
                        &[other.type_name()],
                    )),
                }
            }
            Node::Index(c, i) => {
                let c = self.eval(c)?;
                let i = self.eval(i)?;
                functions::index(c, i)
            }
            Node::Unary(op, x) => self.unary(*op, x),
            Node::Binary(op, l, r) => {
                let l = self.eval(l)?;
                let r = self.eval(r)?;
                functions::binary(*op, l, r, self.meter)
            }
            Node::And(l, r) => self.logic(l, r, false),
            Node::Or(l, r) => self.logic(l, r, true),
            Node::Cond(c, yes, no) => match self.eval(c)? {
                Value::Bool(true) => self.eval(yes),
                Value::Bool(false) => self.eval(no),
                other => Err(EvalError::mismatch("?:", &[other.type_name()])),
            },
            Node::Call(f, args) => self.call(*f, args),
            Node::Matches {
                subject,
                regex,
                weight,
            } => {
                let s = self.eval(subject)?;
                functions::matches(&s, regex, *weight, self.meter)
            }
            Node::Comprehension(c) => self.comprehension(c),
            Node::Append { accu, elem } => self.append(*accu, elem),
        }
    }

    fn var(&mut self, var: Var) -> Outcome<'a> {
        let act = self.act;
        let int = |n: u64| Value::Int(i64::try_from(n).unwrap_or(i64::MAX));
        Ok(match var {
            Var::Body => act.body.map_or(Value::Null, Value::from_json),
            Var::Headers => return self.headers(),
            Var::Source => Value::Str(Str::Ref(act.source)),
            Var::Tenant => Value::Str(Str::Ref(act.tenant)),
            Var::Verification => Value::Str(Str::Ref(act.verification)),
            Var::ReceivedAt => int(act.received_at),
            Var::Size => int(act.size),
        })
    }

    /// The headers as a map: repeated names joined with ", " in arrival order. Charged one
    /// unit per header plus the joined strings it builds.
    fn headers(&mut self) -> Outcome<'a> {
        if let Some(h) = &self.headers {
            return Ok(h.clone());
        }
        let headers: &'a [(String, String)] = self.act.headers;
        self.meter.charge_count(headers.len())?;
        let mut grouped: BTreeMap<&'a str, Vec<&'a str>> = BTreeMap::new();
        for (name, value) in headers {
            grouped
                .entry(name.as_str())
                .or_default()
                .push(value.as_str());
        }
        let mut map = OwnedMap::default();
        for (name, values) in grouped {
            let value = match values.as_slice() {
                [one] => Value::Str(Str::Ref(one)),
                many => {
                    let joined = many.join(", ");
                    check_size(joined.len())?;
                    self.meter.charge_len(joined.len())?;
                    Value::string(joined)
                }
            };
            map.bytes = map
                .bytes
                .saturating_add(ELEM_BYTES)
                .saturating_add(value.heap_bytes());
            map.entries.insert(Key::Str(Str::Ref(name)), value);
        }
        check_size(map.bytes)?;
        let value = Value::Map(Map::Own(Rc::new(map)));
        self.headers = Some(value.clone());
        Ok(value)
    }

    fn local(&self, slot: usize) -> Outcome<'a> {
        self.locals.get(slot).cloned().unwrap_or(Ok(Value::Null))
    }

    fn set_local(&mut self, slot: usize, v: Outcome<'a>) {
        if self.locals.len() <= slot {
            self.locals.resize_with(slot + 1, || Ok(Value::Null));
        }
        if let Some(place) = self.locals.get_mut(slot) {
            *place = v;
        }
    }

    fn list(&mut self, nodes: &'a [Node]) -> Outcome<'a> {
        self.meter.charge_count(nodes.len())?;
        let mut items = Vec::with_capacity(nodes.len());
        let mut bytes = 0usize;
        for node in nodes {
            let v = self.eval(node)?;
            bytes = bytes
                .saturating_add(ELEM_BYTES)
                .saturating_add(v.heap_bytes());
            check_size(bytes)?;
            items.push(v);
        }
        Ok(Value::List(List::Own(Rc::new(OwnedList { items, bytes }))))
    }

    fn map(&mut self, entries: &'a [(Node, Node)]) -> Outcome<'a> {
        self.meter.charge_count(entries.len())?;
        let mut map = OwnedMap::default();
        for (k, v) in entries {
            let key = Key::for_insert(&self.eval(k)?)?;
            let value = self.eval(v)?;
            map.bytes = map
                .bytes
                .saturating_add(ELEM_BYTES)
                .saturating_add(key.heap_bytes())
                .saturating_add(value.heap_bytes());
            check_size(map.bytes)?;
            if map.entries.insert(key, value).is_some() {
                return Err(EvalError::invalid("{}", "a map literal repeats a key"));
            }
        }
        Ok(Value::Map(Map::Own(Rc::new(map))))
    }

    fn unary(&mut self, op: UnOp, x: &'a Node) -> Outcome<'a> {
        match op {
            UnOp::NotStrictlyFalse => match absorbable(self.eval(x))? {
                Ok(Value::Bool(false)) => Ok(Value::Bool(false)),
                _ => Ok(Value::Bool(true)),
            },
            UnOp::Not => match self.eval(x)? {
                Value::Bool(b) => Ok(Value::Bool(!b)),
                other => Err(EvalError::mismatch("!", &[other.type_name()])),
            },
            UnOp::Neg => match self.eval(x)? {
                Value::Int(i) => i.checked_neg().map(Value::Int).ok_or(EvalError::Overflow),
                Value::Double(d) => Ok(Value::Double(-d)),
                other => Err(EvalError::mismatch("-", &[other.type_name()])),
            },
        }
    }

    /// `&&` (`or` false) and `||` (`or` true): the deciding value (false for `&&`, true for
    /// `||`) on either side wins over an error on the other; otherwise the first error.
    fn logic(&mut self, l: &'a Node, r: &'a Node, or: bool) -> Outcome<'a> {
        let op = if or { "||" } else { "&&" };
        let left = absorbable(self.eval(l))?;
        if matches!(left, Ok(Value::Bool(b)) if b == or) {
            return Ok(Value::Bool(or));
        }
        let right = absorbable(self.eval(r))?;
        if matches!(right, Ok(Value::Bool(b)) if b == or) {
            return Ok(Value::Bool(or));
        }
        match (left?, right?) {
            (Value::Bool(_), Value::Bool(_)) => Ok(Value::Bool(!or)),
            (a, b) => Err(EvalError::mismatch(op, &[a.type_name(), b.type_name()])),
        }
    }

    fn call(&mut self, f: Func, args: &'a [Node]) -> Outcome<'a> {
        match (f, args) {
            (Func::Size, [x]) => {
                let v = self.eval(x)?;
                functions::size(&v, self.meter)
            }
            (Func::Contains | Func::StartsWith | Func::EndsWith, [recv, arg]) => {
                let recv = self.eval(recv)?;
                let arg = self.eval(arg)?;
                functions::string_test(f, &recv, &arg, self.meter)
            }
            (Func::LowerAscii | Func::UpperAscii, [recv]) => {
                let recv = self.eval(recv)?;
                functions::ascii_case(f, &recv, self.meter)
            }
            (Func::Int | Func::Uint | Func::Double | Func::String, [x]) => {
                let v = self.eval(x)?;
                functions::convert(f, v, self.meter)
            }
            // The checker only builds the shapes above.
            _ => Err(EvalError::mismatch(f.name(), &[])),
        }
    }

    fn comprehension(&mut self, c: &'a Comprehension) -> Outcome<'a> {
        let items = match self.eval(&c.range)? {
            Value::List(l) => l.iter(),
            Value::Map(m) => m.keys(),
            other => return Err(EvalError::mismatch("macro", &[other.type_name()])),
        };
        let init = self.eval(&c.init)?;
        self.set_local(c.accu, Ok(init));
        for item in items {
            self.meter.charge(1)?;
            self.set_local(c.iter, Ok(item));
            match self.eval(&c.cond)? {
                Value::Bool(true) => {}
                Value::Bool(false) => break,
                other => return Err(EvalError::mismatch("macro condition", &[other.type_name()])),
            }
            let step = absorbable(self.eval(&c.step))?;
            self.set_local(c.accu, step);
        }
        let result = self.eval(&c.result);
        // Drop the slots' references, so the result is the only holder of a built list and
        // a later `+` can extend it in place.
        self.set_local(c.accu, Ok(Value::Null));
        self.set_local(c.iter, Ok(Value::Null));
        result
    }

    fn append(&mut self, accu: usize, elem: &'a Node) -> Outcome<'a> {
        // An accumulator that already failed stays failed; skip the element's work.
        if let Some(Err(e)) = self.locals.get(accu) {
            return Err(e.clone());
        }
        let item = self.eval(elem)?;
        let acc = match self.locals.get_mut(accu) {
            Some(slot) => mem::replace(slot, Ok(Value::Null))?,
            None => Value::List(List::Json(&[])),
        };
        let out = functions::append(acc, item, self.meter)?;
        self.set_local(accu, Ok(out.clone()));
        Ok(out)
    }
}

fn literal(lit: &Lit) -> Value<'_> {
    match lit {
        Lit::Null => Value::Null,
        Lit::Bool(b) => Value::Bool(*b),
        Lit::Int(i) => Value::Int(*i),
        Lit::Uint(u) => Value::Uint(*u),
        Lit::Double(d) => Value::Double(*d),
        Lit::Str(s) => Value::Str(Str::Ref(s)),
        Lit::Bytes(b) => Value::Bytes(Bytes::Ref(b)),
    }
}
