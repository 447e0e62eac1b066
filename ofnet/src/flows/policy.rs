//! Policy rules to table-5 flows.
//!
//! A rule becomes one flow at priority `10 + rule priority`: IPv4, optional source and
//! destination address or CIDR, protocol, TCP/UDP ports, TCP flags, and the source and/or
//! destination endpoint group as metadata bits. `allow` continues to the next table, `deny`
//! drops. Without conntrack, "deny new connections" is expressed with the TCP flags `syn,!ack`.

use super::{ETH_IPV4, category, object_of};
use crate::metadata;
use crate::model::{MAX_EPG, PolicyRule, RuleAction};
use crate::pipeline::{PipelineError, Table};
use crate::priority;
use ipnet::Ipv4Net;
use ofctrl::Flow;
use ofproto::instruction::Instruction;
use ofproto::matches::Match;
use std::net::Ipv4Addr;

/// A rule that cannot become a flow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    #[error("rule {rule}: {field} {value:?} is neither an IPv4 address nor an IPv4 CIDR")]
    BadAddress {
        rule: String,
        field: &'static str,
        value: String,
    },
    #[error("rule {rule}: TcpFlags {value:?} is not one of syn, syn,ack, ack, syn,!ack, !syn,ack")]
    BadTcpFlags { rule: String, value: String },
    #[error("rule {rule}: ports need IpProtocol 6 (tcp) or 17 (udp), not {protocol}")]
    PortsWithoutProtocol { rule: String, protocol: u8 },
    #[error("rule {rule}: TcpFlags need IpProtocol 6 (tcp), not {protocol}")]
    FlagsWithoutTcp { rule: String, protocol: u8 },
    #[error("rule {rule}: {field} {value} is outside 0..=32767")]
    BadEpg {
        rule: String,
        field: &'static str,
        value: u16,
    },
    #[error("rule {rule}: priority {value} is above {max}")]
    BadPriority { rule: String, value: u16, max: u16 },
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
}

fn address(rule: &PolicyRule, field: &'static str, s: &str) -> Result<Option<Ipv4Net>, RuleError> {
    if s.is_empty() {
        return Ok(None);
    }
    let bad = || RuleError::BadAddress {
        rule: rule.rule_id.clone(),
        field,
        value: s.to_string(),
    };
    if s.contains('/') {
        s.parse::<Ipv4Net>()
            .map(|n| Some(n.trunc()))
            .map_err(|_| bad())
    } else {
        s.parse::<Ipv4Addr>()
            .map(|a| Some(Ipv4Net::from(a)))
            .map_err(|_| bad())
    }
}

/// `(value, mask)` of the TCP flags spellings the reference accepts.
fn tcp_flags(rule: &PolicyRule) -> Result<Option<(u16, u16)>, RuleError> {
    const SYN: u16 = 0x02;
    const ACK: u16 = 0x10;
    Ok(Some(match rule.tcp_flags.as_str() {
        "" => return Ok(None),
        "syn" => (SYN, SYN),
        "syn,ack" => (SYN | ACK, SYN | ACK),
        "ack" => (ACK, ACK),
        "syn,!ack" => (SYN, SYN | ACK),
        "!syn,ack" => (ACK, SYN | ACK),
        other => {
            return Err(RuleError::BadTcpFlags {
                rule: rule.rule_id.clone(),
                value: other.to_string(),
            });
        }
    }))
}

fn masked(net: Ipv4Net) -> (Ipv4Addr, Option<Ipv4Addr>) {
    if net.prefix_len() == 32 {
        (net.addr(), None)
    } else {
        (net.network(), Some(net.netmask()))
    }
}

/// The table-5 flow of `rule`; allowed packets continue in `next`.
pub fn rule_flow(table: Table, rule: &PolicyRule, next: u8) -> Result<Flow, RuleError> {
    let id = &rule.rule_id;
    let max = u16::MAX - priority::POLICY_BASE;
    if rule.priority > max {
        return Err(RuleError::BadPriority {
            rule: id.clone(),
            value: rule.priority,
            max,
        });
    }
    for (field, value) in [
        ("SrcEndpointGroup", rule.src_endpoint_group),
        ("DstEndpointGroup", rule.dst_endpoint_group),
    ] {
        if value > MAX_EPG {
            return Err(RuleError::BadEpg {
                rule: id.clone(),
                field,
                value,
            });
        }
    }
    let proto = rule.ip_protocol;
    if (rule.src_port != 0 || rule.dst_port != 0) && !matches!(proto, 6 | 17) {
        return Err(RuleError::PortsWithoutProtocol {
            rule: id.clone(),
            protocol: proto,
        });
    }
    let flags = tcp_flags(rule)?;
    if flags.is_some() && proto != 6 {
        return Err(RuleError::FlagsWithoutTcp {
            rule: id.clone(),
            protocol: proto,
        });
    }

    let mut m = Match::new().eth_type(ETH_IPV4);
    if proto != 0 {
        m = m.ip_proto(proto);
    }
    if let Some(n) = address(rule, "SrcIpAddr", &rule.src_ip_addr)? {
        let (a, mask) = masked(n);
        m = m.ipv4_src(a, mask);
    }
    if let Some(n) = address(rule, "DstIpAddr", &rule.dst_ip_addr)? {
        let (a, mask) = masked(n);
        m = m.ipv4_dst(a, mask);
    }
    match (proto, rule.src_port, rule.dst_port) {
        (6, s, d) => {
            if s != 0 {
                m = m.tcp_src(s);
            }
            if d != 0 {
                m = m.tcp_dst(d);
            }
        }
        (17, s, d) => {
            if s != 0 {
                m = m.udp_src(s);
            }
            if d != 0 {
                m = m.udp_dst(d);
            }
        }
        _ => {}
    }
    if let Some((v, mask)) = flags {
        m = m.tcp_flags(v, Some(mask));
    }
    let (mut md, mut mask) = (0, 0);
    if rule.src_endpoint_group != 0 {
        md |= metadata::src_epg(rule.src_endpoint_group);
        mask |= metadata::SRC_EPG_MASK;
    }
    if rule.dst_endpoint_group != 0 {
        md |= metadata::dst_epg(rule.dst_endpoint_group);
        mask |= metadata::DST_EPG_MASK;
    }
    if mask != 0 {
        m = m.metadata(md, Some(mask));
    }
    let instructions = match rule.action {
        RuleAction::Allow => vec![Instruction::GotoTable(next)],
        RuleAction::Deny => vec![],
    };
    Ok(table
        .flow(priority::POLICY_BASE + rule.priority, m, instructions)?
        .owned_by(category::POLICY, object_of(id)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::{VLAN_PIPELINE, id};
    use crate::text;

    fn build(rule: &PolicyRule) -> Result<String, RuleError> {
        let t = VLAN_PIPELINE.table(id::POLICY).unwrap();
        rule_flow(t, rule, id::SERVICE_SNAT).map(|f| text::flow(&f))
    }

    #[test]
    fn reference_rule_shapes_become_the_expected_flows() {
        let mut deny = PolicyRule::new("deny-tcp", 1, RuleAction::Deny);
        deny.dst_endpoint_group = 5;
        deny.ip_protocol = 6;
        deny.tcp_flags = "syn,!ack".into();
        assert_eq!(
            build(&deny).unwrap(),
            "table=5, priority=11,tcp,metadata=0xa/0xfffe,tcp_flags=+syn-ack actions=drop"
        );

        let mut allow = PolicyRule::new("allow-8000", 100, RuleAction::Allow);
        allow.dst_endpoint_group = 5;
        allow.src_endpoint_group = 7;
        allow.ip_protocol = 6;
        allow.dst_port = 8000;
        allow.src_ip_addr = "10.1.1.5/24".into();
        assert_eq!(
            build(&allow).unwrap(),
            "table=5, priority=110,tcp,metadata=0x7000a/0x7ffffffe,nw_src=10.1.1.0/24,tp_dst=8000 actions=goto_table:6"
        );

        let mut udp = PolicyRule::new("u", 3, RuleAction::Allow);
        udp.ip_protocol = 17;
        udp.src_port = 53;
        udp.dst_ip_addr = "10.2.0.1".into();
        assert_eq!(
            build(&udp).unwrap(),
            "table=5, priority=13,udp,nw_dst=10.2.0.1,tp_src=53 actions=goto_table:6"
        );
    }

    #[test]
    fn invalid_rules_name_the_rule_and_field() {
        let mut r = PolicyRule::new("r9", 1, RuleAction::Allow);
        r.src_ip_addr = "10.1.1".into();
        assert_eq!(
            build(&r).unwrap_err(),
            RuleError::BadAddress {
                rule: "r9".into(),
                field: "SrcIpAddr",
                value: "10.1.1".into()
            }
        );
        let mut r = PolicyRule::new("r9", 1, RuleAction::Allow);
        r.dst_port = 80;
        assert!(matches!(
            build(&r).unwrap_err(),
            RuleError::PortsWithoutProtocol { protocol: 0, .. }
        ));
        let mut r = PolicyRule::new("r9", 1, RuleAction::Allow);
        r.ip_protocol = 17;
        r.tcp_flags = "syn".into();
        assert!(matches!(
            build(&r).unwrap_err(),
            RuleError::FlagsWithoutTcp { .. }
        ));
        r.ip_protocol = 6;
        r.tcp_flags = "fin".into();
        assert!(matches!(
            build(&r).unwrap_err(),
            RuleError::BadTcpFlags { .. }
        ));
        let mut r = PolicyRule::new("r9", 1, RuleAction::Allow);
        r.dst_endpoint_group = 0x8000;
        assert!(matches!(
            build(&r).unwrap_err(),
            RuleError::BadEpg {
                field: "DstEndpointGroup",
                ..
            }
        ));
    }
}
