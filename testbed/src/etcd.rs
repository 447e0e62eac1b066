//! A private etcd server: Debian's `etcd` on free loopback ports with a temporary data
//! directory. It can be stopped and started again on the same ports and data (outage tests),
//! and it is stopped — only it, by pid — when dropped.

use crate::names::{SandboxDir, free_port};
use crate::process::Daemon;
use crate::{Error, Result};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long etcd gets to answer `/health` after start.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// Attempts with fresh ports when etcd loses a port race against another process.
const PORT_ATTEMPTS: usize = 3;

/// A running (or deliberately stopped) etcd server.
pub struct Etcd {
    daemon: Option<Daemon>,
    client_port: u16,
    peer_port: u16,
    // Declared last: dropped after the daemon is stopped.
    dir: SandboxDir,
}

impl Etcd {
    /// Start a single-member etcd cluster and wait until it reports healthy.
    pub fn start() -> Result<Etcd> {
        let dir = crate::names::temp_dir("etcd")?;
        let mut last = None;
        for _ in 0..PORT_ATTEMPTS {
            let (client_port, peer_port) = (port()?, port()?);
            match launch(dir.path(), client_port, peer_port) {
                Ok(daemon) => {
                    return Ok(Etcd {
                        daemon: Some(daemon),
                        client_port,
                        peer_port,
                        dir,
                    });
                }
                Err(e @ Error::Exited { .. }) => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or(Error::NotRunning("etcd")))
    }

    /// The client URL, e.g. `http://127.0.0.1:40123`.
    pub fn client_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    /// The client endpoint as `host:port`, the form `etcd-client` accepts.
    pub fn endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.client_port)
    }

    /// The data directory (kept across [`Etcd::stop`] and [`Etcd::start_again`]).
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Process id of the server, if running.
    pub fn pid(&self) -> Option<u32> {
        self.daemon.as_ref().and_then(Daemon::pid)
    }

    /// Stop the server gracefully; data and ports are kept for [`Etcd::start_again`].
    pub fn stop(&mut self) {
        if let Some(mut d) = self.daemon.take() {
            d.stop();
        }
    }

    /// Kill the server with SIGKILL, as a crash or power loss would.
    pub fn kill(&mut self) {
        if let Some(mut d) = self.daemon.take() {
            d.kill();
        }
    }

    /// Start the server again on the same ports with the same data.
    pub fn start_again(&mut self) -> Result<()> {
        if self.daemon.is_none() {
            self.daemon = Some(launch(self.dir.path(), self.client_port, self.peer_port)?);
        }
        Ok(())
    }

    /// True if the server process is alive.
    pub fn is_running(&mut self) -> bool {
        self.daemon.as_mut().is_some_and(Daemon::is_running)
    }

    /// Leave the server running after this value is gone; returns its pid and directory.
    /// Used by `testbed up`, whose `down` stops it by pid.
    pub fn detach(mut self) -> (Option<u32>, PathBuf) {
        let pid = self.daemon.take().and_then(Daemon::detach);
        let dir = std::mem::replace(&mut self.dir, SandboxDir::empty());
        (pid, dir.keep())
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.stop();
    }
}

fn port() -> Result<u16> {
    free_port().map_err(|source| Error::Io {
        op: "find a free port for",
        path: "etcd".into(),
        source,
    })
}

fn launch(dir: &Path, client_port: u16, peer_port: u16) -> Result<Daemon> {
    let client = format!("http://127.0.0.1:{client_port}");
    let peer = format!("http://127.0.0.1:{peer_port}");
    let data = dir.join("data");
    let argv = [
        "etcd".to_string(),
        "--name=tb".into(),
        format!("--data-dir={}", data.display()),
        format!("--listen-client-urls={client}"),
        format!("--advertise-client-urls={client}"),
        format!("--listen-peer-urls={peer}"),
        format!("--initial-advertise-peer-urls={peer}"),
        format!("--initial-cluster=tb={peer}"),
        "--initial-cluster-state=new".into(),
        // Keep start-up fast on a loaded 2-core machine.
        "--heartbeat-interval=50".into(),
        "--election-timeout=500".into(),
    ];
    let mut daemon = Daemon::spawn("etcd", &argv, &[], &dir.join("etcd.log"))?;
    daemon.wait_ready(READY_TIMEOUT, || healthy(client_port))?;
    Ok(daemon)
}

/// Ask etcd's `/health` endpoint over plain HTTP/1.0.
fn healthy(port: u16) -> bool {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    if s.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut body = String::new();
    let _ = s.read_to_string(&mut body);
    body.contains("\"health\":\"true\"")
}
