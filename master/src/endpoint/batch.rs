//! `/plugin/createEndpoint` and `/plugin/deleteEndpoint` as requests of the group commit
//! (`crate::batch`): committed with whatever else is queued, each rolled back and answered alone
//! when it fails on its own (unknown network, address exhausted).

use futures::future::LocalBoxFuture;

use super::{
    CreateEndpointRequest, DeleteEndpointRequest, EndpointResponse, NewEndpoint,
    create_endpoint_in, delete_endpoint_in, endpoint_id_of,
};
use crate::batch::{Request, Writes};
use crate::error::Result;
use crate::model::service_lb::services_prefix;
use crate::state::{CfgEndpointState, CfgNetworkState, EndpointGroupState};
use crate::state::{addr_map, reservations};
use crate::store::Tx;
use crate::store::txn::ReadAhead;

struct Create(NewEndpoint);

impl Request for Create {
    type Output = EndpointResponse;
    /// The endpoint's own record, its network's state, its group's state, the first chunk
    /// of the address maps it may take from (the network's, the group pool's), and for a
    /// labelled endpoint the services listing. Which chunk an address comes from depends on
    /// the network state, but until a network has handed out a chunk's worth (4,094
    /// addresses) it is the first: reading it ahead saves a pod's ADD one etcd round trip
    /// after the reads. A chunk read ahead and not used costs one read per batch (the batch's
    /// requests share their reads) and guards nothing.
    fn prefetch(&self) -> ReadAhead {
        let ne = &self.0;
        let net_id = CfgNetworkState::id_for(&ne.tenant, &ne.network);
        let mut keys = vec![
            CfgEndpointState::key_for(&CfgEndpointState::id_for(&net_id, &ne.container)),
            CfgNetworkState::key_for(&net_id),
            addr_map::first_chunk_key(&addr_map::network_prefix(&net_id)),
        ];
        if !ne.group.is_empty() {
            let epg_id = EndpointGroupState::id_for(&ne.tenant, &ne.group);
            keys.push(addr_map::first_chunk_key(&addr_map::group_prefix(&epg_id)));
            keys.push(EndpointGroupState::key_for(&epg_id));
        }
        // A labelled endpoint (every Kubernetes pod) may provide services: they are listed
        // with the reads instead of one round after them; so are the network's reservations
        // when the host's reserve is to be topped up (or claimed from).
        let mut prefixes = Vec::new();
        if !ne.labels.is_empty() {
            prefixes.push(services_prefix());
        }
        if ne.reserve > 0 {
            prefixes.push(reservations::prefix(&net_id));
        }
        // An address named (from the host's reserve, or allocAddress's) is claimed from its
        // reservation.
        if let Some(ip) = ne.preferred {
            keys.push(reservations::key(&net_id, ip));
        }
        ReadAhead { keys, prefixes }
    }
    fn apply<'a>(&'a self, tx: &'a mut Tx<'_>) -> LocalBoxFuture<'a, Result<EndpointResponse>> {
        Box::pin(create_endpoint_in(tx, &self.0))
    }
}

struct Delete {
    ep_id: String,
    net_id: String,
    /// The size of the endpoint's host's reserve (0: the addresses are freed).
    reserve: u32,
}

impl Request for Delete {
    type Output = EndpointResponse;
    fn prefetch(&self) -> ReadAhead {
        let mut ahead = ReadAhead::keys(vec![CfgEndpointState::key_for(&self.ep_id)]);
        if self.reserve > 0 {
            ahead.prefixes.push(reservations::prefix(&self.net_id));
        }
        ahead
    }
    fn apply<'a>(&'a self, tx: &'a mut Tx<'_>) -> LocalBoxFuture<'a, Result<EndpointResponse>> {
        Box::pin(delete_endpoint_in(tx, &self.ep_id, self.reserve))
    }
}

/// Create an endpoint (idempotent), committed with whatever else is queued.
pub async fn create(writes: &Writes, req: &CreateEndpointRequest) -> Result<EndpointResponse> {
    writes.submit(Create(NewEndpoint::parse(req)?)).await
}

/// Delete an endpoint, committed with whatever else is queued.
pub async fn delete(writes: &Writes, req: &DeleteEndpointRequest) -> Result<EndpointResponse> {
    writes
        .submit(Delete {
            ep_id: endpoint_id_of(req),
            net_id: CfgNetworkState::id_for(&req.TenantName, &req.NetworkName),
            reserve: req.ReserveAddresses,
        })
        .await
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    /// The endpoint a create answers (these tests ask for no reserve).
    async fn create(writes: &Writes, req: &CreateEndpointRequest) -> Result<CfgEndpointState> {
        super::create(writes, req).await.map(|r| r.EndpointConfig)
    }

    use super::*;
    use crate::endpoint::ConfigEp;
    use crate::model::ops;
    use crate::store::txn::Db;
    use crate::store::{MemoryStore, StateStore};

    fn req(container: &str, network: &str) -> CreateEndpointRequest {
        CreateEndpointRequest {
            TenantName: "default".into(),
            NetworkName: network.into(),
            ConfigEP: ConfigEp {
                Container: container.into(),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// A store counting sequential round trips, holding the default tenant and network `n1`
    /// (10.1.0.0/16).
    async fn counted_store_with_network() -> (crate::store::round_trips::RoundTrips, Db) {
        let store = crate::store::round_trips::RoundTrips::default();
        let db = Db::new(Arc::new(store.clone()));
        crate::scenarios::setup(&db).await;
        let net = crate::scenarios::net("default", "n1", "vxlan", "10.1.0.0/16", 0);
        ops::upsert(&db, "default:n1", net).await.unwrap();
        (store, db)
    }

    /// Endpoints created at once on one network and group read their network's and group's
    /// state and the first address map chunks ahead with their own records: each batch costs
    /// the read-ahead and the commit, whatever its size.
    #[tokio::test]
    async fn concurrent_creates_read_ahead_their_network_and_group() {
        use crate::model::EndpointGroup;
        let (store, db) = counted_store_with_network().await;
        let group = EndpointGroup {
            group_name: "g1".into(),
            tenant_name: "default".into(),
            network_name: "n1".into(),
            ..Default::default()
        };
        ops::upsert(&db, "default:g1", group).await.unwrap();
        let writes = Writes::spawn(db.clone()).unwrap();
        let reqs: Vec<CreateEndpointRequest> = (0..32)
            .map(|i| {
                let mut r = req(&format!("c{i}"), "n1");
                r.ServiceName = "g1".into();
                r
            })
            .collect();
        let before = store.rounds();
        let creates = futures::future::join_all(reqs.iter().map(|r| create(&writes, r)));
        for r in crate::batch::tests::while_held(&writes, creates).await {
            r.unwrap();
        }
        let rounds = store.rounds() - before;
        println!("round trips: {rounds} for 32 endpoint creates");
        // Reading ahead only each endpoint's own record: 5 (its network's and group's state
        // were read after it, one after the other); without the first chunk: 3.
        assert!(rounds <= 2, "32 endpoint creates took {rounds} round trips");
    }

    /// A pod's createEndpoint on its own (a sequential CNI ADD): the read-ahead and the
    /// commit, and on a network past its first chunk one more read (the chunk addresses now
    /// come from), still right. (With a group: the test above.)
    #[tokio::test]
    async fn a_single_create_reads_once_then_commits() {
        let (store, db) = counted_store_with_network().await;
        let writes = Writes::spawn(db.clone()).unwrap();
        let before = store.rounds();
        let ep = create(&writes, &req("c0", "n1")).await.unwrap();
        assert_eq!(ep.ip_address, "10.1.0.1");
        assert_eq!(store.rounds() - before, 2, "one create, alone");
        // Fill the first chunk (4,096 hosts: 10.1.0.1 to 10.1.15.255), then the next address
        // comes from the second chunk, read when needed.
        let fill: Vec<CreateEndpointRequest> =
            (1..4095).map(|i| req(&format!("c{i}"), "n1")).collect();
        for r in futures::future::join_all(fill.iter().map(|r| create(&writes, r))).await {
            r.unwrap();
        }
        let before = store.rounds();
        let ep = create(&writes, &req("past", "n1")).await.unwrap();
        assert_eq!(ep.ip_address, "10.1.16.0");
        assert_eq!(store.rounds() - before, 3, "past the first chunk");
    }

    /// A labelled pod (every Kubernetes pod) may provide services: the services are listed
    /// with the read-ahead, not in a round of their own, and one whose selector matches the
    /// labels has the new endpoint as a provider when the create answers.
    #[tokio::test]
    async fn a_labelled_create_lists_the_services_with_its_reads() {
        use crate::model::ServiceLb;
        let (store, db) = counted_store_with_network().await;
        let service = ServiceLb {
            service_name: "web".into(),
            tenant_name: "default".into(),
            network_name: "n1".into(),
            selectors: vec!["app=web".into()],
            ports: vec!["80:8080:TCP".into()],
            ..Default::default()
        };
        ops::upsert(&db, "default:web", service).await.unwrap();
        let writes = Writes::spawn(db.clone()).unwrap();
        let labelled = |container: &str, app: &str| {
            let mut r = req(container, "n1");
            r.Labels = [("app".to_string(), app.to_string())].into();
            r
        };
        let before = store.rounds();
        let web = create(&writes, &labelled("web-1", "web")).await.unwrap();
        assert_eq!(store.rounds() - before, 2, "one labelled create, alone");
        let before = store.rounds();
        create(&writes, &labelled("db-1", "db")).await.unwrap();
        assert_eq!(
            store.rounds() - before,
            2,
            "no service selects it: the same rounds"
        );
        let service = crate::scenarios::services::svc_state(&db, "web:default").await;
        let providers: Vec<&str> = service
            .providers
            .values()
            .map(|p| p.IPAddress.as_str())
            .collect();
        assert_eq!(
            providers,
            [web.ip_address.as_str()],
            "only the web pod provides"
        );
    }

    #[tokio::test]
    async fn batched_requests_commit_together_and_fail_alone() {
        let store = Arc::new(MemoryStore::new());
        let db = Db::new(store.clone());
        crate::scenarios::setup(&db).await;
        let net = crate::scenarios::net("default", "n1", "vxlan", "10.1.1.0/29", 0);
        ops::upsert(&db, "default:n1", net).await.unwrap();
        let writes = Writes::spawn(db.clone()).unwrap();
        // 6 usable addresses, 8 containers (one named twice), one unknown network.
        let mut reqs: Vec<CreateEndpointRequest> =
            (0..8).map(|i| req(&format!("c{i}"), "n1")).collect();
        reqs.push(req("c0", "n1"));
        reqs.push(req("x", "nope"));
        let results = futures::future::join_all(reqs.iter().map(|r| create(&writes, r))).await;
        let ok: Vec<&CfgEndpointState> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        let mut ips: Vec<&str> = ok.iter().map(|e| e.ip_address.as_str()).collect();
        ips.sort_unstable();
        ips.dedup();
        assert_eq!(ips.len(), 6, "six distinct addresses: {results:?}");
        assert_eq!(
            results
                .iter()
                .filter(|r| matches!(r, Err(e) if e.http_status() == 409))
                .count(),
            2
        );
        assert_eq!(
            results
                .iter()
                .filter(|r| matches!(r, Err(e) if e.http_status() == 404))
                .count(),
            1
        );
        assert_eq!(
            results[0].as_ref().unwrap(),
            results[8].as_ref().unwrap(),
            "same container, same endpoint"
        );
        let eps = store
            .list("/contiv.io/state/eps/")
            .await
            .unwrap()
            .entries
            .len();
        assert_eq!(eps, 6);
        let del = DeleteEndpointRequest {
            TenantName: "default".into(),
            NetworkName: "n1".into(),
            EndpointID: "c0".into(),
            ..Default::default()
        };
        let (a, b) = futures::future::join(delete(&writes, &del), delete(&writes, &del)).await;
        assert!(a.is_ok() != b.is_ok(), "exactly one delete succeeds");
    }
}
