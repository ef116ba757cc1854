//! Ankusa's byte formats, with no IO: the store's key layout (`keys`) and value encodings
//! (`codec`), the dead-index cursor the admin API hands out (`cursor`), the queue message v1 as
//! a consumer reads it (`message`), and the small grammars of the HTTP edge and the HTTP sink
//! (`request`, `http`).
//!
//! A crate of its own so that what parses untrusted or stored bytes can be fuzzed without
//! linking RocksDB or librdkafka: it depends only on pure-Rust crates.

pub mod codec;
pub mod cursor;
pub mod http;
pub mod intake;
pub mod keys;
pub mod message;
pub mod request;
pub mod segment;

/// Bytes that do not decode. The message says where and what kind, never the bytes themselves
/// (stored rows hold tenants' data; the message reaches logs and the admin API).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error("store corrupt: {0}")]
    Corrupt(String),
}
