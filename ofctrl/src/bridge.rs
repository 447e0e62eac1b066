//! The [`Bridge`] actor: owns the desired state of one bridge and keeps the switch equal to it.
//!
//! Callers change the desired state with [`BridgeHandle::apply`]; while the switch is connected
//! the change goes out as one transaction (an ONF bundle by default) and is recorded only once
//! the switch confirmed it; while it is not, the change is recorded and goes out on connect.
//!
//! On every connect (a switch restart, a reconnect, or this process restarting) the bridge
//! reconciles, without the caller doing anything, in one atomic bundle:
//! 1. read the flows, groups and meters the switch has;
//! 2. pick a new generation, above both the one stored by the caller's hook and every
//!    generation seen on the switch;
//! 3. re-add every desired meter and group (modify if present) and flow under the new
//!    generation: an add with the same table, priority and match replaces the flow in place, so
//!    traffic never sees a gap;
//! 4. delete each older generation with one cookie-mask delete, and groups and meters nobody
//!    wants.
//!
//! Meter mods cannot go in a bundle (Open vSwitch refuses them there): meters to add or modify
//! go out, barrier-confirmed, before the bundle, meters to delete after it (deleting a meter
//! deletes the flows still using it, so the bundle first points them elsewhere).
//!
//! Afterwards only the current generation is on the switch, and the new generation is handed
//! to the [`GenerationStore`] (netplugin keeps it in the bridge's OVSDB `external_ids`).
//!
//! **Adoption.** Some flows encode state only the switch remembers across a restart of this
//! process (ofnet: which provider serves a load-balanced client). An owner that registers a
//! [`FlowAdopter`] is handed, between steps 1 and 2, the switch's flows of the cookie
//! categories it names (any generation); it may record what they encode and apply the flows it
//! still wants. Those applies are recorded (the bridge is not in sync yet) and so belong to the
//! desired state the reconcile installs: a kept flow is replaced in place like every other,
//! the rest of its old generation is deleted in step 4 as usual.
//!
//! While the switch is read and the adopter works, the mailbox stays open and applies are
//! recorded, not sent (the adopter's own included: waiting for them would deadlock); from step
//! 2 on, applies wait for the reconcile (the mailbox is paused), so every change is computed
//! against the state the switch really has.

use crate::cookie::{Cookie, next_generation};
use crate::desired::{Change, DesiredState, Flow, Group, Meter, Plan};
use crate::error::{SwitchError, TxError};
use crate::switch::{SwitchEvent, SwitchHandle, TxMode, TxRequest};
use crate::table::{MISS_CATEGORY, MISS_PRIORITY, Miss, TableSpec};
use actix::prelude::*;
use futures::future::LocalBoxFuture;
use ofproto::flow_mod::FlowMod;
use ofproto::group::{GroupMod, GroupModCommand, OFPG_ALL};
use ofproto::instruction::Instruction;
use ofproto::matches::Match;
use ofproto::meter::{MeterMod, MeterModCommand};
use ofproto::multipart::{FlowStats, GroupDesc, MeterConfig};
use ofproto::port::{OFPP_CONTROLLER, OFPP_NORMAL};
use ofproto::{Action, Message};
use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

/// `OFPTT_ALL`: every table (for deletes).
const ALL_TABLES: u8 = 0xff;

/// How long a reconcile waits for the [`FlowAdopter`]; after that it goes on without it (the
/// flows it did not adopt in time are deleted like any stale flow).
const ADOPT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the caller keeps the bridge's flow generation across restarts of this process.
pub trait GenerationStore: 'static {
    /// The generation stored last, if any.
    fn load(&self) -> LocalBoxFuture<'static, Option<u16>>;
    /// Remember a generation (called after each successful reconcile).
    fn store(&self, generation: u16) -> LocalBoxFuture<'static, ()>;
}

/// The owner's say over flows a previous controller left on the switch (see "Adoption" in
/// the module documentation).
pub trait FlowAdopter: 'static {
    /// The cookie categories whose flows the owner wants to see.
    fn categories(&self) -> BTreeSet<u8>;
    /// The switch's flows of those categories, found on connect before the reconcile. The
    /// owner records what it keeps and applies the flows it still wants through the
    /// [`BridgeHandle`] (recorded, not sent); the reconcile waits for the returned future
    /// (at most ten seconds).
    fn adopt(&self, flows: Vec<FlowStats>) -> LocalBoxFuture<'static, ()>;
}

/// Who hears what the bridge sends (netplugin turns it into Prometheus metrics; this crate
/// knows no metrics library). Called on the bridge actor, after each transaction.
pub trait BridgeObserver: 'static {
    /// The switch confirmed a transaction of `operations` requests within `elapsed`: a change
    /// ([`BridgeHandle::apply`]) or, with `reconcile`, the reconcile after a connect.
    fn applied(&self, operations: usize, elapsed: Duration, reconcile: bool);
    /// A transaction failed (nothing of it applied in bundle mode); `error` names each
    /// OpenFlow error the switch sent.
    fn failed(&self, error: &TxError, reconcile: bool);
}

/// How to run a bridge.
pub struct BridgeConfig {
    /// For logs and inspect output.
    pub name: String,
    /// The pipeline's tables; each gets its miss flow.
    pub tables: Vec<TableSpec>,
    /// How changes are confirmed.
    pub mode: TxMode,
    /// Only this datapath may drive the bridge; `None` takes the first switch that connects.
    pub dpid: Option<u64>,
    pub generations: Option<Box<dyn GenerationStore>>,
    /// Who is shown the flows of its categories on connect, before the reconcile.
    pub adopter: Option<Box<dyn FlowAdopter>>,
    /// Who hears about transactions (metrics).
    pub observer: Option<Box<dyn BridgeObserver>>,
}

impl BridgeConfig {
    pub fn new(name: impl Into<String>, tables: Vec<TableSpec>) -> BridgeConfig {
        BridgeConfig {
            name: name.into(),
            tables,
            mode: TxMode::Bundle,
            dpid: None,
            generations: None,
            adopter: None,
            observer: None,
        }
    }
}

/// What [`BridgeHandle::apply`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The switch confirmed this many operations.
    Installed(usize),
    /// No switch is connected; the change is recorded and goes out on connect.
    Deferred,
}

/// A snapshot of the bridge for inspect output and tests.
#[derive(Debug, Clone)]
pub struct BridgeStatus {
    pub name: String,
    pub dpid: Option<u64>,
    pub generation: u16,
    /// True once the connected switch holds exactly the desired state.
    pub synced: bool,
    pub flows: usize,
    pub groups: usize,
    pub meters: usize,
    pub reconciles: u64,
    /// Whether a switch is connected now.
    pub connected: bool,
    /// Desired flows per table id.
    pub flows_per_table: Vec<(u8, usize)>,
}

/// Handle to a running [`Bridge`].
#[derive(Clone)]
pub struct BridgeHandle {
    addr: Addr<Bridge>,
}

impl BridgeHandle {
    /// Start the bridge actor (inside an actix system). Subscribe the returned handle's
    /// [`BridgeHandle::events`] to a [`crate::Listener`].
    pub fn start(config: BridgeConfig) -> BridgeHandle {
        BridgeHandle {
            addr: Bridge::new(config).start(),
        }
    }

    /// Where the listener should send switch events.
    pub fn events(&self) -> Recipient<SwitchEvent> {
        self.addr.clone().recipient()
    }

    /// Apply changes to the desired state (see the module documentation).
    pub async fn apply(&self, changes: Vec<Change>) -> Result<Applied, TxError> {
        let rx = self
            .addr
            .send(Apply(changes))
            .await
            .map_err(|_| TxError::Switch(SwitchError::Disconnected))?;
        rx.await
            .map_err(|_| TxError::Switch(SwitchError::Disconnected))?
    }

    /// A group id no desired group uses and no earlier call handed out (until that group is
    /// removed again).
    pub async fn allocate_group_id(&self) -> Option<u32> {
        self.addr.send(AllocateGroupId).await.ok()
    }

    /// A meter id no desired meter uses and no earlier call handed out (until that meter is
    /// removed again).
    pub async fn allocate_meter_id(&self) -> Option<u32> {
        self.addr.send(AllocateMeterId).await.ok()
    }

    pub async fn status(&self) -> Option<BridgeStatus> {
        self.addr.send(Status).await.ok()
    }

    /// The connected switch, for packet-outs and statistics.
    pub async fn switch(&self) -> Option<SwitchHandle> {
        self.addr.send(CurrentSwitch).await.ok().flatten()
    }
}

/// The actor. See the module documentation.
pub struct Bridge {
    config: BridgeConfig,
    desired: DesiredState,
    switch: Option<SwitchHandle>,
    generation: u16,
    synced: bool,
    reconciles: u64,
    /// Counts connects: a reconcile whose connect was overtaken by a newer one stops.
    epoch: u64,
    /// Group ids handed out by [`BridgeHandle::allocate_group_id`] and not yet removed, so two
    /// allocations before the groups are applied never get the same id.
    allocated_groups: HashSet<u32>,
    /// The same for meter ids ([`BridgeHandle::allocate_meter_id`]).
    allocated_meters: HashSet<u32>,
}

impl Bridge {
    fn new(config: BridgeConfig) -> Bridge {
        let mut desired = DesiredState::new();
        let misses: Vec<Change> = config
            .tables
            .iter()
            .map(|t| Change::add_flow(miss_flow(t)))
            .collect();
        let plan = desired.plan(&misses);
        desired.commit(&plan);
        Bridge {
            config,
            desired,
            switch: None,
            generation: 0,
            synced: false,
            reconciles: 0,
            epoch: 0,
            allocated_groups: HashSet::new(),
            allocated_meters: HashSet::new(),
        }
    }

    /// Record a confirmed plan (its flows move into the desired state); ids of removed groups
    /// and meters may be handed out again.
    fn commit_owned(&mut self, plan: Plan) {
        for id in &plan.remove_groups {
            self.allocated_groups.remove(id);
        }
        for id in &plan.remove_meters {
            self.allocated_meters.remove(id);
        }
        self.desired.commit_owned(plan);
    }

    /// Step 1 (read the switch) and the adoption run with the mailbox open; steps 2-4 run with
    /// it paused (see the module documentation).
    fn reconcile(&mut self, switch: SwitchHandle, ctx: &mut Context<Self>) {
        self.epoch += 1;
        let epoch = self.epoch;
        let stored = self.config.generations.as_ref().map(|g| g.load());
        let read = {
            let switch = switch.clone();
            async move {
                let stored = match stored {
                    Some(f) => f.await,
                    None => None,
                };
                let flows = switch.all_flows().await?;
                let groups = switch.group_desc().await?;
                let meters = switch.meter_config().await?;
                Ok::<_, TxError>(SwitchContents {
                    flows,
                    groups,
                    meters,
                    stored,
                })
            }
        };
        let work = read
            .into_actor(self)
            .then(move |read, this, _| {
                let adopting = match (&read, &this.config.adopter) {
                    (Ok(contents), Some(adopter)) if this.epoch == epoch => {
                        let categories = adopter.categories();
                        let found: Vec<FlowStats> = contents
                            .flows
                            .iter()
                            .filter(|f| categories.contains(&Cookie(f.cookie).category()))
                            .cloned()
                            .collect();
                        (!found.is_empty()).then(|| adopter.adopt(found))
                    }
                    _ => None,
                };
                let name = this.config.name.clone();
                async move {
                    if let Some(adopting) = adopting
                        && tokio::time::timeout(ADOPT_TIMEOUT, adopting).await.is_err()
                    {
                        tracing::warn!(bridge = %name, "the flow adopter did not answer; reconciling without it");
                    }
                    read
                }
                .into_actor(this)
            })
            .map(move |read, this, ctx| {
                if this.epoch != epoch {
                    // A newer connect runs its own reconcile.
                    return;
                }
                match read {
                    Ok(contents) => this.install(switch, contents, epoch, ctx),
                    Err(e) => this.reconcile_failed(&e),
                }
            });
        ctx.spawn(work);
    }

    /// Steps 2-4, with the mailbox paused: applies must see the state the switch really has.
    fn install(
        &mut self,
        switch: SwitchHandle,
        contents: SwitchContents,
        epoch: u64,
        ctx: &mut Context<Self>,
    ) {
        let (generation, requests) = reconcile_requests(&self.desired, &contents);
        let mode = self.config.mode;
        let count = requests.len();
        let start = std::time::Instant::now();
        let fut = async move { switch.transact(requests, mode).await };
        ctx.wait(fut.into_actor(self).map(move |result, this, _| {
            if let Some(o) = &this.config.observer {
                match &result {
                    Ok(()) => o.applied(count, start.elapsed(), true),
                    Err(e) => o.failed(e, true),
                }
            }
            if this.epoch != epoch {
                return;
            }
            match result {
                Ok(()) => {
                    this.generation = generation;
                    this.synced = true;
                    this.reconciles += 1;
                    tracing::info!(bridge = %this.config.name, generation, flows = this.desired.flow_count(), "switch reconciled");
                    if let Some(store) = &this.config.generations {
                        actix::spawn(store.store(generation));
                    }
                }
                Err(e) => this.reconcile_failed(&e),
            }
        }));
    }

    fn reconcile_failed(&mut self, e: &TxError) {
        self.synced = false;
        tracing::warn!(bridge = %self.config.name, error = %e, "reconcile failed; retrying on the next connect");
        if let Some(s) = &self.switch {
            // A fresh connection gets a fresh chance.
            s.close();
        }
    }
}

/// What step 1 read.
struct SwitchContents {
    flows: Vec<FlowStats>,
    groups: Vec<GroupDesc>,
    meters: Vec<MeterConfig>,
    /// The generation the caller's store remembers.
    stored: Option<u16>,
}

impl Actor for Bridge {
    type Context = Context<Self>;
}

impl Handler<SwitchEvent> for Bridge {
    type Result = ();

    fn handle(&mut self, event: SwitchEvent, ctx: &mut Context<Self>) {
        match event {
            SwitchEvent::Connected(handle) => {
                if self.config.dpid.is_some_and(|d| d != handle.dpid()) {
                    return;
                }
                if let Some(current) = &self.switch
                    && current.connected()
                    && current.dpid() != handle.dpid()
                {
                    tracing::warn!(
                        bridge = %self.config.name,
                        "ignoring a second switch {:#x}; {:#x} drives this bridge",
                        handle.dpid(),
                        current.dpid()
                    );
                    return;
                }
                self.switch = Some(handle.clone());
                self.synced = false;
                self.reconcile(handle, ctx);
            }
            SwitchEvent::Disconnected { dpid, .. } => {
                if self
                    .switch
                    .as_ref()
                    .is_some_and(|s| s.dpid() == dpid && !s.connected())
                {
                    self.switch = None;
                    self.synced = false;
                }
            }
            SwitchEvent::PortStatus { .. }
            | SwitchEvent::PacketIn { .. }
            | SwitchEvent::FlowRemoved { .. } => {}
        }
    }
}

#[derive(Message)]
#[rtype(result = "oneshot::Receiver<Result<Applied, TxError>>")]
struct Apply(Vec<Change>);

impl Handler<Apply> for Bridge {
    type Result = MessageResult<Apply>;

    fn handle(&mut self, Apply(changes): Apply, ctx: &mut Context<Self>) -> Self::Result {
        let (tx, rx) = oneshot::channel();
        let plan = self.desired.plan_owned(changes);
        if plan.is_empty() {
            let _ = tx.send(Ok(Applied::Installed(0)));
            return MessageResult(rx);
        }
        let switch = match &self.switch {
            Some(s) if s.connected() && self.synced => s.clone(),
            _ => {
                self.commit_owned(plan);
                let _ = tx.send(Ok(Applied::Deferred));
                return MessageResult(rx);
            }
        };
        let requests = plan_requests(&plan, self.generation);
        let count = requests.len();
        let mode = self.config.mode;
        let start = std::time::Instant::now();
        let fut = async move { switch.transact(requests, mode).await };
        ctx.wait(fut.into_actor(self).map(move |result, this, _| {
            if let Some(o) = &this.config.observer {
                match &result {
                    Ok(()) => o.applied(count, start.elapsed(), false),
                    Err(e) => o.failed(e, false),
                }
            }
            // The answer goes first: the actor handles nothing else before the plan is
            // recorded below (the mailbox waits for this closure), so no one sees the table
            // without it.
            match result {
                Ok(()) => {
                    let _ = tx.send(Ok(Applied::Installed(count)));
                    this.commit_owned(plan);
                }
                // The connection went away mid-transaction: keep the change, it goes out with
                // the reconcile on the next connect.
                Err(TxError::Switch(SwitchError::Disconnected)) => {
                    let _ = tx.send(Ok(Applied::Deferred));
                    this.commit_owned(plan);
                    this.synced = false;
                }
                Err(e) => {
                    let _ = tx.send(Err(e));
                }
            }
        }));
        MessageResult(rx)
    }
}

#[derive(Message)]
#[rtype(result = "u32")]
struct AllocateGroupId;

impl Handler<AllocateGroupId> for Bridge {
    type Result = u32;

    fn handle(&mut self, _: AllocateGroupId, _: &mut Context<Self>) -> u32 {
        let id = (1..OFPG_ALL)
            .find(|id| !self.allocated_groups.contains(id) && self.desired.group(*id).is_none())
            .unwrap_or(OFPG_ALL - 1);
        self.allocated_groups.insert(id);
        id
    }
}

#[derive(Message)]
#[rtype(result = "u32")]
struct AllocateMeterId;

impl Handler<AllocateMeterId> for Bridge {
    type Result = u32;

    fn handle(&mut self, _: AllocateMeterId, _: &mut Context<Self>) -> u32 {
        let id = (1..OFPM_MAX)
            .find(|id| !self.allocated_meters.contains(id) && self.desired.meter(*id).is_none())
            .unwrap_or(OFPM_MAX);
        self.allocated_meters.insert(id);
        id
    }
}

#[derive(Message)]
#[rtype(result = "BridgeStatus")]
struct Status;

impl Handler<Status> for Bridge {
    type Result = MessageResult<Status>;

    fn handle(&mut self, _: Status, _: &mut Context<Self>) -> Self::Result {
        MessageResult(BridgeStatus {
            name: self.config.name.clone(),
            dpid: self.switch.as_ref().map(SwitchHandle::dpid),
            generation: self.generation,
            synced: self.synced && self.switch.as_ref().is_some_and(SwitchHandle::connected),
            flows: self.desired.flow_count(),
            groups: self.desired.groups().count(),
            meters: self.desired.meters().count(),
            reconciles: self.reconciles,
            connected: self.switch.as_ref().is_some_and(SwitchHandle::connected),
            flows_per_table: self
                .desired
                .flows_per_table()
                .iter()
                .map(|(t, n)| (*t, *n))
                .collect(),
        })
    }
}

#[derive(Message)]
#[rtype(result = "Option<SwitchHandle>")]
struct CurrentSwitch;

impl Handler<CurrentSwitch> for Bridge {
    type Result = Option<SwitchHandle>;

    fn handle(&mut self, _: CurrentSwitch, _: &mut Context<Self>) -> Self::Result {
        self.switch.clone().filter(SwitchHandle::connected)
    }
}

/// Steps 2-4 of the module documentation: the new generation and the one bundle that makes
/// the switch (holding `contents`) equal to `desired`.
fn reconcile_requests(desired: &DesiredState, contents: &SwitchContents) -> (u16, Vec<TxRequest>) {
    let present = &contents.flows;
    let seen = present
        .iter()
        .map(|f| Cookie(f.cookie).generation())
        .max()
        .unwrap_or(0);
    let generation = next_generation(contents.stored.unwrap_or(0).max(seen));

    let have_groups: HashSet<u32> = contents.groups.iter().map(|g| g.group_id).collect();
    let want_groups: HashSet<u32> = desired.groups().map(|g| g.id).collect();
    let have_meters: HashSet<u32> = contents.meters.iter().map(|m| m.meter_id).collect();
    let want_meters: HashSet<u32> = desired.meters().map(|m| m.id).collect();
    let mut requests = Vec::new();
    for m in desired.meters() {
        let command = if have_meters.contains(&m.id) {
            MeterModCommand::Modify
        } else {
            MeterModCommand::Add
        };
        requests.push(meter_mod(m, command).into());
    }
    for g in desired.groups() {
        let command = if have_groups.contains(&g.id) {
            GroupModCommand::Modify
        } else {
            GroupModCommand::Add
        };
        requests.push(group_mod(g, command).into());
    }
    for flow in desired.full().add_flows {
        requests.push(TxRequest::AddFlow { flow, generation });
    }
    let stale: BTreeSet<u16> = present
        .iter()
        .map(|f| Cookie(f.cookie).generation())
        .filter(|g| *g != generation)
        .collect();
    for g in stale {
        requests.push(
            Message::FlowMod(
                FlowMod::delete(ALL_TABLES)
                    .cookie_masked(Cookie::new(g, 0, 0).0, Cookie::GENERATION_MASK),
            )
            .into(),
        );
    }
    for id in have_groups.difference(&want_groups) {
        requests.push(group_delete(*id).into());
    }
    for id in have_meters.difference(&want_meters) {
        requests.push(meter_delete(*id).into());
    }
    (generation, requests)
}

/// The requests for a plan, meters and groups before the flows that use them and after the
/// flows that stop using them. Added flows are sent from the plan's shared flows, not copied.
pub fn plan_requests(plan: &Plan, generation: u16) -> Vec<TxRequest> {
    let mut out: Vec<TxRequest> = Vec::with_capacity(plan.len());
    for m in &plan.add_meters {
        out.push(meter_mod(m, MeterModCommand::Add).into());
    }
    for m in &plan.modify_meters {
        out.push(meter_mod(m, MeterModCommand::Modify).into());
    }
    for g in &plan.add_groups {
        out.push(group_mod(g, GroupModCommand::Add).into());
    }
    for g in &plan.modify_groups {
        out.push(group_mod(g, GroupModCommand::Modify).into());
    }
    for f in &plan.add_flows {
        out.push(TxRequest::AddFlow {
            flow: Arc::clone(f),
            generation,
        });
    }
    for k in &plan.remove_flows {
        out.push(
            Message::FlowMod(
                FlowMod::delete_strict(k.table, k.priority).matching(k.matches.clone()),
            )
            .into(),
        );
    }
    for id in &plan.remove_groups {
        out.push(group_delete(*id).into());
    }
    for id in &plan.remove_meters {
        out.push(meter_delete(*id).into());
    }
    out
}

fn group_mod(g: &Group, command: GroupModCommand) -> Message {
    Message::GroupMod(GroupMod {
        command,
        group_type: g.group_type,
        group_id: g.id,
        buckets: g.buckets.clone(),
    })
}

/// Delete one group (the type is ignored by a delete).
fn group_delete(id: u32) -> Message {
    Message::GroupMod(GroupMod {
        command: GroupModCommand::Delete,
        group_type: ofproto::group::GroupType::All,
        group_id: id,
        buckets: Vec::new(),
    })
}

/// `OFPM_MAX`: the highest meter id (the ones above are virtual meters).
const OFPM_MAX: u32 = 0xffff_0000;

fn meter_mod(m: &Meter, command: MeterModCommand) -> Message {
    Message::MeterMod(MeterMod {
        command,
        flags: m.flags,
        meter_id: m.id,
        bands: m.bands.clone(),
    })
}

fn meter_delete(id: u32) -> Message {
    Message::MeterMod(MeterMod {
        command: MeterModCommand::Delete,
        flags: 0,
        meter_id: id,
        bands: Vec::new(),
    })
}

/// The priority-0 flow implementing a table's miss behaviour.
pub fn miss_flow(table: &TableSpec) -> Flow {
    let instructions = match table.miss {
        Miss::Drop => Vec::new(),
        Miss::Goto(next) => vec![Instruction::GotoTable(next)],
        Miss::Normal => vec![Instruction::ApplyActions(vec![Action::output(OFPP_NORMAL)])],
        Miss::Controller => vec![Instruction::ApplyActions(vec![Action::output(
            OFPP_CONTROLLER,
        )])],
    };
    Flow::new(table.id, MISS_PRIORITY, Match::new(), instructions)
        .owned_by(MISS_CATEGORY, u64::from(table.id))
}
