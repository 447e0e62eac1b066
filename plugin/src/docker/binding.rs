//! What a Docker network is in Contiv: a tenant, a network and optionally an endpoint group,
//! chosen by the options of `docker network create` (reference §7.6), and kept in etcd at
//! `/contiv.io/state/docknet/<Docker network id>` so a restarted netplugin still knows it.
//!
//! Options (the same keys as driver options `-o` and IPAM options `--ipam-opt`):
//! `tenant` (default `default`), `network`, `group`. Without `network`, the group's network;
//! without both, the network of the tenant whose subnet is the pool (`--subnet`).

#![allow(non_snake_case)]

use master::state::{CfgNetworkState, EndpointGroupState};
use master::store::keys;
use serde::{Deserialize, Serialize};

use crate::driver::Driver;
use crate::error::{PluginError, Result};

/// The etcd category of the bindings.
pub const CATEGORY: &str = "docknet";
/// The tenant when no `tenant` option is given.
pub const DEFAULT_TENANT: &str = "default";

/// The stored binding (Contiv's `DocknetState` field names).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct DockerNetwork {
    pub TenantName: String,
    pub NetworkName: String,
    /// The endpoint group; empty for none.
    pub ServiceName: String,
    pub DocknetUUID: String,
}

impl DockerNetwork {
    pub const KIND: &'static str = "DocknetState";

    pub fn key_for(docker_id: &str) -> String {
        keys::state(CATEGORY, docker_id)
    }

    /// netmaster's address-pool id: `<network>.<tenant>` or `<network>:<group>.<tenant>`.
    pub fn pool_id(&self) -> String {
        if self.ServiceName.is_empty() {
            CfgNetworkState::id_for(&self.TenantName, &self.NetworkName)
        } else {
            format!(
                "{}:{}.{}",
                self.NetworkName, self.ServiceName, self.TenantName
            )
        }
    }
}

/// The Contiv objects a Docker network stands for, checked to exist.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub binding: DockerNetwork,
    pub network: CfgNetworkState,
    pub group: Option<EndpointGroupState>,
}

impl Resolved {
    /// `subnet/len` of the network.
    pub fn subnet(&self) -> String {
        format!("{}/{}", self.network.subnet_ip, self.network.subnet_len)
    }
}

fn invalid(field: &'static str, problem: String) -> PluginError {
    PluginError::Invalid { field, problem }
}

/// Resolve the options (`get(key)`) and the pool Docker asks for (`--subnet`, may be empty).
pub async fn resolve(
    driver: &Driver,
    get: impl Fn(&str) -> Option<String>,
    pool: &str,
) -> Result<Resolved> {
    let tenant = get("tenant")
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| DEFAULT_TENANT.to_string());
    let group_name = get("group").unwrap_or_default();
    let mut network_name = get("network").unwrap_or_default();
    let group = driver.load_group(&tenant, &group_name).await?;
    if network_name.is_empty()
        && let Some(g) = &group
    {
        network_name = g.network_name.clone();
    }
    if network_name.is_empty() {
        if pool.is_empty() {
            return Err(invalid(
                "options",
                "name the Contiv network or group: -o network=NAME or -o group=NAME \
                 (with --ipam-opt the same), plus tenant=NAME outside the default tenant, \
                 or give --subnet of an existing network"
                    .into(),
            ));
        }
        network_name = network_with_subnet(driver, &tenant, pool).await?;
    }
    let network = driver.load_network(&tenant, &network_name).await?;
    if let Some(g) = &group
        && g.network_name != network_name
    {
        return Err(invalid(
            "group",
            format!(
                "endpoint group {group_name} of tenant {tenant} is on network {}, not {network_name}",
                g.network_name
            ),
        ));
    }
    let resolved = Resolved {
        binding: DockerNetwork {
            TenantName: tenant,
            NetworkName: network_name,
            ServiceName: group_name,
            DocknetUUID: String::new(),
        },
        network,
        group,
    };
    if !pool.is_empty() && pool != resolved.subnet() {
        return Err(invalid(
            "subnet",
            format!(
                "{pool} is not the subnet {} of network {} in tenant {}; leave --subnet out or give that subnet",
                resolved.subnet(),
                resolved.binding.NetworkName,
                resolved.binding.TenantName
            ),
        ));
    }
    Ok(resolved)
}

/// The name of the tenant's network whose subnet is `pool`.
async fn network_with_subnet(driver: &Driver, tenant: &str, pool: &str) -> Result<String> {
    let listing = driver
        .store
        .list(&keys::state_prefix(keys::category::NETS))
        .await?;
    listing
        .entries
        .iter()
        .filter_map(|kv| serde_json::from_slice::<CfgNetworkState>(&kv.value).ok())
        .find(|n| n.tenant == tenant && format!("{}/{}", n.subnet_ip, n.subnet_len) == pool)
        .map(|n| n.network_name)
        .ok_or_else(|| {
            invalid(
                "subnet",
                format!("no network of tenant {tenant} has the subnet {pool}"),
            )
        })
}

/// The binding of a Docker network, if netplugin saw it created.
pub async fn load(driver: &Driver, docker_id: &str) -> Result<Option<DockerNetwork>> {
    let key = DockerNetwork::key_for(docker_id);
    let Some(kv) = driver.store.get(&key).await? else {
        return Ok(None);
    };
    serde_json::from_slice(&kv.value)
        .map(Some)
        .map_err(|e| PluginError::Corrupt {
            kind: DockerNetwork::KIND,
            key,
            reason: e.to_string(),
        })
}

pub async fn save(driver: &Driver, binding: &DockerNetwork) -> Result<()> {
    let key = DockerNetwork::key_for(&binding.DocknetUUID);
    let value = serde_json::to_vec(binding).map_err(|e| PluginError::Corrupt {
        kind: DockerNetwork::KIND,
        key: key.clone(),
        reason: e.to_string(),
    })?;
    driver.store.put(&key, value).await?;
    Ok(())
}

pub async fn delete(driver: &Driver, docker_id: &str) -> Result<()> {
    driver
        .store
        .delete(&DockerNetwork::key_for(docker_id))
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_ids_are_netmasters_network_ids() {
        let mut b = DockerNetwork {
            TenantName: "t1".into(),
            NetworkName: "n1".into(),
            ..DockerNetwork::default()
        };
        assert_eq!(b.pool_id(), "n1.t1");
        b.ServiceName = "web".into();
        assert_eq!(b.pool_id(), "n1:web.t1");
        assert_eq!(
            DockerNetwork::key_for("abc"),
            "/contiv.io/state/docknet/abc"
        );
    }
}
