//! What the agent knows of Slurm on this node: the daemon holds it, and only its Slurm part (the parent module)
//! reads or changes it.

use std::collections::HashMap;
use std::time::Instant;

use lockstep_core::cosched::rows::Schedule;
use lockstep_core::job::SlurmJobId;
use lockstep_store::{SlurmJob, Store};

/// What the agent knows of Slurm on this node; its fields are the Slurm part's alone.
pub(crate) struct SlurmState {
    /// This node's name in Slurm (`slurm_<name>` in Slurm's cgroup paths).
    pub(super) node: lockstep_core::ident::NodeName,
    /// Slurm jobs the prolog announced, by ID.
    pub(super) announced: HashMap<SlurmJobId, SlurmJob>,
    /// The cluster-wide places of Slurm jobs of this node, as the controller's hooks, the prolog or slurmctld told
    /// them.
    pub(super) places: HashMap<SlurmJobId, Schedule>,
    /// The rows of each node's own cycle the controller's hooks told for Slurm jobs of this node (`--rows node`),
    /// kept for their prologs.
    pub(super) node_rows: HashMap<SlurmJobId, u32>,
    /// Slurm jobs whose epilog ran (kept in the store), and when (this agent's start for those it read there),
    /// while their cgroups are still there.
    pub(super) done: HashMap<SlurmJobId, Instant>,
    /// What Slurm said of which of its jobs run on this node.
    pub(super) word: crate::slurm::Word,
}

impl SlurmState {
    /// The state of Slurm node `node` at the agent's start: the jobs announced and ended, as the store kept them.
    pub(crate) fn load(node: lockstep_core::ident::NodeName, store: &Store) -> anyhow::Result<Self> {
        let started = Instant::now();
        Ok(Self {
            node,
            announced: store.slurm_all()?.into_iter().map(|j| (j.id, j)).collect(),
            places: HashMap::new(),
            node_rows: HashMap::new(),
            done: store.slurm_ended()?.into_iter().map(|id| (id, started)).collect(),
            word: crate::slurm::Word::default(),
        })
    }
}
