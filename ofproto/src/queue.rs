//! OFPT_QUEUE_GET_CONFIG_REQUEST / _REPLY: the queues configured on a port.

use bytes::{Bytes, BytesMut};

use crate::wire::{DecodeError, PResult, fixed, put_zeros, take_tlv, u16p, u32p};

/// One queue property.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum QueueProp {
    /// `OFPQT_MIN_RATE` in 1/10 of a percent.
    MinRate(u16),
    /// `OFPQT_MAX_RATE` in 1/10 of a percent.
    MaxRate(u16),
    /// `OFPQT_EXPERIMENTER` or unknown: type and the bytes after the 8-byte header.
    Other {
        /// Property type.
        kind: u16,
        /// Body.
        data: Bytes,
    },
}

impl QueueProp {
    fn parse(i: &[u8]) -> PResult<'_, QueueProp> {
        let (_, (kind, len)) = fixed(i, 4, "queue property", (u16p, u16p))?;
        let (rest, p) = take_tlv(i, usize::from(len), 8, "queue property")?;
        let b = &p[8..];
        let prop = match kind {
            1 | 2 if b.len() == 8 && b[2..].iter().all(|x| *x == 0) => {
                let rate = u16::from_be_bytes([b[0], b[1]]);
                if kind == 1 {
                    QueueProp::MinRate(rate)
                } else {
                    QueueProp::MaxRate(rate)
                }
            }
            _ => QueueProp::Other {
                kind,
                data: Bytes::copy_from_slice(b),
            },
        };
        Ok((rest, prop))
    }

    fn emit(&self, out: &mut BytesMut) {
        match self {
            QueueProp::MinRate(r) | QueueProp::MaxRate(r) => {
                out.extend_from_slice(&u16::to_be_bytes(
                    if matches!(self, QueueProp::MinRate(_)) {
                        1
                    } else {
                        2
                    },
                ));
                out.extend_from_slice(&u16::to_be_bytes(16));
                out.extend_from_slice(&u32::to_be_bytes(0));
                out.extend_from_slice(&u16::to_be_bytes(*r));
                put_zeros(out, 6);
            }
            QueueProp::Other { kind, data } => {
                out.extend_from_slice(&u16::to_be_bytes(*kind));
                out.extend_from_slice(&u16::to_be_bytes((8 + data.len()) as u16));
                out.extend_from_slice(&u32::to_be_bytes(0));
                out.extend_from_slice(data);
            }
        }
    }
}

/// `ofp_packet_queue`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PacketQueue {
    /// Queue id.
    pub queue_id: u32,
    /// Port it is attached to.
    pub port: u32,
    /// Properties.
    pub properties: Vec<QueueProp>,
}

impl PacketQueue {
    fn parse(i: &[u8]) -> PResult<'_, PacketQueue> {
        let (_, (queue_id, port, len)) = fixed(i, 10, "packet_queue", (u32p, u32p, u16p))?;
        let (rest, q) = take_tlv(i, usize::from(len), 16, "packet_queue")?;
        let mut props = &q[16..];
        let mut properties = Vec::new();
        while !props.is_empty() {
            let (r, p) = QueueProp::parse(props)?;
            properties.push(p);
            props = r;
        }
        Ok((
            rest,
            PacketQueue {
                queue_id,
                port,
                properties,
            },
        ))
    }

    fn emit(&self, out: &mut BytesMut) {
        let start = out.len();
        out.extend_from_slice(&u32::to_be_bytes(self.queue_id));
        out.extend_from_slice(&u32::to_be_bytes(self.port));
        out.extend_from_slice(&u16::to_be_bytes(0));
        put_zeros(out, 6);
        for p in &self.properties {
            p.emit(out);
        }
        crate::wire::patch_len(out, start + 8, start);
    }
}

/// OFPT_QUEUE_GET_CONFIG_REPLY body.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct QueueGetConfigReply {
    /// Port queried.
    pub port: u32,
    /// Its queues.
    pub queues: Vec<PacketQueue>,
}

impl QueueGetConfigReply {
    /// Parse the body.
    pub fn parse(i: &[u8]) -> Result<QueueGetConfigReply, DecodeError> {
        let (mut r, (port, _pad)) = fixed(i, 8, "queue_get_config_reply", (u32p, u32p))?;
        let mut queues = Vec::new();
        while !r.is_empty() {
            let (r2, q) = PacketQueue::parse(r)?;
            queues.push(q);
            r = r2;
        }
        Ok(QueueGetConfigReply { port, queues })
    }

    /// Append the body.
    pub fn emit(&self, out: &mut BytesMut) {
        out.extend_from_slice(&u32::to_be_bytes(self.port));
        out.extend_from_slice(&u32::to_be_bytes(0));
        for q in &self.queues {
            q.emit(out);
        }
    }
}

/// Parse a QUEUE_GET_CONFIG_REQUEST body: the port.
pub fn parse_request(i: &[u8]) -> Result<u32, DecodeError> {
    Ok(fixed(i, 8, "queue_get_config_request", u32p)?.1)
}

/// Append a QUEUE_GET_CONFIG_REQUEST body.
pub fn emit_request(port: u32, out: &mut BytesMut) {
    out.extend_from_slice(&u32::to_be_bytes(port));
    out.extend_from_slice(&u32::to_be_bytes(0));
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn test_round_trip() {
        let r = QueueGetConfigReply {
            port: 1,
            queues: vec![PacketQueue {
                queue_id: 2,
                port: 1,
                properties: vec![
                    QueueProp::MinRate(100),
                    QueueProp::MaxRate(900),
                    QueueProp::Other {
                        kind: 0xffff,
                        data: Bytes::from_static(&[0, 0, 0x23, 0x20, 0, 0, 0, 0]),
                    },
                ],
            }],
        };
        let mut out = BytesMut::new();
        r.emit(&mut out);
        assert_eq!(out.len(), 8 + 16 + 16 + 16 + 16);
        assert_eq!(QueueGetConfigReply::parse(&out).unwrap(), r);
        assert!(
            QueueGetConfigReply::parse(&out[..40])
                .unwrap_err()
                .is_truncated()
        );
    }
}
