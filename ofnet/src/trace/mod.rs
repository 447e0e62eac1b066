//! `netctl trace`'s engine: an offline evaluator of a bridge's flow tables.
//!
//! A [`TableSet`] is one bridge's tables as data: the agent's desired flows, groups and meters
//! (each flow with the object it exists for: a policy rule, an endpoint...), the table names
//! of the pipeline, and what the agent knows about its ports (endpoints, VTEPs, uplinks).
//! netplugin serves it as JSON on its debug listener (`GET /inspect/flows/<bridge>`), with
//! the switch's actual flows next to it.
//!
//! [`eval::evaluate`] walks a packet through the tables the way `ovs-vswitchd` does
//! (`ofproto/trace` semantics: highest priority match per table, apply-actions in order,
//! metadata, goto, resubmit, groups, conntrack recirculation with assumed `ct_state`s) and
//! records every step. [`explain`] turns the outcome into a verdict in words and follows a
//! packet that leaves through a VTEP into the remote host's tables. [`ovs`] reads
//! `ovs-appctl ofproto/trace` output, so tests can check the evaluator against OVS itself.

pub mod eval;
pub mod explain;
pub mod ovs;
pub mod packet;

use bytes::BytesMut;
use ofctrl::{Flow, FlowKey, Group};
use ofproto::group::{Bucket, GroupType, parse_buckets};
use ofproto::instruction::{emit_instructions, parse_instructions};
use ofproto::matches::Match;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

pub use eval::{CtAssumptions, Evaluation, Path, Step, evaluate};
pub use explain::{HostTrace, Verdict, trace_hosts};
pub use packet::{Fields, PacketSpec, Proto};

/// Why a table set could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    #[error("flow {index} of bridge {bridge}: {what} is not valid hex or OpenFlow: {detail}")]
    BadFlow {
        bridge: String,
        index: usize,
        what: &'static str,
        detail: String,
    },
    #[error("group {id} of bridge {bridge}: its buckets are not valid hex or OpenFlow: {detail}")]
    BadGroup {
        bridge: String,
        id: u32,
        detail: String,
    },
    #[error("no endpoint, pod or address {0:?} is known on any host")]
    UnknownSource(String),
    #[error("{0}")]
    BadRequest(String),
}

/// What a port of the bridge is, for verdicts in words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum PortRole {
    /// A local endpoint.
    Endpoint {
        id: String,
        #[serde(default)]
        ipv4: Option<Ipv4Addr>,
        #[serde(default)]
        ipv6: Option<std::net::Ipv6Addr>,
        mac: crate::model::MacAddr,
        /// Endpoint group id (0 = none).
        #[serde(default)]
        epg: u16,
    },
    /// The VTEP toward a remote host.
    Vtep {
        remote: Ipv4Addr,
    },
    Uplink,
}

/// A port and its role.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortInfo {
    pub port: u32,
    #[serde(flatten)]
    pub role: PortRole,
}

/// One flow with the object it exists for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceFlow {
    pub flow: Flow,
    /// `rule default:web:3`, `local endpoint on port 3`, `the input table`...; `None` for the
    /// switch's flows nobody claims.
    pub owner: Option<String>,
    /// The policy rule id when the owner is a rule.
    pub rule: Option<String>,
}

/// One bridge's tables as data (see the module documentation).
#[derive(Debug, Clone, Default)]
pub struct TableSet {
    /// This host's VTEP address (VXLAN bridge).
    pub host: Option<Ipv4Addr>,
    pub bridge: String,
    pub names: BTreeMap<u8, String>,
    /// By table, highest priority first.
    pub flows: BTreeMap<u8, Vec<TraceFlow>>,
    pub groups: BTreeMap<u32, Group>,
    pub ports: BTreeMap<u32, PortRole>,
    /// VRF names by id.
    pub vrfs: BTreeMap<u8, String>,
    /// Every endpoint the agent knows (local and remote) with its VTEP: `(vrf, ip) → (id,
    /// host)`.
    pub endpoints: BTreeMap<(String, IpAddr), (String, Option<Ipv4Addr>)>,
}

impl TableSet {
    pub fn new(bridge: impl Into<String>) -> TableSet {
        TableSet {
            bridge: bridge.into(),
            ..TableSet::default()
        }
    }

    /// Add a flow (replacing one with the same table, priority and match).
    pub fn add_flow(&mut self, flow: Flow, owner: Option<String>, rule: Option<String>) {
        let table = self.flows.entry(flow.key.table).or_default();
        table.retain(|f| f.flow.key != flow.key);
        let at = table
            .iter()
            .position(|f| f.flow.key.priority < flow.key.priority)
            .unwrap_or(table.len());
        table.insert(at, TraceFlow { flow, owner, rule });
    }

    pub fn add_group(&mut self, group: Group) {
        self.groups.insert(group.id, group);
    }

    /// The table's name, or its number.
    pub fn table_name(&self, table: u8) -> String {
        self.names
            .get(&table)
            .cloned()
            .unwrap_or_else(|| format!("table {table}"))
    }

    /// The flow with this key.
    pub fn flow(&self, key: &FlowKey) -> Option<&TraceFlow> {
        self.flows
            .get(&key.table)?
            .iter()
            .find(|f| &f.flow.key == key)
    }

    /// Every flow, table by table.
    pub fn all_flows(&self) -> impl Iterator<Item = &TraceFlow> {
        self.flows.values().flatten()
    }

    /// The JSON form (see [`TableSetJson`]).
    pub fn to_json(&self) -> TableSetJson {
        TableSetJson {
            host: self.host,
            bridge: self.bridge.clone(),
            tables: self
                .names
                .iter()
                .map(|(id, name)| TableName {
                    id: *id,
                    name: name.clone(),
                })
                .collect(),
            flows: self
                .all_flows()
                .map(|f| {
                    let mut m = BytesMut::new();
                    f.flow.key.matches.emit(&mut m);
                    let mut ins = BytesMut::new();
                    emit_instructions(&f.flow.instructions, &mut ins);
                    FlowJson {
                        table: f.flow.key.table,
                        table_name: self.table_name(f.flow.key.table),
                        priority: f.flow.key.priority,
                        category: f.flow.category,
                        object: f.flow.object,
                        owner: f.owner.clone(),
                        rule: f.rule.clone(),
                        text: crate::text::flow(&f.flow),
                        r#match: hex(&m),
                        instructions: hex(&ins),
                    }
                })
                .collect(),
            groups: self
                .groups
                .values()
                .map(|g| {
                    let mut b = BytesMut::new();
                    for bucket in &g.buckets {
                        bucket.emit(&mut b);
                    }
                    GroupJson {
                        id: g.id,
                        r#type: g.group_type.into(),
                        text: crate::text::group(g),
                        buckets: hex(&b),
                    }
                })
                .collect(),
            ports: self
                .ports
                .iter()
                .map(|(port, role)| PortInfo {
                    port: *port,
                    role: role.clone(),
                })
                .collect(),
            vrfs: self
                .vrfs
                .iter()
                .map(|(id, name)| VrfName {
                    id: *id,
                    name: name.clone(),
                })
                .collect(),
            endpoints: self
                .endpoints
                .iter()
                .map(|((vrf, ip), (id, host))| KnownEndpoint {
                    id: id.clone(),
                    vrf: vrf.clone(),
                    ip: *ip,
                    host: *host,
                })
                .collect(),
        }
    }

    /// Read the JSON form back (refusing undecodable flows with the flow's position).
    pub fn from_json(j: &TableSetJson) -> Result<TableSet, TraceError> {
        let mut t = TableSet::new(j.bridge.clone());
        t.host = j.host;
        t.names = j.tables.iter().map(|n| (n.id, n.name.clone())).collect();
        for (index, f) in j.flows.iter().enumerate() {
            let bad = |what: &'static str, detail: String| TraceError::BadFlow {
                bridge: j.bridge.clone(),
                index,
                what,
                detail,
            };
            let mb = unhex(&f.r#match).map_err(|e| bad("match", e))?;
            let (_, matches) = Match::parse(&mb).map_err(|e| bad("match", e.to_string()))?;
            let ib = unhex(&f.instructions).map_err(|e| bad("instructions", e))?;
            let instructions =
                parse_instructions(&ib).map_err(|e| bad("instructions", e.to_string()))?;
            let flow = Flow::new(f.table, f.priority, matches, instructions)
                .owned_by(f.category, f.object);
            t.add_flow(flow, f.owner.clone(), f.rule.clone());
        }
        for g in &j.groups {
            let bad = |detail: String| TraceError::BadGroup {
                bridge: j.bridge.clone(),
                id: g.id,
                detail,
            };
            let bytes = unhex(&g.buckets).map_err(bad)?;
            let buckets: Vec<Bucket> = parse_buckets(&bytes).map_err(|e| bad(e.to_string()))?;
            let group_type = GroupType::from(g.r#type);
            t.add_group(Group {
                id: g.id,
                group_type,
                buckets,
            });
        }
        t.ports = j.ports.iter().map(|p| (p.port, p.role.clone())).collect();
        t.vrfs = j.vrfs.iter().map(|v| (v.id, v.name.clone())).collect();
        t.endpoints = j
            .endpoints
            .iter()
            .map(|e| ((e.vrf.clone(), e.ip), (e.id.clone(), e.host)))
            .collect();
        Ok(t)
    }
}

/// `{id, name}` of a table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableName {
    pub id: u8,
    pub name: String,
}

/// `{id, name}` of a VRF.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VrfName {
    pub id: u8,
    pub name: String,
}

/// An endpoint the agent knows, local or remote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KnownEndpoint {
    pub id: String,
    pub vrf: String,
    pub ip: IpAddr,
    /// The VTEP address of its host.
    pub host: Option<Ipv4Addr>,
}

/// A flow in JSON: readable (`text`, in `ovs-ofctl` syntax) and exact (`match` and
/// `instructions` as OpenFlow 1.3 wire bytes in hex).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowJson {
    pub table: u8,
    pub table_name: String,
    pub priority: u16,
    /// Cookie category and object (`docs/pipeline.md`, "Cookies").
    pub category: u8,
    pub object: u64,
    #[serde(default)]
    pub owner: Option<String>,
    #[serde(default)]
    pub rule: Option<String>,
    pub text: String,
    pub r#match: String,
    pub instructions: String,
}

/// A group in JSON: `text` in `ovs-ofctl dump-groups` syntax, the buckets as wire bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupJson {
    pub id: u32,
    pub r#type: u8,
    pub text: String,
    pub buckets: String,
}

/// A [`TableSet`] as JSON (`GET /inspect/flows/<bridge>` on netplugin's debug listener).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableSetJson {
    #[serde(default)]
    pub host: Option<Ipv4Addr>,
    pub bridge: String,
    pub tables: Vec<TableName>,
    pub flows: Vec<FlowJson>,
    pub groups: Vec<GroupJson>,
    #[serde(default)]
    pub ports: Vec<PortInfo>,
    #[serde(default)]
    pub vrfs: Vec<VrfName>,
    #[serde(default)]
    pub endpoints: Vec<KnownEndpoint>,
}

/// A difference between the desired and the actual tables.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowDiff {
    /// `missing` (desired, not on the switch), `unexpected` (on the switch, not desired) or
    /// `different` (same table, priority and match, other actions).
    pub kind: String,
    pub table: u8,
    pub priority: u16,
    /// The desired flow (or the switch's, for `unexpected`) in `ovs-ofctl` syntax.
    pub flow: String,
    #[serde(default)]
    pub actual: Option<String>,
}

/// What differs between `desired` and `actual`: flows are compared by table, priority and
/// match, then instructions, all as `ovs-ofctl` text (the switch returns match fields in its
/// own order); the switch's learned flows in table 2 are not compared.
pub fn diff(desired: &TableSet, actual: &TableSet) -> Vec<FlowDiff> {
    type Key = (u8, u16, String);
    let index = |t: &TableSet| -> BTreeMap<Key, String> {
        t.all_flows()
            .map(|f| {
                (
                    (
                        f.flow.key.table,
                        f.flow.key.priority,
                        crate::text::matches(&f.flow.key.matches),
                    ),
                    crate::text::flow(&f.flow),
                )
            })
            .collect()
    };
    let (want, have) = (index(desired), index(actual));
    let instructions = |line: &str| line.split_once(" actions=").map(|(_, a)| a.to_string());
    let mut out = Vec::new();
    for (k, flow) in &want {
        match have.get(k) {
            None => out.push(FlowDiff {
                kind: "missing".into(),
                table: k.0,
                priority: k.1,
                flow: flow.clone(),
                actual: None,
            }),
            Some(a) if instructions(a) != instructions(flow) => out.push(FlowDiff {
                kind: "different".into(),
                table: k.0,
                priority: k.1,
                flow: flow.clone(),
                actual: Some(a.clone()),
            }),
            Some(_) => {}
        }
    }
    for (k, flow) in &have {
        if k.0 != crate::pipeline::id::SERVICE_AFFINITY && !want.contains_key(k) {
            out.push(FlowDiff {
                kind: "unexpected".into(),
                table: k.0,
                priority: k.1,
                flow: flow.clone(),
                actual: None,
            });
        }
    }
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Result<Vec<u8>, String> {
    if !s.len().is_multiple_of(2) {
        return Err(format!("odd number of hex digits ({})", s.len()));
    }
    (0..s.len())
        .step_by(2)
        .map(|i| {
            s.get(i..i + 2)
                .and_then(|p| u8::from_str_radix(p, 16).ok())
                .ok_or_else(|| format!("not hex at offset {i}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofproto::action::Action;
    use ofproto::instruction::Instruction;
    use ofproto::oxm::{FieldId, Oxm};

    #[test]
    fn a_table_set_survives_json() {
        let mut t = TableSet::new("br0");
        t.names.insert(5, "policy".into());
        let m = Match {
            fields: vec![Oxm::int(FieldId::ETH_TYPE, 0x800, None)],
        };
        t.add_flow(
            Flow::new(5, 11, m, vec![]).owned_by(7, 42),
            Some("rule r1".into()),
            Some("r1".into()),
        );
        t.add_flow(
            Flow::new(5, 0, Match::new(), vec![Instruction::GotoTable(6)]),
            None,
            None,
        );
        t.add_group(Group {
            id: 5,
            group_type: GroupType::All,
            buckets: vec![Bucket::new(vec![Action::output(3u32)])],
        });
        let json = serde_json::to_string(&t.to_json()).unwrap();
        let back: TableSetJson = serde_json::from_str(&json).unwrap();
        let t2 = TableSet::from_json(&back).unwrap();
        assert_eq!(t2.flows, t.flows);
        assert_eq!(t2.groups, t.groups);
        assert!(diff(&t, &t2).is_empty());
        let mut bad = back.clone();
        bad.flows[0].r#match = "zz".into();
        let err = TableSet::from_json(&bad).unwrap_err().to_string();
        assert!(err.contains("flow 0 of bridge br0"), "{err}");
    }
}
