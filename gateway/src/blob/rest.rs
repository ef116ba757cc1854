//! What the three REST stores (`s3`, `gcs`, `azure`) share: the retry rule (transport errors
//! and 408/429/500/502/503/504 retried twice, after 200 ms then 1 s), the class of an answer's
//! status, the words an error may carry (a transport failure's kind, a store's error code —
//! never a URL, a header or a body, which may hold a credential), query escaping, the tags of a
//! flat XML listing, and a cached bearer token. A leaf: it imports only `BlobError` and `Listed`.

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use super::{BlobError, Listed};

/// The waits before the second and the third attempt.
pub(super) const RETRY_DELAYS: [Duration; 2] = [Duration::from_millis(200), Duration::from_secs(1)];

/// Runs `attempt` until it succeeds, fails with something other than `Transient`, or has been
/// retried `RETRY_DELAYS.len()` times.
pub(super) async fn with_retries<T, F, Fut>(
    op: &'static str,
    key: &str,
    mut attempt: F,
) -> Result<T, BlobError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, BlobError>>,
{
    let mut n = 0;
    loop {
        match attempt().await {
            Err(BlobError::Transient { message, .. }) if n < RETRY_DELAYS.len() => {
                tracing::debug!(op, key, %message, "blob request failed; retrying");
                tokio::time::sleep(RETRY_DELAYS[n]).await;
                n += 1;
            }
            other => return other,
        }
    }
}

/// Whether a status is worth another attempt.
pub(super) fn retryable(status: u16) -> bool {
    matches!(status, 408 | 429 | 500 | 502 | 503 | 504)
}

/// The error of a non-2xx answer: `404` not found, the retryable statuses transient, anything
/// else (401 and 403 among them) refused. `code` is the store's error code, a word.
pub(super) fn status_error(op: &'static str, key: &str, status: u16, code: &str) -> BlobError {
    let message = format!("{status} {code}");
    match status {
        404 => BlobError::NotFound {
            op,
            key: key.to_string(),
        },
        s if retryable(s) => BlobError::Transient {
            op,
            key: key.to_string(),
            message,
        },
        _ => BlobError::Refused {
            op,
            key: key.to_string(),
            message,
        },
    }
}

/// `v` when it is a plain word (an error code such as `AccessDenied`, `PERMISSION_DENIED`,
/// `BlobNotFound`), else `(no error code)`: never free text, which may quote the request.
pub(super) fn code_word(v: Option<&str>) -> String {
    v.filter(|c| {
        !c.is_empty()
            && c.len() <= 64
            && c.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    })
    .unwrap_or("(no error code)")
    .to_string()
}

/// What kind of transport failure (the error's text may carry the URL, and so a SAS).
pub(super) fn transport_class(e: &reqwest::Error) -> &'static str {
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

/// A query value (or a path segment) with everything but RFC 3986's unreserved characters
/// percent-encoded.
pub(super) fn query_escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The text of the first `<name>...</name>` in `s`, unescaped.
pub(super) fn xml_tag(s: &str, name: &str) -> Option<String> {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    let (_, rest) = s.split_once(&open)?;
    let (v, _) = rest.split_once(&close)?;
    Some(xml_unescape(v))
}

pub(super) fn xml_unescape(v: &str) -> String {
    v.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

/// `len` bytes from `offset` of the answer to a ranged GET: the body itself when the store
/// honoured the range, else cut out of a whole object it sent instead.
pub(super) fn cut_range(
    op: &'static str,
    key: &str,
    body: Bytes,
    offset: u64,
    len: u32,
) -> Result<Bytes, BlobError> {
    if body.len() == len as usize {
        return Ok(body);
    }
    let start = usize::try_from(offset).unwrap_or(usize::MAX);
    let end = start.saturating_add(len as usize);
    if end <= body.len() {
        return Ok(body.slice(start..end));
    }
    Err(BlobError::Transient {
        op,
        key: key.to_string(),
        message: "the ranged read returned a short body".into(),
    })
}

/// A bearer token and when to stop using it.
#[derive(Clone)]
pub(super) struct Token {
    pub value: String,
    pub refresh_at: Instant,
}

impl Token {
    /// A token valid for `expires_in` seconds, used until 5 minutes before that (or half its
    /// life, for a short one): a request never leaves with a token about to lapse.
    pub fn new(value: String, expires_in: u64, now: Instant) -> Token {
        let margin = 300.min(expires_in / 2);
        Token {
            value,
            refresh_at: now + Duration::from_secs(expires_in.saturating_sub(margin)),
        }
    }
}

/// One token shared by every request of a store; fetched by one caller at a time (the others
/// wait for it), dropped on a `401`.
#[derive(Default)]
pub(super) struct TokenCache {
    slot: tokio::sync::Mutex<Option<Token>>,
}

impl TokenCache {
    /// The cached token, or a new one from `fetch`.
    pub async fn get<F, Fut>(&self, fetch: F) -> Result<String, BlobError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Token, BlobError>>,
    {
        let mut slot = self.slot.lock().await;
        if let Some(t) = slot.as_ref()
            && Instant::now() < t.refresh_at
        {
            return Ok(t.value.clone());
        }
        let t = fetch().await?;
        let value = t.value.clone();
        *slot = Some(t);
        Ok(value)
    }

    /// Forgets the token (the store refused it): the next request fetches another.
    pub async fn clear(&self) {
        *self.slot.lock().await = None;
    }
}

/// The access token and lifetime of an OAuth2 token answer (`{"access_token", "expires_in"}`),
/// or the error code of a refusal; never the answer's other text.
pub(super) fn token_answer(
    op: &'static str,
    key: &str,
    what: &str,
    status: u16,
    body: &[u8],
) -> Result<(String, u64), BlobError> {
    let v: serde_json::Value = serde_json::from_slice(body).unwrap_or(serde_json::Value::Null);
    if (200..300).contains(&status) {
        let token = v.get("access_token").and_then(|t| t.as_str());
        let ttl = v
            .get("expires_in")
            .and_then(|t| {
                t.as_u64()
                    .or_else(|| t.as_str().and_then(|s| s.parse().ok()))
            })
            .unwrap_or(300);
        return match token {
            Some(t) if !t.is_empty() => Ok((t.to_string(), ttl)),
            _ => Err(BlobError::Refused {
                op,
                key: key.to_string(),
                message: format!("{what}: the answer has no access_token"),
            }),
        };
    }
    let code = code_word(v.get("error").and_then(|e| e.as_str()));
    let message = format!("{what}: {status} {code}");
    Err(if retryable(status) {
        BlobError::Transient {
            op,
            key: key.to_string(),
            message,
        }
    } else {
        BlobError::Refused {
            op,
            key: key.to_string(),
            message,
        }
    })
}

/// A listing page that does not parse: worth retrying (a proxy's error page, a cut answer).
pub(super) fn unparsable_listing(prefix: &str) -> BlobError {
    BlobError::Transient {
        op: "list",
        key: prefix.to_string(),
        message: "the listing does not parse".into(),
    }
}

/// Adds a page of a listing to `out`, refusing to hold more than `max` objects.
pub(super) fn add_listed(
    out: &mut Vec<Listed>,
    page: Vec<Listed>,
    prefix: &str,
    max: usize,
) -> Result<(), BlobError> {
    for l in page {
        if out.len() >= max {
            return Err(BlobError::TooLarge {
                op: "list",
                key: prefix.to_string(),
                max: max as u64,
            });
        }
        out.push(l);
    }
    Ok(())
}

/// Sends a token request (`what` names it in errors: `service-account token`) and reads the
/// OAuth answer: a transport failure is transient, the answer's status decides the rest.
pub(super) async fn fetch_token(
    req: reqwest::RequestBuilder,
    op: &'static str,
    key: &str,
    what: &str,
) -> Result<Token, BlobError> {
    let resp = req.send().await.map_err(|e| BlobError::Transient {
        op,
        key: key.to_string(),
        message: format!("{what}: {}", transport_class(&e)),
    })?;
    let status = resp.status().as_u16();
    let body = resp.bytes().await.unwrap_or_default();
    let (value, ttl) = token_answer(op, key, what, status, &body)?;
    Ok(Token::new(value, ttl, Instant::now()))
}

/// The Content-MD5 of a body, which every store checks an upload against.
pub(super) fn md5_of(bytes: &[u8]) -> [u8; 16] {
    use md5::Digest as _;
    md5::Md5::digest(bytes).into()
}

/// A delete's outcome: an object already gone is deleted.
pub(super) fn deleted<T>(r: Result<T, BlobError>) -> Result<(), BlobError> {
    match r {
        Ok(_) | Err(BlobError::NotFound { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_and_words() {
        assert!(matches!(
            status_error("get", "k", 404, "x"),
            BlobError::NotFound { .. }
        ));
        for s in [408, 429, 500, 502, 503, 504] {
            assert!(matches!(
                status_error("get", "k", s, "x"),
                BlobError::Transient { .. }
            ));
        }
        for s in [400, 401, 403, 409, 412] {
            assert!(matches!(
                status_error("get", "k", s, "x"),
                BlobError::Refused { .. }
            ));
        }
        assert_eq!(code_word(Some("PERMISSION_DENIED")), "PERMISSION_DENIED");
        assert_eq!(code_word(Some("sig=abc def")), "(no error code)");
        assert_eq!(code_word(None), "(no error code)");
        assert_eq!(query_escape("a/b=c+d~"), "a%2Fb%3Dc%2Bd~");
        assert_eq!(
            xml_tag("<a><N>x&amp;y</N></a>", "N").as_deref(),
            Some("x&y")
        );
    }

    #[test]
    fn ranges_are_cut_from_a_whole_object() {
        let whole = Bytes::from_static(b"0123456789");
        assert_eq!(
            cut_range("get", "k", whole.clone(), 2, 3).unwrap(),
            &b"234"[..]
        );
        assert_eq!(
            cut_range("get", "k", Bytes::from_static(b"234"), 2, 3).unwrap(),
            &b"234"[..]
        );
        assert!(cut_range("get", "k", whole, 8, 5).is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn tokens_are_cached_until_shortly_before_expiry() {
        let cache = TokenCache::default();
        let fetches = std::sync::atomic::AtomicU32::new(0);
        let counter = &fetches;
        let fetch = move || async move {
            let n = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(Token::new(format!("t{n}"), 3600, Instant::now()))
        };
        assert_eq!(cache.get(fetch).await.unwrap(), "t0");
        tokio::time::advance(Duration::from_secs(3200)).await;
        assert_eq!(cache.get(fetch).await.unwrap(), "t0", "still 400 s left");
        tokio::time::advance(Duration::from_secs(150)).await;
        assert_eq!(
            cache.get(fetch).await.unwrap(),
            "t1",
            "under 5 minutes left"
        );
        cache.clear().await;
        assert_eq!(cache.get(fetch).await.unwrap(), "t2", "dropped after a 401");
    }

    #[test]
    fn token_answers_carry_no_free_text() {
        let (t, ttl) = token_answer(
            "get",
            "k",
            "token",
            200,
            br#"{"access_token":"ya29.x","expires_in":3599}"#,
        )
        .unwrap();
        assert_eq!((t.as_str(), ttl), ("ya29.x", 3599));
        let e = token_answer(
            "get",
            "k",
            "token",
            400,
            br#"{"error":"invalid_grant","error_description":"secret-bits"}"#,
        )
        .unwrap_err();
        assert!(matches!(e, BlobError::Refused { .. }));
        assert!(e.to_string().contains("invalid_grant") && !e.to_string().contains("secret-bits"));
        assert!(matches!(
            token_answer("get", "k", "token", 503, b"down").unwrap_err(),
            BlobError::Transient { .. }
        ));
    }
}
