//! The agent's state as JSON, in the shape of the reference's agent export (what netplugin's
//! `/inspect/driver` shows under `"vlan"` and `"vxlan"`).
//!
//! Fields the reference has but this agent does not serve (`Protopath`: no routing datapaths)
//! are present with empty values so consumers find the keys they expect.

use crate::agent::AgentConfig;
use crate::datapath::Settings;
use crate::epdb::{EndpointTable, Vrf};
use crate::model::{ArpMode, Endpoint, Node, PolicyRule};
use crate::service::inspect::SvcProxyExport;
use serde::Serialize;
use std::collections::BTreeMap;

/// `{"Rule": ...}` as the reference wraps installed rules.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct InstalledRule {
    pub rule: PolicyRule,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct PolicyAgentExport {
    pub rules: BTreeMap<String, InstalledRule>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct DatapathExport {
    pub policy_agent: PolicyAgentExport,
    pub svc_proxy: SvcProxyExport,
}

/// The agent export (reference §5.11).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct AgentExport {
    pub local_ip: String,
    pub my_port: u16,
    pub my_addr: String,
    pub is_connected: bool,
    pub dp_name: &'static str,
    pub protopath: Option<()>,
    pub master_db: BTreeMap<String, Node>,
    pub vtep_table: BTreeMap<String, u32>,
    pub endpoint_db: BTreeMap<String, Endpoint>,
    pub vrf_name_id_map: BTreeMap<String, u8>,
    pub vrf_db: BTreeMap<String, Vrf>,
    pub fwd_mode: &'static str,
    pub arp_mode: ArpMode,
    pub stats: BTreeMap<String, u64>,
    pub err_stats: BTreeMap<String, u64>,
    pub datapath: DatapathExport,
    /// The router MAC (routing datapaths only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub my_router_mac: Option<String>,
}

/// What the agent knows at run time besides its state.
#[derive(Debug, Clone, Copy)]
pub struct Live<'a> {
    /// The datapath the agent runs (`DpName`, the router MAC).
    pub datapath: &'a dyn crate::datapath::Datapath,
    /// A switch is connected.
    pub connected: bool,
    pub stats: &'a BTreeMap<String, u64>,
    /// Masters the agent registered with.
    pub masters: &'a [Node],
    /// The port the agent's RPC server listens on (0: none).
    pub rpc_port: u16,
}

/// Build the export from the agent's parts.
pub fn export(
    config: &AgentConfig,
    endpoints: &EndpointTable,
    settings: &Settings,
    live: Live<'_>,
) -> AgentExport {
    let Live {
        datapath: dp,
        connected,
        stats,
        masters,
        rpc_port,
    } = live;
    let local_ip = config.local_ip.map(|a| a.to_string()).unwrap_or_default();
    let (err_stats, stats): (BTreeMap<_, _>, BTreeMap<_, _>) = stats
        .iter()
        .map(|(k, v)| (k.clone(), *v))
        .partition(|(k, _)| k.ends_with("-ERROR"));
    AgentExport {
        my_addr: local_ip.clone(),
        local_ip,
        my_port: rpc_port,
        is_connected: connected,
        dp_name: dp.name(),
        protopath: None,
        master_db: masters.iter().map(|m| (m.key(), m.clone())).collect(),
        vtep_table: settings
            .vteps
            .iter()
            .map(|(ip, port)| (ip.to_string(), *port))
            .collect(),
        endpoint_db: endpoints
            .endpoints()
            .map(|e| (e.endpoint_id.clone(), e.clone()))
            .collect(),
        vrf_name_id_map: endpoints
            .vrfs()
            .map(|v| (v.vrf_name.clone(), v.vrf_id))
            .collect(),
        vrf_db: endpoints
            .vrfs()
            .map(|v| (v.vrf_name.clone(), v.clone()))
            .collect(),
        fwd_mode: config.fwd_mode.name(),
        arp_mode: settings.arp_mode,
        stats,
        err_stats,
        datapath: DatapathExport {
            policy_agent: PolicyAgentExport {
                rules: settings
                    .rules
                    .iter()
                    .map(|(id, r)| {
                        (
                            id.clone(),
                            InstalledRule {
                                rule: (**r).clone(),
                            },
                        )
                    })
                    .collect(),
            },
            svc_proxy: crate::service::inspect::export(&settings.services),
        },
        my_router_mac: dp
            .router_mac()
            .map(|m| crate::model::MacAddr(m).to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{BridgeKind, RuleAction};
    use std::net::Ipv4Addr;
    use std::sync::Arc;

    #[test]
    fn export_has_the_reference_keys_and_values() {
        let t = crate::fixtures::endpoint_table(
            2,
            5000,
            &[(3, Ipv4Addr::new(10, 1, 1, 2))],
            Some(Ipv4Addr::new(192, 168, 77, 1)),
        );
        let mut s = Settings::default();
        s.vteps.insert(Ipv4Addr::new(192, 168, 77, 2), 9);
        s.rules.insert(
            "r1".into(),
            Arc::new(PolicyRule::new("r1", 1, RuleAction::Deny)),
        );
        let mut config = AgentConfig::new(BridgeKind::Vxlan, "contivVxlanBridge");
        config.local_ip = Some(Ipv4Addr::new(192, 168, 77, 1));
        let stats = BTreeMap::from([
            ("ArpReqRcvd".to_string(), 2),
            ("ArpPktParse-ERROR".to_string(), 1),
        ]);
        let masters = [Node {
            host_addr: "192.168.77.9".into(),
            host_port: 9001,
        }];
        let live = Live {
            datapath: &crate::VxlanBridge,
            connected: true,
            stats: &stats,
            masters: &masters,
            rpc_port: 9002,
        };
        let v = serde_json::to_value(export(&config, &t, &s, live)).unwrap();
        assert_eq!(v["DpName"], "vxlan");
        assert_eq!(v["LocalIp"], "192.168.77.1");
        assert_eq!(v["IsConnected"], true);
        assert_eq!(v["VtepTable"]["192.168.77.2"], 9);
        assert_eq!(
            v["EndpointDb"]["10.1.1.2:t1"]["MacAddrStr"],
            "02:02:0a:01:01:02"
        );
        assert_eq!(
            v["EndpointDb"]["10.1.1.2:t1"]["OriginatorIp"],
            "192.168.77.1"
        );
        assert_eq!(v["VrfNameIdMap"]["t1"], 1);
        assert_eq!(
            v["VrfDb"]["t1"],
            serde_json::json!({"VrfName": "t1", "VrfId": 1, "NumNetworks": 1})
        );
        assert_eq!(v["FwdMode"], "bridge");
        assert_eq!(v["ArpMode"], "proxy");
        assert_eq!(v["Stats"], serde_json::json!({"ArpReqRcvd": 2}));
        assert_eq!(v["ErrStats"], serde_json::json!({"ArpPktParse-ERROR": 1}));
        assert_eq!(
            v["Datapath"]["PolicyAgent"]["Rules"]["r1"]["Rule"]["Action"],
            "deny"
        );
        assert!(v["Protopath"].is_null());
        assert_eq!(v["MyPort"], 9002);
        assert_eq!(
            v["MasterDb"]["192.168.77.9:9001"],
            serde_json::json!({"HostAddr": "192.168.77.9", "HostPort": 9001})
        );
    }
}
