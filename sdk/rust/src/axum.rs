//! An axum extractor that verifies a delivery from the raw request body before any handler (or
//! JSON parser) sees it: [`VerifiedDelivery`]. Its secrets come from the router's state
//! through [`FromRef`], as a [`Receiver`].
//!
//! ```no_run
//! use axum::{Router, http::StatusCode, routing::post};
//! use ankusa_sdk::axum::{Receiver, VerifiedDelivery};
//! use ankusa_sdk::ReceiveOptions;
//!
//! async fn hooks(VerifiedDelivery(d): VerifiedDelivery) -> StatusCode {
//!     println!("{} {}", d.id, d.body.len());
//!     StatusCode::ACCEPTED
//! }
//!
//! let app: Router = Router::new()
//!     .route("/hooks", post(hooks))
//!     .with_state(Receiver::new(ReceiveOptions::with_secrets(["whsec_..."])));
//! ```

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{FromRef, FromRequest, Request};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::delivery::{Delivery, ReceiveOptions, receive_bytes};
use crate::errors::Error;

/// What a receiver accepts, shared by every request (cheap to clone). Put it in the router's
/// state, or implement `FromRef<YourState> for Receiver`.
#[derive(Debug, Clone)]
pub struct Receiver(Arc<ReceiveOptions>);

impl Receiver {
    pub fn new(options: ReceiveOptions) -> Receiver {
        Receiver(Arc::new(options))
    }

    pub fn options(&self) -> &ReceiveOptions {
        &self.0
    }
}

impl From<ReceiveOptions> for Receiver {
    fn from(o: ReceiveOptions) -> Receiver {
        Receiver::new(o)
    }
}

/// A delivery whose signature (and `x-ankusa-*` headers) checked out. Extract it last: it takes
/// the body.
#[derive(Debug, Clone)]
pub struct VerifiedDelivery(pub Delivery);

/// Why [`VerifiedDelivery`] refused a request: answered `401` (signature) or `400` (delivery
/// headers, unreadable body), `413` (body over axum's `DefaultBodyLimit`), with
/// `{"error": "<code>"}`.
#[derive(Debug)]
pub enum DeliveryRejection {
    /// The SDK refused the delivery.
    Refused(Error),
    /// The body could not be read: `413` when over the limit, else `400`.
    Body(StatusCode),
}

impl DeliveryRejection {
    /// The status answered.
    pub fn status(&self) -> StatusCode {
        match self {
            DeliveryRejection::Refused(e) => e
                .status()
                .and_then(|s| StatusCode::from_u16(s).ok())
                .unwrap_or(StatusCode::BAD_REQUEST),
            DeliveryRejection::Body(s) => *s,
        }
    }

    /// The `error` code answered.
    pub fn code(&self) -> &str {
        match self {
            DeliveryRejection::Refused(e) => e.code(),
            DeliveryRejection::Body(StatusCode::PAYLOAD_TOO_LARGE) => "body_too_large",
            DeliveryRejection::Body(_) => "invalid_body",
        }
    }
}

impl IntoResponse for DeliveryRejection {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": self.code() }).to_string();
        (
            self.status(),
            [(header::CONTENT_TYPE, "application/json")],
            Body::from(body),
        )
            .into_response()
    }
}

impl<S> FromRequest<S> for VerifiedDelivery
where
    S: Send + Sync,
    Receiver: FromRef<S>,
{
    type Rejection = DeliveryRejection;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let receiver = Receiver::from_ref(state);
        let headers = req.headers().clone();
        // The raw bytes, as signed: nothing parses them before the signature is checked.
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|r| DeliveryRejection::Body(r.status()))?;
        receive_bytes(&headers, bytes, receiver.options())
            .map(VerifiedDelivery)
            .map_err(DeliveryRejection::Refused)
    }
}
