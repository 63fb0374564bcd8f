//! The model's run: the calibration written for it, `scale_model.py` run on it, its answer checked and stored.

use std::process::Command;

use anyhow::Context;

use super::answer::Answer;
use super::calibration::calibrate;
use super::spec::ModelSpec;
use crate::harness::outcome::Outcome;
use crate::harness::Paths;
use crate::scale::common::ScaleRecord;
use lockstep_store::{now, Store};

/// Calibrates, runs the model and stores its answer; returns the session (a model that fails is an error).
pub fn run(spec: &ModelSpec, paths: &Paths) -> anyhow::Result<Outcome> {
    std::fs::create_dir_all(&paths.work)?;
    let store = Store::open(&paths.store)?;
    let session = now();
    let calibration = calibrate(spec, &store)?;
    let cal_path = paths.work.join("calibration.json");
    let answer_path = paths.work.join("answer.json");
    std::fs::write(&cal_path, serde_json::to_string_pretty(&calibration)?)?;
    let out = Command::new(&paths.python)
        .arg(&paths.model)
        .arg(&cal_path)
        .arg(&answer_path)
        .output()
        .context("cannot run python3 (scripts/deps.sh installs it with SimPy in build/venv)")?;
    anyhow::ensure!(out.status.success(), "the model failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    let answer = std::fs::read_to_string(&answer_path)?;
    serde_json::from_str::<Answer>(&answer).context("the model's answer")?;
    for (record, data) in [("calibration", serde_json::to_string(&calibration)?), ("answer", answer)] {
        ScaleRecord {
            experiment: spec.name.clone(),
            session,
            nodes: 0,
            policy: String::new(),
            record: record.into(),
            data,
        }
        .save(&store)?;
    }
    Ok(Outcome { session, ..Outcome::default() })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::scale::model::calibration::{Calibration, MeasuredCase, ModelJob};

    /// The Python with SimPy that scripts/deps.sh prepares; without it (a plain `cargo test` before any `make`)
    /// the test is skipped with a line saying so, unless `LOCKSTEP_REQUIRE_ALL=1` (`make test`) makes it fail.
    fn venv_python() -> Option<PathBuf> {
        let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../build/venv/bin/python3");
        if python.exists() {
            return Some(python);
        }
        let what = format!("{} missing: run scripts/deps.sh (make does)", python.display());
        assert!(std::env::var_os("LOCKSTEP_REQUIRE_ALL").is_none_or(|v| v != "1"), "prerequisite missing: {what}");
        eprintln!("skipped: {what}");
        None
    }

    #[test]
    fn the_model_replays_a_measured_case_and_answers_every_question() {
        let Some(python) = venv_python() else { return };
        let dir = lockstep_scratch::tempdir().unwrap();
        let job = |submit: f64, nodes: &[u32], alone_s: f64| ModelJob {
            submit,
            start: Some(submit + 0.1),
            wall: Some(alone_s * 2.0),
            completed: true,
            nodes: nodes.to_vec(),
            alone_s,
            timed: None,
            workload: if nodes.len() > 2 { "cg".into() } else { "is".into() },
            comm: 0.2,
            suspended: Vec::new(),
        };
        // The last job failed: it holds its nodes for its wall time and has no slowdown.
        let failed = ModelJob { completed: false, ..job(2.0, &[3, 4], 2.0) };
        let jobs = vec![
            job(0.0, &[1, 2], 2.0),
            job(0.5, &[2, 3], 2.0),
            job(1.0, &[1, 3], 2.0),
            job(1.5, &[1, 2, 3, 4], 4.0),
            failed,
        ];
        let case = |policy: &str, slot_s: f64| MeasuredCase {
            nodes: 4,
            policy: policy.into(),
            slot_s,
            skew_s: 0.001,
            // Every completed job took twice its time alone.
            measured: 2.0,
            timed: false,
            session: 2.0,
            jobs: jobs.clone(),
        };
        // The cfs case measured in an earlier session too, its jobs each three times as long as alone.
        let earlier_jobs = jobs.iter().map(|j| ModelJob { wall: Some(j.alone_s * 3.0), ..j.clone() }).collect();
        let earlier = MeasuredCase { session: 1.0, measured: 3.0, jobs: earlier_jobs, ..case("cfs", 2.0) };
        // The same Slurm gang case measured by the programs' timed regions (half of each job's time alone).
        let timed_jobs: Vec<ModelJob> =
            jobs.iter().map(|j| ModelJob { timed: Some((j.alone_s, j.alone_s / 2.0)), ..j.clone() }).collect();
        let timed_case = MeasuredCase { timed: true, jobs: timed_jobs.clone(), ..case("slurm-gang", 5.0) };
        // The same again, with what slurmctld logged: the second job suspended for 100 s of its computation.
        let mut recorded_jobs = timed_jobs;
        recorded_jobs[1].suspended = vec![(3.0, 103.0)];
        let recorded = MeasuredCase { nodes: 8, jobs: recorded_jobs, ..timed_case.clone() };
        let cal = Calibration {
            host_cpus: 2,
            switch_s: 1e-4,
            step_wait_s: 124.5,
            comm: std::collections::BTreeMap::new(),
            cases: vec![case("cfs", 2.0), case("gang", 0.5), case("slurm-gang", 5.0), timed_case, recorded, earlier],
            prolog_ctld_ms: 20.0,
            epilog_ctld_ms: 20.0,
            refresh_s: 2.0,
            mpl: 4,
            extrapolate_mpl: 2,
            extrapolate_nodes: vec![64, 256],
            horizon_s: 120.0,
            load: 0.6,
            slot_s: 0.5,
            seed: 1,
        };
        let (cal_path, answer_path) = (dir.path().join("cal.json"), dir.path().join("answer.json"));
        std::fs::write(&cal_path, serde_json::to_string(&cal).unwrap()).unwrap();
        let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/model/scale_model.py");
        let out = Command::new(python).arg(model).arg(&cal_path).arg(&answer_path).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let a: Answer = serde_json::from_str(&std::fs::read_to_string(&answer_path).unwrap()).unwrap();
        assert_eq!(a.validation.len(), 5);
        // The two sessions of the cfs case are one case: its mean is over the four completed jobs of each.
        let cfs = a.validation.iter().find(|v| v.policy == "cfs").unwrap();
        assert_eq!(cfs.sessions, [3.0, 2.0], "each session's mean, oldest first");
        assert!((cfs.measured - 2.5).abs() < 1e-9, "{cfs:?}");
        assert!(a.validation.iter().all(|v| v.model >= 1.0 && v.free >= 1.0), "{:?}", a.validation);
        // Under Slurm gang the second job starts suspended (its neighbour runs in the only row), so its srun
        // waits out step_wait: 124.5 s against 2 s of work.
        let slurm = a.validation.iter().find(|v| v.policy == "slurm-gang" && !v.timed).unwrap();
        assert!(slurm.model > 30.0, "{slurm:?}");
        // A computation starts once its srun has its step: replayed from then, it does not wait.
        let computation = a.validation.iter().find(|v| v.timed && v.nodes == 4).unwrap();
        assert!(computation.model < 30.0, "{computation:?}");
        // Suspended as slurmctld logged it, the second job's computation waits 100 s: one job of four at 50 or
        // more (its computation alone is 1 s).
        let replayed = a.validation.iter().find(|v| v.timed && v.nodes == 8).unwrap();
        assert!(replayed.model > 100.0 / 4.0, "{replayed:?}");
        // Six policies (cfs, Slurm gang, lockstep gang under three clocks and once without thaw loss) per size.
        assert_eq!(a.extrapolation.len(), 12);
        // A wider job loses more of its slot to clock spread, and NTP more than PTP.
        let lost = |clock: &str, width: u32| a.skew.iter().find(|s| s.clock == clock && s.width == width).unwrap().lost;
        assert!(lost("NTP 10ms", 1024) > lost("NTP 10ms", 2) && lost("NTP 10ms", 1024) > lost("PTP 1us", 1024));
        assert_eq!(a.controller.len(), 2);
    }

    /// The model's places are the controller prolog's: the same stream of jobs starting and ending on shared
    /// nodes, placed by `crates/slurm` (`place_new`, `grow_after`) and by the model's port of them
    /// (`scale_model.py`'s `Matrix`), gives the same place to every running job after every event.
    #[test]
    fn the_models_places_are_the_controller_prologs() {
        use lockstep_slurm::{grow_after, place_new, JobInfo, ROW_KEY};
        let Some(python) = venv_python() else { return };
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut rand = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let job = |id: u64, nodes: &[u64], place: String| JobInfo {
            id: lockstep_slurm::SlurmJobId(id),
            state: "RUNNING".into(),
            nodes: nodes.iter().map(|n| format!("n{n}")).collect(),
            restarts: 0,
            array_task: None,
            het_job: None,
            admin_comment: format!("{ROW_KEY}{place}"),
        };
        let mut running: Vec<JobInfo> = Vec::new();
        let mut events = Vec::new();
        let mut expected: Vec<BTreeMap<String, String>> = Vec::new();
        let set = |running: &mut Vec<JobInfo>, changes: Vec<lockstep_slurm::Change>| {
            for (id, p) in changes {
                running.iter_mut().find(|j| j.id == id).unwrap().admin_comment = format!("{ROW_KEY}{p}");
            }
        };
        // 400 events on 8 nodes, jobs of 1 to 4 neighbouring nodes, a third of them ends.
        for id in 1..=400u64 {
            if !running.is_empty() && (rand(3) == 0 || running.len() >= 12) {
                let gone = running.remove(rand(running.len() as u64) as usize);
                let changes = grow_after(&gone, &running);
                set(&mut running, changes);
                events.push(serde_json::json!(["remove", gone.id]));
            } else {
                let first = rand(8);
                let nodes: Vec<u64> = (first..=first + rand(4)).map(|n| n % 8).collect();
                let (place, changes) = place_new(&job(id, &nodes, String::new()), &running);
                set(&mut running, changes);
                running.push(job(id, &nodes, place.to_string()));
                events.push(serde_json::json!(["add", id, nodes]));
            }
            expected
                .push(running.iter().map(|j| (j.id.to_string(), j.admin_comment[ROW_KEY.len()..].into())).collect());
        }
        let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/model");
        let driver = "import json, sys\n\
                      sys.path.insert(0, sys.argv[1])\n\
                      import scale_model\n\
                      m = scale_model.Matrix()\n\
                      out = []\n\
                      for e in json.load(sys.stdin):\n\
                      \x20   m.add(e[1], e[2]) if e[0] == 'add' else m.remove(e[1])\n\
                      \x20   out.append({str(j): f'{r}/{p}' for j, (r, p) in m.place.items()})\n\
                      print(json.dumps(out))";
        let mut child = Command::new(python)
            .args(["-c", driver])
            .arg(&model)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let input = serde_json::to_vec(&events).unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let writer = std::thread::spawn(move || std::io::Write::write_all(&mut stdin, &input));
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let got: Vec<BTreeMap<String, String>> = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(got.len(), expected.len());
        for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
            assert_eq!(g, e, "after event {i}, {}", events[i]);
        }
    }
}
