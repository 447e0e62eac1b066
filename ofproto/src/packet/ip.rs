//! Facts shared by the IP layers: protocol numbers, the Internet checksum (RFC 1071) and the
//! pseudo-header that TCP, UDP and ICMPv6 checksums cover.
//!
//! Checksums are computed over big-endian 16-bit words with end-around carry; an odd trailing byte
//! is padded with zero. A buffer whose checksum field is correct sums to `0xffff`.

use core::fmt;
use core::net::{Ipv4Addr, Ipv6Addr};

enum_with_unknown! {
    /// IP protocol number (IPv4 `protocol`, IPv6 `next header`).
    pub enum IpProtocol(u8) {
        /// IPv6 hop-by-hop options.
        HopByHop = 0,
        /// ICMP for IPv4.
        Icmp = 1,
        /// IGMP.
        Igmp = 2,
        /// TCP.
        Tcp = 6,
        /// UDP.
        Udp = 17,
        /// IPv6 routing header.
        Ipv6Route = 43,
        /// IPv6 fragment header.
        Ipv6Frag = 44,
        /// GRE.
        Gre = 47,
        /// IPsec ESP.
        Esp = 50,
        /// IPsec AH.
        Ah = 51,
        /// ICMP for IPv6.
        Icmpv6 = 58,
        /// IPv6 "no next header".
        Ipv6NoNxt = 59,
        /// IPv6 destination options.
        Ipv6Opts = 60,
        /// SCTP.
        Sctp = 132,
    }
}

impl fmt::Display for IpProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IpProtocol::HopByHop => f.write_str("hop-by-hop"),
            IpProtocol::Icmp => f.write_str("icmp"),
            IpProtocol::Igmp => f.write_str("igmp"),
            IpProtocol::Tcp => f.write_str("tcp"),
            IpProtocol::Udp => f.write_str("udp"),
            IpProtocol::Ipv6Route => f.write_str("ipv6-route"),
            IpProtocol::Ipv6Frag => f.write_str("ipv6-frag"),
            IpProtocol::Gre => f.write_str("gre"),
            IpProtocol::Esp => f.write_str("esp"),
            IpProtocol::Ah => f.write_str("ah"),
            IpProtocol::Icmpv6 => f.write_str("icmp6"),
            IpProtocol::Ipv6NoNxt => f.write_str("ipv6-nonxt"),
            IpProtocol::Ipv6Opts => f.write_str("ipv6-opts"),
            IpProtocol::Sctp => f.write_str("sctp"),
            IpProtocol::Unknown(number) => write!(f, "proto{number}"),
        }
    }
}

/// Whether `Repr::parse` verifies checksums.
///
/// Packets punted from a local port often carry a partial checksum (the sender offloaded it to a
/// NIC that never ran), so handlers of such packet-ins parse with [`ChecksumCheck::Ignore`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ChecksumCheck {
    /// Reject a packet whose checksum is wrong.
    #[default]
    Verify,
    /// Accept any checksum.
    Ignore,
}

/// The addresses of the IP header a TCP, UDP or ICMPv6 checksum covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PseudoHeader {
    /// IPv4 source and destination.
    V4 {
        /// Source address.
        src: Ipv4Addr,
        /// Destination address.
        dst: Ipv4Addr,
    },
    /// IPv6 source and destination.
    V6 {
        /// Source address.
        src: Ipv6Addr,
        /// Destination address.
        dst: Ipv6Addr,
    },
}

impl PseudoHeader {
    /// Return the unfolded sum of the pseudo-header for `protocol` and an upper-layer `length`.
    pub fn sum(&self, protocol: IpProtocol, length: u32) -> u64 {
        let protocol = u64::from(u8::from(protocol));
        match self {
            PseudoHeader::V4 { src, dst } => {
                // src, dst, zero byte + protocol, 16-bit length.
                sum(&src.octets()) + sum(&dst.octets()) + protocol + u64::from(length & 0xffff)
            }
            PseudoHeader::V6 { src, dst } => {
                // src, dst, 32-bit length, three zero bytes + next header.
                sum(&src.octets())
                    + sum(&dst.octets())
                    + u64::from(length >> 16)
                    + u64::from(length & 0xffff)
                    + protocol
            }
        }
    }
}

/// Return the unfolded one's-complement sum of `data` as big-endian 16-bit words.
pub fn sum(data: &[u8]) -> u64 {
    let mut words = data.chunks_exact(2);
    let mut total: u64 = words
        .by_ref()
        .map(|word| u64::from(u16::from_be_bytes([word[0], word[1]])))
        .sum();
    if let [last] = words.remainder() {
        total += u64::from(*last) << 8;
    }
    total
}

/// Fold carries of an unfolded sum into 16 bits (no complement).
pub fn fold(mut total: u64) -> u16 {
    while total > 0xffff {
        total = (total & 0xffff) + (total >> 16);
    }
    // The loop leaves at most 16 significant bits.
    (total & 0xffff) as u16
}

/// Return the checksum field value for data (with its checksum field zeroed) summing to `total`.
pub fn checksum(total: u64) -> u16 {
    !fold(total)
}

/// Return the checksum a buffer needs, given its sum with the checksum field zeroed, for a check
/// against `found`. The result equals `found` exactly when the buffer sums to `0xffff`.
pub(crate) fn expected_checksum(total_with_field: u64, found: u16) -> u16 {
    // Remove the field from the total, then complement: this is the value the field should hold.
    let without_field = u64::from(fold(total_with_field)) + u64::from(!found);
    checksum(without_field)
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn sum_pads_odd_byte() {
        assert_eq!(sum(&[0x12, 0x34, 0x56]), 0x1234 + 0x5600);
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 section 3 example: words 0001 f203 f4f5 f6f7 sum to 0xddf2 after folding.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(&data)), 0xddf2);
        assert_eq!(checksum(sum(&data)), !0xddf2);
    }

    #[test]
    fn expected_checksum_matches_found_when_correct() {
        let mut data = [0x45, 0x00, 0x00, 0x1c, 0x00, 0x00];
        let field = checksum(sum(&data));
        data[4..6].copy_from_slice(&field.to_be_bytes());
        assert_eq!(fold(sum(&data)), 0xffff);
        assert_eq!(expected_checksum(sum(&data), field), field);
        let mut corrupted = data;
        corrupted[4..6].copy_from_slice(&0x1234u16.to_be_bytes());
        assert_eq!(expected_checksum(sum(&corrupted), 0x1234), field);
    }

    #[test]
    fn protocol_round_trips_unknown() {
        assert_eq!(IpProtocol::from(6), IpProtocol::Tcp);
        assert_eq!(IpProtocol::from(253), IpProtocol::Unknown(253));
        assert_eq!(u8::from(IpProtocol::Unknown(253)), 253);
        assert_eq!(IpProtocol::Unknown(253).to_string(), "proto253");
    }
}
