// SPDX-License-Identifier: GPL-2.0
//
// What the dcs eBPF program and the agent share: its limits and the layouts of its map entries and events. The
// program includes this header; the agent gets the same structs as Rust types generated from the compiled
// object's BTF (libbpf-cargo's skeleton, `types` module), and reads the limits from the loaded maps, so no size,
// offset or limit is written down twice.

#ifndef DCS_INTF_H
#define DCS_INTF_H

/// Limits of the program's maps.
enum dcs_limits {
	/// Most jobs one agent watches at once (slots of `jobs`).
	DCS_MAX_JOBS = 1024,
	/// Most (network namespace, port) keys in `ports`.
	DCS_MAX_PORTS = 65536,
	/// Bytes of the `events` ring buffer.
	DCS_EVENT_BYTES = 1 << 16,
};

/// A job's socket: network namespace inode and local port (host byte order); `pad` is always 0.
struct port_key {
	__u32 netns;
	__u16 port;
	__u16 pad;
};

/// Per-job counters, and when the last event went out.
struct job_state {
	__u64 packets;
	__u64 bytes;
	__u64 last_event_ns;
};

/// What the agent reads: arrival time (CLOCK_MONOTONIC ns), job slot, payload bytes of the packet, and the
/// socket it arrived for (so that the agent can raise just the receiving process).
struct event {
	__u64 arrived_ns;
	__u32 job;
	__u32 bytes;
	struct port_key socket;
};

#endif
