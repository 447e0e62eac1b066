//! Test data shared by the service modules' unit tests: the `web` service (TCP 80 → 8080 and
//! UDP 53 → 5353 on [`VIP`]) and an endpoint table with local endpoints on one network.

use std::net::Ipv4Addr;

use super::{ServicePort, ServiceProtocol, ServiceSpec};
use crate::epdb::{EndpointOp, EndpointTable};
use crate::model::{LocalEndpoint, MacAddr, Network};

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
        vip: VIP,
        ports: vec![
            port(ServiceProtocol::Tcp, 80, 8080),
            port(ServiceProtocol::Udp, 53, 5353),
        ],
    }
}

/// An endpoint table with one network (`vlan`, VRF `t1`) and a local endpoint per
/// `(port, address)`, its MAC `02:02:<address>`.
pub fn endpoints(vlan: u16, locals: &[(u32, Ipv4Addr)]) -> EndpointTable {
    let mut t = EndpointTable::new();
    t.apply(EndpointOp::AddNetwork(Network {
        vlan,
        vni: 0,
        gateway: None,
        vrf: "t1".into(),
    }))
    .expect("a valid network");
    for &(port_no, ip) in locals {
        let [a, b, c, d] = ip.octets();
        t.apply(EndpointOp::AddLocal {
            endpoint: LocalEndpoint {
                port_no,
                mac: MacAddr([2, 2, a, b, c, d]),
                vlan,
                ipv4: Some(ip),
                ipv6: None,
                epg: 0,
                epg_vlan: 0,
                dscp: 0,
            },
            originator: None,
        })
        .expect("a valid endpoint");
    }
    t
}
