//! One `Range: bytes=` of a claim read, and the claim port's response around the bytes it
//! names: `200` whole, `206` with `Content-Range`, `416` past the end. Where the bytes come from
//! (a file, an object) is the caller's. A leaf.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

/// Parses one `bytes=a-b`, `bytes=a-` or `bytes=-n` range against `len`.
/// `Ok(None)`: no usable Range header (serve it all); `Err(())`: unsatisfiable (`416`).
pub fn parse_range(v: &str, len: u64) -> Result<Option<(u64, u64)>, ()> {
    let Some(spec) = v.trim().strip_prefix("bytes=") else {
        return Ok(None);
    };
    if spec.contains(',') {
        return Ok(None);
    }
    let Some((a, b)) = spec.split_once('-') else {
        return Ok(None);
    };
    let (start, end) = match (a.trim(), b.trim()) {
        ("", n) => {
            let n: u64 = n.parse().map_err(|_| ())?;
            if n == 0 {
                return Err(());
            }
            (len.saturating_sub(n), len.saturating_sub(1))
        }
        (s, "") => (s.parse().map_err(|_| ())?, len.saturating_sub(1)),
        (s, e) => {
            let (s, e): (u64, u64) = (s.parse().map_err(|_| ())?, e.parse().map_err(|_| ())?);
            if e < s {
                return Err(());
            }
            (s, e.min(len.saturating_sub(1)))
        }
    };
    if len == 0 || start >= len {
        return Err(());
    }
    Ok(Some((start, end)))
}

/// The response for a claim of `len` bytes: `read(start, n)` is asked for the `n` bytes the
/// range names (never for a `HEAD` or an empty claim).
pub fn serve<E>(
    len: u64,
    range: Option<&str>,
    head: bool,
    read: impl FnOnce(u64, u64) -> Result<Vec<u8>, E>,
) -> Result<Response, E> {
    match Plan::of(len, range, head) {
        Err(refused) => Ok(refused.response()),
        Ok(plan) => {
            let body = match plan.read() {
                Some((start, n)) => read(start, n)?,
                None => Vec::new(),
            };
            Ok(plan.respond(body))
        }
    }
}

/// What a request asks of a claim of `len` bytes, once its `Range` is checked.
pub struct Plan {
    status: StatusCode,
    start: u64,
    end: u64,
    len: u64,
    head: bool,
}

impl Plan {
    /// The plan, or a range past the end of a claim of `len` bytes.
    pub fn of(len: u64, range: Option<&str>, head: bool) -> Result<Plan, Unsatisfiable> {
        let (status, start, end) = match range.map(|r| parse_range(r, len)) {
            Some(Err(())) => return Err(Unsatisfiable(len)),
            Some(Ok(Some((s, e)))) => (StatusCode::PARTIAL_CONTENT, s, e),
            _ => (StatusCode::OK, 0, len.saturating_sub(1)),
        };
        Ok(Plan {
            status,
            start,
            end,
            len,
            head,
        })
    }

    fn n(&self) -> u64 {
        if self.len == 0 {
            0
        } else {
            self.end - self.start + 1
        }
    }

    /// The `(start, n)` bytes to read; `None` for a `HEAD` or an empty claim.
    pub fn read(&self) -> Option<(u64, u64)> {
        (!self.head && self.n() > 0).then(|| (self.start, self.n()))
    }

    /// The answer around the bytes `read` named.
    pub fn respond(self, body: Vec<u8>) -> Response {
        let mut r = common((self.status, body).into_response());
        r.headers_mut()
            .insert(header::CONTENT_LENGTH, self.n().into());
        if self.status == StatusCode::PARTIAL_CONTENT {
            r.headers_mut().insert(
                header::CONTENT_RANGE,
                format!("bytes {}-{}/{}", self.start, self.end, self.len)
                    .parse()
                    .expect("ascii"),
            );
        }
        r
    }
}

/// A range a claim of this many bytes cannot satisfy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unsatisfiable(pub u64);

impl Unsatisfiable {
    /// The `416` answer.
    pub fn response(self) -> Response {
        let mut r = common(StatusCode::RANGE_NOT_SATISFIABLE.into_response());
        r.headers_mut().insert(
            header::CONTENT_RANGE,
            format!("bytes */{}", self.0).parse().expect("ascii"),
        );
        r
    }
}

/// The headers of every claim answer.
fn common(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert(header::ACCEPT_RANGES, "bytes".parse().expect("static"));
    h.insert(
        header::CONTENT_TYPE,
        "application/octet-stream".parse().expect("static"),
    );
    h.insert(
        header::CACHE_CONTROL,
        "private, max-age=31536000, immutable"
            .parse()
            .expect("static"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        assert_eq!(parse_range("bytes=0-9", 100), Ok(Some((0, 9))));
        assert_eq!(parse_range("bytes=90-", 100), Ok(Some((90, 99))));
        assert_eq!(parse_range("bytes=-10", 100), Ok(Some((90, 99))));
        assert_eq!(parse_range("bytes=95-200", 100), Ok(Some((95, 99))));
        assert_eq!(parse_range("bytes=100-", 100), Err(()));
        assert_eq!(parse_range("bytes=5-1", 100), Err(()));
        assert_eq!(parse_range("bytes=0-1,5-6", 100), Ok(None));
        assert_eq!(parse_range("items=0-1", 100), Ok(None));
    }

    #[test]
    fn serve_cuts_the_range_and_reads_nothing_for_head() {
        let data: Vec<u8> = (0..100u8).collect();
        let r = serve(100, Some("bytes=10-19"), false, |s, n| {
            Ok::<_, ()>(data[s as usize..(s + n) as usize].to_vec())
        })
        .unwrap();
        assert_eq!(r.status(), StatusCode::PARTIAL_CONTENT);
        assert_eq!(r.headers()[header::CONTENT_RANGE], "bytes 10-19/100");
        assert_eq!(r.headers()[header::CONTENT_LENGTH], "10");
        let r = serve(100, None, true, |_, _| Err::<Vec<u8>, _>("read on HEAD")).unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers()[header::CONTENT_LENGTH], "100");
        let r = serve(100, Some("bytes=100-"), false, |_, _| Err::<Vec<u8>, _>(())).unwrap();
        assert_eq!(r.status(), StatusCode::RANGE_NOT_SATISFIABLE);
        assert_eq!(r.headers()[header::CONTENT_RANGE], "bytes */100");
    }
}
