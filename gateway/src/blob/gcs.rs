//! A Google Cloud Storage bucket over the JSON API (`gcs_auth.rs` gives the bearer tokens):
//!
//! | op | request | answer |
//! |---|---|---|
//! | put | `POST /upload/storage/v1/b/<bucket>/o?uploadType=media&name=<key>` | `200`, the object's `md5Hash`, checked against the body's |
//! | get | `GET /storage/v1/b/<bucket>/o/<key>?alt=media` (`Range: bytes=a-b` for a range) | `200` / `206` |
//! | delete | `DELETE /storage/v1/b/<bucket>/o/<key>` | `204`; `404` is not an error |
//! | list | `GET /storage/v1/b/<bucket>/o?prefix=&maxResults=&pageToken=` | items' `name` and `size`, `nextPageToken` |
//!
//! Keys are percent-encoded whole (`/` included) in paths and queries. Transport errors and
//! 408/429/500/502/503/504 are retried twice (200 ms, then 1 s); 404 is `NotFound`; 401/403
//! and the rest are `Refused` with Google's error status word (`PERMISSION_DENIED`), never
//! its message. A `401` drops the cached token.

use std::time::Duration;

use ankusa_config::{DEFAULT_GCS_ENDPOINT, GcsStoreConfig};
use base64::Engine;
use bytes::Bytes;

use super::gcs_auth::GcsAuth;
use super::rest::{
    add_listed, code_word, cut_range, deleted, md5_of, query_escape, status_error, transport_class,
    unparsable_listing, with_retries,
};
use super::{BlobError, Listed};

pub struct GcsStore {
    http: reqwest::Client,
    /// `<scheme>://<host>[:port][/path]`, no trailing `/`.
    endpoint: String,
    bucket: String,
    auth: GcsAuth,
    /// Keys asked for per listing page.
    list_page: u32,
}

impl GcsStore {
    /// The store of a `gcs` section (`at`: `storage.gcs`, `backup.store.gcs`): reads the key
    /// file, contacts nothing.
    pub fn new(cfg: &GcsStoreConfig, at: &str) -> Result<GcsStore, String> {
        let endpoint = cfg
            .endpoint
            .as_ref()
            .map_or(DEFAULT_GCS_ENDPOINT, |e| e.expose())
            .trim_end_matches('/')
            .to_string();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_millis(cfg.timeout_ms))
            .connect_timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("{at}: cannot build the HTTP client: {e}"))?;
        let auth = GcsAuth::from_config(cfg, at)?;
        tracing::debug!(auth = auth.mode(), "gcs blob store");
        Ok(GcsStore {
            http,
            endpoint,
            bucket: cfg.bucket.clone(),
            auth,
            list_page: 1000,
        })
    }

    /// The same store with tokens from `auth` (the tests' token servers).
    #[cfg(test)]
    pub(super) fn with_auth(mut self, auth: GcsAuth) -> GcsStore {
        self.auth = auth;
        self
    }

    pub(super) fn set_list_page(&mut self, n: u32) {
        self.list_page = n.clamp(1, 1000);
    }

    fn object_url(&self, key: &str) -> String {
        format!(
            "{}/storage/v1/b/{}/o/{}",
            self.endpoint,
            self.bucket,
            query_escape(key)
        )
    }

    pub async fn put(&self, key: &str, bytes: Bytes) -> Result<(), BlobError> {
        let url = format!(
            "{}/upload/storage/v1/b/{}/o?uploadType=media&name={}",
            self.endpoint,
            self.bucket,
            query_escape(key)
        );
        let want = base64::engine::general_purpose::STANDARD.encode(md5_of(&bytes));
        let headers = [("content-type", "application/octet-stream")];
        let (url, headers, bytes, want) = (&url, &headers, &bytes, &want);
        with_retries("put", key, || async move {
            let body = self
                .once(
                    "put",
                    key,
                    reqwest::Method::POST,
                    url,
                    headers,
                    bytes.clone(),
                    None,
                )
                .await?;
            // The stored object's MD5 (absent for objects under a customer-supplied key).
            let stored: serde_json::Value =
                serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
            match stored.get("md5Hash").and_then(|m| m.as_str()) {
                Some(md5) if md5 != want.as_str() => Err(BlobError::Transient {
                    op: "put",
                    key: key.to_string(),
                    message: "the stored object's md5Hash differs from the body's".into(),
                }),
                _ => Ok(()),
            }
        })
        .await
    }

    pub async fn get(&self, key: &str, max: u64) -> Result<Bytes, BlobError> {
        let url = format!("{}?alt=media", self.object_url(key));
        self.send("get", key, reqwest::Method::GET, &url, &[], Some(max))
            .await
    }

    pub async fn get_range(&self, key: &str, offset: u64, len: u32) -> Result<Bytes, BlobError> {
        if len == 0 {
            return Ok(Bytes::new());
        }
        let url = format!("{}?alt=media", self.object_url(key));
        let range = format!("bytes={}-{}", offset, offset + u64::from(len) - 1);
        let body = self
            .send(
                "get",
                key,
                reqwest::Method::GET,
                &url,
                &[("range", range.as_str())],
                None,
            )
            .await?;
        cut_range("get", key, body, offset, len)
    }

    pub async fn delete(&self, key: &str) -> Result<(), BlobError> {
        let url = self.object_url(key);
        deleted(
            self.send("delete", key, reqwest::Method::DELETE, &url, &[], None)
                .await,
        )
    }

    /// Every object under `prefix`, page by page, at most `max` of them.
    pub async fn list(&self, prefix: &str, max: usize) -> Result<Vec<Listed>, BlobError> {
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut url = format!(
                "{}/storage/v1/b/{}/o?prefix={}&maxResults={}&fields={}",
                self.endpoint,
                self.bucket,
                query_escape(prefix),
                self.list_page,
                query_escape("items(name,size),nextPageToken")
            );
            if let Some(t) = &token {
                url.push_str("&pageToken=");
                url.push_str(&query_escape(t));
            }
            let body = self
                .send("list", prefix, reqwest::Method::GET, &url, &[], None)
                .await?;
            let page = parse_list(&body).ok_or_else(|| unparsable_listing(prefix))?;
            add_listed(&mut out, page.objects, prefix, max)?;
            match page.next {
                Some(t) if !t.is_empty() => token = Some(t),
                _ => break,
            }
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    /// One request with its retries; the body of a 2xx answer.
    async fn send(
        &self,
        op: &'static str,
        key: &str,
        method: reqwest::Method,
        url: &str,
        headers: &[(&str, &str)],
        max: Option<u64>,
    ) -> Result<Bytes, BlobError> {
        with_retries(op, key, || {
            self.once(op, key, method.clone(), url, headers, Bytes::new(), max)
        })
        .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn once(
        &self,
        op: &'static str,
        key: &str,
        method: reqwest::Method,
        url: &str,
        headers: &[(&str, &str)],
        body: Bytes,
        max: Option<u64>,
    ) -> Result<Bytes, BlobError> {
        let transient = |message: String| BlobError::Transient {
            op,
            key: key.to_string(),
            message,
        };
        let sends_body = method == reqwest::Method::POST;
        let mut req = self.http.request(method, url);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        if let Some(token) = self.auth.bearer(&self.http, op, key).await? {
            req = req.bearer_auth(token);
        }
        if sends_body {
            req = req.body(body);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| transient(format!("transport: {}", transport_class(&e))))?;
        let status = resp.status().as_u16();
        if let (200..=299, Some(max), Some(n)) = (status, max, resp.content_length())
            && n > max
        {
            return Err(BlobError::TooLarge {
                op,
                key: key.to_string(),
                max,
            });
        }
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| transient(format!("reading the answer: {}", transport_class(&e))))?;
        match status {
            200..=299 => match max {
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
                Err(status_error(op, key, status, &gcs_code(&bytes)))
            }
        }
    }
}

/// The status word of a Google error document (`{"error": {"status": "PERMISSION_DENIED",
/// "errors": [{"reason": "forbidden"}]}}`), never its message.
fn gcs_code(body: &[u8]) -> String {
    let v: serde_json::Value = serde_json::from_slice(body).unwrap_or(serde_json::Value::Null);
    let e = &v["error"];
    let word = e["status"]
        .as_str()
        .or_else(|| e["errors"][0]["reason"].as_str());
    code_word(word)
}

struct ListPage {
    objects: Vec<Listed>,
    next: Option<String>,
}

/// The items (`name`, `size` as a string or a number) and `nextPageToken` of a listing.
fn parse_list(body: &[u8]) -> Option<ListPage> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    let mut objects = Vec::new();
    if let Some(items) = v.get("items") {
        for item in items.as_array()? {
            let size = match &item["size"] {
                serde_json::Value::String(s) => s.parse().ok()?,
                n => n.as_u64()?,
            };
            objects.push(Listed {
                key: item["name"].as_str()?.to_string(),
                size,
            });
        }
    }
    Some(ListPage {
        objects,
        next: v
            .get("nextPageToken")
            .and_then(|t| t.as_str())
            .map(str::to_string),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listings_and_error_words() {
        let p = parse_list(
            br#"{"kind":"storage#objects","items":[{"name":"p/a=1.seg","size":"13"},{"name":"p/b","size":7}],"nextPageToken":"p/b"}"#,
        )
        .unwrap();
        assert_eq!(
            p.objects,
            vec![
                Listed {
                    key: "p/a=1.seg".into(),
                    size: 13
                },
                Listed {
                    key: "p/b".into(),
                    size: 7
                }
            ]
        );
        assert_eq!(p.next.as_deref(), Some("p/b"));
        let empty = parse_list(br#"{"kind":"storage#objects"}"#).unwrap();
        assert!(empty.objects.is_empty() && empty.next.is_none());
        assert!(parse_list(b"<html>").is_none());
        assert_eq!(
            gcs_code(
                br#"{"error":{"code":403,"message":"x@y does not have access, token ya29.secret","status":"PERMISSION_DENIED"}}"#
            ),
            "PERMISSION_DENIED"
        );
        assert_eq!(
            gcs_code(br#"{"error":{"errors":[{"reason":"notFound"}]}}"#),
            "notFound"
        );
        assert_eq!(gcs_code(b"Not Found"), "(no error code)");
    }

    #[tokio::test]
    async fn metadata_tokens_are_fetched_once_sent_as_bearer_and_dropped_on_401() {
        use super::super::test_server::Server;
        let meta = Server::start(|s| {
            if s.header("metadata-flavor") == Some("Google") {
                (
                    200,
                    r#"{"access_token":"meta-token","expires_in":3599,"token_type":"Bearer"}"#
                        .into(),
                )
            } else {
                (403, "{}".into())
            }
        })
        .await;
        let refuse_next = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = refuse_next.clone();
        let gcs = Server::start(move |_| {
            if flag.swap(false, std::sync::atomic::Ordering::SeqCst) {
                (
                    401,
                    r#"{"error":{"status":"UNAUTHENTICATED","message":"bad ya29 token"}}"#.into(),
                )
            } else {
                (200, "hello".into())
            }
        })
        .await;
        let cfg: GcsStoreConfig = serde_yaml_ng::from_str(&format!(
            "bucket: b1
endpoint: {}
",
            gcs.base
        ))
        .unwrap();
        let host = meta.base.trim_start_matches("http://").to_string();
        let s = GcsStore::new(&cfg, "storage.gcs")
            .unwrap()
            .with_auth(GcsAuth::metadata(&host));
        assert_eq!(s.get("a/b", 100).await.unwrap(), &b"hello"[..]);
        assert_eq!(s.get_range("a/b", 0, 5).await.unwrap(), &b"hello"[..]);
        let fetched = meta.seen();
        assert_eq!(fetched.len(), 1, "one token for both requests");
        assert_eq!(
            fetched[0].uri,
            "/computeMetadata/v1/instance/service-accounts/default/token"
        );
        let sent = gcs.seen();
        assert!(
            sent.iter()
                .all(|r| r.header("authorization") == Some("Bearer meta-token"))
        );
        assert_eq!(sent[0].uri, "/storage/v1/b/b1/o/a%2Fb?alt=media");
        assert_eq!(sent[1].header("range"), Some("bytes=0-4"));

        refuse_next.store(true, std::sync::atomic::Ordering::SeqCst);
        let e = s.get("a/b", 100).await.unwrap_err();
        assert!(matches!(e, BlobError::Refused { .. }), "{e}");
        assert_eq!(e.to_string(), "get a/b: 401 UNAUTHENTICATED");
        s.get("a/b", 100).await.unwrap();
        assert_eq!(meta.seen().len(), 2, "a 401 drops the cached token");
        let e = s.get("a/b", 2).await.unwrap_err();
        assert!(matches!(e, BlobError::TooLarge { max: 2, .. }), "{e}");
    }

    #[test]
    fn urls_escape_the_whole_key() {
        let cfg: GcsStoreConfig = serde_yaml_ng::from_str(
            "bucket: b1\nendpoint: http://127.0.0.1:9023/\nanonymous: true\n",
        )
        .unwrap();
        let s = GcsStore::new(&cfg, "storage.gcs").unwrap();
        assert_eq!(
            s.object_url("p/archive/v1/dt=2026-12-01/x.seg"),
            "http://127.0.0.1:9023/storage/v1/b/b1/o/p%2Farchive%2Fv1%2Fdt%3D2026-12-01%2Fx.seg"
        );
        let cfg: GcsStoreConfig = serde_yaml_ng::from_str("bucket: b2\n").unwrap();
        let s = GcsStore::new(&cfg, "storage.gcs").unwrap();
        assert!(
            s.object_url("k")
                .starts_with("https://storage.googleapis.com/storage/v1/b/b2/o/")
        );
    }
}
