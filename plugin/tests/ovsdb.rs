//! The OVSDB client against a real, private Open vSwitch (testbed, dummy datapath).
//! Assertions read the database back with `ovs-vsctl`, a client that is not ours.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use plugin::ovsdb::{
    BridgeSpec, OvsdbClient, OvsdbError, Policing, PortSpec, Uuid, VlanMode, vtep_port_name,
};
use testbed::{Ovs, OvsOptions};

const BR: &str = "contivVlanBridge";
const CONTROLLER: &str = "tcp:127.0.0.1:6634";
const WAIT: Duration = Duration::from_secs(20);

fn vsctl(ovs: &Ovs, args: &[&str]) -> String {
    ovs.vsctl(args).unwrap().trim().to_string()
}

async fn ovs_with_bridge() -> (Ovs, OvsdbClient, Uuid) {
    let ovs = Ovs::start(OvsOptions::dummy()).unwrap();
    let client = OvsdbClient::connect(ovs.db_socket()).await.unwrap();
    let uuid = client
        .ensure_bridge(
            &BridgeSpec::new(BR)
                .controller(CONTROLLER)
                .datapath_type("dummy"),
        )
        .await
        .unwrap();
    (ovs, client, uuid)
}

#[tokio::test]
async fn bridge_is_created_secure_with_controller_in_one_go() {
    testbed::require!(Root, Ovs);
    let (ovs, client, uuid) = ovs_with_bridge().await;
    assert_eq!(vsctl(&ovs, &["get", "Bridge", BR, "_uuid"]), uuid.0);
    assert_eq!(vsctl(&ovs, &["get", "Bridge", BR, "fail_mode"]), "secure");
    assert_eq!(
        vsctl(&ovs, &["get", "Bridge", BR, "protocols"]),
        "[OpenFlow13]"
    );
    assert_eq!(
        vsctl(&ovs, &["get", "Bridge", BR, "datapath_type"]),
        "dummy"
    );
    assert_eq!(vsctl(&ovs, &["get-controller", BR]), CONTROLLER);
    assert_eq!(vsctl(&ovs, &["get-fail-mode", BR]), "secure");
    // The local port exists like with `ovs-vsctl add-br`.
    assert_eq!(vsctl(&ovs, &["get", "Interface", BR, "type"]), "internal");
    // ovs-vswitchd really built it: the bridge answers OpenFlow on its management socket.
    client.sync_vswitchd(WAIT).await.unwrap();
    let features = ovs.ofctl(&["show", BR]).unwrap();
    assert!(features.contains("LOCAL"), "{features}");
}

#[tokio::test]
async fn ensure_bridge_again_changes_nothing_and_repairs_drift_in_place() {
    testbed::require!(Root, Ovs);
    let (ovs, client, uuid) = ovs_with_bridge().await;
    let controller_uuid = vsctl(&ovs, &["get", "Bridge", BR, "controller"]);
    let spec = BridgeSpec::new(BR)
        .controller(CONTROLLER)
        .datapath_type("dummy");
    assert_eq!(client.ensure_bridge(&spec).await.unwrap(), uuid);
    assert_eq!(
        vsctl(&ovs, &["get", "Bridge", BR, "controller"]),
        controller_uuid,
        "an unchanged bridge keeps its controller row"
    );
    // Someone weakens the bridge behind our back; ensure_bridge puts it back, same uuid.
    vsctl(&ovs, &["set-fail-mode", BR, "standalone"]);
    vsctl(&ovs, &["set-controller", BR, "tcp:127.0.0.1:9"]);
    // Our cache learns of it through the monitor, shortly after ovs-vsctl returns.
    client
        .wait_for("the drift to reach the cache", WAIT, |c| {
            let bridge = c.bridge(BR)?;
            let target = c.controller_by_uuid(bridge.controller.first()?)?.target;
            (bridge.fail_mode.as_deref() == Some("standalone") && target == "tcp:127.0.0.1:9")
                .then_some(())
        })
        .await
        .unwrap();
    assert_eq!(client.ensure_bridge(&spec).await.unwrap(), uuid);
    assert_eq!(vsctl(&ovs, &["get-fail-mode", BR]), "secure");
    assert_eq!(vsctl(&ovs, &["get-controller", BR]), CONTROLLER);
}

#[tokio::test]
async fn uuids_are_stable_for_a_second_client() {
    testbed::require!(Root, Ovs);
    let (ovs, client, bridge) = ovs_with_bridge().await;
    let port = client
        .ensure_port(BR, &PortSpec::internal("vvport1", 10).endpoint_id("ep1"))
        .await
        .unwrap();
    drop(client);
    let second = OvsdbClient::connect(ovs.db_socket()).await.unwrap();
    assert_eq!(second.read(|c| c.bridge(BR).unwrap().uuid), bridge);
    let again = second
        .ensure_port(BR, &PortSpec::internal("vvport1", 10).endpoint_id("ep1"))
        .await
        .unwrap();
    assert_eq!(
        again, port,
        "re-ensuring from a new connection re-creates nothing"
    );
    assert_eq!(
        vsctl(&ovs, &["get", "Port", "vvport1", "_uuid"]),
        port.port.0
    );
    assert_eq!(
        vsctl(&ovs, &["get", "Interface", "vvport1", "_uuid"]),
        port.interface.0
    );
}

#[tokio::test]
async fn access_port_gets_tag_endpoint_id_and_an_ofport_by_waiting() {
    testbed::require!(Root, Ovs);
    let (ovs, client, _) = ovs_with_bridge().await;
    client
        .ensure_port(
            BR,
            &PortSpec::internal("contivh0", 2).endpoint_id("hostcontivh0"),
        )
        .await
        .unwrap();
    assert_eq!(vsctl(&ovs, &["get", "Port", "contivh0", "tag"]), "2");
    assert_eq!(
        vsctl(&ovs, &["get", "Port", "contivh0", "vlan_mode"]),
        "access"
    );
    assert_eq!(
        vsctl(
            &ovs,
            &["get", "Interface", "contivh0", "external_ids:endpoint-id"]
        ),
        "hostcontivh0"
    );
    let ofport = client.wait_ofport("contivh0", WAIT).await.unwrap();
    assert!(ofport > 0);
    assert_eq!(ovs.ofport("contivh0").unwrap(), ofport);
}

#[tokio::test]
async fn changing_a_port_updates_it_in_place() {
    testbed::require!(Root, Ovs);
    let (ovs, client, _) = ovs_with_bridge().await;
    let first = client
        .ensure_port(BR, &PortSpec::internal("vvport7", 10))
        .await
        .unwrap();
    let ofport = client.wait_ofport("vvport7", WAIT).await.unwrap();
    let changed = client
        .ensure_port(
            BR,
            &PortSpec::internal("vvport7", 20).policing(Policing {
                rate_kbps: 1000,
                burst_kb: 100,
            }),
        )
        .await
        .unwrap();
    assert_eq!(changed, first, "same rows, updated in place");
    assert_eq!(vsctl(&ovs, &["get", "Port", "vvport7", "tag"]), "20");
    assert_eq!(
        vsctl(
            &ovs,
            &["get", "Interface", "vvport7", "ingress_policing_rate"]
        ),
        "1000"
    );
    assert_eq!(client.wait_ofport("vvport7", WAIT).await.unwrap(), ofport);
}

#[tokio::test]
async fn trunk_vtep_and_policing() {
    testbed::require!(Root, Ovs);
    let (ovs, client, _) = ovs_with_bridge().await;
    client
        .ensure_port(BR, &PortSpec::trunk("uplink0"))
        .await
        .unwrap();
    assert_eq!(
        vsctl(&ovs, &["get", "Port", "uplink0", "vlan_mode"]),
        "trunk"
    );
    assert_eq!(vsctl(&ovs, &["get", "Port", "uplink0", "tag"]), "[]");

    let remote = IpAddr::V4(Ipv4Addr::new(192, 168, 2, 11));
    let local = IpAddr::V4(Ipv4Addr::new(192, 168, 2, 10));
    client
        .ensure_port(BR, &PortSpec::vtep(remote, Some(local)))
        .await
        .unwrap();
    let name = vtep_port_name(remote);
    assert_eq!(name, "vxif192168211");
    assert_eq!(vsctl(&ovs, &["get", "Interface", &name, "type"]), "vxlan");
    assert_eq!(
        vsctl(&ovs, &["get", "Interface", &name, "options"]),
        r#"{dst_port="4789", key=flow, local_ip="192.168.2.10", remote_ip="192.168.2.11", tos=inherit}"#
    );
    assert!(client.wait_ofport(&name, WAIT).await.unwrap() > 0);

    client
        .ensure_port(BR, &PortSpec::internal("vvport2", 5))
        .await
        .unwrap();
    client
        .set_ingress_policing(
            "vvport2",
            Policing {
                rate_kbps: 2000,
                burst_kb: 200,
            },
        )
        .await
        .unwrap();
    assert_eq!(
        vsctl(
            &ovs,
            &["get", "Interface", "vvport2", "ingress_policing_rate"]
        ),
        "2000"
    );
    assert_eq!(
        vsctl(
            &ovs,
            &["get", "Interface", "vvport2", "ingress_policing_burst"]
        ),
        "200"
    );
    let err = client
        .set_ingress_policing("nope", Policing::default())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            OvsdbError::NotFound {
                table: "Interface",
                ..
            }
        ),
        "{err}"
    );
}

#[tokio::test]
async fn delete_port_and_bridge_are_idempotent() {
    testbed::require!(Root, Ovs);
    let (ovs, client, _) = ovs_with_bridge().await;
    client
        .ensure_port(BR, &PortSpec::internal("vvport3", 3))
        .await
        .unwrap();
    assert!(vsctl(&ovs, &["list-ports", BR]).contains("vvport3"));
    assert!(client.delete_port("vvport3").await.unwrap());
    assert!(!vsctl(&ovs, &["list-ports", BR]).contains("vvport3"));
    assert_eq!(
        vsctl(
            &ovs,
            &["--columns=name", "find", "Interface", "name=vvport3"]
        ),
        ""
    );
    assert!(!client.delete_port("vvport3").await.unwrap());

    assert!(client.delete_bridge(BR).await.unwrap());
    assert_eq!(vsctl(&ovs, &["list-br"]), "");
    assert!(!client.delete_bridge(BR).await.unwrap());
}

#[tokio::test]
async fn port_moves_between_bridges() {
    testbed::require!(Root, Ovs);
    let (ovs, client, _) = ovs_with_bridge().await;
    client
        .ensure_bridge(&BridgeSpec::new("contivVxlanBridge").datapath_type("dummy"))
        .await
        .unwrap();
    client
        .ensure_port(BR, &PortSpec::internal("vvport4", 4))
        .await
        .unwrap();
    client
        .ensure_port("contivVxlanBridge", &PortSpec::internal("vvport4", 4))
        .await
        .unwrap();
    assert_eq!(vsctl(&ovs, &["port-to-br", "vvport4"]), "contivVxlanBridge");
    assert!(!vsctl(&ovs, &["list-ports", BR]).contains("vvport4"));
}

#[tokio::test]
async fn bridge_external_ids_keep_other_keys() {
    testbed::require!(Root, Ovs);
    let (ovs, client, _) = ovs_with_bridge().await;
    vsctl(&ovs, &["br-set-external-id", BR, "owner", "someone"]);
    client
        .set_bridge_external_ids(BR, &[("ofctrl-generation", "1")])
        .await
        .unwrap();
    client
        .set_bridge_external_ids(BR, &[("ofctrl-generation", "2")])
        .await
        .unwrap();
    assert_eq!(
        vsctl(&ovs, &["br-get-external-id", BR, "ofctrl-generation"]),
        "2"
    );
    assert_eq!(vsctl(&ovs, &["br-get-external-id", BR, "owner"]), "someone");
    assert_eq!(
        client
            .bridge_external_id(BR, "ofctrl-generation")
            .as_deref(),
        Some("2")
    );
}

#[tokio::test]
async fn transaction_errors_are_typed_and_nothing_is_half_done() {
    testbed::require!(Root, Ovs);
    let (ovs, client, _) = ovs_with_bridge().await;
    let mut spec = PortSpec::internal("vvport5", 1);
    spec.vlan = VlanMode::Access(5000); // the schema allows 0..4095
    let err = client.ensure_port(BR, &spec).await.unwrap_err();
    match &err {
        OvsdbError::Transaction {
            op_index,
            op,
            error,
            ..
        } => {
            assert_eq!(*op_index, 1, "{err}");
            assert_eq!(op, "insert Port");
            assert_eq!(error, "constraint violation");
        }
        other => panic!("expected a transaction error, got {other}"),
    }
    // The Interface insert (operation 0) was rolled back with the rest.
    assert_eq!(
        vsctl(
            &ovs,
            &["--columns=name", "find", "Interface", "name=vvport5"]
        ),
        ""
    );
    let missing = client
        .ensure_port("noSuchBridge", &PortSpec::internal("x", 1))
        .await
        .unwrap_err();
    assert!(
        matches!(
            missing,
            OvsdbError::NotFound {
                table: "Bridge",
                ..
            }
        ),
        "{missing}"
    );
}

#[tokio::test]
async fn a_device_that_does_not_exist_fails_the_ofport_wait_with_the_reason() {
    testbed::require!(Root, Ovs);
    let (_ovs, client, _) = ovs_with_bridge().await;
    client
        .ensure_port(BR, &PortSpec::access("vvport404", 9))
        .await
        .unwrap();
    let err = client.wait_ofport("vvport404", WAIT).await.unwrap_err();
    assert!(
        matches!(&err, OvsdbError::InterfaceFailed { name, .. } if name == "vvport404"),
        "{err}"
    );
    let timeout = client
        .wait_ofport("never-added", Duration::from_millis(200))
        .await
        .unwrap_err();
    assert!(matches!(timeout, OvsdbError::Timeout { .. }), "{timeout}");
}

#[tokio::test]
async fn monitor_sees_changes_made_by_other_clients() {
    testbed::require!(Root, Ovs);
    let (ovs, client, _) = ovs_with_bridge().await;
    vsctl(
        &ovs,
        &[
            "add-port",
            BR,
            "ext0",
            "--",
            "set",
            "Interface",
            "ext0",
            "type=internal",
        ],
    );
    let ofport = client.wait_ofport("ext0", WAIT).await.unwrap();
    assert_eq!(ovs.ofport("ext0").unwrap(), ofport);
    assert!(client.read(|c| c.ports_of_bridge(BR).iter().any(|p| p.name == "ext0")));
    client.echo().await.unwrap();
}

#[tokio::test]
async fn client_reconnects_after_ovsdb_restart_and_keeps_uuids() {
    testbed::require!(Root, Ovs);
    let (mut ovs, client, bridge) = ovs_with_bridge().await;
    let port = client
        .ensure_port(BR, &PortSpec::internal("vvport6", 6))
        .await
        .unwrap();
    let epoch = client.read(|c| c.epoch());
    ovs.kill();
    client
        .wait_for("disconnect noticed", WAIT, |c| {
            (!c.is_connected()).then_some(())
        })
        .await
        .unwrap();
    ovs.restart().unwrap();
    client
        .wait_for("reconnected", WAIT, |c| {
            (c.is_connected() && c.epoch() > epoch).then_some(())
        })
        .await
        .unwrap();
    assert_eq!(client.read(|c| c.bridge(BR).unwrap().uuid), bridge);
    let again = client
        .ensure_port(BR, &PortSpec::internal("vvport6", 6))
        .await
        .unwrap();
    assert_eq!(again, port);
    client.echo().await.unwrap();
}
