//! Test data shared by the crate's unit tests: endpoint tables with one network and local
//! endpoints whose MACs are `02:02:<address>`, and the `web` service (TCP 80 → 8080 and UDP
//! 53 → 5353 on [`VIP`]).

use std::net::Ipv4Addr;

use crate::epdb::{EndpointOp, EndpointTable};
use crate::model::{LocalEndpoint, MacAddr, Network};
use crate::service::{ServicePort, ServiceProtocol, ServiceSpec};

/// The test service's address.
pub const VIP: Ipv4Addr = Ipv4Addr::new(10, 254, 0, 10);

/// `web`: TCP 80 → 8080 and UDP 53 → 5353 on [`VIP`].
pub fn web_spec() -> ServiceSpec {
    let port = |protocol, svc_port, prov_port| ServicePort {
        protocol,
        svc_port,
        prov_port,
    };
    ServiceSpec {
        affinity_timeout: None,
        vip6: None,
        vip: VIP,
        ports: vec![
            port(ServiceProtocol::Tcp, 80, 8080),
            port(ServiceProtocol::Udp, 53, 5353),
        ],
    }
}

/// `02:02:<address>`, the MAC the fixtures give an endpoint.
pub fn mac_of(ip: Ipv4Addr) -> MacAddr {
    let [a, b, c, d] = ip.octets();
    MacAddr([2, 2, a, b, c, d])
}

/// An endpoint table with one network (`vlan`, `vni`, VRF `t1`) and a local endpoint per
/// `(port, address)` (group 0, no DSCP), announced with `originator`.
pub fn endpoint_table(
    vlan: u16,
    vni: u32,
    locals: &[(u32, Ipv4Addr)],
    originator: Option<Ipv4Addr>,
) -> EndpointTable {
    let mut t = EndpointTable::new();
    t.apply(EndpointOp::AddNetwork(Network {
        vlan,
        vni,
        gateway: None,
        vrf: "t1".into(),
    }))
    .expect("a valid network");
    for &(port_no, ip) in locals {
        t.apply(EndpointOp::AddLocal {
            endpoint: local_endpoint(port_no, vlan, ip),
            originator,
        })
        .expect("a valid endpoint");
    }
    t
}

/// A local endpoint on `port_no` in the network of `vlan` with address `ip` and MAC
/// [`mac_of`] it (group 0, no DSCP, no bandwidth limit).
pub fn local_endpoint(port_no: u32, vlan: u16, ip: Ipv4Addr) -> LocalEndpoint {
    LocalEndpoint {
        port_no,
        mac: mac_of(ip),
        vlan,
        ipv4: Some(ip),
        ipv6: None,
        epg: 0,
        epg_vlan: 0,
        dscp: 0,
        bandwidth: None,
    }
}

/// [`endpoint_table`] on a VLAN network without VNI or originator.
pub fn endpoints(vlan: u16, locals: &[(u32, Ipv4Addr)]) -> EndpointTable {
    endpoint_table(vlan, 0, locals, None)
}
