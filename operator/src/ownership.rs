//! Which objects under a Gateway's names are the operator's own, decided by what the operator
//! recorded, never by an owner reference.
//!
//! An owner reference proves nothing: anyone who may create a Secret and read the Gateway's
//! uid can write one. So for the Secrets whose content the operator trusts when it reads them
//! back — the generated admin token (`<gw>-admin-token`), the admin CA (`<gw>-admin-ca`), the
//! per-pod config (`<gw>-config`, read back as the previous version of a Source that no longer
//! renders) and the scrape Secret (`<gw>-scrape`, whose token goes into every pod's config) — the Gateway's `status.ownership` records the uid and the sha256 of the data the
//! operator wrote. Only the operator may write a status (the status subresource), so a Secret
//! whose data does not hash to the record is `ForeignObject`: never used, never overwritten,
//! the Gateway stops with a Warning Event. A deleted one is written afresh (new token, new CA).
//!
//! The record is written ahead: before a write, `expect` records the new hash next to the hash
//! of what the Secret holds now (`previousSha256`), so an operator stopped between the two
//! writes still finds its own object on restart; after the write, `confirm` records the uid and
//! drops the old hash. First creation goes through `create` (a name taken meanwhile is a 409,
//! never an adoption); updates are applied with the object's `resourceVersion` as a
//! precondition, so an object replaced between the check and the write is not overwritten.
//!
//! A Gateway whose status was written by an operator from before these records (a status
//! without `ownership`) has its owner-referenced Secrets recorded once, as they are: they are
//! what that operator already used. A Gateway without any status is new: nothing is adopted.
//!
//! The other children (StatefulSet, Services, NetworkPolicy, the admin serving certificate)
//! are checked by owner reference only: the operator reads nothing from them that it trusts
//! (the serving certificate is verified against the CA on every pass and re-issued when it does
//! not verify), and whoever may create workloads in the namespace can mount its Secrets anyway.

use std::collections::BTreeMap;

use ankusa_crds::{Gateway, OwnedSecret, OwnershipRecord};
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::context::{Ctx, Error, MANAGER, Result, apply_params};
use crate::resources;

/// The Secrets whose content the operator records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    AdminToken,
    AdminCa,
    Config,
    Scrape,
}

impl Role {
    pub fn secret_name(self, gw: &Gateway) -> String {
        match self {
            Role::AdminToken => resources::admin_token_secret_name(gw),
            Role::AdminCa => resources::admin_ca_secret_name(gw),
            Role::Config => resources::config_secret_name(gw),
            Role::Scrape => resources::scrape_secret_name(gw),
        }
    }

    fn slot(self, r: &OwnershipRecord) -> Option<&OwnedSecret> {
        match self {
            Role::AdminToken => r.admin_token.as_ref(),
            Role::AdminCa => r.admin_ca.as_ref(),
            Role::Config => r.config.as_ref(),
            Role::Scrape => r.scrape.as_ref(),
        }
    }

    fn slot_mut(self, r: &mut OwnershipRecord) -> &mut Option<OwnedSecret> {
        match self {
            Role::AdminToken => &mut r.admin_token,
            Role::AdminCa => &mut r.admin_ca,
            Role::Config => &mut r.config,
            Role::Scrape => &mut r.scrape,
        }
    }
}

/// sha256 (hex) of a Secret's `data`: each key and value, in key order, length-prefixed so no
/// two maps encode alike.
pub fn fingerprint(data: Option<&BTreeMap<String, ByteString>>) -> String {
    let mut h = Sha256::new();
    for (k, v) in data.into_iter().flatten() {
        h.update((k.len() as u64).to_be_bytes());
        h.update(k.as_bytes());
        h.update((v.0.len() as u64).to_be_bytes());
        h.update(&v.0);
    }
    hex::encode(h.finalize())
}

/// What an existing object under a recorded name is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing there: the operator may create it.
    Absent,
    /// What the operator wrote there.
    Mine,
    /// Something else; why, in words that name no value.
    Foreign(String),
}

/// The Gateway's ownership record as this reconcile knows it.
#[derive(Debug, Clone)]
pub struct Ledger {
    record: OwnershipRecord,
    /// The Gateway's `resourceVersion` the record was read at: the precondition of `persist`.
    version: Option<String>,
    /// The status was written by an operator from before ownership records.
    legacy: bool,
    /// `record` holds what the Gateway's status does not (yet).
    dirty: bool,
    /// Read again from the API server in this reconcile (a watch cache may lag behind).
    refreshed: bool,
    /// The slots this reconcile changed, replayed onto a record read again after a conflict.
    changed: BTreeMap<Role, Option<OwnedSecret>>,
}

impl Ledger {
    /// The record the Gateway carries (no I/O). A Gateway without one gets one at the next
    /// `persist`, so no later pass can take it for one from before these records.
    pub fn load(gw: &Gateway) -> Ledger {
        let status = gw.status.as_ref();
        let ownership = status.and_then(|s| s.ownership.clone());
        Ledger {
            legacy: status.is_some_and(|s| s.observed_generation.is_some()) && ownership.is_none(),
            dirty: ownership.is_none(),
            record: ownership.unwrap_or_default(),
            version: gw.resource_version(),
            refreshed: false,
            changed: BTreeMap::new(),
        }
    }

    /// The record of a Gateway at the start of its reconcile. A Gateway without one (new, or
    /// never past a refusal) gets an empty one written at once, before any other status write,
    /// so no later pass can take it for a Gateway of an operator from before these records.
    pub async fn start(ctx: &Ctx, gw: &Gateway) -> Result<Ledger> {
        let mut l = Ledger::load(gw);
        if !l.legacy {
            l.persist(ctx, gw).await?;
        }
        Ok(l)
    }

    /// The recorded entry of a role (tests and messages).
    pub fn entry(&self, role: Role) -> Option<&OwnedSecret> {
        role.slot(&self.record)
    }

    fn set(&mut self, role: Role, v: Option<OwnedSecret>) {
        if role.slot(&self.record) != v.as_ref() {
            *role.slot_mut(&mut self.record) = v.clone();
            self.changed.insert(role, v);
            self.dirty = true;
        }
    }

    /// The verdict on `obj` from the record alone. An object holding exactly what the
    /// operator wrote is its own even under another uid (a create whose uid was not yet
    /// recorded; or someone re-created it byte for byte, which gives them nothing).
    pub fn verdict(&mut self, gw: &Gateway, role: Role, obj: Option<&Secret>) -> Verdict {
        let Some(obj) = obj else {
            return Verdict::Absent;
        };
        let fp = fingerprint(obj.data.as_ref());
        match role.slot(&self.record).cloned() {
            Some(rec) if rec.sha256 == fp || rec.previous_sha256.as_deref() == Some(&fp) => {
                if rec.uid != obj.uid() {
                    self.set(
                        role,
                        Some(OwnedSecret {
                            uid: obj.uid(),
                            ..rec
                        }),
                    );
                }
                Verdict::Mine
            }
            None if self.legacy && resources::owned_by(&obj.metadata, gw) => {
                // Recorded as the earlier operator left it (see the module header).
                self.set(
                    role,
                    Some(OwnedSecret {
                        uid: obj.uid(),
                        sha256: fp,
                        previous_sha256: None,
                    }),
                );
                Verdict::Mine
            }
            Some(rec) if rec.uid.is_some() && rec.uid != obj.uid() => Verdict::Foreign(
                "was replaced by another object after the operator wrote it".into(),
            ),
            Some(_) => Verdict::Foreign(
                "holds data the operator did not write (changed outside the operator)".into(),
            ),
            None => Verdict::Foreign(
                "exists but was not created by the operator (an owner reference is no proof)"
                    .into(),
            ),
        }
    }

    /// [`Ledger::verdict`], reading the record again from the API server once per reconcile
    /// before calling an object foreign (the Gateway in hand may come from a lagging cache).
    pub async fn check(
        &mut self,
        ctx: &Ctx,
        gw: &Gateway,
        role: Role,
        obj: Option<&Secret>,
    ) -> Result<Verdict> {
        let v = self.verdict(gw, role, obj);
        if matches!(v, Verdict::Foreign(_)) && !self.refreshed {
            self.refresh(ctx, gw).await?;
            return Ok(self.verdict(gw, role, obj));
        }
        Ok(v)
    }

    /// Reads the Gateway's record again and replays this reconcile's changes onto it.
    async fn refresh(&mut self, ctx: &Ctx, gw: &Gateway) -> Result<()> {
        let api: Api<Gateway> =
            Api::namespaced(ctx.client.clone(), &gw.namespace().unwrap_or_default());
        let fresh = api.get_status(&gw.name_any()).await?;
        let mut again = Ledger::load(&fresh);
        for (role, v) in std::mem::take(&mut self.changed) {
            again.set(role, v);
        }
        again.refreshed = true;
        *self = again;
        Ok(())
    }

    /// Before writing `desired` over `current` (verified as the operator's own, or absent):
    /// record the new content, keeping the current one's hash until the write is confirmed.
    pub fn expect(&mut self, role: Role, current: Option<&Secret>, desired: &Secret) {
        self.set(
            role,
            Some(OwnedSecret {
                uid: current.and_then(|c| c.uid()),
                sha256: fingerprint(desired.data.as_ref()),
                previous_sha256: current.map(|c| fingerprint(c.data.as_ref())),
            }),
        );
    }

    /// After a write: the object as the API server stored it.
    pub fn confirm(&mut self, role: Role, written: &Secret) {
        self.set(
            role,
            Some(OwnedSecret {
                uid: written.uid(),
                sha256: fingerprint(written.data.as_ref()),
                previous_sha256: None,
            }),
        );
    }

    /// Writes the record to the Gateway's status when it changed, with the Gateway's
    /// `resourceVersion` as precondition; on a conflict it is read again and written once more.
    pub async fn persist(&mut self, ctx: &Ctx, gw: &Gateway) -> Result<()> {
        if !self.dirty {
            return Ok(());
        }
        let api: Api<Gateway> =
            Api::namespaced(ctx.client.clone(), &gw.namespace().unwrap_or_default());
        let params = PatchParams {
            field_manager: Some(format!("{MANAGER}/ownership")),
            ..Default::default()
        };
        for attempt in 0..2 {
            let mut body = json!({"status": {"ownership": record_patch(&self.record)}});
            if let Some(v) = &self.version {
                body["metadata"] = json!({ "resourceVersion": v });
            }
            match api
                .patch_status(&gw.name_any(), &params, &Patch::Merge(&body))
                .await
            {
                Ok(written) => {
                    self.version = written.resource_version();
                    self.dirty = false;
                    self.legacy = false;
                    self.changed.clear();
                    return Ok(());
                }
                Err(kube::Error::Api(s)) if s.code == 409 && attempt == 0 => {
                    self.refresh(ctx, gw).await?;
                    if !self.dirty {
                        return Ok(());
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(Error::Waiting(
            "the Gateway changed while its ownership record was written".into(),
        ))
    }
}

/// The record as a JSON merge patch: every field present, `null` for an absent one, so a
/// cleared hash or entry is removed from the status rather than kept.
fn record_patch(r: &OwnershipRecord) -> Value {
    let entry = |e: Option<&OwnedSecret>| match e {
        None => Value::Null,
        Some(e) => json!({
            "uid": e.uid,
            "sha256": e.sha256,
            "previousSha256": e.previous_sha256,
        }),
    };
    json!({
        "adminToken": entry(r.admin_token.as_ref()),
        "adminCa": entry(r.admin_ca.as_ref()),
        "config": entry(r.config.as_ref()),
        "scrape": entry(r.scrape.as_ref()),
    })
}

/// The `ForeignObject` message of a recorded Secret.
pub fn foreign_message(name: &str, why: &str) -> String {
    format!(
        "Secret {name} {why}; refusing to use or overwrite it (delete it and the operator writes a fresh one)"
    )
}

/// Writes a recorded Secret: `desired` over `current` (the operator's own, or absent), ahead-
/// recorded and confirmed. A name taken meanwhile, or an object replaced since it was read,
/// is left alone (the API server's 409) and checked again on the next pass.
pub async fn write_secret(
    ctx: &Ctx,
    gw: &Gateway,
    ledger: &mut Ledger,
    role: Role,
    current: Option<&Secret>,
    mut desired: Secret,
) -> Result<Secret> {
    let name = role.secret_name(gw);
    ledger.expect(role, current, &desired);
    ledger.persist(ctx, gw).await?;
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &gw.namespace().unwrap_or_default());
    let result = match current {
        None => api.create(&PostParams::default(), &desired).await,
        Some(cur) => {
            desired.metadata.resource_version = cur.resource_version();
            api.patch(&name, &apply_params(), &Patch::Apply(&desired))
                .await
        }
    };
    let written = match result {
        Ok(w) => w,
        Err(kube::Error::Api(s)) if s.code == 409 => {
            return Err(Error::Waiting(format!(
                "Secret {name} changed while the operator wrote it; checking it again"
            )));
        }
        Err(e) => return Err(e.into()),
    };
    ledger.confirm(role, &written);
    ledger.persist(ctx, gw).await?;
    Ok(written)
}

/// The first object the Gateway would create, apply or read back by name that is not its
/// own, as the `ForeignObject` message. The recorded Secrets are judged by the ledger (the
/// generated admin token only without `adminTokenSecretRef`); the rest by their controller
/// owner reference (see the module header). The config Secret and the StatefulSet are the
/// ones `reconcile` has already read. A record that changed (a first empty one, an adoption,
/// a uid noted) is written before the answer.
pub async fn foreign_object(
    ctx: &Ctx,
    gw: &Gateway,
    ledger: &mut Ledger,
    config_secret: Option<&Secret>,
    sts: Option<&StatefulSet>,
) -> Result<Option<String>> {
    let ns = gw.namespace().unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    let mut recorded = vec![(Role::Config, config_secret.cloned())];
    for role in [Role::AdminToken, Role::AdminCa, Role::Scrape] {
        if role == Role::AdminToken && gw.spec.admin_token_secret_ref.is_some() {
            continue;
        }
        recorded.push((role, secrets.get_opt(&role.secret_name(gw)).await?));
    }
    for (role, obj) in &recorded {
        if let Verdict::Foreign(why) = ledger.check(ctx, gw, *role, obj.as_ref()).await? {
            return Ok(Some(foreign_message(&role.secret_name(gw), &why)));
        }
    }
    ledger.persist(ctx, gw).await?;
    let not_owned = |what: String| {
        Some(format!(
            "{what} already exists and is not owned by this Gateway; refusing to take it over \
             (delete or rename it, or give the Gateway another name)"
        ))
    };
    if sts.is_some_and(|o| !resources::owned_by(&o.metadata, gw)) {
        return Ok(not_owned(format!(
            "StatefulSet {}",
            resources::statefulset_name(gw)
        )));
    }
    let name = resources::admin_tls_secret_name(gw);
    if let Some(o) = secrets.get_metadata_opt(&name).await?
        && !resources::owned_by(&o.metadata, gw)
    {
        return Ok(not_owned(format!("Secret {name}")));
    }
    let services: Api<Service> = Api::namespaced(ctx.client.clone(), &ns);
    for name in [
        resources::headless_service_name(gw),
        resources::ingest_service_name(gw),
    ] {
        if let Some(o) = services.get_metadata_opt(&name).await?
            && !resources::owned_by(&o.metadata, gw)
        {
            return Ok(not_owned(format!("Service {name}")));
        }
    }
    if gw.spec.network_policy.enabled {
        let policies: Api<NetworkPolicy> = Api::namespaced(ctx.client.clone(), &ns);
        let name = resources::network_policy_name(gw);
        if let Some(o) = policies.get_metadata_opt(&name).await?
            && !resources::owned_by(&o.metadata, gw)
        {
            return Ok(not_owned(format!("NetworkPolicy {name}")));
        }
    }
    Ok(None)
}

/// Text of one key of a Secret, without a trailing newline; `None` when absent or empty.
pub fn secret_text(s: &Secret, key: &str) -> Option<String> {
    s.data
        .as_ref()?
        .get(key)
        .and_then(|b| String::from_utf8(b.0.clone()).ok())
        .map(|t| t.trim_end_matches(['\n', '\r']).to_string())
        .filter(|t| !t.is_empty())
}

/// The Secret `adminTokenSecretRef` names, if it opted in (`ankusa.dev/usable=true`, as
/// every other Secret reference): its label is read before its data.
async fn referenced_token(
    ctx: &Ctx,
    gw: &Gateway,
    r: &ankusa_crds::SecretKeyRef,
) -> Result<String> {
    use ankusa_crds::names::{USABLE, USABLE_LABEL};
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &gw.namespace().unwrap_or_default());
    let missing = || {
        Error::Invalid(format!(
            "adminTokenSecretRef: Secret {} key {:?} not found or empty",
            r.name, r.key
        ))
    };
    let meta = api.get_metadata_opt(&r.name).await?.ok_or_else(missing)?;
    if meta.labels().get(USABLE_LABEL).map(String::as_str) != Some(USABLE) {
        return Err(Error::Invalid(format!(
            "adminTokenSecretRef: Secret {} is not labelled {USABLE_LABEL}={USABLE} (a Secret is used only when it opts in)",
            r.name
        )));
    }
    let s = api.get_opt(&r.name).await?.ok_or_else(missing)?;
    secret_text(&s, &r.key).ok_or_else(missing)
}

/// The admin token, for the Gateway controller: from `adminTokenSecretRef`, or from the
/// Secret the operator generated, created here (256 bits of the OS's CSPRNG) when absent.
/// A generated-token Secret the operator did not write is refused, never used.
pub async fn admin_token(ctx: &Ctx, gw: &Gateway, ledger: &mut Ledger) -> Result<String> {
    if let Some(r) = &gw.spec.admin_token_secret_ref {
        return referenced_token(ctx, gw, r).await;
    }
    let name = Role::AdminToken.secret_name(gw);
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &gw.namespace().unwrap_or_default());
    let existing = api.get_opt(&name).await?;
    match ledger
        .check(ctx, gw, Role::AdminToken, existing.as_ref())
        .await?
    {
        Verdict::Mine => {
            return existing
                .as_ref()
                .and_then(|s| secret_text(s, "token"))
                .ok_or_else(|| Error::Invalid(format!("Secret {name} holds no token")));
        }
        Verdict::Foreign(why) => return Err(Error::Invalid(foreign_message(&name, &why))),
        Verdict::Absent => {}
    }
    let token = resources::random_token()
        .map_err(|e| Error::Waiting(format!("the OS random source failed: {e}")))?;
    write_secret(
        ctx,
        gw,
        ledger,
        Role::AdminToken,
        None,
        resources::admin_token_secret(gw, &token),
    )
    .await?;
    tracing::info!(gateway = %gw.name_any(), "admin token Secret created");
    Ok(token)
}

/// The admin token, for the controllers that only call the pods (never create it). `gw` is
/// read fresh from the API server by them.
pub async fn read_admin_token(ctx: &Ctx, gw: &Gateway) -> Result<String> {
    if let Some(r) = &gw.spec.admin_token_secret_ref {
        return referenced_token(ctx, gw, r).await;
    }
    let name = Role::AdminToken.secret_name(gw);
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &gw.namespace().unwrap_or_default());
    let existing = api.get_opt(&name).await?;
    let mut ledger = Ledger::load(gw);
    match ledger
        .check(ctx, gw, Role::AdminToken, existing.as_ref())
        .await?
    {
        Verdict::Mine => existing
            .as_ref()
            .and_then(|s| secret_text(s, "token"))
            .ok_or_else(|| Error::Invalid(format!("Secret {name} holds no token"))),
        Verdict::Foreign(why) => Err(Error::Invalid(foreign_message(&name, &why))),
        Verdict::Absent => Err(Error::Waiting(format!(
            "Secret {name} (the admin token) not written yet"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gw(status: Value) -> Gateway {
        crate::testing::object(json!({
            "metadata": {"name": "gw", "namespace": "ns", "uid": "g-uid", "resourceVersion": "7"},
            "spec": {}, "status": status,
        }))
    }

    fn secret(uid: &str, token: &str, owner: bool) -> Secret {
        let mut s = resources::admin_token_secret(&gw(Value::Null), token);
        s.metadata.uid = Some(uid.into());
        if !owner {
            s.metadata.owner_references = None;
        }
        s
    }

    #[test]
    fn fingerprints_differ_on_any_key_or_value_and_not_on_order() {
        let a = secret("u", "one", true);
        let b = secret("u", "two", true);
        assert_ne!(fingerprint(a.data.as_ref()), fingerprint(b.data.as_ref()));
        let m = |pairs: &[(&str, &str)]| -> BTreeMap<String, ByteString> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                .collect()
        };
        // Length prefixes: moving a byte from key to value changes the hash.
        assert_ne!(
            fingerprint(Some(&m(&[("ab", "c")]))),
            fingerprint(Some(&m(&[("a", "bc")])))
        );
        assert_eq!(
            fingerprint(Some(&m(&[("a", "1"), ("b", "2")]))),
            fingerprint(Some(&m(&[("b", "2"), ("a", "1")])))
        );
    }

    #[test]
    fn a_new_gateway_adopts_nothing_whatever_the_owner_reference() {
        let g = gw(Value::Null);
        let mut l = Ledger::load(&g);
        // Planted before the operator's first pass, with a forged controller reference.
        let planted = secret("evil", "attacker-token", true);
        assert!(matches!(
            l.verdict(&g, Role::AdminToken, Some(&planted)),
            Verdict::Foreign(_)
        ));
        assert_eq!(l.verdict(&g, Role::AdminToken, None), Verdict::Absent);
        assert!(l.dirty, "a first, empty record is written");
    }

    #[test]
    fn only_the_recorded_content_is_mine_and_a_write_in_flight_is_too() {
        let g = gw(json!({"observedGeneration": 1, "ownership": {}}));
        let mut l = Ledger::load(&g);
        assert!(!l.legacy);
        let mine = secret("u1", "operator-token", true);
        l.expect(Role::AdminToken, None, &mine);
        // Written but not yet confirmed (a restart in between): still the operator's own.
        assert_eq!(l.verdict(&g, Role::AdminToken, Some(&mine)), Verdict::Mine);
        l.confirm(Role::AdminToken, &mine);
        assert_eq!(
            l.entry(Role::AdminToken).unwrap().uid.as_deref(),
            Some("u1")
        );
        // Deleted and re-planted under the same name and a forged reference.
        let replanted = secret("u2", "attacker-token", true);
        match l.verdict(&g, Role::AdminToken, Some(&replanted)) {
            Verdict::Foreign(why) => assert!(why.contains("replaced"), "{why}"),
            v => panic!("{v:?}"),
        }
        // Changed in place.
        let patched = secret("u1", "attacker-token", true);
        match l.verdict(&g, Role::AdminToken, Some(&patched)) {
            Verdict::Foreign(why) => assert!(why.contains("did not write"), "{why}"),
            v => panic!("{v:?}"),
        }
        // An update in flight: both the old and the new content are accepted until confirmed.
        let next = secret("u1", "operator-token-2", true);
        l.expect(Role::AdminToken, Some(&mine), &next);
        assert_eq!(l.verdict(&g, Role::AdminToken, Some(&mine)), Verdict::Mine);
        assert_eq!(l.verdict(&g, Role::AdminToken, Some(&next)), Verdict::Mine);
        l.confirm(Role::AdminToken, &next);
        assert!(matches!(
            l.verdict(&g, Role::AdminToken, Some(&mine)),
            Verdict::Foreign(_)
        ));
    }

    #[test]
    fn a_status_from_an_earlier_operator_adopts_its_owner_referenced_secrets_once() {
        let g = gw(json!({"observedGeneration": 3}));
        let mut l = Ledger::load(&g);
        assert!(l.legacy);
        let theirs = secret("u1", "earlier-token", true);
        assert_eq!(
            l.verdict(&g, Role::AdminToken, Some(&theirs)),
            Verdict::Mine
        );
        // Without an owner reference it is still foreign.
        let bare = secret("u9", "x", false);
        assert!(matches!(
            l.verdict(&g, Role::AdminCa, Some(&bare)),
            Verdict::Foreign(_)
        ));
        let patch = record_patch(&l.record);
        assert_eq!(patch["adminToken"]["uid"], "u1");
        assert!(patch["adminCa"].is_null() && patch["config"].is_null());
        assert!(patch["adminToken"]["previousSha256"].is_null());
    }
}
