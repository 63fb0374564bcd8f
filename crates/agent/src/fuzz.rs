//! Entry points for the fuzz targets in `fuzz/`: the agent's doors fed raw bytes, as a hostile client would send
//! them, without an agent behind them.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::doors::{self, Caller, Handler, Limits};
use crate::server;

/// Serves `data` as one connection of an unprivileged caller on the control socket: hyper parses it under the
/// socket's caps (a shorter deadline, so that an input that never completes a request ends quickly), and the
/// control API routes and parses what it gets, answering as if every request were carried out.
pub fn http_exchange(data: &[u8]) {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    let runtime = RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime for the fuzz target")
    });
    let handler: Handler = Arc::new(|_caller, parts, body| match server::parse(parts, &body) {
        Ok(_) => server::reply(&lockstep_proto::protocol::Response { ok: true, ..Default::default() }),
        Err(reply) => reply,
    });
    let limits = Limits { deadline: Duration::from_millis(200), ..doors::CONTROL };
    let data = data.to_vec();
    runtime.block_on(async move {
        let (client, server) = tokio::io::duplex(64 * 1024);
        let (mut from_server, mut to_server) = tokio::io::split(client);
        let send = async move {
            let _ = to_server.write_all(&data).await;
            let _ = to_server.shutdown().await;
        };
        let receive = async move {
            let mut answer = Vec::new();
            let _ = from_server.read_to_end(&mut answer).await;
            answer
        };
        let serve = doors::connection(server, Caller::Local { uid: 1000 }, limits, handler);
        let ((), answer, ()) = tokio::join!(send, receive, serve);
        // Whatever came in, what goes out is HTTP or nothing.
        assert!(answer.is_empty() || answer.starts_with(b"HTTP/1."), "{:?}", String::from_utf8_lossy(&answer));
    });
}
