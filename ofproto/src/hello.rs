//! OFPT_HELLO with its elements (the version bitmap).

use bytes::{Bytes, BytesMut};

use crate::wire::{DecodeError, fixed, pad8, patch_len, put_zeros, take_tlv, u16p};

/// `OFPHET_VERSIONBITMAP`.
pub const OFPHET_VERSIONBITMAP: u16 = 1;

/// One hello element.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HelloElem {
    /// Supported versions: bit `n` of word `n / 32` set means wire version `n` is supported.
    VersionBitmap(Vec<u32>),
    /// An element type this crate does not know.
    Unknown {
        /// Element type.
        kind: u16,
        /// Body after the 4-byte header, without padding.
        data: Bytes,
    },
}

/// OFPT_HELLO.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Hello {
    /// Elements in wire order (often none).
    pub elements: Vec<HelloElem>,
}

impl Hello {
    /// A hello advertising only OpenFlow 1.3, as this codec speaks.
    pub fn of13() -> Hello {
        Hello {
            elements: vec![HelloElem::VersionBitmap(vec![1 << 4])],
        }
    }

    /// Whether the peer supports wire version `v` (true when it sent no bitmap).
    pub fn supports(&self, v: u8) -> bool {
        let bitmap = self.elements.iter().find_map(|e| match e {
            HelloElem::VersionBitmap(b) => Some(b),
            HelloElem::Unknown { .. } => None,
        });
        match bitmap {
            None => true,
            Some(b) => b
                .get(usize::from(v / 32))
                .is_some_and(|w| w & (1 << (v % 32)) != 0),
        }
    }

    /// Parse the body.
    pub fn parse(mut i: &[u8]) -> Result<Hello, DecodeError> {
        let mut elements = Vec::new();
        while i.len() >= 4 {
            let (_, (kind, len)) = fixed(i, 4, "hello element", (u16p, u16p))?;
            let len = usize::from(len);
            let (rest, e) = take_tlv(i, len, 4, "hello element")?;
            let body = &e[4..];
            elements.push(if kind == OFPHET_VERSIONBITMAP {
                HelloElem::VersionBitmap(
                    body.chunks_exact(4)
                        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
                        .collect(),
                )
            } else {
                HelloElem::Unknown {
                    kind,
                    data: Bytes::copy_from_slice(body),
                }
            });
            let pad = pad8(len).min(rest.len());
            i = &rest[pad..];
        }
        Ok(Hello { elements })
    }

    /// Append the body.
    pub fn emit(&self, out: &mut BytesMut) {
        for e in &self.elements {
            let start = out.len();
            match e {
                HelloElem::VersionBitmap(words) => {
                    out.extend_from_slice(&u16::to_be_bytes(OFPHET_VERSIONBITMAP));
                    out.extend_from_slice(&u16::to_be_bytes(0));
                    for w in words {
                        out.extend_from_slice(&u32::to_be_bytes(*w));
                    }
                }
                HelloElem::Unknown { kind, data } => {
                    out.extend_from_slice(&u16::to_be_bytes(*kind));
                    out.extend_from_slice(&u16::to_be_bytes(0));
                    out.extend_from_slice(data);
                }
            }
            patch_len(out, start + 2, start);
            put_zeros(out, pad8(out.len() - start));
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    static HELLO_BODY: [u8; 8] = [0, 1, 0, 8, 0, 0, 0, 0x12];

    #[test]
    fn test_parse_emit() {
        let h = Hello::parse(&HELLO_BODY).unwrap();
        assert_eq!(h.elements, vec![HelloElem::VersionBitmap(vec![0x12])]);
        assert!(h.supports(4) && h.supports(1) && !h.supports(5));
        let mut out = BytesMut::new();
        h.emit(&mut out);
        assert_eq!(&out[..], &HELLO_BODY[..]);
    }

    #[test]
    fn malformed() {
        assert!(Hello::parse(&[0, 1, 0, 2, 0, 0]).is_err());
        assert!(
            Hello::parse(&[0, 1, 0, 12, 0, 0, 0, 0])
                .unwrap_err()
                .is_truncated()
        );
        assert_eq!(Hello::parse(&[]).unwrap(), Hello::default());
    }
}
