//! Unique names and free ports, so that sandboxes of tests running in parallel (threads of one
//! test binary, or several test processes) never collide.

use std::net::{Ipv4Addr, TcpListener};
use std::sync::atomic::{AtomicU32, Ordering};

/// The prefix every sandbox object carries; [`crate::cleanup`] removes leftovers by it.
pub const PREFIX: &str = "tb";

/// A name like `tb<pid><n><tag>` that is unique on this machine while this process lives.
///
/// Interface names are limited to 15 bytes by the kernel, so the result is kept short: the pid
/// is printed in base 36 and `tag` should be at most 3 characters.
pub fn unique_name(tag: &str) -> String {
    // A process-wide counter is the one shared state here; it only ever grows.
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{PREFIX}{}x{}{tag}", base36(std::process::id()), base36(n))
}

fn base36(mut v: u32) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(v % 36) as usize]);
        v /= 36;
        if v == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8_lossy(&out).into_owned()
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
///
/// The kernel hands out ephemeral ports in a rotating order, so a port just released is not
/// handed out again soon; daemons that still lose the race fail to bind and are retried by
/// their starters.
pub fn free_port() -> std::io::Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(listener.local_addr()?.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_fit_an_interface_name() {
        let a = unique_name("abc");
        let b = unique_name("abc");
        assert_ne!(a, b);
        assert!(a.len() <= 15, "{a} is longer than IFNAMSIZ-1");
        assert!(a.starts_with(PREFIX));
    }

    #[test]
    fn base36_round_trips() {
        assert_eq!(base36(0), "0");
        assert_eq!(base36(35), "z");
        assert_eq!(base36(36), "10");
        assert_eq!(
            u32::from_str_radix(&base36(4_194_304), 36).ok(),
            Some(4_194_304)
        );
    }

    #[test]
    fn free_port_is_bindable() {
        let port = free_port().unwrap();
        assert!(TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok());
    }
}

/// A sandbox's working directory under the system temp dir, named `contiv-tb-<tag>-<unique>`,
/// removed with its contents on drop unless [`SandboxDir::keep`] was called.
#[derive(Debug)]
pub struct SandboxDir {
    path: std::path::PathBuf,
    keep: bool,
}

/// The marker in every sandbox directory name; [`crate::cleanup`] finds leftovers by it.
pub const DIR_MARKER: &str = "contiv-tb-";

impl SandboxDir {
    /// A placeholder that owns nothing (what is left after the real one was taken).
    pub(crate) fn empty() -> SandboxDir {
        SandboxDir {
            path: std::path::PathBuf::new(),
            keep: true,
        }
    }

    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Keep the directory after this value is dropped; returns its path.
    pub fn keep(mut self) -> std::path::PathBuf {
        self.keep = true;
        std::mem::take(&mut self.path)
    }
}

impl Drop for SandboxDir {
    fn drop(&mut self) {
        if !self.keep && !self.path.as_os_str().is_empty() {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Create a fresh sandbox directory. Paths stay short because unix socket paths inside it are
/// limited to 107 bytes.
pub fn temp_dir(tag: &str) -> crate::Result<SandboxDir> {
    let path = std::env::temp_dir().join(format!("{DIR_MARKER}{tag}-{}", unique_name("")));
    std::fs::create_dir_all(&path).map_err(|source| crate::Error::Io {
        op: "create",
        path: path.clone(),
        source,
    })?;
    Ok(SandboxDir { path, keep: false })
}
