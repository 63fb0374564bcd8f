//! The bad-input table: every input here is wrong in one way (a value out of range, a file of the wrong kind, a
//! name that would split a log line, a typo in an event), and each must get what the rules promise: exit status
//! 2, one line on stderr, no panic, and nothing changed — no file in the test's directory created, removed or
//! rewritten, no cgroup left, no agent left running.

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::Env;

/// The longest any one refusal may take: a command still running then is stopped and the case fails.
const DEADLINE: Duration = Duration::from_secs(30);

/// The files a case is given, under the test's directory.
struct Files {
    /// The test's directory.
    dir: PathBuf,
}

impl Files {
    fn new(env: &Env) -> Self {
        let dir = env.dir.path().to_path_buf();
        let write = |name: &str, text: &[u8]| std::fs::write(dir.join(name), text).unwrap();
        write("config.toml", b"# the admin's configuration\npolicy = \"gang\"\n");
        write("empty.xml", b"");
        write("binary.xml", &[0xff, 0xfe, 0, 1, 2, 3]);
        write("corrupt.btf", &[0x9f, 0xeb, 1, 0, 24, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0]);
        write("not-topology.xml", b"<?xml version=\"1.0\"?><html><body>hi</body></html>");
        write("bad-slot.toml", b"slot = \"1e20s\"\n");
        write("bad-retention.toml", b"retention = 5\n");
        write("unknown-key.toml", b"polcy = \"gang\"\n");
        write("spec-no-kind.toml", b"kind = \"frobnicate\"\nname = \"x\"\n");
        let small =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/specs/mpl-small.toml"))
                .unwrap();
        write("spec-bad-slot.toml", small.replace("slot = \"200ms\"", "slot = \"1e20s\"").as_bytes());
        std::fs::create_dir(dir.join("a-directory")).unwrap();
        nix::unistd::mkfifo(&dir.join("fifo"), nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        // Experiment specs that are wrong as a whole, or for this machine (EXPERIMENT).
        write("spec-e-only.toml", format!("placement = \"e-only\"\n{small}").as_bytes());
        write("spec-no-progress.toml", format!("progress = []\n{small}").as_bytes());
        write(
            "spec-mpl-and-mixes.toml",
            small.replace("mpl = [1, 2]", "mpl = [1, 2]\nmixes = [[\"lu\", \"ep\"]]").as_bytes(),
        );
        write("spec-one-mix.toml", small.replace("mpl = [1, 2]", "mixes = [[\"lu\"]]").as_bytes());
        write("spec-no-repetitions.toml", format!("repetitions = 0\n{small}").as_bytes());
        Self { dir }
    }

    /// `name` in the test's directory, as an argument.
    fn at(&self, name: &str) -> String {
        self.dir.join(name).to_str().unwrap().to_string()
    }
}

/// What a case may not change: every file under the test's directory (kind, mode, size, contents) and every
/// cgroup lockstep could have made.
#[derive(Debug, PartialEq, Eq)]
struct Snapshot {
    files: BTreeMap<PathBuf, String>,
    cgroups: Vec<PathBuf>,
}

impl Snapshot {
    fn take(dir: &Path) -> Self {
        let mut files = BTreeMap::new();
        walk(dir, &mut files);
        Self { files, cgroups: lockstep_cgroups() }
    }
}

fn walk(dir: &Path, into: &mut BTreeMap<PathBuf, String>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let ty = meta.file_type();
        let what = if ty.is_dir() {
            walk(&path, into);
            format!("dir {:o}", meta.mode())
        } else if ty.is_file() {
            format!("file {:o} {:?}", meta.mode(), std::fs::read(&path).unwrap())
        } else if ty.is_fifo() {
            format!("fifo {:o}", meta.mode())
        } else if ty.is_socket() {
            format!("socket {:o}", meta.mode())
        } else {
            format!("other {:o}", meta.mode())
        };
        into.insert(path, what);
    }
}

/// The cgroups under lockstep's own directory of every hierarchy.
fn lockstep_cgroups() -> Vec<PathBuf> {
    let mut found = Vec::new();
    for hierarchy in std::fs::read_dir("/sys/fs/cgroup").into_iter().flatten().flatten() {
        let mine = hierarchy.path().join("lockstep");
        found.extend(std::fs::read_dir(&mine).into_iter().flatten().flatten().map(|e| e.path()));
    }
    found.sort();
    found
}

/// Runs `cmd` to its end or to [`DEADLINE`] (then kills it: the case fails, saying so).
fn output(mut cmd: Command, case: &str) -> Output {
    let child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    common::output_within(child, DEADLINE, &format!("{case} (a bad input must be refused at once)"))
}

/// Checks one refusal: exit 2, one line on stderr (containing `needle`), no panic, nothing changed; `Err` says
/// what was wrong.
fn refused(env: &Env, files: &Files, args: &[String], needle: &str) -> Result<(), String> {
    let case = format!("{args:?}");
    let before = Snapshot::take(&files.dir);
    let mut cmd = env.cmd();
    cmd.args(args).env("RUST_BACKTRACE", "0");
    let out = output(cmd, &case);
    let err = common::stderr(&out);
    let after = Snapshot::take(&files.dir);
    let problem = if err.contains("panicked") {
        "panicked".to_string()
    } else if out.status.code() != Some(2) {
        format!("exit {:?}, not 2", out.status)
    } else if err.lines().count() != 1 {
        format!("{} lines on stderr, not one", err.lines().count())
    } else if !err.contains(needle) {
        format!("no {needle:?} in the message")
    } else if before != after {
        "changed the test's directory or the cgroups".to_string()
    } else {
        return Ok(());
    };
    Err(format!("{case}: {problem}: {}", err.trim_end()))
}

/// `args` with `{NAME}` replaced by the path of file NAME of the test's directory.
fn expand(files: &Files, args: &[&str]) -> Vec<String> {
    args.iter()
        .map(|a| match a.strip_prefix('{').and_then(|a| a.strip_suffix('}')) {
            Some(name) => files.at(name),
            None => (*a).to_string(),
        })
        .collect()
}

/// Durations, counts and names at their extremes, for the agent's flags and configuration.
const AGENT: &[(&[&str], &str)] = &[
    (&["agent", "--slot", "1e20s"], "bad slot \"1e20s\" (expected a duration from 10ms to 1m"),
    (&["agent", "--slot", "-1s"], "'-1'"),
    (&["agent", "--slot", "NaNs"], "bad slot"),
    (&["agent", "--slot", ""], "bad slot"),
    (&["agent", "--slot", "2秒"], "bad slot"),
    (&["agent", "--retention", "1e20s"], "bad retention"),
    (&["agent", "--retention", "0s"], "bad retention"),
    (&["agent", "--job-history", "1e300d"], "bad job history"),
    (&["agent", "--sample-interval", "1e20s"], "bad sample interval"),
    (&["agent", "--sample-interval", "1ms"], "bad sample interval"),
    (&["agent", "--dcs-quantum", "nan ms"], "bad dcs quantum"),
    (&["agent", "--dcs-quantum", "1e309s"], "bad dcs quantum"),
    (&["agent", "--node", ""], "invalid node name \"\""),
    (&["agent", "--node", "a/b"], "invalid node name"),
    (&["agent", "--node", "a\nb"], "invalid node name"),
    (&["agent", "--node", "ünï"], "invalid node name"),
    (&["agent", "--slurm-node", "x y"], "invalid Slurm node name"),
    (&["agent", "--btf", "/nonexistent/vmlinux"], "BTF file /nonexistent/vmlinux: does not exist"),
    (&["agent", "--btf", "{a-directory}"], "is a directory"),
    (&["agent", "--btf", "{fifo}"], "is not a regular file"),
    (&["agent", "--metrics", "nonsense"], "bad --metrics"),
    (&["agent", "--metrics", "99999"], "bad --metrics"),
    (&["agent", "--policy", "round-robin"], "unknown co-scheduling policy"),
    (&["agent", "--events", "cycles:zz"], "unknown event modifier"),
    (&["agent", "--events", "no-such-event"], "unknown event"),
    (&["agent", "--socket", "{config.toml}"], "refusing socket"),
    (&["agent", "--socket", "{a-directory}"], "a directory is there"),
    (&["agent", "--socket", "{fifo}"], "refusing socket"),
    (&["agent", "--store", "{a-directory}"], "not a regular file"),
    (&["agent", "--store", "{fifo}"], "not a regular file"),
    (&["agent", "--config", "{a-directory}"], "config"),
    (&["agent", "--config", "{fifo}"], "is not a regular file"),
    (&["agent", "--config", "/nonexistent.toml"], "does not exist"),
    (&["agent", "--config", "{binary.xml}"], "is not UTF-8 text"),
    (&["agent", "--config", "{bad-slot.toml}"], "bad slot \"1e20s\""),
    (&["agent", "--config", "{bad-retention.toml}"], "bad config"),
    (&["agent", "--config", "{unknown-key.toml}"], "unknown field `polcy`"),
    (&["agent", "--frobnicate"], "--frobnicate"),
];

/// The CLI's own inputs.
const CLI: &[(&[&str], &str)] = &[
    (&[], "a subcommand is missing"),
    (&["frobnicate"], "frobnicate"),
    (&["policy"], "a subcommand is missing (usage: lockstep policy"),
    (&["experiment"], "a subcommand is missing"),
    (&["policy", "set", "gang", "--slot", "1e20s"], "bad --slot \"1e20s\""),
    (&["policy", "set", "gang", "--slot", "5ms"], "bad --slot"),
    (&["policy", "set", "round-robin"], "unknown co-scheduling policy"),
    (&["status"], "no agent at"),
    (&["release", "--job", "x"], "no agent at"),
    (&["adopt", "--job", "x", "--pid", "1,abc"], "--pid"),
    (&["adopt", "--job", "x", "--pid", "-1"], "-1"),
    (&["adopt", "--job", "bad/name", "--pid", "1"], "invalid job name"),
    // No job may pose as a Slurm job (which would take that job's cgroups and its epilog).
    (&["adopt", "--job", "slurm-42", "--pid", "1"], "are Slurm's jobs"),
    (&["release", "--job", "slurm-x"], "invalid job \"slurm-x\""),
    (&["adopt", "--job", "x", "--pid", "1", "--row", "4294967295"], "--row"),
    (&["topo", "--xml", "{a-directory}"], "topology file"),
    (&["topo", "--xml", "{fifo}"], "is not a regular file"),
    (&["topo", "--xml", "/dev/zero"], "is not a regular file"),
    (&["topo", "--xml", "/nonexistent.xml"], "does not exist"),
    (&["topo", "--xml", "{empty.xml}"], "topology file"),
    (&["topo", "--xml", "{binary.xml}"], "is not UTF-8 text"),
    (&["topo", "--xml", "{not-topology.xml}"], "topology file"),
    (&["place", "--policy", "fastest"], "unknown placement policy"),
    (&["place", "--policy", "any", "--cpus", "0"], "--cpus"),
    (&["place", "--policy", "any", "--cpus", "100000"], "--cpus 100000"),
    (&["run", "--job", "", "--place", "any", "--", "true"], "invalid job name"),
    (&["run", "--job", "x\ny", "--place", "any", "--", "true"], "invalid job name"),
    (&["run", "--job", "slurm-7", "--place", "any", "--", "true"], "are Slurm's jobs"),
    (&["run", "--job", "x", "--place", "any", "--weight", "0", "true"], "weight"),
    (&["run", "--job", "x", "--place", "any", "--mem-limit", "1e20", "true"], "byte count"),
    (&["run", "--job", "x", "--place", "any", "--mem-limit", "99999999999T", "true"], "byte count"),
    (&["run", "--job", "x", "--place", "any", "--", "no-such-command-xyz"], "command not found"),
    (&["run", "--job", "x", "--place", "any"], "CMD"),
    (&["stat", "-e", "cycles:zz", "true"], "unknown event modifier \"zz\""),
    (&["stat", "-e", "cycles:u", "true"], "is not supported"),
    (&["stat", "-e", "no-such-event", "true"], "unknown event \"no-such-event\""),
    (&["stat", "-e", "nosuchpmu/event=0x3c,umask=0/", "true"], "unknown PMU \"nosuchpmu\""),
    (&["stat", "-e", "task-clock,", "true"], "trailing ','"),
    (&["stat", "-e", "{task-clock", "true"], "missing '}'"),
    (&["stat", "-e", "", "true"], "event"),
    (&["stat", "-x", "", "-e", "task-clock", "true"], "--field-separator"),
    (&["stat", "-x", "\n", "-e", "task-clock", "true"], "--field-separator"),
    (&["stat", "-I", "5", "true"], "5 is not in 10..=3600000"),
    (&["stat", "-r", "0", "true"], "--repeat"),
    (&["stat", "-p", "abc"], "PID"),
    (&["stat", "-p", "999999999"], "PID 999999999 does not exist"),
    (&["stat", "-p", "1", "true"], "exactly one target"),
    (&["stat"], "exactly one target"),
    (&["experiment", "run", "{a-directory}"], "experiment spec"),
    (&["experiment", "run", "{fifo}"], "is not a regular file"),
    (&["experiment", "run", "/nonexistent.toml"], "does not exist"),
    (&["experiment", "run", "{spec-no-kind.toml}"], "experiment spec"),
    (&["experiment", "run", "{spec-bad-slot.toml}"], "\"1e20s\""),
    (&["completion", "tcsh"], "tcsh"),
    (&["--store", "{a-directory}", "jobs"], "not a regular file"),
    (&["--store", "{fifo}", "jobs"], "not a regular file"),
];

/// Experiment specs refused as a whole before anything runs: what this one-kind machine cannot place, empty and
/// contradictory fields, mixes that compare nothing.
const EXPERIMENT: &[(&[&str], &str)] = &[
    (&["experiment", "run", "{spec-e-only.toml}"], "placement = \"e-only\" on this machine (cores by kind: P ×"),
    (&["experiment", "run", "{spec-no-progress.toml}"], "progress = [] (expected one or both of"),
    (&["experiment", "run", "{spec-mpl-and-mixes.toml}"], "both mpl and mixes given"),
    (&["experiment", "run", "{spec-one-mix.toml}"], "mixes = [[\"lu\"]] compares nothing"),
    (&["experiment", "run", "{spec-no-repetitions.toml}"], "repetitions = 0"),
];

/// Files at `--store` that are not a lockstep store, or no file at all: each is refused, read only (the test's
/// snapshot holds their bytes and modes), and none is made where there was none.
const STORE: &[(&[&str], &str)] = &[
    (&["--store", "{other.db}", "jobs"], "not a lockstep store (application_id 0, user_version 0, tables: notes)"),
    (&["--store", "{other.db}", "run", "--job", "x", "--place", "any", "--", "true"], "not a lockstep store"),
    (&["--store", "{other-jobs.db}", "jobs"], "not a lockstep store (application_id 0, user_version 0, tables: jobs)"),
    (&["--store", "{other-id.db}", "jobs"], "not a lockstep store (application_id 1234"),
    (&["--store", "{empty.db}", "jobs"], "an empty file, not a lockstep store"),
    (&["--store", "{empty.db}", "run", "--job", "x", "--place", "any", "--", "true"], "an empty file"),
    (&["--store", "{garbage.db}", "jobs"], "not a SQLite file"),
    (&["--store", "{newer.db}", "jobs"], "written by a newer lockstep (schema version 99999"),
    (&["--store", "{missing.db}", "jobs"], "no store at"),
    (&["--store", "/nonexistent/d/s.db", "jobs"], "no store at /nonexistent/d/s.db: no directory /nonexistent/d"),
    (
        &["--store", "/nonexistent/d/s.db", "run", "--job", "x", "--place", "any", "--", "true"],
        "no directory /nonexistent/d",
    ),
    (&["--store", "{missing.db}", "experiment", "report", "x", "--reports", "{reports}"], "no store at"),
    (&["--store", "{other.db/s.db}", "jobs"], "other.db is a file, not a directory"),
];

/// The agent given a store that is not lockstep's (root, as [`AGENT`]).
const STORE_AGENT: &[(&[&str], &str)] = &[
    (&["agent", "--store", "{agent-other.db}"], "not a lockstep store"),
    (&["agent", "--store", "{agent-empty.db}"], "an empty file"),
    (&["agent", "--store", "{agent-newer.db}"], "written by a newer lockstep"),
    (&["agent", "--store", "{other.db}"], "mode 644: other users may read or write it"),
    (&["agent", "--store", "{agent-nobodys.db}"], "owned by UID 65534, not by the agent's user (UID 0)"),
    (&["agent", "--store", "{agent-open.db}"], "(chmod 600 "),
    (&["agent", "--store", "{agent-linked.db}"], "has 2 hard links"),
    (&["agent", "--store", "{agent-fifo.db}"], "not a regular file"),
    (&["agent", "--store", "{agent-new.db}", "--metrics", "192.0.2.1:9100"], "cannot serve metrics on 192.0.2.1:9100"),
];

/// Writes the files [`STORE`] names: other programs' SQLite files (one with a `jobs` table of its own, one with
/// its own application_id), an empty file, one that is not SQLite, a store of a newer lockstep, and a reports
/// directory holding an experiment's spec (so that `experiment report` gets as far as the store). All readable
/// by others (0644), which must stay so.
fn store_files(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let sqlite = |name: &str, sql: &str| {
        let conn = rusqlite::Connection::open(dir.join(name)).unwrap();
        conn.execute_batch(sql).unwrap();
    };
    sqlite("other.db", "CREATE TABLE notes (t TEXT); INSERT INTO notes VALUES ('mine');");
    sqlite("other-jobs.db", "CREATE TABLE jobs (id INTEGER PRIMARY KEY, what TEXT);");
    sqlite("other-id.db", "PRAGMA application_id = 1234; CREATE TABLE notes (t TEXT);");
    sqlite(
        "newer.db",
        &format!(
            "PRAGMA application_id = {}; PRAGMA user_version = 99999; CREATE TABLE jobs (id INTEGER);",
            lockstep_store::APPLICATION_ID
        ),
    );
    std::fs::write(dir.join("empty.db"), b"").unwrap();
    std::fs::write(dir.join("garbage.db"), b"GIF89a, not a database\n".repeat(64)).unwrap();
    std::fs::create_dir_all(dir.join("reports/x")).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/specs/mpl-small.toml"),
        dir.join("reports/x/spec.toml"),
    )
    .unwrap();
    for name in ["other.db", "other-jobs.db", "other-id.db", "newer.db", "empty.db", "garbage.db"] {
        std::fs::set_permissions(dir.join(name), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    // The agent's: copies only root may touch (it refuses any other, see `agent_store_files`).
    for name in ["other.db", "empty.db", "newer.db"] {
        std::fs::copy(dir.join(name), dir.join(format!("agent-{name}"))).unwrap();
        std::fs::set_permissions(dir.join(format!("agent-{name}")), std::fs::Permissions::from_mode(0o600)).unwrap();
    }
}

/// Writes the stores the agent must refuse though they are lockstep's (it replays a store's restore journal as
/// root): one nobody owns, one others may read, one with a second name, and a FIFO at a store's path.
fn agent_store_files(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    for name in ["agent-nobodys.db", "agent-open.db", "agent-linked.db"] {
        drop(lockstep_store::Store::open(&dir.join(name)).unwrap());
    }
    std::os::unix::fs::chown(dir.join("agent-nobodys.db"), Some(65534), Some(65534)).unwrap();
    std::fs::set_permissions(dir.join("agent-open.db"), std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::hard_link(dir.join("agent-linked.db"), dir.join("agent-linked-too.db")).unwrap();
    nix::unistd::mkfifo(&dir.join("agent-fifo.db"), nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
}

/// `lockstep timeline`: the window's bounds and the drawing's file, refused before the agent is asked.
const TIMELINE: &[(&[&str], &str)] = &[
    (&["timeline", "--ms", "5"], "5 is not in 10..=5000"),
    (&["timeline", "--ms", "6000"], "6000 is not in 10..=5000"),
    (&["timeline", "--ms", "-1"], "'-1'"),
    (&["timeline", "--svg", "{a-directory}"], "is a directory"),
    (&["timeline", "--svg", "{fifo}"], "is not a regular file"),
    (&["timeline", "--svg", "/nonexistent/d/t.svg"], "its directory does not exist"),
    (&["timeline"], "no agent at"),
];
/// The CLI's inputs of one error style: conflicting output formats, a port of 0, a file where a directory goes,
/// a socket nobody listens on.
const AGENTCLI: &[(&[&str], &str)] = &[
    (&["stat", "-x", ",", "--json", "-e", "task-clock", "true"], "--json"),
    (&["stat", "--json", "-x", ";", "-e", "task-clock", "true"], "--json"),
    (&["stat", "--job", "slurm-1", "--metrics-port", "0"], "--metrics-port"),
    (&["man", "{config.toml}"], "is not a directory (expected a directory"),
    (&["man", "/dev/null/man1"], "a part of the path is not a directory"),
    (&["--socket", "{config.toml}", "status"], "no agent at"),
    (&["--socket", "{a-directory}", "status"], "no agent at"),
    (&["--socket", "{fifo}", "policy", "set", "gang"], "no agent at"),
    (&["experiment", "run", "--reports", "{config.toml}", "{spec-bad-slot.toml}"], "\"1e20s\""),
];

/// The agent's inputs that must be refused before it makes anything: BTF files that are not BTF whatever the
/// policy, and a metrics port of 0.
const AGENTCLI_AGENT: &[(&[&str], &str)] = &[
    (&["agent", "--btf", "{binary.xml}"], "is not BTF"),
    (&["agent", "--policy", "dcs", "--btf", "{binary.xml}"], "is not BTF"),
    (&["agent", "--btf", "{config.toml}"], "is not BTF"),
    (&["agent", "--btf", "{corrupt.btf}"], "libbpf cannot parse"),
    (&["agent", "--policy", "dcs", "--btf", "{corrupt.btf}"], "libbpf cannot parse"),
    (&["agent", "--policy", "gang", "--btf", "{empty.xml}"], "too short to be BTF"),
    (&["agent", "--metrics", "0"], "port 0"),
    (&["agent", "--metrics", "127.0.0.1:0"], "port 0"),
    (&["agent", "--metrics", "[::1]:0"], "port 0"),
];

/// The metrics door's scrapers: a name that is no user, nor a UID or an address, is refused before anything is made.
const DOORS_AGENT: &[(&[&str], &str)] = &[
    (&["agent", "--metrics", "9464", "--metrics-scraper", "no-such-user-lockstep"], "bad --metrics-scraper"),
    (&["agent", "--metrics-scraper", "10.0.0.300"], "bad --metrics-scraper"),
];

/// Held by the tests that start an agent, and by the table test, whose snapshots of lockstep's cgroups an agent
/// starting beside it would change.
static AGENTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn every_bad_input_is_one_line_exit_2_and_changes_nothing() {
    let _agents = AGENTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let env = Env::new();
    let files = Files::new(&env);
    store_files(&files.dir);
    // The agent's cases need root to get as far as the check that refuses them, and the agent's binary, which
    // `lockstep agent` execs.
    let agent_ok = if !common::is_root() {
        false
    } else if let Err(why) = common::lockstepd() {
        common::missing(&format!("the agent's cases: {why}"));
        false
    } else {
        true
    };
    if agent_ok {
        agent_store_files(&files.dir);
    }
    let agent_tables: [&[(&[&str], &str)]; 3] = [AGENT, STORE_AGENT, AGENTCLI_AGENT];
    let cases: Vec<&(&[&str], &str)> = [CLI, EXPERIMENT, STORE, TIMELINE, AGENTCLI]
        .into_iter()
        .chain(agent_tables.into_iter().filter(|_| agent_ok))
        .chain([DOORS_AGENT].into_iter().filter(|_| agent_ok))
        .flatten()
        .collect();
    let failed: Vec<String> =
        cases.iter().filter_map(|(args, needle)| refused(&env, &files, &expand(&files, args), needle).err()).collect();
    assert!(
        failed.is_empty(),
        "{} of {} bad inputs not refused cleanly:\n{}",
        failed.len(),
        cases.len(),
        failed.join("\n")
    );
    assert!(!env.store().exists(), "a refused command created the store");
    assert!(!env.socket().exists(), "a refused agent left its socket");
}

/// A file the user may not read is "permission denied", for every command that reads one (hwloc's own file
/// reader aborted the process on it).
#[test]
#[ignore = "needs root"]
fn a_file_the_user_cannot_read_is_permission_denied() {
    common::require_root();
    let env = Env::new();
    let files = Files::new(&env);
    std::fs::set_permissions(env.dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let secret = files.at("config.toml");
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let store = files.at("store.db");
    std::fs::write(&store, b"").unwrap();
    std::fs::set_permissions(&store, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    for (args, needle) in [
        (vec!["topo", "--xml", &secret], "topology file"),
        (vec!["experiment", "run", &secret], "experiment spec"),
        (vec!["--store", &store, "jobs"], "permission denied"),
    ] {
        let case = format!("{args:?} as nobody");
        let before = Snapshot::take(&files.dir);
        let mut cmd = common::as_nobody(env!("CARGO_BIN_EXE_lockstep"));
        cmd.args(&args).env("RUST_BACKTRACE", "0");
        let out = output(cmd, &case);
        let err = common::stderr(&out);
        assert!(!err.contains("panicked"), "{case}: panicked: {err}");
        assert_eq!(out.status.code(), Some(2), "{case}: {err}");
        assert_eq!(err.lines().count(), 1, "{case}: {err}");
        assert!(err.contains(needle) && err.contains("permission denied"), "{case}: {err}");
        assert_eq!(before, Snapshot::take(&files.dir), "{case}: changed something");
    }
}

/// The agent started by a user other than root refuses in one line, before it makes its socket, its store (or the
/// store's -wal and -shm) or anything else.
#[test]
#[ignore = "needs root"]
fn the_agent_as_a_user_refuses_and_makes_nothing() {
    common::require_root();
    let env = Env::new();
    let files = Files::new(&env);
    // nobody may reach the directory, so that only the refusal can stop the agent from making its files there.
    std::fs::set_permissions(env.dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let before = Snapshot::take(&files.dir);
    let mut cmd = common::as_nobody(env!("CARGO_BIN_EXE_lockstep"));
    cmd.env("LOCKSTEP_STORE", env.store()).env("LOCKSTEP_SOCKET", env.socket()).env("RUST_BACKTRACE", "0");
    cmd.args(["agent", "--policy", "gang"]);
    let out = output(cmd, "lockstep agent as nobody");
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("lockstep: agent: needs root (running as UID 65534"), "{err}");
    assert_eq!(before, Snapshot::take(&files.dir), "the refused agent changed something");
    assert!(!env.store().exists() && !env.socket().exists(), "the refused agent made its store or socket");
}

/// `status` (and every command that talks to the agent) answers at once when no agent listens: nothing at the
/// socket's path, a socket left by an agent that is gone, or an agent that is stopped (SIGSTOP, Ctrl-Z) and whose
/// socket the kernel still accepts connections on.
#[test]
#[ignore = "needs root"]
fn a_stopped_or_missing_agent_is_said_at_once() {
    common::require_root();
    let _agents = AGENTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let env = Env::new();
    // The socket of an agent that ended without removing it: a socket file nobody listens on.
    let stale = env.dir.path().join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    let quick = Duration::from_secs(5);
    for socket in [env.dir.path().join("nothing.sock"), stale] {
        let mut cmd = env.cmd();
        cmd.arg("--socket").arg(&socket).arg("status");
        let case = format!("status at {}", socket.display());
        let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let out = common::output_within(child, quick, &case);
        let err = common::stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{case}: {err}");
        assert_eq!(err.lines().count(), 1, "{case}: {err}");
        let said = format!("lockstep: no agent at {}", socket.display());
        assert!(err.starts_with(&said) && err.contains("systemctl status lockstep-agent"), "{case}: {err}");
    }
    // An agent that is there but stopped: its PID is named, and the way to continue it.
    let agent = common::Agent::start(&env, &["--policy", "cfs"]);
    let pid = agent.pid();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    // A stop reaches every thread of the agent in turn: the one that owns the socket may be stopped last.
    let proc_stat = || std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    common::wait_until("the agent stopped", common::WAIT, proc_stat, |s| {
        s.rsplit(')').next().is_some_and(|r| r.trim_start().starts_with('T'))
    });
    let child = env.cmd().arg("status").stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let out = common::output_within(child, quick, "status of a stopped agent");
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(&format!("its process {pid} is stopped (kill -CONT {pid}")), "{err}");
    // Continued, it answers again.
    let out = env.run(&["status"]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    let stopped = agent.stop(nix::sys::signal::Signal::SIGTERM);
    assert!(stopped.status.success(), "{}", common::stderr(&stopped));
}

/// A bad setup found under a step says both, in one line: what was being done and what to fix. `stat --job
/// slurm-5` with Slurm's clients missing from PATH is bad input (exit 2) that names the job and the missing
/// client; an agent that refuses the connection is a failure (exit 1) whose reason is said once.
#[test]
fn a_step_and_its_cause_are_said_together_once() {
    let env = Env::new();
    let empty = env.dir.path().join("no-slurm");
    std::fs::create_dir(&empty).unwrap();
    let mut cmd = env.cmd();
    cmd.args(["stat", "--job", "slurm-5"]).env("PATH", &empty);
    let out = output(cmd, "stat --job slurm-5 without squeue");
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("the nodes of job 5") && err.contains("squeue"), "the step and the missing client: {err}");
    // Port 1 of loopback: nothing listens there (a privileged port no test binds).
    let mut cmd = env.cmd();
    cmd.args(["stat", "--job", "lu", "--nodes", "127.0.0.1:1"]);
    let out = output(cmd, "stat --nodes 127.0.0.1:1");
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("127.0.0.1:1"), "the node: {err}");
    assert_eq!(err.matches("refused").count(), 1, "the reason, once: {err}");
}

/// `adopt --cgroup` of lockstep's own tree (the parent of every job's cgroup), given relative to the hierarchies
/// or absolute, is refused in one line: as one job, every job below it would be frozen together.
#[test]
#[ignore = "needs root"]
fn adopting_locksteps_own_tree_is_refused() {
    common::require_root();
    let _agents = AGENTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let env = Env::new();
    let agent = common::Agent::start(&env, &["--policy", "gang", "--slot", "200ms"]);
    let hierarchy = common::job_dirs("x")[0].parent().unwrap().to_path_buf();
    for tree in [PathBuf::from("/lockstep"), hierarchy] {
        let case = format!("adopt --cgroup {}", tree.display());
        let out = env.run(&["adopt", "--job", "everything", "--cgroup", tree.to_str().unwrap()]);
        let err = common::stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{case}: {err}");
        assert_eq!(err.lines().count(), 1, "{case}: {err}");
        assert!(err.contains("lockstep's own tree"), "{case}: {err}");
    }
    let status = env.run(&["status", "--json"]);
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status["jobs"], serde_json::json!([]), "a refused adoption left a job");
    let stopped = agent.stop(nix::sys::signal::Signal::SIGTERM);
    assert!(stopped.status.success(), "{}", common::stderr(&stopped));
}
