//! [`FixedStr`]: the text of a fixed-width, NUL-padded string field (port names, switch
//! description strings, table names).
//!
//! Contract: OpenFlow does not say these bytes are UTF-8 and switches send what they like, so a
//! [`FixedStr`] keeps the raw bytes and decoding is lossless: `decode(encode(x)) == x` for any
//! field. Like Open vSwitch (which copies such fields with `strlcpy`), decoding keeps the bytes
//! before the first NUL and at most `width - 1` of them, so an unterminated field loses its last
//! byte on the way in, never on a round trip. Text output ([`fmt::Display`]) writes the bytes as
//! UTF-8, replacing invalid sequences with U+FFFD, which is how a terminal shows the raw bytes
//! `ovs-ofctl` prints.

use std::borrow::Cow;
use std::fmt;

use bytes::BytesMut;

use crate::wire::put_zeros;

/// The bytes of a NUL-padded string field, without the padding.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FixedStr(Vec<u8>);

impl FixedStr {
    /// The field's bytes (no NUL padding).
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The text, if the bytes are UTF-8.
    pub fn to_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.0).ok()
    }

    /// The text, with invalid UTF-8 replaced by U+FFFD.
    pub fn to_string_lossy(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.0)
    }

    /// Whether the string is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Read a whole `width`-byte field (`field.len()` is the width): the bytes before the first
    /// NUL, at most `width - 1` (the last byte is reserved for the terminator).
    pub(crate) fn parse_field(field: &[u8]) -> FixedStr {
        let room = &field[..field.len().saturating_sub(1)];
        let end = room.iter().position(|c| *c == 0).unwrap_or(room.len());
        FixedStr(room[..end].to_vec())
    }

    /// Append the field as `width` bytes: at most `width - 1` bytes of text, then NULs. Bytes
    /// from an embedded NUL on would not survive decoding; callers building values by hand
    /// should not put NULs in them.
    pub(crate) fn emit_field(&self, out: &mut BytesMut, width: usize) {
        let text = &self.0[..self.0.len().min(width.saturating_sub(1))];
        out.extend_from_slice(text);
        put_zeros(out, width - text.len());
    }
}

impl fmt::Display for FixedStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.to_string_lossy())
    }
}

impl fmt::Debug for FixedStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.to_str() {
            Some(s) => fmt::Debug::fmt(s, f),
            None => write!(f, "b\"{}\"", self.0.escape_ascii()),
        }
    }
}

impl From<&str> for FixedStr {
    fn from(s: &str) -> FixedStr {
        FixedStr(s.as_bytes().to_vec())
    }
}

impl From<String> for FixedStr {
    fn from(s: String) -> FixedStr {
        FixedStr(s.into_bytes())
    }
}

impl From<&[u8]> for FixedStr {
    fn from(b: &[u8]) -> FixedStr {
        FixedStr(b.to_vec())
    }
}

impl From<Vec<u8>> for FixedStr {
    fn from(b: Vec<u8>) -> FixedStr {
        FixedStr(b)
    }
}

impl PartialEq<str> for FixedStr {
    fn eq(&self, other: &str) -> bool {
        self.0 == other.as_bytes()
    }
}

impl PartialEq<&str> for FixedStr {
    fn eq(&self, other: &&str) -> bool {
        self.0 == other.as_bytes()
    }
}

impl PartialEq<String> for FixedStr {
    fn eq(&self, other: &String) -> bool {
        self.0 == other.as_bytes()
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn parse_stops_at_nul_and_keeps_room_for_one() {
        assert_eq!(FixedStr::parse_field(b"eth0\0\0\0\0"), "eth0");
        assert_eq!(FixedStr::parse_field(b"a\0bc\0"), "a");
        // Unterminated: the last byte is the terminator's place, as OVS's strlcpy treats it.
        assert_eq!(FixedStr::parse_field(b"abcd"), "abc");
        assert_eq!(FixedStr::parse_field(b""), "");
    }

    #[test]
    fn non_utf8_bytes_round_trip_and_render_lossily() {
        let field = [0xe7, 0xa7, 0x81, 0x1d, 0x88, 0xae, 0, 0];
        let s = FixedStr::parse_field(&field);
        assert_eq!(s.as_bytes(), &field[..6]);
        assert_eq!(s.to_str(), None);
        let mut out = BytesMut::new();
        s.emit_field(&mut out, 8);
        assert_eq!(&out[..], &field[..]);
        assert_eq!(s.to_string(), "私\u{1d}\u{fffd}\u{fffd}");
        assert_eq!(format!("{s:?}"), "b\"\\xe7\\xa7\\x81\\x1d\\x88\\xae\"");
    }

    #[test]
    fn emit_truncates_to_width_minus_one() {
        let mut out = BytesMut::new();
        FixedStr::from("abcdef").emit_field(&mut out, 4);
        assert_eq!(&out[..], b"abc\0");
    }
}
