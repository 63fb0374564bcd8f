//! An hwloc XML export, as `lockstep topo --xml FILE` and `place --xml` read it (through hwloc).
#![no_main]

use std::io::Write;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let file = tempfile();
    file.as_file().set_len(0).unwrap();
    file.as_file().write_all(data).unwrap();
    let _ = lockstep_core::topo::Machine::from_xml(file.path());
});

/// One scratch file per process, on tmpfs when there is one.
fn tempfile() -> &'static mut Scratch {
    static mut SCRATCH: Option<Scratch> = None;
    // SAFETY: libFuzzer runs the target on one thread.
    unsafe { (*std::ptr::addr_of_mut!(SCRATCH)).get_or_insert_with(Scratch::new) }
}

/// A file the target rewrites for every input.
struct Scratch {
    path: std::path::PathBuf,
    file: std::fs::File,
}

impl Scratch {
    fn new() -> Self {
        use std::os::fd::AsRawFd;
        let dir = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm" } else { "/tmp" };
        let name = std::path::PathBuf::from(format!("{dir}/lockstep-fuzz-topo-{}.xml", std::process::id()));
        let file = std::fs::OpenOptions::new().create(true).write(true).truncate(true).open(&name).unwrap();
        // Unlinked at once, read through /proc: nothing is left behind when the fuzzer is stopped.
        std::fs::remove_file(&name).unwrap();
        let path = std::path::PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
        Self { path, file }
    }

    fn as_file(&mut self) -> &mut std::fs::File {
        use std::io::Seek;
        self.file.rewind().unwrap();
        &mut self.file
    }

    fn path(&self) -> &std::path::Path {
        &self.path
    }
}
