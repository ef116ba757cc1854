//! The log sink: records each delivery in the log. Nothing leaves the process, so it is not
//! durable; it is the default sink of the embedded demo config.

use ankusa_core::{DeliveryCtx, Envelope, Sink, SinkError};
use futures::future::BoxFuture;

pub struct LogSink;

impl Sink for LogSink {
    fn deliver<'a>(
        &'a self,
        env: &'a Envelope,
        ctx: &'a DeliveryCtx,
    ) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(async move {
            tracing::info!(
                target: "ankusa::delivery",
                id = %env.id,
                tenant = %env.tenant,
                source = %env.source_id,
                size = env.body.len(),
                attempt = ctx.attempt,
                replay_id = ctx.replay_id.as_deref().unwrap_or(""),
                verification = env.verification.status.as_str(),
                flagged = env.verification.flagged,
                "hook delivered to the log sink"
            );
            Ok(())
        })
    }

    fn durable(&self) -> bool {
        false
    }

    fn type_name(&self) -> &'static str {
        "log"
    }
}
