//! An Azure Blob Storage container over the Blob REST API (version `2021-08-06`), authorized
//! by `azure_auth.rs` (SAS, Shared Key or an Entra workload identity token):
//!
//! | op | request | answer |
//! |---|---|---|
//! | put | `PUT <svc>/<container>/<key>`, `x-ms-blob-type: BlockBlob`, `Content-MD5` (Azure checks it) | `201` |
//! | get | `GET <svc>/<container>/<key>` (`x-ms-range: bytes=a-b` for a range) | `200` / `206` |
//! | delete | `DELETE <svc>/<container>/<key>` | `202`; `404` is not an error |
//! | list | `GET <svc>/<container>?restype=container&comp=list&prefix=&maxresults=&marker=` | `<Blob>`s' `Name` and `Content-Length`, `NextMarker` |
//!
//! `<svc>` is the account's blob endpoint (`https://<account>.blob.core.windows.net`, or
//! Azurite's `http://127.0.0.1:10000/devstoreaccount1`). Transport errors and
//! 408/429/500/502/503/504 are retried twice (200 ms, then 1 s); 404 is `NotFound`; 401/403
//! and the rest are `Refused` with the `x-ms-error-code` word (`AuthorizationFailure`), never
//! a message, a URL (it may hold the SAS) or a header.

use std::time::{Duration, SystemTime};

use ankusa_config::AzureStoreConfig;
use base64::Engine;
use bytes::Bytes;

use super::azure_auth::{AzureAuth, Signable, shared_key_header, string_to_sign};
use super::rest::{
    add_listed, code_word, cut_range, deleted, md5_of, query_escape, status_error, transport_class,
    unparsable_listing, with_retries, xml_tag,
};
use super::{BlobError, Listed};

/// The REST API version every request names (`x-ms-version`).
pub(super) const API_VERSION: &str = "2021-08-06";

pub struct AzureStore {
    http: reqwest::Client,
    /// `<scheme>://<host>[:port]`.
    origin: String,
    /// The service's own path (`/devstoreaccount1` on Azurite), else empty.
    base_path: String,
    container: String,
    auth: AzureAuth,
    /// Blobs asked for per listing page.
    list_page: u32,
}

/// One request: what to send and what Shared Key signs.
struct Call<'a> {
    op: &'static str,
    /// The key (or prefix) errors name.
    key: &'a str,
    method: reqwest::Method,
    /// The URL path as sent.
    path: String,
    /// Query parameters, decoded.
    query: Vec<(&'static str, String)>,
    /// Headers besides `x-ms-date`, `x-ms-version` and auth (lowercase names).
    headers: Vec<(&'static str, String)>,
    body: Bytes,
    max: Option<u64>,
}

impl AzureStore {
    /// The store of an `azure` section (`at`: `storage.azure`, `backup.store.azure`); the
    /// workload identity's variables come from the process environment. Contacts nothing.
    pub fn new(cfg: &AzureStoreConfig, at: &str) -> Result<AzureStore, String> {
        let auth = AzureAuth::from_config(cfg, at, |k| std::env::var(k).ok())?;
        Self::with_auth(cfg, at, auth)
    }

    pub(super) fn with_auth(
        cfg: &AzureStoreConfig,
        at: &str,
        auth: AzureAuth,
    ) -> Result<AzureStore, String> {
        let service = cfg.service_url();
        let url = url::Url::parse(&service).map_err(|_| format!("{at}.endpoint: is not a URL"))?;
        let host = url
            .host_str()
            .ok_or_else(|| format!("{at}.endpoint: has no host"))?;
        let origin = match url.port() {
            Some(p) => format!("{}://{host}:{p}", url.scheme()),
            None => format!("{}://{host}", url.scheme()),
        };
        let http = reqwest::Client::builder()
            .timeout(Duration::from_millis(cfg.timeout_ms))
            .connect_timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("{at}: cannot build the HTTP client: {e}"))?;
        tracing::debug!(auth = auth.mode(), "azure blob store");
        Ok(AzureStore {
            http,
            origin,
            base_path: url.path().trim_end_matches('/').to_string(),
            container: cfg.container.clone(),
            auth,
            list_page: 1000,
        })
    }

    pub(super) fn set_list_page(&mut self, n: u32) {
        self.list_page = n.clamp(1, 5000);
    }

    /// The blob's URL path (keys are plain path segments: they need no escaping).
    fn blob_path(&self, key: &str) -> String {
        format!("{}/{}/{key}", self.base_path, self.container)
    }

    fn call<'a>(&self, op: &'static str, key: &'a str, method: reqwest::Method) -> Call<'a> {
        Call {
            op,
            key,
            method,
            path: self.blob_path(key),
            query: Vec::new(),
            headers: Vec::new(),
            body: Bytes::new(),
            max: None,
        }
    }

    pub async fn put(&self, key: &str, bytes: Bytes) -> Result<(), BlobError> {
        let md5 = base64::engine::general_purpose::STANDARD.encode(md5_of(&bytes));
        let mut c = self.call("put", key, reqwest::Method::PUT);
        c.headers = vec![
            ("content-length", bytes.len().to_string()),
            ("content-md5", md5),
            ("content-type", "application/octet-stream".into()),
            ("x-ms-blob-type", "BlockBlob".into()),
        ];
        c.body = bytes;
        self.send(&c).await.map(|_| ())
    }

    pub async fn get(&self, key: &str, max: u64) -> Result<Bytes, BlobError> {
        let mut c = self.call("get", key, reqwest::Method::GET);
        c.max = Some(max);
        self.send(&c).await
    }

    pub async fn get_range(&self, key: &str, offset: u64, len: u32) -> Result<Bytes, BlobError> {
        if len == 0 {
            return Ok(Bytes::new());
        }
        let mut c = self.call("get", key, reqwest::Method::GET);
        c.headers = vec![(
            "x-ms-range",
            format!("bytes={}-{}", offset, offset + u64::from(len) - 1),
        )];
        let body = self.send(&c).await?;
        cut_range("get", key, body, offset, len)
    }

    pub async fn delete(&self, key: &str) -> Result<(), BlobError> {
        deleted(
            self.send(&self.call("delete", key, reqwest::Method::DELETE))
                .await,
        )
    }

    /// Every blob under `prefix`, page by page, at most `max` of them.
    pub async fn list(&self, prefix: &str, max: usize) -> Result<Vec<Listed>, BlobError> {
        let mut out = Vec::new();
        let mut marker: Option<String> = None;
        loop {
            let mut c = self.call("list", prefix, reqwest::Method::GET);
            c.path = format!("{}/{}", self.base_path, self.container);
            c.query = vec![
                ("restype", "container".into()),
                ("comp", "list".into()),
                ("prefix", prefix.to_string()),
                ("maxresults", self.list_page.to_string()),
            ];
            if let Some(m) = &marker {
                c.query.push(("marker", m.clone()));
            }
            let body = self.send(&c).await?;
            let page = parse_list(&body).ok_or_else(|| unparsable_listing(prefix))?;
            add_listed(&mut out, page.objects, prefix, max)?;
            match page.next {
                Some(m) if !m.is_empty() => marker = Some(m),
                _ => break,
            }
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    /// One request with its retries; the body of a 2xx answer.
    async fn send(&self, c: &Call<'_>) -> Result<Bytes, BlobError> {
        with_retries(c.op, c.key, || self.once(c)).await
    }

    async fn once(&self, c: &Call<'_>) -> Result<Bytes, BlobError> {
        let (op, key) = (c.op, c.key);
        let transient = |message: String| BlobError::Transient {
            op,
            key: key.to_string(),
            message,
        };
        let mut headers = c.headers.clone();
        headers.push(("x-ms-date", httpdate::fmt_http_date(SystemTime::now())));
        headers.push(("x-ms-version", API_VERSION.into()));
        let mut query: Vec<String> = c
            .query
            .iter()
            .map(|(k, v)| format!("{k}={}", query_escape(v)))
            .collect();
        let mut authorization = None;
        match &self.auth {
            AzureAuth::Sas(sas) => query.push(sas.clone()),
            AzureAuth::SharedKey {
                account,
                key: secret,
            } => {
                let sts = string_to_sign(
                    account,
                    &Signable {
                        method: c.method.as_str(),
                        path: &c.path,
                        query: &c.query,
                        headers: &headers,
                    },
                );
                authorization = Some(shared_key_header(account, secret, &sts));
            }
            AzureAuth::Workload(w) => {
                authorization = Some(format!("Bearer {}", w.bearer(&self.http, op, key).await?));
            }
        }
        let mut url = format!("{}{}", self.origin, c.path);
        if !query.is_empty() {
            url.push('?');
            url.push_str(&query.join("&"));
        }
        let mut req = self.http.request(c.method.clone(), &url);
        for (k, v) in &headers {
            // reqwest sets Content-Length from a non-empty body (it is listed to be signed);
            // an empty body goes without one, and Azure refuses a Put Blob that lacks it.
            if *k != "content-length" || c.body.is_empty() {
                req = req.header(*k, v.as_str());
            }
        }
        if let Some(a) = authorization {
            req = req.header("authorization", a);
        }
        if c.method == reqwest::Method::PUT {
            req = req.body(c.body.clone());
        }
        let resp = req
            .send()
            .await
            .map_err(|e| transient(format!("transport: {}", transport_class(&e))))?;
        let status = resp.status().as_u16();
        if let (200..=299, Some(max), Some(n)) = (status, c.max, resp.content_length())
            && n > max
        {
            return Err(BlobError::TooLarge {
                op,
                key: key.to_string(),
                max,
            });
        }
        let header_code = resp
            .headers()
            .get("x-ms-error-code")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| transient(format!("reading the answer: {}", transport_class(&e))))?;
        match status {
            200..=299 => match c.max {
                Some(max) if bytes.len() as u64 > max => Err(BlobError::TooLarge {
                    op,
                    key: key.to_string(),
                    max,
                }),
                _ => Ok(bytes),
            },
            _ => {
                if status == 401 {
                    self.auth.refused().await;
                }
                let code = match header_code {
                    Some(h) => code_word(Some(&h)),
                    None => {
                        let text = String::from_utf8_lossy(&bytes[..bytes.len().min(4096)]);
                        code_word(xml_tag(&text, "Code").as_deref())
                    }
                };
                Err(status_error(op, key, status, &code))
            }
        }
    }
}

struct ListPage {
    objects: Vec<Listed>,
    next: Option<String>,
}

/// The `<Blob>`s (`Name`, `Properties/Content-Length`) and `NextMarker` of an
/// `EnumerationResults` (flat enough to read by its tags).
fn parse_list(body: &[u8]) -> Option<ListPage> {
    let text = std::str::from_utf8(body).ok()?;
    if !text.contains("<EnumerationResults") {
        return None;
    }
    let mut objects = Vec::new();
    for part in text.split("<Blob>").skip(1) {
        let part = part.split("</Blob>").next()?;
        objects.push(Listed {
            key: xml_tag(part, "Name")?,
            size: xml_tag(part, "Content-Length")?.trim().parse().ok()?,
        });
    }
    Some(ListPage {
        objects,
        next: xml_tag(text, "NextMarker"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listings_parse() {
        let xml = br#"<?xml version="1.0" encoding="utf-8"?><EnumerationResults ServiceEndpoint="http://127.0.0.1:10000/devstoreaccount1" ContainerName="c"><Prefix>p/</Prefix><MaxResults>2</MaxResults><Blobs><Blob><Name>p/a&amp;b</Name><Properties><Creation-Time>x</Creation-Time><Content-Length>13</Content-Length><BlobType>BlockBlob</BlobType></Properties></Blob><Blob><Name>p/b=1.seg</Name><Properties><Content-Length>0</Content-Length></Properties></Blob></Blobs><NextMarker>2!64!bWFya2Vy</NextMarker></EnumerationResults>"#;
        let p = parse_list(xml).unwrap();
        assert_eq!(
            p.objects,
            vec![
                Listed {
                    key: "p/a&b".into(),
                    size: 13
                },
                Listed {
                    key: "p/b=1.seg".into(),
                    size: 0
                }
            ]
        );
        assert_eq!(p.next.as_deref(), Some("2!64!bWFya2Vy"));
        let last =
            parse_list(br#"<EnumerationResults><Blobs /><NextMarker /></EnumerationResults>"#)
                .unwrap();
        assert!(last.objects.is_empty() && last.next.is_none());
        assert!(parse_list(b"<Error><Code>AuthorizationFailure</Code></Error>").is_none());
    }

    /// Entra workload identity: the projected token file is the client assertion of one
    /// `client_credentials` exchange, whose access token every request then carries.
    #[tokio::test]
    async fn workload_identity_exchanges_the_federated_token_once() {
        use super::super::test_server::Server;
        let login = Server::start(|_| {
            (
                200,
                r#"{"token_type":"Bearer","expires_in":3599,"access_token":"aad-token"}"#.into(),
            )
        })
        .await;
        let blob = Server::start(|s| match s.method.as_str() {
            "PUT" => (201, String::new()),
            _ => (200, "stored".into()),
        })
        .await;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("azure-identity-token");
        std::fs::write(&file, "federated.jwt.1\n").unwrap();
        let cfg: AzureStoreConfig = serde_yaml_ng::from_str(&format!(
            "account: acct\ncontainer: ctr\nendpoint: {}/acct\n",
            blob.base
        ))
        .unwrap();
        let vars = [
            ("AZURE_CLIENT_ID", "client-1".to_string()),
            ("AZURE_TENANT_ID", "tenant-1".to_string()),
            ("AZURE_FEDERATED_TOKEN_FILE", file.display().to_string()),
            ("AZURE_AUTHORITY_HOST", format!("{}/", login.base)),
        ];
        let auth = AzureAuth::from_config(&cfg, "storage.azure", |k| {
            vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone())
        })
        .unwrap();
        let s = AzureStore::with_auth(&cfg, "storage.azure", auth).unwrap();
        s.put("p/x=1.seg", Bytes::from_static(b"stored"))
            .await
            .unwrap();
        assert_eq!(s.get("p/x=1.seg", 100).await.unwrap(), &b"stored"[..]);

        let exchanges = login.seen();
        assert_eq!(exchanges.len(), 1, "one token for both requests");
        assert_eq!(exchanges[0].uri, "/tenant-1/oauth2/v2.0/token");
        let form: std::collections::HashMap<String, String> =
            url::form_urlencoded::parse(&exchanges[0].body)
                .into_owned()
                .collect();
        assert_eq!(form["client_id"], "client-1");
        assert_eq!(form["grant_type"], "client_credentials");
        assert_eq!(form["scope"], "https://storage.azure.com/.default");
        assert_eq!(
            form["client_assertion_type"],
            "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
        );
        assert_eq!(form["client_assertion"], "federated.jwt.1");
        let sent = blob.seen();
        assert_eq!(sent.len(), 2);
        for r in &sent {
            assert_eq!(r.header("authorization"), Some("Bearer aad-token"));
            assert_eq!(r.header("x-ms-version"), Some(API_VERSION));
            assert!(r.header("x-ms-date").is_some_and(|d| d.ends_with(" GMT")));
        }
        assert_eq!(sent[0].uri, "/acct/ctr/p/x=1.seg");
        assert_eq!(sent[0].header("x-ms-blob-type"), Some("BlockBlob"));
        assert_eq!(
            sent[0].header("content-md5"),
            Some("ye6QJVzcHvXyRzFwZedBEQ==")
        );
    }

    #[test]
    fn paths_under_the_default_and_an_emulator_endpoint() {
        let cfg: AzureStoreConfig = serde_yaml_ng::from_str(
            "account: devstoreaccount1\ncontainer: ctr\nendpoint: http://127.0.0.1:10000/devstoreaccount1/\nsas_token: 'sv=1&sig=x'\n",
        )
        .unwrap();
        let s = AzureStore::new(&cfg, "storage.azure").unwrap();
        assert_eq!(s.origin, "http://127.0.0.1:10000");
        assert_eq!(s.blob_path("p/x=1.seg"), "/devstoreaccount1/ctr/p/x=1.seg");
        let cfg: AzureStoreConfig =
            serde_yaml_ng::from_str("account: acct\ncontainer: ctr\naccount_key: a2V5\n").unwrap();
        let s = AzureStore::new(&cfg, "storage.azure").unwrap();
        assert_eq!(s.origin, "https://acct.blob.core.windows.net");
        assert_eq!(s.blob_path("k"), "/ctr/k");
    }
}
