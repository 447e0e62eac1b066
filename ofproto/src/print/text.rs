//! Small text pieces every printer shares: hex dumps, bit-name lists, durations, field-name
//! compression, and the spellings `ovs-ofctl` uses for port, group, meter and table numbers.

use std::fmt::Write as _;

/// Append `bytes` as `ovs-ofctl` hex-dumps them: 16 per line, the offset, a dash after the
/// eighth byte, and the printable characters between bars.
pub(crate) fn hex_dump(out: &mut String, bytes: &[u8]) {
    for (line, chunk) in bytes.chunks(16).enumerate() {
        let _ = write!(out, "{:08x}  ", line * 16);
        for column in 0..16 {
            match chunk.get(column) {
                Some(b) => {
                    let separator = if column == 7 { '-' } else { ' ' };
                    let _ = write!(out, "{b:02x}{separator}");
                }
                None => out.push_str("   "),
            }
        }
        out.push('|');
        for column in 0..16 {
            out.push(match chunk.get(column) {
                Some(&b) if (0x20..0x7f).contains(&b) => char::from(b),
                Some(_) => '.',
                None => ' ',
            });
        }
        out.push_str("|\n");
    }
}

/// The names of the bits set in `value`, joined by `separator`; bits without a name as one hex
/// number at the end; `0` when nothing is set.
pub(crate) fn bit_names(value: u32, names: &[(u32, &str)], separator: &str) -> String {
    let mut parts: Vec<String> = names
        .iter()
        .filter(|(bit, _)| value & bit != 0)
        .map(|(_, name)| (*name).to_string())
        .collect();
    let unnamed = names.iter().fold(value, |rest, (bit, _)| rest & !bit);
    if unnamed != 0 {
        parts.push(format!("{unnamed:#x}"));
    }
    if parts.is_empty() {
        "0".into()
    } else {
        parts.join(separator)
    }
}

/// The names of the bits set in `value` that have one, space-separated; other bits are
/// dropped (OVS forgets them while decoding). Empty when none is set.
pub(crate) fn known_bit_names(value: u32, names: &[(u32, &str)]) -> String {
    names
        .iter()
        .filter(|(bit, _)| value & bit != 0)
        .map(|(_, name)| *name)
        .collect::<Vec<_>>()
        .join(" ")
}

/// A duration as `ovs-ofctl` prints it: seconds, and the fraction with trailing zeros removed
/// but at least three decimals (`3.048825s`, `0.020s`, `5s`).
pub(crate) fn duration(sec: u32, nsec: u32) -> String {
    if nsec == 0 {
        return format!("{sec}s");
    }
    let mut fraction = format!("{nsec:09}");
    while fraction.len() > 3 && fraction.ends_with('0') {
        fraction.pop();
    }
    format!("{sec}.{fraction}s")
}

/// A 64-bit counter, or `?` for the all-ones "not available" value.
pub(crate) fn counter(value: u64) -> String {
    if value == u64::MAX {
        "?".into()
    } else {
        value.to_string()
    }
}

/// A port number as `ovs-ofctl` prints it: reserved ports by name, the OpenFlow 1.3 range
/// `0xffffff00..` folded back to its 16-bit value (OVS keeps ports in 16 bits), others as is.
pub(crate) fn port_text(port: u32) -> String {
    match crate::port::PortNo(port).name() {
        Some(name) => name.into(),
        None if port >= 0xffff_ff00 => (port - 0xffff_0000).to_string(),
        None => port.to_string(),
    }
}

/// A group id as `ovs-ofctl` prints it in requests.
pub(crate) fn group_text(group_id: u32) -> String {
    match group_id {
        0xffff_fffc => "ALL".into(),
        0xffff_ffff => "ANY".into(),
        id => id.to_string(),
    }
}

/// A meter id as `ovs-ofctl` prints it: the virtual meters by name, other ids above
/// `OFPM_MAX` (0xffff0000) as `unknown`.
pub(crate) fn meter_text(meter_id: u32) -> String {
    match meter_id {
        0xffff_ffff => "all".into(),
        0xffff_fffe => "controller".into(),
        0xffff_fffd => "slowpath".into(),
        0xffff_0001.. => "unknown".into(),
        id => id.to_string(),
    }
}

/// The OpenFlow 1.3 action types OVS supports, in the order OVS lists them in a bitmap of
/// actions (group features, table features), with its names. Types missing here (copy TTL,
/// PBB) are ones OVS does not implement and drops.
const ACTION_BITMAP_NAMES: &[(u16, &str)] = &[
    (0, "output"),
    (22, "group"),
    (25, "set_field"),
    (18, "strip_vlan"),
    (17, "push_vlan"),
    (23, "mod_nw_ttl"),
    (24, "dec_ttl"),
    (15, "set_mpls_ttl"),
    (16, "dec_mpls_ttl"),
    (19, "push_mpls"),
    (20, "pop_mpls"),
    (21, "set_queue"),
];

/// The names of the action types set in `bitmap` (bit `n` = action type `n`), OVS's way:
/// supported ones only, in OVS's order, space-separated; `<none>` when there are none.
pub(crate) fn action_bitmap(bitmap: u64) -> String {
    let names: Vec<&str> = ACTION_BITMAP_NAMES
        .iter()
        .filter(|(kind, _)| bitmap & (1 << kind) != 0)
        .map(|(_, name)| *name)
        .collect();
    if names.is_empty() {
        "<none>".into()
    } else {
        names.join(" ")
    }
}

/// OVS's compression of a sorted name list. At each position: a run of three or more names that
/// differ only in a consecutive trailing number becomes `reg0...reg15`; otherwise, if the name
/// and the next share a prefix ending in `_`, the following names with the same first word are
/// written once as `prefix{rest,rest,...}`, the rests compressed the same way. OVS cuts every
/// member by the length of the first two names' common prefix, even a member whose own prefix
/// is shorter (`ct_nw_{src,dst,src}` for ct_nw_src, ct_nw_dst, ct_tp_src); so does this.
pub(crate) fn compress_names(names: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(&name) = names.get(at) {
        let run = numbered_run(&names[at..]);
        if run >= 3 {
            out.push(format!("{name}...{}", names[at + run - 1]));
            at += run;
            continue;
        }
        let shared = names
            .get(at + 1)
            .map_or(0, |next| shared_prefix(name, next));
        let first_word = name.find('_').map(|end| &name[..=end]);
        match (shared, first_word) {
            (1.., Some(word)) => {
                let members = names[at..]
                    .iter()
                    .take_while(|n| n.starts_with(word))
                    .count();
                let rests: Vec<&str> = names[at..at + members]
                    .iter()
                    .map(|n| n.get(shared..).unwrap_or(""))
                    .collect();
                out.push(format!(
                    "{}{{{}}}",
                    &name[..shared],
                    compress_names(&rests).join(",")
                ));
                at += members;
            }
            _ => {
                out.push(name.to_string());
                at += 1;
            }
        }
    }
    out
}

/// The length of the longest common prefix of `a` and `b` that ends in `_` (0 if none).
fn shared_prefix(a: &str, b: &str) -> usize {
    let common = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    a[..common].rfind('_').map_or(0, |at| at + 1)
}

/// How many names from the first share its stem and carry consecutive trailing numbers.
fn numbered_run(names: &[&str]) -> usize {
    let split = |name: &str| -> Option<(usize, u32)> {
        let stem = name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        name[stem..].parse().ok().map(|number| (stem, number))
    };
    let Some((stem, first)) = names.first().and_then(|n| split(n)) else {
        return 0;
    };
    let mut count = 1;
    for (offset, name) in names.iter().enumerate().skip(1) {
        let expected = u32::try_from(offset)
            .ok()
            .and_then(|o| first.checked_add(o));
        match split(name) {
            Some((s, number))
                if s == stem && name[..s] == names[0][..stem] && Some(number) == expected =>
            {
                count += 1;
            }
            _ => break,
        }
    }
    count
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn durations_keep_three_decimals_at_least() {
        assert_eq!(duration(5, 0), "5s");
        assert_eq!(duration(3, 500_000_000), "3.500s");
        assert_eq!(duration(0, 480_000), "0.00048s");
        assert_eq!(duration(1, 1), "1.000000001s");
    }

    #[test]
    fn high_ports_fold_to_sixteen_bits() {
        assert_eq!(port_text(0xffff_ff00), "65280");
        assert_eq!(port_text(0xffff_fffe), "LOCAL");
        assert_eq!(port_text(7), "7");
    }

    #[test]
    fn action_bitmaps_use_ovs_order_and_drop_unsupported_types() {
        // output, copy_ttl_out (unsupported), pop_vlan, group.
        assert_eq!(
            action_bitmap(1 | 1 << 11 | 1 << 18 | 1 << 22),
            "output group strip_vlan"
        );
        assert_eq!(action_bitmap(1 << 11), "<none>");
    }

    fn compress(names: &str) -> String {
        compress_names(&names.split(' ').collect::<Vec<_>>()).join(" ")
    }

    #[test]
    fn names_share_prefixes_and_number_runs() {
        assert_eq!(
            compress(
                "tun_id tun_src tun_ipv6_src tun_ipv6_dst tun_metadata0 tun_metadata1 \
                 tun_metadata2 metadata"
            ),
            "tun_{id,src,ipv6_{src,dst},metadata0...metadata2} metadata"
        );
        assert_eq!(
            compress("reg0 reg1 reg3 reg4 reg5"),
            "reg0 reg1 reg3...reg5"
        );
        assert_eq!(
            compress("in_port in_port_oxm actset_output"),
            "in_{port,port_oxm} actset_output"
        );
    }

    #[test]
    fn members_are_cut_by_the_first_two_names_common_prefix() {
        // OVS's own quirk, reproduced.
        assert_eq!(
            compress("ct_nw_src ct_nw_dst ct_tp_src"),
            "ct_nw_{src,dst,src}"
        );
        assert_eq!(
            compress("tun_ipv6_src tun_ipv6_dst tun_flags"),
            "tun_ipv6_{src,dst,}"
        );
    }
}
