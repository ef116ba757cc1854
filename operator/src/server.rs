//! The operator's HTTP endpoint: `/metrics` (Prometheus text), `/health` (the process runs)
//! and `/ready` (200 while leading or standing by healthily).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use crate::metrics::Metrics;

pub fn router(metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route("/metrics", get(metrics_handler))
        .route("/health", get(|| async { (StatusCode::OK, "ok\n") }))
        .route("/ready", get(|| async { (StatusCode::OK, "ready\n") }))
        .with_state(metrics)
}

async fn metrics_handler(State(m): State<Arc<Metrics>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        m.render(),
    )
}

/// Serves until the process ends.
pub async fn serve(addr: SocketAddr, metrics: Arc<Metrics>) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(%addr, "serving /metrics and /health");
    axum::serve(listener, router(metrics)).await
}
