//! Service load-balancer state: `CfgServiceLBState` and `SvcProvider`, both keyed `<service>:<tenant>`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::store::keys;

/// A provider endpoint of a service (Go field names).
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Provider {
    pub IPAddress: String,
    pub ContainerID: String,
    pub Labels: BTreeMap<String, String>,
    pub Tenant: String,
    pub Network: String,
    pub Services: Vec<String>,
    pub Container: String,
    pub EpIDKey: String,
}

/// `CfgServiceLBState`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct CfgServiceLbState {
    pub id: String,
    pub servicename: String,
    pub tenantname: String,
    /// Contiv stores the *network name* here.
    pub subnet: String,
    pub ports: Vec<String>,
    pub selectors: BTreeMap<String, String>,
    pub ipaddress: String,
    /// Keyed `<providerIP>:<tenant>`. Not stored (the previous layout stored them here and is
    /// converted at leader start): each provider is its own key ([`provider_key`]); readers fill
    /// this from those.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub providers: BTreeMap<String, Provider>,
    /// Session affinity by client address, in seconds; 0: none (every connection balanced).
    /// Not in Contiv's record.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sessionaffinitytimeout: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Category of the per-provider keys (not in Contiv).
pub const PROVIDER_CATEGORY: &str = "serviceProvider";

/// `/contiv.io/state/serviceProvider/<service id>/`: one key per provider of the service.
pub fn provider_prefix(service_id: &str) -> String {
    keys::state(PROVIDER_CATEGORY, &format!("{service_id}/"))
}

/// `/contiv.io/state/serviceProvider/<service id>/<provider IP>`, holding a [`Provider`].
pub fn provider_key(service_id: &str, ip: &str) -> String {
    format!("{}{ip}", provider_prefix(service_id))
}

/// The service id and provider IP a provider key names.
pub fn parse_provider_key(key: &str) -> Option<(&str, &str)> {
    let rest = key.strip_prefix(&keys::state_prefix(PROVIDER_CATEGORY))?;
    rest.rsplit_once('/')
}

impl CfgServiceLbState {
    pub const KIND: &'static str = "CfgServiceLBState";

    pub fn id_for(tenant: &str, service: &str) -> String {
        format!("{service}:{tenant}")
    }

    pub fn key_for(id: &str) -> String {
        keys::state(keys::category::SERVICE_LB, id)
    }
}

/// `SvcProvider`: the provider IPs of one service, in Contiv's layout. No longer written (the list
/// grows with the service): the leader deletes those of the previous layout.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct SvcProvider {
    pub id: String,
    pub ServiceName: String,
    pub Providers: Vec<String>,
}

impl SvcProvider {
    pub const KIND: &'static str = "SvcProvider";

    pub fn key_for(id: &str) -> String {
        keys::state(keys::category::PROVIDER, id)
    }
}
