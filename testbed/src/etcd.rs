//! Private etcd servers: Debian's `etcd` on free loopback ports with temporary data directories.
//!
//! [`Etcd::start`] runs a one-member cluster; [`Etcd::start_cluster`] runs several members, with
//! client TLS and client certificates when asked (the certificates are generated with `openssl`
//! into the cluster's directory, see [`EtcdTls`]). Members can be killed, stopped, frozen
//! (SIGSTOP) and started again on the same ports and data (outage tests); everything is stopped —
//! only these processes, by pid — when the value is dropped.

use crate::names::{SandboxDir, free_port};
use crate::process::Daemon;
use crate::{Error, Result};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long etcd gets to answer `/health` after start.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// Attempts with fresh ports when etcd loses a port race against another process.
const PORT_ATTEMPTS: usize = 3;

/// What to start.
#[derive(Debug, Clone, Copy)]
pub struct EtcdOptions {
    /// Number of members (1, 3, 5, ...).
    pub members: usize,
    /// Serve clients over TLS only, requiring client certificates.
    pub tls: bool,
}

impl Default for EtcdOptions {
    fn default() -> Self {
        EtcdOptions {
            members: 1,
            tls: false,
        }
    }
}

/// Certificates of a TLS cluster (PEM files in the cluster's directory).
#[derive(Debug, Clone)]
pub struct EtcdTls {
    /// The CA that signed the server and client certificates (`--etcd-cacert`).
    pub ca: PathBuf,
    /// A client certificate and key signed by `ca` (`--etcd-cert`, `--etcd-key`).
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Another CA that signed nothing here: a "wrong CA" for tests.
    pub wrong_ca: PathBuf,
    /// A client certificate and key signed by `wrong_ca` (rejected by the servers).
    pub wrong_cert: PathBuf,
    pub wrong_key: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
}

impl EtcdTls {
    /// A fresh set of the same files in `<dir>/tls`, for any TLS server under test (netmaster's
    /// REST API): the server certificate is for 127.0.0.1 and localhost.
    pub fn generate(dir: &Path) -> Result<EtcdTls> {
        make_certs(dir)
    }

    /// The server certificate (127.0.0.1, localhost) signed by `ca`.
    pub fn server_cert(&self) -> &Path {
        &self.server_cert
    }

    /// The key of [`EtcdTls::server_cert`].
    pub fn server_key(&self) -> &Path {
        &self.server_key
    }
}

struct Member {
    name: String,
    daemon: Option<Daemon>,
    client_port: u16,
    peer_port: u16,
    health_port: u16,
    paused: bool,
}

/// A running (or deliberately stopped) etcd cluster.
pub struct Etcd {
    members: Vec<Member>,
    tls: Option<EtcdTls>,
    // Declared last: dropped after the daemons are stopped.
    dir: SandboxDir,
}

impl Etcd {
    /// Start a single-member etcd cluster and wait until it reports healthy.
    pub fn start() -> Result<Etcd> {
        Etcd::start_cluster(EtcdOptions::default())
    }

    /// Start `options.members` members and wait until every one reports healthy.
    pub fn start_cluster(options: EtcdOptions) -> Result<Etcd> {
        let dir = crate::names::temp_dir("etcd")?;
        let tls = if options.tls {
            Some(make_certs(dir.path())?)
        } else {
            None
        };
        let mut last = None;
        for _ in 0..PORT_ATTEMPTS {
            let mut etcd = Etcd {
                members: Vec::new(),
                tls: tls.clone(),
                dir: SandboxDir::empty(),
            };
            for n in 0..options.members.max(1) {
                etcd.members.push(Member {
                    name: format!("m{n}"),
                    daemon: None,
                    client_port: port()?,
                    peer_port: port()?,
                    health_port: port()?,
                    paused: false,
                });
            }
            // Every member must be running before any can report healthy (quorum).
            let mut failed = None;
            for i in 0..etcd.members.len() {
                match etcd.spawn(i, dir.path()) {
                    Ok(d) => etcd.members[i].daemon = Some(d),
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
            if failed.is_none() {
                failed = etcd.wait_all_healthy().err();
            }
            match failed {
                None => {
                    etcd.dir = dir;
                    return Ok(etcd);
                }
                Some(e @ Error::Exited { .. }) => last = Some(e),
                Some(e) => return Err(e),
            }
            // Fresh data for the next attempt (a half-formed cluster cannot be reused).
            drop(etcd);
            let _ = std::fs::remove_dir_all(dir.path().join("data"));
        }
        Err(last.unwrap_or(Error::NotRunning("etcd")))
    }

    fn wait_all_healthy(&mut self) -> Result<()> {
        for i in 0..self.members.len() {
            let port = self.members[i].health_port;
            if let Some(d) = self.members[i].daemon.as_mut() {
                d.wait_ready(READY_TIMEOUT, || healthy(port))?;
            }
        }
        Ok(())
    }

    fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "https" } else { "http" }
    }

    fn url_of(&self, m: &Member) -> String {
        format!("{}://127.0.0.1:{}", self.scheme(), m.client_port)
    }

    fn spawn(&self, i: usize, dir: &Path) -> Result<Daemon> {
        let m = &self.members[i];
        let client = self.url_of(m);
        let peer = format!("http://127.0.0.1:{}", m.peer_port);
        let cluster = self
            .members
            .iter()
            .map(|o| format!("{}=http://127.0.0.1:{}", o.name, o.peer_port))
            .collect::<Vec<_>>()
            .join(",");
        let data = dir.join("data").join(&m.name);
        let mut argv = vec![
            "etcd".to_string(),
            format!("--name={}", m.name),
            format!("--data-dir={}", data.display()),
            format!("--listen-client-urls={client}"),
            format!("--advertise-client-urls={client}"),
            format!("--listen-peer-urls={peer}"),
            format!("--initial-advertise-peer-urls={peer}"),
            format!("--initial-cluster={cluster}"),
            "--initial-cluster-token=contiv-testbed".into(),
            "--initial-cluster-state=new".into(),
            // /health over plain HTTP even when clients must use TLS.
            format!("--listen-metrics-urls=http://127.0.0.1:{}", m.health_port),
            // Keep start-up and elections fast on a loaded 2-core machine.
            "--heartbeat-interval=50".into(),
            "--election-timeout=500".into(),
        ];
        if let Some(tls) = &self.tls {
            argv.extend([
                format!("--cert-file={}", tls.server_cert.display()),
                format!("--key-file={}", tls.server_key.display()),
                format!("--trusted-ca-file={}", tls.ca.display()),
                "--client-cert-auth".into(),
            ]);
        }
        Daemon::spawn("etcd", &argv, &[], &dir.join(format!("{}.log", m.name)))
    }

    /// The first member's client URL, e.g. `http://127.0.0.1:40123`.
    pub fn client_url(&self) -> String {
        self.members
            .first()
            .map(|m| self.url_of(m))
            .unwrap_or_default()
    }

    /// Every member's client URL.
    pub fn client_urls(&self) -> Vec<String> {
        self.members.iter().map(|m| self.url_of(m)).collect()
    }

    /// The comma list `--etcd` takes.
    pub fn endpoints_arg(&self) -> String {
        self.client_urls().join(",")
    }

    /// The first member's endpoint as `host:port`, the form `etcd-client` accepts.
    pub fn endpoint(&self) -> String {
        self.members
            .first()
            .map(|m| format!("127.0.0.1:{}", m.client_port))
            .unwrap_or_default()
    }

    /// The certificates, for a TLS cluster.
    pub fn tls(&self) -> Option<&EtcdTls> {
        self.tls.as_ref()
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Always false: a cluster has at least one member.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The first member's data directory (kept across stop and start).
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data").join("m0")
    }

    /// The cluster's directory (logs, data, certificates).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Process id of the first member, if running.
    pub fn pid(&self) -> Option<u32> {
        self.member_pid(0)
    }

    /// Process id of member `i`, if running.
    pub fn member_pid(&self, i: usize) -> Option<u32> {
        self.members
            .get(i)
            .and_then(|m| m.daemon.as_ref())
            .and_then(Daemon::pid)
    }

    /// Stop every member gracefully; data and ports are kept for [`Etcd::start_again`].
    pub fn stop(&mut self) {
        for i in 0..self.members.len() {
            self.stop_member(i);
        }
    }

    /// Kill every member with SIGKILL, as a crash or power loss would.
    pub fn kill(&mut self) {
        for i in 0..self.members.len() {
            self.kill_member(i);
        }
    }

    /// Start every stopped member again on the same ports with the same data.
    pub fn start_again(&mut self) -> Result<()> {
        for i in 0..self.members.len() {
            if self.members[i].daemon.is_none() {
                let d = self.spawn(i, self.dir.path())?;
                self.members[i].daemon = Some(d);
            }
        }
        self.wait_all_healthy()
    }

    /// Stop member `i` gracefully (SIGTERM).
    pub fn stop_member(&mut self, i: usize) {
        self.resume_member(i);
        if let Some(mut d) = self.members.get_mut(i).and_then(|m| m.daemon.take()) {
            d.stop();
        }
    }

    /// Kill member `i` with SIGKILL.
    pub fn kill_member(&mut self, i: usize) {
        if let Some(m) = self.members.get_mut(i) {
            m.paused = false;
            if let Some(mut d) = m.daemon.take() {
                d.kill();
            }
        }
    }

    /// Freeze member `i` (SIGSTOP): its sockets stay open but nothing answers.
    pub fn pause_member(&mut self, i: usize) {
        if let Some(pid) = self.member_pid(i)
            && let Ok(pid) = i32::try_from(pid)
            && kill(Pid::from_raw(pid), Signal::SIGSTOP).is_ok()
        {
            self.members[i].paused = true;
        }
    }

    /// Let a frozen member run again (SIGCONT).
    pub fn resume_member(&mut self, i: usize) {
        if self.members.get(i).is_some_and(|m| m.paused) {
            if let Some(pid) = self.member_pid(i)
                && let Ok(pid) = i32::try_from(pid)
            {
                let _ = kill(Pid::from_raw(pid), Signal::SIGCONT);
            }
            self.members[i].paused = false;
        }
    }

    /// Start member `i` again (same ports and data) and wait until it reports healthy.
    pub fn start_member(&mut self, i: usize) -> Result<()> {
        if self.members.get(i).is_some_and(|m| m.daemon.is_none()) {
            let mut d = self.spawn(i, self.dir.path())?;
            let port = self.members[i].health_port;
            d.wait_ready(READY_TIMEOUT, || healthy(port))?;
            self.members[i].daemon = Some(d);
        }
        Ok(())
    }

    /// Whether member `i` answers `/health` (running, not frozen, part of a quorum).
    pub fn member_healthy(&self, i: usize) -> bool {
        self.members.get(i).is_some_and(|m| healthy(m.health_port))
    }

    /// The index of the raft leader, as the members report it (`etcdctl endpoint status`).
    pub fn leader(&self) -> Option<usize> {
        let mut argv = vec![
            "etcdctl".to_string(),
            "--command-timeout=2s".into(),
            format!("--endpoints={}", self.endpoints_arg()),
        ];
        if let Some(tls) = &self.tls {
            argv.extend([
                format!("--cacert={}", tls.ca.display()),
                format!("--cert={}", tls.cert.display()),
                format!("--key={}", tls.key.display()),
            ]);
        }
        argv.extend([
            "endpoint".into(),
            "status".into(),
            "-w".into(),
            "json".into(),
        ]);
        let out = std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .env("ETCDCTL_API", "3")
            .output()
            .ok()?;
        let statuses: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).ok()?;
        let leader = statuses
            .iter()
            .find_map(|s| s["Status"]["leader"].as_u64())?;
        let endpoint = statuses
            .iter()
            .find(|s| s["Status"]["header"]["member_id"].as_u64() == Some(leader))?["Endpoint"]
            .as_str()?
            .to_string();
        self.members.iter().position(|m| self.url_of(m) == endpoint)
    }

    /// True if every member process is alive.
    pub fn is_running(&mut self) -> bool {
        !self.members.is_empty()
            && self
                .members
                .iter_mut()
                .all(|m| m.daemon.as_mut().is_some_and(Daemon::is_running))
    }

    /// Leave the servers running after this value is gone; returns their pids and the directory.
    /// Used by `testbed up`, whose `down` stops them by pid.
    pub fn detach(mut self) -> (Vec<u32>, PathBuf) {
        let pids = self
            .members
            .iter_mut()
            .filter_map(|m| m.daemon.take().and_then(Daemon::detach))
            .collect();
        let dir = std::mem::replace(&mut self.dir, SandboxDir::empty());
        (pids, dir.keep())
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

/// Ask a member's `/health` endpoint (the plain-HTTP metrics listener) over HTTP/1.0.
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

/// Run `openssl` with `args` in `dir`.
fn openssl(dir: &Path, args: &[&str]) -> Result<()> {
    let out = std::process::Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|source| Error::Spawn {
            program: format!("openssl {}", args.join(" ")),
            source,
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Error::Command {
            command: format!("openssl {}", args.join(" ")),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|source| Error::Io {
        op: "write",
        path: path.to_path_buf(),
        source,
    })
}

/// A self-signed CA `<name>.pem`/`<name>.key` in `dir`.
fn make_ca(dir: &Path, name: &str) -> Result<()> {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "7",
            "-subj",
            &format!("/CN=contiv testbed {name}"),
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.pem"),
        ],
    )
}

/// A certificate `<name>.pem`/`<name>.key` signed by CA `ca`, with the extensions in `ext`.
fn make_cert(dir: &Path, ca: &str, name: &str, cn: &str, ext: &str) -> Result<()> {
    write(&dir.join(format!("{name}.ext")), ext)?;
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-subj",
            &format!("/CN={cn}"),
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
        ],
    )?;
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            &format!("{ca}.pem"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-days",
            "7",
            "-extfile",
            &format!("{name}.ext"),
            "-out",
            &format!("{name}.pem"),
        ],
    )
}

/// Generate a CA, a server certificate for 127.0.0.1/localhost, a client certificate, and a second
/// unrelated CA with its own client certificate, into `<dir>/tls`.
fn make_certs(dir: &Path) -> Result<EtcdTls> {
    let tls = dir.join("tls");
    std::fs::create_dir_all(&tls).map_err(|source| Error::Io {
        op: "create",
        path: tls.clone(),
        source,
    })?;
    make_ca(&tls, "ca")?;
    make_ca(&tls, "wrong-ca")?;
    make_cert(
        &tls,
        "ca",
        "server",
        "etcd",
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n",
    )?;
    make_cert(
        &tls,
        "ca",
        "client",
        "contiv",
        "extendedKeyUsage=clientAuth\n",
    )?;
    make_cert(
        &tls,
        "wrong-ca",
        "wrong-client",
        "contiv",
        "extendedKeyUsage=clientAuth\n",
    )?;
    Ok(EtcdTls {
        ca: tls.join("ca.pem"),
        cert: tls.join("client.pem"),
        key: tls.join("client.key"),
        wrong_ca: tls.join("wrong-ca.pem"),
        wrong_cert: tls.join("wrong-client.pem"),
        wrong_key: tls.join("wrong-client.key"),
        server_cert: tls.join("server.pem"),
        server_key: tls.join("server.key"),
    })
}
