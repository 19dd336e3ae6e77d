//! Batch staging of Key-Write and Key-Increment reports ([DTA §6]: the translator batches): a
//! datagram's reports are routed once per shape and hashed, then all their lines prefetched in
//! one pass, then written together in report order; counters are added once per batch.

use std::mem::MaybeUninit;
use std::net::IpAddr;

use dta_store::key_write::MAX_SLOT;
use dta_store::{KeyTag, RegionMem, MAX_REDUNDANCY};
use dta_wire::{Opcode, Report};

use super::routes::KeyWriteRoute;
use super::{allowed, Translator};
use crate::reason::Reason;
use crate::sinks::Sinks;
use crate::stats::add;

/// Reports staged per batch before their writes are issued: two native datagrams of 32 reports
/// ([`Translator::handle_batch`] stages across the datagrams of a received batch). At N = 2
/// that is 128 line prefetches issued back to back, more than a core keeps in flight, so the
/// misses overlap as much as the core allows.
pub(super) const STAGE: usize = 64;
/// The batch path handles every redundancy the stores accept (1..=MAX_REDUNDANCY); `apply`
/// only classifies what it cannot stage.
const STAGE_MAX_N: usize = MAX_REDUNDANCY as usize;

/// One Key-Write or Key-Increment report, routed and hashed (and, for an 8-byte slot,
/// encoded), waiting to be written.
#[derive(Clone, Copy)]
struct Staged<'a> {
    store: usize,
    op: Op<'a>,
    immediate: bool,
    n: u8,
    offs: [u64; STAGE_MAX_N],
}

/// What a staged report writes at each of its N offsets.
#[derive(Clone, Copy)]
enum Op<'a> {
    /// An 8-byte Key-Write slot, encoded when staged ([`dta_store::KeyWriteLayout::encode_word`]):
    /// the write is one word store per copy.
    Word(u64),
    /// A longer Key-Write slot, encoded when written by route `route`'s layout.
    Slot {
        route: usize,
        tag: KeyTag,
        data: &'a [u8],
    },
    /// A Key-Increment FETCH_ADD of this counter.
    Add(u64),
}

/// A batch of staged reports and its counters, on the stack (no allocation).
pub(super) struct Stage<'a> {
    items: [MaybeUninit<Staged<'a>>; STAGE],
    /// The source of the datagram the reports came in (per-store allow-lists).
    pub(super) src: IpAddr,
    /// Write Key-Write reports with redundancy 1 (dynamic redundancy, [DTA-draft §6]).
    pub(super) lower: bool,
    pub(super) len: usize,
    kw: u64,
    ki: u64,
    immediates: u64,
    writes: u64,
    write_bytes: u64,
    fetch_adds: u64,
    lowered: u64,
}

impl Stage<'_> {
    #[inline]
    pub(super) fn new(src: IpAddr) -> Self {
        Stage {
            items: [const { MaybeUninit::uninit() }; STAGE],
            src,
            lower: false,
            len: 0,
            kw: 0,
            ki: 0,
            immediates: 0,
            writes: 0,
            write_bytes: 0,
            fetch_adds: 0,
            lowered: 0,
        }
    }

    #[inline]
    fn clear(&mut self) {
        self.len = 0;
        self.kw = 0;
        self.ki = 0;
        self.immediates = 0;
        self.writes = 0;
        self.write_bytes = 0;
        self.fetch_adds = 0;
        self.lowered = 0;
    }
}

/// The route of the last report shape seen in a datagram: routing once per shape.
#[derive(Default)]
pub(super) struct RouteCache {
    kw: Option<((usize, usize), usize)>,
    ki: Option<(usize, usize)>,
}

impl<S: Sinks> Translator<S> {
    /// Stage one Key-Write or Key-Increment report ([`Self::stage_key_write`],
    /// [`Self::stage_key_increment`]); false for any other primitive.
    #[inline(always)]
    pub(super) fn stage<'a>(
        &self,
        stage: &mut Stage<'a>,
        routes: &mut RouteCache,
        report: &Report<'a>,
    ) -> bool {
        match *report {
            Report::KeyWrite {
                key,
                data,
                redundancy,
                immediate,
            } => self.stage_key_write(stage, routes, key, data, redundancy, immediate),
            Report::KeyIncrement {
                key,
                counter,
                redundancy,
                immediate,
            } => self.stage_key_increment(stage, routes, key, counter, redundancy, immediate),
            _ => false,
        }
    }

    /// Route and hash one Key-Write report into `stage` ([DTA A.1] Algorithm 1: the N indices
    /// and the key's tag are computed here by the store's `slot_offsets`; an 8-byte slot is
    /// encoded here by its `encode_word`, a longer one by its `encode_slot` in
    /// [`Self::write_stage`], which writes them). Returns false, leaving `stage` unchanged, for
    /// a report the slow path must reject: no store of its shape, or redundancy out of 1..=store
    /// N.
    #[inline(always)]
    fn stage_key_write<'a>(
        &self,
        stage: &mut Stage<'a>,
        routes: &mut RouteCache,
        key: &[u8],
        data: &'a [u8],
        redundancy: u8,
        immediate: bool,
    ) -> bool {
        debug_assert!(stage.len < STAGE);
        if !(1..=STAGE_MAX_N as u8).contains(&redundancy) {
            return false;
        }
        let shape = (key.len(), data.len());
        let idx =
            match routes.kw {
                Some((s, i)) if s == shape => i,
                _ => match self.key_write.iter().position(|r| {
                    r.layout.key_len() == key.len() && r.layout.data_len() == data.len()
                }) {
                    Some(i) => {
                        routes.kw = Some((shape, i));
                        i
                    }
                    None => return false,
                },
            };
        let r = &self.key_write[idx];
        if redundancy > r.layout.redundancy() {
            // More copies than the store holds: the slow path rejects it (`bad_redundancy`).
            return false;
        }
        if self.store_refuses(r.store, stage.src) {
            return true;
        }
        // Checked at the report's own N (an N the store cannot hold is refused all the same),
        // then lowered: the first of its N slots, which a query at N reads as 1 vote of N.
        let redundancy = if stage.lower && redundancy > 1 {
            stage.lowered += 1;
            1
        } else {
            redundancy
        };
        let mut offs = [0u64; MAX_REDUNDANCY as usize];
        let tag = r.layout.slot_offsets(key, redundancy, &mut offs);
        let slot_len = r.layout.slot_len();
        // The 8-byte slot encoded here, in the hashing pass, so the write pass only stores.
        let op = match <[u8; 4]>::try_from(data) {
            Ok(d) => Op::Word(r.layout.encode_word(tag, d)),
            Err(_) => Op::Slot {
                route: idx,
                tag,
                data,
            },
        };
        stage.kw += 1;
        stage.writes += redundancy as u64;
        stage.write_bytes += redundancy as u64 * slot_len as u64;
        stage.immediates += immediate as u64;
        stage.items[stage.len] = MaybeUninit::new(Staged {
            store: r.store,
            op,
            immediate,
            n: redundancy,
            offs,
        });
        stage.len += 1;
        true
    }

    /// Route and hash one Key-Increment report into `stage` ([DTA A.4] Algorithm 5: the
    /// N counter indices are computed here, the FETCH_ADDs happen in [`Self::write_stage`]).
    /// Returns false, leaving `stage` unchanged, as [`Self::stage_key_write`].
    #[inline(always)]
    fn stage_key_increment(
        &self,
        stage: &mut Stage<'_>,
        routes: &mut RouteCache,
        key: &[u8],
        counter: u64,
        redundancy: u8,
        immediate: bool,
    ) -> bool {
        debug_assert!(stage.len < STAGE);
        if !(1..=STAGE_MAX_N as u8).contains(&redundancy) {
            return false;
        }
        let idx = match routes.ki {
            Some((s, i)) if s == key.len() => i,
            _ => match self
                .key_increment
                .iter()
                .position(|r| r.layout.key_len() == key.len())
            {
                Some(i) => {
                    routes.ki = Some((key.len(), i));
                    i
                }
                None => return false,
            },
        };
        let r = &self.key_increment[idx];
        if redundancy != r.layout.redundancy() {
            // Not the store's N: the slow path rejects it (`redundancy_mismatch`).
            return false;
        }
        if self.store_refuses(r.store, stage.src) {
            return true;
        }
        let mut offs = [0u64; MAX_REDUNDANCY as usize];
        r.layout.counter_offsets(key, redundancy, &mut offs);
        stage.ki += 1;
        stage.fetch_adds += redundancy as u64;
        stage.immediates += immediate as u64;
        stage.items[stage.len] = MaybeUninit::new(Staged {
            store: r.store,
            op: Op::Add(counter),
            immediate,
            n: redundancy,
            offs,
        });
        stage.len += 1;
        true
    }

    /// Whether `store`'s allow-list refuses `src`; a refusal is counted.
    #[inline]
    fn store_refuses(&self, store: usize, src: IpAddr) -> bool {
        let refused = !allowed(&self.store_allow, store, src);
        if refused {
            self.stats.reject(Reason::SourceNotAllowed);
        }
        refused
    }

    /// Execute a stage's memory operations in report order and add its counters once: every
    /// line prefetched first, then the writes and FETCH_ADDs. A stage for one store of a sink
    /// that maps it ([`Sinks::region_mem`]) goes straight to the mapped memory, the same
    /// operations with the same effect, counted for the meter as if issued one by one.
    #[inline(always)]
    pub(super) fn write_stage(&mut self, stage: &mut Stage<'_>) {
        if stage.len != 0 {
            self.write_staged(stage);
        }
    }

    /// [`Self::write_stage`] of a stage that holds reports.
    #[inline]
    fn write_staged(&mut self, stage: &mut Stage<'_>) {
        let stats = &*self.stats;
        // SAFETY: items[..len] were initialised by `stage` (written before len grew).
        let items = unsafe { &*(&stage.items[..stage.len] as *const _ as *const [Staged<'_>]) };
        let store = items[0].store;
        let direct = if items.iter().all(|it| it.store == store) {
            self.sinks.region_mem(store)
        } else {
            None
        };
        // The common stage writes every report at the same N: its loops then have a known
        // length (unrolled, no per-copy bounds checks).
        let n = items[0].n;
        let n = if items.iter().all(|it| it.n == n) {
            n
        } else {
            0
        };
        let mut tally = Tally::new();
        let kw = &self.key_write;
        let mut sink_errors = match direct {
            Some(mem) => {
                let d = &mut Direct(mem);
                let errors = match n {
                    1 => run::<1>(d, items, kw, &mut tally),
                    2 => run::<2>(d, items, kw, &mut tally),
                    3 => run::<3>(d, items, kw, &mut tally),
                    4 => run::<4>(d, items, kw, &mut tally),
                    _ => run::<0>(d, items, kw, &mut tally),
                };
                let ops = items.iter().map(|it| it.n as u64).sum();
                self.sinks.issued(ops);
                errors
            }
            None => run::<0>(&mut self.sinks, items, kw, &mut tally),
        };
        // The stores' live counters (`docs/regions.md` §1), added once per stage and store.
        for &(store, writes, added) in tally.stores() {
            if self.sinks.count(store, writes, added).is_err() {
                sink_errors += 1;
            }
        }
        add(&stats.reports[Opcode::KeyWrite as usize - 1], stage.kw);
        add(&stats.reports[Opcode::KeyIncrement as usize - 1], stage.ki);
        add(&stats.immediates, stage.immediates);
        add(&stats.writes, stage.writes);
        add(&stats.write_bytes, stage.write_bytes);
        add(&stats.fetch_adds, stage.fetch_adds);
        add(&stats.redundancy_lowered, stage.lowered);
        if sink_errors > 0 {
            stats.reject_n(Reason::SinkError, sink_errors);
        }
        stage.clear();
    }
}

/// Per store of a stage: (store, copies written, Key-Increment total) of the reports written
/// without error. A stage of `STAGE` reports spans at most `STAGE` stores.
struct Tally {
    entries: [(usize, u64, u64); STAGE],
    used: usize,
}

impl Tally {
    #[inline(always)]
    fn new() -> Self {
        Tally {
            entries: [(0, 0, 0); STAGE],
            used: 0,
        }
    }

    #[inline(always)]
    fn add(&mut self, store: usize, writes: u64, added: u64) {
        let used = &mut self.entries[..self.used];
        match used.iter_mut().find(|t| t.0 == store) {
            Some(t) => {
                t.1 += writes;
                t.2 = t.2.wrapping_add(added);
            }
            None => {
                self.entries[self.used] = (store, writes, added);
                self.used += 1;
            }
        }
    }

    fn stores(&self) -> &[(usize, u64, u64)] {
        &self.entries[..self.used]
    }
}

/// Where a stage's memory operations go: the sinks, or straight into one store's mapped memory.
/// Each operation returns true if it failed (a failed report is counted as a sink error).
trait StageOps {
    fn prefetch(&self, store: usize, offs: &[u64]);
    fn word(&mut self, store: usize, offs: &[u64], word: u64, immediate: bool) -> bool;
    fn slot(&mut self, store: usize, offs: &[u64], slot: &[u8], immediate: bool) -> bool;
    fn add(&mut self, store: usize, offs: &[u64], counter: u64) -> bool;
}

impl<S: Sinks> StageOps for S {
    #[inline(always)]
    fn prefetch(&self, store: usize, offs: &[u64]) {
        self.prefetch_at(store, offs)
    }
    #[inline(always)]
    fn word(&mut self, store: usize, offs: &[u64], word: u64, immediate: bool) -> bool {
        self.write_u64_at(store, offs, word, immediate).is_err()
    }
    #[inline(always)]
    fn slot(&mut self, store: usize, offs: &[u64], slot: &[u8], immediate: bool) -> bool {
        let mut failed = false;
        for &o in offs {
            failed |= self.write(store, o, slot, immediate).is_err();
        }
        failed
    }
    #[inline(always)]
    fn add(&mut self, store: usize, offs: &[u64], counter: u64) -> bool {
        self.fetch_add_at(store, offs, counter).is_err()
    }
}

/// One store's mapped memory: what the co-located sink does with each operation.
struct Direct<'m>(&'m RegionMem);

impl StageOps for Direct<'_> {
    #[inline(always)]
    fn prefetch(&self, _: usize, offs: &[u64]) {
        self.0.prefetch_at(offs)
    }
    #[inline(always)]
    fn word(&mut self, _: usize, offs: &[u64], word: u64, _: bool) -> bool {
        self.0.store_u64_at(offs, word).is_err()
    }
    #[inline(always)]
    fn slot(&mut self, _: usize, offs: &[u64], slot: &[u8], _: bool) -> bool {
        let mut failed = false;
        for &o in offs {
            failed |= self.0.write(o, slot).is_err();
        }
        failed
    }
    #[inline(always)]
    fn add(&mut self, _: usize, offs: &[u64], counter: u64) -> bool {
        self.0.fetch_add_u64_at(offs, counter).is_err()
    }
}

/// Issue a stage's operations on `ops` in report order, every line prefetched first (the
/// hashing is done, so the prefetch loop is a few instructions per line and the core keeps as
/// many misses and page walks in flight as it can). Returns the reports that failed; the
/// reports written are tallied per store.
/// `N`: every item's N, or 0 for each item's own.
#[inline(always)]
fn run<const N: usize>(
    ops: &mut impl StageOps,
    items: &[Staged<'_>],
    key_write: &[KeyWriteRoute],
    tally: &mut Tally,
) -> u64 {
    let copies = |it: &Staged<'_>| -> usize {
        if N == 0 {
            it.n as usize
        } else {
            N
        }
    };
    for it in items {
        ops.prefetch(it.store, &it.offs[..copies(it)]);
    }
    let mut sink_errors = 0;
    for it in items {
        let offs = &it.offs[..copies(it)];
        let (failed, added) = match it.op {
            // [DTA A.1] Algorithm 1: N identical slots, encoded by the store's one encoder (an
            // 8-byte slot is one word, stored by one aligned store).
            Op::Word(word) => (ops.word(it.store, offs, word, it.immediate), 0),
            Op::Slot { route, tag, data } => {
                let mut slot = [0u8; MAX_SLOT];
                let failed = match key_write[route].layout.encode_slot(tag, data, &mut slot) {
                    Ok(len) => ops.slot(it.store, offs, &slot[..len], it.immediate),
                    Err(_) => true,
                };
                (failed, 0)
            }
            Op::Add(counter) => (ops.add(it.store, offs, counter), counter),
        };
        sink_errors += failed as u64;
        if !failed {
            tally.add(it.store, offs.len() as u64, added);
        }
    }
    sink_errors
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use dta_store::{KeyIncrementLayout, KeyWriteLayout, VecSink};
    use dta_wire::Report;

    use super::super::tests::{datagram, infos, src, translator, KI, KW};
    use crate::reason::Reason;

    /// A datagram staged and written leaves the image the store layouts give report by
    /// report, at every redundancy the stores accept, and counts once per report.
    #[test]
    fn staged_writes_equal_the_layouts_apply() {
        let mut t = translator();
        let infos = infos();
        let kwl = KeyWriteLayout::new(&infos[KW].header).unwrap();
        let kil = KeyIncrementLayout::new(&infos[KI].header).unwrap();
        let mut want_kw = VecSink::new(infos[KW].header.data_len as usize);
        let mut want_ki = VecSink::new(infos[KI].header.data_len as usize);
        let keys: Vec<[u8; 4]> = (0u32..40).map(|k| (k * 7919).to_be_bytes()).collect();
        let mut reports = vec![];
        for (i, k) in keys.iter().enumerate() {
            let n = 1 + (i % 4) as u8;
            reports.push(Report::KeyWrite {
                key: k,
                data: &k[..],
                redundancy: n,
                immediate: false,
            });
            // Key-Increment only at the store's N (any other is `redundancy_mismatch`).
            reports.push(Report::KeyIncrement {
                key: k,
                counter: i as u64,
                redundancy: kil.redundancy(),
                immediate: false,
            });
            kwl.apply(k, k, n, &mut want_kw).unwrap();
            kil.apply(k, i as u64, kil.redundancy(), &mut want_ki)
                .unwrap();
        }
        // More reports than one stage holds.
        for chunk in reports.chunks(40) {
            t.handle_datagram(&datagram(false, 1, 0, chunk), src(), Instant::now());
        }
        assert_eq!(t.sinks().areas[KW], want_kw.bytes);
        assert_eq!(t.sinks().areas[KI], want_ki.bytes);
        // The live counters: what the layouts' apply counts report by report, added per stage.
        let tally = &t.sinks().tally;
        assert_eq!(tally[KW], (want_kw.tally.writes, want_kw.tally.added));
        assert_eq!(tally[KI], (want_ki.tally.writes, want_ki.tally.added));
        assert_eq!(want_ki.tally.added, (0..40).sum::<u64>());
        let s = t.stats();
        assert_eq!(s.reports_of(dta_wire::Opcode::KeyWrite), 40);
        assert_eq!(s.reports_of(dta_wire::Opcode::KeyIncrement), 40);
        assert_eq!(s.total_rejected(), 0);
    }

    #[test]
    fn a_failing_sink_counts_one_sink_error_per_report() {
        let mut t = translator();
        t.sinks_mut().fail = true;
        let r = Report::KeyWrite {
            key: &[1; 4],
            data: &[2; 4],
            redundancy: 3,
            immediate: false,
        };
        t.handle_datagram(&datagram(false, 1, 0, &[r, r]), src(), Instant::now());
        assert_eq!(t.stats().rejected_by(Reason::SinkError), 2);
    }
}
