//! IPv6 address allocation for dual-stack networks.
//!
//! Contiv kept a map of used host ids and a "last host" cursor; allocation takes the next id after the
//! cursor that is not in use, wrapping within the subnet. We keep the cursor (`ipv6LastHost`) in the
//! network record and the map in chunks of their own keys (`crate::state::addr_map6`).

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

    /// Host ids in the subnet (2^(128 - len)).
    pub fn host_count(&self) -> u128 {
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
