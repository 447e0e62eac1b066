//! A private Docker daemon: Debian's `dockerd` with its own data root, exec root, pid file and
//! API socket, optionally inside an emulated host's network namespace (so the interfaces a
//! network plugin creates there are the ones it moves into containers), without Docker's own
//! bridge and iptables rules. Stopped by pid on drop; its containers go with it.
//!
//! Remote network plugins are found by socket name in `/run/docker/plugins/`, which every
//! dockerd on the machine shares: give each test's plugin a unique name ([`plugin_socket`]).
//!
//! Images are built locally (no registry): [`Dockerd::busybox`] imports a root file system of
//! the static busybox with the applets tests use.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::command::{command, output};
use crate::names::{SandboxDir, temp_dir, unique_name};
use crate::netns::Netns;
use crate::process::Daemon;
use crate::{Error, Result, run};

/// The directory Docker looks for plugin sockets and spec files in.
pub const PLUGIN_DIR: &str = "/run/docker/plugins";
/// The image [`Dockerd::busybox`] imports.
pub const BUSYBOX_IMAGE: &str = "tb-busybox:1";
const BUSYBOX: &str = "/bin/busybox";
const APPLETS: &[&str] = &[
    "sh", "ping", "ping6", "nc", "nslookup", "ip", "sleep", "cat", "ifconfig", "route", "echo",
    "hostname", "ls", "true", "wget", "timeout",
];

/// A unique plugin name and its socket in [`PLUGIN_DIR`] (the driver name is the file name).
pub fn plugin_socket() -> (String, PathBuf) {
    let name = format!("np-{}", unique_name("d"));
    let path = Path::new(PLUGIN_DIR).join(format!("{name}.sock"));
    (name, path)
}

/// See the module documentation.
pub struct Dockerd {
    daemon: Option<Daemon>,
    argv: Vec<String>,
    pub socket: PathBuf,
    log: PathBuf,
    // Last: removed after the daemon stopped.
    dir: SandboxDir,
}

/// How long dockerd gets to answer on its socket.
const READY: Duration = Duration::from_secs(60);
/// How long dockerd gets to stop its containers (it gives each 10 s) and itself.
const STOP_GRACE: Duration = Duration::from_secs(30);

impl Dockerd {
    /// Start a dockerd, in `netns` if given, and wait until its API answers.
    pub fn start(netns: Option<&Netns>) -> Result<Dockerd> {
        Dockerd::start_with(netns, None)
    }

    /// [`Dockerd::start`] with the API on `socket` (a path chosen before, e.g. for a plugin's
    /// `--docker-host`); default: in the sandbox directory.
    pub fn start_with(netns: Option<&Netns>, socket: Option<PathBuf>) -> Result<Dockerd> {
        let dir = temp_dir("dk")?;
        let d = dir.path();
        let socket = socket.unwrap_or_else(|| d.join("docker.sock"));
        let args: Vec<String> = vec![
            "dockerd".into(),
            "--data-root".into(),
            d.join("data").to_string_lossy().into_owned(),
            "--exec-root".into(),
            d.join("exec").to_string_lossy().into_owned(),
            "--pidfile".into(),
            d.join("dockerd.pid").to_string_lossy().into_owned(),
            "-H".into(),
            format!("unix://{}", socket.display()),
            "--bridge=none".into(),
            "--iptables=false".into(),
            "--ip6tables=false".into(),
            "--ip-masq=false".into(),
            "--storage-driver=overlay2".into(),
        ];
        // nsenter, not `ip netns exec`: the latter remounts /sys for the namespace, which
        // hides the cgroup file system dockerd needs.
        let argv = match netns {
            Some(ns) => [
                "nsenter".to_string(),
                format!("--net={}", ns.path().display()),
                "--".into(),
            ]
            .into_iter()
            .chain(args)
            .collect(),
            None => args,
        };
        let mut dockerd = Dockerd {
            daemon: None,
            argv,
            socket,
            log: d.join("dockerd.log"),
            dir,
        };
        dockerd.launch()?;
        Ok(dockerd)
    }

    fn launch(&mut self) -> Result<()> {
        let mut daemon = Daemon::spawn("dockerd", &self.argv, &[], &self.log)?;
        let host = self.host();
        daemon.wait_ready(READY, || {
            run(&[
                "docker",
                "-H",
                &host,
                "version",
                "--format",
                "{{.Server.Version}}",
            ])
            .is_ok()
        })?;
        self.daemon = Some(daemon);
        Ok(())
    }

    /// `unix://<socket>`, the `DOCKER_HOST` of this daemon.
    pub fn host(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// The daemon's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The sandbox directory (data root, exec root, log).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Run `docker -H <this daemon> args...`; stdout, or the error with stderr.
    pub fn docker<S: AsRef<str>>(&self, args: &[S]) -> Result<String> {
        let host = self.host();
        let mut argv = vec!["docker".to_string(), "-H".into(), host];
        argv.extend(args.iter().map(|a| a.as_ref().to_string()));
        let mut cmd = command(&argv)?;
        output(&mut cmd, &argv)
    }

    /// Stop as a service manager does (SIGTERM; dockerd stops its containers and containerd)
    /// and start again with the same state.
    pub fn restart(&mut self) -> Result<()> {
        self.stop();
        self.launch()
    }

    fn stop(&mut self) {
        if let Some(mut d) = self.daemon.take() {
            d.stop_within(STOP_GRACE);
        }
        // A dockerd that had to be killed leaves its containerd running: stop it by its pid
        // file (it takes the container shims with it).
        let pid_file = self.dir.path().join("exec/containerd/containerd.pid");
        if let Some(pid) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|p| p.trim().parse::<i32>().ok())
            && crate::process::pid_alive(pid.unsigned_abs())
        {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }

    /// Import [`BUSYBOX_IMAGE`] (busybox and the applets tests use) unless it exists.
    pub fn busybox(&self) -> Result<&'static str> {
        if self.docker(&["image", "inspect", BUSYBOX_IMAGE]).is_ok() {
            return Ok(BUSYBOX_IMAGE);
        }
        let root = self.dir.path().join("rootfs");
        let bin = root.join("bin");
        let io = |op: &'static str, path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::Io { op, path, source }
        };
        std::fs::create_dir_all(&bin).map_err(io("create", &bin))?;
        std::fs::create_dir_all(root.join("etc")).map_err(io("create", &root))?;
        std::fs::copy(BUSYBOX, bin.join("busybox")).map_err(io("copy", Path::new(BUSYBOX)))?;
        for applet in APPLETS {
            let link = bin.join(applet);
            if !link.exists() {
                std::os::unix::fs::symlink("busybox", &link).map_err(io("symlink", &link))?;
            }
        }
        let tar = self.dir.path().join("busybox.tar");
        run(&[
            "tar",
            "-C",
            &root.to_string_lossy(),
            "-cf",
            &tar.to_string_lossy(),
            ".",
        ])?;
        self.docker(&["import", &tar.to_string_lossy(), BUSYBOX_IMAGE])?;
        Ok(BUSYBOX_IMAGE)
    }
}

impl Dockerd {
    /// Leave dockerd running after this value is dropped (for `testbed up`): its pid (it
    /// stops its containerd itself) and the sandbox directory.
    pub fn detach(mut self) -> (Vec<u32>, PathBuf) {
        let pids: Vec<u32> = self
            .daemon
            .take()
            .and_then(|d| d.detach())
            .into_iter()
            .collect();
        let dir = std::mem::replace(&mut self.dir, SandboxDir::empty()).keep();
        (pids, dir)
    }
}

impl Drop for Dockerd {
    fn drop(&mut self) {
        // Detached: the daemon and its directory are someone else's now.
        if self.dir.path().as_os_str().is_empty() {
            return;
        }
        self.stop();
        // dockerd leaves its overlay and netns mounts under the data and exec roots when it is
        // killed; unmount them so the sandbox directory can go.
        let d = self.dir.path().to_string_lossy().into_owned();
        if let Ok(mounts) = std::fs::read_to_string("/proc/self/mounts") {
            let mut ours: Vec<&str> = mounts
                .lines()
                .filter_map(|l| l.split(' ').nth(1))
                .filter(|m| m.starts_with(&d))
                .collect();
            ours.sort_by_key(|m| std::cmp::Reverse(m.len()));
            for m in ours {
                let _ = run(&["umount", "-l", m]);
            }
        }
    }
}
