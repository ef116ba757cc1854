//! Small helpers the sinks share.

use std::time::Duration;

use ankusa_core::SinkError;

use crate::tls::{PeerCert, reqwest_handshake_error};

/// A REST call that got no answer: a timeout, the egress policy's refusal of the endpoint's
/// addresses (its resolver's error), a refused TLS handshake (`not_connected: tls_handshake:
/// ...`, naming the certificate `peer` saw, as the broker sinks do), or a transport failure
/// (its text without the URL). All are transient.
pub fn call_failed(e: reqwest::Error, timeout: Duration, peer: &PeerCert) -> SinkError {
    if let Some(refused) = crate::egress::egress_refusal(&e) {
        SinkError::Transient(refused.to_string())
    } else if let Some(handshake) = reqwest_handshake_error(&e, peer) {
        SinkError::Transient(format!("not_connected: {handshake}"))
    } else if e.is_timeout() {
        SinkError::Transient(format!(
            "timeout: no answer within {} ms",
            timeout.as_millis()
        ))
    } else {
        SinkError::Transient(format!("transport: {}", e.without_url()))
    }
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
    fn snippet_cuts_on_char_boundary() {
        assert_eq!(snippet("héllo", 2), "h…");
        assert_eq!(snippet("abc", 5), "abc");
    }
}
