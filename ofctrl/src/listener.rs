//! Accepting switch connections: a TCP or unix-socket listener that starts one
//! [`crate::switch`] actor per connection and hands every switch's events to the subscribers.

use crate::switch::{self, SwitchEvent, SwitchOptions};
use actix::Recipient;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where a listener accepts connections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenAddr {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl std::fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListenAddr::Tcp(a) => write!(f, "tcp:{a}"),
            ListenAddr::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

/// A running accept loop. Dropping it stops accepting; connected switches stay connected.
pub struct Listener {
    local: ListenAddr,
    task: actix_rt::task::JoinHandle<()>,
}

impl Listener {
    /// Listen on TCP. Must be called from an actix system (the switch actors live on its
    /// arbiter). Port 0 picks a free port; [`Listener::local_addr`] tells which.
    pub async fn tcp(
        addr: SocketAddr,
        options: SwitchOptions,
        subscribers: Vec<Recipient<SwitchEvent>>,
    ) -> std::io::Result<Listener> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let local = ListenAddr::Tcp(listener.local_addr()?);
        tracing::info!(%local, "OpenFlow controller listening");
        let task = actix_rt::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, peer)) => {
                        // Flow mods are many small writes; do not let Nagle batch them late.
                        let _ = stream.set_nodelay(true);
                        switch::spawn(stream, peer.to_string(), options, subscribers.clone());
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        });
        Ok(Listener { local, task })
    }

    /// Listen on a unix socket (removing a stale socket file first).
    pub async fn unix(
        path: &Path,
        options: SwitchOptions,
        subscribers: Vec<Recipient<SwitchEvent>>,
    ) -> std::io::Result<Listener> {
        let _ = std::fs::remove_file(path);
        let listener = tokio::net::UnixListener::bind(path)?;
        let local = ListenAddr::Unix(path.to_path_buf());
        tracing::info!(%local, "OpenFlow controller listening");
        let task = actix_rt::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => {
                        switch::spawn(stream, "unix".into(), options, subscribers.clone());
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        });
        Ok(Listener { local, task })
    }

    pub fn local_addr(&self) -> &ListenAddr {
        &self.local
    }

    /// The TCP port, for tests that listen on port 0.
    pub fn port(&self) -> Option<u16> {
        match &self.local {
            ListenAddr::Tcp(a) => Some(a.port()),
            ListenAddr::Unix(_) => None,
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.task.abort();
        if let ListenAddr::Unix(p) = &self.local {
            let _ = std::fs::remove_file(p);
        }
    }
}
