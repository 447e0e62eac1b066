//! IPv4 address management on Contiv's allocation bitmaps (reference §1.2).
//!
//! Bit `i` of a network's map stands for host `network + i`; a set bit is *used*. A fresh map has the
//! network address, the broadcast address, the gateway and everything outside a range subnet
//! (`10.1.1.10-10.1.1.100/24`) set. EPG pools carve a range out of the network map and get their own
//! map with everything outside the pool set.

use std::net::Ipv4Addr;

use super::bitset::Bitset;
use crate::error::{Error, Result};

/// Shortest prefix accepted. Contiv allowed /8, but a /8 map is 2 MiB of base64 in one etcd value,
/// over etcd's default request limit; /12 (128 KiB) is the largest that fits comfortably.
pub const MIN_PREFIX_LEN: u8 = 12;
/// /32 leaves no host; /31 is allowed (point-to-point).
pub const MAX_PREFIX_LEN: u8 = 31;

/// A subnet as configured on a network: prefix plus an optional allocation range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubnetSpec {
    pub network: Ipv4Addr,
    pub len: u8,
    /// Inclusive `first-last` allocation range, when the subnet was given as `a-b/len`.
    pub range: Option<(Ipv4Addr, Ipv4Addr)>,
}

impl SubnetSpec {
    /// Parse `a.b.c.d/len` or `a.b.c.d-e.f.g.h/len`; `field` names the field in errors.
    pub fn parse(field: &str, text: &str) -> Result<Self> {
        let (addr_part, len_part) = text.split_once('/').ok_or_else(|| {
            Error::invalid(field, format!("{text:?} must be IP/len or IP-IP/len"))
        })?;
        let len: u8 = len_part.parse().map_err(|_| {
            Error::invalid(field, format!("prefix length {len_part:?} is not a number"))
        })?;
        if !(MIN_PREFIX_LEN..=MAX_PREFIX_LEN).contains(&len) {
            return Err(Error::invalid(
                field,
                format!(
                    "subnet length {len} not supported (allowed {MIN_PREFIX_LEN}..{MAX_PREFIX_LEN})"
                ),
            ));
        }
        let parse_ip = |s: &str| {
            s.parse::<Ipv4Addr>()
                .map_err(|_| Error::invalid(field, format!("{s:?} is not an IPv4 address")))
        };
        let (first, range) = match addr_part.split_once('-') {
            Some((a, b)) => {
                let a = parse_ip(a)?;
                // `a.b.c.20-44/24` (Contiv refuses it too): say how to write it.
                let b = match b.parse::<u8>() {
                    Ok(last) => {
                        let [o1, o2, o3, _] = a.octets();
                        return Err(Error::invalid(
                            field,
                            format!(
                                "range end {b:?} must be a full address, \
                                 e.g. {a}-{}/{len_part}",
                                Ipv4Addr::new(o1, o2, o3, last)
                            ),
                        ));
                    }
                    Err(_) => parse_ip(b)?,
                };
                (a, Some((a, b)))
            }
            None => (parse_ip(addr_part)?, None),
        };
        let network = Ipv4Addr::from(u32::from(first) & mask(len));
        let spec = SubnetSpec {
            network,
            len,
            range,
        };
        if let Some((a, b)) = range {
            if u32::from(a) > u32::from(b) {
                return Err(Error::invalid(
                    field,
                    format!("range start {a} is after range end {b}"),
                ));
            }
            if !spec.contains(b) {
                return Err(Error::invalid(
                    field,
                    format!("range end {b} is outside {network}/{len}"),
                ));
            }
        }
        Ok(spec)
    }

    pub fn size(&self) -> u64 {
        1u64 << (32 - self.len)
    }

    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & mask(self.len) == u32::from(self.network)
    }

    /// Host index of `ip` in this subnet.
    pub fn index_of(&self, ip: Ipv4Addr) -> Option<u64> {
        self.contains(ip)
            .then(|| u64::from(u32::from(ip) - u32::from(self.network)))
    }

    /// Address of host index `i`.
    pub fn ip_at(&self, i: u64) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.network).wrapping_add(i as u32))
    }

    /// Whether two subnets share any address.
    pub fn overlaps(&self, other: &SubnetSpec) -> bool {
        let len = self.len.min(other.len);
        u32::from(self.network) & mask(len) == u32::from(other.network) & mask(len)
    }

    /// `first-last` of the allocatable range (the whole subnet minus network/broadcast when no range).
    pub fn range_text(&self) -> String {
        match self.range {
            Some((a, b)) => format!("{a}-{b}"),
            None => format!(
                "{}-{}",
                self.ip_at(1),
                self.ip_at(self.size().saturating_sub(2))
            ),
        }
    }

    /// A fresh allocation map: network, broadcast, gateway and out-of-range hosts are set.
    pub fn new_alloc_map(&self, gateway: Option<Ipv4Addr>) -> Bitset {
        let size = self.size();
        let mut map = Bitset::new(size);
        map.set(0);
        map.set(size - 1);
        if let Some((a, b)) = self.range {
            let (ai, bi) = (
                self.index_of(a).unwrap_or(0),
                self.index_of(b).unwrap_or(size - 1),
            );
            if ai > 0 {
                map.set_range(0, ai - 1);
            }
            if bi + 1 < size {
                map.set_range(bi + 1, size - 1);
            }
        }
        if let Some(gw) = gateway.and_then(|g| self.index_of(g)) {
            map.set(gw);
        }
        map
    }
}

fn mask(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len))
    }
}

/// Take `preferred` (must be free) or the first free host of `map`.
pub fn allocate(
    map: &mut Bitset,
    subnet: &SubnetSpec,
    preferred: Option<Ipv4Addr>,
) -> Result<Ipv4Addr> {
    let index = match preferred {
        Some(ip) => {
            let i = subnet.index_of(ip).ok_or_else(|| {
                Error::invalid(
                    "ipAddress",
                    format!("{ip} is outside {}/{}", subnet.network, subnet.len),
                )
            })?;
            if map.test(i) {
                return Err(Error::conflict(format!(
                    "requested address {ip} is already allocated or reserved"
                )));
            }
            i
        }
        None => map.next_clear(0).ok_or_else(|| {
            Error::conflict(format!(
                "auto allocation failed - address exhaustion in subnet {}/{}",
                subnet.network, subnet.len
            ))
        })?,
    };
    map.set(index);
    Ok(subnet.ip_at(index))
}

/// Free `ip` in `map`. Network and broadcast addresses are never freed.
pub fn release(map: &mut Bitset, subnet: &SubnetSpec, ip: Ipv4Addr) -> Result<()> {
    let i = subnet.index_of(ip).ok_or_else(|| {
        Error::invalid(
            "ipAddress",
            format!("{ip} is outside {}/{}", subnet.network, subnet.len),
        )
    })?;
    if i != 0 && i != subnet.size() - 1 {
        map.clear(i);
    }
    Ok(())
}

/// Contiv's address list text: `"10.1.1.1, 10.1.1.5-10.1.1.9"`.
pub fn format_ip_list(ips: impl IntoIterator<Item = Ipv4Addr>) -> String {
    let mut nums: Vec<u32> = ips.into_iter().map(u32::from).collect();
    nums.sort_unstable();
    nums.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < nums.len() {
        let start = nums[i];
        let mut end = start;
        while i + 1 < nums.len() && nums[i + 1] == end + 1 {
            i += 1;
            end = nums[i];
        }
        parts.push(if start == end {
            Ipv4Addr::from(start).to_string()
        } else {
            format!("{}-{}", Ipv4Addr::from(start), Ipv4Addr::from(end))
        });
        i += 1;
    }
    parts.join(", ")
}

/// Parse an EPG ip pool `a.b.c.d-e.f.g.h` (or a single address) into an inclusive range.
pub fn parse_pool(field: &str, text: &str) -> Result<(Ipv4Addr, Ipv4Addr)> {
    let parse_ip = |s: &str| {
        s.parse::<Ipv4Addr>()
            .map_err(|_| Error::invalid(field, format!("{s:?} is not an IPv4 address")))
    };
    let (a, b) = match text.split_once('-') {
        Some((a, b)) => (parse_ip(a)?, parse_ip(b)?),
        None => {
            let a = parse_ip(text)?;
            (a, a)
        }
    };
    if u32::from(a) > u32::from(b) {
        return Err(Error::invalid(
            field,
            format!("pool start {a} is after pool end {b}"),
        ));
    }
    Ok((a, b))
}

/// The MAC netmaster gives an endpoint: `02:02:` followed by the IPv4 bytes.
pub fn mac_from_ipv4(ip: Ipv4Addr) -> String {
    let o = ip.octets();
    format!("02:02:{:02x}:{:02x}:{:02x}:{:02x}", o[0], o[1], o[2], o[3])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    #[test]
    fn fresh_map_reserves_network_broadcast_gateway() {
        let s = SubnetSpec::parse("subnet", "10.1.1.0/24").unwrap();
        let map = s.new_alloc_map(Some(ip("10.1.1.254")));
        assert_eq!(
            map.encode(),
            "AAAAAAAAAQAAAAAAAAAAAQAAAAAAAAAAAAAAAAAAAADAAAAAAAAAAA=="
        );
    }

    #[test]
    fn range_subnet_reserves_outside_hosts() {
        let s = SubnetSpec::parse("subnet", "10.1.1.10-10.1.1.12/24").unwrap();
        let mut map = s.new_alloc_map(None);
        assert_eq!(allocate(&mut map, &s, None).unwrap(), ip("10.1.1.10"));
        assert_eq!(allocate(&mut map, &s, None).unwrap(), ip("10.1.1.11"));
        assert_eq!(allocate(&mut map, &s, None).unwrap(), ip("10.1.1.12"));
        let err = allocate(&mut map, &s, None).unwrap_err();
        assert!(
            err.to_string()
                .contains("address exhaustion in subnet 10.1.1.0/24"),
            "{err}"
        );
        assert_eq!(s.range_text(), "10.1.1.10-10.1.1.12");
    }

    #[test]
    fn preferred_and_release() {
        let s = SubnetSpec::parse("subnet", "20.1.1.0/24").unwrap();
        let mut map = s.new_alloc_map(None);
        assert_eq!(
            allocate(&mut map, &s, Some(ip("20.1.1.3"))).unwrap(),
            ip("20.1.1.3")
        );
        assert!(allocate(&mut map, &s, Some(ip("20.1.1.3"))).is_err());
        assert!(allocate(&mut map, &s, Some(ip("20.1.2.3"))).is_err());
        release(&mut map, &s, ip("20.1.1.3")).unwrap();
        assert!(!map.test(3));
        assert_eq!(mac_from_ipv4(ip("20.1.1.3")), "02:02:14:01:01:03");
    }

    #[test]
    fn parse_rejects_bad_subnets() {
        assert!(SubnetSpec::parse("subnet", "10.1.1.0/32").is_err());
        assert!(SubnetSpec::parse("subnet", "10.1.1.0").is_err());
        assert!(SubnetSpec::parse("subnet", "10.1.1.300/24").is_err());
        assert!(SubnetSpec::parse("subnet", "10.1.1.20-10.1.1.10/24").is_err());
        assert!(SubnetSpec::parse("subnet", "10.1.1.20-10.1.2.10/24").is_err());
        let a = SubnetSpec::parse("subnet", "10.1.0.0/16").unwrap();
        let b = SubnetSpec::parse("subnet", "10.1.5.0/24").unwrap();
        let c = SubnetSpec::parse("subnet", "10.2.0.0/24").unwrap();
        assert!(a.overlaps(&b) && b.overlaps(&a) && !a.overlaps(&c));
    }

    #[test]
    fn formats_lists_like_contiv() {
        let ips = ["10.1.1.2", "10.1.1.3", "10.1.1.4", "10.1.1.6"].map(ip);
        assert_eq!(format_ip_list(ips), "10.1.1.2-10.1.1.4, 10.1.1.6");
    }
}
