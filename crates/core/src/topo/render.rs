//! Human output of `lockstep topo`: a tree in the spirit of `lstopo-no-graphics`, then the core kinds and
//! the NUMA distances.

use std::fmt::Write;

use super::Machine;

/// A memory size as lstopo writes it (`7642MB`), or what a topology without one is.
fn mib(bytes: u64) -> String {
    if bytes == 0 {
        "memory not in the topology".into()
    } else {
        format!("{}MB", bytes / (1024 * 1024))
    }
}

impl Machine {
    /// The human report of `lockstep topo`.
    pub fn render(&self) -> String {
        let m = self;
        let mut out = String::new();
        let total: u64 = m.numa.iter().map(|n| n.memory_bytes).sum();
        let _ = writeln!(
            out,
            "Machine ({}) from {}: {} package(s), {} NUMA node(s), {} core(s), {} PU(s)",
            if total == 0 { mib(0) } else { format!("{} total", mib(total)) },
            m.source,
            m.packages,
            m.numa_nodes,
            m.core_list.len(),
            m.pus
        );
        let mut pu_logical = 0;
        for package in 0..m.packages {
            let _ = writeln!(out, "  Package L#{package}");
            let mut shown_numa = None;
            for (core_idx, core) in m.core_list.iter().enumerate().filter(|(_, c)| c.package == package) {
                if core.numa != shown_numa {
                    if let Some(n) = core.numa.map(|i| &m.numa[i]) {
                        let _ = writeln!(out, "    NUMANode P#{} ({})", n.os_index, mib(n.memory_bytes));
                    }
                    shown_numa = core.numa;
                }
                let pus: Vec<String> = core
                    .pus
                    .iter()
                    .map(|os| {
                        pu_logical += 1;
                        format!("PU L#{} (P#{os})", pu_logical - 1)
                    })
                    .collect();
                let _ = writeln!(out, "      Core L#{core_idx} [{}] + {}", m.kinds[core.kind].label, pus.join(" + "));
            }
        }
        let _ = writeln!(out, "CPU kinds (most performant first):");
        for kind in &m.kinds {
            let infos: Vec<String> = kind.infos.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let _ = writeln!(
                out,
                "  {:<5} PUs {:<14} {:>3} core(s)  efficiency {}  {}",
                kind.label,
                kind.pus.to_string(),
                kind.cores,
                kind.efficiency,
                if infos.is_empty() { "(no kind information)".to_string() } else { infos.join(" ") }
            );
        }
        match &m.distances {
            Some(rows) => {
                let _ = writeln!(out, "NUMA distances (by OS index):");
                let _ = write!(out, "  index");
                for n in &m.numa {
                    let _ = write!(out, " {:>5}", n.os_index);
                }
                out.push('\n');
                for (n, row) in m.numa.iter().zip(rows) {
                    let _ = write!(out, "  {:>5}", n.os_index);
                    for d in row {
                        let _ = write!(out, " {d:>5}");
                    }
                    out.push('\n');
                }
            }
            None => {
                let _ = writeln!(out, "NUMA distances: none reported");
            }
        }
        out
    }
}
