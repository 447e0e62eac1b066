//! The neighbour-discovery proxy: what to do with a neighbour solicitation the input table
//! punted to the controller (proxy mode; solicitations for link-local targets are not punted).
//!
//! It mirrors the ARP proxy ([`crate::arp`]) for IPv6:
//! - not an IPv6 neighbour solicitation (extension headers included): ignored;
//! - the port, and the network (endpoint's, 802.1Q tag's, VNI's), must be known;
//! - from a local endpoint whose Ethernet source, IPv6 source (other than its own address,
//!   `::` or a link-local address) or source link-layer option is not its own: ignored;
//! - for the endpoint's own address (duplicate address detection of itself): ignored;
//! - from a VTEP or uplink for a target that is not local here: ignored (its host answers);
//! - from a local endpoint, for the IPv6 VIP of a dual-stack service: answered with the MAC of
//!   the service's IPv4 VIP (`02:02:<IPv4 vip>`);
//! - target known in the network's VRF: answered with a neighbour advertisement carrying the
//!   target's MAC, out the ingress port (same tag; same VNI for a VTEP). A solicitation from
//!   `::` (duplicate address detection of an address in use) is answered to all nodes;
//! - target unknown, from a local endpoint: re-injected like an ARP request for an unknown
//!   target (to every VTEP, or out one uplink), so a router or host no agent knows answers.
//!
//! So a pod's solicitation for another pod, local or remote, never floods the fabric.
//!
//! A routing datapath answers, from local endpoints only, every target it can route to with
//! the router MAC, and re-injects nothing (as [`crate::arp`] does).

use crate::arp::Ingress;
use crate::datapath::{Datapath, PacketOut, Topology};
use ofproto::packet::ethernet::{EtherType, EthernetAddress, Frame, VlanTag};
use ofproto::packet::icmpv6::NeighborFlags;
use ofproto::packet::{
    ChecksumCheck, EthernetRepr, Icmpv6Packet, Icmpv6Repr, IpProtocol, Ipv6Packet, Ipv6Repr,
};
use std::net::Ipv6Addr;

/// What the proxy did with a solicitation; the name is the inspect statistics counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Replied,
    Reinjected,
    NotSolicit,
    UnknownPort,
    UnknownNetwork,
    Spoofed,
    OwnAddress,
    NotLocalTarget,
}

impl Outcome {
    pub fn counter(self) -> &'static str {
        match self {
            Outcome::Replied => "NdSolicitRespSent",
            Outcome::Reinjected => "NdSolicitReinject",
            Outcome::NotSolicit => "NdPktParse-ERROR",
            Outcome::UnknownPort => "NdSolicitUnknownPort",
            Outcome::UnknownNetwork => "NdSolicitUnknownNetwork",
            Outcome::Spoofed => "NdSolicitSpoofed",
            Outcome::OwnAddress => "NdSolicitOwnAddress",
            Outcome::NotLocalTarget => "NdSolicitNonLocalTarget",
        }
    }
}

/// The parts of a neighbour solicitation the proxy needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Solicit {
    pub eth_src: [u8; 6],
    pub vlan: Option<VlanTag>,
    pub ip_src: Ipv6Addr,
    pub target: Ipv6Addr,
    pub source_lladdr: Option<[u8; 6]>,
}

/// True for an IPv6 frame (tagged or not): what the agent hands to [`handle_solicit`].
pub fn is_ipv6(data: &[u8]) -> bool {
    Frame::new_checked(data)
        .map(|f| f.payload_ethertype() == EtherType::Ipv6)
        .unwrap_or(false)
}

/// Take an Ethernet + IPv6 + ICMPv6 neighbour solicitation apart.
pub fn parse_solicit(data: &[u8]) -> Option<Solicit> {
    let frame = Frame::new_checked(data).ok()?;
    let eth = EthernetRepr::parse(&frame).ok()?;
    if eth.ethertype != EtherType::Ipv6 {
        return None;
    }
    let ip_packet = Ipv6Packet::new_checked(frame.payload()).ok()?;
    let ip = Ipv6Repr::parse(&ip_packet).ok()?;
    if ip.next_header != IpProtocol::Icmpv6 {
        return None;
    }
    let payload = ip_packet.payload();
    let icmp_packet = Icmpv6Packet::new_checked(payload).ok()?;
    match Icmpv6Repr::parse(
        &icmp_packet,
        &ip.src_addr,
        &ip.dst_addr,
        ChecksumCheck::Ignore,
    )
    .ok()?
    {
        Icmpv6Repr::NeighborSolicit {
            target_addr,
            source_lladdr,
        } => Some(Solicit {
            eth_src: eth.src_addr.0,
            vlan: eth.vlan,
            ip_src: ip.src_addr,
            target: target_addr,
            source_lladdr: source_lladdr.map(|a| a.0),
        }),
        _ => None,
    }
}

fn is_link_local(a: Ipv6Addr) -> bool {
    a.segments()[0] & 0xffc0 == 0xfe80
}

/// The solicited-node multicast address of `a` (RFC 4291 §2.7.1).
pub fn solicited_node(a: Ipv6Addr) -> Ipv6Addr {
    let o = a.octets();
    Ipv6Addr::from([
        0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, o[13], o[14], o[15],
    ])
}

/// The Ethernet multicast address of an IPv6 multicast address (RFC 2464 §7).
fn multicast_mac(a: Ipv6Addr) -> [u8; 6] {
    let o = a.octets();
    [0x33, 0x33, o[12], o[13], o[14], o[15]]
}

/// An Ethernet + IPv6 + ICMPv6 frame carrying `icmp` from `src` to `dst` (hop limit 255,
/// checksum filled).
pub fn icmpv6_frame(
    eth: EthernetRepr,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    icmp: &Icmpv6Repr<'_>,
) -> Vec<u8> {
    let ip = Ipv6Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: IpProtocol::Icmpv6,
        payload_len: icmp.buffer_len(),
        hop_limit: 255,
        traffic_class: 0,
        flow_label: 0,
    };
    let mut bytes = vec![0; eth.buffer_len() + ip.buffer_len() + icmp.buffer_len()];
    let mut frame = Frame::new_unchecked(&mut bytes[..]);
    eth.emit(&mut frame);
    let mut ip_packet = Ipv6Packet::new_unchecked(frame.payload_mut());
    ip.emit(&mut ip_packet);
    icmp.emit(
        &mut Icmpv6Packet::new_unchecked(ip_packet.payload_mut()),
        &src,
        &dst,
    );
    bytes
}

/// A neighbour solicitation frame from `mac`/`src` for `target`, to its solicited-node
/// multicast address (what a host sends to resolve `target`).
pub fn neighbor_solicit(
    mac: [u8; 6],
    src: Ipv6Addr,
    target: Ipv6Addr,
    vlan: Option<VlanTag>,
) -> Vec<u8> {
    let dst = solicited_node(target);
    let icmp = Icmpv6Repr::NeighborSolicit {
        target_addr: target,
        source_lladdr: (!src.is_unspecified()).then_some(EthernetAddress(mac)),
    };
    let eth = EthernetRepr {
        src_addr: EthernetAddress(mac),
        dst_addr: EthernetAddress(multicast_mac(dst)),
        vlan,
        ethertype: EtherType::Ipv6,
    };
    icmpv6_frame(eth, src, dst, &icmp)
}

/// The neighbour advertisement answering `ns`: `ns.target` is at `mac`.
pub fn neighbor_advert(ns: &Solicit, mac: [u8; 6]) -> Vec<u8> {
    // A solicitation from `::` (duplicate address detection) is answered to all nodes.
    let (dst, dst_mac, solicited) = if ns.ip_src.is_unspecified() {
        let all_nodes = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
        (all_nodes, multicast_mac(all_nodes), false)
    } else {
        (ns.ip_src, ns.eth_src, true)
    };
    let icmp = Icmpv6Repr::NeighborAdvert {
        flags: NeighborFlags {
            router: false,
            solicited,
            override_: true,
        },
        target_addr: ns.target,
        target_lladdr: Some(EthernetAddress(mac)),
    };
    let eth = EthernetRepr {
        src_addr: EthernetAddress(mac),
        dst_addr: EthernetAddress(dst_mac),
        vlan: ns.vlan,
        ethertype: EtherType::Ipv6,
    };
    icmpv6_frame(eth, ns.target, dst, &icmp)
}

/// An unsolicited neighbour advertisement (RFC 4861 §7.2.6, the GARP's IPv6 twin): `ip` is at
/// `mac`, to all nodes, override set, solicited clear.
pub fn unsolicited_advert(mac: [u8; 6], ip: Ipv6Addr, vlan: Option<VlanTag>) -> Vec<u8> {
    let all_nodes = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
    let icmp = Icmpv6Repr::NeighborAdvert {
        flags: NeighborFlags {
            router: false,
            solicited: false,
            override_: true,
        },
        target_addr: ip,
        target_lladdr: Some(EthernetAddress(mac)),
    };
    let eth = EthernetRepr {
        src_addr: EthernetAddress(mac),
        dst_addr: EthernetAddress(multicast_mac(all_nodes)),
        vlan,
        ethertype: EtherType::Ipv6,
    };
    icmpv6_frame(eth, ip, all_nodes, &icmp)
}

/// Decide about one punted frame; returns the packets to send and what happened.
pub fn handle_solicit(
    datapath: &dyn Datapath,
    topo: &Topology<'_>,
    in_port: u32,
    tun_id: Option<u64>,
    data: &[u8],
) -> (Vec<PacketOut>, Outcome) {
    let Some(ns) = parse_solicit(data) else {
        return (Vec::new(), Outcome::NotSolicit);
    };
    let Some(ingress) = Ingress::of(topo, in_port, tun_id) else {
        return (Vec::new(), Outcome::UnknownPort);
    };
    let Some(network) = ingress.network(topo, ns.vlan) else {
        return (Vec::new(), Outcome::UnknownNetwork);
    };
    if let Ingress::Endpoint(ep) = ingress {
        let mac = ep.mac.octets();
        let src_ok = ns.ip_src.is_unspecified()
            || is_link_local(ns.ip_src)
            || Some(ns.ip_src) == ep.ipv6_addr;
        if ns.eth_src != mac || !src_ok || ns.source_lladdr.is_some_and(|l| l != mac) {
            return (Vec::new(), Outcome::Spoofed);
        }
        if Some(ns.target) == ep.ipv6_addr {
            return (Vec::new(), Outcome::OwnAddress);
        }
    }
    let from_local = matches!(ingress, Ingress::Endpoint(_));
    if from_local && let Some(spec) = topo.settings.services.by_vip6(ns.target) {
        // A dual-stack service's IPv6 VIP is at the MAC of its IPv4 VIP.
        return (
            vec![PacketOut {
                actions: ingress.reply_actions(in_port),
                data: neighbor_advert(&ns, spec.vip_mac()),
            }],
            Outcome::Replied,
        );
    }
    let dst = topo.endpoints.find(ns.target.into(), &network.vrf);
    if let Some(router) = datapath.router_mac() {
        return match dst {
            Some(_) if from_local => (
                vec![PacketOut {
                    actions: ingress.reply_actions(in_port),
                    data: neighbor_advert(&ns, router),
                }],
                Outcome::Replied,
            ),
            _ => (Vec::new(), Outcome::NotLocalTarget),
        };
    }
    match (ingress, dst) {
        (_, Some(d)) if from_local || d.is_local() => (
            vec![PacketOut {
                actions: ingress.reply_actions(in_port),
                data: neighbor_advert(&ns, d.mac.octets()),
            }],
            Outcome::Replied,
        ),
        (Ingress::Endpoint(src), _) => (datapath.forward_arp(topo, src, data), Outcome::Reinjected),
        _ => (Vec::new(), Outcome::NotLocalTarget),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datapath::Settings;
    use crate::epdb::{EndpointOp, EndpointTable};
    use crate::fixtures::mac_of;
    use crate::flows::set_tun_id;
    use crate::model::LocalEndpoint;
    use crate::{VlanBridge, VxlanBridge};
    use ofproto::action::Action;
    use std::net::Ipv4Addr;

    const A4: Ipv4Addr = Ipv4Addr::new(10, 1, 1, 2);
    const B4: Ipv4Addr = Ipv4Addr::new(10, 1, 1, 3);
    const R4: Ipv4Addr = Ipv4Addr::new(10, 1, 1, 9);
    const A: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);
    const B: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 3);
    const REMOTE: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 9);
    const STRANGER: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 0xc8);

    /// VXLAN network VNI 5000 on local VLAN 2: dual-stack A (port 3) and B (port 4) here,
    /// dual-stack REMOTE behind the VTEP on port 9.
    fn fixture() -> (EndpointTable, Settings) {
        let mut t = crate::fixtures::endpoint_table(2, 5000, &[], None);
        for (port, v4, v6) in [(3, A4, A), (4, B4, B)] {
            t.apply(EndpointOp::AddLocal {
                endpoint: LocalEndpoint {
                    port_no: port,
                    mac: mac_of(v4),
                    vlan: 2,
                    ipv4: Some(v4),
                    ipv6: Some(v6),
                    epg: 0,
                    epg_vlan: 0,
                    dscp: 0,
                    bandwidth: None,
                },
                originator: None,
            })
            .unwrap();
        }
        let mut r = t.local(3).unwrap().clone();
        r.port_no = 0;
        r.endpoint_id = format!("{R4}:t1");
        r.ip_addr = Some(R4);
        r.ipv6_addr = Some(REMOTE);
        r.mac = mac_of(R4);
        r.originator_ip = Some(Ipv4Addr::new(192, 168, 77, 2));
        t.apply(EndpointOp::AddRemote(r)).unwrap();
        let mut s = Settings::default();
        s.vteps.insert(Ipv4Addr::new(192, 168, 77, 2), 9);
        (t, s)
    }

    fn run(in_port: u32, tun: Option<u64>, data: &[u8]) -> (Vec<PacketOut>, Outcome) {
        let (t, s) = fixture();
        handle_solicit(
            &VxlanBridge,
            &Topology {
                endpoints: &t,
                settings: &s,
            },
            in_port,
            tun,
            data,
        )
    }

    fn advert(frame: &[u8]) -> (EthernetRepr, Ipv6Repr, Ipv6Addr, NeighborFlags, [u8; 6]) {
        let f = Frame::new_checked(frame).unwrap();
        let eth = EthernetRepr::parse(&f).unwrap();
        let ipp = Ipv6Packet::new_checked(f.payload()).unwrap();
        let ip = Ipv6Repr::parse(&ipp).unwrap();
        let icmp = Icmpv6Packet::new_checked(ipp.payload()).unwrap();
        match Icmpv6Repr::parse(&icmp, &ip.src_addr, &ip.dst_addr, ChecksumCheck::Verify).unwrap() {
            Icmpv6Repr::NeighborAdvert {
                flags,
                target_addr,
                target_lladdr,
            } => (eth, ip, target_addr, flags, target_lladdr.unwrap().0),
            other => panic!("not an advertisement: {other:?}"),
        }
    }

    #[test]
    fn an_unsolicited_advertisement_announces_the_address_to_all_nodes() {
        let mac = mac_of(A4).octets();
        let tag = VlanTag {
            pcp: 0,
            dei: false,
            vid: 7,
        };
        let (eth, ip, target, flags, lladdr) = advert(&unsolicited_advert(mac, A, Some(tag)));
        assert_eq!(eth.dst_addr.0, [0x33, 0x33, 0, 0, 0, 1]);
        assert_eq!(eth.src_addr.0, mac);
        assert_eq!(eth.vlan.map(|v| v.vid), Some(7));
        assert_eq!(ip.src_addr, A);
        assert_eq!(ip.dst_addr, Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1));
        assert_eq!(ip.hop_limit, 255);
        assert_eq!((target, lladdr), (A, mac));
        assert!(flags.override_ && !flags.solicited && !flags.router);
    }

    #[test]
    fn a_known_target_local_or_remote_is_advertised_out_the_ingress_port() {
        let a_mac = mac_of(A4).octets();
        for (target, mac) in [(B, mac_of(B4)), (REMOTE, mac_of(R4))] {
            let (outs, o) = run(3, None, &neighbor_solicit(a_mac, A, target, None));
            assert_eq!(o, Outcome::Replied, "{target}");
            assert_eq!(outs.len(), 1);
            assert_eq!(outs[0].actions, vec![Action::output(3u32)]);
            let (eth, ip, t, flags, tll) = advert(&outs[0].data);
            assert_eq!((eth.src_addr.0, eth.dst_addr.0), (mac.octets(), a_mac));
            assert_eq!((ip.src_addr, ip.dst_addr, ip.hop_limit), (target, A, 255));
            assert_eq!((t, tll), (target, mac.octets()));
            assert!(flags.solicited && flags.override_ && !flags.router);
        }
    }

    #[test]
    fn duplicate_address_detection_of_an_address_in_use_is_answered_to_all_nodes() {
        let a_mac = mac_of(A4).octets();
        let (outs, o) = run(
            3,
            None,
            &neighbor_solicit(a_mac, Ipv6Addr::UNSPECIFIED, B, None),
        );
        assert_eq!(o, Outcome::Replied);
        let (eth, ip, _, flags, _) = advert(&outs[0].data);
        assert_eq!(eth.dst_addr.0, [0x33, 0x33, 0, 0, 0, 1]);
        assert_eq!(ip.dst_addr, Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1));
        assert!(!flags.solicited);
        // Its own address: no answer, or the pod would give it up.
        assert_eq!(
            run(
                3,
                None,
                &neighbor_solicit(a_mac, Ipv6Addr::UNSPECIFIED, A, None)
            )
            .1,
            Outcome::OwnAddress
        );
    }

    #[test]
    fn spoofed_solicitations_are_ignored() {
        let a_mac = mac_of(A4).octets();
        let b_mac = mac_of(B4).octets();
        // B's MAC, or B's address, from A's port.
        assert_eq!(
            run(3, None, &neighbor_solicit(b_mac, A, REMOTE, None)).1,
            Outcome::Spoofed
        );
        assert_eq!(
            run(3, None, &neighbor_solicit(a_mac, B, REMOTE, None)).1,
            Outcome::Spoofed
        );
        // A's own link-local source is fine.
        let ll = crate::flows::eui64_link_local(a_mac);
        assert_eq!(
            run(3, None, &neighbor_solicit(a_mac, ll, B, None)).1,
            Outcome::Replied
        );
    }

    #[test]
    fn from_a_vtep_only_local_targets_are_answered_with_the_vni() {
        let r_mac = mac_of(R4).octets();
        let (outs, o) = run(9, Some(5000), &neighbor_solicit(r_mac, REMOTE, A, None));
        assert_eq!(o, Outcome::Replied);
        assert_eq!(
            outs[0].actions,
            vec![set_tun_id(5000), Action::output(9u32)]
        );
        assert_eq!(
            run(
                9,
                Some(5000),
                &neighbor_solicit(r_mac, REMOTE, STRANGER, None)
            )
            .1,
            Outcome::NotLocalTarget
        );
        assert_eq!(
            run(9, Some(6000), &neighbor_solicit(r_mac, REMOTE, A, None)).1,
            Outcome::UnknownNetwork
        );
    }

    #[test]
    fn unknown_targets_are_reinjected_and_garbage_is_ignored() {
        let a_mac = mac_of(A4).octets();
        let ns = neighbor_solicit(a_mac, A, STRANGER, None);
        let (outs, o) = run(3, None, &ns);
        assert_eq!(o, Outcome::Reinjected);
        assert_eq!(outs.len(), 1);
        assert_eq!(
            outs[0].actions,
            vec![set_tun_id(5000), Action::output(9u32)]
        );
        assert_eq!(outs[0].data, ns);
        assert_eq!(run(77, None, &ns).1, Outcome::UnknownPort);
        assert_eq!(run(3, None, &[0u8; 20]).1, Outcome::NotSolicit);
        let arp = ofproto::packet::frame::arp_request(EthernetAddress(a_mac), A4, B4, None);
        assert_eq!(run(3, None, &arp).1, Outcome::NotSolicit);
        assert!(!is_ipv6(&arp) && is_ipv6(&ns));
    }

    #[test]
    fn vlan_uplink_solicitations_keep_their_tag() {
        let (t, mut s) = fixture();
        s.uplinks.insert(1);
        let tag = VlanTag {
            pcp: 0,
            dei: false,
            vid: 2,
        };
        let ns = neighbor_solicit([2, 9, 9, 9, 9, 9], STRANGER, A, Some(tag));
        let (outs, o) = handle_solicit(
            &VlanBridge,
            &Topology {
                endpoints: &t,
                settings: &s,
            },
            1,
            None,
            &ns,
        );
        assert_eq!(o, Outcome::Replied);
        let (eth, ..) = advert(&outs[0].data);
        assert_eq!(eth.vlan.map(|v| v.vid), Some(2));
    }
}
