//! Bridge-level operations of the OVS driver (reference §4.2): create or reconcile a bridge
//! with its controller, delete it, keep key/value state in its `external_ids`, and wait for
//! ovs-vswitchd to apply the configuration.
//!
//! Every change is one transaction. Creating a bridge also creates its local port and
//! interface (type `internal`, named like the bridge), as `ovs-vsctl add-br` does, so the bridge
//! looks the same whichever tool made it.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use super::cache::{BridgeRow, Cache};
use super::client::OvsdbClient;
use super::datum::{Uuid, empty_set, named_uuid, set, string_map};
use super::error::OvsdbError;
use super::op::{Condition, Mutation, Operation, row};

/// How long to wait for the monitor cache to show the effect of our own transaction. The
/// server normally sends the update before the reply, so this only matters under load.
pub(crate) const CACHE_SYNC: Duration = Duration::from_secs(10);

/// The desired configuration of a bridge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BridgeSpec {
    pub name: String,
    /// `""` (the default: `system`), `"netdev"` (userspace) or `"dummy"` (tests).
    pub datapath_type: String,
    /// OpenFlow versions the bridge accepts.
    pub protocols: Vec<String>,
    /// Controller target such as `tcp:127.0.0.1:6633`; `None` for no controller.
    pub controller: Option<String>,
}

impl BridgeSpec {
    /// A bridge speaking OpenFlow 1.3 only, default datapath, no controller.
    pub fn new(name: impl Into<String>) -> Self {
        BridgeSpec {
            name: name.into(),
            datapath_type: String::new(),
            protocols: vec!["OpenFlow13".to_owned()],
            controller: None,
        }
    }

    /// Set the controller target.
    pub fn controller(mut self, target: impl Into<String>) -> Self {
        self.controller = Some(target.into());
        self
    }

    /// Set the datapath type.
    pub fn datapath_type(mut self, datapath_type: impl Into<String>) -> Self {
        self.datapath_type = datapath_type.into();
        self
    }
}

/// `fail_mode` of every bridge we create: without a controller connection the bridge drops
/// traffic instead of acting as a learning switch, so no flow we did not install ever forwards.
pub const FAIL_MODE: &str = "secure";

impl OvsdbClient {
    /// Create the bridge, or bring an existing one to `spec` without re-creating it (its uuid,
    /// ports and flows stay). Returns the bridge's uuid.
    pub async fn ensure_bridge(&self, spec: &BridgeSpec) -> Result<Uuid, OvsdbError> {
        let root = self
            .wait_for("the Open_vSwitch root row", CACHE_SYNC, |c| {
                c.root().map(|r| r.uuid)
            })
            .await?;
        let existing = self.read(|c| {
            c.bridge(&spec.name)
                .map(|b| (b.clone(), controllers(c, &b)))
        });
        let ops = match &existing {
            Some((bridge, targets)) => reconcile_ops(bridge, targets, spec),
            None => create_ops(&root, spec),
        };
        if let (true, Some((bridge, _))) = (ops.is_empty(), &existing) {
            return Ok(bridge.uuid.clone());
        }
        self.transact(&ops).await?;
        let name = spec.name.clone();
        let want = spec.clone();
        self.wait_for(
            &format!("bridge {name} in the cache"),
            CACHE_SYNC,
            move |c| {
                let bridge = c.bridge(&want.name)?;
                let targets = controllers(c, &bridge);
                reconcile_ops(&bridge, &targets, &want)
                    .is_empty()
                    .then_some(bridge.uuid)
            },
        )
        .await
    }

    /// Delete the bridge (its ports, interfaces and controller go with it). Returns false if
    /// there was no such bridge.
    pub async fn delete_bridge(&self, name: &str) -> Result<bool, OvsdbError> {
        let Some(bridge) = self.read(|c| c.bridge(name)) else {
            return Ok(false);
        };
        let Some(root) = self.read(|c| c.root().map(|r| r.uuid)) else {
            return Err(OvsdbError::NotFound {
                table: "Open_vSwitch",
                name: "root row".into(),
            });
        };
        self.transact(&[
            Operation::Delete {
                table: "Bridge",
                conditions: vec![Condition::uuid(&bridge.uuid)],
            },
            Operation::Mutate {
                table: "Open_vSwitch",
                conditions: vec![Condition::uuid(&root)],
                mutations: vec![Mutation::delete("bridges", set([bridge.uuid.to_json()]))],
            },
        ])
        .await?;
        self.wait_for(
            &format!("bridge {name} gone from the cache"),
            CACHE_SYNC,
            |c| c.bridge(name).is_none().then_some(()),
        )
        .await?;
        Ok(true)
    }

    /// Set keys in the bridge's `external_ids`, replacing their old values and leaving other
    /// keys alone.
    pub async fn set_bridge_external_ids(
        &self,
        bridge: &str,
        pairs: &[(&str, &str)],
    ) -> Result<(), OvsdbError> {
        if self.read(|c| c.bridge(bridge)).is_none() {
            return Err(OvsdbError::NotFound {
                table: "Bridge",
                name: bridge.to_owned(),
            });
        }
        // A map "insert" keeps the old value of an existing key, so delete the keys first;
        // both mutations run in order inside one operation.
        let keys = set(pairs.iter().map(|(k, _)| json!(k)));
        self.transact(&[Operation::Mutate {
            table: "Bridge",
            conditions: vec![Condition::name(bridge)],
            mutations: vec![
                Mutation::delete("external_ids", keys),
                Mutation::insert("external_ids", string_map(pairs.iter().copied())),
            ],
        }])
        .await?;
        self.wait_for("bridge external_ids in the cache", CACHE_SYNC, |c| {
            let b = c.bridge(bridge)?;
            pairs
                .iter()
                .all(|(k, v)| b.external_ids.get(*k).map(String::as_str) == Some(*v))
                .then_some(())
        })
        .await
    }

    /// One key of the bridge's `external_ids`, from the cache.
    pub fn bridge_external_id(&self, bridge: &str, key: &str) -> Option<String> {
        self.read(|c| c.bridge(bridge)?.external_ids.get(key).cloned())
    }

    /// Wait until ovs-vswitchd has applied every committed change (the `next_cfg`/`cur_cfg`
    /// handshake that `ovs-vsctl` uses without `--no-wait`).
    pub async fn sync_vswitchd(&self, timeout: Duration) -> Result<(), OvsdbError> {
        let root = self
            .read(|c| c.root().map(|r| r.uuid))
            .ok_or(OvsdbError::NotFound {
                table: "Open_vSwitch",
                name: "root row".into(),
            })?;
        let results = self
            .transact(&[
                Operation::Mutate {
                    table: "Open_vSwitch",
                    conditions: vec![Condition::uuid(&root)],
                    mutations: vec![Mutation::add("next_cfg", 1)],
                },
                Operation::Select {
                    table: "Open_vSwitch",
                    conditions: vec![Condition::uuid(&root)],
                    columns: vec!["next_cfg"],
                },
            ])
            .await?;
        let target = results
            .get(1)
            .and_then(|r| r.get("rows"))
            .and_then(|rows| rows.get(0))
            .and_then(|row| row.get("next_cfg"))
            .and_then(Value::as_i64)
            .ok_or_else(|| OvsdbError::UnexpectedReply {
                method: "transact".into(),
                problem: "select of next_cfg returned no row".into(),
            })?;
        self.wait_for("ovs-vswitchd to apply the configuration", timeout, |c| {
            c.root().filter(|r| r.cur_cfg >= target).map(|_| ())
        })
        .await
    }
}

/// The controller targets of `bridge`, from the cache.
fn controllers(cache: &Cache, bridge: &BridgeRow) -> Vec<String> {
    bridge
        .controller
        .iter()
        .filter_map(|u| cache.controller_by_uuid(u).map(|c| c.target))
        .collect()
}

/// Operations that create `spec` from nothing.
fn create_ops(root: &Uuid, spec: &BridgeSpec) -> Vec<Operation> {
    let mut ops = vec![
        Operation::Insert {
            table: "Interface",
            row: row([("name", json!(spec.name)), ("type", json!("internal"))]),
            uuid_name: Some("local_iface".into()),
        },
        Operation::Insert {
            table: "Port",
            row: row([
                ("name", json!(spec.name)),
                ("interfaces", set([named_uuid("local_iface")])),
            ]),
            uuid_name: Some("local_port".into()),
        },
    ];
    let mut bridge = row([
        ("name", json!(spec.name)),
        ("fail_mode", json!(FAIL_MODE)),
        ("protocols", set(spec.protocols.iter().map(|p| json!(p)))),
        ("datapath_type", json!(spec.datapath_type)),
        ("ports", set([named_uuid("local_port")])),
    ]);
    if let Some(target) = &spec.controller {
        ops.push(Operation::Insert {
            table: "Controller",
            row: row([("target", json!(target))]),
            uuid_name: Some("controller".into()),
        });
        bridge.insert("controller".into(), set([named_uuid("controller")]));
    }
    ops.push(Operation::Insert {
        table: "Bridge",
        row: bridge,
        uuid_name: Some("bridge".into()),
    });
    ops.push(Operation::Mutate {
        table: "Open_vSwitch",
        conditions: vec![Condition::uuid(root)],
        mutations: vec![Mutation::insert("bridges", set([named_uuid("bridge")]))],
    });
    ops
}

/// Operations that bring an existing bridge to `spec`; empty when it already matches.
fn reconcile_ops(bridge: &BridgeRow, targets: &[String], spec: &BridgeSpec) -> Vec<Operation> {
    let mut changes = serde_json::Map::new();
    if bridge.fail_mode.as_deref() != Some(FAIL_MODE) {
        changes.insert("fail_mode".into(), json!(FAIL_MODE));
    }
    let mut have: Vec<&String> = bridge.protocols.iter().collect();
    let mut want: Vec<&String> = spec.protocols.iter().collect();
    have.sort();
    want.sort();
    if have != want {
        changes.insert(
            "protocols".into(),
            set(spec.protocols.iter().map(|p| json!(p))),
        );
    }
    if bridge.datapath_type != spec.datapath_type {
        changes.insert("datapath_type".into(), json!(spec.datapath_type));
    }
    let mut ops = Vec::new();
    let want_targets: Vec<String> = spec.controller.iter().cloned().collect();
    if targets != want_targets.as_slice() {
        match &spec.controller {
            Some(target) => {
                ops.push(Operation::Insert {
                    table: "Controller",
                    row: row([("target", json!(target))]),
                    uuid_name: Some("controller".into()),
                });
                changes.insert("controller".into(), set([named_uuid("controller")]));
            }
            None => {
                changes.insert("controller".into(), empty_set());
            }
        }
    }
    if !changes.is_empty() {
        ops.push(Operation::Update {
            table: "Bridge",
            conditions: vec![Condition::uuid(&bridge.uuid)],
            row: changes,
        });
    }
    ops
}

/// External ids are a plain string map; exposed for the port module.
pub(crate) fn external_ids_datum(ids: &BTreeMap<String, String>) -> Value {
    string_map(ids.iter().map(|(k, v)| (k.as_str(), v.as_str())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_is_one_transaction_with_local_port_and_controller() {
        let spec = BridgeSpec::new("contivVxlanBridge")
            .controller("tcp:127.0.0.1:6633")
            .datapath_type("netdev");
        let ops = create_ops(&Uuid("root".into()), &spec);
        let names: Vec<_> = ops.iter().map(|o| (o.name(), o.table())).collect();
        assert_eq!(
            names,
            vec![
                ("insert", "Interface"),
                ("insert", "Port"),
                ("insert", "Controller"),
                ("insert", "Bridge"),
                ("mutate", "Open_vSwitch")
            ]
        );
        let bridge = ops[3].to_json();
        assert_eq!(bridge["row"]["fail_mode"], json!("secure"));
        assert_eq!(bridge["row"]["protocols"], json!(["set", ["OpenFlow13"]]));
        assert_eq!(bridge["row"]["datapath_type"], json!("netdev"));
    }

    #[test]
    fn matching_bridge_needs_no_change_and_drift_is_repaired_in_place() {
        let spec = BridgeSpec::new("br0").controller("tcp:127.0.0.1:6633");
        let mut bridge = BridgeRow {
            uuid: Uuid("b".into()),
            name: "br0".into(),
            ports: vec![],
            controller: vec![Uuid("c".into())],
            fail_mode: Some("secure".into()),
            protocols: vec!["OpenFlow13".into()],
            datapath_type: String::new(),
            external_ids: BTreeMap::new(),
        };
        let targets = vec!["tcp:127.0.0.1:6633".to_string()];
        assert!(reconcile_ops(&bridge, &targets, &spec).is_empty());
        bridge.fail_mode = None;
        let ops = reconcile_ops(&bridge, &["tcp:127.0.0.1:9".to_string()], &spec);
        assert_eq!(ops.len(), 2);
        let update = ops[1].to_json();
        assert_eq!(update["op"], json!("update"));
        assert_eq!(update["row"]["fail_mode"], json!("secure"));
        assert_eq!(update["where"], json!([["_uuid", "==", ["uuid", "b"]]]));
    }
}
