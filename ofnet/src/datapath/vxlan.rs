//! The VXLAN bridge datapath.
//!
//! Every network has a host-local VLAN and a VNI. Table 1 tags endpoint traffic with the local
//! VLAN (and writes VRF and source group), and tags tunnel traffic by its VNI, marking it as
//! from a VTEP so it skips policy (policy is enforced at the source host). Table 9 sends known
//! MACs to their local port, or to the VTEP of the host that owns them with the VNI as tunnel
//! id, and floods everything else through the VLAN's groups: everything from a local port
//! floods to local ports and all VTEPs, everything from a VTEP only to local ports.

use super::{
    Datapath, DatapathError, Owner, PacketOut, Part, Topology, bridged_service_part, common_owners,
    dst_group_flows, local_class_flows, meter_part, netpol_part, rule_part,
};
use crate::flows::{self, VID_PRESENT, category, object_of, push_vlan, set_tun_id};
use crate::metadata;
use crate::model::{ArpMode, BridgeKind, Endpoint};
use crate::pipeline::{Pipeline, VXLAN_PIPELINE, id};
use crate::priority;
use ofctrl::Group;
use ofproto::action::Action;
use ofproto::group::{Bucket, GroupType};
use ofproto::instruction::Instruction;
use ofproto::matches::Match;

/// See the module documentation.
#[derive(Debug, Default, Clone, Copy)]
pub struct VxlanBridge;

/// Group flooding a VLAN to its local ports.
pub fn local_flood_group(vlan: u16) -> u32 {
    u32::from(vlan) << 1
}

/// Group flooding a VLAN to its local ports and every VTEP.
pub fn all_flood_group(vlan: u16) -> u32 {
    (u32::from(vlan) << 1) | 1
}

/// Most buckets one flood group gets. A group is one OpenFlow message (at most 64 KiB) and a
/// VTEP bucket takes 56 bytes, so larger floods are split over several groups that the flood
/// flow applies one after the other.
pub const MAX_FLOOD_BUCKETS: usize = 1000;

/// The id of the `n`th group of a flood split over several (`n` = 0 is the flood's own id).
pub fn flood_chunk_group(flood: u32, n: usize) -> u32 {
    if n == 0 {
        flood
    } else {
        // Above every `vlan << 1 | scope` id; up to 255 chunks of 1000 buckets.
        0x0100_0000 | (flood << 8) | (n as u32 & 0xff)
    }
}

/// The groups of flood `id` over `buckets` (at least one group, possibly empty).
fn flood_groups(id: u32, buckets: Vec<Bucket>) -> Vec<Group> {
    let mut chunks: Vec<Vec<Bucket>> = buckets
        .chunks(MAX_FLOOD_BUCKETS)
        .map(<[Bucket]>::to_vec)
        .collect();
    if chunks.is_empty() {
        chunks.push(Vec::new());
    }
    chunks
        .into_iter()
        .enumerate()
        .map(|(n, buckets)| Group {
            id: flood_chunk_group(id, n),
            group_type: GroupType::All,
            buckets,
        })
        .collect()
}

fn vlan_match(vlan: u16) -> Match {
    Match::new().vlan_vid(VID_PRESENT | vlan, None)
}

impl VxlanBridge {
    /// VTEP ingress per VTEP, the flood groups and the flows choosing between them.
    fn network_part(&self, topo: &Topology<'_>, vlan: u16) -> Result<Part, DatapathError> {
        let p = self.pipeline();
        let Some(net) = topo.endpoints.network(vlan).filter(|n| n.vni != 0) else {
            return Ok(Part::default());
        };
        let Some(vrf_id) = topo.endpoints.vrf_id(&net.vrf) else {
            return Ok(Part::default());
        };
        let object = u64::from(net.vlan);
        let mut flows = Vec::new();
        let t1 = p.table(id::VLAN)?;
        for &vtep in topo.settings.vteps.values() {
            let actions: Vec<Action> = push_vlan(net.vlan).into();
            flows.push(
                t1.flow(
                    priority::MATCH,
                    Match::new().in_port(vtep).tun_id(u64::from(net.vni), None),
                    vec![
                        Instruction::ApplyActions(actions),
                        Instruction::WriteMetadata {
                            metadata: metadata::RX_VTEP | metadata::vrf(vrf_id),
                            mask: metadata::RX_VTEP | metadata::VRF_MASK,
                        },
                        Instruction::GotoTable(id::SERVICE_SNAT),
                    ],
                )?
                .owned_by(category::NETWORK, object),
            );
        }
        let local: Vec<Bucket> = topo
            .endpoints
            .locals()
            .filter(|e| e.vlan == net.vlan)
            .map(|e| Bucket::new(vec![Action::PopVlan, Action::output(e.port_no)]))
            .collect();
        let mut all = local.clone();
        for &vtep in topo.settings.vteps.values() {
            all.push(Bucket::new(vec![
                Action::PopVlan,
                set_tun_id(net.vni),
                Action::output(vtep),
            ]));
        }
        let local = flood_groups(local_flood_group(net.vlan), local);
        let all = flood_groups(all_flood_group(net.vlan), all);
        let t9 = p.table(id::MAC_DEST)?;
        for (from_vtep, groups) in [(0, &all), (metadata::RX_VTEP, &local)] {
            let actions = groups.iter().map(|g| Action::Group(g.id)).collect();
            flows.push(
                t9.flow(
                    priority::FLOOD,
                    vlan_match(net.vlan).metadata(from_vtep, Some(metadata::RX_VTEP)),
                    vec![Instruction::ApplyActions(actions)],
                )?
                .owned_by(category::NETWORK, object),
            );
        }
        let mut groups = local;
        groups.extend(all);
        Ok(Part {
            flows,
            groups,
            meters: Vec::new(),
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
        let mut flows = local_class_flows(p, topo, ep, vrf_id, Some(ep.vlan))?;
        flows.push(
            p.table(id::MAC_DEST)?
                .flow(
                    priority::MATCH,
                    vlan_match(ep.vlan).eth_dst(ep.mac.octets(), None),
                    vec![Instruction::ApplyActions(vec![
                        Action::PopVlan,
                        Action::output(ep.port_no),
                    ])],
                )?
                .owned_by(category::LOCAL_ENDPOINT, u64::from(ep.port_no)),
        );
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
        // Reachable once its network exists here and its host's VTEP is known.
        let net = topo.endpoints.network_by_vni(ep.vni);
        let vtep = ep.originator_ip.and_then(|ip| topo.settings.vteps.get(&ip));
        if let (Some(net), Some(&vtep)) = (net, vtep) {
            flows.push(
                p.table(id::MAC_DEST)?
                    .flow(
                        priority::MATCH,
                        vlan_match(net.vlan).eth_dst(ep.mac.octets(), None),
                        vec![Instruction::ApplyActions(vec![
                            Action::PopVlan,
                            set_tun_id(ep.vni),
                            Action::output(vtep),
                        ])],
                    )?
                    .owned_by(category::REMOTE_ENDPOINT, object_of(&ep.endpoint_id)),
            );
        }
        Ok(Part {
            flows,
            groups: Vec::new(),
            meters: Vec::new(),
        })
    }
}

impl Datapath for VxlanBridge {
    fn kind(&self) -> BridgeKind {
        BridgeKind::Vxlan
    }

    fn pipeline(&self) -> &'static Pipeline {
        &VXLAN_PIPELINE
    }

    fn owners(&self, topo: &Topology<'_>) -> Vec<Owner> {
        let mut out = common_owners(topo);
        out.extend(
            topo.endpoints
                .networks()
                .filter(|n| n.vni != 0)
                .map(|n| Owner::Network(n.vlan)),
        );
        out
    }

    fn part(&self, topo: &Topology<'_>, owner: &Owner) -> Result<Part, DatapathError> {
        match owner {
            Owner::Input => Ok(Part {
                flows: flows::input(
                    self.pipeline().table(id::INPUT)?,
                    true,
                    topo.settings.arp_mode == ArpMode::Proxy,
                )?,
                groups: Vec::new(),
                meters: Vec::new(),
            }),
            Owner::LocalEndpoint(port) => self.local_part(topo, *port),
            Owner::RemoteEndpoint(rid) => self.remote_part(topo, rid),
            Owner::Network(vlan) => self.network_part(topo, *vlan),
            Owner::Rule(rid) => rule_part(self.pipeline(), topo, rid),
            Owner::Service(_) | Owner::ServiceProvider(..) | Owner::Conntrack => {
                bridged_service_part(self.pipeline(), topo, owner)
            }
            Owner::Netpol(o) => netpol_part(self.pipeline(), topo, o),
            Owner::Uplink(_)
            | Owner::Router
            | Owner::Route(_)
            | Owner::HostNat
            | Owner::HostAccess(_) => Ok(Part::default()),
        }
    }

    fn forward_arp(&self, topo: &Topology<'_>, src: &Endpoint, frame: &[u8]) -> Vec<PacketOut> {
        topo.settings
            .vteps
            .values()
            .map(|&vtep| PacketOut {
                actions: vec![set_tun_id(src.vni), Action::output(vtep)],
                data: frame.to_vec(),
            })
            .collect()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::datapath::Settings;
    use crate::epdb::{EndpointOp, EndpointTable};
    use crate::model::{LocalEndpoint, MacAddr};
    use std::net::Ipv4Addr;

    pub(crate) fn fixture() -> (EndpointTable, Settings) {
        let mut t = crate::fixtures::endpoint_table(
            2,
            5000,
            &[(3, Ipv4Addr::new(10, 1, 1, 2))],
            Some(Ipv4Addr::new(192, 168, 77, 1)),
        );
        let mut remote = t.local(3).unwrap().clone();
        remote.port_no = 0;
        remote.endpoint_id = "10.1.1.3:t1".into();
        remote.ip_addr = Some(Ipv4Addr::new(10, 1, 1, 3));
        remote.mac = MacAddr([2, 2, 10, 1, 1, 3]);
        remote.vlan = 7;
        remote.originator_ip = Some(Ipv4Addr::new(192, 168, 77, 2));
        t.apply(EndpointOp::AddRemote(remote)).unwrap();
        let mut s = Settings::default();
        s.vteps.insert(Ipv4Addr::new(192, 168, 77, 2), 9);
        (t, s)
    }

    pub(crate) const GOLDEN: &[&str] = &[
        "table=0, priority=110,icmp6,icmp_type=135,nd_target=fe80::/10 actions=goto_table:1",
        "table=0, priority=100,arp,arp_op=1 actions=CONTROLLER:65535",
        "table=0, priority=100,dl_src=01:00:00:00:00:00/01:00:00:00:00:00 actions=drop",
        "table=0, priority=100,icmp6,icmp_type=135 actions=CONTROLLER:65535",
        "table=1, priority=110,icmp6,in_port=3,dl_src=02:02:0a:01:01:02,icmp_type=136,nd_target=fe80::2:aff:fe01:102 actions=push_vlan:0x8100,set_field:4098->vlan_vid,write_metadata:0x100000000/0xff7fff0000,goto_table:3",
        "table=1, priority=105,icmp6,in_port=3,icmp_type=136 actions=drop",
        "table=1, priority=100,arp,in_port=3,dl_src=02:02:0a:01:01:02,arp_spa=0.0.0.0,arp_sha=02:02:0a:01:01:02 actions=push_vlan:0x8100,set_field:4098->vlan_vid,write_metadata:0x100000000/0xff7fff0000,goto_table:3",
        "table=1, priority=100,arp,in_port=3,dl_src=02:02:0a:01:01:02,arp_spa=10.1.1.2,arp_sha=02:02:0a:01:01:02 actions=push_vlan:0x8100,set_field:4098->vlan_vid,write_metadata:0x100000000/0xff7fff0000,goto_table:3",
        "table=1, priority=100,icmp6,in_port=3,dl_src=02:02:0a:01:01:02,ipv6_src=::,icmp_type=135 actions=push_vlan:0x8100,set_field:4098->vlan_vid,write_metadata:0x100000000/0xff7fff0000,goto_table:3",
        "table=1, priority=100,ip,in_port=3,dl_src=02:02:0a:01:01:02,nw_src=10.1.1.2 actions=push_vlan:0x8100,set_field:4098->vlan_vid,write_metadata:0x100000000/0xff7fff0000,goto_table:3",
        "table=1, priority=100,ipv6,in_port=3,dl_src=02:02:0a:01:01:02,ipv6_src=fe80::/10 actions=push_vlan:0x8100,set_field:4098->vlan_vid,write_metadata:0x100000000/0xff7fff0000,goto_table:3",
        "table=1, priority=100,tun_id=0x1388,in_port=9 actions=push_vlan:0x8100,set_field:4098->vlan_vid,write_metadata:0x100000001/0xff00000001,goto_table:6",
        "table=1, priority=100,udp,in_port=3,dl_src=02:02:0a:01:01:02,nw_src=0.0.0.0,tp_src=68,tp_dst=67 actions=push_vlan:0x8100,set_field:4098->vlan_vid,write_metadata:0x100000000/0xff7fff0000,goto_table:3",
        "table=1, priority=50,arp,in_port=3 actions=drop",
        "table=1, priority=50,ip,in_port=3 actions=drop",
        "table=1, priority=50,ipv6,in_port=3 actions=drop",
        "table=1, priority=10,in_port=3,dl_src=02:02:0a:01:01:02 actions=push_vlan:0x8100,set_field:4098->vlan_vid,write_metadata:0x100000000/0xff7fff0000,goto_table:3",
        "table=1, priority=5,in_port=3 actions=drop",
        "table=4, priority=100,ip,metadata=0x100000000/0xff00000000,nw_dst=10.1.1.2 actions=write_metadata:0/0xfffe,goto_table:5",
        "table=4, priority=100,ip,metadata=0x100000000/0xff00000000,nw_dst=10.1.1.3 actions=write_metadata:0/0xfffe,goto_table:5",
        "table=9, priority=100,dl_vlan=2,dl_dst=02:02:0a:01:01:02 actions=pop_vlan,output:3",
        "table=9, priority=100,dl_vlan=2,dl_dst=02:02:0a:01:01:03 actions=pop_vlan,set_field:0x1388->tun_id,output:9",
        "table=9, priority=10,metadata=0/0x1,dl_vlan=2 actions=group:5",
        "table=9, priority=10,metadata=0x1/0x1,dl_vlan=2 actions=group:4",
    ];

    pub(crate) const GOLDEN_GROUPS: &[&str] = &[
        "group_id=4,type=all,bucket=actions=pop_vlan,output:3",
        "group_id=5,type=all,bucket=actions=pop_vlan,output:3,bucket=actions=pop_vlan,set_field:0x1388->tun_id,output:9",
    ];

    #[test]
    fn golden_flow_table_and_groups() {
        let (t, s) = fixture();
        let d = VxlanBridge
            .desired(&Topology {
                endpoints: &t,
                settings: &s,
            })
            .unwrap();
        assert_eq!(
            d.flow_lines(),
            crate::text::sorted(GOLDEN.iter().map(|s| s.to_string()).collect())
        );
        assert_eq!(d.group_lines(), GOLDEN_GROUPS);
    }

    #[test]
    fn remote_endpoints_need_their_vtep_and_network() {
        let (t, mut s) = fixture();
        s.vteps.clear();
        let d = VxlanBridge
            .desired(&Topology {
                endpoints: &t,
                settings: &s,
            })
            .unwrap();
        assert!(
            !d.flow_lines().iter().any(|l| l.contains("tun_id")),
            "no VTEP: no tunnel flows, no remote MAC entry"
        );
        let mut t2 = t.clone();
        t2.apply(EndpointOp::RemoveRemote("10.1.1.3:t1".into()))
            .unwrap();
        let (_, s) = fixture();
        let d = VxlanBridge
            .desired(&Topology {
                endpoints: &t2,
                settings: &s,
            })
            .unwrap();
        assert!(
            !d.flow_lines()
                .iter()
                .any(|l| l.contains("02:02:0a:01:01:03") || l.contains("10.1.1.3"))
        );
    }

    #[test]
    fn a_remote_endpoint_claiming_a_local_mac_is_a_conflict() {
        let (mut t, s) = fixture();
        let mut remote = t.endpoint("10.1.1.3:t1").unwrap().clone();
        remote.endpoint_id = "10.1.1.4:t1".into();
        remote.ip_addr = Some(Ipv4Addr::new(10, 1, 1, 4));
        remote.mac = MacAddr([2, 2, 10, 1, 1, 2]);
        t.apply(EndpointOp::AddRemote(remote)).unwrap();
        let err = VxlanBridge
            .desired(&Topology {
                endpoints: &t,
                settings: &s,
            })
            .unwrap_err();
        assert!(matches!(err, DatapathError::Conflict { .. }), "{err}");
    }

    #[test]
    fn large_floods_are_split_over_several_groups() {
        let (mut t, mut s) = fixture();
        for n in 0..2500u32 {
            let [_, _, hi, lo] = (n + 10).to_be_bytes();
            t.apply(EndpointOp::AddLocal {
                endpoint: LocalEndpoint {
                    port_no: 100 + n,
                    mac: MacAddr([2, 3, 0, 0, hi, lo]),
                    vlan: 2,
                    ipv4: Some(Ipv4Addr::new(10, 2, hi, lo)),
                    ipv6: None,
                    epg: 0,
                    epg_vlan: 0,
                    dscp: 0,
                    bandwidth: None,
                },
                originator: None,
            })
            .unwrap();
        }
        s.vteps.insert(Ipv4Addr::new(192, 168, 77, 3), 10);
        let d = VxlanBridge
            .desired(&Topology {
                endpoints: &t,
                settings: &s,
            })
            .unwrap();
        // 2501 local ports; with the 2 VTEPs, 2503 buckets to flood everywhere.
        let sizes: Vec<(u32, usize)> = {
            let mut v: Vec<_> = d.groups().map(|g| (g.id, g.buckets.len())).collect();
            v.sort();
            v
        };
        let (l, a) = (local_flood_group(2), all_flood_group(2));
        assert_eq!(
            sizes,
            vec![
                (l, 1000),
                (a, 1000),
                (flood_chunk_group(l, 1), 1000),
                (flood_chunk_group(l, 2), 501),
                (flood_chunk_group(a, 1), 1000),
                (flood_chunk_group(a, 2), 503),
            ]
        );
        let lines = d.flow_lines();
        let flood_all = lines
            .iter()
            .find(|l| l.starts_with("table=9, priority=10,metadata=0/0x1"))
            .unwrap();
        assert!(
            flood_all.ends_with(&format!(
                "actions=group:{a},group:{},group:{}",
                flood_chunk_group(a, 1),
                flood_chunk_group(a, 2)
            )),
            "{flood_all}"
        );
    }

    #[test]
    fn unknown_arp_targets_go_to_every_vtep_with_the_vni() {
        let (t, mut s) = fixture();
        s.vteps.insert(Ipv4Addr::new(192, 168, 77, 3), 10);
        let outs = VxlanBridge.forward_arp(
            &Topology {
                endpoints: &t,
                settings: &s,
            },
            t.local(3).unwrap(),
            &[0; 42],
        );
        let acts: Vec<String> = outs
            .iter()
            .map(|o| crate::text::actions(&o.actions))
            .collect();
        assert_eq!(
            acts,
            vec![
                "set_field:0x1388->tun_id,output:9",
                "set_field:0x1388->tun_id,output:10"
            ]
        );
    }
}
