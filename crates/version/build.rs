//! Records the git commit the binaries are built from (`LOCKSTEP_COMMIT`, "unknown" outside a git checkout),
//! and rebuilds when HEAD moves.

use std::process::Command;

/// Output of `git ARGS` in the package's directory, trimmed; `None` when git fails or is missing.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok().filter(|o| o.status.success())?;
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=LOCKSTEP_COMMIT={commit}");
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        // Watched only where it exists: cargo takes a missing file for a changed one, and would rebuild every time.
        // Where it does not, the branch's own file below holds the commit (packing the refs later removes it,
        // which is a change too).
        if std::path::Path::new(&format!("{dir}/packed-refs")).exists() {
            println!("cargo:rerun-if-changed={dir}/packed-refs");
        }
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={dir}/{branch}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
