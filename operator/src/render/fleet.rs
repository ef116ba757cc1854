//! The gateway's `fleet` section of a disk or dual Gateway with two pods or more
//! (`spec.fleet`): every pod of `replicas` as a member at its stable DNS name under the
//! headless Service, the admin serving certificate (which carries `clientAuth` too) and CA as
//! both sides' mutual TLS. When the member list differs from the one the pods last received,
//! the old list becomes `previous` with a handover window of `spec.fleet.handoverMinutes`;
//! an open window is carried over unchanged (so the config's hash stays), an expired one
//! dropped.
//!
//! May import: `resources::names`, `ankusa_config`, `ankusa_crds`.

use ankusa_config::{Config, FleetConfig, FleetDedupe, FleetTls};
use ankusa_crds::{FleetDedupeMode, Gateway};
use kube::ResourceExt;

use crate::resources::names::{ADMIN_TLS_MOUNT, headless_service_name, pod_names};

/// The `fleet` section every pod of `gw` gets, or `None` (one pod, `dedupe: off`, direct).
pub fn fleet(gw: &Gateway, previous: Option<&Config>, now_s: u64) -> Option<FleetConfig> {
    if !gw.has_fleet() {
        return None;
    }
    let spec = &gw.spec.fleet;
    let dedupe = match spec.dedupe {
        FleetDedupeMode::BestEffort => FleetDedupe::BestEffort,
        FleetDedupeMode::Strict | FleetDedupeMode::Off => FleetDedupe::Strict,
    };
    let domain = format!(
        "{}.{}.svc",
        headless_service_name(gw),
        gw.namespace().unwrap_or_default()
    );
    let port = gw.spec.ports.fleet;
    let members = pod_names(gw, gw.spec.replicas)
        .into_iter()
        .map(|p| {
            let url = format!("https://{p}.{domain}:{port}");
            (p, url)
        })
        .collect();
    let mut f = FleetConfig {
        ip: [0, 0, 0, 0].into(),
        port,
        tls: FleetTls {
            cert_file: format!("{ADMIN_TLS_MOUNT}/tls.crt").into(),
            key_file: format!("{ADMIN_TLS_MOUNT}/tls.key").into(),
            ca_file: format!("{ADMIN_TLS_MOUNT}/ca.crt").into(),
        },
        members,
        previous: Vec::new(),
        handover_until: 0,
        dedupe,
        max_in_flight: 1024,
        timeout_ms: 5_000,
        retry_after_s: 2,
    };
    let before = previous.and_then(|c| c.fleet.as_ref());
    match before {
        Some(b) if !b.members.keys().eq(f.members.keys()) => {
            f.previous = b.members.keys().cloned().collect();
            f.handover_until = now_s + u64::from(spec.handover_minutes) * 60;
        }
        Some(b) if b.handover(now_s).is_some() => {
            f.previous = b.previous.clone();
            f.handover_until = b.handover_until;
        }
        // No fleet before (a first render, or one pod): nothing to hand over.
        _ => {}
    }
    Some(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn gw(replicas: i32, fleet: serde_json::Value) -> Gateway {
        serde_json::from_value(json!({
            "apiVersion": "ankusa.dev/v1alpha1", "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": "hooks"},
            "spec": {"replicas": replicas, "fleet": fleet}
        }))
        .unwrap()
    }

    fn with(f: Option<FleetConfig>) -> Config {
        Config {
            fleet: f,
            ..Config::default()
        }
    }

    #[test]
    fn every_pod_is_a_member_at_its_stable_name() {
        let f = fleet(&gw(3, json!({})), None, 1000).unwrap();
        assert_eq!(
            f.members.get("gw-1").map(String::as_str),
            Some("https://gw-1.gw-pods.hooks.svc:4004")
        );
        assert_eq!(f.members.len(), 3);
        assert_eq!(f.dedupe, FleetDedupe::Strict);
        assert!(f.previous.is_empty());
        // Valid for each of its pods by the gateway's own rules.
        for pod in f.members.keys() {
            let mut c = with(Some(f.clone()));
            c.node.instance = pod.clone();
            ankusa_config::validate(&c).unwrap();
        }
    }

    #[test]
    fn one_pod_or_off_has_no_fleet() {
        assert_eq!(fleet(&gw(1, json!({})), None, 0), None);
        assert_eq!(fleet(&gw(3, json!({"dedupe": "off"})), None, 0), None);
        let b = fleet(&gw(3, json!({"dedupe": "bestEffort"})), None, 0).unwrap();
        assert_eq!(b.dedupe, FleetDedupe::BestEffort);
    }

    #[test]
    fn a_scale_opens_a_handover_that_is_carried_then_dropped() {
        let three = fleet(&gw(3, json!({"handoverMinutes": 10})), None, 1000).unwrap();
        let four = fleet(
            &gw(4, json!({"handoverMinutes": 10})),
            Some(&with(Some(three))),
            2000,
        )
        .unwrap();
        assert_eq!(four.previous, vec!["gw-0", "gw-1", "gw-2"]);
        assert_eq!(four.handover_until, 2600);
        // The next render carries the window unchanged ...
        let again = fleet(
            &gw(4, json!({"handoverMinutes": 10})),
            Some(&with(Some(four.clone()))),
            2300,
        )
        .unwrap();
        assert_eq!(again, four);
        // ... until it ends.
        let later = fleet(
            &gw(4, json!({"handoverMinutes": 10})),
            Some(&with(Some(four))),
            2600,
        )
        .unwrap();
        assert!(later.previous.is_empty());
        assert_eq!(later.handover_until, 0);
    }
}
