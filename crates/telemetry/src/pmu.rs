//! PMU events beyond the kernel's generic ones, named the ways perf users name them:
//! - sysfs PMU syntax, `pmu/name/` or `pmu/term=value,…/` (`msr/tsc/`, `cpu_core/event=0x3c,umask=0x00/`), from
//!   `/sys/bus/event_source/devices/PMU/{type,format,events}`;
//! - hybrid CPUs: a generic hardware event on a machine with several core PMUs (`cpu_core`, `cpu_atom`) is one
//!   event per core PMU, with the PMU's type in the upper half of `config` (the kernel's extended hardware
//!   type), as perf does;
//! - libpfm4 names (`INST_RETIRED:ANY_P`, `skl::INST_RETIRED:ANY_P`), encoded by libpfm4 (loaded at run time,
//!   so lockstep runs without it). A name libpfm4 knows only for a PMU this machine does not have is
//!   "not supported" here, like any hardware event the machine cannot count.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use perf_event::events::{Event, Hardware};
use perf_event_open_sys::bindings::perf_event_attr;

use lockstep_core::error::UsageError;

/// Where the kernel lists its PMUs.
pub const SYSFS: &str = "/sys/bus/event_source/devices";

/// A PMU event as the attributes it sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Raw {
    /// `perf_event_attr.type`.
    pub ty: u32,
    /// `config`.
    pub config: u64,
    /// `config1`.
    pub config1: u64,
    /// `config2`.
    pub config2: u64,
}

impl Raw {
    /// The event attributes of `attr`.
    fn from_attr(attr: &perf_event_attr) -> Self {
        Self { ty: attr.type_, config: attr.config, config1: attr.config1, config2: attr.config2 }
    }
}

impl Event for Raw {
    fn update_attrs(self, attr: &mut perf_event_attr) {
        attr.type_ = self.ty;
        attr.config = self.config;
        attr.config1 = self.config1;
        attr.config2 = self.config2;
    }
}

/// `PERF_TYPE_HARDWARE`.
const TYPE_HARDWARE: u32 = 0;
/// Bit where an extended hardware event carries its PMU type.
const PMU_TYPE_SHIFT: u32 = 32;

/// The core PMUs of a hybrid CPU (`cpu_core`, `cpu_atom`: `cpu_*` PMUs that list their `cpus`), with their
/// types; empty on other machines.
pub fn hybrid_pmus(root: &Path) -> Vec<(String, u32)> {
    let Ok(entries) = std::fs::read_dir(root) else { return Vec::new() };
    let mut out: Vec<(String, u32)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            if !name.starts_with("cpu_") || !e.path().join("cpus").exists() {
                return None;
            }
            let ty = std::fs::read_to_string(e.path().join("type")).ok()?.trim().parse().ok()?;
            Some((name, ty))
        })
        .collect();
    out.sort();
    out
}

/// A generic hardware event counted on one core PMU of a hybrid CPU.
pub fn on_core_pmu(hw: Hardware, pmu_type: u32) -> Raw {
    let mut attr = perf_event_attr::default();
    hw.update_attrs(&mut attr);
    Raw { ty: TYPE_HARDWARE, config: attr.config | (u64::from(pmu_type) << PMU_TYPE_SHIFT), config1: 0, config2: 0 }
}

/// `pmu/terms/` in the sysfs tree `root`: a named event of the PMU, a generic hardware event on a core PMU, or
/// `term=value` pairs over the PMU's format. `Ok(None)`: not this syntax.
pub fn sysfs_event(
    root: &Path,
    name: &str,
    generic: impl Fn(&str) -> Option<Hardware>,
) -> Result<Option<Raw>, UsageError> {
    let Some(inner) = name.strip_suffix('/') else { return Ok(None) };
    let Some((pmu, terms)) = inner.split_once('/') else { return Ok(None) };
    if pmu.is_empty() || terms.is_empty() || terms.contains('/') {
        return Err(UsageError::new(format!(
            "malformed PMU event {name:?} (expected pmu/event/ or pmu/term=value,.../)"
        )));
    }
    let dir: PathBuf = root.join(pmu);
    let ty: u32 = std::fs::read_to_string(dir.join("type"))
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .ok_or_else(|| UsageError::new(format!("unknown PMU {pmu:?} in {name:?} (no {})", dir.display())))?;
    if let Some(hw) = generic(terms).filter(|_| !dir.join("events").join(terms).exists()) {
        return Ok(Some(on_core_pmu(hw, ty)));
    }
    let bad = |e: String| UsageError::new(format!("bad PMU event {name:?}: {e}"));
    let mut builder = perf_event::events::Dynamic::builder(&dir).map_err(|e| bad(e.to_string()))?;
    for term in terms.split(',') {
        match term.split_once('=') {
            None => {
                builder.event(term).map_err(|_| bad(format!("{pmu} has no event {term:?}")))?;
            }
            Some((field, value)) => {
                let v = parse_number(value).ok_or_else(|| bad(format!("value {value:?} is not a number")))?;
                builder.field(field, v).map_err(|e| bad(e.to_string()))?;
            }
        }
    }
    // Format fields the event does not name are zero, as perf has them.
    let unset: Vec<String> = builder.fields().filter(|(_, v)| v.is_none()).map(|(f, _)| f.to_string()).collect();
    for field in unset {
        builder.field(&field, 0).map_err(|e| bad(e.to_string()))?;
    }
    let dynamic = builder.build().map_err(|e| bad(e.to_string()))?;
    let mut attr = perf_event_attr::default();
    dynamic.update_attrs(&mut attr);
    Ok(Some(Raw::from_attr(&attr)))
}

/// `0x3c` or `60`.
fn parse_number(text: &str) -> Option<u64> {
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// What libpfm4 makes of a name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pfm {
    /// Encoded for a PMU of this machine.
    Event(Raw),
    /// Known, but only for PMUs this machine does not have.
    Absent,
}

// libpfm4's ABI (perfmon/pfmlib.h, pfmlib_perf_event.h).
const PFM_SUCCESS: c_int = 0;
const PFM_PLM0: c_int = 0x1;
const PFM_PLM3: c_int = 0x8;
const PFM_OS_NONE: c_int = 0;
const PFM_OS_PERF_EVENT: c_int = 1;
const PFM_OS_PERF_EVENT_EXT: c_int = 2;
const PFM_PMU_MAX: c_int = 517;

#[repr(C)]
struct PerfEncodeArg {
    attr: *mut perf_event_attr,
    fstr: *mut *mut c_char,
    size: usize,
    idx: c_int,
    cpu: c_int,
    flags: c_int,
    pad0: c_int,
}

#[repr(C)]
struct PmuInfo {
    name: *const c_char,
    desc: *const c_char,
    size: usize,
    pmu: c_int,
    ty: c_int,
    nevents: c_int,
    first_event: c_int,
    max_encoding: c_int,
    num_cntrs: c_int,
    num_fixed_cntrs: c_int,
    flags: u32,
}

#[repr(C)]
struct EventInfo {
    name: *const c_char,
    desc: *const c_char,
    equiv: *const c_char,
    size: usize,
    code: u64,
    pmu: c_int,
    dtype: c_int,
    idx: c_int,
    nattrs: c_int,
    reserved: c_int,
    flags: u32,
}

/// `pfm_event_attr_info_t`: one attribute (unit mask or modifier) of an event.
#[repr(C)]
struct AttrInfo {
    name: *const c_char,
    desc: *const c_char,
    equiv: *const c_char,
    size: usize,
    code: u64,
    ty: c_int,
    idx: c_int,
    ctrl: c_int,
    flags: u32,
    defaults: u64,
}

/// The libpfm4 functions lockstep uses, resolved from `libpfm.so.4`.
struct Lib {
    encode: EncodeFn,
    pmu_info: PmuInfoFn,
    event_info: EventInfoFn,
    event_next: EventNextFn,
    attr_info: AttrInfoFn,
}

/// `pfm_get_os_event_encoding(name, privilege levels, OS, argument)`.
type EncodeFn = unsafe extern "C" fn(*const c_char, c_int, c_int, *mut c_void) -> c_int;
/// `pfm_get_pmu_info(pmu, info)`.
type PmuInfoFn = unsafe extern "C" fn(c_int, *mut PmuInfo) -> c_int;
/// `pfm_get_event_info(event, OS, info)`.
type EventInfoFn = unsafe extern "C" fn(c_int, c_int, *mut EventInfo) -> c_int;
/// `pfm_get_event_next(event)`.
type EventNextFn = unsafe extern "C" fn(c_int) -> c_int;
/// `pfm_get_event_attr_info(event, attribute, OS, info)`.
type AttrInfoFn = unsafe extern "C" fn(c_int, c_int, c_int, *mut AttrInfo) -> c_int;

// SAFETY: function pointers into a library that is never unloaded; libpfm4 is initialised once, before use.
unsafe impl Send for Lib {}
unsafe impl Sync for Lib {}

/// libpfm4, loaded and initialised once; `Err` says why it is not available.
fn lib() -> Result<&'static Lib, &'static str> {
    static LIB: OnceLock<Result<Lib, String>> = OnceLock::new();
    LIB.get_or_init(|| {
        // SAFETY: dlopen/dlsym with NUL-terminated names; each symbol is cast to its C prototype from libpfm4's
        // headers.
        unsafe {
            let handle = libc::dlopen(c"libpfm.so.4".as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
            if handle.is_null() {
                return Err("libpfm4 is not installed (Debian: libpfm4)".to_string());
            }
            let sym = |name: &CStr| {
                let p = libc::dlsym(handle, name.as_ptr());
                (!p.is_null()).then_some(p)
            };
            let (Some(init), Some(encode), Some(pmu_info), Some(event_info), Some(event_next), Some(attr_info)) = (
                sym(c"pfm_initialize"),
                sym(c"pfm_get_os_event_encoding"),
                sym(c"pfm_get_pmu_info"),
                sym(c"pfm_get_event_info"),
                sym(c"pfm_get_event_next"),
                sym(c"pfm_get_event_attr_info"),
            ) else {
                return Err("libpfm.so.4 lacks the expected functions".to_string());
            };
            let init: unsafe extern "C" fn() -> c_int = std::mem::transmute(init);
            if init() != PFM_SUCCESS {
                return Err("libpfm4 failed to initialise".to_string());
            }
            Ok(Lib {
                encode: std::mem::transmute::<*mut c_void, EncodeFn>(encode),
                pmu_info: std::mem::transmute::<*mut c_void, PmuInfoFn>(pmu_info),
                event_info: std::mem::transmute::<*mut c_void, EventInfoFn>(event_info),
                event_next: std::mem::transmute::<*mut c_void, EventNextFn>(event_next),
                attr_info: std::mem::transmute::<*mut c_void, AttrInfoFn>(attr_info),
            })
        }
    })
    .as_ref()
    .map_err(String::as_str)
}

/// Whether libpfm4 is loadable and initialised on this machine (`Err` says why not).
pub fn libpfm_status() -> Result<(), &'static str> {
    lib().map(|_| ())
}

/// Encodes `name` with libpfm4 for this machine's PMUs; `Ok(None)` when libpfm4 does not know it at all.
pub fn libpfm_event(name: &str) -> Result<Option<Pfm>, UsageError> {
    let lib = lib().map_err(|why| UsageError::new(format!("cannot resolve PMU event {name:?}: {why}")))?;
    let Ok(cname) = CString::new(name) else { return Ok(None) };
    let mut attr = perf_event_attr::default();
    attr.size = std::mem::size_of::<perf_event_attr>() as u32;
    let mut arg = PerfEncodeArg {
        attr: &raw mut attr,
        fstr: std::ptr::null_mut(),
        size: std::mem::size_of::<PerfEncodeArg>(),
        idx: 0,
        cpu: 0,
        flags: 0,
        pad0: 0,
    };
    // SAFETY: `cname` is NUL-terminated; `arg` points to a live attr and has its size set, as libpfm4 requires.
    let rc = unsafe { (lib.encode)(cname.as_ptr(), PFM_PLM0 | PFM_PLM3, PFM_OS_PERF_EVENT, (&raw mut arg).cast()) };
    if rc == PFM_SUCCESS {
        return Ok(Some(Pfm::Event(Raw::from_attr(&attr))));
    }
    if !known_elsewhere(lib, name)? {
        return Ok(None);
    }
    Ok(Some(Pfm::Absent))
}

/// Whether an event of that name (`pmu::EVENT:…` or `EVENT:…`) is in the table of any PMU libpfm4 supports,
/// present here or not; an error names a modifier (`:UMASK`, `:u`, `:c=2`) that no such event has.
fn known_elsewhere(lib: &Lib, name: &str) -> Result<bool, UsageError> {
    let (pmu_wanted, rest) = match name.split_once("::") {
        Some((p, r)) => (Some(p), r),
        None => (None, name),
    };
    let mut words = rest.split(':');
    let event = words.next().unwrap_or(rest);
    let modifiers: Vec<&str> = words.map(|m| m.split_once('=').map_or(m, |(k, _)| k)).collect();
    let mut unknown = None;
    for pmu in 0..PFM_PMU_MAX {
        // SAFETY: zeroed plain-data structs with their size set, as libpfm4 requires; names it returns are
        // NUL-terminated static strings.
        unsafe {
            let mut info: PmuInfo = std::mem::zeroed();
            info.size = std::mem::size_of::<PmuInfo>();
            if (lib.pmu_info)(pmu, &raw mut info) != PFM_SUCCESS || info.nevents <= 0 {
                continue;
            }
            if pmu_wanted.is_some_and(|w| CStr::from_ptr(info.name).to_str() != Ok(w)) {
                continue;
            }
            let mut idx = info.first_event;
            while idx >= 0 {
                let mut e: EventInfo = std::mem::zeroed();
                e.size = std::mem::size_of::<EventInfo>();
                // With perf's modifiers (u, k, …) where libpfm4 gives them for this PMU, its own otherwise.
                let os = [PFM_OS_PERF_EVENT_EXT, PFM_OS_NONE]
                    .into_iter()
                    .find(|&os| (lib.event_info)(idx, os, &raw mut e) == PFM_SUCCESS)
                    .filter(|_| CStr::from_ptr(e.name).to_str().is_ok_and(|n| n.eq_ignore_ascii_case(event)));
                if let Some(os) = os {
                    match modifiers.iter().find(|m| !has_attribute(lib, idx, os, e.nattrs, m)) {
                        None => return Ok(true),
                        Some(m) => unknown = Some(*m),
                    }
                }
                idx = (lib.event_next)(idx);
            }
        }
    }
    match unknown {
        Some(m) => Err(UsageError::new(format!(
            "unknown modifier {m:?} in event {name:?} (expected one of the event's unit masks or modifiers, as \
             libpfm4's showevtinfo lists them)"
        ))),
        None => Ok(false),
    }
}

/// Whether event `idx` of libpfm4's tables, with `nattrs` attributes under `os`, has one called `wanted`.
fn has_attribute(lib: &Lib, idx: c_int, os: c_int, nattrs: c_int, wanted: &str) -> bool {
    (0..nattrs).any(|a| {
        // SAFETY: a zeroed plain-data struct with its size set, as libpfm4 requires; the name it returns is a
        // NUL-terminated static string.
        unsafe {
            let mut info: AttrInfo = std::mem::zeroed();
            info.size = std::mem::size_of::<AttrInfo>();
            (lib.attr_info)(idx, a, os, &raw mut info) == PFM_SUCCESS
                && !info.name.is_null()
                && CStr::from_ptr(info.name).to_str().is_ok_and(|n| n.eq_ignore_ascii_case(wanted))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn generic(name: &str) -> Option<Hardware> {
        (name == "cycles").then_some(Hardware::CPU_CYCLES)
    }

    /// A sysfs tree of a hybrid Intel CPU (Alder Lake's layout: cpu_core type 4, cpu_atom type 10).
    fn hybrid_tree() -> lockstep_scratch::TempDir {
        let dir = lockstep_scratch::tempdir().unwrap();
        for (pmu, ty, cpus) in [("cpu_core", "4", "0-7"), ("cpu_atom", "10", "8-15")] {
            let p = dir.path().join(pmu);
            std::fs::create_dir_all(p.join("format")).unwrap();
            std::fs::create_dir_all(p.join("events")).unwrap();
            std::fs::write(p.join("type"), ty).unwrap();
            std::fs::write(p.join("cpus"), cpus).unwrap();
            std::fs::write(p.join("format/event"), "config:0-7").unwrap();
            std::fs::write(p.join("format/umask"), "config:8-15").unwrap();
            std::fs::write(p.join("format/cmask"), "config:24-31").unwrap();
            std::fs::write(p.join("events/topdown-retiring"), "event=0x00,umask=0x80").unwrap();
        }
        std::fs::create_dir_all(dir.path().join("msr")).unwrap();
        std::fs::write(dir.path().join("msr/type"), "9").unwrap();
        dir
    }

    #[test]
    fn hybrid_core_pmus_and_extended_hardware_type() {
        let tree = hybrid_tree();
        assert_eq!(hybrid_pmus(tree.path()), vec![("cpu_atom".to_string(), 10), ("cpu_core".to_string(), 4)]);
        assert_eq!(
            on_core_pmu(Hardware::INSTRUCTIONS, 10),
            Raw { ty: 0, config: (10 << 32) | 1, config1: 0, config2: 0 }
        );
        let cycles = sysfs_event(tree.path(), "cpu_core/cycles/", generic).unwrap().unwrap();
        assert_eq!(cycles, Raw { ty: 0, config: 4 << 32, config1: 0, config2: 0 });
    }

    #[test]
    fn sysfs_terms_and_named_events() {
        let tree = hybrid_tree();
        let raw = sysfs_event(tree.path(), "cpu_core/event=0x3c,umask=0x01,cmask=2/", generic).unwrap().unwrap();
        assert_eq!(raw, Raw { ty: 4, config: 0x3c | (0x01 << 8) | (2 << 24), config1: 0, config2: 0 });
        let named = sysfs_event(tree.path(), "cpu_atom/topdown-retiring/", generic).unwrap().unwrap();
        assert_eq!(named, Raw { ty: 10, config: 0x80 << 8, config1: 0, config2: 0 });
        assert_eq!(sysfs_event(tree.path(), "task-clock", generic).unwrap(), None);
        for bad in ["nope/event=1/", "cpu_core/nothing/", "cpu_core/event=zz/", "cpu_core/bogus=1/", "cpu_core//"] {
            assert!(sysfs_event(tree.path(), bad, generic).is_err(), "{bad}");
        }
    }

    #[test]
    fn libpfm_knows_events_of_absent_pmus() {
        // Skylake's INST_RETIRED is in libpfm4's tables on any machine; it is only encodable where a Skylake
        // PMU is present. A made-up name is unknown everywhere.
        if lib().is_err() {
            eprintln!("skipped: libpfm4 not installed");
            return;
        }
        let skl = libpfm_event("skl::INST_RETIRED:ANY_P").unwrap();
        assert!(matches!(skl, Some(Pfm::Absent | Pfm::Event(_))), "{skl:?}");
        assert_eq!(libpfm_event("NO_SUCH_EVENT_ANYWHERE").unwrap(), None);
        // Its modifiers are checked against the event's own unit masks and perf's modifiers.
        let with_u = libpfm_event("skl::INST_RETIRED:ANY_P:u").unwrap();
        assert!(matches!(with_u, Some(Pfm::Absent | Pfm::Event(_))), "{with_u:?}");
        let e = libpfm_event("skl::INST_RETIRED:ZZ").unwrap_err().to_string();
        assert!(e.contains("unknown modifier \"ZZ\""), "{e}");
        // libpfm4's perf PMU is always present: its names encode to the kernel's generic events.
        assert_eq!(
            libpfm_event("PERF_COUNT_SW_PAGE_FAULTS").unwrap(),
            Some(Pfm::Event(Raw { ty: 1, config: 2, config1: 0, config2: 0 }))
        );
    }
}
