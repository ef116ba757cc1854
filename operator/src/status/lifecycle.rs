//! The Gateway's `LifecycleEvents` condition: whether `spec.lifecycle` is in the pods' config
//! from its current spec (`True`, `Configured`), or did not render and the pods keep the
//! section they ran before (`False`, `PreviousKept`) or run without one (`False`,
//! `NotConfigured`). Present only on a Gateway with `spec.lifecycle`. A section that does not
//! render also makes the Gateway `Degraded` (reason `LifecycleNotRendered`, last in the order
//! of `status::gateway`), never not Ready: its hooks flow. Pure functions.
//!
//! May import: `render` (the outcome), `ankusa_crds`.

use ankusa_crds::Gateway;

use crate::render::rendered::{Outcome, Rendered};

/// The condition type.
pub const LIFECYCLE_EVENTS: &str = "LifecycleEvents";

/// The `Degraded` reason while `spec.lifecycle` does not render.
pub const LIFECYCLE_NOT_RENDERED: &str = "LifecycleNotRendered";

/// `LifecycleEvents` as (status, reason, message); `None` without `spec.lifecycle`, or when
/// the Gateway's own config is refused (its `Ready` says why).
pub fn lifecycle_condition(
    gw: &Gateway,
    rendered: &Rendered,
) -> Option<(bool, &'static str, String)> {
    let spec = gw.spec.lifecycle.as_ref()?;
    Some(match rendered.lifecycle.as_ref()? {
        Outcome::Current => (
            true,
            "Configured",
            format!(
                "lifecycle events go to Sink {}",
                spec.sink_names().collect::<Vec<_>>().join(", ")
            ),
        ),
        Outcome::Previous(e) => (
            false,
            "PreviousKept",
            format!("{e}; the pods keep the lifecycle section they ran before"),
        ),
        Outcome::Missing(e) => (
            false,
            "NotConfigured",
            format!("{e}; the pods run without lifecycle events"),
        ),
    })
}

/// The `Degraded` message while `spec.lifecycle` does not render.
pub fn lifecycle_trouble(gw: &Gateway, rendered: &Rendered) -> Option<String> {
    match lifecycle_condition(gw, rendered)? {
        (false, _, m) => Some(m),
        _ => None,
    }
}
