//! The agent's side of service load balancing: first packets punted by a watch flow, their
//! re-injection, and the statistics request.
//!
//! A first packet is checked (a local endpoint sending from its own address, to the VIP of an
//! active service, on one of its ports); a client with an assignment already (packets that
//! were queued before its flows were confirmed) is re-injected at once, any other becomes an
//! [`AgentOp::ServiceFirstPacket`] update, so the provider choice, the flows and their
//! confirmation by the switch go through the same path as every other change, and the packet
//! is re-injected once its flows are confirmed. Anything else is dropped and counted.

use super::*;
use crate::service::flows::reinject_actions;
use crate::service::stats;
use ofproto::multipart::FlowStatsRequest;
use ofproto::port::OFPP_ANY;

/// Service statistics in the `/svcstats` shape (see [`crate::service::stats`]).
#[derive(Debug, Message)]
#[rtype(result = "Result<ServiceStats, AgentError>")]
pub struct GetServiceStats;

impl Agent {
    pub(super) fn on_service_packet(&mut self, in_port: u32, data: &[u8], ctx: &mut Context<Self>) {
        self.count("SvcPktRcvd");
        let packet = match crate::service::packet::parse(data) {
            Ok(p) => p,
            Err(e) => {
                tracing::debug!(bridge = %self.config.bridge, error = %e, "service packet-in");
                self.count("SvcPktParse-ERROR");
                return;
            }
        };
        let Some(ep) = self.endpoints.local(in_port) else {
            self.count("SvcPktUnknownPort");
            return;
        };
        if ep.ip_addr != Some(packet.client) {
            self.count("SvcPktWrongSource");
            return;
        }
        let vrf = ep.vrf.clone();
        let Some((name, svc)) = self.settings.services.by_vip(packet.vip) else {
            self.count("SvcPktNoService");
            return;
        };
        let known_port = svc
            .active_spec()
            .is_some_and(|s| s.port(packet.protocol, packet.svc_port).is_some());
        if !known_port {
            // Not one of the service's ports: no flow would ever take it, drop.
            self.count("SvcPktUnknownServicePort");
            return;
        }
        let p = ServicePacket {
            service: name.clone(),
            vrf,
            in_port,
            packet,
        };
        if svc.clients.contains_key(&p.packet.client) {
            self.reinject(&p);
            return;
        }
        // Through the mailbox like any update; nobody waits for it, so a failure is logged.
        let (me, bridge) = (ctx.address(), self.config.bridge.clone());
        actix::spawn(async move {
            let client = p.packet.client;
            if let Ok(Err(e)) = me.send(Update(AgentOp::ServiceFirstPacket(p))).await {
                tracing::warn!(%bridge, %client, error = %e, "service client not balanced");
            }
        });
    }

    /// Send a first packet on to its client's provider, from its original port, with the DNAT
    /// rewrite applied in the packet-out (loop-free: see [`crate::service::flows`]).
    pub(super) fn reinject(&mut self, p: &ServicePacket) {
        let Some(svc) = self.settings.services.get(&p.service) else {
            return;
        };
        let (Some(spec), Some(a)) = (svc.active_spec(), svc.clients.get(&p.packet.client)) else {
            self.count("SvcPktNotAssigned");
            return;
        };
        let Some(port) = spec.port(p.packet.protocol, p.packet.svc_port) else {
            return;
        };
        let mac = self
            .endpoints
            .find(a.provider.into(), &a.vrf)
            .map(|e| e.mac.octets());
        let actions = reinject_actions(port, a.provider, mac);
        let Some(switch) = self.switch.clone().filter(SwitchHandle::connected) else {
            return;
        };
        self.count("SvcPktReinjected");
        let (in_port, data) = (p.in_port, Bytes::from(p.packet.frame.clone()));
        actix::spawn(async move {
            if let Err(e) = switch.packet_out(in_port, actions, data).await {
                tracing::warn!(error = %e, "service packet-out failed");
            }
        });
    }
}

impl Handler<GetServiceStats> for Agent {
    type Result = ResponseActFuture<Self, Result<ServiceStats, AgentError>>;

    fn handle(&mut self, _: GetServiceStats, _: &mut Context<Self>) -> Self::Result {
        let switch = self.switch.clone().filter(SwitchHandle::connected);
        let query = async move {
            let Some(switch) = switch else {
                // No switch: the assignments with zero counters.
                return Ok((Vec::new(), Vec::new(), Vec::new()));
            };
            let table = |table_id| FlowStatsRequest {
                table_id,
                ..FlowStatsRequest::default()
            };
            let dnat = switch.flow_stats(table(id::SERVICE_DNAT)).await?;
            let snat = switch.flow_stats(table(id::SERVICE_SNAT)).await?;
            let ports = switch.port_stats(OFPP_ANY).await?;
            Ok::<_, ofctrl::SwitchError>((dnat, snat, ports))
        };
        Box::pin(query.into_actor(self).map(|answer, act, _| {
            let (dnat, snat, ports) = answer.map_err(AgentError::Stats)?;
            Ok(stats::collect(
                &act.settings.services,
                &act.endpoints,
                &dnat,
                &snat,
                &ports,
            ))
        }))
    }
}
