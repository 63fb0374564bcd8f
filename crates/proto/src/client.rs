//! The CLI side of the agent socket.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::protocol::{Request, Response};
use lockstep_core::error::UsageError;

/// Default socket path.
pub const DEFAULT_SOCKET: &str = "/run/lockstep/agent.sock";

/// The socket path: `--socket`, else `LOCKSTEP_SOCKET`, else [`DEFAULT_SOCKET`].
pub fn resolve_socket(flag: Option<&Path>) -> PathBuf {
    flag.map(Path::to_path_buf)
        .or_else(|| std::env::var_os("LOCKSTEP_SOCKET").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from(DEFAULT_SOCKET))
}

/// Sends one request and reads the answer. No agent listening is a usage error naming the socket.
pub fn call(socket: &Path, request: &Request) -> anyhow::Result<Response> {
    let stream = UnixStream::connect(socket).map_err(|e| {
        UsageError::new(format!("no lockstep agent at {} ({e}); start one with `lockstep agent`", socket.display()))
    })?;
    exchange(stream, request)
}

/// Sends a request when an agent listens; `None` when none does (for `lockstep run`, which works alone too).
pub fn call_if_running(socket: &Path, request: &Request) -> Option<anyhow::Result<Response>> {
    let stream = UnixStream::connect(socket).ok()?;
    Some(exchange(stream, request))
}

/// One request line out, one response line back.
fn exchange(mut stream: UnixStream, request: &Request) -> anyhow::Result<Response> {
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut line = serde_json::to_string(request)?;
    line.push('\n');
    stream.write_all(line.as_bytes())?;
    let mut answer = String::new();
    BufReader::new(stream).read_line(&mut answer)?;
    Ok(serde_json::from_str(&answer)?)
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
