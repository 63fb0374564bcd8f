//! The spec of scale::model experiments, read and checked: what [`super`] runs and reports.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::harness::spec::raw_spec;
use crate::scale::spec::ScaleSpec;
use lockstep_core::error::UsageError;

/// A parsed, validated scale-model spec.
#[derive(Clone, Debug)]
pub struct ModelSpec {
    /// Experiment name.
    pub name: String,
    /// What it answers.
    pub description: String,
    /// The scale spec whose sessions calibrate the model (read and checked with this spec).
    pub measured: ScaleSpec,
    /// Where that spec was read from.
    pub measured_path: PathBuf,
    /// Cluster sizes to extrapolate to.
    pub extrapolate: Vec<u32>,
    /// How long arrivals are simulated.
    pub horizon: Duration,
    /// Work offered per node and second.
    pub load: f64,
    /// Jobs a node runs at once in the extrapolation (Slurm's `OverSubscribe=FORCE:mpl`).
    pub mpl: u32,
    /// lockstep's slot in the extrapolation.
    pub slot: Duration,
    /// Seed of the synthetic streams.
    pub seed: u64,
}

raw_spec! {
    struct Raw {
        measured: PathBuf,
        extrapolate: Vec<u32>,
        horizon: String,
        load: f64,
        mpl: u32,
        slot: String,
        #[serde(default)]
        seed: u64,
    }
}

/// Validates a scale-model spec, `text` as read from `path` (`measured` is relative to its directory).
pub fn parse(path: &Path, text: &str) -> Result<ModelSpec, UsageError> {
    let bad = crate::harness::spec::bad(path);
    let (header, raw) = crate::harness::spec::read::<Raw>(path, text)?;
    let measured_path = path.parent().unwrap_or(Path::new(".")).join(&raw.measured);
    let measured = lockstep_core::error::read_input(&measured_path, "experiment spec", "a scale spec")
        .and_then(|text| match crate::harness::spec::kind_of(&text).as_str() {
            "scale" => crate::scale::spec::parse(&measured_path, &text),
            other => Err(UsageError::new(format!("kind = {other:?} (expected \"scale\")"))),
        })
        .map_err(|e| bad(format!("measured: {e}")))?;
    if raw.extrapolate.is_empty() || raw.extrapolate.iter().any(|n| !(2..=100_000).contains(n)) {
        return Err(bad(format!("extrapolate = {:?} (expected cluster sizes from 2 to 100000)", raw.extrapolate)));
    }
    crate::harness::spec::distinct("extrapolate", &raw.extrapolate, "each cluster size once").map_err(bad)?;
    let horizon =
        lockstep_core::duration::within("horizon", &raw.horizon, Duration::from_mins(1)..=Duration::from_hours(24))
            .map_err(|e| bad(e.to_string()))?;
    if !(raw.load > 0.0 && raw.load < 1.0) {
        return Err(bad(format!("load = {} (expected above 0 and below 1)", raw.load)));
    }
    if !(1..=16).contains(&raw.mpl) {
        return Err(bad(format!("mpl = {} (expected jobs per node from 1 to 16)", raw.mpl)));
    }
    let slot = lockstep_core::cosched::slot::parse("slot", &raw.slot).map_err(|e| bad(e.to_string()))?;
    Ok(ModelSpec {
        name: header.name,
        description: header.description,
        measured,
        measured_path,
        extrapolate: raw.extrapolate,
        horizon,
        load: raw.load,
        mpl: raw.mpl,
        slot,
        seed: raw.seed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_spec_parses_and_bad_values_are_named() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/scale-model.toml");
        let text = std::fs::read_to_string(&path).unwrap();
        let spec = parse(&path, &text).unwrap();
        assert_eq!(spec.measured.name, "slurm-scale");
        for (from, to, says) in
            [("load = 0.6", "load = 1.5", "load"), ("horizon = \"20m\"", "horizon = \"1s\"", "horizon")]
        {
            let e = parse(&path, &text.replace(from, to)).unwrap_err().to_string();
            assert!(e.contains(says), "{to}: {e}");
        }
    }
}
