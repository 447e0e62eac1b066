//! `netctl trace`: fetch every host's flow tables from its netplugin's debug listener
//! (`GET /inspect/flows/<bridge>`), find the source endpoint, and walk a packet through the
//! tables offline (`ofnet::trace`), continuing on the host a VTEP leads to.
//!
//! netctl asks the netplugins directly: they hold the desired tables (which the master does
//! not), and each also reports the switch's actual tables, so a difference on the path is
//! shown. Their debug addresses are given with `--netplugin` (or `NETPLUGINS`).

use std::net::IpAddr;

use serde::Deserialize;

use super::cli::TraceArgs;
use super::commands::{NetctlError, Out, json};
use crate::client::{Client, ClientError};
use ofnet::trace::explain::parse_target;
use ofnet::trace::packet::ct;
use ofnet::trace::{
    CtAssumptions, FlowDiff, PacketSpec, PortRole, Proto, TableSet, TableSetJson, trace_hosts,
};

#[derive(Deserialize)]
struct FlowsReply {
    desired: TableSetJson,
    #[serde(default)]
    differences: Vec<FlowDiff>,
}

async fn fetch(
    http: &reqwest::Client,
    base: &str,
    bridge: &str,
) -> Result<FlowsReply, NetctlError> {
    let url = format!("{}/inspect/flows/{bridge}", base.trim_end_matches('/'));
    let reply = http
        .get(&url)
        .send()
        .await
        .map_err(|e| ClientError::Unreachable {
            url: url.clone(),
            reason: e.to_string(),
        })?;
    let status = reply.status().as_u16();
    let body = reply.text().await.map_err(|e| ClientError::Decode {
        url: url.clone(),
        reason: e.to_string(),
    })?;
    if status != 200 {
        return Err(ClientError::Api {
            status,
            message: format!("netplugin at {base}: {body}"),
        }
        .into());
    }
    serde_json::from_str(&body).map_err(|e| {
        ClientError::Decode {
            url,
            reason: e.to_string(),
        }
        .into()
    })
}

/// The address of pod `namespace/name`, from the netplugins' `GET /inspect/endpoints` (each
/// local endpoint's oper state names its pod: `podNamespace`, `epCommonName`).
async fn pod_address(
    http: &reqwest::Client,
    netplugins: &[String],
    namespace: &str,
    name: &str,
) -> Result<Option<IpAddr>, NetctlError> {
    for base in netplugins {
        let url = format!("{}/inspect/endpoints", base.trim_end_matches('/'));
        let reply = http
            .get(&url)
            .send()
            .await
            .map_err(|e| ClientError::Unreachable {
                url: url.clone(),
                reason: e.to_string(),
            })?;
        let eps: std::collections::BTreeMap<String, serde_json::Value> =
            reply.json().await.map_err(|e| ClientError::Decode {
                url: url.clone(),
                reason: e.to_string(),
            })?;
        let found = eps.values().find_map(|ep| {
            let oper = ep.get("oper")?;
            if oper.get("podNamespace")?.as_str()? != namespace
                || oper.get("epCommonName")?.as_str()? != name
            {
                return None;
            }
            ["ipAddress", "ipv6Address"]
                .iter()
                .find_map(|k| oper.get(*k)?.as_str()?.parse::<IpAddr>().ok())
        });
        if found.is_some() {
            return Ok(found);
        }
    }
    Ok(None)
}

/// The debug listeners of every netplugin registered with netmaster (`/debug/netplugins`).
async fn registered_netplugins(client: &Client) -> Result<Vec<String>, NetctlError> {
    let hosts = client.netplugins().await?;
    let urls: Vec<String> = hosts
        .iter()
        .filter_map(|h| h["debugUrl"].as_str().map(str::to_string))
        .collect();
    if urls.is_empty() {
        return Err(NetctlError::Usage(
            "no netplugin has registered its debug listener with netmaster; name the hosts with --netplugin http://<host>:9090,...".into(),
        ));
    }
    Ok(urls)
}

pub async fn run(client: &Client, args: &TraceArgs) -> Out {
    let usage = |m: String| NetctlError::Usage(m);
    let proto: Proto = args.proto.parse().map_err(usage)?;
    let (dst, dport) = parse_target(&args.to).ok_or_else(|| {
        usage(format!(
            "--to {:?}: expected an IP address or IP:port (e.g. 10.1.1.3:80)",
            args.to
        ))
    })?;
    let mut next = Vec::new();
    for s in &args.ct_next {
        next.push(ct::parse(s).ok_or_else(|| {
            usage(format!(
                "--ct-next {s:?}: expected flags among trk,new,est,rel,rpl,inv,snat,dnat"
            ))
        })?);
    }
    let netplugins = if args.netplugin.is_empty() {
        registered_netplugins(client).await?
    } else {
        args.netplugin.clone()
    };
    let http = reqwest::Client::new();
    let mut hosts = Vec::new();
    let mut diffs = Vec::new();
    for base in &netplugins {
        let reply = fetch(&http, base, &args.bridge).await?;
        let tables = TableSet::from_json(&reply.desired).map_err(|e| ClientError::Decode {
            url: base.clone(),
            reason: e.to_string(),
        })?;
        hosts.push(tables);
        diffs.push(reply.differences);
    }
    // The source: a local endpoint of one of the hosts, by id, address or pod namespace/name.
    let from_ip: Option<IpAddr> = args.from.parse().ok();
    let from_ip = match (from_ip, args.from.split_once('/')) {
        (None, Some((namespace, name))) => Some(
            pod_address(&http, &netplugins, namespace, name)
                .await?
                .ok_or_else(|| {
                    usage(format!(
                        "--from {:?}: no pod {name} in namespace {namespace} has an endpoint on any of the {} netplugins asked",
                        args.from,
                        netplugins.len()
                    ))
                })?,
        ),
        (ip, _) => ip,
    };
    let source = hosts.iter().enumerate().find_map(|(h, t)| {
        t.ports.iter().find_map(|(port, role)| match role {
            PortRole::Endpoint {
                id,
                ipv4,
                ipv6,
                mac,
                ..
            } if *id == args.from
                || from_ip.is_some_and(|ip| {
                    Some(ip) == ipv4.map(IpAddr::V4) || Some(ip) == ipv6.map(IpAddr::V6)
                }) =>
            {
                let ip = from_ip.or(ipv4.map(IpAddr::V4)).or(ipv6.map(IpAddr::V6))?;
                Some((h, *port, *mac, ip))
            }
            _ => None,
        })
    });
    let Some((h, in_port, src_mac, src_ip)) = source else {
        return Err(usage(format!(
            "--from {:?}: no endpoint with this id or address is local to any of the {} netplugins asked",
            args.from,
            hosts.len()
        )));
    };
    // The destination MAC a pod would use: the endpoint's own, else the ARP proxy's answer
    // for a service VIP (`02:02:<address>`), which is also the allocation convention.
    let dst_mac = hosts
        .iter()
        .flat_map(|t| t.ports.values())
        .find_map(|r| match r {
            PortRole::Endpoint {
                ipv4, ipv6, mac, ..
            } if Some(dst) == ipv4.map(IpAddr::V4) || Some(dst) == ipv6.map(IpAddr::V6) => {
                Some(*mac)
            }
            _ => None,
        })
        .unwrap_or_else(|| match dst {
            IpAddr::V4(a) => {
                let o = a.octets();
                ofnet::MacAddr([2, 2, o[0], o[1], o[2], o[3]])
            }
            IpAddr::V6(_) => ofnet::MacAddr([2, 2, 0, 0, 0, 1]),
        });
    if proto == Proto::Arp && (src_ip.is_ipv6() || dst.is_ipv6()) {
        return Err(usage("--proto arp needs IPv4 addresses".into()));
    }
    let spec = PacketSpec {
        in_port,
        dl_src: src_mac,
        dl_dst: if proto == Proto::Arp {
            ofnet::MacAddr([0xff; 6])
        } else {
            dst_mac
        },
        vlan: None,
        tun_id: None,
        src: src_ip,
        dst,
        proto,
        tp_src: args.sport,
        tp_dst: dport.unwrap_or(if proto == Proto::Udp { 53 } else { 80 }),
        tcp_flags: 0x002,
    };
    let ct = CtAssumptions {
        next,
        original_tuple: true,
    };
    let traces = trace_hosts(&hosts, h, &spec.fields(), &ct, &diffs);
    if args.json {
        return json(&serde_json::json!({ "packet": spec, "paths": traces }));
    }
    let mut out = format!("packet: {}\n", spec.ovs_flow());
    if traces.len() > 1 {
        out.push_str(&format!(
            "{} alternatives (a select group's bucket is the switch's choice per connection)\n",
            traces.len()
        ));
    }
    for t in &traces {
        out.push('\n');
        out.push_str(&t.render());
    }
    Ok(out)
}
