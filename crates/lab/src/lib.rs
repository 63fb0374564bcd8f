//! Experiments: a TOML spec is run case by case, every job's result goes to the store, and a report turns the
//! latest session into tables, plots, Markdown and HTML. The [`harness`] is what every kind shares; each kind is
//! one module that uses the harness and no other kind, and implements [`Kind`]: co-scheduling ([`mpl`]; the MPL
//! and DCS papers), counter overhead ([`counters`]; the counters paper), locks ([`locks`]; the CNA-in-VMs paper),
//! placement by core kind ([`placement`]; the hybrid-CPU paper), the control plane on up to 64 Slurm nodes
//! ([`scale`]) and its model of larger clusters ([`scale::model`], which reads what `scale` measured). The spec's
//! `kind` key picks one from [`KINDS`].

pub mod counters;
pub mod harness;
pub mod locks;
pub mod mpl;
pub mod placement;
pub mod scale;

use std::path::Path;

use lockstep_core::error::UsageError;

pub use harness::{Kind, Paths};

/// Reads a spec of one kind, `text` as read from `path` (which messages name).
pub type Parse = fn(&Path, &str) -> Result<Box<dyn Kind>, UsageError>;

/// Every kind by the `kind` key of its specs (a spec without one is `mpl`): a new kind is its module and one
/// line here.
pub const KINDS: &[(&str, Parse)] = &[
    ("mpl", |p, t| Ok(Box::new(mpl::spec::parse(p, t)?))),
    ("counters", |p, t| Ok(Box::new(counters::spec::parse(p, t)?))),
    ("locks", |p, t| Ok(Box::new(locks::spec::parse(p, t)?))),
    ("placement", |p, t| Ok(Box::new(placement::spec::parse(p, t)?))),
    ("scale", |p, t| Ok(Box::new(scale::spec::parse(p, t)?))),
    ("scale-model", |p, t| Ok(Box::new(scale::model::spec::parse(p, t)?))),
];

/// Reads a spec of any kind.
pub fn load(path: &Path) -> Result<Box<dyn Kind>, UsageError> {
    let text = lockstep_core::error::read_input(path, "experiment spec", "a TOML spec, as under experiments/")?;
    parse(path, &text)
}

/// A spec of any kind from its `text`, as read from `path` (which messages name).
pub fn parse(path: &Path, text: &str) -> Result<Box<dyn Kind>, UsageError> {
    let kind = harness::spec::kind_of(text);
    if let Some((_, parse)) = KINDS.iter().find(|(key, _)| *key == kind) {
        return parse(path, text);
    }
    let keys: Vec<String> = KINDS.iter().map(|(key, _)| format!("{key:?}")).collect();
    Err(harness::spec::bad(path)(format!("kind = {kind:?} (expected one of {})", keys.join(", "))))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether the spec `text` counts an event that only tracefs resolves (in an `events` list, at any depth).
    fn names_a_tracepoint(text: &str) -> bool {
        fn walk(v: &toml::Value) -> bool {
            let traced = |list: &str| list.split(',').any(lockstep_telemetry::events::looked_up_in_tracefs);
            match v {
                toml::Value::Table(t) => {
                    t.iter().any(|(k, v)| (k == "events" && v.as_str().is_some_and(traced)) || walk(v))
                }
                toml::Value::Array(a) => a.iter().any(walk),
                _ => false,
            }
        }
        walk(&text.parse::<toml::Value>().unwrap())
    }

    #[test]
    fn every_shipped_spec_is_valid() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
        let mut n = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                n += 1;
                // Tracepoint names resolve only through tracefs, which only root may read or mount: a plain
                // `cargo test` as a user checks the other specs, `make test` (root) every one.
                let text = std::fs::read_to_string(&path).unwrap();
                if !nix::unistd::geteuid().is_root() && names_a_tracepoint(&text) {
                    eprintln!("skipped: {} counts tracepoints, which need root", path.display());
                    continue;
                }
                if let Err(e) = load(&path) {
                    panic!("{e}");
                }
            }
        }
        assert!(n >= 10, "only {n} specs under experiments/");
    }
}
