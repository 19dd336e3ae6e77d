//! The lean path for the common datagram: Key-Write (4-byte data, one 8-byte slot),
//! Key-Increment or Postcarding reports that all share one shape ([`native::OneShape`]), at
//! their store's N, none flagged immediate, no rules to evaluate, into a store the translator
//! maps. Everything the general path decides per report is decided once per datagram: the
//! route, the store's allow-list, the redundancy, the counters; per report only the hash, the
//! prefetch and the N memory operations remain ([DTA A.1] Algorithm 1, [DTA A.4] Algorithm 5).
//! Postcards go through the path cache one by one ([DTA A.2]); the chunks they complete are
//! encoded, then written a block at a time, and the region's live counters are added once per
//! datagram. A datagram the lean path does not take goes the general way ([`super::staging`],
//! [`super::dispatch`]) unchanged, so both paths leave the same bytes in the stores and the
//! same counters (`tests/batched.rs`).

use std::net::SocketAddr;
use std::time::Instant;

use dta_store::{EncodedChunk, PostcardingLayout, RegionMem, MAX_REDUNDANCY};
use dta_wire::{native, Opcode, Report};

use super::dispatch::write_batch;
use super::routes::{KeyIncrementRoute, KeyWriteRoute};
use super::staging::Stage;
use super::{allowed, Translator};
use crate::postcard::{Chunk, Eviction, MAX_KEY};
use crate::reason::Reason;
use crate::sinks::{Flagged, Sinks};
use crate::stats::add;

/// Reports hashed before their lines are written: every line of a block prefetched back to
/// back, then written (at N = 2, 64 lines in flight, as the general path's stage).
const BLOCK: usize = 32;

/// What the lean path did with a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lean {
    /// Applied (or refused by its store's allow-list, counted).
    Done,
    /// Not a datagram for the lean path: the general path takes it.
    Declined,
}

impl<S: Sinks> Translator<S> {
    /// Apply the one-shape datagram `d` (from `src`, reporter `reporter`; `stage.src` is its
    /// address) on the lean path, or decline it. Reports staged from earlier datagrams are
    /// written first (memory operations keep datagram order); a declined datagram leaves the
    /// stage as it was.
    #[inline]
    pub(super) fn apply_lean(
        &mut self,
        d: &native::OneShape<'_>,
        stage: &mut Stage<'_>,
        reporter: u32,
        src: SocketAddr,
        now: Instant,
    ) -> Lean {
        if self.rules.engine.active() || self.rules.waiting() {
            return Lean::Declined;
        }
        match d.opcode() {
            Opcode::KeyWrite if d.data_len() == 4 => self.lean_key_write(d, stage),
            Opcode::KeyIncrement => self.lean_key_increment(d, stage),
            Opcode::Postcarding => self.lean_postcarding(d, stage, reporter, src, now),
            Opcode::Append => self.lean_append(d, stage, reporter, src, now),
            _ => Lean::Declined,
        }
    }

    /// The opening both lean entries share once their route is found: whether the datagram's
    /// reports carry the store's N (`n`), `store` is mapped (the lean path writes only there)
    /// and `src` may write it. `Some` ends the datagram here: declined, or done when the
    /// store's allow-list refuses `src` (counted); `None` when the lean path writes it (the
    /// stage written first).
    #[inline]
    fn lean_open(
        &mut self,
        store: usize,
        n: u8,
        d: &native::OneShape<'_>,
        stage: &mut Stage<'_>,
    ) -> Option<Lean> {
        if !d.plain_at(n) || self.sinks.region_mem(store).is_none() {
            return Some(Lean::Declined);
        }
        if !allowed(&self.store_allow, store, stage.src) {
            self.stats
                .reject_n(Reason::SourceNotAllowed, d.len() as u64);
            return Some(Lean::Done);
        }
        self.write_stage(stage);
        None
    }

    fn lean_key_write(&mut self, d: &native::OneShape<'_>, stage: &mut Stage<'_>) -> Lean {
        let Some(idx) = self
            .key_write
            .iter()
            .position(|r| r.layout.key_len() == d.key_len() && r.layout.data_len() == 4)
        else {
            return Lean::Declined;
        };
        let (n, store) = (
            self.key_write[idx].layout.redundancy(),
            self.key_write[idx].store,
        );
        if let Some(ended) = self.lean_open(store, n, d, stage) {
            return ended;
        }
        let route = &self.key_write[idx];
        let Some(mem) = self.sinks.region_mem(store) else {
            return Lean::Declined;
        };
        let failed = match n {
            1 => key_write::<1>(route, mem, d),
            2 => key_write::<2>(route, mem, d),
            3 => key_write::<3>(route, mem, d),
            _ => key_write::<4>(route, mem, d),
        };
        let slot_len = route.layout.slot_len() as u64;
        let ops = self.lean_count(Opcode::KeyWrite, store, d.len() as u64, n, failed, 0);
        add(&self.stats.writes, ops);
        add(&self.stats.write_bytes, ops * slot_len);
        Lean::Done
    }

    fn lean_key_increment(&mut self, d: &native::OneShape<'_>, stage: &mut Stage<'_>) -> Lean {
        let Some(idx) = self
            .key_increment
            .iter()
            .position(|r| r.layout.key_len() == d.key_len())
        else {
            return Lean::Declined;
        };
        let (n, store) = (
            self.key_increment[idx].layout.redundancy(),
            self.key_increment[idx].store,
        );
        if let Some(ended) = self.lean_open(store, n, d, stage) {
            return ended;
        }
        let route = &self.key_increment[idx];
        let Some(mem) = self.sinks.region_mem(store) else {
            return Lean::Declined;
        };
        let (failed, added) = match n {
            1 => key_increment::<1>(route, mem, d),
            2 => key_increment::<2>(route, mem, d),
            3 => key_increment::<3>(route, mem, d),
            _ => key_increment::<4>(route, mem, d),
        };
        let ops = self.lean_count(
            Opcode::KeyIncrement,
            store,
            d.len() as u64,
            n,
            failed,
            added,
        );
        add(&self.stats.fetch_adds, ops);
        Lean::Done
    }

    /// The Postcarding datagram `d`: each postcard into its path cache (or handed to the
    /// thread that owns its flow), the chunks it completes or evicts encoded into a block and
    /// written a block at a time ([`Self::write_chunks`]).
    fn lean_postcarding(
        &mut self,
        d: &native::OneShape<'_>,
        stage: &mut Stage<'_>,
        reporter: u32,
        src: SocketAddr,
        now: Instant,
    ) -> Lean {
        let Some(idx) = self
            .postcarding
            .iter()
            .position(|r| r.layout.key_len() == d.key_len())
        else {
            return Lean::Declined;
        };
        if d.key_len() > MAX_KEY {
            return Lean::Declined;
        }
        let store = self.postcarding[idx].store;
        // Postcards carry no redundancy of their own: their flags byte is 0 unless flagged.
        if let Some(ended) = self.lean_open(store, 1, d, stage) {
            return ended;
        }
        let hops = self.postcarding[idx].layout.hops();
        let mut block = ChunkBlock::new();
        let (mut forwarded, mut bad_hop) = (0u64, 0u64);
        let mut views = d.views();
        // A block of postcards at a time: their cache lines found and prefetched, then each
        // inserted.
        let mut pending = [Postcard::EMPTY; BLOCK];
        loop {
            let mut k = 0;
            for v in views.by_ref() {
                let report = v.report();
                let Report::Postcard {
                    key,
                    hop,
                    path_len,
                    value,
                    ..
                } = report
                else {
                    continue;
                };
                if self.shard.is_some() && self.forward(&report, reporter, src, now) {
                    forwarded += 1;
                    continue;
                }
                if hop as usize >= hops {
                    bad_hop += 1;
                    continue;
                }
                let cache = &self.postcarding[idx].cache;
                let line = cache.line(key);
                cache.prefetch(line);
                pending[k] = Postcard {
                    line,
                    key,
                    hop,
                    path_len,
                    value,
                };
                k += 1;
                if k == BLOCK {
                    break;
                }
            }
            if k == 0 {
                break;
            }
            for p in &pending[..k] {
                // One postcard lets go of at most two chunks (a collided resident, then its
                // own path).
                if block.len + 2 > BLOCK {
                    self.write_chunks(store, &mut block);
                }
                let route = &mut self.postcarding[idx];
                let layout = &route.layout;
                route.cache.insert_at(
                    p.line,
                    p.key,
                    p.hop,
                    p.path_len,
                    p.value,
                    false,
                    now,
                    |chunk, why| block.push(layout, chunk, why),
                );
            }
        }
        self.write_chunks(store, &mut block);
        self.lean_reports(
            Opcode::Postcarding,
            d.len() as u64 - forwarded,
            &[(Reason::BadHop, bad_hop)],
        );
        Lean::Done
    }

    /// The Append datagram `d`, in place ([DTA A.3] Algorithm 3 as reserve-then-publish):
    /// each entry copied straight from the datagram into the slot its list reserves (or handed
    /// to the thread that owns its list), a list's head published when its batch is complete.
    fn lean_append(
        &mut self,
        d: &native::OneShape<'_>,
        stage: &mut Stage<'_>,
        reporter: u32,
        src: SocketAddr,
        now: Instant,
    ) -> Lean {
        let Some(store) = self
            .append
            .as_ref()
            .filter(|r| r.batcher.in_place() && d.data_len() == r.layout.entry_len())
            .map(|r| r.store)
        else {
            return Lean::Declined;
        };
        // Appends carry no redundancy of their own: their flags byte is 0 unless flagged.
        if let Some(ended) = self.lean_open(store, 1, d, stage) {
            return ended;
        }
        let (mut forwarded, mut bad_list, mut failed) = (0u64, 0u64, 0u64);
        for v in d.views() {
            let report = v.report();
            let Report::Append { list_id, data, .. } = report else {
                continue;
            };
            if self.shard.is_some() && self.forward(&report, reporter, src, now) {
                forwarded += 1;
                continue;
            }
            let Some(r) = self.append.as_mut() else {
                break;
            };
            if list_id >= r.layout.lists() {
                bad_list += 1;
                continue;
            }
            let Some(mem) = self.sinks.region_mem(store) else {
                failed += 1;
                continue;
            };
            let offset = r.layout.entry_offset(list_id, r.batcher.reserve(list_id));
            if mem.write(offset, data).is_err() {
                // The slot is reserved again by the list's next entry.
                failed += 1;
                continue;
            }
            if let Some(b) = r.batcher.placed(list_id, false) {
                let done = write_batch(&r.layout, store, &mut self.sinks, &self.stats, b);
                failed += done.is_err() as u64;
            }
        }
        self.lean_reports(
            Opcode::Append,
            d.len() as u64 - forwarded,
            &[(Reason::BadListId, bad_list), (Reason::SinkError, failed)],
        );
        Lean::Done
    }

    /// Write the chunks of `block` into `store` (every line prefetched, then every copy
    /// written), count them as the general path's `write_chunk` does, add the region's live
    /// counters once, announce the flagged paths, and empty the block.
    fn write_chunks(&mut self, store: usize, block: &mut ChunkBlock) {
        if block.len == 0 {
            return;
        }
        let chunks = &block.chunks[..block.len];
        let copies: u64 = chunks.iter().map(|c| c.offsets().len() as u64).sum();
        let bytes: u64 = chunks
            .iter()
            .map(|c| (c.offsets().len() * c.bytes().len()) as u64)
            .sum();
        let mut failed = block.failed;
        match self.sinks.region_mem(store) {
            Some(mem) => {
                for c in chunks {
                    mem.prefetch_span_at(c.offsets(), c.bytes().len() as u64);
                }
                for c in chunks {
                    failed += mem.write_at(c.offsets(), c.bytes()).is_err() as u64;
                }
            }
            None => failed += chunks.len() as u64,
        }
        let stats = &self.stats;
        for (counter, n) in [
            (&stats.postcard_chunks_complete, block.evicted[0]),
            (&stats.postcard_chunks_collision, block.evicted[1]),
            (&stats.postcard_chunks_timeout, block.evicted[2]),
        ] {
            add(counter, n);
        }
        add(&stats.writes, copies);
        add(&stats.write_bytes, bytes);
        self.sinks.issued(copies);
        let count_failed = self.sinks.count(store, copies, 0).is_err() as u64;
        if failed + count_failed > 0 {
            self.stats
                .reject_n(Reason::SinkError, failed + count_failed);
        }
        for f in &block.flagged[..block.flagged_len] {
            self.sinks.announce(
                store,
                &Flagged {
                    primitive: Opcode::Postcarding,
                    key: f.key(),
                    list: 0,
                    reports: (f.flagged as u32).max(1),
                },
            );
        }
        block.clear();
    }

    /// Count the `taken` reports of `op` a lean datagram applied or refused itself (those it
    /// handed to their owner thread are counted there) and its rejects by reason.
    fn lean_reports(&self, op: Opcode, taken: u64, rejects: &[(Reason, u64)]) {
        add(&self.stats.reports[op as usize - 1], taken);
        for &(reason, n) in rejects {
            if n > 0 {
                self.stats.reject_n(reason, n);
            }
        }
    }

    /// Count a lean datagram of `reports` reports of `op` at N = `n` into `store`, `failed` of
    /// which failed (`sink_error`, as on the general path), the others adding `added`: the
    /// meter's operations, the store's live counters, the reports. Returns the operations.
    fn lean_count(
        &mut self,
        op: Opcode,
        store: usize,
        reports: u64,
        n: u8,
        failed: u64,
        added: u64,
    ) -> u64 {
        let ops = reports * n as u64;
        self.sinks.issued(ops);
        let written = (reports - failed) * n as u64;
        let count_failed = self.sinks.count(store, written, added).is_err();
        self.lean_reports(
            op,
            reports,
            &[(Reason::SinkError, failed + count_failed as u64)],
        );
        ops
    }
}

/// A postcard waiting for its cache line ([`Translator::lean_postcarding`]).
#[derive(Clone, Copy)]
struct Postcard<'a> {
    line: usize,
    key: &'a [u8],
    hop: u8,
    path_len: u8,
    value: u32,
}

impl Postcard<'_> {
    const EMPTY: Postcard<'static> = Postcard {
        line: 0,
        key: &[],
        hop: 0,
        path_len: 0,
        value: 0,
    };
}

/// Chunks the path cache let go of, encoded and waiting to be written together
/// ([`Translator::write_chunks`]).
struct ChunkBlock {
    chunks: [EncodedChunk; BLOCK],
    len: usize,
    /// Chunks by why they left the cache: complete, collision, timeout or flush.
    evicted: [u64; 3],
    /// Chunks that could not be encoded (counted as the general path's sink errors).
    failed: u64,
    /// The flagged paths among them (flagged by postcards the general path took earlier), for
    /// their announcement once written.
    flagged: [FlaggedPath; BLOCK],
    flagged_len: usize,
}

/// A flagged path's key and how many of its postcards carried the flag.
#[derive(Clone, Copy)]
struct FlaggedPath {
    key: [u8; MAX_KEY],
    key_len: u8,
    flagged: u8,
}

impl FlaggedPath {
    const EMPTY: FlaggedPath = FlaggedPath {
        key: [0; MAX_KEY],
        key_len: 0,
        flagged: 0,
    };

    fn key(&self) -> &[u8] {
        &self.key[..self.key_len as usize]
    }
}

impl ChunkBlock {
    fn new() -> ChunkBlock {
        ChunkBlock {
            chunks: [EncodedChunk::EMPTY; BLOCK],
            len: 0,
            evicted: [0; 3],
            failed: 0,
            flagged: [FlaggedPath::EMPTY; BLOCK],
            flagged_len: 0,
        }
    }

    /// Encode `chunk`, which left the cache for `why`.
    #[inline]
    fn push(&mut self, layout: &PostcardingLayout, chunk: &Chunk, why: Eviction) {
        self.evicted[match why {
            Eviction::Complete => 0,
            Eviction::Collision => 1,
            Eviction::Timeout | Eviction::Flush => 2,
        }] += 1;
        let values = &chunk.values[..layout.hops()];
        if layout
            .encode_chunk(chunk.key(), values, &mut self.chunks[self.len])
            .is_err()
        {
            self.failed += 1;
            return;
        }
        self.len += 1;
        if chunk.immediate {
            self.flagged[self.flagged_len] = FlaggedPath {
                key: chunk.key,
                key_len: chunk.key_len,
                flagged: chunk.flagged,
            };
            self.flagged_len += 1;
        }
    }

    fn clear(&mut self) {
        self.len = 0;
        self.evicted = [0; 3];
        self.failed = 0;
        self.flagged_len = 0;
    }
}

/// Write every Key-Write report of `d` (4-byte data, N = `N` copies each) into `mem`, a block
/// at a time: hash and encode, prefetch every line, store every word. Returns the reports
/// whose writes failed.
#[inline(always)]
fn key_write<const N: usize>(
    route: &KeyWriteRoute,
    mem: &RegionMem,
    d: &native::OneShape<'_>,
) -> u64 {
    let layout = &route.layout;
    let mut failed = 0;
    let mut offs = [[0u64; N]; BLOCK];
    let mut words = [0u64; BLOCK];
    let mut views = d.views();
    loop {
        let mut k = 0;
        for v in views.by_ref().take(BLOCK) {
            let mut o = [0u64; MAX_REDUNDANCY as usize];
            let tag = layout.slot_offsets(v.key(), N as u8, &mut o);
            offs[k].copy_from_slice(&o[..N]);
            let data = v.bytes()[v.len() - 4..].try_into().unwrap_or([0; 4]);
            words[k] = layout.encode_word(tag, data);
            k += 1;
        }
        if k == 0 {
            return failed;
        }
        for o in &offs[..k] {
            mem.prefetch_at(o);
        }
        for (o, &w) in offs[..k].iter().zip(&words[..k]) {
            failed += mem.store_u64_at(o, w).is_err() as u64;
        }
    }
}

/// FETCH_ADD every Key-Increment report of `d` (N = `N` counters each) into `mem`, a block at
/// a time as [`key_write`]. Returns the reports whose operations failed and the sum (wrapping)
/// of the counters of the others.
#[inline(always)]
fn key_increment<const N: usize>(
    route: &KeyIncrementRoute,
    mem: &RegionMem,
    d: &native::OneShape<'_>,
) -> (u64, u64) {
    let layout = &route.layout;
    let (mut failed, mut added) = (0u64, 0u64);
    let mut offs = [[0u64; N]; BLOCK];
    let mut counters = [0u64; BLOCK];
    let mut views = d.views();
    loop {
        let mut k = 0;
        for v in views.by_ref().take(BLOCK) {
            let Report::KeyIncrement { key, counter, .. } = v.report() else {
                continue;
            };
            let mut o = [0u64; MAX_REDUNDANCY as usize];
            layout.counter_offsets(key, N as u8, &mut o);
            offs[k].copy_from_slice(&o[..N]);
            counters[k] = counter;
            k += 1;
        }
        if k == 0 {
            return (failed, added);
        }
        for o in &offs[..k] {
            mem.prefetch_at(o);
        }
        for (o, &c) in offs[..k].iter().zip(&counters[..k]) {
            if mem.fetch_add_u64_at(o, c).is_err() {
                failed += 1;
            } else {
                added = added.wrapping_add(c);
            }
        }
    }
}
