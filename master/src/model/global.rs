//! `global` (key `name`, always `global`): forwarding mode, ARP mode, tag ranges, private subnet and
//! fabric type. Creating it builds the VLAN/VXLAN pools; updates re-size them only if every tag in use
//! stays inside the new range, and refuse a forwarding-mode change while tags are in use.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{Bgp, Network, Object, list_with_prefix, load, validate};
use crate::error::{Error, Result};
use crate::resources::tags::{
    AutoVlanCfg, AutoVlanOper, AutoVxlanCfg, AutoVxlanOper, TagKind, VlanPool, VxlanPool,
    format_tag_list, parse_tag_ranges,
};
use crate::state::global::AutoRanges;
use crate::state::{GlobConfig, GlobalCfg, GlobalOper};
use crate::store::{Tx, keys};

pub const DEFAULT_VLANS: &str = "1-4094";
pub const DEFAULT_VXLANS: &str = "1-10000";
pub const DEFAULT_PVT_SUBNET: &str = "172.19.0.0/16";
pub const DEFAULT_ARP_MODE: &str = "proxy";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Global {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub key: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(rename = "networkInfraType", skip_serializing_if = "String::is_empty")]
    pub network_infra_type: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub vlans: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub vxlans: String,
    #[serde(rename = "fwdMode", skip_serializing_if = "String::is_empty")]
    pub fwd_mode: String,
    #[serde(rename = "arpMode", skip_serializing_if = "String::is_empty")]
    pub arp_mode: String,
    #[serde(rename = "pvtSubnet", skip_serializing_if = "String::is_empty")]
    pub pvt_subnet: String,
}

impl Global {
    /// The object netmaster creates at leader start when none exists.
    pub fn defaults(fwd_mode: &str, infra: &str) -> Self {
        Global {
            key: "global".into(),
            name: "global".into(),
            network_infra_type: infra.to_string(),
            vlans: DEFAULT_VLANS.into(),
            vxlans: DEFAULT_VXLANS.into(),
            fwd_mode: fwd_mode.to_string(),
            arp_mode: DEFAULT_ARP_MODE.into(),
            pvt_subnet: DEFAULT_PVT_SUBNET.into(),
        }
    }

    pub fn is_aci(&self) -> bool {
        self.network_infra_type.starts_with("aci")
    }
}

fn vlan_cfg_key() -> String {
    keys::state(keys::category::AUTO_VLAN, "global")
}
fn vlan_oper_key() -> String {
    keys::oper(keys::category::AUTO_VLAN, "global")
}
fn vxlan_cfg_key() -> String {
    keys::state(keys::category::AUTO_VXLAN, "global")
}
/// The keys of the pool a network of `encap` takes its tag from (read ahead by a batch).
pub fn pool_keys(encap: &str) -> [String; 2] {
    if encap == "vlan" {
        [vlan_cfg_key(), vlan_oper_key()]
    } else {
        [vxlan_cfg_key(), vxlan_oper_key()]
    }
}

fn vxlan_oper_key() -> String {
    keys::oper(keys::category::AUTO_VXLAN, "global")
}

/// The stored global object, if any.
pub async fn current(tx: &mut Tx<'_>) -> Result<Option<Global>> {
    load::<Global>(tx, "global").await
}

/// The VLAN pool; `Conflict` if global configuration has not been created.
pub async fn vlan_pool(tx: &mut Tx<'_>) -> Result<VlanPool> {
    let cfg = tx
        .get::<AutoVlanCfg>(&vlan_cfg_key(), "AutoVLANCfgResource")
        .await?;
    let oper = tx
        .get::<AutoVlanOper>(&vlan_oper_key(), "AutoVLANOperResource")
        .await?;
    match (cfg, oper) {
        (Some(cfg), Some(oper)) => Ok(VlanPool { cfg, oper }),
        _ => Err(Error::conflict(
            "Global configuration is not ready: no vlan resource",
        )),
    }
}

pub fn save_vlan_pool(tx: &mut Tx<'_>, pool: &VlanPool) -> Result<()> {
    tx.put(&vlan_cfg_key(), "AutoVLANCfgResource", &pool.cfg)?;
    tx.put(&vlan_oper_key(), "AutoVLANOperResource", &pool.oper)?;
    Ok(())
}

/// The VXLAN pool; `Conflict` if global configuration has not been created.
pub async fn vxlan_pool(tx: &mut Tx<'_>) -> Result<VxlanPool> {
    let cfg = tx
        .get::<AutoVxlanCfg>(&vxlan_cfg_key(), "AutoVXLANCfgResource")
        .await?;
    let oper = tx
        .get::<AutoVxlanOper>(&vxlan_oper_key(), "AutoVXLANOperResource")
        .await?;
    match (cfg, oper) {
        (Some(cfg), Some(oper)) => Ok(VxlanPool { cfg, oper }),
        _ => Err(Error::conflict(
            "Global configuration is not ready: no vxlan resource",
        )),
    }
}

pub fn save_vxlan_pool(tx: &mut Tx<'_>, pool: &VxlanPool) -> Result<()> {
    tx.put(&vxlan_cfg_key(), "AutoVXLANCfgResource", &pool.cfg)?;
    tx.put(&vxlan_oper_key(), "AutoVXLANOperResource", &pool.oper)?;
    Ok(())
}

fn write_state(tx: &mut Tx<'_>, g: &Global, free_vxlans_start: u32) -> Result<()> {
    tx.put(
        &GlobalCfg::key(),
        GlobalCfg::KIND,
        &GlobalCfg {
            id: "global".into(),
            auto: AutoRanges {
                VLANs: g.vlans.clone(),
                VXLANs: g.vxlans.clone(),
            },
        },
    )?;
    tx.put(
        &GlobalOper::key(),
        GlobalOper::KIND,
        &GlobalOper {
            id: "global".into(),
            default_network: String::new(),
            free_vxlans_start,
        },
    )?;
    tx.put(
        &GlobConfig::key(),
        GlobConfig::KIND,
        &GlobConfig {
            id: "config".into(),
            nw_infra_type: if g.network_infra_type.is_empty() {
                "default".into()
            } else {
                g.network_infra_type.clone()
            },
            fwd_mode: g.fwd_mode.clone(),
            arp_mode: g.arp_mode.clone(),
            pvt_subnet: g.pvt_subnet.clone(),
        },
    )?;
    Ok(())
}

fn single_range(
    field: &str,
    text: &str,
    kind: TagKind,
) -> Result<crate::resources::tags::TagRange> {
    if !text.contains('-') {
        return Err(Error::invalid(
            field,
            format!("{text:?} must be a range \"min-max\""),
        ));
    }
    let ranges = parse_tag_ranges(text, kind)?;
    match ranges.as_slice() {
        [one] => Ok(*one),
        _ => Err(Error::invalid(field, "must be a single range \"min-max\"")),
    }
}

impl Object for Global {
    const TYPE: &'static str = "global";
    const PLURAL: &'static str = "globals";

    fn derived_key(&self) -> String {
        self.name.clone()
    }
    fn key(&self) -> &str {
        &self.key
    }
    fn set_key(&mut self, key: String) {
        self.key = key;
    }
    fn normalize(&mut self) {
        if self.arp_mode.is_empty() {
            self.arp_mode = DEFAULT_ARP_MODE.into();
        }
        if self.pvt_subnet.is_empty() {
            self.pvt_subnet = DEFAULT_PVT_SUBNET.into();
        }
    }
    fn validate(&self) -> Result<()> {
        validate::one_of("name", &self.name, &["global"])?;
        validate::one_of(
            "networkInfraType",
            &self.network_infra_type,
            &["", "default", "aci", "aci-opflex"],
        )?;
        single_range("vlans", &self.vlans, TagKind::Vlan)?;
        single_range("vxlans", &self.vxlans, TagKind::Vxlan)?;
        validate::one_of("fwdMode", &self.fwd_mode, &["", "bridge", "routing"])?;
        validate::one_of("arpMode", &self.arp_mode, &["", "proxy", "flood"])?;
        let (ip, len) = self
            .pvt_subnet
            .split_once('/')
            .ok_or_else(|| Error::invalid("pvtSubnet", "must be IPv4/16"))?;
        validate::optional_ipv4("pvtSubnet", ip)?;
        if len != "16" || ip.is_empty() {
            return Err(Error::invalid(
                "pvtSubnet",
                format!("{:?} must be IPv4/16", self.pvt_subnet),
            ));
        }
        Ok(())
    }
    fn keep_links(&mut self, _stored: &Self) {}

    async fn create(tx: &mut Tx<'_>, obj: &mut Self) -> Result<()> {
        let vlans = parse_tag_ranges(&obj.vlans, TagKind::Vlan)?;
        let vxlan = single_range("vxlans", &obj.vxlans, TagKind::Vxlan)?;
        let vlan_pool = VlanPool::new(&vlans);
        let vxlan_pool = VxlanPool::new(vxlan);
        save_vlan_pool(tx, &vlan_pool)?;
        save_vxlan_pool(tx, &vxlan_pool)?;
        write_state(tx, obj, vxlan_pool.cfg.free_vxlans_start)
    }

    async fn update(tx: &mut Tx<'_>, old: &Self, new: &mut Self) -> Result<()> {
        let mut vlan_pool = vlan_pool(tx).await?;
        let mut vxlan_pool = vxlan_pool(tx).await?;
        if new.fwd_mode != old.fwd_mode {
            let (nv, nx) = (vlan_pool.in_use().len(), vxlan_pool.in_use().len());
            if nv > 0 || nx > 0 {
                return Err(Error::conflict(format!(
                    "Unable to update forwarding mode due to existing {nv} vlans and {nx} vxlans"
                )));
            }
            if old.fwd_mode == "routing" && !list_with_prefix::<Bgp>(tx, "").await?.is_empty() {
                return Err(Error::conflict(
                    "Unable to update forwarding mode: please delete existing Bgp configs",
                ));
            }
        }
        if new.network_infra_type != old.network_infra_type
            && !list_with_prefix::<Network>(tx, "").await?.is_empty()
        {
            return Err(Error::conflict(
                "Unable to update networkInfraType: networks exist",
            ));
        }
        if new.pvt_subnet != old.pvt_subnet
            && !list_with_prefix::<Network>(tx, "").await?.is_empty()
        {
            return Err(Error::conflict(
                "Unable to update private subnet: networks exist",
            ));
        }
        if new.vlans != old.vlans {
            vlan_pool = vlan_pool.resize(&parse_tag_ranges(&new.vlans, TagKind::Vlan)?)?;
            save_vlan_pool(tx, &vlan_pool)?;
        }
        if new.vxlans != old.vxlans {
            vxlan_pool = vxlan_pool.resize(single_range("vxlans", &new.vxlans, TagKind::Vxlan)?)?;
            save_vxlan_pool(tx, &vxlan_pool)?;
        }
        write_state(tx, new, vxlan_pool.cfg.free_vxlans_start)
    }

    async fn delete(tx: &mut Tx<'_>, _obj: &Self) -> Result<()> {
        let n = list_with_prefix::<Network>(tx, "").await?.len();
        if n > 0 {
            return Err(Error::conflict(format!(
                "cannot delete global configuration: {n} networks exist"
            )));
        }
        for key in [
            vlan_cfg_key(),
            vlan_oper_key(),
            vxlan_cfg_key(),
            vxlan_oper_key(),
            GlobalCfg::key(),
            GlobalOper::key(),
            GlobConfig::key(),
        ] {
            tx.delete(&key);
        }
        Ok(())
    }

    async fn oper(tx: &mut Tx<'_>, _obj: &Self) -> Result<Value> {
        let networks = list_with_prefix::<Network>(tx, "").await?.len();
        let vlans = vlan_pool(tx).await?;
        let vxlans = vxlan_pool(tx).await?;
        Ok(json!({
            "numNetworks": networks,
            "vlansInUse": format_tag_list(&vlans.in_use()),
            "vxlansInUse": format_tag_list(&vxlans.in_use()),
            "freeVXLANsStart": vxlans.cfg.free_vxlans_start,
        }))
    }
}
