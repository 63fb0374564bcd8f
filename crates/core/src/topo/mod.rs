//! Machine topology through hwloc: packages, NUMA nodes and their distances, cores, PUs, and CPU kinds
//! (P-core / E-core / LP-E-core), reduced to a plain model the rest of lockstep works on.

mod render;

use std::path::Path;

use hwlocality::object::types::ObjectType;
use hwlocality::object::TopologyObject;
use hwlocality::Topology;
use serde::Serialize;

use crate::cpulist::CpuList;
use crate::error::UsageError;

/// One physical core: its PUs (hardware threads) in hwloc's logical order.
#[derive(Clone, Debug)]
pub struct Core {
    /// OS indexes of the core's PUs, in logical order.
    pub pus: Vec<usize>,
    /// Index into [`Machine::kinds`].
    pub kind: usize,
    /// Index into [`Machine::numa`] of the node holding the core, if any.
    pub numa: Option<usize>,
    /// Logical index of the package holding the core.
    pub package: usize,
}

/// One kind of CPU core, as hwloc's cpukinds report it.
#[derive(Clone, Debug, Serialize)]
pub struct Kind {
    /// `P`, `E`, `LP-E`, … from the most to the least performant kind.
    pub label: String,
    /// OS indexes of the PUs of this kind.
    #[serde(serialize_with = "as_cpulist")]
    pub pus: CpuList,
    /// Number of cores of this kind.
    pub cores: usize,
    /// hwloc's `CoreType` info (`IntelCore`, `IntelAtom`), when the x86 backend found it.
    pub core_type: Option<String>,
    /// hwloc's efficiency rank: 0 is the most power-efficient kind, higher is faster.
    pub efficiency: usize,
    /// hwloc's `FrequencyMaxMHz` info, when Linux cpufreq reported it.
    pub max_freq_mhz: Option<u64>,
    /// Every info hwloc attached to the kind, for the human output.
    #[serde(skip)]
    pub infos: Vec<(String, String)>,
}

/// One NUMA node.
#[derive(Clone, Debug, Serialize)]
pub struct NumaNode {
    /// The node's OS index (what `numactl` and `cpuset.mems` use).
    pub os_index: usize,
    /// OS indexes of the PUs local to the node.
    #[serde(serialize_with = "as_cpulist")]
    pub pus: CpuList,
    /// Local memory of the node, 0 when the topology does not say.
    pub memory_bytes: u64,
}

/// The topology of one node, reduced to what placement needs.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    /// Number of packages (sockets).
    pub packages: usize,
    /// Number of NUMA nodes.
    pub numa_nodes: usize,
    /// Number of cores.
    #[serde(rename = "cores", serialize_with = "count")]
    pub core_list: Vec<Core>,
    /// Number of PUs.
    pub pus: usize,
    /// CPU kinds, most performant first; one kind labelled `P` when hwloc knows none.
    pub kinds: Vec<Kind>,
    /// NUMA nodes by increasing OS index.
    pub numa: Vec<NumaNode>,
    /// NUMA distance matrix (rows and columns in the order of `numa`), if the topology has one.
    pub distances: Option<Vec<Vec<u64>>>,
    /// Where the topology came from (`this machine` or the XML path).
    #[serde(skip)]
    pub source: String,
}

fn as_cpulist<S: serde::Serializer>(list: &CpuList, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(list)
}

fn count<S: serde::Serializer>(cores: &[Core], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(cores.len() as u64)
}

/// Label of the kind at `rank_from_top` (0 = most performant): `P`, `E`, `LP-E`, then `K3`, `K4`….
fn kind_label(rank_from_top: usize) -> String {
    match rank_from_top {
        0 => "P".into(),
        1 => "E".into(),
        2 => "LP-E".into(),
        n => format!("K{n}"),
    }
}

/// Why a topology could not be had.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// The file given is not a topology this build can read (its usage error is its source, so that
    /// [`crate::error::is_usage`] finds it).
    #[error("{0}")]
    File(#[from] UsageError),
    /// hwloc could not read this machine's topology.
    #[error("hwloc cannot read this machine's topology: {0}")]
    Live(hwlocality::errors::RawHwlocError),
}

/// The `MemTotal` of a meminfo text (/proc/meminfo's `MemTotal: N kB`, or a node's `Node 0 MemTotal: N kB`), in
/// KiB.
fn mem_total_kib(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.contains("MemTotal:"))?;
    line.split("MemTotal:").nth(1)?.split_whitespace().next()?.parse().ok()
}

fn cpulist_of(obj: &TopologyObject) -> CpuList {
    obj.cpuset().map(|set| set.iter_set().map(usize::from).collect()).unwrap_or_default()
}

impl Machine {
    /// Loads the live machine's topology.
    pub fn live() -> Result<Self, TopologyError> {
        let topo = Topology::new().map_err(TopologyError::Live)?;
        let mut machine = Self::from_hwloc(&topo, "this machine".into());
        machine.memory_from_kernel();
        Ok(machine)
    }

    /// Fills in the memory of the nodes hwloc reported none for (a build without its Linux backend, some
    /// virtual machines) from what the kernel says: each node's `MemTotal` in sysfs, or, on a machine of one node,
    /// /proc/meminfo's.
    fn memory_from_kernel(&mut self) {
        let single = self.numa.len() == 1;
        for node in self.numa.iter_mut().filter(|n| n.memory_bytes == 0) {
            let sysfs = format!("/sys/devices/system/node/node{}/meminfo", node.os_index);
            let from_sysfs = std::fs::read_to_string(sysfs).ok().and_then(|t| mem_total_kib(&t));
            let from_meminfo =
                || single.then(|| std::fs::read_to_string("/proc/meminfo").ok().and_then(|t| mem_total_kib(&t)))?;
            if let Some(kib) = from_sysfs.or_else(from_meminfo) {
                node.memory_bytes = kib * 1024;
            }
        }
    }

    /// Loads a topology from an hwloc XML file; a missing, unreadable or invalid file is a usage error.
    pub fn from_xml(path: &Path) -> Result<Self, UsageError> {
        let (what, expected) = ("topology file", "an hwloc XML file, as lstopo --of xml writes it");
        let text = crate::error::read_input(path, what, expected)?;
        let bad = |why: &str| crate::error::input_error(path, what, expected, why);
        // Read here, handed to hwloc as a buffer: hwloc's own file errors are not all reported, some abort.
        let builder = Topology::builder().from_xml(&text).map_err(|_| bad("hwloc cannot parse it"))?;
        let topo = builder.build().map_err(|_| bad("hwloc cannot build a topology from it"))?;
        if topo.objects_with_type(ObjectType::PU).next().is_none() {
            return Err(bad("it has no processing units"));
        }
        Ok(Self::from_hwloc(&topo, path.display().to_string()))
    }

    /// Loads `xml` if given, else the live machine.
    pub fn load(xml: Option<&Path>) -> Result<Self, TopologyError> {
        match xml {
            Some(path) => Ok(Self::from_xml(path)?),
            None => Self::live(),
        }
    }

    fn from_hwloc(topo: &Topology, source: String) -> Self {
        let mut numa: Vec<NumaNode> = topo
            .objects_with_type(ObjectType::NUMANode)
            .map(|n| NumaNode {
                os_index: n.os_index().unwrap_or(n.logical_index()),
                pus: cpulist_of(n),
                memory_bytes: n.total_memory(),
            })
            .collect();
        numa.sort_by_key(|n| n.os_index);

        let mut kinds = read_kinds(topo);
        let pu_kind = |pu: usize| kinds.iter().position(|k| k.pus.contains(pu)).unwrap_or(0);

        let pu_objects: Vec<&TopologyObject> = topo.objects_with_type(ObjectType::PU).collect();
        let mut core_objects: Vec<&TopologyObject> = topo.objects_with_type(ObjectType::Core).collect();
        // Some architectures expose PUs without Core objects: then every PU is its own core.
        if core_objects.is_empty() {
            core_objects.clone_from(&pu_objects);
        }
        let core_list: Vec<Core> = core_objects
            .iter()
            .map(|core| {
                let pus: Vec<usize> = pu_objects
                    .iter()
                    .filter(|pu| cpulist_of(pu).is_subset(&cpulist_of(core)))
                    .filter_map(|pu| pu.os_index())
                    .collect();
                let first = pus.first().copied().unwrap_or(0);
                Core {
                    kind: pu_kind(first),
                    numa: numa.iter().position(|n| n.pus.contains(first)),
                    package: core
                        .first_ancestor_with_type(ObjectType::Package)
                        .map_or(0, hwlocality::object::TopologyObject::logical_index),
                    pus,
                }
            })
            .collect();
        for (i, kind) in kinds.iter_mut().enumerate() {
            kind.cores = core_list.iter().filter(|c| c.kind == i).count();
        }

        Machine {
            packages: topo.objects_with_type(ObjectType::Package).count().max(1),
            numa_nodes: numa.len(),
            pus: pu_objects.len(),
            distances: read_numa_distances(topo, &numa),
            core_list,
            kinds,
            numa,
            source,
        }
    }

    /// All PU OS indexes of the machine.
    pub fn all_pus(&self) -> CpuList {
        self.core_list.iter().flat_map(|c| c.pus.iter().copied()).collect()
    }

    /// The JSON document of `lockstep topo --json`.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("topology serializes")
    }
}

/// Reads hwloc's CPU kinds, most performant first; a machine without kind information gets one `P` kind.
fn read_kinds(topo: &Topology) -> Vec<Kind> {
    let kind = |efficiency: usize, pus: CpuList, infos: Vec<(String, String)>| {
        let info = |key: &str| infos.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
        Kind {
            label: String::new(),
            core_type: info("CoreType"),
            max_freq_mhz: info("FrequencyMaxMHz").and_then(|v| v.parse().ok()),
            pus,
            cores: 0,
            efficiency,
            infos,
        }
    };
    let mut kinds: Vec<Kind> = match topo.cpu_kinds() {
        Ok(kinds) => kinds
            .enumerate()
            .map(|(i, k)| {
                let infos = k
                    .infos
                    .iter()
                    .map(|info| {
                        (info.name().to_string_lossy().into_owned(), info.value().to_string_lossy().into_owned())
                    })
                    .collect();
                kind(k.efficiency.unwrap_or(i), k.cpuset.iter_set().map(usize::from).collect(), infos)
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    if kinds.is_empty() {
        kinds.push(kind(0, topo.cpuset().iter_set().map(usize::from).collect(), Vec::new()));
    }
    // hwloc lists kinds from the most power-efficient up; lockstep lists the most performant first.
    kinds.sort_by_key(|k| std::cmp::Reverse(k.efficiency));
    for (i, k) in kinds.iter_mut().enumerate() {
        k.label = kind_label(i);
    }
    kinds
}

/// The NUMA distance matrix (latency, preferred) reordered to `numa`'s order.
fn read_numa_distances(topo: &Topology, numa: &[NumaNode]) -> Option<Vec<Vec<u64>>> {
    let matrices = topo.distances_with_type(None, ObjectType::NUMANode).ok()?;
    let best = matrices
        .iter()
        .find(|d| d.name().is_some_and(|n| n.to_bytes() == b"NUMALatency"))
        .or_else(|| matrices.first())?;
    let order: Vec<usize> = best
        .objects()
        .map(|o| {
            o.and_then(hwlocality::object::TopologyObject::os_index)
                .and_then(|os| numa.iter().position(|n| n.os_index == os))
        })
        .collect::<Option<_>>()?;
    let n = numa.len();
    if order.len() != n {
        return None;
    }
    let values = best.distances();
    let mut out = vec![vec![0u64; n]; n];
    for (i, &row) in order.iter().enumerate() {
        for (j, &col) in order.iter().enumerate() {
            out[row][col] = values[i * n + j];
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests;
