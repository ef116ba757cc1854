//! Types shared by the gateway and its sinks: the stored hook (`Envelope`) and the `Sink`
//! contract with its error classes.

mod envelope;
mod sink;

pub use envelope::{Envelope, Verification, VerifyStatus};
pub use sink::{ClaimRef, ClaimStore, DeliveryCtx, Sink, SinkError};
