//! What the agent's eBPF programs (`dcs`'s, `together`'s) share: opening an embedded object against the kernel's
//! BTF, finding its maps, explaining libbpf's errors, and moving the generated layouts in and out of map bytes.

use std::path::{Path, PathBuf};

use libbpf_rs::{MapCore, Object, ObjectBuilder, OpenObject};

/// Where the running kernel publishes its BTF.
const KERNEL_BTF: &str = "/sys/kernel/btf/vmlinux";

/// Opens the compiled program `object` (the bytes build.rs embedded) for CO-RE against the kernel's BTF, or the
/// BTF file `btf` names; `what` names the program in errors, which say what is missing.
pub(crate) fn open(object: &'static [u8], btf: Option<&Path>, what: &str) -> anyhow::Result<OpenObject> {
    let btf_path = btf.map_or_else(|| PathBuf::from(KERNEL_BTF), Path::to_path_buf);
    if !btf_path.is_file() {
        anyhow::bail!(
            "{what} needs the kernel's BTF type information, and {} does not exist (a kernel built with \
             CONFIG_DEBUG_INFO_BTF=y provides {KERNEL_BTF})",
            btf_path.display()
        );
    }
    // libbpf's own messages would go to the agent's stderr beside ours; its errors come back to us, explained.
    libbpf_rs::set_print(None);
    let mut builder = ObjectBuilder::default();
    if let Some(path) = btf {
        builder.btf_custom_path(path)?;
    }
    builder.open_memory(object).map_err(|e| anyhow::anyhow!("cannot open the {what} eBPF program: {e}"))
}

/// Loads an opened program; the error says what is missing.
pub(crate) fn load(open: OpenObject, what: &str) -> anyhow::Result<Object> {
    open.load().map_err(|e| anyhow::anyhow!("cannot load the {what} eBPF program: {}", explain(&e)))
}

/// The map `name` of a loaded object.
pub(crate) fn find_map<'o>(object: &'o Object, name: &str) -> anyhow::Result<libbpf_rs::Map<'o>> {
    object.maps().find(|m| m.name() == name).ok_or_else(|| anyhow::anyhow!("eBPF object has no map {name}"))
}

/// libbpf's error, with what to do for the common causes.
pub(crate) fn explain(e: &libbpf_rs::Error) -> String {
    match e.kind() {
        libbpf_rs::ErrorKind::PermissionDenied => {
            format!("{e} (loading eBPF needs root, or CAP_BPF with CAP_NET_ADMIN and CAP_PERFMON)")
        }
        _ => format!("{e}"),
    }
}

/// The bytes of a value of one of the generated layouts (integers only, no padding: every byte is defined).
pub(crate) fn bytes_of<T: Copy>(value: &T) -> &[u8] {
    // SAFETY: `T` is one of the skeletons' `repr(C)` structs of integers without padding; its bytes are
    // initialised.
    unsafe { std::slice::from_raw_parts(std::ptr::from_ref(value).cast::<u8>(), std::mem::size_of::<T>()) }
}

/// A value of one of the generated layouts from the program's bytes, if there are enough of them.
pub(crate) fn read_as<T: Copy>(data: &[u8]) -> Option<T> {
    // SAFETY: `T` is one of the skeletons' `repr(C)` structs of integers, for which every bit pattern is a value;
    // the length is checked and the read does not assume alignment.
    (data.len() >= std::mem::size_of::<T>()).then(|| unsafe { std::ptr::read_unaligned(data.as_ptr().cast::<T>()) })
}

/// CLOCK_MONOTONIC in nanoseconds: the clock of `bpf_ktime_get_ns`.
pub(crate) fn ktime_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &raw mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
