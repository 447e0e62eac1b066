//! The local copy of the monitored tables, kept current by `update` notifications.
//!
//! The client task is the only writer (it applies the monitor's initial reply and every
//! `update`); readers get a consistent snapshot through a `tokio::sync::watch` channel and can
//! wait for a predicate to become true (see `OvsdbClient::wait_for`). Rows are stored as the
//! server sent them (column → JSON datum) and read through the typed views below.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value, json};

use super::datum::{Uuid, optional_int, optional_string, string_map_entries, string_set, uuid_set};

/// Tables and columns the client monitors. Columns that change by themselves all the time
/// (`Interface.statistics`, `status`) are left out so the cache only moves when something
/// that matters to us changes.
pub const MONITORED: &[(&str, &[&str])] = &[
    (
        "Open_vSwitch",
        &[
            "bridges",
            "external_ids",
            "cur_cfg",
            "next_cfg",
            "ovs_version",
        ],
    ),
    (
        "Bridge",
        &[
            "name",
            "ports",
            "controller",
            "fail_mode",
            "protocols",
            "datapath_type",
            "external_ids",
            "other_config",
        ],
    ),
    (
        "Port",
        &[
            "name",
            "interfaces",
            "tag",
            "trunks",
            "vlan_mode",
            "external_ids",
            "bond_mode",
            "lacp",
            "other_config",
        ],
    ),
    (
        "Interface",
        &[
            "name",
            "type",
            "ofport",
            "ofport_request",
            "options",
            "external_ids",
            "ingress_policing_rate",
            "ingress_policing_burst",
            "mac_in_use",
            "error",
            "lacp_current",
        ],
    ),
    ("Controller", &["target", "is_connected"]),
];

/// The `monitor` request object for [`MONITORED`].
pub fn monitor_requests() -> Value {
    let tables: Map<String, Value> = MONITORED
        .iter()
        .map(|(table, columns)| ((*table).to_owned(), json!({ "columns": columns })))
        .collect();
    Value::Object(tables)
}

type Row = Map<String, Value>;

/// Snapshot of the monitored tables.
#[derive(Debug, Default, Clone)]
pub struct Cache {
    tables: HashMap<String, HashMap<Uuid, Row>>,
    /// True between a successful `monitor` reply and the loss of the connection.
    connected: bool,
    /// Incremented each time the monitor is (re-)established, so a waiter can tell that the
    /// whole cache was replaced.
    epoch: u64,
}

impl Cache {
    /// Replace the content with a monitor's initial reply.
    pub fn reset(&mut self, initial: &Value) -> Result<(), String> {
        self.tables.clear();
        self.apply(initial)?;
        self.connected = true;
        self.epoch += 1;
        Ok(())
    }

    pub(crate) fn set_disconnected(&mut self) {
        self.connected = false;
    }

    /// Apply a `<table-updates>` object (RFC 7047 §4.1.6). A row update with `new` inserts the
    /// row or merges the given columns into it; one with only `old` deletes it.
    pub fn apply(&mut self, updates: &Value) -> Result<(), String> {
        let updates = updates
            .as_object()
            .ok_or_else(|| format!("table-updates is not an object: {updates}"))?;
        for (table, rows) in updates {
            let rows = rows
                .as_object()
                .ok_or_else(|| format!("table-update for {table} is not an object"))?;
            let cached = self.tables.entry(table.clone()).or_default();
            for (uuid, update) in rows {
                let uuid = Uuid(uuid.clone());
                match update.get("new").and_then(Value::as_object) {
                    Some(new) => {
                        let row = cached.entry(uuid).or_default();
                        for (column, value) in new {
                            row.insert(column.clone(), value.clone());
                        }
                    }
                    None => {
                        cached.remove(&uuid);
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether the monitor is established (false while reconnecting).
    pub fn is_connected(&self) -> bool {
        self.connected
    }

    /// How many times the monitor has been established.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    fn rows(&self, table: &str) -> impl Iterator<Item = (&Uuid, &Row)> {
        self.tables.get(table).into_iter().flat_map(|t| t.iter())
    }

    fn row_named(&self, table: &str, name: &str) -> Option<(&Uuid, &Row)> {
        self.rows(table)
            .find(|(_, row)| row.get("name").and_then(Value::as_str) == Some(name))
    }

    fn row(&self, table: &str, uuid: &Uuid) -> Option<&Row> {
        self.tables.get(table).and_then(|t| t.get(uuid))
    }

    /// The root `Open_vSwitch` row (there is exactly one once the database is initialised).
    pub fn root(&self) -> Option<RootRow> {
        self.rows("Open_vSwitch").next().map(|(uuid, row)| RootRow {
            uuid: uuid.clone(),
            bridges: column(row, "bridges").map(uuid_set).unwrap_or_default(),
            external_ids: column(row, "external_ids")
                .map(string_map_entries)
                .unwrap_or_default(),
            cur_cfg: column(row, "cur_cfg").and_then(optional_int).unwrap_or(0),
            next_cfg: column(row, "next_cfg").and_then(optional_int).unwrap_or(0),
            ovs_version: column(row, "ovs_version")
                .and_then(optional_string)
                .unwrap_or_default(),
        })
    }

    /// Every bridge.
    pub fn bridges(&self) -> Vec<BridgeRow> {
        self.rows("Bridge")
            .map(|(u, r)| BridgeRow::from_row(u, r))
            .collect()
    }

    /// The bridge called `name`.
    pub fn bridge(&self, name: &str) -> Option<BridgeRow> {
        self.row_named("Bridge", name)
            .map(|(u, r)| BridgeRow::from_row(u, r))
    }

    /// The port called `name`.
    pub fn port(&self, name: &str) -> Option<PortRow> {
        self.row_named("Port", name)
            .map(|(u, r)| PortRow::from_row(u, r))
    }

    /// The port with this uuid.
    pub fn port_by_uuid(&self, uuid: &Uuid) -> Option<PortRow> {
        self.row("Port", uuid).map(|r| PortRow::from_row(uuid, r))
    }

    /// The interface called `name`.
    pub fn interface(&self, name: &str) -> Option<InterfaceRow> {
        self.row_named("Interface", name)
            .map(|(u, r)| InterfaceRow::from_row(u, r))
    }

    /// The interface with this uuid.
    pub fn interface_by_uuid(&self, uuid: &Uuid) -> Option<InterfaceRow> {
        self.row("Interface", uuid)
            .map(|r| InterfaceRow::from_row(uuid, r))
    }

    /// The controller with this uuid.
    pub fn controller_by_uuid(&self, uuid: &Uuid) -> Option<ControllerRow> {
        self.row("Controller", uuid).map(|r| ControllerRow {
            uuid: uuid.clone(),
            target: column(r, "target")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            is_connected: column(r, "is_connected")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        })
    }

    /// The bridge whose `ports` column holds `port`.
    pub fn bridge_of_port(&self, port: &Uuid) -> Option<BridgeRow> {
        self.bridges().into_iter().find(|b| b.ports.contains(port))
    }

    /// The ports of bridge `name`, with their rows (empty if the bridge does not exist).
    pub fn ports_of_bridge(&self, name: &str) -> Vec<PortRow> {
        self.bridge(name)
            .map(|b| {
                b.ports
                    .iter()
                    .filter_map(|u| self.port_by_uuid(u))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The OpenFlow port numbers bridge `name`'s interfaces have or asked for.
    pub fn ofports_of_bridge(&self, name: &str) -> std::collections::BTreeSet<u32> {
        self.ports_of_bridge(name)
            .iter()
            .flat_map(|p| p.interfaces.iter())
            .filter_map(|u| self.interface_by_uuid(u))
            .flat_map(|i| [i.ofport, i.ofport_request])
            .flatten()
            .filter_map(|n| u32::try_from(n).ok())
            .collect()
    }

    /// Whether a row with this uuid exists in `table`.
    pub fn contains(&self, table: &str, uuid: &Uuid) -> bool {
        self.row(table, uuid).is_some()
    }
}

fn column<'a>(row: &'a Row, name: &str) -> Option<&'a Value> {
    row.get(name)
}

/// The `Open_vSwitch` table's single row.
#[derive(Clone, Debug, PartialEq)]
pub struct RootRow {
    pub uuid: Uuid,
    pub bridges: Vec<Uuid>,
    pub external_ids: BTreeMap<String, String>,
    /// Configuration generation ovs-vswitchd has applied.
    pub cur_cfg: i64,
    /// Configuration generation clients asked for.
    pub next_cfg: i64,
    /// The Open vSwitch release ovs-vswitchd reports (empty until it has written it).
    pub ovs_version: String,
}

/// A `Bridge` row.
#[derive(Clone, Debug, PartialEq)]
pub struct BridgeRow {
    pub uuid: Uuid,
    pub name: String,
    pub ports: Vec<Uuid>,
    pub controller: Vec<Uuid>,
    pub fail_mode: Option<String>,
    pub protocols: Vec<String>,
    pub datapath_type: String,
    pub external_ids: BTreeMap<String, String>,
}

impl BridgeRow {
    fn from_row(uuid: &Uuid, row: &Row) -> Self {
        BridgeRow {
            uuid: uuid.clone(),
            name: str_col(row, "name"),
            ports: column(row, "ports").map(uuid_set).unwrap_or_default(),
            controller: column(row, "controller").map(uuid_set).unwrap_or_default(),
            fail_mode: column(row, "fail_mode").and_then(optional_string),
            protocols: column(row, "protocols").map(string_set).unwrap_or_default(),
            datapath_type: str_col(row, "datapath_type"),
            external_ids: column(row, "external_ids")
                .map(string_map_entries)
                .unwrap_or_default(),
        }
    }
}

/// A `Port` row.
#[derive(Clone, Debug, PartialEq)]
pub struct PortRow {
    pub uuid: Uuid,
    pub name: String,
    pub interfaces: Vec<Uuid>,
    pub tag: Option<u16>,
    pub trunks: Vec<u16>,
    pub vlan_mode: Option<String>,
    pub external_ids: BTreeMap<String, String>,
}

impl PortRow {
    fn from_row(uuid: &Uuid, row: &Row) -> Self {
        let ints = |name| -> Vec<u16> {
            column(row, name)
                .map(|v| {
                    super::datum::set_elements(v)
                        .into_iter()
                        .filter_map(|x| x.as_u64().and_then(|n| u16::try_from(n).ok()))
                        .collect()
                })
                .unwrap_or_default()
        };
        PortRow {
            uuid: uuid.clone(),
            name: str_col(row, "name"),
            interfaces: column(row, "interfaces").map(uuid_set).unwrap_or_default(),
            tag: column(row, "tag")
                .and_then(optional_int)
                .and_then(|t| u16::try_from(t).ok()),
            trunks: ints("trunks"),
            vlan_mode: column(row, "vlan_mode").and_then(optional_string),
            external_ids: column(row, "external_ids")
                .map(string_map_entries)
                .unwrap_or_default(),
        }
    }
}

/// An `Interface` row.
#[derive(Clone, Debug, PartialEq)]
pub struct InterfaceRow {
    pub uuid: Uuid,
    pub name: String,
    /// `""` (system device), `"internal"`, `"vxlan"`, ...
    pub kind: String,
    /// The OpenFlow port number; `None` until ovs-vswitchd assigns one, `Some(-1)` on failure.
    pub ofport: Option<i64>,
    /// The number asked for (`ofport_request`), if any.
    pub ofport_request: Option<i64>,
    pub options: BTreeMap<String, String>,
    pub external_ids: BTreeMap<String, String>,
    pub ingress_policing_rate: i64,
    pub ingress_policing_burst: i64,
    pub mac_in_use: Option<String>,
    /// Why ovs-vswitchd could not create the interface.
    pub error: Option<String>,
}

impl InterfaceRow {
    fn from_row(uuid: &Uuid, row: &Row) -> Self {
        InterfaceRow {
            uuid: uuid.clone(),
            name: str_col(row, "name"),
            kind: str_col(row, "type"),
            ofport: column(row, "ofport").and_then(optional_int),
            ofport_request: column(row, "ofport_request").and_then(optional_int),
            options: column(row, "options")
                .map(string_map_entries)
                .unwrap_or_default(),
            external_ids: column(row, "external_ids")
                .map(string_map_entries)
                .unwrap_or_default(),
            ingress_policing_rate: column(row, "ingress_policing_rate")
                .and_then(optional_int)
                .unwrap_or(0),
            ingress_policing_burst: column(row, "ingress_policing_burst")
                .and_then(optional_int)
                .unwrap_or(0),
            mac_in_use: column(row, "mac_in_use").and_then(optional_string),
            error: column(row, "error").and_then(optional_string),
        }
    }
}

/// A `Controller` row.
#[derive(Clone, Debug, PartialEq)]
pub struct ControllerRow {
    pub uuid: Uuid,
    pub target: String,
    pub is_connected: bool,
}

fn str_col(row: &Row, name: &str) -> String {
    column(row, name)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn initial() -> Value {
        json!({
            "Open_vSwitch": {"root-1": {"new": {"bridges": ["set", [["uuid", "br-1"]]], "cur_cfg": 3, "next_cfg": 3}}},
            "Bridge": {"br-1": {"new": {"name": "br0", "ports": ["uuid", "p-1"], "controller": ["set", []],
                        "fail_mode": "secure", "protocols": ["set", ["OpenFlow13"]], "datapath_type": "dummy",
                        "external_ids": ["map", [["gen", "4"]]]}}},
            "Port": {"p-1": {"new": {"name": "vvport1", "interfaces": ["uuid", "i-1"], "tag": 10, "trunks": ["set", []],
                      "vlan_mode": "access"}}},
            "Interface": {"i-1": {"new": {"name": "vvport1", "type": "", "ofport": ["set", []]}}}
        })
    }

    #[test]
    fn initial_reply_fills_typed_views() {
        let mut cache = Cache::default();
        cache.reset(&initial()).unwrap();
        assert!(cache.is_connected());
        assert_eq!(cache.epoch(), 1);
        let root = cache.root().unwrap();
        assert_eq!(root.bridges, vec![Uuid("br-1".into())]);
        let br = cache.bridge("br0").unwrap();
        assert_eq!(br.fail_mode.as_deref(), Some("secure"));
        assert_eq!(br.protocols, vec!["OpenFlow13".to_string()]);
        assert_eq!(br.external_ids.get("gen").map(String::as_str), Some("4"));
        let port = cache.port("vvport1").unwrap();
        assert_eq!(port.tag, Some(10));
        assert_eq!(cache.bridge_of_port(&port.uuid).unwrap().name, "br0");
        assert_eq!(cache.interface("vvport1").unwrap().ofport, None);
    }

    #[test]
    fn modify_merges_columns_and_delete_removes() {
        let mut cache = Cache::default();
        cache.reset(&initial()).unwrap();
        cache
            .apply(&json!({"Interface": {"i-1": {"old": {"ofport": ["set", []]}, "new": {"ofport": 7}}}}))
            .unwrap();
        let intf = cache.interface("vvport1").unwrap();
        assert_eq!(intf.ofport, Some(7));
        assert_eq!(intf.name, "vvport1", "columns not in the update are kept");
        cache
            .apply(&json!({"Port": {"p-1": {"old": {"name": "vvport1"}}}}))
            .unwrap();
        assert!(cache.port("vvport1").is_none());
        assert!(cache.apply(&json!([1])).is_err());
    }

    /// A number an interface has and one another only asked for (ovs-vswitchd has not
    /// numbered it yet) are both taken.
    #[test]
    fn a_bridges_ofports_include_the_ones_asked_for() {
        let mut cache = Cache::default();
        cache.reset(&initial()).unwrap();
        assert!(cache.ofports_of_bridge("br0").is_empty());
        cache
            .apply(&json!({
                "Interface": {
                    "i-1": {"old": {"ofport": ["set", []]}, "new": {"ofport": 7}},
                    "i-2": {"new": {"name": "vvport2", "type": "", "ofport": ["set", []], "ofport_request": 9}}
                },
                "Port": {"p-2": {"new": {"name": "vvport2", "interfaces": ["uuid", "i-2"]}}},
                "Bridge": {"br-1": {"old": {"ports": ["uuid", "p-1"]},
                            "new": {"ports": ["set", [["uuid", "p-1"], ["uuid", "p-2"]]]}}}
            }))
            .unwrap();
        assert_eq!(
            cache
                .ofports_of_bridge("br0")
                .into_iter()
                .collect::<Vec<_>>(),
            vec![7, 9]
        );
        assert_eq!(cache.interface("vvport2").unwrap().ofport_request, Some(9));
        assert!(cache.ofports_of_bridge("br1").is_empty());
    }

    #[test]
    fn monitor_request_names_every_table() {
        let req = monitor_requests();
        for (table, _) in MONITORED {
            assert!(req.get(*table).is_some(), "{table}");
        }
        assert!(
            !req["Interface"]["columns"]
                .as_array()
                .unwrap()
                .contains(&json!("statistics"))
        );
    }
}
