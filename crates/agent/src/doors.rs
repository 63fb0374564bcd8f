//! The agent's two doors, served by hyper on one tokio runtime at normal priority: the control API, HTTP/1.1
//! over the Unix socket (the caller known by `SO_PEERCRED`), and the metrics and counters API over TCP (a caller
//! on this host known by the owner of its socket, `sock_diag`; one on another by its address). Every connection
//! carries one request and has a short deadline for its head and a total one; a request's head and body have
//! fixed caps; connections are served at once, each on its own task, with a cap per caller and in total, so that
//! an idle or slow client never delays another; root's connections (the CLI, the Slurm hooks) and the named
//! scrapers' count apart and always find room. Every other caller has a budget of requests and of the agent's CPU
//! they take (`budget`), and a spare descriptor lets a door answer "busy" at once when descriptors run out
//! (`spare`). Every refusal is an immediate answer, never a held connection.

mod budget;
mod caller;
mod peer;
mod spare;

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::http::request::Parts;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{header, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

pub use budget::Rate;
use budget::{thread_cpu, Budgets};
pub use caller::Caller;
use spare::Spare;

/// What one door admits.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest request body, in bytes (a larger one gets 413).
    pub max_body: usize,
    /// Time from accepting a connection to the end of its request head: a client that sends it slowly, or not at
    /// all, is cut off then, and its place is free again.
    pub head: Duration,
    /// Time from accepting a connection to the end of its answer.
    pub deadline: Duration,
    /// Connections one ordinary caller (not a privileged one) may have open at once.
    pub per_caller: usize,
    /// Connections all ordinary callers may have open at once.
    pub unprivileged: usize,
    /// Connections the privileged callers (root on the Unix socket; the named scrapers, root's among them, on
    /// TCP) may have open at once: they count apart, and always find room while they are under it.
    pub privileged: usize,
    /// What each ordinary caller may ask: requests, and the agent's CPU their handlers take (privileged callers
    /// are not budgeted).
    pub rate: Rate,
}

/// Largest request head (request line and headers) hyper buffers; a longer one gets 431 and the connection ends.
const MAX_HEAD: usize = 16 * 1024;

/// What an ordinary caller may ask of either door: a burst of 20 requests, then 10 a second, each millisecond
/// of the agent's CPU a request takes counting as one more.
pub const RATE: Rate = Rate { burst: 20.0, per_second: 10.0 };

/// The control socket's limits: requests are small JSON objects.
pub const CONTROL: Limits = Limits {
    max_body: 64 * 1024,
    head: Duration::from_secs(2),
    deadline: Duration::from_secs(10),
    per_caller: 8,
    unprivileged: 64,
    privileged: 256,
    rate: RATE,
};

/// The metrics door's limits: GET only, a scrape at a time per scraper.
pub const METRICS: Limits = Limits {
    max_body: 0,
    head: Duration::from_secs(2),
    deadline: Duration::from_secs(10),
    per_caller: 4,
    unprivileged: 64,
    privileged: 16,
    rate: RATE,
};

/// The metrics door's named scrapers: they count apart from every other caller, as root does on the control
/// socket, so that no other caller can take their room. Root (UID 0) on this host is always one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scrapers {
    /// Users of this host, by UID.
    pub uids: Vec<u32>,
    /// Hosts, by address (a peer on another host only: one on this host is named by its user).
    pub ips: Vec<IpAddr>,
}

impl Scrapers {
    /// Whether `caller` is one of them.
    pub fn names(&self, caller: Caller) -> bool {
        match caller {
            Caller::Local { uid } => uid == 0 || self.uids.contains(&uid),
            Caller::LocalUnknown => false,
            Caller::Remote { ip } => self.ips.iter().any(|n| n.to_canonical() == ip.to_canonical()),
        }
    }
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

/// A door's handler. It runs on a blocking thread of the runtime (it may wait for the daemon's answer), at
/// normal priority as every thread of the doors.
pub type Handler = Arc<dyn Fn(Caller, &Parts, Bytes) -> Reply + Send + Sync>;

/// One door: its limits, who is privileged there, its open connections and its callers' budgets.
struct Door {
    /// Its name in the log.
    name: &'static str,
    limits: Limits,
    privileged: Box<dyn Fn(Caller) -> bool + Send + Sync>,
    open: Mutex<HashMap<Caller, usize>>,
    budgets: Budgets,
    handler: Handler,
    spare: Spare,
}

/// A place taken by one connection, given back when dropped.
struct Ticket(Arc<Door>, Caller);

impl Door {
    fn new(
        name: &'static str,
        limits: Limits,
        privileged: Box<dyn Fn(Caller) -> bool + Send + Sync>,
        handler: Handler,
    ) -> Arc<Self> {
        Arc::new(Self {
            name,
            limits,
            privileged,
            open: Mutex::default(),
            budgets: Budgets::new(limits.rate),
            handler,
            spare: Spare::new(name),
        })
    }

    /// Takes a request's token from `caller`'s budget (a privileged caller has none to take): `Err` with how long
    /// until it has one.
    fn take(&self, caller: Caller) -> Result<(), Duration> {
        if (self.privileged)(caller) {
            return Ok(());
        }
        self.budgets.take(caller, Instant::now())
    }

    /// A place for a connection of `caller`, if the limits leave one.
    fn admit(self: &Arc<Self>, caller: Caller) -> Option<Ticket> {
        let mut open = self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mine = open.get(&caller).copied().unwrap_or(0);
        let privileged = (self.privileged)(caller);
        let together: usize = open.iter().filter(|(c, _)| (self.privileged)(**c) == privileged).map(|(_, n)| *n).sum();
        let fits = if privileged {
            together < self.limits.privileged
        } else {
            mine < self.limits.per_caller && together < self.limits.unprivileged
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
        let mut open = self.0.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(n) = open.get_mut(&self.1) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.1);
            }
        }
    }
}

/// The runtime both doors run on, at normal priority (their work is a user's, a scraper's or root's request,
/// never a slot switch). Dropping it closes them.
pub struct Doors {
    runtime: tokio::runtime::Runtime,
}

impl Doors {
    /// A runtime of two threads and up to 16 for handlers.
    pub fn new() -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .max_blocking_threads(16)
            .thread_name("lockstep-doors")
            .enable_all()
            .build()?;
        Ok(Self { runtime })
    }

    /// Serves `listener` (the control socket) with `handler` under `limits`; root counts apart there.
    pub fn unix(
        &self,
        listener: std::os::unix::net::UnixListener,
        limits: Limits,
        handler: Handler,
    ) -> anyhow::Result<()> {
        listener.set_nonblocking(true)?;
        let _entered = self.runtime.enter();
        let listener = tokio::net::UnixListener::from_std(listener)?;
        let is_root = |c: Caller| c == Caller::Local { uid: 0 };
        let door = Door::new("control socket", limits, Box::new(is_root), handler);
        self.runtime.spawn(async move {
            // A caller whose credentials cannot be read is treated as nobody in particular: unprivileged.
            let caller = |stream: &tokio::net::UnixStream| Caller::Local {
                uid: stream.peer_cred().map_or(u32::MAX, |c| c.uid()),
            };
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => {
                        door.spare.ok();
                        let caller = caller(&stream);
                        serve(stream, caller, &door, None);
                    }
                    Err(e) => {
                        if let Some(room) = door.spare.out(&e).await {
                            if let Ok((stream, _)) = listener.accept().await {
                                let caller = caller(&stream);
                                match room.settle(&door.spare) {
                                    Some(room) => serve_or_refuse(stream, caller, &door, room).await,
                                    None => serve(stream, caller, &door, None),
                                }
                            }
                        }
                    }
                }
            }
        });
        Ok(())
    }

    /// Serves `listener` (the metrics address) with `handler` under `limits`, `scrapers` counting apart; returns
    /// the address bound.
    pub fn tcp(
        &self,
        listener: std::net::TcpListener,
        limits: Limits,
        scrapers: Scrapers,
        handler: Handler,
    ) -> anyhow::Result<SocketAddr> {
        listener.set_nonblocking(true)?;
        let bound = listener.local_addr()?;
        let _entered = self.runtime.enter();
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let door = Door::new("metrics", limits, Box::new(move |c| scrapers.names(c)), handler);
        let mut diag = peer::SockDiag::open();
        if let Err(e) = &diag {
            crate::log::warning!(
                "metrics: cannot ask the kernel who connects from this host ({e}); every local client counts as \
                 one caller, root's scrapes too"
            );
        }
        self.runtime.spawn(async move {
            let mut caller = |stream: &tokio::net::TcpStream, peer: SocketAddr| match &mut diag {
                Ok(diag) => tcp_caller(diag, stream, peer),
                Err(_) if local(stream, peer) => Caller::LocalUnknown,
                Err(_) => Caller::Remote { ip: peer.ip().to_canonical() },
            };
            loop {
                match listener.accept().await {
                    Ok((stream, peer)) => {
                        door.spare.ok();
                        let caller = caller(&stream, peer);
                        serve(stream, caller, &door, None);
                    }
                    Err(e) => {
                        if let Some(room) = door.spare.out(&e).await {
                            if let Ok((stream, peer)) = listener.accept().await {
                                let caller = caller(&stream, peer);
                                match room.settle(&door.spare) {
                                    Some(room) => serve_or_refuse(stream, caller, &door, room).await,
                                    None => serve(stream, caller, &door, None),
                                }
                            }
                        }
                    }
                }
            }
        });
        Ok(bound)
    }
}

/// Whether the TCP peer `peer` of `stream` is on this host: loopback, or the very address it reached.
fn local(stream: &tokio::net::TcpStream, peer: SocketAddr) -> bool {
    let ip = peer.ip().to_canonical();
    ip.is_loopback() || stream.local_addr().is_ok_and(|l| l.ip().to_canonical() == ip)
}

/// Who is at the other end of `stream`, from `peer`: the user owning the peer's socket when it is on this host
/// (`sock_diag`), else its address; a peer on this host whose owner the kernel does not say is
/// [`Caller::LocalUnknown`].
fn tcp_caller(diag: &mut peer::SockDiag, stream: &tokio::net::TcpStream, peer: SocketAddr) -> Caller {
    let owner = stream.local_addr().map(|l| diag.owner(l, peer));
    match owner {
        Ok(Ok(Some(uid))) => Caller::Local { uid },
        Ok(Ok(None)) if !local(stream, peer) => Caller::Remote { ip: peer.ip().to_canonical() },
        Ok(Ok(None)) => Caller::LocalUnknown,
        Ok(Err(e)) | Err(e) => {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| crate::log::warning!("metrics: cannot ask the kernel who connects ({e})"));
            if local(stream, peer) {
                Caller::LocalUnknown
            } else {
                Caller::Remote { ip: peer.ip().to_canonical() }
            }
        }
    }
}

/// Serves one connection on a task of its own, or refuses it at once (503) when its caller is over a cap;
/// `room` (the spare descriptor's place, lent) is given back when it ends.
fn serve<S>(stream: S, caller: Caller, door: &Arc<Door>, room: Option<spare::Room>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    // Over the budget: refused before hyper or a handler sees the connection (the cheapest answer there is).
    if let Err(wait) = door.take(caller) {
        let seconds = wait.as_secs_f64().ceil().max(1.0) as u64;
        let why = format!("too many requests from you to the {}; ask again in {seconds} s", door.name);
        tokio::spawn(async move {
            refuse(stream, StatusCode::TOO_MANY_REQUESTS, &why, Some(seconds)).await;
            drop(room);
        });
        return;
    }
    let Some(ticket) = door.admit(caller) else {
        tokio::spawn(async move {
            refuse(stream, StatusCode::SERVICE_UNAVAILABLE, "too many connections from you; try again", None).await;
            drop(room);
        });
        return;
    };
    let door = door.clone();
    tokio::spawn(async move {
        let _ticket = ticket;
        let _room = room;
        let limits = door.limits;
        let handler = door.handler.clone();
        exchange(stream, caller, limits, handler, Some(door)).await;
    });
}

/// A connection accepted in the spare descriptor's place while the agent is out of descriptors: a privileged
/// caller (root) is served in it, any other told "busy" at once; the place goes back to the spare after.
async fn serve_or_refuse<S>(stream: S, caller: Caller, door: &Arc<Door>, room: spare::Room)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    if (door.privileged)(caller) {
        serve(stream, caller, door, Some(room));
    } else {
        refuse(stream, StatusCode::SERVICE_UNAVAILABLE, "the agent is busy (out of descriptors); try again", None)
            .await;
        drop(room);
    }
}

/// One connection, one request, served by hyper within the door's caps and deadlines (the fuzz targets' entry:
/// no budget).
pub async fn connection<S>(stream: S, caller: Caller, limits: Limits, handler: Handler)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    exchange(stream, caller, limits, handler, None).await;
}

/// One connection, one request: its caller's budget taken from `door`'s when it has one (and is not
/// privileged there).
async fn exchange<S>(stream: S, caller: Caller, limits: Limits, handler: Handler, door: Option<Arc<Door>>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let budgeted = door.filter(|d| !(d.privileged)(caller));
    let service = service_fn(move |request: Request<Incoming>| {
        let (handler, budgeted) = (handler.clone(), budgeted.clone());
        async move { Ok::<_, Infallible>(answer(request, caller, limits.max_body, handler, budgeted).await) }
    });
    let connection = http1::Builder::new()
        .keep_alive(false)
        .max_buf_size(MAX_HEAD)
        .timer(TokioTimer::new())
        .header_read_timeout(limits.head)
        .serve_connection(TokioIo::new(stream), service);
    // The deadline covers the whole exchange: a client that trickles its request is cut off with it.
    let _ = tokio::time::timeout(limits.deadline, connection).await;
}

/// An answer given without parsing the request (a refusal): `status`, one line of text, and `Retry-After` seconds
/// if given. What the client sent already (within 100 ms, up to 16 KiB) is read first, so that the answer is not
/// lost to a reset or a broken pipe on the client's side.
async fn refuse<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    status: StatusCode,
    why: &str,
    retry_after: Option<u64>,
) {
    let mut sent = vec![0u8; MAX_HEAD];
    let _ = tokio::time::timeout(Duration::from_millis(100), stream.read(&mut sent)).await;
    let retry = retry_after.map(|s| format!("Retry-After: {s}\r\n")).unwrap_or_default();
    let answer = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n{retry}Connection: \
         close\r\n\r\n{why}\n",
        why.len() + 1
    );
    let _ = tokio::time::timeout(Duration::from_millis(100), stream.write_all(answer.as_bytes())).await;
}

/// Reads the body (within its cap) and runs the handler on a blocking thread; when `budgeted` (the request's
/// token was taken from the caller's budget there as it was accepted), the CPU the handler took is charged to it.
async fn answer(
    request: Request<Incoming>,
    caller: Caller,
    max_body: usize,
    handler: Handler,
    budgeted: Option<Arc<Door>>,
) -> Response<Full<Bytes>> {
    let (parts, body) = request.into_parts();
    let body = match Limited::new(body, max_body).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            return respond(Reply::text(StatusCode::PAYLOAD_TOO_LARGE, &format!("request body over {max_body} bytes")));
        }
        Err(e) => return respond(Reply::text(StatusCode::BAD_REQUEST, &format!("cannot read the request: {e}"))),
    };
    let run = move || {
        let before = thread_cpu();
        let reply = handler(caller, &parts, body);
        if let Some(door) = budgeted {
            door.budgets.charge(caller, thread_cpu().saturating_sub(before));
        }
        reply
    };
    match tokio::task::spawn_blocking(run).await {
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

#[cfg(test)]
mod tests {
    use super::{Caller, Scrapers};

    /// Root on this host is always a scraper; a named user only on this host, a named address only from another
    /// host (in either notation of an IPv4 address); an unknown local caller never.
    #[test]
    fn root_and_the_named_users_and_hosts_are_scrapers() {
        let scrapers = Scrapers { uids: vec![998], ips: vec!["10.0.0.7".parse().unwrap()] };
        let remote = |ip: &str| Caller::Remote { ip: ip.parse().unwrap() };
        assert!(scrapers.names(Caller::Local { uid: 0 }));
        assert!(Scrapers::default().names(Caller::Local { uid: 0 }));
        assert!(scrapers.names(Caller::Local { uid: 998 }));
        assert!(!scrapers.names(Caller::Local { uid: 65534 }));
        assert!(scrapers.names(remote("10.0.0.7")));
        assert!(scrapers.names(remote("::ffff:10.0.0.7")));
        assert!(!scrapers.names(remote("10.0.0.8")));
        assert!(!scrapers.names(Caller::LocalUnknown));
    }
}
