//! BGP in routing mode (VLAN networks run `vlrouter`): the [`Bgp`] actor owns this host's
//! speaker ([`speaker::Speaker`], GoBGP) and keeps two things true, from this host's Bgp
//! object (`/contiv.io/state/bgp/<host>`):
//! - the speaker announces exactly this host's VLAN endpoints, each as a /32 with the host's
//!   router address as next hop (an ADD announces at once, a DEL withdraws at once; a poll
//!   every [`POLL`] repairs anything missed, e.g. after a restart adopted a running speaker);
//! - the VLAN agent routes exactly the prefixes the speaker learned (best paths), each to its
//!   next hop (whose MAC the agent learns by ARP on the uplink). A session that goes down
//!   takes its routes with it (GoBGP drops them; with graceful restart, after the restart
//!   time).
//!
//! The router port itself (`inb01`, the router address on the uplink's bridge) is plumbed by
//! the driver before [`Configure`] reaches the actor. Every message is handled to the end
//! before the next (one speaker call sequence at a time).

pub mod speaker;

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::time::Duration;

use actix::prelude::*;
use ipnet::Ipv4Net;
use serde_json::{Value, json};

use ofnet::AgentHandle;
pub use speaker::{Speaker, SpeakerConfig, SpeakerError};

/// How often the speaker's RIB is read (learned routes, missing announcements).
pub const POLL: Duration = Duration::from_millis(500);

/// Why a BGP operation failed.
#[derive(Debug, thiserror::Error)]
pub enum BgpError {
    #[error(transparent)]
    Speaker(#[from] SpeakerError),
    #[error("no Bgp configuration for this host")]
    NotConfigured,
    #[error("BGP is not running (the actor stopped)")]
    Stopped,
}

/// Run the speaker with this configuration, or stop it (`None`); answers the next hops of the
/// routes handed to the agent.
#[derive(Debug, Message)]
#[rtype(result = "Result<BTreeSet<Ipv4Addr>, BgpError>")]
pub struct Configure(pub Option<SpeakerConfig>);

/// A local endpoint address appeared (`present`) or went.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct Local {
    pub ip: Ipv4Addr,
    pub present: bool,
}

/// `/inspect/bgp`.
#[derive(Debug, Message)]
#[rtype(result = "Result<Value, BgpError>")]
pub struct Inspect;

#[derive(Debug, Message)]
#[rtype(result = "()")]
struct Poll;

/// See the module documentation.
pub struct Bgp {
    speaker: Speaker,
    agent: AgentHandle,
    config: Option<SpeakerConfig>,
    /// This host's endpoint addresses (what must be announced).
    locals: BTreeSet<Ipv4Addr>,
    /// Routes handed to the agent.
    installed: BTreeMap<Ipv4Net, Ipv4Addr>,
}

impl Bgp {
    pub fn new(speaker: Speaker, agent: AgentHandle) -> Bgp {
        Bgp {
            speaker,
            agent,
            config: None,
            locals: BTreeSet::new(),
            installed: BTreeMap::new(),
        }
    }

    fn host_route(ip: Ipv4Addr) -> Ipv4Net {
        Ipv4Net::from(ip)
    }
}

impl Actor for Bgp {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.run_interval(POLL, |_, ctx| ctx.notify(Poll));
    }
}

/// Bring the agent's routes to `learned`: add new and changed ones, remove gone ones.
async fn sync_routes(
    agent: &AgentHandle,
    installed: &BTreeMap<Ipv4Net, Ipv4Addr>,
    learned: &BTreeMap<Ipv4Net, Ipv4Addr>,
) -> BTreeMap<Ipv4Net, Ipv4Addr> {
    let mut now = installed.clone();
    for (prefix, nh) in learned {
        if installed.get(prefix) != Some(nh) {
            match agent.add_route(*prefix, *nh).await {
                Ok(()) => {
                    now.insert(*prefix, *nh);
                }
                Err(e) => {
                    tracing::warn!(%prefix, next_hop = %nh, error = %e, "installing a learned route")
                }
            }
        }
    }
    for prefix in installed.keys().filter(|p| !learned.contains_key(p)) {
        match agent.remove_route(*prefix).await {
            Ok(()) => {
                now.remove(prefix);
            }
            Err(e) => tracing::warn!(%prefix, error = %e, "removing a withdrawn route"),
        }
    }
    now
}

impl Handler<Configure> for Bgp {
    type Result = AtomicResponse<Self, Result<BTreeSet<Ipv4Addr>, BgpError>>;

    fn handle(&mut self, Configure(config): Configure, _: &mut Context<Self>) -> Self::Result {
        let speaker = self.speaker.clone();
        let agent = self.agent.clone();
        let installed = self.installed.clone();
        let locals = self.locals.clone();
        let wanted = config.clone();
        AtomicResponse::new(Box::pin(
            async move {
                match &wanted {
                    Some(c) => {
                        let started = speaker.ensure(c).await?;
                        tracing::info!(
                            router = %c.router,
                            as_ = c.local_as,
                            neighbor = ?c.neighbor,
                            started,
                            "BGP speaker running"
                        );
                        for ip in &locals {
                            speaker
                                .announce(Bgp::host_route(*ip), c.router.addr())
                                .await?;
                        }
                        // A speaker adopted at a restart has its routes already: handed to
                        // the agent now, they are in the switch's first flow table (the
                        // driver replays before the switch connects) instead of a poll later.
                        Ok(match speaker.rib().await {
                            Ok(rib) => sync_routes(&agent, &installed, &rib.learned).await,
                            Err(_) => installed,
                        })
                    }
                    None => {
                        speaker.stop().await;
                        Ok(sync_routes(&agent, &installed, &BTreeMap::new()).await)
                    }
                }
            }
            .into_actor(self)
            .map(move |result: Result<_, BgpError>, act, _| {
                let installed = result?;
                let next_hops = installed.values().copied().collect();
                act.installed = installed;
                act.config = config;
                Ok(next_hops)
            }),
        ))
    }
}

impl Handler<Local> for Bgp {
    type Result = AtomicResponse<Self, ()>;

    fn handle(&mut self, Local { ip, present }: Local, _: &mut Context<Self>) -> Self::Result {
        if present {
            self.locals.insert(ip);
        } else {
            self.locals.remove(&ip);
        }
        let Some(config) = self.config.clone() else {
            return AtomicResponse::new(Box::pin(fut::ready(())));
        };
        let speaker = self.speaker.clone();
        AtomicResponse::new(Box::pin(
            async move {
                let prefix = Bgp::host_route(ip);
                let result = if present {
                    speaker.announce(prefix, config.router.addr()).await
                } else {
                    speaker.withdraw(prefix).await
                };
                if let Err(e) = result {
                    // The next poll tries again.
                    tracing::warn!(%ip, present, error = %e, "BGP announcement");
                }
            }
            .into_actor(self),
        ))
    }
}

impl Handler<Poll> for Bgp {
    type Result = AtomicResponse<Self, ()>;

    fn handle(&mut self, _: Poll, _: &mut Context<Self>) -> Self::Result {
        let Some(config) = self.config.clone() else {
            return AtomicResponse::new(Box::pin(fut::ready(())));
        };
        let speaker = self.speaker.clone();
        let agent = self.agent.clone();
        let installed = self.installed.clone();
        let locals: BTreeSet<Ipv4Net> = self.locals.iter().map(|ip| Bgp::host_route(*ip)).collect();
        AtomicResponse::new(Box::pin(
            async move {
                let rib = match speaker.rib().await {
                    Ok(rib) => rib,
                    Err(e) => {
                        // A speaker that died is started again (the router keeps our
                        // routes for the restart time).
                        tracing::warn!(error = %e, "reading the BGP RIB");
                        if !speaker.ready().await
                            && let Err(e) = speaker.ensure(&config).await
                        {
                            tracing::warn!(error = %e, "restarting the BGP speaker");
                        }
                        return installed;
                    }
                };
                for prefix in locals.difference(&rib.local) {
                    if let Err(e) = speaker.announce(*prefix, config.router.addr()).await {
                        tracing::warn!(%prefix, error = %e, "announcing");
                    }
                }
                for prefix in rib.local.difference(&locals) {
                    if let Err(e) = speaker.withdraw(*prefix).await {
                        tracing::warn!(%prefix, error = %e, "withdrawing");
                    }
                }
                sync_routes(&agent, &installed, &rib.learned).await
            }
            .into_actor(self)
            .map(|installed, act, _| act.installed = installed),
        ))
    }
}

impl Handler<Inspect> for Bgp {
    type Result = ResponseFuture<Result<Value, BgpError>>;

    fn handle(&mut self, _: Inspect, _: &mut Context<Self>) -> Self::Result {
        let Some(config) = self.config.clone() else {
            return Box::pin(async { Err(BgpError::NotConfigured) });
        };
        let speaker = self.speaker.clone();
        let routes: Vec<String> = self.installed.keys().map(Ipv4Net::to_string).collect();
        let announced: Vec<String> = self.locals.iter().map(|ip| format!("{ip}/32")).collect();
        Box::pin(async move {
            let (peers, neighbors) = match speaker.neighbors().await {
                Ok(peers) => {
                    let summary: Vec<Value> = peers
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|p| {
                            json!({
                                "neighbor": p["state"]["neighbor_address"],
                                "peerAs": p["state"]["peer_asn"],
                                "state": speaker::session_state_name(&p["state"]["session_state"]),
                            })
                        })
                        .collect();
                    (peers, summary)
                }
                // The speaker not answering is a state to show, not an error of inspect.
                Err(e) => (
                    Value::Array(Vec::new()),
                    vec![json!({
                        "neighbor": config.neighbor.map(|n| n.to_string()),
                        "peerAs": config.neighbor_as,
                        "state": "DOWN",
                        "error": e.to_string(),
                    })],
                ),
            };
            Ok(json!({
                "Peers": peers,
                "Dsts": routes,
                "Neighbors": neighbors,
                "Announced": announced,
                "RouterIp": config.router.to_string(),
                "As": config.local_as,
            }))
        })
    }
}

/// A handle to the [`Bgp`] actor.
#[derive(Clone)]
pub struct BgpHandle(Addr<Bgp>);

impl BgpHandle {
    /// Start the actor (on the current actix system).
    pub fn start(speaker: Speaker, agent: AgentHandle) -> BgpHandle {
        BgpHandle(Bgp::new(speaker, agent).start())
    }

    /// Apply `config`; the next hops of the routes the agent now has.
    pub async fn configure(
        &self,
        config: Option<SpeakerConfig>,
    ) -> Result<BTreeSet<Ipv4Addr>, BgpError> {
        self.0
            .send(Configure(config))
            .await
            .map_err(|_| BgpError::Stopped)?
    }

    /// Tell the actor about a local endpoint address (does not wait).
    pub fn local(&self, ip: Ipv4Addr, present: bool) {
        self.0.do_send(Local { ip, present });
    }

    pub async fn inspect(&self) -> Result<Value, BgpError> {
        self.0.send(Inspect).await.map_err(|_| BgpError::Stopped)?
    }
}
