//! How the Gateway controller writes statuses: its field manager (`ankusa-operator/gateway`),
//! the Gateway status write (every field but `ownership`), and the throttles that space out
//! writes changing only counts that move with every hook or failed attempt. A leaf of the
//! controller: the guard (refusals) and `publish` both write through it.
//!
//! May import: `context`, `status` (what of a status is steady).

use std::time::Duration;

use ankusa_crds::{Gateway, GatewayStatus, Source, SourceStatus};
use kube::ResourceExt;

use crate::context::{Ctx, Result};
use crate::status::gateway::{same_status, steady_part};
use crate::status::source as source_st;

pub const CONTROLLER: &str = "gateway";

/// Least time between two Gateway status writes that change only delivery errors or the
/// pods' archive and DLQ counts (and between two Source status writes that change only
/// quarantine counts).
pub const DELIVERY_WRITE_EVERY: Duration = Duration::from_secs(20);

/// Writes the Gateway's status, but for `ownership` (which `crate::ownership` writes, under
/// its own field manager).
pub async fn write_gateway_status(
    ctx: &Ctx,
    gw: &Gateway,
    mut status: GatewayStatus,
) -> Result<()> {
    status.ownership = None;
    ctx.patch_status(gw, CONTROLLER, &status).await
}

/// The key of the Gateway's delivery-count writes in `Ctx::poll_due`.
pub fn delivery_write_key(gw: &Gateway) -> String {
    format!(
        "gateway-delivery/{}/{}",
        gw.namespace().unwrap_or_default(),
        gw.name_any()
    )
}

/// Whether a changed status is written now. Delivery errors change with every failed attempt
/// (the count, the text; a flaky receiver makes a pod's entry come and go), archive and DLQ
/// counts with every hook, and each write wakes this controller and the Sink controller
/// again: a status that differs only there is written at most every `DELIVERY_WRITE_EVERY`
/// (the first failure at once), the next poll after that catching up. Any other change is
/// written at once, with the counts as they are.
pub fn status_write_due(ctx: &Ctx, gw: &Gateway, old: &GatewayStatus, new: &GatewayStatus) -> bool {
    !same_status(&steady_part(old), &steady_part(new))
        || ctx
            .poll_due(&delivery_write_key(gw), DELIVERY_WRITE_EVERY)
            .is_none()
}

fn quarantine_write_key(src: &Source) -> String {
    format!(
        "source-quarantine/{}/{}",
        src.namespace().unwrap_or_default(),
        src.name_any()
    )
}

/// Whether a changed Source status is written now: quarantine counts change with every forged
/// or mis-signed request and each write wakes the Gateway controller again, so a status that
/// differs only in them is written at most every `DELIVERY_WRITE_EVERY`; the first entry, the
/// last one leaving, and any other change at once.
pub fn source_write_due(ctx: &Ctx, src: &Source, old: &SourceStatus, new: &SourceStatus) -> bool {
    let key = quarantine_write_key(src);
    if new.quarantine.is_none() {
        ctx.forget_poll(&key);
    }
    !source_st::same(&source_st::steady_part(old), &source_st::steady_part(new))
        || ctx.poll_due(&key, DELIVERY_WRITE_EVERY).is_none()
}
