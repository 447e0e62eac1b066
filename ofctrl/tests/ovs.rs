//! ofctrl against a real Open vSwitch: handshake, reconcile after an OVS restart, hitless
//! controller restart, flows adopted by their owner across a restart, atomic bundles with named
//! errors, and a packet-in/packet-out round trip.
#![allow(clippy::unwrap_used)]

use actix::prelude::*;
use bytes::Bytes;
use ofctrl::{
    Applied, BridgeConfig, BridgeHandle, Change, Flow, Group, Listener, Miss, SwitchEvent,
    SwitchHandle, SwitchOptions, TableSpec, TxError,
};
use ofproto::group::{Bucket, GroupType};
use ofproto::packet::EthernetAddress;
use ofproto::port::OFPP_CONTROLLER;
use ofproto::{Action, Instruction, Match, Message};
use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use testbed::{Datapath, Netns, Ovs, OvsOptions, Pod, PodOptions};
use tokio::sync::mpsc;

/// Forwards switch events into a channel the test reads.
struct Collector(mpsc::UnboundedSender<SwitchEvent>);

impl Actor for Collector {
    type Context = Context<Self>;
}

impl Handler<SwitchEvent> for Collector {
    type Result = ();
    fn handle(&mut self, event: SwitchEvent, _: &mut Context<Self>) {
        let _ = self.0.send(event);
    }
}

fn collector() -> (Recipient<SwitchEvent>, mpsc::UnboundedReceiver<SwitchEvent>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Collector(tx).start().recipient(), rx)
}

/// A secure-mode OpenFlow 1.3 bridge pointed at `target`, reconnecting within a second.
fn controlled_bridge(ovs: &Ovs, bridge: &str, target: &str) {
    ovs.add_bridge(bridge).unwrap();
    point_at_controller(ovs, bridge, target);
}

/// Make existing `bridge` a secure-mode OpenFlow 1.3 bridge pointed at `target`.
fn point_at_controller(ovs: &Ovs, bridge: &str, target: &str) {
    ovs.vsctl(&[
        "set",
        "bridge",
        bridge,
        "fail_mode=secure",
        "protocols=OpenFlow13",
        "--",
        "--id=@c",
        "create",
        "controller",
        &format!("target=\"{target}\""),
        "max_backoff=1000",
        "--",
        "set",
        "bridge",
        bridge,
        "controller=@c",
    ])
    .unwrap();
}

fn localhost() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, 0))
}

async fn next_connected(rx: &mut mpsc::UnboundedReceiver<SwitchEvent>) -> SwitchHandle {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Some(SwitchEvent::Connected(h))) => return h,
            Ok(Some(_)) => continue,
            _ => panic!("no switch connected within 20 s"),
        }
    }
}

async fn wait_synced(bridge: &BridgeHandle, reconciles: u64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let s = bridge.status().await.unwrap();
        if s.synced && s.reconciles >= reconciles {
            return;
        }
        assert!(Instant::now() < deadline, "bridge not synced: {s:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn tables() -> Vec<TableSpec> {
    vec![
        TableSpec {
            id: 0,
            name: "classify",
            miss: Miss::Goto(1),
        },
        TableSpec {
            id: 1,
            name: "forward",
            miss: Miss::Drop,
        },
    ]
}

/// `n` distinct flows in table 1, each forwarding one destination to a port.
fn flows(n: u32) -> Vec<Change> {
    (0..n)
        .map(|i| {
            Change::add_flow(
                Flow::new(
                    1,
                    100,
                    Match::new()
                        .eth_type(0x0800)
                        .ipv4_dst(Ipv4Addr::from(0x0a00_0000 + i), None),
                    vec![Instruction::ApplyActions(vec![Action::output(1 + i % 8)])],
                )
                .owned_by(1, u64::from(i)),
            )
        })
        .collect()
}

/// The bridge's flows without cookies and counters, sorted.
fn flow_set(ovs: &Ovs, bridge: &str) -> BTreeSet<String> {
    ovs.dump_flows(bridge)
        .unwrap()
        .iter()
        .map(|f| f.normalized())
        .collect()
}

#[actix_rt::test]
async fn handshake_learns_the_datapath_id_and_requests_are_answered() {
    testbed::require!(Ovs);
    let ovs = Ovs::start(OvsOptions::dummy()).unwrap();
    let (events, mut rx) = collector();
    let listener = Listener::tcp(localhost(), SwitchOptions::default(), vec![events])
        .await
        .unwrap();
    controlled_bridge(
        &ovs,
        "br0",
        &format!("tcp:127.0.0.1:{}", listener.port().unwrap()),
    );

    let switch = next_connected(&mut rx).await;
    let dpid = ovs.vsctl(&["get", "bridge", "br0", "datapath_id"]).unwrap();
    let dpid = u64::from_str_radix(dpid.trim().trim_matches('"'), 16).unwrap();
    assert_eq!(switch.dpid(), dpid);
    assert!(
        switch.info().ports.iter().any(|p| p.name == "br0"),
        "PORT_DESC lists the local port: {:?}",
        switch.info().ports
    );

    let echo = switch
        .request(Message::EchoRequest(Bytes::from_static(b"ping")))
        .await
        .unwrap();
    assert_eq!(echo, vec![Message::EchoReply(Bytes::from_static(b"ping"))]);
    switch.barrier().await.unwrap();

    // OVS's controller status shows the connection as up (it refreshes that column lazily).
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let status = ovs
            .vsctl(&["--columns=is_connected", "list", "controller"])
            .unwrap();
        if status.contains("true") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "OVS never shows the controller connected: {status}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[actix_rt::test]
async fn desired_state_comes_back_after_ovs_is_killed_and_restarted() {
    testbed::require!(Ovs);
    let mut ovs = Ovs::start(OvsOptions::dummy()).unwrap();
    let bridge = BridgeHandle::start(BridgeConfig::new("br0", tables()));
    let listener = Listener::tcp(localhost(), SwitchOptions::default(), vec![bridge.events()])
        .await
        .unwrap();
    controlled_bridge(
        &ovs,
        "br0",
        &format!("tcp:127.0.0.1:{}", listener.port().unwrap()),
    );
    wait_synced(&bridge, 1).await;

    let id = bridge.allocate_group_id().await.unwrap();
    assert_ne!(
        bridge.allocate_group_id().await.unwrap(),
        id,
        "two allocations before an apply never share an id"
    );
    let group = Group {
        id,
        group_type: GroupType::All,
        buckets: vec![
            Bucket::new(vec![Action::output(1u32)]),
            Bucket::new(vec![Action::output(2u32)]),
        ],
    };
    let mut changes = flows(50);
    changes.push(Change::AddGroup(Arc::new(group.clone())));
    changes.push(Change::add_flow(Flow::new(
        0,
        50,
        Match::new().eth_type(0x0806),
        vec![Instruction::ApplyActions(vec![Action::Group(group.id)])],
    )));
    assert_eq!(bridge.apply(changes).await.unwrap(), Applied::Installed(52));

    let before = flow_set(&ovs, "br0");
    let groups_before = ovs.dump_groups("br0").unwrap();
    assert_eq!(
        before.len(),
        53,
        "50 flows + the ARP flow + 2 miss flows: {before:?}"
    );
    assert_eq!(groups_before.len(), 1);

    ovs.kill();
    ovs.restart().unwrap();
    wait_synced(&bridge, 2).await;
    assert_eq!(flow_set(&ovs, "br0"), before);
    assert_eq!(ovs.dump_groups("br0").unwrap(), groups_before);
}

#[actix_rt::test]
async fn controller_restart_never_removes_a_flow_and_clears_old_generations() {
    testbed::require!(Ovs);
    let ovs = Arc::new(Ovs::start(OvsOptions::dummy()).unwrap());
    let port = testbed::free_port().unwrap();
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));

    // First controller "process".
    let first = BridgeHandle::start(BridgeConfig::new("br0", tables()));
    let listener = Listener::tcp(addr, SwitchOptions::default(), vec![first.events()])
        .await
        .unwrap();
    controlled_bridge(&ovs, "br0", &format!("tcp:127.0.0.1:{port}"));
    wait_synced(&first, 1).await;
    first.apply(flows(300)).await.unwrap();
    let first_gen = first.status().await.unwrap().generation;
    let desired = flow_set(&ovs, "br0");
    assert_eq!(desired.len(), 302);

    // A flow left behind by some earlier generation, which nobody wants any more.
    let stale_cookie = format!(
        "{:#x}",
        ofctrl::Cookie::new(first_gen.wrapping_sub(1).max(1), 9, 9).0
    );
    ovs.ofctl(&[
        "add-flow",
        "br0",
        &format!("cookie={stale_cookie},table=1,priority=7,ip,nw_dst=192.0.2.1,actions=drop"),
    ])
    .unwrap();

    // Sample the flow table in a tight loop for the whole restart.
    let stop = Arc::new(AtomicBool::new(false));
    let samples = Arc::new(AtomicUsize::new(0));
    let sampler = {
        let (ovs, stop, samples, desired) =
            (ovs.clone(), stop.clone(), samples.clone(), desired.clone());
        std::thread::spawn(move || {
            let mut missing = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let now = flow_set(&ovs, "br0");
                if let Some(gone) = desired.iter().find(|f| !now.contains(*f)) {
                    missing.push(gone.clone());
                }
                samples.fetch_add(1, Ordering::Relaxed);
            }
            missing
        })
    };

    // "Restart": the old controller goes away entirely, a new one with the same desired state
    // and no memory takes over on the same port.
    let old_switch = first.switch().await.unwrap();
    drop(listener);
    old_switch.close();
    drop(first);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let second = BridgeHandle::start(BridgeConfig::new("br0", tables()));
    assert_eq!(second.apply(flows(300)).await.unwrap(), Applied::Deferred);
    let _listener = loop {
        match Listener::tcp(addr, SwitchOptions::default(), vec![second.events()]).await {
            Ok(l) => break l,
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    wait_synced(&second, 1).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, Ordering::Relaxed);
    let missing = sampler.join().unwrap();

    assert!(
        samples.load(Ordering::Relaxed) > 5,
        "the sampler barely ran"
    );
    assert!(
        missing.is_empty(),
        "flows missing during the restart: {missing:?}"
    );
    let after = ovs.dump_flows("br0").unwrap();
    let second_gen = second.status().await.unwrap().generation;
    assert!(
        second_gen > first_gen,
        "generation advanced: {first_gen} -> {second_gen}"
    );
    assert!(
        after
            .iter()
            .all(|f| ofctrl::Cookie(f.cookie).generation() == second_gen),
        "only the new generation remains: {after:?}"
    );
    assert_eq!(
        after
            .iter()
            .map(|f| f.normalized())
            .collect::<BTreeSet<_>>(),
        desired,
        "same flows as before, planted stale flow gone"
    );
}

#[actix_rt::test]
async fn a_bundle_referencing_a_missing_group_applies_nothing_and_names_the_flow() {
    testbed::require!(Ovs);
    let ovs = Ovs::start(OvsOptions::dummy()).unwrap();
    let bridge = BridgeHandle::start(BridgeConfig::new("br0", tables()));
    let listener = Listener::tcp(localhost(), SwitchOptions::default(), vec![bridge.events()])
        .await
        .unwrap();
    controlled_bridge(
        &ovs,
        "br0",
        &format!("tcp:127.0.0.1:{}", listener.port().unwrap()),
    );
    wait_synced(&bridge, 1).await;
    let before = flow_set(&ovs, "br0");

    let good = Flow::new(
        1,
        10,
        Match::new().in_port(1),
        vec![Instruction::ApplyActions(vec![Action::output(2u32)])],
    );
    let bad = Flow::new(
        1,
        10,
        Match::new().in_port(2),
        vec![Instruction::ApplyActions(vec![Action::Group(4242)])],
    );
    let err = bridge
        .apply(vec![Change::add_flow(good.clone()), Change::add_flow(bad)])
        .await
        .unwrap_err();
    let text = err.to_string();
    match &err {
        TxError::Rejected { failures, .. } => {
            assert_eq!(failures.len(), 1, "{text}");
            assert_eq!(
                failures[0].error.kind.to_string(),
                "OFPBAC_BAD_OUT_GROUP",
                "{text}"
            );
            match &failures[0].request {
                Message::FlowMod(fm) => assert_eq!(fm.matching, Match::new().in_port(2)),
                other => panic!("the failure names {other:?}"),
            }
        }
        other => panic!("expected a rejection, got {other:?}"),
    }
    assert!(text.contains("OFPBAC_BAD_OUT_GROUP"), "{text}");
    assert!(
        text.contains("4242"),
        "the error shows the offending flow: {text}"
    );

    // Atomic: not even the good flow is there, and the desired state did not take it.
    assert_eq!(flow_set(&ovs, "br0"), before);
    assert_eq!(bridge.status().await.unwrap().flows, 2);
    // The same good flow alone goes through.
    assert_eq!(
        bridge.apply(vec![Change::add_flow(good)]).await.unwrap(),
        Applied::Installed(1)
    );
}

#[actix_rt::test]
async fn arp_request_reaches_the_controller_and_a_packet_out_answers_it() {
    testbed::require!(Root, Ovs, Ip, Ping);
    let host = Netns::new("h").unwrap();
    let ovs = Ovs::start(OvsOptions {
        netns: Some(&host),
        datapath: Datapath::Netdev,
    })
    .unwrap();
    // OVS runs in its own namespace: it reaches the controller through a unix socket.
    let sock = ovs.run_dir().join("ctl.sock");
    let (events, mut rx) = collector();
    let _listener = Listener::unix(&sock, SwitchOptions::default(), vec![events])
        .await
        .unwrap();
    controlled_bridge(&ovs, "br0", &format!("unix:{}", sock.display()));
    let switch = next_connected(&mut rx).await;

    let pod = Pod::attach(
        &ovs,
        "br0",
        &PodOptions {
            ip: "10.20.0.1/24".into(),
            ..Default::default()
        },
    )
    .unwrap();
    let pod_port = ovs.ofport(pod.port_name()).unwrap();
    switch
        .transact(
            vec![Message::FlowMod(
                ofproto::FlowMod::add(0, 100)
                    .matching(Match::new().eth_type(0x0806))
                    .apply(vec![Action::output(OFPP_CONTROLLER)]),
            )],
            ofctrl::TxMode::Bundle,
        )
        .await
        .unwrap();

    // The pod asks who has 10.20.0.99; only the controller can answer.
    let asker = {
        let ns = pod.netns().name().to_string();
        std::thread::spawn(move || {
            testbed::run(&[
                "ip",
                "netns",
                "exec",
                &ns,
                "ping",
                "-c",
                "1",
                "-W",
                "3",
                "10.20.0.99",
            ])
        })
    };
    let resolved = EthernetAddress([0x02, 0, 0, 0, 0, 0x99]);
    let deadline = Instant::now() + Duration::from_secs(10);
    let packet_in = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Some(SwitchEvent::PacketIn { packet_in, .. })) => break packet_in,
            Ok(Some(_)) => continue,
            _ => panic!("no packet-in within 10 s"),
        }
    };
    assert_eq!(packet_in.in_port(), Some(pod_port));
    let (_, request) = ofproto::packet::frame::parse_arp(&packet_in.data).unwrap();
    assert_eq!(request.target_protocol_addr, Ipv4Addr::new(10, 20, 0, 99));
    let reply = ofproto::packet::frame::arp_reply(&request, resolved, None);
    switch
        .packet_out(
            OFPP_CONTROLLER,
            vec![Action::output(pod_port)],
            Bytes::from(reply),
        )
        .await
        .unwrap();

    let _ = asker.join();
    let neigh = pod.exec(&["ip", "neigh", "show", "10.20.0.99"]).unwrap();
    assert!(
        neigh.contains("lladdr 02:00:00:00:00:99"),
        "pod's ARP table: {neigh:?}"
    );
}

/// Hands the flows of category 5 it is shown to the test, and keeps (applies again) those
/// forwarding to 198.51.100.1.
struct Keeper {
    bridge: std::rc::Rc<std::cell::RefCell<Option<BridgeHandle>>>,
    seen: mpsc::UnboundedSender<(Vec<ofproto::multipart::FlowStats>, Option<Applied>)>,
}

const KEPT: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 1);

impl ofctrl::FlowAdopter for Keeper {
    fn categories(&self) -> BTreeSet<u8> {
        BTreeSet::from([5])
    }

    fn adopt(
        &self,
        flows: Vec<ofproto::multipart::FlowStats>,
    ) -> futures::future::LocalBoxFuture<'static, ()> {
        let bridge = self.bridge.borrow().clone();
        let seen = self.seen.clone();
        Box::pin(async move {
            let keep: Vec<Change> = flows
                .iter()
                .filter(|f| {
                    f.matching
                        .get(ofproto::oxm::FieldId::IPV4_DST)
                        .and_then(|o| o.ipv4())
                        == Some(KEPT)
                })
                .map(|f| {
                    let c = ofctrl::Cookie(f.cookie);
                    Change::add_flow(
                        Flow::new(
                            f.table_id,
                            f.priority,
                            f.matching.clone(),
                            f.instructions.clone(),
                        )
                        .owned_by(c.category(), c.object()),
                    )
                })
                .collect();
            let applied = match bridge {
                Some(b) => Some(b.apply(keep).await.unwrap()),
                None => None,
            };
            let _ = seen.send((flows, applied));
        })
    }
}

/// A flow of category 5 in table 1 sending `dst` out `port`.
fn adoptable(dst: Ipv4Addr, port: u32, object: u64) -> Change {
    Change::add_flow(
        Flow::new(
            1,
            50,
            Match::new().eth_type(0x0800).ipv4_dst(dst, None),
            vec![Instruction::ApplyActions(vec![Action::output(port)])],
        )
        .owned_by(5, object),
    )
}

#[actix_rt::test]
async fn an_adopter_sees_its_flows_before_the_reconcile_and_what_it_applies_stays() {
    testbed::require!(Ovs);
    let ovs = Ovs::start(OvsOptions::dummy()).unwrap();
    let port = testbed::free_port().unwrap();
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));

    let first = BridgeHandle::start(BridgeConfig::new("br0", tables()));
    let listener = Listener::tcp(addr, SwitchOptions::default(), vec![first.events()])
        .await
        .unwrap();
    controlled_bridge(&ovs, "br0", &format!("tcp:127.0.0.1:{port}"));
    wait_synced(&first, 1).await;
    let mut changes = flows(4);
    changes.push(adoptable(KEPT, 2, 1));
    changes.push(adoptable(Ipv4Addr::new(198, 51, 100, 2), 3, 2));
    first.apply(changes).await.unwrap();
    let first_gen = first.status().await.unwrap().generation;
    let kept_line = flow_set(&ovs, "br0")
        .into_iter()
        .find(|l| l.contains("198.51.100.1"))
        .unwrap();

    // A new controller that wants only the category-1 flows, and adopts.
    let old_switch = first.switch().await.unwrap();
    drop(listener);
    old_switch.close();
    drop(first);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let slot = std::rc::Rc::new(std::cell::RefCell::new(None));
    let (seen_tx, mut seen_rx) = mpsc::unbounded_channel();
    let mut config = BridgeConfig::new("br0", tables());
    config.adopter = Some(Box::new(Keeper {
        bridge: slot.clone(),
        seen: seen_tx,
    }));
    let second = BridgeHandle::start(config);
    *slot.borrow_mut() = Some(second.clone());
    second.apply(flows(4)).await.unwrap();
    let _listener = loop {
        match Listener::tcp(addr, SwitchOptions::default(), vec![second.events()]).await {
            Ok(l) => break l,
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    wait_synced(&second, 1).await;

    let (shown, applied) = seen_rx.try_recv().unwrap();
    assert_eq!(shown.len(), 2, "only category 5 is shown: {shown:?}");
    assert!(
        shown
            .iter()
            .all(|f| ofctrl::Cookie(f.cookie).generation() == first_gen)
    );
    assert_eq!(
        applied,
        Some(Applied::Deferred),
        "the adopter's apply is recorded, not sent"
    );
    let after = ovs.dump_flows("br0").unwrap();
    let second_gen = second.status().await.unwrap().generation;
    assert!(second_gen > first_gen);
    assert!(
        after
            .iter()
            .all(|f| ofctrl::Cookie(f.cookie).generation() == second_gen),
        "{after:?}"
    );
    let now = flow_set(&ovs, "br0");
    assert!(now.contains(&kept_line), "adopted flow kept: {now:?}");
    assert!(
        !now.iter().any(|l| l.contains("198.51.100.2")),
        "the flow nobody adopted is deleted: {now:?}"
    );
    assert_eq!(now.len(), 2 + 4 + 1, "{now:?}");
    assert_eq!(second.status().await.unwrap().flows, 2 + 4 + 1);
}

/// `ovs-ofctl dump-meters` without its header, one line per meter (bands joined in).
fn meter_set(ovs: &Ovs, bridge: &str) -> BTreeSet<String> {
    let text = ovs.ofctl(&["dump-meters", bridge]).unwrap();
    let mut out = BTreeSet::new();
    let mut current = String::new();
    for line in text.lines().skip(1) {
        if line.starts_with("meter=") && !current.is_empty() {
            out.insert(std::mem::take(&mut current));
        }
        current.push_str(line.trim());
        current.push(' ');
    }
    if !current.is_empty() {
        out.insert(current);
    }
    out
}

/// A table-0 flow sending in_port 1 through `meter` (or not) to table 1.
fn metered_flow(meter: Option<u32>) -> Flow {
    let mut ins: Vec<Instruction> = meter.map(Instruction::Meter).into_iter().collect();
    ins.push(Instruction::GotoTable(1));
    Flow::new(0, 10, Match::new().in_port(1u32), ins).owned_by(2, 1)
}

#[actix_rt::test]
async fn meters_come_back_after_an_ovs_restart_and_a_reconnect_and_strays_go() {
    testbed::require!(Ovs);
    let mut ovs = Ovs::start(OvsOptions::dummy()).unwrap();
    let bridge = BridgeHandle::start(BridgeConfig::new("br0", tables()));
    let listener = Listener::tcp(localhost(), SwitchOptions::default(), vec![bridge.events()])
        .await
        .unwrap();
    controlled_bridge(
        &ovs,
        "br0",
        &format!("tcp:127.0.0.1:{}", listener.port().unwrap()),
    );
    wait_synced(&bridge, 1).await;
    println!(
        "{}",
        ovs.ofctl(&["meter-features", "br0"]).unwrap().trim_end()
    );

    let id = bridge.allocate_meter_id().await.unwrap();
    assert_ne!(
        bridge.allocate_meter_id().await.unwrap(),
        id,
        "two allocations before an apply never share an id"
    );
    let applied = bridge
        .apply(vec![
            Change::add_flow(metered_flow(Some(id))),
            Change::AddMeter(ofctrl::Meter::drop_above(id, 10_000, 1000)),
        ])
        .await
        .unwrap();
    assert_eq!(applied, Applied::Installed(2));
    let meters = meter_set(&ovs, "br0");
    assert_eq!(meters.len(), 1, "{meters:?}");
    let meter = meters.iter().next().unwrap().clone();
    assert!(
        meter.starts_with(&format!("meter={id} kbps burst stats"))
            && meter.contains("type=drop rate=10000 burst_size=1000"),
        "{meter}"
    );
    let flows = flow_set(&ovs, "br0");
    assert!(
        flows.contains(&format!(
            "table=0, priority=10,in_port=1 actions=meter:{id},goto_table:1"
        )),
        "{flows:?}"
    );

    // ovs-vswitchd restarts empty: the meter comes back with the flow using it.
    ovs.kill();
    ovs.restart().unwrap();
    wait_synced(&bridge, 2).await;
    assert_eq!(meter_set(&ovs, "br0"), meters);
    assert_eq!(flow_set(&ovs, "br0"), flows);

    // Someone changes our meter and adds one of their own; the next connect undoes both.
    ovs.ofctl(&[
        "mod-meter",
        "br0",
        &format!("meter={id},kbps,burst,band=type=drop,rate=1,burst_size=1"),
    ])
    .unwrap();
    ovs.ofctl(&["add-meter", "br0", "meter=99,kbps,band=type=drop,rate=5"])
        .unwrap();
    assert_eq!(meter_set(&ovs, "br0").len(), 2);
    bridge.switch().await.unwrap().close();
    wait_synced(&bridge, 3).await;
    assert_eq!(meter_set(&ovs, "br0"), meters);
    assert_eq!(flow_set(&ovs, "br0"), flows);

    // The flow stops using the meter and the meter goes in one apply: the flow stays (the
    // meter is deleted only after the flow no longer uses it).
    bridge
        .apply(vec![
            Change::add_flow(metered_flow(None)),
            Change::RemoveMeter(id),
        ])
        .await
        .unwrap();
    assert!(meter_set(&ovs, "br0").is_empty());
    let flows = flow_set(&ovs, "br0");
    assert!(
        flows.contains("table=0, priority=10,in_port=1 actions=goto_table:1"),
        "{flows:?}"
    );
    assert_eq!(bridge.status().await.unwrap().meters, 0);
}

/// The port table follows the real switch: a port there at connect is known, a port added
/// afterwards is known by the number OVS reports (the one asked for in `ofport_request`),
/// and a deleted one is not.
#[actix_rt::test]
async fn the_port_table_learns_ports_from_the_switch_list_and_its_port_status() {
    testbed::require!(Ovs);
    let ovs = Ovs::start(OvsOptions::dummy()).unwrap();
    let ports = ofctrl::SwitchPorts::start_table();
    let (events, mut rx) = collector();
    let listener = Listener::tcp(
        localhost(),
        SwitchOptions::default(),
        vec![events, ports.events()],
    )
    .await
    .unwrap();
    ovs.add_bridge("br0").unwrap();
    ovs.vsctl(&[
        "add-port",
        "br0",
        "early",
        "--",
        "set",
        "interface",
        "early",
        "type=dummy",
        "ofport_request=5",
    ])
    .unwrap();
    point_at_controller(
        &ovs,
        "br0",
        &format!("tcp:127.0.0.1:{}", listener.port().unwrap()),
    );
    next_connected(&mut rx).await;
    let within = |secs: u64, fut| async move {
        tokio::time::timeout(Duration::from_secs(secs), fut)
            .await
            .ok()
    };
    assert_eq!(within(10, ports.installed("early", 5)).await, Some(true));

    let late = ports.installed("late", 17);
    let wrong_number = ports.installed("late", 18);
    ovs.vsctl(&[
        "--no-wait",
        "add-port",
        "br0",
        "late",
        "--",
        "set",
        "interface",
        "late",
        "type=dummy",
        "ofport_request=17",
    ])
    .unwrap();
    assert_eq!(
        within(10, late).await,
        Some(true),
        "no PORT_STATUS for the new port numbered 17"
    );
    assert_eq!(within(1, wrong_number).await, None);

    ovs.vsctl(&["del-port", "br0", "late"]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while tokio::time::timeout(Duration::from_millis(100), ports.installed("late", 17))
        .await
        .is_ok()
    {
        assert!(
            Instant::now() < deadline,
            "the deleted port is still in the table"
        );
    }
}
