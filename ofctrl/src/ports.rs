//! [`SwitchPorts`]: the ports the connected switch says it has, by name, for callers that add
//! a port (through the switch's configuration database) and must know when the switch itself
//! has it and under which OpenFlow number.
//!
//! Why not just read the number back from OVSDB: Open vSwitch announces a new port to its
//! controllers (PORT_STATUS `ADD`) as it installs the port, and writes the number back to its
//! database only at the end of that reconfiguration, in a transaction of its own that the
//! database server then relays; on this machine kind the announcement comes 1.5–2.3 ms after
//! the insert, the database's number 3.3–7 ms after. The announcement is also the stronger fact:
//! it is the switch the flows go to that has the port.
//!
//! The table starts from the switch's port list at connect and follows PORT_STATUS; it is
//! emptied when the switch goes away (a port added meanwhile is learnt at the next connect).
//! A waiter whose caller gave up is dropped at the next event or wait.

use std::collections::HashMap;
use std::future::Future;

use actix::prelude::*;
use ofproto::port::PortReason;
use tokio::sync::oneshot;

use crate::switch::SwitchEvent;

/// The actor; start it with [`SwitchPorts::start_table`] and subscribe
/// [`PortsHandle::events`] to the bridge's listener.
#[derive(Default)]
pub struct SwitchPorts {
    /// The switch whose ports these are.
    dpid: Option<u64>,
    /// Port name (bytes, as on the wire) → OpenFlow port number.
    by_name: HashMap<Vec<u8>, u32>,
    /// Callers waiting for a port of that name to have that number.
    waiting: HashMap<Vec<u8>, Vec<(u32, oneshot::Sender<()>)>>,
}

impl Actor for SwitchPorts {
    type Context = Context<Self>;
}

impl SwitchPorts {
    /// Start an empty table.
    pub fn start_table() -> PortsHandle {
        PortsHandle {
            addr: SwitchPorts::default().start(),
        }
    }

    fn learn(&mut self, name: Vec<u8>, port_no: u32) {
        if let Some(waiters) = self.waiting.get_mut(&name) {
            for (_, waiter) in waiters.extract_if(.., |(wanted, _)| *wanted == port_no) {
                let _ = waiter.send(());
            }
        }
        self.by_name.insert(name, port_no);
    }

    /// Forget waiters whose caller is gone (it stopped waiting: the port came through
    /// OVSDB first, or the attach failed).
    fn prune(&mut self) {
        self.waiting.retain(|_, waiters| {
            waiters.retain(|(_, w)| !w.is_closed());
            !waiters.is_empty()
        });
    }
}

impl Handler<SwitchEvent> for SwitchPorts {
    type Result = ();

    fn handle(&mut self, event: SwitchEvent, _: &mut Context<Self>) {
        match event {
            SwitchEvent::Connected(handle) => {
                self.dpid = Some(handle.dpid());
                self.by_name.clear();
                for port in &handle.info().ports {
                    self.learn(port.name.as_bytes().to_vec(), port.port_no);
                }
            }
            SwitchEvent::Disconnected { dpid, .. } if self.dpid == Some(dpid) => {
                self.dpid = None;
                self.by_name.clear();
            }
            SwitchEvent::PortStatus { dpid, status } if self.dpid == Some(dpid) => {
                let name = status.desc.name.as_bytes().to_vec();
                match status.reason {
                    PortReason::Delete => {
                        if self.by_name.get(&name) == Some(&status.desc.port_no) {
                            self.by_name.remove(&name);
                        }
                    }
                    // `Add`, `Modify` (and a reason this codec does not name) all say the
                    // port is there with this number.
                    _ => self.learn(name, status.desc.port_no),
                }
            }
            _ => {}
        }
        self.prune();
    }
}

/// Answer once the switch has a port called `name` numbered `port_no`.
#[derive(Debug, Message)]
#[rtype(result = "()")]
struct WaitPort {
    name: Vec<u8>,
    port_no: u32,
    answer: oneshot::Sender<()>,
}

impl Handler<WaitPort> for SwitchPorts {
    type Result = ();

    fn handle(&mut self, wait: WaitPort, _: &mut Context<Self>) {
        self.prune();
        if self.by_name.get(&wait.name) == Some(&wait.port_no) {
            let _ = wait.answer.send(());
        } else {
            self.waiting
                .entry(wait.name)
                .or_default()
                .push((wait.port_no, wait.answer));
        }
    }
}

/// Handle to a [`SwitchPorts`] table.
#[derive(Clone)]
pub struct PortsHandle {
    addr: Addr<SwitchPorts>,
}

impl PortsHandle {
    /// Who must hear the switch's events for the table to follow it.
    pub fn events(&self) -> Recipient<SwitchEvent> {
        self.addr.clone().recipient()
    }

    /// True once the switch has port `name` under number `port_no` (at once if it has
    /// already); false if the table stopped. Otherwise it waits as long as the caller does,
    /// so callers race it against their own deadline or another source.
    ///
    /// The number is part of the question because a name alone can be stale: a port deleted
    /// and added again under the same name is reported deleted a moment after the delete,
    /// and until then the table still has the old number.
    pub fn installed(&self, name: &str, port_no: u32) -> impl Future<Output = bool> + use<> {
        let (answer, installed) = oneshot::channel();
        self.addr.do_send(WaitPort {
            name: name.as_bytes().to_vec(),
            port_no,
            answer,
        });
        async move { installed.await.is_ok() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofproto::port::{Port, PortStatus};

    fn status(reason: PortReason, name: &str, port_no: u32) -> SwitchEvent {
        SwitchEvent::PortStatus {
            dpid: 7,
            status: PortStatus {
                reason,
                desc: Port {
                    port_no,
                    name: name.into(),
                    ..Port::default()
                },
            },
        }
    }

    /// The table without a connected switch: set the dpid as a connect would.
    fn connected_table() -> PortsHandle {
        PortsHandle {
            addr: SwitchPorts {
                dpid: Some(7),
                ..SwitchPorts::default()
            }
            .start(),
        }
    }

    async fn settled<T>(fut: impl Future<Output = T>) -> Option<T> {
        tokio::time::timeout(std::time::Duration::from_millis(200), fut)
            .await
            .ok()
    }

    #[actix_rt::test]
    async fn a_waiter_hears_the_switch_add_the_port_and_a_later_one_is_answered_at_once() {
        let ports = connected_table();
        let waiting = ports.installed("vvport1", 12);
        let events = ports.events();
        // Another port, the same name from another switch, or under another number do not
        // answer it.
        events.do_send(status(PortReason::Add, "vvport2", 5));
        events.do_send(SwitchEvent::PortStatus {
            dpid: 8,
            status: PortStatus {
                reason: PortReason::Add,
                desc: Port {
                    port_no: 12,
                    name: "vvport1".into(),
                    ..Port::default()
                },
            },
        });
        events.do_send(status(PortReason::Add, "vvport1", 11));
        let mut waiting = std::pin::pin!(waiting);
        assert_eq!(settled(waiting.as_mut()).await, None);
        events.do_send(status(PortReason::Modify, "vvport1", 12));
        assert_eq!(settled(waiting).await, Some(true));
        assert_eq!(settled(ports.installed("vvport2", 5)).await, Some(true));
    }

    /// A connected table that has heard of port `vvport1` numbered 12, and its event input.
    fn table_with_vvport1() -> (PortsHandle, Recipient<SwitchEvent>) {
        let ports = connected_table();
        let events = ports.events();
        events.do_send(status(PortReason::Add, "vvport1", 12));
        (ports, events)
    }

    #[actix_rt::test]
    async fn a_deleted_port_is_waited_for_again() {
        let (ports, events) = table_with_vvport1();
        assert_eq!(settled(ports.installed("vvport1", 12)).await, Some(true));
        events.do_send(status(PortReason::Delete, "vvport1", 12));
        assert_eq!(settled(ports.installed("vvport1", 12)).await, None);
        events.do_send(status(PortReason::Add, "vvport1", 13));
        assert_eq!(settled(ports.installed("vvport1", 13)).await, Some(true));
    }

    #[actix_rt::test]
    async fn the_table_is_emptied_when_the_switch_goes_away() {
        let (ports, events) = table_with_vvport1();
        events.do_send(SwitchEvent::Disconnected {
            dpid: 7,
            peer: "unix".into(),
        });
        assert_eq!(settled(ports.installed("vvport1", 12)).await, None);
        // Events of no connected switch are not learnt.
        events.do_send(status(PortReason::Add, "vvport3", 14));
        assert_eq!(settled(ports.installed("vvport3", 14)).await, None);
    }
}
