//! One Gateway, one dedupe domain (`fleet`). A keyed hook has one owner pod (`ring`); the pod
//! that received it verified it, and forwards the commit to the owner (`client`, `wire`) when
//! that is another pod, relaying the owner's answer, so a provider's retry gets the first id
//! wherever it lands. During a handover (`fleet.previous` until `fleet.handover_until`) the
//! owner of a key that moved first asks the key's previous owner whether it holds the key.
//! Hooks without a dedupe key never leave the pod that received them.
//!
//! A leaf of the crate apart from `tls` and `metrics`: the edge decides when to call it
//! (`edge::forward`) and serves the fleet listener (`edge::fleet_in`).

pub mod client;
pub mod ring;
pub mod wire;

use ankusa_config::FleetConfig;

pub use client::{FleetClient, PeerError};

/// What `run` builds of `fleet` at start, built and dropped (`check-config`): the client and
/// the listener's mutual TLS acceptor.
pub fn check(cfg: &FleetConfig) -> Result<(), crate::tls::TlsError> {
    FleetClient::new(cfg)?;
    let ca = std::sync::Arc::new(crate::tls::load_ca("fleet.tls", &cfg.tls.ca_file)?);
    crate::tls::ReloadingCert::load_files("fleet.tls", &cfg.tls.cert_file, &cfg.tls.key_file)?
        .mutual_acceptor(&ca)?;
    Ok(())
}

/// Where a keyed record is committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan<'a> {
    /// Here; `consult` is the previous owner's URL while a handover is open and the key's
    /// previous owner is another pod still in the fleet.
    Local { consult: Option<&'a str> },
    /// At `owner`, another pod.
    Forward { owner: &'a str, url: &'a str },
}

/// The plan for dedupe index key `dkey` on pod `instance` at `now_s` (unix seconds).
pub fn plan<'a>(cfg: &'a FleetConfig, instance: &str, dkey: &[u8], now_s: u64) -> Plan<'a> {
    let Some(owner) = ring::owner(cfg.members.keys().map(String::as_str), dkey) else {
        return Plan::Local { consult: None };
    };
    if owner != instance {
        let url = cfg
            .members
            .get(owner)
            .map(String::as_str)
            .unwrap_or_default();
        return Plan::Forward { owner, url };
    }
    let consult = cfg.handover(now_s).and_then(|previous| {
        let before = ring::owner(previous.iter().map(String::as_str), dkey)?;
        // A previous owner that left the fleet is gone with its keys (documented): consulting
        // it would refuse every key it held for the whole window.
        (before != instance)
            .then(|| cfg.members.get(before).map(String::as_str))
            .flatten()
    });
    Plan::Local { consult }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ankusa_config::{FleetDedupe, FleetTls};

    fn fleet(n: usize, previous: usize, until: u64) -> FleetConfig {
        FleetConfig {
            ip: [127, 0, 0, 1].into(),
            port: 4004,
            tls: FleetTls {
                cert_file: "c".into(),
                key_file: "k".into(),
                ca_file: "ca".into(),
            },
            members: (0..n)
                .map(|i| (format!("gw-{i}"), format!("https://gw-{i}:4004")))
                .collect(),
            previous: (0..previous).map(|i| format!("gw-{i}")).collect(),
            handover_until: until,
            dedupe: FleetDedupe::Strict,
            max_in_flight: 8,
            timeout_ms: 1000,
            retry_after_s: 2,
        }
    }

    #[test]
    fn exactly_one_pod_commits_a_key_and_the_others_forward_to_it() {
        let f = fleet(3, 0, 0);
        for k in 0..1000u32 {
            let key = k.to_be_bytes();
            let locals: Vec<usize> = (0..3)
                .filter(|i| matches!(plan(&f, &format!("gw-{i}"), &key, 0), Plan::Local { .. }))
                .collect();
            assert_eq!(locals.len(), 1);
            for i in 0..3 {
                if let Plan::Forward { owner, url } = plan(&f, &format!("gw-{i}"), &key, 0) {
                    assert_eq!(owner, format!("gw-{}", locals[0]));
                    assert_eq!(url, format!("https://gw-{}:4004", locals[0]));
                }
            }
        }
    }

    #[test]
    fn during_a_handover_a_moved_key_consults_its_previous_owner() {
        let f = fleet(4, 3, 1_000);
        let mut consulted = 0;
        for k in 0..2000u32 {
            let key = k.to_be_bytes();
            let before = ring::owner(f.previous.iter().map(String::as_str), &key).unwrap();
            if let Plan::Local { consult } = plan(&f, "gw-3", &key, 999) {
                // gw-3 is new: every key it owns was someone's before.
                assert_eq!(consult, Some(f.members[before].as_str()));
                consulted += 1;
                // After the window nobody is consulted.
                assert_eq!(plan(&f, "gw-3", &key, 1_000), Plan::Local { consult: None });
            }
        }
        assert!(consulted > 300);
    }

    #[test]
    fn a_previous_owner_that_left_is_not_consulted() {
        let f = fleet(2, 3, 1_000);
        for k in 0..500u32 {
            let key = k.to_be_bytes();
            for me in ["gw-0", "gw-1"] {
                if let Plan::Local { consult: Some(url) } = plan(&f, me, &key, 10) {
                    assert_ne!(url, "https://gw-2:4004");
                }
            }
        }
    }
}
