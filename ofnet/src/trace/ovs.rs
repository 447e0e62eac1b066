//! Reading `ovs-appctl ofproto/trace` and `ovs-appctl dpif/show` output, so a trace can be
//! checked against Open vSwitch's own.

use std::collections::BTreeMap;

/// Where OVS's datapath actions send the packet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OvsOutputs {
    /// Datapath port numbers of plain outputs.
    pub dp_ports: Vec<u32>,
    /// Tunnel outputs (`tnl_push(tnl_port(N),...)`, or `set(tunnel(...)),N`): the tunnel's
    /// datapath port and the key.
    pub tunnels: Vec<(u32, u64)>,
    pub controller: bool,
    /// `(table, priority)` of every OpenFlow lookup the trace shows, in order.
    pub lookups: Vec<(u8, Option<u16>)>,
    /// A select group whose bucket the datapath picks by hash after a recirculation
    /// (`hash(...),recirc(...)`), which `ofproto/trace` does not follow: the group's id.
    pub dp_hash_group: Option<u32>,
}

/// Parse the whole `ofproto/trace` reply: every `Datapath actions:` line (the first pass and
/// each recirculation) and the table lookups.
pub fn parse_trace(text: &str) -> OvsOutputs {
    let mut out = OvsOutputs::default();
    let mut last_group = None;
    for line in text.lines() {
        if let Some(g) = line.trim().strip_prefix("group:") {
            last_group = g.parse().ok();
        }
        if let Some(acts) = line.trim().strip_prefix("Datapath actions:") {
            for item in split_top(acts.trim()) {
                if item.trim().starts_with("hash(") {
                    out.dp_hash_group = last_group;
                }
                classify(item, &mut out);
            }
        } else if let Some((table, prio)) = lookup_line(line) {
            out.lookups.push((table, prio));
        }
    }
    out.dp_ports.sort_unstable();
    out.dp_ports.dedup();
    out
}

/// ` 5. tcp,metadata=..., priority 11, cookie 0x..` → `(5, Some(11))`; ` 9. No match.` →
/// `(9, None)`.
fn lookup_line(line: &str) -> Option<(u8, Option<u16>)> {
    let t = line.trim_start();
    let (num, rest) = t.split_once(". ")?;
    let table: u8 = num.parse().ok()?;
    if rest.starts_with("No match") {
        return Some((table, None));
    }
    let p = rest.rsplit_once("priority ")?.1;
    let digits: String = p.chars().take_while(char::is_ascii_digit).collect();
    Some((table, digits.parse().ok()))
}

fn classify(item: &str, out: &mut OvsOutputs) {
    let item = item.trim();
    if item.chars().all(|c| c.is_ascii_digit()) && !item.is_empty() {
        if let Ok(p) = item.parse() {
            out.dp_ports.push(p);
        }
    } else if item.contains("tnl_push(") {
        let port = between(item, "tnl_port(", ")").and_then(|p| p.parse().ok());
        let vni = between(item, "vni=", ")")
            .and_then(|v| u64::from_str_radix(v.trim_start_matches("0x"), 16).ok())
            .unwrap_or(0);
        out.tunnels.push((port.unwrap_or(0), vni));
    } else if let Some(inner) = item
        .strip_prefix("clone(")
        .and_then(|s| s.strip_suffix(')'))
    {
        for i in split_top(inner) {
            classify(i, out);
        }
    } else if item.starts_with("userspace(") && item.contains("controller(") {
        out.controller = true;
    }
}

fn between<'a>(s: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let from = s.find(start)? + start.len();
    let len = s[from..].find(end)?;
    Some(&s[from..from + len])
}

/// Split at commas outside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out.into_iter().filter(|x| !x.trim().is_empty()).collect()
}

/// `ovs-appctl dpif/show`: for `bridge`, datapath port → (OpenFlow port, name).
pub fn parse_dpif_show(text: &str, bridge: &str) -> BTreeMap<u32, (u32, String)> {
    let mut out = BTreeMap::new();
    let mut inside = false;
    for line in text.lines() {
        let indent = line.len() - line.trim_start().len();
        let t = line.trim();
        if indent == 2 && t.ends_with(':') {
            inside = t.trim_end_matches(':') == bridge;
            continue;
        }
        if !inside || indent < 4 {
            continue;
        }
        // `name ofport/dpport: (type...)`
        let Some((name, rest)) = t.split_once(' ') else {
            continue;
        };
        let Some((ports, _)) = rest.split_once(':') else {
            continue;
        };
        let Some((of, dp)) = ports.split_once('/') else {
            continue;
        };
        if let (Ok(of), Ok(dp)) = (of.parse(), dp.parse()) {
            out.insert(dp, (of, name.to_string()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datapath_actions_are_read() {
        let t = "Flow: tcp,in_port=3\n\nbridge(\"br0\")\n-------------\n 0. priority 0\n    goto_table:1\n 1. ip,in_port=3, priority 100, cookie 0x1\n    output:4\n 9. No match.\n\nFinal flow: unchanged\nDatapath actions: pop_vlan,5,clone(tnl_push(tnl_port(4789),header(size=50,type=4,eth(dst=aa:bb:cc:dd:ee:ff),ipv4(src=1.1.1.1,dst=1.1.1.2,proto=17),udp(src=0,dst=4789,csum=0x0),vxlan(flags=0x8000000,vni=0x1388)),out_port(2)),7)\n\n===\nrecirc(0x1)\nDatapath actions: userspace(pid=0,controller(reason=1,max_len=65535))\n";
        let o = parse_trace(t);
        assert_eq!(o.dp_ports, vec![5]);
        assert_eq!(o.tunnels, vec![(4789, 0x1388)]);
        assert!(o.controller);
        assert_eq!(o.lookups, vec![(0, Some(0)), (1, Some(100)), (9, None)]);
        let d = "netdev@ovs-netdev: hit:0 missed:0\n  br0:\n    br0 65534/3: (tap)\n    p1 2/5: (system)\n  br-phy:\n    br-phy 65534/1: (tap)\n";
        let m = parse_dpif_show(d, "br0");
        assert_eq!(m.get(&5), Some(&(2, "p1".to_string())));
        assert_eq!(m.get(&1), None);
    }
}
