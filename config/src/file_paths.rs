//! Options whose value names a file the gateway reads on a sink's behalf (`tls.key_file`,
//! `sasl.token_file`, `auth.credentials_file`, ...), and the one way to find them all.
//!
//! Every such option is typed [`FilePath`], never a bare `PathBuf`. Its wire form is the path
//! itself, but it serialises through a marked newtype, so [`file_options`] can walk any config
//! value (a sink, a source, a whole `Config`) and list the dotted path of every file option
//! that is set, without a list of option names to keep up to date. The operator refuses a
//! manifest whose rendered config names any file (key material comes through `secretRefs`),
//! and the gateway checks every listed file against its own directories at load; an option a
//! later release adds is covered by both as soon as it is typed `FilePath` (a test in
//! `sinks/tests.rs` fails on a `PathBuf` field in the sink types).

use std::fmt;
use std::path::{Path, PathBuf};

use serde::ser::{self, Serialize, Serializer};
use serde::{Deserialize, Deserializer};

/// The newtype name [`FilePath`] serialises under; nothing else uses it.
const MARKER: &str = "$ankusa::FilePath";

/// A file a sink reads (a PEM bundle, a token, a credentials file). See the module header.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct FilePath(PathBuf);

impl FilePath {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        FilePath(path.into())
    }

    pub fn as_path(&self) -> &Path {
        &self.0
    }
}

impl fmt::Debug for FilePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::ops::Deref for FilePath {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for FilePath {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl From<PathBuf> for FilePath {
    fn from(p: PathBuf) -> Self {
        FilePath(p)
    }
}

impl From<&str> for FilePath {
    fn from(p: &str) -> Self {
        FilePath(p.into())
    }
}

impl From<&Path> for FilePath {
    fn from(p: &Path) -> Self {
        FilePath(p.into())
    }
}

impl Serialize for FilePath {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // JSON and YAML write a newtype struct as its inner value: the wire form is the path.
        s.serialize_newtype_struct(MARKER, &self.0)
    }
}

impl<'de> Deserialize<'de> for FilePath {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        PathBuf::deserialize(d).map(FilePath)
    }
}

#[cfg(feature = "schema")]
impl schemars::JsonSchema for FilePath {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "FilePath".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        <PathBuf as schemars::JsonSchema>::json_schema(generator)
    }

    fn inline_schema() -> bool {
        true
    }
}

/// The dotted paths (`sasl.token_file`, `sources.s.sinks[0].tls.key_file`), relative to
/// `value`, of every [`FilePath`] set in it, in serialisation order.
pub fn file_options<T: Serialize + ?Sized>(value: &T) -> Vec<String> {
    let mut out = Vec::new();
    // The walk serialises nothing but map keys; its only error is a key that is not a
    // string or a number, which no config type has. Such a key is named by its position.
    let _ = value.serialize(Walk {
        at: String::new(),
        out: &mut out,
    });
    out
}

#[derive(Debug)]
struct WalkError(String);

impl fmt::Display for WalkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WalkError {}

impl ser::Error for WalkError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        WalkError(msg.to_string())
    }
}

struct Walk<'a> {
    at: String,
    out: &'a mut Vec<String>,
}

fn join(at: &str, name: &str) -> String {
    if at.is_empty() {
        name.to_string()
    } else {
        format!("{at}.{name}")
    }
}

impl Walk<'_> {
    fn field(&self, name: &str) -> String {
        join(&self.at, name)
    }
}

macro_rules! leaf {
    ($($f:ident: $t:ty),* $(,)?) => {
        $(fn $f(self, _: $t) -> Result<(), WalkError> { Ok(()) })*
    };
}

impl<'a> Serializer for Walk<'a> {
    type Ok = ();
    type Error = WalkError;
    type SerializeSeq = Seq<'a>;
    type SerializeTuple = Seq<'a>;
    type SerializeTupleStruct = Seq<'a>;
    type SerializeTupleVariant = Seq<'a>;
    type SerializeMap = Map<'a>;
    type SerializeStruct = Fields<'a>;
    type SerializeStructVariant = Fields<'a>;

    leaf!(
        serialize_bool: bool, serialize_i8: i8, serialize_i16: i16, serialize_i32: i32,
        serialize_i64: i64, serialize_i128: i128, serialize_u8: u8, serialize_u16: u16,
        serialize_u32: u32, serialize_u64: u64, serialize_u128: u128, serialize_f32: f32,
        serialize_f64: f64, serialize_char: char, serialize_str: &str, serialize_bytes: &[u8],
        serialize_unit_struct: &'static str,
    );

    fn serialize_none(self) -> Result<(), WalkError> {
        Ok(())
    }

    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<(), WalkError> {
        v.serialize(self)
    }

    fn serialize_unit(self) -> Result<(), WalkError> {
        Ok(())
    }

    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
    ) -> Result<(), WalkError> {
        Ok(())
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        v: &T,
    ) -> Result<(), WalkError> {
        if name == MARKER {
            self.out.push(self.at);
            Ok(())
        } else {
            v.serialize(self)
        }
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        v: &T,
    ) -> Result<(), WalkError> {
        let at = self.field(variant);
        v.serialize(Walk { at, out: self.out })
    }

    fn serialize_seq(self, _: Option<usize>) -> Result<Seq<'a>, WalkError> {
        Ok(Seq {
            at: self.at,
            out: self.out,
            next: 0,
        })
    }

    fn serialize_tuple(self, len: usize) -> Result<Seq<'a>, WalkError> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<Seq<'a>, WalkError> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Seq<'a>, WalkError> {
        let at = self.field(variant);
        Ok(Seq {
            at,
            out: self.out,
            next: 0,
        })
    }

    fn serialize_map(self, _: Option<usize>) -> Result<Map<'a>, WalkError> {
        Ok(Map {
            at: self.at,
            out: self.out,
            key: None,
            next: 0,
        })
    }

    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Fields<'a>, WalkError> {
        Ok(Fields {
            at: self.at,
            out: self.out,
        })
    }

    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Fields<'a>, WalkError> {
        let at = self.field(variant);
        Ok(Fields { at, out: self.out })
    }
}

struct Seq<'a> {
    at: String,
    out: &'a mut Vec<String>,
    next: usize,
}

impl Seq<'_> {
    fn element<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), WalkError> {
        let at = format!("{}[{}]", self.at, self.next);
        self.next += 1;
        v.serialize(Walk { at, out: self.out })
    }
}

macro_rules! seq_impl {
    ($($tr:ident :: $m:ident),*) => {
        $(impl ser::$tr for Seq<'_> {
            type Ok = ();
            type Error = WalkError;
            fn $m<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), WalkError> {
                self.element(v)
            }
            fn end(self) -> Result<(), WalkError> {
                Ok(())
            }
        })*
    };
}

seq_impl!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

struct Fields<'a> {
    at: String,
    out: &'a mut Vec<String>,
}

impl Fields<'_> {
    fn named<T: Serialize + ?Sized>(&mut self, name: &str, v: &T) -> Result<(), WalkError> {
        let at = join(&self.at, name);
        v.serialize(Walk { at, out: self.out })
    }
}

macro_rules! fields_impl {
    ($($tr:ident),*) => {
        $(impl ser::$tr for Fields<'_> {
            type Ok = ();
            type Error = WalkError;
            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                name: &'static str,
                v: &T,
            ) -> Result<(), WalkError> {
                self.named(name, v)
            }
            fn end(self) -> Result<(), WalkError> {
                Ok(())
            }
        })*
    };
}

fields_impl!(SerializeStruct, SerializeStructVariant);

struct Map<'a> {
    at: String,
    out: &'a mut Vec<String>,
    key: Option<String>,
    next: usize,
}

impl ser::SerializeMap for Map<'_> {
    type Ok = ();
    type Error = WalkError;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, k: &T) -> Result<(), WalkError> {
        self.key = Some(match serde_json::to_value(k) {
            Ok(serde_json::Value::String(s)) => s,
            Ok(serde_json::Value::Number(n)) => n.to_string(),
            // Named by position: a key of another shape has no dotted spelling.
            _ => format!("[{}]", self.next),
        });
        self.next += 1;
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), WalkError> {
        let at = join(&self.at, &self.key.take().unwrap_or_default());
        v.serialize(Walk { at, out: self.out })
    }

    fn end(self) -> Result<(), WalkError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[derive(serde::Serialize)]
    struct Tls {
        ca_file: Option<FilePath>,
        key_file: Option<FilePath>,
        server_name: Option<String>,
    }

    #[derive(serde::Serialize)]
    #[serde(tag = "type", rename_all = "snake_case")]
    enum Sink {
        Kafka { tls: Tls, token_file: FilePath },
        Log,
    }

    #[test]
    fn lists_every_set_file_at_its_path() {
        let sinks = vec![
            Sink::Log,
            Sink::Kafka {
                tls: Tls {
                    ca_file: Some("/ca.pem".into()),
                    key_file: None,
                    server_name: Some("b".into()),
                },
                token_file: "/t".into(),
            },
        ];
        let mut sources = BTreeMap::new();
        sources.insert("s", sinks);
        assert_eq!(
            file_options(&sources),
            vec![
                "s[1].tls.ca_file".to_string(),
                "s[1].token_file".to_string()
            ]
        );
    }

    #[test]
    fn wire_form_is_the_path() {
        let p = FilePath::from("/etc/x.pem");
        assert_eq!(serde_json::to_string(&p).unwrap(), "\"/etc/x.pem\"");
        assert_eq!(serde_yaml_ng::to_string(&p).unwrap().trim(), "/etc/x.pem");
        let back: FilePath = serde_yaml_ng::from_str("/etc/x.pem").unwrap();
        assert_eq!(back, p);
    }
}
