//! The store's schema as numbered migrations. `PRAGMA user_version` records how many a store has had; opening
//! a store runs the ones it lacks, in one transaction, so a store written by an older build opens in a newer one.
//! Migrations are only ever appended: a released step is never edited.

/// Schema, applied in order; `PRAGMA user_version` records how many steps a store has.
pub(crate) const MIGRATIONS: &[&str] = &[
    r"
CREATE TABLE jobs (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    state TEXT NOT NULL,              -- running | done | failed | lost
    command TEXT NOT NULL,            -- JSON array of argv
    supervisor_pid INTEGER NOT NULL,  -- the `lockstep run` process
    supervisor_start INTEGER NOT NULL,-- its start time (clock ticks since boot), against PID reuse
    pid INTEGER,                      -- the command's PID
    cgroup TEXT,                      -- JSON JobCgroup
    weight INTEGER,
    mem_limit INTEGER,
    started_at REAL NOT NULL,
    ended_at REAL,
    exit_status INTEGER,
    note TEXT
);
CREATE UNIQUE INDEX jobs_running_name ON jobs(name) WHERE state = 'running';
CREATE TABLE placements (
    job_id INTEGER NOT NULL REFERENCES jobs(id),
    policy TEXT NOT NULL,
    requested_cpus INTEGER,
    pus TEXT NOT NULL,
    mems TEXT NOT NULL,
    cores INTEGER NOT NULL
);
",
    r"
CREATE TABLE restore_journal (
    file TEXT PRIMARY KEY,            -- a cgroup interface file the agent changed
    value TEXT NOT NULL,              -- what to write back
    job TEXT NOT NULL,
    since REAL NOT NULL
);
CREATE TABLE decisions (
    time REAL NOT NULL,               -- seconds since the epoch when the action was taken
    node TEXT NOT NULL,
    policy TEXT NOT NULL,
    slot INTEGER NOT NULL,
    active_row INTEGER NOT NULL,
    rows INTEGER NOT NULL,
    job TEXT,                         -- NULL for the slot's own record
    action TEXT NOT NULL,             -- slot | replan | freeze | thaw | boost | unboost | gone
    duration_us REAL NOT NULL
);
CREATE INDEX decisions_slot ON decisions(slot);
",
    r"
CREATE TABLE managed (
    name TEXT PRIMARY KEY,            -- a job the agent manages, to take over again after a restart
    saved TEXT NOT NULL               -- JSON: origin, cgroup directories, row, moved PIDs
);
",
    r"
CREATE TABLE experiment_runs (
    id INTEGER PRIMARY KEY,
    experiment TEXT NOT NULL,
    session REAL NOT NULL,            -- start of the `experiment run` that made it
    policy TEXT NOT NULL,             -- cfs | boost/2s | gang/200ms | dedicated
    progress TEXT NOT NULL,           -- MPI progress: yield | busy
    placement TEXT NOT NULL,          -- process | container
    mix TEXT NOT NULL,                -- workloads run together, e.g. lu+ep
    mpl INTEGER NOT NULL,
    workload TEXT NOT NULL,
    job TEXT NOT NULL,
    repetition INTEGER NOT NULL,
    time_s REAL,                      -- the kernel's own timed section
    wall_s REAL NOT NULL,             -- launch to exit
    comm_ratio REAL,                  -- PMPI: mean over ranks of time in MPI / wall time
    verified INTEGER NOT NULL,
    exit_status INTEGER,
    started_at REAL NOT NULL
);
CREATE INDEX experiment_runs_name ON experiment_runs(experiment, session);
",
    r"
CREATE TABLE samples (
    job TEXT NOT NULL,
    node TEXT NOT NULL,
    time REAL NOT NULL,               -- seconds since the epoch
    event TEXT NOT NULL,              -- as named in the agent's event list
    value INTEGER NOT NULL,           -- raw count since the job was attached (not scaled)
    enabled INTEGER NOT NULL,         -- ns the counter was enabled, summed over its targets
    running INTEGER NOT NULL          -- ns it was counting (< enabled when multiplexed)
);
CREATE INDEX samples_job_time ON samples(job, time);
CREATE INDEX samples_time ON samples(time);
",
    r"
ALTER TABLE experiment_runs ADD COLUMN tool_cpu_s REAL;        -- CPU time of the counting tool (agent or perf)
ALTER TABLE experiment_runs ADD COLUMN tool_rss_bytes INTEGER; -- its resident memory (peak)
",
    r"
CREATE TABLE slurm_jobs (
    id INTEGER PRIMARY KEY,           -- a Slurm job the prolog announced on this node
    uid INTEGER NOT NULL,             -- its owner
    row INTEGER,                      -- its co-scheduling row (the same on every node of the job), if given
    since REAL NOT NULL
);
",
    r"
ALTER TABLE experiment_runs ADD COLUMN slot_skew_ms REAL;      -- multi-node jobs: worst gap between nodes' slot switches
",
    r"
ALTER TABLE experiment_runs ADD COLUMN dcs_raises INTEGER;     -- dcs policies: raises while the case ran
ALTER TABLE experiment_runs ADD COLUMN dcs_p50_us REAL;        -- their arrival-to-raise latency, median
ALTER TABLE experiment_runs ADD COLUMN dcs_p99_us REAL;        -- and 99th percentile
",
    r"
CREATE TABLE lock_runs (
    id INTEGER PRIMARY KEY,
    experiment TEXT NOT NULL,
    session REAL NOT NULL,            -- start of the `experiment run` invocation
    scenario TEXT NOT NULL,           -- the spec's scenario name
    workload TEXT NOT NULL,           -- counter | rename | rename-user
    lock TEXT NOT NULL,               -- lock name (kernel: rename's directory lock)
    threads INTEGER NOT NULL,
    threads_per_cpu REAL NOT NULL,
    corunners INTEGER NOT NULL,       -- co-runner processes
    numa TEXT NOT NULL,               -- real | emulated-N
    numa_policy TEXT NOT NULL,        -- default | bind | preferred | interleave
    repetition INTEGER NOT NULL,
    ops INTEGER,
    throughput_ops_s REAL,
    fairness_jain REAL,
    p50_ns INTEGER,
    p99_ns INTEGER,
    p999_ns INTEGER,
    exit_status INTEGER,
    started_at REAL NOT NULL
);
CREATE INDEX lock_runs_name ON lock_runs(experiment, session);
",
    r"
CREATE TABLE auto_choices (
    time REAL NOT NULL,               -- seconds since the epoch
    node TEXT NOT NULL,
    policy TEXT NOT NULL,             -- what `auto` put in force for the group: cfs | gang
    trying INTEGER NOT NULL,          -- 1 while it measures a candidate, 0 when it chose
    choice TEXT NOT NULL              -- JSON: jobs, policy, why, per-candidate per-job rates
);
CREATE INDEX auto_choices_time ON auto_choices(time);
ALTER TABLE experiment_runs ADD COLUMN auto_chose TEXT;     -- auto: the policies it chose for the job's group
",
    r"
ALTER TABLE experiment_runs ADD COLUMN score REAL;      -- benchmarks that score instead of timing (corebench)
ALTER TABLE experiment_runs ADD COLUMN hybrid TEXT;     -- placement experiments: how the core kinds were had
",
    r"
CREATE TABLE scale_results (
    id INTEGER PRIMARY KEY,
    experiment TEXT NOT NULL,
    session REAL NOT NULL,            -- start of the `experiment run` invocation
    nodes INTEGER NOT NULL,           -- cluster size
    policy TEXT NOT NULL,             -- policy label
    record TEXT NOT NULL,             -- job | case | model | ...
    data TEXT NOT NULL                -- JSON, the lab's fields
);
CREATE INDEX scale_results_experiment ON scale_results(experiment, session);
",
    r"
ALTER TABLE experiment_runs ADD COLUMN coscheduled REAL;  -- share of the time some rank ran in which all did (agent)
",
    r"
CREATE TABLE experiment_timelines (
    id INTEGER PRIMARY KEY,
    experiment TEXT NOT NULL,
    session REAL NOT NULL,            -- start of the `experiment run` that recorded it
    policy TEXT NOT NULL,             -- the case's policy label (cfs, gang/200ms)
    mix TEXT NOT NULL,                -- the case's workloads, joined by +
    repetition INTEGER NOT NULL,      -- the case's repetition, from 1
    data TEXT NOT NULL                -- JSON: the agent's timeline (which job's ranks ran on which CPU, when)
);
CREATE INDEX experiment_timelines_session ON experiment_timelines(experiment, session);
",
    r"
ALTER TABLE slurm_jobs ADD COLUMN ended REAL;  -- when its epilog ran on this node (NULL: it runs)
",
    r"
ALTER TABLE decisions ADD COLUMN prompt_us REAL;  -- slot, replan: until every promptly switching job was switched
",
    r"
CREATE TABLE experiment_records (
    id INTEGER PRIMARY KEY,
    experiment TEXT NOT NULL,
    session REAL NOT NULL,            -- start of the `experiment run` that recorded it
    record TEXT NOT NULL,             -- what it is, the kind's word (ab-window, ...)
    data TEXT NOT NULL                -- JSON, the kind's fields
);
CREATE INDEX experiment_records_session ON experiment_records(experiment, session);
",
    r"
-- The lock benchmark's runs and the scale experiments' results become records of the one table every kind
-- writes (their fields as JSON), so that the store knows no experiment kind's fields.
INSERT INTO experiment_records (experiment, session, record, data)
    SELECT experiment, session, 'lock-run', json_object(
        'experiment', experiment, 'session', session, 'scenario', scenario, 'workload', workload, 'lock', lock,
        'threads', threads, 'threads_per_cpu', threads_per_cpu, 'corunners', corunners, 'numa', numa,
        'numa_policy', numa_policy, 'repetition', repetition, 'ops', ops, 'throughput_ops_s', throughput_ops_s,
        'fairness_jain', fairness_jain, 'p50_ns', p50_ns, 'p99_ns', p99_ns, 'p999_ns', p999_ns,
        'exit_status', exit_status, 'started_at', started_at)
    FROM lock_runs ORDER BY id;
INSERT INTO experiment_records (experiment, session, record, data)
    SELECT experiment, session, 'scale', json_object(
        'nodes', nodes, 'policy', policy, 'record', record, 'data', json(data))
    FROM scale_results ORDER BY id;
DROP TABLE lock_runs;
DROP TABLE scale_results;
",
];

#[cfg(test)]
mod tests {
    use rusqlite::{params, Connection};

    use super::MIGRATIONS;
    use crate::{Action, Decision, Journaled, Store};

    /// A store written by a build that knew only the first `steps` migrations, holding a job and a journal entry.
    fn old_store(path: &std::path::Path, steps: usize) {
        let conn = Connection::open(path).unwrap();
        for step in &MIGRATIONS[..steps] {
            conn.execute_batch(step).unwrap();
        }
        conn.pragma_update(None, "user_version", steps).unwrap();
        conn.execute(
            "INSERT INTO jobs (name, state, command, supervisor_pid, supervisor_start, started_at)
             VALUES ('old', 'done', '[\"true\"]', 1, 2, 3.0)",
            [],
        )
        .unwrap();
        conn.execute("INSERT INTO placements (job_id, policy, pus, mems, cores) VALUES (1, 'any', '0-1', '0', 2)", [])
            .unwrap();
        conn.execute(
            "INSERT INTO restore_journal (file, value, job, since) VALUES ('/x/cpu.shares', '1024', 'old', 1.0)",
            params![],
        )
        .unwrap();
    }

    #[test]
    fn a_store_of_an_older_build_opens_with_its_data_and_every_table() {
        for steps in [2, 5, MIGRATIONS.len() - 1] {
            let dir = lockstep_scratch::tempdir().unwrap();
            let path = dir.path().join("old.db");
            old_store(&path, steps);
            let mut store = Store::open(&path).unwrap();
            let version: usize = store.conn.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
            assert_eq!(version, MIGRATIONS.len(), "from {steps} steps");
            // It was lockstep's before stores were marked: it is marked now.
            let id: i32 = store.conn.pragma_query_value(None, "application_id", |r| r.get(0)).unwrap();
            assert_eq!(id, crate::APPLICATION_ID, "from {steps} steps");
            let jobs = store.jobs(true).unwrap();
            assert_eq!((jobs.len(), jobs[0].name.to_string().as_str(), jobs[0].pus.as_str()), (1, "old", "0-1"));
            let journal = store.journal().unwrap();
            let expected = Journaled { file: "/x/cpu.shares".into(), value: "1024".into() };
            assert_eq!(journal, [expected]);
            // The tables later migrations added take rows.
            let d = Decision {
                time: 5.0,
                node: "n".parse().unwrap(),
                policy: "gang".into(),
                slot: 7,
                active_row: 0,
                rows: 2,
                job: None,
                action: Action::Slot,
                duration_us: 1.0,
                prompt_us: Some(0.5),
            };
            store.log_decisions(&[d], &[]).unwrap();
            assert_eq!(store.decisions_between(Action::Slot, 4.0, 6.0).unwrap()[0].slot, 7);
            // A decision an older build logged under a name this one refuses is left out.
            let old = "INSERT INTO decisions (time, node, policy, slot, active_row, rows, job, action, duration_us)
                       VALUES (5.5, 'a node', 'gang', 8, 0, 2, NULL, 'slot', 1.0)";
            store.conn.execute(old, []).unwrap();
            assert_eq!(store.decisions_between(Action::Slot, 4.0, 6.0).unwrap().len(), 1, "from {steps} steps");
            assert!(store.records("none", None, "lock-run").unwrap().is_empty());
            assert!(store.experiment_runs("none", None).unwrap().is_empty());
            drop(store);
            // Opening again changes nothing.
            assert_eq!(Store::open(&path).unwrap().jobs(true).unwrap().len(), 1);
        }
    }

    #[test]
    fn lock_runs_and_scale_results_of_an_older_store_become_records_with_every_field() {
        let dir = lockstep_scratch::tempdir().unwrap();
        let path = dir.path().join("old.db");
        let steps = MIGRATIONS.len() - 1;
        old_store(&path, steps);
        let conn = Connection::open(&path).unwrap();
        conn.execute(
            "INSERT INTO lock_runs (experiment, session, scenario, workload, lock, threads, threads_per_cpu,
                 corunners, numa, numa_policy, repetition, ops, throughput_ops_s, fairness_jain, p50_ns, p99_ns,
                 p999_ns, exit_status, started_at)
             VALUES ('locks', 1.5, 'counter', 'counter', 'mcs', 4, 2.0, 0, 'real', 'default', 1, 1000, 500.0,
                     0.99, 100, 1000, NULL, 0, 1.5)",
            [],
        )
        .unwrap();
        for (record, data) in [("job", r#"{"slowdown":1.5}"#), ("case", r#"{"jobs":2}"#)] {
            conn.execute(
                "INSERT INTO scale_results (experiment, session, nodes, policy, record, data)
                 VALUES ('scale', 2.5, 16, 'gang/500ms', ?1, ?2)",
                params![record, data],
            )
            .unwrap();
        }
        drop(conn);
        let store = Store::open(&path).unwrap();
        let json = |r: &crate::Record| serde_json::from_str::<serde_json::Value>(&r.data).unwrap();
        let locks = store.records("locks", None, "lock-run").unwrap();
        assert_eq!(locks.len(), 1);
        assert_eq!(locks[0].session.to_bits(), 1.5f64.to_bits());
        let run = json(&locks[0]);
        assert_eq!(
            (run["lock"].as_str(), run["threads"].as_u64(), run["ops"].as_u64()),
            (Some("mcs"), Some(4), Some(1000))
        );
        assert_eq!((run["throughput_ops_s"].as_f64(), run["p999_ns"].is_null()), (Some(500.0), true));
        let scale: Vec<serde_json::Value> = store.records("scale", None, "scale").unwrap().iter().map(json).collect();
        assert_eq!(scale.len(), 2);
        assert_eq!((scale[0]["nodes"].as_u64(), scale[0]["policy"].as_str()), (Some(16), Some("gang/500ms")));
        assert_eq!((scale[0]["record"].as_str(), scale[0]["data"]["slowdown"].as_f64()), (Some("job"), Some(1.5)));
        assert_eq!((scale[1]["record"].as_str(), scale[1]["data"]["jobs"].as_u64()), (Some("case"), Some(2)));
        let tables: i64 = store
            .conn
            .query_row("SELECT count(*) FROM sqlite_master WHERE name IN ('lock_runs', 'scale_results')", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(tables, 0);
    }

    #[test]
    fn processes_opening_a_new_store_at_once_all_succeed() {
        let dir = lockstep_scratch::tempdir().unwrap();
        let path = dir.path().join("new.db");
        let openers: Vec<_> = (0..8)
            .map(|_| {
                let path = path.clone();
                std::thread::spawn(move || Store::open(&path).map(|s| s.jobs(true).unwrap().len()))
            })
            .collect();
        for o in openers {
            assert_eq!(o.join().unwrap().unwrap(), 0);
        }
    }
}
