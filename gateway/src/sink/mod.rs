//! The `Sink` contract and the destinations that implement it.
//!
//! A sink answers `Ok(())` only once the hook is accepted by the destination; every error
//! carries one of the classes dispatch acts on. A panic inside a sink is caught by dispatch
//! and counts as a failed attempt.

pub mod egress;
pub mod forward;
pub mod http;
pub mod log;

use std::sync::Arc;

use ankusa_config::{Config, ConfigError, SinkConfig, SourceConfig};

pub use ankusa_core::{ClaimCheck, ClaimCheckRef, DeliveryCtx, Sink, SinkError};

/// Builds sinks from config. Shared state (connection pools, broker connections) lives in the
/// factory, so a reload swaps sinks without dropping connections.
pub struct SinkFactory {
    pub http: Arc<http::HttpPools>,
    /// The queue sinks (Kafka, RabbitMQ, NATS, Redis, SQS, Pub/Sub): their broker connections
    /// and batchers. Spawn `queue.clone().run_reaper(..)` once to close idle connections.
    pub queue: Arc<ankusa_sinks::SinkBuilder>,
}

impl SinkFactory {
    pub fn new(http: Arc<http::HttpPools>) -> Self {
        SinkFactory {
            http,
            queue: Arc::new(ankusa_sinks::SinkBuilder::new()),
        }
    }

    pub fn build(
        &self,
        cfg: &Config,
        source: &SourceConfig,
        field: &str,
        sink: &SinkConfig,
    ) -> Result<Arc<dyn Sink>, ConfigError> {
        match sink {
            SinkConfig::Log(_) => Ok(Arc::new(log::LogSink)),
            SinkConfig::Http(h) => Ok(Arc::new(http::HttpSink::new(
                h,
                &cfg.egress,
                self.http.clone(),
                field,
            )?)),
            SinkConfig::Kafka(_)
            | SinkConfig::Rabbitmq(_)
            | SinkConfig::Nats(_)
            | SinkConfig::Redis(_)
            | SinkConfig::Sqs(_)
            | SinkConfig::GooglePubsub(_) => self.queue.build(cfg, source, field, sink),
        }
    }
}
