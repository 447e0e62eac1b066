//! The netlink connection of one namespace and its link operations: veth pairs, MTU, MAC,
//! up, rename, move to another namespace, lookup, delete.
//!
//! Links are addressed by name at this API (that is how CNI and OVS name them) and resolved to
//! an index per call; a missing link is [`NetlinkError::LinkNotFound`] except in lookups
//! (`Ok(None)`) and deletes (`Ok(false)`), which are idempotent.

use std::os::fd::AsRawFd;
use std::path::Path;

use futures::TryStreamExt;
use netlink_packet_route::link::{
    InfoData, InfoKind, InfoVeth, LinkAttribute, LinkFlags, LinkMessage,
};
use rtnetlink::{Handle, LinkMessageBuilder, LinkUnspec, LinkVeth};

use super::error::NetlinkError;
use super::mac::MacAddr;
use super::netns;

/// `ENODEV`: the kernel's answer for a link name or index that does not exist.
const ENODEV: i32 = 19;

/// `EEXIST`: the kernel's answer for a new link whose name is taken.
const EEXIST: i32 = 17;

/// Longest interface name the kernel accepts (IFNAMSIZ - 1).
pub const MAX_IFNAME_LEN: usize = 15;

/// A link as the kernel reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    pub index: u32,
    pub name: String,
    pub mac: Option<MacAddr>,
    pub mtu: u32,
    /// Administratively up (`IFF_UP`).
    pub up: bool,
}

impl Link {
    fn from_message(msg: &LinkMessage) -> Link {
        let mut link = Link {
            index: msg.header.index,
            name: String::new(),
            mac: None,
            mtu: 0,
            up: msg.header.flags.contains(LinkFlags::Up),
        };
        for attr in &msg.attributes {
            match attr {
                LinkAttribute::IfName(name) => link.name = name.clone(),
                LinkAttribute::Address(bytes) => link.mac = MacAddr::from_bytes(bytes),
                LinkAttribute::Mtu(mtu) => link.mtu = *mtu,
                _ => {}
            }
        }
        link
    }
}

/// An rtnetlink connection bound to one network namespace.
#[derive(Clone, Debug)]
pub struct Netlink {
    pub(crate) handle: Handle,
    /// Which namespace this is, for error messages.
    label: String,
}

impl Netlink {
    /// Connect in the calling thread's namespace (for the daemon: the host's). The
    /// connection is driven by a task on the current tokio runtime.
    pub fn connect() -> Result<Netlink, NetlinkError> {
        Self::connect_labelled("the host namespace".to_owned())
    }

    pub(crate) fn connect_labelled(label: String) -> Result<Netlink, NetlinkError> {
        let (connection, handle, _) = rtnetlink::new_connection().map_err(NetlinkError::Socket)?;
        tokio::spawn(connection);
        Ok(Netlink { handle, label })
    }

    /// Every link of the namespace.
    pub async fn links(&self) -> Result<Vec<Link>, NetlinkError> {
        self.handle
            .link()
            .get()
            .execute()
            .map_ok(|m| Link::from_message(&m))
            .try_collect()
            .await
            .map_err(NetlinkError::request(format!(
                "list links in {}",
                self.label
            )))
    }

    /// The link called `name`, if it exists.
    pub async fn link(&self, name: &str) -> Result<Option<Link>, NetlinkError> {
        check_name(name)?;
        let found = self
            .handle
            .link()
            .get()
            .match_name(name.to_owned())
            .execute()
            .try_next()
            .await;
        match found {
            Ok(msg) => Ok(msg.map(|m| Link::from_message(&m))),
            Err(e) => {
                let err = NetlinkError::request(format!("look up link {name}"))(e);
                if err.errno() == Some(ENODEV) {
                    Ok(None)
                } else {
                    Err(err)
                }
            }
        }
    }

    /// The link called `name`, or [`NetlinkError::LinkNotFound`].
    pub async fn require_link(&self, name: &str) -> Result<Link, NetlinkError> {
        self.link(name)
            .await?
            .ok_or_else(|| NetlinkError::LinkNotFound {
                name: name.to_owned(),
                netns: self.label.clone(),
            })
    }

    /// Create the veth pair `name` ↔ `peer` (both down).
    pub async fn create_veth(&self, name: &str, peer: &str) -> Result<(), NetlinkError> {
        check_name(name)?;
        check_name(peer)?;
        self.handle
            .link()
            .add(LinkVeth::new(name, peer).build())
            .execute()
            .await
            .map_err(NetlinkError::request(format!(
                "create veth pair {name}/{peer} in {}",
                self.label
            )))
    }

    /// Create the veth pair `name` ↔ `peer` with the peer created directly inside the
    /// namespace at `peer_netns` (no move afterwards: moving a link between namespaces costs the
    /// kernel an RCU grace period, ~15 ms, which dominated pod set-up). Both ends get `mtu`;
    /// the peer gets `peer_mac` if given. `name` is up from its creation, the peer down. One
    /// request when `name` is free; a leftover `name` (from an interrupted attempt) is deleted
    /// and the pair made again, while a `peer` that exists in `peer_netns` fails the call (that
    /// interface is not ours to replace).
    pub async fn create_veth_into(
        &self,
        name: &str,
        peer: &str,
        peer_netns: &Path,
        mtu: u32,
        peer_mac: Option<MacAddr>,
    ) -> Result<(), NetlinkError> {
        check_name(name)?;
        check_name(peer)?;
        let create = async || {
            let target = netns::open(peer_netns)?;
            let mut peer_builder = LinkUnspec::new_with_name(peer)
                .mtu(mtu)
                .setns_by_fd(target.as_raw_fd());
            if let Some(mac) = peer_mac {
                peer_builder = peer_builder.address(mac.0.to_vec());
            }
            let message = LinkMessageBuilder::<LinkVeth>::new_with_info_kind(InfoKind::Veth)
                .name(name.to_owned())
                .mtu(mtu)
                .up()
                .set_info_data(InfoData::Veth(InfoVeth::Peer(peer_builder.build())))
                .build();
            let created =
                self.handle
                    .link()
                    .add(message)
                    .execute()
                    .await
                    .map_err(NetlinkError::request(format!(
                        "create veth pair {name} (in {}) / {peer} (in {})",
                        self.label,
                        peer_netns.display()
                    )));
            // `target` stays open until the kernel has used the descriptor.
            drop(target);
            created
        };
        match create().await {
            Err(e) if e.errno() == Some(EEXIST) && self.delete_link(name).await? => create().await,
            other => other,
        }
    }

    /// Turn the kernel's IPv6 off on link `name` of this connection's namespace, which must be
    /// the calling thread's (the sysctl files belong to it). A pod's host end carries the
    /// pod's packets to the switch and needs no address of its own; with IPv6 on, the moment
    /// the pod's end comes up the kernel gives it a link-local address, runs duplicate address
    /// detection, joins multicast groups and adds routes: solicitations sent into the switch
    /// and route and address changes that ovs-vswitchd, which follows them, answers by reading
    /// every route and address of the namespace again.
    pub fn disable_ipv6_here(&self, name: &str) -> Result<(), NetlinkError> {
        check_name(name)?;
        let path = format!("/proc/sys/net/ipv6/conf/{name}/disable_ipv6");
        std::fs::write(&path, "1").map_err(|source| NetlinkError::Sysctl {
            path: format!("{path} (in {})", self.label),
            source,
        })
    }

    /// Apply one change to link `name`.
    async fn set(
        &self,
        name: &str,
        what: &str,
        change: impl FnOnce(
            rtnetlink::LinkMessageBuilder<LinkUnspec>,
        ) -> rtnetlink::LinkMessageBuilder<LinkUnspec>,
    ) -> Result<(), NetlinkError> {
        let link = self.require_link(name).await?;
        let message = change(LinkUnspec::new_with_index(link.index)).build();
        self.handle
            .link()
            .set(message)
            .execute()
            .await
            .map_err(NetlinkError::request(format!(
                "{what} of {name} in {}",
                self.label
            )))
    }

    /// Set the MTU of link `name`.
    pub async fn set_mtu(&self, name: &str, mtu: u32) -> Result<(), NetlinkError> {
        self.set(name, "set MTU", |b| b.mtu(mtu)).await
    }

    /// Set the MAC address of link `name`.
    pub async fn set_mac(&self, name: &str, mac: MacAddr) -> Result<(), NetlinkError> {
        self.set(name, "set MAC", |b| b.address(mac.0.to_vec()))
            .await
    }

    /// Bring link `name` up.
    pub async fn set_up(&self, name: &str) -> Result<(), NetlinkError> {
        self.set(name, "bring up", |b| b.up()).await
    }

    /// Rename link `name` (it must be down) to `new_name`.
    pub async fn rename(&self, name: &str, new_name: &str) -> Result<(), NetlinkError> {
        check_name(new_name)?;
        self.set(name, &format!("rename to {new_name}"), |b| b.name(new_name))
            .await
    }

    /// Move link `name` into the namespace at `netns` (`/var/run/netns/<n>` or
    /// `/proc/<pid>/ns/net`). The link goes down and keeps its name.
    pub async fn move_to_netns(&self, name: &str, netns: &Path) -> Result<(), NetlinkError> {
        let target = netns::open(netns)?;
        let fd = target.as_raw_fd();
        // `target` stays open until the request has completed.
        let moved = self
            .set(name, &format!("move to {}", netns.display()), |b| {
                b.setns_by_fd(fd)
            })
            .await;
        drop(target);
        moved
    }

    /// Delete link `name` (for a veth, both ends go). Returns false if it did not exist.
    pub async fn delete_link(&self, name: &str) -> Result<bool, NetlinkError> {
        let Some(link) = self.link(name).await? else {
            return Ok(false);
        };
        match self.handle.link().del(link.index).execute().await {
            Ok(()) => Ok(true),
            Err(e) => {
                let err = NetlinkError::request(format!("delete link {name} in {}", self.label))(e);
                // Gone meanwhile (its peer was deleted): that is what we wanted.
                if err.errno() == Some(ENODEV) {
                    Ok(false)
                } else {
                    Err(err)
                }
            }
        }
    }

    /// The namespace label used in errors.
    pub fn label(&self) -> &str {
        &self.label
    }
}

/// Reject names the kernel would refuse, with a message that says why.
fn check_name(name: &str) -> Result<(), NetlinkError> {
    if name.is_empty() || name.len() > MAX_IFNAME_LEN || name.contains(['/', ' ', '\0']) {
        return Err(NetlinkError::Invalid {
            what: "interface name",
            problem: format!(
                "{name:?} must be 1 to {MAX_IFNAME_LEN} bytes without '/', spaces or NUL"
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_names_are_checked_before_asking_the_kernel() {
        assert!(check_name("eth0").is_ok());
        assert!(check_name("vvport65534").is_ok());
        assert!(check_name("").is_err());
        assert!(check_name("sixteen-chars-xx").is_err());
        assert!(check_name("a/b").is_err());
    }
}
