//! `lockstep experiment run SPEC` and `lockstep experiment report NAME`.

use std::path::{Path, PathBuf};

use lockstep_core::error::UsageError;
use lockstep_lab::{self as experiment, Kind, Paths};
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

/// Runs `lockstep experiment`.
pub fn exec(cmd: &ExperimentCommand, store: &Path) -> anyhow::Result<i32> {
    match cmd {
        ExperimentCommand::Run { spec: path, reports } => {
            // From here on a stopping signal takes down what the experiment started, then ends it.
            experiment::harness::teardown::on_signals()?;
            let spec = experiment::load(path)?;
            // What the spec asks of this machine is checked before anything is made.
            spec.check_machine()?;
            let dir = reports.join(spec.name());
            let exe = std::env::current_exe()?;
            // The work directory is absolute once it exists: ranks in containers see its files from another
            // working directory.
            let paths = Paths::locate(&exe, store, &dir.join("work"));
            if let Some(missing) = Paths::missing(&spec.programs(&paths)) {
                return Err(UsageError::new(format!(
                    "{} not found (run `make build` and use build/bin/lockstep)",
                    missing.display()
                ))
                .into());
            }
            // The store before the report's directory: a store that is not lockstep's leaves nothing behind.
            drop(Store::open(store)?);
            std::fs::create_dir_all(&dir).map_err(|e| unwritable(&dir, &e))?;
            let copy = dir.join("spec.toml");
            std::fs::copy(path, &copy).map_err(|e| unwritable(&copy, &e))?;
            // What the report reads besides the spec (a model's measured spec) goes beside it.
            for input in spec.inputs() {
                if let Some(file) = input.file_name() {
                    let copy = dir.join(file);
                    std::fs::copy(&input, &copy).map_err(|e| unwritable(&copy, &e))?;
                }
            }
            let paths = Paths { work: dir.canonicalize().map_err(|e| unwritable(&dir, &e))?.join("work"), ..paths };
            let outcome = spec.run(&paths)?;
            // The report is of the runs this run made, failed ones marked; then a failed job fails the command.
            write_report(spec.as_ref(), store, &dir, Some(outcome.session))?;
            match outcome.failures.error(spec.name()) {
                Some(error) => Err(anyhow::anyhow!(error)),
                None => Ok(0),
            }
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
            write_report(spec.as_ref(), store, &dir, None)?;
            Ok(0)
        }
    }
}

/// Why the report directory or a file in it (`path`) could not be written, with the path and what to do: the
/// place is the user's choice (`--reports`), so a place that cannot be a directory or is not theirs is a usage
/// error.
fn unwritable(path: &Path, e: &std::io::Error) -> anyhow::Error {
    use std::io::ErrorKind;
    let why = lockstep_core::error::io_reason(e);
    let say = format!("cannot write the report {}: {why}", path.display());
    match e.kind() {
        ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem => {
            UsageError::new(format!("{say} (run as root, or give --reports DIR)")).into()
        }
        ErrorKind::NotADirectory | ErrorKind::AlreadyExists | ErrorKind::IsADirectory => {
            UsageError::new(format!("{say} (expected --reports to name a directory)")).into()
        }
        _ => anyhow::anyhow!(say),
    }
}

/// Writes the report of `spec`'s runs of `session` (`None`: its latest) in `store` into `dir`, and prints its
/// summary and where it is.
fn write_report(spec: &dyn Kind, store: &Path, dir: &Path, session: Option<f64>) -> anyhow::Result<()> {
    let report = spec.report(&Store::open_existing(store)?, dir, session)?;
    let index = report.write(dir)?;
    print!("{}", report.summary);
    println!("\nreport: {}", index.display());
    Ok(())
}
