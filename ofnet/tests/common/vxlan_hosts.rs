//! Two emulated VXLAN hosts: each a namespace with its own OVS (userspace datapath) and agent,
//! joined by a veth underlay; `br-phy` carries the host's underlay address and OVS tunnels
//! natively (`vtep` port with `options:key=flow`). The test plays the master with
//! [`exchange`].

use super::{connect, ofport, ping};
use ofctrl::Listener;
use ofnet::{AgentConfig, AgentHandle, BridgeKind, Endpoint, FwdMode, LocalEndpoint, MacAddr};
use std::net::Ipv4Addr;
use testbed::{Datapath, Netns, Ovs, OvsOptions, Pod, PodOptions};

pub struct VxlanHost {
    pub ip: Ipv4Addr,
    pub ovs: Ovs,
    pub agent: AgentHandle,
    _listener: Listener,
    // Dropped last: the OVS and pods live in it.
    pub ns: Netns,
}

/// The MAC the tests give an endpoint: `02:02:<ip bytes>`.
pub fn mac(ip: Ipv4Addr) -> MacAddr {
    let o = ip.octets();
    MacAddr([2, 2, o[0], o[1], o[2], o[3]])
}

async fn host(
    ns: Netns,
    ip: Ipv4Addr,
    underlay_if: &str,
    peer: Ipv4Addr,
    fwd_mode: FwdMode,
) -> VxlanHost {
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
    config.fwd_mode = fwd_mode;
    let agent = AgentHandle::start(config);
    let listener = connect(&ovs, "br0", &agent).await;
    VxlanHost {
        ip,
        ovs,
        agent,
        _listener: listener,
        ns,
    }
}

/// Hosts A (192.168.77.1) and B (192.168.77.2), underlay neighbours resolved.
pub async fn two_hosts() -> (VxlanHost, VxlanHost) {
    two_hosts_in(FwdMode::Bridge).await
}

/// [`two_hosts`] whose agents bridge or route.
pub async fn two_hosts_in(fwd_mode: FwdMode) -> (VxlanHost, VxlanHost) {
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
    let a = host(ns_a, ip_a, &if_a, ip_b, fwd_mode).await;
    let b = host(ns_b, ip_b, &if_b, ip_a, fwd_mode).await;
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
    (a, b)
}

impl VxlanHost {
    /// A pod with `ip`/16 as a local endpoint of the network on local VLAN `vlan`.
    pub async fn pod(&self, ip: Ipv4Addr, vlan: u16) -> Pod {
        self.pod_via(ip, vlan, None).await
    }

    /// [`VxlanHost::pod`] with a default route through `gateway`.
    pub async fn pod_via(&self, ip: Ipv4Addr, vlan: u16, gateway: Option<Ipv4Addr>) -> Pod {
        let pod = Pod::attach(
            &self.ovs,
            "br0",
            &PodOptions {
                ip: format!("{ip}/16"),
                mac: Some(mac(ip).to_string()),
                gateway: gateway.map(|g| g.to_string()),
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
                bandwidth: None,
            })
            .await
            .unwrap();
        pod
    }

    /// This host's local endpoints, as the master would relay them.
    pub async fn local_endpoints(&self) -> Vec<Endpoint> {
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

/// The master's part: each host's local endpoints and VTEP to the other.
pub async fn exchange(a: &VxlanHost, b: &VxlanHost) {
    for (from, to) in [(a, b), (b, a)] {
        for ep in from.local_endpoints().await {
            to.agent.add_remote_endpoint(ep).await.unwrap();
        }
        let port = ofport(&to.ovs, "vtep").await;
        to.agent.add_vtep(from.ip, port).await.unwrap();
    }
}
