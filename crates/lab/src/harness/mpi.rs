//! What an experiment gives MPI ranks and reads back from them: lockstep's PMPI profiler preloaded, and the
//! communication share it wrote.

use std::path::{Path, PathBuf};

use super::paths::Paths;

/// lockstep's PMPI profiler, the library a rank preloads.
fn profiler(paths: &Paths) -> PathBuf {
    paths.lib.join("liblockstep-pmpi.so")
}

/// The environment that preloads lockstep's PMPI profiler into a rank and has it write its profile to `out`.
pub fn pmpi_env(paths: &Paths, out: &Path) -> Vec<(String, String)> {
    vec![
        ("LD_PRELOAD".to_string(), profiler(paths).display().to_string()),
        ("LOCKSTEP_PMPI_OUT".to_string(), out.display().to_string()),
    ]
}

/// Mean communication share over the ranks in a PMPI output file.
pub fn comm_ratio(file: &Path) -> Option<f64> {
    let text = std::fs::read_to_string(file).ok()?;
    let ratios: Vec<f64> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()?["comm_ratio"].as_f64())
        .collect();
    (!ratios.is_empty()).then(|| ratios.iter().sum::<f64>() / ratios.len() as f64)
}

/// What an MPI kind's runs start: its workloads' `programs` (file names in `paths.bin`), the `mpirun` wrapper
/// and the PMPI profiler.
pub fn programs<'a>(paths: &Paths, programs: impl Iterator<Item = &'a String>) -> Vec<PathBuf> {
    programs.map(|p| paths.bin.join(p)).chain([paths.bin.join("mpirun"), profiler(paths)]).collect()
}
