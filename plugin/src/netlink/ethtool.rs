//! Interface features through ethtool's generic netlink family (Linux ≥ 5.6), in the calling
//! thread's namespace: what `ethtool -K <ifname> tx off` does, without starting a process
//! (which costs milliseconds, tens of them on a loaded host, per pod).
//!
//! Contract: [`disable_tx_checksum`] turns every transmit checksum feature of the interface
//! off (the kernel then also drops the segmentation offloads that need them) and returns once
//! the kernel acknowledged the change; features the device cannot change are left as they
//! are, as with `ethtool`. Errors carry the kernel's errno.

use std::io;

use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_GENERIC};

const NLMSG_HDR_LEN: usize = 16;
const GENL_HDR_LEN: usize = 4;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLA_F_NESTED: u16 = 1 << 15;
const NLA_TYPE_MASK: u16 = !(NLA_F_NESTED | (1 << 14));

const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;

const ETHTOOL_GENL_NAME: &str = "ethtool";
const ETHTOOL_GENL_VERSION: u8 = 1;
const ETHTOOL_MSG_FEATURES_SET: u8 = 12;
const ETHTOOL_A_FEATURES_HEADER: u16 = 1;
const ETHTOOL_A_FEATURES_WANTED: u16 = 3;
const ETHTOOL_A_HEADER_DEV_NAME: u16 = 2;
const ETHTOOL_A_HEADER_FLAGS: u16 = 3;
const ETHTOOL_FLAG_OMIT_REPLY: u32 = 1 << 1;
const ETHTOOL_A_BITSET_BITS: u16 = 3;
const ETHTOOL_A_BITSET_BITS_BIT: u16 = 1;
const ETHTOOL_A_BITSET_BIT_NAME: u16 = 2;

/// The features `ethtool -K <if> tx off` clears (its `tx` shorthand).
pub const TX_CHECKSUM_FEATURES: [&str; 5] = [
    "tx-checksum-ipv4",
    "tx-checksum-ip-generic",
    "tx-checksum-ipv6",
    "tx-checksum-fcoe-crc",
    "tx-checksum-sctp",
];

/// Netlink attributes, 4-byte aligned.
#[derive(Default)]
struct Attrs(Vec<u8>);

impl Attrs {
    fn put(&mut self, kind: u16, payload: &[u8]) -> &mut Self {
        let len = u16::try_from(4 + payload.len()).unwrap_or(u16::MAX);
        self.0.extend_from_slice(&len.to_ne_bytes());
        self.0.extend_from_slice(&kind.to_ne_bytes());
        self.0.extend_from_slice(payload);
        while !self.0.len().is_multiple_of(4) {
            self.0.push(0);
        }
        self
    }

    /// A NUL-terminated string attribute.
    fn put_str(&mut self, kind: u16, text: &str) -> &mut Self {
        let mut payload = text.as_bytes().to_vec();
        payload.push(0);
        self.put(kind, &payload)
    }

    fn put_nested(&mut self, kind: u16, inner: &Attrs) -> &mut Self {
        self.put(kind | NLA_F_NESTED, &inner.0)
    }
}

/// A generic netlink request: netlink header, generic header, attributes.
fn request(family: u16, seq: u32, cmd: u8, version: u8, attrs: &Attrs) -> Vec<u8> {
    let len = NLMSG_HDR_LEN + GENL_HDR_LEN + attrs.0.len();
    let mut msg = Vec::with_capacity(len);
    msg.extend_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_ne_bytes());
    msg.extend_from_slice(&family.to_ne_bytes());
    msg.extend_from_slice(&(NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
    msg.extend_from_slice(&seq.to_ne_bytes());
    msg.extend_from_slice(&0u32.to_ne_bytes());
    msg.extend_from_slice(&[cmd, version, 0, 0]);
    msg.extend_from_slice(&attrs.0);
    msg
}

fn u16_at(buf: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(buf.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(buf: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(buf.get(at..at + 4)?.try_into().ok()?))
}

/// `(type, payload)` of each attribute in `buf`.
fn attributes(mut buf: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    while let Some(len) = u16_at(buf, 0).map(usize::from).filter(|l| *l >= 4) {
        let (Some(kind), Some(payload)) = (u16_at(buf, 2), buf.get(4..len)) else {
            break;
        };
        out.push((kind & NLA_TYPE_MASK, payload));
        buf = buf.get(len.next_multiple_of(4)..).unwrap_or_default();
    }
    out
}

fn malformed(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("malformed {what}"))
}

/// One generic netlink socket in the calling thread's namespace.
struct Genl {
    socket: Socket,
    seq: u32,
}

impl Genl {
    fn open() -> io::Result<Genl> {
        let mut socket = Socket::new(NETLINK_GENERIC)?;
        socket.bind_auto()?;
        socket.connect(&SocketAddr::new(0, 0))?;
        Ok(Genl { socket, seq: 0 })
    }

    /// Send a request and read until its acknowledgement; returns the payloads (after the
    /// generic header) of the answers of type `family` that came before it.
    fn call(
        &mut self,
        family: u16,
        cmd: u8,
        version: u8,
        attrs: &Attrs,
    ) -> io::Result<Vec<Vec<u8>>> {
        self.seq += 1;
        let seq = self.seq;
        self.socket
            .send(&request(family, seq, cmd, version, attrs), 0)?;
        let mut answers = Vec::new();
        let mut buf = Vec::with_capacity(32 * 1024);
        loop {
            buf.clear();
            self.socket.recv(&mut buf, 0)?;
            let mut rest = buf.as_slice();
            while rest.len() >= NLMSG_HDR_LEN {
                let len = u32_at(rest, 0)
                    .and_then(|l| usize::try_from(l).ok())
                    .filter(|l| (NLMSG_HDR_LEN..=rest.len()).contains(l))
                    .ok_or_else(|| malformed("netlink message"))?;
                let kind = u16_at(rest, 4).ok_or_else(|| malformed("netlink message"))?;
                let their_seq = u32_at(rest, 8).ok_or_else(|| malformed("netlink message"))?;
                let payload = &rest[NLMSG_HDR_LEN..len];
                rest = rest.get(len.next_multiple_of(4)..).unwrap_or_default();
                if their_seq != seq {
                    continue;
                }
                match kind {
                    NLMSG_ERROR => {
                        let code = u32_at(payload, 0)
                            .map(|c| c as i32)
                            .ok_or_else(|| malformed("netlink acknowledgement"))?;
                        return if code == 0 {
                            Ok(answers)
                        } else {
                            Err(io::Error::from_raw_os_error(-code))
                        };
                    }
                    NLMSG_DONE => return Ok(answers),
                    k if k == family => {
                        answers.push(payload.get(GENL_HDR_LEN..).unwrap_or_default().to_vec());
                    }
                    _ => {}
                }
            }
        }
    }

    /// The id of the generic netlink family `name`.
    fn family(&mut self, name: &str) -> io::Result<u16> {
        let mut attrs = Attrs::default();
        attrs.put_str(CTRL_ATTR_FAMILY_NAME, name);
        let answers = self.call(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 1, &attrs)?;
        answers
            .iter()
            .flat_map(|a| attributes(a))
            .find(|(kind, _)| *kind == CTRL_ATTR_FAMILY_ID)
            .and_then(|(_, payload)| u16_at(payload, 0))
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("no generic netlink family {name:?} (kernel older than 5.6?)"),
                )
            })
    }
}

/// Clear the features named `features` of `ifname` (in the calling thread's namespace).
pub fn clear_features(ifname: &str, features: &[&str]) -> io::Result<()> {
    let mut genl = Genl::open()?;
    let family = genl.family(ETHTOOL_GENL_NAME)?;
    let mut header = Attrs::default();
    header.put_str(ETHTOOL_A_HEADER_DEV_NAME, ifname).put(
        ETHTOOL_A_HEADER_FLAGS,
        &ETHTOOL_FLAG_OMIT_REPLY.to_ne_bytes(),
    );
    // A bit listed without its value flag is one to clear; unlisted bits stay as they are.
    let mut bits = Attrs::default();
    for name in features {
        let mut bit = Attrs::default();
        bit.put_str(ETHTOOL_A_BITSET_BIT_NAME, name);
        bits.put_nested(ETHTOOL_A_BITSET_BITS_BIT, &bit);
    }
    let mut wanted = Attrs::default();
    wanted.put_nested(ETHTOOL_A_BITSET_BITS, &bits);
    let mut attrs = Attrs::default();
    attrs
        .put_nested(ETHTOOL_A_FEATURES_HEADER, &header)
        .put_nested(ETHTOOL_A_FEATURES_WANTED, &wanted);
    genl.call(
        family,
        ETHTOOL_MSG_FEATURES_SET,
        ETHTOOL_GENL_VERSION,
        &attrs,
    )?;
    Ok(())
}

/// `ethtool -K <ifname> tx off`.
pub fn disable_tx_checksum(ifname: &str) -> io::Result<()> {
    clear_features(ifname, &TX_CHECKSUM_FEATURES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_are_aligned_and_nested_ones_flagged() {
        let mut inner = Attrs::default();
        inner.put_str(2, "eth0");
        assert_eq!(inner.0.len(), 12, "4 header + 5 bytes, padded to 12");
        let mut outer = Attrs::default();
        outer.put_nested(1, &inner);
        assert_eq!(u16_at(&outer.0, 0), Some(16));
        assert_eq!(u16_at(&outer.0, 2), Some(1 | NLA_F_NESTED));
        let parsed = attributes(&outer.0);
        assert_eq!(parsed.len(), 1);
        assert_eq!(parsed[0].0, 1, "the nested flag is masked off");
        let names = attributes(parsed[0].1);
        assert_eq!(names, vec![(2, &b"eth0\0"[..])]);
    }

    #[test]
    fn truncated_attributes_end_the_walk() {
        assert!(attributes(&[8, 0, 1]).is_empty());
        assert!(
            attributes(&[0, 0, 1, 0, 0, 0, 0, 0]).is_empty(),
            "a zero length"
        );
        assert!(attributes(&[200, 0, 1, 0, 1, 2]).is_empty());
        let mut ok = Attrs::default();
        ok.put(3, &[1, 2, 3, 4]);
        ok.0.extend_from_slice(&[9, 0]);
        assert_eq!(attributes(&ok.0).len(), 1);
    }

    #[test]
    fn a_request_is_sized_and_asks_for_an_ack() {
        let mut attrs = Attrs::default();
        attrs.put_str(CTRL_ATTR_FAMILY_NAME, "ethtool");
        let msg = request(GENL_ID_CTRL, 7, CTRL_CMD_GETFAMILY, 1, &attrs);
        assert_eq!(u32_at(&msg, 0), Some(msg.len() as u32));
        assert_eq!(u16_at(&msg, 4), Some(GENL_ID_CTRL));
        assert_eq!(u16_at(&msg, 6), Some(NLM_F_REQUEST | NLM_F_ACK));
        assert_eq!(u32_at(&msg, 8), Some(7));
        assert_eq!(msg[16], CTRL_CMD_GETFAMILY);
    }
}
