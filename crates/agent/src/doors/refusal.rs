//! Refusing a connection in the accept loop itself, at the least cost there is: no task, no timer, no
//! registration with the runtime's poller, no buffer set up for it. What the client sent already is read (one
//! non-blocking read), the short answer is written (one non-blocking write) and the connection closed, so that the
//! client reads the answer and an end, never a reset (a socket closed with unread data resets its peer). A client
//! whose request has not come yet gets the answer and the end of the agent's writing at once; its connection is
//! kept a moment (at most [`LINGER`], at most [`KEPT`] of them) for its request to come, then read and closed.

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// How long a refused connection whose request had not come yet is kept, its answer written, for the request.
pub const LINGER: Duration = Duration::from_millis(100);

/// Refused connections kept at once (each holds a descriptor): past it, the one kept longest is closed first.
const KEPT: usize = 64;

/// What the client may have sent that is read before closing (a request head's cap): the rest, if any, resets it.
const READ: usize = 16 * 1024;

/// One door's refused connections kept for their request, and the buffer their requests are read into.
pub struct Refusals {
    kept: VecDeque<(OwnedFd, Instant)>,
    buffer: Box<[u8]>,
}

impl Refusals {
    /// None kept.
    pub fn new() -> Self {
        Self { kept: VecDeque::new(), buffer: vec![0; READ].into_boxed_slice() }
    }

    /// Answers `answer` on `socket` (a connection just accepted) and closes it, or, when the client's request has
    /// not come yet, shuts the agent's writing after the answer and keeps it until [`LINGER`] after `now`.
    pub fn refuse(&mut self, socket: OwnedFd, answer: &[u8], now: Instant) {
        let came = self.read(&socket);
        // SAFETY: `answer` is valid for its length; a write that would block, or fails, leaves the client an end.
        unsafe {
            libc::send(
                socket.as_raw_fd(),
                answer.as_ptr().cast(),
                answer.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if came {
            return;
        }
        // SAFETY: shutdown on an owned socket.
        unsafe { libc::shutdown(socket.as_raw_fd(), libc::SHUT_WR) };
        if self.kept.len() >= KEPT {
            if let Some((oldest, _)) = self.kept.pop_front() {
                self.read(&oldest);
            }
        }
        self.kept.push_back((socket, now + LINGER));
    }

    /// When the connection kept longest is due to be closed, if one is kept.
    pub fn due(&self) -> Option<Instant> {
        self.kept.front().map(|(_, at)| *at)
    }

    /// Closes the kept connections due by `now`, each after reading what its client sent.
    pub fn close_due(&mut self, now: Instant) {
        while self.kept.front().is_some_and(|(_, at)| *at <= now) {
            if let Some((socket, _)) = self.kept.pop_front() {
                self.read(&socket);
            }
        }
    }

    /// Reads what the client of `socket` sent (up to [`READ`] bytes), without waiting: whether its request (or
    /// its end, or an error) had come.
    fn read(&mut self, socket: &OwnedFd) -> bool {
        // SAFETY: `buffer` is valid for its length.
        let n = unsafe {
            libc::recv(socket.as_raw_fd(), self.buffer.as_mut_ptr().cast(), self.buffer.len(), libc::MSG_DONTWAIT)
        };
        n != -1 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::WouldBlock
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;
    use std::time::Instant;

    use super::{Refusals, LINGER};

    /// A client that sent its request reads the answer and an end; one that sends it later reads the answer and
    /// an end at once, its request is read (no reset) and its connection closed once due.
    #[test]
    fn the_answer_and_an_end_whether_the_request_came_or_not() {
        let mut refusals = Refusals::new();
        let now = Instant::now();
        let (mut early, agents) = UnixStream::pair().unwrap();
        early.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        refusals.refuse(agents.into(), b"no\n", now);
        assert_eq!(refusals.due(), None, "a connection whose request came is closed at once");
        let mut got = String::new();
        early.read_to_string(&mut got).unwrap();
        assert_eq!(got, "no\n");

        let (mut late, agents) = UnixStream::pair().unwrap();
        refusals.refuse(agents.into(), b"no\n", now);
        assert_eq!(refusals.due(), Some(now + LINGER));
        let mut got = String::new();
        late.read_to_string(&mut got).unwrap();
        assert_eq!(got, "no\n", "the answer and an end before the request");
        late.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        refusals.close_due(now);
        assert_eq!(refusals.due(), Some(now + LINGER), "kept until due");
        refusals.close_due(now + LINGER);
        assert_eq!(refusals.due(), None);
        let mut rest = Vec::new();
        assert_eq!(late.read_to_end(&mut rest).unwrap(), 0, "closed without a reset");
        assert!(late.write_all(b"more").is_err(), "closed");
    }
}
