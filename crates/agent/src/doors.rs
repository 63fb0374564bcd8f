//! The agent's two doors, served by hyper on one tokio runtime: the control API, HTTP/1.1 over the Unix socket
//! (the caller known by `SO_PEERCRED`), and the metrics and counters API over TCP. Every connection carries one
//! request and has a total deadline; a request's head and body have fixed caps; connections are served at once,
//! each on its own task, with a cap per caller and in total, so that an idle or slow client never delays another,
//! and root's connections (the CLI, the Slurm hooks) count apart and always find room.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::http::request::Parts;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{header, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

/// What one door admits.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest request body, in bytes (a larger one gets 413).
    pub max_body: usize,
    /// Time from accepting a connection to the end of its answer.
    pub deadline: Duration,
    /// Connections one unprivileged caller (a UID other than root's) may have open at once.
    pub per_caller: usize,
    /// Connections all unprivileged callers (and, on TCP, everyone) may have open at once.
    pub unprivileged: usize,
    /// Connections root may have open at once on the Unix socket.
    pub root: usize,
}

/// Largest request head (request line and headers) hyper buffers; a longer one gets 431 and the connection ends.
const MAX_HEAD: usize = 16 * 1024;

/// The control socket's limits: requests are small JSON objects.
pub const CONTROL: Limits =
    Limits { max_body: 64 * 1024, deadline: Duration::from_secs(10), per_caller: 8, unprivileged: 64, root: 256 };

/// The metrics door's limits: GET only, a scrape at a time per scraper.
pub const METRICS: Limits =
    Limits { max_body: 0, deadline: Duration::from_secs(10), per_caller: 64, unprivileged: 64, root: 0 };

/// Who is at the other end of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Caller {
    /// A local process of user `uid` (the Unix socket).
    Local {
        /// Its effective UID.
        uid: u32,
    },
    /// A client over TCP.
    Network,
}

/// What a door answers.
#[derive(Debug)]
pub struct Reply {
    /// HTTP status.
    pub status: StatusCode,
    /// `Content-Type`.
    pub content_type: &'static str,
    /// The body.
    pub body: Vec<u8>,
}

impl Reply {
    /// A plain-text answer (a newline is added).
    pub fn text(status: StatusCode, body: &str) -> Self {
        Self { status, content_type: "text/plain; charset=utf-8", body: format!("{body}\n").into_bytes() }
    }
}

/// A door's handler. It runs on a blocking thread of the runtime (it may wait for the daemon's answer).
pub type Handler = Arc<dyn Fn(Caller, &Parts, Bytes) -> Reply + Send + Sync>;

/// The open connections, per caller, for the caps.
#[derive(Default)]
struct Open(Mutex<HashMap<Caller, usize>>);

/// A place taken by one connection, given back when dropped.
struct Ticket(Arc<Open>, Caller);

impl Open {
    /// A place for a connection of `caller`, if the limits leave one.
    fn admit(self: &Arc<Self>, caller: Caller, limits: &Limits) -> Option<Ticket> {
        let mut open = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mine = open.get(&caller).copied().unwrap_or(0);
        let fits = if caller == (Caller::Local { uid: 0 }) {
            mine < limits.root
        } else {
            let unprivileged: usize =
                open.iter().filter(|(c, _)| **c != Caller::Local { uid: 0 }).map(|(_, n)| *n).sum();
            mine < limits.per_caller && unprivileged < limits.unprivileged
        };
        if !fits {
            return None;
        }
        *open.entry(caller).or_default() += 1;
        Some(Ticket(self.clone(), caller))
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut open = self.0 .0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(n) = open.get_mut(&self.1) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.1);
            }
        }
    }
}

/// The runtime both doors run on. Dropping it closes them.
pub struct Doors {
    runtime: tokio::runtime::Runtime,
}

impl Doors {
    /// A runtime of two threads, each started with `on_start` (the agent moves them to its real-time priority: a
    /// request held up behind the jobs would keep a Slurm prolog or a `lockstep run` waiting).
    pub fn new(on_start: impl Fn() + Send + Sync + 'static) -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .max_blocking_threads(16)
            .thread_name("lockstep-doors")
            .on_thread_start(on_start)
            .enable_all()
            .build()?;
        Ok(Self { runtime })
    }

    /// Serves `listener` (the control socket) with `handler` under `limits`.
    pub fn unix(
        &self,
        listener: std::os::unix::net::UnixListener,
        limits: Limits,
        handler: Handler,
    ) -> anyhow::Result<()> {
        listener.set_nonblocking(true)?;
        let _entered = self.runtime.enter();
        let listener = tokio::net::UnixListener::from_std(listener)?;
        let open = Arc::new(Open::default());
        self.runtime.spawn(async move {
            loop {
                let Some((stream, _)) = accepted(listener.accept().await, "control socket").await else { continue };
                // A caller whose credentials cannot be read is treated as nobody in particular: unprivileged.
                let uid = stream.peer_cred().map_or(u32::MAX, |c| c.uid());
                serve(stream, Caller::Local { uid }, &open, limits, handler.clone());
            }
        });
        Ok(())
    }

    /// Serves `listener` (the metrics address) with `handler` under `limits`; returns the address bound.
    pub fn tcp(&self, listener: std::net::TcpListener, limits: Limits, handler: Handler) -> anyhow::Result<SocketAddr> {
        listener.set_nonblocking(true)?;
        let bound = listener.local_addr()?;
        let _entered = self.runtime.enter();
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let open = Arc::new(Open::default());
        self.runtime.spawn(async move {
            loop {
                let Some((stream, _)) = accepted(listener.accept().await, "metrics").await else { continue };
                serve(stream, Caller::Network, &open, limits, handler.clone());
            }
        });
        Ok(bound)
    }
}

/// How long a door waits before accepting again when the agent or the system is out of descriptors: the waiting
/// connections stay queued in the kernel, and a loop that retried at once would spin at real-time priority and
/// starve the daemon's loop.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// The connection `result` holds; on an error, `None` after saying it (out of descriptors: once per episode) and
/// backing off for [`ACCEPT_BACKOFF`] when it is one of running out.
async fn accepted<T>(result: std::io::Result<T>, door: &str) -> Option<T> {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    match result {
        Ok(t) => {
            SAID.store(false, std::sync::atomic::Ordering::Relaxed);
            Some(t)
        }
        Err(e) => {
            let exhausted =
                matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM));
            if exhausted {
                if !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
                    crate::log::warning!("{door}: cannot accept a connection ({e}); retrying every 100 ms");
                }
                tokio::time::sleep(ACCEPT_BACKOFF).await;
            }
            None
        }
    }
}

/// Serves one connection on a task of its own, or refuses it at once (503) when its caller is over a cap.
fn serve<S>(stream: S, caller: Caller, open: &Arc<Open>, limits: Limits, handler: Handler)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let Some(ticket) = open.admit(caller, &limits) else {
        tokio::spawn(refuse(stream));
        return;
    };
    tokio::spawn(async move {
        let _ticket = ticket;
        connection(stream, caller, limits, handler).await;
    });
}

/// One connection, one request, served by hyper within the door's caps and deadline.
pub async fn connection<S>(stream: S, caller: Caller, limits: Limits, handler: Handler)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |request: Request<Incoming>| {
        let handler = handler.clone();
        async move { Ok::<_, Infallible>(answer(request, caller, limits.max_body, handler).await) }
    });
    let connection =
        http1::Builder::new().keep_alive(false).max_buf_size(MAX_HEAD).serve_connection(TokioIo::new(stream), service);
    // The deadline covers the whole exchange: a client that trickles its request is cut off with it.
    let _ = tokio::time::timeout(limits.deadline, connection).await;
}

/// The answer to a connection over its caller's cap, written without reading the request.
async fn refuse<S: AsyncWrite + Unpin>(mut stream: S) {
    const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 41\r\n\
                          Connection: close\r\n\r\ntoo many connections from you; try again\n";
    let _ = tokio::time::timeout(Duration::from_millis(100), stream.write_all(BUSY)).await;
}

/// Reads the body (within its cap) and runs the handler on a blocking thread.
async fn answer(
    request: Request<Incoming>,
    caller: Caller,
    max_body: usize,
    handler: Handler,
) -> Response<Full<Bytes>> {
    let (parts, body) = request.into_parts();
    let body = match Limited::new(body, max_body).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            return respond(Reply::text(StatusCode::PAYLOAD_TOO_LARGE, &format!("request body over {max_body} bytes")));
        }
        Err(e) => return respond(Reply::text(StatusCode::BAD_REQUEST, &format!("cannot read the request: {e}"))),
    };
    match tokio::task::spawn_blocking(move || handler(caller, &parts, body)).await {
        Ok(reply) => respond(reply),
        Err(_) => respond(Reply::text(StatusCode::INTERNAL_SERVER_ERROR, "the request failed")),
    }
}

fn respond(reply: Reply) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(reply.body)));
    *response.status_mut() = reply.status;
    if let Ok(value) = header::HeaderValue::from_str(reply.content_type) {
        response.headers_mut().insert(header::CONTENT_TYPE, value);
    }
    response
}
