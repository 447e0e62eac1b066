//! The pipelines, declared once as data, and the table handle every flow is built through.
//!
//! Each bridge kind has one [`Pipeline`]: its tables in order, and for each table what it is
//! for, which fields its flows may match, which fields they may set, which metadata bits they
//! may write, which tables they may continue in, and what a miss does. [`Table::flow`] checks a
//! flow against that declaration and refuses it with an error naming the table and the field,
//! so a wrong flow fails where it is built, never on the switch. `ofctrl` gets the tables (with
//! their misses) from [`Pipeline::table_specs`]; `docs/pipeline.md` describes the same data.

use crate::metadata;
use ofctrl::{Flow, Miss, TableSpec};
use ofproto::action::Action;
use ofproto::instruction::Instruction;
use ofproto::matches::Match;
use ofproto::nxm;
use ofproto::oxm::FieldId;

/// Table ids (the reference's numbering for 0–6 and 9; its table 2 is here the service affinity
/// table). 7 and 8 depend on the datapath: the bridging pipelines (vlan, vxlan) use them for
/// NetworkPolicy, the routing pipelines (vrouter, vlrouter) use 7 as their IP table, so the
/// host DNAT table of `vrouter` is 10.
pub mod id {
    pub const INPUT: u8 = 0;
    pub const VLAN: u8 = 1;
    pub const SERVICE_AFFINITY: u8 = 2;
    pub const SERVICE_DNAT: u8 = 3;
    pub const DST_GROUP: u8 = 4;
    pub const POLICY: u8 = 5;
    pub const SERVICE_SNAT: u8 = 6;
    /// Routing datapaths: the IP (routing) table.
    pub const IP: u8 = 7;
    /// Bridging datapaths: NetworkPolicy egress, then ingress.
    pub const NETPOL_EGRESS: u8 = 7;
    pub const NETPOL_INGRESS: u8 = 8;
    pub const MAC_DEST: u8 = 9;
    /// VXLAN router: what pods send to the host (or beyond it) out the host NAT port, from
    /// their private address.
    pub const HOST_SNAT: u8 = 8;
    /// VXLAN router: what the host sends in on the host NAT port to a pod's private address.
    pub const HOST_DNAT: u8 = 9;
}

/// One table of a pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableDecl {
    pub id: u8,
    pub name: &'static str,
    /// One line for humans (docs, errors).
    pub purpose: &'static str,
    /// Fields flows of this table may match.
    pub matches: &'static [FieldId],
    /// Fields flows of this table may set.
    pub sets: &'static [FieldId],
    /// Metadata bits flows of this table may write.
    pub writes_metadata: u64,
    /// Tables flows of this table may continue in.
    pub next: &'static [u8],
    /// What a packet no flow matches does.
    pub miss: Miss,
}

/// A bridge kind's whole pipeline.
#[derive(Debug)]
pub struct Pipeline {
    pub name: &'static str,
    /// Packets carry the network's local VLAN inside the pipeline (pushed in table 1), so a
    /// packet sent straight back out of an endpoint port loses it first.
    pub tagged: bool,
    pub tables: &'static [TableDecl],
}

/// A flow that does not fit its table's declaration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PipelineError {
    #[error("pipeline {pipeline} has no table {table}")]
    NoSuchTable { pipeline: &'static str, table: u8 },
    #[error("table {table} does not match on {field}")]
    MatchNotAllowed {
        table: &'static str,
        field: &'static str,
    },
    #[error("table {table} does not set {field}")]
    SetNotAllowed {
        table: &'static str,
        field: &'static str,
    },
    #[error("table {table} does not write metadata bits {mask:#x}")]
    MetadataNotAllowed { table: &'static str, mask: u64 },
    #[error("table {table} does not continue in table {to}")]
    GotoNotAllowed { table: &'static str, to: u8 },
    #[error("table {table}: invalid match: {reason}")]
    BadMatch { table: &'static str, reason: String },
}

use id::*;

const F_IN_PORT: FieldId = FieldId::IN_PORT;

const INPUT_TABLE: TableDecl = TableDecl {
    id: INPUT,
    name: "input",
    purpose: "drops frames with a multicast source, sends ARP requests and neighbour solicitations (but for link-local targets) to the controller in proxy mode, meters local endpoints with a bandwidth limit",
    matches: &[
        F_IN_PORT,
        FieldId::ETH_SRC,
        FieldId::ETH_TYPE,
        FieldId::ARP_OP,
        FieldId::IP_PROTO,
        FieldId::ICMPV6_TYPE,
        FieldId::IPV6_ND_TARGET,
    ],
    sets: &[],
    writes_metadata: 0,
    next: &[VLAN],
    miss: Miss::Goto(VLAN),
};

/// What table 1 matches to classify a port and guard its sources.
const GUARD_MATCHES: [FieldId; 13] = [
    F_IN_PORT,
    FieldId::VLAN_VID,
    FieldId::ETH_SRC,
    FieldId::ETH_TYPE,
    FieldId::IPV4_SRC,
    FieldId::IPV6_SRC,
    FieldId::IP_PROTO,
    FieldId::UDP_SRC,
    FieldId::UDP_DST,
    FieldId::ICMPV6_TYPE,
    FieldId::IPV6_ND_TARGET,
    FieldId::ARP_SPA,
    FieldId::ARP_SHA,
];

/// [`GUARD_MATCHES`] and the VNI of VTEP traffic.
const GUARD_MATCHES_VXLAN: [FieldId; 14] = {
    let mut all = [FieldId::TUNNEL_ID; 14];
    let mut i = 0;
    while i < GUARD_MATCHES.len() {
        all[i] = GUARD_MATCHES[i];
        i += 1;
    }
    all
};

/// [`GUARD_MATCHES`] and the destination address (VLAN router: uplink traffic for the router
/// address).
const GUARD_MATCHES_VLROUTER: [FieldId; 14] = {
    let mut all = [FieldId::IPV4_DST; 14];
    let mut i = 0;
    while i < GUARD_MATCHES.len() {
        all[i] = GUARD_MATCHES[i];
        i += 1;
    }
    all
};

const SERVICE_AFFINITY_TABLE: TableDecl = TableDecl {
    id: SERVICE_AFFINITY,
    name: "service_affinity",
    purpose: "session affinity entries learned by the service groups (client, VIP port → provider in reg0, idle timeout); only consulted by resubmit from table 3",
    matches: &[],
    sets: &[],
    writes_metadata: 0,
    next: &[],
    miss: Miss::Drop,
};

const SERVICE_DNAT_TABLE: TableDecl = TableDecl {
    id: SERVICE_DNAT,
    name: "service_dnat",
    purpose: "service load balancing, client to provider: conntrack lookup (IPv4; IPv6 too while a service is dual-stack), new connections to a VIP through the service port's select group (TCP) or multipath hash (UDP) to a conntrack DNAT commit, provider MAC; hairpin (a pod to a service balanced to itself) SNATed and sent back",
    matches: &[
        FieldId::ETH_TYPE,
        FieldId::VLAN_VID,
        FieldId::METADATA,
        FieldId::IPV4_SRC,
        FieldId::IPV4_DST,
        FieldId::IPV6_SRC,
        FieldId::IPV6_DST,
        FieldId::IP_PROTO,
        FieldId::TCP_DST,
        FieldId::UDP_DST,
        nxm::CT_STATE,
        nxm::CT_MARK,
        nxm::CT_NW_DST,
        nxm::CT_IPV6_DST,
        nxm::CT_NW_PROTO,
        nxm::CT_TP_DST,
        nxm::reg(0),
        nxm::reg(1),
        nxm::reg(2),
        nxm::reg(3),
    ],
    sets: &[FieldId::ETH_SRC, FieldId::ETH_DST],
    writes_metadata: 0,
    next: &[DST_GROUP],
    miss: Miss::Goto(DST_GROUP),
};

const DST_GROUP_TABLE: TableDecl = TableDecl {
    id: DST_GROUP,
    name: "dst_group",
    purpose: "writes the destination endpoint group of known destination addresses",
    matches: &[
        FieldId::ETH_TYPE,
        FieldId::METADATA,
        FieldId::IPV4_DST,
        FieldId::IPV6_DST,
    ],
    sets: &[],
    writes_metadata: metadata::DST_EPG_MASK,
    next: &[POLICY],
    miss: Miss::Goto(POLICY),
};

const POLICY_TABLE: TableDecl = TableDecl {
    id: POLICY,
    name: "policy",
    purpose: "allow/deny rules by group, address (IPv4 or IPv6), protocol, port and TCP flags, evaluated for new connections and their later packets; replies of a tracked connection pass; the miss allows",
    matches: &[
        FieldId::ETH_TYPE,
        FieldId::METADATA,
        FieldId::IPV4_SRC,
        FieldId::IPV4_DST,
        FieldId::IPV6_SRC,
        FieldId::IPV6_DST,
        FieldId::IP_PROTO,
        FieldId::TCP_SRC,
        FieldId::TCP_DST,
        FieldId::UDP_SRC,
        FieldId::UDP_DST,
        nxm::TCP_FLAGS,
        nxm::CT_STATE,
        nxm::CT_LABEL,
    ],
    sets: &[],
    writes_metadata: 0,
    next: &[SERVICE_SNAT],
    miss: Miss::Goto(SERVICE_SNAT),
};

const SERVICE_SNAT_TABLE: TableDecl = TableDecl {
    id: SERVICE_SNAT,
    name: "service_snat",
    purpose: "service load balancing, provider to client: conntrack lookup of traffic from VTEPs and uplinks (replies back to the VIP), reply counters per provider",
    matches: &[
        FieldId::ETH_TYPE,
        nxm::CT_STATE,
        nxm::CT_MARK,
        nxm::CT_NW_DST,
        nxm::CT_IPV6_DST,
        nxm::CT_NW_PROTO,
        nxm::CT_TP_DST,
    ],
    sets: &[],
    writes_metadata: 0,
    next: &[NETPOL_EGRESS, MAC_DEST],
    miss: Miss::Goto(NETPOL_EGRESS),
};

/// What the NetworkPolicy tables match.
const NETPOL_MATCHES: [FieldId; 13] = [
    FieldId::ETH_TYPE,
    FieldId::METADATA,
    FieldId::IPV4_SRC,
    FieldId::IPV4_DST,
    FieldId::IPV6_SRC,
    FieldId::IPV6_DST,
    FieldId::IP_PROTO,
    FieldId::TCP_DST,
    FieldId::UDP_DST,
    FieldId::ICMPV6_TYPE,
    nxm::CT_STATE,
    nxm::CT_LABEL,
    nxm::CONJ_ID,
];

static NETPOL_EGRESS_TABLE: TableDecl = TableDecl {
    id: NETPOL_EGRESS,
    name: "netpol_egress",
    purpose: "Kubernetes NetworkPolicy egress of the source pod: replies of tracked connections pass, rules as conjunctions (pod, peer, port), isolated pods' other packets dropped (an established connection's also marked revoked in conntrack)",
    matches: &NETPOL_MATCHES,
    sets: &[],
    writes_metadata: 0,
    next: &[NETPOL_INGRESS, MAC_DEST],
    miss: Miss::Goto(NETPOL_INGRESS),
};

static NETPOL_INGRESS_TABLE: TableDecl = TableDecl {
    id: NETPOL_INGRESS,
    name: "netpol_ingress",
    purpose: "Kubernetes NetworkPolicy ingress of the destination pod, as egress; then every new connection allowed so far is committed to conntrack in the VRF's zone",
    matches: &NETPOL_MATCHES,
    sets: &[],
    writes_metadata: 0,
    next: &[MAC_DEST],
    miss: Miss::Goto(MAC_DEST),
};

/// The VLAN bridge: access ports carry the network's VLAN, OVS's normal switching does the
/// forwarding once policy let the packet through.
pub static VLAN_PIPELINE: Pipeline = Pipeline {
    name: "vlan",
    tagged: false,
    tables: &[
        INPUT_TABLE,
        TableDecl {
            id: VLAN,
            name: "vlan",
            purpose: "classifies by ingress port: VRF and source group for endpoints, DSCP marking, spoof guard (own MAC, IPv4, IPv6, ARP/ND claims); uplink traffic gets its network's VRF by VLAN and skips the source-side policy",
            matches: &GUARD_MATCHES,
            sets: &[FieldId::IP_DSCP],
            writes_metadata: metadata::PORT_MASK,
            next: &[SERVICE_DNAT, SERVICE_SNAT],
            // Unknown ports (host ports, ports not yet announced) are switched without policy.
            miss: Miss::Goto(DST_GROUP),
        },
        SERVICE_AFFINITY_TABLE,
        SERVICE_DNAT_TABLE,
        DST_GROUP_TABLE,
        POLICY_TABLE,
        SERVICE_SNAT_TABLE,
        NETPOL_EGRESS_TABLE,
        NETPOL_INGRESS_TABLE,
        TableDecl {
            id: MAC_DEST,
            name: "mac_dest",
            purpose: "OVS normal switching (MAC learning per VLAN)",
            matches: &[],
            sets: &[],
            writes_metadata: 0,
            next: &[],
            miss: Miss::Normal,
        },
    ],
};

/// The VXLAN bridge: endpoints get the network's local VLAN pushed on ingress; the MAC table
/// sends known destinations to their port or VTEP and floods the rest through groups.
pub static VXLAN_PIPELINE: Pipeline = Pipeline {
    name: "vxlan",
    tagged: true,
    tables: &[
        INPUT_TABLE,
        TableDecl {
            id: VLAN,
            name: "vlan",
            purpose: "classifies by ingress port: local VLAN, VRF and source group for endpoints, DSCP marking, spoof guard (own MAC, IPv4, IPv6, ARP/ND claims); VTEP traffic by VNI, skipping the source-side policy",
            matches: &GUARD_MATCHES_VXLAN,
            sets: &[FieldId::VLAN_VID, FieldId::IP_DSCP],
            writes_metadata: metadata::PORT_MASK | metadata::RX_VTEP,
            next: &[SERVICE_DNAT, SERVICE_SNAT],
            miss: Miss::Drop,
        },
        SERVICE_AFFINITY_TABLE,
        SERVICE_DNAT_TABLE,
        DST_GROUP_TABLE,
        POLICY_TABLE,
        SERVICE_SNAT_TABLE,
        NETPOL_EGRESS_TABLE,
        NETPOL_INGRESS_TABLE,
        TableDecl {
            id: MAC_DEST,
            name: "mac_dest",
            purpose: "known MACs to their port or VTEP, the rest to the VLAN's flood group",
            matches: &[FieldId::VLAN_VID, FieldId::ETH_DST, FieldId::METADATA],
            sets: &[FieldId::TUNNEL_ID],
            writes_metadata: 0,
            next: &[],
            miss: Miss::Drop,
        },
    ],
};

/// The routing table of the routing datapaths: known destination addresses in the packet's
/// VRF to their port (router MAC as source) or their host's VTEP (router MAC as destination).
const VROUTER_IP_TABLE: TableDecl = TableDecl {
    id: IP,
    name: "ip",
    purpose: "routes by destination address in the VRF: local endpoints out their port (router MAC as source, the endpoint's MAC as destination), other hosts' endpoints through their host's VTEP with the network's VNI (router MAC as destination); anything else is dropped",
    matches: &[
        FieldId::ETH_TYPE,
        FieldId::METADATA,
        FieldId::IPV4_DST,
        FieldId::IPV6_DST,
    ],
    sets: &[FieldId::ETH_SRC, FieldId::ETH_DST, FieldId::TUNNEL_ID],
    writes_metadata: 0,
    next: &[],
    miss: Miss::Drop,
};

/// The VXLAN router's host NAT path (reference: tables 8 and 2; here 8 and 9).
const HOST_SNAT_TABLE: TableDecl = TableDecl {
    id: HOST_SNAT,
    name: "host_snat",
    purpose: "what no route took, from a local endpoint, goes to the host: source rewritten to the endpoint's private address (pvtSubnet), out the host NAT port (contivh0) to its MAC",
    matches: &[FieldId::IN_PORT, FieldId::ETH_TYPE],
    sets: &[FieldId::IPV4_SRC, FieldId::ETH_SRC, FieldId::ETH_DST],
    writes_metadata: 0,
    next: &[],
    miss: Miss::Drop,
};

const HOST_DNAT_TABLE: TableDecl = TableDecl {
    id: HOST_DNAT,
    name: "host_dnat",
    purpose: "from the host NAT port: a local endpoint's private address rewritten to its own address, out its port with the router MAC as source",
    matches: &[FieldId::ETH_TYPE, FieldId::IPV4_DST],
    sets: &[FieldId::IPV4_DST, FieldId::ETH_SRC, FieldId::ETH_DST],
    writes_metadata: 0,
    next: &[],
    miss: Miss::Drop,
};

/// The VXLAN router (`vrouter`, routing mode): no local VLANs and no MAC table; every
/// endpoint answers ARP with the router MAC and table 7 routes by destination address,
/// remote endpoints through the VTEP of their host.
pub static VROUTER_PIPELINE: Pipeline = Pipeline {
    name: "vrouter",
    tagged: false,
    tables: &[
        INPUT_TABLE,
        TableDecl {
            id: VLAN,
            name: "vlan",
            purpose: "classifies by ingress port: VRF and source group for endpoints, DSCP marking, spoof guard (own MAC, IPv4, IPv6, ARP/ND claims); VTEP traffic by VNI (VRF), skipping policy; IPv4 from the host NAT port to host_dnat",
            matches: &GUARD_MATCHES_VXLAN,
            sets: &[FieldId::IP_DSCP],
            writes_metadata: metadata::PORT_MASK | metadata::RX_VTEP,
            next: &[SERVICE_DNAT, SERVICE_SNAT, HOST_DNAT],
            miss: Miss::Drop,
        },
        SERVICE_AFFINITY_TABLE,
        SERVICE_DNAT_TABLE,
        DST_GROUP_TABLE,
        POLICY_TABLE,
        TableDecl {
            next: &[IP],
            miss: Miss::Goto(IP),
            ..SERVICE_SNAT_TABLE
        },
        TableDecl {
            purpose: "routes by destination address in the VRF: local endpoints out their port (router MAC as source, the endpoint's MAC as destination), other hosts' endpoints through their host's VTEP with the network's VNI (router MAC as destination); private addresses dropped but the host's; anything else to host_snat",
            next: &[HOST_SNAT],
            miss: Miss::Goto(HOST_SNAT),
            ..VROUTER_IP_TABLE
        },
        HOST_SNAT_TABLE,
        HOST_DNAT_TABLE,
    ],
};

/// The VLAN router (`vlrouter`, routing mode with BGP): pods answered with the router MAC,
/// table 7 routes to local endpoints and to the prefixes BGP learned (out the uplink to the
/// next hop's MAC); the router port carrying the host's router address is plumbed straight to
/// the uplink.
pub static VLROUTER_PIPELINE: Pipeline = Pipeline {
    name: "vlrouter",
    tagged: false,
    tables: &[
        TableDecl {
            purpose: "drops frames with a multicast source, sends ARP requests and neighbour solicitations (but for link-local targets) to the controller, meters local endpoints with a bandwidth limit; the router port's traffic straight out the uplink, the uplink's ARP to the router port and the controller (next-hop MACs)",
            ..INPUT_TABLE
        },
        TableDecl {
            id: VLAN,
            name: "vlan",
            purpose: "classifies by ingress port: VRF and source group for endpoints, DSCP marking, spoof guard (own MAC, IPv4, IPv6, ARP/ND claims); uplink traffic to the router address to the router port, the rest skips policy",
            matches: &GUARD_MATCHES_VLROUTER,
            sets: &[FieldId::IP_DSCP],
            writes_metadata: metadata::PORT_MASK,
            next: &[SERVICE_DNAT, SERVICE_SNAT],
            miss: Miss::Drop,
        },
        SERVICE_AFFINITY_TABLE,
        SERVICE_DNAT_TABLE,
        DST_GROUP_TABLE,
        POLICY_TABLE,
        TableDecl {
            next: &[IP],
            miss: Miss::Goto(IP),
            ..SERVICE_SNAT_TABLE
        },
        TableDecl {
            id: IP,
            name: "ip",
            purpose: "routes by destination address: local endpoints out their port (router MAC as source, the endpoint's MAC as destination), prefixes learned by BGP out the uplink (router port MAC as source, the next hop's MAC as destination; longer prefixes first); anything else is dropped",
            matches: &[FieldId::ETH_TYPE, FieldId::IPV4_DST, FieldId::IPV6_DST],
            sets: &[FieldId::ETH_SRC, FieldId::ETH_DST],
            writes_metadata: 0,
            next: &[],
            miss: Miss::Drop,
        },
    ],
};

/// The host bridge (`host`): the host's port (`contivh0`, holding the last address of the
/// private subnet) and one host-access port per pod (`host1` in the pod, an address of the
/// private subnet). Pods reach the host (and, through it, the outside) and the host reaches
/// each pod; pods never reach each other here, directly or routed back by the host.
pub static HOST_PIPELINE: Pipeline = Pipeline {
    name: "host",
    tagged: false,
    tables: &[
        TableDecl {
            id: INPUT,
            name: "input",
            purpose: "admits IPv4 and ARP from the host port, but IPv4 from another private address (a pod's packet the host routed back); from a pod's host-access port only its own MAC and private address (IPv4, ARP claims); everything else is dropped",
            matches: &[
                F_IN_PORT,
                FieldId::ETH_SRC,
                FieldId::ETH_TYPE,
                FieldId::IPV4_SRC,
                FieldId::ARP_SPA,
                FieldId::ARP_SHA,
            ],
            sets: &[],
            writes_metadata: 0,
            next: &[MAC_DEST],
            miss: Miss::Drop,
        },
        TableDecl {
            id: MAC_DEST,
            name: "mac_dest",
            purpose: "from the host port: frames to a pod's MAC and ARP requests for its private address out its port; from pods: frames to the host port's MAC and ARP requests for the host's address out the host port; anything else (a pod to another pod) is dropped",
            matches: &[
                F_IN_PORT,
                FieldId::ETH_DST,
                FieldId::ETH_TYPE,
                FieldId::ARP_OP,
                FieldId::ARP_TPA,
            ],
            sets: &[],
            writes_metadata: 0,
            next: &[],
            miss: Miss::Drop,
        },
    ],
};

/// Every declared pipeline (docs, checks).
pub static ALL: [&Pipeline; 5] = [
    &VLAN_PIPELINE,
    &VXLAN_PIPELINE,
    &VROUTER_PIPELINE,
    &VLROUTER_PIPELINE,
    &HOST_PIPELINE,
];

impl Pipeline {
    /// Whether the pipeline has the NetworkPolicy tables (the bridging pipelines do; the
    /// routing pipelines use table 7 to route).
    pub fn has_netpol(&self) -> bool {
        self.tables
            .iter()
            .any(|t| t.id == NETPOL_EGRESS && t.name == NETPOL_EGRESS_TABLE.name)
    }

    /// The tables as `ofctrl` wants them (each gets its miss flow).
    pub fn table_specs(&self) -> Vec<TableSpec> {
        self.tables
            .iter()
            .map(|t| TableSpec {
                id: t.id,
                name: t.name,
                miss: t.miss,
            })
            .collect()
    }

    /// The pipeline's table after the service SNAT table: where service replies continue.
    pub fn after_service_snat(&self) -> u8 {
        self.tables
            .iter()
            .find(|t| t.id == SERVICE_SNAT)
            .and_then(|t| t.next.first().copied())
            .unwrap_or(MAC_DEST)
    }

    /// The handle to build flows of table `id`.
    pub fn table(&'static self, id: u8) -> Result<Table, PipelineError> {
        self.tables
            .iter()
            .find(|t| t.id == id)
            .map(|decl| Table { decl })
            .ok_or(PipelineError::NoSuchTable {
                pipeline: self.name,
                table: id,
            })
    }
}

impl Pipeline {
    /// The pipeline as a markdown table (the summary in `docs/pipeline.md`, kept equal to this
    /// by a test).
    pub fn markdown(&self) -> String {
        let names = |fields: &[FieldId]| -> String {
            if fields.is_empty() {
                return "—".into();
            }
            fields
                .iter()
                .map(|f| format!("`{}`", field_name(*f)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut out = String::from(
            "| table | name | purpose | may match | may set | writes metadata | continues in | miss |\n\
             |---|---|---|---|---|---|---|---|\n",
        );
        for t in self.tables {
            let next = if t.next.is_empty() {
                "—".to_string()
            } else {
                t.next
                    .iter()
                    .map(u8::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let md = if t.writes_metadata == 0 {
                "—".to_string()
            } else {
                format!("`{:#x}`", t.writes_metadata)
            };
            let miss = match t.miss {
                Miss::Drop => "drop".to_string(),
                Miss::Goto(n) => format!("goto {n}"),
                Miss::Normal => "NORMAL".to_string(),
                Miss::Controller => "controller".to_string(),
            };
            out.push_str(&format!(
                "| {} | `{}` | {} | {} | {} | {} | {} | {} |\n",
                t.id,
                t.name,
                t.purpose,
                names(t.matches),
                names(t.sets),
                md,
                next,
                miss
            ));
        }
        out
    }
}

/// A table of a pipeline; the only way to make a [`Flow`].
#[derive(Debug, Clone, Copy)]
pub struct Table {
    decl: &'static TableDecl,
}

fn field_name(f: FieldId) -> &'static str {
    f.info().map_or("an unknown field", |i| i.name)
}

impl Table {
    pub fn id(&self) -> u8 {
        self.decl.id
    }

    pub fn name(&self) -> &'static str {
        self.decl.name
    }

    /// The first table this table may continue in.
    pub fn next_table(&self) -> u8 {
        self.decl.next.first().copied().unwrap_or(self.decl.id)
    }

    /// A flow of this table, checked against its declaration.
    pub fn flow(
        &self,
        priority: u16,
        mut matches: Match,
        mut instructions: Vec<Instruction>,
    ) -> Result<Flow, PipelineError> {
        let table = self.decl.name;
        for f in &matches.fields {
            if !self.decl.matches.contains(&f.field) {
                return Err(PipelineError::MatchNotAllowed {
                    table,
                    field: field_name(f.field),
                });
            }
        }
        matches.check().map_err(|e| PipelineError::BadMatch {
            table,
            reason: e.to_string(),
        })?;
        for i in &instructions {
            match i {
                Instruction::GotoTable(to) if !self.decl.next.contains(to) => {
                    return Err(PipelineError::GotoNotAllowed { table, to: *to });
                }
                Instruction::WriteMetadata { mask, .. }
                    if mask & !self.decl.writes_metadata != 0 =>
                {
                    return Err(PipelineError::MetadataNotAllowed { table, mask: *mask });
                }
                Instruction::ApplyActions(actions) | Instruction::WriteActions(actions) => {
                    for a in actions {
                        if let Action::SetField(oxm) = a
                            && !self.decl.sets.contains(&oxm.field)
                        {
                            return Err(PipelineError::SetNotAllowed {
                                table,
                                field: field_name(oxm.field),
                            });
                        }
                    }
                }
                _ => {}
            }
        }
        // Matches and action lists are built a field at a time, so their vectors carry spare
        // capacity (a 5-field match has room for 8); a flow lives as long as its owner, often
        // thousands of them, so it keeps only what it uses.
        matches.fields.shrink_to_fit();
        for i in &mut instructions {
            if let Instruction::ApplyActions(actions) | Instruction::WriteActions(actions) = i {
                actions.shrink_to_fit();
            }
        }
        instructions.shrink_to_fit();
        Ok(Flow::new(self.decl.id, priority, matches, instructions))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn every_goto_and_miss_stays_inside_the_pipeline_and_moves_forward() {
        for p in ALL {
            for t in p.tables {
                let mut targets: Vec<u8> = t.next.to_vec();
                if let Miss::Goto(n) = t.miss {
                    targets.push(n);
                }
                for n in targets {
                    assert!(n > t.id, "{}: table {} goes back to {n}", p.name, t.name);
                    assert!(
                        p.tables.iter().any(|x| x.id == n),
                        "{}: table {} continues in missing table {n}",
                        p.name,
                        t.name
                    );
                }
            }
        }
    }

    #[test]
    fn a_flow_with_an_undeclared_match_field_names_table_and_field() {
        let t = VLAN_PIPELINE.table(id::MAC_DEST).unwrap();
        let err = t.flow(100, Match::new().in_port(3), vec![]).unwrap_err();
        assert_eq!(
            err,
            PipelineError::MatchNotAllowed {
                table: "mac_dest",
                field: "in_port"
            }
        );
    }

    #[test]
    fn undeclared_goto_set_field_and_metadata_are_refused() {
        let t = VXLAN_PIPELINE.table(id::DST_GROUP).unwrap();
        let ip = Match::new()
            .eth_type(0x0800)
            .ipv4_dst(Ipv4Addr::new(10, 0, 0, 1), None);
        assert_eq!(
            t.flow(100, ip.clone(), vec![Instruction::GotoTable(id::MAC_DEST)])
                .unwrap_err(),
            PipelineError::GotoNotAllowed {
                table: "dst_group",
                to: 9
            }
        );
        let write_src = Instruction::WriteMetadata {
            metadata: 0,
            mask: metadata::SRC_EPG_MASK,
        };
        assert!(matches!(
            t.flow(100, ip.clone(), vec![write_src]).unwrap_err(),
            PipelineError::MetadataNotAllowed { .. }
        ));
        let set = Instruction::ApplyActions(vec![Action::set_field(ofproto::oxm::Oxm::int(
            FieldId::VLAN_VID,
            0x1000 | 10,
            None,
        ))]);
        assert_eq!(
            t.flow(100, ip, vec![set]).unwrap_err(),
            PipelineError::SetNotAllowed {
                table: "dst_group",
                field: "vlan_vid"
            }
        );
    }

    #[test]
    fn a_match_missing_its_prerequisite_is_refused_at_build_time() {
        let t = VLAN_PIPELINE.table(id::DST_GROUP).unwrap();
        let err = t
            .flow(
                100,
                Match::new().ipv4_dst(Ipv4Addr::new(10, 0, 0, 1), None),
                vec![],
            )
            .unwrap_err();
        assert!(
            matches!(
                err,
                PipelineError::BadMatch {
                    table: "dst_group",
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn docs_show_the_declared_pipelines() {
        let doc =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/pipeline.md"))
                .unwrap();
        for p in ALL {
            assert!(
                doc.contains(&p.markdown()),
                "docs/pipeline.md is out of date; the {} pipeline is:\n{}",
                p.name,
                p.markdown()
            );
        }
    }

    /// `PRINT_PIPELINES=1 cargo nextest run -E 'test(/print_pipelines/)' --no-capture` prints
    /// the summaries docs/pipeline.md carries.
    #[test]
    fn print_pipelines() {
        if std::env::var_os("PRINT_PIPELINES").is_some() {
            for p in ALL {
                println!("## {}\n{}", p.name, p.markdown());
            }
        }
    }

    #[test]
    fn unknown_table_is_an_error() {
        assert_eq!(
            VLAN_PIPELINE.table(10).unwrap_err(),
            PipelineError::NoSuchTable {
                pipeline: "vlan",
                table: 10
            }
        );
    }
}
