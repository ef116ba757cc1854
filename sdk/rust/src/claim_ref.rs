//! Claim references: `urn:ankusa:claim:v1:<tenant>:<claim_id>`, the name of a body a queue
//! message carries by reference. Both parts are `[A-Za-z0-9_-]{1,64}`, so they go into a URL
//! path as they are.

use std::fmt;

use crate::errors::InvalidClaimRefError;

const PREFIX: &str = "urn:ankusa:claim:v1:";
const MAX_PART: usize = 64;

/// A parsed claim reference.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClaimRef {
    /// The reference as written.
    pub urn: String,
    pub tenant: String,
    /// The hook's id as 32 lowercase hex digits (or another id of the same alphabet).
    pub claim_id: String,
}

impl ClaimRef {
    /// Parses `urn:ankusa:claim:v1:<tenant>:<claim_id>` exactly: lowercase prefix, two parts of
    /// `[A-Za-z0-9_-]{1,64}`, nothing else.
    pub fn parse(urn: &str) -> Result<ClaimRef, InvalidClaimRefError> {
        let rest = urn
            .strip_prefix(PREFIX)
            .ok_or_else(|| InvalidClaimRefError::new("does not start with urn:ankusa:claim:v1:"))?;
        let (tenant, claim_id) = rest
            .split_once(':')
            .ok_or_else(|| InvalidClaimRefError::new("has no claim id after the tenant"))?;
        check_part(tenant, "tenant")?;
        check_part(claim_id, "claim id")?;
        Ok(ClaimRef {
            urn: urn.to_string(),
            tenant: tenant.to_string(),
            claim_id: claim_id.to_string(),
        })
    }

    /// The claim port's path of this claim: `/v1/claims/<tenant>/<claim_id>`.
    pub fn path(&self) -> String {
        format!("/v1/claims/{}/{}", self.tenant, self.claim_id)
    }
}

impl fmt::Display for ClaimRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.urn)
    }
}

fn check_part(part: &str, what: &str) -> Result<(), InvalidClaimRefError> {
    let ok = (1..=MAX_PART).contains(&part.len())
        && part
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(InvalidClaimRefError::new(format!(
            "the {what} is not [A-Za-z0-9_-]{{1,64}}"
        )))
    }
}
