//! Experiments: a TOML spec is run case by case under a private agent, every job's result goes to the store,
//! and a report turns the latest session into tables, plots, Markdown and HTML. The kinds: co-scheduling
//! experiments ([`spec`], [`runner`], [`report`]; the MPL and DCS papers), counter-overhead experiments ([`counters`];
//! the counters paper), lock experiments ([`locks`]; the CNA-in-VMs paper), placement experiments ([`placement`];
//! the hybrid-CPU paper) and scale experiments on up to 64 Slurm nodes ([`scale`]), told apart by the spec's
//! `kind` key.

mod containers;
pub mod counters;
mod dcs_report;
pub mod locks;
mod mix_report;
pub mod placement;
mod plot;
pub mod report;
pub mod runner;
pub mod scale;
mod slurm;
pub mod spec;
mod stats;
pub mod teardown;

use std::path::{Path, PathBuf};

use lockstep_core::error::UsageError;

/// A spec of any kind.
pub enum AnySpec {
    /// Co-scheduling (`kind = "mpl"`, the default).
    Mpl(spec::Spec),
    /// Counter overhead (`kind = "counters"`).
    Counters(counters::CountersSpec),
    /// Locks (`kind = "locks"`).
    Locks(locks::LocksSpec),
    /// Placement by core kind (`kind = "placement"`).
    Placement(placement::PlacementSpec),
    /// The control plane on many Slurm nodes (`kind = "scale"`).
    Scale(scale::ScaleSpec),
    /// The model of larger clusters, calibrated from a scale experiment (`kind = "scale-model"`).
    ScaleModel(scale::model::ModelSpec),
}

impl AnySpec {
    /// The experiment's name.
    pub fn name(&self) -> &str {
        match self {
            Self::Mpl(s) => &s.name,
            Self::Counters(s) => &s.name,
            Self::Locks(s) => &s.name,
            Self::Placement(s) => &s.name,
            Self::Scale(s) => &s.name,
            Self::ScaleModel(s) => &s.name,
        }
    }
}

/// Reads a spec of any kind.
pub fn load(path: &Path) -> Result<AnySpec, UsageError> {
    let text = lockstep_core::error::read_input(path, "experiment spec", "a TOML spec, as under experiments/")?;
    parse(path, &text)
}

/// A spec of any kind from its `text`, as read from `path` (which messages name).
pub fn parse(path: &Path, text: &str) -> Result<AnySpec, UsageError> {
    let kind = text.parse::<toml::Table>().ok().and_then(|t| t.get("kind")?.as_str().map(str::to_string));
    match kind.as_deref() {
        Some("counters") => counters::parse(path, text).map(AnySpec::Counters),
        Some("locks") => locks::parse(path, text).map(AnySpec::Locks),
        Some("placement") => placement::parse(path, text).map(AnySpec::Placement),
        Some("scale") => scale::parse(path, text).map(AnySpec::Scale),
        Some("scale-model") => scale::model::parse(path, text).map(AnySpec::ScaleModel),
        None | Some("mpl") => spec::parse(path, text).map(AnySpec::Mpl),
        Some(other) => Err(UsageError::new(format!(
            "bad experiment spec {}: kind = {other:?} (expected \"mpl\", \"counters\", \"locks\", \"placement\", \
             \"scale\" or \"scale-model\")",
            path.display()
        ))),
    }
}

/// Where the experiment's programs, store and files are.
#[derive(Clone, Debug)]
pub struct Paths {
    /// `build/bin` (kernels, mpirun, lockstep).
    pub bin: PathBuf,
    /// `build/lib` (the PMPI profiler).
    pub lib: PathBuf,
    /// The node store.
    pub store: PathBuf,
    /// Working directory of this experiment (agent socket, PMPI output), absolute.
    pub work: PathBuf,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_spec_is_valid() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
        let mut n = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                match load(&path) {
                    Ok(_) => {}
                    // Tracepoint names resolve only through tracefs, which only root may read or mount: a plain
                    // `cargo test` as a user checks the rest, `make test` (root) everything.
                    Err(e) if !nix::unistd::geteuid().is_root() && e.to_string().contains("tracefs") => {
                        eprintln!("skipped: the events of {} (tracepoints need root): {e}", path.display());
                    }
                    Err(e) => panic!("{e}"),
                }
                n += 1;
            }
        }
        assert!(n >= 10, "only {n} specs under experiments/");
    }
}
