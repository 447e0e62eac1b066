//! Verdicts in words, and the walk across hosts: a packet leaving through a VTEP continues in
//! the tables of the host that VTEP leads to.

use super::eval::{CtAssumptions, Egress, Path, Step, evaluate};
use super::packet::Fields;
use super::{FlowDiff, PortRole, TableSet};
use crate::pipeline::id;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// How far a packet is followed across hosts.
const MAX_HOPS: usize = 3;

/// What happened to (one copy of) the packet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// Out a local endpoint's port.
    Delivered {
        endpoint: String,
        host: Option<Ipv4Addr>,
        port: u32,
    },
    /// Flooded in the network (unknown destination MAC) to these endpoints, none of which is
    /// the destination.
    Flooded {
        endpoints: Vec<String>,
        reason: String,
    },
    /// Out a VTEP toward a host whose tables the trace does not have.
    Tunnelled {
        host: Ipv4Addr,
        vni: u64,
        port: u32,
    },
    /// Out an uplink (VLAN bridge) or a port the agent does not know.
    Output {
        port: u32,
        what: String,
    },
    /// Handed to OVS's normal switching (VLAN bridge).
    Normal {
        vlan: Option<u16>,
    },
    Controller {
        reason: String,
    },
    Dropped {
        reason: String,
        table: u8,
        #[serde(default)]
        rule: Option<String>,
    },
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Verdict::Delivered {
                endpoint,
                host,
                port,
            } => match host {
                Some(h) => write!(
                    f,
                    "delivered to endpoint {endpoint} on host {h} (port {port})"
                ),
                None => write!(f, "delivered to endpoint {endpoint} (port {port})"),
            },
            Verdict::Tunnelled { host, vni, port } => write!(
                f,
                "sent through the VTEP (port {port}) to host {host} with VNI {vni} (that host's tables were not available)"
            ),
            Verdict::Flooded { endpoints, reason } => write!(
                f,
                "flooded to {} ({reason})",
                if endpoints.is_empty() {
                    "no endpoint".to_string()
                } else {
                    format!("endpoints {}", endpoints.join(", "))
                }
            ),
            Verdict::Output { port, what } => write!(f, "sent out port {port} ({what})"),
            Verdict::Normal { vlan } => match vlan {
                Some(v) => write!(f, "handed to OVS normal switching on VLAN {v}"),
                None => write!(f, "handed to OVS normal switching"),
            },
            Verdict::Controller { reason } => write!(f, "sent to the controller: {reason}"),
            Verdict::Dropped { reason, .. } => write!(f, "dropped: {reason}"),
        }
    }
}

/// One host's part of a trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostTrace {
    pub host: Option<Ipv4Addr>,
    pub bridge: String,
    /// The select-group buckets of this alternative (empty when there is only one way).
    pub choices: Vec<(u32, usize, usize)>,
    pub steps: Vec<Step>,
    pub verdicts: Vec<Verdict>,
    /// Flows on the path whose desired and actual (switch) versions differ.
    #[serde(default)]
    pub differences: Vec<FlowDiff>,
    #[serde(default)]
    pub incomplete: Option<String>,
    /// Where the copies that left through a VTEP went on.
    #[serde(default)]
    pub next: Vec<HostTrace>,
}

/// Trace `fields` entering `hosts[start]`, following VTEP exits into the other hosts' tables.
/// Every select-group alternative of the first host is one entry. `diffs` (by host index)
/// are the desired/actual differences, reported where the path uses such a flow.
pub fn trace_hosts(
    hosts: &[TableSet],
    start: usize,
    fields: &Fields,
    ct: &CtAssumptions,
    diffs: &[Vec<FlowDiff>],
) -> Vec<HostTrace> {
    let Some(tables) = hosts.get(start) else {
        return Vec::new();
    };
    evaluate(tables, fields, ct)
        .paths
        .into_iter()
        .map(|p| host_trace(hosts, start, p, ct, diffs, 0))
        .collect()
}

fn host_trace(
    hosts: &[TableSet],
    at: usize,
    path: Path,
    ct: &CtAssumptions,
    diffs: &[Vec<FlowDiff>],
    hop: usize,
) -> HostTrace {
    let tables = &hosts[at];
    let mut verdicts = Vec::new();
    let mut next = Vec::new();
    let mut flooded = Vec::new();
    for e in &path.egress {
        match e {
            Egress::Port {
                port,
                tun_id,
                fields,
                dl_dst,
                ..
            } => match tables.ports.get(port) {
                Some(PortRole::Endpoint { id, mac, .. }) if mac.to_string() != *dl_dst => {
                    flooded.push(id.clone());
                }
                Some(PortRole::Endpoint { id, .. }) => verdicts.push(Verdict::Delivered {
                    endpoint: id.clone(),
                    host: tables.host,
                    port: *port,
                }),
                Some(PortRole::Vtep { remote }) => {
                    let remote_at = hosts.iter().position(|h| h.host == Some(*remote));
                    let entry = remote_at.and_then(|r| {
                        let local = tables.host?;
                        hosts[r].ports.iter().find_map(|(p, role)| {
                            (*role == PortRole::Vtep { remote: local }).then_some((r, *p))
                        })
                    });
                    match entry {
                        Some((r, in_port)) if hop < MAX_HOPS => {
                            let arriving = arriving_fields(fields, in_port, *tun_id);
                            for p in evaluate(&hosts[r], &arriving, ct).paths {
                                next.push(host_trace(hosts, r, p, ct, diffs, hop + 1));
                            }
                        }
                        _ => verdicts.push(Verdict::Tunnelled {
                            host: *remote,
                            vni: *tun_id,
                            port: *port,
                        }),
                    }
                }
                Some(PortRole::Uplink) => verdicts.push(Verdict::Output {
                    port: *port,
                    what: "uplink".into(),
                }),
                None => verdicts.push(Verdict::Output {
                    port: *port,
                    what: "a port the agent does not know".into(),
                }),
            },
            Egress::Controller { table, step } => verdicts.push(Verdict::Controller {
                reason: controller_reason(*table, &path.steps[*step], &path.last_fields),
            }),
            Egress::Normal { vlan, .. } => verdicts.push(Verdict::Normal { vlan: *vlan }),
        }
    }
    if !flooded.is_empty() {
        let f = &path.last_fields;
        let reason = match f.ip_dst() {
            Some(ip) if !tables.endpoints.contains_key(&(vrf_of(tables, f), ip)) => format!(
                "no endpoint owns {ip} in VRF {}: its MAC is unknown, so the frame is flooded in the network and nobody takes it",
                vrf_of(tables, f)
            ),
            _ => {
                "the destination MAC is unknown here, so the frame is flooded in the network".into()
            }
        };
        verdicts.push(Verdict::Flooded {
            endpoints: flooded,
            reason,
        });
    }
    if path.egress.is_empty() {
        verdicts.push(drop_verdict(tables, &path));
    }
    let differences = diffs
        .get(at)
        .map(|d| {
            d.iter()
                .filter(|d| {
                    path.steps.iter().any(|s| {
                        s.table == d.table
                            && s.priority == Some(d.priority)
                            && s.flow.as_deref() == Some(d.flow.as_str())
                    }) || (d.kind == "unexpected" && path.steps.iter().any(|s| s.table == d.table))
                })
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    HostTrace {
        host: tables.host,
        bridge: tables.bridge.clone(),
        choices: path.choices,
        steps: path.steps,
        verdicts,
        differences,
        incomplete: path.incomplete,
        next,
    }
}

/// The packet as the remote bridge sees it: from its VTEP port, untagged, with the tunnel
/// key, pipeline state and conntrack cleared.
fn arriving_fields(leaving: &Fields, in_port: u32, tun_id: u64) -> Fields {
    let mut f = leaving.clone();
    for n in [
        "metadata",
        "vlan_vid",
        "reg0",
        "reg1",
        "reg2",
        "reg3",
        "ct_state",
        "ct_zone",
        "ct_mark",
        "ct_nw_src",
        "ct_nw_dst",
        "ct_nw_proto",
        "ct_tp_src",
        "ct_tp_dst",
    ] {
        f.set(n, 0);
    }
    f.set("in_port", u128::from(in_port));
    f.set("tun_id", u128::from(tun_id));
    f
}

fn controller_reason(table: u8, step: &Step, f: &Fields) -> String {
    match (table, f.get("dl_type")) {
        (id::INPUT, 0x0806) => "ARP request: the agent's ARP proxy answers it".into(),
        (id::INPUT, 0x86dd) => {
            "neighbour solicitation: the agent's neighbour-discovery proxy answers it".into()
        }
        (id::SERVICE_DNAT, _) => format!(
            "first packet of a connection to a service with no provider ({}): the agent rejects it",
            step.owner.as_deref().unwrap_or("service")
        ),
        _ => format!("by table {table} ({})", step.table_name),
    }
}

fn vrf_of(tables: &TableSet, f: &Fields) -> String {
    let id = ((f.get("metadata") >> 32) & 0xff) as u8;
    tables
        .vrfs
        .get(&id)
        .cloned()
        .unwrap_or_else(|| format!("#{id}"))
}

fn drop_verdict(tables: &TableSet, path: &Path) -> Verdict {
    let Some(step) = path
        .steps
        .iter()
        .rev()
        .find(|s| s.depth == 0)
        .or(path.steps.last())
    else {
        return Verdict::Dropped {
            reason: "no table".into(),
            table: 0,
            rule: None,
        };
    };
    let f = &path.last_fields;
    let table = step.table;
    let at = format!("table {table} ({})", step.table_name);
    let reason = if let Some(rule) = &step.rule {
        format!("by policy rule {rule} in {at}")
    } else if table == id::MAC_DEST || (table == id::DST_GROUP && step.flow.is_none()) {
        match f.ip_dst() {
            Some(ip) => {
                let vrf = vrf_of(tables, f);
                if tables.endpoints.contains_key(&(vrf.clone(), ip)) {
                    format!(
                        "{ip} is a known endpoint in VRF {vrf}, but no flow in {at} knows the destination MAC {}",
                        super::packet::mac_of(f.get("dl_dst"))
                    )
                } else {
                    format!("no endpoint owns {ip} in VRF {vrf} ({at})")
                }
            }
            None => format!("the destination MAC is not known in {at}"),
        }
    } else if table == id::VLAN {
        match (&step.owner, step.flow.is_some()) {
            (Some(o), true) if o.starts_with("local endpoint") => format!(
                "by the spoof guard of the {o} in {at}: the source MAC or address is not the endpoint's"
            ),
            _ => format!(
                "the input port {} is not an endpoint, uplink or VTEP of a network on this bridge ({at})",
                f.get("in_port")
            ),
        }
    } else if table == id::SERVICE_DNAT {
        format!(
            "by {} in {at}: no provider takes this connection, or the service has no such port",
            step.owner.as_deref().unwrap_or("a service drop flow")
        )
    } else if table == id::INPUT && step.flow.is_some() {
        format!("multicast source MAC in {at}")
    } else {
        match &step.flow {
            Some(fl) => format!(
                "in {at} by `{fl}`{}",
                step.owner
                    .as_ref()
                    .map(|o| format!(" ({o})"))
                    .unwrap_or_default()
            ),
            None => format!("no flow matches in {at}"),
        }
    };
    Verdict::Dropped {
        reason,
        table,
        rule: step.rule.clone(),
    }
}

impl HostTrace {
    /// The trace as text, table by table.
    pub fn render(&self) -> String {
        let mut s = String::new();
        self.render_into(&mut s, 0);
        s
    }

    fn render_into(&self, s: &mut String, indent: usize) {
        let pad = " ".repeat(indent);
        let host = self
            .host
            .map(|h| format!("host {h}"))
            .unwrap_or_else(|| "this host".into());
        let _ = writeln!(s, "{pad}{host}, bridge {}:", self.bridge);
        if !self.choices.is_empty() {
            let c: Vec<String> = self
                .choices
                .iter()
                .map(|(g, b, n)| format!("group {g} bucket {b} of {n}"))
                .collect();
            let _ = writeln!(s, "{pad}  (alternative: {})", c.join(", "));
        }
        for st in &self.steps {
            let sp = " ".repeat(indent + 2 + 2 * st.depth);
            if let Some(via) = &st.via {
                let _ = writeln!(s, "{sp}-- {via}");
            }
            let flow = st.flow.as_deref().unwrap_or("(no flow matches)");
            let owner = st
                .owner
                .as_ref()
                .map(|o| format!("  [{o}]"))
                .unwrap_or_default();
            let _ = writeln!(s, "{sp}{:>2} {}: {flow}{owner}", st.table, st.table_name);
            for e in &st.effects {
                let _ = writeln!(s, "{sp}     -> {e}");
            }
        }
        for d in &self.differences {
            let _ = writeln!(
                s,
                "{pad}  WARNING: desired and actual tables differ: {} flow {}{}",
                d.kind,
                d.flow,
                d.actual
                    .as_ref()
                    .map(|a| format!(" (switch has {a})"))
                    .unwrap_or_default()
            );
        }
        if let Some(why) = &self.incomplete {
            let _ = writeln!(s, "{pad}  (incomplete: {why})");
        }
        for v in &self.verdicts {
            let _ = writeln!(s, "{pad}  verdict: {v}");
        }
        for n in &self.next {
            let _ = writeln!(s, "{pad}  continues on the remote host:");
            n.render_into(s, indent + 4);
        }
    }

    /// Every verdict of this trace and the hosts it continued on.
    pub fn all_verdicts(&self) -> Vec<&Verdict> {
        let mut v: Vec<&Verdict> = self.verdicts.iter().collect();
        for n in &self.next {
            v.extend(n.all_verdicts());
        }
        v
    }
}

/// Parse `IP` or `IP:port` (`[v6]:port` for IPv6).
pub fn parse_target(s: &str) -> Option<(IpAddr, Option<u16>)> {
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some((ip, None));
    }
    if let Some(rest) = s.strip_prefix('[') {
        let (ip, port) = rest.split_once("]:")?;
        return Some((
            IpAddr::V6(ip.parse::<Ipv6Addr>().ok()?),
            Some(port.parse().ok()?),
        ));
    }
    let (ip, port) = s.rsplit_once(':')?;
    Some((IpAddr::V4(ip.parse().ok()?), Some(port.parse().ok()?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse() {
        assert_eq!(
            parse_target("10.1.1.3:80"),
            Some(("10.1.1.3".parse().unwrap(), Some(80)))
        );
        assert_eq!(
            parse_target("10.1.1.3"),
            Some(("10.1.1.3".parse().unwrap(), None))
        );
        assert_eq!(
            parse_target("[fd00::3]:8080"),
            Some(("fd00::3".parse().unwrap(), Some(8080)))
        );
        assert_eq!(parse_target("10.1.1.3:http"), None);
        assert_eq!(parse_target("pod"), None);
    }
}
