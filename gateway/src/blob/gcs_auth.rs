//! OAuth2 bearer tokens for the GCS store, from the first source configured:
//! 1. a service-account key (`gcs.credentials`: a file path or the JSON itself): a JWT
//!    (RS256, signed with aws-lc-rs) asserting the account, exchanged at the key's `token_uri`
//!    (`urn:ietf:params:oauth:grant-type:jwt-bearer`);
//! 2. `anonymous: true` (emulators): no token;
//! 3. else the metadata server (GCE, GKE workload identity):
//!    `http://$GCE_METADATA_HOST/computeMetadata/v1/instance/service-accounts/default/token`
//!    with `Metadata-Flavor: Google` (`GCE_METADATA_HOST` defaults to
//!    `metadata.google.internal`, as for the Pub/Sub sink).
//!
//! A token is cached until 5 minutes before it expires and dropped when the store answers
//! `401`. A token endpoint's transport failure, `429` or `5xx` is transient; any other
//! refusal is reported with its OAuth2 error code only. The key is read and parsed when the
//! store is built, so `check-config` refuses a bad one as a start would; errors name the field
//! and never quote the key.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ankusa_config::{GcsCredentials, GcsStoreConfig};
use aws_lc_rs::signature::{RSA_PKCS1_SHA256, RsaKeyPair};
use base64::Engine;

use super::BlobError;
use super::rest::{Token, TokenCache, fetch_token};

/// Read and write objects (list included): the narrowest scope the store needs.
pub(super) const SCOPE: &str = "https://www.googleapis.com/auth/devstorage.read_write";
const DEFAULT_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";
/// An assertion's lifetime (Google's maximum).
const JWT_LIFETIME_S: u64 = 3600;

/// Where the store's tokens come from.
pub(super) enum GcsAuth {
    Anonymous,
    ServiceAccount {
        account: Box<ServiceAccount>,
        cache: TokenCache,
    },
    Metadata {
        url: String,
        cache: TokenCache,
    },
}

/// A parsed service-account key.
pub(super) struct ServiceAccount {
    client_email: String,
    key_id: Option<String>,
    token_uri: String,
    key: RsaKeyPair,
}

impl GcsAuth {
    /// The auth of a `gcs` section (`at`: `storage.gcs`, `backup.store.gcs`).
    pub fn from_config(cfg: &GcsStoreConfig, at: &str) -> Result<GcsAuth, String> {
        let field = format!("{at}.credentials");
        let json = match cfg.credentials() {
            Some(GcsCredentials::Inline(json)) => json.to_string(),
            Some(GcsCredentials::File(path)) => std::fs::read_to_string(path).map_err(|e| {
                format!(
                    "{field}: cannot read the service-account key file ({})",
                    e.kind()
                )
            })?,
            None if cfg.anonymous => return Ok(GcsAuth::Anonymous),
            None => {
                let host = std::env::var("GCE_METADATA_HOST")
                    .ok()
                    .filter(|h| !h.is_empty())
                    .unwrap_or_else(|| "metadata.google.internal".into());
                return Ok(GcsAuth::metadata(&host));
            }
        };
        Ok(GcsAuth::ServiceAccount {
            account: Box::new(ServiceAccount::parse(&json, &field)?),
            cache: TokenCache::default(),
        })
    }

    /// Tokens from the metadata server at `host` (`host[:port]`).
    pub fn metadata(host: &str) -> GcsAuth {
        GcsAuth::Metadata {
            url: format!(
                "http://{host}/computeMetadata/v1/instance/service-accounts/default/token"
            ),
            cache: TokenCache::default(),
        }
    }

    /// `mode` for errors and logs: `service_account`, `metadata` or `anonymous`.
    pub fn mode(&self) -> &'static str {
        match self {
            GcsAuth::Anonymous => "anonymous",
            GcsAuth::ServiceAccount { .. } => "service_account",
            GcsAuth::Metadata { .. } => "metadata",
        }
    }

    /// The bearer token for a request (`None`: anonymous). `op` and `key` name the request
    /// it is for in errors.
    pub async fn bearer(
        &self,
        http: &reqwest::Client,
        op: &'static str,
        key: &str,
    ) -> Result<Option<String>, BlobError> {
        match self {
            GcsAuth::Anonymous => Ok(None),
            GcsAuth::ServiceAccount { account, cache } => cache
                .get(|| account.exchange(http, op, key))
                .await
                .map(Some),
            GcsAuth::Metadata { url, cache } => cache
                .get(|| metadata_token(http, url, op, key))
                .await
                .map(Some),
        }
    }

    /// The store refused the token (`401`): the next request fetches another.
    pub async fn refused(&self) {
        match self {
            GcsAuth::Anonymous => {}
            GcsAuth::ServiceAccount { cache, .. } | GcsAuth::Metadata { cache, .. } => {
                cache.clear().await
            }
        }
    }
}

impl ServiceAccount {
    /// A service-account key's JSON: `client_email`, `private_key` (PKCS#8 PEM, RSA),
    /// `token_uri` (default Google's), `private_key_id`. Errors name `field` only.
    pub fn parse(json: &str, field: &str) -> Result<ServiceAccount, String> {
        let v: serde_json::Value = serde_json::from_str(json)
            .map_err(|_| format!("{field}: the service-account key is not valid JSON"))?;
        let s = |k: &str| v.get(k).and_then(|x| x.as_str()).filter(|x| !x.is_empty());
        if s("type") != Some("service_account") {
            return Err(format!(
                "{field}: not a service-account key (type is not service_account)"
            ));
        }
        let client_email = s("client_email")
            .ok_or_else(|| format!("{field}: the service-account key has no client_email"))?;
        let pem = s("private_key")
            .ok_or_else(|| format!("{field}: the service-account key has no private_key"))?;
        let token_uri = s("token_uri").unwrap_or(DEFAULT_TOKEN_URI);
        match url::Url::parse(token_uri) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {}
            _ => {
                return Err(format!(
                    "{field}: the key's token_uri is not an http(s) URL"
                ));
            }
        }
        let der = pem_body(pem, "PRIVATE KEY").ok_or_else(|| {
            format!("{field}: the private_key is not a PEM \"PRIVATE KEY\" (PKCS#8)")
        })?;
        let key = RsaKeyPair::from_pkcs8(&der)
            .map_err(|_| format!("{field}: the private_key is not a PKCS#8 RSA key"))?;
        Ok(ServiceAccount {
            client_email: client_email.to_string(),
            key_id: s("private_key_id").map(str::to_string),
            token_uri: token_uri.to_string(),
            key,
        })
    }

    /// The signed assertion at `now` (seconds since the epoch): `header.claims.signature`,
    /// each base64url without padding.
    pub fn jwt(&self, now: u64) -> Result<String, String> {
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let mut header = serde_json::json!({"alg": "RS256", "typ": "JWT"});
        if let Some(kid) = &self.key_id {
            header["kid"] = kid.clone().into();
        }
        let claims = serde_json::json!({
            "iss": self.client_email,
            "scope": SCOPE,
            "aud": self.token_uri,
            "iat": now,
            "exp": now + JWT_LIFETIME_S,
        });
        let signing_input = format!(
            "{}.{}",
            b64.encode(header.to_string()),
            b64.encode(claims.to_string())
        );
        let mut sig = vec![0u8; self.key.public_modulus_len()];
        self.key
            .sign(
                &RSA_PKCS1_SHA256,
                &aws_lc_rs::rand::SystemRandom::new(),
                signing_input.as_bytes(),
                &mut sig,
            )
            .map_err(|_| "signing the service-account assertion failed".to_string())?;
        Ok(format!("{signing_input}.{}", b64.encode(sig)))
    }

    /// A new access token for a fresh assertion.
    async fn exchange(
        &self,
        http: &reqwest::Client,
        op: &'static str,
        key: &str,
    ) -> Result<Token, BlobError> {
        let refused = |message: String| BlobError::Refused {
            op,
            key: key.to_string(),
            message,
        };
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let jwt = self.jwt(now).map_err(refused)?;
        let form = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer")
            .append_pair("assertion", &jwt)
            .finish();
        let what = "service-account token";
        fetch_token(
            http.post(&self.token_uri)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(form),
            op,
            key,
            what,
        )
        .await
    }
}

/// A token from the metadata server.
async fn metadata_token(
    http: &reqwest::Client,
    url: &str,
    op: &'static str,
    key: &str,
) -> Result<Token, BlobError> {
    let what = "metadata server token";
    let req = http
        .get(url)
        .header("Metadata-Flavor", "Google")
        .timeout(Duration::from_secs(5));
    fetch_token(req, op, key, what).await
}

/// The DER inside `-----BEGIN <label>----- ... -----END <label>-----`.
fn pem_body(pem: &str, label: &str) -> Option<Vec<u8>> {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let (_, rest) = pem.split_once(&begin)?;
    let (body, _) = rest.split_once(&end)?;
    let b64: String = body.chars().filter(|c| !c.is_whitespace()).collect();
    base64::engine::general_purpose::STANDARD.decode(b64).ok()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use aws_lc_rs::encoding::AsDer;
    use aws_lc_rs::signature::{KeyPair, RSA_PKCS1_2048_8192_SHA256, UnparsedPublicKey};

    /// A throwaway RSA key made for the test, as a service-account key's JSON, and its public
    /// key (PKCS#1 DER).
    pub fn throwaway_key(token_uri: &str) -> (String, Vec<u8>) {
        let key = RsaKeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).expect("keygen");
        let der = AsDer::<aws_lc_rs::encoding::Pkcs8V1Der>::as_der(&key).expect("pkcs8");
        let b64 = base64::engine::general_purpose::STANDARD.encode(der.as_ref());
        let lines: Vec<&str> = b64
            .as_bytes()
            .chunks(64)
            .map(|c| std::str::from_utf8(c).expect("ascii"))
            .collect();
        let pem = format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            lines.join("\n")
        );
        let json = serde_json::json!({
            "type": "service_account",
            "project_id": "test-project",
            "private_key_id": "kid-1",
            "private_key": pem,
            "client_email": "ankusa-test@test-project.iam.gserviceaccount.com",
            "token_uri": token_uri,
        })
        .to_string();
        (json, key.public_key().as_ref().to_vec())
    }

    #[test]
    fn the_assertion_is_a_well_formed_rs256_jwt() {
        let (json, public) = throwaway_key("https://oauth2.example/token");
        let sa = ServiceAccount::parse(&json, "storage.gcs.credentials").unwrap();
        let jwt = sa.jwt(1_700_000_000).unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3, "{jwt}");
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let header: serde_json::Value =
            serde_json::from_slice(&b64.decode(parts[0]).unwrap()).unwrap();
        assert_eq!(
            header,
            serde_json::json!({"alg": "RS256", "typ": "JWT", "kid": "kid-1"})
        );
        let claims: serde_json::Value =
            serde_json::from_slice(&b64.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(
            claims,
            serde_json::json!({
                "iss": "ankusa-test@test-project.iam.gserviceaccount.com",
                "scope": SCOPE,
                "aud": "https://oauth2.example/token",
                "iat": 1_700_000_000u64,
                "exp": 1_700_003_600u64,
            })
        );
        let sig = b64.decode(parts[2]).unwrap();
        assert_eq!(sig.len(), 256);
        let signed = format!("{}.{}", parts[0], parts[1]);
        UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, &public)
            .verify(signed.as_bytes(), &sig)
            .expect("the signature verifies with the key's public half");
        let mut tampered = signed.into_bytes();
        tampered[3] ^= 1;
        assert!(
            UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, &public)
                .verify(&tampered, &sig)
                .is_err()
        );
    }

    #[test]
    fn bad_keys_are_refused_naming_the_field_only() {
        let (json, _) = throwaway_key("https://oauth2.example/token");
        let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
        let pem = v["private_key"].as_str().unwrap().to_string();
        let secret_line = pem.lines().nth(1).unwrap().to_string();
        v["private_key"] = pem.replace(&secret_line, &secret_line[..40]).into();
        let e = ServiceAccount::parse(&v.to_string(), "storage.gcs.credentials")
            .err()
            .unwrap();
        assert!(e.starts_with("storage.gcs.credentials: "), "{e}");
        assert!(!e.contains(&secret_line[..40]), "{e}");
        for bad in [
            "not json",
            r#"{"type": "authorized_user"}"#,
            r#"{"type": "service_account", "private_key": "x"}"#,
            r#"{"type": "service_account", "client_email": "a@b", "private_key": "x"}"#,
        ] {
            let e = ServiceAccount::parse(bad, "f").err().unwrap();
            assert!(e.starts_with("f: "), "{e}");
        }
        v["private_key"] = pem.into();
        v["token_uri"] = "file:///etc/passwd".into();
        assert!(
            ServiceAccount::parse(&v.to_string(), "f")
                .err()
                .unwrap()
                .contains("token_uri")
        );
    }
}
