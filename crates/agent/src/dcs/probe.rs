//! Loads the `dcs` eBPF program, attaches it to the root of the unified cgroup hierarchy, and reads its events.

use std::cell::RefCell;
use std::collections::HashSet;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use libbpf_rs::{Link, MapCore, MapFlags, MapHandle, Object, ObjectBuilder, RingBuffer, RingBufferBuilder};

use super::sockets::PortKey;

/// The compiled program (build.rs), embedded so that the agent binary is all a node needs.
static OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/dcs.bpf.o"));

/// Where the running kernel publishes its BTF.
const KERNEL_BTF: &str = "/sys/kernel/btf/vmlinux";

/// Job slots of the program's `jobs` map (`MAX_JOBS` in dcs.bpf.c).
pub const MAX_JOBS: u32 = 1024;

/// One message arrival the program reported.
#[derive(Clone, Copy, Debug)]
pub struct Arrival {
    /// When the packet arrived (CLOCK_MONOTONIC, ns).
    pub arrived_ns: u64,
    /// The job's slot.
    pub job: u32,
    /// The socket it arrived for.
    pub socket: PortKey,
}

/// What the program counted for one job slot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobCounts {
    /// Data packets that arrived.
    pub packets: u64,
    /// Their payload bytes.
    pub bytes: u64,
}

/// The loaded, attached program. Dropping it detaches it.
pub struct Probe {
    object: Object,
    _link: Link,
}

/// The program's port table and job counters, on handles of their own (for a thread other than the one reading
/// events).
pub struct Tables {
    ports: MapHandle,
    jobs: MapHandle,
    /// Keys in `ports` now.
    current: HashSet<PortKey>,
}

impl Probe {
    /// Loads the program (CO-RE against the kernel's BTF, or the BTF file `btf` names) with events at most
    /// every `gap` per job, and attaches it to the root of the unified hierarchy `unified`. Errors name what is
    /// missing: BTF, privileges, or the hierarchy.
    pub fn load(unified: &Path, btf: Option<&Path>, gap: Duration) -> anyhow::Result<Self> {
        let btf_path = btf.map_or_else(|| PathBuf::from(KERNEL_BTF), Path::to_path_buf);
        if !btf_path.is_file() {
            anyhow::bail!(
                "dcs needs the kernel's BTF type information, and {} does not exist (a kernel built with \
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
        let object = builder
            .open_memory(OBJECT)
            .and_then(libbpf_rs::OpenObject::load)
            .map_err(|e| anyhow::anyhow!("cannot load the dcs eBPF program: {}", explain(&e)))?;
        find_map(&object, "config")?.update(
            &0u32.to_ne_bytes(),
            &(gap.as_nanos() as u64).to_ne_bytes(),
            MapFlags::ANY,
        )?;
        let root = std::fs::File::open(unified)
            .map_err(|e| anyhow::anyhow!("dcs: cannot open the unified cgroup hierarchy {}: {e}", unified.display()))?;
        let link = {
            let prog = object
                .progs_mut()
                .find(|p| p.name() == "dcs_ingress")
                .ok_or_else(|| anyhow::anyhow!("dcs eBPF object has no program dcs_ingress"))?;
            prog.attach_cgroup(root.as_raw_fd()).map_err(|e| {
                anyhow::anyhow!("cannot attach the dcs eBPF program to {}: {}", unified.display(), explain(&e))
            })?
        };
        Ok(Self { object, _link: link })
    }

    /// Handles on the port table and the job counters.
    pub fn tables(&self) -> anyhow::Result<Tables> {
        Ok(Tables {
            ports: MapHandle::try_from(&find_map(&self.object, "ports")?)?,
            jobs: MapHandle::try_from(&find_map(&self.object, "jobs")?)?,
            current: HashSet::new(),
        })
    }

    /// A reader of the program's events, appending them to `sink` when polled.
    pub fn events(&self, sink: Rc<RefCell<Vec<Arrival>>>) -> anyhow::Result<RingBuffer<'static>> {
        let map = find_map(&self.object, "events")?;
        let mut builder = RingBufferBuilder::new();
        builder.add(&map, move |data: &[u8]| {
            // struct event: arrived_ns u64, job u32, bytes u32, socket { netns u32, port u16, pad u16 }.
            if let (Some(t), Some(j), Some(n), Some(p)) =
                (data.get(0..8), data.get(8..12), data.get(16..20), data.get(20..22))
            {
                sink.borrow_mut().push(Arrival {
                    arrived_ns: u64::from_ne_bytes(t.try_into().unwrap_or([0; 8])),
                    job: u32::from_ne_bytes(j.try_into().unwrap_or([0; 4])),
                    socket: PortKey {
                        netns: u32::from_ne_bytes(n.try_into().unwrap_or([0; 4])),
                        port: u16::from_ne_bytes(p.try_into().unwrap_or([0; 2])),
                    },
                });
            }
            0
        })?;
        Ok(builder.build()?)
    }
}

impl Tables {
    /// Makes the program report exactly `ports` (each with its job slot).
    pub fn set_ports(&mut self, ports: &[(PortKey, u32)]) -> anyhow::Result<()> {
        let wanted: HashSet<PortKey> = ports.iter().map(|(k, _)| *k).collect();
        for stale in self.current.difference(&wanted) {
            let _ = self.ports.delete(&stale.bytes());
        }
        for (key, job) in ports {
            self.ports.update(&key.bytes(), &job.to_ne_bytes(), MapFlags::ANY)?;
        }
        self.current = wanted;
        Ok(())
    }

    /// Zeroes a job slot's counters (a new job takes it).
    pub fn reset_job(&self, job: u32) -> anyhow::Result<()> {
        self.jobs.update(&job.to_ne_bytes(), &[0u8; 24], MapFlags::ANY)?;
        Ok(())
    }

    /// What the program counted for a job slot.
    pub fn counts(&self, job: u32) -> anyhow::Result<JobCounts> {
        let value = self.jobs.lookup(&job.to_ne_bytes(), MapFlags::ANY)?.unwrap_or_default();
        let word =
            |i: usize| value.get(i * 8..i * 8 + 8).map_or(0, |b| u64::from_ne_bytes(b.try_into().unwrap_or([0; 8])));
        Ok(JobCounts { packets: word(0), bytes: word(1) })
    }
}

fn find_map<'o>(object: &'o Object, name: &str) -> anyhow::Result<libbpf_rs::Map<'o>> {
    object.maps().find(|m| m.name() == name).ok_or_else(|| anyhow::anyhow!("dcs eBPF object has no map {name}"))
}

/// libbpf's error, with what to do for the common causes.
fn explain(e: &libbpf_rs::Error) -> String {
    match e.kind() {
        libbpf_rs::ErrorKind::PermissionDenied => {
            format!("{e} (loading eBPF needs root, or CAP_BPF with CAP_NET_ADMIN and CAP_PERFMON)")
        }
        _ => format!("{e}"),
    }
}
