//! netplugin's Prometheus metrics, served at `GET /metrics` on the debug listener (`:9090`).
//!
//! One [`Registry`] built at start ([`PluginMetrics::new`]) and handed to the parts that update
//! it: the etcd store (wrapped in [`MeteredStore`], the same code netmaster uses), each
//! bridge's `ofctrl` actor (through [`BridgeMetrics`], an `ofctrl::BridgeObserver`) and the CNI
//! server. Counts that the driver and the agents already hold (endpoints, rules, services,
//! flows per table, connected) are read from them when scraped ([`PluginMetrics::render`]):
//! nothing is listed from etcd or asked of the switch per scrape.
//!
//! Labels are bounded: bridge (2), table (the pipeline's), CNI command (3), CNI code, OpenFlow
//! error type (the standard's); never an endpoint or a pod.

use std::sync::Arc;
use std::time::Duration;

use master::metrics::{
    Labels1, Labels2, LatencyFamily, MeteredStore, StoreMetrics, latency_family, render,
};
use master::store::StateStore;
use ofctrl::{BridgeObserver, TxError};
use ofnet::BridgeKind;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::driver::{Driver, bridge_name};

/// Every metric netplugin exports, and the registry they are in.
#[derive(Clone)]
pub struct PluginMetrics {
    registry: Arc<Registry>,
    pub store: StoreMetrics,
    bridge: BridgeFamilies,
    /// `netplugin_cni_request_duration_seconds{command}`.
    pub cni_duration: LatencyFamily<Labels1>,
    /// `netplugin_cni_errors_total{command, code}`.
    pub cni_errors: Family<Labels2, Counter>,
    /// `netplugin_cni_add_step_duration_seconds{step}`: one pod attach, step by step.
    pub add_steps: LatencyFamily<Labels1>,
    /// `netplugin_endpoints{location}`.
    endpoints: Family<Labels1, Gauge>,
    /// `netplugin_policy_rules{bridge}`.
    rules: Family<Labels1, Gauge>,
    /// `netplugin_services{bridge}`.
    services: Family<Labels1, Gauge>,
    /// `netplugin_service_providers{bridge}`.
    providers: Family<Labels1, Gauge>,
    /// `netplugin_datapath_flushes_total`.
    pub datapath_flushes: Counter,
    /// `netplugin_pod_port_numbers_total{source}`.
    port_numbers: Family<Labels1, Counter>,
}

impl std::fmt::Debug for PluginMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginMetrics").finish_non_exhaustive()
    }
}

/// The per-bridge families (label `bridge`).
#[derive(Clone, Debug)]
struct BridgeFamilies {
    connected: Family<Labels1, Gauge>,
    in_sync: Family<Labels1, Gauge>,
    flows: Family<Labels2, Gauge>,
    bundles: Family<Labels2, Counter>,
    bundle_duration: LatencyFamily<Labels1>,
    reconciles: Family<Labels1, Counter>,
    errors: Family<Labels2, Counter>,
}

/// One bridge's view of the families: what its `ofctrl` actor reports to.
pub struct BridgeMetrics {
    bridge: String,
    families: BridgeFamilies,
}

impl BridgeObserver for BridgeMetrics {
    fn applied(&self, _operations: usize, elapsed: Duration, reconcile: bool) {
        let bridge = [("bridge", self.bridge.clone())];
        if reconcile {
            self.families.reconciles.get_or_create(&bridge).inc();
        }
        self.families
            .bundles
            .get_or_create(&[
                ("bridge", self.bridge.clone()),
                ("outcome", "applied".to_string()),
            ])
            .inc();
        self.families
            .bundle_duration
            .get_or_create(&bridge)
            .observe(elapsed.as_secs_f64());
    }

    fn failed(&self, error: &TxError, _reconcile: bool) {
        self.families
            .bundles
            .get_or_create(&[
                ("bridge", self.bridge.clone()),
                ("outcome", "failed".to_string()),
            ])
            .inc();
        for kind in openflow_error_types(error) {
            self.families
                .errors
                .get_or_create(&[("bridge", self.bridge.clone()), ("type", kind.to_string())])
                .inc();
        }
    }
}

/// The OpenFlow error types (`OFPET_BAD_MATCH`, ...) a failed transaction carried.
pub fn openflow_error_types(error: &TxError) -> Vec<&'static str> {
    let name = |e: &ofproto::ErrorMsg| e.kind.type_name().unwrap_or("OFPET_UNKNOWN");
    match error {
        TxError::Rejected { failures, bundle } => failures
            .iter()
            .map(|f| name(&f.error))
            .chain(bundle.iter().map(name))
            .collect(),
        TxError::Switch(ofctrl::SwitchError::Rejected { error, .. }) => vec![name(error)],
        _ => Vec::new(),
    }
}

fn gauge_value(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl PluginMetrics {
    /// Build the registry with every netplugin metric.
    pub fn new() -> PluginMetrics {
        let mut r = Registry::default();
        let store = StoreMetrics::register(&mut r);
        let bridge = BridgeFamilies {
            connected: Family::default(),
            in_sync: Family::default(),
            flows: Family::default(),
            bundles: Family::default(),
            bundle_duration: latency_family(),
            reconciles: Family::default(),
            errors: Family::default(),
        };
        r.register(
            "netplugin_bridge_connected",
            "1 while the bridge's switch (ovs-vswitchd) is connected to netplugin",
            bridge.connected.clone(),
        );
        r.register(
            "netplugin_bridge_in_sync",
            "1 once the connected switch holds exactly the desired flows, groups and meters",
            bridge.in_sync.clone(),
        );
        r.register(
            "netplugin_bridge_flows",
            "desired flows per bridge and table (see docs/pipeline.md for the table numbers)",
            bridge.flows.clone(),
        );
        r.register(
            "netplugin_bridge_bundles",
            "transactions (OpenFlow bundles) sent to the switch, by outcome (applied, failed)",
            bridge.bundles.clone(),
        );
        r.register(
            "netplugin_bridge_bundle_duration_seconds",
            "time from sending a transaction until the switch confirmed it",
            bridge.bundle_duration.clone(),
        );
        r.register(
            "netplugin_bridge_reconciles",
            "reconciles completed (after every switch connect)",
            bridge.reconciles.clone(),
        );
        r.register(
            "netplugin_openflow_errors",
            "OpenFlow errors the switch answered, by error type (OFPET_BAD_MATCH, ...)",
            bridge.errors.clone(),
        );
        let cni_duration = latency_family();
        r.register(
            "netplugin_cni_request_duration_seconds",
            "CNI request latency by command (ADD, DEL, CHECK), errors included",
            cni_duration.clone(),
        );
        let cni_errors = Family::default();
        r.register(
            "netplugin_cni_errors",
            "CNI requests answered with an error, by command and CNI error code",
            cni_errors.clone(),
        );
        let endpoints = Family::default();
        r.register(
            "netplugin_endpoints",
            "endpoints this netplugin serves, by location (local: this host's pods; remote: \
             other hosts' endpoints installed on the VXLAN bridge)",
            endpoints.clone(),
        );
        let rules = Family::default();
        r.register(
            "netplugin_policy_rules",
            "policy rules installed, by bridge",
            rules.clone(),
        );
        let services = Family::default();
        r.register(
            "netplugin_services",
            "load-balanced services installed, by bridge",
            services.clone(),
        );
        let providers = Family::default();
        r.register(
            "netplugin_service_providers",
            "service providers the bridge balances over, summed over its services",
            providers.clone(),
        );
        let add_steps = latency_family();
        r.register(
            "netplugin_cni_add_step_duration_seconds",
            "time of each step of a successful CNI ADD inside netplugin (steps that run at \
             once overlap; see docs/netplugin.md): lookup, netmaster, labels, veth, ovsdb, \
             ofport, pod_side, flows, oper",
            add_steps.clone(),
        );
        let datapath_flushes = Counter::default();
        r.register(
            "netplugin_datapath_flushes",
            "purges of ovs-vswitchd's cached datapath flows after a flow change \
             (--datapath-flush; docs/netplugin.md)",
            datapath_flushes.clone(),
        );
        let port_numbers = Family::default();
        r.register(
            "netplugin_pod_port_numbers",
            "new pod ports by where the CNI ADD learnt their OpenFlow number first: switch (its \
             PORT_STATUS) or ovsdb (the number ovs-vswitchd wrote back); see docs/netplugin.md",
            port_numbers.clone(),
        );
        for source in ["switch", "ovsdb"] {
            let _ = port_numbers.get_or_create_owned(&[("source", source.to_string())]);
        }
        // Every command has its series from the start (0 until the first request).
        for command in ["ADD", "DEL", "CHECK"] {
            let _ = cni_duration.get_or_create_owned(&[("command", command.to_string())]);
        }
        PluginMetrics {
            registry: Arc::new(r),
            store,
            bridge,
            cni_duration,
            cni_errors,
            add_steps,
            endpoints,
            rules,
            services,
            providers,
            datapath_flushes,
            port_numbers,
        }
    }

    /// `store`, counted and timed.
    pub fn metered(&self, store: Arc<dyn StateStore>) -> Arc<dyn StateStore> {
        Arc::new(MeteredStore::new(store, self.store.clone()))
    }

    /// The observer for one bridge's `ofctrl` actor.
    pub fn bridge(&self, bridge: &str) -> BridgeMetrics {
        BridgeMetrics {
            bridge: bridge.to_string(),
            families: self.bridge.clone(),
        }
    }

    /// Count one CNI request (`command`: ADD, DEL, CHECK); `code` is the CNI error code of a
    /// failed one (`None` when the reply carried none).
    pub fn cni(&self, command: &'static str, elapsed: Duration, failed: Option<Option<u32>>) {
        self.cni_duration
            .get_or_create(&[("command", command.to_string())])
            .observe(elapsed.as_secs_f64());
        if let Some(code) = failed {
            let code = code.map_or_else(|| "none".to_string(), |c| c.to_string());
            self.cni_errors
                .get_or_create(&[("command", command.to_string()), ("code", code)])
                .inc();
        }
    }

    /// One step of a successful attach (`step`: one of the fixed names in
    /// [`crate::driver::endpoint`]).
    pub fn add_step(&self, step: &'static str, elapsed: Duration) {
        self.add_steps
            .get_or_create(&[("step", step.to_string())])
            .observe(elapsed.as_secs_f64());
    }

    /// One new pod port whose number came first from `source` (`switch` or `ovsdb`).
    pub fn port_number_from(&self, source: &'static str) {
        self.port_numbers
            .get_or_create(&[("source", source.to_string())])
            .inc();
    }

    /// Read the driver's and agents' counts into the gauges, then the registry as text.
    pub async fn render(&self, driver: &Driver) -> String {
        let (local, remote) = driver.endpoint_counts();
        self.endpoints
            .get_or_create(&[("location", "local".to_string())])
            .set(gauge_value(local));
        self.endpoints
            .get_or_create(&[("location", "remote".to_string())])
            .set(gauge_value(remote));
        let host = (driver.cfg.fwd_mode() == ofnet::FwdMode::Bridge).then_some(BridgeKind::Host);
        for kind in [BridgeKind::Vxlan, BridgeKind::Vlan]
            .into_iter()
            .chain(host)
        {
            let name = bridge_name(kind).to_string();
            let bridge = [("bridge", name.clone())];
            let agent = driver.agent(kind);
            if let Ok(counts) = agent.counts().await {
                self.rules
                    .get_or_create(&bridge)
                    .set(gauge_value(counts.rules));
                self.services
                    .get_or_create(&bridge)
                    .set(gauge_value(counts.services));
                self.providers
                    .get_or_create(&bridge)
                    .set(gauge_value(counts.service_providers));
            }
            if let Some(status) = agent.bridge().status().await {
                self.bridge
                    .connected
                    .get_or_create(&bridge)
                    .set(i64::from(status.connected));
                self.bridge
                    .in_sync
                    .get_or_create(&bridge)
                    .set(i64::from(status.synced));
                for (table, flows) in status.flows_per_table {
                    self.bridge
                        .flows
                        .get_or_create(&[("bridge", name.clone()), ("table", table.to_string())])
                        .set(gauge_value(flows));
                }
            }
        }
        render(&self.registry)
    }
}

impl Default for PluginMetrics {
    fn default() -> Self {
        PluginMetrics::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofproto::ErrorKind;
    use ofproto::ErrorMsg;

    #[test]
    fn failed_bundles_count_each_openflow_error_by_type() {
        let m = PluginMetrics::new();
        let observer = m.bridge("contivVxlanBridge");
        let bad_match = ErrorMsg {
            kind: ErrorKind::by_name("OFPBMC_BAD_FIELD").expect("a standard error"),
            data: Default::default(),
        };
        let err = TxError::Rejected {
            failures: vec![ofctrl::RequestFailure {
                index: 0,
                xid: 1,
                request: ofproto::Message::BarrierRequest,
                error: bad_match,
            }],
            bundle: None,
        };
        observer.failed(&err, false);
        observer.applied(3, Duration::from_millis(2), true);
        let text = render(&m.registry);
        for line in [
            "netplugin_openflow_errors_total{bridge=\"contivVxlanBridge\",type=\"OFPET_BAD_MATCH\"} 1",
            "netplugin_bridge_bundles_total{bridge=\"contivVxlanBridge\",outcome=\"failed\"} 1",
            "netplugin_bridge_bundles_total{bridge=\"contivVxlanBridge\",outcome=\"applied\"} 1",
            "netplugin_bridge_reconciles_total{bridge=\"contivVxlanBridge\"} 1",
            "netplugin_bridge_bundle_duration_seconds_count{bridge=\"contivVxlanBridge\"} 1",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
    }
}
