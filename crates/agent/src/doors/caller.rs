//! Who is at the other end of a door's connection: what the caps and budgets count by.

use std::net::IpAddr;

/// Who is at the other end of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Caller {
    /// A process of this host of user `uid` (on the Unix socket, `SO_PEERCRED`; over TCP, the owner of the
    /// peer's socket as the kernel says).
    Local {
        /// Its UID.
        uid: u32,
    },
    /// A process of this host over TCP whose user the kernel did not say: every such one is this one caller.
    LocalUnknown,
    /// A client on another host, by its address.
    Remote {
        /// Its address.
        ip: IpAddr,
    },
}
