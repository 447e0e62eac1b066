//! NetworkPolicies to flows of tables 7 (`netpol_egress`) and 8 (`netpol_ingress`).
//!
//! Each rule of each policy direction is one OVS conjunction (its id allocated by
//! [`super::Policies`]) of up to three clauses: the pods it applies to (`nw_src` in the egress
//! table, `nw_dst` in the ingress table), its peers (the other address: pod addresses and the
//! `ipBlock` prefixes with their exceptions cut out) and its ports (`tcp`/`udp` with
//! `tp_dst` as value/mask blocks covering a range). An unrestricted dimension is left out; a
//! rule restricted in neither applies to its pods alone (an allow flow per pod, no
//! conjunction). So a rule with M peers and N ports costs M + N + (pods) + 1 flows.
//!
//! A flow is identified by its match ([`ClauseKey`]: direction, VRF and what it matches): two
//! rules that name the same address or port share its flow, which carries one
//! `conjunction(id,k/n)` action per rule. [`Index`] keeps, per key, the conjunction clauses
//! of every policy, so a change rewrites only the flows of the keys the policy touches.

use super::{Direction, NetworkPolicy, Peer, Policies, Port, Rule};
use ipnet::IpNet;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

/// What one flow of a NetworkPolicy table matches.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Clause {
    /// Source address or prefix.
    Src(IpNet),
    /// Destination address or prefix.
    Dst(IpNet),
    /// A block of destination ports (`port/mask`) of a protocol, in a family.
    Port {
        v6: bool,
        proto: u8,
        port: u16,
        mask: u16,
    },
    /// Every port of a protocol, in a family.
    Proto { v6: bool, proto: u8 },
}

/// A flow's identity: the table (by direction), the VRF and the match.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClauseKey {
    pub dir: Direction,
    pub vrf: String,
    pub clause: Clause,
}

/// One conjunction clause: conjunction `id`, clause `k` (1-based) of `n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConjRef {
    pub id: u32,
    pub k: u8,
    pub n: u8,
}

/// A pod (address) in a VRF, for one direction.
pub type Pod = (Direction, String, IpAddr);

/// What one policy puts in the tables.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Contribution {
    /// Conjunction clauses, by the flow that carries them.
    pub clauses: Vec<(ClauseKey, ConjRef)>,
    /// Pods a rule allows without restriction (peers and ports all).
    pub allow_all: Vec<Pod>,
    /// Pods the policy isolates.
    pub isolated: Vec<Pod>,
    /// The conjunctions of its rules that can match (their `conj_id` flows), with the
    /// address families they can match (bit 0 IPv4, bit 1 IPv6).
    pub conjs: Vec<(Direction, String, u32, u8)>,
}

/// The ports of `p` as `(proto, port, mask)` blocks; `None` as port: every port.
fn port_blocks(p: &Port) -> Vec<(u8, Option<(u16, u16)>)> {
    let proto = p.protocol.ip_proto();
    match (p.port, p.end_port) {
        (None, _) => vec![(proto, None)],
        (Some(start), end) => range_masks(start, end.unwrap_or(start).max(start))
            .into_iter()
            .map(|(v, m)| (proto, Some((v, m))))
            .collect(),
    }
}

/// The value/mask pairs whose union is exactly `start..=end` (largest aligned blocks first).
pub fn range_masks(start: u16, end: u16) -> Vec<(u16, u16)> {
    let mut out = Vec::new();
    let (mut lo, end) = (u32::from(start), u32::from(end));
    while lo <= end {
        // The largest block aligned at `lo` that stays within `end`.
        let mut size = if lo == 0 {
            1 << 16
        } else {
            lo & lo.wrapping_neg()
        };
        while lo + size - 1 > end {
            size >>= 1;
        }
        out.push((lo as u16, (!(size - 1) & 0xffff) as u16));
        lo += size;
    }
    out
}

/// `net` without the `except` prefixes, as prefixes.
pub fn subtract(net: IpNet, except: &[IpNet]) -> Vec<IpNet> {
    let net = net.trunc();
    if except.iter().any(|e| e.contains(&net)) {
        return Vec::new();
    }
    if !except.iter().any(|e| net.contains(e)) {
        return vec![net];
    }
    let Ok(halves) = net.subnets(net.prefix_len() + 1) else {
        return vec![net];
    };
    halves.flat_map(|h| subtract(h, except)).collect()
}

fn host(ip: IpAddr) -> IpNet {
    IpNet::from(ip)
}

/// The peer prefixes of a rule; `None`: every address.
fn peer_nets(rule: &Rule) -> Option<BTreeSet<IpNet>> {
    if rule.peers.is_empty() {
        return None;
    }
    let mut out = BTreeSet::new();
    for p in &rule.peers {
        match p {
            Peer::Pods(addrs) => out.extend(addrs.iter().copied().map(host)),
            Peer::IpBlock { cidr, except } => out.extend(subtract(*cidr, except)),
        }
    }
    Some(out)
}

/// A clause naming an address or prefix.
type MakeClause = fn(IpNet) -> Clause;

/// How a rule of `dir` names its pods and its peers: ingress pods are destinations, egress
/// pods sources.
fn clause_makers(dir: Direction) -> (MakeClause, MakeClause) {
    match dir {
        Direction::Ingress => (Clause::Dst, Clause::Src),
        Direction::Egress => (Clause::Src, Clause::Dst),
    }
}

fn is_v6(n: &IpNet) -> bool {
    matches!(n, IpNet::V6(_))
}

/// What `p` puts in the tables, its conjunction ids taken from `ids`.
pub fn contribution(p: &NetworkPolicy, ids: &Policies) -> Contribution {
    let mut c = Contribution::default();
    let applied: BTreeSet<IpAddr> = p.applied_to.iter().copied().collect();
    for dir in [Direction::Ingress, Direction::Egress] {
        let Some(rules) = p.rules(dir) else {
            continue;
        };
        c.isolated
            .extend(applied.iter().map(|a| (dir, p.vrf.clone(), *a)));
        for (i, rule) in rules.iter().enumerate() {
            let Some(id) = ids.conj_id(&p.id, dir, i) else {
                continue;
            };
            let targets: BTreeSet<IpAddr> = match &rule.applied_to {
                Some(sub) => sub
                    .iter()
                    .filter(|a| applied.contains(a))
                    .copied()
                    .collect(),
                None => applied.clone(),
            };
            let peers = peer_nets(rule);
            let families: BTreeSet<bool> = targets
                .iter()
                .map(IpAddr::is_ipv6)
                .filter(|v6| {
                    peers
                        .as_ref()
                        .is_none_or(|ps| ps.iter().any(|n| is_v6(n) == *v6))
                })
                .collect();
            if families.is_empty() {
                // No pod, or peers that resolve to nothing: the rule allows nothing.
                continue;
            }
            let targets: Vec<IpAddr> = targets
                .into_iter()
                .filter(|a| families.contains(&a.is_ipv6()))
                .collect();
            let mut dims: Vec<Vec<Clause>> = Vec::new();
            let (target_clause, peer_clause) = clause_makers(dir);
            dims.push(targets.iter().map(|a| target_clause(host(*a))).collect());
            if let Some(ps) = &peers {
                dims.push(
                    ps.iter()
                        .filter(|n| families.contains(&is_v6(n)))
                        .map(|n| peer_clause(*n))
                        .collect(),
                );
            }
            if !rule.ports.is_empty() {
                let mut ports = BTreeSet::new();
                for port in &rule.ports {
                    for (proto, block) in port_blocks(port) {
                        for &v6 in &families {
                            ports.insert(match block {
                                Some((port, mask)) => Clause::Port {
                                    v6,
                                    proto,
                                    port,
                                    mask,
                                },
                                None => Clause::Proto { v6, proto },
                            });
                        }
                    }
                }
                dims.push(ports.into_iter().collect());
            }
            if dims.len() == 1 {
                c.allow_all
                    .extend(targets.iter().map(|a| (dir, p.vrf.clone(), *a)));
                continue;
            }
            let n = dims.len() as u8;
            for (k, dim) in dims.into_iter().enumerate() {
                for clause in dim {
                    c.clauses.push((
                        ClauseKey {
                            dir,
                            vrf: p.vrf.clone(),
                            clause,
                        },
                        ConjRef {
                            id,
                            k: k as u8 + 1,
                            n,
                        },
                    ));
                }
            }
            let fams = families
                .iter()
                .map(|v6| if *v6 { 2 } else { 1 })
                .fold(0, |a, b| a | b);
            c.conjs.push((dir, p.vrf.clone(), id, fams));
        }
    }
    c
}

/// Every policy's contribution, merged by flow.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Index {
    pub clauses: BTreeMap<ClauseKey, BTreeSet<ConjRef>>,
    /// Pods with an unrestricted allowance, with how many rules give it.
    pub allow_all: BTreeMap<Pod, usize>,
    /// Isolated pods, with how many policies isolate them.
    pub isolated: BTreeMap<Pod, usize>,
    /// Conjunctions that can match, with their direction, VRF and families.
    pub conjs: BTreeMap<u32, (Direction, String, u8)>,
}

impl Index {
    pub fn add(&mut self, c: &Contribution) {
        for (k, r) in &c.clauses {
            self.clauses.entry(k.clone()).or_default().insert(*r);
        }
        for p in &c.allow_all {
            *self.allow_all.entry(p.clone()).or_default() += 1;
        }
        for p in &c.isolated {
            *self.isolated.entry(p.clone()).or_default() += 1;
        }
        for (d, vrf, id, fams) in &c.conjs {
            self.conjs.insert(*id, (*d, vrf.clone(), *fams));
        }
    }

    pub fn remove(&mut self, c: &Contribution) {
        for (k, r) in &c.clauses {
            if let Some(set) = self.clauses.get_mut(k) {
                set.remove(r);
                if set.is_empty() {
                    self.clauses.remove(k);
                }
            }
        }
        let dec = |m: &mut BTreeMap<Pod, usize>, p: &Pod| {
            if let Some(n) = m.get_mut(p) {
                *n -= 1;
                if *n == 0 {
                    m.remove(p);
                }
            }
        };
        for p in &c.allow_all {
            dec(&mut self.allow_all, p);
        }
        for p in &c.isolated {
            dec(&mut self.isolated, p);
        }
        for (_, _, id, _) in &c.conjs {
            self.conjs.remove(id);
        }
    }
}

impl Contribution {
    /// Every flow owner this contribution has something in.
    pub fn keys(&self) -> impl Iterator<Item = FlowOwner> + '_ {
        self.clauses
            .iter()
            .map(|(k, _)| FlowOwner::Clause(k.clone()))
            .chain(self.allow_all.iter().map(|(d, vrf, a)| {
                FlowOwner::Clause(ClauseKey {
                    dir: *d,
                    vrf: vrf.clone(),
                    clause: target_clause(*d, *a),
                })
            }))
            .chain(self.isolated.iter().cloned().map(FlowOwner::Isolation))
            .chain(self.conjs.iter().map(|(_, _, id, _)| FlowOwner::Conj(*id)))
    }
}

/// The clause naming pod `a` as the pod a rule of direction `d` applies to.
pub fn target_clause(d: Direction, a: IpAddr) -> Clause {
    match d {
        Direction::Ingress => Clause::Dst(host(a)),
        Direction::Egress => Clause::Src(host(a)),
    }
}

/// The owners of NetworkPolicy flows (see `crate::datapath::Owner`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FlowOwner {
    /// The flows matching one address, prefix or port block.
    Clause(ClauseKey),
    /// The isolation (default deny) flows of a pod.
    Isolation(Pod),
    /// The `conj_id` flow of a rule.
    Conj(u32),
}

impl std::fmt::Display for FlowOwner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FlowOwner::Clause(k) => write!(
                f,
                "network policy {} {:?} in VRF {}",
                k.dir.name(),
                k.clause,
                k.vrf
            ),
            FlowOwner::Isolation((d, vrf, a)) => {
                write!(
                    f,
                    "network policy {} isolation of {a} in VRF {vrf}",
                    d.name()
                )
            }
            FlowOwner::Conj(id) => write!(f, "network policy conjunction {id}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_ranges_become_exact_mask_blocks() {
        assert_eq!(range_masks(80, 80), [(80, 0xffff)]);
        assert_eq!(range_masks(80, 81), [(80, 0xfffe)]);
        assert_eq!(
            range_masks(1000, 1010),
            [(1000, 0xfff8), (1008, 0xfffe), (1010, 0xffff)]
        );
        assert_eq!(range_masks(0, 65535), [(0, 0)]);
        // Every port of a few ranges is covered exactly once, and nothing else.
        for (s, e) in [
            (1, 65535),
            (32000, 32767),
            (7, 9),
            (65535, 65535),
            (443, 8443),
        ] {
            let blocks = range_masks(s, e);
            for port in 0..=u16::MAX {
                let hits = blocks.iter().filter(|(v, m)| port & m == *v).count();
                assert_eq!(
                    hits,
                    usize::from(port >= s && port <= e),
                    "{s}..{e} port {port}"
                );
            }
        }
    }

    #[test]
    fn except_prefixes_are_cut_out() {
        let n = |s: &str| s.parse::<IpNet>().unwrap();
        assert_eq!(
            subtract(n("10.0.0.0/24"), &[n("10.0.0.128/25")]),
            [n("10.0.0.0/25")]
        );
        assert_eq!(
            subtract(n("10.0.0.0/24"), &[n("10.0.0.5/32")]).len(),
            8,
            "/24 minus one address is 8 prefixes"
        );
        assert_eq!(subtract(n("10.0.0.0/24"), &[n("10.0.0.0/16")]), []);
        assert_eq!(
            subtract(n("fd00::/64"), &[n("fd00::/65")]),
            [n("fd00::8000:0:0:0/65")]
        );
    }
}
