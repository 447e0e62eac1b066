//! Flow cookies: `generation:16 | category:8 | object:40`.
//!
//! The generation is what makes restarts hitless: on every (re)connect the controller advances
//! it, re-adds every desired flow under the new generation (an add with the same table, priority
//! and match replaces the old flow in place, so traffic never sees a gap), and then deletes
//! whatever still carries an older generation. Category and object are the owner's: they let
//! an operator (and `ovs-ofctl dump-flows --cookie`) tell which object a flow belongs to.

use std::fmt;

/// A flow cookie in the layout above.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cookie(pub u64);

impl Cookie {
    /// Bits of the generation field, for cookie-mask deletes of a whole generation.
    pub const GENERATION_MASK: u64 = 0xffff << 48;
    /// Largest object id (40 bits).
    pub const MAX_OBJECT: u64 = (1 << 40) - 1;

    /// Compose a cookie; `object` is truncated to 40 bits.
    pub fn new(generation: u16, category: u8, object: u64) -> Cookie {
        Cookie(
            (u64::from(generation) << 48)
                | (u64::from(category) << 40)
                | (object & Self::MAX_OBJECT),
        )
    }

    pub fn generation(self) -> u16 {
        (self.0 >> 48) as u16
    }

    pub fn category(self) -> u8 {
        (self.0 >> 40) as u8
    }

    pub fn object(self) -> u64 {
        self.0 & Self::MAX_OBJECT
    }

    /// The same category and object under another generation.
    pub fn with_generation(self, generation: u16) -> Cookie {
        Cookie((self.0 & !Self::GENERATION_MASK) | (u64::from(generation) << 48))
    }
}

impl fmt::Display for Cookie {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// The generation after `g`. Zero is skipped: it is the cookie of flows nobody owns (OVS's
/// own default flows, `ovs-ofctl add-flow` without a cookie), which must never look current.
pub fn next_generation(g: u16) -> u16 {
    match g.wrapping_add(1) {
        0 => 1,
        n => n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip() {
        let c = Cookie::new(0xbeef, 0x12, 0x34_5678_9abc);
        assert_eq!(c.0, 0xbeef_1234_5678_9abc);
        assert_eq!(
            (c.generation(), c.category(), c.object()),
            (0xbeef, 0x12, 0x34_5678_9abc)
        );
        assert_eq!(c.with_generation(7).0, 0x0007_1234_5678_9abc);
    }

    #[test]
    fn object_is_truncated_to_40_bits() {
        assert_eq!(Cookie::new(1, 2, u64::MAX).object(), Cookie::MAX_OBJECT);
        assert_eq!(Cookie::new(1, 2, u64::MAX).category(), 2);
    }

    #[test]
    fn generation_never_wraps_to_zero() {
        assert_eq!(next_generation(0xffff), 1);
        assert_eq!(next_generation(1), 2);
    }
}
