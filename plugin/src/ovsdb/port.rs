//! Port-level operations of the OVS driver (reference §4.2): access, trunk and internal ports,
//! VXLAN VTEP ports, ingress policing, and the OpenFlow port number of an interface.
//!
//! [`OvsdbClient::ensure_port`] is idempotent and keeps what already exists: a port that
//! matches its spec is left untouched, one that differs is updated in place (its uuids and
//! usually its OpenFlow port number stay), and only a port sitting on another bridge is
//! re-created. This is what lets a restarted netplugin keep pods' traffic flowing.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::bridge::{CACHE_SYNC, external_ids_datum};
use super::cache::{Cache, InterfaceRow, PortRow};
use super::client::OvsdbClient;
use super::datum::{Uuid, empty_set, named_uuid, set, string_map};
use super::error::OvsdbError;
use super::op::{Condition, Mutation, Operation, row};

/// Key of `external_ids` holding the endpoint a port belongs to.
pub const ENDPOINT_ID_KEY: &str = "endpoint-id";

/// UDP port of VXLAN (`options:dst_port`).
pub const VXLAN_UDP_PORT: u16 = 4789;

/// What sits behind the port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PortKind {
    /// An existing network device (the host end of a veth, an uplink NIC).
    System,
    /// A device ovs-vswitchd creates (infra/host ports such as `contivh0`).
    Internal,
    /// A VXLAN tunnel endpoint; the VNI comes from the flow (`key=flow`).
    Vxlan {
        remote_ip: IpAddr,
        local_ip: Option<IpAddr>,
        dst_port: u16,
    },
}

impl PortKind {
    fn type_name(&self) -> &'static str {
        match self {
            PortKind::System => "",
            PortKind::Internal => "internal",
            PortKind::Vxlan { .. } => "vxlan",
        }
    }

    fn options(&self) -> BTreeMap<String, String> {
        let mut options = BTreeMap::new();
        if let PortKind::Vxlan {
            remote_ip,
            local_ip,
            dst_port,
        } = self
        {
            options.insert("remote_ip".into(), remote_ip.to_string());
            if let Some(local) = local_ip {
                options.insert("local_ip".into(), local.to_string());
            }
            options.insert("key".into(), "flow".into());
            options.insert("tos".into(), "inherit".into());
            options.insert("dst_port".into(), dst_port.to_string());
        }
        options
    }
}

/// VLAN handling of the port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VlanMode {
    /// Untagged on the wire, carrying VLAN `tag` inside the bridge.
    Access(u16),
    /// Tagged; the listed VLANs, or all of them when empty.
    Trunk(Vec<u16>),
}

/// Ingress policing of an interface (`ingress_policing_rate` in kbit/s,
/// `ingress_policing_burst` in kbit). A rate of 0 disables policing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Policing {
    pub rate_kbps: u32,
    pub burst_kb: u32,
}

/// The desired configuration of a single-interface port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortSpec {
    /// Port and interface name.
    pub name: String,
    pub kind: PortKind,
    pub vlan: VlanMode,
    pub policing: Policing,
    /// Written to both the Port and the Interface row.
    pub external_ids: BTreeMap<String, String>,
    /// The OpenFlow port number asked of ovs-vswitchd (`ofport_request`), so that flows
    /// naming the port can be installed before it has numbered the port. Written only when
    /// the interface is created: an existing port keeps its number, and a differing request
    /// does not make it "not match".
    pub ofport_request: Option<u32>,
}

impl PortSpec {
    /// An access port on an existing device (a pod's veth end) carrying VLAN `tag`.
    pub fn access(name: impl Into<String>, tag: u16) -> Self {
        PortSpec {
            name: name.into(),
            kind: PortKind::System,
            vlan: VlanMode::Access(tag),
            policing: Policing::default(),
            external_ids: BTreeMap::new(),
            ofport_request: None,
        }
    }

    /// A trunk port on an existing device (an uplink) carrying every VLAN.
    pub fn trunk(name: impl Into<String>) -> Self {
        PortSpec {
            vlan: VlanMode::Trunk(Vec::new()),
            ..PortSpec::access(name, 0)
        }
    }

    /// An internal port (created by ovs-vswitchd) carrying VLAN `tag`.
    pub fn internal(name: impl Into<String>, tag: u16) -> Self {
        PortSpec {
            kind: PortKind::Internal,
            ..PortSpec::access(name, tag)
        }
    }

    /// The VTEP port towards `remote_ip`, named by [`vtep_port_name`].
    pub fn vtep(remote_ip: IpAddr, local_ip: Option<IpAddr>) -> Self {
        PortSpec {
            name: vtep_port_name(remote_ip),
            kind: PortKind::Vxlan {
                remote_ip,
                local_ip,
                dst_port: VXLAN_UDP_PORT,
            },
            ..PortSpec::trunk(String::new())
        }
    }

    /// Record the endpoint this port belongs to.
    pub fn endpoint_id(mut self, id: impl Into<String>) -> Self {
        self.external_ids
            .insert(ENDPOINT_ID_KEY.to_owned(), id.into());
        self
    }

    /// Police ingress traffic.
    pub fn policing(mut self, policing: Policing) -> Self {
        self.policing = policing;
        self
    }

    /// Ask for OpenFlow port number `ofport` when the interface is created.
    pub fn ofport_request(mut self, ofport: u32) -> Self {
        self.ofport_request = Some(ofport);
        self
    }

    fn port_columns(&self) -> Map<String, Value> {
        let (mode, tag, trunks) = match &self.vlan {
            VlanMode::Access(tag) => ("access", set([json!(tag)]), empty_set()),
            VlanMode::Trunk(vlans) => ("trunk", empty_set(), set(vlans.iter().map(|v| json!(v)))),
        };
        row([
            ("vlan_mode", json!(mode)),
            ("tag", tag),
            ("trunks", trunks),
            ("external_ids", external_ids_datum(&self.external_ids)),
        ])
    }

    fn interface_columns(&self) -> Map<String, Value> {
        let options = self.kind.options();
        row([
            ("type", json!(self.kind.type_name())),
            (
                "options",
                string_map(options.iter().map(|(k, v)| (k.as_str(), v.as_str()))),
            ),
            ("ingress_policing_rate", json!(self.policing.rate_kbps)),
            ("ingress_policing_burst", json!(self.policing.burst_kb)),
            ("external_ids", external_ids_datum(&self.external_ids)),
        ])
    }

    fn port_matches(&self, port: &PortRow) -> bool {
        let vlan_ok = match &self.vlan {
            VlanMode::Access(tag) => {
                port.vlan_mode.as_deref() == Some("access")
                    && port.tag == Some(*tag)
                    && port.trunks.is_empty()
            }
            VlanMode::Trunk(vlans) => {
                let mut have = port.trunks.clone();
                let mut want = vlans.clone();
                have.sort_unstable();
                want.sort_unstable();
                port.vlan_mode.as_deref() == Some("trunk") && port.tag.is_none() && have == want
            }
        };
        vlan_ok && port.external_ids == self.external_ids
    }

    fn interface_matches(&self, intf: &InterfaceRow) -> bool {
        intf.kind == self.kind.type_name()
            && intf.options == self.kind.options()
            && intf.ingress_policing_rate == i64::from(self.policing.rate_kbps)
            && intf.ingress_policing_burst == i64::from(self.policing.burst_kb)
            && intf.external_ids == self.external_ids
    }
}

/// The name of the VTEP port towards `remote`: `vxif` followed by the address without its
/// separators (`192.168.2.11` → `vxif192168211`), as Contiv names it. Interface names are
/// limited to 15 bytes by the kernel, but VTEP ports never become kernel devices.
pub fn vtep_port_name(remote: IpAddr) -> String {
    let digits: String = remote
        .to_string()
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect();
    format!("vxif{digits}")
}

/// The rows behind a port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortRef {
    pub port: Uuid,
    pub interface: Uuid,
}

/// The port called `name` on `bridge`, if it is a single-interface port matching `spec`.
fn matching_port(cache: &Cache, bridge: &str, spec: &PortSpec) -> Option<PortRef> {
    let port = cache.port(&spec.name)?;
    let [intf_uuid] = port.interfaces.as_slice() else {
        return None;
    };
    let intf = cache.interface_by_uuid(intf_uuid)?;
    let on_bridge = cache.bridge_of_port(&port.uuid)?.name == bridge;
    (on_bridge
        && intf.name == spec.name
        && spec.port_matches(&port)
        && spec.interface_matches(&intf))
    .then(|| PortRef {
        port: port.uuid.clone(),
        interface: intf.uuid,
    })
}

impl OvsdbClient {
    /// Make port `spec.name` exist on `bridge` as specified, changing as little as possible
    /// (see the module doc). Returns the port's rows once the cache shows them.
    pub async fn ensure_port(&self, bridge: &str, spec: &PortSpec) -> Result<PortRef, OvsdbError> {
        let plan = self.read(|c| -> Result<Option<Vec<Operation>>, OvsdbError> {
            let target = c.bridge(bridge).ok_or_else(|| OvsdbError::NotFound {
                table: "Bridge",
                name: bridge.to_owned(),
            })?;
            if matching_port(c, bridge, spec).is_some() {
                return Ok(None);
            }
            let Some(port) = c.port(&spec.name) else {
                return Ok(Some(insert_ops(&target.uuid, spec)));
            };
            let owner = c.bridge_of_port(&port.uuid);
            let single_interface = match port.interfaces.as_slice() {
                [u] => c.interface_by_uuid(u).filter(|i| i.name == spec.name),
                _ => None,
            };
            match (owner, single_interface) {
                (Some(owner), Some(intf)) if owner.uuid == target.uuid => {
                    Ok(Some(update_ops(&port.uuid, &intf.uuid, spec)))
                }
                (owner, _) => {
                    // On another bridge, or a bonded port of the same name: replace it.
                    let mut ops = Vec::new();
                    if let Some(owner) = owner {
                        ops.push(detach_op(&owner.uuid, &port.uuid));
                    }
                    ops.push(Operation::Delete {
                        table: "Port",
                        conditions: vec![Condition::uuid(&port.uuid)],
                    });
                    ops.extend(insert_ops(&target.uuid, spec));
                    Ok(Some(ops))
                }
            }
        })?;
        if let Some(ops) = plan {
            self.transact(&ops).await?;
        }
        self.wait_for(
            &format!("port {} on {bridge} in the cache", spec.name),
            CACHE_SYNC,
            |c| matching_port(c, bridge, spec),
        )
        .await
    }

    /// Delete the port called `name` (and its interfaces) from whatever bridge holds it.
    /// Returns false if there was no such port.
    pub async fn delete_port(&self, name: &str) -> Result<bool, OvsdbError> {
        let Some((port, owner)) = self.read(|c| {
            let port = c.port(name)?;
            let owner = c.bridge_of_port(&port.uuid);
            Some((port, owner))
        }) else {
            return Ok(false);
        };
        let mut ops = Vec::new();
        if let Some(owner) = owner {
            ops.push(detach_op(&owner.uuid, &port.uuid));
        }
        ops.push(Operation::Delete {
            table: "Port",
            conditions: vec![Condition::uuid(&port.uuid)],
        });
        self.transact(&ops).await?;
        self.wait_for(
            &format!("port {name} gone from the cache"),
            CACHE_SYNC,
            |c| c.port(name).is_none().then_some(()),
        )
        .await?;
        Ok(true)
    }

    /// Change the ingress policing of interface `name`.
    pub async fn set_ingress_policing(
        &self,
        name: &str,
        policing: Policing,
    ) -> Result<(), OvsdbError> {
        if self.read(|c| c.interface(name)).is_none() {
            return Err(OvsdbError::NotFound {
                table: "Interface",
                name: name.to_owned(),
            });
        }
        self.transact(&[Operation::Update {
            table: "Interface",
            conditions: vec![Condition::name(name)],
            row: row([
                ("ingress_policing_rate", json!(policing.rate_kbps)),
                ("ingress_policing_burst", json!(policing.burst_kb)),
            ]),
        }])
        .await?;
        self.wait_for("policing in the cache", CACHE_SYNC, |c| {
            let i = c.interface(name)?;
            (i.ingress_policing_rate == i64::from(policing.rate_kbps)
                && i.ingress_policing_burst == i64::from(policing.burst_kb))
            .then_some(())
        })
        .await
    }

    /// The OpenFlow port number of interface `name`, waiting (on monitor updates, not by
    /// polling) until ovs-vswitchd has assigned it. Fails at once with
    /// [`OvsdbError::InterfaceFailed`] if ovs-vswitchd reports it cannot create the interface.
    pub async fn wait_ofport(&self, name: &str, timeout: Duration) -> Result<u32, OvsdbError> {
        self.wait_for(
            &format!("an OpenFlow port number for {name}"),
            timeout,
            |c| {
                let intf = c.interface(name)?;
                match intf.ofport {
                    Some(n) if n > 0 => u32::try_from(n).ok().map(Ok),
                    Some(-1) => intf.error.map(|error| {
                        Err(OvsdbError::InterfaceFailed {
                            name: name.to_owned(),
                            error,
                        })
                    }),
                    _ => None,
                }
            },
        )
        .await?
    }
}

/// Remove `port` from `bridge`'s port set.
fn detach_op(bridge: &Uuid, port: &Uuid) -> Operation {
    Operation::Mutate {
        table: "Bridge",
        conditions: vec![Condition::uuid(bridge)],
        mutations: vec![Mutation::delete("ports", set([port.to_json()]))],
    }
}

/// Insert the interface and port of `spec` and attach the port to `bridge`.
fn insert_ops(bridge: &Uuid, spec: &PortSpec) -> Vec<Operation> {
    let mut interface = spec.interface_columns();
    interface.insert("name".into(), json!(spec.name));
    if let Some(ofport) = spec.ofport_request {
        interface.insert("ofport_request".into(), json!(ofport));
    }
    let mut port = spec.port_columns();
    port.insert("name".into(), json!(spec.name));
    port.insert("interfaces".into(), set([named_uuid("iface")]));
    vec![
        Operation::Insert {
            table: "Interface",
            row: interface,
            uuid_name: Some("iface".into()),
        },
        Operation::Insert {
            table: "Port",
            row: port,
            uuid_name: Some("port".into()),
        },
        Operation::Mutate {
            table: "Bridge",
            conditions: vec![Condition::uuid(bridge)],
            mutations: vec![Mutation::insert("ports", set([named_uuid("port")]))],
        },
    ]
}

/// Rewrite the columns of an existing port and interface in place.
fn update_ops(port: &Uuid, interface: &Uuid, spec: &PortSpec) -> Vec<Operation> {
    vec![
        Operation::Update {
            table: "Port",
            conditions: vec![Condition::uuid(port)],
            row: spec.port_columns(),
        },
        Operation::Update {
            table: "Interface",
            conditions: vec![Condition::uuid(interface)],
            row: spec.interface_columns(),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn vtep_name_drops_the_dots() {
        assert_eq!(
            vtep_port_name(IpAddr::V4(Ipv4Addr::new(192, 168, 2, 11))),
            "vxif192168211"
        );
    }

    #[test]
    fn access_port_insert_sets_tag_and_endpoint() {
        let spec = PortSpec::access("vvport1", 10).endpoint_id("ep-1");
        let ops = insert_ops(&Uuid("br".into()), &spec);
        let port = ops[1].to_json();
        assert_eq!(port["row"]["vlan_mode"], json!("access"));
        assert_eq!(port["row"]["tag"], json!(["set", [10]]));
        assert_eq!(
            port["row"]["interfaces"],
            json!(["set", [["named-uuid", "iface"]]])
        );
        let intf = ops[0].to_json();
        assert_eq!(intf["row"]["type"], json!(""));
        assert_eq!(
            intf["row"]["external_ids"],
            json!(["map", [["endpoint-id", "ep-1"]]])
        );
    }

    #[test]
    fn vtep_options_use_flow_key() {
        let spec = PortSpec::vtep(
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))),
        );
        let cols = spec.interface_columns();
        assert_eq!(cols["type"], json!("vxlan"));
        let options = crate::ovsdb::datum::string_map_entries(&cols["options"]);
        assert_eq!(options["key"], "flow");
        assert_eq!(options["remote_ip"], "10.0.0.2");
        assert_eq!(options["local_ip"], "10.0.0.1");
        assert_eq!(options["dst_port"], "4789");
        assert_eq!(spec.port_columns()["vlan_mode"], json!("trunk"));
    }
}
