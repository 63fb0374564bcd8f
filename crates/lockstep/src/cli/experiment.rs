//! `lockstep experiment run SPEC` and `lockstep experiment report NAME`.

use std::path::{Path, PathBuf};

use lockstep_core::error::UsageError;
use lockstep_lab::{self as experiment, counters, locks, placement, report, runner, scale, AnySpec};
use lockstep_store::Store;

/// `lockstep experiment …`.
#[derive(Debug, clap::Subcommand)]
pub enum ExperimentCommand {
    /// Run every case of a spec (needs root: real cgroups and a private agent), then write its report.
    Run {
        /// The spec, e.g. experiments/mpl.toml.
        spec: PathBuf,
        /// Directory of reports (one subdirectory per experiment).
        #[arg(long, value_name = "DIR", default_value = "build/reports")]
        reports: PathBuf,
    },
    /// Write the report of an experiment's latest run again, from the store.
    Report {
        /// Experiment name (the spec's `name`).
        name: String,
        /// Directory of reports (one subdirectory per experiment).
        #[arg(long, value_name = "DIR", default_value = "build/reports")]
        reports: PathBuf,
    },
}

/// Where the lab's programs (kernels, mpirun wrapper, lockbench) and libraries are: as `make install` lays them
/// out (PREFIX/libexec/lockstep, PREFIX/lib/lockstep beside PREFIX/bin/lockstep), else as the build tree does
/// (build/bin beside this binary, build/lib).
fn lab_dirs() -> anyhow::Result<(PathBuf, PathBuf)> {
    let exe = std::env::current_exe()?;
    let here = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    let installed = here.join("../libexec/lockstep");
    Ok(if installed.join("mpirun").exists() {
        (installed, here.join("../lib/lockstep"))
    } else {
        let lib = here.join("../lib");
        (here, lib)
    })
}

/// Runs `lockstep experiment`.
pub fn exec(cmd: &ExperimentCommand, store: &Path) -> anyhow::Result<i32> {
    match cmd {
        ExperimentCommand::Run { spec: path, reports } => {
            // From here on a stopping signal takes down what the experiment started, then ends it.
            experiment::teardown::on_signals()?;
            let spec = experiment::load(path)?;
            let (bin, lib) = lab_dirs()?;
            let mpi = [bin.join("mpirun"), lib.join("liblockstep-pmpi.so")];
            let needed: Vec<PathBuf> = match &spec {
                AnySpec::Mpl(s) => s.workloads.values().map(|w| bin.join(&w.command[0])).chain(mpi).collect(),
                AnySpec::Counters(s) => s.workloads.values().map(|w| bin.join(&w.command[0])).chain(mpi).collect(),
                AnySpec::Locks(_) => vec![bin.join("lockbench")],
                AnySpec::Placement(s) => s.workloads.values().map(|w| bin.join(&w.command[0])).chain(mpi).collect(),
                AnySpec::Scale(s) => s.workloads.iter().map(|w| bin.join(&w[0])).collect(),
                AnySpec::ScaleModel(_) => Vec::new(),
            };
            if let Some(missing) = needed.iter().find(|p| !p.exists()) {
                return Err(UsageError::new(format!(
                    "{} not found (run `make build` and use build/bin/lockstep)",
                    missing.display()
                ))
                .into());
            }
            let dir = reports.join(spec.name());
            std::fs::create_dir_all(&dir)?;
            std::fs::copy(path, dir.join("spec.toml"))?;
            // A model's spec names the scale spec it is calibrated from, beside it: `experiment report` reads both.
            if let AnySpec::ScaleModel(m) = &spec {
                if let Some(file) = m.measured_path.file_name() {
                    std::fs::copy(&m.measured_path, dir.join(file))?;
                }
            }
            // Absolute: ranks in containers see the work directory's files from another working directory.
            let work = dir.canonicalize()?.join("work");
            let paths = experiment::Paths { bin, lib, store: store.to_path_buf(), work };
            match &spec {
                AnySpec::Mpl(s) => runner::run(s, &paths)?,
                AnySpec::Counters(s) => counters::run::run(s, &paths)?,
                AnySpec::Locks(s) => locks::run::run(s, &paths)?,
                AnySpec::Placement(s) => placement::run::run(s, &paths)?,
                AnySpec::Scale(s) => scale::run::run(s, &paths)?,
                AnySpec::ScaleModel(s) => scale::model::run(s, &paths)?,
            };
            write_report(&spec, store, &dir)
        }
        ExperimentCommand::Report { name, reports } => {
            let dir = reports.join(name);
            let copy = dir.join("spec.toml");
            if !copy.exists() {
                return Err(
                    UsageError::new(format!("no experiment {name:?} in {} (run it first)", reports.display())).into()
                );
            }
            let spec = experiment::load(&copy)?;
            write_report(&spec, store, &dir)
        }
    }
}

fn write_report(spec: &AnySpec, store: &Path, dir: &Path) -> anyhow::Result<i32> {
    let store = Store::open(store)?;
    let index = match spec {
        AnySpec::Mpl(s) => report::write(s, &some(spec, store.experiment_runs(&s.name)?)?, dir)?,
        AnySpec::Counters(s) => counters::report::write(s, &some(spec, store.experiment_runs(&s.name)?)?, dir)?,
        AnySpec::Locks(s) => locks::report::write(s, &some(spec, store.lock_runs(&s.name)?)?, dir)?,
        AnySpec::Placement(s) => placement::report::write(s, &some(spec, store.experiment_runs(&s.name)?)?, dir)?,
        AnySpec::Scale(s) => scale::report::write(s, &some(spec, store.scale_records(&s.name)?)?, dir)?,
        AnySpec::ScaleModel(s) => scale::model::write(s, &some(spec, store.scale_records(&s.name)?)?, dir)?,
    };
    print!("{}", std::fs::read_to_string(dir.join("summary.md"))?);
    println!("\nreport: {}", index.display());
    Ok(0)
}

/// `runs`, or a usage error when the experiment has none.
fn some<T>(spec: &AnySpec, runs: Vec<T>) -> Result<Vec<T>, UsageError> {
    if runs.is_empty() {
        return Err(UsageError::new(format!("experiment {:?} has no runs in the store", spec.name())));
    }
    Ok(runs)
}
