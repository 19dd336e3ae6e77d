// SPDX-License-Identifier: GPL-2.0
// The baseline of the XDP benchmark (docs/benchmarks.md §4): an XDP program that only counts and drops every frame.
// The XDP translator's packet rate is compared with this program's in the same run
// (crates/engines/dta-xdp/benches/netns.rs).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} drop_count SEC(".maps");

SEC("xdp")
int xdp_drop(struct xdp_md *ctx)
{
	__u32 k = 0;
	__u64 *c = bpf_map_lookup_elem(&drop_count, &k);

	if (c)
		*c += 1;
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
