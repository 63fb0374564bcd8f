//! The HTTP client of the agent's two doors: the control API (HTTP/1.1 over the agent's Unix socket, the way
//! podman's and Docker's APIs are served) and the metrics and counters API over TCP. One request per connection,
//! a total deadline, and a cap on the size of the answer; the parsing is hyper's.

use std::path::Path;
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper::{header, Method, Request};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};

/// Largest answer read (a status table of thousands of jobs fits many times over).
pub const MAX_ANSWER: usize = 16 << 20;

/// Where a request goes.
#[derive(Clone, Copy, Debug)]
pub enum Target<'a> {
    /// An agent's control socket.
    Unix(&'a Path),
    /// An agent's metrics address, `HOST:PORT`.
    Tcp(&'a str),
}

/// What came back.
#[derive(Clone, Debug)]
pub struct Answer {
    /// HTTP status code.
    pub status: u16,
    /// The body.
    pub body: Vec<u8>,
    /// How long the server asked the client to wait before asking again (`Retry-After` in seconds), if it did.
    pub retry_after: Option<Duration>,
}

/// Why a request got no answer.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// Nothing listens there (or the address does not resolve).
    #[error("cannot connect: {0}")]
    Connect(std::io::Error),
    /// No complete answer within the deadline.
    #[error("no answer within {0:?}")]
    Deadline(Duration),
    /// The process listening on the Unix socket (its PID) is stopped (SIGSTOP, Ctrl-Z): the kernel
    /// takes connections into its backlog, but nothing will answer until it is continued.
    #[error("its process {0} is stopped")]
    Stopped(i32),
    /// The peer closed the connection before answering, having read what was sent or before all of it was.
    #[error("the connection closed before an answer")]
    Unanswered,
    /// The exchange failed (the peer reset it, sent something that is not HTTP, or too much).
    #[error("{0}")]
    Exchange(String),
}

/// Sends one request (`body` for POST, none for GET) and reads the answer, all within `deadline`.
pub fn request(target: Target<'_>, path: &str, body: Option<Vec<u8>>, deadline: Duration) -> Result<Answer, HttpError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| HttpError::Exchange(format!("cannot start the client: {e}")))?;
    runtime.block_on(async {
        tokio::time::timeout(deadline, async {
            match target {
                Target::Unix(socket) => {
                    let io = tokio::net::UnixStream::connect(socket).await.map_err(HttpError::Connect)?;
                    // The kernel accepts into a stopped listener's backlog: say so now, not at the deadline, and
                    // as soon as it stops should that be while it answers.
                    let peer = io.peer_cred().ok().and_then(|c| c.pid());
                    if let Some(pid) = peer.filter(|&p| stopped(p)) {
                        return Err(HttpError::Stopped(pid));
                    }
                    // Stopped at two looks in a row: a request it was already carrying out when it stopped
                    // for a moment (a signal's default action undone at once) is not given up on.
                    let watch = async {
                        let mut before = false;
                        loop {
                            tokio::time::sleep(STOPPED_CHECK).await;
                            let now = peer.is_some_and(stopped);
                            if let (true, true, Some(pid)) = (before, now, peer) {
                                return pid;
                            }
                            before = now;
                        }
                    };
                    tokio::select! {
                        answer = exchange(io, "localhost", path, body) => answer,
                        pid = watch => Err(HttpError::Stopped(pid)),
                    }
                }
                Target::Tcp(addr) => {
                    let io = tokio::net::TcpStream::connect(addr).await.map_err(HttpError::Connect)?;
                    exchange(io, addr, path, body).await
                }
            }
        })
        .await
        .map_err(|_| HttpError::Deadline(deadline))?
    })
}

/// How often a request waiting on a Unix socket looks whether the process listening there has been stopped.
const STOPPED_CHECK: Duration = Duration::from_millis(250);

/// Whether process `pid` is stopped by a signal (state `T` in /proc/PID/stat): it takes no request until it is
/// continued. A process stopped by a debugger that traces it (`t`) is not counted: the debugger lets it go on.
fn stopped(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next()))
        .is_some_and(|state| state == 'T')
}

/// One request over `io`, one answer back.
async fn exchange<I>(io: I, host: &str, path: &str, body: Option<Vec<u8>>) -> Result<Answer, HttpError>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let failed = |e: &dyn std::fmt::Display| HttpError::Exchange(e.to_string());
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(io)).await.map_err(|e| failed(&e))?;
    let driver = tokio::spawn(connection);
    let request = Request::builder()
        .method(if body.is_some() { Method::POST } else { Method::GET })
        .uri(path)
        .header(header::HOST, host)
        .header(header::CONNECTION, "close")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .map_err(|e| failed(&e))?;
    let response = sender.send_request(request).await.map_err(|e| {
        // Closed before the answer: while it came (incomplete), or before the request was written (hyper drops it
        // as canceled), as an agent does with a client too slow to send its request.
        if e.is_incomplete_message() || e.is_canceled() {
            HttpError::Unanswered
        } else {
            failed(&e)
        }
    })?;
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get(header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let body = Limited::new(response.into_body(), MAX_ANSWER).collect().await.map_err(|e| failed(&e))?.to_bytes();
    driver.abort();
    Ok(Answer { status, body: body.to_vec(), retry_after })
}
