//! The agent's control API on its Unix socket: the socket bound, each request parsed and handed to the daemon,
//! and its answer as HTTP. The door it comes through (caps and deadlines) is `doors`; what each request does, for
//! whom, is the daemon's (`daemon::control`).

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::Arc;

use hyper::http::request::Parts;
use hyper::{Method, StatusCode};

use crate::command::{Command, Mailbox};
use crate::daemon::{visible_to, Board};
use crate::doors::{Caller, Handler, Reply};
use crate::sampler::Sampler;
use lockstep_core::error::UsageError;
use lockstep_core::trust;
use lockstep_proto::client::REQUEST_PATH;
use lockstep_proto::protocol::{version_of, Envelope, Failure, Request, Response, VERSION};

/// Binds the socket (open to every user; see [`handle`] for what each may do). Its directory and every one above
/// it must be the agent's alone ([`trust`]); an agent already answering there is a usage error, a stale socket
/// is replaced, and anything else at the path (a typo naming a file) is refused, never removed.
pub fn bind(path: &Path) -> anyhow::Result<(UnixListener, BoundSocket)> {
    let stale = check(path)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        // Every user must reach the socket: its directory is searchable by all, writable by the agent only.
        trust::ensure_dir(dir, 0o755, "the socket directory")?;
    }
    if stale {
        // A socket nobody answers: a stale one, of an agent that ended without removing it.
        std::fs::remove_file(path).map_err(|e| {
            anyhow::anyhow!(
                "cannot remove the stale socket {}: {}",
                path.display(),
                lockstep_core::error::io_reason(&e)
            )
        })?;
    }
    // Anyone may connect: each request is checked against the caller's credentials (SO_PEERCRED). The mode is
    // the one the socket is created with (umask), not one set afterwards by path.
    // SAFETY: umask only swaps the process's file mode mask; the agent has one thread here.
    let mask = unsafe { libc::umask(0o111) };
    let bound = UnixListener::bind(path);
    // SAFETY: as above, putting the mask back.
    unsafe { libc::umask(mask) };
    let listener = bound.map_err(|e| {
        UsageError::new(format!("cannot listen on {}: {}", path.display(), lockstep_core::error::io_reason(&e)))
    })?;
    let meta = std::fs::symlink_metadata(path).map_err(|e| {
        anyhow::anyhow!("cannot see the socket {} just bound: {}", path.display(), lockstep_core::error::io_reason(&e))
    })?;
    Ok((listener, BoundSocket { path: path.to_path_buf(), id: (meta.dev(), meta.ino()) }))
}

/// Checks, changing nothing, that the agent may serve `path`: no agent answers there, and nothing but a stale
/// socket is in the way (whether one is: `true`).
pub fn check(path: &Path) -> Result<bool, UsageError> {
    if UnixStream::connect(path).is_ok() {
        return Err(UsageError::new(format!("an agent is already running at {}", path.display())));
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => Ok(true),
        Ok(m) => {
            let what = if m.is_dir() { "a directory" } else { "something that is not a socket" };
            Err(UsageError::new(format!(
                "refusing socket {}: {what} is there (expected a free path or a stale socket)",
                path.display()
            )))
        }
        Err(_) => Ok(false),
    }
}

/// The socket file the agent bound: removed when this is dropped (the agent stops, or its start fails after
/// binding), if the file at its path is still the one bound, never anything that replaced it.
pub struct BoundSocket {
    path: std::path::PathBuf,
    id: (u64, u64),
}

impl Drop for BoundSocket {
    fn drop(&mut self) {
        if std::fs::symlink_metadata(&self.path).is_ok_and(|m| (m.dev(), m.ino()) == self.id) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// How long a `lockstep run` registration waits for the sampler to count its job, at most: the sampler attaches
/// jobs between samples, each look at a job bounded.
const REGISTER_COUNTED: std::time::Duration = std::time::Duration::from_secs(5);

/// The control API's handler: `POST /v1/request` with one JSON request; the answer is the JSON response, with
/// the HTTP status saying how it went (200 done, 400 bad input, 403 not allowed, 500 failed; 503 once the agent is
/// stopping). A `status` is answered from the daemon's `board` (the status it published last), filtered for the
/// asker; a `timeline` is recorded here, off the daemon's loop, through `sampler` (crate::together::timeline);
/// root's other requests are carried out by the daemon at `mailbox`. No request of another user reaches the
/// daemon: they may ask for the status only.
/// A job registered by `lockstep run` is answered once the sampler counts it (the daemon only sends it there), so
/// that it is counted from its first instruction.
pub fn handler(mailbox: Mailbox, sampler: Sampler, board: Board) -> Handler {
    Arc::new(move |caller, parts, body| {
        let Caller::Local { uid } = caller else {
            return Reply::text(StatusCode::FORBIDDEN, "the control API is served on the Unix socket only");
        };
        let request = match parse(parts, &body) {
            Ok(request) => request,
            Err(reply) => return reply,
        };
        match request {
            Request::Status => {
                let status = visible_to(&board.read(), (uid != 0).then_some(uid));
                return reply(&Response { ok: true, status: Some(status), ..Default::default() });
            }
            Request::Timeline { millis } => {
                return reply(&match crate::together::timeline::serve(&sampler, uid, millis) {
                    Ok(timeline) => Response { timeline: Some(timeline), ..Response::done() },
                    Err(e) => Response::failed(&*e),
                });
            }
            _ if uid != 0 => return reply(&Response::only_root(uid)),
            _ => {}
        }
        // An adoption's slow part (podman, /proc, the cgroups' trees) is done here, on this door's thread: the
        // daemon's loop only claims and moves (crate::adopt).
        let resolved = match &request {
            Request::Adopt { cgroups, pids, containers, .. } if uid == 0 => {
                match crate::adopt::resolve(cgroups, pids, containers) {
                    Ok(resolved) => Some(resolved),
                    Err(e) => return reply(&Response::failed(&*e)),
                }
            }
            _ => None,
        };
        let registers = matches!(request, Request::Register { .. });
        match mailbox.ask(|reply| Command::Control { request, uid, resolved, reply }) {
            Some(response) => {
                if registers && response.ok && !sampler.synced(REGISTER_COUNTED) {
                    log::warn!("a job registered by lockstep run starts before the sampler counts it");
                }
                reply(&response)
            }
            None => reply(&Response::refused(
                Failure::Unavailable,
                "the agent is stopping (ask again once it has started again)".to_string(),
            )),
        }
    })
}

/// The request a control API call carries; else the answer to give (wrong path or method, malformed JSON).
pub fn parse(parts: &Parts, body: &[u8]) -> Result<Request, Reply> {
    if parts.uri.path() != REQUEST_PATH {
        return Err(Reply::text(StatusCode::NOT_FOUND, &format!("not found (the control API is POST {REQUEST_PATH})")));
    }
    if parts.method != Method::POST {
        return Err(Reply::text(StatusCode::METHOD_NOT_ALLOWED, &format!("POST {REQUEST_PATH} only")));
    }
    if let Some(version) = version_of(body).filter(|&v| v != VERSION) {
        return Err(reply(&Response::refused(
            Failure::Usage,
            format!(
                "request of control protocol version {version} refused: this agent speaks version {VERSION} (the \
                 lockstep that sent it and this lockstepd come from different builds; restart the agent from the \
                 installed one)"
            ),
        )));
    }
    let envelope = serde_json::from_slice::<Envelope>(body).map_err(|e| {
        reply(&Response::refused(Failure::Usage, format!("malformed request ({e}); expected one JSON request")))
    })?;
    Ok(envelope.request)
}

/// The HTTP answer carrying `response`, its status saying how it went: 200, or its failure's
/// ([`Failure::http_status`]; a failure of no kind is the agent's).
pub fn reply(response: &Response) -> Reply {
    let status = match (response.ok, response.failure) {
        (true, _) => StatusCode::OK,
        (false, failure) => StatusCode::from_u16(failure.unwrap_or(Failure::Failed).http_status())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
    };
    let body = serde_json::to_vec(response).unwrap_or_else(|_| br#"{"ok":false}"#.to_vec());
    Reply { status, content_type: "application/json", body }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts() -> Parts {
        hyper::Request::builder().method(Method::POST).uri(REQUEST_PATH).body(()).unwrap().into_parts().0
    }

    #[test]
    fn a_request_of_another_protocol_version_is_refused_by_name() {
        let status = |body: &str| parse(&parts(), body.as_bytes()).map(|r| matches!(r, Request::Status));
        assert_eq!(status(&format!(r#"{{"version":{VERSION},"op":"status"}}"#)).ok(), Some(true));
        // No version is the first one, which this build no longer speaks.
        // A request of the first version is refused as such, whatever fields it has that this one lacks.
        let first_policy = r#"{"op":"policy","name":"gang","slot_ms":500}"#;
        // Version 2's adoption named processes by PID alone.
        let second_adopt = r#"{"version":2,"op":"adopt","job":"x","pids":[42]}"#;
        let refused_versions =
            [(r#"{"op":"status"}"#, 1), (first_policy, 1), (second_adopt, 2), (r#"{"version":99,"op":"status"}"#, 99)];
        for (body, version) in refused_versions {
            let refused = status(body).unwrap_err();
            assert_eq!(refused.status, StatusCode::BAD_REQUEST);
            let text = String::from_utf8_lossy(&refused.body).into_owned();
            assert!(text.contains(&format!("version {version} refused")), "{text}");
            assert!(
                text.contains(&format!("speaks version {VERSION}")) && text.contains(r#""failure":"usage""#),
                "{text}"
            );
        }
    }

    #[test]
    fn a_failure_s_kind_sets_the_http_status_and_comes_back_as_its_error() {
        use lockstep_core::error::{Denied, UsageError};
        let cases: [(anyhow::Error, u16); 3] = [
            (UsageError::new("bad row").into(), 400),
            (Denied::new("only root").into(), 403),
            (anyhow::anyhow!("the disk is full"), 500),
        ];
        for (e, code) in cases {
            let usage = e.is::<UsageError>();
            let response = Response::failed(&*e);
            assert_eq!(reply(&response).status.as_u16(), code, "{e}");
            let back = lockstep_proto::client::check(response).unwrap_err();
            assert_eq!(lockstep_core::error::is_usage(&back), usage, "{e}");
            assert_eq!(back.to_string(), format!("{e:#}"));
        }
        let stopping = Response::refused(Failure::Unavailable, "the agent is stopping".into());
        assert_eq!(reply(&stopping).status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(reply(&Response::done()).status, StatusCode::OK);
        assert_eq!(reply(&Response::only_root(1000)).status, StatusCode::FORBIDDEN);
    }
}
