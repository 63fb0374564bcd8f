//! Refusing a connection in the accept loop itself, at the least cost there is: no task, no timer of its own, no
//! registration with the runtime's poller. A refused connection is held for [`PACE`] (at most [`KEPT`] at once,
//! the oldest answered first past that), then what the client sent is read (one non-blocking read), the short
//! answer written (one non-blocking write) and the connection closed, so that the client reads the answer and an
//! end, never a reset (a socket closed with unread data resets its peer). The pause is the flooder's: a caller who
//! asks in a loop waits asleep for each refusal, and the refusals held are answered together, on one wake-up. A
//! client whose request has not come by then gets the answer and the end of the agent's writing; its connection
//! is kept [`LINGER`] more for its request to come, then read and closed.

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// How long a refused connection is held before its answer.
pub const PACE: Duration = Duration::from_millis(50);

/// How long a refused connection whose request had not come when it was answered is kept for the request.
pub const LINGER: Duration = Duration::from_millis(100);

/// Refused connections held at once (each holds a descriptor): past it, the one held longest is answered first.
const KEPT: usize = 64;

/// Refusals due within this much of one another are answered together.
const TOGETHER: Duration = Duration::from_millis(2);

/// What the client may have sent that is read before closing (a request head's cap): the rest, if any, resets it.
const READ: usize = 16 * 1024;

/// A refused connection held.
struct Held {
    socket: OwnedFd,
    /// The answer, until written.
    answer: Option<Box<[u8]>>,
    /// When it is answered (or, answered, closed).
    due: Instant,
}

/// One door's refused connections held, and the buffer their requests are read into.
pub struct Refusals {
    held: VecDeque<Held>,
    buffer: Box<[u8]>,
}

impl Refusals {
    /// None held.
    pub fn new() -> Self {
        Self { held: VecDeque::new(), buffer: vec![0; READ].into_boxed_slice() }
    }

    /// Holds `socket` (a connection just accepted, at `now`) to be answered `answer` and closed [`PACE`] later.
    pub fn refuse(&mut self, socket: OwnedFd, answer: &[u8], now: Instant) {
        if self.held.len() >= KEPT {
            if let Some(oldest) = self.held.pop_front() {
                self.settle(oldest, None);
            }
        }
        self.held.push_back(Held { socket, answer: Some(answer.into()), due: now + PACE });
    }

    /// When the connection held longest is due, if one is held.
    pub fn due(&self) -> Option<Instant> {
        self.held.front().map(|h| h.due)
    }

    /// Answers and closes the connections held that are due by `now` (or nearly).
    pub fn answer_due(&mut self, now: Instant) {
        let by = now + TOGETHER;
        let mut settled = 0;
        let due = self.held.iter().take_while(|h| h.due <= by).count();
        while settled < due {
            if let Some(held) = self.held.pop_front() {
                self.settle(held, Some(now));
            }
            settled += 1;
        }
    }

    /// Answers `held` if not yet and closes it, or, if its request has not come and `now` is given, keeps it
    /// [`LINGER`] from `now`.
    fn settle(&mut self, mut held: Held, now: Option<Instant>) {
        let came = self.read(&held.socket);
        let Some(answer) = held.answer.take() else { return };
        // SAFETY: `answer` is valid for its length; a write that would block, or fails, leaves the client an end.
        unsafe {
            libc::send(
                held.socket.as_raw_fd(),
                answer.as_ptr().cast(),
                answer.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        let Some(now) = now.filter(|_| !came) else { return };
        // SAFETY: shutdown on an owned socket.
        unsafe { libc::shutdown(held.socket.as_raw_fd(), libc::SHUT_WR) };
        held.due = now + LINGER;
        // Kept behind the ones held: a refusal held later is due later still.
        let at = self.held.partition_point(|h| h.due <= held.due);
        self.held.insert(at, held);
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

    use super::{Refusals, LINGER, PACE};

    /// A refused client is answered after the pause: one that sent its request reads the answer and an end; one
    /// that sends it later reads the answer and an end, its request is read (no reset) and its connection closed
    /// once due.
    #[test]
    fn the_answer_and_an_end_after_the_pause_whether_the_request_came_or_not() {
        let mut refusals = Refusals::new();
        let now = Instant::now();
        let (mut early, agents) = UnixStream::pair().unwrap();
        early.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        refusals.refuse(agents.into(), b"no\n", now);
        assert_eq!(refusals.due(), Some(now + PACE));
        refusals.answer_due(now);
        assert_eq!(refusals.due(), Some(now + PACE), "held for the pause");
        early.set_nonblocking(true).unwrap();
        assert!(early.read(&mut [0; 8]).is_err(), "nothing answered during the pause");
        early.set_nonblocking(false).unwrap();
        refusals.answer_due(now + PACE);
        assert_eq!(refusals.due(), None, "a connection whose request came is closed once answered");
        let mut got = String::new();
        early.read_to_string(&mut got).unwrap();
        assert_eq!(got, "no\n");

        let (mut late, agents) = UnixStream::pair().unwrap();
        refusals.refuse(agents.into(), b"no\n", now);
        refusals.answer_due(now + PACE);
        assert_eq!(refusals.due(), Some(now + PACE + LINGER));
        let mut got = String::new();
        late.read_to_string(&mut got).unwrap();
        assert_eq!(got, "no\n", "the answer and an end before the request");
        late.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        refusals.answer_due(now + PACE + LINGER);
        assert_eq!(refusals.due(), None);
        let mut rest = Vec::new();
        assert_eq!(late.read_to_end(&mut rest).unwrap(), 0, "closed without a reset");
        assert!(late.write_all(b"more").is_err(), "closed");
    }
}
