//! A fixed-length bitset with Contiv's JSON form (reference §1.2).
//!
//! JSON: a string holding URL-safe base64 (with `=` padding) of the big-endian `u64` bit length
//! followed by the big-endian `u64` words; bit `i` is bit `i % 64` (LSB first) of word `i / 64`.
//! The empty set is `"AAAAAAAAAAA="`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A bitset of `len` bits.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Bitset {
    len: u64,
    words: Vec<u64>,
}

/// Why a serialized bitset could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BitsetError {
    #[error("bitset: invalid base64 character {0:?} at offset {1}")]
    Base64Char(char, usize),
    #[error("bitset: base64 length {0} is not a multiple of 4")]
    Base64Length(usize),
    #[error("bitset: {0} decoded bytes is not a multiple of 8")]
    ByteLength(usize),
    #[error("bitset: header says {len} bits but {words} words follow")]
    WordCount { len: u64, words: usize },
}

impl Bitset {
    /// An all-clear bitset of `len` bits.
    pub fn new(len: u64) -> Self {
        Bitset {
            len,
            words: vec![0; len.div_ceil(64) as usize],
        }
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether bit `i` is set (out of range reads as clear).
    pub fn test(&self, i: u64) -> bool {
        i < self.len && self.words[(i / 64) as usize] & (1 << (i % 64)) != 0
    }

    /// Set bit `i`; out-of-range indexes are ignored.
    pub fn set(&mut self, i: u64) {
        if i < self.len {
            self.words[(i / 64) as usize] |= 1 << (i % 64);
        }
    }

    /// Clear bit `i`; out-of-range indexes are ignored.
    pub fn clear(&mut self, i: u64) {
        if i < self.len {
            self.words[(i / 64) as usize] &= !(1 << (i % 64));
        }
    }

    /// Set every bit in `from..=to` (clamped to the length), a word at a time.
    pub fn set_range(&mut self, from: u64, to: u64) {
        if self.len == 0 {
            return;
        }
        let to = to.min(self.len - 1);
        let mut i = from;
        while i <= to {
            let word = (i / 64) as usize;
            let first = i % 64;
            let last = if to / 64 == i / 64 { to % 64 } else { 63 };
            let mask = (u64::MAX >> (63 - last)) & (u64::MAX << first);
            self.words[word] |= mask;
            i = (i / 64 + 1) * 64;
        }
    }

    /// Number of set bits.
    pub fn count(&self) -> u64 {
        self.words.iter().map(|w| u64::from(w.count_ones())).sum()
    }

    /// First set bit at or after `from`.
    pub fn next_set(&self, from: u64) -> Option<u64> {
        self.next_matching(from, false)
    }

    /// First clear bit at or after `from`.
    pub fn next_clear(&self, from: u64) -> Option<u64> {
        self.next_matching(from, true)
    }

    fn next_matching(&self, from: u64, clear: bool) -> Option<u64> {
        let mut i = from;
        while i < self.len {
            let word = self.words[(i / 64) as usize];
            let word = if clear { !word } else { word };
            let masked = word & (u64::MAX << (i % 64));
            if masked != 0 {
                let bit = (i / 64) * 64 + u64::from(masked.trailing_zeros());
                return (bit < self.len).then_some(bit);
            }
            i = (i / 64 + 1) * 64;
        }
        None
    }

    /// Indexes of all set bits, ascending.
    pub fn ones(&self) -> impl Iterator<Item = u64> + '_ {
        let mut next = self.next_set(0);
        std::iter::from_fn(move || {
            let cur = next?;
            next = self.next_set(cur + 1);
            Some(cur)
        })
    }

    /// The Contiv base64 form.
    pub fn encode(&self) -> String {
        let mut bytes = Vec::with_capacity(8 + self.words.len() * 8);
        bytes.extend_from_slice(&self.len.to_be_bytes());
        for w in &self.words {
            bytes.extend_from_slice(&w.to_be_bytes());
        }
        base64_url_encode(&bytes)
    }

    /// Parse the Contiv base64 form.
    pub fn decode(text: &str) -> Result<Self, BitsetError> {
        let bytes = base64_url_decode(text)?;
        if !bytes.len().is_multiple_of(8) || bytes.is_empty() {
            return Err(BitsetError::ByteLength(bytes.len()));
        }
        let mut chunks = bytes.chunks_exact(8).map(|c| {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            u64::from_be_bytes(b)
        });
        let len = chunks.next().unwrap_or(0);
        let words: Vec<u64> = chunks.collect();
        if words.len() as u64 != len.div_ceil(64) {
            return Err(BitsetError::WordCount {
                len,
                words: words.len(),
            });
        }
        Ok(Bitset { len, words })
    }
}

impl Serialize for Bitset {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.encode())
    }
}

impl<'de> Deserialize<'de> for Bitset {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Bitset::decode(&text).map_err(serde::de::Error::custom)
    }
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

fn base64_url_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for k in 0..4 {
            if k <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * k)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn base64_url_decode(text: &str) -> Result<Vec<u8>, BitsetError> {
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return Err(BitsetError::Base64Length(bytes.len()));
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    for (q, quad) in bytes.chunks(4).enumerate() {
        let mut n = 0u32;
        let mut pad = 0;
        for (k, &c) in quad.iter().enumerate() {
            let v = match c {
                b'A'..=b'Z' => c - b'A',
                b'a'..=b'z' => c - b'a' + 26,
                b'0'..=b'9' => c - b'0' + 52,
                b'-' | b'+' => 62,
                b'_' | b'/' => 63,
                b'=' if k >= 2 => {
                    pad += 1;
                    0
                }
                _ => return Err(BitsetError::Base64Char(char::from(c), q * 4 + k)),
            };
            n = (n << 6) | u32::from(v);
        }
        let decoded = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&decoded[..3 - pad]);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_range_sets_exactly_the_range_word_by_word() {
        for len in [0u64, 1, 63, 64, 65, 200, 4096] {
            for (from, to) in [
                (0, 0),
                (0, 63),
                (1, 64),
                (63, 64),
                (5, 130),
                (64, 127),
                (0, 9999),
                (150, 190),
            ] {
                let mut fast = Bitset::new(len);
                fast.set_range(from, to);
                let mut slow = Bitset::new(len);
                for i in from..=to.min(len.saturating_sub(1)) {
                    slow.set(i);
                }
                assert_eq!(fast, slow, "len {len}, {from}..={to}");
            }
        }
    }

    #[test]
    fn empty_set_matches_reference_form() {
        assert_eq!(Bitset::new(0).encode(), "AAAAAAAAAAA=");
        assert_eq!(Bitset::decode("AAAAAAAAAAA=").unwrap(), Bitset::new(0));
    }

    #[test]
    fn slash24_with_gateway_254_matches_reference_form() {
        let mut b = Bitset::new(256);
        b.set(0);
        b.set(254);
        b.set(255);
        let text = "AAAAAAAAAQAAAAAAAAAAAQAAAAAAAAAAAAAAAAAAAADAAAAAAAAAAA==";
        assert_eq!(b.encode(), text);
        assert_eq!(Bitset::decode(text).unwrap(), b);
        assert_eq!(serde_json::to_string(&b).unwrap(), format!("\"{text}\""));
    }

    #[test]
    fn scans_and_counts() {
        let mut b = Bitset::new(130);
        b.set_range(0, 69);
        assert_eq!(b.next_clear(0), Some(70));
        assert_eq!(b.next_set(70), None);
        b.set(129);
        assert_eq!(b.next_set(70), Some(129));
        assert_eq!(b.count(), 71);
        b.set_range(0, 129);
        assert_eq!(b.next_clear(0), None);
        assert_eq!(b.ones().count(), 130);
    }

    #[test]
    fn rejects_malformed_text() {
        assert!(matches!(
            Bitset::decode("AAA"),
            Err(BitsetError::Base64Length(3))
        ));
        assert!(matches!(
            Bitset::decode("AA*A"),
            Err(BitsetError::Base64Char('*', 2))
        ));
        // length 64 but no word
        let text = base64_url_encode(&64u64.to_be_bytes());
        assert!(matches!(
            Bitset::decode(&text),
            Err(BitsetError::WordCount { len: 64, words: 0 })
        ));
    }
}
