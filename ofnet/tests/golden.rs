//! Golden tests: for fixed inputs, the full flow table (miss flows included) in `ovs-ofctl`
//! syntax equals a hand-written list, both as the agent computes it and as
//! `ovs-ofctl dump-flows` shows it on a real bridge (cookies and counters stripped).
#![allow(clippy::unwrap_used)]

mod common;

use common::{connect, dumped_flows, init_tracing};
use ofnet::pipeline::{Pipeline, VLAN_PIPELINE, VXLAN_PIPELINE};
use ofnet::{
    AgentConfig, AgentHandle, BridgeKind, LocalEndpoint, MacAddr, Network, PolicyRule, RuleAction,
};
use std::net::Ipv4Addr;
use testbed::{Ovs, OvsOptions};

/// A generation store in memory.
#[derive(Clone, Default)]
struct Generations(std::rc::Rc<std::cell::Cell<Option<u16>>>);

impl ofctrl::GenerationStore for Generations {
    fn load(&self) -> futures::future::LocalBoxFuture<'static, Option<u16>> {
        let g = self.0.get();
        Box::pin(async move { g })
    }

    fn store(&self, generation: u16) -> futures::future::LocalBoxFuture<'static, ()> {
        self.0.set(Some(generation));
        Box::pin(async {})
    }
}

fn misses(p: &'static Pipeline) -> Vec<String> {
    p.table_specs()
        .iter()
        .map(|t| ofnet::text::flow(&ofctrl::bridge::miss_flow(t)))
        .collect()
}

fn expected(p: &'static Pipeline, golden: &[&str]) -> Vec<String> {
    let mut all = misses(p);
    all.extend(golden.iter().map(|s| s.to_string()));
    ofnet::text::sorted(all)
}

fn local(port: u32, vlan: u16, last: u8, epg: u16, dscp: u8) -> LocalEndpoint {
    LocalEndpoint {
        port_no: port,
        mac: MacAddr([2, 2, 10, 1, 1, last]),
        vlan,
        ipv4: Some(Ipv4Addr::new(10, 1, 1, last)),
        ipv6: None,
        epg,
        epg_vlan: 0,
        dscp,
        bandwidth: None,
    }
}

const VLAN_GOLDEN: &[&str] = &[
    "table=0, priority=110,icmp6,icmp_type=135,nd_target=fe80::/10 actions=goto_table:1",
    "table=0, priority=100,arp,arp_op=1 actions=CONTROLLER:65535",
    "table=0, priority=100,icmp6,icmp_type=135 actions=CONTROLLER:65535",
    "table=1, priority=110,icmp6,in_port=2,dl_src=02:02:0a:01:01:02,icmp_type=136,nd_target=fe80::2:aff:fe01:102 actions=write_metadata:0x100050000/0xff7fff0000,goto_table:3",
    "table=1, priority=110,icmp6,in_port=3,dl_src=02:02:0a:01:01:03,icmp_type=136,nd_target=fe80::2:aff:fe01:103 actions=set_field:10->ip_dscp,write_metadata:0x100000000/0xff7fff0000,goto_table:3",
    "table=1, priority=110,icmp6,in_port=4,dl_src=02:02:0a:01:01:04,icmp_type=136,nd_target=fd00::4 actions=write_metadata:0x100000000/0xff7fff0000,goto_table:3",
    "table=1, priority=110,icmp6,in_port=4,dl_src=02:02:0a:01:01:04,icmp_type=136,nd_target=fe80::2:aff:fe01:104 actions=write_metadata:0x100000000/0xff7fff0000,goto_table:3",
    "table=1, priority=105,icmp6,in_port=2,icmp_type=136 actions=drop",
    "table=1, priority=105,icmp6,in_port=3,icmp_type=136 actions=drop",
    "table=1, priority=105,icmp6,in_port=4,icmp_type=136 actions=drop",
    "table=1, priority=100,arp,in_port=2,dl_src=02:02:0a:01:01:02,arp_spa=0.0.0.0,arp_sha=02:02:0a:01:01:02 actions=write_metadata:0x100050000/0xff7fff0000,goto_table:3",
    "table=1, priority=100,arp,in_port=2,dl_src=02:02:0a:01:01:02,arp_spa=10.1.1.2,arp_sha=02:02:0a:01:01:02 actions=write_metadata:0x100050000/0xff7fff0000,goto_table:3",
    "table=1, priority=100,arp,in_port=3,dl_src=02:02:0a:01:01:03,arp_spa=0.0.0.0,arp_sha=02:02:0a:01:01:03 actions=write_metadata:0x100000000/0xff7fff0000,goto_table:3",
    "table=1, priority=100,arp,in_port=3,dl_src=02:02:0a:01:01:03,arp_spa=10.1.1.3,arp_sha=02:02:0a:01:01:03 actions=write_metadata:0x100000000/0xff7fff0000,goto_table:3",
    "table=1, priority=100,arp,in_port=4,dl_src=02:02:0a:01:01:04,arp_spa=0.0.0.0,arp_sha=02:02:0a:01:01:04 actions=write_metadata:0x100000000/0xff7fff0000,goto_table:3",
    "table=1, priority=100,arp,in_port=4,dl_src=02:02:0a:01:01:04,arp_spa=10.1.1.4,arp_sha=02:02:0a:01:01:04 actions=write_metadata:0x100000000/0xff7fff0000,goto_table:3",
    "table=1, priority=100,icmp6,in_port=2,dl_src=02:02:0a:01:01:02,ipv6_src=::,icmp_type=135 actions=write_metadata:0x100050000/0xff7fff0000,goto_table:3",
    "table=1, priority=100,icmp6,in_port=3,dl_src=02:02:0a:01:01:03,ipv6_src=::,icmp_type=135 actions=set_field:10->ip_dscp,write_metadata:0x100000000/0xff7fff0000,goto_table:3",
    "table=1, priority=100,icmp6,in_port=4,dl_src=02:02:0a:01:01:04,ipv6_src=::,icmp_type=135 actions=write_metadata:0x100000000/0xff7fff0000,goto_table:3",
    "table=1, priority=100,in_port=1 actions=goto_table:6",
    "table=1, priority=100,ip,in_port=2,dl_src=02:02:0a:01:01:02,nw_src=10.1.1.2 actions=write_metadata:0x100050000/0xff7fff0000,goto_table:3",
    "table=1, priority=100,ip,in_port=3,dl_src=02:02:0a:01:01:03,nw_src=10.1.1.3 actions=set_field:10->ip_dscp,write_metadata:0x100000000/0xff7fff0000,goto_table:3",
    "table=1, priority=100,ip,in_port=4,dl_src=02:02:0a:01:01:04,nw_src=10.1.1.4 actions=write_metadata:0x100000000/0xff7fff0000,goto_table:3",
    "table=1, priority=100,ipv6,in_port=2,dl_src=02:02:0a:01:01:02,ipv6_src=fe80::/10 actions=write_metadata:0x100050000/0xff7fff0000,goto_table:3",
    "table=1, priority=100,ipv6,in_port=3,dl_src=02:02:0a:01:01:03,ipv6_src=fe80::/10 actions=set_field:10->ip_dscp,write_metadata:0x100000000/0xff7fff0000,goto_table:3",
    "table=1, priority=100,ipv6,in_port=4,dl_src=02:02:0a:01:01:04,ipv6_src=fd00::4 actions=write_metadata:0x100000000/0xff7fff0000,goto_table:3",
    "table=1, priority=100,ipv6,in_port=4,dl_src=02:02:0a:01:01:04,ipv6_src=fe80::/10 actions=write_metadata:0x100000000/0xff7fff0000,goto_table:3",
    "table=1, priority=100,udp,in_port=2,dl_src=02:02:0a:01:01:02,nw_src=0.0.0.0,tp_src=68,tp_dst=67 actions=write_metadata:0x100050000/0xff7fff0000,goto_table:3",
    "table=1, priority=100,udp,in_port=3,dl_src=02:02:0a:01:01:03,nw_src=0.0.0.0,tp_src=68,tp_dst=67 actions=set_field:10->ip_dscp,write_metadata:0x100000000/0xff7fff0000,goto_table:3",
    "table=1, priority=100,udp,in_port=4,dl_src=02:02:0a:01:01:04,nw_src=0.0.0.0,tp_src=68,tp_dst=67 actions=write_metadata:0x100000000/0xff7fff0000,goto_table:3",
    "table=1, priority=50,arp,in_port=2 actions=drop",
    "table=1, priority=50,arp,in_port=3 actions=drop",
    "table=1, priority=50,arp,in_port=4 actions=drop",
    "table=1, priority=50,ip,in_port=2 actions=drop",
    "table=1, priority=50,ip,in_port=3 actions=drop",
    "table=1, priority=50,ip,in_port=4 actions=drop",
    "table=1, priority=50,ipv6,in_port=2 actions=drop",
    "table=1, priority=50,ipv6,in_port=3 actions=drop",
    "table=1, priority=50,ipv6,in_port=4 actions=drop",
    "table=1, priority=10,in_port=2,dl_src=02:02:0a:01:01:02 actions=write_metadata:0x100050000/0xff7fff0000,goto_table:3",
    "table=1, priority=10,in_port=3,dl_src=02:02:0a:01:01:03 actions=write_metadata:0x100000000/0xff7fff0000,goto_table:3",
    "table=1, priority=10,in_port=4,dl_src=02:02:0a:01:01:04 actions=write_metadata:0x100000000/0xff7fff0000,goto_table:3",
    "table=1, priority=5,in_port=2 actions=drop",
    "table=1, priority=5,in_port=3 actions=drop",
    "table=1, priority=5,in_port=4 actions=drop",
    "table=4, priority=100,ip,metadata=0x100000000/0xff00000000,nw_dst=10.1.1.2 actions=write_metadata:0xa/0xfffe,goto_table:5",
    "table=4, priority=100,ip,metadata=0x100000000/0xff00000000,nw_dst=10.1.1.3 actions=write_metadata:0/0xfffe,goto_table:5",
    "table=4, priority=100,ip,metadata=0x100000000/0xff00000000,nw_dst=10.1.1.4 actions=write_metadata:0/0xfffe,goto_table:5",
    "table=4, priority=100,ipv6,metadata=0x100000000/0xff00000000,ipv6_dst=fd00::4 actions=write_metadata:0/0xfffe,goto_table:5",
    "table=5, priority=110,tcp,metadata=0x7000a/0x7ffffffe,nw_src=10.1.1.0/24,tp_dst=8000 actions=goto_table:6",
    "table=5, priority=14,tcp6,ipv6_src=fd00::/64,tp_dst=8001 actions=drop",
    "table=5, priority=13,udp,nw_dst=10.2.0.1,tp_src=53 actions=goto_table:6",
    "table=5, priority=11,tcp,metadata=0xa/0xfffe,tcp_flags=+syn-ack actions=drop",
    "table=5, priority=11,tcp6,metadata=0xa/0xfffe,tcp_flags=+syn-ack actions=drop",
    // The uplink gives each network's VLAN its VRF.
    "table=1, priority=101,in_port=1,dl_vlan=10 actions=write_metadata:0x100000000/0xff00000000,goto_table:6",
    "table=1, priority=101,in_port=1,dl_vlan=20 actions=write_metadata:0x100000000/0xff00000000,goto_table:6",
    // Rules exist: policy is stateful.
    "table=3, priority=200,ct_state=-trk,ip actions=ct(table=3,zone=OXM_OF_METADATA[32..47],nat)",
    "table=3, priority=200,ct_state=-trk,ipv6 actions=ct(table=3,zone=OXM_OF_METADATA[32..47],nat)",
    "table=5, priority=65535,ct_state=+est+rpl+trk,ct_label=0/0x1 actions=goto_table:6",
    "table=5, priority=65535,ct_state=+rel+rpl+trk,ct_label=0/0x1 actions=goto_table:6",
    "table=6, priority=200,ct_state=-trk,ip actions=ct(table=6,zone=OXM_OF_METADATA[32..47],nat)",
    "table=6, priority=200,ct_state=-trk,ipv6 actions=ct(table=6,zone=OXM_OF_METADATA[32..47],nat)",
    "table=7, priority=200,ct_state=+est+rpl+trk,ct_label=0/0x1 actions=goto_table:9",
    "table=7, priority=200,ct_state=+rel+rpl+trk,ct_label=0/0x1 actions=goto_table:9",
    "table=7, priority=200,ct_state=+rpl+trk,ct_label=0x1/0x1 actions=drop",
    "table=7, priority=200,icmp6,icmp_type=133 actions=goto_table:9",
    "table=7, priority=200,icmp6,icmp_type=134 actions=goto_table:9",
    "table=7, priority=200,icmp6,icmp_type=135 actions=goto_table:9",
    "table=7, priority=200,icmp6,icmp_type=136 actions=goto_table:9",
    "table=7, priority=200,icmp6,icmp_type=137 actions=goto_table:9",
    "table=8, priority=2,ct_state=+est-rpl+trk,ct_label=0x1/0x1,ip actions=ct(commit,zone=OXM_OF_METADATA[32..47],exec(set_field:0/0x1->ct_label)),goto_table:9",
    "table=8, priority=2,ct_state=+est-rpl+trk,ct_label=0x1/0x1,ipv6 actions=ct(commit,zone=OXM_OF_METADATA[32..47],exec(set_field:0/0x1->ct_label)),goto_table:9",
    "table=8, priority=1,ct_state=+new+trk,ip actions=ct(commit,zone=OXM_OF_METADATA[32..47]),goto_table:9",
    "table=8, priority=1,ct_state=+new+trk,ipv6 actions=ct(commit,zone=OXM_OF_METADATA[32..47]),goto_table:9",
];

#[actix_rt::test]
async fn vlan_bridge_flow_table_matches_golden_and_ovs() {
    testbed::require!(Root, Ovs);
    init_tracing();
    let ovs = Ovs::start(OvsOptions::dummy()).unwrap();
    ovs.add_bridge("br0").unwrap();
    let agent = AgentHandle::start(AgentConfig::new(BridgeKind::Vlan, "br0"));
    let _listener = connect(&ovs, "br0", &agent).await;

    for vlan in [10, 20] {
        agent
            .add_network(Network {
                vlan,
                vni: 0,
                gateway: None,
                vrf: "t1".into(),
            })
            .await
            .unwrap();
    }
    let mut dual_stack = local(4, 20, 4, 0, 0);
    dual_stack.ipv6 = Some("fd00::4".parse().unwrap());
    for ep in [local(2, 10, 2, 5, 0), local(3, 10, 3, 0, 10), dual_stack] {
        agent.add_local_endpoint(ep).await.unwrap();
    }
    agent.add_uplink(1).await.unwrap();
    let mut deny = PolicyRule::new("deny", 1, RuleAction::Deny);
    deny.dst_endpoint_group = 5;
    deny.ip_protocol = 6;
    deny.tcp_flags = "syn,!ack".into();
    let mut allow = PolicyRule::new("allow", 100, RuleAction::Allow);
    allow.src_endpoint_group = 7;
    allow.dst_endpoint_group = 5;
    allow.ip_protocol = 6;
    allow.dst_port = 8000;
    allow.src_ip_addr = "10.1.1.0/24".into();
    let mut udp = PolicyRule::new("udp", 3, RuleAction::Allow);
    udp.ip_protocol = 17;
    udp.src_port = 53;
    udp.dst_ip_addr = "10.2.0.1".into();
    let mut v6 = PolicyRule::new("v6", 4, RuleAction::Deny);
    v6.ip_protocol = 6;
    v6.dst_port = 8001;
    v6.src_ip_addr = "fd00::/64".into();
    for r in [deny, allow, udp, v6] {
        agent.add_rule(r).await.unwrap();
    }

    let want = expected(&VLAN_PIPELINE, VLAN_GOLDEN);
    let (mut computed, groups) = agent.installed_flows().await.unwrap();
    computed.extend(misses(&VLAN_PIPELINE));
    assert_eq!(ofnet::text::sorted(computed), want, "computed flows");
    assert!(groups.is_empty());
    assert_eq!(dumped_flows(&ovs, "br0").await, want, "flows on the bridge");
}

const VXLAN_GOLDEN: &[&str] = &[
    "table=0, priority=110,icmp6,icmp_type=135,nd_target=fe80::/10 actions=goto_table:1",
    "table=0, priority=100,arp,arp_op=1 actions=CONTROLLER:65535",
    "table=0, priority=100,dl_src=01:00:00:00:00:00/01:00:00:00:00:00 actions=drop",
    "table=0, priority=100,icmp6,icmp_type=135 actions=CONTROLLER:65535",
    "table=1, priority=110,icmp6,in_port=3,dl_src=02:02:0a:01:01:02,icmp_type=136,nd_target=fe80::2:aff:fe01:102 actions=set_field:46->ip_dscp,push_vlan:0x8100,set_field:4098->vlan_vid,write_metadata:0x100000000/0xff7fff0000,goto_table:3",
    "table=1, priority=105,icmp6,in_port=3,icmp_type=136 actions=drop",
    "table=1, priority=100,arp,in_port=3,dl_src=02:02:0a:01:01:02,arp_spa=0.0.0.0,arp_sha=02:02:0a:01:01:02 actions=push_vlan:0x8100,set_field:4098->vlan_vid,write_metadata:0x100000000/0xff7fff0000,goto_table:3",
    "table=1, priority=100,arp,in_port=3,dl_src=02:02:0a:01:01:02,arp_spa=10.1.1.2,arp_sha=02:02:0a:01:01:02 actions=push_vlan:0x8100,set_field:4098->vlan_vid,write_metadata:0x100000000/0xff7fff0000,goto_table:3",
    "table=1, priority=100,icmp6,in_port=3,dl_src=02:02:0a:01:01:02,ipv6_src=::,icmp_type=135 actions=set_field:46->ip_dscp,push_vlan:0x8100,set_field:4098->vlan_vid,write_metadata:0x100000000/0xff7fff0000,goto_table:3",
    "table=1, priority=100,ip,in_port=3,dl_src=02:02:0a:01:01:02,nw_src=10.1.1.2 actions=set_field:46->ip_dscp,push_vlan:0x8100,set_field:4098->vlan_vid,write_metadata:0x100000000/0xff7fff0000,goto_table:3",
    "table=1, priority=100,ipv6,in_port=3,dl_src=02:02:0a:01:01:02,ipv6_src=fe80::/10 actions=set_field:46->ip_dscp,push_vlan:0x8100,set_field:4098->vlan_vid,write_metadata:0x100000000/0xff7fff0000,goto_table:3",
    "table=1, priority=100,tun_id=0x1388,in_port=9 actions=push_vlan:0x8100,set_field:4098->vlan_vid,write_metadata:0x100000001/0xff00000001,goto_table:6",
    "table=1, priority=100,udp,in_port=3,dl_src=02:02:0a:01:01:02,nw_src=0.0.0.0,tp_src=68,tp_dst=67 actions=set_field:46->ip_dscp,push_vlan:0x8100,set_field:4098->vlan_vid,write_metadata:0x100000000/0xff7fff0000,goto_table:3",
    "table=1, priority=50,arp,in_port=3 actions=drop",
    "table=1, priority=50,ip,in_port=3 actions=drop",
    "table=1, priority=50,ipv6,in_port=3 actions=drop",
    "table=1, priority=10,in_port=3,dl_src=02:02:0a:01:01:02 actions=push_vlan:0x8100,set_field:4098->vlan_vid,write_metadata:0x100000000/0xff7fff0000,goto_table:3",
    "table=1, priority=5,in_port=3 actions=drop",
    "table=4, priority=100,ip,metadata=0x100000000/0xff00000000,nw_dst=10.1.1.2 actions=write_metadata:0/0xfffe,goto_table:5",
    "table=4, priority=100,ip,metadata=0x100000000/0xff00000000,nw_dst=10.1.1.3 actions=write_metadata:0/0xfffe,goto_table:5",
    "table=9, priority=100,dl_vlan=2,dl_dst=02:02:0a:01:01:02 actions=pop_vlan,output:3",
    "table=9, priority=100,dl_vlan=2,dl_dst=02:02:0a:01:01:03 actions=pop_vlan,set_field:0x1388->tun_id,output:9",
    "table=9, priority=10,metadata=0/0x1,dl_vlan=2 actions=group:5",
    "table=9, priority=10,metadata=0x1/0x1,dl_vlan=2 actions=group:4",
];

const VXLAN_GROUPS: &[&str] = &[
    "group_id=4,type=all,bucket=actions=pop_vlan,output:3",
    "group_id=5,type=all,bucket=actions=pop_vlan,output:3,bucket=actions=pop_vlan,set_field:0x1388->tun_id,output:9",
];

#[actix_rt::test]
async fn vxlan_bridge_flow_table_and_groups_match_golden_and_ovs() {
    testbed::require!(Root, Ovs);
    init_tracing();
    let ovs = Ovs::start(OvsOptions::dummy()).unwrap();
    ovs.add_bridge("br0").unwrap();
    let mut config = AgentConfig::new(BridgeKind::Vxlan, "br0");
    config.local_ip = Some(Ipv4Addr::new(192, 168, 77, 1));
    let agent = AgentHandle::start(config);
    let _listener = connect(&ovs, "br0", &agent).await;

    agent
        .add_network(Network {
            vlan: 2,
            vni: 5000,
            gateway: None,
            vrf: "t1".into(),
        })
        .await
        .unwrap();
    agent
        .add_local_endpoint(local(3, 2, 2, 0, 46))
        .await
        .unwrap();
    // The remote endpoint arrives before its host's VTEP: it gets its MAC entry once the VTEP
    // is known.
    let remote = ofnet::Endpoint {
        endpoint_id: "10.1.1.3:t1".into(),
        endpoint_type: 2,
        endpoint_group: 0,
        ip_addr: Some(Ipv4Addr::new(10, 1, 1, 3)),
        ip_mask: Some(Ipv4Addr::BROADCAST),
        ipv6_addr: None,
        ipv6_mask: None,
        vrf: "t1".into(),
        mac: MacAddr([2, 2, 10, 1, 1, 3]),
        vlan: 7,
        vni: 5000,
        endpoint_group_vlan: 0,
        originator_ip: Some(Ipv4Addr::new(192, 168, 77, 2)),
        originator_mac: String::new(),
        timestamp: String::new(),
        port_no: 0,
        dscp: 0,
        bandwidth: None,
    };
    agent.add_remote_endpoint(remote).await.unwrap();
    agent
        .add_vtep(Ipv4Addr::new(192, 168, 77, 2), 9)
        .await
        .unwrap();

    let want = expected(&VXLAN_PIPELINE, VXLAN_GOLDEN);
    let (mut computed, groups) = agent.installed_flows().await.unwrap();
    computed.extend(misses(&VXLAN_PIPELINE));
    assert_eq!(ofnet::text::sorted(computed), want, "computed flows");
    assert_eq!(groups, VXLAN_GROUPS);
    assert_eq!(dumped_flows(&ovs, "br0").await, want, "flows on the bridge");
    let mut dumped_groups = ovs.dump_groups("br0").unwrap();
    dumped_groups.sort();
    assert_eq!(dumped_groups, VXLAN_GROUPS, "groups on the bridge");
}

/// After ovs-vswitchd restarts (flows live only in it), the agent's table comes back whole
/// without any call to the agent: the bridge reconciles from the desired state on reconnect.
#[actix_rt::test]
async fn flow_table_comes_back_after_an_ovs_restart() {
    testbed::require!(Root, Ovs);
    init_tracing();
    let mut ovs = Ovs::start(OvsOptions::dummy()).unwrap();
    ovs.add_bridge("br0").unwrap();
    // Where netplugin would keep the generation (OVSDB external_ids): here, a cell.
    let stored = Generations::default();
    let store = stored.clone();
    let agent = AgentHandle::start_with(AgentConfig::new(BridgeKind::Vlan, "br0"), move |b| {
        b.generations = Some(Box::new(store));
    });
    let _listener = connect(&ovs, "br0", &agent).await;
    agent
        .add_network(Network {
            vlan: 10,
            vni: 0,
            gateway: None,
            vrf: "t1".into(),
        })
        .await
        .unwrap();
    agent
        .add_local_endpoint(local(2, 10, 2, 5, 0))
        .await
        .unwrap();
    let before = dumped_flows(&ovs, "br0").await;
    // The ARP and ND punts (3), and per IPv4-only endpoint 13 classification and spoof-guard
    // flows in table 1 and its destination in table 4.
    const PER_ENDPOINT: usize = 14;
    assert_eq!(
        before.len(),
        misses(&VLAN_PIPELINE).len() + 3 + PER_ENDPOINT
    );

    ovs.kill_vswitchd();
    ovs.restart().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let status = agent.bridge().status().await.unwrap();
        if status.synced && status.reconciles >= 2 && dumped_flows(&ovs, "br0").await == before {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "table not restored: {status:?}"
        );
        actix_rt::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        stored.0.get().is_some_and(|g| g >= 2),
        "generation stored: {:?}",
        stored.0.get()
    );
    // And the agent keeps working on the new connection.
    agent
        .add_local_endpoint(local(3, 10, 3, 5, 0))
        .await
        .unwrap();
    assert_eq!(
        dumped_flows(&ovs, "br0").await.len(),
        before.len() + PER_ENDPOINT
    );
}

/// NetworkPolicy flows (tables 7 and 8, cookie category 9) for two policies on a VXLAN bridge:
/// conjunctions of pod, peer and port clauses, a port range as masks, an ipBlock with an
/// exception, an IPv6 peer, an unrestricted rule, isolation and the shared stateful flows.
const NETPOL_GOLDEN: &[&str] = &[
    // Shared: reply bypass, revoked replies, neighbour discovery, commits.
    "table=7, priority=200,ct_state=+est+rpl+trk,ct_label=0/0x1 actions=goto_table:9",
    "table=7, priority=200,ct_state=+rel+rpl+trk,ct_label=0/0x1 actions=goto_table:9",
    "table=7, priority=200,ct_state=+rpl+trk,ct_label=0x1/0x1 actions=drop",
    "table=7, priority=200,icmp6,icmp_type=133 actions=goto_table:9",
    "table=7, priority=200,icmp6,icmp_type=134 actions=goto_table:9",
    "table=7, priority=200,icmp6,icmp_type=135 actions=goto_table:9",
    "table=7, priority=200,icmp6,icmp_type=136 actions=goto_table:9",
    "table=7, priority=200,icmp6,icmp_type=137 actions=goto_table:9",
    "table=8, priority=2,ct_state=+est-rpl+trk,ct_label=0x1/0x1,ip actions=ct(commit,zone=OXM_OF_METADATA[32..47],exec(set_field:0/0x1->ct_label)),goto_table:9",
    "table=8, priority=2,ct_state=+est-rpl+trk,ct_label=0x1/0x1,ipv6 actions=ct(commit,zone=OXM_OF_METADATA[32..47],exec(set_field:0/0x1->ct_label)),goto_table:9",
    "table=8, priority=1,ct_state=+new+trk,ip actions=ct(commit,zone=OXM_OF_METADATA[32..47]),goto_table:9",
    "table=8, priority=1,ct_state=+new+trk,ipv6 actions=ct(commit,zone=OXM_OF_METADATA[32..47]),goto_table:9",
    // ns/web ingress to 10.1.1.2 and fd00::2: rule 1 (conjunction 1) from 10.1.1.3 on TCP 80
    // and 8080..8087, rule 2 (conjunction 2) from 10.9.0.0/16 except 10.9.128.0/17 and from
    // fd00::3, on UDP 53.
    "table=8, priority=100,ip,metadata=0x100000000/0xff00000000,nw_dst=10.1.1.2 actions=conjunction(1,1/3),conjunction(2,1/3)",
    "table=8, priority=100,ipv6,metadata=0x100000000/0xff00000000,ipv6_dst=fd00::2 actions=conjunction(2,1/3)",
    "table=8, priority=100,ip,metadata=0x100000000/0xff00000000,nw_src=10.1.1.3 actions=conjunction(1,2/3)",
    "table=8, priority=100,ip,metadata=0x100000000/0xff00000000,nw_src=10.9.0.0/17 actions=conjunction(2,2/3)",
    "table=8, priority=100,ipv6,metadata=0x100000000/0xff00000000,ipv6_src=fd00::3 actions=conjunction(2,2/3)",
    "table=8, priority=100,tcp,metadata=0x100000000/0xff00000000,tp_dst=80 actions=conjunction(1,3/3)",
    "table=8, priority=100,tcp,metadata=0x100000000/0xff00000000,tp_dst=0x1f90/0xfff8 actions=conjunction(1,3/3)",
    "table=8, priority=100,udp,metadata=0x100000000/0xff00000000,tp_dst=53 actions=conjunction(2,3/3)",
    "table=8, priority=100,udp6,metadata=0x100000000/0xff00000000,tp_dst=53 actions=conjunction(2,3/3)",
    "table=8, priority=100,conj_id=1,ip actions=ct(commit,zone=OXM_OF_METADATA[32..47],exec(set_field:0/0x1->ct_label)),goto_table:9",
    "table=8, priority=100,conj_id=2,ip actions=ct(commit,zone=OXM_OF_METADATA[32..47],exec(set_field:0/0x1->ct_label)),goto_table:9",
    "table=8, priority=100,conj_id=2,ipv6 actions=ct(commit,zone=OXM_OF_METADATA[32..47],exec(set_field:0/0x1->ct_label)),goto_table:9",
    "table=8, priority=11,ct_state=+est-rpl+trk,ip,metadata=0x100000000/0xff00000000,nw_dst=10.1.1.2 actions=ct(commit,zone=OXM_OF_METADATA[32..47],exec(set_field:0x1/0x1->ct_label))",
    "table=8, priority=11,ct_state=+est-rpl+trk,ipv6,metadata=0x100000000/0xff00000000,ipv6_dst=fd00::2 actions=ct(commit,zone=OXM_OF_METADATA[32..47],exec(set_field:0x1/0x1->ct_label))",
    "table=8, priority=10,ip,metadata=0x100000000/0xff00000000,nw_dst=10.1.1.2 actions=drop",
    "table=8, priority=10,ipv6,metadata=0x100000000/0xff00000000,ipv6_dst=fd00::2 actions=drop",
    // ns/out egress of 10.1.1.2: rule 1 (conjunction 3) to anywhere, every port: one allow flow.
    "table=7, priority=110,ip,metadata=0x100000000/0xff00000000,nw_src=10.1.1.2 actions=goto_table:8",
    "table=7, priority=11,ct_state=+est-rpl+trk,ip,metadata=0x100000000/0xff00000000,nw_src=10.1.1.2 actions=ct(commit,zone=OXM_OF_METADATA[32..47],exec(set_field:0x1/0x1->ct_label))",
    "table=7, priority=10,ip,metadata=0x100000000/0xff00000000,nw_src=10.1.1.2 actions=drop",
];

#[actix_rt::test]
async fn network_policy_flows_match_golden_and_ovs() {
    use ofnet::NetworkPolicy;
    use ofnet::netpol::{Peer, Port, Protocol, Rule};
    testbed::require!(Root, Ovs);
    init_tracing();
    let ovs = Ovs::start(OvsOptions::dummy()).unwrap();
    ovs.add_bridge("br0").unwrap();
    let agent = AgentHandle::start(AgentConfig::new(BridgeKind::Vxlan, "br0"));
    let _listener = connect(&ovs, "br0", &agent).await;
    agent
        .add_network(Network {
            vlan: 2,
            vni: 5000,
            gateway: None,
            vrf: "t1".into(),
        })
        .await
        .unwrap();
    let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
    let net = |s: &str| s.parse::<ipnet::IpNet>().unwrap();
    let mut web = NetworkPolicy::new("ns/web", "t1", vec![ip("10.1.1.2"), ip("fd00::2")]);
    web.ingress = Some(vec![
        Rule {
            peers: vec![Peer::Pods(vec![ip("10.1.1.3")])],
            ports: vec![
                Port::one(Protocol::Tcp, 80),
                Port::range(Protocol::Tcp, 8080, 8087),
            ],
            applied_to: None,
        },
        Rule {
            peers: vec![
                Peer::IpBlock {
                    cidr: net("10.9.0.0/16"),
                    except: vec![net("10.9.128.0/17")],
                },
                Peer::Pods(vec![ip("fd00::3")]),
            ],
            ports: vec![Port::one(Protocol::Udp, 53)],
            applied_to: None,
        },
    ]);
    let mut out = NetworkPolicy::new("ns/out", "t1", vec![ip("10.1.1.2")]);
    out.egress = Some(vec![Rule::default()]);
    let refused = agent
        .set_network_policies(vec![web, out], vec![])
        .await
        .unwrap();
    assert!(refused.is_empty());
    let of_tables = |flows: Vec<String>| -> Vec<String> {
        flows
            .into_iter()
            .filter(|f| f.starts_with("table=7, priority=") || f.starts_with("table=8, priority="))
            .filter(|f| !f.contains("priority=0 "))
            .collect()
    };
    let want = ofnet::text::sorted(NETPOL_GOLDEN.iter().map(|s| s.to_string()).collect());
    let (computed, _) = agent.installed_flows().await.unwrap();
    assert_eq!(
        of_tables(ofnet::text::sorted(computed)),
        want,
        "computed flows"
    );
    assert_eq!(
        of_tables(dumped_flows(&ovs, "br0").await),
        want,
        "flows on the bridge"
    );
    // Every NetworkPolicy flow but the Contiv table's carries cookie category 9.
    let by_cookie = ovs
        .ofctl(&[
            "dump-flows",
            "br0",
            "cookie=0x0000090000000000/0x0000ff0000000000",
        ])
        .unwrap();
    assert_eq!(
        by_cookie.lines().filter(|l| l.starts_with(' ')).count(),
        NETPOL_GOLDEN.len()
    );
}
