//! This host's address reserve, as netmaster last answered it (`master::endpoint::reserve`):
//! per network, the addresses netmaster holds for this host's next pods. An ADD takes one,
//! sends the pod's flows at once and names the address in its createEndpoint, which claims it
//! in netmaster's transaction; every createEndpoint answer carries the reserve afresh.
//!
//! The list here is a cache, never the authority: an address is handed to one ADD at a time
//! (taken ones are kept apart until their ADD settles), one whose ADD failed is dropped until
//! an answer lists it again, and netmaster refuses a claim of an address it no longer holds
//! for this host (the ADD then asks again without one). A restarted netplugin starts empty and
//! learns its reserve from its first createEndpoint per network.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, Ipv6Addr};

use master::endpoint::reserve::ReservedAddress;

/// One reserved address (with its IPv6 partner on a dual-stack network).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Reserved {
    pub ipv4: Ipv4Addr,
    pub ipv6: Option<Ipv6Addr>,
}

#[derive(Debug, Default)]
struct NetworkReserve {
    /// Free to take, lowest first.
    ready: BTreeSet<Reserved>,
    /// Taken by an ADD not over yet.
    taken: BTreeSet<Ipv4Addr>,
    /// The reserve generation of the listing `ready` came from: answers can arrive out of
    /// order, and an older listing may name an address claimed or freed since.
    generation: u64,
}

/// The reserve of every network this host has asked for one, by network id.
#[derive(Debug, Default)]
pub struct AddressReserve {
    networks: BTreeMap<String, NetworkReserve>,
}

impl AddressReserve {
    /// Take the lowest ready address of `net_id`, if any, for one ADD (until [`Self::finish`]).
    pub fn take(&mut self, net_id: &str) -> Option<Reserved> {
        let net = self.networks.get_mut(net_id)?;
        let r = net.ready.pop_first()?;
        net.taken.insert(r.ipv4);
        Some(r)
    }

    /// The reserve netmaster listed at `generation` (a createEndpoint or deleteEndpoint
    /// answer): it replaces the ready addresses unless a newer listing did already, but for
    /// addresses ADDs have taken and those `in_use` says an endpoint has (this host's, or one
    /// known on another host), which an older listing can still name.
    pub fn listed(
        &mut self,
        net_id: &str,
        generation: u64,
        held: &[ReservedAddress],
        in_use: impl Fn(Ipv4Addr) -> bool,
    ) {
        let net = self.networks.entry(net_id.to_string()).or_default();
        if generation < net.generation {
            return;
        }
        net.generation = generation;
        net.ready = held
            .iter()
            .filter_map(parse)
            .filter(|r| !net.taken.contains(&r.ipv4) && !in_use(r.ipv4))
            .collect();
    }

    /// The ADD that took `ip` is over, attached or undone. An address whose ADD failed is
    /// not handed out again until a listing names it (netmaster may have bound it).
    pub fn finish(&mut self, net_id: &str, ip: Ipv4Addr) {
        if let Some(net) = self.networks.get_mut(net_id) {
            net.taken.remove(&ip);
        }
    }

    /// How many addresses are ready on `net_id`.
    pub fn ready(&self, net_id: &str) -> usize {
        self.networks.get(net_id).map_or(0, |n| n.ready.len())
    }
}

fn parse(r: &ReservedAddress) -> Option<Reserved> {
    Some(Reserved {
        ipv4: r.IPv4Address.split('/').next()?.parse().ok()?,
        ipv6: r.IPv6Address.split('/').next().and_then(|a| a.parse().ok()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(ips: &[&str]) -> Vec<ReservedAddress> {
        ips.iter()
            .map(|ip| ReservedAddress {
                IPv4Address: ip.to_string(),
                IPv6Address: String::new(),
            })
            .collect()
    }

    /// Two ADDs at once never get the same address; a listing does not hand back an address
    /// an ADD has taken or an endpoint has; an older listing arriving late changes nothing; a
    /// failed ADD's address waits for the next listing.
    #[test]
    fn an_address_goes_to_one_add_at_a_time() {
        let none = |_| false;
        let mut r = AddressReserve::default();
        assert_eq!(r.take("n1"), None);
        r.listed("n1", 3, &held(&["10.1.1.3", "10.1.1.2"]), none);
        let a = r.take("n1").unwrap();
        let b = r.take("n1").unwrap();
        assert_eq!(
            (a.ipv4.to_string(), b.ipv4.to_string()),
            ("10.1.1.2".into(), "10.1.1.3".into())
        );
        assert_eq!(r.take("n1"), None);
        // a's answer lists b's address (b has not claimed it yet) and two new ones.
        r.listed("n1", 5, &held(&["10.1.1.3", "10.1.1.4", "10.1.1.5"]), none);
        assert_eq!(r.ready("n1"), 2);
        // An older listing (with a's address, now a's endpoint's) arrives late: ignored.
        r.listed("n1", 4, &held(&["10.1.1.2", "10.1.1.6"]), none);
        assert_eq!(r.ready("n1"), 2);
        r.finish("n1", a.ipv4);
        // b fails: its address is not handed out again until a listing names it.
        r.finish("n1", b.ipv4);
        let next: Vec<String> = std::iter::from_fn(|| r.take("n1"))
            .map(|x| x.ipv4.to_string())
            .collect();
        assert_eq!(next, ["10.1.1.4", "10.1.1.5"]);
        // A listing naming an address an endpoint has (a's) leaves it out.
        let a_ip = a.ipv4;
        r.listed("n1", 6, &held(&["10.1.1.2", "10.1.1.3"]), |ip| ip == a_ip);
        assert_eq!(
            r.take("n1").map(|x| x.ipv4.to_string()),
            Some("10.1.1.3".into())
        );
        assert_eq!(r.take("n1"), None);
    }
}
