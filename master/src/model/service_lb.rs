//! `serviceLB` (key `tenantName:serviceName`): a VIP allocated from a network, selectors that pick
//! provider endpoints by label, and `svcPort:provPort:proto` ports. Writes `CfgServiceLBState` and one
//! `/contiv.io/state/serviceProvider/<service>:<tenant>/<IP>` key per provider for netplugin (Contiv
//! listed every provider in `CfgServiceLBState` and `SvcProvider`, so the record grew with them).
//!
//! Fixes over Contiv: every port entry is validated (Contiv checked only the first and crashed on a
//! short one), and the protocol is stored upper-case because the datapath only accepts `TCP`/`UDP`.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::link::Link;
use super::network::{load_state as load_net_state, save_state as save_net_state};
use super::{Network, Object, Tenant, load_required, validate};
use crate::endpoint::endpoint_oper;
use crate::error::{Error, Result};
use crate::state::addr_map::{self, AddrMap};
use crate::state::service::{PROVIDER_CATEGORY, parse_provider_key, provider_key, provider_prefix};
use crate::state::{CfgEndpointState, CfgServiceLbState, Provider, SvcProvider};
use crate::store::{Tx, keys};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct ServiceLbLinks {
    #[serde(rename = "Network", skip_serializing_if = "Link::is_empty")]
    pub network: Link,
    #[serde(rename = "Tenant", skip_serializing_if = "Link::is_empty")]
    pub tenant: Link,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct ServiceLb {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub key: String,
    #[serde(rename = "serviceName", skip_serializing_if = "String::is_empty")]
    pub service_name: String,
    #[serde(rename = "tenantName", skip_serializing_if = "String::is_empty")]
    pub tenant_name: String,
    #[serde(rename = "networkName", skip_serializing_if = "String::is_empty")]
    pub network_name: String,
    #[serde(rename = "ipAddress", skip_serializing_if = "String::is_empty")]
    pub ip_address: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub selectors: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<String>,
    /// `ClientIP`: a client's new connections go to the provider of its previous one until it
    /// made none for `sessionAffinityTimeout` seconds (Kubernetes' `sessionAffinity`); empty
    /// or `None`: every connection is balanced. Not in Contiv's model.
    #[serde(rename = "sessionAffinity", skip_serializing_if = "String::is_empty")]
    pub session_affinity: String,
    /// Seconds, 1–65535; 0: Kubernetes' default of 10800 (3 hours). Only with `ClientIP`.
    #[serde(rename = "sessionAffinityTimeout", skip_serializing_if = "is_zero")]
    pub affinity_timeout: u32,
    pub links: ServiceLbLinks,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Kubernetes' default session affinity timeout (3 hours).
pub const DEFAULT_AFFINITY_TIMEOUT: u32 = 10_800;

/// The most an affinity timeout can be: an OpenFlow idle timeout is 16 bits of seconds.
pub const MAX_AFFINITY_TIMEOUT: u32 = 65_535;

impl ServiceLb {
    /// The affinity timeout the datapath gets: `None` without `ClientIP` affinity.
    pub fn affinity_seconds(&self) -> Option<u32> {
        (self.session_affinity == "ClientIP").then_some(if self.affinity_timeout == 0 {
            DEFAULT_AFFINITY_TIMEOUT
        } else {
            self.affinity_timeout
        })
    }

    fn validate_affinity(&self) -> Result<()> {
        match self.session_affinity.as_str() {
            "" | "None" | "ClientIP" => {}
            other => {
                return Err(Error::invalid(
                    "sessionAffinity",
                    format!("{other:?} must be ClientIP or None"),
                ));
            }
        }
        if self.affinity_timeout > 0 && self.session_affinity != "ClientIP" {
            return Err(Error::invalid(
                "sessionAffinityTimeout",
                "a timeout needs sessionAffinity ClientIP",
            ));
        }
        if self.affinity_timeout > MAX_AFFINITY_TIMEOUT {
            return Err(Error::invalid(
                "sessionAffinityTimeout",
                format!(
                    "{} seconds is more than {MAX_AFFINITY_TIMEOUT} (an OpenFlow idle timeout)",
                    self.affinity_timeout
                ),
            ));
        }
        Ok(())
    }
}

/// Parse `k=v` selectors into a map.
pub fn parse_selectors(selectors: &[String]) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for s in selectors {
        match s.split('=').collect::<Vec<_>>().as_slice() {
            [k, v] if !k.is_empty() => {
                out.insert((*k).to_string(), (*v).to_string());
            }
            _ => {
                return Err(Error::invalid(
                    "selectors",
                    format!("{s:?} must be key=value with exactly one '='"),
                ));
            }
        }
    }
    Ok(out)
}

/// Validate `svcPort:provPort:proto` and return it with the protocol upper-cased.
pub fn normalize_port(entry: &str) -> Result<String> {
    let bad = || {
        Error::invalid(
            "ports",
            format!("{entry:?} must be svcPort:provPort:TCP|UDP"),
        )
    };
    let parts: Vec<&str> = entry.split(':').collect();
    let [svc, prov, proto] = parts.as_slice() else {
        return Err(bad());
    };
    for p in [svc, prov] {
        match p.parse::<u16>() {
            Ok(n) if n > 0 => {}
            _ => return Err(bad()),
        }
    }
    let proto = proto.to_ascii_uppercase();
    if proto != "TCP" && proto != "UDP" {
        return Err(bad());
    }
    Ok(format!("{svc}:{prov}:{proto}"))
}

/// Whether an endpoint's labels carry every selector.
pub fn selects(selectors: &BTreeMap<String, String>, labels: &BTreeMap<String, String>) -> bool {
    !selectors.is_empty() && selectors.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// Whether endpoint `ep` is in `tenant` (its network id is `<net>.<tenant>`).
fn in_tenant(ep: &CfgEndpointState, tenant: &str) -> bool {
    ep.net_id
        .strip_suffix(tenant)
        .is_some_and(|net| net.ends_with('.'))
}

/// Endpoints of a tenant.
async fn tenant_endpoints(tx: &mut Tx<'_>, tenant: &str) -> Result<Vec<CfgEndpointState>> {
    Ok(tx
        .list::<CfgEndpointState>(
            &keys::state_prefix(keys::category::EPS),
            CfgEndpointState::KIND,
        )
        .await?
        .into_iter()
        .filter(|e| in_tenant(e, tenant))
        .collect())
}

/// Recompute a service's providers from the endpoints' labels, write the provider keys that
/// changed (one per provider, [`provider_key`]) and the service record. `state.providers` holds
/// them afterwards (the stored record does not).
///
/// Provider keys are derived records (the service's selectors and the endpoints' labels determine
/// them): a service that starts with thousands of providers writes them around its guarded
/// transaction (puts before, deletes after), and each refresh lists the stored ones without a
/// guard and rewrites what differs, so a leftover of a failed attempt is corrected by the next.
pub async fn refresh_providers(tx: &mut Tx<'_>, state: &mut CfgServiceLbState) -> Result<()> {
    state.providers.clear();
    for ep in tenant_endpoints(tx, &state.tenantname).await? {
        if let Some(p) = provider_of(state, &ep) {
            state
                .providers
                .insert(format!("{}:{}", p.IPAddress, state.tenantname), p);
        }
    }
    let mut stored: BTreeMap<String, Vec<u8>> = tx
        .list_derived(&provider_prefix(&state.id))
        .await?
        .into_iter()
        .collect();
    for p in state.providers.values() {
        let key = provider_key(&state.id, &p.IPAddress);
        let same = stored
            .remove(&key)
            .and_then(|v| serde_json::from_slice::<Provider>(&v).ok())
            .is_some_and(|old| old == *p);
        if !same {
            tx.put_derived(&key, "service provider", p)?;
        }
    }
    for key in stored.into_keys() {
        tx.delete_derived(&key);
    }
    save_service_state(tx, state)
}

/// The provider of `service` that endpoint `ep` is, if its labels carry every selector and it
/// has an address.
fn provider_of(service: &CfgServiceLbState, ep: &CfgEndpointState) -> Option<Provider> {
    (selects(&service.selectors, &ep.labels) && !ep.ip_address.is_empty()).then(|| Provider {
        IPAddress: ep.ip_address.clone(),
        ContainerID: ep.container_id.clone(),
        Labels: ep.labels.clone(),
        Tenant: service.tenantname.clone(),
        Network: ep.net_id.clone(),
        Services: vec![service.servicename.clone()],
        Container: ep.container_id.clone(),
        EpIDKey: ep.id.clone(),
    })
}

/// Where the services are listed.
pub fn services_prefix() -> String {
    keys::state_prefix(keys::category::SERVICE_LB)
}

/// Keep the provider keys right for one endpoint of `tenant` that was created (`before` is
/// `None`), relabelled, or deleted (`after` is `None`): for each service of the tenant, the
/// endpoint's one provider key is written, rewritten or deleted. Its cost is the services
/// listing (which a pod's `createEndpoint` reads ahead with its other reads) and at most two
/// writes per service, whatever the number of endpoints: recomputing every service from all
/// of the tenant's endpoints ([`refresh_providers`], for a service's own changes) would read
/// every endpoint record on each pod's ADD. The service records are not rewritten: readers
/// join the provider keys in.
pub async fn follow_endpoint(
    tx: &mut Tx<'_>,
    tenant: &str,
    before: Option<&CfgEndpointState>,
    after: Option<&CfgEndpointState>,
) -> Result<()> {
    let services = tx
        .list::<CfgServiceLbState>(&services_prefix(), CfgServiceLbState::KIND)
        .await?;
    for service in services.iter().filter(|s| s.tenantname == tenant) {
        let was = before.and_then(|ep| provider_of(service, ep));
        let is = after.and_then(|ep| provider_of(service, ep));
        if let Some(was) = &was
            && is.as_ref().is_none_or(|is| is.IPAddress != was.IPAddress)
        {
            tx.delete_derived(&provider_key(&service.id, &was.IPAddress));
        }
        if let Some(is) = is
            && was.as_ref() != Some(&is)
        {
            tx.put_derived(
                &provider_key(&service.id, &is.IPAddress),
                "service provider",
                &is,
            )?;
        }
    }
    Ok(())
}

/// Make every provider key match the services' selectors and the endpoints' labels, in one
/// transaction: missing or different ones are written, those of no endpoint or of no service
/// deleted. Providers follow endpoint changes one key at a time ([`follow_endpoint`]); a
/// change cut short (derived writes made before a commit that then failed, a service deleted
/// while an endpoint was created) can leave a key behind, which this corrects. Run at leader
/// start and after a write left derived records behind. Returns how many keys it changed.
pub async fn repair_providers(db: &crate::store::txn::Db) -> Result<usize> {
    db.write(async |tx| {
        let services = tx
            .list::<CfgServiceLbState>(&services_prefix(), CfgServiceLbState::KIND)
            .await?;
        let endpoints = tx
            .list::<CfgEndpointState>(
                &keys::state_prefix(keys::category::EPS),
                CfgEndpointState::KIND,
            )
            .await?;
        let mut want: BTreeMap<String, Provider> = BTreeMap::new();
        for service in &services {
            for ep in endpoints
                .iter()
                .filter(|e| in_tenant(e, &service.tenantname))
            {
                if let Some(p) = provider_of(service, ep) {
                    want.insert(provider_key(&service.id, &p.IPAddress), p);
                }
            }
        }
        let mut changed = 0;
        for (key, value) in tx
            .list_derived(&keys::state_prefix(PROVIDER_CATEGORY))
            .await?
        {
            let same = want
                .remove(&key)
                .is_some_and(|p| serde_json::from_slice::<Provider>(&value).ok() == Some(p));
            if !same {
                tx.delete_derived(&key);
                changed += 1;
            }
        }
        for (key, p) in want {
            tx.put_derived(&key, "service provider", &p)?;
            changed += 1;
        }
        Ok::<_, Error>(changed)
    })
    .await
}

/// Write `CfgServiceLBState` (without its providers, which are their own keys).
pub fn save_service_state(tx: &mut Tx<'_>, state: &CfgServiceLbState) -> Result<()> {
    let record = CfgServiceLbState {
        providers: BTreeMap::new(),
        ..state.clone()
    };
    tx.put(
        &CfgServiceLbState::key_for(&state.id),
        CfgServiceLbState::KIND,
        &record,
    )?;
    Ok(())
}

/// Fill each service's providers from the provider keys (one listing of them all).
pub async fn load_providers(tx: &mut Tx<'_>, states: &mut [CfgServiceLbState]) -> Result<()> {
    let mut by_service: BTreeMap<String, Vec<Provider>> = BTreeMap::new();
    for (key, value) in tx.list_raw(&keys::state_prefix(PROVIDER_CATEGORY)).await? {
        let Some((service, _)) = parse_provider_key(&key) else {
            continue;
        };
        let p: Provider = crate::store::txn::decode(&key, "service provider", &value)?;
        by_service.entry(service.to_string()).or_default().push(p);
    }
    for s in states {
        // A record of the previous layout keeps its own list until the leader converts it.
        if let Some(list) = by_service.remove(&s.id) {
            s.providers = list
                .into_iter()
                .map(|p| (format!("{}:{}", p.IPAddress, p.Tenant), p))
                .collect();
        }
    }
    Ok(())
}

/// Upgrade: rewrite every service of the previous layout (providers listed in its record, a
/// `SvcProvider` beside it) as a record plus one key per provider. Returns how many.
pub async fn convert_all(db: &crate::store::txn::Db) -> Result<usize> {
    let old: Vec<String> = db
        .read(async |tx| {
            let listed = tx
                .list::<CfgServiceLbState>(&services_prefix(), CfgServiceLbState::KIND)
                .await?;
            let legacy_lists = tx
                .list_raw(&keys::state_prefix(keys::category::PROVIDER))
                .await?;
            let mut ids: Vec<String> = listed
                .into_iter()
                .filter(|s| !s.providers.is_empty())
                .map(|s| s.id)
                .collect();
            ids.extend(
                legacy_lists
                    .into_iter()
                    .filter_map(|(k, _)| k.rsplit('/').next().map(str::to_string)),
            );
            ids.sort();
            ids.dedup();
            Ok::<_, Error>(ids)
        })
        .await?;
    for id in &old {
        db.write(async |tx| {
            tx.delete(&SvcProvider::key_for(id));
            if let Some(mut state) = tx
                .get::<CfgServiceLbState>(&CfgServiceLbState::key_for(id), CfgServiceLbState::KIND)
                .await?
            {
                refresh_providers(tx, &mut state).await?;
            }
            Ok::<_, Error>(())
        })
        .await?;
    }
    Ok(old.len())
}

async fn allocate_vip(tx: &mut Tx<'_>, obj: &ServiceLb) -> Result<Ipv4Addr> {
    let mut net = load_net_state(tx, &obj.tenant_name, &obj.network_name).await?;
    let subnet = net.subnet()?;
    let preferred = validate::optional_ipv4("ipAddress", &obj.ip_address)?;
    let mut map = AddrMap::network(&mut net)?;
    let vip = map.allocate(tx, &subnet, preferred).await?;
    addr_map::save_network(tx, &mut map, &mut net).await?;
    save_net_state(tx, &net)?;
    Ok(vip)
}

async fn release_vip(tx: &mut Tx<'_>, tenant: &str, network: &str, vip: &str) -> Result<()> {
    let Ok(ip) = vip.parse::<Ipv4Addr>() else {
        return Ok(());
    };
    let mut net = load_net_state(tx, tenant, network).await?;
    let subnet = net.subnet()?;
    let mut map = AddrMap::network(&mut net)?;
    map.release(tx, &subnet, ip).await?;
    addr_map::save_network(tx, &mut map, &mut net).await?;
    save_net_state(tx, &net)
}

impl ServiceLb {
    fn state_id(&self) -> String {
        CfgServiceLbState::id_for(&self.tenant_name, &self.service_name)
    }
    fn network_key(&self) -> String {
        format!("{}:{}", self.tenant_name, self.network_name)
    }
}

async fn load_state(tx: &mut Tx<'_>, obj: &ServiceLb) -> Result<CfgServiceLbState> {
    tx.get::<CfgServiceLbState>(
        &CfgServiceLbState::key_for(&obj.state_id()),
        CfgServiceLbState::KIND,
    )
    .await?
    .ok_or_else(|| Error::not_found(format!("service {} has no state", obj.key)))
}

impl Object for ServiceLb {
    const TYPE: &'static str = "serviceLB";
    const PLURAL: &'static str = "serviceLBs";

    fn derived_key(&self) -> String {
        format!("{}:{}", self.tenant_name, self.service_name)
    }
    fn key(&self) -> &str {
        &self.key
    }
    fn set_key(&mut self, key: String) {
        self.key = key;
    }
    fn validate(&self) -> Result<()> {
        validate::name("serviceName", &self.service_name, 256)?;
        validate::name("tenantName", &self.tenant_name, 64)?;
        validate::name("networkName", &self.network_name, 64)?;
        validate::optional_ipv4("ipAddress", &self.ip_address)?;
        self.validate_affinity()?;
        if self.selectors.is_empty() {
            return Err(Error::invalid(
                "selectors",
                "at least one selector is required",
            ));
        }
        parse_selectors(&self.selectors)?;
        for p in &self.ports {
            normalize_port(p)?;
        }
        Ok(())
    }
    fn keep_links(&mut self, stored: &Self) {
        self.links = stored.links.clone();
    }

    async fn create(tx: &mut Tx<'_>, obj: &mut Self) -> Result<()> {
        load_required::<Tenant>(tx, &obj.tenant_name).await?;
        load_required::<Network>(tx, &obj.network_key()).await?;
        let vip = allocate_vip(tx, obj).await?;
        let mut state = CfgServiceLbState {
            id: obj.state_id(),
            servicename: obj.service_name.clone(),
            tenantname: obj.tenant_name.clone(),
            subnet: obj.network_name.clone(),
            ports: obj
                .ports
                .iter()
                .map(|p| normalize_port(p))
                .collect::<Result<_>>()?,
            selectors: parse_selectors(&obj.selectors)?,
            ipaddress: vip.to_string(),
            providers: BTreeMap::new(),
            sessionaffinitytimeout: obj.affinity_seconds().unwrap_or(0),
        };
        refresh_providers(tx, &mut state).await?;
        obj.links.network = Link::to(Network::TYPE, &obj.network_key());
        obj.links.tenant = Link::to(Tenant::TYPE, &obj.tenant_name);
        load_required::<Network>(tx, &obj.network_key())
            .await
            .map(|_| ())?;
        load_required::<Tenant>(tx, &obj.tenant_name)
            .await
            .map(|_| ())
    }

    async fn update(tx: &mut Tx<'_>, old: &Self, new: &mut Self) -> Result<()> {
        if new.network_name != old.network_name {
            return Err(Error::conflict(format!(
                "cannot move service {} to another network",
                old.key
            )));
        }
        let mut state = load_state(tx, old).await?;
        if new.ip_address != old.ip_address && new.ip_address != state.ipaddress {
            release_vip(tx, &old.tenant_name, &old.network_name, &state.ipaddress).await?;
            state.ipaddress = allocate_vip(tx, new).await?.to_string();
        }
        state.ports = new
            .ports
            .iter()
            .map(|p| normalize_port(p))
            .collect::<Result<_>>()?;
        state.selectors = parse_selectors(&new.selectors)?;
        state.sessionaffinitytimeout = new.affinity_seconds().unwrap_or(0);
        refresh_providers(tx, &mut state).await
    }

    async fn delete(tx: &mut Tx<'_>, obj: &Self) -> Result<()> {
        if let Ok(state) = load_state(tx, obj).await {
            release_vip(tx, &obj.tenant_name, &obj.network_name, &state.ipaddress).await?;
        }
        for (key, _) in tx.list_derived(&provider_prefix(&obj.state_id())).await? {
            tx.delete_derived(&key);
        }
        tx.delete(&CfgServiceLbState::key_for(&obj.state_id()));
        Ok(())
    }

    async fn oper(tx: &mut Tx<'_>, obj: &Self) -> Result<Value> {
        let mut state = load_state(tx, obj).await?;
        if state.providers.is_empty() {
            state.providers = tx
                .list::<Provider>(&provider_prefix(&state.id), "service provider")
                .await?
                .into_iter()
                .map(|p| (format!("{}:{}", p.IPAddress, p.Tenant), p))
                .collect();
        }
        let mut providers = Vec::new();
        for p in state.providers.values() {
            if let Some(ep) = tx
                .get::<CfgEndpointState>(
                    &CfgEndpointState::key_for(&p.EpIDKey),
                    CfgEndpointState::KIND,
                )
                .await?
            {
                providers.push(endpoint_oper(&ep));
            }
        }
        Ok(
            json!({ "serviceVip": state.ipaddress, "numProviders": state.providers.len(), "providers": providers,
                "sessionAffinityTimeout": state.sessionaffinitytimeout }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_and_selectors() {
        assert_eq!(normalize_port("80:8080:tcp").unwrap(), "80:8080:TCP");
        assert!(normalize_port("80:8080").is_err());
        assert!(normalize_port("80:x:TCP").is_err());
        assert!(normalize_port("80:8080:SCTP").is_err());
        assert!(parse_selectors(&["a=b=c".into()]).is_err());
        let sel = parse_selectors(&["app=web".into()]).unwrap();
        let mut labels = BTreeMap::new();
        assert!(!selects(&sel, &labels));
        labels.insert("app".into(), "web".into());
        labels.insert("x".into(), "y".into());
        assert!(selects(&sel, &labels));
    }

    #[test]
    fn session_affinity_is_client_ip_or_none_with_a_16_bit_timeout() {
        let svc = |affinity: &str, timeout: u32| ServiceLb {
            session_affinity: affinity.into(),
            affinity_timeout: timeout,
            ..ServiceLb::default()
        };
        assert_eq!(svc("ClientIP", 0).affinity_seconds(), Some(10_800));
        assert_eq!(svc("ClientIP", 60).affinity_seconds(), Some(60));
        assert_eq!(svc("None", 0).affinity_seconds(), None);
        assert_eq!(svc("", 0).affinity_seconds(), None);
        for (a, t, why) in [
            ("clientip", 0, "must be ClientIP or None"),
            ("None", 60, "needs sessionAffinity ClientIP"),
            ("ClientIP", 65_536, "more than 65535"),
        ] {
            let err = svc(a, t).validate_affinity().unwrap_err().to_string();
            assert!(err.contains(why), "{a} {t}: {err}");
        }
        assert!(svc("ClientIP", 65_535).validate_affinity().is_ok());
    }
}
