//! The REST object model (reference §2.2, §2.3): one module per object kind with its JSON shape,
//! validation, and create/update/delete effects on the state store.
//!
//! Every object implements [`Object`]; [`ops`] holds the generic get/list/upsert/delete/inspect that the
//! REST layer calls. Objects are stored as their REST JSON at `/contiv.io/obj/modeldb/<type>/<key>`,
//! and each write runs in one optimistic transaction together with every state record and resource
//! it touches.

pub mod aci_gw;
pub mod app_profile;
pub mod bgp;
pub mod derived;
pub mod endpoint_group;
pub mod ext_contracts_group;
pub mod global;
pub mod link;
pub mod netprofile;
pub mod network;
pub mod ops;
pub mod policy;
pub mod rule;
pub mod service_lb;
pub mod tenant;
pub mod validate;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::Result;
use crate::store::{Tx, keys};

pub use aci_gw::AciGw;
pub use app_profile::AppProfile;
pub use bgp::Bgp;
pub use endpoint_group::EndpointGroup;
pub use ext_contracts_group::ExtContractsGroup;
pub use global::Global;
pub use link::{Link, LinkSet};
pub use netprofile::Netprofile;
pub use network::Network;
pub use policy::Policy;
pub use rule::Rule;
pub use service_lb::ServiceLb;
pub use tenant::Tenant;

pub use crate::store::txn::ReadAhead;

/// A REST model object kind.
pub trait Object: Serialize + DeserializeOwned + Clone + PartialEq + Send + Sync + 'static {
    /// The modeldb type name (`tenant`, `endpointGroup`, ...), also used in links.
    const TYPE: &'static str;
    /// The plural path segment under `/api/v1/` (`tenants`, `endpointGroups`, ...).
    const PLURAL: &'static str;

    /// The key derived from the object's fields (e.g. `tenant:network`).
    fn derived_key(&self) -> String;
    /// The `key` field.
    fn key(&self) -> &str;
    fn set_key(&mut self, key: String);
    /// Fill defaults (e.g. `nwType` "" → "data") before validation.
    fn normalize(&mut self) {}
    /// Field-level validation; errors name the field and the rule.
    fn validate(&self) -> Result<()>;
    /// Copy server-maintained links from the stored copy, so a client that omits them re-POSTs an
    /// identical object.
    fn keep_links(&mut self, stored: &Self);

    /// What creating or changing the object stored at `key` will read besides its own record:
    /// keys and prefixes a batch of writes reads ahead together (see [`crate::batch`]).
    fn read_ahead(&self, key: &str) -> ReadAhead {
        let _ = key;
        ReadAhead::default()
    }
    /// Effects of creating the object (state records, allocations, links on other objects).
    fn create(tx: &mut Tx<'_>, obj: &mut Self) -> impl Future<Output = Result<()>>;
    /// Effects of changing a stored object; `Conflict` when the change is not allowed.
    fn update(tx: &mut Tx<'_>, old: &Self, new: &mut Self) -> impl Future<Output = Result<()>>;
    /// Effects of deleting the object; `Conflict` while it is in use.
    fn delete(tx: &mut Tx<'_>, obj: &Self) -> impl Future<Output = Result<()>>;
    /// The `Oper` half of `GET /api/v1/inspect/<objs>/<key>/`.
    fn oper(tx: &mut Tx<'_>, obj: &Self) -> impl Future<Output = Result<serde_json::Value>> {
        let _ = (tx, obj);
        async { Ok(serde_json::json!({})) }
    }

    /// Fill in the link sets that are computed when read instead of stored (they would list every
    /// network of a tenant or every rule of a policy in one value), for each of `objs`.
    fn derive_links(tx: &mut Tx<'_>, objs: &mut [Self]) -> impl Future<Output = Result<()>> {
        let _ = (tx, objs);
        async { Ok(()) }
    }
    /// Clear the computed link sets (they are never stored).
    fn strip_derived(&mut self) {}

    /// The object's store key.
    fn store_key(key: &str) -> String {
        keys::model(Self::TYPE, key)
    }
}

/// Read an object by key inside a transaction.
pub async fn load<T: Object>(tx: &mut Tx<'_>, key: &str) -> Result<Option<T>> {
    Ok(tx.get::<T>(&T::store_key(key), T::TYPE).await?)
}

/// Read an object that must exist; `NotFound` names the type and key.
pub async fn load_required<T: Object>(tx: &mut Tx<'_>, key: &str) -> Result<T> {
    load::<T>(tx, key)
        .await?
        .ok_or_else(|| crate::Error::not_found(format!("{} {key} not found", T::TYPE)))
}

/// Write an object inside a transaction, without its computed link sets.
pub fn save<T: Object>(tx: &mut Tx<'_>, obj: &T) -> Result<()> {
    let mut stored = obj.clone();
    stored.strip_derived();
    Ok(tx.put(&T::store_key(obj.key()), T::TYPE, &stored)?)
}

/// All objects of a type whose key starts with `key_prefix` (e.g. `"tenant:"`).
pub async fn list_with_prefix<T: Object>(tx: &mut Tx<'_>, key_prefix: &str) -> Result<Vec<T>> {
    let prefix = format!("{}{key_prefix}", keys::model_prefix(T::TYPE));
    Ok(tx.list::<T>(&prefix, T::TYPE).await?)
}

/// Read-modify-write of another object that must exist (used to maintain links).
pub async fn modify<T: Object>(tx: &mut Tx<'_>, key: &str, f: impl FnOnce(&mut T)) -> Result<()> {
    let mut obj = load_required::<T>(tx, key).await?;
    f(&mut obj);
    save(tx, &obj)
}

/// Like [`modify`] but silently skips a missing object (unlinking from something already gone).
pub async fn modify_if_present<T: Object>(
    tx: &mut Tx<'_>,
    key: &str,
    f: impl FnOnce(&mut T),
) -> Result<()> {
    if let Some(mut obj) = load::<T>(tx, key).await? {
        f(&mut obj);
        save(tx, &obj)?;
    }
    Ok(())
}
