//! The inline DNS (reference §4.4, `--dns-enable`): every local endpoint's DNS queries (UDP to
//! port 53 from its own address, whatever server it asks) are punted to the agent by a
//! table-1 flow (`DNS_PUNT`, docs/pipeline.md), and answered here, per tenant (the tenant of
//! the endpoint that asks), from the names the cluster state gives ([`names`]): netctl service
//! names (the VIP), endpoint group names (every member's addresses) and container or pod names
//! (the endpoint's addresses), A and AAAA, TTL [`TTL`], at most [`names::MAX_ANSWERS`]
//! records. A name the tenant does not have goes to the upstream resolver (`--dns-upstream`,
//! default: /etc/resolv.conf's first nameserver) from netplugin's own socket, and its answer
//! goes back to the endpoint as if the server it asked had sent it.
//!
//! Sources: `state/eps/` (endpoint names, groups and addresses; names come from
//! `/plugin/updateEndpoint`: Docker container names through [`crate::docker::events`], pod
//! names at CNI ADD) and `state/serviceLB/` (netctl services), listed then watched.
//!
//! One task owns the tables and the forwarded queries; the agents hand it punted frames
//! through a channel and it answers through [`ofnet::AgentHandle::send_frame`].

pub mod frame;
pub mod names;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use hickory_proto::op::{Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA};
use hickory_proto::rr::{RData, Record, RecordType};
use master::state::{CfgEndpointState, CfgServiceLbState};
use master::store::{WatchEvent, keys};
use ofnet::{BridgeKind, DnsQuery};
use tokio::net::UdpSocket;
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};

use crate::driver::Driver;
use frame::Datagram;
use names::{EndpointName, MAX_ANSWERS, Names, ServiceName};

/// TTL of the answers (Contiv: 120 s).
pub const TTL: u32 = 120;
/// How long a forwarded query waits for the upstream's answer.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest answer sent back (Contiv dropped larger ones; plain DNS over UDP is 512).
const MAX_REPLY: usize = 1024;
/// Pause before a broken watch is listed again.
const WATCH_RETRY: Duration = Duration::from_secs(1);

/// The senders the two agents punt queries into.
#[derive(Debug, Clone)]
pub struct PuntSenders {
    vxlan: UnboundedSender<DnsQuery>,
    vlan: UnboundedSender<DnsQuery>,
}

impl PuntSenders {
    /// The sender of a bridge's agent; the host bridge punts no DNS.
    pub fn for_bridge(&self, kind: BridgeKind) -> Option<UnboundedSender<DnsQuery>> {
        match kind {
            BridgeKind::Vxlan => Some(self.vxlan.clone()),
            BridgeKind::Vlan => Some(self.vlan.clone()),
            BridgeKind::Host => None,
        }
    }
}

/// The punted queries of both agents.
#[derive(Debug)]
pub struct Punted {
    vxlan: UnboundedReceiver<DnsQuery>,
    vlan: UnboundedReceiver<DnsQuery>,
}

pub fn punt_channels() -> (PuntSenders, Punted) {
    let (vxlan_tx, vxlan) = mpsc::unbounded_channel();
    let (vlan_tx, vlan) = mpsc::unbounded_channel();
    (
        PuntSenders {
            vxlan: vxlan_tx,
            vlan: vlan_tx,
        },
        Punted { vxlan, vlan },
    )
}

/// The first `nameserver` of /etc/resolv.conf, port 53.
pub fn system_resolver() -> Option<SocketAddr> {
    let text = std::fs::read_to_string("/etc/resolv.conf").ok()?;
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("nameserver"))
        .filter_map(|rest| rest.trim().parse::<IpAddr>().ok())
        .map(|ip| SocketAddr::new(ip, 53))
        .next()
}

/// A change of the names.
#[derive(Debug)]
enum NameEvent {
    Endpoint(String, Option<EndpointName>),
    Service(String, Option<ServiceName>),
}

/// A query sent upstream, waiting for its answer.
struct Forwarded {
    kind: BridgeKind,
    port: u32,
    query: Datagram,
    id: u16,
    since: Instant,
}

/// Serve the punted queries until the task is dropped.
pub async fn serve(driver: Arc<Driver>, mut punted: Punted) {
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let feeds = [
        tokio::spawn(feed(
            driver.clone(),
            keys::state_prefix(keys::category::EPS),
            events_tx.clone(),
        )),
        tokio::spawn(feed(
            driver.clone(),
            keys::state_prefix(keys::category::SERVICE_LB),
            events_tx,
        )),
    ];
    let upstream = driver.cfg.dns_upstream;
    let socket = match UdpSocket::bind(if upstream.is_some_and(|u| u.is_ipv6()) {
        "[::]:0"
    } else {
        "0.0.0.0:0"
    })
    .await
    {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!(error = %e, "inline DNS: no socket for forwarding; unknown names get SERVFAIL");
            None
        }
    };
    tracing::info!(upstream = ?upstream, "inline DNS on");
    let mut server = Server {
        driver,
        names: Names::default(),
        forwarded: HashMap::new(),
        next_id: 1,
        upstream,
    };
    let mut buf = vec![0u8; 4096];
    let mut sweep = tokio::time::interval(FORWARD_TIMEOUT);
    loop {
        tokio::select! {
            Some(q) = punted.vxlan.recv() => server.query(BridgeKind::Vxlan, q, socket.as_ref()).await,
            Some(q) = punted.vlan.recv() => server.query(BridgeKind::Vlan, q, socket.as_ref()).await,
            Some(e) = events.recv() => server.apply(e),
            Ok((n, from)) = async {
                match &socket {
                    Some(s) => s.recv_from(&mut buf).await,
                    None => std::future::pending().await,
                }
            } => server.upstream_answer(&buf[..n], from),
            _ = sweep.tick() => server.expire(),
            else => break,
        }
    }
    for f in feeds {
        f.abort();
    }
}

struct Server {
    driver: Arc<Driver>,
    names: Names,
    forwarded: HashMap<u16, Forwarded>,
    next_id: u16,
    upstream: Option<SocketAddr>,
}

impl Server {
    fn apply(&mut self, e: NameEvent) {
        match e {
            NameEvent::Endpoint(id, Some(ep)) => self.names.set_endpoint(&id, ep),
            NameEvent::Endpoint(id, None) => self.names.remove_endpoint(&id),
            NameEvent::Service(id, Some(s)) => self.names.set_service(&id, s),
            NameEvent::Service(id, None) => self.names.remove_service(&id),
        }
    }

    fn send(&self, kind: BridgeKind, port: u32, query: &Datagram, payload: Vec<u8>) {
        let frame = query.reply(payload).to_frame();
        self.driver.agent(kind).send_frame(port, frame);
    }

    async fn query(&mut self, kind: BridgeKind, q: DnsQuery, socket: Option<&UdpSocket>) {
        let Some(dgram) = Datagram::parse(&q.frame).filter(|d| d.dst_port == 53) else {
            return;
        };
        let Ok(msg) = Message::from_vec(&dgram.payload) else {
            tracing::debug!(port = q.in_port, "inline DNS: not a DNS message");
            return;
        };
        let tenant = self
            .driver
            .local_endpoints()
            .into_iter()
            .find(|l| l.kind == kind && l.ofport == q.in_port)
            .map(|l| l.oper.tenant);
        let answer = match (&tenant, msg.queries.first()) {
            (Some(tenant), Some(question))
                if msg.metadata.message_type == MessageType::Query
                    && msg.metadata.op_code == OpCode::Query
                    && msg.queries.len() == 1 =>
            {
                let name = question.name().to_ascii();
                self.names
                    .lookup(tenant, &name)
                    .map(|addrs| answer(&msg, question.query_type(), &addrs))
            }
            _ => None,
        };
        if let Some(reply) = answer {
            if reply.len() <= MAX_REPLY {
                self.send(kind, q.in_port, &dgram, reply);
            }
            return;
        }
        // Not ours: to the upstream resolver, under an id of our own.
        let (Some(socket), Some(upstream)) = (socket, self.upstream) else {
            self.send(kind, q.in_port, &dgram, failure(&msg));
            return;
        };
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1).max(1);
        let mut payload = dgram.payload.clone();
        payload[0..2].copy_from_slice(&id.to_be_bytes());
        if let Err(e) = socket.send_to(&payload, upstream).await {
            tracing::debug!(%upstream, error = %e, "inline DNS: forward");
            self.send(kind, q.in_port, &dgram, failure(&msg));
            return;
        }
        self.forwarded.insert(
            id,
            Forwarded {
                kind,
                port: q.in_port,
                id: msg.metadata.id,
                query: dgram,
                since: Instant::now(),
            },
        );
    }

    fn upstream_answer(&mut self, payload: &[u8], from: SocketAddr) {
        if Some(from) != self.upstream || payload.len() < 12 {
            return;
        }
        let id = u16::from_be_bytes([payload[0], payload[1]]);
        let Some(f) = self.forwarded.remove(&id) else {
            return;
        };
        let mut reply = payload.to_vec();
        reply[0..2].copy_from_slice(&f.id.to_be_bytes());
        self.send(f.kind, f.port, &f.query, reply);
    }

    fn expire(&mut self) {
        self.forwarded
            .retain(|_, f| f.since.elapsed() < FORWARD_TIMEOUT);
    }
}

/// The answer to `msg` for a name the tenant has: its addresses of the asked family (none:
/// an empty NOERROR answer).
fn answer(msg: &Message, qtype: RecordType, addrs: &[IpAddr]) -> Vec<u8> {
    let mut reply = Message::response(msg.metadata.id, OpCode::Query);
    reply.metadata.authoritative = true;
    reply.metadata.recursion_desired = msg.metadata.recursion_desired;
    reply.metadata.recursion_available = true;
    reply.metadata.response_code = ResponseCode::NoError;
    let question = msg.queries[0].clone();
    let name = question.name().clone();
    reply.add_query(question);
    let records = addrs.iter().filter_map(|a| match (a, qtype) {
        (IpAddr::V4(v4), RecordType::A | RecordType::ANY) => Some(RData::A(A(*v4))),
        (IpAddr::V6(v6), RecordType::AAAA | RecordType::ANY) => Some(RData::AAAA(AAAA(*v6))),
        _ => None,
    });
    for rdata in records.take(MAX_ANSWERS) {
        reply.add_answer(Record::from_rdata(name.clone(), TTL, rdata));
    }
    reply.to_vec().unwrap_or_default()
}

/// SERVFAIL for `msg` (nothing to forward it to).
fn failure(msg: &Message) -> Vec<u8> {
    let mut reply = Message::error_msg(
        msg.metadata.id,
        msg.metadata.op_code,
        ResponseCode::ServFail,
    );
    reply.metadata.recursion_desired = msg.metadata.recursion_desired;
    for q in &msg.queries {
        reply.add_query(q.clone());
    }
    reply.to_vec().unwrap_or_default()
}

/// The tenant of an endpoint's network id (`<network>.<tenant>`).
fn tenant_of(driver: &Driver, net_id: &str) -> String {
    driver
        .known_network(net_id)
        .map(|n| n.tenant)
        .or_else(|| net_id.rsplit_once('.').map(|(_, t)| t.to_string()))
        .unwrap_or_default()
}

fn event_of(driver: &Driver, prefix: &str, key: &str, value: Option<&[u8]>) -> Option<NameEvent> {
    let id = key.strip_prefix(prefix)?.to_string();
    let is_eps = prefix.ends_with(&format!("{}/", keys::category::EPS));
    if is_eps {
        let ep = value
            .and_then(|v| serde_json::from_slice::<CfgEndpointState>(v).ok())
            .map(|ep| EndpointName {
                tenant: tenant_of(driver, &ep.net_id),
                name: ep.ep_common_name.trim_start_matches('/').to_string(),
                group: ep.service_name.clone(),
                addresses: [&ep.ip_address, &ep.ipv6_address]
                    .iter()
                    .filter_map(|a| a.split('/').next()?.parse().ok())
                    .collect(),
            });
        return Some(NameEvent::Endpoint(id, ep));
    }
    let svc = value
        .and_then(|v| serde_json::from_slice::<CfgServiceLbState>(v).ok())
        .map(|s| ServiceName {
            tenant: s.tenantname.clone(),
            name: s.servicename.clone(),
            addresses: s.ipaddress.parse().ok().into_iter().collect(),
        });
    Some(NameEvent::Service(id, svc))
}

/// List `prefix`, then follow it, sending every change to the server.
async fn feed(driver: Arc<Driver>, prefix: String, tx: UnboundedSender<NameEvent>) {
    loop {
        let listing = match driver.store.list(&prefix).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(%prefix, error = %e, "inline DNS: list");
                tokio::time::sleep(WATCH_RETRY).await;
                continue;
            }
        };
        for kv in &listing.entries {
            if let Some(e) = event_of(&driver, &prefix, &kv.key, Some(&kv.value)) {
                let _ = tx.send(e);
            }
        }
        match driver
            .store
            .watch(prefix.clone(), listing.revision + 1)
            .await
        {
            Ok(mut events) => {
                while let Some(Ok(event)) = events.next().await {
                    let e = match &event {
                        WatchEvent::Put { kv } => {
                            event_of(&driver, &prefix, &kv.key, Some(&kv.value))
                        }
                        WatchEvent::Delete { key, .. } => event_of(&driver, &prefix, key, None),
                    };
                    if let Some(e) = e
                        && tx.send(e).is_err()
                    {
                        return;
                    }
                }
            }
            Err(e) => tracing::warn!(%prefix, error = %e, "inline DNS: watch"),
        }
        tokio::time::sleep(WATCH_RETRY).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::op::Query;
    use hickory_proto::rr::Name;

    #[test]
    fn answers_carry_the_asked_family_and_the_query() {
        let mut q = Message::query();
        q.metadata.id = 77;
        q.metadata.recursion_desired = true;
        q.add_query(Query::query(
            Name::from_ascii("web.").unwrap(),
            RecordType::AAAA,
        ));
        let addrs: Vec<IpAddr> = vec!["10.0.0.2".parse().unwrap(), "fd00::2".parse().unwrap()];
        let reply = Message::from_vec(&answer(&q, RecordType::AAAA, &addrs)).unwrap();
        assert_eq!(reply.metadata.id, 77);
        assert_eq!(reply.metadata.message_type, MessageType::Response);
        assert_eq!(reply.queries.len(), 1);
        assert_eq!(reply.answers.len(), 1);
        assert_eq!(
            reply.answers[0].data,
            RData::AAAA(AAAA("fd00::2".parse().unwrap()))
        );
        let reply = Message::from_vec(&answer(&q, RecordType::A, &addrs)).unwrap();
        assert_eq!(
            reply.answers[0].data,
            RData::A(A("10.0.0.2".parse().unwrap()))
        );
        let fail = Message::from_vec(&failure(&q)).unwrap();
        assert_eq!(fail.metadata.response_code, ResponseCode::ServFail);
    }
}
