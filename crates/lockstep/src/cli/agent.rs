//! `lockstep agent [--config FILE] [--policy NAME] [--slot DURATION] [--node NAME]`: the node agent, in the
//! foreground.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::agent::{self, Config};
use crate::cosched::slot;
use crate::error::UsageError;

/// Arguments of `lockstep agent`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// TOML configuration file (keys: socket, store, node, policy, slot); flags override it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Co-scheduling policy at start: cfs, boost or gang.
    #[arg(long, value_name = "NAME")]
    policy: Option<String>,
    /// Slot length, e.g. 200ms or 2s (10ms to 60s).
    #[arg(long, value_name = "DURATION")]
    slot: Option<String>,
    /// Node name in decisions and status (default: the host name).
    #[arg(long, value_name = "NAME")]
    node: Option<String>,
}

/// The configuration file's contents.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    socket: Option<PathBuf>,
    store: Option<PathBuf>,
    node: Option<String>,
    policy: Option<String>,
    slot: Option<String>,
}

/// Runs the agent; `socket` and `store` are the global flags (or their defaults) when given.
pub fn exec(args: &Args, socket: Option<&Path>, store: Option<&Path>) -> anyhow::Result<i32> {
    let file: File = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| UsageError::new(format!("cannot read config {}: {e}", path.display())))?;
            toml::from_str(&text).map_err(|e| {
                UsageError::new(format!("bad config {}: {}", path.display(), crate::error::toml_message(&text, &e)))
            })?
        }
        None => File::default(),
    };
    let slot_text = args.slot.clone().or(file.slot);
    let config = Config {
        socket: agent::client::resolve_socket(socket.or(file.socket.as_deref())),
        store: crate::store::resolve_path(store.or(file.store.as_deref())),
        node: args.node.clone().or(file.node).unwrap_or_else(hostname),
        policy: args.policy.clone().or(file.policy).unwrap_or_else(|| "cfs".into()),
        slot: slot_text.as_deref().map(slot::parse).transpose()?.unwrap_or(slot::DEFAULT),
    };
    agent::run(config)
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map_or_else(|_| "localhost".into(), |h| h.trim().to_string())
}
