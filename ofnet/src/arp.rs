//! The ARP proxy: what to do with an ARP request the input table punted to the controller.
//!
//! The decision is a pure function of the request, where it came in, and the topology:
//! - a gratuitous ARP (sender address = target address) or anything but a request: ignored;
//! - the request's VLAN is its port's network for endpoint ports, the 802.1Q tag for uplinks,
//!   the VNI's network for VTEPs; the VRF is that network's; sender and target are looked up as
//!   `<ip>:<vrf>`;
//! - from a local endpoint with a sender MAC (Ethernet or ARP) or address (other than 0.0.0.0,
//!   a probe) that is not the endpoint's: ignored (the spoof guard for punted requests);
//! - neither known: ignored;
//! - from a VTEP or uplink, and the target is not local here: ignored (its own host answers);
//! - from a local endpoint, for the VIP of a service: answered with `02:02:<vip>`;
//! - target known, and sender known or target local: answered with the target's MAC, out the
//!   ingress port (same VLAN tag; same VNI for a VTEP);
//! - sender known, target unknown (a router or VM no agent knows): re-injected by the
//!   datapath, toward every VTEP or out one uplink.
//!
//! A routing datapath ([`Datapath::router_mac`]) answers differently: only requests from local
//! endpoints, and only for a target it can route to (an endpoint of the VRF on any host, or
//! the network's gateway, or an address of a prefix BGP learned), always with the router MAC;
//! nothing is re-injected. On the VXLAN router's host NAT port, the host's requests for
//! addresses of the private subnet (the pods' private addresses) are answered with the router
//! MAC.

use crate::datapath::{Datapath, PacketOut, Topology};
use crate::flows::set_tun_id;
use crate::model::{Endpoint, Network};
use ofproto::action::Action;
use ofproto::packet::arp::Operation;
use ofproto::packet::ethernet::{EthernetAddress, VlanTag};
use ofproto::packet::frame;

/// What the proxy did with a request; the name is the inspect statistics counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Replied,
    Reinjected,
    NotArp,
    NotRequest,
    Gratuitous,
    UnknownPort,
    UnknownNetwork,
    UnknownSrcDst,
    /// From a VTEP or uplink for a target that is not local.
    NotLocalTarget,
    /// From a local port, target known elsewhere, sender unknown.
    UnknownSrc,
    /// From a local endpoint, with a sender MAC or address that is not the endpoint's.
    Spoofed,
    /// Routing: a target that is neither an endpoint of the VRF nor the gateway.
    NotRoutable,
}

impl Outcome {
    pub fn counter(self) -> &'static str {
        match self {
            Outcome::Replied => "ArpReqRespSent",
            Outcome::Reinjected => "ArpReqReinject",
            Outcome::NotArp => "ArpPktParse-ERROR",
            Outcome::NotRequest => "ArpNotRequest",
            Outcome::Gratuitous => "ArpGratuitousIgnored",
            Outcome::UnknownPort => "ArpReqUnknownPort",
            Outcome::UnknownNetwork => "ArpReqUnknownNetwork",
            Outcome::UnknownSrcDst => "ArpRequestUnknownSrcDst",
            Outcome::NotLocalTarget => "ArpReqNonLocalTarget",
            Outcome::UnknownSrc => "ArpReqUnknownSrc",
            Outcome::Spoofed => "ArpReqSpoofed",
            Outcome::NotRoutable => "ArpReqNotRoutable",
        }
    }
}

/// Where a punted packet came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ingress<'a> {
    Endpoint(&'a Endpoint),
    Uplink,
    Vtep { vni: u32 },
}

impl<'a> Ingress<'a> {
    /// The kind of port `in_port` is (`tun_id`: the VNI a VTEP packet came with).
    pub fn of(topo: &Topology<'a>, in_port: u32, tun_id: Option<u64>) -> Option<Ingress<'a>> {
        let s = topo.settings;
        if let Some(ep) = topo.endpoints.local(in_port) {
            Some(Ingress::Endpoint(ep))
        } else if s.uplinks.contains(&in_port) {
            Some(Ingress::Uplink)
        } else if s.vteps.values().any(|p| *p == in_port) {
            Some(Ingress::Vtep {
                vni: tun_id.unwrap_or(0) as u32,
            })
        } else {
            None
        }
    }

    /// The network a packet from here belongs to: the endpoint's, the 802.1Q tag's (uplink),
    /// the VNI's (VTEP).
    pub fn network(self, topo: &Topology<'a>, tag: Option<VlanTag>) -> Option<&'a Network> {
        match self {
            Ingress::Endpoint(ep) => topo.endpoints.network(ep.vlan),
            Ingress::Uplink => tag.and_then(|t| topo.endpoints.network(t.vid)),
            Ingress::Vtep { vni } => topo.endpoints.network_by_vni(vni),
        }
    }

    /// The actions sending a reply back where the request came from.
    pub fn reply_actions(self, in_port: u32) -> Vec<Action> {
        let mut actions = Vec::new();
        if let Ingress::Vtep { vni } = self {
            actions.push(set_tun_id(vni));
        }
        actions.push(Action::output(in_port));
        actions
    }
}

/// Decide about one punted frame; returns the packets to send and what happened.
pub fn handle_request(
    datapath: &dyn Datapath,
    topo: &Topology<'_>,
    in_port: u32,
    tun_id: Option<u64>,
    data: &[u8],
) -> (Vec<PacketOut>, Outcome) {
    let Ok((eth, arp)) = frame::parse_arp(data) else {
        return (Vec::new(), Outcome::NotArp);
    };
    if arp.operation != Operation::Request {
        return (Vec::new(), Outcome::NotRequest);
    }
    if arp.source_protocol_addr == arp.target_protocol_addr {
        return (Vec::new(), Outcome::Gratuitous);
    }
    // The host NAT port (VXLAN router): the host asks for the pods' private addresses, all
    // behind the router.
    if let (Some(router), Some(nat)) = (datapath.router_mac(), topo.settings.host_nat)
        && in_port == nat.port
    {
        let target = arp.target_protocol_addr;
        if !nat.subnet.contains(&target) || target == nat.ip {
            return (Vec::new(), Outcome::NotRoutable);
        }
        return (
            vec![reply_out(&arp, router, eth.vlan, in_port)],
            Outcome::Replied,
        );
    }
    let Some(ingress) = Ingress::of(topo, in_port, tun_id) else {
        return (Vec::new(), Outcome::UnknownPort);
    };
    let Some(network) = ingress.network(topo, eth.vlan) else {
        return (Vec::new(), Outcome::UnknownNetwork);
    };
    if let Ingress::Endpoint(ep) = ingress {
        // Table 1's spoof guard never sees punted requests: check the sender here. A probe
        // (sender address 0.0.0.0) claims no address.
        let mac = ep.mac.octets();
        let spa = arp.source_protocol_addr;
        if eth.src_addr.0 != mac
            || arp.source_hardware_addr.0 != mac
            || !(spa.is_unspecified() || Some(spa) == ep.ip_addr)
        {
            return (Vec::new(), Outcome::Spoofed);
        }
    }
    let from_local = matches!(ingress, Ingress::Endpoint(_));
    if from_local && topo.settings.services.is_vip(arp.target_protocol_addr) {
        let mac = crate::service::vip_mac(arp.target_protocol_addr);
        return (
            vec![reply_out(&arp, mac, eth.vlan, in_port)],
            Outcome::Replied,
        );
    }
    if let Some(router) = datapath.router_mac() {
        let target = arp.target_protocol_addr;
        let routable = network.gateway == Some(target)
            || topo.endpoints.find(target.into(), &network.vrf).is_some()
            || topo.settings.routes.keys().any(|p| p.contains(&target));
        if !from_local {
            return (Vec::new(), Outcome::NotLocalTarget);
        }
        if !routable {
            return (Vec::new(), Outcome::NotRoutable);
        }
        return (
            vec![reply_out(&arp, router, eth.vlan, in_port)],
            Outcome::Replied,
        );
    }
    let src = topo
        .endpoints
        .find(arp.source_protocol_addr.into(), &network.vrf);
    let dst = topo
        .endpoints
        .find(arp.target_protocol_addr.into(), &network.vrf);
    if src.is_none() && dst.is_none() {
        return (Vec::new(), Outcome::UnknownSrcDst);
    }
    if !from_local && !dst.is_some_and(Endpoint::is_local) {
        return (Vec::new(), Outcome::NotLocalTarget);
    }
    match (src, dst) {
        (_, Some(d)) if src.is_some() || d.is_local() => {
            let reply = frame::arp_reply(&arp, EthernetAddress(d.mac.octets()), eth.vlan);
            (
                vec![PacketOut {
                    actions: ingress.reply_actions(in_port),
                    data: reply,
                }],
                Outcome::Replied,
            )
        }
        (Some(s), None) => (datapath.forward_arp(topo, s, data), Outcome::Reinjected),
        _ => (Vec::new(), Outcome::UnknownSrc),
    }
}

/// The answer to `request` claiming `mac`, sent back out the port it came in on.
fn reply_out(
    request: &ofproto::packet::ArpRepr,
    mac: [u8; 6],
    vlan: Option<VlanTag>,
    in_port: u32,
) -> PacketOut {
    PacketOut {
        actions: vec![Action::output(in_port)],
        data: frame::arp_reply(request, EthernetAddress(mac), vlan),
    }
}

/// The gratuitous ARP announcing a local endpoint on the VLAN bridge's uplink: tagged with the
/// endpoint's uplink VLAN, out the uplink its MAC hashes to.
pub fn garp(topo: &Topology<'_>, ep: &Endpoint) -> Option<PacketOut> {
    let ip = ep.ip_addr?;
    let uplink = crate::VlanBridge::uplink_for(topo, ep.mac.octets())?;
    let tag = VlanTag {
        pcp: 0,
        dei: false,
        vid: crate::VlanBridge::uplink_vlan(ep),
    };
    Some(PacketOut {
        actions: vec![Action::output(uplink)],
        data: frame::gratuitous_arp(EthernetAddress(ep.mac.octets()), ip, Some(tag)),
    })
}

/// The IPv6 twin of [`garp`]: an unsolicited neighbour advertisement of the endpoint's IPv6
/// address, out the same uplink with the same tag (`None` without an IPv6 address or uplink).
pub fn unsolicited_na(topo: &Topology<'_>, ep: &Endpoint) -> Option<PacketOut> {
    let ip = ep.ipv6_addr?;
    let uplink = crate::VlanBridge::uplink_for(topo, ep.mac.octets())?;
    let tag = VlanTag {
        pcp: 0,
        dei: false,
        vid: crate::VlanBridge::uplink_vlan(ep),
    };
    Some(PacketOut {
        actions: vec![Action::output(uplink)],
        data: crate::nd::unsolicited_advert(ep.mac.octets(), ip, Some(tag)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datapath::Settings;
    use crate::epdb::{EndpointOp, EndpointTable};
    use crate::{VlanBridge, VxlanBridge};
    use std::net::Ipv4Addr;

    const A: Ipv4Addr = Ipv4Addr::new(10, 1, 1, 2);
    const B: Ipv4Addr = Ipv4Addr::new(10, 1, 1, 3);
    const REMOTE: Ipv4Addr = Ipv4Addr::new(10, 1, 1, 9);
    const STRANGER: Ipv4Addr = Ipv4Addr::new(10, 1, 1, 200);

    use crate::fixtures::{endpoint_table, mac_of as mac};

    /// VXLAN: A on port 3, B on port 4, REMOTE behind VTEP port 9; one network, VNI 5000.
    fn fixture() -> (EndpointTable, Settings) {
        let mut t = endpoint_table(2, 5000, &[(3, A), (4, B)], None);
        let mut r = t.local(3).unwrap().clone();
        r.port_no = 0;
        r.endpoint_id = format!("{REMOTE}:t1");
        r.ip_addr = Some(REMOTE);
        r.mac = mac(REMOTE);
        r.originator_ip = Some(Ipv4Addr::new(192, 168, 77, 2));
        t.apply(EndpointOp::AddRemote(r)).unwrap();
        let mut s = Settings::default();
        s.vteps.insert(Ipv4Addr::new(192, 168, 77, 2), 9);
        s.uplinks.insert(1);
        (t, s)
    }

    fn request(from: Ipv4Addr, to: Ipv4Addr) -> Vec<u8> {
        frame::arp_request(EthernetAddress(mac(from).octets()), from, to, None)
    }

    fn run(in_port: u32, tun: Option<u64>, data: &[u8]) -> (Vec<PacketOut>, Outcome) {
        let (t, s) = fixture();
        handle_request(
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

    #[test]
    fn known_target_is_answered_out_the_ingress_port_with_its_mac() {
        let (outs, o) = run(3, None, &request(A, B));
        assert_eq!(o, Outcome::Replied);
        assert_eq!(outs[0].actions, vec![Action::output(3u32)]);
        let (_, reply) = frame::parse_arp(&outs[0].data).unwrap();
        assert_eq!(reply.operation, Operation::Reply);
        assert_eq!(reply.source_hardware_addr.0, mac(B).octets());
        assert_eq!(reply.source_protocol_addr, B);
        assert_eq!(reply.target_protocol_addr, A);
        // A remote target is answered from here too.
        assert_eq!(run(3, None, &request(A, REMOTE)).1, Outcome::Replied);
    }

    #[test]
    fn routing_answers_routable_targets_and_the_gateway_with_the_router_mac_only() {
        let (all, s) = fixture();
        let gw = Ipv4Addr::new(10, 1, 0, 1);
        // The fixture's endpoints, in a network with a gateway.
        let mut t = EndpointTable::new();
        t.apply(EndpointOp::AddNetwork(crate::model::Network {
            vlan: 2,
            vni: 5000,
            gateway: Some(gw),
            vrf: "t1".into(),
        }))
        .unwrap();
        for ep in all.endpoints() {
            let op = match all.local(ep.port_no).filter(|_| ep.is_local()) {
                Some(_) => EndpointOp::AddLocal {
                    endpoint: crate::model::LocalEndpoint {
                        port_no: ep.port_no,
                        mac: ep.mac,
                        vlan: 2,
                        ipv4: ep.ip_addr,
                        ipv6: None,
                        epg: 0,
                        epg_vlan: 0,
                        dscp: 0,
                        bandwidth: None,
                    },
                    originator: None,
                },
                None => EndpointOp::AddRemote(ep.clone()),
            };
            t.apply(op).unwrap();
        }
        let topo = Topology {
            endpoints: &t,
            settings: &s,
        };
        let run =
            |port, tun, data: &[u8]| handle_request(&crate::VrouterBridge, &topo, port, tun, data);
        for target in [B, REMOTE, gw] {
            let (outs, o) = run(3, None, &request(A, target));
            assert_eq!(o, Outcome::Replied, "{target}");
            assert_eq!(outs[0].actions, vec![Action::output(3u32)]);
            let (_, reply) = frame::parse_arp(&outs[0].data).unwrap();
            assert_eq!(reply.source_hardware_addr.0, [0, 0, 0x11, 0x11, 0x11, 0x11]);
            assert_eq!(reply.source_protocol_addr, target);
        }
        let (outs, o) = run(3, None, &request(A, STRANGER));
        assert_eq!(
            (outs.len(), o),
            (0, Outcome::NotRoutable),
            "nothing re-injected"
        );
        assert_eq!(
            run(9, Some(5000), &request(REMOTE, A)).1,
            Outcome::NotLocalTarget,
            "nothing answered across hosts"
        );
    }

    #[test]
    fn a_service_vip_is_answered_with_its_proxy_mac_from_local_ports_only() {
        use crate::service::{ServicePort, ServiceProtocol, ServiceSpec};
        let vip = Ipv4Addr::new(10, 254, 0, 10);
        let (t, mut s) = fixture();
        let topo = |s: &Settings| {
            handle_request(
                &VxlanBridge,
                &Topology {
                    endpoints: &t,
                    settings: s,
                },
                3,
                None,
                &request(A, vip),
            )
        };
        let spec = ServiceSpec {
            affinity_timeout: None,
            vip6: None,
            vip,
            ports: vec![ServicePort {
                protocol: ServiceProtocol::Tcp,
                svc_port: 80,
                prov_port: 8080,
            }],
        };
        s.services.set_providers("web", [B]);
        assert_eq!(
            topo(&s).1,
            Outcome::Reinjected,
            "providers without a spec: no VIP yet, treated as any unknown target"
        );
        s.services.set_spec("web", spec).unwrap();
        let (outs, o) = topo(&s);
        assert_eq!(o, Outcome::Replied);
        let (_, reply) = frame::parse_arp(&outs[0].data).unwrap();
        assert_eq!(reply.source_hardware_addr.0, [2, 2, 10, 254, 0, 10]);
        assert_eq!(reply.source_protocol_addr, vip);
        assert_eq!(outs[0].actions, vec![Action::output(3u32)]);
        let from_vtep = handle_request(
            &VxlanBridge,
            &Topology {
                endpoints: &t,
                settings: &s,
            },
            9,
            Some(5000),
            &request(REMOTE, vip),
        );
        assert_eq!(from_vtep.1, Outcome::NotLocalTarget);
    }

    #[test]
    fn from_a_vtep_only_local_targets_are_answered_with_the_vni() {
        let (outs, o) = run(9, Some(5000), &request(REMOTE, A));
        assert_eq!(o, Outcome::Replied);
        assert_eq!(
            outs[0].actions,
            vec![set_tun_id(5000), Action::output(9u32)]
        );
        assert_eq!(
            run(9, Some(5000), &request(REMOTE, STRANGER)).1,
            Outcome::NotLocalTarget
        );
        assert_eq!(
            run(9, Some(6000), &request(REMOTE, A)).1,
            Outcome::UnknownNetwork
        );
    }

    #[test]
    fn unknown_target_from_a_known_source_is_reinjected_to_every_vtep() {
        let (outs, o) = run(3, None, &request(A, STRANGER));
        assert_eq!(o, Outcome::Reinjected);
        assert_eq!(outs.len(), 1);
        assert_eq!(
            outs[0].actions,
            vec![set_tun_id(5000), Action::output(9u32)]
        );
        assert_eq!(
            outs[0].data,
            request(A, STRANGER),
            "the request itself goes on"
        );
    }

    #[test]
    fn garps_unknown_pairs_replies_and_strange_ports_are_ignored() {
        assert_eq!(run(3, None, &request(A, A)).1, Outcome::Gratuitous);
        assert_eq!(
            run(
                9,
                Some(5000),
                &request(STRANGER, Ipv4Addr::new(10, 1, 1, 201))
            )
            .1,
            Outcome::UnknownSrcDst
        );
        assert_eq!(run(77, None, &request(A, B)).1, Outcome::UnknownPort);
        assert_eq!(run(3, None, &[0u8; 10]).1, Outcome::NotArp);
        let (_, arp) = frame::parse_arp(&request(A, B)).unwrap();
        let reply = frame::arp_reply(&arp, EthernetAddress(mac(B).octets()), None);
        assert_eq!(run(3, None, &reply).1, Outcome::NotRequest);
    }

    #[test]
    fn requests_from_an_endpoint_claiming_another_mac_or_address_are_ignored() {
        // B's address from A's port and MAC.
        let claim_b = frame::arp_request(EthernetAddress(mac(A).octets()), B, REMOTE, None);
        assert_eq!(run(3, None, &claim_b).1, Outcome::Spoofed);
        // A's address with B's MAC.
        let b_mac = frame::arp_request(EthernetAddress(mac(B).octets()), A, REMOTE, None);
        assert_eq!(run(3, None, &b_mac).1, Outcome::Spoofed);
        // A probe (sender 0.0.0.0) claims nothing and is answered.
        let probe = frame::arp_request(
            EthernetAddress(mac(A).octets()),
            Ipv4Addr::UNSPECIFIED,
            B,
            None,
        );
        assert_eq!(run(3, None, &probe).1, Outcome::Replied);
    }

    #[test]
    fn vlan_uplink_requests_use_their_tag_and_replies_keep_it() {
        let t = endpoint_table(10, 0, &[(3, A)], None);
        let mut s = Settings::default();
        s.uplinks.insert(1);
        let tag = VlanTag {
            pcp: 0,
            dei: false,
            vid: 10,
        };
        let req = frame::arp_request(
            EthernetAddress(mac(STRANGER).octets()),
            STRANGER,
            A,
            Some(tag),
        );
        let topo = Topology {
            endpoints: &t,
            settings: &s,
        };
        let (outs, o) = handle_request(&VlanBridge, &topo, 1, None, &req);
        assert_eq!(o, Outcome::Replied);
        let (eth, _) = frame::parse_arp(&outs[0].data).unwrap();
        assert_eq!(eth.vlan.map(|v| v.vid), Some(10));
        let g = garp(&topo, t.local(3).unwrap()).unwrap();
        assert_eq!(g.actions, vec![Action::output(1u32)]);
        let (eth, arp) = frame::parse_arp(&g.data).unwrap();
        assert_eq!(
            (
                eth.vlan.map(|v| v.vid),
                arp.source_protocol_addr,
                arp.target_protocol_addr
            ),
            (Some(10), A, A)
        );
    }
}
