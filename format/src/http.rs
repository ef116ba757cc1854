//! The HTTP sink's response grammar.

/// `Retry-After` as delta-seconds or an HTTP-date, in milliseconds from now.
pub fn parse_retry_after(v: &str) -> Option<u64> {
    let v = v.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(secs.saturating_mul(1000));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    let now = std::time::SystemTime::now();
    Some(
        at.duration_since(now)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn retry_after_forms() {
        assert_eq!(parse_retry_after("120"), Some(120_000));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), Some(0));
        let future =
            httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(60));
        let ms = parse_retry_after(&future).unwrap();
        assert!((55_000..=60_000).contains(&ms), "{ms}");
        assert_eq!(parse_retry_after("soon"), None);
    }
}
