//! How the controller's hooks tell the agents of a job's nodes the places they give and change, so that no agent
//! asks slurmctld while its jobs run: one HTTP `POST` of [`PATH`] to each node's agent (its metrics door), whose
//! body is a munge credential (munge: the authentication every Slurm node already trusts) sealing the node's name
//! and the records of that node's jobs whose place was given or changed, as `squeue -O` [`JOB_FORMAT`] prints
//! them. An agent takes a notice only from root or `SlurmUser`, only for its own node, and only once (munged
//! refuses a credential it decoded before: [`decode`]).
//!
//! [`JOB_FORMAT`]: crate::JOB_FORMAT

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::client::{run_with_input, scontrol};
use crate::error::{Error, Result};
use crate::{records, JobInfo, Listed, FIELD_END};

/// The path the agents take notices on.
pub const PATH: &str = "/slurm/places";

/// A notice's first line, before the node's name: its kind and version.
const HEADER: &str = "lockstep-places 1 node=";

/// munged's socket when Slurm names none: munge's own default.
const DEFAULT_SOCKET: &str = "/run/munge/munge.socket.2";

/// munge's default socket.
pub fn default_socket() -> PathBuf {
    PathBuf::from(DEFAULT_SOCKET)
}

/// The socket an `AuthInfo` value names (`socket=/run/munge/munge.socket.2,ttl=60`), if it names one.
pub fn socket_in(auth_info: &str) -> Option<PathBuf> {
    auth_info.split(',').find_map(|o| o.trim().strip_prefix("socket=")).filter(|s| !s.is_empty()).map(PathBuf::from)
}

/// munged's socket for the controller's hooks: `LOCKSTEP_MUNGE_SOCKET`, else the one slurm.conf's `AuthInfo`
/// names (`$SLURM_CONF`, else /etc/slurm/slurm.conf: the controller always has the file), else munge's default.
pub fn controller_socket() -> PathBuf {
    if let Some(socket) = std::env::var_os("LOCKSTEP_MUNGE_SOCKET") {
        return PathBuf::from(socket);
    }
    let conf = std::env::var_os("SLURM_CONF").map_or_else(|| PathBuf::from("/etc/slurm/slurm.conf"), PathBuf::from);
    let text = std::fs::read_to_string(conf).unwrap_or_default();
    text.lines()
        .map(|l| l.split('#').next().unwrap_or_default())
        .find_map(|l| l.split_once('=').filter(|(k, _)| k.trim().eq_ignore_ascii_case("AuthInfo")).map(|(_, v)| v))
        .and_then(socket_in)
        .unwrap_or_else(default_socket)
}

/// What one node's agent is told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    /// The node.
    pub node: String,
    /// The sealed text: [`HEADER`] and the node, then a record of each of its jobs.
    pub payload: String,
}

/// The notices for the nodes of `changed` (the jobs whose place was given or changed), made at `at_ms`
/// (milliseconds since the Unix epoch): one for each node any of them runs on, naming every job of `all` (each as
/// its `AdminComment` now is) that holds that node, so that a notice also sets right what a lost one left wrong; in
/// the order of the nodes' names.
pub fn notices(changed: &[JobInfo], all: &[JobInfo], at_ms: u64) -> Vec<Notice> {
    let mut nodes: Vec<&str> = changed.iter().flat_map(|j| j.nodes.iter().map(String::as_str)).collect();
    nodes.sort_unstable();
    nodes.dedup();
    nodes
        .into_iter()
        .map(|node| {
            let mut payload = format!("{HEADER}{node} at={at_ms}\n");
            for job in all.iter().filter(|j| j.holds_nodes() && j.nodes.iter().any(|n| n == node)) {
                payload.push_str(&job.record());
                payload.push('\n');
            }
            Notice { node: node.to_string(), payload }
        })
        .collect()
}

/// What a notice says: the node it is for, when it was made, and the jobs it names, each with its row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Told {
    /// The node.
    pub node: String,
    /// When the controller's hook made it (ms since the Unix epoch): of two notices, the later one holds.
    pub at_ms: u64,
    /// Every job that holds the node, as the hook saw it.
    pub jobs: Vec<Listed>,
}

/// What notice `payload` says. A text that is not a notice, or a record that names no job, fails the whole
/// notice.
pub fn parse(payload: &str) -> Result<Told> {
    let unreadable = |why: &str| Error::Unreadable(why.to_string());
    let (first, rest) = payload.split_once('\n').unwrap_or((payload, ""));
    let head = first.strip_prefix(HEADER).ok_or_else(|| unreadable("not a notice of lockstep's places"))?;
    let (node, at) = head.split_once(" at=").ok_or_else(|| unreadable("a notice without its time"))?;
    let at_ms =
        at.parse().ok().filter(|_| !node.is_empty()).ok_or_else(|| unreadable("a notice without its node or time"))?;
    let jobs = records(rest)
        .iter()
        .filter(|r| !r.trim().is_empty())
        .map(|r| {
            JobInfo::parse(r)
                .map(|j| Listed { id: j.id, row: j.row() })
                .ok_or_else(|| Error::Unreadable(format!("a notice's record names no job: {r:?}")))
        })
        .collect::<Result<_>>()?;
    Ok(Told { node: node.to_string(), at_ms, jobs })
}

/// A munge credential sealing `payload`, from munged at `socket` (as this process's user).
pub fn encode(socket: &Path, payload: &str) -> Result<String> {
    let socket = socket.to_string_lossy();
    let out = run_with_input("munge", &["-S", &socket], payload.as_bytes().to_vec())?;
    Ok(out.trim().to_string())
}

/// What a credential sealed, and who sealed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sealed {
    /// The UID of the process that made the credential, as munge vouches for it.
    pub uid: u32,
    /// What it sealed.
    pub payload: String,
}

/// Whether `body` has the shape of a munge credential (`MUNGE:` base64 `:`), checked before munged is asked to
/// decode it: anything else costs the agent no process.
pub fn looks_like_credential(body: &[u8]) -> bool {
    let Some(inner) = body.trim_ascii().strip_prefix(b"MUNGE:").and_then(|b| b.strip_suffix(b":")) else {
        return false;
    };
    !inner.is_empty() && inner.iter().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
}

/// The UID and payload of credential `credential`, decoded by munged at `socket`: refused when munged refuses it
/// (another key, expired, or decoded once already: munged says "Replayed credential").
pub fn decode(socket: &Path, credential: &[u8]) -> Result<Sealed> {
    let socket = socket.to_string_lossy();
    let out = run_with_input("unmunge", &["-S", &socket, "-N", "-k", "UID"], credential.to_vec()).map_err(|e| {
        // unmunge says why in its exit status (munge's error codes), not on stderr; an unmunge that cannot run or
        // did not answer is no refusal.
        if !matches!(e, Error::Client(crate::error::ClientError::Failed { .. })) {
            return e;
        }
        let why = match e.status() {
            Some(15) => "Expired credential".to_string(),
            Some(16) => "Rewound credential (made in the future)".to_string(),
            Some(17) => "Replayed credential (decoded once already)".to_string(),
            Some(18) => "Unauthorized credential".to_string(),
            Some(8) => "Bad credential (not munge's)".to_string(),
            Some(14) => "Invalid credential (another key)".to_string(),
            _ => e.to_string(),
        };
        Error::Refused(why)
    })?;
    // `UID: 0`, a blank line, then the payload.
    let (meta, payload) =
        out.split_once("\n\n").ok_or_else(|| Error::Unreadable("unmunge printed no payload".into()))?;
    let uid = meta
        .lines()
        .find_map(|l| l.strip_prefix("UID:"))
        .and_then(|u| u.trim().parse().ok())
        .ok_or_else(|| Error::Unreadable("unmunge printed no UID".into()))?;
    Ok(Sealed { uid, payload: payload.to_string() })
}

/// How long the controller's hooks keep the nodes' addresses before asking slurmctld again.
const ADDRESSES_KEPT: Duration = Duration::from_mins(10);

/// The addresses (`NodeAddr`) of `nodes`, from the hooks' file of them beside the row lock, asked of slurmctld
/// (one `scontrol -o show node` for every node) when a node is not in it or it is older than [`ADDRESSES_KEPT`].
pub fn addresses(nodes: &[String]) -> Result<BTreeMap<String, String>> {
    let path = crate::lock_path().with_file_name("nodes");
    let fresh = std::fs::metadata(&path)
        .and_then(|m| m.modified())
        .is_ok_and(|t| SystemTime::now().duration_since(t).is_ok_and(|age| age < ADDRESSES_KEPT));
    let kept: BTreeMap<String, String> = if fresh {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        text.lines().filter_map(|l| l.split_once(' ')).map(|(n, a)| (n.to_string(), a.to_string())).collect()
    } else {
        BTreeMap::new()
    };
    let all = if nodes.iter().all(|n| kept.contains_key(n)) {
        kept
    } else {
        let text = scontrol(&["-o", "show", "node"])?;
        let asked: BTreeMap<String, String> = text
            .lines()
            .filter_map(|l| {
                let f = crate::fields(l);
                let get = |key: &str| f.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
                Some((get("NodeName")?, get("NodeAddr")?))
            })
            .collect();
        let text: String = asked.iter().flat_map(|(n, a)| [n.as_str(), " ", a.as_str(), "\n"]).collect();
        // Written whole, then put in place: a hook that reads it meanwhile sees the old file or the new one.
        let partial = path.with_file_name("nodes.new");
        if std::fs::write(&partial, text).and_then(|()| std::fs::rename(&partial, &path)).is_err() {
            let _ = std::fs::remove_file(&partial);
        }
        asked
    };
    Ok(nodes.iter().filter_map(|n| Some((n.clone(), all.get(n)?.clone()))).collect())
}

impl JobInfo {
    /// The job as a line of `squeue -O` [`JOB_FORMAT`](crate::JOB_FORMAT) prints it (without its node list: a
    /// notice is for one node), read back by [`JobInfo::parse`].
    pub fn record(&self) -> String {
        let (array, task) = self.array_task.map_or((self.id.0, "N/A".to_string()), |(a, t)| (a.0, t.to_string()));
        let het = self.het_job.map_or_else(|| "N/A".to_string(), |h| h.to_string());
        let e = FIELD_END;
        let (id, state, restarts, comment) = (self.id, &self.state, self.restarts, &self.admin_comment);
        format!("{id}{e}{state}{e}{e}{restarts}{e}{array}{e}{task}{e}{het}{e}{comment}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Row, SlurmJobId};

    fn job(id: u64, nodes: &[&str], comment: &str) -> JobInfo {
        JobInfo {
            id: SlurmJobId(id),
            state: "RUNNING".into(),
            nodes: nodes.iter().map(ToString::to_string).collect(),
            restarts: 0,
            array_task: None,
            het_job: None,
            admin_comment: comment.into(),
        }
    }

    #[test]
    fn a_notice_names_each_node_s_jobs_and_reads_back_their_places() {
        let a = job(7, &["n1", "n2"], "JS1:x lockstep_row=0/2 lockstep_run=0 lockstep_job=7");
        let mut b = job(9, &["n2"], "lockstep_row=1/2 lockstep_from=5 lockstep_before=0/1");
        b.array_task = Some((SlurmJobId(8), 1));
        let c = job(4, &["n3"], "lockstep_row=0/1");
        let pending = JobInfo { state: "PENDING".into(), ..job(5, &["n2"], "") };
        let all = [a.clone(), b, c, pending];
        let notices = notices(&[a], &all, 77);
        assert_eq!(notices.iter().map(|n| n.node.as_str()).collect::<Vec<_>>(), ["n1", "n2"]);
        let told = parse(&notices[1].payload).unwrap();
        assert_eq!((told.node.as_str(), told.at_ms), ("n2", 77));
        // Every job holding n2, not only the one that changed; none that holds no node.
        let jobs = told.jobs;
        assert_eq!(jobs.iter().map(|l| l.id.0).collect::<Vec<_>>(), [7, 9]);
        assert!(matches!(jobs[0].row, Some(Row::Cluster(s)) if s.place.to_string() == "0/2"));
        // Words that name no job are taken as the job's own (written before lockstep recorded it).
        assert!(jobs[1].row.is_some(), "{jobs:?}");
    }

    #[test]
    fn a_text_that_is_no_notice_is_refused() {
        assert!(parse("hello\n1|RUNNING||0|1|N/A|N/A|").is_err());
        assert!(parse("lockstep-places 1 node= at=1\n").is_err());
        assert!(parse("lockstep-places 1 node=n1\n").is_err());
        assert!(parse("lockstep-places 1 node=n1 at=x\n").is_err());
        assert!(parse("lockstep-places 1 node=n1 at=1\nnot a record").is_err());
        let empty = Told { node: "n1".into(), at_ms: 1, jobs: vec![] };
        assert_eq!(parse("lockstep-places 1 node=n1 at=1\n").unwrap(), empty);
    }

    #[test]
    fn only_a_credential_s_shape_is_decoded() {
        assert!(looks_like_credential(b"MUNGE:AwQFAAAL+/9=:\n"));
        for body in [&b""[..], b"MUNGE::", b"MUNGE:abc", b"GET / HTTP/1.1", b"MUNGE:a b:"] {
            assert!(!looks_like_credential(body), "{body:?}");
        }
    }

    #[test]
    fn the_socket_is_the_one_an_auth_info_value_names() {
        assert_eq!(socket_in("socket=/tmp/m.sock,ttl=60"), Some(PathBuf::from("/tmp/m.sock")));
        assert_eq!(socket_in("ttl=60"), None);
    }
}
