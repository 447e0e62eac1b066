//! Ports: descriptions (port status, port-desc replies), port mod and port statistics.

use std::fmt::Write as _;

use crate::multipart::PortStats;
use crate::port::{Port, PortMod, PortReason, PortStatus};

use super::text::{counter, duration, known_bit_names, port_text};

/// `ofp_port_config` bits (OpenFlow 1.3).
const PORT_CONFIG_NAMES: &[(u32, &str)] = &[
    (1 << 0, "PORT_DOWN"),
    (1 << 2, "NO_RECV"),
    (1 << 5, "NO_FWD"),
    (1 << 6, "NO_PACKET_IN"),
];

/// `ofp_port_state` bits (OpenFlow 1.3).
const PORT_STATE_NAMES: &[(u32, &str)] =
    &[(1 << 0, "LINK_DOWN"), (1 << 1, "BLOCKED"), (1 << 2, "LIVE")];

/// `ofp_port_features` bits, with the names OVS gives them (its own, hence `AUTO_PAUSE`).
const PORT_FEATURE_NAMES: &[(u32, &str)] = &[
    (1 << 0, "10MB-HD"),
    (1 << 1, "10MB-FD"),
    (1 << 2, "100MB-HD"),
    (1 << 3, "100MB-FD"),
    (1 << 4, "1GB-HD"),
    (1 << 5, "1GB-FD"),
    (1 << 6, "10GB-FD"),
    (1 << 7, "40GB-FD"),
    (1 << 8, "100GB-FD"),
    (1 << 9, "1TB-FD"),
    (1 << 10, "OTHER"),
    (1 << 11, "COPPER"),
    (1 << 12, "FIBER"),
    (1 << 13, "AUTO_NEG"),
    (1 << 14, "AUTO_PAUSE"),
    (1 << 15, "AUTO_PAUSE_ASYM"),
];

/// Known bit names, or `0` when none is set (unknown bits are dropped, as OVS decodes them).
fn names_or_zero(value: u32, names: &[(u32, &str)]) -> String {
    let text = known_bit_names(value, names);
    if text.is_empty() { "0".into() } else { text }
}

/// A port name as OVS prints it: up to the first byte that is not printable ASCII.
fn port_name(port: &Port) -> String {
    port.name
        .as_bytes()
        .iter()
        .take_while(|b| (0x20..0x7f).contains(*b))
        .map(|b| char::from(*b))
        .collect()
}

fn mac(addr: [u8; 6]) -> String {
    let [a, b, c, d, e, f] = addr;
    format!("{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{f:02x}")
}

/// Append a port description: number, name, address, then indented config, state, features
/// and speed lines. OVS refuses port numbers it cannot keep in 16 bits.
pub(super) fn port_desc(out: &mut String, port: &Port) -> Result<(), &'static str> {
    if !port_in_range(port.port_no) {
        return Err("OFPBAC_BAD_OUT_PORT");
    }
    let _ = write!(
        out,
        "{}({}): addr:{}",
        port_text(port.port_no),
        port_name(port),
        mac(port.hw_addr)
    );
    let _ = write!(
        out,
        "\n     config:     {}",
        names_or_zero(port.config, PORT_CONFIG_NAMES)
    );
    let _ = write!(
        out,
        "\n     state:      {}",
        names_or_zero(port.state, PORT_STATE_NAMES)
    );
    for (label, features) in [
        ("current:    ", port.curr),
        ("advertised: ", port.advertised),
        ("supported:  ", port.supported),
        ("peer:       ", port.peer),
    ] {
        let names = known_bit_names(features, PORT_FEATURE_NAMES);
        if !names.is_empty() {
            let _ = write!(out, "\n     {label}{names}");
        }
    }
    let _ = write!(
        out,
        "\n     speed: {} Mbps now, {} Mbps max",
        port.curr_speed / 1000,
        port.max_speed / 1000
    );
    Ok(())
}

/// ` ADD: 1(eth0): addr:...`; OVS refuses reasons it does not know.
pub(super) fn port_status(out: &mut String, status: &PortStatus) -> Result<(), &'static str> {
    let reason = match status.reason {
        PortReason::Add => "ADD",
        PortReason::Delete => "DEL",
        PortReason::Modify => "MOD",
        PortReason::Unknown(_) => return Err("NXBRC_BAD_REASON"),
    };
    if !port_in_range(status.desc.port_no) {
        return Err("OFPBAC_BAD_OUT_PORT");
    }
    let _ = write!(out, " {reason}: ");
    port_desc(out, &status.desc)
}

/// Whether OVS accepts `port` as an OpenFlow 1.3 port number: it keeps ports in 16 bits, so
/// only `0..0xff00` and the reserved range `0xffffff00..` map.
pub(super) fn port_in_range(port: u32) -> bool {
    !(0xff00..0xffff_ff00).contains(&port)
}

/// ` port: 1: addr:...` and the config, mask and advertise lines. OVS shows only the config
/// bits the mask selects.
pub(super) fn port_mod(out: &mut String, port_mod: &PortMod) -> Result<(), &'static str> {
    if !port_in_range(port_mod.port_no) {
        return Err("OFPBAC_BAD_OUT_PORT");
    }
    let _ = write!(
        out,
        " port: {}: addr:{}",
        port_text(port_mod.port_no),
        mac(port_mod.hw_addr)
    );
    let _ = write!(
        out,
        "\n     config: {}",
        names_or_zero(port_mod.config & port_mod.mask, PORT_CONFIG_NAMES)
    );
    let _ = write!(
        out,
        "\n     mask:   {}",
        names_or_zero(port_mod.mask, PORT_CONFIG_NAMES)
    );
    let advertise = known_bit_names(port_mod.advertise, PORT_FEATURE_NAMES);
    let advertise = if advertise.is_empty() {
        "UNCHANGED".to_string()
    } else {
        advertise
    };
    let _ = write!(out, "\n     advertise: {advertise}");
    Ok(())
}

/// ` 2 ports` and three lines per port: receive counters, transmit counters, duration.
/// OVS decodes the entries up to the first port it cannot hold, prints those, then the error.
pub(super) fn port_stats(out: &mut String, entries: &[PortStats]) -> Result<(), &'static str> {
    let good = entries
        .iter()
        .position(|e| !port_in_range(e.port_no))
        .unwrap_or(entries.len());
    let _ = write!(out, " {good} ports");
    for entry in &entries[..good] {
        let [
            rx_packets,
            tx_packets,
            rx_bytes,
            tx_bytes,
            rx_dropped,
            tx_dropped,
            rx_errors,
            tx_errors,
            rx_frame,
            rx_over,
            rx_crc,
            collisions,
        ] = entry.counters.map(counter);
        let _ = write!(
            out,
            "\n  port {:>2}: rx pkts={rx_packets}, bytes={rx_bytes}, drop={rx_dropped}, \
             errs={rx_errors}, frame={rx_frame}, over={rx_over}, crc={rx_crc}",
            port_text(entry.port_no)
        );
        let _ = write!(
            out,
            "\n           tx pkts={tx_packets}, bytes={tx_bytes}, drop={tx_dropped}, \
             errs={tx_errors}, coll={collisions}"
        );
        if entry.duration_sec != u32::MAX {
            let _ = write!(
                out,
                "\n           duration={}",
                duration(entry.duration_sec, entry.duration_nsec)
            );
        }
    }
    if good < entries.len() {
        return Err("OFPBAC_BAD_OUT_PORT");
    }
    Ok(())
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn port_names_stop_at_the_first_unprintable_byte() {
        let port = Port {
            name: b"br\x01x".as_slice().into(),
            ..Port::default()
        };
        assert_eq!(port_name(&port), "br");
    }
}
