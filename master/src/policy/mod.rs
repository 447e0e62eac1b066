//! Policy compilation (reference §5.8): a contiv rule attached to an EPG becomes directional ofnet
//! rules (`inRx`/`inTx`/`outRx`/`outTx`) that agents install in the policy table.
//!
//! * [`compile`] is pure: rule + resolved ids/subnets → `OfnetPolicyRule`s.
//! * [`attach`] keeps `EpgPolicy` and `CfgPolicyRule` records in step with EPGs, policies and rules.
//! * [`repair`] rebuilds the `CfgPolicyRule` records from the `EpgPolicy` records (leader start).
//!
//! Fix over Contiv: the mirror rules (`inTx`, `outRx`) use the same peer address as their primary rule,
//! including a `fromNetwork`/`toNetwork` subnet, so a ported rule narrowed by network lets its replies
//! back from exactly that network.

pub mod attach;
pub mod repair;

use crate::error::{Error, Result};
use crate::model::Rule;
use crate::state::OfnetPolicyRule;

/// What a rule refers to, resolved against the store.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resolved {
    /// The EPG the policy is attached to.
    pub epg_id: u32,
    /// The EPG named by `fromEndpointGroup` (in rules) / `toEndpointGroup` (out rules); 0 if none.
    pub remote_epg_id: u32,
    /// `fromNetwork`'s (in) or `toNetwork`'s (out) subnet as `ip/len`, if set.
    pub remote_subnet: Option<String>,
    /// That network's IPv6 subnet, if it has one: the rule gets an IPv6 twin matching it.
    pub remote_subnet6: Option<String>,
}

/// IP protocol number of a rule's `protocol` field.
pub fn protocol_number(protocol: &str) -> Result<u8> {
    Ok(match protocol {
        "" => 0,
        "tcp" => 6,
        "udp" => 17,
        "icmp" => 1,
        "igmp" => 2,
        other => other.parse::<u8>().map_err(|_| {
            Error::invalid(
                "protocol",
                format!("{other:?} must be tcp, udp, icmp, igmp or a number below 256"),
            )
        })?,
    })
}

/// Compile `rule` for the EPG policy `epg_policy_key` into directional ofnet rules.
pub fn compile(epg_policy_key: &str, rule: &Rule, r: &Resolved) -> Result<Vec<OfnetPolicyRule>> {
    let proto = protocol_number(&rule.protocol)?;
    let port = u16::try_from(rule.port)
        .map_err(|_| Error::invalid("port", "must be between 0 and 65535"))?;
    let ported = (proto == 6 || proto == 17) && port != 0;
    let syn_only = if proto == 6 && port == 0 {
        "syn,!ack"
    } else {
        ""
    };
    let priority = u32::try_from(rule.priority.max(1)).unwrap_or(1);
    let base = |dir: &str| OfnetPolicyRule {
        RuleId: format!("{epg_policy_key}:{}:{dir}", rule.key),
        Priority: priority,
        IpProtocol: proto,
        Action: rule.action.clone(),
        ..Default::default()
    };
    // The peer network's subnets: one rule per address family (the IPv6 twin's ids end in 6).
    let subnets: Vec<(&str, String)> = [
        ("", r.remote_subnet.clone()),
        ("6", r.remote_subnet6.clone()),
    ]
    .into_iter()
    .filter_map(|(suffix, s)| s.map(|s| (suffix, s)))
    .collect();
    // `other`: the rule's address on the other side; a subnet of another family cannot pair
    // with it.
    let peers = |explicit: &str, other: &str| -> Vec<(&str, String)> {
        let same_family = |s: &String| other.is_empty() || s.contains(':') == other.contains(':');
        let usable: Vec<(&str, String)> = subnets
            .iter()
            .filter(|(_, s)| same_family(s))
            .cloned()
            .collect();
        if !explicit.is_empty() || usable.is_empty() {
            vec![("", explicit.to_string())]
        } else {
            usable
        }
    };
    let mut out = Vec::new();
    match rule.direction.as_str() {
        "in" => {
            for (sfx, peer) in peers(&rule.from_ip_address, &rule.to_ip_address) {
                out.push(OfnetPolicyRule {
                    SrcEndpointGroup: r.remote_epg_id,
                    DstEndpointGroup: r.epg_id,
                    SrcIpAddr: peer.clone(),
                    DstIpAddr: rule.to_ip_address.clone(),
                    DstPort: port,
                    TcpFlags: syn_only.into(),
                    ..base(&format!("inRx{sfx}"))
                });
                if ported {
                    out.push(OfnetPolicyRule {
                        SrcEndpointGroup: r.epg_id,
                        DstEndpointGroup: r.remote_epg_id,
                        SrcIpAddr: rule.to_ip_address.clone(),
                        DstIpAddr: peer,
                        SrcPort: port,
                        ..base(&format!("inTx{sfx}"))
                    });
                }
            }
        }
        "out" => {
            for (sfx, peer) in peers(&rule.to_ip_address, "") {
                if ported {
                    out.push(OfnetPolicyRule {
                        SrcEndpointGroup: r.remote_epg_id,
                        DstEndpointGroup: r.epg_id,
                        SrcIpAddr: peer.clone(),
                        SrcPort: port,
                        ..base(&format!("outRx{sfx}"))
                    });
                }
                out.push(OfnetPolicyRule {
                    SrcEndpointGroup: r.epg_id,
                    DstEndpointGroup: r.remote_epg_id,
                    DstIpAddr: peer,
                    DstPort: port,
                    TcpFlags: syn_only.into(),
                    ..base(&format!("outTx{sfx}"))
                });
            }
        }
        other => {
            return Err(Error::invalid(
                "direction",
                format!("{other:?} must be in or out"),
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(direction: &str, protocol: &str, port: i64) -> Rule {
        Rule {
            key: "t:p:1".into(),
            tenant_name: "t".into(),
            policy_name: "p".into(),
            rule_id: "1".into(),
            direction: direction.into(),
            protocol: protocol.into(),
            port,
            priority: 5,
            action: "allow".into(),
            ..Default::default()
        }
    }

    #[test]
    fn in_tcp_port_gives_rx_and_mirrored_tx() {
        let mut rl = rule("in", "tcp", 8000);
        rl.from_ip_address = "10.1.1.0/24".into();
        let out = compile(
            "t:g:t:p",
            &rl,
            &Resolved {
                epg_id: 3,
                remote_epg_id: 0,
                remote_subnet: None,
                remote_subnet6: None,
            },
        )
        .unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].RuleId, "t:g:t:p:t:p:1:inRx");
        assert_eq!(
            (
                out[0].SrcEndpointGroup,
                out[0].DstEndpointGroup,
                out[0].DstPort
            ),
            (0, 3, 8000)
        );
        assert_eq!(out[0].SrcIpAddr, "10.1.1.0/24");
        assert_eq!(out[0].TcpFlags, "");
        assert_eq!(out[1].RuleId, "t:g:t:p:t:p:1:inTx");
        assert_eq!(
            (out[1].SrcEndpointGroup, out[1].SrcPort, out[1].IpProtocol),
            (3, 8000, 6)
        );
        assert_eq!(out[1].DstIpAddr, "10.1.1.0/24");
        assert_eq!(out[0].Priority, 5);
    }

    #[test]
    fn in_tcp_without_port_matches_syn_only() {
        let mut rl = rule("in", "tcp", 0);
        rl.action = "deny".into();
        let out = compile(
            "k",
            &rl,
            &Resolved {
                epg_id: 3,
                remote_epg_id: 7,
                remote_subnet: None,
                remote_subnet6: None,
            },
        )
        .unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].TcpFlags, "syn,!ack");
        assert_eq!((out[0].SrcEndpointGroup, out[0].DstEndpointGroup), (7, 3));
        assert_eq!(out[0].Action, "deny");
    }

    #[test]
    fn out_rules_use_network_subnet() {
        let rl = rule("out", "udp", 53);
        let r = Resolved {
            epg_id: 2,
            remote_epg_id: 0,
            remote_subnet: Some("20.1.0.0/16".into()),
            remote_subnet6: None,
        };
        let out = compile("k", &rl, &r).unwrap();
        let dirs: Vec<&str> = out
            .iter()
            .map(|o| o.RuleId.rsplit(':').next().unwrap())
            .collect();
        assert_eq!(dirs, ["outRx", "outTx"]);
        assert_eq!(out[1].DstIpAddr, "20.1.0.0/16");
        assert_eq!(out[1].DstPort, 53);
        assert_eq!(out[0].SrcPort, 53);
        let icmp = compile("k", &rule("out", "icmp", 0), &r).unwrap();
        assert_eq!(icmp.len(), 1);
        assert_eq!(icmp[0].IpProtocol, 1);
    }

    #[test]
    fn a_network_with_an_ipv6_subnet_gives_every_rule_an_ipv6_twin() {
        let r = Resolved {
            epg_id: 2,
            remote_epg_id: 0,
            remote_subnet: Some("20.1.0.0/16".into()),
            remote_subnet6: Some("fd00:20::/64".into()),
        };
        let out = compile("k", &rule("out", "tcp", 80), &r).unwrap();
        let got: Vec<(&str, &str, &str)> = out
            .iter()
            .map(|o| {
                (
                    o.RuleId.rsplit(':').next().unwrap(),
                    o.SrcIpAddr.as_str(),
                    o.DstIpAddr.as_str(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("outRx", "20.1.0.0/16", ""),
                ("outTx", "", "20.1.0.0/16"),
                ("outRx6", "fd00:20::/64", ""),
                ("outTx6", "", "fd00:20::/64"),
            ]
        );
        // An in rule naming an IPv4 endpoint keeps to IPv4; an explicit address wins.
        let mut to_v4 = rule("in", "tcp", 80);
        to_v4.to_ip_address = "10.1.1.5".into();
        let out = compile("k", &to_v4, &r).unwrap();
        assert!(out.iter().all(|o| !o.SrcIpAddr.contains(':')), "{out:?}");
        let mut from_v6 = rule("in", "tcp", 80);
        from_v6.from_ip_address = "fd00:1::/64".into();
        let out = compile("k", &from_v6, &r).unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].SrcIpAddr, "fd00:1::/64");
    }

    #[test]
    fn protocols() {
        assert_eq!(protocol_number("igmp").unwrap(), 2);
        assert_eq!(protocol_number("47").unwrap(), 47);
        assert!(protocol_number("256").is_err());
        assert!(protocol_number("sctp").is_err());
    }
}
