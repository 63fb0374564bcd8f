//! Compiles the eBPF program of the `dcs` policy (src/dcs/bpf/dcs.bpf.c) with clang into an object the agent embeds
//! and loads at run time (libbpf, CO-RE against the running kernel's BTF), and generates its skeleton, whose
//! `types` module gives the agent the layouts of src/dcs/bpf/dcs_intf.h from the object's BTF.

use std::path::PathBuf;

fn main() {
    let src = "src/dcs/bpf/dcs.bpf.c";
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let out = out_dir.join("dcs.bpf.o");
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").expect("cargo sets the target arch");
    let multiarch = match arch.as_str() {
        "x86_64" => "x86_64-linux-gnu",
        "aarch64" => "aarch64-linux-gnu",
        other => panic!("dcs: no include directory known for {other}"),
    };
    libbpf_cargo::SkeletonBuilder::new()
        .source(src)
        .obj(&out)
        .clang_args([format!("-I/usr/include/{multiarch}"), "-Wall".into(), "-Werror".into()])
        .build_and_generate(out_dir.join("dcs.skel.rs"))
        .unwrap_or_else(|e| panic!("cannot compile {src} with clang (scripts/deps.sh installs it): {e:#}"));
    println!("cargo:rerun-if-changed={src}");
    println!("cargo:rerun-if-changed=src/dcs/bpf/dcs_intf.h");
}
