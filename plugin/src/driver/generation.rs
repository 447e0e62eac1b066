//! Where ofctrl keeps each bridge's flow generation across netplugin restarts: the bridge's
//! OVSDB `external_ids` (key [`GENERATION_KEY`]). ofctrl picks a generation above both this
//! one and every generation it finds on the switch, so even after OVS lost its flows (an OVS
//! restart) a restarted netplugin never reuses a generation.

use futures::future::LocalBoxFuture;
use ofctrl::GenerationStore;

use crate::ovsdb::OvsdbClient;

/// The `external_ids` key of the flow generation.
pub const GENERATION_KEY: &str = "contiv-flow-generation";

pub struct OvsdbGenerations {
    pub ovsdb: OvsdbClient,
    pub bridge: String,
}

impl GenerationStore for OvsdbGenerations {
    fn load(&self) -> LocalBoxFuture<'static, Option<u16>> {
        let stored = self
            .ovsdb
            .bridge_external_id(&self.bridge, GENERATION_KEY)
            .and_then(|v| v.parse().ok());
        Box::pin(async move { stored })
    }

    fn store(&self, generation: u16) -> LocalBoxFuture<'static, ()> {
        let (ovsdb, bridge) = (self.ovsdb.clone(), self.bridge.clone());
        Box::pin(async move {
            let value = generation.to_string();
            if let Err(e) = ovsdb
                .set_bridge_external_ids(&bridge, &[(GENERATION_KEY, &value)])
                .await
            {
                tracing::warn!(%bridge, generation, error = %e, "cannot record the flow generation");
            }
        })
    }
}
