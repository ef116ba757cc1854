//! `claim_check.token_review`: claim readers that authenticate with a Kubernetes
//! ServiceAccount token (a projected token minted for `audience`) instead of a shared bearer
//! token. The claim port asks the API server (`TokenReview`) who presented the token, and
//! `service_accounts` says which tenants' claims each ServiceAccount may read.
//! Imports the leaves `rules` and `error`.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use crate::error::ConfigError;
use crate::rules::{err, in_range, tenant_list};

/// Where a pod finds its own ServiceAccount's token and the cluster CA.
const SA_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct TokenReviewConfig {
    /// The audience readers' tokens must be minted for (a projected volume's `audience`,
    /// `kubectl create token --audience`); a token for the API server itself is refused.
    pub audience: String,
    /// The ServiceAccounts that may read claims, each for every tenant or for some.
    pub service_accounts: Vec<ServiceAccountReader>,
    /// The API server's `https://` URL. Absent: the in-cluster address
    /// (`KUBERNETES_SERVICE_HOST` and `KUBERNETES_SERVICE_PORT`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_server: Option<String>,
    /// The CA bundle the API server's certificate is checked against.
    #[serde(default = "default_ca_file")]
    pub ca_file: PathBuf,
    /// The gateway's own credential for the API server (re-read on every review: projected
    /// tokens rotate). Its ServiceAccount needs `create` on `tokenreviews`
    /// (`system:auth-delegator`).
    #[serde(default = "default_token_file")]
    pub token_file: PathBuf,
    /// Seconds a review's answer is reused for the same token (a refusal: at most 10).
    #[serde(default = "default_cache_ttl_s")]
    pub cache_ttl_s: u32,
    /// A review not answered within this many ms is `503 auth_unavailable`.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u32,
}

/// One ServiceAccount allowed to read claims.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ServiceAccountReader {
    pub namespace: String,
    pub name: String,
    /// The tenants whose claims it may read; absent: every tenant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenants: Option<Vec<String>>,
}

fn default_ca_file() -> PathBuf {
    PathBuf::from(SA_DIR).join("ca.crt")
}

fn default_token_file() -> PathBuf {
    PathBuf::from(SA_DIR).join("token")
}

fn default_cache_ttl_s() -> u32 {
    60
}

fn default_timeout_ms() -> u32 {
    5000
}

/// A DNS-1123 label: what a namespace and a ServiceAccount name are.
fn dns_label(s: &str) -> bool {
    (1..=63).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A DNS-1123 subdomain (a ServiceAccount name may have dots).
fn dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(dns_label)
}

impl ServiceAccountReader {
    /// The user name the API server gives this ServiceAccount's tokens.
    pub fn username(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.namespace, self.name)
    }

    /// Whether it may read `tenant`'s claims.
    pub fn allows(&self, tenant: &str) -> bool {
        self.tenants
            .as_ref()
            .is_none_or(|t| t.iter().any(|x| x == tenant))
    }
}

impl TokenReviewConfig {
    /// Reviews through the in-cluster API address with the pod's own ServiceAccount files and
    /// the default cache and timeout.
    pub fn in_cluster(audience: &str, service_accounts: Vec<ServiceAccountReader>) -> Self {
        TokenReviewConfig {
            audience: audience.to_string(),
            service_accounts,
            api_server: None,
            ca_file: default_ca_file(),
            token_file: default_token_file(),
            cache_ttl_s: default_cache_ttl_s(),
            timeout_ms: default_timeout_ms(),
        }
    }

    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        let aud = self.audience.trim();
        if aud.is_empty() || aud.len() > 253 || aud != self.audience {
            return Err(err(
                format!("{path}.audience"),
                "must be 1 to 253 characters without surrounding spaces",
            ));
        }
        if self.service_accounts.is_empty() {
            return Err(err(
                format!("{path}.service_accounts"),
                "must name at least one ServiceAccount",
            ));
        }
        for (i, sa) in self.service_accounts.iter().enumerate() {
            let at = format!("{path}.service_accounts[{i}]");
            if !dns_label(&sa.namespace) {
                return Err(err(format!("{at}.namespace"), "is not a namespace name"));
            }
            if !dns_subdomain(&sa.name) {
                return Err(err(format!("{at}.name"), "is not a ServiceAccount name"));
            }
            tenant_list(&format!("{at}.tenants"), sa.tenants.as_deref())?;
            if self.service_accounts[..i]
                .iter()
                .any(|o| o.namespace == sa.namespace && o.name == sa.name)
            {
                return Err(err(at, "names a ServiceAccount listed before"));
            }
        }
        if let Some(url) = &self.api_server {
            let ok =
                url::Url::parse(url).is_ok_and(|u| u.scheme() == "https" && u.host_str().is_some());
            if !ok {
                return Err(err(
                    format!("{path}.api_server"),
                    "must be an https:// URL with a host",
                ));
            }
        }
        in_range(
            &format!("{path}.cache_ttl_s"),
            self.cache_ttl_s.into(),
            0,
            3600,
        )?;
        in_range(
            &format!("{path}.timeout_ms"),
            self.timeout_ms.into(),
            100,
            60_000,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review(yaml: &str) -> Result<(), String> {
        let c: TokenReviewConfig = serde_yaml_ng::from_str(yaml).map_err(|e| e.to_string())?;
        c.validate("claim_check.token_review")
            .map_err(|e| e.to_string())
    }

    #[test]
    fn fields_are_checked_by_name() {
        assert_eq!(
            review(
                "audience: ankusa-claims\nservice_accounts: [{namespace: billing, name: consumer, tenants: [acme]}]"
            ),
            Ok(())
        );
        for (yaml, field) in [
            (
                "audience: ''\nservice_accounts: [{namespace: a, name: b}]",
                "claim_check.token_review.audience",
            ),
            (
                "audience: x\nservice_accounts: []",
                "claim_check.token_review.service_accounts",
            ),
            (
                "audience: x\nservice_accounts: [{namespace: Bad_NS, name: b}]",
                "service_accounts[0].namespace",
            ),
            (
                "audience: x\nservice_accounts: [{namespace: a, name: b, tenants: []}]",
                "service_accounts[0].tenants",
            ),
            (
                "audience: x\nservice_accounts: [{namespace: a, name: b}, {namespace: a, name: b}]",
                "service_accounts[1]",
            ),
            (
                "audience: x\nservice_accounts: [{namespace: a, name: b}]\napi_server: http://k8s",
                "api_server",
            ),
            (
                "audience: x\nservice_accounts: [{namespace: a, name: b}]\ntimeout_ms: 5",
                "timeout_ms",
            ),
        ] {
            let e = review(yaml).unwrap_err();
            assert!(e.contains(field), "{yaml}: {e}");
        }
        let sa = ServiceAccountReader {
            namespace: "billing".into(),
            name: "consumer".into(),
            tenants: Some(vec!["acme".into()]),
        };
        assert_eq!(sa.username(), "system:serviceaccount:billing:consumer");
        assert!(sa.allows("acme") && !sa.allows("beta"));
    }
}
