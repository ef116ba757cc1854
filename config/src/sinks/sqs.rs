//! The SQS sink: sends each hook to a queue (standard or FIFO), SigV4-signed, batched.

use super::shared::{BatchLimits, d_5000, d_inline, inline, max, min, non_empty};
use super::tls::SinkTls;
use crate::egress::EgressTarget;
use crate::error::ConfigError;
use crate::rules::{err, url_with_scheme};
use crate::secrets::{Secret, SecretUrl};

/// `SendMessageBatch`'s ceilings: 10 entries, 1 MiB (256 KiB by default, the old ceiling
/// some regions and tools still assume).
pub const SQS_BATCH: BatchLimits = BatchLimits {
    max_entries: 10,
    default_entries: 10,
    max_bytes: 1_048_576,
    default_bytes: 262_144,
};

sink_config! {
    /// Sends each hook to an SQS queue (standard, or FIFO when the URL ends `.fifo`), SigV4-signed,
    /// batched with `SendMessageBatch` and settled per entry.
    pub struct SqsSinkConfig {
        /// `https://sqs.<region>.amazonaws.com/<account>/<name>`; the sink never creates queues.
        pub queue_url: SecretUrl,
        /// Signing region; default: read from an `sqs.<region>.amazonaws.com` URL, else
        /// `AWS_REGION`, else `us-east-1`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub region: Option<String>,
        /// Where requests go; default: the queue URL's origin.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub endpoint: Option<SecretUrl>,
        /// FIFO MessageGroupId; default `<tenant>/<source_id>`. On a standard queue it is sent only
        /// when set (fair queues).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub message_group_id: Option<String>,
        /// Largest body carried inline (base64), in bytes (default 65536); a larger one
        /// travels as a claim check.
        #[serde(default = "d_inline")]
        pub inline_max_bytes: u64,
        /// Body plus attributes above this is dead-lettered at once (`message_too_large`).
        #[serde(default = "d_sqs_max")]
        pub max_message_bytes: u64,
        /// Timeout of one SQS request, in ms (default 5000).
        #[serde(default = "d_5000")]
        pub timeout_ms: u64,
        /// How the `https://` endpoint is verified: a private CA bundle (a private or
        /// VPC-internal endpoint), a client certificate, the name to check; absent: the
        /// system's roots and the URL's host.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub tls: Option<SinkTls>,
    }
    batched by SQS_BATCH, then {
        /// Static credentials; absent: `AWS_*` env, web identity (IRSA), profile, IMDSv2.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub access_key_id: Option<Secret>,
        /// The secret key of `access_key_id` (the two go together).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub secret_access_key: Option<Secret>,
        /// A session token for temporary static credentials (needs `access_key_id` and
        /// `secret_access_key`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub session_token: Option<Secret>,
    }
}

fn d_sqs_max() -> u64 {
    1_048_576
}

/// SQS's charset for MessageGroupId and MessageDeduplicationId: 1-128 of
/// alphanumerics and punctuation.
fn sqs_id_chars(s: &str) -> bool {
    !s.is_empty() && s.len() <= 128 && s.bytes().all(|b| b.is_ascii_graphic())
}

impl SqsSinkConfig {
    pub fn new(queue_url: impl Into<String>) -> Self {
        SqsSinkConfig {
            queue_url: SecretUrl::new(queue_url),
            region: None,
            endpoint: None,
            message_group_id: None,
            inline_max_bytes: d_inline(),
            max_message_bytes: d_sqs_max(),
            timeout_ms: d_5000(),
            tls: None,
            batch: super::shared::d_true(),
            batch_linger_ms: super::shared::d_linger(),
            batch_max_entries: default_batch_max_entries(),
            batch_max_bytes: default_batch_max_bytes(),
            batch_queue_max: super::shared::d_queue_max(),
            batch_queue_max_bytes: super::shared::d_queue_max_bytes(),
            batch_queue_tenant_max: super::shared::d_queue_tenant_max(),
            batch_max_inflight: None,
            access_key_id: None,
            secret_access_key: None,
            session_token: None,
            ordered: false,
            ordering_key: None,
            filter: None,
            on_filter_error: Default::default(),
            transform: None,
        }
    }

    /// AWS requires the `.fifo` suffix on FIFO queues, so the URL says which kind it is.
    pub fn is_fifo(&self) -> bool {
        self.queue_url
            .expose()
            .trim_end_matches('/')
            .ends_with(".fifo")
    }

    /// Where requests go: `endpoint` when set, else the origin of `queue_url`.
    pub fn egress_targets(&self) -> Vec<EgressTarget> {
        let target = match &self.endpoint {
            Some(e) => EgressTarget::from_url("endpoint".into(), e.expose(), 443),
            None => EgressTarget::from_url("queue_url".into(), self.queue_url.expose(), 443),
        };
        target.into_iter().collect()
    }

    pub(super) fn validate(&self, p: &str) -> Result<(), ConfigError> {
        if self.ordered && !self.is_fifo() {
            return Err(err(
                format!("{p}.ordered"),
                "an ordered SQS sink needs a FIFO queue (queue_url ending in .fifo)",
            ));
        }
        let u = url_with_scheme(
            &format!("{p}.queue_url"),
            self.queue_url.expose(),
            &["https", "http"],
        )?;
        let segs: Vec<&str> = u
            .path_segments()
            .map(|it| it.filter(|x| !x.is_empty()).collect())
            .unwrap_or_default();
        if segs.len() != 2 {
            return Err(err(
                format!("{p}.queue_url"),
                "must be <endpoint>/<account-id>/<queue-name>",
            ));
        }
        let name = segs[1];
        if name.len() > 80
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        {
            return Err(err(
                format!("{p}.queue_url"),
                "queue name must be 1-80 of [A-Za-z0-9_-] (plus .fifo)",
            ));
        }
        if !u.username().is_empty() || u.password().is_some() {
            return Err(err(
                format!("{p}.queue_url"),
                "must not carry credentials; use access_key_id/secret_access_key",
            ));
        }
        let scheme = match &self.endpoint {
            Some(e) => url_with_scheme(&format!("{p}.endpoint"), e.expose(), &["https", "http"])?
                .scheme()
                .to_string(),
            None => u.scheme().to_string(),
        };
        // Settings a plaintext endpoint would silently ignore are a mistake worth naming.
        if self.tls.is_some() && scheme != "https" {
            return Err(err(
                format!("{p}.tls"),
                "is read only with an https:// endpoint (endpoint, else queue_url)",
            ));
        }
        if let Some(r) = &self.region {
            non_empty(p, "region", r)?;
        }
        if let Some(g) = &self.message_group_id
            && !sqs_id_chars(g)
        {
            return Err(err(
                format!("{p}.message_group_id"),
                "must be 1-128 printable ASCII characters",
            ));
        }
        match (&self.access_key_id, &self.secret_access_key) {
            (Some(_), None) | (None, Some(_)) => {
                return Err(err(
                    format!("{p}.access_key_id"),
                    "access_key_id and secret_access_key go together",
                ));
            }
            (None, None) if self.session_token.is_some() => {
                return Err(err(
                    format!("{p}.session_token"),
                    "needs access_key_id and secret_access_key",
                ));
            }
            _ => {}
        }
        inline(p, self.inline_max_bytes)?;
        min(p, "max_message_bytes", self.max_message_bytes, 1024)?;
        max(p, "max_message_bytes", self.max_message_bytes, 1_048_576)?;
        min(p, "timeout_ms", self.timeout_ms, 1)?;
        self.validate_batch(p)?;
        let single = self.max_message_bytes.min(262_144);
        if self.batch && self.batch_max_bytes < single {
            // A message that passes max_message_bytes must also fit a batch on its own.
            return Err(err(
                format!("{p}.batch_max_bytes"),
                format!(
                    "must be >= min(max_message_bytes, 262144) = {single}, got {}",
                    self.batch_max_bytes
                ),
            ));
        }
        Ok(())
    }
}
