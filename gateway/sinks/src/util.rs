//! Small helpers the sinks share.

use std::time::{SystemTime, UNIX_EPOCH};

/// A full-jitter pause: 1 to min(30 s, 500 ms · 2^(attempt-1)) milliseconds, the spec's draw
/// for throttling and full batch queues.
pub fn full_jitter(attempt: u32) -> u64 {
    let cap = 500u64
        .saturating_mul(1u64 << attempt.saturating_sub(1).min(16))
        .min(30_000);
    1 + fastrand::u64(0..cap.max(1))
}

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// At most `max` bytes of a response body for an error text, on a char boundary.
pub fn snippet(body: &str, max: usize) -> String {
    if body.len() <= max {
        return body.to_string();
    }
    let mut end = max;
    while !body.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &body[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_bounds() {
        for attempt in [1, 2, 5, 40] {
            for _ in 0..200 {
                let ms = full_jitter(attempt);
                let cap = (500u64 << (attempt - 1).min(16)).min(30_000);
                assert!((1..=cap).contains(&ms), "{attempt}: {ms}");
            }
        }
    }

    #[test]
    fn snippet_cuts_on_char_boundary() {
        assert_eq!(snippet("héllo", 2), "h…");
        assert_eq!(snippet("abc", 5), "abc");
    }
}
