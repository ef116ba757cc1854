//! Fields that hold text (secrets, tokens, header values) accept a YAML number or boolean as
//! its text: `${TOKEN}` with `TOKEN=123456` is a secret `"123456"`, not a type error.
//! A leaf: it imports nothing of the crate (`secrets.rs` builds its types on these, and
//! `secret_map` fills any type made from text, `Secret` among them).

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};

/// A string, or a number or boolean read as its text.
#[derive(Deserialize)]
#[serde(untagged)]
enum Scalar {
    S(String),
    U(u64),
    I(i64),
    F(f64),
    B(bool),
}

impl Scalar {
    fn text(self) -> String {
        match self {
            Scalar::S(s) => s,
            Scalar::U(n) => n.to_string(),
            Scalar::I(n) => n.to_string(),
            Scalar::F(n) => n.to_string(),
            Scalar::B(b) => b.to_string(),
        }
    }
}

pub fn string<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Scalar::deserialize(d)
        .map(Scalar::text)
        .map_err(|_| serde::de::Error::custom("expected a string"))
}

pub fn strings<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Vec::<Scalar>::deserialize(d)
        .map(|v| v.into_iter().map(Scalar::text).collect())
        .map_err(|_| serde::de::Error::custom("expected a list of strings"))
}

pub fn string_map<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, String>, D::Error> {
    BTreeMap::<String, Scalar>::deserialize(d)
        .map(|m| m.into_iter().map(|(k, v)| (k, v.text())).collect())
        .map_err(|_| serde::de::Error::custom("expected a map of strings"))
}

/// `string_map` whose values are secrets (an HTTP sink's header values).
pub fn secret_map<'de, D: Deserializer<'de>, T: From<String>>(
    d: D,
) -> Result<BTreeMap<String, T>, D::Error> {
    string_map(d).map(|m| m.into_iter().map(|(k, v)| (k, T::from(v))).collect())
}

/// For `Secrets`: one value or a list.
pub(crate) fn one_or_many<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(Scalar),
        Many(Vec<Scalar>),
    }
    match OneOrMany::deserialize(d)
        .map_err(|_| serde::de::Error::custom("expected a string or a list of strings"))?
    {
        OneOrMany::One(s) => Ok(vec![s.text()]),
        OneOrMany::Many(v) => Ok(v.into_iter().map(Scalar::text).collect()),
    }
}
