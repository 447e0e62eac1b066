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
    /// Keyed `<providerIP>:<tenant>`.
    pub providers: BTreeMap<String, Provider>,
    /// Session affinity by client address, in seconds; 0: none (every connection balanced).
    /// Not in Contiv's record.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sessionaffinitytimeout: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
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

/// `SvcProvider`: the provider IPs of one service, as netplugin consumes them.
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
