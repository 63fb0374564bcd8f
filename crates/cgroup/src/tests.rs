//! Backends against a scratch tree with cgroup v2 file semantics, and against the real unified hierarchy.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::*;
use lockstep_core::cpulist::CpuList;
use lockstep_core::ident::JobName;

/// Job name `name`, which a test gives valid.
fn job(name: &str) -> JobName {
    name.parse().unwrap()
}

fn scratch_v2(controllers: &str) -> lockstep_scratch::TempDir {
    let dir = lockstep_scratch::tempdir().unwrap();
    fs::write(dir.path().join("cgroup.controllers"), controllers).unwrap();
    fs::write(dir.path().join("cgroup.subtree_control"), "").unwrap();
    fs::write(dir.path().join("cpuset.cpus.effective"), "0-3\n").unwrap();
    fs::write(dir.path().join("cpuset.mems.effective"), "0\n").unwrap();
    dir
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn full_limits() -> Limits {
    Limits {
        cpus: Some(CpuList::parse("1-2").unwrap()),
        mems: Some(CpuList::parse("0").unwrap()),
        weight: Some(200),
        mem_limit: Some(1 << 30),
    }
}

#[test]
fn weight_converts_like_systemd() {
    assert_eq!(weight_to_shares(100), 1024);
    assert_eq!(weight_to_shares(200), 2048);
    assert_eq!(weight_to_shares(1), 10);
    assert_eq!(weight_to_shares(10_000), 102_400);
}

#[test]
fn v2_writes_limits_and_enables_controllers() {
    let root = scratch_v2("cpuset cpu io memory pids");
    let backend = V2::new(root.path().to_path_buf());
    let cg = backend.create(&job("job-a"), &full_limits()).unwrap();
    let dir = root.path().join("lockstep/job-a");
    assert_eq!(cg.dirs, vec![dir.clone()]);
    assert_eq!(cg.version, Version::V2);
    assert_eq!(read(&root.path().join("cgroup.subtree_control")), "+cpuset +cpu +memory");
    assert_eq!(read(&root.path().join("lockstep/cgroup.subtree_control")), "+cpuset +cpu +memory");
    assert_eq!(read(&dir.join("cpuset.cpus")), "1-2");
    assert_eq!(read(&dir.join("cpuset.mems")), "0");
    assert_eq!(read(&dir.join("cpu.weight")), "200");
    assert_eq!(read(&dir.join("memory.max")), "1073741824");
    assert!(matches!(backend.create(&job("job-a"), &full_limits()), Err(CreateError::Exists(_))));
    cg.destroy(Duration::from_secs(1)).unwrap();
    assert!(!dir.exists());
}

/// cpu for every job (the agent weighs jobs), cpuset and memory only for the limits that need them.
#[test]
fn v2_enables_cpu_for_every_job_and_the_rest_as_the_limits_need() {
    let limits = Limits { cpus: Some(CpuList::parse("0").unwrap()), ..Limits::default() };
    for (controllers, enabled) in [("cpuset cpu memory", "+cpuset +cpu"), ("cpuset memory", "+cpuset")] {
        let root = scratch_v2(controllers);
        let cg = V2::new(root.path().to_path_buf()).create(&job("no-weight"), &limits).unwrap();
        assert_eq!(read(&root.path().join("cgroup.subtree_control")), enabled);
        assert_eq!(read(&root.path().join("lockstep/cgroup.subtree_control")), enabled);
        cg.destroy(Duration::from_secs(1)).unwrap();
    }
    let root = scratch_v2("cpu memory");
    let cg = V2::new(root.path().to_path_buf()).create(&job("no-limits"), &Limits::default()).unwrap();
    assert_eq!(read(&root.path().join("cgroup.subtree_control")), "+cpu");
    cg.destroy(Duration::from_secs(1)).unwrap();
}

#[test]
fn v2_rejects_what_it_cannot_enforce_and_leaves_nothing() {
    let root = scratch_v2("cpu memory");
    let backend = V2::new(root.path().to_path_buf());
    assert!(matches!(backend.create(&job("j"), &full_limits()), Err(CreateError::MissingController("cpuset", _))));
    let root = scratch_v2("cpuset cpu memory");
    let backend = V2::new(root.path().to_path_buf());
    let beyond = Limits { cpus: Some(CpuList::parse("2-7").unwrap()), ..Limits::default() };
    let err = backend.create(&job("j"), &beyond).unwrap_err();
    assert!(err.to_string().contains("beyond"), "{err}");
    assert!(!root.path().join("lockstep/j").exists());
}

#[test]
fn v1_writes_shares_and_inherits_cpuset() {
    let dirs: Vec<lockstep_scratch::TempDir> = (0..4).map(|_| lockstep_scratch::tempdir().unwrap()).collect();
    let mounts: Vec<(String, std::path::PathBuf)> = ["cpuset", "cpu", "memory", "freezer"]
        .iter()
        .zip(&dirs)
        .map(|(c, dir)| (c.to_string(), dir.path().to_path_buf()))
        .collect();
    let cpuset_root = mounts[0].1.clone();
    fs::write(cpuset_root.join("cpuset.cpus"), "0-3\n").unwrap();
    fs::write(cpuset_root.join("cpuset.mems"), "0\n").unwrap();
    let backend = V1::new(mounts.clone());
    let limits = Limits { weight: Some(50), mem_limit: Some(4096), ..Limits::default() };
    let cg = backend.create(&job("v1job"), &limits).unwrap();
    assert_eq!(cg.dirs.len(), 4);
    assert_eq!(read(&cpuset_root.join("lockstep/cpuset.cpus")), "0-3");
    assert_eq!(read(&cpuset_root.join("lockstep/v1job/cpuset.cpus")), "0-3");
    assert_eq!(read(&mounts[1].1.join("lockstep/v1job/cpu.shares")), "512");
    assert_eq!(read(&mounts[2].1.join("lockstep/v1job/memory.limit_in_bytes")), "4096");
    cg.destroy(Duration::from_secs(1)).unwrap();
    for (_, m) in &mounts {
        assert!(!m.join("lockstep/v1job").exists());
    }
}

/// The real cgroup2 hierarchy (here without controllers): membership before exec, kill and removal.
#[test]
fn v2_membership_on_the_real_unified_hierarchy() {
    let Some(root) = unified_mount().filter(|_| nix::unistd::geteuid().is_root()) else {
        eprintln!("skipped: needs root and a cgroup2 mount");
        return;
    };
    let name = format!("unit-v2-{}", std::process::id());
    let cg = V2::new(root.clone()).create(&job(&name), &Limits::default()).unwrap();
    let procs = cg.procs_paths();
    let mut cmd = Command::new("sleep");
    cmd.arg("30");
    // SAFETY: `join` is async-signal-safe and uses memory prepared before the fork.
    unsafe {
        cmd.pre_exec(move || join(&procs[0]));
    }
    let mut child = cmd.spawn().unwrap();
    let membership = read(Path::new(&format!("/proc/{}/cgroup", child.id())));
    assert!(membership.lines().any(|l| l == format!("0::/lockstep/{name}")), "{membership}");
    assert_eq!(cg.pids().unwrap(), vec![child.id() as i32]);
    cg.destroy(Duration::from_secs(5)).unwrap();
    assert!(!child.wait().unwrap().success());
    assert!(!root.join("lockstep").join(&name).exists());
}

/// A job cgroup `unit-<what>-<pid>` on the machine's own hierarchy (with the cpu controller), and a way to start
/// `sleep 30` in it; `None` (skipped) without root.
fn real_job(what: &str) -> Option<(JobCgroup, impl Fn() -> std::process::Child)> {
    let Some(backend) = detect().ok().filter(|_| nix::unistd::geteuid().is_root()) else {
        eprintln!("skipped: needs root and the cpu controller");
        return None;
    };
    let name = format!("unit-{what}-{}", std::process::id());
    let cg = backend.create(&job(&name), &Limits { weight: Some(100), ..Limits::default() }).unwrap();
    let procs = cg.procs_paths();
    let spawn = move || {
        let procs = procs.clone();
        let mut cmd = Command::new("sleep");
        cmd.arg("30");
        // SAFETY: `join` is async-signal-safe and uses memory prepared before the fork.
        unsafe {
            cmd.pre_exec(move || procs.iter().try_for_each(join));
        }
        cmd.spawn().unwrap()
    };
    Some((cg, spawn))
}

/// The machine's own hierarchy (v1 here, v2 in the test guest): a job's processes split into per-kind children,
/// one limited; the job's cgroup and its children go away together when it is destroyed.
#[test]
fn split_limits_one_kind_and_destroy_removes_the_children() {
    let Some((cg, spawn)) = real_job("split") else { return };
    let (mut fast, mut slow, mut other) = (spawn(), spawn(), spawn());
    let (version, dir) = bandwidth::cpu_cgroup(slow.id() as i32).expect("a cpu cgroup");
    let half = bandwidth::Bandwidth { cpus: 0.5, period_us: 10_000 };
    assert!(dir.ends_with(format!("lockstep/unit-split-{}", std::process::id())), "{}", dir.display());
    let children = [
        bandwidth::Child { name: "P".into(), pids: vec![fast.id() as i32], limit: None },
        bandwidth::Child { name: "E".into(), pids: vec![slow.id() as i32], limit: Some(half) },
    ];
    let dirs = bandwidth::split(version, &dir, &children).unwrap();
    assert_eq!(bandwidth::cpu_cgroup(slow.id() as i32).unwrap().1, dirs[1]);
    assert_eq!(bandwidth::cpu_cgroup(fast.id() as i32).unwrap().1, dirs[0]);
    match version {
        Version::V2 => {
            assert_eq!(read(&dirs[1].join("cpu.max")).trim(), "5000 10000");
            assert_eq!(read(&dirs[0].join("cpu.max")).trim(), "max 100000");
            // No process may stay beside children that have the controller: the other one joined the first.
            assert_eq!(bandwidth::cpu_cgroup(other.id() as i32).unwrap().1, dirs[0]);
        }
        Version::V1 => {
            assert_eq!(read(&dirs[1].join("cpu.cfs_quota_us")).trim(), "5000");
            assert_eq!(read(&dirs[1].join("cpu.cfs_period_us")).trim(), "10000");
            assert_eq!(read(&dirs[0].join("cpu.cfs_quota_us")).trim(), "-1");
            assert_eq!(bandwidth::cpu_cgroup(other.id() as i32).unwrap().1, dir);
        }
    }
    let mut all = cg.pids().unwrap();
    all.sort_unstable();
    let mut want = vec![fast.id() as i32, slow.id() as i32, other.id() as i32];
    want.sort_unstable();
    assert_eq!(all, want, "pids() sees the children's processes");
    cg.destroy(Duration::from_secs(5)).unwrap();
    for child in [&mut fast, &mut slow, &mut other] {
        assert!(!child.wait().unwrap().success());
    }
    assert!(!dir.exists());
}

/// `unsplit` puts live processes back and removes the children; a split that cannot be done changes nothing.
#[test]
fn unsplit_returns_processes_and_a_failed_split_leaves_nothing() {
    let Some((cg, spawn)) = real_job("unsplit") else { return };
    let mut child = spawn();
    let pid = child.id() as i32;
    let (version, dir) = bandwidth::cpu_cgroup(pid).unwrap();
    let bad = [
        bandwidth::Child {
            name: "E".into(),
            pids: vec![pid],
            limit: Some(bandwidth::Bandwidth { cpus: 0.5, period_us: bandwidth::DEFAULT_PERIOD_US }),
        },
        bandwidth::Child { name: "X".into(), pids: vec![i32::MAX], limit: None },
    ];
    assert!(bandwidth::split(version, &dir, &bad).is_err());
    assert_eq!(bandwidth::cpu_cgroup(pid).unwrap().1, dir);
    assert!(!dir.join("E").exists() && !dir.join("X").exists());
    let dirs = bandwidth::split(version, &dir, &bad[..1]).unwrap();
    assert_eq!(bandwidth::cpu_cgroup(pid).unwrap().1, dirs[0]);
    bandwidth::unsplit(version, &dirs);
    assert_eq!(bandwidth::cpu_cgroup(pid).unwrap().1, dir);
    assert!(!dirs[0].exists());
    cg.destroy(Duration::from_secs(5)).unwrap();
    assert!(!child.wait().unwrap().success());
}

/// A scratch cgroup: a directory whose `cgroup.procs` lists `procs`.
fn scratch_cgroup(dir: &Path, procs: &[i32]) {
    fs::create_dir_all(dir).unwrap();
    let text: String = procs.iter().map(|p| p.to_string() + "\n").collect();
    fs::write(dir.join("cgroup.procs"), text).unwrap();
}

#[test]
fn a_tree_within_the_bounds_is_walked_whole_shallowest_first() {
    let root = lockstep_scratch::tempdir().unwrap();
    let top = root.path().join("job");
    scratch_cgroup(&top, &[1, 2]);
    scratch_cgroup(&top.join("a/b"), &[5]);
    scratch_cgroup(&top.join("a"), &[3]);
    scratch_cgroup(&top.join("c"), &[4]);
    let walk = procs_within(&[&top], JOB_TREE);
    assert!(walk.cuts.is_empty(), "{walk:?}");
    assert_eq!(&walk.procs[..2], &[1, 2], "the top first");
    let mut all = walk.procs.clone();
    all.sort_unstable();
    assert_eq!(all, [1, 2, 3, 4, 5]);
    assert_eq!(walk.procs.last(), Some(&5), "the deepest last");
}

#[test]
fn a_deep_tree_is_walked_to_the_depth_bound_and_says_so() {
    let root = lockstep_scratch::tempdir().unwrap();
    let top = root.path().join("job");
    let mut dir = top.clone();
    for level in 0..10 {
        scratch_cgroup(&dir, &[level]);
        dir = dir.join("d");
    }
    let bounds = Bounds { depth: 3, ..JOB_TREE };
    let walk = procs_within(&[&top], bounds);
    assert_eq!(walk.procs, [0, 1, 2, 3], "levels 0 to 3, not below");
    assert_eq!(walk.cuts, [Cut::Depth]);
    assert_eq!(walk.said(&bounds), "deeper than 3 levels");
}

#[test]
fn a_wide_tree_is_walked_to_the_cgroup_bound_and_says_so() {
    let root = lockstep_scratch::tempdir().unwrap();
    let top = root.path().join("job");
    scratch_cgroup(&top, &[0]);
    for i in 1..=50 {
        scratch_cgroup(&top.join(format!("w{i}")), &[i]);
    }
    let bounds = Bounds { cgroups: 10, ..JOB_TREE };
    let walk = procs_within(&[&top], bounds);
    assert_eq!(walk.procs.len(), 10, "the top and 9 of its children: {walk:?}");
    assert_eq!(walk.cuts, [Cut::Cgroups]);
    // Tops beyond the bound are cut as well.
    let tops: Vec<_> = (1..=5).map(|i| top.join(format!("w{i}"))).collect();
    let walk = procs_within(&tops, Bounds { cgroups: 2, ..JOB_TREE });
    assert_eq!((walk.procs, walk.cuts), (vec![1, 2], vec![Cut::Cgroups]));
}

#[test]
fn processes_past_the_bound_are_left_out_and_said() {
    let root = lockstep_scratch::tempdir().unwrap();
    let top = root.path().join("job");
    scratch_cgroup(&top, &(1..=8).collect::<Vec<_>>());
    scratch_cgroup(&top.join("a"), &[9, 10]);
    let bounds = Bounds { procs: 5, depth: 0, ..JOB_TREE };
    let walk = procs_within(&[&top], bounds);
    assert_eq!(walk.procs, [1, 2, 3, 4, 5]);
    assert_eq!(walk.cuts, [Cut::Procs], "the walk stops at the first cut: depth is not reached");
    assert_eq!(walk.said(&bounds), "more than 5 processes");
    let walk = procs_within(&[&top], Bounds { procs: 10, depth: 0, ..JOB_TREE });
    assert_eq!((walk.procs.len(), walk.cuts), (8, vec![Cut::Depth]));
    // A cgroup that is gone lists nothing and cuts nothing.
    let walk = procs_within(&[root.path().join("gone")], JOB_TREE);
    assert_eq!(walk, Walk::default());
}
