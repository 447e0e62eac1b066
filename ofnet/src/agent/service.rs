//! The agent's RPC methods (`OfnetAgent.*`, `PolicyAgent.*`).

use super::*;

/// The agent's RPC methods, served by [`AgentHandle::serve_rpc`]. Every method answers
/// `true`, as in the reference; a refused change answers its error.
#[derive(Clone)]
pub struct AgentService(pub AgentHandle);

impl rpc::Service for AgentService {
    fn call(
        &self,
        method: String,
        params: serde_json::Value,
    ) -> futures::future::LocalBoxFuture<'static, Result<serde_json::Value, String>> {
        let agent = self.0.clone();
        Box::pin(async move {
            let m = method.as_str();
            let done = match m {
                "OfnetAgent.AddMaster" => agent.add_master(rpc::params(m, params)?).await,
                "OfnetAgent.EndpointAdd" => {
                    agent.add_remote_endpoint(rpc::params(m, params)?).await
                }
                "OfnetAgent.EndpointDel" => {
                    let ep: Endpoint = rpc::params(m, params)?;
                    match agent.remove_remote_endpoint(ep.endpoint_id).await {
                        // Unknown (or our own): nothing to remove.
                        Err(AgentError::EndpointDb(
                            EndpointDbError::NoEndpoint(_) | EndpointDbError::EndpointIsLocal(_),
                        )) => Ok(()),
                        other => other,
                    }
                }
                "OfnetAgent.InjectGARPs" => agent
                    .inject_garps(rpc::params(m, params)?)
                    .await
                    .map(|_| ()),
                "OfnetAgent.DummyRpc" => Ok(()),
                "PolicyAgent.AddRule" => agent.add_rule(rpc::params(m, params)?).await,
                "PolicyAgent.DelRule" => {
                    let rule: PolicyRule = rpc::params(m, params)?;
                    agent.remove_rule(rule.rule_id).await
                }
                other => return Err(format!("unknown method {other}")),
            };
            done.map(|()| serde_json::Value::Bool(true))
                .map_err(|e| e.to_string())
        })
    }
}
