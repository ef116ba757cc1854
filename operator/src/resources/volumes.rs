//! The pods' data volumes: the claim name the StatefulSet controller gives each pod, and when
//! a pod must be deleted so that it comes back on a new, empty volume.
//!
//! May import: `ankusa_crds`.

use ankusa_crds::names::DATA_VOLUME;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::ResourceExt;

/// Name of a pod's data volume claim, as the StatefulSet controller names it.
pub fn claim_name(pod: &str) -> String {
    format!("{DATA_VOLUME}-{pod}")
}

/// Why a pod must be deleted so that the StatefulSet controller gives it a new, empty volume,
/// if it must. Kubernetes 1.20's StatefulSet controller creates a missing claim only when it
/// creates the pod: a pod whose claim was deleted under it stays `Pending` for ever (the
/// kubelet will not start a pod on a claim being deleted, and the claim's protection waits
/// for the scheduled pod to go). So:
///
/// - the claim no longer exists: the pod cannot get its volume → delete it;
/// - the claim is being deleted and the pod is not ready: it is stuck → delete it;
/// - the claim is being deleted under a ready pod: the volume goes when the pod does. With
///   `protected` (backups or `mode: dual`), delete the pod now: it stops cleanly (a final
///   backup) and comes back restoring onto a new volume. Without, leave it running: a
///   restart would start it empty, so that stays the user's call.
pub fn volume_lost(
    pod: &Pod,
    claim: Option<&PersistentVolumeClaim>,
    ready: bool,
    protected: bool,
) -> Option<String> {
    if pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let name = claim_name(&pod.name_any());
    let uses_claim = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .is_some_and(|v| {
            v.iter().any(|v| {
                v.persistent_volume_claim
                    .as_ref()
                    .is_some_and(|c| c.claim_name == name)
            })
        });
    if !uses_claim {
        return None;
    }
    match claim {
        None => Some(format!("its volume claim {name} no longer exists")),
        Some(c) if c.metadata.deletion_timestamp.is_some() && (!ready || protected) => {
            Some(format!("its volume claim {name} is being deleted"))
        }
        Some(_) => None,
    }
}
