//! VXLAN bridge across two emulated hosts on real OVS: each host is a namespace with its own
//! OVS (userspace datapath), joined by a veth underlay; `br-phy` carries the host's underlay
//! address and OVS tunnels natively. The test plays the master: it relays each agent's local
//! endpoints to the other and tells each about the other's VTEP.
#![allow(clippy::unwrap_used)]

mod common;

use common::{connect, dumped_flows, init_tracing, ofport, ping};
use ofctrl::Listener;
use ofnet::{AgentConfig, AgentHandle, BridgeKind, Endpoint, LocalEndpoint, MacAddr, Network};
use std::net::Ipv4Addr;
use testbed::{Datapath, Netns, Ovs, OvsOptions, Pod, PodOptions};

struct Host {
    ip: Ipv4Addr,
    ovs: Ovs,
    agent: AgentHandle,
    _listener: Listener,
    // Dropped last: the OVS and pods live in it.
    ns: Netns,
}

fn mac(ip: Ipv4Addr) -> MacAddr {
    let o = ip.octets();
    MacAddr([2, 2, o[0], o[1], o[2], o[3]])
}

async fn host(ns: Netns, ip: Ipv4Addr, underlay_if: &str, peer: Ipv4Addr) -> Host {
    let ovs = Ovs::start(OvsOptions {
        netns: Some(&ns),
        datapath: Datapath::Netdev,
    })
    .unwrap();
    ovs.add_bridge("br-phy").unwrap();
    ovs.vsctl(&["add-port", "br-phy", underlay_if]).unwrap();
    ns.exec(&["ip", "link", "set", underlay_if, "up"]).unwrap();
    ns.exec(&["ip", "addr", "add", &format!("{ip}/24"), "dev", "br-phy"])
        .unwrap();
    ns.exec(&["ip", "link", "set", "br-phy", "up"]).unwrap();
    ovs.add_bridge("br0").unwrap();
    ovs.vsctl(&[
        "add-port",
        "br0",
        "vtep",
        "--",
        "set",
        "interface",
        "vtep",
        "type=vxlan",
        &format!("options:remote_ip={peer}"),
        &format!("options:local_ip={ip}"),
        "options:key=flow",
    ])
    .unwrap();
    let mut config = AgentConfig::new(BridgeKind::Vxlan, "br0");
    config.local_ip = Some(ip);
    let agent = AgentHandle::start(config);
    let listener = connect(&ovs, "br0", &agent).await;
    Host {
        ip,
        ovs,
        agent,
        _listener: listener,
        ns,
    }
}

impl Host {
    async fn pod(&self, ip: Ipv4Addr, vlan: u16) -> Pod {
        let pod = Pod::attach(
            &self.ovs,
            "br0",
            &PodOptions {
                ip: format!("{ip}/16"),
                mac: Some(mac(ip).to_string()),
                gateway: None,
                vlan: None,
            },
        )
        .unwrap();
        let port = ofport(&self.ovs, pod.port_name()).await;
        self.agent
            .add_local_endpoint(LocalEndpoint {
                port_no: port,
                mac: mac(ip),
                vlan,
                ipv4: Some(ip),
                ipv6: None,
                epg: 0,
                epg_vlan: 0,
                dscp: 0,
            })
            .await
            .unwrap();
        pod
    }

    /// This host's local endpoints, as the master would relay them.
    async fn local_endpoints(&self) -> Vec<Endpoint> {
        self.agent
            .inspect()
            .await
            .unwrap()
            .endpoint_db
            .into_values()
            .filter(|e| e.originator_ip == Some(self.ip))
            .collect()
    }
}

#[actix_rt::test]
async fn pods_on_two_hosts_reach_each_other_per_vni_until_removed() {
    testbed::require!(Root, Ovs, Ping);
    init_tracing();
    let (ns_a, ns_b) = (Netns::new("ha").unwrap(), Netns::new("hb").unwrap());
    let (if_a, if_b) = (testbed::unique_name("u"), testbed::unique_name("u"));
    ns_a.exec(&[
        "ip",
        "link",
        "add",
        &if_a,
        "type",
        "veth",
        "peer",
        "name",
        &if_b,
        "netns",
        ns_b.name(),
    ])
    .unwrap();
    let (ip_a, ip_b) = (
        Ipv4Addr::new(192, 168, 77, 1),
        Ipv4Addr::new(192, 168, 77, 2),
    );
    let a = host(ns_a, ip_a, &if_a, ip_b).await;
    let b = host(ns_b, ip_b, &if_b, ip_a).await;
    // Resolve the underlay neighbours first: OVS learns them by snooping ARP on br-phy, and
    // drops the tunnel packet that would otherwise trigger the resolution.
    assert!(
        ping(a.ns.name(), &ip_b.to_string(), 1).await == 1,
        "underlay A→B"
    );
    assert!(
        ping(b.ns.name(), &ip_a.to_string(), 1).await == 1,
        "underlay B→A"
    );

    // VNI 5000 uses local VLAN 2 on A and 3 on B: local VLANs are each host's own business.
    // VNI 6000 exists on both hosts, same tenant.
    for (h, vlans) in [(&a, [2, 4]), (&b, [3, 5])] {
        for (vlan, vni) in vlans.into_iter().zip([5000, 6000]) {
            h.agent
                .add_network(Network {
                    vlan,
                    vni,
                    gateway: None,
                    vrf: "t1".into(),
                })
                .await
                .unwrap();
        }
    }
    let (a1_ip, b1_ip, b2_ip) = (
        Ipv4Addr::new(10, 1, 1, 2),
        Ipv4Addr::new(10, 1, 1, 3),
        Ipv4Addr::new(10, 1, 1, 4),
    );
    let a1 = a.pod(a1_ip, 2).await;
    let _b1 = b.pod(b1_ip, 3).await;
    let _b2 = b.pod(b2_ip, 5).await; // VNI 6000

    // The master's part: endpoints and VTEPs of each host to the other.
    for (from, to) in [(&a, &b), (&b, &a)] {
        for ep in from.local_endpoints().await {
            to.agent.add_remote_endpoint(ep).await.unwrap();
        }
        let port = ofport(&to.ovs, "vtep").await;
        to.agent.add_vtep(from.ip, port).await.unwrap();
    }

    assert_eq!(
        ping(a1.netns().name(), &b1_ip.to_string(), 3).await,
        3,
        "A1 reaches B1 over VXLAN"
    );
    assert_eq!(
        ping(a1.netns().name(), &b2_ip.to_string(), 2).await,
        0,
        "VNI 6000 is isolated from 5000"
    );

    // Flood mode: no controller in the ARP path, requests follow the flood groups across the
    // tunnel and B1 answers itself.
    for h in [&a, &b] {
        h.agent.set_arp_mode(ofnet::ArpMode::Flood).await.unwrap();
    }
    assert!(
        !dumped_flows(&a.ovs, "br0")
            .await
            .iter()
            .any(|l| l.contains("arp_op=1")),
        "no ARP punt in flood mode"
    );
    common::settle(&a.ovs);
    common::settle(&b.ovs);
    let answered_before = a
        .agent
        .inspect()
        .await
        .unwrap()
        .stats
        .get("ArpReqRespSent")
        .copied();
    a1.exec(&["ip", "neigh", "flush", "dev", "eth0"]).unwrap();
    assert_eq!(
        ping(a1.netns().name(), &b1_ip.to_string(), 3).await,
        3,
        "A1 reaches B1 with flooded ARP"
    );
    assert_eq!(
        a.agent
            .inspect()
            .await
            .unwrap()
            .stats
            .get("ArpReqRespSent")
            .copied(),
        answered_before,
        "the controller answered nothing in flood mode"
    );

    // B1 goes away: B removes its local endpoint, the master relays the removal to A.
    let b1_id = format!("{b1_ip}:t1");
    b.agent
        .remove_local_endpoint(ofport(&b.ovs, _b1.port_name()).await)
        .await
        .unwrap();
    a.agent.remove_remote_endpoint(b1_id.clone()).await.unwrap();
    common::settle(&a.ovs);
    common::settle(&b.ovs);
    let flows = dumped_flows(&a.ovs, "br0").await;
    assert!(
        !flows
            .iter()
            .any(|l| l.contains(&b1_ip.to_string()) || l.contains(&mac(b1_ip).to_string())),
        "A still has flows for B1: {flows:#?}"
    );
    assert!(
        !a.agent
            .inspect()
            .await
            .unwrap()
            .endpoint_db
            .contains_key(&b1_id)
    );
    assert_eq!(
        ping(a1.netns().name(), &b1_ip.to_string(), 2).await,
        0,
        "B1 unreachable once removed"
    );
}
