//! Flow priorities as named bands. Within a table a higher band always wins; the policy band
//! is `POLICY_BASE + rule priority`, so rules stay above the miss flow (priority 0, owned by
//! `ofctrl`) and order among themselves by their own priority.

/// A local endpoint's packets through its meter (table 0): below the input table's drops and
/// punts (`MATCH`).
pub const METER: u16 = 10;
/// Port-to-VLAN classification of a local endpoint (table 1).
pub const PORT_VLAN: u16 = 10;
/// Service watch flows (table 3): below the per-client DNAT flows (`MATCH`).
pub const SERVICE_WATCH: u16 = 10;
/// Per-VLAN flood flows (table 9, VXLAN bridge).
pub const FLOOD: u16 = 10;
/// Exact matches: known destinations, VTEP and uplink ingress, DSCP marking, ARP punting.
pub const MATCH: u16 = 100;
/// Added to a policy rule's priority.
pub const POLICY_BASE: u16 = 10;
