//! Ethernet addresses: parsed from and printed as `aa:bb:cc:dd:ee:ff`.

use std::fmt;
use std::str::FromStr;

use super::error::NetlinkError;

/// A 48-bit Ethernet address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// From a netlink `IFLA_ADDRESS` attribute; `None` unless it is 6 bytes.
    pub fn from_bytes(bytes: &[u8]) -> Option<MacAddr> {
        <[u8; 6]>::try_from(bytes).ok().map(MacAddr)
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

impl FromStr for MacAddr {
    type Err = NetlinkError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = || NetlinkError::Invalid {
            what: "MAC address",
            problem: format!("{s:?} is not six hex bytes separated by ':'"),
        };
        let mut out = [0u8; 6];
        let mut parts = s.split(':');
        for byte in &mut out {
            let part = parts.next().ok_or_else(invalid)?;
            if part.len() != 2 {
                return Err(invalid());
            }
            *byte = u8::from_str_radix(part, 16).map_err(|_| invalid())?;
        }
        if parts.next().is_some() {
            return Err(invalid());
        }
        Ok(MacAddr(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        let mac: MacAddr = "02:02:AC:13:ff:fe".parse().unwrap();
        assert_eq!(mac.0, [2, 2, 0xac, 0x13, 0xff, 0xfe]);
        assert_eq!(mac.to_string(), "02:02:ac:13:ff:fe");
        for bad in [
            "",
            "02:02:ac:13:ff",
            "02:02:ac:13:ff:fe:00",
            "0g:02:ac:13:ff:fe",
            "2:02:ac:13:ff:fe",
        ] {
            assert!(bad.parse::<MacAddr>().is_err(), "{bad}");
        }
        assert_eq!(MacAddr::from_bytes(&[1, 2, 3]), None);
    }
}
