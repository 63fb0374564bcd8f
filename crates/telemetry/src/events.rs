//! Event names as `perf stat -e` takes them: the kernel's generic hardware and software events, tracepoints
//! (`subsystem:name`), PMU events (`pmu/…/` and libpfm4 names, see [`super::pmu`]), and `{a,b}` groups.

use std::path::{Path, PathBuf};

use perf_event::events::{Hardware, Software};

use lockstep_core::error::UsageError;

/// What one event counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A generic hardware event.
    Hardware(Hardware),
    /// A kernel software event.
    Software(Software),
    /// A tracepoint, by id.
    Tracepoint(u64),
    /// A PMU event by its attributes (sysfs, hybrid core PMU, or libpfm4).
    Pmu(super::pmu::Raw),
    /// A PMU event this machine has no PMU for (never opened: `<not supported>`).
    Absent,
}

/// One event as the user named it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventSpec {
    /// The name as given.
    pub name: String,
    /// What it counts.
    pub kind: Kind,
}

impl EventSpec {
    /// Whether counts are nanoseconds (printed as msec, like perf).
    pub fn is_clock(&self) -> bool {
        matches!(self.kind, Kind::Software(s) if s == Software::TASK_CLOCK || s == Software::CPU_CLOCK)
    }
}

/// `perf stat`'s default events.
pub const DEFAULT: &str =
    "task-clock,context-switches,cpu-migrations,page-faults,cycles,instructions,branches,branch-misses";

fn generic(name: &str) -> Option<Kind> {
    Some(match name {
        "cpu-cycles" | "cycles" => Kind::Hardware(Hardware::CPU_CYCLES),
        "instructions" => Kind::Hardware(Hardware::INSTRUCTIONS),
        "cache-references" => Kind::Hardware(Hardware::CACHE_REFERENCES),
        "cache-misses" => Kind::Hardware(Hardware::CACHE_MISSES),
        "branch-instructions" | "branches" => Kind::Hardware(Hardware::BRANCH_INSTRUCTIONS),
        "branch-misses" => Kind::Hardware(Hardware::BRANCH_MISSES),
        "bus-cycles" => Kind::Hardware(Hardware::BUS_CYCLES),
        "stalled-cycles-frontend" | "idle-cycles-frontend" => Kind::Hardware(Hardware::STALLED_CYCLES_FRONTEND),
        "stalled-cycles-backend" | "idle-cycles-backend" => Kind::Hardware(Hardware::STALLED_CYCLES_BACKEND),
        "ref-cycles" => Kind::Hardware(Hardware::REF_CPU_CYCLES),
        "cpu-clock" => Kind::Software(Software::CPU_CLOCK),
        "task-clock" => Kind::Software(Software::TASK_CLOCK),
        "page-faults" | "faults" => Kind::Software(Software::PAGE_FAULTS),
        "context-switches" | "cs" => Kind::Software(Software::CONTEXT_SWITCHES),
        "cpu-migrations" | "migrations" => Kind::Software(Software::CPU_MIGRATIONS),
        "minor-faults" => Kind::Software(Software::PAGE_FAULTS_MIN),
        "major-faults" => Kind::Software(Software::PAGE_FAULTS_MAJ),
        "alignment-faults" => Kind::Software(Software::ALIGNMENT_FAULTS),
        "emulation-faults" => Kind::Software(Software::EMULATION_FAULTS),
        _ => return None,
    })
}

/// Where tracefs is mounted, if anywhere.
pub fn tracefs() -> Option<PathBuf> {
    ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"].iter().map(PathBuf::from).find(|p| p.join("events").is_dir())
}

/// Mounts tracefs in a private mount namespace of this (single-threaded) process, so that tracepoint ids can be
/// read without changing the host's mounts.
pub fn mount_tracefs_privately() -> Result<PathBuf, UsageError> {
    use nix::mount::{mount, MsFlags};
    use nix::sched::{unshare, CloneFlags};
    let fail = |e: nix::Error| UsageError::new(format!("tracepoints need tracefs, which cannot be mounted here: {e}"));
    unshare(CloneFlags::CLONE_NEWNS).map_err(fail)?;
    mount(None::<&str>, "/", None::<&str>, MsFlags::MS_REC | MsFlags::MS_PRIVATE, None::<&str>).map_err(fail)?;
    let target = Path::new("/sys/kernel/tracing");
    mount(Some("tracefs"), target, Some("tracefs"), MsFlags::empty(), None::<&str>).map_err(fail)?;
    Ok(target.to_path_buf())
}

/// Whether the event `name` is looked up as a tracepoint (`subsystem:name`), which only tracefs resolves (and
/// only root may read or mount it): a generic event with modifiers (`cycles:u`) is not.
pub fn looked_up_in_tracefs(name: &str) -> bool {
    name.split_once(':').is_some_and(|(subsystem, event)| {
        !subsystem.is_empty()
            && !event.is_empty()
            && !subsystem.contains(['/', '.'])
            && !event.contains(['/', '.', ':'])
            && generic(subsystem).is_none()
    })
}

/// The tracepoint `subsystem:name`, if tracefs has it.
fn tracepoint(name: &str) -> Result<Option<Kind>, UsageError> {
    if !looked_up_in_tracefs(name) {
        return Ok(None);
    }
    let Some((subsystem, event)) = name.split_once(':') else { return Ok(None) };
    let root = match tracefs() {
        Some(r) => r,
        None => mount_tracefs_privately()?,
    };
    let id = std::fs::read_to_string(root.join("events").join(subsystem).join(event).join("id"));
    Ok(id.ok().and_then(|t| t.trim().parse().ok()).map(Kind::Tracepoint))
}

fn hardware(name: &str) -> Option<Hardware> {
    match generic(name) {
        Some(Kind::Hardware(h)) => Some(h),
        _ => None,
    }
}

/// One event by name: generic, `pmu/…/`, tracepoint, then libpfm4. Modifiers (`:u`, `:k`) of generic events
/// are not supported and are an error.
pub fn parse_event(name: &str) -> Result<EventSpec, UsageError> {
    let root = Path::new(super::pmu::SYSFS);
    let kind = if let Some(k) = generic(name) {
        k
    } else if let Some((base, modifiers)) = name.split_once(':').filter(|(b, _)| generic(b).is_some()) {
        return Err(modifier_error(name, base, modifiers));
    } else if let Some(raw) = super::pmu::sysfs_event(root, name, hardware)? {
        Kind::Pmu(raw)
    } else if let Some(k) = tracepoint(name)? {
        k
    } else {
        match super::pmu::libpfm_event(name) {
            Ok(Some(super::pmu::Pfm::Event(raw))) => Kind::Pmu(raw),
            Ok(Some(super::pmu::Pfm::Absent)) => Kind::Absent,
            Ok(None) => {
                return Err(UsageError::new(format!(
                    "unknown event {name:?} (expected a generic event such as task-clock or cycles, a tracepoint \
                     subsystem:name, pmu/event/, or a libpfm4 event name)"
                )))
            }
            Err(e) => return Err(e),
        }
    };
    Ok(EventSpec { name: name.to_string(), kind })
}

/// perf's event modifiers (`perf list` explains them): lockstep counts user and kernel, and takes none of them.
const PERF_MODIFIERS: &str = "ukhHGIpPSDWe";

/// Why a generic event with modifiers (`cycles:u`, `cycles:zz`) is refused.
fn modifier_error(name: &str, base: &str, modifiers: &str) -> UsageError {
    if !modifiers.is_empty() && modifiers.chars().all(|c| PERF_MODIFIERS.contains(c)) {
        UsageError::new(format!(
            "event modifier {modifiers:?} of {name:?} is not supported (lockstep counts user and kernel together; \
             expected {base} alone)"
        ))
    } else {
        UsageError::new(format!(
            "unknown event modifier {modifiers:?} in {name:?} (perf's are the letters {PERF_MODIFIERS}, and \
             lockstep takes none: expected {base} alone)"
        ))
    }
}

/// A lone event of a `-e` list: on a hybrid CPU a generic hardware event becomes one event per core PMU
/// (`cpu_core/cycles/`, `cpu_atom/cycles/`), as perf counts it.
fn parse_lone(name: &str) -> Result<Vec<EventSpec>, UsageError> {
    if let Some(h) = hardware(name) {
        let cores = super::pmu::hybrid_pmus(Path::new(super::pmu::SYSFS));
        if !cores.is_empty() {
            return Ok(cores
                .into_iter()
                .map(|(pmu, ty)| EventSpec {
                    name: format!("{pmu}/{name}/"),
                    kind: Kind::Pmu(super::pmu::on_core_pmu(h, ty)),
                })
                .collect());
        }
    }
    Ok(vec![parse_event(name)?])
}

/// The first comma of `text` outside a `pmu/term=value,…/` event, whose terms are separated by commas too.
fn next_comma(text: &str) -> Option<usize> {
    let mut in_terms = false;
    text.char_indices().find_map(|(i, c)| {
        match c {
            '/' => in_terms = !in_terms,
            ',' if !in_terms => return Some(i),
            _ => {}
        }
        None
    })
}

/// The events of `text` (a group's inside), split at commas outside `pmu/…/` terms.
fn split_events(mut text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    while let Some(at) = next_comma(text) {
        parts.push(text[..at].trim());
        text = &text[at + 1..];
    }
    parts.push(text.trim());
    parts
}

/// A `-e` list: events separated by commas, `{a,b}` for a group, `pmu/term=value,term=value/` one event.
/// Returns the groups (a lone event is a group of one).
pub fn parse_list(list: &str) -> Result<Vec<Vec<EventSpec>>, UsageError> {
    let mut groups = Vec::new();
    let mut rest = list.trim();
    while !rest.is_empty() {
        if let Some(inner) = rest.strip_prefix('{') {
            let end = inner
                .find('}')
                .ok_or_else(|| UsageError::new(format!("malformed event group in {list:?}: missing '}}'")))?;
            let members = split_events(&inner[..end]);
            if members.iter().any(|m| m.is_empty() || m.contains('{')) {
                return Err(UsageError::new(format!("malformed event group in {list:?}")));
            }
            groups.push(members.into_iter().map(parse_event).collect::<Result<_, _>>()?);
            rest = inner[end + 1..].trim_start();
        } else {
            let end = next_comma(rest).unwrap_or(rest.len());
            let name = rest[..end].trim();
            if name.is_empty() || name.contains('}') {
                return Err(UsageError::new(format!("malformed event list {list:?}")));
            }
            groups.extend(parse_lone(name)?.into_iter().map(|e| vec![e]));
            rest = &rest[end..];
        }
        rest = match rest.strip_prefix(',') {
            Some(r) if !r.trim().is_empty() => r.trim_start(),
            Some(_) => return Err(UsageError::new(format!("malformed event list {list:?}: trailing ','"))),
            None if rest.is_empty() => rest,
            None => return Err(UsageError::new(format!("malformed event list {list:?}"))),
        };
    }
    if groups.is_empty() {
        return Err(UsageError::new("empty event list (expected e.g. -e task-clock,page-faults)"));
    }
    Ok(groups)
}

#[cfg(test)]
mod tests {
    use super::{looked_up_in_tracefs, parse_list, split_events};

    #[test]
    fn pmu_terms_are_one_event_and_commas_split_the_rest() {
        assert_eq!(split_events("a,cpu/event=0x3c,umask=0/,b"), ["a", "cpu/event=0x3c,umask=0/", "b"]);
        assert_eq!(split_events("cpu/event=0x3c/u, b"), ["cpu/event=0x3c/u", "b"]);
        let groups = parse_list("{task-clock,page-faults},context-switches").unwrap();
        assert_eq!(groups.iter().map(Vec::len).collect::<Vec<_>>(), [2, 1]);
        // One event, its terms kept together: the error is about the PMU, not a piece of the event.
        let e = parse_list("nosuchpmu/event=0x0,umask=0/").unwrap_err().to_string();
        assert!(e.contains("unknown PMU \"nosuchpmu\" in \"nosuchpmu/event=0x0,umask=0/\""), "{e}");
    }

    #[test]
    fn modifiers_of_generic_events_are_named_errors() {
        let e = parse_list("cycles:zz").unwrap_err().to_string();
        assert!(e.contains("unknown event modifier \"zz\" in \"cycles:zz\""), "{e}");
        let e = parse_list("task-clock,cycles:u").unwrap_err().to_string();
        assert!(e.contains("modifier \"u\" of \"cycles:u\" is not supported"), "{e}");
    }

    #[test]
    fn only_subsystem_name_is_looked_up_in_tracefs() {
        for traced in ["sched:sched_switch", "syscalls:sys_enter_read", "INST_RETIRED:ANY_P"] {
            assert!(looked_up_in_tracefs(traced), "{traced}");
        }
        for not in ["task-clock", "cycles:u", "cpu/cycles/", "a:b:c", ":x", "x:", "a.b:c"] {
            assert!(!looked_up_in_tracefs(not), "{not}");
        }
    }

    /// Every malformed or extreme list is one line of error; none panics.
    #[test]
    fn extremes_are_errors() {
        for bad in [
            "",
            " ",
            ",",
            ",,",
            "task-clock,",
            ",task-clock",
            "{",
            "}",
            "{}",
            "{task-clock",
            "task-clock}",
            "{{a}}",
            "/",
            "//",
            "a/b",
            "cpu//",
            "\u{0}",
            "ünïcødé",
            "task-clock\ncycles",
            "x".repeat(100_000).as_str(),
            "cycles:",
            ":",
            "::",
            "sched:",
            ":sched_switch",
            "no_such_subsystem:no_such_event",
        ] {
            let e = parse_list(bad).expect_err(bad).to_string();
            assert!(!e.is_empty() && !e.contains('\n') || bad.contains('\n'), "{bad:?}: {e}");
        }
    }
}
