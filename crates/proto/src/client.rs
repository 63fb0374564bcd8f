//! The client side of the agent's control socket: one JSON request as an HTTP POST, one JSON response back.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::http::{self, HttpError, Target};
use crate::protocol::{Envelope, Request, Response, VERSION};
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

/// Sends one request and reads the answer. No agent listening is a usage error naming the socket.
pub fn call(socket: &Path, request: &Request) -> anyhow::Result<Response> {
    call_if_running(socket, request).unwrap_or_else(|| {
        Err(UsageError::new(format!("no lockstep agent at {}; start one with `lockstep agent`", socket.display()))
            .into())
    })
}

/// Sends a request when an agent listens; `None` when none does (for `lockstep run`, which works alone too).
pub fn call_if_running(socket: &Path, request: &Request) -> Option<anyhow::Result<Response>> {
    let body = match serde_json::to_vec(&Envelope { version: VERSION, request: request.clone() }) {
        Ok(b) => b,
        Err(e) => return Some(Err(e.into())),
    };
    let answer = match http::request(Target::Unix(socket), REQUEST_PATH, Some(body), DEADLINE) {
        Ok(answer) => answer,
        Err(HttpError::Connect(_)) => return None,
        Err(e) => return Some(Err(anyhow::anyhow!("the lockstep agent at {}: {e}", socket.display()))),
    };
    Some(serde_json::from_slice(&answer.body).map_err(|e| {
        let text = String::from_utf8_lossy(&answer.body);
        anyhow::anyhow!("the lockstep agent answered {} {:?} ({e})", answer.status, text.trim())
    }))
}

/// Turns a failed response into the matching error (usage errors exit with status 2).
pub fn check(response: Response) -> anyhow::Result<Response> {
    if response.ok {
        return Ok(response);
    }
    let msg = response.error.clone().unwrap_or_else(|| "the agent refused the request".into());
    if response.usage {
        Err(UsageError::new(msg).into())
    } else {
        Err(anyhow::anyhow!(msg))
    }
}
