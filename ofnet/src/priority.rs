//! Flow priorities as named bands. Within a table a higher band always wins; the policy band
//! is `POLICY_BASE + rule priority`, so rules stay above the miss flow (priority 0, owned by
//! `ofctrl`) and order among themselves by their own priority.

/// A local endpoint's packets through its meter (table 0): below the input table's drops and
/// punts (`MATCH`).
pub const METER: u16 = 10;
/// Port-to-VLAN classification of a local endpoint's non-IP, non-ARP frames from its own MAC
/// (table 1).
pub const PORT_VLAN: u16 = 10;
/// Spoof guard (table 1): frames from a local endpoint's port that no classification flow
/// admitted (another source MAC).
pub const GUARD_PORT_DROP: u16 = 5;
/// Spoof guard (table 1): IPv4, IPv6 and ARP from a local endpoint's port whose source is not
/// the endpoint's, below the flows admitting its own addresses (`MATCH`).
pub const GUARD_DROP: u16 = 50;
/// Spoof guard (table 1): neighbour advertisements claiming another address, above `MATCH`.
pub const GUARD_ND_DROP: u16 = 105;
/// Spoof guard (table 1): neighbour advertisements for the endpoint's own addresses.
pub const GUARD_ND: u16 = 110;
/// Input table: neighbour solicitations for link-local targets follow the normal path, above
/// the ND punt (`MATCH`).
pub const ND_LINK_LOCAL: u16 = 110;
/// Service drops (table 3): packets to a VIP or of a service connection that no balance or
/// forward flow (`MATCH`) took.
pub const SERVICE_DROP: u16 = 10;
/// Services with session affinity (table 3): a new connection whose client has no (valid)
/// affinity entry is balanced by the multipath hash, below the per-provider commits (`MATCH`).
pub const SERVICE_REBALANCE: u16 = 50;
/// Services with session affinity (table 3): the first packet of a connection records the
/// client's provider, above the forward flows (`MATCH`).
pub const SERVICE_LEARN: u16 = 110;
/// Conntrack entry (tables 3 and 6): untracked packets, disjoint from every other service flow.
pub const SERVICE_CT: u16 = 200;
/// Service hairpin (table 3): the second conntrack lookup of a hairpin reply, in the VRF's
/// zone, above the conntrack entry (`SERVICE_CT`).
pub const HAIRPIN_VRF_LOOKUP: u16 = 204;
/// Service hairpin (table 3): a provider's reply to the hairpin source, looked up first in the
/// hairpin zone.
pub const HAIRPIN_LOOKUP: u16 = 205;
/// Service hairpin (table 3): a hairpin packet, translated both ways, back out of the pod's
/// own port; above every other service flow.
pub const HAIRPIN_OUT: u16 = 210;
/// Service hairpin (table 3): a provider's connection to its own service, SNATed to the
/// hairpin source in the hairpin zone; above the affinity learn flow (`SERVICE_LEARN`).
pub const HAIRPIN_SNAT: u16 = 120;
/// Per-VLAN flood flows (table 9, VXLAN bridge).
pub const FLOOD: u16 = 10;
/// VXLAN router, table 7: a pod's packet to a private address (`pvtSubnet`) is dropped, below
/// every route ...
pub const PRIVATE_DROP: u16 = 10;
/// ... but to the host's own private address it goes to the host (table 8).
pub const PRIVATE_HOST: u16 = 20;
/// Host bridge, table 0: the host's IPv4 from another private address (a pod's packet the
/// host routed back toward another pod) is dropped, below the host's own address (`MATCH`)...
pub const HOST_PEER_DROP: u16 = 90;
/// ... and above the rest of the host port's IPv4 and ARP.
pub const HOST_PORT: u16 = 80;
/// Exact matches: known destinations, VTEP and uplink ingress, DSCP marking, ARP punting.
pub const MATCH: u16 = 100;
/// Table 1: a local endpoint's DNS queries (UDP to port 53 from its own addresses) to the
/// controller, for the inline DNS; above the endpoint's classification (`MATCH`).
pub const DNS_PUNT: u16 = 120;
/// Added to a policy rule's priority.
pub const POLICY_BASE: u16 = 10;
/// Policy table (5): replies of tracked connections pass, above every rule (rule priorities
/// stop one below).
pub const POLICY_STATEFUL: u16 = u16::MAX;
/// NetworkPolicy tables (7, 8): replies of tracked connections, revoked replies, neighbour
/// discovery.
pub const NETPOL_BYPASS: u16 = 200;
/// NetworkPolicy tables: a pod a rule allows without restricting peers or ports.
pub const NETPOL_ALLOW_ALL: u16 = 110;
/// NetworkPolicy tables: conjunction clauses and `conj_id` flows.
pub const NETPOL_RULE: u16 = 100;
/// NetworkPolicy tables: an isolated pod's established connection no rule allows: revoked.
pub const NETPOL_REVOKE: u16 = 11;
/// NetworkPolicy tables: anything else of an isolated pod: dropped.
pub const NETPOL_ISOLATED: u16 = 10;
/// Ingress table (8): a revoked connection's packet that reached it (allowed again).
pub const NETPOL_RESTORE: u16 = 2;
/// Ingress table (8): new connections are committed.
pub const NETPOL_COMMIT: u16 = 1;
