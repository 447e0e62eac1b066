//! The OpenFlow 1.3 standard actions (`OFPAT_*`), decoded from and encoded to their fixed
//! layouts. Padding is written as zeros.

use bytes::{Bytes, BytesMut};

use super::Action;
use crate::oxm::Oxm;
use crate::port::PortNo;
use crate::wire::{DecodeError, fixed, pad8, put_zeros, u8p, u16p, u32p};

/// `OFPAT_OUTPUT`.
pub const OFPAT_OUTPUT: u16 = 0;
/// `OFPAT_SET_FIELD`.
pub const OFPAT_SET_FIELD: u16 = 25;

/// Decode a standard action of type `kind` from its body (after the 4-byte header).
#[inline]
pub(crate) fn parse_into(
    kind: u16,
    body: &[u8],
    extended: &[u8],
    out: &mut Vec<Action>,
) -> Result<(), DecodeError> {
    let u16_of = |what| fixed(body, 2, what, u16p).map(|(_, v)| v);
    let u32_of = |what| fixed(body, 4, what, u32p).map(|(_, v)| v);
    let u8_of = |what| fixed(body, 1, what, u8p).map(|(_, v)| v);
    // Each arm pushes its own variant so the action is written straight into the list.
    match kind {
        0 => {
            let (_, (port, max_len)) = fixed(body, 6, "output action", (u32p, u16p))?;
            out.push(Action::Output {
                port: PortNo(port),
                max_len,
            });
        }
        11 => out.push(Action::CopyTtlOut),
        12 => out.push(Action::CopyTtlIn),
        15 => out.push(Action::SetMplsTtl(u8_of("set_mpls_ttl action")?)),
        16 => out.push(Action::DecMplsTtl),
        17 => out.push(Action::PushVlan(u16_of("push_vlan action")?)),
        18 => out.push(Action::PopVlan),
        19 => out.push(Action::PushMpls(u16_of("push_mpls action")?)),
        20 => out.push(Action::PopMpls(u16_of("pop_mpls action")?)),
        21 => out.push(Action::SetQueue(u32_of("set_queue action")?)),
        22 => out.push(Action::Group(u32_of("group action")?)),
        23 => out.push(Action::SetNwTtl(u8_of("set_nw_ttl action")?)),
        24 => out.push(Action::DecNwTtl),
        25 => {
            Oxm::parse_extended_into(body, extended, out, Action::SetField)?;
        }
        26 => out.push(Action::PushPbb(u16_of("push_pbb action")?)),
        27 => out.push(Action::PopPbb),
        _ => out.push(Action::Unknown {
            kind,
            data: Bytes::copy_from_slice(body),
        }),
    }
    Ok(())
}

fn head(out: &mut BytesMut, kind: u16, len: u16) {
    out.extend_from_slice(&u16::to_be_bytes(kind));
    out.extend_from_slice(&u16::to_be_bytes(len));
}

/// Encode `a` if it is a standard action; returns false for experimenter actions.
pub(crate) fn emit(a: &Action, out: &mut BytesMut) -> bool {
    match a {
        Action::Output { port, max_len } => {
            let p = port.0.to_be_bytes();
            let m = max_len.to_be_bytes();
            out.extend_from_slice(&[
                0, 0, 0, 16, p[0], p[1], p[2], p[3], m[0], m[1], 0, 0, 0, 0, 0, 0,
            ]);
        }
        Action::CopyTtlOut => simple(out, 11),
        Action::CopyTtlIn => simple(out, 12),
        Action::SetMplsTtl(t) => u8_action(out, 15, *t),
        Action::DecMplsTtl => simple(out, 16),
        Action::PushVlan(e) => u16_action(out, 17, *e),
        Action::PopVlan => simple(out, 18),
        Action::PushMpls(e) => u16_action(out, 19, *e),
        Action::PopMpls(e) => u16_action(out, 20, *e),
        Action::SetQueue(q) => u32_action(out, 21, *q),
        Action::Group(g) => u32_action(out, 22, *g),
        Action::SetNwTtl(t) => u8_action(out, 23, *t),
        Action::DecNwTtl => simple(out, 24),
        Action::SetField(oxm) => {
            let len = 4 + oxm.wire_len();
            let padded = len + pad8(len);
            head(out, OFPAT_SET_FIELD, padded as u16);
            oxm.emit(out);
            put_zeros(out, padded - len);
        }
        Action::PushPbb(e) => u16_action(out, 26, *e),
        Action::PopPbb => simple(out, 27),
        Action::Unknown { kind, data } => {
            let len = 4 + data.len();
            head(out, *kind, (len + pad8(len)) as u16);
            out.extend_from_slice(data);
            put_zeros(out, pad8(len));
        }
        _ => return false,
    }
    true
}

fn eight(out: &mut BytesMut, kind: u16, body: [u8; 4]) {
    let k = kind.to_be_bytes();
    out.extend_from_slice(&[k[0], k[1], 0, 8, body[0], body[1], body[2], body[3]]);
}

fn simple(out: &mut BytesMut, kind: u16) {
    eight(out, kind, [0; 4]);
}

fn u8_action(out: &mut BytesMut, kind: u16, v: u8) {
    eight(out, kind, [v, 0, 0, 0]);
}

fn u16_action(out: &mut BytesMut, kind: u16, v: u16) {
    let b = v.to_be_bytes();
    eight(out, kind, [b[0], b[1], 0, 0]);
}

fn u32_action(out: &mut BytesMut, kind: u16, v: u32) {
    eight(out, kind, v.to_be_bytes());
}

#[cfg(test)]
mod test {
    use super::super::*;
    use crate::oxm::FieldId;

    macro_rules! assert_action_round_trips {
        ($action:expr, $bytes:expr) => {{
            let bytes: &[u8] = &$bytes;
            let (rest, a) = Action::parse(bytes).unwrap();
            assert!(rest.is_empty());
            assert_eq!(a, $action);
            let mut out = BytesMut::new();
            a.emit(&mut out);
            assert_eq!(&out[..], bytes);
        }};
    }

    #[test]
    fn test_output() {
        assert_action_round_trips!(
            Action::Output {
                port: PortNo(6),
                max_len: 0xffff
            },
            [0, 0, 0, 16, 0, 0, 0, 6, 0xff, 0xff, 0, 0, 0, 0, 0, 0]
        );
    }

    #[test]
    fn test_simple_actions() {
        assert_action_round_trips!(Action::PopVlan, [0, 18, 0, 8, 0, 0, 0, 0]);
        assert_action_round_trips!(Action::PushVlan(0x8100), [0, 17, 0, 8, 0x81, 0, 0, 0]);
        assert_action_round_trips!(Action::Group(99), [0, 22, 0, 8, 0, 0, 0, 99]);
        assert_action_round_trips!(Action::SetNwTtl(10), [0, 23, 0, 8, 10, 0, 0, 0]);
    }

    #[test]
    fn test_set_field() {
        assert_action_round_trips!(
            Action::SetField(Oxm::int(FieldId::VLAN_VID, 258, None)),
            [0, 25, 0, 16, 0x80, 0, 0x0c, 2, 1, 2, 0, 0, 0, 0, 0, 0]
        );
    }

    #[test]
    fn test_unknown_kept() {
        assert_action_round_trips!(
            Action::Unknown {
                kind: 99,
                data: Bytes::from_static(&[1, 2, 3, 4])
            },
            [0, 99, 0, 8, 1, 2, 3, 4]
        );
    }

    #[test]
    fn malformed() {
        assert!(
            Action::parse(&[0, 0, 0, 16, 0, 0])
                .unwrap_err()
                .is_truncated()
        );
        assert!(matches!(
            Action::parse(&[0, 0, 0, 4, 0, 0, 0, 0]),
            Err(DecodeError::BadLength { .. })
        ));
        assert!(matches!(
            Action::parse(&[0, 0, 0, 9, 0, 0, 0, 0, 0]),
            Err(DecodeError::BadLength { .. })
        ));
    }
}
