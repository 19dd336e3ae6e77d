// SPDX-License-Identifier: Apache-2.0
// Kernel-bypass receive: the XDP half of the AF_XDP path (crates/engines/dta-xdp/src/xsk.rs,
// docs/xdp.md "AF_XDP receive"). A UDP datagram (IPv4 or IPv6, untagged Ethernet) to the one
// port the translator or the INT sink listens on is checked against the source allow-list
// before anything else is read (the same compiled policy as every other mode: allow.h), then
// redirected to the AF_XDP socket of its receive queue (`xsks`, one socket per queue the
// userspace side bound), where the translator or sink parses it in place from the UMEM.
// Everything else, and a datagram of a queue without a socket, goes up the stack (XDP_PASS),
// so the ordinary socket still receives what the redirect does not take. So do the datagrams
// userspace does not parse in place: an IPv4 header with options and IPv4 fragments (the stack
// reassembles them); each is counted by reason, none is dropped.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "allow.h"

#define MAX_QUEUES 64 // crates/engines/dta-xdp/src/xsk.rs MAX_QUEUES

// Counters (per CPU); crates/engines/dta-xdp/src/xsk.rs `XskProgramStats` mirrors this list.
enum {
    C_PACKETS = 0,        // frames seen
    C_REDIRECTED,         // datagrams to the port handed to a queue's socket
    C_PASS_OTHER,         // not a UDP datagram to the port: up the stack
    C_SOURCE_NOT_ALLOWED, // from a source outside the allow-list: dropped unparsed
    C_PASS_NO_SOCKET,     // to the port, but its queue has no socket: up the stack
    C_PASS_IP_OPTIONS,    // UDP over IPv4 with options: up the stack (RFC 791 §3.1)
    C_PASS_FRAGMENT,      // an IPv4 fragment: up the stack, which reassembles it
    C_COUNT
};

struct xsk_cfg {
    __u32 port; // UDP destination port (host order)
};

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct xsk_cfg);
} xsk_cfg SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_XSKMAP);
    __uint(max_entries, MAX_QUEUES);
    __type(key, __u32);
    __type(value, __u32);
} xsks SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, C_COUNT);
    __type(key, __u32);
    __type(value, __u64);
} xsk_stats SEC(".maps");

static __always_inline void count(__u32 c)
{
    __u64 *v = bpf_map_lookup_elem(&xsk_stats, &c);
    if (v)
        *v += 1;
}

SEC("xdp")
int xsk_redirect(struct xdp_md *ctx)
{
    void *data = (void *)(long)ctx->data;
    void *end = (void *)(long)ctx->data_end;
    struct ethhdr *eth = data;
    struct udphdr *udp;
    __u32 zero = 0;
    int ok;

    count(C_PACKETS);
    struct xsk_cfg *cfg = bpf_map_lookup_elem(&xsk_cfg, &zero);
    if (!cfg || (void *)(eth + 1) > end)
        goto pass;
    if (eth->h_proto == bpf_htons(ETH_P_IP)) {
        struct iphdr *ip = (void *)(eth + 1);
        if ((void *)(ip + 1) > end || ip->protocol != IPPROTO_UDP || ip->ihl < 5)
            goto pass;
        // MF set or a fragment offset: only the first fragment holds the UDP header, and only
        // the whole datagram is a report.
        if (ip->frag_off & bpf_htons(0x3fff)) {
            count(C_PASS_FRAGMENT);
            return XDP_PASS;
        }
        if (ip->ihl != 5) {
            count(C_PASS_IP_OPTIONS);
            return XDP_PASS;
        }
        udp = (void *)(ip + 1);
        if ((void *)(udp + 1) > end || udp->dest != bpf_htons(cfg->port))
            goto pass;
        ok = allowed_v4(ip->saddr);
    } else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
        struct ipv6hdr *ip6 = (void *)(eth + 1);
        if ((void *)(ip6 + 1) > end || ip6->nexthdr != IPPROTO_UDP)
            goto pass;
        udp = (void *)(ip6 + 1);
        if ((void *)(udp + 1) > end || udp->dest != bpf_htons(cfg->port))
            goto pass;
        ok = allowed_v6(ip6->saddr.in6_u.u6_addr8);
    } else {
        goto pass;
    }
    if (!ok) {
        count(C_SOURCE_NOT_ALLOWED);
        return XDP_DROP;
    }
    int r = bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
    count(r == XDP_REDIRECT ? C_REDIRECTED : C_PASS_NO_SOCKET);
    return r;
pass:
    count(C_PASS_OTHER);
    return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
