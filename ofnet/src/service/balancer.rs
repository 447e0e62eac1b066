//! The provider choice: the provider with the fewest clients; among equals the lowest
//! address, so the choice is reproducible (tests, restarts replaying the same order).

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

/// The provider of `load` (clients per provider) with the fewest clients. A provider whose
/// address is the VIP itself is never chosen: its traffic would be the VIP's again.
pub fn fewest_clients(load: &BTreeMap<Ipv4Addr, usize>, vip: Option<Ipv4Addr>) -> Option<Ipv4Addr> {
    load.iter()
        .filter(|(p, _)| Some(**p) != vip)
        .min_by_key(|(p, n)| (**n, **p))
        .map(|(p, _)| *p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(n: u8) -> Ipv4Addr {
        Ipv4Addr::new(10, 0, 0, n)
    }

    #[test]
    fn the_least_loaded_provider_wins_ties_by_address() {
        let load: BTreeMap<_, _> = [(ip(3), 2), (ip(1), 1), (ip(2), 1)].into();
        assert_eq!(fewest_clients(&load, None), Some(ip(1)));
        let load: BTreeMap<_, _> = [(ip(3), 0), (ip(1), 1)].into();
        assert_eq!(fewest_clients(&load, None), Some(ip(3)));
    }

    #[test]
    fn no_provider_or_only_the_vip_gives_none() {
        assert_eq!(fewest_clients(&BTreeMap::new(), None), None);
        let load: BTreeMap<_, _> = [(ip(9), 0)].into();
        assert_eq!(fewest_clients(&load, Some(ip(9))), None);
    }

    #[test]
    fn assigning_in_turn_spreads_evenly() {
        let mut load: BTreeMap<_, _> = [(ip(1), 0), (ip(2), 0), (ip(3), 0)].into();
        for _ in 0..9 {
            let p = fewest_clients(&load, None).unwrap();
            *load.get_mut(&p).unwrap() += 1;
        }
        assert!(load.values().all(|n| *n == 3), "{load:?}");
    }
}
