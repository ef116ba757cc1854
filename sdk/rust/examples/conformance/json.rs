//! Case files read with their keys in file order, and the contract's body encodings.
//!
//! A `{"json": v}` body is `v` serialised compactly in its own key order (`JSON.stringify`
//! style): a case may sign such bytes, so they must be the bytes the case's author serialised.
//! serde_json's `Value` sorts keys (no `preserve_order` in this workspace), hence this type.

use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Number, Value};

/// A JSON value whose objects keep their key order.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Number(Number),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(pairs) => pairs.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The same value as a `serde_json::Value` (for comparisons, where order does not count).
    pub fn to_value(&self) -> Value {
        match self {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Bool(*b),
            Json::Number(n) => Value::Number(n.clone()),
            Json::String(s) => Value::String(s.clone()),
            Json::Array(a) => Value::Array(a.iter().map(Json::to_value).collect()),
            Json::Object(o) => {
                Value::Object(o.iter().map(|(k, v)| (k.clone(), v.to_value())).collect())
            }
        }
    }

    /// Compact serialisation in file order.
    pub fn to_compact(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }

    fn write(&self, out: &mut String) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Number(n) => out.push_str(&n.to_string()),
            Json::String(s) => out.push_str(&Value::String(s.clone()).to_string()),
            Json::Array(a) => {
                out.push('[');
                for (i, v) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    v.write(out);
                }
                out.push(']');
            }
            Json::Object(o) => {
                out.push('{');
                for (i, (k, v)) in o.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(k.clone()).to_string());
                    out.push(':');
                    v.write(out);
                }
                out.push('}');
            }
        }
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Json, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Json;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("JSON")
            }
            fn visit_unit<E>(self) -> Result<Json, E> {
                Ok(Json::Null)
            }
            fn visit_bool<E>(self, b: bool) -> Result<Json, E> {
                Ok(Json::Bool(b))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Json, E> {
                Ok(Json::Number(n.into()))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Json, E> {
                Ok(Json::Number(n.into()))
            }
            fn visit_f64<E: serde::de::Error>(self, n: f64) -> Result<Json, E> {
                Number::from_f64(n)
                    .map(Json::Number)
                    .ok_or_else(|| E::custom("not a finite number"))
            }
            fn visit_str<E>(self, s: &str) -> Result<Json, E> {
                Ok(Json::String(s.to_string()))
            }
            fn visit_string<E>(self, s: String) -> Result<Json, E> {
                Ok(Json::String(s))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Json, A::Error> {
                let mut out = Vec::new();
                while let Some(v) = a.next_element()? {
                    out.push(v);
                }
                Ok(Json::Array(out))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Json, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = m.next_entry::<String, Json>()? {
                    out.push((k, v));
                }
                Ok(Json::Object(out))
            }
        }
        d.deserialize_any(V)
    }
}

/// The bytes of a body spec: `{"text"}`, `{"base64"}` or `{"json"}`.
pub fn body_bytes(spec: &Json) -> Result<Vec<u8>, String> {
    if let Some(Json::String(t)) = spec.get("text") {
        return Ok(t.as_bytes().to_vec());
    }
    if let Some(Json::String(b)) = spec.get("base64") {
        return STANDARD
            .decode(b)
            .map_err(|e| format!("malformed case: body base64: {e}"));
    }
    if let Some(v) = spec.get("json") {
        return Ok(v.to_compact().into_bytes());
    }
    Err(format!(
        "malformed case: a body is {{text|base64|json}}, got {}",
        spec.to_compact()
    ))
}

/// Whether `actual` (None: no body) is what the expected body spec names (`null`: no body).
pub fn body_matches(expected: &Value, actual: Option<&[u8]>) -> Result<(), String> {
    let show = |b: &[u8]| match std::str::from_utf8(b) {
        Ok(t) if t.len() <= 120 => format!("{t:?}"),
        _ => format!("{} bytes", b.len()),
    };
    let ok = match (expected, actual) {
        (Value::Null, None) => true,
        (Value::Null, Some(_)) | (_, None) => false,
        (e, Some(a)) => {
            if let Some(t) = e.get("text").and_then(Value::as_str) {
                t.as_bytes() == a
            } else if let Some(b) = e.get("base64").and_then(Value::as_str) {
                STANDARD
                    .decode(b)
                    .map_err(|e| format!("malformed case: {e}"))?
                    == a
            } else if let Some(j) = e.get("json") {
                serde_json::from_slice::<Value>(a).ok().as_ref() == Some(j)
            } else {
                return Err(format!("malformed case: expected body {e}"));
            }
        }
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "body: expected {expected}, got {}",
            actual.map(show).unwrap_or_else(|| "no body".into())
        ))
    }
}
