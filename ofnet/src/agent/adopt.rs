//! Keeping service client assignments across an agent restart.
//!
//! The agent registers a [`ServiceAdopter`] with its `ofctrl` bridge. On every connect, before
//! the reconcile decides what to delete, the bridge hands it the switch's service flows (cookie
//! category 8, any generation). The adopter asks the agent which DNAT flows encode an
//! assignment the current state still allows ([`crate::service::adopt`]) and records them with
//! an [`AgentOp::AdoptServiceClients`] update, through the same path as every change: the
//! clients' flows become owned parts, and since the bridge is not in sync yet they are
//! recorded, then installed by the reconcile in place of the old ones (same match, so no packet
//! sees a gap). Everything not adopted is deleted by the reconcile as a stale flow.
//!
//! After a switch reconnect (the agent kept running) the agent's own assignments win: a client
//! that has one is never adopted again.

use super::*;
use crate::flows::category;
use crate::service::adopt::{self, Adopted};
use futures::future::LocalBoxFuture;
use ofproto::multipart::FlowStats;

/// The adoptable assignments among flows found on the switch, in the agent's current state.
#[derive(Debug, Message)]
#[rtype(result = "Vec<Adopted>")]
struct FindAdoptable(Vec<FlowStats>);

impl Handler<FindAdoptable> for Agent {
    type Result = MessageResult<FindAdoptable>;

    fn handle(
        &mut self,
        FindAdoptable(flows): FindAdoptable,
        _: &mut Context<Self>,
    ) -> Self::Result {
        MessageResult(adopt::adoptable(
            &flows,
            &self.settings.services,
            &self.endpoints,
        ))
    }
}

impl Agent {
    /// Count the assignments an adoption recorded (after it was applied).
    pub(super) fn count_adopted(&mut self, found: &[Adopted]) {
        let recorded = found
            .iter()
            .filter(|a| {
                self.settings
                    .services
                    .get(&a.service)
                    .and_then(|s| s.clients.get(&a.client))
                    == Some(&a.assignment)
            })
            .count();
        *self.stats.entry("SvcClientAdopted".into()).or_default() += recorded as u64;
        if recorded > 0 {
            tracing::info!(bridge = %self.config.bridge, clients = recorded, "service client assignments adopted from the switch");
        }
    }
}

/// The agent's [`ofctrl::FlowAdopter`]: service flows go to the agent (see the module
/// documentation).
pub(super) struct ServiceAdopter {
    pub(super) agent: Addr<Agent>,
}

impl ofctrl::FlowAdopter for ServiceAdopter {
    fn categories(&self) -> BTreeSet<u8> {
        BTreeSet::from([category::SERVICE])
    }

    fn adopt(&self, flows: Vec<FlowStats>) -> LocalBoxFuture<'static, ()> {
        let agent = self.agent.clone();
        Box::pin(async move {
            let Ok(found) = agent.send(FindAdoptable(flows)).await else {
                return;
            };
            if found.is_empty() {
                return;
            }
            let op = AgentOp::AdoptServiceClients(AdoptedClients(found));
            if let Ok(Err(e)) = agent.send(Update(op)).await {
                tracing::warn!(error = %e, "service client assignments not adopted");
            }
        })
    }
}
