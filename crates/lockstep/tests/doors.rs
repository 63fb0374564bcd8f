//! The agent's doors under hostile clients: a client that streams without end, idle connections from another
//! user, malformed and oversized requests. The agent stays small, answers root at once, and never crashes. Every
//! agent is private (own socket and store) and stopped by PID.

mod common;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{wait_until, Agent, Env, WAIT};

/// The agent's peak resident memory, in KiB (`VmHWM`).
fn peak_kib(agent: &Agent) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", agent.pid())).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Writes `total` bytes of `fill` after `head` to the agent's socket, until the agent closes the connection;
/// returns what the agent answered.
fn stream(env: &Env, head: &[u8], total: usize) -> String {
    let mut s = UnixStream::connect(env.socket()).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(20))).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let _ = s.write_all(head);
    let chunk = vec![b'x'; 1 << 20];
    let mut sent = 0;
    while sent < total && s.write_all(&chunk).is_ok() {
        sent += chunk.len();
    }
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer
}

/// The status call, timed.
fn timed_status(env: &Env) -> (Duration, bool) {
    let t0 = Instant::now();
    let out = env.run(&["status", "--json"]);
    (t0.elapsed(), out.status.success())
}

#[test]
#[ignore = "needs root"]
fn a_client_streaming_a_gigabyte_does_not_grow_the_agent() {
    common::require_root();
    let env = Env::new();
    let agent = Agent::start(&env, &["--policy", "cfs"]);
    // No end of the request head (the attack that made the old line reader allocate 3 GB).
    let answer = stream(&env, b"", 1 << 30);
    assert!(answer.is_empty() || answer.starts_with("HTTP/1.1 4"), "{answer}");
    // A proper head announcing a gigabyte of body.
    let head = format!("POST /v1/request HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n", 1u64 << 30);
    let answer = stream(&env, head.as_bytes(), 1 << 30);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    let peak = peak_kib(&agent);
    eprintln!("agent peak RSS after two 1 GiB streams: {peak} KiB");
    assert!(peak < 64 * 1024, "the agent grew to {peak} KiB");
    assert!(timed_status(&env).1, "the agent must still answer");
}

#[test]
#[ignore = "needs root"]
fn idle_connections_of_another_user_do_not_delay_root() {
    common::require_root();
    let env = Env::new();
    let _agent = Agent::start(&env, &["--policy", "cfs"]);
    // Other users must reach the socket's directory (the socket itself is open to all).
    let mut perm = std::fs::metadata(env.dir.path()).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o711);
    std::fs::set_permissions(env.dir.path(), perm).unwrap();
    // User nobody opens 50 connections and sends nothing.
    let script = "import socket,sys,time\nss=[]\nfor _ in range(50):\n s=socket.socket(socket.AF_UNIX)\n \
                  s.connect(sys.argv[1]); ss.append(s)\nprint('ready',flush=True)\ntime.sleep(30)\n";
    let mut idle = common::as_nobody("/usr/bin/python3")
        .args(["-c", script])
        .arg(env.socket())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = [0u8; 5];
    idle.stdout.as_mut().unwrap().read_exact(&mut ready).unwrap();
    let mut worst = Duration::ZERO;
    for _ in 0..10 {
        let (took, ok) = timed_status(&env);
        assert!(ok, "root's status failed while nobody's connections were open");
        worst = worst.max(took);
    }
    let _ = idle.kill();
    common::exit_within(&mut idle, common::STOP_LIMIT, "the idle client, killed");
    eprintln!("root's status with 50 idle connections of nobody open: worst of 10 {worst:?}");
    // The old server held each request for 5 s per idle connection ahead of it; a generous bound tells the two
    // apart on a loaded machine (the measured figure is in docs/security.md).
    assert!(worst < Duration::from_secs(2), "root waited {worst:?}");
}

#[test]
#[ignore = "needs root"]
fn malformed_and_unknown_requests_are_refused_and_the_agent_lives_on() {
    common::require_root();
    let env = Env::new();
    let agent = Agent::start(&env, &["--policy", "cfs"]);
    let ask = |raw: &[u8]| -> String {
        let mut s = UnixStream::connect(env.socket()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        s.write_all(raw).unwrap();
        let mut answer = Vec::new();
        let _ = s.read_to_end(&mut answer);
        String::from_utf8_lossy(&answer).into_owned()
    };
    let post = |body: &[u8]| -> String {
        let mut raw =
            format!("POST /v1/request HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes();
        raw.extend_from_slice(body);
        ask(&raw)
    };
    let bad_utf8 = post(b"{\"op\":\"status\xff\xfe\"}");
    assert!(bad_utf8.starts_with("HTTP/1.1 400") && bad_utf8.contains("malformed request"), "{bad_utf8}");
    let row = post(br#"{"op":"adopt","job":"x","pids":[1],"row":4294967295}"#);
    assert!(row.starts_with("HTTP/1.1 400") && row.contains("out of range"), "{row}");
    let unknown = post(br#"{"op":"reboot"}"#);
    assert!(unknown.starts_with("HTTP/1.1 400"), "{unknown}");
    let path = ask(b"GET /etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(path.starts_with("HTTP/1.1 404"), "{path}");
    let garbage = ask(b"\x00\x01\x02 not http at all\r\n\r\n");
    assert!(garbage.is_empty() || garbage.starts_with("HTTP/1.1 400"), "{garbage}");
    // A client that trickles its request is cut off at the connection's deadline, not kept forever.
    let mut slow = UnixStream::connect(env.socket()).unwrap();
    slow.write_all(b"POST /v1/request HTTP/1.1\r\n").unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let t0 = Instant::now();
    let mut rest = Vec::new();
    let _ = slow.read_to_end(&mut rest);
    assert!(t0.elapsed() < Duration::from_secs(25), "a trickling client was kept {:?}", t0.elapsed());
    wait_until("the agent still answering", WAIT, || timed_status(&env), |&(_, answered)| answered);
    assert!(nix::sys::signal::kill(agent.pid(), None).is_ok(), "the agent died");
}
