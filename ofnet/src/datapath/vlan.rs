//! The VLAN bridge datapath.
//!
//! Endpoint ports are OVS access ports tagged with their network's VLAN and uplinks are trunks,
//! so OVS's normal switching (table 9) forwards by VLAN and learned MAC. The controller's part
//! is classification and policy: table 1 writes each endpoint port's VRF and source group (and
//! marks DSCP), table 4 writes the destination group of known addresses, table 5 applies the
//! rules. Traffic arriving on an uplink was policed at its source and skips to table 6.

use super::{
    Datapath, DatapathError, Owner, PacketOut, Part, Topology, bridged_service_part, common_owners,
    dst_group_flows, local_class_flows, meter_part, netpol_part, pick_by_mac, rule_part,
};
use crate::flows::{self, category, push_vlan};
use crate::model::{ArpMode, BridgeKind, Endpoint};
use crate::pipeline::{Pipeline, VLAN_PIPELINE, id};
use crate::priority;
use ofproto::action::Action;
use ofproto::matches::Match;

/// See the module documentation.
#[derive(Debug, Default, Clone, Copy)]
pub struct VlanBridge;

impl VlanBridge {
    /// The uplink a frame of `mac` leaves by, if there is any uplink.
    pub fn uplink_for(topo: &Topology<'_>, mac: [u8; 6]) -> Option<u32> {
        pick_by_mac(&topo.settings.uplinks, mac)
    }

    /// The VLAN an endpoint's frames carry on the uplink: its group's VLAN if it has one,
    /// else its network's.
    pub fn uplink_vlan(ep: &Endpoint) -> u16 {
        if ep.endpoint_group_vlan != 0 {
            ep.endpoint_group_vlan
        } else {
            ep.vlan
        }
    }
}

/// Table-1 flows of an uplink: its traffic skips the source-side policy; tagged with a
/// network's VLAN it gets that network's VRF first (its conntrack zone, and the VRF the
/// NetworkPolicy tables match), at `MATCH + 1`.
fn uplink_flows(
    p: &'static Pipeline,
    topo: &Topology<'_>,
    port: u32,
) -> Result<Vec<ofctrl::Flow>, DatapathError> {
    let t1 = p.table(id::VLAN)?;
    let mut out = vec![flows::goto(
        t1,
        priority::MATCH,
        Match::new().in_port(port),
        id::SERVICE_SNAT,
    )?];
    for net in topo.endpoints.networks() {
        let Some(vrf) = topo.endpoints.vrf_id(&net.vrf) else {
            continue;
        };
        out.push(
            t1.flow(
                priority::MATCH + 1,
                Match::new()
                    .in_port(port)
                    .vlan_vid(flows::VID_PRESENT | net.vlan, None),
                vec![
                    ofproto::instruction::Instruction::WriteMetadata {
                        metadata: crate::metadata::vrf(vrf),
                        mask: crate::metadata::VRF_MASK,
                    },
                    ofproto::instruction::Instruction::GotoTable(id::SERVICE_SNAT),
                ],
            )?,
        );
    }
    Ok(out
        .into_iter()
        .map(|f| f.owned_by(category::UPLINK, u64::from(port)))
        .collect())
}

impl Datapath for VlanBridge {
    fn kind(&self) -> BridgeKind {
        BridgeKind::Vlan
    }

    fn pipeline(&self) -> &'static Pipeline {
        &VLAN_PIPELINE
    }

    fn owners(&self, topo: &Topology<'_>) -> Vec<Owner> {
        let mut out = common_owners(topo);
        out.extend(topo.settings.uplinks.iter().map(|p| Owner::Uplink(*p)));
        out
    }

    fn part(&self, topo: &Topology<'_>, owner: &Owner) -> Result<Part, DatapathError> {
        let p = self.pipeline();
        let flows = match owner {
            Owner::Input => flows::input(
                p.table(id::INPUT)?,
                false,
                topo.settings.arp_mode == ArpMode::Proxy,
            )?,
            Owner::LocalEndpoint(port) => {
                let Some(ep) = topo.endpoints.local(*port) else {
                    return Ok(Part::default());
                };
                let Some(vrf_id) = topo.vrf_of(ep) else {
                    return Ok(Part::default());
                };
                local_class_flows(p, topo, ep, vrf_id, None)?
            }
            Owner::RemoteEndpoint(rid) => match topo.endpoints.endpoint(rid) {
                Some(ep) if !ep.is_local() => dst_group_flows(p, topo, ep)?,
                _ => Vec::new(),
            },
            Owner::Uplink(port) if topo.settings.uplinks.contains(port) => {
                uplink_flows(p, topo, *port)?
            }
            Owner::Netpol(o) => return netpol_part(p, topo, o),
            Owner::Rule(rid) => return rule_part(p, topo, rid),
            Owner::Service(_) | Owner::ServiceProvider(..) | Owner::Conntrack => {
                return bridged_service_part(p, topo, owner);
            }
            Owner::Uplink(_)
            | Owner::Network(_)
            | Owner::Router
            | Owner::Route(_)
            | Owner::HostNat
            | Owner::HostAccess(_) => Vec::new(),
        };
        let mut part = Part {
            flows,
            ..Part::default()
        };
        if let Owner::LocalEndpoint(port) = owner
            && let Some(ep) = topo.endpoints.local(*port)
        {
            meter_part(p, ep, &mut part)?;
        }
        Ok(part)
    }

    fn forward_arp(&self, topo: &Topology<'_>, src: &Endpoint, frame: &[u8]) -> Vec<PacketOut> {
        let Some(uplink) = Self::uplink_for(topo, src.mac.octets()) else {
            return Vec::new();
        };
        let mut actions: Vec<Action> = push_vlan(Self::uplink_vlan(src)).into();
        actions.push(Action::output(uplink));
        vec![PacketOut {
            actions,
            data: frame.to_vec(),
        }]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datapath::Settings;
    use crate::epdb::{EndpointOp, EndpointTable};
    use crate::model::{LocalEndpoint, MacAddr, Network, PolicyRule, RuleAction};
    use std::net::Ipv4Addr;
    use std::sync::Arc;

    /// Only local endpoints' packets reach the balancing table, so a bridge without one holds
    /// none of a service's flows or groups (its providers may live on the other bridge or
    /// another host); its first local endpoint brings them, its last takes them away.
    #[test]
    fn services_live_only_on_a_bridge_with_local_endpoints() {
        use crate::fixtures::{VIP, endpoints, web_spec};
        let mut s = Settings::default();
        let mut spec = web_spec();
        spec.ports.truncate(1);
        s.services.set_spec("web", spec).unwrap();
        s.services.set_providers(
            "web",
            [Ipv4Addr::new(10, 1, 2, 2), Ipv4Addr::new(10, 1, 2, 3)],
        );
        let service = |t: &EndpointTable| {
            let d = VlanBridge
                .desired(&Topology {
                    endpoints: t,
                    settings: &s,
                })
                .unwrap();
            let vip = VIP.to_string();
            let flows = d.flow_lines().iter().filter(|l| l.contains(&vip)).count();
            let groups = d
                .group_lines()
                .iter()
                .filter(|l| l.contains("ct(commit"))
                .count();
            (flows, groups)
        };
        assert_eq!(
            service(&endpoints(10, &[])),
            (0, 0),
            "no local endpoint, no client"
        );
        let mut t = endpoints(10, &[(2, Ipv4Addr::new(10, 1, 1, 2))]);
        let (flows, groups) = service(&t);
        assert_eq!(groups, 1);
        // Balance, two drops, forward and reply per provider.
        assert_eq!(flows, 1 + 2 + 2 * 2);
        t.apply(EndpointOp::RemoveLocal(2)).unwrap();
        assert_eq!(service(&t), (0, 0));
    }

    #[test]
    fn two_tenants_endpoints_with_one_address_each_get_their_hairpin_flow() {
        use crate::fixtures::web_spec;
        let mut t = EndpointTable::new();
        let same = Ipv4Addr::new(10, 1, 1, 2);
        for (port, vlan, vrf) in [(2, 10, "t1"), (3, 20, "t2")] {
            t.apply(EndpointOp::AddNetwork(Network {
                vlan,
                vni: 0,
                gateway: None,
                vrf: vrf.into(),
            }))
            .unwrap();
            t.apply(EndpointOp::AddLocal {
                endpoint: LocalEndpoint {
                    mac: MacAddr([2, 2, 10, 1, 1, port as u8]),
                    ..crate::fixtures::local_endpoint(port, vlan, same)
                },
                originator: None,
            })
            .unwrap();
        }
        let mut s = Settings::default();
        let hairpins = |s: &Settings| {
            let d = VlanBridge
                .desired(&Topology {
                    endpoints: &t,
                    settings: s,
                })
                .unwrap();
            d.flow_lines()
                .into_iter()
                .filter(|l| l.contains("nat(src=169.254.42.1)"))
                .collect::<Vec<_>>()
        };
        assert!(hairpins(&s).is_empty(), "no service, no hairpin flow");
        s.services.set_spec("web", web_spec()).unwrap();
        let lines = hairpins(&s);
        assert_eq!(lines.len(), 2, "{lines:#?}");
        assert!(
            lines[0].contains("metadata=0x100000000/0xff00000000")
                && lines[1].contains("metadata=0x200000000/0xff00000000"),
            "each in its own VRF: {lines:#?}"
        );
    }

    fn topo_fixture() -> (EndpointTable, Settings) {
        let mut t = EndpointTable::new();
        for vlan in [10, 20] {
            t.apply(EndpointOp::AddNetwork(Network {
                vlan,
                vni: 0,
                gateway: None,
                vrf: "t1".into(),
            }))
            .unwrap();
        }
        let ep = |port, vlan, last: u8, epg, dscp| LocalEndpoint {
            port_no: port,
            mac: MacAddr([2, 2, 10, 1, 1, last]),
            vlan,
            ipv4: Some(Ipv4Addr::new(10, 1, 1, last)),
            ipv6: None,
            epg,
            epg_vlan: 0,
            dscp,
            bandwidth: None,
        };
        for l in [ep(2, 10, 2, 5, 0), ep(3, 10, 3, 0, 10), ep(4, 20, 4, 0, 0)] {
            t.apply(EndpointOp::AddLocal {
                endpoint: l,
                originator: None,
            })
            .unwrap();
        }
        let mut s = Settings::default();
        s.uplinks.insert(1);
        let mut r = PolicyRule::new("deny", 1, RuleAction::Deny);
        r.dst_endpoint_group = 5;
        r.ip_protocol = 6;
        r.tcp_flags = "syn,!ack".into();
        s.rules.insert(r.rule_id.clone(), Arc::new(r));
        (t, s)
    }

    /// The flows the VLAN bridge adds on top of the pipeline's miss flows, for the fixture.
    pub(crate) const GOLDEN: &[&str] = &[
        "table=0, priority=110,icmp6,icmp_type=135,nd_target=fe80::/10 actions=goto_table:1",
        "table=0, priority=100,arp,arp_op=1 actions=CONTROLLER:65535",
        "table=0, priority=100,icmp6,icmp_type=135 actions=CONTROLLER:65535",
        "table=1, priority=110,icmp6,in_port=2,dl_src=02:02:0a:01:01:02,icmp_type=136,nd_target=fe80::2:aff:fe01:102 actions=write_metadata:0x100050000/0xff7fff0000,goto_table:3",
        "table=1, priority=110,icmp6,in_port=3,dl_src=02:02:0a:01:01:03,icmp_type=136,nd_target=fe80::2:aff:fe01:103 actions=set_field:10->ip_dscp,write_metadata:0x100000000/0xff7fff0000,goto_table:3",
        "table=1, priority=110,icmp6,in_port=4,dl_src=02:02:0a:01:01:04,icmp_type=136,nd_target=fe80::2:aff:fe01:104 actions=write_metadata:0x100000000/0xff7fff0000,goto_table:3",
        "table=1, priority=105,icmp6,in_port=2,icmp_type=136 actions=drop",
        "table=1, priority=105,icmp6,in_port=3,icmp_type=136 actions=drop",
        "table=1, priority=105,icmp6,in_port=4,icmp_type=136 actions=drop",
        "table=1, priority=100,arp,in_port=2,dl_src=02:02:0a:01:01:02,arp_spa=0.0.0.0,arp_sha=02:02:0a:01:01:02 actions=write_metadata:0x100050000/0xff7fff0000,goto_table:3",
        "table=1, priority=100,arp,in_port=2,dl_src=02:02:0a:01:01:02,arp_spa=10.1.1.2,arp_sha=02:02:0a:01:01:02 actions=write_metadata:0x100050000/0xff7fff0000,goto_table:3",
        "table=1, priority=100,arp,in_port=3,dl_src=02:02:0a:01:01:03,arp_spa=0.0.0.0,arp_sha=02:02:0a:01:01:03 actions=write_metadata:0x100000000/0xff7fff0000,goto_table:3",
        "table=1, priority=100,arp,in_port=3,dl_src=02:02:0a:01:01:03,arp_spa=10.1.1.3,arp_sha=02:02:0a:01:01:03 actions=write_metadata:0x100000000/0xff7fff0000,goto_table:3",
        "table=1, priority=100,arp,in_port=4,dl_src=02:02:0a:01:01:04,arp_spa=0.0.0.0,arp_sha=02:02:0a:01:01:04 actions=write_metadata:0x100000000/0xff7fff0000,goto_table:3",
        "table=1, priority=100,arp,in_port=4,dl_src=02:02:0a:01:01:04,arp_spa=10.1.1.4,arp_sha=02:02:0a:01:01:04 actions=write_metadata:0x100000000/0xff7fff0000,goto_table:3",
        "table=1, priority=100,icmp6,in_port=2,dl_src=02:02:0a:01:01:02,ipv6_src=::,icmp_type=135 actions=write_metadata:0x100050000/0xff7fff0000,goto_table:3",
        "table=1, priority=100,icmp6,in_port=3,dl_src=02:02:0a:01:01:03,ipv6_src=::,icmp_type=135 actions=set_field:10->ip_dscp,write_metadata:0x100000000/0xff7fff0000,goto_table:3",
        "table=1, priority=100,icmp6,in_port=4,dl_src=02:02:0a:01:01:04,ipv6_src=::,icmp_type=135 actions=write_metadata:0x100000000/0xff7fff0000,goto_table:3",
        "table=1, priority=100,in_port=1 actions=goto_table:6",
        "table=1, priority=100,ip,in_port=2,dl_src=02:02:0a:01:01:02,nw_src=10.1.1.2 actions=write_metadata:0x100050000/0xff7fff0000,goto_table:3",
        "table=1, priority=100,ip,in_port=3,dl_src=02:02:0a:01:01:03,nw_src=10.1.1.3 actions=set_field:10->ip_dscp,write_metadata:0x100000000/0xff7fff0000,goto_table:3",
        "table=1, priority=100,ip,in_port=4,dl_src=02:02:0a:01:01:04,nw_src=10.1.1.4 actions=write_metadata:0x100000000/0xff7fff0000,goto_table:3",
        "table=1, priority=100,ipv6,in_port=2,dl_src=02:02:0a:01:01:02,ipv6_src=fe80::/10 actions=write_metadata:0x100050000/0xff7fff0000,goto_table:3",
        "table=1, priority=100,ipv6,in_port=3,dl_src=02:02:0a:01:01:03,ipv6_src=fe80::/10 actions=set_field:10->ip_dscp,write_metadata:0x100000000/0xff7fff0000,goto_table:3",
        "table=1, priority=100,ipv6,in_port=4,dl_src=02:02:0a:01:01:04,ipv6_src=fe80::/10 actions=write_metadata:0x100000000/0xff7fff0000,goto_table:3",
        "table=1, priority=100,udp,in_port=2,dl_src=02:02:0a:01:01:02,nw_src=0.0.0.0,tp_src=68,tp_dst=67 actions=write_metadata:0x100050000/0xff7fff0000,goto_table:3",
        "table=1, priority=100,udp,in_port=3,dl_src=02:02:0a:01:01:03,nw_src=0.0.0.0,tp_src=68,tp_dst=67 actions=set_field:10->ip_dscp,write_metadata:0x100000000/0xff7fff0000,goto_table:3",
        "table=1, priority=100,udp,in_port=4,dl_src=02:02:0a:01:01:04,nw_src=0.0.0.0,tp_src=68,tp_dst=67 actions=write_metadata:0x100000000/0xff7fff0000,goto_table:3",
        "table=1, priority=50,arp,in_port=2 actions=drop",
        "table=1, priority=50,arp,in_port=3 actions=drop",
        "table=1, priority=50,arp,in_port=4 actions=drop",
        "table=1, priority=50,ip,in_port=2 actions=drop",
        "table=1, priority=50,ip,in_port=3 actions=drop",
        "table=1, priority=50,ip,in_port=4 actions=drop",
        "table=1, priority=50,ipv6,in_port=2 actions=drop",
        "table=1, priority=50,ipv6,in_port=3 actions=drop",
        "table=1, priority=50,ipv6,in_port=4 actions=drop",
        "table=1, priority=10,in_port=2,dl_src=02:02:0a:01:01:02 actions=write_metadata:0x100050000/0xff7fff0000,goto_table:3",
        "table=1, priority=10,in_port=3,dl_src=02:02:0a:01:01:03 actions=write_metadata:0x100000000/0xff7fff0000,goto_table:3",
        "table=1, priority=10,in_port=4,dl_src=02:02:0a:01:01:04 actions=write_metadata:0x100000000/0xff7fff0000,goto_table:3",
        "table=1, priority=5,in_port=2 actions=drop",
        "table=1, priority=5,in_port=3 actions=drop",
        "table=1, priority=5,in_port=4 actions=drop",
        "table=4, priority=100,ip,metadata=0x100000000/0xff00000000,nw_dst=10.1.1.2 actions=write_metadata:0xa/0xfffe,goto_table:5",
        "table=4, priority=100,ip,metadata=0x100000000/0xff00000000,nw_dst=10.1.1.3 actions=write_metadata:0/0xfffe,goto_table:5",
        "table=4, priority=100,ip,metadata=0x100000000/0xff00000000,nw_dst=10.1.1.4 actions=write_metadata:0/0xfffe,goto_table:5",
        "table=5, priority=11,tcp,metadata=0xa/0xfffe,tcp_flags=+syn-ack actions=drop",
        "table=5, priority=11,tcp6,metadata=0xa/0xfffe,tcp_flags=+syn-ack actions=drop",
        // The uplink gives each network's VLAN its VRF.
        "table=1, priority=101,in_port=1,dl_vlan=10 actions=write_metadata:0x100000000/0xff00000000,goto_table:6",
        "table=1, priority=101,in_port=1,dl_vlan=20 actions=write_metadata:0x100000000/0xff00000000,goto_table:6",
        // A rule exists: policy is stateful.
        "table=3, priority=200,ct_state=-trk,ip actions=ct(table=3,zone=OXM_OF_METADATA[32..47],nat)",
        "table=3, priority=200,ct_state=-trk,ipv6 actions=ct(table=3,zone=OXM_OF_METADATA[32..47],nat)",
        "table=5, priority=65535,ct_state=+est+rpl+trk,ct_label=0/0x1 actions=goto_table:6",
        "table=5, priority=65535,ct_state=+rel+rpl+trk,ct_label=0/0x1 actions=goto_table:6",
        "table=6, priority=200,ct_state=-trk,ip actions=ct(table=6,zone=OXM_OF_METADATA[32..47],nat)",
        "table=6, priority=200,ct_state=-trk,ipv6 actions=ct(table=6,zone=OXM_OF_METADATA[32..47],nat)",
        "table=7, priority=200,ct_state=+est+rpl+trk,ct_label=0/0x1 actions=goto_table:9",
        "table=7, priority=200,ct_state=+rel+rpl+trk,ct_label=0/0x1 actions=goto_table:9",
        "table=7, priority=200,ct_state=+rpl+trk,ct_label=0x1/0x1 actions=drop",
        "table=7, priority=200,icmp6,icmp_type=133 actions=goto_table:9",
        "table=7, priority=200,icmp6,icmp_type=134 actions=goto_table:9",
        "table=7, priority=200,icmp6,icmp_type=135 actions=goto_table:9",
        "table=7, priority=200,icmp6,icmp_type=136 actions=goto_table:9",
        "table=7, priority=200,icmp6,icmp_type=137 actions=goto_table:9",
        "table=8, priority=2,ct_state=+est-rpl+trk,ct_label=0x1/0x1,ip actions=ct(commit,zone=OXM_OF_METADATA[32..47],exec(set_field:0/0x1->ct_label)),goto_table:9",
        "table=8, priority=2,ct_state=+est-rpl+trk,ct_label=0x1/0x1,ipv6 actions=ct(commit,zone=OXM_OF_METADATA[32..47],exec(set_field:0/0x1->ct_label)),goto_table:9",
        "table=8, priority=1,ct_state=+new+trk,ip actions=ct(commit,zone=OXM_OF_METADATA[32..47]),goto_table:9",
        "table=8, priority=1,ct_state=+new+trk,ipv6 actions=ct(commit,zone=OXM_OF_METADATA[32..47]),goto_table:9",
    ];

    #[test]
    fn golden_flow_table() {
        let (t, s) = topo_fixture();
        let d = VlanBridge
            .desired(&Topology {
                endpoints: &t,
                settings: &s,
            })
            .unwrap();
        assert_eq!(
            d.flow_lines(),
            crate::text::sorted(GOLDEN.iter().map(|s| s.to_string()).collect())
        );
        assert_eq!(d.groups().count(), 0);
    }

    #[test]
    fn flood_mode_drops_the_arp_punt_and_removing_an_endpoint_removes_its_flows() {
        let (mut t, mut s) = topo_fixture();
        let before = VlanBridge
            .desired(&Topology {
                endpoints: &t,
                settings: &s,
            })
            .unwrap();
        s.arp_mode = ArpMode::Flood;
        t.apply(EndpointOp::RemoveLocal(3)).unwrap();
        let after = VlanBridge
            .desired(&Topology {
                endpoints: &t,
                settings: &s,
            })
            .unwrap();
        let gone: Vec<String> = before
            .flow_lines()
            .into_iter()
            .filter(|l| !after.flow_lines().contains(l))
            .collect();
        let punts = [
            "table=0, priority=110,icmp6,icmp_type=135,nd_target=fe80::/10 actions=goto_table:1",
            "table=0, priority=100,arp,arp_op=1 actions=CONTROLLER:65535",
            "table=0, priority=100,icmp6,icmp_type=135 actions=CONTROLLER:65535",
        ];
        let of_port_3: Vec<String> = before
            .flow_lines()
            .into_iter()
            .filter(|l| {
                l.contains("in_port=3,")
                    || l.contains("in_port=3 ")
                    || l.contains("nw_dst=10.1.1.3 ")
            })
            .collect();
        assert_eq!(
            of_port_3.len(),
            14,
            "13 guard/classification flows, 1 destination"
        );
        let mut want: Vec<String> = punts.iter().map(|s| s.to_string()).collect();
        want.extend(of_port_3);
        assert_eq!(gone, crate::text::sorted(want));
        assert_eq!(after.flow_count(), before.flow_count() - 17);
    }

    #[test]
    fn unknown_arp_targets_leave_by_one_uplink_tagged() {
        let (t, s) = topo_fixture();
        let topo = Topology {
            endpoints: &t,
            settings: &s,
        };
        let src = t.local(2).unwrap();
        let outs = VlanBridge.forward_arp(&topo, src, &[0u8; 42]);
        assert_eq!(outs.len(), 1);
        assert_eq!(
            crate::text::actions(&outs[0].actions),
            "push_vlan:0x8100,set_field:4106->vlan_vid,output:1"
        );
    }
}
