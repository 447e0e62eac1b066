//! The flows of the stateful policy: the shared ones (reply bypass, commit) and those of each
//! NetworkPolicy flow owner ([`FlowOwner`]), built through the pipeline's tables 5, 7 and 8.
//!
//! `ct_label` bit 0 is the *revoked* mark: an isolated pod's established connection whose
//! packet in the original direction no rule allows any more is committed with it (and the
//! packet dropped), so the replies of that connection stop too; a later allowed packet of the
//! connection clears it again.

use super::Direction;
use super::compile::{Clause, ClauseKey, ConjRef, FlowOwner, Index};
use crate::flows::{ETH_IPV4, ETH_IPV6, category, object_of};
use crate::metadata;
use crate::pipeline::{Pipeline, PipelineError, Table, id};
use crate::priority;
use crate::service::flows::{ct, zone};
use ipnet::IpNet;
use ofctrl::Flow;
use ofproto::action::nicira::{CT_COMMIT, Conjunction};
use ofproto::action::{Action, Ct};
use ofproto::instruction::Instruction;
use ofproto::matches::Match;
use ofproto::nxm;
use ofproto::oxm::Oxm;
use std::net::IpAddr;

/// `ct_label` bit 0: the connection was revoked by a policy change.
pub const REVOKED: u128 = 0x1;

/// ICMPv6 types of neighbour discovery (router solicitation .. redirect): never policed.
const ND_TYPES: std::ops::RangeInclusive<u8> = 133..=137;
const PROTO_ICMPV6: u8 = 58;

/// Commit the packet's connection in the VRF's zone with the revoked mark set to `revoked`
/// (no recirculation: the packet goes on, or is dropped when nothing follows).
fn commit(revoked: Option<bool>) -> Action {
    let actions = match revoked {
        Some(r) => vec![Action::RegLoad2(Oxm::int(
            nxm::CT_LABEL,
            if r { REVOKED } else { 0 },
            Some(REVOKED),
        ))],
        None => Vec::new(),
    };
    Action::Ct(Ct {
        flags: CT_COMMIT,
        zone: zone(),
        recirc_table: 0xff,
        alg: 0,
        actions,
    })
}

fn table_of(p: &'static Pipeline, dir: Direction) -> Result<Table, PipelineError> {
    p.table(match dir {
        Direction::Egress => id::NETPOL_EGRESS,
        Direction::Ingress => id::NETPOL_INGRESS,
    })
}

/// What a packet a rule allows does: egress continues in the ingress table; ingress commits
/// (clearing a revoked mark) and continues in the MAC table.
fn allowed(dir: Direction) -> Vec<Instruction> {
    match dir {
        Direction::Egress => vec![Instruction::GotoTable(id::NETPOL_INGRESS)],
        Direction::Ingress => vec![
            Instruction::ApplyActions(vec![commit(Some(false))]),
            Instruction::GotoTable(id::MAC_DEST),
        ],
    }
}

fn eth_of(v6: bool) -> u16 {
    if v6 { ETH_IPV6 } else { ETH_IPV4 }
}

fn vrf_match(vrf_id: u8) -> Match {
    Match::new().metadata(metadata::vrf(vrf_id), Some(metadata::VRF_MASK))
}

/// `m` with the address or prefix `net` as source (`src`) or destination.
fn with_net(m: Match, net: IpNet, src: bool) -> Match {
    let (a, mask) = match net {
        IpNet::V4(n) => (
            IpAddr::V4(n.network()),
            (n.prefix_len() < 32).then_some(IpAddr::V4(n.netmask())),
        ),
        IpNet::V6(n) => (
            IpAddr::V6(n.network()),
            (n.prefix_len() < 128).then_some(IpAddr::V6(n.netmask())),
        ),
    };
    let m = m.eth_type(eth_of(net.addr().is_ipv6()));
    match (a, mask, src) {
        (IpAddr::V4(a), m4, true) => m.ipv4_src(a, m4.and_then(v4)),
        (IpAddr::V4(a), m4, false) => m.ipv4_dst(a, m4.and_then(v4)),
        (IpAddr::V6(a), m6, true) => m.ipv6_src(a, m6.and_then(v6)),
        (IpAddr::V6(a), m6, false) => m.ipv6_dst(a, m6.and_then(v6)),
    }
}

fn v4(a: IpAddr) -> Option<std::net::Ipv4Addr> {
    match a {
        IpAddr::V4(a) => Some(a),
        IpAddr::V6(_) => None,
    }
}

fn v6(a: IpAddr) -> Option<std::net::Ipv6Addr> {
    match a {
        IpAddr::V6(a) => Some(a),
        IpAddr::V4(_) => None,
    }
}

/// The match of a clause in VRF `vrf_id`.
fn clause_match(vrf_id: u8, clause: &Clause) -> Match {
    let m = vrf_match(vrf_id);
    match clause {
        Clause::Src(n) => with_net(m, *n, true),
        Clause::Dst(n) => with_net(m, *n, false),
        Clause::Proto { v6, proto } => m.eth_type(eth_of(*v6)).ip_proto(*proto),
        Clause::Port {
            v6,
            proto,
            port,
            mask,
        } => {
            let field = if *proto == 17 {
                ofproto::oxm::FieldId::UDP_DST
            } else {
                ofproto::oxm::FieldId::TCP_DST
            };
            let mask = (*mask != 0xffff).then_some(u128::from(*mask));
            m.eth_type(eth_of(*v6))
                .ip_proto(*proto)
                .with(Oxm::int(field, u128::from(*port), mask))
        }
    }
}

/// The flows of one NetworkPolicy owner; empty when it has nothing left or its VRF has no
/// network on this bridge.
pub fn owner_flows(
    p: &'static Pipeline,
    index: &Index,
    vrf_id: impl Fn(&str) -> Option<u8>,
    owner: &FlowOwner,
) -> Result<Vec<Flow>, PipelineError> {
    let object = match owner {
        FlowOwner::Conj(id) => u64::from(*id),
        other => object_of(&other.to_string()),
    };
    let own = |f: Flow| f.owned_by(category::NETPOL, object);
    let mut out = Vec::new();
    match owner {
        FlowOwner::Clause(key) => {
            let Some(vrf) = vrf_id(&key.vrf) else {
                return Ok(out);
            };
            let t = table_of(p, key.dir)?;
            let m = clause_match(vrf, &key.clause);
            if let Some(refs) = index.clauses.get(key) {
                let actions = refs
                    .iter()
                    .map(|ConjRef { id, k, n }| {
                        Action::Conjunction(Conjunction {
                            id: *id,
                            clause: k - 1,
                            n_clauses: *n,
                        })
                    })
                    .collect();
                out.push(own(t.flow(
                    priority::NETPOL_RULE,
                    m.clone(),
                    vec![Instruction::ApplyActions(actions)],
                )?));
            }
            if let Some(a) = allow_all_target(key)
                && index.allow_all.contains_key(&(key.dir, key.vrf.clone(), a))
            {
                out.push(own(t.flow(
                    priority::NETPOL_ALLOW_ALL,
                    m,
                    allowed(key.dir),
                )?));
            }
        }
        FlowOwner::Conj(cid) => {
            let Some((dir, vrf_name, fams)) = index.conjs.get(cid) else {
                return Ok(out);
            };
            if vrf_id(vrf_name).is_none() {
                return Ok(out);
            }
            let t = table_of(p, *dir)?;
            // The commit of the ingress table needs the family in the match.
            for (bit, eth) in [(1, ETH_IPV4), (2, ETH_IPV6)] {
                if fams & bit != 0 {
                    out.push(own(t.flow(
                        priority::NETPOL_RULE,
                        Match::new().conj_id(*cid).eth_type(eth),
                        allowed(*dir),
                    )?));
                }
            }
        }
        FlowOwner::Isolation(pod) => {
            let (dir, vrf_name, a) = pod;
            if !index.isolated.contains_key(pod) {
                return Ok(out);
            }
            let Some(vrf) = vrf_id(vrf_name) else {
                return Ok(out);
            };
            let t = table_of(p, *dir)?;
            let m = with_net(vrf_match(vrf), IpNet::from(*a), *dir == Direction::Egress);
            out.push(own(t.flow(
                priority::NETPOL_REVOKE,
                m.clone()
                    .ct_state(ct::EST | ct::TRK, Some(ct::EST | ct::RPL | ct::TRK)),
                vec![Instruction::ApplyActions(vec![commit(Some(true))])],
            )?));
            out.push(own(t.flow(priority::NETPOL_ISOLATED, m, Vec::new())?));
        }
    }
    Ok(out)
}

/// The pod address a clause names when it is a single address in the pod position of its
/// direction (where an unrestricted allowance's flow sits).
fn allow_all_target(key: &ClauseKey) -> Option<IpAddr> {
    let n = match (&key.clause, key.dir) {
        (Clause::Dst(n), Direction::Ingress) | (Clause::Src(n), Direction::Egress) => n,
        _ => return None,
    };
    (n.prefix_len() == n.max_prefix_len()).then_some(n.addr())
}

/// The shared flows of the stateful policy (present while any policy rule or NetworkPolicy
/// exists): replies of tracked connections pass tables 5 and 7 unless revoked, revoked
/// replies are dropped, neighbour discovery passes, and table 8 commits new connections (and
/// clears the revoked mark of a connection allowed again).
pub fn stateful_flows(p: &'static Pipeline) -> Result<Vec<Flow>, PipelineError> {
    let mut out = Vec::new();
    let replies = |state: u32| {
        Match::new()
            .ct_state(state | ct::RPL | ct::TRK, Some(state | ct::RPL | ct::TRK))
            .ct_label(0, Some(REVOKED))
    };
    let policy = p.table(id::POLICY)?;
    let egress = p.table(id::NETPOL_EGRESS)?;
    let ingress = p.table(id::NETPOL_INGRESS)?;
    for state in [ct::EST, REL] {
        out.push(
            policy
                .flow(
                    priority::POLICY_STATEFUL,
                    replies(state),
                    vec![Instruction::GotoTable(id::SERVICE_SNAT)],
                )?
                .owned_by(category::POLICY, 0),
        );
        out.push(egress.flow(
            priority::NETPOL_BYPASS,
            replies(state),
            vec![Instruction::GotoTable(id::MAC_DEST)],
        )?);
    }
    out.push(
        egress.flow(
            priority::NETPOL_BYPASS,
            Match::new()
                .ct_state(ct::RPL | ct::TRK, Some(ct::RPL | ct::TRK))
                .ct_label(REVOKED, Some(REVOKED)),
            Vec::new(),
        )?,
    );
    for t in ND_TYPES {
        out.push(
            egress.flow(
                priority::NETPOL_BYPASS,
                Match::new()
                    .eth_type(ETH_IPV6)
                    .ip_proto(PROTO_ICMPV6)
                    .icmpv6_type(t),
                vec![Instruction::GotoTable(id::MAC_DEST)],
            )?,
        );
    }
    for eth in [ETH_IPV4, ETH_IPV6] {
        out.push(
            ingress.flow(
                priority::NETPOL_RESTORE,
                Match::new()
                    .ct_state(ct::EST | ct::TRK, Some(ct::EST | ct::RPL | ct::TRK))
                    .ct_label(REVOKED, Some(REVOKED))
                    .eth_type(eth),
                allowed(Direction::Ingress),
            )?,
        );
        out.push(
            ingress.flow(
                priority::NETPOL_COMMIT,
                Match::new()
                    .ct_state(ct::NEW | ct::TRK, Some(ct::NEW | ct::TRK))
                    .eth_type(eth),
                vec![
                    Instruction::ApplyActions(vec![commit(None)]),
                    Instruction::GotoTable(id::MAC_DEST),
                ],
            )?,
        );
    }
    Ok(out
        .into_iter()
        .map(|f| {
            if f.key.table == id::POLICY {
                f
            } else {
                f.owned_by(category::NETPOL, 0)
            }
        })
        .collect())
}

/// `ct_state` bit `rel`.
const REL: u32 = 0x04;
