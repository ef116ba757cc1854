//! What an admin request sends besides its path: the query (`Params<T>`, a rejection is
//! `400 invalid_filter`), a JSON body (`JsonBody<T>`, `400 invalid_body`), and the number
//! checks every filter shares (`number`, `limit`). Query structs hold text, so a bad value is
//! `invalid_filter` naming its parameter rather than axum's plain-text rejection.
//!
//! A leaf of `admin`: it imports only `api_error`.

use axum::extract::{FromRequest, FromRequestParts, Query, Request};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;

use crate::api_error::ApiError;

/// The query string as `T`.
pub struct Params<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Params<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        match Query::<T>::try_from_uri(&parts.uri) {
            Ok(Query(t)) => Ok(Params(t)),
            Err(e) => Err(query_error(&e.body_text())),
        }
    }
}

/// `invalid_filter` for a query that does not deserialize. Query structs hold only optional
/// text, so what fails is a parameter given twice (serde names the field, never the value) or
/// a query that is not one.
fn query_error(why: &str) -> ApiError {
    let twice = why
        .split_once("duplicate field `")
        .and_then(|(_, rest)| rest.split_once('`'))
        .map(|(field, _)| field)
        .filter(|f| f.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'));
    match twice {
        Some(field) => ApiError::filter(field, "is given more than once"),
        None => ApiError::filter("query", "is not a valid query string"),
    }
}

/// A JSON request body as `T`; `400 invalid_body` when it is not one (unknown keys included).
/// The content type is not checked.
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for JsonBody<T> {
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Self, Response> {
        let bytes = axum::body::Bytes::from_request(req, state)
            .await
            .map_err(IntoResponse::into_response)?;
        serde_json::from_slice(&bytes).map(JsonBody).map_err(|e| {
            ApiError::InvalidBody {
                message: e.to_string(),
            }
            .into_response()
        })
    }
}

/// An optional number parameter.
pub fn number<T: std::str::FromStr>(
    field: &str,
    v: &Option<String>,
) -> Result<Option<T>, ApiError> {
    match v {
        None => Ok(None),
        Some(s) => s
            .parse()
            .map(Some)
            .map_err(|_| ApiError::filter(field, "must be a non-negative integer")),
    }
}

/// A `limit` parameter: `default` when absent, else `1..=max`.
pub fn limit(v: &Option<String>, default: usize, max: usize) -> Result<usize, ApiError> {
    let limit = number("limit", v)?.unwrap_or(default);
    if limit == 0 || limit > max {
        return Err(ApiError::filter("limit", format!("must be 1..={max}")));
    }
    Ok(limit)
}

/// A `tenant` parameter's syntax, checked before the caller's tenants are.
pub fn check_tenant(tenant: &Option<String>) -> Result<(), ApiError> {
    match tenant {
        Some(t) => ankusa_api::DeadFilter::check_tenant(t)
            .map_err(|e| ApiError::filter(e.field, e.message)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    struct Q {
        #[allow(dead_code)]
        limit: Option<String>,
    }

    async fn params(uri: &str) -> Result<Params<Q>, ApiError> {
        let req = axum::http::Request::builder().uri(uri).body(()).unwrap();
        let (mut parts, ()) = req.into_parts();
        Params::<Q>::from_request_parts(&mut parts, &()).await
    }

    #[tokio::test]
    async fn a_query_that_does_not_deserialize_is_invalid_filter() {
        assert!(params("/v1/dlq?limit=5&other=x").await.is_ok());
        let e = params("/v1/dlq?limit=1&limit=2").await.err().unwrap();
        assert_eq!(e, ApiError::filter("limit", "is given more than once"));
        assert_eq!(e.status(), 400);
    }

    #[test]
    fn limits_and_numbers_name_their_field() {
        assert_eq!(limit(&None, 100, 1000), Ok(100));
        assert_eq!(limit(&Some("1000".into()), 100, 1000), Ok(1000));
        assert_eq!(
            limit(&Some("0".into()), 100, 1000),
            Err(ApiError::filter("limit", "must be 1..=1000"))
        );
        assert_eq!(
            limit(&Some("-1".into()), 100, 10_000),
            Err(ApiError::filter("limit", "must be a non-negative integer"))
        );
        assert_eq!(
            number::<u64>("since", &Some("x".into())),
            Err(ApiError::filter("since", "must be a non-negative integer"))
        );
        assert_eq!(
            check_tenant(&Some("a b".into())),
            Err(ApiError::filter("tenant", "must match [A-Za-z0-9_-]{1,64}"))
        );
    }
}
