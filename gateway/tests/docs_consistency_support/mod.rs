//! Support of `docs_consistency.rs`: reading Rust and markdown as text.

pub mod config_types;
pub mod text;
