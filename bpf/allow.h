// SPDX-License-Identifier: Apache-2.0
// The source allow-list of the XDP programs: the same compiled policy as the userspace
// translator's and INT sink's (`[translator] allow`, `[sink] allow`; crates/node/dta-node/src/policy.rs),
// filled by the loader (crates/engines/dta-xdp/src/allow.rs) into an LPM trie, looked up before any
// parsing. A key is a family byte (4 or 6) then the address; a prefix of length L is the trie
// prefix 8 + L, so an IPv4 prefix never matches an IPv6 source and the other way round, as in
// dta_wire::prefix. An IPv4-mapped IPv6 source (::ffff:a.b.c.d) is looked up as the IPv4
// address it carries, as dta_wire::prefix canonicalises it.
#ifndef DTA_ALLOW_H
#define DTA_ALLOW_H

#ifndef DTA_MAX_PREFIXES
#error "build with crates/engines/dta-xdp/build.rs: it defines DTA_MAX_PREFIXES"
#endif

struct src_key {
    __u32 prefixlen; // 8 (the family byte) + the prefix length
    __u8 family;     // 4 or 6
    __u8 addr[16];   // IPv4: the first 4 bytes
    __u8 pad[3];     // zero: never part of a prefix
};

struct {
    __uint(type, BPF_MAP_TYPE_LPM_TRIE);
    __uint(max_entries, DTA_MAX_PREFIXES);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __type(key, struct src_key);
    __type(value, __u8);
} dta_allow SEC(".maps");

// Whether an IPv4 source (network order) is in the allow-list.
static __always_inline int allowed_v4(__u32 saddr)
{
    struct src_key k = {};
    k.prefixlen = 8 + 32;
    k.family = 4;
    __builtin_memcpy(k.addr, &saddr, 4);
    return bpf_map_lookup_elem(&dta_allow, &k) != 0;
}

// Whether an IPv6 source is in the allow-list (IPv4-mapped: as IPv4).
static __always_inline int allowed_v6(const __u8 *saddr)
{
    struct src_key k = {};
    int mapped = 1;
    for (int i = 0; i < 10; i++)
        if (saddr[i])
            mapped = 0;
    if (mapped && saddr[10] == 0xff && saddr[11] == 0xff) {
        k.prefixlen = 8 + 32;
        k.family = 4;
        __builtin_memcpy(k.addr, saddr + 12, 4);
    } else {
        k.prefixlen = 8 + 128;
        k.family = 6;
        __builtin_memcpy(k.addr, saddr, 16);
    }
    return bpf_map_lookup_elem(&dta_allow, &k) != 0;
}

#endif
