//! The agent's operations, and for each: its endpoint-DB part, its settings part (checked),
//! and the owners whose flows it can change.

use super::*;
use crate::netpol::Policies;
use crate::service::Service;

/// One change through the agent API.
#[derive(Debug, Clone)]
pub enum AgentOp {
    AddNetwork(Network),
    /// By VLAN.
    RemoveNetwork(u16),
    AddLocalEndpoint(LocalEndpoint),
    /// New DSCP (0: stop marking) and bandwidth limit (`None`: lift it) of the local
    /// endpoint on `port`.
    UpdateLocalEndpoint {
        port: u32,
        dscp: u8,
        bandwidth: Option<Bandwidth>,
    },
    RemoveLocalEndpoint(u32),
    /// An endpoint of another host, as the master relays it.
    AddRemoteEndpoint(Endpoint),
    RemoveRemoteEndpoint(String),
    AddUplink(u32),
    RemoveUplink(u32),
    AddVtep {
        ip: Ipv4Addr,
        port: u32,
    },
    RemoveVtep(Ipv4Addr),
    SetArpMode(ArpMode),
    AddRule(PolicyRule),
    RemoveRule(String),
    /// Many rules in one change (one switch transaction): remove `remove` (unknown ids are
    /// fine), then add or replace `add`. Refused as a whole if one rule is invalid.
    SetRules {
        /// Shared: one host's bridges hold the same rules (a 10,000-rule policy is on each).
        add: Vec<Arc<PolicyRule>>,
        remove: Vec<String>,
    },
    /// Add or replace a load-balanced service.
    AddService {
        name: String,
        spec: ServiceSpec,
    },
    /// Forget a service (unknown names are fine).
    RemoveService(String),
    /// A service's providers (the spec may come before or after).
    SetServiceProviders {
        name: String,
        providers: Vec<Ipv4Addr>,
    },
    /// The host's router port (VLAN router), or none.
    SetRouter(Option<RouterPort>),
    /// The host NAT port (VXLAN router) or the host bridge's host port, or none.
    SetHostNat(Option<HostNatPort>),
    /// A pod's host-access port (host bridge), added or replaced.
    AddHostAccess(HostAccessPort),
    /// By OpenFlow port (unknown ports are fine).
    RemoveHostAccess(u32),
    /// A prefix the BGP speaker learned, or its new next hop (VLAN router).
    AddRoute {
        prefix: ipnet::Ipv4Net,
        next_hop: Ipv4Addr,
    },
    /// A learned prefix was withdrawn (unknown prefixes are fine).
    RemoveRoute(ipnet::Ipv4Net),
    /// A next hop's MAC, seen in ARP on the uplink (VLAN router).
    LearnNeighbor {
        ip: Ipv4Addr,
        mac: MacAddr,
    },
    /// Kubernetes NetworkPolicies: remove `delete` (unknown ids are fine), then add or replace
    /// `upsert`, as one switch transaction. Refused as a whole if one policy fails
    /// [`NetworkPolicy::check`] (the handle's methods check first and leave refused ones out).
    SetNetworkPolicies {
        upsert: Vec<NetworkPolicy>,
        delete: Vec<String>,
    },
    /// Make `policies` (plus the installed policies named in `keep`) the whole set: every
    /// other installed policy is removed. One switch transaction.
    ReplaceNetworkPolicies {
        policies: Vec<NetworkPolicy>,
        keep: Vec<String>,
    },
}

/// How an op splits into an endpoint-DB change and a settings change.
pub(super) fn endpoint_op(op: &AgentOp, local_ip: Option<Ipv4Addr>) -> Option<EndpointOp> {
    Some(match op {
        AgentOp::AddNetwork(n) => EndpointOp::AddNetwork(n.clone()),
        AgentOp::RemoveNetwork(v) => EndpointOp::RemoveNetwork(*v),
        AgentOp::AddLocalEndpoint(e) => EndpointOp::AddLocal {
            endpoint: e.clone(),
            originator: local_ip,
        },
        AgentOp::UpdateLocalEndpoint {
            port,
            dscp,
            bandwidth,
        } => EndpointOp::UpdateLocal {
            port: *port,
            dscp: *dscp,
            bandwidth: *bandwidth,
        },
        AgentOp::RemoveLocalEndpoint(p) => EndpointOp::RemoveLocal(*p),
        AgentOp::AddRemoteEndpoint(e) => EndpointOp::AddRemote(e.clone()),
        AgentOp::RemoveRemoteEndpoint(id) => EndpointOp::RemoveRemote(id.clone()),
        _ => return None,
    })
}

/// The owners whose flows an op can change. Service owners come from the difference between the
/// settings before and after, plus the services one of whose providers is an endpoint the op adds
/// or removes (its MAC is in their flows).
pub(super) fn touched(
    op: &AgentOp,
    before: &EndpointTable,
    after: &EndpointTable,
    settings_before: Before<'_>,
    settings_after: &Settings,
) -> Touched {
    if let AgentOp::AddNetwork(n) = op {
        return network_owners(n, before, after);
    }
    if let AgentOp::RemoveNetwork(vlan) = op
        && let Some(n) = before.network(*vlan)
    {
        return network_owners(n, before, after);
    }
    let Some(mut owners) = endpoint_owners(op, before, after) else {
        return Touched::All;
    };
    let a = &settings_after.services;
    owners.extend(service_changes(settings_before.services, a));
    if settings_before.stateful != settings_after.stateful() {
        owners.push(Owner::Conntrack);
    }
    owners.extend(netpol_changes(
        op,
        settings_before.netpols,
        &settings_after.netpols,
    ));
    let endpoint_ip = match op {
        AgentOp::AddLocalEndpoint(l) => l.ipv4,
        AgentOp::RemoveLocalEndpoint(p) => before.local(*p).and_then(|e| e.ip_addr),
        AgentOp::AddRemoteEndpoint(e) => e.ip_addr,
        AgentOp::RemoveRemoteEndpoint(id) => before.endpoint(id).and_then(|e| e.ip_addr),
        _ => None,
    };
    if let Some(ip) = endpoint_ip {
        owners.extend(services_of_provider(a, ip));
    }
    // A bridge's first local endpoint brings its services' flows, its last takes them away
    // (a bridging datapath balances only its local endpoints' connections).
    if before.has_locals() != after.has_locals() {
        owners.extend(service_owners(a));
    }
    // Each local endpoint's hairpin flow lives while any service has a spec.
    if settings_before.services.any_active(a) != a.any_active() {
        owners.extend(after.locals().map(|e| Owner::LocalEndpoint(e.port_no)));
    }
    Touched::Owners(owners)
}

/// Which owners to recompute after an op.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Touched {
    /// Every owner (VTEPs and uplinks change every network and remote endpoint: rare).
    All,
    /// Just these.
    Owners(Vec<Owner>),
    /// These, and every owner not tied to one object (input table, uplinks, router port, routes,
    /// conntrack, host NAT): the flows built from the whole set of networks.
    Shared(Vec<Owner>),
}

impl Touched {
    /// What two ops touched together.
    pub(super) fn merge(self, other: Touched) -> Touched {
        match (self, other) {
            (Touched::All, _) | (_, Touched::All) => Touched::All,
            (Touched::Owners(mut a), Touched::Owners(b)) => {
                a.extend(b);
                Touched::Owners(a)
            }
            (
                Touched::Owners(mut a) | Touched::Shared(mut a),
                Touched::Owners(b) | Touched::Shared(b),
            ) => {
                a.extend(b);
                Touched::Shared(a)
            }
        }
    }

    /// The owners to recompute, given what is installed and what the datapath has now.
    pub(super) fn owners(
        self,
        installed: &Desired,
        datapath: &dyn Datapath,
        topo: &Topology<'_>,
    ) -> BTreeSet<Owner> {
        let (listed, shared) = match self {
            Touched::All => {
                return installed
                    .owners()
                    .cloned()
                    .chain(datapath.owners(topo))
                    .collect();
            }
            Touched::Owners(o) => (o, false),
            Touched::Shared(o) => (o, true),
        };
        let mut out: BTreeSet<Owner> = listed.into_iter().collect();
        if shared {
            out.extend(
                installed
                    .owners()
                    .filter(|o| !per_object(o))
                    .cloned()
                    .chain(datapath.owners(topo).into_iter().filter(|o| !per_object(o))),
            );
        }
        out
    }
}

/// Whether an owner's flows are those of one endpoint, rule, service, network or NetworkPolicy
/// clause (so a network that comes or goes changes them only if they are on it).
fn per_object(o: &Owner) -> bool {
    matches!(
        o,
        Owner::LocalEndpoint(_)
            | Owner::RemoteEndpoint(_)
            | Owner::Rule(_)
            | Owner::Service(_)
            | Owner::ServiceProvider(..)
            | Owner::Netpol(_)
            | Owner::Network(_)
            | Owner::HostAccess(_)
    )
}

/// The owners a network that comes or goes changes. A tenant's first or last network gives or
/// takes a VRF id, which every endpoint's and NetworkPolicy's flows carry: everything then (rare).
/// Otherwise: the network's own flows, the endpoints on it (by VLAN or VNI: a remote endpoint's
/// flows name its network by VNI), and the flows built from every network. So adding the
/// 10,000th network costs what the first did, not a pass over every flow of the bridge.
fn network_owners(n: &Network, before: &EndpointTable, after: &EndpointTable) -> Touched {
    let vrf = (before.vrf_id(&n.vrf), after.vrf_id(&n.vrf));
    if vrf.0.is_none() || vrf.0 != vrf.1 {
        return Touched::All;
    }
    let on_it = |e: &Endpoint| e.vlan == n.vlan || (n.vni != 0 && e.vni == n.vni);
    let mut owners = vec![Owner::Network(n.vlan)];
    for table in [before, after] {
        owners.extend(
            table
                .locals()
                .filter(|e| on_it(e))
                .map(|e| Owner::LocalEndpoint(e.port_no)),
        );
        owners.extend(
            table
                .remotes()
                .filter(|e| on_it(e))
                .map(|e| Owner::RemoteEndpoint(e.endpoint_id.clone())),
        );
    }
    Touched::Shared(owners)
}

fn endpoint_owners(
    op: &AgentOp,
    before: &EndpointTable,
    after: &EndpointTable,
) -> Option<Vec<Owner>> {
    Some(match op {
        // Uplinks, the router port and next-hop MACs change the VLAN router's routes. (A network
        // is here only when it is unknown: its removal is then refused.)
        AgentOp::AddNetwork(_)
        | AgentOp::RemoveNetwork(_)
        | AgentOp::AddVtep { .. }
        | AgentOp::RemoveVtep(_)
        | AgentOp::AddUplink(_)
        | AgentOp::RemoveUplink(_)
        | AgentOp::SetRouter(_)
        | AgentOp::SetHostNat(_)
        | AgentOp::LearnNeighbor { .. } => return None,
        AgentOp::AddHostAccess(h) => vec![Owner::HostAccess(h.port)],
        AgentOp::RemoveHostAccess(port) => vec![Owner::HostAccess(*port)],
        AgentOp::AddRoute { prefix, .. } | AgentOp::RemoveRoute(prefix) => {
            vec![Owner::Route(prefix.trunc())]
        }
        AgentOp::AddLocalEndpoint(l) => {
            let mut v = vec![Owner::LocalEndpoint(l.port_no), Owner::Network(l.vlan)];
            // A remote endpoint with the same id that moved here is replaced.
            if let Some(ep) = after.local(l.port_no) {
                v.push(Owner::RemoteEndpoint(ep.endpoint_id.clone()));
            }
            v
        }
        AgentOp::UpdateLocalEndpoint { port, .. } => vec![Owner::LocalEndpoint(*port)],
        AgentOp::RemoveLocalEndpoint(port) => {
            let mut v = vec![Owner::LocalEndpoint(*port)];
            if let Some(ep) = before.local(*port) {
                v.push(Owner::Network(ep.vlan));
            }
            v
        }
        AgentOp::AddRemoteEndpoint(ep) => vec![Owner::RemoteEndpoint(ep.endpoint_id.clone())],
        AgentOp::RemoveRemoteEndpoint(id) => vec![Owner::RemoteEndpoint(id.clone())],
        AgentOp::SetArpMode(_) => vec![Owner::Input],
        AgentOp::AddRule(r) => vec![Owner::Rule(r.rule_id.clone())],
        AgentOp::RemoveRule(id) => vec![Owner::Rule(id.clone())],
        AgentOp::SetRules { add, remove } => remove
            .iter()
            .cloned()
            .chain(add.iter().map(|r| r.rule_id.clone()))
            .map(Owner::Rule)
            .collect(),
        AgentOp::AddService { .. }
        | AgentOp::RemoveService(_)
        | AgentOp::SetServiceProviders { .. }
        | AgentOp::SetNetworkPolicies { .. }
        | AgentOp::ReplaceNetworkPolicies { .. } => Vec::new(),
    })
}

/// The NetworkPolicy owners whose flows an op changes: the flows of every policy it changes,
/// before and after (a flow shared with other policies is recomputed whole).
fn netpol_changes(op: &AgentOp, before: &Policies, after: &Policies) -> Vec<Owner> {
    let ids: BTreeSet<&String> = match op {
        AgentOp::SetNetworkPolicies { upsert, delete } => {
            delete.iter().chain(upsert.iter().map(|p| &p.id)).collect()
        }
        AgentOp::ReplaceNetworkPolicies { .. } => before.ids().chain(after.ids()).collect(),
        _ => return Vec::new(),
    };
    let mut out = BTreeSet::new();
    for id in ids {
        let (old, new) = (before.contribution(id), after.contribution(id));
        if old == new {
            continue;
        }
        out.extend(
            old.keys()
                .chain(new.keys())
                .map(|o| Owner::Netpol(Box::new(o))),
        );
    }
    out.into_iter().collect()
}

/// The service owners whose flows differ between `before` and `after`: the service part of
/// every service whose spec, providers or group block changed, the parts of the providers that
/// came or went (of every provider, when the spec or group block changed), and the conntrack
/// flows when any service changed.
fn service_changes(before: ServicesBefore<'_>, after: &Services) -> Vec<Owner> {
    let mut out = Vec::new();
    match before {
        ServicesBefore::Unchanged => {}
        ServicesBefore::One(name, previous) => {
            service_change(name, previous, after.get(name), &mut out);
        }
        ServicesBefore::All(before) => {
            let names: BTreeSet<&String> =
                before.iter().chain(after.iter()).map(|(n, _)| n).collect();
            for name in names {
                service_change(name, before.get(name), after.get(name), &mut out);
            }
        }
    }
    if !out.is_empty() {
        out.push(Owner::Conntrack);
    }
    out
}

/// The owners of service `name` that differ between `before` and `after` (see
/// [`service_changes`]).
fn service_change(
    name: &str,
    before: Option<&Service>,
    after: Option<&Service>,
    out: &mut Vec<Owner>,
) {
    if before == after {
        return;
    }
    out.push(Owner::Service(name.to_string()));
    let usable = |s: Option<&Service>| -> BTreeSet<Ipv4Addr> {
        s.filter(|s| s.active_spec().is_some())
            .map(|s| s.usable_providers().collect())
            .unwrap_or_default()
    };
    let (old, new) = (usable(before), usable(after));
    let same_flows = |b: &Service, a: &Service| b.spec == a.spec && b.index == a.index;
    let providers: Vec<&Ipv4Addr> = match (before, after) {
        // The providers' own flows are the same for the ones that stayed.
        (Some(b), Some(a)) if same_flows(b, a) => old.symmetric_difference(&new).collect(),
        _ => old.union(&new).collect(),
    };
    out.extend(
        providers
            .into_iter()
            .map(|ip| Owner::ServiceProvider(name.to_string(), *ip)),
    );
}

/// The owners of the services `provider` is a provider of, which hold what the endpoint DB
/// knows of it: its own flows (its MAC, its IPv6 address) and, for a dual-stack service, the
/// service's (its IPv6 address makes it an IPv6 provider).
fn services_of_provider(services: &Services, provider: Ipv4Addr) -> Vec<Owner> {
    let mut out = Vec::new();
    for (name, s) in services
        .iter()
        .filter(|(_, s)| s.providers.contains(&provider))
    {
        if s.spec.as_ref().is_some_and(|spec| spec.vip6.is_some()) {
            out.push(Owner::Service(name.clone()));
        }
        out.push(Owner::ServiceProvider(name.clone(), provider));
    }
    out
}

/// What the agent needs of its settings as they were before an op: to recompute what the op
/// touched ([`touched`]) and to put them back if the switch refuses the op.
pub(super) enum SettingsUndo {
    /// The rules a rule op replaced or removed, in order, and whether policy was stateful:
    /// rule ops change nothing else, so the settings are not copied whole (with 10,000 rules
    /// the copy cost more than the rule).
    Rules {
        previous: Vec<(String, Option<Arc<PolicyRule>>)>,
        stateful: bool,
    },
    /// The one service a service op changed, as it was before (`None`: it did not exist).
    /// Copying the whole settings for it cost a copy of every rule and of every service's
    /// providers, for each service a pod joins.
    Service {
        name: String,
        previous: Option<Service>,
    },
    /// The whole settings before the op.
    Whole(Box<Settings>),
    /// Nothing: the op is the endpoint DB's alone (networks, endpoints). Copying the settings
    /// for it cost a copy of every rule and service provider per pod.
    Unchanged,
}

/// The settings before an op, as far as [`touched`] looks at them.
#[derive(Clone, Copy)]
pub(super) struct Before<'a> {
    pub services: ServicesBefore<'a>,
    pub netpols: &'a Policies,
    pub stateful: bool,
}

/// The services before an op, as far as [`touched`] needs them.
#[derive(Clone, Copy)]
pub(super) enum ServicesBefore<'a> {
    /// The op changed no service.
    Unchanged,
    /// The op changed at most this service, which was `previous` before it.
    One(&'a str, Option<&'a Service>),
    /// Any service may have changed: all of them before the op.
    All(&'a Services),
}

impl ServicesBefore<'_> {
    /// Whether any service had a spec before the op; `after` are the services after it.
    fn any_active(&self, after: &Services) -> bool {
        match self {
            ServicesBefore::Unchanged => after.any_active(),
            ServicesBefore::One(name, previous) => {
                previous.is_some_and(|s| s.active_spec().is_some())
                    || after
                        .iter()
                        .any(|(n, s)| n != name && s.active_spec().is_some())
            }
            ServicesBefore::All(before) => before.any_active(),
        }
    }
}

impl SettingsUndo {
    /// The settings before the op; `now` are the settings after it.
    pub(super) fn before<'a>(&'a self, now: &'a Settings) -> Before<'a> {
        match self {
            SettingsUndo::Rules { stateful, .. } => Before {
                services: ServicesBefore::Unchanged,
                netpols: &now.netpols,
                stateful: *stateful,
            },
            SettingsUndo::Service { name, previous } => Before {
                services: ServicesBefore::One(name, previous.as_ref()),
                netpols: &now.netpols,
                stateful: now.stateful(),
            },
            SettingsUndo::Whole(s) => Before {
                services: ServicesBefore::All(&s.services),
                netpols: &s.netpols,
                stateful: s.stateful(),
            },
            SettingsUndo::Unchanged => Before {
                services: ServicesBefore::Unchanged,
                netpols: &now.netpols,
                stateful: now.stateful(),
            },
        }
    }

    /// Put `s` back as it was before the op.
    pub(super) fn restore(self, s: &mut Settings) {
        match self {
            SettingsUndo::Rules { previous, .. } => {
                for (id, rule) in previous.into_iter().rev() {
                    match rule {
                        Some(r) => s.rules.insert(id, r),
                        None => s.rules.remove(&id),
                    };
                }
            }
            SettingsUndo::Service { name, previous } => s.services.put_back(&name, previous),
            SettingsUndo::Whole(before) => *s = *before,
            SettingsUndo::Unchanged => {}
        }
    }
}

/// Apply the settings part of an op to `s`, checked; on error `s` is unchanged. Returns how to
/// undo it.
pub(super) fn apply_settings(
    datapath: &dyn Datapath,
    s: &mut Settings,
    op: &AgentOp,
) -> Result<SettingsUndo, AgentError> {
    let ids: Vec<&String> = match op {
        AgentOp::AddRule(r) => vec![&r.rule_id],
        AgentOp::RemoveRule(id) => vec![id],
        AgentOp::SetRules { add, remove } => remove
            .iter()
            .chain(add.iter().map(|r| &r.rule_id))
            .collect(),
        AgentOp::AddNetwork(_)
        | AgentOp::RemoveNetwork(_)
        | AgentOp::AddLocalEndpoint(_)
        | AgentOp::UpdateLocalEndpoint { .. }
        | AgentOp::RemoveLocalEndpoint(_)
        | AgentOp::AddRemoteEndpoint(_)
        | AgentOp::RemoveRemoteEndpoint(_) => return Ok(SettingsUndo::Unchanged),
        AgentOp::AddService { name, .. }
        | AgentOp::RemoveService(name)
        | AgentOp::SetServiceProviders { name, .. } => {
            let previous = s.services.get(name).cloned();
            change_settings(datapath, s, op)?;
            return Ok(SettingsUndo::Service {
                name: name.clone(),
                previous,
            });
        }
        _ => {
            let whole = Box::new(s.clone());
            change_settings(datapath, s, op)?;
            return Ok(SettingsUndo::Whole(whole));
        }
    };
    let stateful = s.stateful();
    let mut previous: Vec<(String, Option<Arc<PolicyRule>>)> = Vec::with_capacity(ids.len());
    for id in ids {
        // The first change of a rule holds what it was before the op.
        if !previous.iter().any(|(seen, _)| seen == id) {
            previous.push((id.clone(), s.rules.get(id).cloned()));
        }
    }
    change_settings(datapath, s, op)?;
    Ok(SettingsUndo::Rules { previous, stateful })
}

fn change_settings(
    datapath: &dyn Datapath,
    s: &mut Settings,
    op: &AgentOp,
) -> Result<(), AgentError> {
    let kind = datapath.kind();
    let only = |want: BridgeKind, what: &'static str| {
        if kind == want {
            Ok(())
        } else {
            Err(AgentError::WrongBridge {
                what,
                kind: kind.name(),
            })
        }
    };
    // Routing pipelines have no NetworkPolicy tables (their table 7 routes); removing is fine.
    let netpols_here = |none_added: bool| {
        if none_added || datapath.pipeline().has_netpol() {
            Ok(())
        } else {
            Err(AgentError::WrongBridge {
                what: "a Kubernetes NetworkPolicy (routing mode has no NetworkPolicy tables)",
                kind: datapath.name(),
            })
        }
    };
    match op {
        AgentOp::AddUplink(p) => {
            only(BridgeKind::Vlan, "an uplink")?;
            s.uplinks.insert(*p);
        }
        AgentOp::RemoveUplink(p) => {
            s.uplinks
                .remove(p)
                .then_some(())
                .ok_or(AgentError::NoUplink(*p))?;
        }
        AgentOp::AddVtep { ip, port } => {
            only(BridgeKind::Vxlan, "a VTEP")?;
            if let Some((other, _)) = s.vteps.iter().find(|(i, p)| *p == port && *i != ip) {
                return Err(AgentError::VtepPortInUse {
                    port: *port,
                    ip: *other,
                });
            }
            s.vteps.insert(*ip, *port);
        }
        AgentOp::RemoveVtep(ip) => {
            s.vteps.remove(ip).ok_or(AgentError::NoVtep(*ip))?;
        }
        AgentOp::SetArpMode(m) => s.arp_mode = *m,
        AgentOp::AddRule(r) => {
            match s.rules.get(&r.rule_id) {
                Some(have) if **have == *r => {}
                Some(_) => return Err(AgentError::RuleExists(r.rule_id.clone())),
                None => {
                    // Validate alone first so the error names the rule, not a conflict.
                    let table = datapath
                        .pipeline()
                        .table(id::POLICY)
                        .map_err(DatapathError::from)?;
                    rule_flows(table, r, id::SERVICE_SNAT).map_err(DatapathError::from)?;
                    s.rules.insert(r.rule_id.clone(), Arc::new(r.clone()));
                }
            }
        }
        AgentOp::RemoveRule(rid) => {
            s.rules
                .remove(rid)
                .ok_or_else(|| AgentError::NoRule(rid.clone()))?;
        }
        AgentOp::SetRules { add, remove } => {
            let table = datapath
                .pipeline()
                .table(id::POLICY)
                .map_err(DatapathError::from)?;
            // Validate every rule before changing anything: on error `s` is unchanged.
            for r in add {
                rule_flows(table, r, id::SERVICE_SNAT).map_err(DatapathError::from)?;
            }
            for rid in remove {
                s.rules.remove(rid);
            }
            for r in add {
                s.rules.insert(r.rule_id.clone(), Arc::clone(r));
            }
        }
        AgentOp::AddService { name, spec } => s.services.set_spec(name, spec.clone())?,
        AgentOp::RemoveService(name) => {
            s.services.remove(name);
        }
        AgentOp::SetServiceProviders { name, providers } => {
            s.services.set_providers(name, providers.iter().copied());
        }
        AgentOp::SetRouter(r) => {
            only(BridgeKind::Vlan, "a router port")?;
            s.router = *r;
        }
        AgentOp::SetHostNat(nat) if kind == BridgeKind::Host => s.host_nat = *nat,
        AgentOp::AddHostAccess(h) => {
            only(BridgeKind::Host, "a host-access port")?;
            s.host_access.insert(h.port, *h);
        }
        AgentOp::RemoveHostAccess(port) => {
            s.host_access.remove(port);
        }
        AgentOp::SetHostNat(nat) => {
            only(BridgeKind::Vxlan, "a host NAT port")?;
            if nat.is_some() && datapath.router_mac().is_none() {
                return Err(AgentError::WrongBridge {
                    what: "a host NAT port (routing mode only)",
                    kind: kind.name(),
                });
            }
            s.host_nat = *nat;
        }
        AgentOp::AddRoute { prefix, next_hop } => {
            only(BridgeKind::Vlan, "a learned route")?;
            s.routes.insert(prefix.trunc(), *next_hop);
        }
        AgentOp::RemoveRoute(prefix) => {
            s.routes.remove(&prefix.trunc());
        }
        AgentOp::LearnNeighbor { ip, mac } => {
            s.neighbors.insert(*ip, *mac);
        }
        AgentOp::SetNetworkPolicies { upsert, delete } => {
            netpols_here(upsert.is_empty())?;
            for p in upsert {
                p.check()?;
            }
            for id in delete {
                s.netpols.remove(id);
            }
            for p in upsert {
                s.netpols.upsert(p.clone());
            }
        }
        AgentOp::ReplaceNetworkPolicies { policies, keep } => {
            netpols_here(policies.is_empty())?;
            for p in policies {
                p.check()?;
            }
            let want: BTreeSet<&String> = policies.iter().map(|p| &p.id).chain(keep).collect();
            let gone: Vec<String> = s
                .netpols
                .ids()
                .filter(|id| !want.contains(id))
                .cloned()
                .collect();
            for id in gone {
                s.netpols.remove(&id);
            }
            for p in policies {
                if s.netpols.get(&p.id) != Some(p) {
                    s.netpols.upsert(p.clone());
                }
            }
        }
        // The endpoint DB's ops (see `apply_settings`).
        AgentOp::AddNetwork(_)
        | AgentOp::RemoveNetwork(_)
        | AgentOp::AddLocalEndpoint(_)
        | AgentOp::UpdateLocalEndpoint { .. }
        | AgentOp::RemoveLocalEndpoint(_)
        | AgentOp::AddRemoteEndpoint(_)
        | AgentOp::RemoveRemoteEndpoint(_) => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{MacAddr, RuleAction};

    /// A small deterministic pseudo-random sequence (no dependency, reproducible failures).
    struct Lcg(u64);

    impl Lcg {
        fn next(&mut self, n: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 33) % n
        }
    }

    fn random_policy(r: &mut Lcg, id: String) -> crate::netpol::NetworkPolicy {
        use crate::netpol::{NetworkPolicy, Peer, Port, Protocol, Rule};
        use std::net::IpAddr;
        let addr = |r: &mut Lcg| IpAddr::V4(Ipv4Addr::new(10, 1, 1, r.next(8) as u8));
        let vrf = if r.next(4) == 0 { "t2" } else { "t1" };
        let applied = (0..1 + r.next(2)).map(|_| addr(r)).collect();
        let mut p = NetworkPolicy::new(id, vrf, applied);
        let rules = |r: &mut Lcg| -> Option<Vec<Rule>> {
            if r.next(3) == 0 {
                return None;
            }
            Some(
                (0..r.next(3))
                    .map(|_| Rule {
                        peers: (0..r.next(3))
                            .map(|_| {
                                if r.next(3) == 0 {
                                    Peer::IpBlock {
                                        cidr: "10.1.1.0/29"
                                            .parse()
                                            .unwrap_or_else(|_| unreachable!()),
                                        except: vec![ipnet::IpNet::from(addr(r))]
                                            .into_iter()
                                            .filter(|n| {
                                                n.addr() < IpAddr::V4(Ipv4Addr::new(10, 1, 1, 8))
                                            })
                                            .collect(),
                                    }
                                } else {
                                    Peer::Pods((0..r.next(3)).map(|_| addr(r)).collect())
                                }
                            })
                            .collect(),
                        ports: (0..r.next(3))
                            .map(|_| match r.next(3) {
                                0 => Port::range(Protocol::Tcp, 80, 80 + r.next(20) as u16),
                                1 => Port::one(Protocol::Udp, 53),
                                _ => Port::one(Protocol::Tcp, 80 + r.next(2) as u16),
                            })
                            .collect(),
                        applied_to: None,
                    })
                    .collect(),
            )
        };
        p.ingress = rules(r);
        p.egress = rules(r);
        p
    }

    fn random_netpol_op(r: &mut Lcg) -> AgentOp {
        let id = format!("ns/p{}", r.next(4));
        match r.next(6) {
            0 => AgentOp::SetNetworkPolicies {
                upsert: Vec::new(),
                delete: vec![id],
            },
            1 => AgentOp::ReplaceNetworkPolicies {
                policies: (0..r.next(3))
                    .map(|_| {
                        let id = format!("ns/p{}", r.next(4));
                        random_policy(r, id)
                    })
                    .collect(),
                keep: Vec::new(),
            },
            _ => AgentOp::SetNetworkPolicies {
                upsert: vec![random_policy(r, id)],
                delete: Vec::new(),
            },
        }
    }

    fn random_op(r: &mut Lcg) -> AgentOp {
        if r.next(5) == 0 {
            return random_netpol_op(r);
        }
        let vteps = [
            Ipv4Addr::new(192, 168, 77, 2),
            Ipv4Addr::new(192, 168, 77, 3),
        ];
        let vlan = 2 + r.next(3) as u16;
        let service = format!("svc{}", r.next(2));
        match r.next(20) {
            12 | 13 => AgentOp::AddService {
                name: service,
                // Dual-stack services and affinity too: their flows depend on what the
                // endpoint DB knows of a provider (its IPv6 address) and on every provider.
                spec: ServiceSpec {
                    affinity_timeout: (r.next(3) == 0).then_some(30),
                    vip6: (r.next(2) == 0).then(|| {
                        std::net::Ipv6Addr::new(0xfd00, 0x254, 0, 0, 0, 0, 0, r.next(3) as u16)
                    }),
                    vip: Ipv4Addr::new(10, 254, 0, r.next(3) as u8),
                    ports: vec![crate::service::ServicePort {
                        protocol: crate::service::ServiceProtocol::Tcp,
                        svc_port: 80,
                        prov_port: 8000 + r.next(2) as u16,
                    }],
                },
            },
            14 | 15 => AgentOp::SetServiceProviders {
                name: service,
                providers: (0..1 + r.next(2))
                    .map(|_| Ipv4Addr::new(10, 1, 1, r.next(8) as u8))
                    .collect(),
            },
            16 if r.next(4) == 0 => AgentOp::RemoveService(service),
            16..=19 => AgentOp::SetServiceProviders {
                name: service,
                providers: Vec::new(),
            },
            0 => AgentOp::AddNetwork(Network {
                vlan,
                vni: 5000 + u32::from(vlan),
                gateway: None,
                vrf: if vlan == 4 { "t2" } else { "t1" }.into(),
            }),
            1 => AgentOp::RemoveNetwork(vlan),
            2 | 3 => {
                let n = r.next(8) as u8;
                AgentOp::AddLocalEndpoint(LocalEndpoint {
                    port_no: u32::from(n) + 1,
                    mac: MacAddr([2, 2, 10, 1, 1, n]),
                    vlan,
                    ipv4: Some(Ipv4Addr::new(10, 1, 1, n)),
                    ipv6: (r.next(2) == 0)
                        .then(|| std::net::Ipv6Addr::new(0xfd00, 1, 0, 0, 0, 0, 0, u16::from(n))),
                    epg: r.next(3) as u16,
                    epg_vlan: 0,
                    dscp: 0,
                    bandwidth: None,
                })
            }
            4 => AgentOp::RemoveLocalEndpoint(r.next(8) as u32 + 1),
            5 => AgentOp::UpdateLocalEndpoint {
                port: r.next(8) as u32 + 1,
                dscp: r.next(3) as u8 * 10,
                bandwidth: (r.next(2) == 1).then_some(Bandwidth {
                    rate_kbps: 1000 * (1 + r.next(3) as u32),
                    burst_kbit: 100,
                }),
            },
            6 | 7 => {
                let n = 100 + r.next(8) as u8;
                AgentOp::AddRemoteEndpoint(Endpoint {
                    endpoint_id: format!("10.1.1.{n}:t1"),
                    endpoint_type: 2,
                    endpoint_group: r.next(3) as u16,
                    ip_addr: Some(Ipv4Addr::new(10, 1, 1, n)),
                    ip_mask: None,
                    ipv6_addr: None,
                    ipv6_mask: None,
                    vrf: "t1".into(),
                    mac: MacAddr([2, 2, 10, 1, 1, n]),
                    vlan: 9,
                    vni: 5000 + 2 + r.next(3) as u32,
                    endpoint_group_vlan: 0,
                    originator_ip: Some(vteps[r.next(2) as usize]),
                    originator_mac: String::new(),
                    timestamp: String::new(),
                    port_no: 0,
                    dscp: 0,
                    bandwidth: None,
                })
            }
            8 => AgentOp::RemoveRemoteEndpoint(format!("10.1.1.{}:t1", 100 + r.next(8))),
            9 => AgentOp::AddVtep {
                ip: vteps[r.next(2) as usize],
                port: 50 + r.next(2) as u32,
            },
            10 => AgentOp::RemoveVtep(vteps[r.next(2) as usize]),
            _ => {
                let mut rule = PolicyRule::new(format!("r{}", r.next(3)), 1, RuleAction::Deny);
                rule.dst_endpoint_group = r.next(3) as u16;
                if r.next(2) == 0 {
                    AgentOp::AddRule(rule)
                } else {
                    AgentOp::RemoveRule(rule.rule_id)
                }
            }
        }
    }

    /// [`random_op`], or one time in three an op of the VLAN router: uplinks, the router port,
    /// learned routes and next-hop MACs.
    fn random_routing_op(r: &mut Lcg) -> AgentOp {
        if r.next(3) != 0 {
            return random_op(r);
        }
        let next_hop = Ipv4Addr::new(50, 1, 1, 200 + r.next(2) as u8);
        let prefix = |r: &mut Lcg| -> ipnet::Ipv4Net {
            match r.next(3) {
                0 => "192.0.2.0/24".parse().unwrap(),
                1 => "10.1.2.5/32".parse().unwrap(),
                // Covers local endpoints: their own flows win by priority.
                _ => "10.1.0.0/16".parse().unwrap(),
            }
        };
        match r.next(7) {
            0 => AgentOp::AddUplink(1),
            1 => AgentOp::RemoveUplink(1),
            2 => AgentOp::SetRouter((r.next(3) != 0).then_some(RouterPort {
                port: 60,
                ip: Ipv4Addr::new(50, 1, 1, 2),
                mac: MacAddr([2, 0, 0, 0, 0, 2]),
            })),
            3 | 4 => AgentOp::AddRoute {
                prefix: prefix(r),
                next_hop,
            },
            5 => AgentOp::RemoveRoute(prefix(r)),
            _ => AgentOp::LearnNeighbor {
                ip: next_hop,
                mac: MacAddr([2, 0, 0, 0, 0, r.next(2) as u8]),
            },
        }
    }

    /// The new parts of the owners `touched` names, as the agent's `recompute` builds them.
    fn new_parts(
        datapath: &dyn Datapath,
        topo: &Topology<'_>,
        touched: Touched,
        installed: &Desired,
    ) -> Vec<(Owner, HeldPart)> {
        touched
            .owners(installed, datapath, topo)
            .into_iter()
            .map(|o| {
                let p = datapath.part(topo, &o).unwrap();
                (o, p.into())
            })
            .collect()
    }

    /// The installed flows and groups are exactly the ones built from scratch for `topo`.
    fn assert_as_built(
        datapath: &dyn Datapath,
        installed: &Desired,
        topo: &Topology<'_>,
        when: &str,
    ) {
        let scratch = datapath.desired(topo).unwrap();
        let kind = datapath.kind();
        assert_eq!(
            installed.flow_lines(),
            scratch.flow_lines(),
            "{kind:?} {when}: flows"
        );
        assert_eq!(
            installed.group_lines(),
            scratch.group_lines(),
            "{kind:?} {when}: groups"
        );
    }

    /// A provider that joins a service of 100 recomputes the service's own part (its group)
    /// and the newcomer's flows, not the 100 others'; a spec change recomputes every provider.
    #[test]
    fn a_provider_joining_touches_its_service_and_itself() {
        let datapath = VxlanBridge;
        let table = EndpointTable::new();
        let mut s = Settings::default();
        let provider = |n: u32| Ipv4Addr::from(0x0a01_0000 + n);
        let mut spec = crate::fixtures::web_spec();
        spec.ports.truncate(1);
        for op in [
            AgentOp::AddService {
                name: "web".into(),
                spec: spec.clone(),
            },
            AgentOp::SetServiceProviders {
                name: "web".into(),
                providers: (1..=100).map(provider).collect(),
            },
        ] {
            apply_settings(&datapath, &mut s, &op).unwrap();
        }
        let owners_of = |s: &mut Settings, op: AgentOp| -> BTreeSet<Owner> {
            let undo = apply_settings(&datapath, s, &op).unwrap();
            match touched(&op, &table, &table, undo.before(s), s) {
                Touched::Owners(o) => o.into_iter().collect(),
                other => panic!("{other:?}"),
            }
        };
        let joined = owners_of(
            &mut s,
            AgentOp::SetServiceProviders {
                name: "web".into(),
                providers: (1..=101).map(provider).collect(),
            },
        );
        assert_eq!(
            joined,
            BTreeSet::from([
                Owner::Service("web".into()),
                Owner::ServiceProvider("web".into(), provider(101)),
                Owner::Conntrack,
            ])
        );
        // The same spec again changes nothing.
        let same = owners_of(
            &mut s,
            AgentOp::AddService {
                name: "web".into(),
                spec: spec.clone(),
            },
        );
        assert!(same.is_empty(), "{same:?}");
        // Another provider port: every provider's flows change.
        let mut moved = spec;
        moved.ports[0].prov_port = 8081;
        let all = owners_of(
            &mut s,
            AgentOp::AddService {
                name: "web".into(),
                spec: moved,
            },
        );
        assert_eq!(all.len(), 2 + 101, "{all:?}");
    }

    /// What the agent does with a batch (`batch.rs`): the settings parts of all ops, then
    /// their endpoint-DB parts, then one recompute of every owner they touched (merged), gives
    /// exactly the table built from scratch after every batch of a random sequence.
    #[test]
    fn batched_updates_equal_the_table_built_from_scratch() {
        type Gen = fn(&mut Lcg) -> AgentOp;
        let cases: [(Box<dyn Datapath>, u64, Gen); 3] = [
            (Box::new(VxlanBridge), 11, random_op),
            (Box::new(VlanBridge), 12, random_routing_op),
            (Box::new(crate::VrouterBridge), 13, random_op),
        ];
        for (datapath, seed, gen_op) in cases {
            let mut r = Lcg(seed);
            let (mut table, mut settings) = (EndpointTable::new(), Settings::default());
            let topo = Topology {
                endpoints: &table,
                settings: &settings,
            };
            let mut installed = datapath.desired(&topo).unwrap();
            let mut batches = 0;
            for round in 0..150 {
                let ops: Vec<AgentOp> = (0..1 + r.next(6)).map(|_| gen_op(&mut r)).collect();
                let mut s = settings.clone();
                let kept: Vec<(&AgentOp, SettingsUndo)> = ops
                    .iter()
                    .filter_map(|op| {
                        Some((op, apply_settings(datapath.as_ref(), &mut s, op).ok()?))
                    })
                    .collect();
                let mut t = table.clone();
                let mut owners: Option<Touched> = None;
                for (op, undo) in &kept {
                    let before = t.clone();
                    if let Some(e) = endpoint_op(op, None)
                        && t.apply(e).is_err()
                    {
                        t = before;
                        continue;
                    }
                    let this = touched(op, &before, &t, undo.before(&s), &s);
                    owners = Some(match owners {
                        Some(o) => o.merge(this),
                        None => this,
                    });
                }
                let Some(owners) = owners else { continue };
                let topo = Topology {
                    endpoints: &t,
                    settings: &s,
                };
                let updates = new_parts(datapath.as_ref(), &topo, owners, &installed);
                if installed.plan(&updates).is_err() {
                    // Refused as a whole (the agent then runs the ops one at a time).
                    continue;
                }
                installed.commit(updates);
                assert_as_built(
                    datapath.as_ref(),
                    &installed,
                    &topo,
                    &format!("round {round}: after {ops:?}"),
                );
                (table, settings) = (t, s);
                batches += 1;
            }
            assert!(batches > 60, "only {batches} batches applied");
        }
    }

    /// Updating only the owners an op touches gives exactly the table built from scratch,
    /// after every op of a long random sequence (services, their groups and providers included).
    #[test]
    fn incremental_updates_equal_the_table_built_from_scratch() {
        type Gen = fn(&mut Lcg) -> AgentOp;
        for (datapath, seed, gen_op) in [
            (
                Box::new(VxlanBridge) as Box<dyn Datapath>,
                1u64,
                random_op as Gen,
            ),
            (Box::new(VxlanBridge), 2, random_op),
            // Uplinks on the VLAN bridge carry a flow per network (its VRF).
            (Box::new(VlanBridge), 3, random_routing_op),
            (Box::new(crate::VrouterBridge), 4, random_op),
            (Box::new(crate::VrouterBridge), 5, random_op),
            (Box::new(crate::VlrouterBridge), 6, random_routing_op),
        ] {
            let mut r = Lcg(seed);
            let mut table = EndpointTable::new();
            let mut settings = Settings::default();
            // As the agent starts: the input table's flows are there before any op.
            let mut installed = datapath
                .desired(&Topology {
                    endpoints: &table,
                    settings: &settings,
                })
                .unwrap();
            let mut applied = 0;
            let mut groups = 0;
            let mut routed = 0;
            let mut netpol_flows = 0;
            for step in 0..600 {
                let op = gen_op(&mut r);
                let before = table.clone();
                if let Some(e) = endpoint_op(&op, None)
                    && table.apply(e).is_err()
                {
                    continue;
                }
                let mut s = settings.clone();
                let Ok(undo) = apply_settings(datapath.as_ref(), &mut s, &op) else {
                    table = before;
                    continue;
                };
                let topo = Topology {
                    endpoints: &table,
                    settings: &s,
                };
                let touched = touched(&op, &before, &table, undo.before(&s), &s);
                // Undoing gives back exactly the settings before the op.
                let mut undone = s.clone();
                undo.restore(&mut undone);
                assert_eq!(undone, settings, "step {step}: undoing {op:?}");
                let updates = new_parts(datapath.as_ref(), &topo, touched, &installed);
                if installed.plan(&updates).is_err() {
                    // A conflicting op (e.g. a remote endpoint claiming a local MAC) is refused.
                    table = before;
                    continue;
                }
                installed.commit(updates);
                settings = s;
                applied += 1;
                groups += installed.groups().count();
                routed += installed
                    .flow_lines()
                    .iter()
                    .filter(|l| l.starts_with("table=7") && l.contains("output:1"))
                    .count();
                netpol_flows += installed
                    .flows()
                    .filter(|f| {
                        matches!(f.key.table, id::NETPOL_EGRESS | id::NETPOL_INGRESS)
                            && f.key.priority == crate::priority::NETPOL_RULE
                    })
                    .count();
                let topo = Topology {
                    endpoints: &table,
                    settings: &settings,
                };
                assert_as_built(
                    datapath.as_ref(),
                    &installed,
                    &topo,
                    &format!("step {step}: after {op:?}"),
                );
            }
            assert!(applied > 200, "only {applied} ops applied");
            assert!(groups > 10, "only {groups} groups seen");
            if datapath.name() == "vlrouter" {
                assert!(routed > 10, "only {routed} learned-route flows seen");
            }
            if datapath.pipeline().has_netpol() {
                assert!(
                    netpol_flows > 100,
                    "only {netpol_flows} NetworkPolicy rule flows seen"
                );
            }
        }
    }
}
