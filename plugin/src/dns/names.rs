//! The names the inline DNS answers, per tenant (reference §4.4): service names (netctl
//! services: their VIP; Kubernetes Services: their cluster IP), endpoint group names (every
//! member's addresses) and endpoint names (container or pod name: its addresses). A name is
//! looked up in that order; the first kind that has it answers.
//!
//! Names are compared case-insensitively without the trailing dot. A query for
//! `<name>.<tenant>` is the same as `<name>` asked from inside the tenant, so a resolver's
//! search domain of the tenant works.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;

/// The longest answer (Contiv: 10 records).
pub const MAX_ANSWERS: usize = 10;

/// One endpoint as the DNS knows it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EndpointName {
    pub tenant: String,
    /// Container or pod name; empty when not known (yet).
    pub name: String,
    /// Endpoint group; empty for none.
    pub group: String,
    pub addresses: Vec<IpAddr>,
}

/// A service as the DNS knows it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServiceName {
    pub tenant: String,
    pub name: String,
    pub addresses: Vec<IpAddr>,
}

type Key = (String, String);

fn key(tenant: &str, name: &str) -> Key {
    (tenant.to_string(), name.to_ascii_lowercase())
}

/// See the module documentation.
#[derive(Debug, Default)]
pub struct Names {
    endpoints: BTreeMap<String, EndpointName>,
    services: BTreeMap<String, ServiceName>,
    /// (tenant, name) → endpoint ids, for endpoint names and group names.
    by_name: HashMap<Key, BTreeSet<String>>,
    by_group: HashMap<Key, BTreeSet<String>>,
    by_service: HashMap<Key, BTreeSet<String>>,
}

fn unindex(index: &mut HashMap<Key, BTreeSet<String>>, k: Key, id: &str) {
    if let Some(set) = index.get_mut(&k) {
        set.remove(id);
        if set.is_empty() {
            index.remove(&k);
        }
    }
}

impl Names {
    pub fn set_endpoint(&mut self, id: &str, ep: EndpointName) {
        self.remove_endpoint(id);
        if !ep.name.is_empty() {
            self.by_name
                .entry(key(&ep.tenant, &ep.name))
                .or_default()
                .insert(id.to_string());
        }
        if !ep.group.is_empty() {
            self.by_group
                .entry(key(&ep.tenant, &ep.group))
                .or_default()
                .insert(id.to_string());
        }
        self.endpoints.insert(id.to_string(), ep);
    }

    pub fn remove_endpoint(&mut self, id: &str) {
        if let Some(old) = self.endpoints.remove(id) {
            unindex(&mut self.by_name, key(&old.tenant, &old.name), id);
            unindex(&mut self.by_group, key(&old.tenant, &old.group), id);
        }
    }

    pub fn set_service(&mut self, id: &str, svc: ServiceName) {
        self.remove_service(id);
        self.by_service
            .entry(key(&svc.tenant, &svc.name))
            .or_default()
            .insert(id.to_string());
        self.services.insert(id.to_string(), svc);
    }

    pub fn remove_service(&mut self, id: &str) {
        if let Some(old) = self.services.remove(id) {
            unindex(&mut self.by_service, key(&old.tenant, &old.name), id);
        }
    }

    /// Endpoints known, all tenants.
    pub fn endpoint_count(&self) -> usize {
        self.endpoints.len()
    }

    /// Services known, all tenants.
    pub fn service_count(&self) -> usize {
        self.services.len()
    }

    /// The addresses of `name` in `tenant` (both families, services first, then groups, then
    /// endpoints), or `None` if the tenant has no such name.
    pub fn lookup(&self, tenant: &str, name: &str) -> Option<Vec<IpAddr>> {
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        let suffix = format!(".{}", tenant.to_ascii_lowercase());
        let bare = name.strip_suffix(&suffix).unwrap_or(&name);
        let k = key(tenant, bare);
        let collect = |ids: &BTreeSet<String>, from_services: bool| -> Vec<IpAddr> {
            let mut out: Vec<IpAddr> = Vec::new();
            for id in ids {
                let addrs = if from_services {
                    self.services.get(id).map(|s| &s.addresses)
                } else {
                    self.endpoints.get(id).map(|e| &e.addresses)
                };
                for a in addrs.into_iter().flatten() {
                    if !out.contains(a) {
                        out.push(*a);
                    }
                }
            }
            out
        };
        if let Some(ids) = self.by_service.get(&k) {
            return Some(collect(ids, true));
        }
        if let Some(ids) = self.by_group.get(&k) {
            return Some(collect(ids, false));
        }
        self.by_name.get(&k).map(|ids| collect(ids, false))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(tenant: &str, name: &str, group: &str, addrs: &[&str]) -> EndpointName {
        EndpointName {
            tenant: tenant.into(),
            name: name.into(),
            group: group.into(),
            addresses: addrs.iter().map(|a| a.parse().unwrap()).collect(),
        }
    }

    #[test]
    fn names_resolve_per_tenant_services_first_then_groups_then_endpoints() {
        let mut n = Names::default();
        n.set_endpoint("e1", ep("t1", "web-1", "web", &["10.0.0.2", "fd00::2"]));
        n.set_endpoint("e2", ep("t1", "web-2", "web", &["10.0.0.3"]));
        n.set_endpoint("e3", ep("t2", "web-1", "web", &["10.9.0.2"]));
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(
            n.lookup("t1", "WEB-1."),
            Some(vec![ip("10.0.0.2"), ip("fd00::2")])
        );
        assert_eq!(n.lookup("t2", "web-1"), Some(vec![ip("10.9.0.2")]));
        assert_eq!(
            n.lookup("t1", "web"),
            Some(vec![ip("10.0.0.2"), ip("fd00::2"), ip("10.0.0.3")])
        );
        assert_eq!(n.lookup("t1", "web.t1"), n.lookup("t1", "web"));
        assert_eq!(n.lookup("t1", "nothing"), None);
        n.set_service(
            "s",
            ServiceName {
                tenant: "t1".into(),
                name: "web".into(),
                addresses: vec![ip("10.0.0.100")],
            },
        );
        assert_eq!(n.lookup("t1", "web"), Some(vec![ip("10.0.0.100")]));
        n.remove_service("s");
        n.remove_endpoint("e1");
        assert_eq!(n.lookup("t1", "web"), Some(vec![ip("10.0.0.3")]));
        assert_eq!(n.lookup("t1", "web-1"), None);
        // A renamed endpoint leaves its old name.
        n.set_endpoint("e2", ep("t1", "db-1", "db", &["10.0.0.3"]));
        assert_eq!(n.lookup("t1", "web"), None);
        assert_eq!(n.lookup("t1", "db-1"), Some(vec![ip("10.0.0.3")]));
        assert_eq!((n.endpoint_count(), n.service_count()), (2, 0));
    }
}
