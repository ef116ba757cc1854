//! AWS credentials and SigV4 signing for the SQS sink, from maintained crates: `aws-sigv4`
//! signs, `aws-config`'s default chain finds credentials when the sink has none of its own
//! (`AWS_*` environment, web identity / IRSA, profile files, ECS, IMDSv2).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_credential_types::provider::ProvideCredentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use tokio::sync::{Mutex, OnceCell};

/// Refresh chain credentials this long before they expire.
const REFRESH_MARGIN: Duration = Duration::from_secs(300);

pub enum CredentialSource {
    Static(Credentials),
    Chain {
        chain: OnceCell<Arc<dyn ProvideCredentials>>,
        cached: Mutex<Option<Credentials>>,
    },
}

impl CredentialSource {
    pub fn from_config(
        access_key_id: Option<&str>,
        secret_access_key: Option<&str>,
        session_token: Option<&str>,
    ) -> Self {
        match (access_key_id, secret_access_key) {
            (Some(ak), Some(sk)) => CredentialSource::Static(Credentials::new(
                ak,
                sk,
                session_token.map(str::to_string),
                None,
                "ankusa-config",
            )),
            _ => CredentialSource::Chain {
                chain: OnceCell::new(),
                cached: Mutex::new(None),
            },
        }
    }

    /// Current credentials; `Err` (no secret in it) when the chain finds none.
    pub async fn get(&self) -> Result<Credentials, String> {
        match self {
            CredentialSource::Static(c) => Ok(c.clone()),
            CredentialSource::Chain { chain, cached } => {
                let mut cached = cached.lock().await;
                if let Some(c) = cached.as_ref() {
                    let fresh = c
                        .expiry()
                        .is_none_or(|e| e > SystemTime::now() + REFRESH_MARGIN);
                    if fresh {
                        return Ok(c.clone());
                    }
                }
                let provider = chain
                    .get_or_init(|| async {
                        let chain = aws_config::default_provider::credentials::DefaultCredentialsChain::builder()
                            .build()
                            .await;
                        Arc::new(chain) as Arc<dyn ProvideCredentials>
                    })
                    .await;
                let c = provider
                    .provide_credentials()
                    .await
                    .map_err(|e| format!("no_credentials: {}", credentials_class(&e)))?;
                *cached = Some(c.clone());
                Ok(c)
            }
        }
    }
}

/// Why the credential chain gave no credentials, in class words: the providers' own texts
/// (an STS or IMDS reply among them) are not kept.
fn credentials_class(e: &aws_credential_types::provider::error::CredentialsError) -> &'static str {
    use aws_credential_types::provider::error::CredentialsError as E;
    match e {
        E::CredentialsNotLoaded(_) => "no source in the AWS credential chain has credentials",
        E::ProviderTimedOut(_) => "the AWS credential source timed out",
        E::InvalidConfiguration(_) => "the AWS credential source is misconfigured",
        _ => "the AWS credential source failed",
    }
}

/// SigV4 headers (`authorization`, `x-amz-date`, `x-amz-security-token`) for one request.
pub fn sign_headers(
    creds: Credentials,
    region: &str,
    service: &str,
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<Vec<(String, String)>, String> {
    let req = Unsigned {
        method,
        url,
        headers,
        body,
    };
    sign_with(creds, region, service, SigningSettings::default(), req)
}

/// S3's flavour of SigV4: the payload's sha256 in `x-amz-content-sha256` (S3 requires it), the
/// path signed as sent (no normalisation, no double encoding).
pub fn sign_headers_s3(
    creds: Credentials,
    region: &str,
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<Vec<(String, String)>, String> {
    let mut settings = SigningSettings::default();
    settings.payload_checksum_kind = aws_sigv4::http_request::PayloadChecksumKind::XAmzSha256;
    settings.percent_encoding_mode = aws_sigv4::http_request::PercentEncodingMode::Single;
    settings.uri_path_normalization_mode =
        aws_sigv4::http_request::UriPathNormalizationMode::Disabled;
    let req = Unsigned {
        method,
        url,
        headers,
        body,
    };
    sign_with(creds, region, "s3", settings, req)
}

/// A request to sign.
struct Unsigned<'a> {
    method: &'a str,
    url: &'a str,
    headers: &'a [(&'a str, &'a str)],
    body: &'a [u8],
}

fn sign_with(
    creds: Credentials,
    region: &str,
    service: &str,
    settings: SigningSettings,
    req: Unsigned<'_>,
) -> Result<Vec<(String, String)>, String> {
    let Unsigned {
        method,
        url,
        headers,
        body,
    } = req;
    let identity = creds.into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(SystemTime::now())
        .settings(settings)
        .build()
        .map_err(|e| format!("sigv4 params: {e}"))?
        .into();
    let req = SignableRequest::new(
        method,
        url,
        headers.iter().copied(),
        SignableBody::Bytes(body),
    )
    .map_err(|e| format!("sigv4 request: {e}"))?;
    let (instructions, _sig) = sign(req, &params)
        .map_err(|e| format!("sigv4: {e}"))?
        .into_parts();
    Ok(instructions
        .headers()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect())
}

/// The region of an `sqs.<region>.amazonaws.com` or `<region>.queue.amazonaws.com` host.
pub fn region_from_host(host: &str) -> Option<String> {
    let parts: Vec<&str> = host.split('.').collect();
    match parts.as_slice() {
        ["sqs", region, "amazonaws", ..] => Some(region.to_string()),
        [region, "queue", "amazonaws", ..] => Some(region.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions() {
        assert_eq!(
            region_from_host("sqs.eu-west-1.amazonaws.com").as_deref(),
            Some("eu-west-1")
        );
        assert_eq!(
            region_from_host("us-east-2.queue.amazonaws.com").as_deref(),
            Some("us-east-2")
        );
        assert_eq!(region_from_host("127.0.0.1"), None);
    }

    #[test]
    fn signs_with_the_crate() {
        let c = Credentials::new("AKIDEXAMPLE", "secret", Some("tok".into()), None, "t");
        let h = sign_headers(
            c,
            "us-east-1",
            "sqs",
            "POST",
            "https://sqs.us-east-1.amazonaws.com/",
            &[("content-type", "application/x-amz-json-1.0")],
            b"{}",
        )
        .unwrap();
        let names: Vec<&str> = h.iter().map(|(k, _)| k.as_str()).collect();
        assert!(names.contains(&"authorization"), "{names:?}");
        assert!(names.contains(&"x-amz-date"));
        assert!(names.contains(&"x-amz-security-token"));
        let auth = &h.iter().find(|(k, _)| k == "authorization").unwrap().1;
        assert!(auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/"));
        assert!(!auth.contains("secret"));
    }
}
