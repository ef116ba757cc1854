//! A claim's name: its id (the hook's id, so every sink and retry of a hook share one claim),
//! the reference a message carries (`urn:ankusa:claim:v1:<tenant>:<claim_id>` and the body's
//! sha256), and the check every reader's tenant and id pass before a store is touched. A leaf.

use ankusa_core::{ClaimCheckRef, Envelope};
use sha2::{Digest, Sha256};

/// The claim id of a hook: its id (32 lowercase hex digits).
pub fn claim_id(env: &Envelope) -> String {
    env.id.simple().to_string()
}

/// The reference every sink and retry of `env` carries.
pub fn reference(env: &Envelope) -> ClaimCheckRef {
    ClaimCheckRef {
        urn: format!("urn:ankusa:claim:v1:{}:{}", env.tenant, claim_id(env)),
        sha256: hex::encode(Sha256::digest(&env.body)),
    }
}

/// Whether a reader's tenant and claim id can name a claim (ids of `[A-Za-z0-9_-]{1,64}`), so
/// neither can escape a directory or a key prefix.
pub fn valid(tenant: &str, claim_id: &str) -> bool {
    ankusa_config::valid_id(tenant) && ankusa_config::valid_id(claim_id)
}
