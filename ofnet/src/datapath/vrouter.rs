//! The VXLAN router datapath (`vrouter`, routing mode).
//!
//! No local VLANs, no MAC table, no flooding: every host answers ARP (and neighbour
//! solicitations) for every endpoint it knows and for the network's gateway with the router
//! MAC ([`ROUTER_MAC`], the same on every host), so pods address every packet to the router.
//! Table 1 classifies endpoint traffic (VRF, source group, DSCP, spoof guard) and tunnel
//! traffic by its VNI; after services and policy, table 7 routes by destination address in the
//! packet's VRF: a local endpoint gets the router MAC as source and its own MAC as
//! destination, another host's endpoint goes through that host's VTEP with the network's VNI
//! (its host routes it again, skipping policy: policy is enforced where the packet starts).
//!
//! **The host NAT path** ([`HostNatPort`], `contivh0`): what table 7 has no route for, from a
//! local endpoint, leaves through the host NAT port with the endpoint's private address
//! (`pvtSubnet` + its port number) as source (table 8), so the host answers it (and masquerades
//! what it forwards beyond); what the host sends in to a private address gets the endpoint's
//! own address back and goes out its port (table 9). Pods reach the host and, through it, the
//! outside; the host reaches each pod by its private address. Private addresses are dropped as
//! destinations from pods (they are the host's to use).

use super::{
    Datapath, DatapathError, HostNatPort, Owner, PacketOut, Part, Topology, common_owners,
    dst_group_flows, local_class_flows, meter_part, rule_part, service_part,
};
use crate::flows::{self, ETH_IPV4, ETH_IPV6, category, object_of, set_tun_id};
use crate::metadata;
use crate::model::{BridgeKind, Endpoint, ROUTER_MAC};
use crate::pipeline::{Pipeline, VROUTER_PIPELINE, id};
use crate::priority;
use ofctrl::Flow;
use ofproto::action::Action;
use ofproto::instruction::Instruction;
use ofproto::matches::Match;
use ofproto::oxm::{FieldId, Oxm};

/// See the module documentation.
#[derive(Debug, Default, Clone, Copy)]
pub struct VrouterBridge;

fn set_eth(field: FieldId, mac: [u8; 6]) -> Action {
    Action::set_field(Oxm::new(field, &mac, None))
}

/// The table-7 flows sending the addresses of `ep` (in VRF `vrf_id`) through `actions`.
pub(crate) fn routes_to(
    table: crate::pipeline::Table,
    ep: &Endpoint,
    vrf_id: u8,
    actions: &[Action],
) -> Result<Vec<Flow>, DatapathError> {
    let (cat, object) = if ep.is_local() {
        (category::LOCAL_ENDPOINT, u64::from(ep.port_no))
    } else {
        (category::REMOTE_ENDPOINT, object_of(&ep.endpoint_id))
    };
    let vrf = Match::new();
    let mut out = Vec::new();
    let mut matches = Vec::new();
    if let Some(a) = ep.ip_addr {
        matches.push(vrf.clone().eth_type(ETH_IPV4).ipv4_dst(a, None));
    }
    if let Some(a) = ep.ipv6_addr {
        matches.push(vrf.clone().eth_type(ETH_IPV6).ipv6_dst(a, None));
    }
    for m in matches {
        let m = m.metadata(metadata::vrf(vrf_id), Some(metadata::VRF_MASK));
        out.push(
            table
                .flow(
                    priority::MATCH,
                    m,
                    vec![Instruction::ApplyActions(actions.to_vec())],
                )?
                .owned_by(cat, object),
        );
    }
    Ok(out)
}

fn set_ipv4(field: FieldId, ip: std::net::Ipv4Addr) -> Action {
    Action::set_field(Oxm::new(field, &ip.octets(), None))
}

impl VrouterBridge {
    /// The host NAT port's own flows: its IPv4 goes to table 9; pods' packets to private
    /// addresses other than the host's are dropped in table 7.
    fn host_nat_part(&self, nat: &HostNatPort) -> Result<Part, DatapathError> {
        let p = self.pipeline();
        let object = u64::from(nat.port);
        let flows = vec![
            p.table(id::VLAN)?
                .flow(
                    priority::MATCH,
                    Match::new().in_port(nat.port).eth_type(ETH_IPV4),
                    vec![Instruction::GotoTable(id::HOST_DNAT)],
                )?
                .owned_by(category::UPLINK, object),
            // Private addresses are the host's to use: no pod reaches another through one
            // (dropped in table 7, below every route); the host's own is taken to table 8.
            p.table(id::IP)?
                .flow(
                    priority::PRIVATE_DROP,
                    Match::new()
                        .eth_type(ETH_IPV4)
                        .ipv4_dst(nat.subnet.network(), Some(nat.subnet.netmask())),
                    Vec::new(),
                )?
                .owned_by(category::UPLINK, object),
            p.table(id::IP)?
                .flow(
                    priority::PRIVATE_HOST,
                    Match::new().eth_type(ETH_IPV4).ipv4_dst(nat.ip, None),
                    vec![Instruction::GotoTable(id::HOST_SNAT)],
                )?
                .owned_by(category::UPLINK, object),
        ];
        Ok(Part {
            flows,
            ..Part::default()
        })
    }

    /// A local endpoint's two NAT flows (table 8 out to the host, table 9 in from it).
    fn host_nat_flows(&self, nat: &HostNatPort, ep: &Endpoint) -> Result<Vec<Flow>, DatapathError> {
        let p = self.pipeline();
        let (Some(ip), Some(private)) = (ep.ip_addr, nat.private_ip(ep.port_no)) else {
            return Ok(Vec::new());
        };
        let object = u64::from(ep.port_no);
        Ok(vec![
            p.table(id::HOST_SNAT)?
                .flow(
                    priority::MATCH,
                    Match::new().in_port(ep.port_no).eth_type(ETH_IPV4),
                    vec![Instruction::ApplyActions(vec![
                        set_ipv4(FieldId::IPV4_SRC, private),
                        set_eth(FieldId::ETH_SRC, ROUTER_MAC.octets()),
                        set_eth(FieldId::ETH_DST, nat.mac.octets()),
                        Action::output(nat.port),
                    ])],
                )?
                .owned_by(category::LOCAL_ENDPOINT, object),
            p.table(id::HOST_DNAT)?
                .flow(
                    priority::MATCH,
                    Match::new().eth_type(ETH_IPV4).ipv4_dst(private, None),
                    vec![Instruction::ApplyActions(vec![
                        set_ipv4(FieldId::IPV4_DST, ip),
                        set_eth(FieldId::ETH_SRC, ROUTER_MAC.octets()),
                        set_eth(FieldId::ETH_DST, ep.mac.octets()),
                        Action::output(ep.port_no),
                    ])],
                )?
                .owned_by(category::LOCAL_ENDPOINT, object),
        ])
    }

    /// Tunnel ingress of a network: per VTEP, its VNI sets the VRF and marks the packet as
    /// from a VTEP; it continues after policy.
    fn network_part(&self, topo: &Topology<'_>, vlan: u16) -> Result<Part, DatapathError> {
        let p = self.pipeline();
        let Some(net) = topo.endpoints.network(vlan).filter(|n| n.vni != 0) else {
            return Ok(Part::default());
        };
        let Some(vrf_id) = topo.endpoints.vrf_id(&net.vrf) else {
            return Ok(Part::default());
        };
        let t1 = p.table(id::VLAN)?;
        let mut flows = Vec::new();
        for &vtep in topo.settings.vteps.values() {
            flows.push(
                t1.flow(
                    priority::MATCH,
                    Match::new().in_port(vtep).tun_id(u64::from(net.vni), None),
                    vec![
                        Instruction::WriteMetadata {
                            metadata: metadata::RX_VTEP | metadata::vrf(vrf_id),
                            mask: metadata::RX_VTEP | metadata::VRF_MASK,
                        },
                        Instruction::GotoTable(id::SERVICE_SNAT),
                    ],
                )?
                .owned_by(category::NETWORK, u64::from(net.vlan)),
            );
        }
        Ok(Part {
            flows,
            ..Part::default()
        })
    }

    fn local_part(&self, topo: &Topology<'_>, port: u32) -> Result<Part, DatapathError> {
        let p = self.pipeline();
        let Some(ep) = topo.endpoints.local(port) else {
            return Ok(Part::default());
        };
        let Some(vrf_id) = topo.vrf_of(ep) else {
            return Ok(Part::default());
        };
        let mut flows = local_class_flows(p, topo, ep, vrf_id, None)?;
        flows.extend(routes_to(
            p.table(id::IP)?,
            ep,
            vrf_id,
            &[
                set_eth(FieldId::ETH_SRC, ROUTER_MAC.octets()),
                set_eth(FieldId::ETH_DST, ep.mac.octets()),
                Action::output(ep.port_no),
            ],
        )?);
        if let Some(nat) = &topo.settings.host_nat {
            flows.extend(self.host_nat_flows(nat, ep)?);
        }
        let mut part = Part {
            flows,
            ..Part::default()
        };
        meter_part(p, ep, &mut part)?;
        Ok(part)
    }

    fn remote_part(&self, topo: &Topology<'_>, rid: &str) -> Result<Part, DatapathError> {
        let p = self.pipeline();
        let Some(ep) = topo.endpoints.endpoint(rid).filter(|e| !e.is_local()) else {
            return Ok(Part::default());
        };
        let mut flows = dst_group_flows(p, topo, ep)?;
        // Routable once its VRF exists here and its host's VTEP is known.
        let vtep = ep.originator_ip.and_then(|ip| topo.settings.vteps.get(&ip));
        if let (Some(vrf_id), Some(&vtep), true) = (topo.vrf_of(ep), vtep, ep.vni != 0) {
            flows.extend(routes_to(
                p.table(id::IP)?,
                ep,
                vrf_id,
                &[
                    set_eth(FieldId::ETH_DST, ROUTER_MAC.octets()),
                    set_tun_id(ep.vni),
                    Action::output(vtep),
                ],
            )?);
        }
        Ok(Part {
            flows,
            ..Part::default()
        })
    }
}

impl Datapath for VrouterBridge {
    fn kind(&self) -> BridgeKind {
        BridgeKind::Vxlan
    }

    fn pipeline(&self) -> &'static Pipeline {
        &VROUTER_PIPELINE
    }

    fn router_mac(&self) -> Option<[u8; 6]> {
        Some(ROUTER_MAC.octets())
    }

    fn owners(&self, topo: &Topology<'_>) -> Vec<Owner> {
        let mut out = common_owners(topo);
        out.extend(
            topo.endpoints
                .networks()
                .filter(|n| n.vni != 0)
                .map(|n| Owner::Network(n.vlan)),
        );
        if topo.settings.host_nat.is_some() {
            out.push(Owner::HostNat);
        }
        out
    }

    fn part(&self, topo: &Topology<'_>, owner: &Owner) -> Result<Part, DatapathError> {
        match owner {
            // ARP is always answered by the agent in routing mode (whatever the ARP mode):
            // nothing else knows to answer with the router MAC.
            Owner::Input => Ok(Part {
                flows: flows::input(self.pipeline().table(id::INPUT)?, true, true)?,
                ..Part::default()
            }),
            Owner::LocalEndpoint(port) => self.local_part(topo, *port),
            Owner::RemoteEndpoint(rid) => self.remote_part(topo, rid),
            Owner::Network(vlan) => self.network_part(topo, *vlan),
            Owner::Rule(rid) => rule_part(self.pipeline(), topo, rid),
            Owner::Service(_) | Owner::ServiceProvider(..) | Owner::Conntrack => {
                service_part(self.pipeline(), topo, owner)
            }
            Owner::HostNat => match &topo.settings.host_nat {
                Some(nat) => self.host_nat_part(nat),
                None => Ok(Part::default()),
            },
            Owner::Uplink(_)
            | Owner::Router
            | Owner::Route(_)
            | Owner::Netpol(_)
            | Owner::HostAccess(_) => Ok(Part::default()),
        }
    }

    /// Routed: an unknown target is nobody's to answer, and nothing crosses hosts at layer 2.
    fn forward_arp(&self, _: &Topology<'_>, _: &Endpoint, _: &[u8]) -> Vec<PacketOut> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datapath::Settings;
    use crate::datapath::vxlan::tests::fixture;

    pub(crate) const GOLDEN: &[&str] = &[
        "table=0, priority=110,icmp6,icmp_type=135,nd_target=fe80::/10 actions=goto_table:1",
        "table=0, priority=100,arp,arp_op=1 actions=CONTROLLER:65535",
        "table=0, priority=100,dl_src=01:00:00:00:00:00/01:00:00:00:00:00 actions=drop",
        "table=0, priority=100,icmp6,icmp_type=135 actions=CONTROLLER:65535",
        "table=1, priority=110,icmp6,in_port=3,dl_src=02:02:0a:01:01:02,icmp_type=136,nd_target=fe80::2:aff:fe01:102 actions=write_metadata:0x100000000/0xff7fff0000,goto_table:3",
        "table=1, priority=105,icmp6,in_port=3,icmp_type=136 actions=drop",
        "table=1, priority=100,arp,in_port=3,dl_src=02:02:0a:01:01:02,arp_spa=0.0.0.0,arp_sha=02:02:0a:01:01:02 actions=write_metadata:0x100000000/0xff7fff0000,goto_table:3",
        "table=1, priority=100,arp,in_port=3,dl_src=02:02:0a:01:01:02,arp_spa=10.1.1.2,arp_sha=02:02:0a:01:01:02 actions=write_metadata:0x100000000/0xff7fff0000,goto_table:3",
        "table=1, priority=100,icmp6,in_port=3,dl_src=02:02:0a:01:01:02,ipv6_src=::,icmp_type=135 actions=write_metadata:0x100000000/0xff7fff0000,goto_table:3",
        "table=1, priority=100,ip,in_port=3,dl_src=02:02:0a:01:01:02,nw_src=10.1.1.2 actions=write_metadata:0x100000000/0xff7fff0000,goto_table:3",
        "table=1, priority=100,ipv6,in_port=3,dl_src=02:02:0a:01:01:02,ipv6_src=fe80::/10 actions=write_metadata:0x100000000/0xff7fff0000,goto_table:3",
        "table=1, priority=100,tun_id=0x1388,in_port=9 actions=write_metadata:0x100000001/0xff00000001,goto_table:6",
        "table=1, priority=100,udp,in_port=3,dl_src=02:02:0a:01:01:02,nw_src=0.0.0.0,tp_src=68,tp_dst=67 actions=write_metadata:0x100000000/0xff7fff0000,goto_table:3",
        "table=1, priority=50,arp,in_port=3 actions=drop",
        "table=1, priority=50,ip,in_port=3 actions=drop",
        "table=1, priority=50,ipv6,in_port=3 actions=drop",
        "table=1, priority=10,in_port=3,dl_src=02:02:0a:01:01:02 actions=write_metadata:0x100000000/0xff7fff0000,goto_table:3",
        "table=1, priority=5,in_port=3 actions=drop",
        "table=4, priority=100,ip,metadata=0x100000000/0xff00000000,nw_dst=10.1.1.2 actions=write_metadata:0/0xfffe,goto_table:5",
        "table=4, priority=100,ip,metadata=0x100000000/0xff00000000,nw_dst=10.1.1.3 actions=write_metadata:0/0xfffe,goto_table:5",
        "table=7, priority=100,ip,metadata=0x100000000/0xff00000000,nw_dst=10.1.1.2 actions=set_field:00:00:11:11:11:11->eth_src,set_field:02:02:0a:01:01:02->eth_dst,output:3",
        "table=7, priority=100,ip,metadata=0x100000000/0xff00000000,nw_dst=10.1.1.3 actions=set_field:00:00:11:11:11:11->eth_dst,set_field:0x1388->tun_id,output:9",
    ];

    #[test]
    fn golden_flow_table() {
        let (t, s) = fixture();
        let d = VrouterBridge
            .desired(&Topology {
                endpoints: &t,
                settings: &s,
            })
            .unwrap();
        assert_eq!(
            d.flow_lines(),
            crate::text::sorted(GOLDEN.iter().map(|s| s.to_string()).collect())
        );
        assert_eq!(d.groups().count(), 0, "no flood groups in routing mode");
    }

    fn host_nat() -> HostNatPort {
        HostNatPort {
            port: 20,
            ip: std::net::Ipv4Addr::new(172, 19, 255, 254),
            mac: crate::model::MacAddr([2, 2, 0xac, 0x13, 0xff, 0xfe]),
            subnet: "172.19.0.0/16".parse().unwrap(),
        }
    }

    #[test]
    fn the_host_nat_port_gives_each_local_endpoint_a_private_address() {
        let (t, mut s) = fixture();
        s.host_nat = Some(host_nat());
        let d = VrouterBridge
            .desired(&Topology {
                endpoints: &t,
                settings: &s,
            })
            .unwrap();
        let lines = d.flow_lines();
        let without: Vec<String> = GOLDEN.iter().map(|s| s.to_string()).collect();
        let added: Vec<&String> = lines.iter().filter(|l| !without.contains(l)).collect();
        assert_eq!(
            added,
            [
                "table=1, priority=100,ip,in_port=20 actions=goto_table:9",
                "table=7, priority=20,ip,nw_dst=172.19.255.254 actions=goto_table:8",
                "table=7, priority=10,ip,nw_dst=172.19.0.0/16 actions=drop",
                "table=8, priority=100,ip,in_port=3 actions=set_field:172.19.0.3->ip_src,set_field:00:00:11:11:11:11->eth_src,set_field:02:02:ac:13:ff:fe->eth_dst,output:20",
                "table=9, priority=100,ip,nw_dst=172.19.0.3 actions=set_field:10.1.1.2->ip_dst,set_field:00:00:11:11:11:11->eth_src,set_field:02:02:0a:01:01:02->eth_dst,output:3",
            ],
            "{lines:#?}"
        );
        // The remote endpoint has no private address here: its own host's.
        assert!(
            !lines.iter().any(|l| l.contains("10.1.1.3->")),
            "{lines:#?}"
        );
    }

    #[test]
    fn private_addresses_come_from_the_port_number() {
        let nat = host_nat();
        assert_eq!(nat.private_ip(3), Some("172.19.0.3".parse().unwrap()));
        assert_eq!(
            nat.private_ip(0x1234),
            Some("172.19.18.52".parse().unwrap())
        );
        assert_eq!(nat.private_ip(0), None);
        assert_eq!(nat.private_ip(0xfffe), None, "the host's own address");
        assert_eq!(nat.private_ip(0xffff), None, "the broadcast address");
        assert_eq!(nat.private_ip(0x1_0000), None, "outside the subnet");
    }

    #[test]
    fn remote_endpoints_are_routed_only_through_a_known_vtep() {
        let (t, _) = fixture();
        let d = VrouterBridge
            .desired(&Topology {
                endpoints: &t,
                settings: &Settings::default(),
            })
            .unwrap();
        let lines = d.flow_lines();
        assert!(
            !lines.iter().any(|l| l.contains("tun_id")),
            "no VTEP: no tunnel flows: {lines:#?}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("table=4") && l.contains("nw_dst=10.1.1.3")),
            "its group is still known for policy"
        );
    }

    #[test]
    fn a_remote_endpoint_claiming_a_local_address_is_a_conflict() {
        let (mut t, s) = fixture();
        let mut remote = t.endpoint("10.1.1.3:t1").unwrap().clone();
        remote.endpoint_id = "10.1.1.2:t9".into();
        remote.ip_addr = Some(std::net::Ipv4Addr::new(10, 1, 1, 2));
        remote.vrf = "t1".into();
        t.apply(crate::epdb::EndpointOp::AddRemote(remote)).unwrap();
        let err = VrouterBridge
            .desired(&Topology {
                endpoints: &t,
                settings: &s,
            })
            .unwrap_err();
        assert!(matches!(err, DatapathError::Conflict { .. }), "{err}");
    }
}
