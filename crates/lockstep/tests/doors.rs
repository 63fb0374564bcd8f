//! The agent's doors under hostile clients: a client that streams without end, idle connections from another
//! user, malformed and oversized requests. The agent stays small, answers root at once, and never crashes. Every
//! agent is private (own socket and store) and stopped by PID.

mod common;

use lockstep_cgroup::procfs::Live as _;
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
    let init = lockstep_cgroup::procfs::ProcessRef::of(1).unwrap();
    let adopt = format!(
        r#"{{"version":3,"op":"adopt","job":"x","pids":[{{"pid":1,"start":{}}}],"row":4294967295}}"#,
        init.start
    );
    let row = post(adopt.as_bytes());
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

/// Other users may reach the socket's directory (the socket itself is open to all).
fn open_to_others(env: &Env) {
    let mut perm = std::fs::metadata(env.dir.path()).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o711);
    std::fs::set_permissions(env.dir.path(), perm).unwrap();
}

/// Asks the control socket for the status over and over, one connection at a time, for `argv[2]` seconds;
/// prints the HTTP status codes it got, how long it asked, and the first 429's `Retry-After` and body.
const STATUS_FLOOD: &str = r#"
import json, socket, sys, time
body = b'{"version":3,"op":"status"}'
req = b'POST /v1/request HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n' % len(body) + body
codes, retry, line = {}, None, None
t0 = time.time()
while time.time() - t0 < float(sys.argv[2]):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(20)
    s.connect(sys.argv[1])
    s.sendall(req)
    data = b''
    while True:
        c = s.recv(65536)
        if not c:
            break
        data += c
    s.close()
    code = data[9:12].decode()
    codes[code] = codes.get(code, 0) + 1
    if code == '429' and retry is None:
        head, _, rest = data.partition(b'\r\n\r\n')
        retry = [l.decode() for l in head.split(b'\r\n') if l.lower().startswith(b'retry-after:')]
        line = rest.decode()
print(json.dumps({'codes': codes, 'seconds': time.time() - t0, 'retry': retry, 'body': line}))
"#;

/// A status flood by another user is answered 429 (with `Retry-After` and one line) once past its budget, while
/// root's `lockstep status` is answered every time; the user got no more than its budget allows.
#[test]
#[ignore = "needs root"]
fn a_status_flood_of_another_user_is_refused_past_its_budget_and_root_is_answered() {
    common::require_root();
    let env = Env::new();
    let _agent = Agent::start(&env, &["--policy", "cfs"]);
    open_to_others(&env);
    let flood = common::as_nobody("/usr/bin/python3")
        .args(["-c", STATUS_FLOOD])
        .arg(env.socket())
        .arg("4")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    for i in 0..10 {
        let out = env.run(&["status", "--json"]);
        assert!(out.status.success(), "root's status {i} during the flood failed: {}", common::stderr(&out));
    }
    let out = common::output_within(flood, Duration::from_mins(1), "nobody's status flood");
    assert!(out.status.success(), "the flood failed: {}", common::stderr(&out));
    let seen: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    eprintln!("nobody's flood: {seen}");
    let count = |code: &str| seen["codes"][code].as_u64().unwrap_or(0);
    let codes = seen["codes"].as_object().unwrap();
    assert!(codes.keys().all(|c| c == "200" || c == "429"), "answers other than 200 and 429: {seen}");
    assert!(count("429") > 0, "the flood was never refused: {seen}");
    // A burst of 20, then 5 a second (each millisecond of the agent's CPU costing one more).
    let budget = 20.0 + 5.0 * seen["seconds"].as_f64().unwrap() + 1.0;
    assert!((count("200") as f64) <= budget, "nobody got {} answers, over the budget of {budget}", count("200"));
    let retry = seen["retry"][0].as_str().unwrap();
    let seconds: u64 = retry.split(':').nth(1).unwrap().trim().parse().unwrap();
    assert!(seconds >= 1, "{retry}");
    let body = seen["body"].as_str().unwrap();
    assert!(body.contains("too many requests") && body.trim_end().lines().count() == 1, "{body:?}");
    // Told to wait a short while, the user's own CLI waits as told and is answered.
    let out = common::as_nobody(env!("CARGO_BIN_EXE_lockstep"))
        .arg("--socket")
        .arg(env.socket())
        .args(["status", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "nobody's status after the flood: {}", common::stderr(&out));
}

/// An agent under `cfs` serving metrics on a free loopback port, once its metrics door answers: the agent, the
/// port and `127.0.0.1:PORT`.
fn metrics_agent(env: &Env) -> (Agent, u16, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    let agent = Agent::start(env, &["--policy", "cfs", "--metrics", &addr]);
    let _ = wait_until("the agent's metrics door", WAIT, || scrape(&addr), |r| r.as_ref().is_ok_and(|&c| c == 200));
    (agent, port, addr)
}

/// Root's scrape of `/metrics` at `addr`: the HTTP status, or why there was none.
fn scrape(addr: &str) -> Result<u16, String> {
    lockstep_telemetry::remote::get(addr, "/metrics").map(|(code, _)| code).map_err(|e| e.to_string())
}

/// Opens `argv[2]` connections to the metrics port `argv[1]` with an unfinished request head each, reopening
/// each one the agent ends, for `argv[3]` seconds; then waits (at most 30 s) for the agent to end the ones left.
/// Prints how each ended: refused (503 over its cap, 429 over its budget), cut (closed or reset without an answer,
/// or 408), answered otherwise,
/// and how many were still open at the end.
const HELD_HEADS: &str = r"
import json, select, socket, sys, time
port, n, hold = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
conns, stats = {}, {'opened': 0, 'refused': 0, 'cut': 0, 'other': 0}
def open_one():
    s = socket.create_connection(('127.0.0.1', port))
    s.sendall(b'GET /metrics HTTP/1.1\r\nHost: x\r\n')
    conns[s] = time.time()
    stats['opened'] += 1
def ended(s, reopen):
    try:
        data = s.recv(4096)
    except OSError:
        data = b''
    del conns[s]
    s.close()
    if data.startswith(b'HTTP/1.1 503') or data.startswith(b'HTTP/1.1 429'):
        stats['refused'] += 1
    elif data == b'' or data.startswith(b'HTTP/1.1 408'):
        stats['cut'] += 1
    else:
        stats['other'] += 1
    if reopen:
        open_one()
for _ in range(n):
    open_one()
print('ready', flush=True)
end = time.time() + hold
while time.time() < end:
    for s in select.select(list(conns), [], [], 0.2)[0]:
        ended(s, True)
last = time.time() + 30
while conns and time.time() < last:
    for s in select.select(list(conns), [], [], 0.2)[0]:
        ended(s, False)
stats['left_open'] = len(conns)
print(json.dumps(stats), flush=True)
";

/// Another user holding 80 connections to the metrics door with unfinished request heads (and reopening each
/// one the agent ends) takes at most its own share: every scrape of root's over loopback is answered 200 while
/// it does, the rest of its connections are refused at once (over its cap or its budget), and the ones it held
/// are cut at the head's deadline (none is left open).
#[test]
#[ignore = "needs root"]
fn held_metrics_connections_of_another_user_do_not_stop_roots_scrapes() {
    common::require_root();
    let env = Env::new();
    let (_agent, port, addr) = metrics_agent(&env);
    let up = || scrape(&addr);
    let mut held = common::as_nobody("/usr/bin/python3")
        .args(["-c", HELD_HEADS, &port.to_string(), "80", "5"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = [0u8; 6];
    held.stdout.as_mut().unwrap().read_exact(&mut ready).unwrap();
    assert_eq!(&ready, b"ready\n");
    let mut answered = Vec::new();
    for _ in 0..20 {
        answered.push(up());
        std::thread::sleep(Duration::from_millis(150));
    }
    let out = common::output_within(held, Duration::from_mins(1), "nobody's held connections");
    assert!(out.status.success(), "the holder failed: {}", common::stderr(&out));
    let seen: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    eprintln!("nobody's held connections: {seen}; root's scrapes: {answered:?}");
    assert!(answered.iter().all(|a| a.as_ref().is_ok_and(|&code| code == 200)), "root's scrapes: {answered:?}");
    assert_eq!(seen["left_open"], 0, "connections with unfinished heads were kept: {seen}");
    assert_eq!(seen["other"], 0, "an unfinished head was answered: {seen}");
    assert!(seen["refused"].as_u64().unwrap() > 0, "nobody's connections past its cap were not refused: {seen}");
    assert!(seen["cut"].as_u64().unwrap() > 0, "no held connection was cut: {seen}");
}

/// The lowest descriptor number process `pid` does not hold (over a few looks, the lowest: a descriptor the
/// agent opens for a moment must not count as held).
fn lowest_free_fd(pid: i32) -> u64 {
    (0..5)
        .map(|_| {
            let held: std::collections::BTreeSet<u64> = std::fs::read_dir(format!("/proc/{pid}/fd"))
                .unwrap()
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect();
            std::thread::sleep(Duration::from_millis(50));
            (0..=held.len() as u64).find(|n| !held.contains(n)).unwrap()
        })
        .min()
        .unwrap()
}

/// `lockstep status` of user nobody, started.
fn nobodys_status(env: &Env) -> std::process::Child {
    let mut status = common::as_nobody(env!("CARGO_BIN_EXE_lockstep"));
    status.arg("--socket").arg(env.socket()).arg("status");
    status.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
}

/// With the agent out of descriptors (its limit lowered to what it holds), root's `lockstep status` is answered
/// at once (served in the spare descriptor's place), another user's is told "busy" at once, and neither waits
/// in the backlog; the door says it once in the log, and serves everyone again once descriptors are free.
#[test]
#[ignore = "needs root"]
fn out_of_descriptors_root_is_answered_and_others_told_busy_at_once() {
    common::require_root();
    let env = Env::new();
    let agent = Agent::start(&env, &["--policy", "cfs"]);
    open_to_others(&env);
    assert!(env.run(&["status"]).status.success());
    let pid = agent.pid().as_raw();
    let limit = |soft: &str| {
        let out = std::process::Command::new("prlimit")
            .args(["--pid", &pid.to_string(), &format!("--nofile={soft}:")])
            .output()
            .unwrap();
        assert!(out.status.success(), "prlimit: {}", common::stderr(&out));
    };
    let free = lowest_free_fd(pid);
    limit(&free.to_string());
    for i in 0..5 {
        let root = common::output_within(env.spawn(&["status", "--json"]), WAIT, "root's status, out of descriptors");
        let text = common::stderr(&root);
        assert!(root.status.success() || text.contains("busy"), "root's status {i}: {text}");
        let theirs = common::output_within(nobodys_status(&env), WAIT, "nobody's status, out of descriptors");
        let text = common::stderr(&theirs);
        assert!(!theirs.status.success() && text.contains("busy"), "nobody's status {i}: {text}");
        assert_eq!(text.trim_end().lines().count(), 1, "{text}");
    }
    limit("8192");
    // The first connection after is served as any: another user's status is answered.
    let theirs = common::output_within(nobodys_status(&env), WAIT, "nobody's status, descriptors free again");
    assert!(theirs.status.success(), "nobody's status once descriptors are free: {}", common::stderr(&theirs));
    let stopped = agent.stop(nix::sys::signal::Signal::SIGTERM);
    let log = common::stderr(&stopped);
    assert!(stopped.status.success(), "the agent failed: {log}");
    let said = log.lines().filter(|l| l.contains("control socket: cannot accept a connection")).count();
    assert_eq!(said, 1, "out of descriptors was not said once: {log}");
    assert!(log.contains("control socket: accepting connections again"), "{log}");
}

/// GETs `/metrics` and `/api/v1/jobs/<a job no one runs>` in turn from the metrics port `argv[1]` for `argv[2]`
/// seconds, one connection at a time; prints the answers' codes by count and how long it ran.
const METRICS_FLOOD: &str = r"
import json, socket, sys, time
port, seconds = int(sys.argv[1]), float(sys.argv[2])
codes, t0, n = {}, time.time(), 0
while time.time() - t0 < seconds:
    path = b'/metrics' if n % 2 == 0 else b'/api/v1/jobs/no-such-job-%d' % n
    n += 1
    s = socket.create_connection(('127.0.0.1', port), timeout=20)
    s.sendall(b'GET ' + path + b' HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
    data = b''
    while True:
        c = s.recv(65536)
        if not c:
            break
        data += c
    s.close()
    code = data[9:12].decode() or 'none'
    codes[code] = codes.get(code, 0) + 1
print(json.dumps({'codes': codes, 'seconds': time.time() - t0}))
";

/// A metrics flood by another user over loopback (scrapes and lookups of jobs no one runs) is refused 429 once past
/// that user's budget, while every one of root's scrapes is answered; the user got no more than its budget allows.
#[test]
#[ignore = "needs root"]
fn a_metrics_flood_of_another_user_is_refused_past_its_budget_and_roots_scrapes_are_answered() {
    common::require_root();
    let env = Env::new();
    let (_agent, port, addr) = metrics_agent(&env);
    let up = || scrape(&addr);
    let flood = common::as_nobody("/usr/bin/python3")
        .args(["-c", METRICS_FLOOD, &port.to_string(), "4"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut answered = Vec::new();
    for _ in 0..10 {
        answered.push(up());
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = common::output_within(flood, Duration::from_mins(1), "nobody's metrics flood");
    assert!(out.status.success(), "the flood failed: {}", common::stderr(&out));
    let seen: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    eprintln!("nobody's metrics flood: {seen}; root's scrapes: {answered:?}");
    assert!(answered.iter().all(|a| a.as_ref().is_ok_and(|&code| code == 200)), "root's scrapes: {answered:?}");
    let count = |code: &str| seen["codes"][code].as_u64().unwrap_or(0);
    let codes = seen["codes"].as_object().unwrap();
    assert!(codes.keys().all(|c| ["200", "404", "429"].contains(&c.as_str())), "unexpected answers: {seen}");
    assert!(count("429") > 0, "the flood was never refused: {seen}");
    // A burst of 20, then 5 a second (each millisecond of the agent's CPU costing one more).
    let budget = 20.0 + 5.0 * seen["seconds"].as_f64().unwrap() + 1.0;
    let served = (count("200") + count("404")) as f64;
    assert!(served <= budget, "nobody got {served} answers, over the budget of {budget}");
}
