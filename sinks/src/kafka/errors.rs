//! What the Kafka sink says when librdkafka fails, in class words. librdkafka's error texts
//! carry text the broker sent and, for an OAUTHBEARER token it refuses, up to 512 bytes of the
//! token itself; none of that text is kept. The step (`tcp_connect`, `tls_handshake`, `auth`,
//! `connect`) is read from the text, the error code is named, and the text goes no further
//! than this module: not into a delivery error, not into a log line.
//!
//! | What failed | Text |
//! |---|---|
//! | a connection, as librdkafka last reported it | `<step>: <what> (librdkafka <ErrorCode>)` |
//! | a produce or metadata request | `<the code's own description>` (`kafka: Broker: Not enough in-sync replicas`) |
//! | an OAUTHBEARER token librdkafka would refuse | `sasl.token: ...` before librdkafka sees it |

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ankusa_core::SinkError;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};

/// A failed connection as librdkafka reported it: the step and the code, never the text;
/// `detail` is a text of the sink's own that librdkafka passed back (why the sink could not
/// hand it an OAUTHBEARER token), which names a setting and nothing else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFailure {
    pub step: &'static str,
    pub code: Option<RDKafkaErrorCode>,
    pub detail: Option<String>,
}

/// How librdkafka words a token the sink's token callback could not give.
const TOKEN_FAILURE: &str = "Failed to acquire SASL OAUTHBEARER token: ";
/// How the sink's token callback words its own refusals (kafka.rs, `generate_oauth_token`, and
/// `check_token`): texts that name a setting, never a token.
const OWN_TOKEN_TEXTS: [&str; 3] = ["sasl.token_file", "sasl.token ", "no oauthbearer token"];

/// The sink's own text inside a librdkafka error, when it is one (see `OWN_TOKEN_TEXTS`).
fn own_detail(reason: &str) -> Option<String> {
    let (_, rest) = reason.split_once(TOKEN_FAILURE)?;
    OWN_TOKEN_TEXTS
        .iter()
        .any(|p| rest.starts_with(p))
        .then(|| rest.chars().take(200).collect())
}

impl std::fmt::Display for ClientFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(d) = &self.detail {
            return match self.code {
                Some(c) => write!(f, "{}: {d} (librdkafka {c:?})", self.step),
                None => write!(f, "{}: {d}", self.step),
            };
        }
        let what = match self.step {
            "tls_handshake" => "the TLS handshake with the broker failed",
            "auth" => "SASL authentication failed (the broker refused the credentials in sasl)",
            "tcp_connect" => "the broker's address did not accept the connection",
            _ => "the broker connection failed",
        };
        match self.code {
            Some(c) => write!(f, "{}: {what} (librdkafka {c:?})", self.step),
            None => write!(f, "{}: {what}", self.step),
        }
    }
}

impl ClientFailure {
    /// The class of one librdkafka error report.
    pub fn of(error: &KafkaError, reason: &str) -> ClientFailure {
        ClientFailure {
            step: connect_step(reason),
            code: error.rdkafka_error_code(),
            detail: own_detail(reason),
        }
    }
}

/// The last connection failure librdkafka reported, shared by the client context (which
/// librdkafka's threads write) and the sink (which reads it when a produce or the first
/// metadata request fails).
#[derive(Clone, Default)]
pub struct LastError(Arc<Mutex<Option<ClientFailure>>>);

impl LastError {
    pub fn get(&self) -> Option<ClientFailure> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn note(&self, error: &KafkaError, reason: &str) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(ClientFailure::of(error, reason));
    }

    pub fn clear(&self) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

/// The step a librdkafka connection error names: `tls_handshake`, `auth` (SASL), `tcp_connect`,
/// or `connect` when its text says nothing more precise.
pub fn connect_step(reason: &str) -> &'static str {
    let r = reason.to_ascii_lowercase();
    // A refused client certificate arrives as a TLS alert after TLS 1.3's handshake has
    // completed on the client's side: OpenSSL's "SSL routines" text still names it.
    if r.contains("ssl handshake")
        || r.contains("certificate verify")
        || r.contains("ssl_handshake")
        || r.contains("ssl routines")
    {
        "tls_handshake"
    } else if r.contains("sasl") || r.contains("authenticat") || r.contains("oauthbearer") {
        "auth"
    } else if r.contains("connect to ")
        || r.contains("connection refused")
        || r.contains("failed to resolve")
        || r.contains("in state connect)")
    {
        "tcp_connect"
    } else {
        "connect"
    }
}

/// A request's error (produce, metadata) without its text: the code's description (librdkafka's
/// own fixed words for the code), else the kind of failure.
pub fn request_error(e: &KafkaError) -> String {
    match e.rdkafka_error_code() {
        Some(code) => code.to_string(),
        None => match e {
            KafkaError::Canceled => "the request was cancelled".into(),
            KafkaError::NoMessageReceived => "no answer".into(),
            _ => "the client failed".into(),
        },
    }
}

/// The spec's table for one error code.
pub fn classify_code(code: RDKafkaErrorCode, topic: &str, timeout: Duration) -> SinkError {
    use RDKafkaErrorCode as C;
    match code {
        C::MessageSizeTooLarge => SinkError::Permanent("message_too_large (broker)".into()),
        C::InvalidMessage | C::InvalidRecord | C::InvalidMessageSize | C::BadMessage => {
            SinkError::Permanent(format!("kafka refused the record: {code}"))
        }
        C::MessageTimedOut => SinkError::Transient(format!(
            "produce_timeout: no ack from every in-sync replica within {} ms (the record may still land)",
            timeout.as_millis()
        )),
        C::UnknownTopicOrPartition | C::UnknownTopic | C::UnknownPartition => {
            SinkError::Transient(format!("unknown_topic: {topic}"))
        }
        other => SinkError::Transient(format!("kafka: {other}")),
    }
}

/// Refuses a token librdkafka would refuse (RFC 7628: visible ASCII, space, tab, CR, LF):
/// librdkafka's refusal quotes the token, this one names the setting.
pub fn check_token(token: &str) -> Result<(), String> {
    let allowed = |b: u8| (0x21..=0x7e).contains(&b) || matches!(b, b' ' | b'\t' | b'\r' | b'\n');
    if token.bytes().all(allowed) {
        Ok(())
    } else {
        Err(
            "sasl.token (or the token file): holds a character an OAUTHBEARER token may not \
             hold (RFC 7628: visible ASCII, space, tab, CR, LF)"
                .into(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_steps_from_librdkafka_text() {
        for (text, step) in [
            (
                "ssl://127.0.0.1:9093/bootstrap: SSL handshake failed: error:0A000086:SSL routines::certificate verify failed: broker certificate could not be verified (after 3ms in state SSL_HANDSHAKE)",
                "tls_handshake",
            ),
            (
                "sasl_plaintext://127.0.0.1:9092/bootstrap: SASL authentication error: SASL SCRAM authentication failed: broker responded with unknown-user (after 83ms in state AUTH_REQ)",
                "auth",
            ),
            (
                "127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused (after 0ms in state CONNECT)",
                "tcp_connect",
            ),
            (
                "ssl://localhost:9093/bootstrap: Receive failed: error:0A00045C:SSL routines::tlsv13 alert certificate required: SSL alert number 116 (after 0ms in state APIVERSION_QUERY)",
                "tls_handshake",
            ),
            ("1/1 brokers are down", "connect"),
        ] {
            assert_eq!(connect_step(text), step, "{text}");
        }
    }

    /// librdkafka's texts that carry a secret: the class keeps none of it.
    #[test]
    fn a_planted_token_never_reaches_the_text() {
        let token = "eyJhbGciOiJub25lIn0.planted-secret-token-4711";
        for (error, reason) in [
            (
                KafkaError::Global(RDKafkaErrorCode::Authentication),
                format!(
                    "Failed to set token: SASL/OAUTHBEARER extension values must only consist of \
                     space, horizontal tab, CR, LF, and visible characters (%x21-7E): {token}\x01 (\x01)"
                ),
            ),
            (
                KafkaError::Global(RDKafkaErrorCode::Authentication),
                format!(
                    "sasl_ssl://b:9093/1: SASL OAUTHBEARER authentication failed (principal=x): \
                     {{\"status\":\"invalid_token\",\"token\":\"{token}\"}}"
                ),
            ),
            (
                KafkaError::ClientCreation(format!("ssl.key.pem failed: {token}")),
                format!("{token}: Connect to ipv4#10.0.0.1:9092 failed: Connection refused"),
            ),
        ] {
            let last = LastError::default();
            last.note(&error, &reason);
            let text = last.get().unwrap().to_string();
            assert!(!text.contains("planted"), "{text}");
            assert!(!text.contains("10.0.0.1"), "{text}");
            assert!(!request_error(&error).contains("planted"));
        }
        let last = LastError::default();
        last.note(
            &KafkaError::Global(RDKafkaErrorCode::Authentication),
            "SASL authentication error: Authentication failed: Invalid username or password",
        );
        assert_eq!(
            last.get().unwrap().to_string(),
            "auth: SASL authentication failed (the broker refused the credentials in sasl) \
             (librdkafka Authentication)"
        );
        // The sink's own refusal, passed back by librdkafka, is kept: it names the setting.
        last.note(
            &KafkaError::Global(RDKafkaErrorCode::Authentication),
            "Failed to acquire SASL OAUTHBEARER token: sasl.token_file: cannot read the file \
             (not found)",
        );
        assert_eq!(
            last.get().unwrap().to_string(),
            "auth: sasl.token_file: cannot read the file (not found) (librdkafka Authentication)"
        );
        // librdkafka's own refusal of a token, passed back the same way, is not.
        last.note(
            &KafkaError::Global(RDKafkaErrorCode::Authentication),
            "Failed to acquire SASL OAUTHBEARER token: SASL/OAUTHBEARER extension values must \
             only consist of ...: planted-secret",
        );
        assert!(!last.get().unwrap().to_string().contains("planted"));
    }

    #[test]
    fn tokens_librdkafka_would_quote_are_refused_without_quoting() {
        assert!(check_token("eyJ.a-b_c~d+e/f=\t \r\n").is_ok());
        for bad in ["tok\u{1}en-planted", "tök-planted", "tok\0planted"] {
            let e = check_token(bad).unwrap_err();
            assert!(!e.contains("planted") && e.contains("sasl.token"), "{e}");
        }
    }

    #[test]
    fn code_table() {
        let t = Duration::from_secs(5);
        assert!(matches!(
            classify_code(RDKafkaErrorCode::MessageSizeTooLarge, "t", t),
            SinkError::Permanent(_)
        ));
        assert!(matches!(
            classify_code(RDKafkaErrorCode::InvalidRecord, "t", t),
            SinkError::Permanent(_)
        ));
        assert!(
            matches!(classify_code(RDKafkaErrorCode::MessageTimedOut, "t", t), SinkError::Transient(ref m) if m.starts_with("produce_timeout"))
        );
        assert!(
            matches!(classify_code(RDKafkaErrorCode::UnknownTopicOrPartition, "t", t), SinkError::Transient(ref m) if m.starts_with("unknown_topic"))
        );
        assert!(matches!(
            classify_code(RDKafkaErrorCode::AllBrokersDown, "t", t),
            SinkError::Transient(_)
        ));
    }
}
