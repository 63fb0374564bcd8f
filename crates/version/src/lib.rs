//! The text of `lockstep --version` and `lockstepd --version`, shaped like ripgrep's: the release and the git
//! commit on the first line, then which optional parts were built in and which the machine provides at run time;
//! and their manual pages ([`man`]).

pub mod man;

/// The git commit (12 hex digits) the binaries were built from, or "unknown" outside a git checkout.
pub const COMMIT: &str = env!("LOCKSTEP_COMMIT");

/// The release, from the workspace's Cargo.toml.
pub const RELEASE: &str = env!("CARGO_PKG_VERSION");

/// One part of the build: its name and whether it is there (`+name` or `-name`).
pub type Feature = (&'static str, bool);

/// The long version text: `RELEASE (rev COMMIT)`, a blank line, `features:` (`built`, what was compiled in),
/// `runtime:` (`found`, what was looked for on this machine), then one line for each runtime part that is
/// missing, saying what it costs (`missing`: name and consequence, in the order of `found`).
pub fn long(built: &[Feature], found: &[Feature], missing: &[(&str, &str)]) -> String {
    let list =
        |fs: &[Feature]| fs.iter().map(|(n, on)| format!("{}{n}", if *on { '+' } else { '-' })).collect::<Vec<_>>();
    let mut text =
        format!("{RELEASE} (rev {COMMIT})\n\nfeatures:{}\nruntime:{}", list(built).join(","), list(found).join(","));
    let absent: Vec<&str> =
        missing.iter().filter(|(name, _)| found.iter().any(|(n, on)| n == name && !on)).map(|(_, why)| *why).collect();
    if !absent.is_empty() {
        text.push_str("\n\n");
        text.push_str(&absent.join("\n"));
    }
    text
}

/// The version text of this build on this machine: cgroup v1 and v2 backends, the dcs eBPF program and hwloc are
/// always built in; at run time, libpfm4 (PMU event names), the kernel's BTF (dcs) and a hardware PMU are
/// looked for.
pub fn text() -> String {
    let devices = std::path::Path::new("/sys/bus/event_source/devices");
    let pmu = devices.join("cpu").exists() || !lockstep_telemetry::pmu::hybrid_pmus(devices).is_empty();
    long(
        &[("cgroup-v1", true), ("cgroup-v2", true), ("bpf", true), ("hwloc", true)],
        &[
            ("libpfm4", lockstep_telemetry::pmu::libpfm_status().is_ok()),
            ("btf", std::path::Path::new("/sys/kernel/btf/vmlinux").exists()),
            ("pmu", pmu),
        ],
        &[
            ("libpfm4", "libpfm4 (libpfm.so.4) is not installed: PMU events by generic, sysfs or raw names only."),
            ("btf", "The kernel has no BTF (/sys/kernel/btf/vmlinux): the dcs policy needs lockstepd --btf FILE."),
            ("pmu", "No hardware PMU (/sys/bus/event_source/devices/cpu*): hardware events count as <not supported>."),
        ],
    )
}

/// `cmd` with the long version text when the command line asks for `--version` (the text probes the machine,
/// so only then).
pub fn on_request(cmd: clap::Command) -> clap::Command {
    if std::env::args_os().any(|a| a == "--version") {
        cmd.long_version(text())
    } else {
        cmd
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn says_what_is_built_and_what_is_missing() {
        let text = long(&[("cgroup-v2", true)], &[("libpfm4", false), ("btf", true)], &[("libpfm4", "no names")]);
        assert!(text.starts_with(&format!("{RELEASE} (rev {COMMIT})\n\n")), "{text}");
        assert!(text.contains("features:+cgroup-v2\nruntime:-libpfm4,+btf\n\nno names"), "{text}");
        assert!(!long(&[], &[("libpfm4", true)], &[("libpfm4", "no names")]).contains("no names"));
        assert!(COMMIT == "unknown" || (COMMIT.len() == 12 && COMMIT.bytes().all(|b| b.is_ascii_hexdigit())));
    }
}
