//! A named network namespace (`ip netns add`), deleted with everything in it on drop.

use crate::command::{command, output};
use crate::names::unique_name;
use crate::{Result, run};
use std::path::PathBuf;

/// A network namespace created by this process.
#[derive(Debug)]
pub struct Netns {
    name: String,
    owned: bool,
}

impl Netns {
    /// Create a namespace named `tb<pid>x<n><tag>` with its loopback up.
    pub fn new(tag: &str) -> Result<Netns> {
        let ns = Netns {
            name: unique_name(tag),
            owned: true,
        };
        run(&["ip", "netns", "add", &ns.name])?;
        ns.exec(&["ip", "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// The namespace's name, as `ip netns` shows it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The bind-mount path, the form CNI's `CNI_NETNS` and `setns(2)` take.
    pub fn path(&self) -> PathBuf {
        PathBuf::from("/var/run/netns").join(&self.name)
    }

    /// Run a command inside the namespace and return its stdout.
    pub fn exec<S: AsRef<str>>(&self, argv: &[S]) -> Result<String> {
        let full = self.argv(argv);
        let mut cmd = command(&full)?;
        output(&mut cmd, &full)
    }

    /// `ip netns exec <name> argv...`, for callers that spawn long-running processes.
    pub fn argv<S: AsRef<str>>(&self, argv: &[S]) -> Vec<String> {
        ["ip", "netns", "exec", &self.name]
            .into_iter()
            .map(String::from)
            .chain(argv.iter().map(|a| a.as_ref().to_string()))
            .collect()
    }

    /// Leave the namespace in place after this value is dropped (for `testbed up`).
    pub fn detach(mut self) -> String {
        self.keep();
        std::mem::take(&mut self.name)
    }

    /// From now on, do not delete the namespace on drop.
    pub(crate) fn keep(&mut self) {
        self.owned = false;
    }

    /// True if a namespace with this name exists.
    pub fn exists(name: &str) -> bool {
        PathBuf::from("/var/run/netns").join(name).exists()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        if self.owned {
            let _ = run(&["ip", "netns", "del", &self.name]);
        }
    }
}
