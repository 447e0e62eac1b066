//! The 64-bit OpenFlow metadata layout the pipeline carries between tables.
//!
//! | bits  | mask            | meaning                                  |
//! |-------|-----------------|------------------------------------------|
//! | 0     | `0x1`           | the packet came in from a VTEP           |
//! | 1–15  | `0xfffe`        | destination endpoint group (table 4)     |
//! | 16–30 | `0x7fff0000`    | source endpoint group (table 1)          |
//! | 32–39 | `0xff00000000`  | VRF id (table 1)                         |
//!
//! Registers are not used: metadata is standard OpenFlow 1.3, and these 24 bits of identity
//! are all the policy table needs.

/// Set when the packet arrived through a VXLAN tunnel.
pub const RX_VTEP: u64 = 0x1;
/// Destination endpoint-group bits.
pub const DST_EPG_MASK: u64 = 0xfffe;
/// Source endpoint-group bits.
pub const SRC_EPG_MASK: u64 = 0x7fff_0000;
/// VRF id bits.
pub const VRF_MASK: u64 = 0xff_0000_0000;
/// What table 1 writes for a local endpoint: its VRF and source group together.
pub const PORT_MASK: u64 = VRF_MASK | SRC_EPG_MASK;

/// The destination-group bits for `epg` (ids above 15 bits are cut).
pub fn dst_epg(epg: u16) -> u64 {
    (u64::from(epg) << 1) & DST_EPG_MASK
}

/// The source-group bits for `epg`.
pub fn src_epg(epg: u16) -> u64 {
    (u64::from(epg) << 16) & SRC_EPG_MASK
}

/// The VRF bits for `vrf`.
pub fn vrf(vrf: u8) -> u64 {
    u64::from(vrf) << 32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_do_not_overlap_and_match_the_reference_examples() {
        assert_eq!(RX_VTEP & DST_EPG_MASK, 0);
        assert_eq!(DST_EPG_MASK & SRC_EPG_MASK, 0);
        assert_eq!(SRC_EPG_MASK & VRF_MASK, 0);
        // What the reference's tests grep for: VRF 1, EPG 5.
        assert_eq!(vrf(1) | src_epg(5), 0x1_0005_0000);
        assert_eq!(PORT_MASK, 0xff_7fff_0000);
        assert_eq!(dst_epg(0x7fff), 0xfffe);
        assert_eq!(
            src_epg(0xffff),
            SRC_EPG_MASK,
            "out-of-range ids are cut, not spilled"
        );
    }
}
