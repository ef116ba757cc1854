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

/// A provider's error code (`QueueDoesNotExist`, `NOT_FOUND`) as it may appear in an error
/// text: letters, digits, `.`, `_` and `-` only, at most 64 bytes. A code is a class; the
/// provider's message beside it is never kept (it may quote the request or a credential's id).
pub fn code_word(code: &str) -> String {
    code.chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        .take(64)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_words_keep_only_a_code() {
        assert_eq!(code_word("QueueDoesNotExist"), "QueueDoesNotExist");
        assert_eq!(
            code_word("NOT_FOUND: token=abc def"),
            "NOT_FOUNDtokenabcdef"
        );
        assert_eq!(code_word(&"x".repeat(100)).len(), 64);
    }
}
