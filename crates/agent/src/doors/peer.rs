//! Who is at the other end of a TCP connection: for a peer on this host, the user owning the peer's socket, asked
//! of the kernel with one `NETLINK_SOCK_DIAG` exact lookup of the connection's addresses (never a dump of every
//! socket). A peer the lookup does not find is on another host (or in another network namespace).

use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `SOCK_DIAG_BY_FAMILY` (linux/sock_diag.h): the message type of an `inet_diag` request and its answer.
const SOCK_DIAG_BY_FAMILY: u16 = 20;

/// `NLMSG_ERROR` (linux/netlink.h): an error (or, with 0, an acknowledgement) in answer to a request.
const NLMSG_ERROR: u16 = 2;

/// `INET_DIAG_NOCOOKIE`: an exact lookup by address, whatever the socket's cookie.
const NO_COOKIE: u32 = u32::MAX;

/// Length of `struct nlmsghdr`.
const HEADER: usize = 16;

/// Length of `struct inet_diag_req_v2` (family, protocol, extensions, padding, states, `inet_diag_sockid`).
const REQUEST: usize = 56;

/// Offset of `idiag_uid` in `struct inet_diag_msg` (four bytes, the 48 of the socket ID, three `u32`s).
const UID_AT: usize = 64;

/// A netlink socket for `sock_diag` lookups, one at a time.
pub struct SockDiag {
    socket: OwnedFd,
    seq: u32,
}

impl SockDiag {
    /// A socket for lookups (any user may make them).
    pub fn open() -> std::io::Result<Self> {
        // SAFETY: socket() with constant arguments; the descriptor is owned at once.
        let fd =
            unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, libc::NETLINK_SOCK_DIAG) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just made and nothing else owns it.
        Ok(Self { socket: unsafe { OwnedFd::from_raw_fd(fd) }, seq: 0 })
    }

    /// The UID owning the TCP socket on this host whose own address is `peer` and whose peer is `local` (the
    /// other end of an accepted connection from `peer` to `local`); `None` when there is none here (a peer on
    /// another host). A v4-mapped IPv6 address (a dual-stack listener's view of an IPv4 client) is looked up as
    /// IPv4, then as IPv6.
    pub fn owner(&mut self, local: SocketAddr, peer: SocketAddr) -> std::io::Result<Option<u32>> {
        let (l, p) = (local.ip().to_canonical(), peer.ip().to_canonical());
        if let (IpAddr::V4(l4), IpAddr::V4(p4)) = (l, p) {
            let four = |ip: std::net::Ipv4Addr| {
                let mut a = [0u8; 16];
                a[..4].copy_from_slice(&ip.octets());
                a
            };
            let found = self.lookup(libc::AF_INET as u8, (four(p4), peer.port()), (four(l4), local.port()))?;
            if found.is_some() || (local.is_ipv4() && peer.is_ipv4()) {
                return Ok(found);
            }
        }
        let six = |ip: IpAddr| match ip {
            IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
            IpAddr::V6(v6) => v6.octets(),
        };
        self.lookup(libc::AF_INET6 as u8, (six(peer.ip()), peer.port()), (six(local.ip()), local.port()))
    }

    /// One exact lookup of the TCP socket of `family` with own address `src` and peer `dst`.
    fn lookup(&mut self, family: u8, src: ([u8; 16], u16), dst: ([u8; 16], u16)) -> std::io::Result<Option<u32>> {
        self.seq = self.seq.wrapping_add(1);
        let mut message = Vec::with_capacity(HEADER + REQUEST);
        message.extend_from_slice(&((HEADER + REQUEST) as u32).to_ne_bytes());
        message.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        message.extend_from_slice(&(libc::NLM_F_REQUEST as u16).to_ne_bytes());
        message.extend_from_slice(&self.seq.to_ne_bytes());
        message.extend_from_slice(&0u32.to_ne_bytes());
        message.extend_from_slice(&[family, libc::IPPROTO_TCP as u8, 0, 0]);
        message.extend_from_slice(&u32::MAX.to_ne_bytes());
        message.extend_from_slice(&src.1.to_be_bytes());
        message.extend_from_slice(&dst.1.to_be_bytes());
        message.extend_from_slice(&src.0);
        message.extend_from_slice(&dst.0);
        message.extend_from_slice(&0u32.to_ne_bytes());
        message.extend_from_slice(&NO_COOKIE.to_ne_bytes());
        message.extend_from_slice(&NO_COOKIE.to_ne_bytes());
        // SAFETY: an all-zero sockaddr_nl is valid; the kernel's address is port 0.
        let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        kernel.nl_family = libc::AF_NETLINK as u16;
        // SAFETY: `message` and `kernel` are valid for the lengths given.
        let sent = unsafe {
            libc::sendto(
                self.socket.as_raw_fd(),
                message.as_ptr().cast(),
                message.len(),
                0,
                (&raw const kernel).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        if sent < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // The kernel answers within the send: the answer is queued already (waiting would only hide a fault).
        let mut answer = [0u8; 1024];
        loop {
            // SAFETY: `answer` is valid for its length.
            let n = unsafe {
                libc::recv(self.socket.as_raw_fd(), answer.as_mut_ptr().cast(), answer.len(), libc::MSG_DONTWAIT)
            };
            let n = usize::try_from(n).map_err(|_| std::io::Error::last_os_error())?;
            match self.parse(&answer[..n])? {
                Parsed::Owner(uid) => return Ok(Some(uid)),
                Parsed::NoSuchSocket => return Ok(None),
                Parsed::Stale => {}
            }
        }
    }

    /// What `answer` says of this lookup.
    fn parse(&self, answer: &[u8]) -> std::io::Result<Parsed> {
        let field = |at: usize| -> std::io::Result<u32> {
            answer
                .get(at..at + 4)
                .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
                .ok_or_else(|| std::io::Error::other("sock_diag: a short answer"))
        };
        let kind = field(4)? & 0xffff;
        if field(8)? != self.seq {
            return Ok(Parsed::Stale);
        }
        if kind == u32::from(NLMSG_ERROR) {
            let errno = -(field(HEADER)? as i32);
            return match errno {
                0 | libc::ENOENT => Ok(Parsed::NoSuchSocket),
                e => Err(std::io::Error::from_raw_os_error(e)),
            };
        }
        if kind != u32::from(SOCK_DIAG_BY_FAMILY) {
            return Err(std::io::Error::other(format!("sock_diag: an answer of type {kind}")));
        }
        Ok(Parsed::Owner(field(HEADER + UID_AT)?))
    }
}

/// What one answer of the kernel says.
enum Parsed {
    /// The socket is there, of this UID.
    Owner(u32),
    /// No such socket on this host.
    NoSuchSocket,
    /// An answer to an earlier lookup (one given up on), to read past.
    Stale,
}

#[cfg(test)]
mod tests {
    use super::SockDiag;

    /// A loopback connection's peer is this process's socket: its owner is this process's UID; an address no
    /// socket has is no one's.
    #[test]
    fn a_loopback_peer_is_owned_by_this_process_and_an_unknown_one_by_no_one() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, peer) = listener.accept().unwrap();
        assert_eq!(peer, client.local_addr().unwrap());
        let mut diag = SockDiag::open().unwrap();
        // SAFETY: geteuid cannot fail.
        let me = unsafe { libc::geteuid() };
        assert_eq!(diag.owner(accepted.local_addr().unwrap(), peer).unwrap(), Some(me));
        let nowhere = std::net::SocketAddr::new(peer.ip(), 1);
        assert_eq!(diag.owner(accepted.local_addr().unwrap(), nowhere).unwrap(), None);
        // IPv6 loopback, where this host has it.
        if let Ok(six) = std::net::TcpListener::bind("[::1]:0") {
            let client = std::net::TcpStream::connect(six.local_addr().unwrap()).unwrap();
            let (accepted, peer) = six.accept().unwrap();
            assert_eq!(peer, client.local_addr().unwrap());
            assert_eq!(diag.owner(accepted.local_addr().unwrap(), peer).unwrap(), Some(me));
        }
        drop((client, accepted));
    }
}
