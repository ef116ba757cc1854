//! Small helpers the sinks share.

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
    fn snippet_cuts_on_char_boundary() {
        assert_eq!(snippet("héllo", 2), "h…");
        assert_eq!(snippet("abc", 5), "abc");
    }
}
