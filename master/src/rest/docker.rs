//! Docker cluster mode in the REST handlers: a stored network or endpoint group gets its
//! Docker network ([`crate::docker`]), a deleted one loses it. Infra networks have none.

use serde_json::Value;

use crate::docker::{DockerNetworks, NetworkSpec, docker_name};
use crate::error::{Error, Result};
use crate::model::Object;
use crate::state::CfgNetworkState;
use crate::store::txn::{Db, decode};

/// `(tenant, network, group)` of a network or endpoint group object; `None` for other kinds
/// and for infra networks.
fn identity<T: Object>(obj: &T) -> Option<(String, String, String)> {
    let v = serde_json::to_value(obj).ok()?;
    let s = |k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    match T::TYPE {
        "network" if s("nwType") != "infra" => {
            Some((s("tenantName"), s("networkName"), String::new()))
        }
        "endpointGroup" => Some((s("tenantName"), s("networkName"), s("groupName"))),
        _ => None,
    }
}

fn upstream(e: impl std::fmt::Display) -> Error {
    Error::Upstream(format!("Docker cluster mode: {e}"))
}

/// After a create or update was stored: make sure its Docker network exists.
pub async fn stored<T: Object>(db: &Db, docker: &DockerNetworks, obj: &T) -> Result<()> {
    let Some((tenant, network, group)) = identity(obj) else {
        return Ok(());
    };
    let key = CfgNetworkState::key_for(&CfgNetworkState::id_for(&tenant, &network));
    let kv = db.store().get(&key).await?.ok_or_else(|| {
        Error::not_found(format!("network {network} not found in tenant {tenant}"))
    })?;
    let net: CfgNetworkState = decode(&key, CfgNetworkState::KIND, &kv.value)?;
    docker
        .create(&NetworkSpec::of(&net, &group))
        .await
        .map_err(upstream)
}

/// After a delete: remove its Docker network.
pub async fn deleted<T: Object>(docker: &DockerNetworks, obj: &T) -> Result<()> {
    let Some((tenant, network, group)) = identity(obj) else {
        return Ok(());
    };
    let name = if group.is_empty() { network } else { group };
    docker
        .remove(&docker_name(&tenant, &name))
        .await
        .map_err(upstream)
}
