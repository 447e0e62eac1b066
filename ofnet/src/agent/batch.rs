//! Group commit of the agent's updates.
//!
//! Every [`Update`] waits in a queue; the updates waiting when the agent is free go to the
//! switch together, as one transaction: each is applied in order (its settings part, then its
//! endpoint-DB part), the owners they touched are recomputed once, and the difference is one
//! `ofctrl` transaction. With 20 pods attached at once this is one or two bundles instead of
//! twenty confirmed one after another.
//!
//! Each update keeps its own answer:
//! - one the settings or the endpoint DB refuse fails alone, as if it had come by itself;
//! - if the recompute or the switch refuses the batch, everything of it is put back and its
//!   updates run again one at a time, so only the one at fault fails.
//!
//! Order is kept: updates apply in the order they were sent, and a batch runs while the
//! mailbox waits (as one update did before), so no other message sees a half-applied batch.

use std::collections::VecDeque;

use futures::channel::oneshot;

use super::*;

/// The most updates one transaction takes.
const MAX_BATCH: usize = 64;

/// An update waiting its turn, and where its answer goes.
struct Queued {
    op: AgentOp,
    reply: oneshot::Sender<Result<(), AgentError>>,
}

/// The agent's waiting updates.
#[derive(Default)]
pub(super) struct UpdateQueue {
    waiting: VecDeque<Queued>,
    /// A [`Drain`] is on its way or running.
    draining: bool,
    /// How many of the first waiting updates must run one at a time: the members of a batch
    /// that was refused as a whole.
    alone: usize,
}

/// Apply the waiting updates (one batch).
#[derive(Debug, Message)]
#[rtype(result = "()")]
struct Drain;

/// An update of the running batch whose settings part applied.
struct Ready {
    queued: Queued,
    undo: SettingsUndo,
    /// It has an endpoint-DB part (its answer is next in the `ApplyEach` answers).
    has_ep_op: bool,
}

/// An update of the running batch, applied to the settings and the endpoint table.
struct Applied {
    queued: Queued,
    undo: Option<SettingsUndo>,
    /// The local endpoint a removal took away (for the announcements after it).
    removed: Option<Endpoint>,
}

impl Agent {
    fn start_drain(&mut self, ctx: &mut Context<Self>) {
        if !self.updates.draining && !self.updates.waiting.is_empty() {
            self.updates.draining = true;
            ctx.notify(Drain);
        }
    }

    /// Put the batch's settings and endpoint table back as they were before it.
    fn roll_back(&mut self, applied: &mut [Applied], endpoints: Arc<EndpointTable>) {
        if !Arc::ptr_eq(&self.endpoints, &endpoints) {
            self.epdb.do_send(epdb::Restore(endpoints.clone()));
        }
        self.endpoints = endpoints;
        for a in applied.iter_mut().rev() {
            if let Some(undo) = a.undo.take() {
                undo.restore(&mut self.settings);
            }
        }
    }

    /// A batch failed as a whole: a single update gets the error; several run again, one at a
    /// time, from the front of the queue.
    fn refuse(&mut self, mut applied: Vec<Applied>, error: AgentError) {
        if applied.len() == 1 {
            let a = applied.remove(0);
            let _ = a.queued.reply.send(Err(error));
            return;
        }
        tracing::debug!(
            bridge = %self.config.bridge,
            updates = applied.len(),
            %error,
            "a batch of updates was refused; running them one at a time"
        );
        self.updates.alone += applied.len();
        for a in applied.into_iter().rev() {
            self.updates.waiting.push_front(a.queued);
        }
    }
}

impl Handler<Update> for Agent {
    type Result = ResponseFuture<Result<(), AgentError>>;

    fn handle(&mut self, Update(op): Update, ctx: &mut Context<Self>) -> Self::Result {
        let (reply, answer) = oneshot::channel();
        self.updates.waiting.push_back(Queued { op, reply });
        self.start_drain(ctx);
        Box::pin(async move { answer.await.unwrap_or(Err(AgentError::Stopped)) })
    }
}

impl Handler<Drain> for Agent {
    type Result = AtomicResponse<Self, ()>;

    fn handle(&mut self, _: Drain, _: &mut Context<Self>) -> Self::Result {
        let take = if self.updates.alone > 0 {
            self.updates.alone -= 1;
            1
        } else {
            MAX_BATCH
        };
        let n = take.min(self.updates.waiting.len());
        let batch: Vec<Queued> = self.updates.waiting.drain(..n).collect();

        // Settings first: they do not depend on the endpoint table, and an op with an
        // endpoint-DB part changes no setting (`apply_settings`), so a refused endpoint op
        // never has a setting to take back out of order.
        let mut ready: Vec<Ready> = Vec::new();
        let mut ep_ops: Vec<EndpointOp> = Vec::new();
        for queued in batch {
            if let AgentOp::AddRemoteEndpoint(ep) = &queued.op
                && ep.originator_ip.is_some()
                && ep.originator_ip == self.config.local_ip
            {
                // Our own endpoint, echoed back by the master.
                let _ = queued.reply.send(Ok(()));
                continue;
            }
            match apply_settings(self.datapath.as_ref(), &mut self.settings, &queued.op) {
                Ok(undo) => {
                    let ep_op = endpoint_op(&queued.op, self.config.local_ip);
                    let has_ep_op = ep_op.is_some();
                    ep_ops.extend(ep_op);
                    ready.push(Ready {
                        queued,
                        undo,
                        has_ep_op,
                    });
                }
                Err(e) => {
                    let _ = queued.reply.send(Err(e));
                }
            }
        }
        let epdb = self.epdb.clone();
        let answers = async move {
            if ep_ops.is_empty() {
                return Ok(Vec::new());
            }
            epdb.send(epdb::ApplyEach(ep_ops)).await
        };
        let work = answers.into_actor(self).then(move |answers, act, _| {
            let start = act.endpoints.clone();
            let mut answers = match answers {
                Ok(answers) => answers.into_iter(),
                Err(_) => {
                    let mut applied: Vec<Applied> = ready
                        .into_iter()
                        .map(|Ready { queued, undo, .. }| Applied {
                            queued,
                            undo: Some(undo),
                            removed: None,
                        })
                        .collect();
                    act.roll_back(&mut applied, start);
                    for a in applied {
                        let _ = a.queued.reply.send(Err(AgentError::Stopped));
                    }
                    return futures::future::Either::Left(fut::ready(()));
                }
            };
            let mut table = start.clone();
            let mut owners: Option<Touched> = None;
            let mut applied = Vec::with_capacity(ready.len());
            for Ready {
                queued,
                undo,
                has_ep_op,
            } in ready
            {
                let after = match has_ep_op {
                    false => table.clone(),
                    true => match answers.next() {
                        Some(Ok(snapshot)) => snapshot,
                        Some(Err(e)) => {
                            // Refused by the endpoint DB: nothing of it was applied there, and
                            // it changed no setting.
                            let _ = queued.reply.send(Err(AgentError::from(e)));
                            continue;
                        }
                        None => {
                            let _ = queued.reply.send(Err(AgentError::Stopped));
                            continue;
                        }
                    },
                };
                let removed = match &queued.op {
                    AgentOp::RemoveLocalEndpoint(p) => table.local(*p).cloned(),
                    _ => None,
                };
                let touched = touched(
                    &queued.op,
                    &table,
                    &after,
                    undo.before(&act.settings),
                    &act.settings,
                );
                owners = Some(match owners {
                    Some(o) => o.merge(touched),
                    None => touched,
                });
                table = after;
                applied.push(Applied {
                    queued,
                    undo: Some(undo),
                    removed,
                });
            }
            act.endpoints = table;
            let Some(owners) = owners else {
                return futures::future::Either::Left(fut::ready(()));
            };
            let (updates, changes) = match act.recompute(owners) {
                Ok(next) => next,
                Err(e) => {
                    act.roll_back(&mut applied, start);
                    act.refuse(applied, e);
                    return futures::future::Either::Left(fut::ready(()));
                }
            };
            act.count("UpdateBatches");
            *act.stats.entry("UpdatesBatched".into()).or_default() += applied.len() as u64;
            let bridge = act.bridge.clone();
            futures::future::Either::Right(
                async move { bridge.apply(changes).await }
                    .into_actor(act)
                    .map(move |result, act, ctx| match result {
                        Ok(_) => {
                            act.installed.commit(updates);
                            for a in applied {
                                act.after(&a.queued.op, a.removed, ctx);
                                let _ = a.queued.reply.send(Ok(()));
                            }
                        }
                        Err(e) => {
                            act.roll_back(&mut applied, start);
                            act.refuse(applied, AgentError::Switch(e));
                        }
                    }),
            )
        });
        let done = work.map(|(), act, ctx| {
            act.updates.draining = false;
            act.start_drain(ctx);
        });
        AtomicResponse::new(Box::pin(done))
    }
}
