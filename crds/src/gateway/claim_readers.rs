//! `spec.settings.claim_check.token_review`: consumers that redeem claims with their own
//! ServiceAccount's token instead of a shared bearer token. The gateway checks such a token
//! with a `TokenReview` for `audience`; each listed ServiceAccount reads the tenants it is
//! given. A leaf.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The audience a reader's projected token is minted for when none is given.
pub const DEFAULT_CLAIM_AUDIENCE: &str = "ankusa-claims";

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimTokenReview {
    /// The audience readers' tokens are minted for (a projected `serviceAccountToken` volume's
    /// `audience`); default `ankusa-claims`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub audience: Option<String>,
    /// The ServiceAccounts whose tokens read claims.
    #[schemars(length(min = 1))]
    pub service_accounts: Vec<ClaimReaderAccount>,
}

/// One ServiceAccount allowed to redeem claims.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimReaderAccount {
    /// The ServiceAccount's namespace.
    pub namespace: String,
    /// The ServiceAccount's name.
    pub name: String,
    /// The tenants whose claims it may read; absent: every tenant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenants: Option<Vec<String>>,
}
