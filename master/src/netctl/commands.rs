//! What each command does: build the object, call netmaster, format the answer.

use serde::Serialize;

use super::cli::*;
use super::table;
use super::{EXIT_IO, EXIT_REQUEST, EXIT_REST, EXIT_USAGE};
use crate::client::{Client, ClientError};
use crate::model::*;

/// A command failure with its exit code.
#[derive(Debug, thiserror::Error)]
pub enum NetctlError {
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("cannot write output: {0}")]
    Io(#[from] std::io::Error),
}

impl NetctlError {
    pub fn exit_code(&self) -> i32 {
        match self {
            NetctlError::Usage(_) => EXIT_USAGE,
            NetctlError::Client(ClientError::Api { .. } | ClientError::Decode { .. }) => EXIT_REST,
            NetctlError::Client(_) => EXIT_REQUEST,
            NetctlError::Io(_) => EXIT_IO,
        }
    }
}

pub(super) type Out = Result<String, NetctlError>;

pub(super) fn json<T: Serialize>(v: &T) -> Out {
    serde_json::to_string_pretty(v)
        .map(|s| s + "\n")
        .map_err(|e| NetctlError::Io(std::io::Error::other(e)))
}

fn listing<T: Serialize>(
    l: &ListFlags,
    items: Vec<T>,
    tenant_of: impl Fn(&T) -> &str,
    name_of: impl Fn(&T) -> String,
    headers: &[&str],
    row: impl Fn(&T) -> Vec<String>,
) -> Out {
    let items: Vec<T> = items
        .into_iter()
        .filter(|i| l.all || tenant_of(i) == l.tenant || tenant_of(i).is_empty())
        .collect();
    if l.json {
        return json(&items);
    }
    if l.quiet {
        return Ok(items.iter().map(|i| name_of(i) + "\n").collect());
    }
    Ok(table::render(
        headers,
        &items.iter().map(row).collect::<Vec<_>>(),
    ))
}

fn scoped(t: &TenantFlag, name: &str) -> String {
    format!("{}:{name}", t.tenant)
}

/// Run one parsed command; returns what to print on stdout.
pub async fn run(cli: &Cli) -> Out {
    let c = Client::with_auth(&cli.netmaster, cli.token.as_deref(), cli.cacert.as_deref())?;
    match &cli.command {
        Command::Version => {
            let server = c.version().await?;
            Ok(format!(
                "Client Version:\nVersion: {}\n\nServer Version:\nVersion: {}\nGitCommit: {}\nBuildTime: {}\n",
                env!("CARGO_PKG_VERSION"),
                server["Version"].as_str().unwrap_or(""),
                server["GitCommit"].as_str().unwrap_or(""),
                server["BuildTime"].as_str().unwrap_or("")
            ))
        }
        Command::Tenant(cmd) => tenant(&c, cmd).await,
        Command::Network(cmd) => network(&c, cmd).await,
        Command::Group(cmd) => group(&c, cmd).await,
        Command::Endpoint(EndpointCmd::Inspect { id }) => json(&c.inspect_endpoint(id).await?),
        Command::Netprofile(cmd) => netprofile(&c, cmd).await,
        Command::Policy(cmd) => policy(&c, cmd).await,
        Command::ExternalContracts(cmd) => contracts(&c, cmd).await,
        Command::Global(cmd) => global(&c, cmd).await,
        Command::AciGw(cmd) => aci_gw(&c, cmd).await,
        Command::Bgp(cmd) => bgp(&c, cmd).await,
        Command::AppProfile(cmd) => app_profile(&c, cmd).await,
        Command::Service(cmd) => service(&c, cmd).await,
        Command::Trace(args) => super::trace::run(&c, args).await,
    }
}

async fn tenant(c: &Client, cmd: &TenantCmd) -> Out {
    match cmd {
        TenantCmd::Ls(l) => {
            let l = ListFlags {
                all: true,
                ..l.clone()
            };
            listing(
                &l,
                c.list::<Tenant>().await?,
                |_| "",
                |t| t.tenant_name.clone(),
                &["Name"],
                |t| vec![t.tenant_name.clone()],
            )
        }
        TenantCmd::Create { name } => {
            c.post(&Tenant::named(name)).await?;
            Ok(format!("Creating tenant: {name}\n"))
        }
        TenantCmd::Rm { name } => {
            c.delete::<Tenant>(name).await?;
            Ok(format!("Deleting tenant: {name}\n"))
        }
        TenantCmd::Inspect { name } => json(&c.inspect::<Tenant>(name).await?),
    }
}

async fn network(c: &Client, cmd: &NetworkCmd) -> Out {
    match cmd {
        NetworkCmd::Ls(l) => listing(
            l,
            c.list::<Network>().await?,
            |n| &n.tenant_name,
            |n| n.network_name.clone(),
            &[
                "Tenant",
                "Network",
                "Nw Type",
                "Encap type",
                "Packet tag",
                "Subnet",
                "Gateway",
                "IPv6Subnet",
                "IPv6Gateway",
                "Cfgd Tag",
            ],
            |n| {
                vec![
                    n.tenant_name.clone(),
                    n.network_name.clone(),
                    n.nw_type.clone(),
                    n.encap.clone(),
                    // 0: allocated automatically (as Contiv prints it).
                    n.pkt_tag.to_string(),
                    n.subnet.clone(),
                    n.gateway.clone(),
                    n.ipv6_subnet.clone(),
                    n.ipv6_gateway.clone(),
                    n.cfgd_tag.clone(),
                ]
            },
        ),
        NetworkCmd::Create {
            name,
            t,
            nw_type,
            encap,
            pkt_tag,
            subnet,
            gateway,
            subnetv6,
            gatewayv6,
            tag,
        } => {
            let n = Network {
                network_name: name.clone(),
                tenant_name: t.tenant.clone(),
                nw_type: nw_type.clone(),
                encap: encap.clone(),
                pkt_tag: *pkt_tag,
                subnet: subnet.clone(),
                gateway: gateway.clone(),
                ipv6_subnet: subnetv6.clone(),
                ipv6_gateway: gatewayv6.clone(),
                cfgd_tag: tag.clone(),
                ..Default::default()
            };
            c.post(&n).await?;
            Ok(format!("Creating network {}:{name}\n", t.tenant))
        }
        NetworkCmd::Rm { name, t } => {
            c.delete::<Network>(&scoped(t, name)).await?;
            Ok(format!("Deleting network {}:{name}\n", t.tenant))
        }
        NetworkCmd::Inspect { name, t } => json(&c.inspect::<Network>(&scoped(t, name)).await?),
    }
}

async fn group(c: &Client, cmd: &GroupCmd) -> Out {
    match cmd {
        GroupCmd::Ls(l) => listing(
            l,
            c.list::<EndpointGroup>().await?,
            |g| &g.tenant_name,
            |g| g.group_name.clone(),
            &[
                "Tenant",
                "Group",
                "Network",
                "IP Pool",
                "CfgdTag",
                "Policies",
                "Network profile",
            ],
            |g| {
                vec![
                    g.tenant_name.clone(),
                    g.group_name.clone(),
                    g.network_name.clone(),
                    g.ip_pool.clone(),
                    g.cfgd_tag.clone(),
                    g.policies.join(","),
                    g.net_profile.clone(),
                ]
            },
        ),
        GroupCmd::Create {
            network,
            group,
            t,
            policy,
            networkprofile,
            external_contract,
            ip_pool,
            tag,
        } => {
            let g = EndpointGroup {
                group_name: group.clone(),
                tenant_name: t.tenant.clone(),
                network_name: network.clone(),
                ip_pool: ip_pool.clone(),
                policies: policy.clone(),
                ext_contracts_grps: external_contract.clone(),
                net_profile: networkprofile.clone(),
                cfgd_tag: tag.clone(),
                ..Default::default()
            };
            c.post(&g).await?;
            Ok(format!("Creating EndpointGroup {}:{group}\n", t.tenant))
        }
        GroupCmd::Rm { group, t } => {
            c.delete::<EndpointGroup>(&scoped(t, group)).await?;
            Ok(format!("Deleting EndpointGroup {}:{group}\n", t.tenant))
        }
        GroupCmd::Inspect { group, t } => {
            json(&c.inspect::<EndpointGroup>(&scoped(t, group)).await?)
        }
    }
}

async fn netprofile(c: &Client, cmd: &NetprofileCmd) -> Out {
    match cmd {
        NetprofileCmd::Ls(l) => listing(
            l,
            c.list::<Netprofile>().await?,
            |n| &n.tenant_name,
            |n| n.profile_name.clone(),
            &["Name", "Tenant", "Bandwidth", "DSCP", "burst size"],
            |n| {
                vec![
                    n.profile_name.clone(),
                    n.tenant_name.clone(),
                    n.bandwidth.clone(),
                    n.dscp.to_string(),
                    n.burst.to_string(),
                ]
            },
        ),
        NetprofileCmd::Create {
            name,
            t,
            bandwidth,
            dscp,
            burst,
        } => {
            let n = Netprofile {
                profile_name: name.clone(),
                tenant_name: t.tenant.clone(),
                bandwidth: bandwidth.clone(),
                dscp: *dscp,
                burst: *burst,
                ..Default::default()
            };
            c.post(&n).await?;
            Ok(format!("Creating netprofile {}:{name}\n", t.tenant))
        }
        NetprofileCmd::Rm { name, t } => {
            c.delete::<Netprofile>(&scoped(t, name)).await?;
            Ok(format!("Deleting netprofile {}:{name}\n", t.tenant))
        }
        NetprofileCmd::Inspect { name, t } => {
            json(&c.inspect::<Netprofile>(&scoped(t, name)).await?)
        }
    }
}

/// Rows of `policy rule-ls`, Contiv's columns: incoming rules show the source group, network
/// and address and also the destination address; outgoing ones the destination's. A port of 0
/// (any) prints as `0`.
fn rule_rows(rules: &[&Rule]) -> Vec<Vec<String>> {
    rules
        .iter()
        .map(|r| {
            let mut row = vec![r.rule_id.clone(), r.priority.to_string()];
            if r.direction == "in" {
                row.extend([
                    r.from_endpoint_group.clone(),
                    r.from_network.clone(),
                    r.from_ip_address.clone(),
                    r.to_ip_address.clone(),
                ]);
            } else {
                row.extend([
                    r.to_endpoint_group.clone(),
                    r.to_network.clone(),
                    r.to_ip_address.clone(),
                ]);
            }
            row.extend([r.protocol.clone(), r.port.to_string(), r.action.clone()]);
            row
        })
        .collect()
}

async fn policy(c: &Client, cmd: &PolicyCmd) -> Out {
    match cmd {
        PolicyCmd::Ls(l) => listing(
            l,
            c.list::<Policy>().await?,
            |p| &p.tenant_name,
            |p| p.policy_name.clone(),
            &["Tenant", "Policy"],
            |p| vec![p.tenant_name.clone(), p.policy_name.clone()],
        ),
        PolicyCmd::Create { name, t } => {
            c.post(&Policy {
                policy_name: name.clone(),
                tenant_name: t.tenant.clone(),
                ..Default::default()
            })
            .await?;
            Ok(format!("Creating policy {}:{name}\n", t.tenant))
        }
        PolicyCmd::Rm { name, t } => {
            c.delete::<Policy>(&scoped(t, name)).await?;
            Ok(format!("Deleting policy {}:{name}\n", t.tenant))
        }
        PolicyCmd::Inspect { name, t } => json(&c.inspect::<Policy>(&scoped(t, name)).await?),
        PolicyCmd::RuleAdd {
            policy,
            rule_id,
            t,
            rule,
        } => {
            // Same client-side checks as netctl: the server checks again.
            if rule.direction == "in" && (!rule.to_group.is_empty() || !rule.to_network.is_empty())
            {
                return Err(NetctlError::Usage(
                    "an incoming rule cannot have a to-group or to-network".into(),
                ));
            }
            if rule.direction == "out"
                && (!rule.from_group.is_empty()
                    || !rule.from_network.is_empty()
                    || !rule.from_ip.is_empty())
            {
                return Err(NetctlError::Usage(
                    "an outgoing rule cannot have from-group, from-network or from-ip-address"
                        .into(),
                ));
            }
            if (!rule.from_group.is_empty() && !rule.from_network.is_empty())
                || (!rule.to_group.is_empty() && !rule.to_network.is_empty())
            {
                return Err(NetctlError::Usage(
                    "a rule cannot name both a group and a network".into(),
                ));
            }
            let r = Rule {
                rule_id: rule_id.clone(),
                tenant_name: t.tenant.clone(),
                policy_name: policy.clone(),
                direction: rule.direction.clone(),
                priority: rule.priority,
                from_endpoint_group: rule.from_group.clone(),
                to_endpoint_group: rule.to_group.clone(),
                from_network: rule.from_network.clone(),
                to_network: rule.to_network.clone(),
                from_ip_address: rule.from_ip.clone(),
                to_ip_address: rule.to_ip.clone(),
                protocol: rule.protocol.clone(),
                port: rule.port,
                action: rule.action.clone(),
                ..Default::default()
            };
            c.post(&r).await?;
            Ok(String::new())
        }
        PolicyCmd::RuleRm { policy, rule_id, t } => {
            c.delete::<Rule>(&format!("{}:{policy}:{rule_id}", t.tenant))
                .await?;
            Ok(String::new())
        }
        PolicyCmd::RuleLs { policy, l } => {
            let mut rules: Vec<Rule> = c
                .list::<Rule>()
                .await?
                .into_iter()
                .filter(|r| r.tenant_name == l.tenant && &r.policy_name == policy)
                .collect();
            rules.sort_by_key(|r| r.priority);
            if l.json {
                return json(&rules);
            }
            if l.quiet {
                return Ok(rules.iter().map(|r| r.rule_id.clone() + "\n").collect());
            }
            let incoming: Vec<&Rule> = rules.iter().filter(|r| r.direction == "in").collect();
            let outgoing: Vec<&Rule> = rules.iter().filter(|r| r.direction == "out").collect();
            let mut out = String::from("Incoming Rules:\n");
            out += &table::render(
                &[
                    "Rule",
                    "Priority",
                    "From EndpointGroup",
                    "From Network",
                    "From IpAddress",
                    "To IpAddress",
                    "Protocol",
                    "Port",
                    "Action",
                ],
                &rule_rows(&incoming),
            );
            out += "Outgoing Rules:\n";
            out += &table::render(
                &[
                    "Rule",
                    "Priority",
                    "To EndpointGroup",
                    "To Network",
                    "To IpAddress",
                    "Protocol",
                    "Port",
                    "Action",
                ],
                &rule_rows(&outgoing),
            );
            Ok(out)
        }
    }
}

async fn contracts(c: &Client, cmd: &ContractsCmd) -> Out {
    match cmd {
        ContractsCmd::Ls(l) => listing(
            l,
            c.list::<ExtContractsGroup>().await?,
            |g| &g.tenant_name,
            |g| g.contracts_group_name.clone(),
            &["Tenant", "Name", "Type", "Contracts"],
            |g| {
                vec![
                    g.tenant_name.clone(),
                    g.contracts_group_name.clone(),
                    g.contracts_type.clone(),
                    g.contracts.join(","),
                ]
            },
        ),
        ContractsCmd::Create {
            name,
            t,
            consumed,
            provided,
            contract,
        } => {
            let kind = match (consumed, provided) {
                (true, false) => "consumed",
                (false, true) => "provided",
                _ => {
                    return Err(NetctlError::Usage(
                        "give exactly one of --consumed or --provided".into(),
                    ));
                }
            };
            let g = ExtContractsGroup {
                contracts_group_name: name.clone(),
                tenant_name: t.tenant.clone(),
                contracts_type: kind.into(),
                contracts: contract.clone(),
                ..Default::default()
            };
            c.post(&g).await?;
            Ok(format!(
                "Creating ExternalContractsGroup {}:{name}\n",
                t.tenant
            ))
        }
        ContractsCmd::Rm { name, t } => {
            c.delete::<ExtContractsGroup>(&scoped(t, name)).await?;
            Ok(format!(
                "Deleting ExternalContractsGroup {}:{name}\n",
                t.tenant
            ))
        }
    }
}

async fn global(c: &Client, cmd: &GlobalCmd) -> Out {
    match cmd {
        GlobalCmd::Info { json: as_json } => {
            let g = c.get::<Global>("global").await?;
            if *as_json {
                return json(&g);
            }
            Ok(format!(
                "Fabric mode: {}\nForward mode: {}\nARP mode: {}\nVlan Range: {}\nVxlan range: {}\nPrivate subnet: {}\n",
                g.network_infra_type, g.fwd_mode, g.arp_mode, g.vlans, g.vxlans, g.pvt_subnet
            ))
        }
        GlobalCmd::Inspect => json(&c.inspect::<Global>("global").await?),
        GlobalCmd::Set {
            fabric_mode,
            vlan_range,
            vxlan_range,
            fwd_mode,
            arp_mode,
            private_subnet,
        } => {
            let mut g = c.get::<Global>("global").await?;
            let set = |field: &mut String, v: &Option<String>| {
                if let Some(v) = v {
                    field.clone_from(v);
                }
            };
            set(&mut g.network_infra_type, fabric_mode);
            set(&mut g.vlans, vlan_range);
            set(&mut g.vxlans, vxlan_range);
            set(&mut g.fwd_mode, fwd_mode);
            set(&mut g.arp_mode, arp_mode);
            set(&mut g.pvt_subnet, private_subnet);
            c.post(&g).await?;
            Ok(String::new())
        }
    }
}

async fn aci_gw(c: &Client, cmd: &AciGwCmd) -> Out {
    match cmd {
        AciGwCmd::Info { json: as_json } => {
            let g = c.get::<AciGw>("aciGw").await?;
            if *as_json {
                return json(&g);
            }
            Ok(format!(
                "Path bindings: {}\nNode bindings: {}\nPhysical domain: {}\nEnforce policies: {}\nInclude common tenant: {}\n",
                g.path_bindings,
                g.node_bindings,
                g.physical_domain,
                g.enforce_policies,
                g.include_common_tenant
            ))
        }
        AciGwCmd::Inspect => json(&c.inspect::<AciGw>("aciGw").await?),
        AciGwCmd::Set {
            path_bindings,
            node_bindings,
            phys_dom,
            enforce_policies,
            include_common_tenant,
        } => {
            let g = AciGw {
                name: "aciGw".into(),
                path_bindings: path_bindings.clone(),
                node_bindings: node_bindings.clone(),
                physical_domain: phys_dom.clone(),
                enforce_policies: enforce_policies.clone(),
                include_common_tenant: include_common_tenant.clone(),
                ..Default::default()
            };
            c.post(&g).await?;
            Ok(String::new())
        }
    }
}

async fn bgp(c: &Client, cmd: &BgpCmd) -> Out {
    match cmd {
        BgpCmd::Ls(l) => {
            let l = ListFlags {
                all: true,
                ..l.clone()
            };
            listing(
                &l,
                c.list::<Bgp>().await?,
                |_| "",
                |b| b.hostname.clone(),
                &["HostName", "RouterIP", "AS", "Neighbor", "NeighborAS"],
                |b| {
                    vec![
                        b.hostname.clone(),
                        b.routerip.clone(),
                        b.as_.clone(),
                        b.neighbor.clone(),
                        b.neighbor_as.clone(),
                    ]
                },
            )
        }
        BgpCmd::Create {
            hostname,
            router_ip,
            as_,
            neighbor_as,
            neighbor,
        } => {
            let b = Bgp {
                hostname: hostname.clone(),
                routerip: router_ip.clone(),
                as_: as_.clone(),
                neighbor_as: neighbor_as.clone(),
                neighbor: neighbor.clone(),
                ..Default::default()
            };
            c.post(&b).await?;
            Ok(format!("Creating Bgp config for host {hostname}\n"))
        }
        BgpCmd::Rm { hostname } => {
            c.delete::<Bgp>(hostname).await?;
            Ok(format!("Deleting Bgp config for host {hostname}\n"))
        }
        BgpCmd::Inspect { hostname } => json(&c.inspect::<Bgp>(hostname).await?),
    }
}

fn split_groups(groups: &str) -> Vec<String> {
    groups
        .split(',')
        .map(str::trim)
        .filter(|g| !g.is_empty())
        .map(String::from)
        .collect()
}

async fn app_profile(c: &Client, cmd: &AppProfileCmd) -> Out {
    match cmd {
        AppProfileCmd::Ls(l) => listing(
            l,
            c.list::<AppProfile>().await?,
            |a| &a.tenant_name,
            |a| a.app_profile_name.clone(),
            &["Tenant", "AppProfile", "Groups"],
            |a| {
                vec![
                    a.tenant_name.clone(),
                    a.app_profile_name.clone(),
                    a.endpoint_groups.join(","),
                ]
            },
        ),
        AppProfileCmd::Create { name, t, group } | AppProfileCmd::Update { name, t, group } => {
            let a = AppProfile {
                app_profile_name: name.clone(),
                tenant_name: t.tenant.clone(),
                endpoint_groups: split_groups(group),
                ..Default::default()
            };
            c.post(&a).await?;
            Ok(format!("Writing app profile {}:{name}\n", t.tenant))
        }
        AppProfileCmd::Rm { name, t } => {
            c.delete::<AppProfile>(&scoped(t, name)).await?;
            Ok(format!("Deleting app profile {}:{name}\n", t.tenant))
        }
        AppProfileCmd::GroupLs { name, l } => {
            let a = c.get::<AppProfile>(&format!("{}:{name}", l.tenant)).await?;
            if l.json {
                return json(&a);
            }
            if l.quiet {
                return Ok(a.endpoint_groups.iter().map(|g| g.clone() + "\n").collect());
            }
            // Contiv's output: the groups joined by commas (we end the line).
            Ok(a.endpoint_groups.join(",") + "\n")
        }
    }
}

async fn service(c: &Client, cmd: &ServiceCmd) -> Out {
    match cmd {
        ServiceCmd::Ls(l) => listing(
            l,
            c.list::<ServiceLb>().await?,
            |s| &s.tenant_name,
            |s| s.service_name.clone(),
            &["ServiceName", "Tenant", "Network", "Selectors"],
            |s| {
                vec![
                    s.service_name.clone(),
                    s.tenant_name.clone(),
                    s.network_name.clone(),
                    s.selectors.join(","),
                ]
            },
        ),
        ServiceCmd::Create {
            name,
            t,
            network,
            selector,
            port,
            preferred_ip,
            session_affinity,
            affinity_timeout,
        } => {
            let s = ServiceLb {
                service_name: name.clone(),
                tenant_name: t.tenant.clone(),
                network_name: network.clone(),
                ip_address: preferred_ip.clone(),
                selectors: selector.clone(),
                ports: port.clone(),
                session_affinity: session_affinity.clone(),
                affinity_timeout: *affinity_timeout,
                ..Default::default()
            };
            c.post(&s).await?;
            Ok(format!("Creating ServiceLB {}:{name}\n", t.tenant))
        }
        ServiceCmd::Rm { name, t } => {
            c.delete::<ServiceLb>(&scoped(t, name)).await?;
            Ok(format!("Deleting ServiceLB {}:{name}\n", t.tenant))
        }
        ServiceCmd::Inspect { name, t } => json(&c.inspect::<ServiceLb>(&scoped(t, name)).await?),
    }
}
