//! The evaluator: a packet through one bridge's tables, as `ovs-vswitchd` translates it.
//!
//! Semantics follow OVS's translation (and so `ofproto/trace`): per table the highest
//! priority flow whose every field matches under its mask (fields a packet lacks read as 0);
//! instructions in OpenFlow order (meter, apply-actions, write-metadata, goto); an output to
//! the packet's own in_port is skipped; `resubmit` looks a table up and comes back; each
//! bucket of an `all` group runs on its own copy of the packet; a `select` group takes one
//! bucket (which one is the switch's hash: the evaluation explores every bucket, one
//! [`Path`] each); `ct(table=N)` forks: the packet itself leaves conntrack untracked, and the
//! recirculated copy continues in table N after the current pipeline, with the next assumed
//! `ct_state` (default `trk|new`, as `ofproto/trace` assumes), the zone, the `ct_mark` the
//! action sets and NAT applied to the first address and port of its range. `learn` is
//! reported, not performed.

use super::packet::{Fields, ct};
use super::{TableSet, TraceFlow};
use ofproto::action::Action;
use ofproto::action::nicira::{CtZone, NAT_DST, NAT_SRC, Subfield};
use ofproto::group::GroupType;
use ofproto::instruction::Instruction;
use ofproto::oxm::Oxm;
use ofproto::port::{OFPP_CONTROLLER, OFPP_IN_PORT, OFPP_NORMAL};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Resubmits and groups deeper than this stop the evaluation (OVS stops at 64 as well).
const MAX_DEPTH: usize = 64;
/// At most this many select-group alternatives are explored.
const MAX_PATHS: usize = 64;

/// What conntrack is assumed to answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CtAssumptions {
    /// `ct_state` after the 1st, 2nd... recirculating `ct` action; `trk|new` after the list
    /// (as `ofproto/trace --ct-next`).
    pub next: Vec<u32>,
    /// Also give the recirculated packet the connection's original direction (`ct_nw_dst`,
    /// `ct_nw_proto`, `ct_tp_dst`... of the packet before NAT), as a real conntrack entry
    /// created by this packet has. `ofproto/trace` does not.
    pub original_tuple: bool,
}

impl CtAssumptions {
    /// What a real first packet of a connection sees: `trk|new` and the original tuple.
    pub fn first_packet() -> CtAssumptions {
        CtAssumptions {
            next: Vec::new(),
            original_tuple: true,
        }
    }
}

/// One table lookup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    /// 0 for the main pipeline; one more inside a resubmit, a group bucket.
    pub depth: usize,
    pub table: u8,
    pub table_name: String,
    /// Why this lookup happens, when not by goto: `resubmit(,2)`, `group 5 bucket 1`,
    /// `recirculation after ct(table=3) with ct_state=trk|new`.
    #[serde(default)]
    pub via: Option<String>,
    /// The matching flow in `ovs-ofctl` syntax; `None` when none matched (drop).
    pub flow: Option<String>,
    pub priority: Option<u16>,
    pub owner: Option<String>,
    pub rule: Option<String>,
    /// What the flow did, in order (`set vlan_vid=0x1002`, `metadata=0x1..`, `output:3`,
    /// `goto_table:5`, `drop`).
    pub effects: Vec<String>,
}

/// Where a copy of the packet leaves the bridge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "to", rename_all = "lowercase")]
pub enum Egress {
    /// Out an OpenFlow port, with the packet's fields at that moment.
    Port {
        port: u32,
        tun_id: u64,
        /// 802.1Q VLAN when tagged.
        vlan: Option<u16>,
        dl_dst: String,
        /// Index of the step that output it.
        step: usize,
        /// The packet's fields as it leaves (for the next host's pipeline).
        #[serde(skip)]
        fields: Fields,
    },
    /// To the controller (a packet-in).
    Controller { table: u8, step: usize },
    /// OVS's normal L2 switching (VLAN bridge).
    Normal { vlan: Option<u16>, step: usize },
}

/// One way through the tables (several when select groups are on the way).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Path {
    /// The select-group buckets this path took: `(group, bucket, of buckets)`.
    pub choices: Vec<(u32, usize, usize)>,
    pub steps: Vec<Step>,
    pub egress: Vec<Egress>,
    /// Evaluation stopped early (depth, unsupported action): why.
    pub incomplete: Option<String>,
    /// The packet's fields at the last step (after NAT, tags...).
    #[serde(skip)]
    pub last_fields: Fields,
}

impl Path {
    /// Output ports (controller = `u32::MAX`, normal = `u32::MAX - 1`) sorted: what a
    /// comparison with OVS's datapath actions looks at.
    pub fn ports(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .egress
            .iter()
            .map(|e| match e {
                Egress::Port { port, .. } => *port,
                Egress::Controller { .. } => u32::MAX,
                Egress::Normal { .. } => u32::MAX - 1,
            })
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

/// Every path a packet can take.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evaluation {
    pub paths: Vec<Path>,
}

/// Walk `fields` (a packet entering the bridge) through `tables` from table 0.
pub fn evaluate(tables: &TableSet, fields: &Fields, ct: &CtAssumptions) -> Evaluation {
    evaluate_from(tables, fields, ct, 0)
}

/// As [`evaluate`], starting in `table`.
pub fn evaluate_from(
    tables: &TableSet,
    fields: &Fields,
    ct: &CtAssumptions,
    table: u8,
) -> Evaluation {
    let mut paths = Vec::new();
    let mut pending: VecDeque<Vec<usize>> = VecDeque::from([Vec::new()]);
    while let Some(choices) = pending.pop_front() {
        let mut run = Run {
            tables,
            ct,
            choices: &choices,
            taken: Vec::new(),
            ct_used: 0,
            steps: Vec::new(),
            egress: Vec::new(),
            recirc: VecDeque::new(),
            incomplete: None,
            last: fields.clone(),
        };
        run.pipeline(fields.clone(), table, 0, None);
        while let Some((f, t, via)) = run.recirc.pop_front() {
            run.pipeline(f, t, 0, Some(via));
        }
        // The first run of a choice prefix explores bucket 0 of every later select group;
        // queue the other buckets of the groups this run met first.
        for (i, (_, bucket, of)) in run.taken.iter().enumerate().skip(choices.len()) {
            debug_assert_eq!(*bucket, 0);
            for b in 1..*of {
                if paths.len() + pending.len() + 1 >= MAX_PATHS {
                    break;
                }
                let mut c: Vec<usize> = run.taken[..i].iter().map(|t| t.1).collect();
                c.push(b);
                pending.push_back(c);
            }
        }
        paths.push(Path {
            choices: run.taken,
            steps: run.steps,
            egress: run.egress,
            incomplete: run.incomplete,
            last_fields: run.last,
        });
    }
    Evaluation { paths }
}

struct Run<'a> {
    tables: &'a TableSet,
    ct: &'a CtAssumptions,
    choices: &'a [usize],
    taken: Vec<(u32, usize, usize)>,
    ct_used: usize,
    steps: Vec<Step>,
    egress: Vec<Egress>,
    recirc: VecDeque<(Fields, u8, String)>,
    incomplete: Option<String>,
    last: Fields,
}

/// Whether `f` matches every field of `flow`.
pub fn matches(flow: &TraceFlow, f: &Fields) -> bool {
    flow.flow
        .key
        .matches
        .fields
        .iter()
        .all(|m| field_matches(m, f))
}

/// The conjunction clauses a flow carries (`conjunction(id,k/n)` actions): such a flow is only
/// a part of a match.
fn conjunctions(flow: &TraceFlow) -> Vec<(u32, u8, u8)> {
    flow.flow
        .instructions
        .iter()
        .flat_map(|i| match i {
            Instruction::ApplyActions(a) | Instruction::WriteActions(a) => a.as_slice(),
            _ => &[],
        })
        .filter_map(|a| match a {
            Action::Conjunction(c) => Some((c.id, c.clause, c.n_clauses)),
            _ => None,
        })
        .collect()
}

/// The flow of `flows` (highest priority first) a packet with `f` takes, as OVS's
/// classifier decides: per priority, a plain flow that matches; else a conjunction whose
/// every clause has a matching flow at that priority, whose `conj_id` flow then is the
/// match; else the next lower priority.
pub fn lookup<'t>(flows: &'t [TraceFlow], f: &Fields) -> Option<&'t TraceFlow> {
    let mut start = 0;
    while start < flows.len() {
        let prio = flows[start].flow.key.priority;
        let end = flows[start..]
            .iter()
            .position(|fl| fl.flow.key.priority != prio)
            .map_or(flows.len(), |n| start + n);
        let mut clauses: std::collections::BTreeMap<u32, (u8, std::collections::BTreeSet<u8>)> =
            std::collections::BTreeMap::new();
        for fl in &flows[start..end] {
            if !matches(fl, f) {
                continue;
            }
            let conj = conjunctions(fl);
            if conj.is_empty() {
                return Some(fl);
            }
            for (id, k, n) in conj {
                clauses
                    .entry(id)
                    .or_insert((n, Default::default()))
                    .1
                    .insert(k);
            }
        }
        for (id, (n, ks)) in clauses {
            if ks.len() == usize::from(n) {
                let mut g = f.clone();
                g.set("conj_id", u128::from(id));
                if let Some(fl) = flows.iter().find(|fl| {
                    fl.flow.key.matches.get(ofproto::nxm::CONJ_ID).is_some() && matches(fl, &g)
                }) {
                    return Some(fl);
                }
            }
        }
        start = end;
    }
    None
}

fn field_matches(m: &Oxm, f: &Fields) -> bool {
    let Some(info) = m.field.info() else {
        return false;
    };
    let width = u32::from(info.len) * 8;
    let mask = m.mask_u128().unwrap_or_else(|| ones(width));
    (f.get(info.name) & mask) == (m.value_u128() & mask)
}

fn ones(bits: u32) -> u128 {
    if bits >= 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    }
}

fn subfield(s: &Subfield) -> Option<(&'static str, u128)> {
    let info = s.field.field().info()?;
    let mask = ones(u32::from(s.n_bits)).checked_shl(u32::from(s.ofs))?;
    Some((info.name, mask))
}

impl Run<'_> {
    fn lookup(&self, table: u8, f: &Fields) -> Option<&TraceFlow> {
        lookup(self.tables.flows.get(&table)?, f)
    }

    /// Look `table` up and run what matches, following gotos; returns the packet's fields
    /// afterwards.
    fn pipeline(
        &mut self,
        mut f: Fields,
        mut table: u8,
        depth: usize,
        mut via: Option<String>,
    ) -> Fields {
        loop {
            if depth > MAX_DEPTH {
                self.incomplete = Some(format!("more than {MAX_DEPTH} nested lookups"));
                return f;
            }
            let flow = self.lookup(table, &f).cloned();
            let idx = self.steps.len();
            self.steps.push(Step {
                depth,
                table,
                table_name: self.tables.table_name(table),
                via: via.take(),
                flow: flow.as_ref().map(|fl| crate::text::flow(&fl.flow)),
                priority: flow.as_ref().map(|fl| fl.flow.key.priority),
                owner: flow.as_ref().and_then(|fl| fl.owner.clone()),
                rule: flow.as_ref().and_then(|fl| fl.rule.clone()),
                effects: Vec::new(),
            });
            let Some(flow) = flow else {
                self.effect(idx, "no flow matches: drop".into());
                self.last = f.clone();
                return f;
            };
            let mut next = None;
            let mut any_action = false;
            for ins in &flow.flow.instructions {
                match ins {
                    Instruction::Meter(m) => self.effect(idx, format!("meter:{m}")),
                    Instruction::ApplyActions(acts) => {
                        any_action |= !acts.is_empty();
                        if !self.actions(acts, &mut f, idx, depth) {
                            self.last = f.clone();
                            return f;
                        }
                    }
                    Instruction::WriteMetadata { metadata, mask } => {
                        f.set_masked("metadata", u128::from(*metadata), u128::from(*mask));
                        self.effect(idx, format!("write_metadata:{metadata:#x}/{mask:#x}"));
                        any_action = true;
                    }
                    Instruction::GotoTable(t) => next = Some(*t),
                    Instruction::ClearActions => {}
                    Instruction::WriteActions(acts) => {
                        // Not used by these pipelines; run at once (close enough for them).
                        any_action |= !acts.is_empty();
                        if !self.actions(acts, &mut f, idx, depth) {
                            self.last = f.clone();
                            return f;
                        }
                    }
                    other => {
                        self.incomplete = Some(format!("instruction {other:?} is not modelled"));
                    }
                }
            }
            match next {
                Some(t) => {
                    self.effect(idx, format!("goto_table:{t}"));
                    table = t;
                }
                None => {
                    if !any_action {
                        self.effect(idx, "drop".into());
                    }
                    self.last = f.clone();
                    return f;
                }
            }
        }
    }

    fn effect(&mut self, idx: usize, e: String) {
        if let Some(s) = self.steps.get_mut(idx) {
            s.effects.push(e);
        }
    }

    /// Run `acts`; false when the pipeline must stop (`exit`).
    fn actions(&mut self, acts: &[Action], f: &mut Fields, idx: usize, depth: usize) -> bool {
        for a in acts {
            match a {
                Action::Output { port, .. } => self.output(port.0, f, idx),
                Action::SetField(oxm) | Action::RegLoad2(oxm) => {
                    if let Some(info) = oxm.field.info() {
                        let width = u32::from(info.len) * 8;
                        let mask = oxm.mask_u128().unwrap_or_else(|| ones(width));
                        f.set_masked(info.name, oxm.value_u128(), mask);
                        self.effect(idx, format!("set {}={:#x}", info.name, f.get(info.name)));
                    }
                }
                Action::RegLoad { dst, value } => {
                    if let Some((name, mask)) = subfield(dst) {
                        f.set_masked(name, u128::from(*value) << dst.ofs, mask);
                        self.effect(idx, format!("set {name}={:#x}", f.get(name)));
                    }
                }
                Action::RegMove { src, dst } => {
                    if let (Some((sn, sm)), Some((dn, dm))) = (subfield(src), subfield(dst)) {
                        let v = (f.get(sn) & sm) >> src.ofs;
                        f.set_masked(dn, v << dst.ofs, dm);
                        self.effect(idx, format!("set {dn}={:#x}", f.get(dn)));
                    }
                }
                Action::PushVlan(_) => {
                    let vid = f.get("vlan_vid") & 0xfff;
                    f.set("vlan_vid", 0x1000 | vid);
                    self.effect(idx, "push_vlan".into());
                }
                Action::PopVlan => {
                    f.set("vlan_vid", 0);
                    self.effect(idx, "pop_vlan".into());
                }
                Action::SetTunnel(t) => {
                    f.set("tun_id", u128::from(*t));
                    self.effect(idx, format!("set tun_id={t:#x}"));
                }
                Action::SetTunnel64(t) => {
                    f.set("tun_id", u128::from(*t));
                    self.effect(idx, format!("set tun_id={t:#x}"));
                }
                Action::Group(id) => self.group(*id, f, idx, depth),
                Action::Resubmit { in_port, table, .. } => {
                    let t = table.unwrap_or(0);
                    let saved = f.get("in_port");
                    if u32::from(*in_port) != OFPP_IN_PORT && *in_port != 0xfff8 {
                        f.set("in_port", u128::from(*in_port));
                    }
                    self.effect(idx, format!("resubmit(,{t})"));
                    let via = Some(format!(
                        "resubmit(,{t}) from table {}",
                        self.steps[idx].table
                    ));
                    *f = self.pipeline(f.clone(), t, depth + 1, via);
                    f.set("in_port", saved);
                }
                Action::Ct(c) => {
                    let zone = match &c.zone {
                        CtZone::Imm(z) => u128::from(*z),
                        CtZone::Field(s) => match subfield(s) {
                            Some((n, m)) => (f.get(n) & m) >> s.ofs,
                            None => 0,
                        },
                    };
                    let mut r = f.clone();
                    if self.ct.original_tuple && r.get("ct_state") & u128::from(ct::TRK) == 0 {
                        for (from, to) in [
                            ("nw_src", "ct_nw_src"),
                            ("nw_dst", "ct_nw_dst"),
                            ("nw_proto", "ct_nw_proto"),
                            ("tcp_src", "ct_tp_src"),
                            ("tcp_dst", "ct_tp_dst"),
                            ("udp_src", "ct_tp_src"),
                            ("udp_dst", "ct_tp_dst"),
                        ] {
                            let v = f.get(from);
                            if v != 0 {
                                r.set(to, v);
                            }
                        }
                    }
                    r.set("ct_zone", zone);
                    let mut nat_text = String::new();
                    for inner in &c.actions {
                        match inner {
                            Action::SetField(o) | Action::RegLoad2(o) => {
                                if let Some(info) = o.field.info() {
                                    let width = u32::from(info.len) * 8;
                                    let mask = o.mask_u128().unwrap_or_else(|| ones(width));
                                    r.set_masked(info.name, o.value_u128(), mask);
                                }
                            }
                            Action::RegLoad { dst, value } => {
                                if let Some((name, mask)) = subfield(dst) {
                                    r.set_masked(name, u128::from(*value) << dst.ofs, mask);
                                }
                            }
                            Action::Nat(n) => {
                                let tcp = f.get("nw_proto") == 6;
                                if n.flags & NAT_DST != 0 {
                                    if let Some(a) = n.range.ipv4_min {
                                        r.set("nw_dst", u128::from(u32::from(a)));
                                        nat_text = format!(" dnat to {a}");
                                    }
                                    if let Some(p) = n.range.proto_min {
                                        r.set(
                                            if tcp { "tcp_dst" } else { "udp_dst" },
                                            u128::from(p),
                                        );
                                        nat_text.push_str(&format!(":{p}"));
                                    }
                                }
                                if n.flags & NAT_SRC != 0 {
                                    if let Some(a) = n.range.ipv4_min {
                                        r.set("nw_src", u128::from(u32::from(a)));
                                        nat_text = format!(" snat to {a}");
                                    }
                                    if let Some(p) = n.range.proto_min {
                                        r.set(
                                            if tcp { "tcp_src" } else { "udp_src" },
                                            u128::from(p),
                                        );
                                    }
                                }
                            }
                            _ => {}
                        }
                    }
                    let state = self
                        .ct
                        .next
                        .get(self.ct_used)
                        .copied()
                        .unwrap_or(ct::TRK | ct::NEW);
                    if c.recirc_table != 255 {
                        self.ct_used += 1;
                        r.set("ct_state", u128::from(state));
                        let via = format!(
                            "recirculation after ct (zone {zone}{nat_text}) in table {}, assuming ct_state={}",
                            self.steps[idx].table,
                            ct::text(state)
                        );
                        self.recirc.push_back((r, c.recirc_table, via));
                        self.effect(
                            idx,
                            format!(
                                "ct(zone={zone}{nat_text}), continue in table {}",
                                c.recirc_table
                            ),
                        );
                    } else {
                        self.effect(idx, format!("ct(zone={zone}{nat_text})"));
                    }
                    // The packet itself leaves the ct action untracked.
                    for n in [
                        "ct_state",
                        "ct_zone",
                        "ct_mark",
                        "ct_label",
                        "ct_nw_src",
                        "ct_nw_dst",
                        "ct_nw_proto",
                        "ct_tp_src",
                        "ct_tp_dst",
                        "ct_ipv6_src",
                        "ct_ipv6_dst",
                    ] {
                        f.set(n, 0);
                    }
                }
                Action::CtClear => {
                    for n in ["ct_state", "ct_zone", "ct_mark", "ct_label"] {
                        f.set(n, 0);
                    }
                    self.effect(idx, "ct_clear".into());
                }
                Action::Learn(l) => {
                    self.effect(
                        idx,
                        format!(
                            "learn a flow into table {} (not performed by a trace)",
                            l.table_id
                        ),
                    );
                }
                Action::Controller { .. } | Action::Controller2(_) => {
                    self.egress.push(Egress::Controller {
                        table: self.steps[idx].table,
                        step: idx,
                    });
                    self.effect(idx, "to the controller".into());
                }
                Action::Clone(inner) => {
                    let mut copy = f.clone();
                    self.actions(inner, &mut copy, idx, depth);
                }
                Action::Exit => {
                    self.effect(idx, "exit".into());
                    return false;
                }
                Action::DecTtl
                | Action::DecNwTtl
                | Action::Note(_)
                | Action::SetQueue(_)
                | Action::PopQueue
                | Action::FinTimeout { .. } => {}
                other => {
                    self.incomplete = Some(format!("action {other:?} is not modelled"));
                    self.effect(idx, format!("{other:?} (not modelled)"));
                }
            }
        }
        true
    }

    fn output(&mut self, port: u32, f: &Fields, idx: usize) {
        let table = self.steps[idx].table;
        let vlan = {
            let v = f.get("vlan_vid");
            (v & 0x1000 != 0).then_some((v & 0xfff) as u16)
        };
        let in_port = f.get("in_port") as u32;
        match port {
            OFPP_CONTROLLER => {
                self.egress.push(Egress::Controller { table, step: idx });
                self.effect(idx, "output:CONTROLLER".into());
            }
            OFPP_NORMAL => {
                self.egress.push(Egress::Normal { vlan, step: idx });
                self.effect(idx, "NORMAL".into());
            }
            OFPP_IN_PORT => {
                self.push_port(in_port, f, vlan, idx);
                self.effect(idx, "output:IN_PORT".into());
            }
            p if p == in_port => {
                self.effect(idx, format!("output:{p} skipped: it is the input port"));
            }
            p => {
                self.push_port(p, f, vlan, idx);
                self.effect(idx, format!("output:{p}"));
            }
        }
    }

    fn push_port(&mut self, port: u32, f: &Fields, vlan: Option<u16>, idx: usize) {
        self.egress.push(Egress::Port {
            port,
            tun_id: f.get("tun_id") as u64,
            vlan,
            dl_dst: super::packet::mac_of(f.get("dl_dst")).to_string(),
            step: idx,
            fields: f.clone(),
        });
    }

    fn group(&mut self, id: u32, f: &mut Fields, idx: usize, depth: usize) {
        let Some(g) = self.tables.groups.get(&id).cloned() else {
            self.effect(idx, format!("group:{id} does not exist: drop"));
            return;
        };
        self.effect(
            idx,
            format!("group:{id} ({})", group_type_name(g.group_type)),
        );
        match g.group_type {
            GroupType::Select => {
                if g.buckets.is_empty() {
                    self.effect(idx, format!("group {id} has no bucket: drop"));
                    return;
                }
                let k = self.taken.len();
                let b = self
                    .choices
                    .get(k)
                    .copied()
                    .unwrap_or(0)
                    .min(g.buckets.len() - 1);
                self.taken.push((id, b, g.buckets.len()));
                self.bucket(id, b, g.buckets.len(), &g.buckets[b].actions, f, idx, depth);
            }
            _ => {
                // all (each bucket on its own copy), indirect and fast-failover (first).
                let n = g.buckets.len();
                let take = if g.group_type == GroupType::All {
                    n
                } else {
                    n.min(1)
                };
                for (b, bucket) in g.buckets.iter().enumerate().take(take) {
                    let mut copy = f.clone();
                    self.bucket(id, b, n, &bucket.actions, &mut copy, idx, depth);
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn bucket(
        &mut self,
        id: u32,
        b: usize,
        n: usize,
        acts: &[Action],
        f: &mut Fields,
        idx: usize,
        depth: usize,
    ) {
        // A bucket's actions are reported on a step of their own.
        let table = self.steps[idx].table;
        let bidx = self.steps.len();
        self.steps.push(Step {
            depth: depth + 1,
            table,
            table_name: self.tables.table_name(table),
            via: Some(format!("group {id} bucket {b} of {n}")),
            flow: Some(format!("bucket={}", crate::text::actions(acts))),
            priority: None,
            owner: None,
            rule: None,
            effects: Vec::new(),
        });
        if depth + 1 > MAX_DEPTH {
            self.incomplete = Some(format!("more than {MAX_DEPTH} nested lookups"));
            return;
        }
        self.actions(acts, f, bidx, depth + 1);
    }
}

fn group_type_name(t: GroupType) -> &'static str {
    match t {
        GroupType::All => "all",
        GroupType::Select => "select",
        GroupType::Indirect => "indirect",
        GroupType::FastFailover => "ff",
        #[allow(unreachable_patterns)]
        _ => "other",
    }
}
