//! Policy rules to table-5 flows.
//!
//! A rule becomes one flow per address family it applies to, at priority `10 + rule priority`:
//! optional source and destination address or CIDR, protocol, TCP/UDP ports, TCP flags, and
//! the source and/or destination endpoint group as metadata bits. A rule without addresses
//! applies to IPv4 and IPv6 (two flows); a rule naming an IPv4 (IPv6) address or prefix to that
//! family only. Groups are family-neutral: table 1 writes the source group by port, table 4 the
//! destination group for each of an endpoint's addresses. Protocol 1 (ICMP) means ICMPv6 (58)
//! on the IPv6 flow; protocol 58 applies to IPv6 only. `allow` continues to the next table,
//! `deny` drops. Without conntrack, "deny new connections" is expressed with the TCP flags
//! `syn,!ack`.

use super::{ETH_IPV4, ETH_IPV6, category, object_of};
use crate::metadata;
use crate::model::{MAX_EPG, PolicyRule, RuleAction};
use crate::pipeline::{PipelineError, Table};
use crate::priority;
use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use ofctrl::Flow;
use ofproto::instruction::Instruction;
use ofproto::matches::Match;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// ICMP for IPv4 and IPv6.
const PROTO_ICMP: u8 = 1;
const PROTO_ICMPV6: u8 = 58;

/// A rule that cannot become a flow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    #[error("rule {rule}: {field} {value:?} is neither an IPv4/IPv6 address nor an IPv4/IPv6 CIDR")]
    BadAddress {
        rule: String,
        field: &'static str,
        value: String,
    },
    #[error(
        "rule {rule}: SrcIpAddr {src:?} and DstIpAddr {dst:?} are of different address families"
    )]
    MixedFamilies {
        rule: String,
        src: String,
        dst: String,
    },
    #[error("rule {rule}: IpProtocol 58 (icmpv6) cannot match the IPv4 address {addr:?}")]
    Icmpv6WithIpv4 { rule: String, addr: String },
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

fn address(rule: &PolicyRule, field: &'static str, s: &str) -> Result<Option<IpNet>, RuleError> {
    if s.is_empty() {
        return Ok(None);
    }
    let bad = || RuleError::BadAddress {
        rule: rule.rule_id.clone(),
        field,
        value: s.to_string(),
    };
    if s.contains('/') {
        s.parse::<IpNet>()
            .map(|n| Some(n.trunc()))
            .map_err(|_| bad())
    } else {
        s.parse::<IpAddr>()
            .map(|a| Some(IpNet::from(a)))
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

fn masked4(net: Ipv4Net) -> (Ipv4Addr, Option<Ipv4Addr>) {
    if net.prefix_len() == 32 {
        (net.addr(), None)
    } else {
        (net.network(), Some(net.netmask()))
    }
}

fn masked6(net: Ipv6Net) -> (Ipv6Addr, Option<Ipv6Addr>) {
    if net.prefix_len() == 128 {
        (net.addr(), None)
    } else {
        (net.network(), Some(net.netmask()))
    }
}

/// An address family a rule applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    V4,
    V6,
}

/// The families a rule applies to: the family of its addresses, or both without addresses.
fn families(
    rule: &PolicyRule,
    src: Option<IpNet>,
    dst: Option<IpNet>,
) -> Result<Vec<Family>, RuleError> {
    let fam = |n: IpNet| match n {
        IpNet::V4(_) => Family::V4,
        IpNet::V6(_) => Family::V6,
    };
    let named = match (src.map(fam), dst.map(fam)) {
        (Some(a), Some(b)) if a != b => {
            return Err(RuleError::MixedFamilies {
                rule: rule.rule_id.clone(),
                src: rule.src_ip_addr.clone(),
                dst: rule.dst_ip_addr.clone(),
            });
        }
        (Some(a), _) | (None, Some(a)) => Some(a),
        (None, None) => None,
    };
    Ok(match (named, rule.ip_protocol) {
        (Some(Family::V4), PROTO_ICMPV6) => {
            return Err(RuleError::Icmpv6WithIpv4 {
                rule: rule.rule_id.clone(),
                addr: if src.is_some() {
                    rule.src_ip_addr.clone()
                } else {
                    rule.dst_ip_addr.clone()
                },
            });
        }
        (Some(f), _) => vec![f],
        (None, PROTO_ICMPV6) => vec![Family::V6],
        (None, _) => vec![Family::V4, Family::V6],
    })
}

/// Check `rule` on its own (what [`rule_flows`] refuses, without building flows).
fn check(rule: &PolicyRule) -> Result<(), RuleError> {
    let id = &rule.rule_id;
    // The stateful bypass of replies sits at the top of the table.
    let max = priority::POLICY_STATEFUL - priority::POLICY_BASE - 1;
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
    if !rule.tcp_flags.is_empty() && proto != 6 {
        tcp_flags(rule)?;
        return Err(RuleError::FlagsWithoutTcp {
            rule: id.clone(),
            protocol: proto,
        });
    }
    Ok(())
}

/// The table-5 flows of `rule` (one per address family it applies to); allowed packets
/// continue in `next`.
pub fn rule_flows(table: Table, rule: &PolicyRule, next: u8) -> Result<Vec<Flow>, RuleError> {
    check(rule)?;
    let flags = tcp_flags(rule)?;
    let src = address(rule, "SrcIpAddr", &rule.src_ip_addr)?;
    let dst = address(rule, "DstIpAddr", &rule.dst_ip_addr)?;
    let mut out = Vec::new();
    for family in families(rule, src, dst)? {
        let proto = match (family, rule.ip_protocol) {
            (Family::V6, PROTO_ICMP) => PROTO_ICMPV6,
            (_, p) => p,
        };
        let mut m = Match::new().eth_type(match family {
            Family::V4 => ETH_IPV4,
            Family::V6 => ETH_IPV6,
        });
        if proto != 0 {
            m = m.ip_proto(proto);
        }
        for (net, is_src) in [(src, true), (dst, false)] {
            m = match (net, is_src) {
                (Some(IpNet::V4(n)), true) => {
                    let (a, mask) = masked4(n);
                    m.ipv4_src(a, mask)
                }
                (Some(IpNet::V4(n)), false) => {
                    let (a, mask) = masked4(n);
                    m.ipv4_dst(a, mask)
                }
                (Some(IpNet::V6(n)), true) => {
                    let (a, mask) = masked6(n);
                    m.ipv6_src(a, mask)
                }
                (Some(IpNet::V6(n)), false) => {
                    let (a, mask) = masked6(n);
                    m.ipv6_dst(a, mask)
                }
                (None, _) => m,
            };
        }
        m = ports(m, proto, rule.src_port, rule.dst_port);
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
        out.push(
            table
                .flow(priority::POLICY_BASE + rule.priority, m, instructions)?
                .owned_by(category::POLICY, object_of(&rule.rule_id)),
        );
    }
    Ok(out)
}

fn ports(mut m: Match, proto: u8, src: u16, dst: u16) -> Match {
    match proto {
        6 => {
            if src != 0 {
                m = m.tcp_src(src);
            }
            if dst != 0 {
                m = m.tcp_dst(dst);
            }
        }
        17 => {
            if src != 0 {
                m = m.udp_src(src);
            }
            if dst != 0 {
                m = m.udp_dst(dst);
            }
        }
        _ => {}
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::{VLAN_PIPELINE, id};
    use crate::text;

    fn build(rule: &PolicyRule) -> Result<Vec<String>, RuleError> {
        let t = VLAN_PIPELINE.table(id::POLICY).unwrap();
        rule_flows(t, rule, id::SERVICE_SNAT).map(|fs| fs.iter().map(text::flow).collect())
    }

    #[test]
    fn reference_rule_shapes_become_the_expected_flows() {
        let mut deny = PolicyRule::new("deny-tcp", 1, RuleAction::Deny);
        deny.dst_endpoint_group = 5;
        deny.ip_protocol = 6;
        deny.tcp_flags = "syn,!ack".into();
        assert_eq!(
            build(&deny).unwrap(),
            [
                "table=5, priority=11,tcp,metadata=0xa/0xfffe,tcp_flags=+syn-ack actions=drop",
                "table=5, priority=11,tcp6,metadata=0xa/0xfffe,tcp_flags=+syn-ack actions=drop"
            ],
            "no address: both families"
        );

        let mut allow = PolicyRule::new("allow-8000", 100, RuleAction::Allow);
        allow.dst_endpoint_group = 5;
        allow.src_endpoint_group = 7;
        allow.ip_protocol = 6;
        allow.dst_port = 8000;
        allow.src_ip_addr = "10.1.1.5/24".into();
        assert_eq!(
            build(&allow).unwrap(),
            [
                "table=5, priority=110,tcp,metadata=0x7000a/0x7ffffffe,nw_src=10.1.1.0/24,tp_dst=8000 actions=goto_table:6"
            ],
            "an IPv4 prefix: IPv4 only"
        );

        let mut udp = PolicyRule::new("u", 3, RuleAction::Allow);
        udp.ip_protocol = 17;
        udp.src_port = 53;
        udp.dst_ip_addr = "10.2.0.1".into();
        assert_eq!(
            build(&udp).unwrap(),
            ["table=5, priority=13,udp,nw_dst=10.2.0.1,tp_src=53 actions=goto_table:6"]
        );
    }

    #[test]
    fn ipv6_addresses_prefixes_and_icmp_become_ipv6_flows() {
        let mut r = PolicyRule::new("v6", 5, RuleAction::Deny);
        r.ip_protocol = 6;
        r.dst_port = 8001;
        r.src_ip_addr = "fd00:99:3::7/64".into();
        assert_eq!(
            build(&r).unwrap(),
            ["table=5, priority=15,tcp6,ipv6_src=fd00:99:3::/64,tp_dst=8001 actions=drop"]
        );
        r.src_ip_addr = String::new();
        r.dst_ip_addr = "fd00:99:3::7".into();
        assert_eq!(
            build(&r).unwrap(),
            ["table=5, priority=15,tcp6,ipv6_dst=fd00:99:3::7,tp_dst=8001 actions=drop"]
        );
        let mut icmp = PolicyRule::new("icmp", 2, RuleAction::Deny);
        icmp.ip_protocol = 1;
        icmp.src_endpoint_group = 3;
        assert_eq!(
            build(&icmp).unwrap(),
            [
                "table=5, priority=12,icmp,metadata=0x30000/0x7fff0000 actions=drop",
                "table=5, priority=12,icmp6,metadata=0x30000/0x7fff0000 actions=drop"
            ],
            "ICMP means ICMPv6 on the IPv6 flow"
        );
        icmp.ip_protocol = 58;
        assert_eq!(
            build(&icmp).unwrap(),
            ["table=5, priority=12,icmp6,metadata=0x30000/0x7fff0000 actions=drop"]
        );
        let mut all = PolicyRule::new("all", 0, RuleAction::Allow);
        all.dst_endpoint_group = 1;
        assert_eq!(
            build(&all).unwrap(),
            [
                "table=5, priority=10,ip,metadata=0x2/0xfffe actions=goto_table:6",
                "table=5, priority=10,ipv6,metadata=0x2/0xfffe actions=goto_table:6"
            ]
        );
    }

    #[test]
    fn mixed_families_and_icmpv6_with_an_ipv4_address_are_refused() {
        let mut r = PolicyRule::new("m", 1, RuleAction::Deny);
        r.src_ip_addr = "10.1.1.0/24".into();
        r.dst_ip_addr = "fd00::1".into();
        assert_eq!(
            build(&r).unwrap_err(),
            RuleError::MixedFamilies {
                rule: "m".into(),
                src: "10.1.1.0/24".into(),
                dst: "fd00::1".into()
            }
        );
        r.dst_ip_addr = String::new();
        r.ip_protocol = 58;
        assert!(matches!(
            build(&r).unwrap_err(),
            RuleError::Icmpv6WithIpv4 { .. }
        ));
        r.src_ip_addr = "fd00::1/200".into();
        assert!(matches!(
            build(&r).unwrap_err(),
            RuleError::BadAddress {
                field: "SrcIpAddr",
                ..
            }
        ));
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
