//! The client side of the agent's control socket: one JSON request as an HTTP POST, one JSON response back.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::http::{self, HttpError, Target};
use crate::protocol::{Envelope, Failure, Request, Response, VERSION};
use lockstep_core::error::UsageError;

/// Default socket path.
pub const DEFAULT_SOCKET: &str = "/run/lockstep/agent.sock";

/// The socket path: `--socket`, else `LOCKSTEP_SOCKET`, else [`DEFAULT_SOCKET`].
pub fn resolve_socket(flag: Option<&Path>) -> PathBuf {
    flag.map(Path::to_path_buf)
        .or_else(|| std::env::var_os("LOCKSTEP_SOCKET").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from(DEFAULT_SOCKET))
}

/// Path of the control API on the agent's socket (`POST`, one JSON [`Request`] in, one JSON [`Response`] out).
pub const REQUEST_PATH: &str = "/v1/request";

/// How long a request may take, connection to answer.
const DEADLINE: Duration = Duration::from_secs(30);

/// The longest a request waits in all when the agent asks the caller to come back later (429 with
/// `Retry-After`): past it, the refusal is the answer.
const MAX_WAIT: Duration = Duration::from_secs(15);

/// What to look at when no agent answers.
const NO_AGENT_HINT: &str = "is lockstepd running? systemctl status lockstep-agent";

/// Sends one request and reads the answer. No agent at the socket (nothing there, or a socket nobody listens on)
/// is a usage error naming the socket, said at once; an agent that is there but does not answer is an error. A
/// request refused for the caller's budget (429) is asked again after the wait the agent names (`Retry-After`),
/// while the waits come to at most 15 s in all; a longer one is the answer, said at once.
pub fn call(socket: &Path, request: &Request) -> Result<Response, CallError> {
    match send(socket, request) {
        Ok(answer) => answer,
        Err(e) => {
            let why = match e.kind() {
                std::io::ErrorKind::NotFound => String::new(),
                std::io::ErrorKind::ConnectionRefused => {
                    use std::os::unix::fs::FileTypeExt;
                    match std::fs::metadata(socket) {
                        Ok(m) if !m.file_type().is_socket() => ": it is not a socket".into(),
                        _ => ": nothing listens on the socket there".into(),
                    }
                }
                _ => format!(": {}", lockstep_core::error::io_reason(&e)),
            };
            Err(UsageError::new(format!("no agent at {}{why} ({NO_AGENT_HINT})", socket.display())).into())
        }
    }
}

/// Sends a request when an agent listens; `None` when none does (for `lockstep run`, which works alone too).
pub fn call_if_running(socket: &Path, request: &Request) -> Option<Result<Response, CallError>> {
    send(socket, request).ok()
}

/// Sends a request: `Err` with the connection's error when no agent listens at `socket`, else the answer or why
/// there was none.
fn send(socket: &Path, request: &Request) -> Result<Result<Response, CallError>, std::io::Error> {
    let body = match serde_json::to_vec(&Envelope { version: VERSION, request: request.clone() }) {
        Ok(b) => b,
        Err(e) => return Ok(Err(CallError::Encode(e))),
    };
    let at = socket.display();
    let mut waited = Duration::ZERO;
    let answer = loop {
        match http::request(Target::Unix(socket), REQUEST_PATH, Some(body.clone()), DEADLINE) {
            // Over the caller's budget: its door refused the request unread, so asking again changes nothing but
            // the answer; wait as told while the waits stay short.
            Ok(answer) if answer.status == 429 => match answer.retry_after.map(|w| w.max(Duration::from_secs(1))) {
                Some(wait) if wait <= MAX_WAIT.saturating_sub(waited) => {
                    std::thread::sleep(wait);
                    waited += wait;
                }
                _ => break answer,
            },
            Ok(answer) => break answer,
            Err(HttpError::Connect(e)) => return Err(e),
            Err(HttpError::Stopped(pid)) => {
                return Ok(Err(CallError::NoAnswer(format!(
                    "the agent at {at} cannot answer: its process {pid} is stopped (kill -CONT {pid}, or systemctl \
                     restart lockstep-agent)"
                ))))
            }
            Err(HttpError::Deadline(d)) => {
                return Ok(Err(CallError::NoAnswer(format!(
                    "the agent at {at} took the request but gave no answer within {} s (is it hung? \
                     systemctl status lockstep-agent)",
                    d.as_secs()
                ))))
            }
            Err(HttpError::Unanswered) => {
                return Ok(Err(CallError::NoAnswer(format!(
                    "the agent at {at} closed the connection without answering (it stopped, or this request \
                     reached it too slowly); it may have been carried out: see lockstep status"
                ))))
            }
            Err(e) => return Ok(Err(CallError::NoAnswer(format!("the agent at {at}: {e}")))),
        }
    };
    Ok(serde_json::from_slice(&answer.body).map_err(|e| {
        let text = String::from_utf8_lossy(&answer.body);
        match answer.status {
            // Its door refused the request before reading it (over the caller's budget or caps, or out of
            // descriptors): its one line says why and when to ask again.
            429 | 503 => CallError::NoAnswer(format!("the agent at {at} refused the request: {}", text.trim())),
            status => CallError::NoAnswer(format!("the agent at {at} answered {status} {:?} ({e})", text.trim())),
        }
    }))
}

/// Turns a failed response into the error of its kind (a usage error exits with status 2).
pub fn check(response: Response) -> Result<Response, CallError> {
    if response.ok {
        return Ok(response);
    }
    let message = response.error.clone().unwrap_or_else(|| "the agent refused the request".into());
    Err(match response.failure {
        Some(Failure::Usage) => UsageError::new(message).into(),
        failure => CallError::Refused { failure: failure.unwrap_or(Failure::Failed), message },
    })
}

/// Why a request to the agent got no answer, or was refused.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// No agent listens at the socket, or the agent refused the request as bad input: the caller's to fix.
    #[error("{0}")]
    Usage(#[from] UsageError),
    /// The agent refused the request (not permitted, stopping) or failed it, saying why.
    #[error("{message}")]
    Refused {
        /// What kind of refusal it was.
        failure: Failure,
        /// The agent's one line.
        message: String,
    },
    /// The agent is there but gave no answer that can be read (stopped, hung, refused unread, not JSON).
    #[error("{0}")]
    NoAnswer(String),
    /// The request could not be written as JSON.
    #[error("cannot write the request: {0}")]
    Encode(serde_json::Error),
}
