//! Ports: port numbers with their reserved names, `ofp_port` descriptions, PORT_MOD and
//! PORT_STATUS.

use std::fmt;

use bytes::BytesMut;

use crate::fixed_str::FixedStr;
use crate::macros::code_enum;
use crate::wire::{DecodeError, PResult, fixed, put_zeros, take, u8p, u32p};

/// `OFPP_MAX`: the highest ordinary port number.
pub const OFPP_MAX: u32 = 0xffff_ff00;
/// `OFPP_IN_PORT`.
pub const OFPP_IN_PORT: u32 = 0xffff_fff8;
/// `OFPP_TABLE`.
pub const OFPP_TABLE: u32 = 0xffff_fff9;
/// `OFPP_NORMAL`.
pub const OFPP_NORMAL: u32 = 0xffff_fffa;
/// `OFPP_FLOOD`.
pub const OFPP_FLOOD: u32 = 0xffff_fffb;
/// `OFPP_ALL`.
pub const OFPP_ALL: u32 = 0xffff_fffc;
/// `OFPP_CONTROLLER`.
pub const OFPP_CONTROLLER: u32 = 0xffff_fffd;
/// `OFPP_LOCAL`.
pub const OFPP_LOCAL: u32 = 0xffff_fffe;
/// `OFPP_ANY`.
pub const OFPP_ANY: u32 = 0xffff_ffff;

/// An OpenFlow 1.3 port number; reserved ports print by name as ovs-ofctl does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortNo(pub u32);

impl PortNo {
    /// `IN_PORT`.
    pub const IN_PORT: PortNo = PortNo(OFPP_IN_PORT);
    /// `TABLE`.
    pub const TABLE: PortNo = PortNo(OFPP_TABLE);
    /// `NORMAL`.
    pub const NORMAL: PortNo = PortNo(OFPP_NORMAL);
    /// `FLOOD`.
    pub const FLOOD: PortNo = PortNo(OFPP_FLOOD);
    /// `ALL`.
    pub const ALL: PortNo = PortNo(OFPP_ALL);
    /// `CONTROLLER`.
    pub const CONTROLLER: PortNo = PortNo(OFPP_CONTROLLER);
    /// `LOCAL`.
    pub const LOCAL: PortNo = PortNo(OFPP_LOCAL);
    /// `ANY`.
    pub const ANY: PortNo = PortNo(OFPP_ANY);

    /// The reserved name, if this is a reserved port.
    pub fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            OFPP_IN_PORT => "IN_PORT",
            OFPP_TABLE => "TABLE",
            OFPP_NORMAL => "NORMAL",
            OFPP_FLOOD => "FLOOD",
            OFPP_ALL => "ALL",
            OFPP_CONTROLLER => "CONTROLLER",
            OFPP_LOCAL => "LOCAL",
            OFPP_ANY => "ANY",
            _ => return None,
        })
    }

    /// Map a 16-bit (OpenFlow 1.0 / NXM) port number to 32 bits: reserved 0xfff8.. become 0xfffffff8...
    pub fn from_u16(p: u16) -> PortNo {
        if p >= 0xff00 {
            PortNo(u32::from(p) + 0xffff_0000)
        } else {
            PortNo(u32::from(p))
        }
    }
}

impl From<u32> for PortNo {
    fn from(p: u32) -> PortNo {
        PortNo(p)
    }
}

impl fmt::Display for PortNo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "{}", self.0),
        }
    }
}

/// `ofp_port`: a port description (64 bytes).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Port {
    /// Port number.
    pub port_no: u32,
    /// Ethernet address.
    pub hw_addr: [u8; 6],
    /// Name (up to 15 bytes on the wire, NUL padded; not necessarily UTF-8).
    pub name: FixedStr,
    /// `OFPPC_*` bits.
    pub config: u32,
    /// `OFPPS_*` bits.
    pub state: u32,
    /// Current features (`OFPPF_*`).
    pub curr: u32,
    /// Advertised features.
    pub advertised: u32,
    /// Supported features.
    pub supported: u32,
    /// Peer's advertised features.
    pub peer: u32,
    /// Current speed in kbps.
    pub curr_speed: u32,
    /// Maximum speed in kbps.
    pub max_speed: u32,
}

/// Size of `ofp_port`.
pub const PORT_LEN: usize = 64;

impl Port {
    /// Parse one `ofp_port`.
    pub fn parse(i: &[u8]) -> PResult<'_, Port> {
        let (rest, b) = take(i, PORT_LEN, "ofp_port")?;
        let (_, port_no) = fixed(b, 4, "ofp_port", u32p)?;
        let mut hw_addr = [0u8; 6];
        hw_addr.copy_from_slice(&b[8..14]);
        let name = FixedStr::parse_field(&b[16..32]);
        let (_, (config, state, curr, advertised, supported, peer, curr_speed, max_speed)) = fixed(
            &b[32..],
            32,
            "ofp_port",
            (u32p, u32p, u32p, u32p, u32p, u32p, u32p, u32p),
        )?;
        Ok((
            rest,
            Port {
                port_no,
                hw_addr,
                name,
                config,
                state,
                curr,
                advertised,
                supported,
                peer,
                curr_speed,
                max_speed,
            },
        ))
    }

    /// Append the 64-byte `ofp_port`.
    pub fn emit(&self, out: &mut BytesMut) {
        out.extend_from_slice(&u32::to_be_bytes(self.port_no));
        out.extend_from_slice(&u32::to_be_bytes(0));
        out.extend_from_slice(&self.hw_addr);
        out.extend_from_slice(&u16::to_be_bytes(0));
        self.name.emit_field(out, 16);
        for v in [
            self.config,
            self.state,
            self.curr,
            self.advertised,
            self.supported,
            self.peer,
            self.curr_speed,
            self.max_speed,
        ] {
            out.extend_from_slice(&u32::to_be_bytes(v));
        }
    }
}

code_enum! {
    /// `ofp_port_reason`.
    pub enum PortReason: u8 {
        Add = 0 => "ADD",
        Delete = 1 => "DELETE",
        Modify = 2 => "MODIFY",
    }
}

/// PORT_STATUS: a port was added, removed or changed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PortStatus {
    /// What happened.
    pub reason: PortReason,
    /// The port.
    pub desc: Port,
}

impl PortStatus {
    /// Parse the body (after the OpenFlow header).
    pub fn parse(i: &[u8]) -> Result<PortStatus, DecodeError> {
        let (rest, reason) = fixed(i, 8, "port_status", u8p)?;
        let (_, desc) = Port::parse(rest)?;
        Ok(PortStatus {
            reason: PortReason::from(reason),
            desc,
        })
    }

    /// Append the body.
    pub fn emit(&self, out: &mut BytesMut) {
        out.extend_from_slice(&[self.reason.code()]);
        put_zeros(out, 7);
        self.desc.emit(out);
    }
}

/// PORT_MOD: change a port's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct PortMod {
    /// Port to change.
    pub port_no: u32,
    /// Its Ethernet address (a sanity check for the switch).
    pub hw_addr: [u8; 6],
    /// New `OFPPC_*` bits.
    pub config: u32,
    /// Which `OFPPC_*` bits to change.
    pub mask: u32,
    /// Features to advertise; 0 = unchanged.
    pub advertise: u32,
}

impl PortMod {
    /// Parse the body.
    pub fn parse(i: &[u8]) -> Result<PortMod, DecodeError> {
        let (_, b) = take(i, 32, "port_mod")?;
        let (_, port_no) = fixed(b, 4, "port_mod", u32p)?;
        let mut hw_addr = [0u8; 6];
        hw_addr.copy_from_slice(&b[8..14]);
        let (_, (config, mask, advertise)) = fixed(&b[16..], 12, "port_mod", (u32p, u32p, u32p))?;
        Ok(PortMod {
            port_no,
            hw_addr,
            config,
            mask,
            advertise,
        })
    }

    /// Append the body.
    pub fn emit(&self, out: &mut BytesMut) {
        out.extend_from_slice(&u32::to_be_bytes(self.port_no));
        out.extend_from_slice(&u32::to_be_bytes(0));
        out.extend_from_slice(&self.hw_addr);
        out.extend_from_slice(&u16::to_be_bytes(0));
        out.extend_from_slice(&u32::to_be_bytes(self.config));
        out.extend_from_slice(&u32::to_be_bytes(self.mask));
        out.extend_from_slice(&u32::to_be_bytes(self.advertise));
        out.extend_from_slice(&u32::to_be_bytes(0));
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn port_names() {
        assert_eq!(PortNo::LOCAL.to_string(), "LOCAL");
        assert_eq!(PortNo(7).to_string(), "7");
        assert_eq!(PortNo::from_u16(0xfff8), PortNo::IN_PORT);
    }

    #[test]
    fn port_round_trip() {
        let p = Port {
            port_no: 1,
            hw_addr: [1, 2, 3, 4, 5, 6],
            name: "eth0".into(),
            config: 1,
            state: 4,
            curr_speed: 10_000_000,
            ..Port::default()
        };
        let mut out = BytesMut::new();
        p.emit(&mut out);
        assert_eq!(out.len(), PORT_LEN);
        assert_eq!(&out[16..21], b"eth0\0");
        assert_eq!(Port::parse(&out).unwrap().1, p);
        assert!(Port::parse(&out[..63]).unwrap_err().is_truncated());
    }

    #[test]
    fn port_status_round_trip() {
        let ps = PortStatus {
            reason: PortReason::Modify,
            desc: Port::default(),
        };
        let mut out = BytesMut::new();
        ps.emit(&mut out);
        assert_eq!(out.len(), 72);
        assert_eq!(PortStatus::parse(&out).unwrap(), ps);
    }

    /// Fuzz finding: a port name that is not UTF-8 was decoded lossily (U+FFFD), so the
    /// re-encoded port status differed and decode(encode(m)) != m. Names keep their bytes now.
    #[test]
    fn non_utf8_port_name_round_trips() {
        let reproducer: Vec<u8> = (0..HEX.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&HEX[i..i + 2], 16).unwrap())
            .collect();
        let (xid, message) = crate::Message::decode(&reproducer).unwrap();
        let crate::Message::PortStatus(status) = &message else {
            panic!("not a port status: {message:?}");
        };
        assert_eq!(status.desc.name.to_str(), None);
        assert_eq!(status.desc.name.as_bytes(), &reproducer[32..47]);
        let encoded = message.encode_to_vec(xid);
        assert_eq!(crate::Message::decode(&encoded).unwrap(), (xid, message));
    }

    const HEX: &str = "040c00500000000000000000000000000000000700000000f20ba4d03f700000e7a7811d88aee3839de383bce38388000000000000000004000028080000280000002808000028080000138800001388";
}
