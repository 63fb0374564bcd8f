//! The agent's two doors, served by hyper on one tokio runtime at normal priority: the control API, HTTP/1.1
//! over the Unix socket (the caller known by `SO_PEERCRED`), and the metrics and counters API over TCP (a caller
//! on this host known by the owner of its socket, `sock_diag`; one on another by its address). Every connection
//! carries one request and has a short deadline for its head and a total one for the client's part (the agent's
//! own work on the request not counted, [`HANDLER_LIMIT`] at most); a request's head and body have
//! fixed caps; connections are served at once, each on its own task, with a cap per caller and in total, so that
//! an idle or slow client never delays another; root's connections (the CLI, the Slurm hooks) and the named
//! scrapers' count apart and always find room. Every other caller has a budget of requests and of the agent's CPU
//! they take (`budget`), and a spare descriptor lets a door answer "busy" at once when descriptors run out
//! (`spare`). Every refusal is answered by the door's accept loop itself, with no task or buffer of its own,
//! after a pause of 10 ms that the refused caller waits asleep (`refusal`); no caller within its budget and caps
//! waits.

mod budget;
mod caller;
mod peer;
mod refusal;
mod spare;

use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::http::request::Parts;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{header, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, Interest};

use budget::Budgets;
pub use budget::Rate;
pub use caller::Caller;
use lockstep_cgroup::procfs::thread_cpu;
use refusal::Refusals;
use spare::Spare;

/// What one door admits.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest request body, in bytes (a larger one gets 413).
    pub max_body: usize,
    /// Time from accepting a connection to the end of its request head: a client that sends it slowly, or not at
    /// all, is cut off then, and its place is free again.
    pub head: Duration,
    /// Time from accepting a connection to the end of its answer, the agent's own work on the request (its
    /// handler's run, [`HANDLER_LIMIT`] at most) not counted: the client's part, sending the request and taking the
    /// answer. A loaded agent slow to carry out a request does not cut it off unanswered.
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

/// The longest one request's handler holds its connection: past it the connection ends unanswered (the handler's
/// thread still finishes). Longer than the CLI waits for an answer (30 s), which then says that none came.
pub const HANDLER_LIMIT: Duration = Duration::from_mins(1);

/// What an ordinary caller may ask of either door: a burst of 20 requests, then 5 a second, each millisecond
/// of the agent's CPU a request takes counting as one more.
pub const RATE: Rate = Rate { burst: 20.0, per_second: 5.0 };

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
    // The controller's notices of places (`notices`); every other request has no body.
    max_body: 64 * 1024,
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

    /// A place for a connection of `caller`, its request's token taken from its budget (a privileged caller has
    /// none), or why not.
    fn enter(self: &Arc<Self>, caller: Caller) -> Result<Ticket, Refusal> {
        if !(self.privileged)(caller) {
            if let Err(wait) = self.budgets.take(caller, Instant::now()) {
                return Err(Refusal::Budget { seconds: wait.as_secs_f64().ceil().max(1.0) as u64 });
            }
        }
        self.admit(caller).ok_or(Refusal::Cap)
    }

    /// As [`Door::enter`], in the spare descriptor's place while the agent is out of descriptors (`out`): only a
    /// privileged caller is served there, any other told "busy".
    fn enter_in(self: &Arc<Self>, caller: Caller, out: bool) -> Result<Ticket, Refusal> {
        if out && !(self.privileged)(caller) {
            return Err(Refusal::Busy);
        }
        self.enter(caller)
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

/// Why a connection is refused, at once and without reading its request.
#[derive(Clone, Copy, Debug)]
enum Refusal {
    /// Its caller is over its budget until `seconds` from now: 429.
    Budget { seconds: u64 },
    /// Its caller is over a cap of connections at once: 503.
    Cap,
    /// The agent is out of descriptors and its caller is not privileged: 503.
    Busy,
}

/// The text of refusals, written into buffers kept by a door's loop (no allocation per refusal).
#[derive(Default)]
struct Answers {
    line: String,
    text: String,
}

impl Answers {
    /// The whole answer (head and one line of text) refusing a connection to door `door` for `why`.
    fn of(&mut self, door: &str, why: &Refusal) -> &[u8] {
        self.line.clear();
        let (status, retry) = match why {
            Refusal::Budget { seconds } => {
                let _ = write!(self.line, "too many requests from you to the {door}; ask again in {seconds} s");
                (StatusCode::TOO_MANY_REQUESTS, Some(*seconds))
            }
            Refusal::Cap => {
                self.line.push_str("too many connections from you; try again");
                (StatusCode::SERVICE_UNAVAILABLE, None)
            }
            Refusal::Busy => {
                self.line.push_str("the agent is busy (out of descriptors); try again");
                (StatusCode::SERVICE_UNAVAILABLE, None)
            }
        };
        self.text.clear();
        let _ = write!(
            self.text,
            "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n",
            self.line.len() + 1
        );
        if let Some(seconds) = retry {
            let _ = write!(self.text, "Retry-After: {seconds}\r\n");
        }
        let _ = write!(self.text, "Connection: close\r\n\r\n{}\n", self.line);
        self.text.as_bytes()
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

/// Threads the doors' runtime has for handlers.
const BLOCKING_THREADS: usize = 16;

/// The runtime both doors run on, at normal priority (their work is a user's, a scraper's or root's request,
/// never a slot switch). Dropping it closes them.
pub struct Doors {
    runtime: tokio::runtime::Runtime,
}

impl Doors {
    /// A runtime of two threads and up to [`BLOCKING_THREADS`] for handlers.
    pub fn new() -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .max_blocking_threads(BLOCKING_THREADS)
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
        // SAFETY: the listener owns its descriptor, and keeps it open and the same as long as it lives.
        let listener = unsafe { AsyncFd::register_with_interest(listener, Interest::READABLE) }?;
        let is_root = |c: Caller| c == Caller::Local { uid: 0 };
        let door = Door::new("control socket", limits, Box::new(is_root), handler);
        // A caller whose credentials cannot be read is treated as nobody in particular: unprivileged.
        let accept = |listener: &std::os::unix::net::UnixListener| {
            let (stream, _) = listener.accept()?;
            let uid = getsockopt(&stream, PeerCredentials).map_or(u32::MAX, |c| c.uid());
            Ok((stream, Caller::Local { uid }))
        };
        self.runtime.spawn(keep(listener, door, accept, tokio::net::UnixStream::from_std));
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
        // SAFETY: the listener owns its descriptor, and keeps it open and the same as long as it lives.
        let listener = unsafe { AsyncFd::register_with_interest(listener, Interest::READABLE) }?;
        let door = Door::new("metrics", limits, Box::new(move |c| scrapers.names(c)), handler);
        let mut diag = peer::SockDiag::open();
        if let Err(e) = &diag {
            log::warn!(
                "metrics: cannot ask the kernel who connects from this host ({e}); every local client counts as \
                 one caller, root's scrapes too"
            );
        }
        let accept = move |listener: &std::net::TcpListener| {
            let (stream, peer) = listener.accept()?;
            // A listener bound to one address is reached there only: no need to ask each connection.
            let here = if bound.ip().is_unspecified() { stream.local_addr()? } else { bound };
            let caller = match &mut diag {
                Ok(diag) => tcp_caller(diag, here, peer),
                Err(_) if local(here, peer) => Caller::LocalUnknown,
                Err(_) => Caller::Remote { ip: peer.ip().to_canonical() },
            };
            Ok((stream, caller))
        };
        self.runtime.spawn(keep(listener, door, accept, tokio::net::TcpStream::from_std));
        Ok(bound)
    }
}

/// Whether a TCP peer `peer` reaching this host at `here` is on this host: loopback, or the very address it reached.
fn local(here: SocketAddr, peer: SocketAddr) -> bool {
    let ip = peer.ip().to_canonical();
    ip.is_loopback() || here.ip().to_canonical() == ip
}

/// Who is at the other end of a TCP connection from `peer` to `here`: the user owning the peer's socket when it is
/// on this host (`sock_diag`), else its address; a peer on this host whose owner the kernel does not say is
/// [`Caller::LocalUnknown`].
fn tcp_caller(diag: &mut peer::SockDiag, here: SocketAddr, peer: SocketAddr) -> Caller {
    match diag.owner(here, peer) {
        Ok(Some(uid)) => Caller::Local { uid },
        Ok(None) if !local(here, peer) => Caller::Remote { ip: peer.ip().to_canonical() },
        Ok(None) => Caller::LocalUnknown,
        Err(e) => {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| log::warn!("metrics: cannot ask the kernel who connects ({e})"));
            if local(here, peer) {
                Caller::LocalUnknown
            } else {
                Caller::Remote { ip: peer.ip().to_canonical() }
            }
        }
    }
}

/// Connections accepted in one turn of a door's loop at most, before it lets the runtime's other tasks run.
const BATCH: usize = 64;

/// A door's loop: accepts every connection waiting on `listener` (`accept` says who made each), refuses in the
/// loop itself each one its caller may not make now (over the budget: 429; over a cap: 503), and serves
/// the others, each on a task of its own (`to_async` hands the connection to the runtime); a refusal is held a
/// moment before it is answered (`refusal`), a connection admitted never waits. Out of descriptors, the connection
/// waiting is accepted in the spare descriptor's place.
async fn keep<L, S, T>(
    listener: AsyncFd<L>,
    door: Arc<Door>,
    mut accept: impl FnMut(&L) -> std::io::Result<(S, Caller)> + Send + 'static,
    to_async: fn(S) -> std::io::Result<T>,
) where
    L: AsRawFd + Send + Sync + 'static,
    S: Into<OwnedFd> + AsFd + Send + 'static,
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut refusals = Refusals::new();
    let mut answers = Answers::default();
    loop {
        let ready = match refusals.due() {
            None => Some(listener.readable().await),
            Some(due) => tokio::time::timeout_at(due.into(), listener.readable()).await.ok(),
        };
        let mut failed = None;
        if let Some(Ok(mut ready)) = ready {
            for _ in 0..BATCH {
                match ready.try_io(|l| accept(l.get_ref())) {
                    Err(_would_block) => break,
                    Ok(Ok((stream, caller))) => {
                        door.spare.ok();
                        match door.enter(caller) {
                            Ok(ticket) => serve(stream, to_async, caller, ticket, None),
                            Err(refusal) => {
                                refusals.refuse(stream.into(), answers.of(door.name, &refusal), Instant::now());
                            }
                        }
                    }
                    Ok(Err(e)) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
        }
        refusals.answer_due(Instant::now());
        let Some(e) = failed else { continue };
        let Some(room) = door.spare.out(&e).await else { continue };
        let accepted = loop {
            let Ok(mut ready) = listener.readable().await else { break None };
            if let Ok(accepted) = ready.try_io(|l| accept(l.get_ref())) {
                break accepted.ok();
            }
        };
        let Some((stream, caller)) = accepted else { continue };
        let room = room.settle(&door.spare);
        match door.enter_in(caller, room.is_some()) {
            Ok(ticket) => serve(stream, to_async, caller, ticket, room),
            Err(refusal) => {
                let answer = answers.of(door.name, &refusal).to_vec();
                let Ok(stream) = set_nonblocking(stream).and_then(to_async) else { continue };
                tokio::spawn(async move {
                    refuse(stream, &answer).await;
                    drop(room);
                });
            }
        }
    }
}

/// `stream`, made non-blocking (as the runtime needs it).
fn set_nonblocking<S: AsFd>(stream: S) -> std::io::Result<S> {
    nix::fcntl::fcntl(stream.as_fd().as_raw_fd(), nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK))?;
    Ok(stream)
}

/// Serves one connection (its place in the door `ticket`) on a task of its own; `room` (the spare descriptor's
/// place, lent) is given back when it ends.
fn serve<S: AsFd, T>(
    stream: S,
    to_async: fn(S) -> std::io::Result<T>,
    caller: Caller,
    ticket: Ticket,
    room: Option<spare::Room>,
) where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let Ok(stream) = set_nonblocking(stream).and_then(to_async) else { return };
    tokio::spawn(async move {
        let _room = room;
        let door = ticket.0.clone();
        let _ticket = ticket;
        let limits = door.limits;
        let handler = door.handler.clone();
        exchange(stream, caller, limits, handler, Some(door)).await;
    });
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
    let accepted = tokio::time::Instant::now();
    let budgeted = door.filter(|d| !(d.privileged)(caller));
    let work = Arc::new(Work::default());
    let service = {
        let work = work.clone();
        service_fn(move |request: Request<Incoming>| {
            let (handler, budgeted, work) = (handler.clone(), budgeted.clone(), work.clone());
            async move { Ok::<_, Infallible>(answer(request, caller, limits.max_body, handler, budgeted, &work).await) }
        })
    };
    let connection = http1::Builder::new()
        .keep_alive(false)
        .max_buf_size(MAX_HEAD)
        .timer(TokioTimer::new())
        .header_read_timeout(limits.head)
        .serve_connection(TokioIo::new(stream), service);
    let mut connection = std::pin::pin!(connection);
    // The deadline covers the client's part of the exchange: a client that trickles its request, or takes its
    // answer slowly, is cut off with it. The handler's time is the agent's and moves the deadline on. The
    // connection is always looked at before the clock, so that an agent that did not run for a while (a node
    // loaded past it) first reads what its client sent meanwhile.
    loop {
        let Times { since: running, took, ended } = work.now();
        if let Some(since) = running {
            tokio::select! {
                biased;
                _ = &mut connection => return,
                () = work.done.notified() => continue,
                () = tokio::time::sleep_until((since + HANDLER_LIMIT).into()) => return,
            }
        }
        // A handler that ran leaves the client at least the head's time to take its answer, whatever it had
        // used sending the request.
        let due = (accepted + limits.deadline + took).max(ended.map_or(accepted, |e| (e + limits.head).into()));
        if tokio::time::Instant::now() >= due {
            return;
        }
        tokio::select! {
            biased;
            _ = &mut connection => return,
            // Its handler may have run meanwhile, or be running: the deadline is looked at again.
            () = tokio::time::sleep_until(due) => {}
        }
    }
}

/// The agent's own work on a connection's request: its handler's run (and its wait for a thread), which does not
/// count against the connection's deadline.
#[derive(Default)]
struct Work {
    /// When it ran.
    times: Mutex<Times>,
    /// Told when the handler ends.
    done: tokio::sync::Notify,
}

/// When a handler ran.
#[derive(Clone, Copy, Default)]
struct Times {
    /// When it started, while it runs.
    since: Option<Instant>,
    /// How long it took, once it has run.
    took: Duration,
    /// When it ended, once it has.
    ended: Option<Instant>,
}

impl Work {
    /// When the handler ran, as far as it has.
    fn now(&self) -> Times {
        *self.times.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The handler starts.
    fn start(&self) {
        self.times.lock().unwrap_or_else(std::sync::PoisonError::into_inner).since = Some(Instant::now());
    }

    /// The handler ended.
    fn end(&self) {
        let mut times = self.times.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(since) = times.since.take() {
            times.took += since.elapsed();
            times.ended = Some(Instant::now());
        }
        drop(times);
        self.done.notify_one();
    }
}

/// Handlers of ordinary callers (those with a budget) that may run at once, on both doors together: half the
/// runtime's blocking threads, so that root's and the named scrapers' requests always find one. A handler keeps
/// its place until its thread is done, even where its client has gone (a client that closes its side once its
/// request is sent ends the connection at once), so a caller that makes handlers slow (a notice whose munge
/// credential takes seconds to check) holds at most these.
static ORDINARY_HANDLERS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(BLOCKING_THREADS / 2);

/// A refusal given in the spare descriptor's place, `answer` written whole. What the client sent already (within
/// 100 ms, up to 16 KiB) is read first, so that the answer is not lost to a reset or a broken pipe on the client's
/// side.
async fn refuse<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, answer: &[u8]) {
    let mut sent = vec![0u8; MAX_HEAD];
    let _ = tokio::time::timeout(Duration::from_millis(100), stream.read(&mut sent)).await;
    let _ = tokio::time::timeout(Duration::from_millis(100), stream.write_all(answer)).await;
}

/// Reads the body (within its cap) and runs the handler on a blocking thread, its time kept in `work`; when
/// `budgeted` (the request's token was taken from the caller's budget there as it was accepted), the CPU the
/// handler took is charged to it.
async fn answer(
    request: Request<Incoming>,
    caller: Caller,
    max_body: usize,
    handler: Handler,
    budgeted: Option<Arc<Door>>,
    work: &Work,
) -> Response<Full<Bytes>> {
    let (parts, body) = request.into_parts();
    let body = match Limited::new(body, max_body).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            return respond(Reply::text(StatusCode::PAYLOAD_TOO_LARGE, &format!("request body over {max_body} bytes")));
        }
        Err(e) => return respond(Reply::text(StatusCode::BAD_REQUEST, &format!("cannot read the request: {e}"))),
    };
    work.start();
    // An ordinary caller's handler waits for a place among theirs (the wait is the agent's time, as the run is).
    let place = match &budgeted {
        Some(_) => ORDINARY_HANDLERS.acquire().await.ok(),
        None => None,
    };
    let run = move || {
        let _place = place;
        let before = thread_cpu();
        let reply = handler(caller, &parts, body);
        if let Some(door) = budgeted {
            door.budgets.charge(caller, thread_cpu().saturating_sub(before));
        }
        reply
    };
    let ran = tokio::task::spawn_blocking(run).await;
    work.end();
    match ran {
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
    use std::sync::Arc;
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::{Caller, Handler, Limits, Reply, Scrapers};

    /// What a client sending `parts` of a request, `gap` apart, reads back from one connection served under
    /// `limits` (a deadline of 300 ms) by a handler that takes `work`.
    fn exchange(parts: &[&[u8]], gap: Duration, work: Duration) -> String {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let handler: Handler = Arc::new(move |_, _, _| {
            std::thread::sleep(work);
            Reply { status: hyper::StatusCode::OK, content_type: "text/plain", body: b"done".to_vec() }
        });
        let limits = Limits { deadline: Duration::from_millis(300), ..super::CONTROL };
        let parts: Vec<Vec<u8>> = parts.iter().map(|p| p.to_vec()).collect();
        runtime.block_on(async move {
            let (client, server) = tokio::io::duplex(64 * 1024);
            let (mut from_server, mut to_server) = tokio::io::split(client);
            let send = async move {
                for part in parts {
                    if to_server.write_all(&part).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(gap).await;
                }
            };
            let receive = async move {
                let mut answer = Vec::new();
                let _ = from_server.read_to_end(&mut answer).await;
                String::from_utf8_lossy(&answer).into_owned()
            };
            let serve = super::connection(server, Caller::Local { uid: 0 }, limits, handler);
            let ((), answer, ()) = tokio::join!(send, receive, serve);
            answer
        })
    }

    const REQUEST: &[u8] = b"POST /v1/request HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n{}";

    /// The agent's own work on a request does not count against the connection's deadline: a handler that takes
    /// three deadlines is still answered.
    #[test]
    fn a_request_the_agent_is_slow_to_carry_out_is_answered() {
        let answer = exchange(&[REQUEST], Duration::ZERO, Duration::from_millis(900));
        assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("done"), "{answer:?}");
    }

    /// The client's part does: a request trickled past the deadline is cut off unanswered, however quick the
    /// handler.
    #[test]
    fn a_request_trickled_past_the_deadline_is_cut_off() {
        let (head, body) = REQUEST.split_at(REQUEST.len() - 2);
        let answer = exchange(&[head, &body[..1], &body[1..]], Duration::from_millis(400), Duration::ZERO);
        assert_eq!(answer, "");
    }

    /// A request that came while the agent did not run at all (its only thread held here for more than twice the
    /// deadline, as a node loaded past the agent holds it) is read before the deadline is looked at, and answered.
    /// Six times: with the two looked at in either order, about every other one was cut off.
    #[test]
    fn a_request_sent_while_the_agent_did_not_run_is_answered() {
        use std::io::{Read, Write};
        for _ in 0..6 {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            let handler: Handler = Arc::new(|_, _, _| Reply {
                status: hyper::StatusCode::OK,
                content_type: "text/plain",
                body: b"done".to_vec(),
            });
            let limits = Limits { deadline: Duration::from_millis(300), ..super::CONTROL };
            let (mut client, server) = std::os::unix::net::UnixStream::pair().unwrap();
            // Sent 200 ms in, while the agent's thread is held (from 20 ms to 720 ms).
            let client = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(200));
                client.write_all(REQUEST).unwrap();
                let mut answer = String::new();
                let _ = client.read_to_string(&mut answer);
                answer
            });
            runtime.block_on(async move {
                server.set_nonblocking(true).unwrap();
                let server = tokio::net::UnixStream::from_std(server).unwrap();
                let held = async {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    std::thread::sleep(Duration::from_millis(700));
                };
                tokio::join!(super::connection(server, Caller::Local { uid: 0 }, limits, handler), held);
            });
            let answer = client.join().unwrap();
            assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("done"), "{answer:?}");
        }
    }

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
