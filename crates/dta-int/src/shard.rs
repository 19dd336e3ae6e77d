//! Several INT sinks over the same stores, one per thread, with flows sharded by key.
//!
//! A flow belongs to sink [`shard_of`]`(key, threads)`: its FlowCache entry, its aggregated
//! writes and its change events live in that sink only, so no per-flow state is shared or
//! locked. The function is the one the translator uses to give a Postcarding flow's state to
//! one of its threads ([`dta_translator::Shard::owner`]), so a sink's postcards are applied by
//! its own translator, never handed over. Key-Write and Key-Increment need no owner (the stores
//! take them from any thread: last writer wins per slot, atomic adds); events go to their
//! Append list's owner through the translator's inboxes ([`dta_translator::shard`]), which each
//! sink's [`IntSink::tick`] drains. The sinks of a group share their run-time thresholds and the
//! event sequence numbers; each keeps its own counters ([`IntSink::stats`]).
//!
//! The receive side routes each report to the sink of its flow (a dispatcher, or sockets steered
//! by flow); a sink handed a flow it does not own still processes it correctly, but that flow's
//! cache entry then splits across sinks ([`IntSink::owns`] tells).

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use dta_store::hash;
use dta_translator::{Shards, Sinks, Translator};

use crate::events::Thresholds;
use crate::layout::FLOW_KEY_LEN;
use crate::sink::{IntSink, IntSinkConfig};

/// The sink (of `threads`) that owns flow `key`: `fnv1a64(key) % threads`.
#[inline]
pub fn shard_of(key: &[u8; FLOW_KEY_LEN], threads: usize) -> usize {
    (hash::fnv1a64(key) % threads.max(1) as u64) as usize
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
            shards: Shards::new(threads, inbox),
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
        for threads in 1..=4 {
            let shards = Shards::new(threads, 1);
            let s = shards.shard(0);
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
