//! `kind: quarantine` jobs: each step judges pen entries again and commits the ones that pass.
//! An entry is judged by its source's current verifier over the stored headers and body, with
//! the signature's timestamp window at the hook's original receive time (a release hours later
//! still passes a hook that was on time). A pass becomes the hook the edge would have committed
//! for that request (`hook::record`): its original id and receive time, the source's current
//! dedupe key, ordering lanes and sinks. The passes, the pen deletes and the job's cursor go in
//! one synced batch (`Store::pen_release`), so a restart never releases an entry twice.
//!
//! Imports `hook`, `live`, `metrics` and the pen's counters (`quarantine::Pen::removed`).

use ankusa_api::{JobState, KIND_QUARANTINE};
use ankusa_core::{Verification, now_ms};
use ankusa_store::{IngestRecord, PenFilter, PenHeld, StoreError};

use super::job_record::{from_stored, to_stored};
use super::{JobRt, Replayer};
use crate::blocking::blocking;
use crate::hook::{self, Keyed};
use crate::lifecycle::EventType;
use crate::live::LiveSource;
use crate::metrics::Metrics;

/// Why an entry stays in the pen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stays {
    /// The source is no longer configured.
    SourceGone,
    /// Still fails verification (`VerifyFailure::code`).
    Fails(&'static str),
}

/// The hook to commit for `held`, or why it stays.
pub fn judge(
    source: Option<&LiveSource>,
    held: &PenHeld,
    metrics: &Metrics,
) -> Result<IngestRecord, Stays> {
    let source = source.ok_or(Stays::SourceGone)?;
    let env = &held.envelope;
    let headers = hook::headers::map(&env.headers);
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
    let mut envelope = env.clone();
    envelope.verification = verification;
    let keyed = Keyed::BySource {
        url_tenant: held.summary.url_tenant,
    };
    Ok(hook::record(source, envelope, &headers, keyed, metrics))
}

impl Replayer {
    /// One step of a `quarantine` job: judges up to `n` pen entries (received at or before
    /// the job's creation) against their sources' current verifiers, and commits the passes
    /// with the pen deletes and the job's cursor in one synced batch. Returns how many entries
    /// it looked at.
    pub(super) async fn release_step(&self, rt: &mut JobRt, n: usize) -> Result<u64, StoreError> {
        let f = &rt.job.filter;
        let filter = PenFilter {
            tenant: f.tenant.clone(),
            source_id: f.source_id.clone(),
            id: f.id,
            since: f.since,
            until: Some(f.until.unwrap_or(u64::MAX).min(rt.job.created_at)),
        };
        // A cursor that does not decode starts the scan over: entries already released are
        // gone, and the ones that stayed are judged again.
        let after = rt.job.cursor.as_deref().and_then(|c| hex::decode(c).ok());
        let store = self.store.clone();
        let page = blocking(move || store.pen_page(&filter, after.as_deref(), n)).await?;
        let looked = page.entries.len() as u64;
        let live = self.config.live();
        let mut passed = Vec::new();
        let mut records = Vec::new();
        let mut encoded = Vec::new();
        let mut job = rt.job.clone();
        for held in &page.entries {
            let source = live
                .sources
                .get(&held.summary.source_id)
                .map(|s| s.as_ref());
            match judge(source, held, &self.metrics) {
                Ok(rec) => {
                    encoded.push(ankusa_store::encode_envelope(&rec.envelope));
                    records.push(rec);
                    passed.push(held.summary.clone());
                }
                Err(why) => {
                    tracing::debug!(job = %job.id, id = %held.summary.id, ?why, "quarantined hook stays");
                    job.skipped += 1;
                }
            }
        }
        job.scanned += page.examined;
        if let Some(k) = &page.last_key {
            job.cursor = Some(hex::encode(k));
        }
        if page.finished {
            job.state = JobState::Completed;
        }
        let tenants = super::tenants_of(&records);
        // (tenant, source) of each hook leaving the pen: counted per interval once committed.
        let leaving: Vec<(String, String)> = records
            .iter()
            .map(|r| (r.envelope.tenant.clone(), r.envelope.source_id.clone()))
            .collect();
        let store = self.store.clone();
        let at = now_ms();
        let (released, job) = blocking(move || {
            let mut rec = to_stored(&job);
            store
                .pen_release(&mut rec, &passed, &records, &encoded, at)
                .map(|r| (r, from_stored(rec)))
        })
        .await?;
        self.pen.removed(released.removed);
        if let Some(events) = &self.events {
            for (tenant, source) in &leaving {
                events.count(EventType::QuarantineReleased, tenant, source, 1);
            }
        }
        if released.accepted > 0 {
            self.metrics
                .replay
                .moved
                .with_label_values(&[KIND_QUARANTINE])
                .inc_by(released.accepted);
            self.dispatcher
                .wake_lanes(tenants, at, released.committed.lanes.clone());
        }
        if job.state == JobState::Completed {
            tracing::info!(job = %job.id, released = job.released, skipped = job.skipped, "quarantine job finished its scan");
        }
        rt.job = job;
        Ok(looked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ankusa_config::{
        DedupeConfig, DedupePreset, LogSinkConfig, Secrets, SinkConfig, SourceConfig, TimedPreset,
        VerifyConfig,
    };
    use ankusa_core::{Envelope, VerifyStatus};
    use bytes::Bytes;

    use ankusa_store::PenSummary;

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
            routes: vec![],
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
