//! Small text pieces every printer shares: hex dumps, bit-name lists, durations, and the
//! spellings `ovs-ofctl` uses for port, group, meter and table numbers.

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
}
