//! `testbed`: bring a demo cluster up on this machine, inspect it, tear it down.
//!
//! `up` starts real parts (etcd, netmaster, OVS + netplugin, pods through the CNI plugin)
//! and leaves them running; `down` stops exactly what `up` recorded in
//! its state file; `clean` removes leftovers of interrupted test runs.

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use testbed::demo::{Binaries, Demo, DemoState};

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
    /// Start etcd, netmaster, one emulated host (OVS + netplugin), a VXLAN network, an
    /// endpoint group and two pods created through the CNI plugin.
    Up {
        /// Use release builds of the daemons.
        #[arg(long)]
        release: bool,
    },
    /// Stop and remove everything `up` started.
    Down,
    /// Show what `up` started and whether it is still alive.
    Status,
    /// Remove leftovers of interrupted test runs (processes, namespaces, directories).
    Clean,
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
        Command::Up { release } => up(&cli.state, release),
        Command::Down => down(&cli.state),
        Command::Status => status(&cli.state),
        Command::Bench(Bench::FlowPush { flows, change }) => {
            let report = testbed::bench::flow_push::run(flows, change)?;
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
        Command::Bench(Bench::PodSetup { pods }) => {
            let report = testbed::bench::pod_setup::run_bench(pods)?;
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

fn up(state: &PathBuf, release: bool) -> Result<()> {
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
    let bins = Binaries::build(release).context("building netmaster, netplugin and contivk8s")?;
    let demo = Demo::up(bins).context("bringing the demo up")?;
    print!("{}", demo.describe());
    let recorded = demo.detach();
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
