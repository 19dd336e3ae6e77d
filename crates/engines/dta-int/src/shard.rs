//! The one sharding function of the INT sink: a flow belongs to sink [`shard_of`]`(key,
//! threads)`, the kernel steering program ([`crate::steer`]) computes the same [`flow_shard`] of
//! the inner packet, and a group's translators give a Postcarding flow to the same thread
//! ([`postcard_owner`] through `dta_translator::Shards::with_postcard_owner`), so a sink's
//! postcards are applied by its own translator, never handed over ([`crate::group`]).

use crate::layout::FLOW_KEY_LEN;

/// Most sinks (threads) of one group, and most sockets the kernel steering program spreads
/// over.
pub const MAX_THREADS: usize = 256;

/// The multipliers of [`flow_shard`] (odd 32-bit constants of the murmur3 / golden-ratio
/// family; any odd constants spread the bits).
pub const K1: u32 = 0x9E37_79B1;
pub const K2: u32 = 0x85EB_CA77;
pub const K3: u32 = 0xC2B2_AE3D;

/// The sink thread of a flow among `n` (clamped to 1..=[`MAX_THREADS`]): a hash of the IPv4
/// source and destination, the source port and the protocol in 32-bit arithmetic, the words
/// big-endian as a packet holds them. The destination port is left out: an INT-MD sink's
/// frames carry the original one in the INT shim, not in the UDP header, and a classic BPF
/// program steering the reports sees only the latter; the same function of a flow for stacked
/// reports and for postcards.
#[inline]
pub fn flow_shard(src: u32, dst: u32, sport: u16, proto: u8, n: usize) -> usize {
    let mut h = src.wrapping_mul(K1);
    h ^= dst;
    h = h.wrapping_mul(K2);
    h ^= (u32::from(sport) << 16) | u32::from(proto);
    h = h.wrapping_mul(K3);
    h ^= h >> 15;
    (h % n.clamp(1, MAX_THREADS) as u32) as usize
}

/// The sink (of `threads`) that owns flow `key` (`src ‖ dst ‖ sport ‖ dport ‖ proto`):
/// [`flow_shard`] of its addresses, its source port (0 unless UDP or TCP) and protocol.
#[inline]
pub fn shard_of(key: &[u8; FLOW_KEY_LEN], threads: usize) -> usize {
    let w = |i: usize| u32::from_be_bytes([key[i], key[i + 1], key[i + 2], key[i + 3]]);
    let sport = match key[12] {
        dta_net::IPPROTO_UDP | dta_net::IPPROTO_TCP => u16::from_be_bytes([key[8], key[9]]),
        _ => 0,
    };
    flow_shard(w(0), w(4), sport, key[12], threads)
}

/// [`shard_of`] of a Postcarding key, for `dta_translator::Shards::with_postcard_owner`: the
/// thread that owns a flow's postcards is the one its reports reach. A key that is not a flow
/// key goes to 0.
pub fn postcard_owner(key: &[u8], threads: usize) -> usize {
    <&[u8; FLOW_KEY_LEN]>::try_from(key).map_or(0, |k| shard_of(k, threads))
}
