//! `testbed`: bring a demo cluster up on this machine, inspect it, tear it down.
//!
//! `up` starts real parts (etcd, netmaster, OVS + netplugin, pods through the CNI plugin)
//! and leaves them running; `down` stops exactly what `up` recorded in
//! its state file; `clean` removes leftovers of interrupted test runs.

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use testbed::demo::{Binaries, DEMO_MAX_HOSTS, Demo, DemoOptions, DemoState};

#[derive(Parser)]
#[command(about = "Real sandboxes: a demo cluster, cleanup of interrupted test runs")]
struct Cli {
    /// Where `up` records what it started, for `down` and `status`.
    #[arg(
        long,
        env = "TESTBED_STATE",
        default_value = "/run/contiv-testbed/state.json"
    )]
    state: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start etcd, netmaster, emulated hosts (OVS + netplugin each; one unless `--hosts`), a
    /// VXLAN network, an endpoint group, a service and pods created through the CNI plugin.
    Up {
        /// Use release builds of the daemons.
        #[arg(long)]
        release: bool,
        /// Number of etcd members (every daemon is given all of them).
        #[arg(long, default_value_t = 1)]
        etcd_members: usize,
        /// Serve etcd over TLS only, with client certificates generated into the run directory.
        #[arg(long)]
        etcd_tls: bool,
        /// Emulated hosts sharing the netmaster, wired by an underlay (VXLAN between them);
        /// every host gets a pod, and `up` checks the first host's pod reaches each of them.
        #[arg(long, default_value_t = 1)]
        hosts: usize,
        /// Forwarding mode of netmaster and netplugins: `bridge`, or `routing` (the demo's VXLAN
        /// network then runs the `vrouter` datapath: pods are routed, ARP answered with the
        /// router MAC).
        #[arg(long, default_value = "bridge", value_parser = ["bridge", "routing"])]
        fwdmode: String,
        /// `kubernetes` (pods through the CNI plugin, the default) or `docker` (one host with a
        /// dockerd using netplugin as its network and IPAM driver, netmaster in Docker cluster
        /// mode).
        #[arg(long, default_value = "kubernetes")]
        mode: String,
    },
    /// Stop and remove everything `up` started.
    Down,
    /// Show what `up` started and whether it is still alive.
    Status,
    /// Remove leftovers of interrupted test runs (processes, namespaces, directories).
    Clean,
    /// Two hosts with traffic while netplugin, OVS, the netmaster leader and etcd fail in turn:
    /// per fault, packets lost, TCP stream broken or not, time until a new pod, state the same
    /// before and after. Prints a table, then one JSON line.
    Chaos {
        /// Use release builds of the daemons.
        #[arg(long)]
        release: bool,
        /// etcd members (all are stopped for the outage).
        #[arg(long, default_value_t = 3)]
        etcd_members: usize,
        /// Seconds etcd stays down.
        #[arg(long, default_value_t = 10)]
        etcd_outage: u64,
        /// netmaster's --lock-ttl (seconds until a standby replaces a killed leader).
        #[arg(long, default_value_t = 5)]
        lock_ttl: u64,
        /// Run only the faults whose name contains this text (e.g. `etcd`).
        #[arg(long, default_value = "")]
        only: String,
        /// Copy the first host's netplugin log and the netmasters' logs into this directory.
        #[arg(long)]
        logs: Option<PathBuf>,
    },
    /// Benchmarks against the reference tools; each prints one JSON line.
    #[command(subcommand)]
    Bench(Bench),
}

#[derive(Subcommand)]
enum Bench {
    /// Flow push rate: ofctrl (one bundle) against `ovs-ofctl --bundle add-flows`.
    FlowPush {
        #[arg(long, default_value_t = 100_000)]
        flows: usize,
        /// Size of the change applied to the full table afterwards.
        #[arg(long, default_value_t = 1_000)]
        change: usize,
    },
    /// CNI ADD latency through libcni: contivk8s + netplugin against Debian's bridge +
    /// host-local plugins.
    PodSetup {
        #[arg(long, default_value_t = 50)]
        pods: usize,
        /// ADDs in flight at once (1: one after another).
        #[arg(long, default_value_t = 1)]
        concurrency: usize,
        /// Services on the pods' network whose selector matches them (as in a Kubernetes
        /// cluster, where pods are labelled and services select them): each ADD then also
        /// makes the pod a provider of every one.
        #[arg(long, default_value_t = 0)]
        services: usize,
    },
    /// Rules created through REST into one policy (1 and 16 in flight) until their flows are
    /// in OVS; netplugin and netmaster RSS.
    Policy {
        #[arg(long, default_value_t = 10_000)]
        rules: usize,
    },
    /// netplugin and netmaster resident memory on one host with pods (through libcni), an
    /// attached policy's rules and services selecting the pods.
    Memory {
        #[arg(long, default_value_t = 100)]
        pods: usize,
        #[arg(long, default_value_t = 1_000)]
        rules: usize,
        #[arg(long, default_value_t = 20)]
        services: usize,
    },
    /// Networks and groups created through REST in one tenant, 16 in flight.
    Objects {
        #[arg(long, default_value_t = 4_000)]
        networks: usize,
        #[arg(long, default_value_t = 10_000)]
        groups: usize,
    },
    /// Endpoints created through netmaster's `/plugin/createEndpoint` into etcd, 1 and 32
    /// requests in flight (issue 17 point 3).
    Endpoints {
        #[arg(long, default_value_t = 10_000)]
        endpoints: usize,
    },
    /// Services balanced in the switch: connection set-up through a VIP against straight to
    /// a provider (same run), connections/s, flows and memory for many services and clients.
    Services {
        #[arg(long, default_value_t = 500)]
        connections: usize,
        #[arg(long, default_value_t = 1_000)]
        services: usize,
        #[arg(long, default_value_t = 10)]
        providers: usize,
        #[arg(long, default_value_t = 10_000)]
        clients: usize,
    },
    /// Kubernetes NetworkPolicy realization in the switch: 1 policy × 1,000 peers × 10 ports,
    /// 10,000 rules in one bundle, pods joining a selected set (per-pod p99).
    Netpol {
        #[arg(long, default_value_t = 100)]
        pods: usize,
    },
    /// Endpoint fan-out of the leader's ofnet master to N emulated agents (JSON-RPC only, no
    /// OVS): p50/p99/max until every agent has an endpoint, netmaster RSS and CPU, and the
    /// re-registration time after a leader change.
    Convergence {
        #[arg(long, default_value_t = 100)]
        agents: usize,
        #[arg(long, default_value_t = 200)]
        endpoints: usize,
        /// Endpoints announced per second.
        #[arg(long, default_value_t = 20.0)]
        rate: f64,
    },
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Up {
            release,
            etcd_members,
            etcd_tls,
            hosts,
            fwdmode,
            mode,
        } => up(
            &cli.state,
            release,
            DemoOptions {
                etcd: testbed::EtcdOptions {
                    members: etcd_members,
                    tls: etcd_tls,
                },
                hosts,
                fwd_mode: (fwdmode != "bridge").then_some(fwdmode),
            },
            &mode,
        ),
        Command::Down => down(&cli.state),
        Command::Chaos {
            release,
            etcd_members,
            etcd_outage,
            lock_ttl,
            only,
            logs,
        } => chaos(release, etcd_members, etcd_outage, lock_ttl, only, logs),
        Command::Status => status(&cli.state),
        Command::Bench(Bench::FlowPush { flows, change }) => {
            let report = testbed::bench::flow_push::run(flows, change)?;
            println!("{}", serde_json::to_string(&report)?);
            Ok(())
        }
        Command::Bench(Bench::Policy { rules }) => {
            let report = testbed::bench::scale::run_policy(rules)?;
            println!("{}", serde_json::to_string(&report)?);
            Ok(())
        }
        Command::Bench(Bench::Memory {
            pods,
            rules,
            services,
        }) => {
            let report = testbed::bench::memory::run(pods, rules, services)?;
            println!("{}", serde_json::to_string(&report)?);
            Ok(())
        }
        Command::Bench(Bench::Objects { networks, groups }) => {
            let report = testbed::bench::scale::run_objects(networks, groups)?;
            println!("{}", serde_json::to_string(&report)?);
            Ok(())
        }
        Command::Bench(Bench::Endpoints { endpoints }) => {
            let report = testbed::bench::scale::run_endpoints(endpoints)?;
            println!("{}", serde_json::to_string(&report)?);
            Ok(())
        }
        Command::Bench(Bench::Convergence {
            agents,
            endpoints,
            rate,
        }) => {
            let report = testbed::bench::convergence::run(agents, endpoints, rate)?;
            println!("{}", serde_json::to_string(&report)?);
            Ok(())
        }
        Command::Bench(Bench::Netpol { pods }) => {
            let report = testbed::bench::netpol::run_bench(pods)?;
            println!("{}", serde_json::to_string(&report)?);
            Ok(())
        }
        Command::Bench(Bench::PodSetup {
            pods,
            concurrency,
            services,
        }) => {
            let report = testbed::bench::pod_setup::run_bench(pods, concurrency, services)?;
            println!("{}", serde_json::to_string(&report)?);
            Ok(())
        }
        Command::Bench(Bench::Services {
            connections,
            services,
            providers,
            clients,
        }) => {
            let report =
                testbed::bench::services::run_bench(connections, services, providers, clients)?;
            println!("{}", serde_json::to_string(&report)?);
            Ok(())
        }
        Command::Clean => {
            let swept = testbed::cleanup::sweep();
            println!(
                "removed {} processes, {} namespaces, {} directories",
                swept.processes.len(),
                swept.namespaces.len(),
                swept.directories.len()
            );
            Ok(())
        }
    }
}

fn up(state: &PathBuf, release: bool, options: DemoOptions, mode: &str) -> Result<()> {
    if mode != "kubernetes" && mode != "docker" {
        bail!("--mode {mode:?}: use kubernetes or docker");
    }
    if mode == "docker" && options.hosts != 1 {
        bail!("--hosts {}: the Docker demo runs one host", options.hosts);
    }
    let members = options.etcd.members;
    if members == 0 || members.is_multiple_of(2) {
        bail!(
            "--etcd-members {members}: use an odd number of members (1, 3, 5) so a majority survives a loss"
        );
    }
    if options.hosts == 0 || options.hosts > DEMO_MAX_HOSTS {
        bail!(
            "--hosts {}: give 1 to {DEMO_MAX_HOSTS} hosts (the demo's underlay is one /24)",
            options.hosts
        );
    }
    if state.exists() {
        bail!(
            "a demo is already up (state in {}); run `testbed down` first",
            state.display()
        );
    }
    if let Err(why) = testbed::require::check(&[
        testbed::Need::Root,
        testbed::Need::Ovs,
        testbed::Need::Etcd,
        testbed::Need::Ip,
        testbed::Need::Ping,
    ]) {
        bail!("cannot bring the demo up: {why}");
    }
    if mode == "docker"
        && let Err(why) = testbed::require::check(&[testbed::Need::Docker])
    {
        bail!("cannot bring the Docker demo up: {why}");
    }
    let bins = Binaries::build(release).context("building netmaster, netplugin and contivk8s")?;
    let recorded = if mode == "docker" {
        let (text, recorded) =
            testbed::demo::up_docker(bins, options.etcd).context("bringing the Docker demo up")?;
        print!("{text}");
        recorded
    } else {
        let demo = Demo::up(bins, options).context("bringing the demo up")?;
        print!("{}", demo.describe());
        demo.detach()
    };
    if let Some(dir) = state.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(state, serde_json::to_vec_pretty(&recorded)?)
        .with_context(|| format!("writing {}", state.display()))?;
    println!(
        "state recorded in {}; `testbed down` removes everything",
        state.display()
    );
    Ok(())
}

fn chaos(
    release: bool,
    etcd_members: usize,
    etcd_outage: u64,
    lock_ttl: u64,
    only: String,
    logs: Option<PathBuf>,
) -> Result<()> {
    if etcd_members == 0 || etcd_members.is_multiple_of(2) {
        bail!("--etcd-members {etcd_members}: use an odd number of members (1, 3, 5)");
    }
    if let Err(why) = testbed::require::check(&[
        testbed::Need::Root,
        testbed::Need::Ovs,
        testbed::Need::Etcd,
        testbed::Need::Ip,
        testbed::Need::Ping,
    ]) {
        bail!("cannot run the chaos scenario: {why}");
    }
    let bins = Binaries::build(release).context("building netmaster, netplugin and contivk8s")?;
    let options = testbed::chaos::ChaosOptions {
        etcd_members,
        etcd_outage: std::time::Duration::from_secs(etcd_outage),
        lock_ttl,
        only,
        logs,
        ..testbed::chaos::ChaosOptions::default()
    };
    let report = testbed::chaos::run(bins, &options).context("chaos run")?;
    print!("{}", testbed::chaos::table(&report));
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}

fn read_state(state: &PathBuf) -> Result<Option<DemoState>> {
    match std::fs::read(state) {
        Ok(bytes) => Ok(Some(serde_json::from_slice(&bytes).with_context(|| {
            format!("{} is not a testbed state file", state.display())
        })?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", state.display())),
    }
}

fn down(state: &PathBuf) -> Result<()> {
    let Some(recorded) = read_state(state)? else {
        println!("nothing is up ({} does not exist)", state.display());
        return Ok(());
    };
    recorded.tear_down();
    std::fs::remove_file(state).with_context(|| format!("removing {}", state.display()))?;
    println!("demo removed");
    Ok(())
}

fn status(state: &PathBuf) -> Result<()> {
    match read_state(state)? {
        Some(recorded) => print!("{}", recorded.status()),
        None => println!("nothing is up"),
    }
    Ok(())
}
