//! A daemon we started: owns the child process, knows its log file, and stops exactly that
//! process (by pid) when asked or when dropped.

use crate::command::{command, show};
use crate::{Error, Result};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// How long a daemon gets to exit after SIGTERM before it is killed.
const GRACE: Duration = Duration::from_secs(5);

pub(crate) struct Daemon {
    what: &'static str,
    child: Option<Child>,
    log: PathBuf,
}

impl Daemon {
    /// Start `argv` with `env` added, stdout and stderr appended to `log`.
    pub(crate) fn spawn<S: AsRef<str>>(
        what: &'static str,
        argv: &[S],
        env: &[(&str, &Path)],
        log: &Path,
    ) -> Result<Daemon> {
        let io_err = |source| Error::Io {
            op: "open log",
            path: log.to_path_buf(),
            source,
        };
        let out = File::options()
            .create(true)
            .append(true)
            .open(log)
            .map_err(io_err)?;
        let err = out.try_clone().map_err(io_err)?;
        let mut cmd = command(argv)?;
        cmd.stdin(Stdio::null()).stdout(out).stderr(err);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().map_err(|source| Error::Spawn {
            program: show(argv),
            source,
        })?;
        Ok(Daemon {
            what,
            child: Some(child),
            log: log.to_path_buf(),
        })
    }

    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Poll `ready` until it returns true; fail if the process exits or `timeout` passes.
    pub(crate) fn wait_ready(
        &mut self,
        timeout: Duration,
        mut ready: impl FnMut() -> bool,
    ) -> Result<()> {
        let start = Instant::now();
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    self.child = None;
                    return Err(Error::Exited {
                        what: self.what.to_string(),
                        status: status.to_string(),
                        log: log_tail(&self.log),
                    });
                }
            } else {
                return Err(Error::NotRunning(self.what));
            }
            if ready() {
                return Ok(());
            }
            if start.elapsed() > timeout {
                return Err(Error::NotReady {
                    what: self.what.to_string(),
                    seconds: timeout.as_secs(),
                    log: log_tail(&self.log),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stop gracefully: SIGTERM, then SIGKILL after a grace period. Reaps the child.
    pub(crate) fn stop(&mut self) {
        self.stop_within(GRACE);
    }

    /// [`Daemon::stop`] with a grace period of its own (a daemon that stops children first).
    pub(crate) fn stop_within(&mut self, grace: Duration) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        if let Ok(pid) = i32::try_from(child.id()) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        }
        let start = Instant::now();
        while start.elapsed() < grace {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Kill at once (SIGKILL), as a crash would. Reaps the child.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub(crate) fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Give up ownership without stopping: the process outlives this value (for `testbed up`).
    pub(crate) fn detach(mut self) -> Option<u32> {
        self.child.take().map(|c| c.id())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The last lines of a log file, for error messages.
pub(crate) fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

/// True if a process with this pid exists (and is not a zombie of ours).
pub fn pid_alive(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    if kill(Pid::from_raw(raw), None).is_err() {
        return false;
    }
    // A zombie still answers signal 0; look at its state.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.trim_start().starts_with('Z'))
            .unwrap_or(false),
        Err(_) => false,
    }
}
