//! The translator proper: one datagram in, memory operations out.
//!
//! [`Translator::handle_datagram`] parses a datagram of either protocol, checks retransmittable
//! datagrams' sequence numbers, routes every report to the store of its primitive and shape, and
//! translates it (001 §4): Key-Write and Key-Increment straight through the store's layout;
//! Postcarding through the cache; Append through per-list batches; Sketch-Merge through
//! per-reporter column tracking and merging. Nothing here allocates per report or takes a lock.

use std::mem::MaybeUninit;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dta_store::key_write::MAX_SLOT;
use dta_store::{
    hash, AppendLayout, ApplyError, KeyIncrementLayout, KeyWriteLayout, PostcardingLayout, Region,
    SketchKind, SketchLayout, StoreInfo, StoreSpec, MAX_REDUNDANCY,
};
use dta_wire::native::{field, REPORT_HEADER_LEN};
use dta_wire::{native, prototype, Datagram, Opcode, Report};

use crate::append::{AppendBatcher, Batch};
use crate::config::TranslatorConfig;
use crate::postcard::{Chunk, Eviction, PostcardCache, MAX_HOPS, MAX_KEY};
use crate::sequence::{SequenceTracker, Verdict};
use crate::shard::{Forwarded, Shard};
use crate::sinks::{Sinks, StoreSink};
use crate::sketch::{ColumnVerdict, Merge, ReadyColumns, SketchAggregator};
use crate::stats::{add, Stats};

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("store layout: {0}")]
    Layout(String),
    #[error("two Append stores; one Append store holds all lists")]
    TwoAppendStores,
    #[error("two Sketch-Merge stores with sketch id {0}")]
    DuplicateSketch(u16),
    #[error("Postcarding store with B = {0} hops: the translator supports 1..=16")]
    TooManyHops(usize),
}

struct KeyWriteRoute {
    store: usize,
    layout: KeyWriteLayout,
}
struct KeyIncrementRoute {
    store: usize,
    layout: KeyIncrementLayout,
}
struct PostcardRoute {
    store: usize,
    layout: PostcardingLayout,
    cache: PostcardCache,
}
struct AppendRoute {
    store: usize,
    layout: AppendLayout,
    batcher: AppendBatcher,
}
struct SketchRoute {
    store: usize,
    sketch_id: u16,
    layout: SketchLayout,
    agg: SketchAggregator,
}

/// Reports staged per batch before their writes are issued (issue 4). 32 reports at N = 2 is 64
/// outstanding line prefetches, more than a core's fill buffers, so the hashing of the batch
/// overlaps the misses of its first reports.
const STAGE: usize = 32;
/// The batch path handles every redundancy the stores accept (1..=MAX_REDUNDANCY); `apply`
/// only classifies what it cannot stage.
const STAGE_MAX_N: usize = MAX_REDUNDANCY as usize;

/// One Key-Write or Key-Increment report, routed and hashed, waiting to be written.
#[derive(Clone, Copy)]
struct Staged<'a> {
    store: usize,
    increment: bool,
    immediate: bool,
    n: u8,
    slot_len: u8,
    csum: u32,
    offs: [u64; STAGE_MAX_N],
    data: &'a [u8],
    counter: u64,
}

/// A batch of staged reports and its counters, on the stack (no allocation).
struct Stage<'a> {
    items: [MaybeUninit<Staged<'a>>; STAGE],
    len: usize,
    kw: u64,
    ki: u64,
    immediates: u64,
    writes: u64,
    write_bytes: u64,
    fetch_adds: u64,
}

impl Stage<'_> {
    #[inline]
    fn new() -> Self {
        Stage {
            items: [const { MaybeUninit::uninit() }; STAGE],
            len: 0,
            kw: 0,
            ki: 0,
            immediates: 0,
            writes: 0,
            write_bytes: 0,
            fetch_adds: 0,
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
    }
}

/// The route of the last report shape seen in a datagram: routing once per shape.
#[derive(Default)]
struct RouteCache {
    kw: Option<((usize, usize), usize)>,
    ki: Option<(usize, usize)>,
}

/// A NACK waiting to be sent by the ingest loop.
#[derive(Debug, Clone, Copy)]
pub struct PendingNack {
    pub to: SocketAddr,
    pub buf: [u8; 24],
    pub len: usize,
}

impl PendingNack {
    pub fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// The translator over a set of stores and the sinks that reach them.
pub struct Translator<S: Sinks> {
    sinks: S,
    stats: Arc<Stats>,
    format: prototype::BaseFormat,
    nack_port: u16,
    postcard_timeout: Duration,
    append_flush: Duration,
    sketch_stall: Duration,
    key_write: Vec<KeyWriteRoute>,
    key_increment: Vec<KeyIncrementRoute>,
    postcarding: Vec<PostcardRoute>,
    append: Option<AppendRoute>,
    sketches: Vec<SketchRoute>,
    native_seq: SequenceTracker,
    prototype_seq: SequenceTracker,
    nacks: Vec<PendingNack>,
    last_append_flush: Instant,
    last_postcard_expire: Instant,
    shard: Option<Shard>,
}

fn reason(e: &ApplyError) -> &'static str {
    match e {
        ApplyError::Sink(_) => "sink_error",
        other => other.reason(),
    }
}

impl Translator<crate::sinks::RegionSinks> {
    /// The co-located translator: it maps the collector's `regions` and writes straight into
    /// them (shared memory).
    pub fn colocated(
        cfg: &TranslatorConfig,
        regions: Vec<Arc<Region>>,
        stats: Arc<Stats>,
    ) -> Result<Self, BuildError> {
        let infos = regions
            .iter()
            .map(|r| StoreInfo::from_region(r).map_err(|e| BuildError::Layout(e.to_string())))
            .collect::<Result<Vec<_>, _>>()?;
        Translator::new(cfg, &infos, crate::sinks::RegionSinks::new(regions), stats)
    }
}

impl<S: Sinks> Translator<S> {
    /// Build a translator for `stores` (indexed as `sinks` indexes them).
    pub fn new(
        cfg: &TranslatorConfig,
        stores: &[StoreInfo],
        sinks: S,
        stats: Arc<Stats>,
    ) -> Result<Self, BuildError> {
        let layout_err = |e: dta_store::StoreError| BuildError::Layout(e.to_string());
        let mut t = Translator {
            sinks,
            stats,
            format: cfg.prototype_header.into(),
            nack_port: cfg.nack_port,
            postcard_timeout: Duration::from_millis(cfg.postcard_timeout_ms),
            append_flush: Duration::from_millis(cfg.append_flush_ms),
            sketch_stall: Duration::from_millis(cfg.sketch_stall_ms),
            key_write: vec![],
            key_increment: vec![],
            postcarding: vec![],
            append: None,
            sketches: vec![],
            native_seq: SequenceTracker::new(
                32,
                Duration::from_millis(cfg.nack_interval_ms),
                Duration::from_millis(cfg.resync_after_ms),
            ),
            prototype_seq: SequenceTracker::new(
                8,
                Duration::from_millis(cfg.nack_interval_ms),
                Duration::from_millis(cfg.resync_after_ms),
            ),
            nacks: Vec::with_capacity(64),
            last_append_flush: Instant::now(),
            last_postcard_expire: Instant::now(),
            shard: None,
        };
        for (store, info) in stores.iter().enumerate() {
            let h = &info.header;
            match &h.spec {
                StoreSpec::KeyWrite(_) => t.key_write.push(KeyWriteRoute {
                    store,
                    layout: KeyWriteLayout::new(h).map_err(layout_err)?,
                }),
                StoreSpec::KeyIncrement(_) => t.key_increment.push(KeyIncrementRoute {
                    store,
                    layout: KeyIncrementLayout::new(h).map_err(layout_err)?,
                }),
                StoreSpec::Postcarding(_) => {
                    let layout = PostcardingLayout::new(h).map_err(layout_err)?;
                    if layout.hops() > MAX_HOPS {
                        return Err(BuildError::TooManyHops(layout.hops()));
                    }
                    let cache = PostcardCache::new(cfg.postcard_cache_entries, layout.hops() as u8);
                    t.postcarding.push(PostcardRoute {
                        store,
                        layout,
                        cache,
                    });
                }
                StoreSpec::Append(_) => {
                    if t.append.is_some() {
                        return Err(BuildError::TwoAppendStores);
                    }
                    let layout = AppendLayout::new(h).map_err(layout_err)?;
                    let mut heads = info.append_heads.clone();
                    heads.resize(layout.lists() as usize, 0);
                    let batcher = AppendBatcher::new(layout.entry_len(), layout.batch(), heads);
                    t.append = Some(AppendRoute {
                        store,
                        layout,
                        batcher,
                    });
                }
                StoreSpec::SketchMerge(spec) => {
                    if t.sketches.iter().any(|s| s.sketch_id == spec.sketch_id) {
                        return Err(BuildError::DuplicateSketch(spec.sketch_id));
                    }
                    let layout = SketchLayout::new(h).map_err(layout_err)?;
                    let merge = match spec.kind {
                        SketchKind::CountMin { rows, .. } => Merge::Sum {
                            rows: rows as usize,
                        },
                        SketchKind::HyperLogLog {
                            registers_per_column,
                            ..
                        } => Merge::Max {
                            width: registers_per_column as usize,
                        },
                    };
                    let agg = SketchAggregator::new(
                        merge,
                        layout.columns(),
                        spec.reporters,
                        cfg.sketch_batch_columns,
                    );
                    t.sketches.push(SketchRoute {
                        store,
                        sketch_id: spec.sketch_id,
                        layout,
                        agg,
                    });
                }
            }
        }
        Ok(t)
    }

    /// Make this translator one thread of a group sharing the stores ([`crate::shard`]): it
    /// keeps the state of the Postcarding flows, Append lists and sketches it owns, hands other
    /// threads' to them, and applies what they hand it ([`Self::drain_inbox`], also run by
    /// [`Self::tick`]).
    pub fn with_shard(mut self, shard: Shard) -> Self {
        self.shard = Some(shard);
        self
    }

    pub fn shard(&self) -> Option<&Shard> {
        self.shard.as_ref()
    }

    /// Apply the reports other threads handed to this one (their state is this thread's).
    /// Returns how many.
    pub fn drain_inbox(&mut self, now: Instant) -> usize {
        let mut n = 0;
        while let Some(f) = self.shard.as_ref().and_then(Shard::pop) {
            if let Some(report) = f.report() {
                self.apply(&report, f.reporter, f.src, now);
            }
            n += 1;
        }
        n
    }

    /// Hand `report` to the thread that owns its state, if that is another one; true if so.
    /// Waits (applying this thread's own inbox meanwhile, so two threads waiting on each
    /// other both progress) while the owner's inbox is full.
    fn forward(
        &mut self,
        report: &Report<'_>,
        reporter: u32,
        src: SocketAddr,
        now: Instant,
    ) -> bool {
        let Some(shard) = &self.shard else {
            return false;
        };
        let Some(owner) = shard.owner(report).filter(|&o| o != shard.index()) else {
            return false;
        };
        let Some(mut f) = Forwarded::new(report, reporter, src) else {
            return false; // not encodable: let this thread apply (and reject) it
        };
        loop {
            match self.shard.as_ref().map(|s| s.forward(owner, f)) {
                Some(Ok(())) | None => break,
                Some(Err(back)) => {
                    f = back;
                    self.drain_inbox(now);
                    std::thread::yield_now();
                }
            }
        }
        add(&self.stats.forwarded, 1);
        true
    }

    pub fn stats(&self) -> &Arc<Stats> {
        &self.stats
    }

    pub fn sinks(&self) -> &S {
        &self.sinks
    }

    pub fn sinks_mut(&mut self) -> &mut S {
        &mut self.sinks
    }

    /// NACKs produced since the last call, for the ingest loop to send.
    pub fn drain_nacks(&mut self) -> std::vec::Drain<'_, PendingNack> {
        self.nacks.drain(..)
    }

    /// Handle one UDP payload received from `src`.
    pub fn handle_datagram(&mut self, buf: &[u8], src: SocketAddr, now: Instant) {
        add(&self.stats.datagrams, 1);
        add(&self.stats.bytes, buf.len() as u64);
        match dta_wire::parse(buf, self.format) {
            Err(e) => self.stats.wire_error(e),
            Ok(Datagram::Prototype(repr)) => {
                if let (true, Some(seq)) = (repr.base.retransmittable, repr.base.seqnum) {
                    let peer = peer_key(src.ip());
                    match self.prototype_seq.check(peer, seq as u32, now) {
                        Verdict::Apply => {}
                        Verdict::Resync => {
                            add(&self.stats.resyncs, 1);
                        }
                        Verdict::Duplicate => {
                            add(&self.stats.duplicates, 1);
                            return;
                        }
                        Verdict::Gap { nack } => {
                            self.stats.apply_error("out_of_order");
                            if let Some(expected) = nack {
                                let n = prototype::NackRepr {
                                    seqnum: expected as u8,
                                    nack: true,
                                };
                                let mut b = [0u8; 24];
                                if let Ok(len) = n.emit(&mut b) {
                                    self.queue_nack(src, b, len);
                                }
                            }
                            return;
                        }
                    }
                }
                // The prototype carries no priority: count it as medium.
                add(&self.stats.by_priority[1], 1);
                self.apply(&repr.report, 0, src, now);
            }
            Ok(Datagram::Native(d)) => {
                let h = d.header;
                if h.kind != native::Kind::Reports {
                    // NACKs travel translator -> reporter; one arriving here is misdirected.
                    self.stats.wire_error(dta_wire::Error::UnknownKind);
                    return;
                }
                if h.retransmittable {
                    match self.native_seq.check(h.reporter_id as u64, h.seq, now) {
                        Verdict::Apply => {}
                        Verdict::Resync => {
                            add(&self.stats.resyncs, 1);
                        }
                        Verdict::Duplicate => {
                            add(&self.stats.duplicates, 1);
                            return;
                        }
                        Verdict::Gap { nack } => {
                            self.stats.apply_error("out_of_order");
                            if let Some(expected) = nack {
                                self.queue_native_nack(src, h.reporter_id, expected, None);
                            }
                            return;
                        }
                    }
                }
                add(&self.stats.by_priority[h.priority as usize], 1);
                // Batched apply (issue 4; 001 §6 "the translator … batches"): Key-Write and
                // Key-Increment reports are routed once per shape, hashed and their lines
                // prefetched, then written together; counters are added once per batch. Other
                // primitives flush the batch first, so memory operations keep report order.
                let mut stage = Stage::new();
                let mut routes = RouteCache::default();
                // One pass over the validated report bytes: Key-Write and Key-Increment are
                // read straight from their headers (no `Report` built); anything else is
                // decoded and takes `apply`.
                let mut rest = d.report_bytes();
                for _ in 0..h.count {
                    if stage.len == STAGE {
                        self.write_stage(&mut stage);
                    }
                    // In bounds: `Datagram::parse` checked every report header and body.
                    let (op, flags) = (rest[field::R_OPCODE], rest[field::R_FLAGS]);
                    let k = rest[field::R_KEY_LEN] as usize;
                    let redundancy = (flags & field::R_REDUNDANCY_MASK) + 1;
                    let immediate = flags & field::R_FLAG_IMMEDIATE != 0;
                    let staged = if op == Opcode::KeyWrite as u8 {
                        let len = REPORT_HEADER_LEN + k + rest[field::R_DATA_LEN] as usize;
                        let (key, data) = rest[REPORT_HEADER_LEN..len].split_at(k);
                        self.stage_key_write(
                            &mut stage,
                            &mut routes,
                            key,
                            data,
                            redundancy,
                            immediate,
                        )
                        .then_some(len)
                    } else if op == Opcode::KeyIncrement as u8 {
                        let len = REPORT_HEADER_LEN + k + 8;
                        let (key, counter) = rest[REPORT_HEADER_LEN..len].split_at(k);
                        let counter = u64::from_be_bytes(counter.try_into().unwrap_or([0; 8]));
                        self.stage_key_increment(
                            &mut stage,
                            &mut routes,
                            key,
                            counter,
                            redundancy,
                            immediate,
                        )
                        .then_some(len)
                    } else {
                        None
                    };
                    let len = match staged {
                        Some(len) => len,
                        None => {
                            let p = native::ReportPacket::new_unchecked(rest);
                            let Ok(report) = p.report() else {
                                break; // cannot happen on a validated datagram
                            };
                            self.write_stage(&mut stage);
                            self.apply(&report, h.reporter_id, src, now);
                            p.total_len()
                        }
                    };
                    rest = &rest[len..];
                }
                self.write_stage(&mut stage);
            }
        }
    }

    fn queue_nack(&mut self, src: SocketAddr, buf: [u8; 24], len: usize) {
        if self.nacks.len() < self.nacks.capacity() {
            self.nacks.push(PendingNack {
                to: SocketAddr::new(src.ip(), self.nack_port),
                buf,
                len,
            });
            add(&self.stats.nacks_sent, 1);
        }
    }

    fn queue_native_nack(
        &mut self,
        src: SocketAddr,
        reporter_id: u32,
        seq: u32,
        sketch: Option<native::SketchNack>,
    ) {
        let n = native::NackRepr {
            reporter_id,
            seq,
            sketch,
        };
        let mut b = [0u8; 24];
        if let Ok(len) = n.emit(&mut b) {
            self.queue_nack(src, b, len);
        }
    }

    /// Translate one report.
    pub fn apply(&mut self, report: &Report<'_>, reporter: u32, src: SocketAddr, now: Instant) {
        if matches!(
            report,
            Report::KeyWrite { .. } | Report::KeyIncrement { .. }
        ) {
            let mut stage = Stage::new();
            if self.stage(&mut stage, &mut RouteCache::default(), report) {
                self.write_stage(&mut stage);
                return;
            }
        }
        if self.forward(report, reporter, src, now) {
            return;
        }
        let stats = &*self.stats;
        stats.report(report.opcode());
        if report.immediate() {
            add(&stats.immediates, 1);
        }
        let result: Result<(), &'static str> = match *report {
            // Staging above applied every Key-Write and Key-Increment a store can take; what
            // is left is rejected, for the reason its store's layout would give.
            Report::KeyWrite { key, data, .. } => {
                let shape = |r: &KeyWriteRoute| {
                    r.layout.key_len() == key.len() && r.layout.data_len() == data.len()
                };
                Err(unstaged(self.key_write.iter().any(shape)))
            }
            Report::KeyIncrement { key, .. } => {
                let shape = |r: &KeyIncrementRoute| r.layout.key_len() == key.len();
                Err(unstaged(self.key_increment.iter().any(shape)))
            }
            Report::Append {
                list_id,
                data,
                immediate,
            } => match self.append.as_mut() {
                None => Err("no_store"),
                Some(r) if list_id >= r.layout.lists() => Err("bad_list_id"),
                Some(r) if data.len() != r.layout.entry_len() => Err("bad_data_len"),
                Some(r) => {
                    let (layout, store, sinks) = (&r.layout, r.store, &mut self.sinks);
                    r.batcher
                        .push(list_id, data, immediate, |b| {
                            write_batch(layout, store, sinks, stats, b)
                        })
                        .map_err(|e| reason(&e))
                }
            },
            Report::Postcard {
                key,
                hop,
                path_len,
                value,
                immediate,
            } => match self
                .postcarding
                .iter_mut()
                .find(|r| r.layout.key_len() == key.len())
            {
                None => Err("no_store"),
                Some(r) if hop as usize >= r.layout.hops() => Err("bad_hop"),
                Some(_) if key.len() > MAX_KEY => Err("bad_key_len"),
                Some(r) => {
                    let (layout, store, sinks) = (&r.layout, r.store, &mut self.sinks);
                    let mut err = Ok(());
                    r.cache
                        .insert(key, hop, path_len, value, immediate, now, |chunk, why| {
                            let res = write_chunk(layout, store, sinks, stats, chunk, why);
                            if err.is_ok() {
                                err = res;
                            }
                        });
                    err.map_err(|e| reason(&e))
                }
            },
            Report::SketchColumn {
                sketch_id,
                column,
                epoch,
                data,
                immediate,
            } => match self.sketches.iter_mut().find(|r| r.sketch_id == sketch_id) {
                None => Err("no_store"),
                Some(r) if column as u32 >= r.agg.columns() => Err("bad_data_len"),
                Some(r) if data.len() != r.agg.merge_kind().wire_len() => Err("bad_data_len"),
                Some(r) => {
                    let (layout, store, sinks) = (&r.layout, r.store, &mut self.sinks);
                    let verdict = r
                        .agg
                        .receive(reporter, src, epoch, column, data, now, |ready| {
                            write_columns(layout, store, sinks, stats, immediate, ready)
                        });
                    match verdict {
                        Ok(ColumnVerdict::Merged) => Ok(()),
                        Ok(ColumnVerdict::Duplicate) => {
                            add(&stats.duplicates, 1);
                            Ok(())
                        }
                        Ok(ColumnVerdict::Stale) => Err("stale_epoch"),
                        Ok(ColumnVerdict::OutOfOrder { column, epoch }) => {
                            self.queue_native_nack(
                                src,
                                reporter,
                                0,
                                Some(native::SketchNack {
                                    sketch_id,
                                    column,
                                    epoch,
                                }),
                            );
                            Err("out_of_order")
                        }
                        Err(e) => Err(reason(&e)),
                    }
                }
            },
        };
        if let Err(r) = result {
            self.stats.apply_error(r);
        }
    }

    /// Stage one Key-Write or Key-Increment report ([`Self::stage_key_write`],
    /// [`Self::stage_key_increment`]); false for any other primitive.
    #[inline]
    fn stage<'a>(
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

    /// Route, hash and prefetch one Key-Write report into `stage` (001 A.1 Algorithm 1: the N
    /// indices and the checksum `h1(K)` are computed here, the writes happen in
    /// [`Self::write_stage`]). Returns false, leaving `stage` unchanged, for a report the slow
    /// path must reject: no store of its shape, or redundancy out of 1..=MAX_REDUNDANCY.
    #[inline]
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
        let mut offs = [0u64; MAX_REDUNDANCY as usize];
        r.layout.slot_offsets(key, redundancy, &mut offs);
        for &o in &offs[..redundancy as usize] {
            self.sinks.prefetch(r.store, o);
        }
        let slot_len = r.layout.slot_len();
        stage.kw += 1;
        stage.writes += redundancy as u64;
        stage.write_bytes += redundancy as u64 * slot_len as u64;
        stage.immediates += immediate as u64;
        stage.items[stage.len] = MaybeUninit::new(Staged {
            store: r.store,
            increment: false,
            immediate,
            n: redundancy,
            slot_len: slot_len as u8,
            csum: hash::checksum(r.layout.hash(), key),
            offs,
            data,
            counter: 0,
        });
        stage.len += 1;
        true
    }

    /// Route, hash and prefetch one Key-Increment report into `stage` (001 A.4 Algorithm 5: the
    /// N counter indices are computed here, the FETCH_ADDs happen in [`Self::write_stage`]).
    /// Returns false, leaving `stage` unchanged, as [`Self::stage_key_write`].
    #[inline]
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
        let mut offs = [0u64; MAX_REDUNDANCY as usize];
        r.layout.counter_offsets(key, redundancy, &mut offs);
        for &o in &offs[..redundancy as usize] {
            self.sinks.prefetch(r.store, o);
        }
        stage.ki += 1;
        stage.fetch_adds += redundancy as u64;
        stage.immediates += immediate as u64;
        stage.items[stage.len] = MaybeUninit::new(Staged {
            store: r.store,
            increment: true,
            immediate,
            n: redundancy,
            slot_len: 0,
            csum: 0,
            offs,
            data: &[],
            counter,
        });
        stage.len += 1;
        true
    }

    /// Execute a stage's memory operations in report order and add its counters once.
    #[inline]
    fn write_stage(&mut self, stage: &mut Stage<'_>) {
        if stage.len == 0 {
            return;
        }
        let stats = &*self.stats;
        let mut sink_errors = 0u64;
        for item in &stage.items[..stage.len] {
            // SAFETY: items[..len] were initialised by `stage` (written before len grew).
            let it = unsafe { item.assume_init_ref() };
            let offs = &it.offs[..it.n as usize];
            let mut failed = false;
            if it.increment {
                for &o in offs {
                    failed |= self.sinks.fetch_add(it.store, o, it.counter).is_err();
                }
            } else if it.slot_len == 8 {
                // 001 A.1 Algorithm 1: N identical slots `h1(K) ‖ data`; with 4-byte data the
                // slot is one little-endian word, stored as such.
                let data = u32::from_le_bytes(it.data.try_into().unwrap_or([0; 4]));
                let word = (it.csum as u64 | (data as u64) << 32).to_le_bytes();
                for &o in offs {
                    failed |= self.sinks.write(it.store, o, &word, it.immediate).is_err();
                }
            } else {
                // 001 A.1 Algorithm 1: N identical slots `h1(K) ‖ data ‖ padding`.
                let mut slot = [0u8; MAX_SLOT];
                slot[..4].copy_from_slice(&it.csum.to_le_bytes());
                slot[4..4 + it.data.len()].copy_from_slice(it.data);
                let slot = &slot[..it.slot_len as usize];
                for &o in offs {
                    failed |= self.sinks.write(it.store, o, slot, it.immediate).is_err();
                }
            }
            sink_errors += failed as u64;
        }
        add(&stats.reports[Opcode::KeyWrite as usize - 1], stage.kw);
        add(&stats.reports[Opcode::KeyIncrement as usize - 1], stage.ki);
        add(&stats.immediates, stage.immediates);
        add(&stats.writes, stage.writes);
        add(&stats.write_bytes, stage.write_bytes);
        add(&stats.fetch_adds, stage.fetch_adds);
        if sink_errors > 0 {
            let i = crate::stats::APPLY_REASONS
                .iter()
                .position(|r| *r == "sink_error")
                .unwrap_or(0);
            add(&stats.apply_errors[i], sink_errors);
        }
        stage.clear();
    }

    /// Run the timers: write partial Append batches and expired Postcarding paths, NACK stalled
    /// Sketch-Merge reporters, and let the sink do its housekeeping (RDMA retransmission). Call
    /// it whenever the ingest loop is idle, and at least every few milliseconds.
    pub fn tick(&mut self, now: Instant) {
        self.drain_inbox(now);
        if self.sinks.poll().is_err() {
            self.stats.apply_error("sink_error");
        }
        if now.duration_since(self.last_append_flush) >= self.append_flush {
            self.last_append_flush = now;
            self.flush_appends();
        }
        if now.duration_since(self.last_postcard_expire) >= self.postcard_timeout / 2 {
            self.last_postcard_expire = now;
            self.expire_postcards(now, Some(self.postcard_timeout));
        }
        let mut stalled: [Option<(u32, SocketAddr, native::SketchNack)>; 16] = [None; 16];
        let mut n = 0;
        for r in &mut self.sketches {
            let sketch_id = r.sketch_id;
            r.agg
                .stalled(now, self.sketch_stall, |reporter, from, column, epoch| {
                    if n < stalled.len() {
                        stalled[n] = Some((
                            reporter,
                            from,
                            native::SketchNack {
                                sketch_id,
                                column,
                                epoch,
                            },
                        ));
                        n += 1;
                    }
                });
        }
        for (reporter, from, nack) in stalled.into_iter().flatten() {
            self.queue_native_nack(from, reporter, 0, Some(nack));
        }
    }

    fn flush_appends(&mut self) {
        let stats = &*self.stats;
        if let Some(r) = self.append.as_mut() {
            let (layout, store, sinks) = (&r.layout, r.store, &mut self.sinks);
            if let Err(e) = r
                .batcher
                .flush_partial(|b| write_batch(layout, store, sinks, stats, b))
            {
                stats.apply_error(reason(&e));
            }
        }
    }

    fn expire_postcards(&mut self, now: Instant, timeout: Option<Duration>) {
        let stats = &*self.stats;
        for r in &mut self.postcarding {
            let (layout, store, sinks) = (&r.layout, r.store, &mut self.sinks);
            r.cache.expire(now, timeout, |chunk, why| {
                if let Err(e) = write_chunk(layout, store, sinks, stats, chunk, why) {
                    stats.apply_error(reason(&e));
                }
            });
        }
    }

    /// Write out everything the translator holds: partial Append batches, partial paths, complete
    /// sketch columns. Called on shutdown and by tests.
    pub fn flush_all(&mut self) {
        self.drain_inbox(Instant::now());
        self.flush_appends();
        self.expire_postcards(Instant::now(), None);
        let stats = &*self.stats;
        for r in &mut self.sketches {
            let (layout, store, sinks) = (&r.layout, r.store, &mut self.sinks);
            if let Err(e) = r
                .agg
                .flush(|ready| write_columns(layout, store, sinks, stats, false, ready))
            {
                stats.apply_error(reason(&e));
            }
        }
        if self.sinks.flush().is_err() {
            stats.apply_error("sink_error");
        }
    }
}

/// Why a Key-Write or Key-Increment report was not staged: a store of its shape exists, so its
/// redundancy is out of range (what the layout's `apply` would say), or none does.
fn unstaged(has_store: bool) -> &'static str {
    if has_store {
        "bad_redundancy"
    } else {
        "no_store"
    }
}

fn peer_key(ip: IpAddr) -> u64 {
    match ip {
        IpAddr::V4(v4) => u32::from(v4) as u64,
        IpAddr::V6(v6) => {
            let o = v6.octets();
            u64::from_be_bytes([o[8], o[9], o[10], o[11], o[12], o[13], o[14], o[15]])
                ^ u64::from_be_bytes([o[0], o[1], o[2], o[3], o[4], o[5], o[6], o[7]])
        }
    }
}

fn write_batch<S: Sinks>(
    layout: &AppendLayout,
    store: usize,
    sinks: &mut S,
    stats: &Stats,
    b: Batch<'_>,
) -> Result<(), ApplyError> {
    if b.full {
        add(&stats.append_batches, 1);
    } else {
        add(&stats.append_partial_batches, 1);
    }
    let mut sink = StoreSink {
        sinks,
        store,
        immediate: b.immediate,
        stats,
    };
    layout.write_entries(b.list, b.first_index, b.entries, &mut sink)
}

fn write_chunk<S: Sinks>(
    layout: &PostcardingLayout,
    store: usize,
    sinks: &mut S,
    stats: &Stats,
    chunk: &Chunk,
    why: Eviction,
) -> Result<(), ApplyError> {
    let counter = match why {
        Eviction::Complete => &stats.postcard_chunks_complete,
        Eviction::Collision => &stats.postcard_chunks_collision,
        Eviction::Timeout | Eviction::Flush => &stats.postcard_chunks_timeout,
    };
    add(counter, 1);
    let mut sink = StoreSink {
        sinks,
        store,
        immediate: chunk.immediate,
        stats,
    };
    layout.apply_chunk(chunk.key(), &chunk.values[..layout.hops()], &mut sink)
}

fn write_columns<S: Sinks>(
    layout: &SketchLayout,
    store: usize,
    sinks: &mut S,
    stats: &Stats,
    immediate: bool,
    ready: ReadyColumns<'_>,
) -> Result<(), ApplyError> {
    add(&stats.sketch_columns_written, ready.count as u64);
    let mut sink = StoreSink {
        sinks,
        store,
        immediate,
        stats,
    };
    layout.write_columns(
        ready.first_column,
        ready.epoch,
        ready.reporters,
        ready.values,
        &mut sink,
    )
}
