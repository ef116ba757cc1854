//! An S3-compatible bucket (AWS S3, MinIO, R2, a VPC endpoint): `PutObject`, `GetObject` and
//! ranged `GetObject` over HTTPS, each request SigV4-signed by `aws-sigv4` with credentials from
//! the config or `aws-config`'s default chain (`AWS_*` env, web identity/IRSA, profile, IMDSv2),
//! through `ankusa_sinks::aws`, the same code the SQS sink signs with.
//!
//! Transport errors and 408/429/500/502/503/504 are retried twice (after 200 ms, then 1 s);
//! anything else is reported with S3's error code, never with the request's credentials.

use std::time::Duration;

use ankusa_config::S3StoreConfig;
use ankusa_sinks::aws::{CredentialSource, sign_headers_s3};
use bytes::Bytes;

use super::BlobError;

pub struct S3Store {
    http: reqwest::Client,
    /// `<scheme>://<host>[:port]` requests go to.
    origin: String,
    bucket: String,
    region: String,
    path_style: bool,
    creds: CredentialSource,
}

const RETRY_DELAYS: [Duration; 2] = [Duration::from_millis(200), Duration::from_secs(1)];

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
            format!("{}/{}/{key}", self.origin, self.bucket)
        } else {
            let (scheme, host) = self
                .origin
                .split_once("://")
                .unwrap_or(("https", self.origin.as_str()));
            format!("{scheme}://{}.{host}/{key}", self.bucket)
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
        if body.len() == len as usize {
            return Ok(body);
        }
        let start = offset as usize;
        let end = start.saturating_add(len as usize);
        if end <= body.len() {
            return Ok(body.slice(start..end));
        }
        Err(BlobError::Transient {
            op: "get",
            key: key.to_string(),
            message: "the ranged read returned a short body".into(),
        })
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
        let mut attempt = 0;
        loop {
            match self
                .once(op, method.clone(), key, extra, body.clone())
                .await
            {
                Err(BlobError::Transient { message, .. }) if attempt < RETRY_DELAYS.len() => {
                    tracing::debug!(op, key, %message, "blob request failed; retrying");
                    tokio::time::sleep(RETRY_DELAYS[attempt]).await;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    async fn once(
        &self,
        op: &'static str,
        method: reqwest::Method,
        key: &str,
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
        let url = self.url(key);
        let creds = self.creds.get().await.map_err(|_| {
            refused("no credentials (none configured, none in the default chain)".into())
        })?;
        let host = url::Url::parse(&url)
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
        let signed = sign_headers_s3(creds, &self.region, method.as_str(), &url, &to_sign, &body)
            .map_err(|e| refused(format!("signing failed: {e}")))?;
        let mut req = self.http.request(method, &url);
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
            404 => Err(BlobError::NotFound {
                op,
                key: key.to_string(),
            }),
            408 | 429 | 500 | 502 | 503 | 504 => {
                Err(transient(format!("{status} {}", s3_code(&bytes))))
            }
            _ => Err(refused(format!("{status} {}", s3_code(&bytes)))),
        }
    }
}

/// The `<Code>` of an S3 error document (`AccessDenied`, `NoSuchBucket`, ...): a word, never the
/// request's values.
fn s3_code(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(4096)]);
    text.split_once("<Code>")
        .and_then(|(_, rest)| rest.split_once("</Code>"))
        .map(|(code, _)| code)
        .filter(|c| c.len() <= 64 && c.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.'))
        .unwrap_or("(no error code)")
        .to_string()
}

/// What kind of transport failure (the error's text may carry the URL).
fn transport_class(e: &reqwest::Error) -> &'static str {
    if e.is_timeout() {
        "timeout"
    } else if e.is_connect() {
        "connect failed"
    } else if e.is_body() || e.is_decode() {
        "body"
    } else {
        "request failed"
    }
}

fn md5_of(bytes: &[u8]) -> [u8; 16] {
    use md5::Digest as _;
    md5::Md5::digest(bytes).into()
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
