//! Behaviour tests of the object model against the in-memory store, one per scenario of Contiv's
//! objApi suite (reference §9.3), written from the documented behaviour.

use std::sync::Arc;

use crate::endpoint::{
    self, AddressAllocRequest, AddressReleaseRequest, ConfigEp, CreateEndpointRequest,
    DeleteEndpointRequest, UpdateEndpointRequest,
};
use crate::error::Error;
use crate::model::*;
use crate::state::{
    CfgEndpointState, CfgNetworkState, CfgPolicyRule, CfgServiceLbState, EndpointGroupState,
    EpgPolicy,
};
use crate::store::txn::Db;
use crate::store::{MemoryStore, keys};

mod big_policy;
mod endpoints;
mod global;
mod groups;
mod policy;
mod reserves;
pub(crate) mod services;
mod tenants_networks;

fn db() -> Db {
    Db::new(Arc::new(MemoryStore::new()))
}

fn status<T: std::fmt::Debug>(r: Result<T, Error>) -> u16 {
    match r {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => e.http_status(),
    }
}

/// The global object (bridge mode) and the `default` tenant (also the batch tests' start).
pub(crate) async fn setup(db: &Db) {
    ops::upsert(db, "global", Global::defaults("bridge", "default"))
        .await
        .unwrap();
    ops::upsert(db, "default", Tenant::named("default"))
        .await
        .unwrap();
}

/// A network with just its name, encapsulation, subnet and tag (0: allocated).
pub(crate) fn net(tenant: &str, name: &str, encap: &str, subnet: &str, tag: i64) -> Network {
    Network {
        network_name: name.into(),
        tenant_name: tenant.into(),
        encap: encap.into(),
        subnet: subnet.into(),
        pkt_tag: tag,
        ..Default::default()
    }
}

async fn add_net(db: &Db, n: Network) -> Result<Network, Error> {
    let key = format!("{}:{}", n.tenant_name, n.network_name);
    ops::upsert(db, &key, n).await
}

fn epg(tenant: &str, name: &str, network: &str) -> EndpointGroup {
    EndpointGroup {
        group_name: name.into(),
        tenant_name: tenant.into(),
        network_name: network.into(),
        ..Default::default()
    }
}

async fn add_epg(db: &Db, g: EndpointGroup) -> Result<EndpointGroup, Error> {
    let key = format!("{}:{}", g.tenant_name, g.group_name);
    ops::upsert(db, &key, g).await
}

async fn net_state(db: &Db, id: &str) -> CfgNetworkState {
    let kv = db
        .store()
        .get(&CfgNetworkState::key_for(id))
        .await
        .unwrap()
        .unwrap();
    serde_json::from_slice(&kv.value).unwrap()
}

/// The network's whole address map, read from its chunks.
async fn net_map(db: &Db, id: &str) -> crate::resources::Bitset {
    let st = net_state(db, id).await;
    db.read(async |tx| crate::state::addr_map::network_used(tx, &st).await)
        .await
        .unwrap()
}

async fn epg_state(db: &Db, id: &str) -> EndpointGroupState {
    let kv = db
        .store()
        .get(&EndpointGroupState::key_for(id))
        .await
        .unwrap()
        .unwrap();
    serde_json::from_slice(&kv.value).unwrap()
}

async fn keys_under(db: &Db, prefix: &str) -> Vec<String> {
    db.store()
        .list(prefix)
        .await
        .unwrap()
        .entries
        .into_iter()
        .map(|kv| kv.key)
        .collect()
}

/// deleteEndpoint for `container` on `network` of `tenant`.
fn del_req(tenant: &str, network: &str, container: &str) -> DeleteEndpointRequest {
    DeleteEndpointRequest {
        TenantName: tenant.into(),
        NetworkName: network.into(),
        EndpointID: container.into(),
        ..Default::default()
    }
}

fn ep_req(tenant: &str, network: &str, group: &str, container: &str) -> CreateEndpointRequest {
    CreateEndpointRequest {
        TenantName: tenant.into(),
        NetworkName: network.into(),
        ServiceName: group.into(),
        EndpointID: container.into(),
        ConfigEP: ConfigEp {
            Container: container.into(),
            Host: "host1".into(),
            ..Default::default()
        },
        ..Default::default()
    }
}
