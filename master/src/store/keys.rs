//! The `/contiv.io/...` key layout (reference §1.1, §1.3). Every key netmaster reads or writes is built here.

/// Prefix of the REST model objects: `/contiv.io/obj/modeldb/<type>/<key>`.
pub const MODELDB: &str = "/contiv.io/obj/modeldb/";
/// Config state written by netmaster for netplugin.
pub const STATE: &str = "/contiv.io/state/";
/// Oper state.
pub const OPER: &str = "/contiv.io/oper/";
/// Service registry prefix: `/contiv.io/service/<name>/<host>:<port>`.
pub const SERVICE: &str = "/contiv.io/service/";
/// The netmaster leader lock.
pub const LEADER_LOCK: &str = "/contiv.io/lock/netmaster/leader";
/// netmaster's own copy of the global settings that netplugin reads.
pub const MASTER_GLOBAL_CONFIG: &str = "/contiv.io/master/config/global";

/// `/contiv.io/obj/modeldb/<type>/` for one object type.
pub fn model_prefix(kind: &str) -> String {
    format!("{MODELDB}{kind}/")
}

/// `/contiv.io/obj/modeldb/<type>/<key>`.
pub fn model(kind: &str, key: &str) -> String {
    format!("{MODELDB}{kind}/{key}")
}

/// `/contiv.io/state/<category>/` prefix.
pub fn state_prefix(category: &str) -> String {
    format!("{STATE}{category}/")
}

/// `/contiv.io/state/<category>/<id>`.
pub fn state(category: &str, id: &str) -> String {
    format!("{STATE}{category}/{id}")
}

/// `/contiv.io/oper/<category>/<id>`.
pub fn oper(category: &str, id: &str) -> String {
    format!("{OPER}{category}/{id}")
}

/// `/contiv.io/service/<name>/<host>:<port>`.
pub fn service(name: &str, host: &str, port: u16) -> String {
    format!("{SERVICE}{name}/{host}:{port}")
}

/// Category names under `/contiv.io/state/`.
pub mod category {
    pub const NETS: &str = "nets";
    pub const EPS: &str = "eps";
    pub const EPGS: &str = "endpointGroups";
    pub const POLICY: &str = "policy";
    pub const POLICY_RULE: &str = "policyRule";
    pub const SERVICE_LB: &str = "serviceLB";
    pub const PROVIDER: &str = "provider";
    pub const BGP: &str = "bgp";
    pub const GLOBAL: &str = "global";
    pub const AUTO_VLAN: &str = "auto-vlan";
    pub const AUTO_VXLAN: &str = "auto-vxlan";
    /// Not in Contiv: persisted EPG id pool (Contiv kept an in-memory counter, §2.6).
    pub const EPG_IDS: &str = "epg-ids";
    /// Not in Contiv: one key per network's IPv4 subnet, `<tenant>/<the subnet's prefix bits as
    /// 0/1>`, so an overlap check reads a few keys instead of every network of the tenant.
    pub const SUBNETS: &str = "subnets";
    /// Not in Contiv: per tenant, the IPv4 prefix lengths its networks' subnets have (at most
    /// 21 numbers), so an overlap check reads the index keys of containing subnets only at
    /// lengths in use instead of at every length.
    pub const SUBNET_LENGTHS: &str = "subnetLengths";
}
