// SPDX-License-Identifier: Apache-2.0
// Size: one XDP program object: the parser and the three primitives' writes share the
// verifier-checked bounds and the maps, and the loader attaches one program.
// The DTA XDP translator ([DTA §4], [DTA §5.2]): parses DTA reports in the driver and
// applies Key-Write, Key-Increment and Append straight into BPF_F_MMAPABLE array maps that ARE
// the stores (docs/regions.md: a 4096-byte header page, then the data area; one u64 per array
// element, so data-area byte offset o is element (4096 + o) / 8). Anything it cannot handle is
// passed up the stack (XDP_PASS) to the userspace translator, which counts every error exactly.
// docs/xdp.md describes the design; crates/engines/dta-xdp loads this program.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "allow.h"

#define NSTORES 6          // store slots st0..st5 (Key-Write / Key-Increment / Append)
#define MAX_PAYLOAD 1024   // larger UDP payloads go to userspace
#define BUF_MASK 2047      // scratch buffer index mask (buffer is 2048 + slack)
#define MAX_NATIVE 8       // reports per native datagram handled here; more -> XDP_PASS
#define HEADER_WORDS 512   // 4096-byte header page / 8

#define KIND_KW 1
#define KIND_AP 2
#define KIND_KI 3

// Stats counters (per CPU); crates/engines/dta-xdp/src/lib.rs `Counter` mirrors this list.
enum {
    C_PACKETS = 0,     // frames seen
    C_DATAGRAMS,       // DTA datagrams applied here and dropped (consumed)
    C_KEY_WRITE,       // reports applied, by primitive
    C_APPEND,
    C_KEY_INCREMENT,
    C_PASS_IMMEDIATE,  // a report flagged immediate: the userspace translator applies and
                       // announces it (the ring of push notifications is userspace's)
    C_PASS_OTHER,      // not UDP to the DTA port (or not IPv4/IPv6)
    C_PASS_RETRANS,    // retransmittable datagrams: sequence tracking is userspace's job
    C_PASS_UNHANDLED,  // a primitive / shape without an XDP store (Postcarding, Sketch-Merge, no_store,
                       // bad list), or a redundancy the routed store refuses
    C_PASS_MALFORMED,  // fails validation: userspace counts the exact reason
    C_PASS_TOO_BIG,    // payload > MAX_PAYLOAD or more than MAX_NATIVE reports
    C_DROP_MAP_ERROR,  // a store word out of the map's bounds (a configuration bug); dropped
    C_WORD_WRITES,     // 8-byte stores and fetch-adds performed
    C_RULE_DROPPED,    // reports a rule dropped (not applied; their datagram is consumed)
    C_SOURCE_NOT_ALLOWED, // datagrams from a source outside the allow-list: dropped unparsed
    C_PASS_FRAGMENT,   // an IPv4 fragment: up the stack, which reassembles it
    C_PASS_CONTROL,    // a reporter's hello (native kind 3): the userspace translator takes it
    C_COUNT
};

struct store_cfg {
    __u32 kind;         // 0 unused, 1 Key-Write, 2 Append, 3 Key-Increment
    __u32 hash;         // 0 prototype (CRC-32), 1 native (FNV-1a64 + fmix64), 2 xxh3 (XXH3-128)
    __u32 key_len;      // Key-Write / Key-Increment
    __u32 data_len;     // Key-Write data_len; Append entry_len
    __u32 slot_len;     // Key-Write slot_len
    __u32 lists;        // Append
    __u32 redundancy;   // the store's N: Key-Write reports use 1..=N, Key-Increment exactly N
    __u32 pad;
    __u64 count;        // Key-Write slots, Key-Increment counters, Append capacity (powers of two)
    __u64 rings_offset; // Append
    __u64 words;        // elements of the store's map (bounds)
};

struct global_cfg {
    __u32 enabled;
    __u32 proto_hdr_len; // prototype base header: 2 (short) or 3 (long)
    __u32 port;          // UDP destination port (40040)
    __u32 pad;
};

// A parsed report this program can apply.
struct job {
    __u32 store;
    __u32 kind;
    __u32 koff;  // key offset in the payload
    __u32 doff;  // data offset
    __u32 red;
    __u32 list;
    __u64 add;
    __u32 imm;
    // What the rules see of the report (docs/rules.md "What a rule sees"): the key at koff
    // (an Append's list id: 4 bytes), the data at voff.
    __u32 klen;
    __u32 voff;
    __u32 dlen;
};

struct scratch {
    struct job jobs[MAX_NATIVE];
    struct job derived; // a rule's Append entry, built at DERIVED_OFF
    __u32 rules_on;     // the rule set slot of this datagram + 1 (0: no rules)
    __u32 rules_n;      // rules in that set
    __u8 buf[BUF_MASK + 1 + 128];
    __u8 slot[128];
};

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, NSTORES);
    __type(key, __u32);
    __type(value, struct store_cfg);
} dta_cfg SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct global_cfg);
} dta_global SEC(".maps");

// zlib's CRC-32 table, filled by the loader (a table keeps the verifier's state count low).
struct crc_table {
    __u32 t[256];
};
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct crc_table);
} dta_crc SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, C_COUNT);
    __type(key, __u32);
    __type(value, __u64);
} dta_stats SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct scratch);
} dta_scratch SEC(".maps");

// Translator rules in the driver (docs/rules.md "In the XDP translator"): the simple
// match -> Append / drop rules, lowered by dta_translator::rules::Rule::lower_xdp. The bounds
// and the counter indices come from crates/engines/dta-translator/src/rules/limits.rs as -D defines
// (crates/engines/dta-xdp/build.rs); crates/engines/dta-xdp/src/rules.rs mirrors the structs.
#if !defined(DTA_MAX_RULES) || !defined(DTA_MAX_FIELDS) || !defined(RC_COUNT)
#error "build with crates/engines/dta-xdp/build.rs: it defines the rule bounds and counters"
#endif
#define DERIVED_OFF 1536 // a derived Append entry in the scratch buffer, past any payload

#define XR_DROP 1
#define XR_APPEND 2
#define XE_KEY 0
#define XE_KEY_VALUE 1
#define XE_VALUE 2

// A big-endian field of the report's data compared with a constant after a mask.
struct xr_field {
    __u64 value;
    __u64 mask;
    __u16 offset;
    __u8 width; // 0: the first 8 bytes of the data (all of it if shorter)
    __u8 op;    // 0 eq, 1 ne, 2 lt, 3 le, 4 gt, 5 ge
    __u32 pad;
};

struct xr_rule {
    __u32 prim;       // KIND_KW, KIND_AP, KIND_KI
    __u32 key_len;    // the matched store's key length; 0: any
    __u32 data_len;   // the matched store's data length; 0: any
    __u32 kmatch_len; // key bytes the match looks at (the key must be at least this long)
    __u64 kmask[2];   // key bytes 0..16 as little-endian words: key & mask == value
    __u64 kvalue[2];
    __u32 nfields;
    __u32 action;     // XR_DROP, XR_APPEND
    __u32 list;
    __u32 entry;      // XE_*
    __u32 entry_len;
    __u32 pad;
    struct xr_field value; // the tested value; its op and value are the rule's `when`
    struct xr_field fields[DTA_MAX_FIELDS];
};

struct xr_set {
    __u32 n;
    __u32 ap_slot; // the Append store's slot (append actions)
    __u64 generation;
    struct xr_rule r[DTA_MAX_RULES];
};

// Two generations: the loader fills the slot not in use, then flips dta_rules_on (one array
// write); a datagram reads dta_rules_on once, so each report runs under exactly one set.
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 2);
    __type(key, __u32);
    __type(value, struct xr_set);
} dta_rules SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, __u32); // 0: no rules; else the slot in use + 1
} dta_rules_on SEC(".maps");

// Per rule slot (generation slot * DTA_MAX_RULES + rule) the RuleCounter set: one lookup per
// matching rule.
struct rule_counts {
    __u64 c[RC_COUNT];
};
struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 2 * DTA_MAX_RULES);
    __type(key, __u32);
    __type(value, struct rule_counts);
} dta_rule_stats SEC(".maps");

// The stores: max_entries is set by the loader to the region's words (header page + data area).
#define STORE_MAP(name)                                                                            \
    struct {                                                                                       \
        __uint(type, BPF_MAP_TYPE_ARRAY);                                                          \
        __uint(max_entries, 1);                                                                    \
        __uint(map_flags, BPF_F_MMAPABLE);                                                         \
        __type(key, __u32);                                                                        \
        __type(value, __u64);                                                                      \
    } name SEC(".maps")
STORE_MAP(dta_st0);
STORE_MAP(dta_st1);
STORE_MAP(dta_st2);
STORE_MAP(dta_st3);
STORE_MAP(dta_st4);
STORE_MAP(dta_st5);

static __always_inline void count(__u32 c, __u64 n)
{
    __u64 *v = bpf_map_lookup_elem(&dta_stats, &c);
    if (v)
        *v += n;
}

// The u64 at data-area byte offset `off` (8-aligned) of the store in map `m`, or NULL out of
// bounds. `m` is a constant at every call site (one global function per store slot).
static __always_inline __u64 *store_word(void *m, __u64 off)
{
    __u64 e = (off >> 3) + HEADER_WORDS;
    if (e > 0xffffffffULL)
        return 0;
    __u32 k = (__u32)e;
    return bpf_map_lookup_elem(m, &k);
}

static __always_inline __u8 B(struct scratch *sc, __u32 i)
{
    return sc->buf[i & BUF_MASK];
}

// zlib's CRC-32, one table step per byte (architecture.md "Hashing"; the prototype's scheme).
static __always_inline __u32 crc_byte(struct crc_table *t, __u32 crc, __u8 b)
{
    return t->t[(crc ^ b) & 0xff] ^ (crc >> 8);
}

static __always_inline __u64 fmix64(__u64 k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return k;
}

// A key's hashes (architecture.md "Hashing"): the CRC state after key_le and the key checksum
// (prototype), the FNV-1a64 of the key (native), or the two halves of its XXH3-128 (xxh3).
struct keyhash {
    struct crc_table *t;
    __u32 crc_state; // prototype: CRC register after key_le, before the copy byte n
    __u32 checksum;  // prototype: crc32(key_le), the Key-Write slot check
    __u64 h;         // native: fnv1a64(key); xxh3: the low half
    __u64 hi;        // xxh3: the high half (also the Key-Write check's seed)
};

// XXH3-128 of keys of 1..16 bytes, seed 0 and the default secret (xxHash's XXH3_len_1to3_128b,
// XXH3_len_4to8_128b and XXH3_len_9to16_128b; the secret's words they read are folded into the
// constants below). BPF has no 64x64->128 multiply: mul128 builds it from 32-bit halves.
#define XXH_PRIME32_2 0x85EBCA77U
#define XXH_PRIME64_1 0x9E3779B185EBCA87ULL
#define XXH_PRIME64_2 0xC2B2AE3D27D4EB4FULL
#define XXH_PRIME64_3 0x165667B19E3779F9ULL
#define XXH_PRIME_MX2 0x9FB21C651E98DF25ULL
// secret[0..4] ^ secret[4..8], secret[8..12] ^ secret[12..16] (1..3 bytes)
#define XXH_FLIP_1TO3_LO (0x396cfeb8U ^ 0xbe4ba423U)
#define XXH_FLIP_1TO3_HI (0x2c81017cU ^ 0x1cad21f7U)
// secret[16..24] ^ secret[24..32] (4..8 bytes)
#define XXH_FLIP_4TO8 (0xdb979083e96dd4deULL ^ 0x1f67b3b7a4a44072ULL)
// secret[32..40] ^ secret[40..48], secret[48..56] ^ secret[56..64] (9..16 bytes)
#define XXH_FLIP_9TO16_LO (0x78e5c0cc4ee679cbULL ^ 0x2172ffcc7dd05a82ULL)
#define XXH_FLIP_9TO16_HI (0x8e2443f7744608b8ULL ^ 0x4c263a81e69035e0ULL)

static __always_inline void mul128(__u64 a, __u64 b, __u64 *lo, __u64 *hi)
{
    __u64 al = a & 0xffffffffULL, ah = a >> 32, bl = b & 0xffffffffULL, bh = b >> 32;
    __u64 ll = al * bl, lh = al * bh, hl = ah * bl, hh = ah * bh;
    __u64 cross = (ll >> 32) + (hl & 0xffffffffULL) + lh;
    *hi = hh + (hl >> 32) + (cross >> 32);
    *lo = (cross << 32) | (ll & 0xffffffffULL);
}

static __always_inline __u64 xxh64_avalanche(__u64 h)
{
    h ^= h >> 33;
    h *= XXH_PRIME64_2;
    h ^= h >> 29;
    h *= XXH_PRIME64_3;
    h ^= h >> 32;
    return h;
}

static __always_inline __u64 xxh3_avalanche(__u64 h)
{
    h ^= h >> 37;
    h *= 0x165667919E3779F9ULL;
    h ^= h >> 32;
    return h;
}

static __always_inline __u64 bswap64(__u64 x)
{
    return __builtin_bswap64(x);
}

// Little-endian u32 / u64 of the key bytes at koff + at (bounded reads of the scratch buffer).
static __always_inline __u32 key_le32(struct scratch *sc, __u32 koff, __u32 at);
static __always_inline __u64 key_le64(struct scratch *sc, __u32 koff, __u32 at);

static __always_inline void xxh3_128(struct scratch *sc, __u32 koff, __u32 klen, __u64 *lo,
                                     __u64 *hi)
{
    if (klen > 8) {
        __u64 in_lo = key_le64(sc, koff, 0), in_hi = key_le64(sc, koff, klen - 8);
        __u64 ml, mh;
        mul128(in_lo ^ in_hi ^ XXH_FLIP_9TO16_LO, XXH_PRIME64_1, &ml, &mh);
        ml += (__u64)(klen - 1) << 54;
        in_hi ^= XXH_FLIP_9TO16_HI;
        mh += in_hi + (__u64)(__u32)in_hi * (__u64)(XXH_PRIME32_2 - 1);
        ml ^= bswap64(mh);
        __u64 rl, rh;
        mul128(ml, XXH_PRIME64_2, &rl, &rh);
        rh += mh * XXH_PRIME64_2;
        *lo = xxh3_avalanche(rl);
        *hi = xxh3_avalanche(rh);
    } else if (klen >= 4) {
        __u64 in64 = (__u64)key_le32(sc, koff, 0) + ((__u64)key_le32(sc, koff, klen - 4) << 32);
        __u64 ml, mh;
        mul128(in64 ^ XXH_FLIP_4TO8, XXH_PRIME64_1 + ((__u64)klen << 2), &ml, &mh);
        mh += ml << 1;
        ml ^= mh >> 3;
        ml ^= ml >> 35;
        ml *= XXH_PRIME_MX2;
        ml ^= ml >> 28;
        *lo = ml;
        *hi = xxh3_avalanche(mh);
    } else {
        __u32 c1 = B(sc, koff), c2 = B(sc, koff + (klen >> 1)), c3 = B(sc, koff + klen - 1);
        __u32 cl = (c1 << 16) | (c2 << 24) | c3 | (klen << 8);
        __u32 sw = __builtin_bswap32(cl);
        __u32 ch = (sw << 13) | (sw >> 19);
        *lo = xxh64_avalanche((__u64)cl ^ (__u64)(__u32)XXH_FLIP_1TO3_LO);
        *hi = xxh64_avalanche((__u64)ch ^ (__u64)(__u32)XXH_FLIP_1TO3_HI);
    }
}

// Multiplier separating the native index functions (dta_store::hash::NATIVE_SEED); also the
// multiply of the native slot check's per-word step.
#define NATIVE_SEED 0x9E3779B97F4A7C15ULL
// Salt of the native slot check's per-key seed (dta_store::hash::SLOT_CHECK_SALT).
#define SLOT_CHECK_SALT 0x165667B19E3779F9ULL

static __always_inline void hash_key(struct scratch *sc, __u32 koff, __u32 klen, __u32 scheme,
                                     struct keyhash *kh)
{
    struct crc_table *t = kh->t;
    if (scheme == 0) {
        // prototype: key_le = the 4 wire bytes reversed; slot(key, n) = crc32(key_le ‖ n).
        __u32 c = 0xffffffffU;
        c = crc_byte(t, c, B(sc, koff + 3));
        c = crc_byte(t, c, B(sc, koff + 2));
        c = crc_byte(t, c, B(sc, koff + 1));
        c = crc_byte(t, c, B(sc, koff + 0));
        kh->crc_state = c;
        kh->checksum = ~c;
        kh->h = 0;
    } else if (scheme == 2) {
        xxh3_128(sc, koff, klen, &kh->h, &kh->hi);
        kh->checksum = 0;
        kh->crc_state = 0;
    } else {
        __u64 h = 0xcbf29ce484222325ULL;
        for (__u32 i = 0; i < 16; i++) {
            if (i >= klen)
                break;
            h = (h ^ B(sc, koff + i)) * 0x100000001b3ULL;
        }
        kh->h = h;
        kh->hi = 0;
        kh->checksum = 0;
        kh->crc_state = 0;
    }
}

static __always_inline __u32 key_le32(struct scratch *sc, __u32 koff, __u32 at)
{
    return (__u32)B(sc, koff + at) | ((__u32)B(sc, koff + at + 1) << 8) |
           ((__u32)B(sc, koff + at + 2) << 16) | ((__u32)B(sc, koff + at + 3) << 24);
}

static __always_inline __u64 key_le64(struct scratch *sc, __u32 koff, __u32 at)
{
    return (__u64)key_le32(sc, koff, at) | ((__u64)key_le32(sc, koff, at + 4) << 32);
}

// index(scheme, key, n, count) — [DTA A.1] Algorithm 1, h0(n, K) mod Buflen.
static __always_inline __u64 key_index(struct keyhash *kh, __u32 scheme, __u32 n, __u64 count)
{
    if (scheme == 0)
        return (__u64)(~crc_byte(kh->t, kh->crc_state, (__u8)n)) & (count - 1);
    if (scheme == 2)
        return (kh->h + (__u64)n * kh->hi) & (count - 1);
    return fmix64(kh->h ^ (NATIVE_SEED * (__u64)(n + 1))) & (count - 1);
}

// The Key-Write slot check over key AND data (regions.md §2.1 "Native check";
// dta_store::key_write's `native_check`): from the key's seed (native: fmix64(fnv1a64(key) ^
// SLOT_CHECK_SALT); xxh3: the high half of its XXH3-128), each 8-byte LE word of the slot in
// sc->slot (check field and padding zero) folded in by h = rotl64((h ^ w) * NATIVE_SEED, 29),
// finalised by fmix64 and folded to 32 bits.
static __always_inline __u32 native_check(struct scratch *sc, struct store_cfg *c, __u64 seed)
{
    __u64 h = seed;
#pragma clang loop unroll(disable)
    for (__u32 w = 0; w < 9; w++) {
        if (w * 8 >= *(volatile __u32 *)&c->slot_len)
            break;
        h = (h ^ *(__u64 *)&sc->slot[w * 8]) * NATIVE_SEED;
        h = (h << 29) | (h >> 35);
    }
    h = fmix64(h);
    return (__u32)(h ^ (h >> 32));
}

// Key-Write: N slot writes of [check LE][data][zero pad] ([DTA §4], [DTA A.1] Algorithm 1,
// CraftWrite; regions.md §2.1). The check is crc32(key_le) (prototype) or the native check over
// key and data. Each 8-byte word is one store, as the userspace sink does.
static __always_inline int apply_key_write(struct scratch *sc, struct store_cfg *c, void *s,
                                           __u32 koff, __u32 doff, __u32 red)
{
    struct keyhash kh;
    __u32 zero = 0;
    kh.t = bpf_map_lookup_elem(&dta_crc, &zero);
    if (!kh.t)
        return -1;
#pragma clang loop unroll(disable)
    for (__u32 i = 0; i < 64; i++)
        sc->slot[4 + i] = B(sc, doff + i);
    __u32 dlen = c->data_len;
    __u32 slen = *(volatile __u32 *)&c->slot_len;
    hash_key(sc, koff, c->key_len, c->hash, &kh);
    // Zero the pad after the data (at most 7 bytes up to slot_len) and the check field, then
    // fill in the check (little-endian host: x86-64, arm64).
    for (__u32 i = 0; i < 8; i++)
        sc->slot[(4 + dlen + i) & 127] = 0;
    *(__u32 *)&sc->slot[0] = 0;
    *(__u32 *)&sc->slot[0] =
        c->hash == 0   ? kh.checksum
        : c->hash == 2 ? native_check(sc, c, kh.hi)
                       : native_check(sc, c, fmix64(kh.h ^ SLOT_CHECK_SALT));
    for (__u32 n = 0; n < 4; n++) {
        if (n >= red)
            break;
        __u64 base = key_index(&kh, c->hash, n, c->count) * slen;
#pragma clang loop unroll(disable)
        for (__u32 w = 0; w < 9; w++) {
            // Re-read the bound: a fresh scalar, so the verifier's paths out of this loop merge
            // instead of multiplying (one per exit point per copy).
            if (w * 8 >= *(volatile __u32 *)&c->slot_len)
                break;
            __u64 *p = store_word(s, base + w * 8);
            if (!p)
                return -1;
            *p = *(__u64 *)&sc->slot[w * 8];
            count(C_WORD_WRITES, 1);
        }
    }
    return 0;
}

// Key-Increment: N FETCH_ADDs of the counter ([DTA A.4] Algorithm 5).
static __always_inline int apply_key_increment(struct scratch *sc, struct store_cfg *c, void *s,
                                               __u32 koff, __u64 add, __u32 red)
{
    struct keyhash kh;
    __u32 zero = 0;
    kh.t = bpf_map_lookup_elem(&dta_crc, &zero);
    if (!kh.t)
        return -1;
    hash_key(sc, koff, c->key_len, c->hash, &kh);
    for (__u32 n = 0; n < 4; n++) {
        if (n >= red)
            break;
        __u64 *p = store_word(s, key_index(&kh, c->hash, n, c->count) * 8);
        if (!p)
            return -1;
        __sync_fetch_and_add(p, add);
        count(C_WORD_WRITES, 1);
    }
    return 0;
}

// Append, one entry at a time ([DTA A.3]; regions.md §2.4): reserve entry i with a
// FETCH_ADD on the list's head, then write the entry at i mod capacity. The XDP path does not
// batch: see docs/xdp.md for what readers see while an entry is in flight.
static __always_inline int apply_append(struct scratch *sc, struct store_cfg *c, void *s,
                                        __u32 list, __u32 doff)
{
    __u64 *head = store_word(s, (__u64)list * 8);
    if (!head)
        return -1;
    __u64 i = __sync_fetch_and_add(head, 1);
    __u32 e = c->data_len;
    __u64 off = c->rings_offset + ((__u64)list * c->count + (i & (c->count - 1))) * e;
    count(C_WORD_WRITES, 1);
    if ((e & 7) == 0 && (off & 7) == 0) {
#pragma clang loop unroll(disable)
        for (__u32 w = 0; w < 8; w++) {
            if (w * 8 >= *(volatile __u32 *)&c->data_len)
                break;
            __u64 *p = store_word(s, off + w * 8);
            if (!p)
                return -1;
            __u64 v = 0;
#pragma unroll
            for (__u32 j = 0; j < 8; j++)
                v |= (__u64)B(sc, doff + w * 8 + j) << (8 * j);
            *p = v;
            count(C_WORD_WRITES, 1);
        }
        return 0;
    }
    // Unaligned entries (E not a multiple of 8): byte stores into the words they fall in.
    for (__u32 j = 0; j < 64; j++) {
        if (j >= *(volatile __u32 *)&c->data_len)
            break;
        __u64 o = off + j;
        __u64 *p = store_word(s, o & ~7ULL);
        if (!p)
            return -1;
        ((__u8 *)p)[o & 7] = B(sc, doff + j);
    }
    return 0;
}

// The first store slot of `kind` matching the shape (the engine's routing: first store in order).
static __always_inline int route(__u32 kind, __u32 klen, __u32 dlen, struct store_cfg **out)
{
#pragma unroll
    for (__u32 s = 0; s < NSTORES; s++) {
        __u32 k = s;
        struct store_cfg *c = bpf_map_lookup_elem(&dta_cfg, &k);
        if (!c || c->kind != kind)
            continue;
        if (kind == KIND_KW && (c->key_len != klen || c->data_len != dlen))
            continue;
        if (kind == KIND_KI && c->key_len != klen)
            continue;
        if (kind == KIND_AP && c->data_len != dlen)
            continue; // the engine counts bad_data_len: let userspace do it
        *out = c;
        return (int)s;
    }
    return -1;
}

static __always_inline __u32 be32(struct scratch *sc, __u32 o)
{
    return ((__u32)B(sc, o) << 24) | ((__u32)B(sc, o + 1) << 16) | ((__u32)B(sc, o + 2) << 8) |
           (__u32)B(sc, o + 3);
}

static __always_inline __u64 be64(struct scratch *sc, __u32 o)
{
    return ((__u64)be32(sc, o) << 32) | (__u64)be32(sc, o + 4);
}



// Returns 1 and fills `j` if the report is one we apply, 0 if it must go to userspace.
// A global (separately verified) function: `opf` = opcode | redundancy << 8 | immediate << 16.
__noinline int dta_plan(__u32 opf, __u32 klen, __u32 dlen, __u32 koff, struct job *j)
{
    struct store_cfg *c = 0;
    int s;
    __u32 zero = 0;
    __u32 op = opf & 0xff, red = (opf >> 8) & 0xff, imm = (opf >> 16) & 1;
    struct scratch *sc = bpf_map_lookup_elem(&dta_scratch, &zero);
    if (!sc || !j)
        return 0;
    j->imm = imm;
    j->red = red;
    j->koff = koff;
    j->kind = op;
    // Redundancy is checked against the routed store only (the engine does not try the next
    // store): a Key-Write N above the store's is `bad_redundancy`, a Key-Increment N other than
    // the store's `redundancy_mismatch`; both are left to userspace to count.
    if (op == KIND_KW) {
        s = route(KIND_KW, klen, dlen, &c);
        if (s < 0 || !c)
            return 0;
        if (red < 1 || red > c->redundancy)
            return 0;
        j->doff = koff + klen;
        j->klen = klen;
        j->voff = koff + klen;
        j->dlen = dlen;
    } else if (op == KIND_KI) {
        s = route(KIND_KI, klen, 8, &c);
        if (s < 0 || !c)
            return 0;
        if (red != c->redundancy)
            return 0;
        j->add = be64(sc, koff + klen);
        j->klen = klen;
        j->voff = koff + klen;
        j->dlen = 8;
    } else if (op == KIND_AP) {
        s = route(KIND_AP, 0, dlen, &c);
        if (s < 0 || !c)
            return 0;
        j->list = be32(sc, koff);
        if (j->list >= c->lists)
            return 0; // bad_list_id: counted by userspace
        j->doff = koff + 4;
        j->klen = 4;
        j->voff = koff + 4;
        j->dlen = dlen;
    } else {
        return 0;
    }
    j->store = (__u32)s;
    return 1;
}

// Global (separately verified) functions, one per primitive and store slot, each with its
// store map a constant: apply one planned report.
#define APPLY_FN(fname, map, body)                                                                 \
    __noinline int fname(struct job *j)                                                            \
    {                                                                                              \
        __u32 zero = 0;                                                                            \
        struct scratch *sc = bpf_map_lookup_elem(&dta_scratch, &zero);                             \
        if (!sc || !j)                                                                             \
            return -1;                                                                             \
        __u32 k = j->store;                                                                        \
        struct store_cfg *c = bpf_map_lookup_elem(&dta_cfg, &k);                                   \
        if (!c)                                                                                    \
            return -1;                                                                             \
        void *m = &map;                                                                            \
        body;                                                                                      \
    }
#define APPLY_SLOT(n)                                                                              \
    APPLY_FN(dta_kw##n, dta_st##n, count(C_KEY_WRITE, 1);                                          \
             return apply_key_write(sc, c, m, j->koff, j->doff, j->red))                          \
    APPLY_FN(dta_ki##n, dta_st##n, count(C_KEY_INCREMENT, 1);                                      \
             return apply_key_increment(sc, c, m, j->koff, j->add, j->red))                       \
    APPLY_FN(dta_ap##n, dta_st##n, count(C_APPEND, 1);                                             \
             return apply_append(sc, c, m, j->list, j->doff))
APPLY_SLOT(0)
APPLY_SLOT(1)
APPLY_SLOT(2)
APPLY_SLOT(3)
APPLY_SLOT(4)
APPLY_SLOT(5)

#define DISPATCH(n)                                                                                \
    case n:                                                                                        \
        if (j->kind == KIND_KW)                                                                    \
            return dta_kw##n(j);                                                                   \
        if (j->kind == KIND_KI)                                                                    \
            return dta_ki##n(j);                                                                   \
        return dta_ap##n(j);

static __always_inline int dta_run(struct job *j)
{
    switch (j->store) {
        DISPATCH(0)
        DISPATCH(1)
        DISPATCH(2)
        DISPATCH(3)
        DISPATCH(4)
        DISPATCH(5)
    }
    return -1;
}

// The field `f` of the data (dlen bytes at voff), big-endian; 0 if the data is too short for it
// (the rule does not match), else 1.
static __always_inline int field_read(struct scratch *sc, struct xr_field *f, __u32 voff,
                                      __u32 dlen, __u64 *out)
{
    __u32 off = f->offset, w = f->width;
    if (w == 0) {
        off = 0;
        w = dlen < 8 ? dlen : 8;
        if (w == 0) {
            *out = 0;
            return 1;
        }
    }
    if (w > 8 || off + w > dlen)
        return 0;
    *out = be64(sc, voff + off) >> ((8 - w) * 8);
    return 1;
}

static __always_inline int holds(__u32 op, __u64 v, __u64 c)
{
    switch (op) {
    case 0:
        return v == c;
    case 1:
        return v != c;
    case 2:
        return v < c;
    case 3:
        return v <= c;
    case 4:
        return v > c;
    default:
        return v >= c;
    }
}

static __always_inline __u64 le64(struct scratch *sc, __u32 o)
{
    __u64 v = 0;
#pragma unroll
    for (__u32 i = 0; i < 8; i++)
        v |= (__u64)B(sc, o + i) << (8 * i);
    return v;
}

#define RULE_NONE 0
#define RULE_KEEP 1
#define RULE_DROP 2

// Rule `r` (slot `slot` of dta_rule_stats) on report `j` ([DTA §7], [DTA-draft §5.1]; the
// userspace RuleEngine::check for a rule without aggregate): RULE_DROP if it drops the report,
// else RULE_KEEP (an Append action appends its entry here, applied right after the report).
// A global (separately verified) function: the scratch, the job and the rule are map values.
__noinline int dta_rule_one(struct scratch *sc, struct job *j, struct xr_rule *r, __u32 slot,
                            __u32 ap_slot)
{
    if (!sc || !j || !r)
        return RULE_KEEP;
    __u32 klen = j->klen, dlen = j->dlen, voff = j->voff, koff = j->koff;
    if (r->prim != j->kind || (r->key_len && r->key_len != klen) ||
        (r->data_len && r->data_len != dlen) || klen < r->kmatch_len)
        return RULE_KEEP;
    if ((le64(sc, koff) & r->kmask[0]) != r->kvalue[0] ||
        (le64(sc, koff + 8) & r->kmask[1]) != r->kvalue[1])
        return RULE_KEEP;
    __u64 x;
#pragma unroll
    for (__u32 f = 0; f < DTA_MAX_FIELDS; f++) {
        if (f >= r->nfields)
            break;
        struct xr_field *fl = &r->fields[f];
        if (!field_read(sc, fl, voff, dlen, &x) || !holds(fl->op, x & fl->mask, fl->value))
            return RULE_KEEP;
    }
    struct rule_counts *rc = bpf_map_lookup_elem(&dta_rule_stats, &slot);
    if (!rc)
        return RULE_KEEP;
    rc->c[RC_MATCHED]++;
    if (!field_read(sc, &r->value, voff, dlen, &x) || !holds(r->value.op, x, r->value.value))
        return RULE_KEEP;
    rc->c[RC_FIRED]++;
    if (r->action == XR_DROP) {
        rc->c[RC_DROPPED]++;
        return RULE_DROP;
    }
    // Append: the entry (entry_len bytes, zero-filled) built at DERIVED_OFF.
    __u32 e = r->entry_len, ent = r->entry;
    __u32 need = ent == XE_KEY ? klen : ent == XE_KEY_VALUE ? klen + 8 : 8;
    if (need > e || e > 64) {
        rc->c[RC_DERIVED_UNFIT]++;
        return RULE_KEEP;
    }
#pragma unroll
    for (__u32 b = 0; b < 64; b++)
        sc->buf[DERIVED_OFF + b] = 0;
    if (ent != XE_VALUE) {
#pragma clang loop unroll(disable)
        for (__u32 b = 0; b < 16; b++) {
            if (b >= klen)
                break;
            sc->buf[DERIVED_OFF + b] = B(sc, koff + b);
        }
    }
    if (ent != XE_KEY) {
        __u32 at = ent == XE_VALUE ? e - 8 : klen;
#pragma unroll
        for (__u32 b = 0; b < 8; b++)
            sc->buf[(DERIVED_OFF + at + b) & BUF_MASK] = (__u8)(x >> (56 - 8 * b));
    }
    struct job *d = &sc->derived;
    d->store = ap_slot;
    d->kind = KIND_AP;
    d->list = r->list;
    d->doff = DERIVED_OFF;
    d->imm = 0;
    rc->c[RC_DERIVED]++;
    if (dta_run(d) < 0)
        count(C_DROP_MAP_ERROR, 1);
    return RULE_KEEP;
}

// The datagram's rules on report `j`, in order: 1 if a rule dropped it (not applied).
static __always_inline int rules_drop(struct scratch *sc, struct job *j)
{
    __u32 gen = sc->rules_on - 1;
    if (gen > 1)
        return 0;
    struct xr_set *set = bpf_map_lookup_elem(&dta_rules, &gen);
    if (!set)
        return 0;
    __u32 n = sc->rules_n, ap = set->ap_slot;
#pragma clang loop unroll(disable)
    for (__u32 i = 0; i < DTA_MAX_RULES; i++) {
        if (i >= n)
            break;
        if (dta_rule_one(sc, j, &set->r[i], gen * DTA_MAX_RULES + i, ap) == RULE_DROP)
            return 1;
    }
    return 0;
}

// Apply report `j` unless a rule drops it, then its rules' Append entries.
static __always_inline int dta_apply(struct scratch *sc, struct job *j)
{
    if (rules_drop(sc, j)) {
        count(C_RULE_DROPPED, 1);
        return 0;
    }
    return dta_run(j);
}

// Prototype datagram (docs/protocol.md "Prototype protocol"): exactly one report.
static __always_inline int handle_prototype(struct scratch *sc, __u32 plen, __u32 hl)
{
    __u32 op = B(sc, 0);
    if (plen < hl) {
        count(C_PASS_MALFORMED, 1);
        return XDP_PASS;
    }
    __u32 flags = B(sc, hl - 1);
    if (hl == 3 && (flags & 0x40)) {
        count(C_PASS_RETRANS, 1);
        return XDP_PASS;
    }
    if (flags & 0x80) {
        count(C_PASS_IMMEDIATE, 1);
        return XDP_PASS;
    }
    __u32 imm = 0;
    __u32 sub = plen - hl;
    struct job *j = &sc->jobs[0];
    int ok = 0;
    if (op == KIND_KW) {
        if (sub != 9 && sub != 17 && sub != 33)
            goto malformed;
        __u32 red = B(sc, hl);
        if (red < 1 || red > 4)
            goto malformed;
        ok = dta_plan(KIND_KW | red << 8 | imm << 16, 4, sub - 5, hl + 1, j);
    } else if (op == KIND_KI) {
        if (sub != 13)
            goto malformed;
        __u32 red = B(sc, hl);
        if (red < 1 || red > 4)
            goto malformed;
        ok = dta_plan(KIND_KI | red << 8 | imm << 16, 4, 8, hl + 1, j);
    } else if (op == KIND_AP) {
        if (sub != 8)
            goto malformed;
        ok = dta_plan(KIND_AP | imm << 16, 0, 4, hl, j);
    }
    if (!ok) {
        count(C_PASS_UNHANDLED, 1);
        return XDP_PASS;
    }
    if (dta_apply(sc, j) < 0) {
        count(C_DROP_MAP_ERROR, 1);
        return XDP_DROP;
    }
    count(C_DATAGRAMS, 1);
    return XDP_DROP;
malformed:
    count(C_PASS_MALFORMED, 1);
    return XDP_PASS;
}

// Native datagram (docs/protocol.md "Native protocol"): validated whole before any report is
// applied, as native::Datagram::parse does; applied only if every report is one we handle.
static __always_inline int handle_native(struct scratch *sc, __u32 plen)
{
    if (plen >= 12 && B(sc, 0) == 0x13) {
        count(C_PASS_CONTROL, 1);
        return XDP_PASS;
    }
    if (plen < 12 || B(sc, 0) != 0x10) {
        count(C_PASS_MALFORMED, 1); // NACKs, other kinds, truncated: userspace counts them
        return XDP_PASS;
    }
    __u32 b1 = B(sc, 1);
    if ((b1 >> 6) == 3) {
        count(C_PASS_MALFORMED, 1);
        return XDP_PASS;
    }
    if (b1 & 0x20) {
        count(C_PASS_RETRANS, 1);
        return XDP_PASS;
    }
    __u32 n = B(sc, 2);
    if (n == 0) {
        count(C_PASS_MALFORMED, 1);
        return XDP_PASS;
    }
    if (n > MAX_NATIVE) {
        count(C_PASS_TOO_BIG, 1);
        return XDP_PASS;
    }
    __u32 pos = 12;
    int unhandled = 0, immediate = 0;
    for (__u32 i = 0; i < MAX_NATIVE; i++) {
        if (i >= n)
            break;
        if (pos + 4 > plen)
            goto malformed;
        __u32 op = B(sc, pos);
        __u32 f = B(sc, pos + 1);
        __u32 klen = B(sc, pos + 2);
        __u32 dlen = B(sc, pos + 3);
        __u32 body;
        if (op < 1 || op > 5)
            goto malformed;
        if (op == 2 || op == 5) {
            if (klen != 0)
                goto malformed;
        } else if (klen < 1 || klen > 16) {
            goto malformed;
        }
        if (dlen < 4 || dlen > 64 || (op == 3 && dlen != 8) || (op == 4 && dlen != 4))
            goto malformed;
        if (op == 1 || op == 3)
            body = klen + dlen;
        else if (op == 2)
            body = 4 + dlen;
        else if (op == 4)
            body = klen + 6;
        else
            body = 8 + dlen;
        if (pos + 4 + body > plen)
            goto malformed;
        if (f & 0x80)
            immediate = 1;
        if (!dta_plan(op | ((f & 3) + 1) << 8 | ((f & 0x80) ? 1 : 0) << 16, klen, dlen, pos + 4,
                      &sc->jobs[i & (MAX_NATIVE - 1)]))
            unhandled = 1;
        pos += 4 + body;
    }
    if (pos != plen)
        goto malformed;
    if (immediate) {
        count(C_PASS_IMMEDIATE, 1);
        return XDP_PASS;
    }
    if (unhandled) {
        count(C_PASS_UNHANDLED, 1);
        return XDP_PASS;
    }
    for (__u32 i = 0; i < MAX_NATIVE; i++) {
        if (i >= n)
            break;
        if (dta_apply(sc, &sc->jobs[i & (MAX_NATIVE - 1)]) < 0) {
            count(C_DROP_MAP_ERROR, 1);
            return XDP_DROP;
        }
    }
    count(C_DATAGRAMS, 1);
    return XDP_DROP;
malformed:
    count(C_PASS_MALFORMED, 1);
    return XDP_PASS;
}

SEC("xdp")
int dta_xdp(struct xdp_md *ctx)
{
    void *data = (void *)(long)ctx->data;
    void *end = (void *)(long)ctx->data_end;
    __u32 zero = 0;
    count(C_PACKETS, 1);
    struct global_cfg *g = bpf_map_lookup_elem(&dta_global, &zero);
    if (!g || !g->enabled)
        return XDP_PASS;

    struct ethhdr *eth = data;
    if ((void *)(eth + 1) > end)
        goto other;
    __u32 off = sizeof(*eth);
    struct udphdr *udp;
    // The source address, for the allow-list (looked up once the port says it is ours).
    __u8 src[16] = {};
    int v4 = 0;
    if (eth->h_proto == bpf_htons(ETH_P_IP)) {
        struct iphdr *ip = data + off;
        if ((void *)(ip + 1) > end || ip->protocol != IPPROTO_UDP || ip->ihl < 5)
            goto other;
        if (ip->frag_off & bpf_htons(0x3fff)) {
            // Fragments: the stack reassembles them, and the datagram reaches userspace whole.
            count(C_PASS_FRAGMENT, 1);
            return XDP_PASS;
        }
        v4 = 1;
        __builtin_memcpy(src, &ip->saddr, 4);
        off += ip->ihl * 4;
    } else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
        struct ipv6hdr *ip6 = data + off;
        if ((void *)(ip6 + 1) > end || ip6->nexthdr != IPPROTO_UDP)
            goto other;
        __builtin_memcpy(src, &ip6->saddr, 16);
        off += sizeof(*ip6);
    } else {
        goto other;
    }
    udp = data + off;
    if ((void *)(udp + 1) > end || udp->dest != bpf_htons((__u16)g->port))
        goto other;
    // Trust before work, as in the userspace translator: a source outside the allow-list is
    // neither parsed, applied nor passed up (where it would only be counted and dropped).
    if (v4 ? !allowed_v4(*(__u32 *)src) : !allowed_v6(src)) {
        count(C_SOURCE_NOT_ALLOWED, 1);
        return XDP_DROP;
    }
    off += sizeof(*udp);
    __u32 ulen = bpf_ntohs(udp->len);
    if (ulen < 8 || off + (ulen - 8) > (__u32)(end - data)) {
        count(C_PASS_MALFORMED, 1);
        return XDP_PASS;
    }
    __u32 plen = ulen - 8;
    if (plen == 0) {
        count(C_PASS_MALFORMED, 1);
        return XDP_PASS;
    }
    if (plen > MAX_PAYLOAD) {
        count(C_PASS_TOO_BIG, 1);
        return XDP_PASS;
    }
    struct scratch *sc = bpf_map_lookup_elem(&dta_scratch, &zero);
    if (!sc)
        return XDP_PASS;
    if (bpf_xdp_load_bytes(ctx, off, sc->buf, plen) < 0) {
        count(C_PASS_MALFORMED, 1);
        return XDP_PASS;
    }
    // The datagram's rule set (read once: every report runs under one generation).
    __u32 *on = bpf_map_lookup_elem(&dta_rules_on, &zero);
    sc->rules_on = on ? *on : 0;
    sc->rules_n = 0;
    if (sc->rules_on == 1 || sc->rules_on == 2) {
        __u32 gen = sc->rules_on - 1;
        struct xr_set *set = bpf_map_lookup_elem(&dta_rules, &gen);
        sc->rules_n = set ? set->n : 0;
    }
    __u8 first = sc->buf[0];
    if (first >= 1 && first <= 3)
        return handle_prototype(sc, plen, g->proto_hdr_len == 3 ? 3 : 2);
    if (first == 4) {
        count(C_PASS_UNHANDLED, 1); // prototype Postcarding: the translator's cache
        return XDP_PASS;
    }
    return handle_native(sc, plen);
other:
    count(C_PASS_OTHER, 1);
    return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
