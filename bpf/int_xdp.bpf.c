// SPDX-License-Identifier: Apache-2.0
// Size: one XDP program object: the Telemetry Report / INT-MD parser and the per-flow and
// histogram aggregation share the verifier-checked bounds and the maps.
// The INT sink's XDP fast path: a telemetry report ([TR v2.0 §3]) of one INT-MD packet
// ([INT v2.1 §5.7.3]) of a flow the userspace sink already knows, on the path it knows, with no
// event (every metric at or under its threshold), is aggregated here and dropped (XDP_DROP):
// per flow (a slot the sink gave it) the report count, per hop and metric the sum and the latest
// value (with the report's sequence number, which orders it against the sink's own); per
// switch, metric and log2 bucket the histogram count. Everything else goes up the stack
// (XDP_PASS) to the sink's sockets, or, with AF_XDP receive on the same interface, a report to
// the sink's port goes to the AF_XDP socket of its receive queue. The aggregates live in
// BPF_F_MMAPABLE arrays the sink maps and drains at each delta flush into the same deltas its
// own reports make, so flow records and histograms stay exact; a bitmap of the slots written
// since the sink last looked lets a drain read only those (its work scales with the flows that
// reported, not with the flows known). crates/engines/dta-xdp
// (`IntXdp`) loads it; docs/int-sink.md "XDP fast path" describes it.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "allow.h"

#define MAX_HOPS 5       // dta_int::layout::MAX_PATH
#define HOP_WORDS 4      // node id, hop latency, queue id + occupancy, egress tx util
#define METRICS 3        // hop latency, queue occupancy, egress tx util
#define BUCKETS 33       // log2 buckets of a u32 (dta_int::Buckets::Log2)
#define TR_HDR 12        // group header (8) + individual report header (4)
#define INNER_ETH 14
#define INNER_IP 20      // IHL 5 only; others go to userspace
#define SHIM 4
#define MD_HDR 12
// The 22 bits of a Telemetry Report sequence number and the reordering window, as
// dta_int::cache defines them (crates/engines/dta-xdp/build.rs passes them as -D defines).
#define SEQ_MASK DTA_SEQ_MASK
#define REORDER_WINDOW DTA_REORDER_WINDOW

// Counters (per CPU), one per verdict: every frame counts once, so the frames seen are their
// sum; crates/engines/dta-xdp/src/int.rs `IntXdpStats` mirrors this list.
enum {
    C_FAST = 0,      // reports aggregated here and dropped
    C_PASS_OTHER,    // not a UDP datagram to the sink's port (or disabled)
    C_PASS_SHAPE,    // not one v2.0 INT-MD report of the handled shape (userspace parses it)
    C_PASS_UNKNOWN,  // a flow the sink has not handed over (yet)
    C_PASS_PATH,     // another hop count or node id than the flow's known path
    C_PASS_EVENT,    // a metric over its threshold: the sink raises the event
    C_SOURCE_NOT_ALLOWED, // from a source outside [sink] allow: dropped unparsed
    C_PASS_IP_OPTIONS, // an outer IPv4 header with options: the sink parses it (RFC 791 §3.1)
    C_PASS_FRAGMENT,   // an outer IPv4 fragment: the stack reassembles it for the sink
    C_COUNT,
    // Not a verdict: of the reports to the sink's port passed up (C_PASS_SHAPE .. C_PASS_EVENT),
    // those handed to an AF_XDP socket of the sink instead of the stack (cfg->xsk).
    C_AF_XDP = C_COUNT,
    C_SLOTS
};

struct int_cfg {
    __u32 enabled;
    __u32 port;         // UDP destination port of the telemetry reports (the sink's listen)
    __u32 int_port;     // UDP destination port of INT over UDP in the inner packet
    __u32 instructions; // the one instruction bitmap handled (node id, latency, queue, util)
    __u32 th_latency;   // events: a value above its threshold goes to userspace
    __u32 th_queue;
    __u32 th_util;
    __u32 th_path;      // the sum of a path's hop latencies
    __u32 slots;        // entries of int_flows
    __u32 blocks;       // switches of int_hist (METRICS * BUCKETS counters each)
    __u32 xsk;          // 1: what goes to the sink goes to its AF_XDP sockets (`xsks`)
    __u32 cpus;         // CPUs of int_hist (the possible CPUs), `blocks` switches each
};

struct flow_key {
    __u8 k[16];  // src (4) | dst (4) | sport (2) | dport (2) | proto (1) | 0 0 0
};

struct known {
    __u32 slot;              // index into int_flows (the sink's FlowCache index)
    __u32 hops;
    __u32 node[MAX_HOPS];    // hop 0 = the INT source
    __u32 block[MAX_HOPS];   // int_hist block of each hop's switch
};

// One bit per flow slot: set by the program when it writes a slot whose bit is clear, cleared
// by the sink when it drains the slot (crates/engines/dta-xdp/src/int.rs, `IntXdp::changed`).
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(map_flags, BPF_F_MMAPABLE);
    __uint(max_entries, 1024);   // set by the loader: slots / 64, rounded up
    __type(key, __u32);
    __type(value, __u64);
} int_changed SEC(".maps");

// One flow slot's aggregate: cumulative, never reset. The program adds to the sums without
// locked instructions (the count alone is a locked add, for the changed bit's ordering): one
// flow's reports come from one reporter (the sink switch of its path), so one CPU at a time
// writes a slot; the sink reads each word and takes the difference from
// what it read last (crates/engines/dta-xdp/src/int.rs, `IntXdp::take`).
struct flow_agg {
    __u64 packets;
    __u64 last_ns;                  // bpf_ktime_get_ns of the latest report
    __u64 sum[MAX_HOPS][METRICS];
    __u32 last[MAX_HOPS][METRICS];
    __u32 seq;                      // Telemetry Report sequence number of the latest report
                                    // (set by the sink when it hands the flow over)
};

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct int_cfg);
} int_cfg SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 65536);   // set by the loader: the FlowCache capacity
    __type(key, struct flow_key);
    __type(value, struct known);
} int_known SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(map_flags, BPF_F_MMAPABLE);
    __uint(max_entries, 65536);   // set by the loader
    __type(key, __u32);
    __type(value, struct flow_agg);
} int_flows SEC(".maps");

// Per CPU, per switch block, metric and log2 bucket, a cumulative count: a CPU adds only to its
// own part, without a locked instruction (XDP does not nest on a CPU), and the sink sums the
// CPUs' parts and takes the difference from what it read last (crates/engines/dta-xdp/src/int.rs,
// `IntXdp::take_hist`).
// An element is one CPU's counters of one switch block (`cpu * blocks + block`): one lookup
// per hop serves its three metrics, and the counters lie as a flat array of u64s indexed
// ((cpu * blocks + block) * METRICS + metric) * BUCKETS + bucket.
struct hist_block {
    __u64 c[METRICS][BUCKETS];
};

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(map_flags, BPF_F_MMAPABLE);
    __uint(max_entries, 4096);   // set by the loader: cpus * blocks
    __type(key, __u32);
    __type(value, struct hist_block);
} int_hist SEC(".maps");

// The sink's AF_XDP sockets, one per receive queue (`dta int-sink --xdp IFACE --af-xdp IFACE`:
// one program on the interface does both); crates/engines/dta-xdp/src/xsk.rs MAX_QUEUES.
struct {
    __uint(type, BPF_MAP_TYPE_XSKMAP);
    __uint(max_entries, 64);
    __type(key, __u32);
    __type(value, __u32);
} xsks SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, C_SLOTS);
    __type(key, __u32);
    __type(value, __u64);
} int_stats SEC(".maps");

static __always_inline int count(__u32 c, int verdict)
{
    __u64 *v = bpf_map_lookup_elem(&int_stats, &c);
    if (v)
        *v += 1;
    return verdict;
}

// A report for the sink, with the verdict `c` that says why it is not aggregated here: up the
// stack to the sink's UDP sockets, or with AF_XDP receive on this interface (cfg->xsk) to the
// AF_XDP socket of its receive queue (the stack when that queue has none).
static __always_inline int up(struct xdp_md *ctx, const struct int_cfg *cfg, __u32 c)
{
    count(c, 0);
    if (!cfg->xsk)
        return XDP_PASS;
    int r = bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
    if (r == XDP_REDIRECT)
        count(C_AF_XDP, 0);
    return r;
}

// A big-endian word of the packet: one 4-byte load and a byte swap (the packet's words need not
// be aligned: x86-64, where the verifier allows unaligned packet loads, is what XDP runs on here).
static __always_inline __u32 be32(const __u8 *p)
{
    return bpf_ntohl(*(const __u32 *)p);
}

// 1 + floor(log2 v) of a byte (0 for 0): log2_bucket's last step, a load where five dependent
// compares would be (BPF has no count-leading-zeros instruction).
static const __u8 log2_byte[256] = {
    0, 1, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4,
#define L5 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5
#define L6 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6
#define L7 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7
#define L8 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8
    L5, L6, L6, L7, L7, L7, L7, L8, L8, L8, L8, L8, L8, L8, L8,
#undef L5
#undef L6
#undef L7
#undef L8
};

// dta_int::Buckets::Log2: 0 -> 0, v >= 1 -> 1 + floor(log2 v) (at most 32).
static __always_inline __u32 log2_bucket(__u32 v)
{
    __u32 b = 0;
    if (v >= (1u << 16)) { v >>= 16; b = 16; }
    if (v >= (1u << 8)) { v >>= 8; b += 8; }
    return b + log2_byte[v & 0xff];
}

// Count the values `v` of a hop in this CPU's counters of its switch block `block`.
static __always_inline void hist_add(const struct int_cfg *cfg, __u32 cpu, __u32 block,
                                     const __u32 *v)
{
    if (block >= cfg->blocks)
        return;
    __u32 i = cpu * cfg->blocks + block;
    struct hist_block *hb = bpf_map_lookup_elem(&int_hist, &i);
    if (!hb)
        return;
    for (__u32 m = 0; m < METRICS; m++) {
        __u32 b = log2_bucket(v[m]);
        if (b < BUCKETS)
            *(volatile __u64 *)&hb->c[m][b] += 1;
    }
}

SEC("xdp")
int int_xdp(struct xdp_md *ctx)
{
    void *data = (void *)(long)ctx->data;
    void *end = (void *)(long)ctx->data_end;
    __u32 zero = 0;
    struct int_cfg *cfg = bpf_map_lookup_elem(&int_cfg, &zero);
    if (!cfg || !cfg->enabled)
        return count(C_PASS_OTHER, XDP_PASS);

    struct ethhdr *eth = data;
    if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
        return count(C_PASS_OTHER, XDP_PASS);
    struct iphdr *ip = (void *)(eth + 1);
    if ((void *)(ip + 1) > end || ip->ihl < 5 || ip->protocol != IPPROTO_UDP)
        return count(C_PASS_OTHER, XDP_PASS);
    if (ip->frag_off & bpf_htons(0x3fff))
        return count(C_PASS_FRAGMENT, XDP_PASS);
    if (ip->ihl != 5)
        return count(C_PASS_IP_OPTIONS, XDP_PASS);
    struct udphdr *udp = (void *)(ip + 1);
    if ((void *)(udp + 1) > end || udp->dest != bpf_htons(cfg->port))
        return count(C_PASS_OTHER, XDP_PASS);
    // Trust before work, as in the sink: a source outside [sink] allow is dropped unparsed.
    if (!allowed_v4(ip->saddr))
        return count(C_SOURCE_NOT_ALLOWED, XDP_DROP);

    // The fixed part: TR group and individual headers, the inner Ethernet, IPv4 and UDP
    // headers, the INT shim and MD header.
    __u8 *p = (void *)(udp + 1);
    const __u32 fixed = TR_HDR + INNER_ETH + INNER_IP + 8 + SHIM + MD_HDR;
    if ((void *)(p + fixed) > end)
        return up(ctx, cfg, C_PASS_SHAPE);
    // Version 2; one individual report, RepType 0 (inner only), InType 3 (Ethernet), no
    // metadata, not dropped (D clear): taking the rest of the datagram (Report Length 0xFF) or
    // exactly it.
    __u32 payload = (__u32)((long)end - (long)p);
    if ((p[0] >> 4) != 2 || p[8] != 0x03 || p[10] != 0 || (p[11] & 0x80))
        return up(ctx, cfg, C_PASS_SHAPE);
    if (p[9] != 0xff && (__u32)p[9] * 4 + TR_HDR != payload)
        return up(ctx, cfg, C_PASS_SHAPE);
    __u8 *ie = p + TR_HDR;
    if (ie[12] != 0x08 || ie[13] != 0x00)
        return up(ctx, cfg, C_PASS_SHAPE);
    __u8 *ii = ie + INNER_ETH;
    if (ii[0] != 0x45 || ii[9] != IPPROTO_UDP)
        return up(ctx, cfg, C_PASS_SHAPE);
    __u8 *iu = ii + INNER_IP;
    if (((__u32)iu[2] << 8 | iu[3]) != cfg->int_port)
        return up(ctx, cfg, C_PASS_SHAPE);
    __u8 *shim = iu + 8;
    // INT v2.1 shim: Type 1 (INT-MD), NPT 1 (the original UDP destination port follows).
    if ((shim[0] >> 4) != 1 || ((shim[0] >> 2) & 3) != 1)
        return up(ctx, cfg, C_PASS_SHAPE);
    __u8 *md = shim + SHIM;
    if ((md[0] >> 4) != 2 || (md[2] & 0x1f) != HOP_WORDS ||
        (((__u32)md[4] << 8) | md[5]) != cfg->instructions)
        return up(ctx, cfg, C_PASS_SHAPE);
    __u32 words = shim[1];
    if (words < MD_HDR / 4 || (words - MD_HDR / 4) % HOP_WORDS)
        return up(ctx, cfg, C_PASS_SHAPE);
    __u32 hops = (words - MD_HDR / 4) / HOP_WORDS;
    if (hops < 1 || hops > MAX_HOPS)
        return up(ctx, cfg, C_PASS_SHAPE);

    struct flow_key key = {};
    __builtin_memcpy(&key.k[0], ii + 12, 8);  // source, destination
    key.k[8] = iu[0];                          // source port
    key.k[9] = iu[1];
    key.k[10] = shim[2];                       // the original destination port (NPT 1)
    key.k[11] = shim[3];
    key.k[12] = IPPROTO_UDP;
    struct known *kn = bpf_map_lookup_elem(&int_known, &key);
    if (!kn)
        return up(ctx, cfg, C_PASS_UNKNOWN);
    if (kn->hops != hops)
        return up(ctx, cfg, C_PASS_PATH);

    // The stack, newest hop first: entry j is hop hops-1-j. Check every hop before counting any.
    __u8 *st = md + MD_HDR;
    __u32 v[MAX_HOPS][METRICS] = {};
    __u64 path = 0;
    for (__u32 j = 0; j < MAX_HOPS; j++) {
        if (j >= hops)
            break;
        __u8 *w = st + j * HOP_WORDS * 4;
        if ((void *)(w + HOP_WORDS * 4) > end)
            return up(ctx, cfg, C_PASS_SHAPE);
        __u32 h = hops - 1 - j;
        if (h >= MAX_HOPS)
            return up(ctx, cfg, C_PASS_SHAPE);
        if (be32(w) != kn->node[h])
            return up(ctx, cfg, C_PASS_PATH);
        __u32 lat = be32(w + 4), q = be32(w + 8) & 0xffffff, u = be32(w + 12);
        if (lat > cfg->th_latency || q > cfg->th_queue || u > cfg->th_util)
            return up(ctx, cfg, C_PASS_EVENT);
        v[h][0] = lat;
        v[h][1] = q;
        v[h][2] = u;
        path += lat;
    }
    if (path > cfg->th_path)
        return up(ctx, cfg, C_PASS_EVENT);

    __u32 slot = kn->slot;
    if (slot >= cfg->slots)
        return up(ctx, cfg, C_PASS_UNKNOWN);
    // This CPU's histogram part (the loader counts every possible CPU: a CPU beyond them would
    // be a kernel's, and its reports go to the sink, which counts them).
    __u32 cpu = bpf_get_smp_processor_id();
    if (cpu >= cfg->cpus)
        return up(ctx, cfg, C_PASS_SHAPE);
    struct flow_agg *a = bpf_map_lookup_elem(&int_flows, &slot);
    if (!a)
        return up(ctx, cfg, C_PASS_UNKNOWN);
    // The latest values are the newest report's by the reporter's numbering, as the sink
    // orders a flow's reports (dta_int::cache::seq_newer): a report this program takes after a
    // later one (reordered on the way) counts, and leaves them.
    __u32 seq = be32(p) & SEQ_MASK;
    __u32 behind = (*(volatile __u32 *)&a->seq - seq) & SEQ_MASK;
    int newest = behind == 0 || behind > REORDER_WINDOW;
    for (__u32 h = 0; h < MAX_HOPS; h++) {
        if (h >= hops)
            break;
        for (__u32 m = 0; m < METRICS; m++) {
            *(volatile __u64 *)&a->sum[h][m] += v[h][m];
            if (newest)
                *(volatile __u32 *)&a->last[h][m] = v[h][m];
        }
        hist_add(cfg, cpu, kn->block[h], v[h]);
    }
    // The coarse clock (CLOCK_MONOTONIC_COARSE, a tick): a fraction of the fine clock's cost,
    // and a flow's last report time serves its aging and its record, not ordering (the sequence
    // number orders it).
    *(volatile __u64 *)&a->last_ns = bpf_ktime_get_coarse_ns();
    if (newest)
        *(volatile __u32 *)&a->seq = seq;
    // The count last (the stores above are volatile, kept in program order): a drain that
    // sees it sees the report's sums (or the next drain does). A fetching atomic add, a full
    // barrier (the kernel's BPF memory model), orders the count before the read of the slot's
    // changed bit: either this report finds the bit the sink cleared and sets it again, or the
    // sink, reading the slot after clearing it, sees this count (the store-buffer case of two
    // CPUs, each writing one word and reading the other's, needs a barrier on both sides).
    __u64 before = __sync_fetch_and_add(&a->packets, 1);
    barrier_var(before);  // used: clang emits the fetching form (a relaxed add without it)
    __u32 word = slot / 64;
    __u64 bit = 1ULL << (slot % 64);
    __u64 *changed = bpf_map_lookup_elem(&int_changed, &word);
    // Set only when clear: a locked write per slot and drain, not per report.
    if (changed && !(*(volatile __u64 *)changed & bit))
        __sync_fetch_and_or(changed, bit);
    return count(C_FAST, XDP_DROP);
}

char LICENSE[] SEC("license") = "GPL";
