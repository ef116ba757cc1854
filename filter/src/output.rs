//! Turning an evaluation's result into what the caller asked for: a bool, a JSON value or a
//! list of headers. Conversion is charged one unit per node and is size-checked as it goes,
//! since a result may reference the whole body several times (`[body, body, body]`).

use http::{HeaderName, HeaderValue};
use serde_json::{Number, Value as Json};

use crate::cost::{Meter, check_size};
use crate::error::EvalError;
use crate::limits::{ELEM_BYTES, MAX_HEADERS, MAX_VALUE_DEPTH};
use crate::value::{List, Map, Value};

pub(crate) fn to_bool(v: &Value<'_>) -> Result<bool, EvalError> {
    match v {
        Value::Bool(b) => Ok(*b),
        other => Err(EvalError::InvalidOutput(format!(
            "a filter must produce a bool, this produced {}",
            other.type_name()
        ))),
    }
}

pub(crate) fn to_json(v: &Value<'_>, meter: &mut Meter) -> Result<Json, EvalError> {
    Out { meter, bytes: 0 }.value(v, 0)
}

struct Out<'m> {
    meter: &'m mut Meter,
    /// Size estimate of the output so far.
    bytes: usize,
}

impl Out<'_> {
    /// Accounts for one output node holding `extra` bytes of strings.
    fn node(&mut self, extra: usize, depth: usize) -> Result<(), EvalError> {
        if depth > MAX_VALUE_DEPTH {
            return Err(EvalError::ValueTooLarge);
        }
        self.meter.charge(1)?;
        self.bytes = self.bytes.saturating_add(ELEM_BYTES).saturating_add(extra);
        check_size(self.bytes)
    }

    fn value(&mut self, v: &Value<'_>, depth: usize) -> Result<Json, EvalError> {
        match v {
            Value::List(List::Json(_)) | Value::Map(Map::Json(_)) => {}
            Value::Str(s) => self.node(s.as_str().len(), depth)?,
            _ => self.node(0, depth)?,
        }
        Ok(match v {
            Value::Null => Json::Null,
            Value::Bool(b) => Json::Bool(*b),
            Value::Int(i) => Json::from(*i),
            Value::Uint(u) => Json::from(*u),
            Value::Double(d) => Json::Number(Number::from_f64(*d).ok_or_else(|| {
                EvalError::InvalidOutput(
                    "a number is NaN or infinite, which JSON cannot hold".into(),
                )
            })?),
            Value::Str(s) => Json::String(s.as_str().to_owned()),
            Value::Bytes(_) => {
                return Err(EvalError::InvalidOutput(
                    "bytes cannot be written as JSON; convert them with string()".into(),
                ));
            }
            Value::List(List::Json(items)) => {
                self.node(0, depth)?;
                let mut out = Vec::new();
                for item in items.iter() {
                    out.push(self.json(item, depth + 1)?);
                }
                Json::Array(out)
            }
            Value::List(List::Own(list)) => {
                let mut out = Vec::with_capacity(list.items.len());
                for item in &list.items {
                    out.push(self.value(item, depth + 1)?);
                }
                Json::Array(out)
            }
            Value::Map(Map::Json(map)) => {
                self.node(0, depth)?;
                let mut out = serde_json::Map::new();
                for (k, item) in map.iter() {
                    self.bytes = self.bytes.saturating_add(k.len());
                    out.insert(k.clone(), self.json(item, depth + 1)?);
                }
                Json::Object(out)
            }
            Value::Map(Map::Own(map)) => {
                let mut out = serde_json::Map::new();
                for (k, item) in &map.entries {
                    let Some(k) = k.as_str() else {
                        return Err(EvalError::InvalidOutput(
                            "a map key is not a string, and JSON object keys are".into(),
                        ));
                    };
                    self.bytes = self.bytes.saturating_add(k.len());
                    out.insert(k.to_owned(), self.value(item, depth + 1)?);
                }
                Json::Object(out)
            }
        })
    }

    /// Copies a borrowed part of the body, node by node so that cost and size stop it.
    fn json(&mut self, j: &Json, depth: usize) -> Result<Json, EvalError> {
        match j {
            Json::String(s) => self.node(s.len(), depth)?,
            _ => self.node(0, depth)?,
        }
        Ok(match j {
            Json::Array(items) => {
                let mut out = Vec::new();
                for item in items {
                    out.push(self.json(item, depth + 1)?);
                }
                Json::Array(out)
            }
            Json::Object(map) => {
                let mut out = serde_json::Map::new();
                for (k, item) in map {
                    self.bytes = self.bytes.saturating_add(k.len());
                    out.insert(k.clone(), self.json(item, depth + 1)?);
                }
                Json::Object(out)
            }
            scalar => scalar.clone(),
        })
    }
}

/// A `map(string, string)` as headers: names lower-cased, names and values valid for HTTP,
/// at most `MAX_HEADERS`. Charged one unit per header plus its bytes scanned.
pub(crate) fn to_headers(
    v: &Value<'_>,
    meter: &mut Meter,
) -> Result<Vec<(String, String)>, EvalError> {
    let invalid = |m: &str| EvalError::InvalidOutput(m.to_owned());
    let Value::Map(map) = v else {
        return Err(EvalError::InvalidOutput(format!(
            "headers must be a map(string, string), this produced {}",
            v.type_name()
        )));
    };
    if map.len() > MAX_HEADERS {
        return Err(EvalError::InvalidOutput(format!(
            "more than {MAX_HEADERS} headers"
        )));
    }
    let mut out: Vec<(String, String)> = Vec::with_capacity(map.len());
    let mut bytes = 0usize;
    for (key, value) in map.entries() {
        let (Some(name), Value::Str(value)) = (key.as_str(), &value) else {
            return Err(invalid("headers must be a map of strings to strings"));
        };
        let value = value.as_str();
        meter.charge(1)?;
        meter.charge_len(name.len().saturating_add(value.len()))?;
        bytes = bytes
            .saturating_add(ELEM_BYTES)
            .saturating_add(name.len())
            .saturating_add(value.len());
        check_size(bytes)?;
        let lower = name.to_ascii_lowercase();
        if HeaderName::from_bytes(lower.as_bytes()).is_err() {
            return Err(invalid("a header name is not a valid HTTP header name"));
        }
        if HeaderValue::from_str(value).is_err() {
            return Err(invalid("a header value is not a valid HTTP header value"));
        }
        if out.iter().any(|(n, _)| *n == lower) {
            return Err(invalid("two header names are the same once lower-cased"));
        }
        out.push((lower, value.to_owned()));
    }
    Ok(out)
}
