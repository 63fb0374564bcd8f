//! Where an experiment's programs, libraries, data and files are, resolved once: from the source tree's build
//! (`build/bin/lockstep`) or from an installed CLI (`make install`'s `PREFIX/bin/lockstep`).

use std::path::{Path, PathBuf};

/// Where the experiment's programs, data, store and files are.
#[derive(Clone, Debug)]
pub struct Paths {
    /// The lab's programs (kernels, `mpirun` wrapper, `lockbench`): `build/bin`, or `PREFIX/libexec/lockstep`.
    pub bin: PathBuf,
    /// The PMPI profiler and the lock interposers: `build/lib`, or `PREFIX/lib/lockstep`.
    pub lib: PathBuf,
    /// The test cluster's `up` and `down`: the source tree's `tests/cluster`, or `PREFIX/share/lockstep/lab/cluster`.
    pub cluster: PathBuf,
    /// The scale model, `scale_model.py`: in the source tree's `experiments/model`, or
    /// `PREFIX/share/lockstep/lab/model`.
    pub model: PathBuf,
    /// The Python that has SimPy: `build/venv/bin/python3` (scripts/deps.sh makes it), else the system's.
    pub python: PathBuf,
    /// The source tree, when the CLI runs from its build (guests of `tests/vm` boot only from there).
    pub source: Option<PathBuf>,
    /// The node store.
    pub store: PathBuf,
    /// Working directory of this experiment (agent socket, PMPI output), absolute.
    pub work: PathBuf,
}

impl Paths {
    /// The paths of the CLI at `exe`: installed when `exe`'s directory has `../libexec/lockstep/mpirun` beside
    /// it, else the source tree's build (`exe` in `build/bin`). `store` and `work` are the experiment's.
    pub fn locate(exe: &Path, store: &Path, work: &Path) -> Self {
        let here = exe.parent().map(Path::to_path_buf).unwrap_or_default();
        let installed = here.join("../libexec/lockstep");
        let (store, work) = (store.to_path_buf(), work.to_path_buf());
        if installed.join("mpirun").exists() {
            let data = here.join("../share/lockstep/lab");
            return Self {
                bin: installed,
                lib: here.join("../lib/lockstep"),
                cluster: data.join("cluster"),
                model: data.join("model/scale_model.py"),
                python: PathBuf::from("python3"),
                source: None,
                store,
                work,
            };
        }
        let source = here.join("../..");
        let venv = here.join("../venv/bin/python3");
        Self {
            lib: here.join("../lib"),
            cluster: source.join("tests/cluster"),
            model: source.join("experiments/model/scale_model.py"),
            python: if venv.exists() { venv } else { PathBuf::from("python3") },
            source: Some(source),
            bin: here,
            store,
            work,
        }
    }

    /// The first of `programs` (paths under [`Self::bin`]) that is missing, if any.
    pub fn missing(programs: &[PathBuf]) -> Option<&Path> {
        programs.iter().map(PathBuf::as_path).find(|p| !p.exists())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_build_tree_and_an_installed_prefix_are_told_apart() {
        let root = lockstep_scratch::tempdir().unwrap();
        let build = root.path().join("src/build/bin/lockstep");
        let p = Paths::locate(&build, Path::new("s.db"), Path::new("/w"));
        assert_eq!(p.bin, root.path().join("src/build/bin"));
        assert_eq!(p.cluster, root.path().join("src/build/bin/../../tests/cluster"));
        assert_eq!(p.source, Some(root.path().join("src/build/bin/../..")));
        assert_eq!(p.python, PathBuf::from("python3"));

        let prefix = root.path().join("usr");
        std::fs::create_dir_all(prefix.join("libexec/lockstep")).unwrap();
        std::fs::create_dir_all(prefix.join("bin")).unwrap();
        std::fs::write(prefix.join("libexec/lockstep/mpirun"), "").unwrap();
        let p = Paths::locate(&prefix.join("bin/lockstep"), Path::new("s.db"), Path::new("/w"));
        assert_eq!(p.bin, prefix.join("bin/../libexec/lockstep"));
        assert_eq!(p.lib, prefix.join("bin/../lib/lockstep"));
        assert_eq!(p.cluster, prefix.join("bin/../share/lockstep/lab/cluster"));
        assert_eq!(p.model, prefix.join("bin/../share/lockstep/lab/model/scale_model.py"));
        assert_eq!(p.source, None);
    }
}
