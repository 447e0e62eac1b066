//! `Bgp` (key `hostname`): the BGP peering of one host in routing+VLAN mode, written to
//! `/contiv.io/state/bgp/<hostname>` for that host's netplugin. Refused in ACI mode.

use serde::{Deserialize, Serialize};

use super::{Object, global, validate};
use crate::error::{Error, Result};
use crate::state::BgpState;
use crate::store::Tx;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Bgp {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub key: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub hostname: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub routerip: String,
    #[serde(rename = "as", skip_serializing_if = "String::is_empty")]
    pub as_: String,
    #[serde(rename = "neighbor-as", skip_serializing_if = "String::is_empty")]
    pub neighbor_as: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub neighbor: String,
}

fn write_state(tx: &mut Tx<'_>, b: &Bgp) -> Result<()> {
    let state = BgpState {
        id: b.hostname.clone(),
        hostname: b.hostname.clone(),
        router_ip: b.routerip.clone(),
        as_: b.as_.clone(),
        neighbor_as: b.neighbor_as.clone(),
        neighbor: b.neighbor.clone(),
    };
    Ok(tx.put(&BgpState::key_for(&b.hostname), BgpState::KIND, &state)?)
}

async fn refuse_in_aci(tx: &mut Tx<'_>) -> Result<()> {
    if global::current(tx).await?.is_some_and(|g| g.is_aci()) {
        return Err(Error::conflict(
            "Bgp configuration is not supported in ACI mode",
        ));
    }
    Ok(())
}

impl Object for Bgp {
    const TYPE: &'static str = "Bgp";
    const PLURAL: &'static str = "Bgps";

    fn derived_key(&self) -> String {
        self.hostname.clone()
    }
    fn key(&self) -> &str {
        &self.key
    }
    fn set_key(&mut self, key: String) {
        self.key = key;
    }
    fn validate(&self) -> Result<()> {
        validate::name("hostname", &self.hostname, 256)?;
        let (ip, len) = self.routerip.split_once('/').ok_or_else(|| {
            Error::invalid("routerip", format!("{:?} must be IPv4/len", self.routerip))
        })?;
        let Some(router) = validate::optional_ipv4("routerip", ip)? else {
            return Err(Error::invalid("routerip", "is required"));
        };
        let len: i64 = len
            .parse()
            .map_err(|_| Error::invalid("routerip", "prefix length must be a number"))?;
        validate::range("routerip", len, 1, 32)?;
        if len < 31 {
            let host_bits = u32::MAX >> len;
            let bits = u32::from(router) & host_bits;
            if bits == 0 || bits == host_bits {
                return Err(Error::invalid(
                    "routerip",
                    format!(
                        "{} is the network or broadcast address of its subnet",
                        self.routerip
                    ),
                ));
            }
        }
        validate::max_len("as", &self.as_, 64)?;
        validate::max_len("neighbor-as", &self.neighbor_as, 64)?;
        let neighbor = validate::optional_ipv4("neighbor", &self.neighbor)?;
        // An AS number is 1..=4294967295 (RFC 6793; 0 is reserved). The host's own is
        // required; the neighbor's whenever there is a neighbor.
        let asn = |field: &str, v: &str, required: bool| -> Result<()> {
            if v.is_empty() && !required {
                return Ok(());
            }
            match v.parse::<u32>() {
                Ok(n) if n != 0 => Ok(()),
                _ => Err(Error::invalid(
                    field,
                    format!("{v:?} must be an AS number from 1 to 4294967295"),
                )),
            }
        };
        asn("as", &self.as_, true)?;
        asn("neighbor-as", &self.neighbor_as, neighbor.is_some())?;
        if neighbor == Some(router) {
            return Err(Error::invalid(
                "neighbor",
                format!("{} is this host's own router address", self.neighbor),
            ));
        }
        Ok(())
    }
    fn keep_links(&mut self, _stored: &Self) {}

    async fn create(tx: &mut Tx<'_>, obj: &mut Self) -> Result<()> {
        refuse_in_aci(tx).await?;
        write_state(tx, obj)
    }
    async fn update(tx: &mut Tx<'_>, _old: &Self, new: &mut Self) -> Result<()> {
        refuse_in_aci(tx).await?;
        write_state(tx, new)
    }
    async fn delete(tx: &mut Tx<'_>, obj: &Self) -> Result<()> {
        tx.delete(&BgpState::key_for(&obj.hostname));
        Ok(())
    }
}
