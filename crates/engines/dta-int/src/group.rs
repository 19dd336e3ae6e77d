//! Several INT sinks over the same stores, one per thread, with flows sharded by key
//! ([`crate::shard`]).
//!
//! A flow belongs to sink [`shard_of`]`(key, threads)`: its FlowCache entry, its aggregated
//! writes and its change events live in that sink only, so no per-flow state is shared or
//! locked. The one sharding function of the INT sink: `dta int-sink`'s kernel steering program
//! (a classic BPF program on its `SO_REUSEPORT` group, [`crate::steer`]) computes the same
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
use crate::shard::postcard_owner;
use crate::sink::{IntSink, IntSinkConfig};

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
    use crate::layout::FLOW_KEY_LEN;
    use crate::shard::shard_of;
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
