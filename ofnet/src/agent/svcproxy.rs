//! The agent's side of service load balancing: the rejects of service ports without providers,
//! and the statistics request. Balancing itself is entirely in the switch (see
//! [`crate::service::flows`]); the only service packets the agent ever sees are new connections
//! to a port without providers, which it answers with a TCP reset or an ICMP port unreachable
//! ([`crate::service::reject`]) out of the client's port.

use super::*;
use crate::service::reject;
use crate::service::stats;
use ofproto::multipart::FlowStatsRequest;

/// Service statistics in the `/svcstats` shape (see [`crate::service::stats`]).
#[derive(Debug, Message)]
#[rtype(result = "Result<ServiceStats, AgentError>")]
pub struct GetServiceStats;

impl Agent {
    /// Answer a new connection to a service port without providers.
    pub(super) fn on_service_reject(&mut self, in_port: u32, data: &[u8]) {
        self.count("SvcRejectRcvd");
        match reject::answer(data) {
            Ok(frame) => {
                self.count("SvcRejectSent");
                self.send_packets(vec![PacketOut {
                    actions: vec![ofproto::action::Action::output(in_port)],
                    data: frame,
                }]);
            }
            Err(e) => {
                tracing::debug!(bridge = %self.config.bridge, error = %e, "service reject");
                self.count("SvcRejectNotAnswered");
            }
        }
    }
}

impl Handler<GetServiceStats> for Agent {
    type Result = ResponseActFuture<Self, Result<ServiceStats, AgentError>>;

    fn handle(&mut self, _: GetServiceStats, _: &mut Context<Self>) -> Self::Result {
        let switch = self.switch.clone().filter(SwitchHandle::connected);
        let query = async move {
            let Some(switch) = switch else {
                // No switch: the services with zero counters.
                return Ok((Vec::new(), Vec::new()));
            };
            let table = |table_id| FlowStatsRequest {
                table_id,
                ..FlowStatsRequest::default()
            };
            let dnat = switch.flow_stats(table(id::SERVICE_DNAT)).await?;
            let snat = switch.flow_stats(table(id::SERVICE_SNAT)).await?;
            Ok::<_, ofctrl::SwitchError>((dnat, snat))
        };
        Box::pin(query.into_actor(self).map(|answer, act, _| {
            let (dnat, snat) = answer.map_err(AgentError::Stats)?;
            Ok(stats::collect(&act.settings.services, &dnat, &snat))
        }))
    }
}
