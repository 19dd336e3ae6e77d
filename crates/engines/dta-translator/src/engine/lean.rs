//! The lean path for the common datagram: Key-Write (4-byte data, one 8-byte slot) or
//! Key-Increment reports that all share one shape ([`native::OneShape`]), at their store's N,
//! none flagged immediate, no rules to evaluate, into a store the translator maps. Everything
//! the general path decides per report is decided once per datagram: the route, the store's
//! allow-list, the redundancy, the counters; per report only the hash, the prefetch and the
//! N memory operations remain ([DTA A.1] Algorithm 1, [DTA A.4] Algorithm 5). A datagram the
//! lean path does not take goes the general way ([`super::staging`]) unchanged, so both paths
//! leave the same bytes in the stores and the same counters (`tests/batched.rs`).

use dta_store::{RegionMem, MAX_REDUNDANCY};
use dta_wire::{native, Opcode, Report};

use super::routes::{KeyIncrementRoute, KeyWriteRoute};
use super::staging::Stage;
use super::{allowed, Translator};
use crate::reason::Reason;
use crate::sinks::Sinks;
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
    /// Apply the one-shape datagram `d` (from `stage.src`) on the lean path, or decline it.
    /// Reports staged from earlier datagrams are written first (memory operations keep
    /// datagram order); a declined datagram leaves the stage as it was.
    #[inline]
    pub(super) fn apply_lean(&mut self, d: &native::OneShape<'_>, stage: &mut Stage<'_>) -> Lean {
        if self.rules.engine.active() || self.rules.waiting() {
            return Lean::Declined;
        }
        match d.opcode() {
            Opcode::KeyWrite if d.data_len() == 4 => self.lean_key_write(d, stage),
            Opcode::KeyIncrement => self.lean_key_increment(d, stage),
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
        add(&self.stats.reports[op as usize - 1], reports);
        let failed = failed + count_failed as u64;
        if failed > 0 {
            self.stats.reject_n(Reason::SinkError, failed);
        }
        ops
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
