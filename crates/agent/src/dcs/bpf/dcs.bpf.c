// SPDX-License-Identifier: GPL-2.0
//
// dcs: sees TCP data arrive for a socket of a managed job and tells the agent, which boosts the receiving job.
//
// A cgroup_skb/ingress program on the root of the unified (v2) hierarchy runs for every packet delivered to a
// local socket, before the socket's owner is woken. The agent fills `ports` with the listening and connected
// TCP ports of every managed job, keyed by the network namespace (its inode number, as /proc/PID/ns/net shows it)
// and the local port, so a job is recognised whatever cgroup its sockets were created in. Packets without payload
// (ACKs, handshakes) are not messages and are skipped. Events are rate-limited per job to one per `gap_ns` (the
// agent sets the quantum, read-only once loaded: a raise lasts one quantum and is not extended). The layouts the
// agent reads are in dcs_intf.h.
//
// Kernel structures are read with CO-RE (BPF_CORE_READ against the running kernel's BTF), through minimal
// definitions of the few fields used, so the program needs no generated vmlinux.h and loads on any kernel with BTF.
// The program never drops a packet: it returns 1 (pass) on every path.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#include "dcs_intf.h"

struct ns_common {
	unsigned int inum;
} __attribute__((preserve_access_index));

struct net {
	struct ns_common ns;
} __attribute__((preserve_access_index));

struct sock_common {
	unsigned short skc_num;
	struct {
		struct net *net;
	} skc_net;
} __attribute__((preserve_access_index));

struct sock {
	struct sock_common __sk_common;
} __attribute__((preserve_access_index));

/// Shortest gap between two events of one job, in ns (the agent sets it before loading: one raise quantum).
const volatile __u64 gap_ns = 0;

/// Never read: makes clang emit the BTF of `struct event` (only ring-buffer records have it otherwise), from
/// which the agent's skeleton types are generated.
const volatile struct event event_layout = {};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, DCS_MAX_PORTS);
	__type(key, struct port_key);
	__type(value, __u32);
} ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DCS_MAX_JOBS);
	__type(key, __u32);
	__type(value, struct job_state);
} jobs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, DCS_EVENT_BYTES);
} events SEC(".maps");

/// TCP payload bytes of the packet (0 for pure ACKs and control segments, or what cannot be parsed).
static __always_inline __u32 payload(struct __sk_buff *skb)
{
	__u8 b;
	__u32 ip_len, tcp_len;

	// cgroup_skb data starts at the network header.
	if (bpf_skb_load_bytes(skb, 0, &b, 1))
		return 0;
	if ((b >> 4) == 4)
		ip_len = (b & 0xf) * 4;
	else if ((b >> 4) == 6)
		ip_len = 40;
	else
		return 0;
	if (bpf_skb_load_bytes(skb, ip_len + 12, &b, 1))
		return 0;
	tcp_len = (b >> 4) * 4;
	if (skb->len <= ip_len + tcp_len)
		return 0;
	return skb->len - ip_len - tcp_len;
}

SEC("cgroup_skb/ingress")
int dcs_ingress(struct __sk_buff *skb)
{
	struct bpf_sock *sk = skb->sk;
	struct port_key key = {};
	struct job_state *st;
	struct event *e;
	struct sock *s;
	__u32 *job, bytes;
	__u64 now;

	if (!sk)
		return 1;
	// A BTF pointer to the full socket, NULL for anything but TCP.
	s = (struct sock *)bpf_skc_to_tcp_sock(sk);
	if (!s)
		return 1;
	key.netns = BPF_CORE_READ(s, __sk_common.skc_net.net, ns.inum);
	key.port = BPF_CORE_READ(s, __sk_common.skc_num);
	job = bpf_map_lookup_elem(&ports, &key);
	if (!job)
		return 1;
	bytes = payload(skb);
	if (!bytes)
		return 1;
	st = bpf_map_lookup_elem(&jobs, job);
	if (!st)
		return 1;
	// Counters only: atomic adds (packets on several CPUs at once), no ordering with anything else needed.
	__sync_fetch_and_add(&st->packets, 1);
	__sync_fetch_and_add(&st->bytes, bytes);
	now = bpf_ktime_get_ns();
	// Plain load and store: two CPUs racing here both send an event, which only extends the same boost twice.
	if (now - st->last_event_ns < gap_ns)
		return 1;
	st->last_event_ns = now;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e)
		return 1;
	e->arrived_ns = now;
	e->job = *job;
	e->bytes = bytes;
	e->socket = key;
	bpf_ringbuf_submit(e, 0);
	return 1;
}

char LICENSE[] SEC("license") = "GPL";
