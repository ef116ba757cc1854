//! An S3-compatible bucket (AWS S3, MinIO, R2, a VPC endpoint): `PutObject`, `GetObject`,
//! ranged `GetObject`, `DeleteObject` and `ListObjectsV2` over HTTPS, each request SigV4-signed by `aws-sigv4` with credentials from
//! the config or `aws-config`'s default chain (`AWS_*` env, web identity/IRSA, profile, IMDSv2),
//! through `ankusa_sinks::aws`, the same code the SQS sink signs with.
//!
//! Transport errors and 408/429/500/502/503/504 are retried twice (after 200 ms, then 1 s);
//! anything else is reported with S3's error code, never with the request's credentials
//! (`rest.rs`, shared with the GCS and Azure stores). Query values are escaped as SigV4's
//! canonical query string has them, so the signature covers the bytes S3 reads.

use std::time::Duration;

use ankusa_config::S3StoreConfig;
use ankusa_sinks::aws::{CredentialSource, sign_headers_s3};
use bytes::Bytes;

use super::BlobError;
use super::rest::{
    add_listed, code_word, cut_range, deleted, md5_of, query_escape, status_error, transport_class,
    unparsable_listing, with_retries, xml_tag,
};

pub struct S3Store {
    http: reqwest::Client,
    /// `<scheme>://<host>[:port]` requests go to.
    origin: String,
    bucket: String,
    region: String,
    path_style: bool,
    creds: CredentialSource,
}

impl S3Store {
    pub fn new(cfg: &S3StoreConfig) -> Result<S3Store, String> {
        let region = cfg
            .region
            .clone()
            .or_else(|| std::env::var("AWS_REGION").ok().filter(|r| !r.is_empty()))
            .unwrap_or_else(|| "us-east-1".to_string());
        let (origin, path_style) = match &cfg.endpoint {
            Some(ep) => {
                let url = url::Url::parse(ep.expose())
                    .map_err(|_| "storage.s3.endpoint: is not a URL".to_string())?;
                let host = url
                    .host_str()
                    .ok_or_else(|| "storage.s3.endpoint: has no host".to_string())?;
                let origin = match url.port() {
                    Some(p) => format!("{}://{host}:{p}", url.scheme()),
                    None => format!("{}://{host}", url.scheme()),
                };
                (origin, cfg.force_path_style.unwrap_or(true))
            }
            None => (
                format!("https://s3.{region}.amazonaws.com"),
                cfg.force_path_style.unwrap_or(false),
            ),
        };
        let http = reqwest::Client::builder()
            .timeout(Duration::from_millis(cfg.timeout_ms))
            .connect_timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("storage.s3: cannot build the HTTP client: {e}"))?;
        Ok(S3Store {
            http,
            origin,
            bucket: cfg.bucket.clone(),
            region,
            path_style,
            creds: CredentialSource::from_config(
                cfg.access_key_id.as_ref().map(|s| s.expose()),
                cfg.secret_access_key.as_ref().map(|s| s.expose()),
                cfg.session_token.as_ref().map(|s| s.expose()),
            ),
        })
    }

    /// The object's URL (keys are checked to be plain path segments, so they need no escaping).
    fn url(&self, key: &str) -> String {
        if self.path_style {
            format!("{}/{key}", self.bucket_url())
        } else {
            format!("{}{key}", self.bucket_url())
        }
    }

    pub async fn put(&self, key: &str, bytes: Bytes) -> Result<(), BlobError> {
        let md5 = {
            use base64::Engine;
            // S3 checks the body against Content-MD5 and refuses a damaged upload.
            base64::engine::general_purpose::STANDARD.encode(md5_of(&bytes))
        };
        let extra = [
            ("content-md5", md5.as_str()),
            ("content-type", "application/octet-stream"),
        ];
        self.send("put", reqwest::Method::PUT, key, &extra, bytes)
            .await
            .map(|_| ())
    }

    pub async fn get(&self, key: &str, max: u64) -> Result<Bytes, BlobError> {
        let body = self
            .send("get", reqwest::Method::GET, key, &[], Bytes::new())
            .await?;
        if body.len() as u64 > max {
            return Err(BlobError::TooLarge {
                op: "get",
                key: key.to_string(),
                max,
            });
        }
        Ok(body)
    }

    pub async fn get_range(&self, key: &str, offset: u64, len: u32) -> Result<Bytes, BlobError> {
        if len == 0 {
            return Ok(Bytes::new());
        }
        let range = format!("bytes={}-{}", offset, offset + len as u64 - 1);
        let body = self
            .send(
                "get",
                reqwest::Method::GET,
                key,
                &[("range", range.as_str())],
                Bytes::new(),
            )
            .await?;
        // A store that ignores Range answers the whole object: cut the range out of it.
        cut_range("get", key, body, offset, len)
    }

    pub async fn delete(&self, key: &str) -> Result<(), BlobError> {
        deleted(
            self.send("delete", reqwest::Method::DELETE, key, &[], Bytes::new())
                .await,
        )
    }

    /// ListObjectsV2 over `prefix`, page by page (1000 keys each), at most `max` keys.
    pub async fn list(&self, prefix: &str, max: usize) -> Result<Vec<super::Listed>, BlobError> {
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut url = format!(
                "{}?list-type=2&prefix={}",
                self.bucket_url(),
                query_escape(prefix)
            );
            if let Some(t) = &token {
                url.push_str("&continuation-token=");
                url.push_str(&query_escape(t));
            }
            let body = self
                .send_url(
                    "list",
                    reqwest::Method::GET,
                    prefix,
                    &url,
                    &[],
                    Bytes::new(),
                )
                .await?;
            let page = parse_list(&body).ok_or_else(|| unparsable_listing(prefix))?;
            add_listed(&mut out, page.objects, prefix, max)?;
            match page.next {
                Some(t) if page.truncated => token = Some(t),
                _ => break,
            }
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    /// The bucket's own URL (for listings).
    fn bucket_url(&self) -> String {
        if self.path_style {
            format!("{}/{}", self.origin, self.bucket)
        } else {
            let (scheme, host) = self
                .origin
                .split_once("://")
                .unwrap_or(("https", self.origin.as_str()));
            format!("{scheme}://{}.{host}/", self.bucket)
        }
    }

    /// One request with its retries; the body of a 2xx answer.
    async fn send(
        &self,
        op: &'static str,
        method: reqwest::Method,
        key: &str,
        extra: &[(&str, &str)],
        body: Bytes,
    ) -> Result<Bytes, BlobError> {
        let url = self.url(key);
        self.send_url(op, method, key, &url, extra, body).await
    }

    /// `send` to a given URL (`key` names it in errors).
    async fn send_url(
        &self,
        op: &'static str,
        method: reqwest::Method,
        key: &str,
        url: &str,
        extra: &[(&str, &str)],
        body: Bytes,
    ) -> Result<Bytes, BlobError> {
        with_retries(op, key, || {
            self.once(op, method.clone(), key, url, extra, body.clone())
        })
        .await
    }

    async fn once(
        &self,
        op: &'static str,
        method: reqwest::Method,
        key: &str,
        url: &str,
        extra: &[(&str, &str)],
        body: Bytes,
    ) -> Result<Bytes, BlobError> {
        let transient = |message: String| BlobError::Transient {
            op,
            key: key.to_string(),
            message,
        };
        let refused = |message: String| BlobError::Refused {
            op,
            key: key.to_string(),
            message,
        };
        let creds = self.creds.get().await.map_err(|_| {
            refused("no credentials (none configured, none in the default chain)".into())
        })?;
        let host = url::Url::parse(url)
            .ok()
            .and_then(|u| {
                u.host_str().map(|h| match u.port() {
                    Some(p) => format!("{h}:{p}"),
                    None => h.to_string(),
                })
            })
            .ok_or_else(|| refused("the object URL has no host".into()))?;
        let mut to_sign: Vec<(&str, &str)> = vec![("host", host.as_str())];
        to_sign.extend_from_slice(extra);
        let signed = sign_headers_s3(creds, &self.region, method.as_str(), url, &to_sign, &body)
            .map_err(|e| refused(format!("signing failed: {e}")))?;
        let mut req = self.http.request(method, url);
        for (k, v) in extra {
            req = req.header(*k, *v);
        }
        for (k, v) in signed {
            req = req.header(k, v);
        }
        if !body.is_empty() {
            req = req.body(body);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| transient(format!("transport: {}", transport_class(&e))))?;
        let status = resp.status().as_u16();
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| transient(format!("reading the answer: {}", transport_class(&e))))?;
        match status {
            200..=299 => Ok(bytes),
            _ => Err(status_error(op, key, status, &s3_code(&bytes))),
        }
    }
}

/// The `<Code>` of an S3 error document (`AccessDenied`, `NoSuchBucket`, ...): a word, never the
/// request's values.
fn s3_code(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(4096)]);
    code_word(xml_tag(&text, "Code").as_deref())
}

struct ListPage {
    objects: Vec<super::Listed>,
    truncated: bool,
    next: Option<String>,
}

/// The keys and sizes of a `ListBucketResult` (S3's XML is flat enough to read by its tags).
fn parse_list(body: &[u8]) -> Option<ListPage> {
    let text = std::str::from_utf8(body).ok()?;
    if !text.contains("ListBucketResult") {
        return None;
    }
    let tag = xml_tag;
    let mut objects = Vec::new();
    for part in text.split("<Contents>").skip(1) {
        let part = part.split("</Contents>").next()?;
        objects.push(super::Listed {
            key: tag(part, "Key")?,
            size: tag(part, "Size")?.trim().parse().ok()?,
        });
    }
    Some(ListPage {
        objects,
        truncated: tag(text, "IsTruncated").is_some_and(|v| v.trim() == "true"),
        next: tag(text, "NextContinuationToken"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_are_words_only() {
        assert_eq!(
            s3_code(b"<Error><Code>NoSuchBucket</Code><Message>x</Message></Error>"),
            "NoSuchBucket"
        );
        assert_eq!(s3_code(b"<Code>a b</Code>"), "(no error code)");
        assert_eq!(s3_code(b"junk"), "(no error code)");
    }

    #[test]
    fn listings_parse_and_queries_escape() {
        let xml = br#"<?xml version="1.0"?><ListBucketResult><Name>b</Name><IsTruncated>true</IsTruncated>
<Contents><Key>p/backup/n/LATEST</Key><Size>120</Size></Contents>
<Contents><Key>p/a&amp;b</Key><LastModified>x</LastModified><Size>7</Size></Contents>
<NextContinuationToken>1/ab+c=</NextContinuationToken></ListBucketResult>"#;
        let p = parse_list(xml).unwrap();
        assert_eq!(p.objects.len(), 2);
        assert_eq!(p.objects[0].key, "p/backup/n/LATEST");
        assert_eq!((p.objects[1].key.as_str(), p.objects[1].size), ("p/a&b", 7));
        assert!(p.truncated);
        assert_eq!(p.next.as_deref(), Some("1/ab+c="));
        assert!(parse_list(b"<Error><Code>NoSuchBucket</Code></Error>").is_none());
        assert_eq!(query_escape("a/b=c+d~"), "a%2Fb%3Dc%2Bd~");
    }

    #[test]
    fn urls_path_and_virtual_hosted() {
        let cfg: S3StoreConfig = serde_yaml_ng::from_str(
            "bucket: b1\nendpoint: http://127.0.0.1:5000\naccess_key_id: a\nsecret_access_key: s\n",
        )
        .unwrap();
        let s = S3Store::new(&cfg).unwrap();
        assert_eq!(s.url("k/x.seg"), "http://127.0.0.1:5000/b1/k/x.seg");
        let cfg: S3StoreConfig =
            serde_yaml_ng::from_str("bucket: b1\nregion: eu-west-1\n").unwrap();
        let s = S3Store::new(&cfg).unwrap();
        assert_eq!(s.url("k"), "https://b1.s3.eu-west-1.amazonaws.com/k");
    }
}
