//! The command lines of Contiv's documentation, run verbatim by a shell against a real netmaster
//! and etcd, each checked through netmaster's REST API.
//!
//! Sources: contiv/netplugin (README.md, docs/, install/, vagrant/, mgmtfn/k8splugin/) and
//! contiv/contiv.github.io (websrc/source/documents: tutorials, networking, samples). Each
//! document's lines run in order on a fresh netmaster; where a page assumes state made
//! elsewhere (a network made on another page, a policy it never shows being created) or shows
//! alternatives of one command, a `setup` line (our own, not counted) or a separate sequence
//! provides it. Lines with placeholders (`<CIDR>`, `[$NAME]`) are left out, and so is
//! `netctl rule list`, a command of an early netctl that Contiv's own netctl no longer has.

use std::process::Command;

use serde_json::Value;

use crate::common::*;

/// How a documented line is checked.
enum Check {
    /// `GET /api/v1/<path>` answers 200 and each `field=value` holds (arrays joined by `,`).
    Rest(&'static str, &'static [&'static str]),
    /// The object is gone (`GET` answers 404).
    Gone(&'static str),
    /// A display command: exit 0 and stdout contains this.
    Shows(&'static str),
    /// A line Contiv's own netmaster refuses too: exit 3 and the message contains this.
    Refused(&'static str),
}

use Check::*;

/// One documented line (`doc` true) or a setup line of ours.
struct Line {
    cmd: &'static str,
    check: Check,
    doc: bool,
}

const fn d(cmd: &'static str, check: Check) -> Line {
    Line {
        cmd,
        check,
        doc: true,
    }
}

const fn setup(cmd: &'static str) -> Line {
    Line {
        cmd,
        check: Shows(""),
        doc: false,
    }
}

fn sequences() -> Vec<(&'static str, Vec<Line>)> {
    vec![
        (
            "netplugin README.md",
            vec![d(
                "netctl net create contiv-net --subnet=20.1.1.0/24",
                Rest("networks/default:contiv-net/", &["subnet=20.1.1.0/24"]),
            )],
        ),
        (
            "netplugin README.md, docs/ipv6.md, documents/networking/ipv6.md",
            vec![d(
                "netctl net create contiv-net --subnet=20.1.1.0/24 --subnetv6=2001::/100",
                Rest(
                    "networks/default:contiv-net/",
                    &["subnet=20.1.1.0/24", "ipv6Subnet=2001::/100"],
                ),
            )],
        ),
        (
            "netplugin install/k8s/README.md",
            vec![
                d(
                    "netctl global set --fwd-mode routing",
                    Rest("globals/global/", &["fwdMode=routing"]),
                ),
                d(
                    "netctl global set --fabric-mode aci --vlan-range 1150-1170",
                    Rest(
                        "globals/global/",
                        &["networkInfraType=aci", "vlans=1150-1170"],
                    ),
                ),
                d(
                    "netctl net create -t default --subnet=20.1.1.0/24 default-net",
                    Rest("networks/default:default-net/", &["subnet=20.1.1.0/24"]),
                ),
                d(
                    "netctl group create -t default default-net default-epg",
                    Rest(
                        "endpointGroups/default:default-epg/",
                        &["networkName=default-net"],
                    ),
                ),
            ],
        ),
        (
            "netplugin install/v2plugin/README.md",
            vec![
                d(
                    "netctl network create contiv-net-1 -s 200.1.1.1/24 -g 200.1.1.200",
                    Rest(
                        "networks/default:contiv-net-1/",
                        &["subnet=200.1.1.1/24", "gateway=200.1.1.200"],
                    ),
                ),
                d(
                    "netctl policy create p1",
                    Rest("policys/default:p1/", &["policyName=p1"]),
                ),
                d(
                    "netctl group create -p p1 -tag policylabel contiv-net-1 group1",
                    Rest(
                        "endpointGroups/default:group1/",
                        &[
                            "policies=p1",
                            "cfgdTag=policylabel",
                            "networkName=contiv-net-1",
                        ],
                    ),
                ),
                d(
                    "netctl network create contiv-net -s 100.1.1.1/24 -g 100.1.1.100",
                    Rest(
                        "networks/default:contiv-net/",
                        &["subnet=100.1.1.1/24", "gateway=100.1.1.100"],
                    ),
                ),
            ],
        ),
        (
            "netplugin vagrant/mesos-cni/README.md",
            vec![d(
                "netctl net create default-net -subnet 10.1.1.0/24",
                Rest("networks/default:default-net/", &["subnet=10.1.1.0/24"]),
            )],
        ),
        (
            "netplugin vagrant/mesos-docker/README.md, mgmtfn/k8splugin/README.md",
            vec![
                d(
                    "netctl net create contiv -subnet 10.1.1.0/24",
                    Rest("networks/default:contiv/", &["subnet=10.1.1.0/24"]),
                ),
                setup("netctl group create contiv web"),
                d("netctl net list", Shows("contiv")),
                d("netctl group list", Shows("web")),
            ],
        ),
        (
            "issue 11 (Contiv's usage text)",
            vec![
                d(
                    "netctl global set -fwd-mode=routing",
                    Rest("globals/global/", &["fwdMode=routing"]),
                ),
                d(
                    "netctl net create -subnet 10.1.1.0/24 -gateway 10.1.1.254 net1",
                    Rest(
                        "networks/default:net1/",
                        &["subnet=10.1.1.0/24", "gateway=10.1.1.254"],
                    ),
                ),
            ],
        ),
        (
            "documents/networking/aci_ug.md",
            vec![
                d(
                    "netctl global set --fabric-mode aci --vlan-range 400-500",
                    Rest(
                        "globals/global/",
                        &["networkInfraType=aci", "vlans=400-500"],
                    ),
                ),
                d(
                    "netctl tenant create MixedTenant",
                    Rest("tenants/MixedTenant/", &["tenantName=MixedTenant"]),
                ),
                d(
                    r#"netctl external-contracts  create -t MixedTenant -c -a "uni/tn-MixedTenant/brc-allowicmp" ToConsume"#,
                    Rest(
                        "extContractsGroups/MixedTenant:ToConsume/",
                        &[
                            "contractsType=consumed",
                            "contracts=uni/tn-MixedTenant/brc-allowicmp",
                        ],
                    ),
                ),
                d(
                    r#"netctl external-contracts  create -t MixedTenant -p -a "uni/tn-MixedTenant/brc-allowicmp" -a "uni/tn-MixedTenant/brc-allowtcp8080" ToProvide"#,
                    Rest(
                        "extContractsGroups/MixedTenant:ToProvide/",
                        &[
                            "contractsType=provided",
                            "contracts=uni/tn-MixedTenant/brc-allowicmp,uni/tn-MixedTenant/brc-allowtcp8080",
                        ],
                    ),
                ),
                // The page shows the group before the network it goes in.
                d(
                    "netctl net create -t MixedTenant -e vlan -s 66.1.1.0/24 -g 66.1.1.254 net1",
                    Rest(
                        "networks/MixedTenant:net1/",
                        &["encap=vlan", "subnet=66.1.1.0/24", "gateway=66.1.1.254"],
                    ),
                ),
                d(
                    "netctl group create -t MixedTenant -e ToConsume net1 QueryApp",
                    Rest(
                        "endpointGroups/MixedTenant:QueryApp/",
                        &["extContractsGrps=ToConsume"],
                    ),
                ),
                d(
                    "netctl policy create -t MixedTenant app2db",
                    Rest("policys/MixedTenant:app2db/", &["policyName=app2db"]),
                ),
                d(
                    "netctl group create -t MixedTenant -p app2db net1 db",
                    Rest("endpointGroups/MixedTenant:db/", &["policies=app2db"]),
                ),
                d(
                    "netctl group create -t MixedTenant -e ToConsume -e ToProvide -p app2db net1 app",
                    Rest(
                        "endpointGroups/MixedTenant:app/",
                        &["policies=app2db", "extContractsGrps=ToConsume,ToProvide"],
                    ),
                ),
                d(
                    "netctl policy rule-add -t MixedTenant -d in --protocol tcp --port 6379 --from-group app --action allow app2db 1",
                    Rest(
                        "rules/MixedTenant:app2db:1/",
                        &[
                            "direction=in",
                            "protocol=tcp",
                            "port=6379",
                            "fromEndpointGroup=app",
                            "action=allow",
                        ],
                    ),
                ),
                d(
                    "netctl app-profile create -t MixedTenant -g app,db container-profile",
                    Rest(
                        "appProfiles/MixedTenant:container-profile/",
                        &["endpointGroups=app,db"],
                    ),
                ),
            ],
        ),
        (
            "documents/networking/aci_ug.md (address range)",
            vec![
                setup("netctl tenant create MixedTenant"),
                // Contiv's model only takes a full address after the dash.
                d(
                    "netctl net create -t MixedTenant -e vlan -s 66.1.1.20-44/24 -g 66.1.1.254 net1",
                    Refused("must be a full address, e.g. 66.1.1.20-66.1.1.44/24"),
                ),
            ],
        ),
        (
            "documents/networking/bgp.md",
            vec![
                d(
                    r#"netctl bgp create Contiv1 -router-ip="50.1.1.1/24" --as="65002" --neighbor-as="500" --neighbor="50.1.1.2""#,
                    Rest(
                        "Bgps/Contiv1/",
                        &[
                            "routerip=50.1.1.1/24",
                            "as=65002",
                            "neighbor-as=500",
                            "neighbor=50.1.1.2",
                        ],
                    ),
                ),
                d(
                    r#"netctl bgp create Contiv2 -router-ip="60.1.1.3/24" --as="65002" --neighbor-as="500" --neighbor="60.1.1.4""#,
                    Rest(
                        "Bgps/Contiv2/",
                        &["routerip=60.1.1.3/24", "neighbor=60.1.1.4"],
                    ),
                ),
                d(
                    r#"netctl network create public --encap="vlan" --subnet=192.168.1.0/24 --gateway=192.168.1.254"#,
                    Rest(
                        "networks/default:public/",
                        &[
                            "encap=vlan",
                            "subnet=192.168.1.0/24",
                            "gateway=192.168.1.254",
                        ],
                    ),
                ),
            ],
        ),
        (
            "documents/networking/ipam.md",
            vec![d(
                "netctl net create contiv-net -subnet 10.1.1.50-10.1.1.100/24",
                Rest(
                    "networks/default:contiv-net/",
                    &["subnet=10.1.1.50-10.1.1.100/24"],
                ),
            )],
        ),
        (
            "documents/networking/l2-vlan.md",
            vec![
                d(
                    "netctl network create demo1-net0 -s 10.1.1.0/24 -g 10.1.1.1 --pkt-tag 10 --encap vlan",
                    Rest("networks/default:demo1-net0/", &["pktTag=10", "encap=vlan"]),
                ),
                d(
                    "netctl network create demo1-net1 -s 11.1.1.0/24 -g 11.1.1.1 --pkt-tag 11 --encap vlan",
                    Rest("networks/default:demo1-net1/", &["pktTag=11", "encap=vlan"]),
                ),
                d(
                    "netctl network create demo1-net2 -s 12.1.1.0/24 -g 12.1.1.1 --pkt-tag 12 --encap vlan",
                    Rest(
                        "networks/default:demo1-net2/",
                        &["pktTag=12", "subnet=12.1.1.0/24"],
                    ),
                ),
            ],
        ),
        (
            "documents/networking/policies.md",
            vec![
                setup("netctl net create --subnet=10.1.2.0/24 contiv-net"),
                d(
                    "netctl policy create web-policy",
                    Rest("policys/default:web-policy/", &["policyName=web-policy"]),
                ),
                d(
                    "netctl policy rule-add web-policy 1 -direction=in -protocol=tcp -action=deny",
                    Rest(
                        "rules/default:web-policy:1/",
                        &["direction=in", "protocol=tcp", "action=deny", "port=null"],
                    ),
                ),
                d(
                    "netctl policy rule-add web-policy 2 -direction=in -protocol=tcp -port=80 -action=allow -priority=10",
                    Rest(
                        "rules/default:web-policy:2/",
                        &["port=80", "action=allow", "priority=10"],
                    ),
                ),
                d(
                    "netctl policy rule-add web-policy 3 -direction=in -protocol=tcp -port=443 -action=allow -priority=10",
                    Rest("rules/default:web-policy:3/", &["port=443", "priority=10"]),
                ),
                d(
                    "netctl group create contiv-net web-group -policy=web-policy",
                    Rest(
                        "endpointGroups/default:web-group/",
                        &["policies=web-policy"],
                    ),
                ),
                d("netctl policy ls", Shows("web-policy")),
                d("netctl policy rule-ls web-policy", Shows("443")),
                d(
                    "netctl policy rule-add web-policy 4 -direction=in -protocol=tcp -port=8080 -action=allow -priority 10",
                    Rest("rules/default:web-policy:4/", &["port=8080", "priority=10"]),
                ),
                d(
                    "netctl policy rule-rm web-policy 4",
                    Gone("rules/default:web-policy:4/"),
                ),
                // The page deletes the policy before the group using it, which is refused.
                d(
                    "netctl group delete web-group",
                    Gone("endpointGroups/default:web-group/"),
                ),
                d(
                    "netctl policy delete web-policy",
                    Gone("policys/default:web-policy/"),
                ),
                setup("netctl policy create new-web-policy"),
                d(
                    "netctl group create contiv-net web-group -policy=new-web-policy",
                    Rest(
                        "endpointGroups/default:web-group/",
                        &["policies=new-web-policy"],
                    ),
                ),
                d(
                    "netctl policy create allow-web",
                    Rest("policys/default:allow-web/", &["policyName=allow-web"]),
                ),
                d(
                    "netctl policy rule-add allow-web 1 -direction=in -protocol=tcp -action=deny",
                    Rest("rules/default:allow-web:1/", &["action=deny"]),
                ),
                d(
                    "netctl policy rule-add allow-web 2 -direction=in -protocol=tcp -port=80 -action=allow -priority=10",
                    Rest("rules/default:allow-web:2/", &["port=80", "priority=10"]),
                ),
                d(
                    "netctl policy rule-add allow-web 3 -direction=in -protocol=tcp -port=443 -action=allow -priority=10",
                    Rest("rules/default:allow-web:3/", &["port=443"]),
                ),
                d("netctl policy rule-ls allow-web", Shows("443")),
                d(
                    "netctl policy create allow-diags",
                    Rest("policys/default:allow-diags/", &["policyName=allow-diags"]),
                ),
                d(
                    "netctl policy rule-add allow-diags 1 -direction=in -protocol=icmp -action=allow",
                    Rest(
                        "rules/default:allow-diags:1/",
                        &["protocol=icmp", "action=allow"],
                    ),
                ),
                d("netctl policy rule-ls allow-diags", Shows("icmp")),
                setup("netctl policy create web-policy"),
                d(
                    "netctl group create contiv-net stage-web-group -policy=web-policy -policy=allow-diags",
                    Rest(
                        "endpointGroups/default:stage-web-group/",
                        &["policies=web-policy,allow-diags"],
                    ),
                ),
                d("netctl group ls", Shows("stage-web-group")),
                d(
                    "netctl group create contiv-net stage-web-group -policy=web-policy",
                    Rest(
                        "endpointGroups/default:stage-web-group/",
                        &["policies=web-policy"],
                    ),
                ),
                d(
                    "netctl group create contiv-net dev-web-group -policy=allow-diags",
                    Rest(
                        "endpointGroups/default:dev-web-group/",
                        &["policies=allow-diags"],
                    ),
                ),
                d(
                    "netctl netprofile create -b 1Mbps -dscp 3 dev-net-profile",
                    Rest(
                        "netprofiles/default:dev-net-profile/",
                        &["bandwidth=1Mbps", "DSCP=3"],
                    ),
                ),
                d(
                    "netctl group create contiv-net dev-web-group -policy=allow-diags -networkprofile=dev-net-profile",
                    Rest(
                        "endpointGroups/default:dev-web-group/",
                        &["policies=allow-diags", "netProfile=dev-net-profile"],
                    ),
                ),
            ],
        ),
        (
            "documents/networking/services.md",
            vec![
                d(
                    "netctl net create contiv-srv-net -s 100.1.1.0/24",
                    Rest("networks/default:contiv-srv-net/", &["subnet=100.1.1.0/24"]),
                ),
                d(
                    "netctl service create app-svc --network contiv-srv-net --tenant default --selector=tier=web --selector=release=stable --selector=environment=prod --port 8080:80:TCP",
                    Rest(
                        "serviceLBs/default:app-svc/",
                        &[
                            "networkName=contiv-srv-net",
                            "selectors=tier=web,release=stable,environment=prod",
                            "ports=8080:80:TCP",
                        ],
                    ),
                ),
                d(
                    "netctl net create client-net -s 11.1.1.0/24 -g 11.1.1.254",
                    Rest("networks/default:client-net/", &["gateway=11.1.1.254"]),
                ),
            ],
        ),
        (
            "documents/samples/mcast.md",
            vec![d(
                "netctl net create contiv-net --encap=vlan --subnet=20.1.1.0/24 --gateway=20.1.1.254 --pkt-tag=1010",
                Rest(
                    "networks/default:contiv-net/",
                    &["encap=vlan", "pktTag=1010", "gateway=20.1.1.254"],
                ),
            )],
        ),
        (
            "documents/tutorials/container-101.md",
            vec![
                d(
                    "netctl global set --fwd-mode routing",
                    Rest("globals/global/", &["fwdMode=routing"]),
                ),
                d("netctl version", Shows("Version")),
                d(
                    "netctl net create --subnet=10.1.2.0/24 contiv-net",
                    Rest("networks/default:contiv-net/", &["subnet=10.1.2.0/24"]),
                ),
                d("netctl net ls", Shows("contiv-net")),
                d(
                    "netctl tenant create blue",
                    Rest("tenants/blue/", &["tenantName=blue"]),
                ),
                d("netctl tenant ls", Shows("blue")),
                d(
                    "netctl net create -t blue --subnet=10.1.2.0/24 contiv-net",
                    Rest("networks/blue:contiv-net/", &["subnet=10.1.2.0/24"]),
                ),
                d("netctl net ls -t blue", Shows("blue")),
                d(
                    "netctl net create -p 112 -e vlan -s 10.1.3.0/24 contiv-vlan",
                    Rest(
                        "networks/default:contiv-vlan/",
                        &["pktTag=112", "encap=vlan"],
                    ),
                ),
            ],
        ),
        (
            "documents/tutorials/contiv-compose.md",
            vec![
                d(
                    "netctl net create -s 10.11.1.0/24 dev",
                    Rest("networks/default:dev/", &["subnet=10.11.1.0/24"]),
                ),
                d(
                    "netctl net create -s 10.22.1.0/24 test",
                    Rest("networks/default:test/", &["subnet=10.22.1.0/24"]),
                ),
                d(
                    "netctl net create -s 10.33.1.0/24 production",
                    Rest("networks/default:production/", &["subnet=10.33.1.0/24"]),
                ),
                d(
                    "netctl tenant create blue",
                    Rest("tenants/blue/", &["tenantName=blue"]),
                ),
                d(
                    "netctl net create -t blue -s 10.11.2.0/24 dev",
                    Rest("networks/blue:dev/", &["subnet=10.11.2.0/24"]),
                ),
            ],
        ),
        (
            "documents/tutorials/contiv-policy.md, contiv-policy-kubernetes-16.md",
            vec![
                d(
                    "netctl tenant create TestTenant",
                    Rest("tenants/TestTenant/", &["tenantName=TestTenant"]),
                ),
                d(
                    r#"netctl network create --tenant TestTenant --subnet=10.1.1.0/24 --gateway=10.1.1.254 -e "vlan" TestNet"#,
                    Rest(
                        "networks/TestTenant:TestNet/",
                        &["encap=vlan", "gateway=10.1.1.254"],
                    ),
                ),
                d("netctl net ls -a", Shows("TestNet")),
                d(
                    "netctl group create -t TestTenant TestNet epgA",
                    Rest("endpointGroups/TestTenant:epgA/", &["networkName=TestNet"]),
                ),
                d(
                    "netctl group create -t TestTenant TestNet epgB",
                    Rest("endpointGroups/TestTenant:epgB/", &["networkName=TestNet"]),
                ),
                d("netctl group ls -a", Shows("epgB")),
                d(
                    "netctl policy create -t TestTenant policyAB",
                    Rest("policys/TestTenant:policyAB/", &["policyName=policyAB"]),
                ),
                d(
                    "netctl policy rule-add -t TestTenant -d in --protocol icmp --from-group epgA --action deny policyAB 1",
                    Rest(
                        "rules/TestTenant:policyAB:1/",
                        &["protocol=icmp", "fromEndpointGroup=epgA", "action=deny"],
                    ),
                ),
                d(
                    "netctl group create -t TestTenant -p policyAB TestNet epgB",
                    Rest("endpointGroups/TestTenant:epgB/", &["policies=policyAB"]),
                ),
                d("netctl policy ls -a", Shows("policyAB")),
                d(
                    "netctl policy rule-ls -t TestTenant policyAB",
                    Shows("epgA"),
                ),
                d(
                    "netctl policy rule-add -t TestTenant -d in --protocol tcp --port 0  --from-group epgA  --action deny policyAB 2",
                    // Contiv's model omits a zero port.
                    Rest(
                        "rules/TestTenant:policyAB:2/",
                        &["protocol=tcp", "port=null"],
                    ),
                ),
                d(
                    "netctl policy rule-add -t TestTenant -d in --protocol tcp --port 8001  --from-group epgA  --action allow --priority 10 policyAB 3",
                    Rest(
                        "rules/TestTenant:policyAB:3/",
                        &["port=8001", "priority=10", "action=allow"],
                    ),
                ),
                d(
                    "netctl tenant create BandwidthTenant",
                    Rest("tenants/BandwidthTenant/", &["tenantName=BandwidthTenant"]),
                ),
                d(
                    r#"netctl network create --tenant BandwidthTenant --subnet=50.1.1.0/24 --gateway=50.1.1.254 -p 1001 -e "vlan" BandwidthTestNet"#,
                    Rest(
                        "networks/BandwidthTenant:BandwidthTestNet/",
                        &["pktTag=1001", "encap=vlan"],
                    ),
                ),
                d(
                    "netctl group create -t BandwidthTenant BandwidthTestNet epgA",
                    Rest(
                        "endpointGroups/BandwidthTenant:epgA/",
                        &["networkName=BandwidthTestNet"],
                    ),
                ),
                d(
                    "netctl netprofile create -t BandwidthTenant -b 500Kbps -d 6 -s 80 testProfile",
                    Rest(
                        "netprofiles/BandwidthTenant:testProfile/",
                        &["bandwidth=500Kbps", "DSCP=6", "burst=80"],
                    ),
                ),
                d(
                    "netctl group create -t BandwidthTenant -n testProfile BandwidthTestNet epgB",
                    Rest(
                        "endpointGroups/BandwidthTenant:epgB/",
                        &["netProfile=testProfile"],
                    ),
                ),
                d("netctl netprofile ls -a", Shows("500Kbps")),
            ],
        ),
        (
            "documents/tutorials/networking-kubernetes-16.md, prometheus-tutorial.md",
            vec![
                d(
                    "netctl net create -t default --subnet=20.1.1.0/24 -g 20.1.1.1 default-net",
                    Rest("networks/default:default-net/", &["gateway=20.1.1.1"]),
                ),
                d(
                    "netctl net create --subnet=10.1.2.0/24 --gateway=10.1.2.1 contiv-net",
                    Rest("networks/default:contiv-net/", &["gateway=10.1.2.1"]),
                ),
                d("netctl net inspect contiv-net", Shows("10.1.2.0/24")),
                setup("netctl tenant create blue"),
                d(
                    "netctl net create -t blue --subnet=10.1.2.0/24  -g 10.1.2.1 contiv-net",
                    Rest("networks/blue:contiv-net/", &["gateway=10.1.2.1"]),
                ),
            ],
        ),
    ]
}

/// A JSON value as the documents write it: strings bare, arrays joined by `,`.
fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(plain).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

/// Run `line` through `sh -c` with netctl first on PATH and `NETMASTER` set; the failures.
fn run_line(url: &str, line: &Line) -> Option<String> {
    let netctl = std::path::Path::new(env!("CARGO_BIN_EXE_netctl"));
    let path = format!(
        "{}:{}",
        netctl.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("sh")
        .arg("-c")
        .arg(line.cmd)
        .env("PATH", path)
        .env("NETMASTER", url)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if let Refused(text) = &line.check {
        return (out.status.code() != Some(3) || !stderr.contains(text)).then(|| {
            format!(
                "not refused as Contiv does: {:?} {stderr}",
                out.status.code()
            )
        });
    }
    if !out.status.success() {
        return Some(format!(
            "exit {:?}: {}{stdout}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let addr = url.trim_start_matches("http://");
    match &line.check {
        Refused(_) => None,
        Shows(text) => (!stdout.contains(text)).then(|| format!("output lacks {text:?}: {stdout}")),
        Gone(path) => {
            let (status, body) =
                testbed::demo::http("GET", addr, &format!("/api/v1/{path}")).unwrap();
            (status != 404).then(|| format!("{path} still there ({status}): {body}"))
        }
        Rest(path, fields) => {
            let (status, body) =
                testbed::demo::http("GET", addr, &format!("/api/v1/{path}")).unwrap();
            if status != 200 {
                return Some(format!("GET {path}: {status} {body}"));
            }
            let obj: Value = serde_json::from_str(&body).unwrap();
            let wrong: Vec<String> = fields
                .iter()
                .filter_map(|f| {
                    let (key, want) = f.split_once('=').unwrap();
                    let got = plain(&obj[key]);
                    (got != want).then(|| format!("{key}: want {want:?}, got {got:?}"))
                })
                .collect();
            (!wrong.is_empty()).then(|| format!("{path}: {}", wrong.join("; ")))
        }
    }
}

#[tokio::test]
async fn contiv_documented_command_lines_run_verbatim() {
    testbed::require!(Etcd);
    let mut failures = Vec::new();
    let (mut documented, mut passed) = (0, 0);
    for (doc, lines) in sequences() {
        let etcd = testbed::Etcd::start().unwrap();
        let nm = InProcess::start(&etcd.client_url(), 5).await;
        let url = nm.url.clone();
        let results = tokio::task::spawn_blocking(move || {
            lines
                .iter()
                .map(|l| (l.doc, l.cmd, run_line(&url, l)))
                .collect::<Vec<_>>()
        })
        .await
        .unwrap();
        for (is_doc, cmd, failure) in results {
            documented += usize::from(is_doc);
            match failure {
                None => passed += usize::from(is_doc),
                Some(why) => failures.push(format!("[{doc}] {cmd}\n    {why}")),
            }
        }
        drop(nm);
    }
    println!("{passed} of {documented} documented command lines pass verbatim");
    assert!(
        failures.is_empty(),
        "{passed} of {documented} pass; failing:\n{}",
        failures.join("\n")
    );
}
