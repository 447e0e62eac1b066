//! Shared decoding/encoding plumbing: the crate's error types and the small nom helpers every
//! message module uses.
//!
//! Contract: every parser takes a byte slice and returns `Ok((rest, value))` or a [`DecodeError`]
//! that names the structure that failed. Parsers never index past a length they have checked, so
//! no input can make them panic, and every allocation is bounded by the input length (one element
//! per consumed TLV, never a count read from the wire).

use bytes::BytesMut;
use nom::Parser;

/// Why a byte buffer is not a valid OpenFlow message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The input ended before `what` was complete.
    #[error("truncated {what}: need {need} bytes, have {have}")]
    Truncated {
        /// The structure being decoded.
        what: &'static str,
        /// Bytes that structure needs.
        need: usize,
        /// Bytes that were available.
        have: usize,
    },
    /// A length field is impossible (smaller than its header, not a multiple of 8, ...).
    #[error("bad length {len} in {what}: {reason}")]
    BadLength {
        /// The structure whose length field is wrong.
        what: &'static str,
        /// The length read from the wire.
        len: usize,
        /// Why it is wrong.
        reason: &'static str,
    },
    /// The header's version byte is not OpenFlow 1.3 (0x04).
    #[error("unsupported OpenFlow version {0:#04x} (only 0x04, OpenFlow 1.3, is supported)")]
    BadVersion(u8),
    /// A well-formed value this codec does not implement.
    #[error("unsupported {what} {value:#x}")]
    Unsupported {
        /// What kind of value.
        what: &'static str,
        /// The value found.
        value: u32,
    },
    /// A field holds a value that makes the structure meaningless.
    #[error("invalid {what}: {reason}")]
    Invalid {
        /// The field.
        what: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
}

impl DecodeError {
    /// Whether this error means "the input was cut short".
    pub fn is_truncated(&self) -> bool {
        matches!(self, DecodeError::Truncated { .. })
    }
}

/// Why a value cannot be encoded as a valid OpenFlow message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// A match field is present without the field its meaning depends on.
    #[error("match field {field} requires {requires}")]
    MissingPrerequisite {
        /// The field that was set.
        field: &'static str,
        /// The prerequisite, in ovs-ofctl syntax (e.g. `eth_type=0x0800`).
        requires: &'static str,
    },
    /// A field appears twice in one match.
    #[error("match field {0} appears more than once")]
    DuplicateField(&'static str),
    /// A mask was given for a field that cannot be masked.
    #[error("match field {0} cannot be masked")]
    NotMaskable(&'static str),
    /// The encoded message would not fit the 16-bit length field.
    #[error("{what} would be {len} bytes, over the 65535-byte limit")]
    TooLong {
        /// The structure that overflowed.
        what: &'static str,
        /// Its encoded length.
        len: usize,
    },
}

/// Result of a parser: the unconsumed input and the value.
pub(crate) type PResult<'a, T> = Result<(&'a [u8], T), DecodeError>;

type NomErr<'a> = nom::error::Error<&'a [u8]>;

/// Split off exactly `n` bytes, or fail naming `what`.
#[inline(always)]
pub(crate) fn take<'a>(i: &'a [u8], n: usize, what: &'static str) -> PResult<'a, &'a [u8]> {
    // `split_at_checked` is nom's `take` without the generic error plumbing, on the hot path of
    // every TLV.
    match i.split_at_checked(n) {
        Some((head, rest)) => Ok((rest, head)),
        None => Err(DecodeError::Truncated {
            what,
            need: n,
            have: i.len(),
        }),
    }
}

/// Run a fixed-size parser `p` over the first `n` bytes of `i` after checking they exist.
#[inline(always)]
pub(crate) fn fixed<'a, O, P>(i: &'a [u8], n: usize, what: &'static str, mut p: P) -> PResult<'a, O>
where
    P: Parser<&'a [u8], Output = O, Error = NomErr<'a>>,
{
    let (rest, body) = take(i, n, what)?;
    match p.parse(body) {
        Ok((_, o)) => Ok((rest, o)),
        // Unreachable when `n` covers the parser; report it as truncation rather than panic.
        Err(_) => Err(DecodeError::Truncated {
            what,
            need: n,
            have: i.len(),
        }),
    }
}

macro_rules! be_parser {
    ($name:ident, $ty:ty, $n:literal) => {
        /// Big-endian integer as a nom parser, written on `split_first_chunk` so that it
        /// inlines to a bounds check and a load (nom's own goes through a non-inlined `take`).
        #[inline(always)]
        pub(crate) fn $name(i: &[u8]) -> nom::IResult<&[u8], $ty, NomErr<'_>> {
            match i.split_first_chunk::<$n>() {
                Some((b, rest)) => Ok((rest, <$ty>::from_be_bytes(*b))),
                None => Err(nom::Err::Error(nom::error::Error::new(
                    i,
                    nom::error::ErrorKind::Eof,
                ))),
            }
        }
    };
}

be_parser!(u8p, u8, 1);
be_parser!(u16p, u16, 2);
be_parser!(u32p, u32, 4);
be_parser!(u64p, u64, 8);

/// One value from a decoder that appends to a vector (`parse_into`), for the callers that want
/// a single value rather than a list. `what` names the value should the decoder append nothing.
pub(crate) fn parse_one<'a, T>(
    what: &'static str,
    parse_into: impl FnOnce(&mut Vec<T>) -> Result<&'a [u8], DecodeError>,
) -> PResult<'a, T> {
    let mut one = Vec::with_capacity(1);
    let rest = parse_into(&mut one)?;
    match one.pop() {
        Some(value) => Ok((rest, value)),
        None => Err(DecodeError::Invalid {
            what,
            reason: "decoder produced nothing",
        }),
    }
}

/// Bytes needed to pad `len` up to a multiple of 8.
#[inline]
pub(crate) fn pad8(len: usize) -> usize {
    (8 - len % 8) % 8
}

/// Split off a TLV whose total length (header included) is `len`, checking `min <= len`.
#[inline]
pub(crate) fn take_tlv<'a>(
    i: &'a [u8],
    len: usize,
    min: usize,
    what: &'static str,
) -> PResult<'a, &'a [u8]> {
    if len < min {
        return Err(DecodeError::BadLength {
            what,
            len,
            reason: "shorter than its header",
        });
    }
    take(i, len, what)
}

/// Write the length of everything from `start` to the end of `out` as a big-endian u16 at `at`.
/// Lengths above 65535 are clamped; [`crate::Message::check`] reports them beforehand.
#[inline]
pub(crate) fn patch_len(out: &mut BytesMut, at: usize, start: usize) {
    let len = u16::try_from(out.len() - start).unwrap_or(u16::MAX);
    out[at..at + 2].copy_from_slice(&len.to_be_bytes());
}

/// Append `n` zero bytes.
#[inline(always)]
pub(crate) fn put_zeros(out: &mut BytesMut, n: usize) {
    const ZEROS: [u8; 16] = [0; 16];
    match ZEROS.get(..n) {
        Some(z) => out.extend_from_slice(z),
        None => bytes::BufMut::put_bytes(out, 0, n),
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn take_reports_truncation() {
        let e = take(&[1, 2], 4, "thing").unwrap_err();
        assert_eq!(
            e,
            DecodeError::Truncated {
                what: "thing",
                need: 4,
                have: 2
            }
        );
        assert!(e.is_truncated());
    }

    #[test]
    fn fixed_parses_tuple() {
        let (rest, (a, b)) = fixed(&[0, 1, 0, 0, 0, 2, 9], 6, "t", (u16p, u32p)).unwrap();
        assert_eq!((a, b, rest), (1, 2, &[9u8][..]));
    }

    #[test]
    fn tlv_shorter_than_header_is_bad_length() {
        assert!(matches!(
            take_tlv(&[0; 8], 2, 4, "tlv"),
            Err(DecodeError::BadLength { .. })
        ));
    }

    #[test]
    fn pad8_rounds_up() {
        assert_eq!((pad8(0), pad8(1), pad8(8), pad8(14)), (0, 7, 0, 2));
    }
}
