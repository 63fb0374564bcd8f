//! The TCP sockets of a network namespace from the kernel's socket diagnostics (`NETLINK_SOCK_DIAG`, an
//! `inet_diag` dump of IPv4 and IPv6): each socket's inode, local port and owner, as binary records (no
//! `/proc/net/tcp` text to format and parse), and at most [`MOST_SOCKETS`] of them per dump.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Most sockets one dump reads (both families together): a namespace with more is matched on these only.
pub const MOST_SOCKETS: usize = 65_536;

/// A TCP socket as the dump gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Socket {
    /// Inode number (what `/proc/PID/fd/N` names as `socket:[N]`).
    pub inode: u64,
    /// Local port.
    pub port: u16,
    /// Owner (the user that made it).
    pub uid: u32,
}

/// What one dump read: the sockets, and whether there were more than it may read (the rest unread).
#[derive(Debug, Default)]
pub struct Dump {
    /// The sockets read.
    pub sockets: Vec<Socket>,
    /// Whether the dump stopped at the cap.
    pub capped: bool,
}

/// `SOCK_DIAG_BY_FAMILY`: the request type of an `inet_diag` dump.
const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// Length of `struct nlmsghdr`.
const NLMSG_HDR: usize = 16;
/// Length of `struct inet_diag_req_v2`.
const REQ_LEN: usize = 56;
/// Length of `struct inet_diag_msg` (its attributes follow, unread).
const MSG_LEN: usize = 72;
/// TCP states whose sockets have no inode (time-wait and embryonic connections): left out of the dump.
const NO_INODE: u32 = 1 << 6 | 1 << 3 | 1 << 12;

/// A socket-diagnostics socket in the calling thread's network namespace.
pub fn open() -> io::Result<OwnedFd> {
    // SAFETY: socket(2) with constant arguments; a non-negative return is a descriptor this process owns.
    let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, libc::NETLINK_SOCK_DIAG) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The TCP sockets (IPv4, then IPv6) of the namespace `diag` was opened in, at most `most` ([`MOST_SOCKETS`]).
/// A dump that stopped at the cap leaves answers unread: close `diag` after it.
pub fn tcp(diag: &OwnedFd, most: usize) -> io::Result<Dump> {
    let mut dump = Dump::default();
    for family in [libc::AF_INET, libc::AF_INET6] {
        if dump.capped {
            break;
        }
        send_request(diag, family as u8)?;
        read_dump(diag, &mut dump, most)?;
    }
    Ok(dump)
}

/// Asks for a dump of every TCP socket of `family` that has an inode.
fn send_request(diag: &OwnedFd, family: u8) -> io::Result<()> {
    let mut req = [0u8; NLMSG_HDR + REQ_LEN];
    req[0..4].copy_from_slice(&((NLMSG_HDR + REQ_LEN) as u32).to_ne_bytes());
    req[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    req[6..8].copy_from_slice(&((libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16).to_ne_bytes());
    // inet_diag_req_v2: family, protocol, extensions (none), padding, states; the socket id stays zero.
    req[NLMSG_HDR] = family;
    req[NLMSG_HDR + 1] = libc::IPPROTO_TCP as u8;
    req[NLMSG_HDR + 4..NLMSG_HDR + 8].copy_from_slice(&(!NO_INODE).to_ne_bytes());
    // SAFETY: send(2) of a buffer we own, to the kernel (a netlink socket's default peer).
    let sent = unsafe { libc::send(diag.as_raw_fd(), req.as_ptr().cast(), req.len(), 0) };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Reads one dump's answers into `dump` until its end, or until `dump` would hold more than `most` (the rest of
/// the answers are left unread).
fn read_dump(diag: &OwnedFd, dump: &mut Dump, most: usize) -> io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // SAFETY: recv(2) into a buffer we own, at most its length.
        let got = unsafe { libc::recv(diag.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if got < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        let mut rest = &buf[..got as usize];
        while rest.len() >= NLMSG_HDR {
            let len = u32::from_ne_bytes(rest[0..4].try_into().unwrap_or_default()) as usize;
            let kind = u16::from_ne_bytes(rest[4..6].try_into().unwrap_or_default());
            if len < NLMSG_HDR || len > rest.len() {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "a sock_diag answer of a bad length"));
            }
            match i32::from(kind) {
                libc::NLMSG_DONE => return Ok(()),
                libc::NLMSG_ERROR => {
                    let code = rest
                        .get(NLMSG_HDR..NLMSG_HDR + 4)
                        .map_or(0, |b| i32::from_ne_bytes(b.try_into().unwrap_or_default()));
                    return Err(io::Error::from_raw_os_error(-code));
                }
                _ => {
                    if let Some(socket) = parse(&rest[NLMSG_HDR..len]) {
                        if dump.sockets.len() >= most {
                            dump.capped = true;
                            return Ok(());
                        }
                        dump.sockets.push(socket);
                    }
                }
            }
            // Messages are aligned to 4 bytes.
            rest = rest.get(len.next_multiple_of(4)..).unwrap_or_default();
        }
    }
}

/// The socket an `inet_diag_msg` describes (one with inode 0 is none).
fn parse(msg: &[u8]) -> Option<Socket> {
    if msg.len() < MSG_LEN {
        return None;
    }
    // The source port is big-endian at 4, in the socket id; uid and inode at 64 and 68.
    let port = u16::from_be_bytes([msg[4], msg[5]]);
    let uid = u32::from_ne_bytes(msg[64..68].try_into().ok()?);
    let inode = u32::from_ne_bytes(msg[68..72].try_into().ok()?);
    (inode != 0).then_some(Socket { inode: u64::from(inode), port, uid })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn a_listening_socket_of_this_process_is_found_with_its_port_inode_and_owner() {
        let v4 = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let v6 = std::net::TcpListener::bind("[::1]:0").ok();
        let diag = open().unwrap();
        let dump = tcp(&diag, MOST_SOCKETS).unwrap();
        assert!(!dump.capped);
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() };
        for listener in std::iter::once(&v4).chain(v6.as_ref()) {
            let inode = std::fs::metadata(format!("/proc/self/fd/{}", listener.as_raw_fd())).unwrap().ino();
            let port = listener.local_addr().unwrap().port();
            let want = Socket { inode, port, uid };
            assert!(dump.sockets.contains(&want), "{want:?} not in {:?}", dump.sockets);
        }
    }

    #[test]
    fn a_dump_stops_at_its_cap_and_says_so() {
        let _a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let _b = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let dump = tcp(&open().unwrap(), 1).unwrap();
        assert_eq!(dump.sockets.len(), 1);
        assert!(dump.capped);
    }

    #[test]
    fn answers_too_short_or_without_inode_are_no_socket() {
        assert_eq!(parse(&[0; MSG_LEN - 1]), None);
        assert_eq!(parse(&[0; MSG_LEN]), None);
        let mut msg = [0u8; MSG_LEN];
        msg[4..6].copy_from_slice(&8080u16.to_be_bytes());
        msg[64..68].copy_from_slice(&65534u32.to_ne_bytes());
        msg[68..72].copy_from_slice(&42u32.to_ne_bytes());
        assert_eq!(parse(&msg), Some(Socket { inode: 42, port: 8080, uid: 65534 }));
    }
}
