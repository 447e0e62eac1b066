//! Client assignments read back from a switch's DNAT flows, so that a restarted agent keeps
//! every client on the provider it had (an open TCP connection to another provider would be
//! reset).
//!
//! On connect, `ofctrl` hands the agent the switch's service flows (cookie category
//! [`category::SERVICE`](crate::flows::category::SERVICE)) before it reconciles. A DNAT flow
//! (table 3, priority [`priority::MATCH`]) `nw_src=<client>,nw_dst=<vip>,nw_proto,tp_dst=<svc
//! port>` → `set_field:<provider>->ip_dst` encodes one assignment. It is *adoptable* when, in
//! the agent's current (replayed) state:
//! - an active service has that VIP and lists that protocol and service port;
//! - the provider is still in the service's provider list;
//! - the client is a local endpoint here (its VRF becomes the assignment's);
//! - the client has no assignment for that service yet (a live assignment always wins).
//!
//! Anything else (watch flows, SNAT flows, flows this agent would not build) is ignored, and so
//! deleted by the reconcile as a stale flow. A client with several DNAT flows (one per service
//! port) is adopted once, from the first adoptable one.
//!
//! Contract: pure functions of the flows and the state; the agent records what they return
//! through [`Services::adopt`], which checks again.

use super::{Assignment, ServiceProtocol, Services};
use crate::epdb::EndpointTable;
use crate::pipeline::id;
use crate::priority;
use ofproto::action::Action;
use ofproto::instruction::Instruction;
use ofproto::multipart::FlowStats;
use ofproto::oxm::FieldId;
use std::collections::BTreeSet;
use std::net::Ipv4Addr;

/// One assignment found on the switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adopted {
    pub service: String,
    pub client: Ipv4Addr,
    pub assignment: Assignment,
}

/// What a DNAT flow says: client, VIP, protocol, service port, provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Dnat {
    client: Ipv4Addr,
    vip: Ipv4Addr,
    protocol: ServiceProtocol,
    svc_port: u16,
    provider: Ipv4Addr,
}

/// Read a DNAT flow; `None` for any other flow.
fn dnat(flow: &FlowStats) -> Option<Dnat> {
    if flow.table_id != id::SERVICE_DNAT || flow.priority != priority::MATCH {
        return None;
    }
    let m = &flow.matching;
    let client = m.get(FieldId::IPV4_SRC)?.ipv4()?;
    let vip = m.get(FieldId::IPV4_DST)?.ipv4()?;
    let protocol = ServiceProtocol::from_ip_proto(m.get(FieldId::IP_PROTO)?.value_u128() as u8)?;
    let port_field = match protocol {
        ServiceProtocol::Tcp => FieldId::TCP_DST,
        ServiceProtocol::Udp => FieldId::UDP_DST,
    };
    let svc_port = u16::try_from(m.get(port_field)?.value_u128()).ok()?;
    let provider = flow.instructions.iter().find_map(|i| match i {
        Instruction::ApplyActions(actions) => actions.iter().find_map(|a| match a {
            Action::SetField(o) if o.field == FieldId::IPV4_DST => o.ipv4(),
            _ => None,
        }),
        _ => None,
    })?;
    Some(Dnat {
        client,
        vip,
        protocol,
        svc_port,
        provider,
    })
}

/// The adoptable assignments among `flows` (see the module documentation), at most one per
/// service and client.
pub fn adoptable(
    flows: &[FlowStats],
    services: &Services,
    endpoints: &EndpointTable,
) -> Vec<Adopted> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for d in flows.iter().filter_map(dnat) {
        let Some((name, svc)) = services.by_vip(d.vip) else {
            continue;
        };
        let fits = svc
            .active_spec()
            .is_some_and(|spec| spec.port(d.protocol, d.svc_port).is_some())
            && svc.providers.contains(&d.provider)
            && !svc.clients.contains_key(&d.client);
        if !fits || seen.contains(&(name.clone(), d.client)) {
            continue;
        }
        let Some(client) = endpoints.locals().find(|e| e.ip_addr == Some(d.client)) else {
            continue;
        };
        seen.insert((name.clone(), d.client));
        out.push(Adopted {
            service: name.clone(),
            client: d.client,
            assignment: Assignment {
                provider: d.provider,
                vrf: client.vrf.clone(),
            },
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flows::category;
    use crate::pipeline::VLAN_PIPELINE;
    use crate::service::flows::{ClientFlows, watch};
    use ofctrl::Flow;

    use crate::fixtures::web_spec as spec;

    const A: Ipv4Addr = Ipv4Addr::new(10, 1, 1, 12);
    const B: Ipv4Addr = Ipv4Addr::new(10, 1, 1, 11);

    fn client(n: u8) -> Ipv4Addr {
        Ipv4Addr::new(10, 1, 1, n)
    }

    /// The flows as a switch reports them: what the agent would have built.
    fn as_stats(flows: Vec<Flow>) -> Vec<FlowStats> {
        flows
            .into_iter()
            .map(|f| FlowStats {
                table_id: f.key.table,
                priority: f.key.priority,
                cookie: f.cookie(7).0,
                matching: f.key.matches,
                instructions: f.instructions,
                duration_sec: 0,
                duration_nsec: 0,
                idle_timeout: 0,
                hard_timeout: 0,
                flags: 0,
                packet_count: 0,
                byte_count: 0,
            })
            .collect()
    }

    fn client_flows(c: Ipv4Addr, provider: Ipv4Addr) -> Vec<FlowStats> {
        let a = Assignment {
            provider,
            vrf: "t1".into(),
        };
        let s = spec();
        let flows = ClientFlows {
            name: "web",
            spec: &s,
            client: c,
            assignment: &a,
            provider_mac: None,
        }
        .build(
            VLAN_PIPELINE.table(id::SERVICE_DNAT).unwrap(),
            id::DST_GROUP,
            VLAN_PIPELINE.table(id::SERVICE_SNAT).unwrap(),
            id::MAC_DEST,
        )
        .unwrap();
        assert!(flows.iter().all(|f| f.category == category::SERVICE));
        as_stats(flows)
    }

    fn endpoints(locals: &[u8]) -> EndpointTable {
        let locals: Vec<(u32, Ipv4Addr)> =
            locals.iter().map(|&n| (u32::from(n), client(n))).collect();
        crate::fixtures::endpoints(10, &locals)
    }

    fn services(providers: &[Ipv4Addr]) -> Services {
        let mut s = Services::default();
        s.set_spec("web", spec()).unwrap();
        s.set_providers("web", providers.iter().copied());
        s
    }

    #[test]
    fn a_dnat_flow_whose_service_provider_and_client_still_exist_is_adopted_once() {
        let mut flows = client_flows(client(2), A);
        flows.extend(as_stats(
            watch(
                VLAN_PIPELINE.table(id::SERVICE_DNAT).unwrap(),
                "web",
                &spec(),
            )
            .unwrap(),
        ));
        let found = adoptable(&flows, &services(&[A, B]), &endpoints(&[2]));
        assert_eq!(
            found,
            vec![Adopted {
                service: "web".into(),
                client: client(2),
                assignment: Assignment {
                    provider: A,
                    vrf: "t1".into()
                },
            }],
            "two ports, one assignment; watch and SNAT flows say nothing"
        );
        // Recorded, it counts for the balancer: the next client goes to the other provider.
        let mut s = services(&[A, B]);
        for a in found {
            assert!(s.adopt(&a.service, a.client, a.assignment));
        }
        assert_eq!(s.assign("web", client(3), "t1"), Some(B));
    }

    #[test]
    fn flows_that_no_longer_make_sense_are_not_adopted() {
        let flows = client_flows(client(2), A);
        let eps = endpoints(&[2]);
        assert!(
            adoptable(&flows, &services(&[B]), &eps).is_empty(),
            "provider dropped"
        );
        assert!(
            adoptable(&flows, &services(&[A]), &endpoints(&[])).is_empty(),
            "client no longer a local endpoint"
        );
        assert!(
            adoptable(&flows, &Services::default(), &eps).is_empty(),
            "service gone"
        );
        let mut other_port = services(&[A]);
        let mut s = spec();
        s.ports.retain(|p| p.protocol == ServiceProtocol::Udp);
        s.ports[0].svc_port = 5300;
        other_port.set_spec("web", s).unwrap();
        assert!(
            adoptable(&flows, &other_port, &eps).is_empty(),
            "ports gone"
        );
        let mut moved = services(&[A]);
        let mut s = spec();
        s.vip = Ipv4Addr::new(10, 254, 0, 11);
        moved.set_spec("web", s).unwrap();
        assert!(adoptable(&flows, &moved, &eps).is_empty(), "VIP changed");
        // A live assignment wins over what the switch says.
        let mut live = services(&[A, B]);
        assert_eq!(live.assign("web", client(2), "t1"), Some(B));
        assert!(adoptable(&flows, &live, &eps).is_empty());
        assert!(!live.adopt(
            "web",
            client(2),
            Assignment {
                provider: A,
                vrf: "t1".into()
            }
        ));
    }

    #[test]
    fn services_adopt_checks_provider_and_activity() {
        let a = Assignment {
            provider: A,
            vrf: "t1".into(),
        };
        let mut s = services(&[B]);
        assert!(!s.adopt("web", client(2), a.clone()), "not a provider");
        assert!(!s.adopt("other", client(2), a.clone()), "no such service");
        let mut s = services(&[A]);
        assert!(s.adopt("web", client(2), a.clone()));
        assert_eq!(s.get("web").unwrap().clients.get(&client(2)), Some(&a));
    }
}
