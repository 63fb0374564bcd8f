//! Compiles the agent's eBPF programs with clang into objects the agent embeds and loads at run time (libbpf,
//! CO-RE against the running kernel's BTF), and generates their skeletons, whose `types` modules give the agent
//! the layouts of each program's interface header from the object's BTF:
//! - `dcs` (src/dcs/bpf/dcs.bpf.c, dcs_intf.h): message arrivals for the `dcs` policy;
//! - `together` (src/together/bpf/together.bpf.c, together_intf.h): how often a job's ranks run at once.

use std::path::{Path, PathBuf};

fn main() {
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").expect("cargo sets the target arch");
    let multiarch = match arch.as_str() {
        "x86_64" => "x86_64-linux-gnu",
        "aarch64" => "aarch64-linux-gnu",
        other => panic!("no include directory known for {other}"),
    };
    compile(&out_dir, multiarch, "dcs", "src/dcs/bpf", &[]);
    // Atomic exchanges (BPF ISA v3: kernel 5.12 and later).
    compile(&out_dir, multiarch, "together", "src/together/bpf", &["-mcpu=v3"]);
}

/// Compiles `dir/name.bpf.c` (with `dir/name_intf.h`) into `name.bpf.o` and `name.skel.rs` in `out_dir`, with
/// the clang arguments `extra` besides the common ones.
fn compile(out_dir: &Path, multiarch: &str, name: &str, dir: &str, extra: &[&str]) {
    let src = format!("{dir}/{name}.bpf.c");
    let mut args = vec![format!("-I/usr/include/{multiarch}"), "-Wall".into(), "-Werror".into()];
    args.extend(extra.iter().map(|a| (*a).to_string()));
    libbpf_cargo::SkeletonBuilder::new()
        .source(&src)
        .obj(out_dir.join(format!("{name}.bpf.o")))
        .clang_args(args)
        .build_and_generate(out_dir.join(format!("{name}.skel.rs")))
        .unwrap_or_else(|e| panic!("cannot compile {src} with clang (scripts/deps.sh installs it): {e:#}"));
    println!("cargo:rerun-if-changed={src}");
    println!("cargo:rerun-if-changed={dir}/{name}_intf.h");
}
