//! How the Azure store authorizes a request, by the one mode its section sets:
//! - `sas_token`: the SAS query is appended to every request URL; nothing is signed here.
//! - `account_key`: Shared Key. The string to sign is the verb, the eleven standard headers
//!   (`Content-Length` empty when zero, as from version 2015-02-21), the `x-ms-*` headers
//!   (lowercase, sorted, `name:value`) and the canonicalized resource (`/<account><path>`,
//!   then each query parameter, lowercase and sorted, `\nname:value`, a repeated one's values
//!   sorted and joined by `,`), signed with HMAC-SHA256 under the base64-decoded key:
//!   `Authorization: SharedKey <account>:<base64 signature>`.
//! - neither: Entra workload identity. The projected token in `AZURE_FEDERATED_TOKEN_FILE`
//!   (re-read at each exchange: it rotates) is the client assertion of a `client_credentials`
//!   grant for `AZURE_CLIENT_ID` at `$AZURE_AUTHORITY_HOST/<AZURE_TENANT_ID>/oauth2/v2.0/token`
//!   (authority default `https://login.microsoftonline.com/`), scope
//!   `https://storage.azure.com/.default`; the access token is cached until 5 minutes before
//!   it expires and dropped on a `401`.
//!
//! No error carries a SAS, a key, a signature or a token: only the field, the step and a
//! status or error code.

use std::path::PathBuf;

use ankusa_config::AzureStoreConfig;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::BlobError;
use super::rest::{Token, TokenCache, fetch_token};

pub(super) const STORAGE_SCOPE: &str = "https://storage.azure.com/.default";
const DEFAULT_AUTHORITY: &str = "https://login.microsoftonline.com/";

/// The standard headers of the string to sign, in its order.
const SIGNED_HEADERS: [&str; 11] = [
    "content-encoding",
    "content-language",
    "content-length",
    "content-md5",
    "content-type",
    "date",
    "if-modified-since",
    "if-match",
    "if-none-match",
    "if-unmodified-since",
    "range",
];

pub(super) enum AzureAuth {
    /// The SAS query, without a leading `?`.
    Sas(String),
    SharedKey {
        account: String,
        key: Vec<u8>,
    },
    Workload(Box<Workload>),
}

/// An Entra workload identity: who asks, where, with which assertion file.
pub(super) struct Workload {
    client_id: String,
    token_url: String,
    token_file: PathBuf,
    cache: TokenCache,
}

/// One request as Shared Key sees it: the verb, the URL path as sent, the query parameters
/// (decoded), and the headers (lowercase names).
pub(super) struct Signable<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub query: &'a [(&'a str, String)],
    pub headers: &'a [(&'a str, String)],
}

impl AzureAuth {
    /// The auth of an `azure` section; `env` reads the workload identity's variables (the
    /// process environment, or a test's).
    pub fn from_config(
        cfg: &AzureStoreConfig,
        at: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<AzureAuth, String> {
        if let Some(sas) = &cfg.sas_token {
            return Ok(AzureAuth::Sas(
                sas.expose().trim().trim_start_matches('?').to_string(),
            ));
        }
        if let Some(key) = &cfg.account_key {
            let key = base64::engine::general_purpose::STANDARD
                .decode(key.expose().trim())
                .map_err(|_| format!("{at}.account_key: must be the account's base64 key"))?;
            return Ok(AzureAuth::SharedKey {
                account: cfg.account.clone(),
                key,
            });
        }
        let var = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let (client_id, tenant, file) = (
            var("AZURE_CLIENT_ID"),
            var("AZURE_TENANT_ID"),
            var("AZURE_FEDERATED_TOKEN_FILE"),
        );
        let (Some(client_id), Some(tenant), Some(file)) = (client_id, tenant, file) else {
            return Err(format!(
                "{at}: no sas_token or account_key, and no Entra workload identity: AZURE_CLIENT_ID, AZURE_TENANT_ID and AZURE_FEDERATED_TOKEN_FILE must all be set"
            ));
        };
        if !tenant
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-.".contains(&b))
        {
            return Err(format!(
                "{at}: AZURE_TENANT_ID must be a tenant id or domain ([A-Za-z0-9.-])"
            ));
        }
        let authority = var("AZURE_AUTHORITY_HOST").unwrap_or_else(|| DEFAULT_AUTHORITY.into());
        match url::Url::parse(&authority) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {}
            _ => return Err(format!("{at}: AZURE_AUTHORITY_HOST is not an http(s) URL")),
        }
        Ok(AzureAuth::Workload(Box::new(Workload {
            client_id,
            token_url: format!(
                "{}/{tenant}/oauth2/v2.0/token",
                authority.trim_end_matches('/')
            ),
            token_file: PathBuf::from(file),
            cache: TokenCache::default(),
        })))
    }

    /// `sas`, `shared_key` or `workload_identity`.
    pub fn mode(&self) -> &'static str {
        match self {
            AzureAuth::Sas(_) => "sas",
            AzureAuth::SharedKey { .. } => "shared_key",
            AzureAuth::Workload(_) => "workload_identity",
        }
    }

    /// The store refused the request's token (`401`): the next request fetches another.
    pub async fn refused(&self) {
        if let AzureAuth::Workload(w) = self {
            w.cache.clear().await;
        }
    }
}

impl Workload {
    /// The cached access token, or a new one.
    pub async fn bearer(
        &self,
        http: &reqwest::Client,
        op: &'static str,
        key: &str,
    ) -> Result<String, BlobError> {
        self.cache.get(|| self.exchange(http, op, key)).await
    }

    async fn exchange(
        &self,
        http: &reqwest::Client,
        op: &'static str,
        key: &str,
    ) -> Result<Token, BlobError> {
        let what = "workload identity token";
        let assertion = tokio::fs::read_to_string(&self.token_file)
            .await
            .map_err(|e| BlobError::Refused {
                op,
                key: key.to_string(),
                message: format!(
                    "{what}: cannot read AZURE_FEDERATED_TOKEN_FILE ({})",
                    e.kind()
                ),
            })?;
        let form = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("client_id", &self.client_id)
            .append_pair("scope", STORAGE_SCOPE)
            .append_pair("grant_type", "client_credentials")
            .append_pair(
                "client_assertion_type",
                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
            )
            .append_pair("client_assertion", assertion.trim())
            .finish();
        fetch_token(
            http.post(&self.token_url)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(form),
            op,
            key,
            what,
        )
        .await
    }
}

/// Shared Key's string to sign for `req` by `account`.
pub(super) fn string_to_sign(account: &str, req: &Signable<'_>) -> String {
    let header = |name: &str| {
        req.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim())
            .unwrap_or("")
    };
    let mut out = String::new();
    out.push_str(req.method);
    out.push('\n');
    for name in SIGNED_HEADERS {
        let v = header(name);
        // From version 2015-02-21 a zero Content-Length is signed as the empty string.
        out.push_str(if name == "content-length" && v == "0" {
            ""
        } else {
            v
        });
        out.push('\n');
    }
    let mut ms: Vec<(String, String)> = req
        .headers
        .iter()
        .filter(|(k, _)| k.to_ascii_lowercase().starts_with("x-ms-"))
        .map(|(k, v)| (k.to_ascii_lowercase(), unfold(v)))
        .collect();
    ms.sort();
    for (k, v) in ms {
        out.push_str(&format!("{k}:{v}\n"));
    }
    out.push('/');
    out.push_str(account);
    out.push_str(req.path);
    let mut names: Vec<String> = req
        .query
        .iter()
        .map(|(k, _)| k.to_ascii_lowercase())
        .collect();
    names.sort();
    names.dedup();
    for name in names {
        let mut values: Vec<&str> = req
            .query
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(&name))
            .map(|(_, v)| v.as_str())
            .collect();
        values.sort_unstable();
        out.push_str(&format!("\n{name}:{}", values.join(",")));
    }
    out
}

/// The `Authorization` value of `string_to_sign` under `key`.
pub(super) fn shared_key_header(account: &str, key: &[u8], string_to_sign: &str) -> String {
    // HMAC takes a key of any length.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(string_to_sign.as_bytes());
    let sig = base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
    format!("SharedKey {account}:{sig}")
}

/// A header value trimmed, its runs of whitespace one space (outside quotes, which our
/// headers never have).
fn unfold(v: &str) -> String {
    v.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of "Authorize with Shared Key" (Azure Storage REST docs, "Constructing the
    /// signature string"): a Get Container Metadata request of version 2009-09-19.
    #[test]
    fn the_documented_string_to_sign() {
        let headers = [
            ("x-ms-date", "Sun, 11 Oct 2009 21:49:13 GMT".to_string()),
            ("x-ms-version", "2009-09-19".to_string()),
        ];
        let query = [
            ("restype", "container".to_string()),
            ("comp", "metadata".to_string()),
            ("timeout", "20".to_string()),
        ];
        let sts = string_to_sign(
            "myaccount",
            &Signable {
                method: "GET",
                path: "/myaccount/mycontainer",
                query: &query,
                headers: &headers,
            },
        );
        assert_eq!(
            sts,
            "GET\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:Sun, 11 Oct 2009 21:49:13 GMT\nx-ms-version:2009-09-19\n/myaccount/myaccount/mycontainer\ncomp:metadata\nrestype:container\ntimeout:20"
        );
    }

    /// The docs' canonicalized resource of a repeated parameter: values sorted, joined by `,`.
    #[test]
    fn repeated_query_parameters_and_header_order() {
        let query = [
            ("restype", "container".to_string()),
            ("comp", "list".to_string()),
            ("include", "snapshots".to_string()),
            ("include", "metadata".to_string()),
            ("include", "uncommittedblobs".to_string()),
        ];
        let headers = [
            ("x-ms-version", "2021-08-06".to_string()),
            ("Content-Length", "0".to_string()),
            ("x-ms-date", "Sat, 05 Dec 2026 16:00:00 GMT".to_string()),
            ("content-type", "application/octet-stream".to_string()),
            ("x-ms-blob-type", "  BlockBlob ".to_string()),
        ];
        let sts = string_to_sign(
            "myaccount",
            &Signable {
                method: "PUT",
                path: "/mycontainer",
                query: &query,
                headers: &headers,
            },
        );
        assert!(
            sts.ends_with(
                "/myaccount/mycontainer\ncomp:list\ninclude:metadata,snapshots,uncommittedblobs\nrestype:container"
            ),
            "{sts}"
        );
        assert!(
            sts.starts_with("PUT\n\n\n\n\napplication/octet-stream\n\n\n\n\n\n\nx-ms-blob-type:BlockBlob\nx-ms-date:Sat, 05 Dec 2026 16:00:00 GMT\nx-ms-version:2021-08-06\n"),
            "{sts:?}"
        );
    }

    /// The signature of the documented string under Azurite's published development key,
    /// against `openssl dgst -sha256 -mac HMAC -macopt hexkey:<key> | base64` (an independent
    /// implementation).
    #[test]
    fn the_signature_is_hmac_sha256_under_the_decoded_key() {
        let key = base64::engine::general_purpose::STANDARD
            .decode("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==")
            .unwrap();
        let sts = "GET\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:Sun, 11 Oct 2009 21:49:13 GMT\nx-ms-version:2009-09-19\n/myaccount/myaccount/mycontainer\ncomp:metadata\nrestype:container\ntimeout:20";
        assert_eq!(
            shared_key_header("myaccount", &key, sts),
            format!("SharedKey myaccount:{}", OPENSSL_SIGNATURE)
        );
    }

    const OPENSSL_SIGNATURE: &str = "Su5rvibNeMxB7A4I87rOtEgCDtdICsL8v5H+yJs0W+M=";

    #[test]
    fn workload_identity_needs_all_three_variables_and_names_none_of_their_values() {
        let cfg: AzureStoreConfig =
            serde_yaml_ng::from_str("account: acct\ncontainer: ctr\n").unwrap();
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                vars.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let e = AzureAuth::from_config(
            &cfg,
            "storage.azure",
            env(&[("AZURE_CLIENT_ID", "cid-secretish")]),
        )
        .err()
        .unwrap();
        assert!(
            e.starts_with("storage.azure: ") && e.contains("AZURE_TENANT_ID"),
            "{e}"
        );
        assert!(!e.contains("cid-secretish"));
        let ok = AzureAuth::from_config(
            &cfg,
            "storage.azure",
            env(&[
                ("AZURE_CLIENT_ID", "cid"),
                ("AZURE_TENANT_ID", "72f988bf-86f1-41af-91ab-2d7cd011db47"),
                (
                    "AZURE_FEDERATED_TOKEN_FILE",
                    "/var/run/secrets/azure/tokens/azure-identity-token",
                ),
            ]),
        )
        .unwrap();
        let AzureAuth::Workload(w) = ok else {
            panic!("workload identity")
        };
        assert_eq!(
            w.token_url,
            "https://login.microsoftonline.com/72f988bf-86f1-41af-91ab-2d7cd011db47/oauth2/v2.0/token"
        );
        let bad_tenant = AzureAuth::from_config(
            &cfg,
            "storage.azure",
            env(&[
                ("AZURE_CLIENT_ID", "cid"),
                ("AZURE_TENANT_ID", "x/../../evil?"),
                ("AZURE_FEDERATED_TOKEN_FILE", "/t"),
            ]),
        )
        .err()
        .unwrap();
        assert!(bad_tenant.contains("AZURE_TENANT_ID") && !bad_tenant.contains("evil"));
    }
}
