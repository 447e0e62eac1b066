//! IPv6 address allocation for dual-stack networks.
//!
//! Contiv kept a map of used host ids and a "last host" cursor; allocation takes the next id after the
//! cursor that is not in use, wrapping within the subnet. We keep the same record fields
//! (`ipv6AllocMap`, `ipv6LastHost`) and key the map by the host id in decimal.

use std::collections::BTreeMap;
use std::net::Ipv6Addr;

use crate::error::{Error, Result};

/// A parsed `addr/len` IPv6 subnet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Subnet {
    pub network: Ipv6Addr,
    pub len: u8,
}

impl Ipv6Subnet {
    pub fn parse(field: &str, text: &str) -> Result<Self> {
        let (a, l) = text
            .split_once('/')
            .ok_or_else(|| Error::invalid(field, format!("{text:?} must be IPv6/len")))?;
        let addr: Ipv6Addr = a
            .parse()
            .map_err(|_| Error::invalid(field, format!("{a:?} is not an IPv6 address")))?;
        let len: u8 = l
            .parse()
            .map_err(|_| Error::invalid(field, format!("prefix length {l:?} is not a number")))?;
        if !(1..=127).contains(&len) {
            return Err(Error::invalid(
                field,
                format!("prefix length {len} not supported (1..127)"),
            ));
        }
        let network = Ipv6Addr::from(u128::from(addr) & mask(len));
        Ok(Ipv6Subnet { network, len })
    }

    pub fn contains(&self, ip: Ipv6Addr) -> bool {
        u128::from(ip) & mask(self.len) == u128::from(self.network)
    }

    pub fn overlaps(&self, other: &Ipv6Subnet) -> bool {
        let len = self.len.min(other.len);
        u128::from(self.network) & mask(len) == u128::from(other.network) & mask(len)
    }

    fn host_count(&self) -> u128 {
        if self.len == 0 {
            u128::MAX
        } else {
            1u128 << (128 - u32::from(self.len))
        }
    }
}

fn mask(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len))
    }
}

/// Take `preferred` or the next free host id after `last_host`. Host 0 (the subnet-router anycast
/// address) is never handed out.
pub fn allocate(
    subnet: &Ipv6Subnet,
    used: &mut BTreeMap<String, bool>,
    last_host: &mut String,
    preferred: Option<Ipv6Addr>,
) -> Result<Ipv6Addr> {
    let hosts = subnet.host_count();
    let host = match preferred {
        Some(ip) => {
            if !subnet.contains(ip) {
                return Err(Error::invalid(
                    "ipv6Address",
                    format!("{ip} is outside {}/{}", subnet.network, subnet.len),
                ));
            }
            let h = u128::from(ip) - u128::from(subnet.network);
            if used.contains_key(&h.to_string()) {
                return Err(Error::conflict(format!(
                    "requested IPv6 address {ip} is already allocated"
                )));
            }
            h
        }
        None => {
            let start: u128 = last_host.parse().unwrap_or(0);
            // Bounded probe: a subnet this full is exhausted for practical purposes.
            let mut candidate = start;
            let mut found = None;
            for _ in 0..hosts.min(1 << 20) {
                candidate = if candidate + 1 >= hosts {
                    1
                } else {
                    candidate + 1
                };
                if !used.contains_key(&candidate.to_string()) {
                    found = Some(candidate);
                    break;
                }
            }
            found.ok_or_else(|| {
                Error::conflict(format!(
                    "IPv6 address exhaustion in subnet {}/{}",
                    subnet.network, subnet.len
                ))
            })?
        }
    };
    used.insert(host.to_string(), true);
    *last_host = host.to_string();
    Ok(Ipv6Addr::from(u128::from(subnet.network) + host))
}

/// Free an address.
pub fn release(subnet: &Ipv6Subnet, used: &mut BTreeMap<String, bool>, ip: Ipv6Addr) {
    if subnet.contains(ip) {
        used.remove(&(u128::from(ip) - u128::from(subnet.network)).to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_sequentially_and_skips_used() {
        let s = Ipv6Subnet::parse("ipv6Subnet", "2001:db8::/120").unwrap();
        let mut used = BTreeMap::new();
        let mut last = String::new();
        let a = allocate(&s, &mut used, &mut last, None).unwrap();
        assert_eq!(a, "2001:db8::1".parse::<Ipv6Addr>().unwrap());
        let p = allocate(
            &s,
            &mut used,
            &mut last,
            Some("2001:db8::2".parse().unwrap()),
        )
        .unwrap();
        assert_eq!(p.to_string(), "2001:db8::2");
        assert_eq!(
            allocate(&s, &mut used, &mut last, None)
                .unwrap()
                .to_string(),
            "2001:db8::3"
        );
        assert!(
            allocate(
                &s,
                &mut used,
                &mut last,
                Some("2001:db8::2".parse().unwrap())
            )
            .is_err()
        );
        release(&s, &mut used, "2001:db8::2".parse().unwrap());
        assert!(!used.contains_key("2"));
    }
}
