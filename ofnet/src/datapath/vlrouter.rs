//! The VLAN router datapath (`vlrouter`, routing mode with BGP).
//!
//! Pods are routed, not bridged: the agent answers their ARP with the router MAC for every
//! endpoint, gateway, service VIP and routed prefix, and table 7 routes by destination
//! address. Local endpoints get the router MAC as source and their own MAC; every other
//! destination is a prefix the host's BGP speaker learned ([`Settings::routes`]) and leaves
//! through the uplink to its next hop's MAC (learned from ARP on the uplink), with the host's
//! router port MAC as source. The router port ([`Settings::router`], `inb01`) is an internal
//! port carrying the host's router address, on which the BGP speaker peers: everything it
//! sends goes straight out the uplink, and from the uplink it gets ARP and what is addressed
//! to the router address. ARP arriving on the uplink is also punted, so the agent learns its
//! next hops' MACs. Traffic from the uplink skips policy (enforced where it starts). There are
//! no VRFs in table 7: as in the reference, all networks route in one table.

use super::{
    Datapath, DatapathError, Owner, PacketOut, Part, Topology, common_owners, dst_group_flows,
    local_class_flows, meter_part, rule_part, service_part,
};
use crate::flows::{self, ETH_ARP, ETH_IPV4, ETH_IPV6, NO_BUFFER, category};
use crate::model::{BridgeKind, Endpoint, ROUTER_MAC};
use crate::pipeline::{Pipeline, VLROUTER_PIPELINE, id};
use crate::priority;
use ofproto::action::Action;
use ofproto::instruction::Instruction;
use ofproto::matches::Match;
use ofproto::oxm::{FieldId, Oxm};
use ofproto::port::OFPP_CONTROLLER;

/// See the module documentation.
#[derive(Debug, Default, Clone, Copy)]
pub struct VlrouterBridge;

/// Table-7 priority of a local endpoint: above every routed prefix.
pub const LOCAL_ROUTE: u16 = priority::MATCH + 2;
/// Table-7 priority of a prefix learned by BGP (longer prefixes are more specific matches of
/// the same priority; OVS picks by priority only, so the prefix length is added).
pub const LEARNED_ROUTE: u16 = priority::MATCH - 40;
/// Input-table priority of the router port's and the uplink's ARP flows: above the punt.
pub const ROUTER_PORT: u16 = priority::MATCH + 20;

fn set_eth(field: FieldId, mac: [u8; 6]) -> Action {
    Action::set_field(Oxm::new(field, &mac, None))
}

fn to_controller() -> Action {
    Action::Output {
        port: OFPP_CONTROLLER.into(),
        max_len: NO_BUFFER,
    }
}

impl VlrouterBridge {
    /// The uplink routed traffic leaves by (the first: routing mode uses one).
    pub fn uplink(topo: &Topology<'_>) -> Option<u32> {
        topo.settings.uplinks.iter().next().copied()
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
        let t7 = p.table(id::IP)?;
        let deliver = vec![Instruction::ApplyActions(vec![
            set_eth(FieldId::ETH_SRC, ROUTER_MAC.octets()),
            set_eth(FieldId::ETH_DST, ep.mac.octets()),
            Action::output(ep.port_no),
        ])];
        let object = u64::from(ep.port_no);
        if let Some(a) = ep.ip_addr {
            flows.push(
                t7.flow(
                    LOCAL_ROUTE,
                    Match::new().eth_type(ETH_IPV4).ipv4_dst(a, None),
                    deliver.clone(),
                )?
                .owned_by(category::LOCAL_ENDPOINT, object),
            );
        }
        if let Some(a) = ep.ipv6_addr {
            flows.push(
                t7.flow(
                    LOCAL_ROUTE,
                    Match::new().eth_type(ETH_IPV6).ipv6_dst(a, None),
                    deliver,
                )?
                .owned_by(category::LOCAL_ENDPOINT, object),
            );
        }
        let mut part = Part {
            flows,
            ..Part::default()
        };
        meter_part(p, ep, &mut part)?;
        Ok(part)
    }

    /// The router port's plumbing: what the host sends goes out the uplink; ARP from the
    /// uplink goes to the host and the agent; traffic for the router address to the host.
    fn router_part(&self, topo: &Topology<'_>) -> Result<Part, DatapathError> {
        let p = self.pipeline();
        let (Some(router), Some(uplink)) = (topo.settings.router, Self::uplink(topo)) else {
            return Ok(Part::default());
        };
        let t0 = p.table(id::INPUT)?;
        let t1 = p.table(id::VLAN)?;
        let out = |port: u32| vec![Instruction::ApplyActions(vec![Action::output(port)])];
        let flows = vec![
            t0.flow(ROUTER_PORT, Match::new().in_port(router.port), out(uplink))?,
            t0.flow(
                ROUTER_PORT,
                Match::new().in_port(uplink).eth_type(ETH_ARP),
                vec![Instruction::ApplyActions(vec![
                    to_controller(),
                    Action::output(router.port),
                ])],
            )?,
            t1.flow(
                ROUTER_PORT,
                Match::new()
                    .in_port(uplink)
                    .eth_type(ETH_IPV4)
                    .ipv4_dst(router.ip, None),
                out(router.port),
            )?,
        ];
        Ok(Part {
            flows: flows
                .into_iter()
                .map(|f| f.owned_by(category::UPLINK, u64::from(router.port)))
                .collect(),
            ..Part::default()
        })
    }

    /// A prefix learned by BGP: out the uplink to its next hop, once the next hop's MAC is
    /// known.
    fn route_part(
        &self,
        topo: &Topology<'_>,
        prefix: ipnet::Ipv4Net,
    ) -> Result<Part, DatapathError> {
        let s = topo.settings;
        let Some(next_hop) = s.routes.get(&prefix) else {
            return Ok(Part::default());
        };
        let (Some(router), Some(uplink), Some(mac)) =
            (s.router, Self::uplink(topo), s.neighbors.get(next_hop))
        else {
            return Ok(Part::default());
        };
        let mask = prefix.netmask();
        let flow = self
            .pipeline()
            .table(id::IP)?
            .flow(
                LEARNED_ROUTE + u16::from(prefix.prefix_len()),
                Match::new()
                    .eth_type(ETH_IPV4)
                    .ipv4_dst(prefix.network(), (prefix.prefix_len() < 32).then_some(mask)),
                vec![Instruction::ApplyActions(vec![
                    set_eth(FieldId::ETH_SRC, router.mac.octets()),
                    set_eth(FieldId::ETH_DST, mac.octets()),
                    Action::output(uplink),
                ])],
            )?
            .owned_by(
                category::REMOTE_ENDPOINT,
                crate::flows::object_of(&prefix.to_string()),
            );
        Ok(Part {
            flows: vec![flow],
            ..Part::default()
        })
    }
}

impl Datapath for VlrouterBridge {
    fn kind(&self) -> BridgeKind {
        BridgeKind::Vlan
    }

    fn pipeline(&self) -> &'static Pipeline {
        &VLROUTER_PIPELINE
    }

    fn router_mac(&self) -> Option<[u8; 6]> {
        Some(ROUTER_MAC.octets())
    }

    fn owners(&self, topo: &Topology<'_>) -> Vec<Owner> {
        let mut out = common_owners(topo);
        out.extend(topo.settings.uplinks.iter().map(|p| Owner::Uplink(*p)));
        out.push(Owner::Router);
        out.extend(topo.settings.routes.keys().map(|p| Owner::Route(*p)));
        out
    }

    fn part(&self, topo: &Topology<'_>, owner: &Owner) -> Result<Part, DatapathError> {
        let p = self.pipeline();
        match owner {
            Owner::Input => Ok(Part {
                flows: flows::input(p.table(id::INPUT)?, true, true)?,
                ..Part::default()
            }),
            Owner::LocalEndpoint(port) => self.local_part(topo, *port),
            Owner::RemoteEndpoint(rid) => {
                // Other hosts' endpoints are reached through the routes BGP learns; here
                // they only have their destination group (policy).
                let Some(ep) = topo.endpoints.endpoint(rid).filter(|e| !e.is_local()) else {
                    return Ok(Part::default());
                };
                Ok(Part {
                    flows: dst_group_flows(p, topo, ep)?,
                    ..Part::default()
                })
            }
            Owner::Uplink(port) if topo.settings.uplinks.contains(port) => Ok(Part {
                flows: vec![
                    flows::goto(
                        p.table(id::VLAN)?,
                        priority::MATCH,
                        Match::new().in_port(*port),
                        id::SERVICE_SNAT,
                    )?
                    .owned_by(category::UPLINK, u64::from(*port)),
                ],
                ..Part::default()
            }),
            Owner::Uplink(_)
            | Owner::Network(_)
            | Owner::Netpol(_)
            | Owner::HostNat
            | Owner::HostAccess(_) => Ok(Part::default()),
            Owner::Router => self.router_part(topo),
            Owner::Route(prefix) => self.route_part(topo, *prefix),
            Owner::Rule(rid) => rule_part(p, topo, rid),
            Owner::Service(_) | Owner::ServiceProvider(..) | Owner::Conntrack => {
                service_part(p, topo, owner)
            }
        }
    }

    /// Routed: unknown targets are not answered and nothing is re-injected.
    fn forward_arp(&self, _: &Topology<'_>, _: &Endpoint, _: &[u8]) -> Vec<PacketOut> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datapath::{RouterPort, Settings};
    use crate::model::MacAddr;
    use std::net::Ipv4Addr;

    fn fixture() -> (crate::epdb::EndpointTable, Settings) {
        let t = crate::fixtures::endpoint_table(10, 0, &[(3, Ipv4Addr::new(10, 1, 1, 2))], None);
        let mut s = Settings::default();
        s.uplinks.insert(1);
        s.router = Some(RouterPort {
            port: 2,
            ip: Ipv4Addr::new(50, 1, 1, 2),
            mac: MacAddr([2, 0, 0, 0, 0, 2]),
        });
        s.routes.insert(
            "192.0.2.0/24".parse().unwrap(),
            Ipv4Addr::new(50, 1, 1, 200),
        );
        s.routes
            .insert("10.1.2.5/32".parse().unwrap(), Ipv4Addr::new(50, 1, 1, 200));
        (t, s)
    }

    const GOLDEN_ROUTING: &[&str] = &[
        "table=0, priority=120,arp,in_port=1 actions=CONTROLLER:65535,output:2",
        "table=0, priority=120,in_port=2 actions=output:1",
        "table=1, priority=120,ip,in_port=1,nw_dst=50.1.1.2 actions=output:2",
        "table=1, priority=100,in_port=1 actions=goto_table:6",
        "table=7, priority=102,ip,nw_dst=10.1.1.2 actions=set_field:00:00:11:11:11:11->eth_src,set_field:02:02:0a:01:01:02->eth_dst,output:3",
        "table=7, priority=92,ip,nw_dst=10.1.2.5 actions=set_field:02:00:00:00:00:02->eth_src,set_field:02:00:00:00:00:c8->eth_dst,output:1",
        "table=7, priority=84,ip,nw_dst=192.0.2.0/24 actions=set_field:02:00:00:00:00:02->eth_src,set_field:02:00:00:00:00:c8->eth_dst,output:1",
    ];

    fn routing_lines(s: &Settings, t: &crate::epdb::EndpointTable) -> Vec<String> {
        VlrouterBridge
            .desired(&Topology {
                endpoints: t,
                settings: s,
            })
            .unwrap()
            .flow_lines()
            .into_iter()
            .filter(|l| {
                l.starts_with("table=7") || l.contains("in_port=1") || l.contains("in_port=2")
            })
            .collect()
    }

    #[test]
    fn learned_routes_need_their_next_hops_mac_and_local_endpoints_win() {
        let (t, mut s) = fixture();
        let lines = routing_lines(&s, &t);
        assert!(
            !lines
                .iter()
                .any(|l| l.contains("output:1") && l.starts_with("table=7")),
            "no next-hop MAC yet: no route flows: {lines:#?}"
        );
        s.neighbors
            .insert(Ipv4Addr::new(50, 1, 1, 200), MacAddr([2, 0, 0, 0, 0, 0xc8]));
        assert_eq!(
            routing_lines(&s, &t),
            crate::text::sorted(GOLDEN_ROUTING.iter().map(|s| s.to_string()).collect())
        );
    }
}
