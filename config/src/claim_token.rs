//! One `claim_check.tokens` entry: a reader's bearer token and, optionally, the tenants whose
//! claims it may redeem.
//!
//! The entry is either the token alone (`"reader-token-0123456789"`: every tenant, the form
//! every earlier config used) or a map `{token, tenants: [acme, beta]}` — the claim port's
//! counterpart of an admin token's `tenant:<id>` scopes: absent means every tenant, a list
//! limits the token to those tenants. The claim port refuses a limited token another tenant's
//! claim with `403 forbidden`, decided from the URL's tenant before the store is looked at, so
//! the answer says nothing about whether the claim exists.
//!
//! A token without tenants serialises as the plain string, so configs rendered before this
//! type existed (and their hashes) are unchanged.
//!
//! Imports only the leaves (`scalar`, `rules`, `error`); `section::claim_check` holds the list.

use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, Visitor};
use serde::ser::SerializeStruct;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::ConfigError;
use crate::rules::{err, tenant_list};

/// A claim-port bearer token (see the module header). `Debug` hides the token.
#[derive(Clone, PartialEq, Eq)]
pub struct ClaimToken {
    pub token: String,
    /// The tenants it may read; `None`: every tenant.
    pub tenants: Option<Vec<String>>,
}

impl ClaimToken {
    /// A token for every tenant.
    pub fn new(token: impl Into<String>) -> Self {
        ClaimToken {
            token: token.into(),
            tenants: None,
        }
    }

    /// A token for `tenants` only.
    pub fn for_tenants(token: impl Into<String>, tenants: &[&str]) -> Self {
        ClaimToken {
            token: token.into(),
            tenants: Some(tenants.iter().map(|t| t.to_string()).collect()),
        }
    }

    /// The entry at `path` (`claim_check.tokens[i]`): 16 characters at least, and a tenant list,
    /// when given, of at least one tenant id.
    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        let len = self.token.trim().len();
        if len < 16 {
            return Err(err(
                path,
                format!("must be at least 16 characters, got {len}"),
            ));
        }
        tenant_list(&format!("{path}.tenants"), self.tenants.as_deref())?;
        Ok(())
    }

    /// Whether this token may read `tenant`'s claims.
    pub fn allows(&self, tenant: &str) -> bool {
        match &self.tenants {
            None => true,
            Some(list) => list.iter().any(|t| t == tenant),
        }
    }
}

impl fmt::Debug for ClaimToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClaimToken")
            .field("token", &"[redacted]")
            .field("tenants", &self.tenants)
            .finish()
    }
}

impl From<String> for ClaimToken {
    fn from(s: String) -> Self {
        ClaimToken::new(s)
    }
}

impl From<&str> for ClaimToken {
    fn from(s: &str) -> Self {
        ClaimToken::new(s)
    }
}

impl PartialEq<&str> for ClaimToken {
    fn eq(&self, other: &&str) -> bool {
        self.tenants.is_none() && self.token == *other
    }
}

impl Serialize for ClaimToken {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.tenants {
            None => s.serialize_str(&self.token),
            Some(tenants) => {
                let mut m = s.serialize_struct("ClaimToken", 2)?;
                m.serialize_field("token", &self.token)?;
                m.serialize_field("tenants", tenants)?;
                m.end()
            }
        }
    }
}

/// `scalar::string` as a seed, for a map value.
struct Text;

impl<'de> DeserializeSeed<'de> for Text {
    type Value = String;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        crate::scalar::string(d)
    }
}

struct TokenVisitor;

impl<'de> Visitor<'de> for TokenVisitor {
    type Value = ClaimToken;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a token, or a map {token, tenants}")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<ClaimToken, E> {
        Ok(ClaimToken::new(v))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<ClaimToken, E> {
        Ok(ClaimToken::new(v))
    }

    // A number or boolean is read as its text, as every token field does (`scalar`).
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<ClaimToken, E> {
        Ok(ClaimToken::new(v.to_string()))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<ClaimToken, E> {
        Ok(ClaimToken::new(v.to_string()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<ClaimToken, E> {
        Ok(ClaimToken::new(v.to_string()))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<ClaimToken, E> {
        Ok(ClaimToken::new(v.to_string()))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<ClaimToken, A::Error> {
        let mut token = None;
        let mut tenants = None;
        while let Some(key) = m.next_key::<String>()? {
            match key.as_str() {
                "token" if token.is_none() => token = Some(m.next_value_seed(Text)?),
                "tenants" if tenants.is_none() => tenants = Some(m.next_value::<Vec<String>>()?),
                "token" | "tenants" => return Err(de::Error::duplicate_field("token or tenants")),
                other => return Err(de::Error::unknown_field(other, &["token", "tenants"])),
            }
        }
        Ok(ClaimToken {
            token: token.ok_or_else(|| de::Error::missing_field("token"))?,
            tenants,
        })
    }
}

impl<'de> Deserialize<'de> for ClaimToken {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(TokenVisitor)
    }
}

#[cfg(feature = "schema")]
mod schema {
    use schemars::JsonSchema;

    /// The two forms, for the schema only.
    #[derive(JsonSchema)]
    #[allow(dead_code)]
    #[serde(untagged)]
    enum ClaimTokenForm {
        /// A token for every tenant.
        Plain(String),
        /// A token limited to `tenants` (absent: every tenant).
        Scoped {
            token: String,
            #[serde(default)]
            tenants: Option<Vec<String>>,
        },
    }

    impl JsonSchema for super::ClaimToken {
        fn schema_name() -> std::borrow::Cow<'static, str> {
            "ClaimToken".into()
        }

        fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
            ClaimTokenForm::json_schema(generator)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_read_and_write_back() {
        let y = "- plain-reader-token-0123\n- 1234567890123456\n\
                 - {token: acme-reader-token-0123, tenants: [acme, beta]}\n\
                 - {token: all-reader-token-01234}\n";
        let v: Vec<ClaimToken> = serde_yaml_ng::from_str(y).expect("parses");
        assert_eq!(v[0], "plain-reader-token-0123");
        assert_eq!(v[1], "1234567890123456");
        assert_eq!(
            v[2],
            ClaimToken::for_tenants("acme-reader-token-0123", &["acme", "beta"])
        );
        assert!(v[2].allows("beta") && !v[2].allows("gamma"));
        assert!(v[3].allows("gamma") && v[0].allows("gamma"));
        let json = serde_json::to_string(&v).unwrap();
        assert_eq!(
            json,
            "[\"plain-reader-token-0123\",\"1234567890123456\",\
             {\"token\":\"acme-reader-token-0123\",\"tenants\":[\"acme\",\"beta\"]},\
             \"all-reader-token-01234\"]"
        );
        let back: Vec<ClaimToken> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, v);
        assert!(!format!("{:?}", v[2]).contains("acme-reader"));
    }

    #[test]
    fn validation_names_the_tenants_field() {
        let mut c = crate::Config::default();
        let field = |c: &crate::Config| crate::validate(c).unwrap_err().field;
        c.claim_check.tokens = vec![ClaimToken {
            token: "scoped-claim-token-0123".into(),
            tenants: Some(vec![]),
        }];
        assert_eq!(field(&c).as_deref(), Some("claim_check.tokens[0].tenants"));
        c.claim_check.tokens = vec![ClaimToken::for_tenants(
            "scoped-claim-token-0123",
            &["acme", "not/an-id"],
        )];
        assert_eq!(
            field(&c).as_deref(),
            Some("claim_check.tokens[0].tenants[1]")
        );
        c.claim_check.tokens = vec![ClaimToken::for_tenants("short", &["acme"])];
        assert_eq!(field(&c).as_deref(), Some("claim_check.tokens[0]"));
        c.claim_check.tokens = vec![ClaimToken::for_tenants(
            "scoped-claim-token-0123",
            &["acme"],
        )];
        crate::validate(&c).expect("valid");
    }

    #[test]
    fn unknown_keys_and_missing_token_are_refused_without_the_value() {
        for (y, want) in [
            (
                "{token: secret-tok-0123456789, tenant: [a]}",
                "unknown field `tenant`",
            ),
            ("{tenants: [a]}", "missing field `token`"),
        ] {
            let e = serde_yaml_ng::from_str::<ClaimToken>(y)
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{y}: {e}");
            assert!(!e.contains("secret-tok"), "{e}");
        }
    }
}
