//! Store calls from async code: each runs on a blocking thread, and a task that cannot be
//! joined (it panicked or the runtime is shutting down) is `StoreError::Unavailable`, the same
//! answer as a store that cannot be reached. A leaf: imports nothing of this crate.

use ankusa_store::StoreError;

/// Runs `f` on a blocking thread.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| StoreError::Unavailable {
            class: "other",
            message: e.to_string(),
        })?
}
