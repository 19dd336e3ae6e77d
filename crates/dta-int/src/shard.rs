//! Several INT sinks over the same stores, one per thread, with flows sharded by key.
//!
//! A flow belongs to sink [`shard_of`]`(key, threads)`: its FlowCache entry, its aggregated
//! writes and its change events live in that sink only, so no per-flow state is shared or
//! locked. The one sharding function of the INT sink: `dta int-sink`'s kernel steering program
//! (a classic BPF program on its `SO_REUSEPORT` group, `dta::int_steer`) computes the same
//! [`flow_shard`] of the inner packet, and the group's translators give a Postcarding flow to the
//! same thread ([`postcard_owner`] through `dta_translator::Shards::with_postcard_owner`), so a
//! sink's postcards are applied by its own translator, never handed over. Key-Write and
//! Key-Increment need no owner (the stores take them from any thread: last writer wins per
//! slot, atomic adds); events go to their Append list's owner through the translator's inboxes
//! ([`dta_translator::shard`]), which each sink's [`IntSink::tick`] drains. The sinks of a group
//! share their run-time thresholds and the event sequence numbers; each keeps its own counters
//! ([`IntSink::stats`]).
//!
//! The receive side routes each report to the sink of its flow (sockets steered by flow, or a
//! dispatcher); a sink handed a flow it does not own still processes it correctly, but that
//! flow's cache entry then splits across sinks ([`IntSink::owns`] tells).

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use dta_translator::{Shards, Sinks, Translator};

use crate::events::Thresholds;
use crate::layout::FLOW_KEY_LEN;
use crate::sink::{IntSink, IntSinkConfig, MAX_THREADS};

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

/// What the sinks of one group share.
pub struct SinkGroup {
    shards: Arc<Shards>,
    thresholds: Arc<Thresholds>,
    next_seq: Arc<AtomicU64>,
}

impl SinkGroup {
    /// A group of `threads` sinks for `cfg`; each translator inbox holds `inbox` reports.
    pub fn new(cfg: &IntSinkConfig, threads: usize, inbox: usize) -> SinkGroup {
        SinkGroup {
            shards: Shards::with_postcard_owner(threads, inbox, postcard_owner),
            thresholds: Arc::new(Thresholds::new(&cfg.thresholds)),
            next_seq: Arc::new(AtomicU64::new(0)),
        }
    }

    pub fn threads(&self) -> usize {
        self.shards.threads()
    }

    /// The run-time thresholds every sink of the group reads.
    pub fn thresholds(&self) -> &Arc<Thresholds> {
        &self.thresholds
    }

    /// Sink `index` of the group, writing through `translator` (built over the group's stores;
    /// it becomes translator thread `index`).
    pub fn sink<S: Sinks>(
        &self,
        index: usize,
        cfg: &IntSinkConfig,
        translator: Translator<S>,
    ) -> Result<IntSink<S>, String> {
        if index >= self.threads() {
            return Err(format!("sink {index} of a group of {}", self.threads()));
        }
        let t = translator.with_shard(self.shards.shard(index));
        Ok(IntSink::new(cfg, t)?.join(
            index,
            self.threads(),
            self.thresholds.clone(),
            self.next_seq.clone(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dta_wire::Report;

    #[test]
    fn shard_of_is_the_translators_postcard_owner() {
        let cfg = IntSinkConfig::default();
        for threads in 1..=4 {
            let group = SinkGroup::new(&cfg, threads, 1);
            let s = group.shards.shard(0);
            let mut seen = vec![0usize; threads];
            for i in 0..1000u32 {
                let mut key = [0u8; FLOW_KEY_LEN];
                key[..4].copy_from_slice(&i.to_be_bytes());
                key[12] = 17;
                let owner = s.owner(&Report::Postcard {
                    key: &key,
                    hop: 0,
                    path_len: 5,
                    value: 1,
                    immediate: false,
                });
                assert_eq!(owner, Some(shard_of(&key, threads)));
                seen[shard_of(&key, threads)] += 1;
            }
            // Every sink gets a share of the flows.
            assert!(seen.iter().all(|&n| n > 1000 / threads / 2), "{seen:?}");
        }
    }
}
