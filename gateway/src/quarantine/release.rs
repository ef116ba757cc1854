//! Judging a pen entry again for a `quarantine` replay job: the source's current verifier over
//! the stored headers and body, with the signature's timestamp window at the hook's original
//! receive time (a release hours later still passes a hook that was on time). A pass becomes
//! the hook the edge would have committed for that request: its original id and receive time,
//! the source's current dedupe key and ordering lanes and sinks.

use ankusa_core::{Envelope, Verification};
use http::{HeaderMap, HeaderName, HeaderValue};

use crate::live::LiveSource;
use crate::metrics::Metrics;
use crate::store::{Dedupe, IngestRecord, PenHeld};

/// Why an entry stays in the pen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stays {
    /// The source is no longer configured.
    SourceGone,
    /// Still fails verification (`VerifyFailure::code`).
    Fails(&'static str),
}

/// The stored headers as a map (a header the map refuses could not have been sent).
pub fn header_map(headers: &[(String, String)]) -> HeaderMap {
    let mut map = HeaderMap::with_capacity(headers.len());
    for (n, v) in headers {
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(n.as_bytes()),
            HeaderValue::from_str(v),
        ) {
            map.append(n, v);
        }
    }
    map
}

/// The hook to commit for `held`, or why it stays.
pub fn judge(
    source: Option<&LiveSource>,
    held: &PenHeld,
    metrics: &Metrics,
) -> Result<IngestRecord, Stays> {
    let source = source.ok_or(Stays::SourceGone)?;
    let env = &held.envelope;
    let headers = header_map(&env.headers);
    let verification = match &source.verifier {
        Some(v) => {
            let at = (held.summary.received_at / 1000) as i64;
            v.verify(&headers, &env.body, at)
                .map_err(|why| Stays::Fails(why.code()))?;
            Verification::OK
        }
        // The source verifies nothing now: the edge would accept this request as it is.
        None => Verification::SKIPPED,
    };
    let dedupe = source.cfg.dedupe.as_ref().and_then(|d| {
        crate::edge::dedupe::extract(d, &headers, &env.body).map(|k| (k, d.ttl_seconds))
    });
    let envelope = Envelope {
        seq: 0,
        verification,
        dedupe_key: dedupe.as_ref().map(|(k, _)| k.clone()),
        ..env.clone()
    };
    Ok(IngestRecord {
        lanes: crate::edge::lanes(metrics, source, &headers, &envelope.body),
        dedupe: dedupe.map(|(key, ttl)| Dedupe {
            key,
            ttl_ms: ttl.saturating_mul(1000),
            source_wide: held.summary.url_tenant && source.shared() && !source.cfg.trust_url_tenant,
        }),
        envelope,
        sinks: source.sink_types.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ankusa_config::{
        DedupeConfig, DedupePreset, LogSinkConfig, Secrets, SinkConfig, SourceConfig, TimedPreset,
        VerifyConfig,
    };
    use ankusa_core::VerifyStatus;
    use bytes::Bytes;

    use crate::store::PenSummary;

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    fn source(secret: &str) -> LiveSource {
        let mut cfg = SourceConfig::with_sinks(vec![SinkConfig::Log(LogSinkConfig::default())]);
        cfg.verify = VerifyConfig::StandardWebhooks(TimedPreset {
            secret: Secrets::one(secret),
            tolerance_seconds: 300,
        });
        cfg.dedupe = Some(DedupeConfig {
            preset: Some(DedupePreset::StandardWebhooks),
            header: None,
            json: None,
            ttl_seconds: ankusa_config::default_dedupe_ttl(),
        });
        LiveSource {
            id: "s".into(),
            verifier: ankusa_verify::Verifier::new(&cfg.verify).expect("verifier"),
            cfg,
            sinks: vec![],
            sink_types: vec!["log"],
            sink_digests: vec![],
        }
    }

    /// A hook signed with `secret` at `received_at` (ms), as the pen holds it.
    fn held(secret: &str, received_at: u64) -> PenHeld {
        let body = br#"{"type":"invoice.paid"}"#;
        let key = ankusa_verify::standard_webhooks_key(secret).expect("key");
        let ts = (received_at / 1000) as i64;
        let headers = vec![
            ("webhook-id".to_string(), "msg_1".to_string()),
            ("webhook-timestamp".to_string(), ts.to_string()),
            (
                "webhook-signature".to_string(),
                ankusa_verify::sign_standard_webhooks(&[key], "msg_1", ts, body),
            ),
        ];
        let envelope = Envelope {
            received_at,
            headers,
            verification: Verification {
                status: VerifyStatus::Failed,
                flagged: false,
            },
            ..Envelope::new("default", "s", Bytes::from_static(body))
        };
        PenHeld {
            summary: PenSummary {
                id: envelope.id,
                source_id: "s".into(),
                tenant: "default".into(),
                received_at,
                reason: "no_match".into(),
                size: 1,
                method: "POST".into(),
                path: "/webhooks/s".into(),
                url_tenant: false,
            },
            envelope,
        }
    }

    #[test]
    fn a_hook_on_time_when_received_passes_hours_later_with_its_id() {
        let m = Metrics::new();
        // Received two hours ago, signed then: outside the 300 s window now, inside it then.
        let two_hours_ago = ankusa_core::now_ms() - 2 * 3600 * 1000;
        let h = held(SECRET, two_hours_ago);
        let rec = judge(Some(&source(SECRET)), &h, &m).expect("passes");
        assert_eq!(rec.envelope.id, h.envelope.id, "the original id");
        assert_eq!(rec.envelope.received_at, two_hours_ago);
        assert_eq!(rec.envelope.verification, Verification::OK);
        assert_eq!(rec.envelope.dedupe_key.as_deref(), Some("msg_1"));
        assert_eq!(rec.dedupe.as_ref().map(|d| d.key.as_str()), Some("msg_1"));
        assert_eq!(rec.sinks, vec!["log"]);
    }

    #[test]
    fn a_hook_the_source_still_cannot_verify_stays() {
        let m = Metrics::new();
        let h = held("whsec_c2VjcmV0LW90aGVy", ankusa_core::now_ms());
        assert_eq!(
            judge(Some(&source(SECRET)), &h, &m).unwrap_err(),
            Stays::Fails("no_matching_signature")
        );
        assert_eq!(judge(None, &h, &m).unwrap_err(), Stays::SourceGone);
    }
}
