// Size: the engine's ingress (allow-list, sequence tracker, meter admission, spill) is one path
// through one struct; routing, staging, dispatch and timers are its submodules.
//! The translator proper: one datagram in, memory operations out.
//!
//! [`Translator::handle_datagram`] checks the source against the allow-list, parses a datagram
//! of either protocol, admits sequenced datagrams through the tracker ([`crate::sequence`],
//! written once for both protocols), and hands every report on: Key-Write and Key-Increment to the
//! batch staging ([`staging`]) or, for a datagram of one shape, the lean path ([`lean`]),
//! everything else to the per-primitive dispatch ([`dispatch`]):
//! Postcarding through the cache, Append through per-list batches, Sketch-Merge through
//! per-reporter column tracking and merging ([DTA §4]). Routes to the stores are built once
//! ([`routes`]); the timers write out what waits ([`timers`]). Nothing here allocates per
//! report or takes a lock.

mod dispatch;
#[cfg(test)]
mod flow_tests;
mod lean;
mod routes;
mod rules_hook;
mod staging;
#[cfg(test)]
mod tests;
mod timers;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dta_store::{Region, StoreInfo};
use dta_wire::prefix::AllowList;
use dta_wire::{native, prototype, Datagram, Priority, Report};

use crate::config::TranslatorConfig;
use crate::meter::{Meter, Metered};
use crate::overload::{admission, Admission, NoticeLimiter};
use crate::reason::Reason;
use crate::sequence::{Nack, Numbering, Space, Tracker, Verdict};
use crate::shard::{Forwarded, Shard};
use crate::sinks::Sinks;
use crate::spill::Spill;
use crate::stats::{add, Stats};

use lean::Lean;
pub use routes::{unreachable_stores, BuildError};
use routes::{AppendRoute, KeyIncrementRoute, KeyWriteRoute, PostcardRoute, SketchRoute};
use staging::{RouteCache, Stage, STAGE};

/// NACKs queued between two sends of the ingest loop (one per received batch); more are not
/// queued (the tracker NACKs again later).
const NACK_QUEUE: usize = 256;

/// Longest control message (a congestion notice) with its authenticator.
pub const MAX_CONTROL_LEN: usize = 24 + dta_wire::auth::BOUND_TRAILER_LEN;

/// A NACK (or congestion notice) waiting to be sent by the ingest loop.
#[derive(Debug, Clone, Copy)]
pub struct PendingNack {
    pub to: SocketAddr,
    pub buf: [u8; MAX_CONTROL_LEN],
    pub len: usize,
}

impl PendingNack {
    pub fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// The log line of a source claiming more priority than its budget.
static DEMOTED: dta_log::Throttle = dta_log::Throttle::new(dta_log::DEFAULT_INTERVAL);

/// The translator over a set of stores and the sinks that reach them.
pub struct Translator<S: Sinks> {
    /// The sink, its operations counted for the meter.
    sinks: Metered<S>,
    /// The collector's write meter, shared by its translator threads ([`Self::with_meter`]).
    meter: Arc<Meter>,
    /// High-priority datagrams waiting for the budget ([`crate::spill`]).
    spill: Spill,
    /// Where a spilled datagram is copied back to be applied again.
    reinject_buf: Box<[u8]>,
    notice_limiter: NoticeLimiter,
    /// Each source's budget of high and medium priority ([`crate::claims`]).
    claims: crate::claims::Claims,
    /// When the sources demoted most were last published to the stats.
    last_claims_publish: Instant,
    notice_hold_ms: u32,
    /// Translator threads sharing the collector (the spill is divided among them).
    threads: usize,
    stats: Arc<Stats>,
    format: prototype::BaseFormat,

    postcard_timeout: Duration,
    append_flush: Duration,
    /// `recv_gather_us`, for the ingest loop ([`Self::recv_gather`]).
    recv_gather: Duration,
    sketch_stall: Duration,
    key_write: Vec<KeyWriteRoute>,
    key_increment: Vec<KeyIncrementRoute>,
    postcarding: Vec<PostcardRoute>,
    append: Option<AppendRoute>,
    sketches: Vec<SketchRoute>,
    /// Every sequence space, both protocols ([`crate::sequence`]).
    tracker: Tracker,
    /// NACKs and notices for the ingest loop to send ([`Outbox`]).
    outbox: Outbox,
    last_append_flush: Instant,
    last_postcard_expire: Instant,
    shard: Option<Shard>,
    /// Sources a datagram may come from at all.
    allow: AllowList,
    /// Per store (indexed as the sinks index stores), the sources its reports may come from,
    /// on top of `allow`; `None`: anyone `allow` lets in.
    store_allow: Vec<Option<AllowList>>,
    /// Store names, indexed as the sinks index stores (per-store settings are by name).
    store_names: Vec<String>,
    /// The translator rules ([`crate::rules`], [`rules_hook`]).
    rules: rules_hook::RuleHook,
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
    /// Make this translator one thread of a group sharing the stores ([`crate::shard`]): it
    /// keeps the state of the Postcarding flows, Append lists and sketches it owns, hands other
    /// threads' to them, and applies what they hand it ([`Self::drain_inbox`], also run by
    /// [`Self::tick`]).
    pub fn with_shard(mut self, shard: Shard) -> Self {
        if self.threads > 1 {
            self.spill.suffix_file(shard.index());
        }
        self.shard = Some(shard);
        self
    }

    /// Share `meter` (one per collector, [`crate::meter`]) instead of this translator's own:
    /// every translator thread of a collector debits and reads the same bucket.
    pub fn with_meter(mut self, meter: Arc<Meter>) -> Self {
        self.meter = meter;
        self
    }

    /// How long the ingest loop sleeps after a partial receive batch
    /// ([`TranslatorConfig::recv_gather_us`]).
    pub fn recv_gather(&self) -> Duration {
        self.recv_gather
    }

    pub fn meter(&self) -> &Arc<Meter> {
        &self.meter
    }

    /// Datagrams waiting in the spill.
    pub fn spilled(&self) -> usize {
        self.spill.len()
    }

    /// The sources a datagram may come from at all (`[translator] allow`; set from the
    /// configuration by [`Translator::new`]).
    pub fn set_allow(&mut self, allow: AllowList) {
        self.allow = allow;
    }

    /// Restrict the reports for store `name` to sources in `allow` (on top of the translator's
    /// own allow-list).
    pub fn set_store_allow(&mut self, name: &str, allow: AllowList) -> Result<(), BuildError> {
        let i = self
            .store_names
            .iter()
            .position(|n| n == name)
            .ok_or_else(|| BuildError::UnknownStore(name.to_string()))?;
        self.store_allow[i] = Some(allow);
        Ok(())
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
        self.finish_reports(None, now);
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
        &self.sinks.inner
    }

    pub fn sinks_mut(&mut self) -> &mut S {
        &mut self.sinks.inner
    }

    /// NACKs produced since the last call, for the ingest loop to send.
    pub fn drain_nacks(&mut self) -> std::vec::Drain<'_, PendingNack> {
        self.outbox.queue.drain(..)
    }

    /// Handle one UDP payload received from `src`.
    pub fn handle_datagram(&mut self, buf: &[u8], src: SocketAddr, now: Instant) {
        let mut stage = Stage::new(src.ip());
        self.receive(buf, src, now, &mut stage);
        self.write_stage(&mut stage);
        self.finish_reports(Some(src), now);
    }

    /// Handle a received batch of UDP payloads (a `recvmmsg` batch), in order: the same as
    /// [`Self::handle_datagram`] of each, but the Key-Write and Key-Increment reports of
    /// consecutive datagrams are staged together (a stage spans datagrams, so more line misses
    /// overlap). Everything is written when it returns.
    pub fn handle_batch<'a>(
        &mut self,
        batch: impl IntoIterator<Item = (&'a [u8], SocketAddr)>,
        now: Instant,
    ) {
        let mut stage: Option<Stage<'a>> = None;
        let mut last = None;
        for (buf, src) in batch {
            let s = stage.get_or_insert_with(|| Stage::new(src.ip()));
            self.receive(buf, src, now, s);
            last = Some(src);
        }
        if let Some(s) = stage.as_mut() {
            self.write_stage(s);
        }
        if last.is_some() {
            self.finish_reports(last, now);
        }
    }

    /// One datagram of [`Self::handle_batch`]: its Key-Write and Key-Increment reports may be
    /// left in `stage`.
    fn receive<'a>(&mut self, buf: &'a [u8], src: SocketAddr, now: Instant, stage: &mut Stage<'a>) {
        add(&self.stats.datagrams, 1);
        add(&self.stats.bytes, buf.len() as u64);
        // Trust before work: a source outside the allow-list is neither parsed, applied,
        // sequenced nor NACKed (a NACK to a spoofed source would be a reflection).
        if !self.allow.allows(src.ip()) {
            self.stats.reject(Reason::SourceNotAllowed);
            return;
        }
        match dta_wire::parse(buf, self.format) {
            // A sealed hello is not a datagram `parse` takes whole (its trailer is the proof):
            // looked for only among what is not a report datagram, off the reports' path.
            Err(_) if is_hello(buf) => self.take_hello(buf, src, now),
            Err(e) => self.stats.wire_error(e),
            Ok(Datagram::Prototype(repr)) => {
                if let Some(seq) = repr.base.seqnum {
                    let space = Space::prototype(src.ip());
                    if !self.admit(&space, seq as u32, repr.base.retransmittable, now) {
                        return;
                    }
                }
                // The prototype carries no priority: count and meter it as medium. It has no
                // reporter id to address a congestion notice to.
                add(&self.stats.by_priority[1], 1);
                // What is staged is written first (report order; the meter sees it).
                self.write_stage(stage);
                if self.meter_admit(buf, src, Priority::Medium, None, now) {
                    self.apply_parsed(Datagram::Prototype(repr), src, now, stage);
                }
            }
            Ok(Datagram::Native(d)) => {
                let h = d.header;
                if h.kind == native::Kind::Hello {
                    self.take_hello(buf, src, now);
                    return;
                }
                if h.kind != native::Kind::Reports {
                    // NACKs travel translator -> reporter; one arriving here is misdirected.
                    self.stats.wire_error(dta_wire::Error::UnknownKind);
                    return;
                }
                let space = Space::native(src.ip(), h.reporter_id, h.priority);
                if !self.admit(&space, h.seq, h.retransmittable, now) {
                    return;
                }
                add(&self.stats.by_priority[h.priority as usize], 1);
                // The priority claimed, within the source's budget; beyond it, one step lower.
                let priority = self.claims.claim(src.ip(), h.priority, now);
                if priority != h.priority {
                    add(&self.stats.demoted[h.priority as usize], 1);
                    dta_log::warn_throttled!(
                        DEMOTED,
                        "source {} claims {} priority beyond its budget (high_per_source, \
                         medium_per_source): treated as {} and counted \
                         dta_translator_priority_demoted_total",
                        src.ip(),
                        h.priority.name(),
                        priority.name()
                    );
                }
                if self.meter.metered() {
                    // The meter's admission counts every write issued before it.
                    self.write_stage(stage);
                }
                if self.meter_admit(buf, src, priority, Some(h.reporter_id), now) {
                    self.apply_parsed(Datagram::Native(d), src, now, stage);
                }
            }
        }
    }

    /// A reporter's hello: its life kept by the control key's [`crate::control::ControlAuth`],
    /// every hello counted by outcome.
    fn take_hello(&mut self, buf: &[u8], src: SocketAddr, now: Instant) {
        let outcome = match &self.outbox.auth {
            Some(a) => a.hello(src.ip(), buf, now),
            None => crate::control::HelloOutcome::NoKey,
        };
        add(&self.stats.hellos[outcome.index()], 1);
    }

    /// Apply a datagram that passed the allow-list, the sequence check and the meter (or comes
    /// back from the spill, which skips both). Its Key-Write and Key-Increment reports may be
    /// left in `stage` (the caller writes it).
    fn apply_parsed<'a>(
        &mut self,
        d: Datagram<'a>,
        src: SocketAddr,
        now: Instant,
        stage: &mut Stage<'a>,
    ) {
        match d {
            Datagram::Prototype(repr) => {
                self.write_stage(stage);
                self.rules.engine.refresh();
                if let Some(report) = self.ruled(&repr.report, now) {
                    self.apply(&report, 0, src, now);
                }
                self.finish_reports(Some(src), now);
            }
            Datagram::Native(d) => {
                let h = d.header;
                // Batched apply ([DTA §6] "the translator … batches"): Key-Write and
                // Key-Increment reports are routed once per shape, hashed and their lines
                // prefetched, then written together; counters are added once per batch. Other
                // primitives flush the batch first, so memory operations keep report order.
                stage.src = src.ip();
                // Dynamic redundancy ([DTA-draft §6]): under sustained pressure, low-priority
                // Key-Write is written once instead of N times.
                stage.lower =
                    h.priority == Priority::Low && self.meter.metered() && self.meter.pressure(now);
                self.rules.engine.refresh();
                // The common datagram, one shape throughout, takes the lean path ([`lean`]).
                if let (Some(one), false) = (d.one_shape(), stage.lower) {
                    if self.apply_lean(&one, stage, h.reporter_id, src, now) == Lean::Done {
                        return;
                    }
                }
                let mut routes = RouteCache::default();
                // One pass over the validated reports (zero-copy views): Key-Write and
                // Key-Increment are staged; anything else flushes the stage and takes `apply`.
                for view in d.views() {
                    if stage.len == STAGE {
                        self.write_stage(stage);
                    }
                    if !self.rules.has_room() {
                        self.write_stage(stage);
                        self.finish_reports(Some(src), now);
                    }
                    let Some(report) = self.ruled(&view.report(), now) else {
                        continue;
                    };
                    if !self.stage(stage, &mut routes, &report) {
                        self.write_stage(stage);
                        self.apply(&report, h.reporter_id, src, now);
                    } else if report.immediate() {
                        // Announced once the stage is written.
                        self.rules.flag(&report);
                    }
                }
                // Reports the rules derived, and flagged reports, wait for the stage's writes:
                // only then is the stage written before the batch ends.
                if self.rules.waiting() {
                    self.write_stage(stage);
                    self.finish_reports(Some(src), now);
                }
            }
        }
    }

    /// Admission by priority against the write meter ([`crate::overload`]): true to apply the
    /// datagram now. A high-priority datagram that cannot be written now goes to the spill
    /// (dropped and counted when the spill is full); a low or medium one is dropped, counted,
    /// and its reporter (`reporter`, native only) sent a congestion notice.
    #[inline]
    fn meter_admit(
        &mut self,
        buf: &[u8],
        src: SocketAddr,
        priority: Priority,
        reporter: Option<u32>,
        now: Instant,
    ) -> bool {
        if !self.meter.metered() {
            return true;
        }
        self.sinks.settle(&self.meter);
        let level = self.meter.level(now);
        let p = priority as usize;
        match admission(priority, level, self.spill.is_empty()) {
            Admission::Admit => {
                add(&self.stats.overload_admitted[p], 1);
                true
            }
            Admission::Spill => {
                match self.spill.push(buf, src) {
                    Ok(()) => add(&self.stats.spilled, 1),
                    Err(full) => {
                        add(&self.stats.overload_dropped[p], 1);
                        add(&self.stats.spill_dropped, 1);
                        if full == crate::spill::Full::FileError {
                            add(&self.stats.spill_file_errors, 1);
                            self.stats.spill_file_error_at.store(
                                crate::stats::unix_ms(),
                                std::sync::atomic::Ordering::Relaxed,
                            );
                        }
                    }
                }
                self.stats
                    .spill_bytes
                    .store(self.spill.bytes(), std::sync::atomic::Ordering::Relaxed);
                false
            }
            Admission::Drop => {
                add(&self.stats.overload_dropped[p], 1);
                if let Some(r) = reporter {
                    self.notify(src, r, priority, now);
                }
                false
            }
        }
    }

    /// Queue a congestion notice to reporter `reporter_id` at `src`'s NACK port, at most one per
    /// source and reporter per `notice_interval_ms`: pause low priority for `notice_hold_ms`,
    /// and medium too when a medium datagram was dropped. High priority is never limited.
    fn notify(&mut self, src: SocketAddr, reporter_id: u32, dropped: Priority, now: Instant) {
        let key = peer_key(src.ip()) ^ (reporter_id as u64).rotate_left(29);
        if !self.notice_limiter.allow(key, self.meter.ns(now)) {
            return;
        }
        let n = native::NoticeRepr {
            reporter_id,
            hold_ms: self.notice_hold_ms,
            low_rate: 0,
            medium_rate: if dropped == Priority::Low {
                native::RATE_UNLIMITED
            } else {
                0
            },
        };
        let mut b = [0u8; 24];
        if let Ok(len) = n.emit(&mut b) {
            if self.queue_to_reporter(src, b, len) {
                add(&self.stats.notices_sent, 1);
            }
        }
    }

    /// Apply spilled datagrams again, oldest first, while the level is at `medium_threshold`
    /// (in the timer and before each received batch). Re-injected datagrams skip the sequence
    /// check (they passed it) and the admission. Returns how many.
    pub fn reinject(&mut self, now: Instant) -> usize {
        self.unspill(now, false)
    }

    /// Apply everything in the spill, whatever the budget (on stop, before the final flush;
    /// bounded by the spill's size). Returns how many.
    pub fn drain_spill(&mut self) -> usize {
        self.unspill(Instant::now(), true)
    }

    fn unspill(&mut self, now: Instant, regardless: bool) -> usize {
        if self.spill.is_empty() {
            return 0;
        }
        let mut buf = std::mem::take(&mut self.reinject_buf);
        let mut n = 0;
        loop {
            self.sinks.settle(&self.meter);
            if !regardless && !self.meter.level(now).medium_ok() {
                break;
            }
            let Some((len, src)) = self.spill.pop(&mut buf) else {
                break;
            };
            match dta_wire::parse(&buf[..len], self.format) {
                Ok(d) => {
                    let mut stage = Stage::new(src.ip());
                    self.apply_parsed(d, src, now, &mut stage);
                    self.write_stage(&mut stage);
                    self.finish_reports(Some(src), now);
                }
                // It parsed when spilled; a spill file altered underneath is counted as such.
                Err(e) => self.stats.wire_error(e),
            }
            n += 1;
        }
        self.reinject_buf = buf;
        add(&self.stats.reinjected, n as u64);
        add(&self.stats.spill_dropped, self.spill.take_lost());
        self.stats
            .spill_bytes
            .store(self.spill.bytes(), std::sync::atomic::Ordering::Relaxed);
        n
    }

    /// Sequence admission, the same for both protocols ([`crate::sequence`]): true to apply
    /// the datagram. A retransmittable duplicate is dropped; a gap is NACKed (rate-limited by the
    /// tracker) in the datagram's protocol, to the source's NACK port. Non-retransmittable
    /// datagrams are only accounted for (duplicates, losses) and always applied.
    fn admit(&mut self, space: &Space, number: u32, retransmittable: bool, now: Instant) -> bool {
        let verdict = self.tracker.check(space, number, retransmittable, now);
        if let Verdict::Gap { nack: Some(n) } = verdict {
            self.queue_seq_nack(space, n);
        }
        verdict.applies()
    }

    fn queue_seq_nack(&mut self, space: &Space, n: Nack) {
        if let Some((buf, len)) = seq_nack(space, n) {
            self.outbox.nack(space.ip, buf, len, &self.stats);
        }
    }

    fn queue_nack(&mut self, src: SocketAddr, buf: [u8; 24], len: usize) {
        self.outbox.nack(src.ip(), buf, len, &self.stats);
    }

    /// Queue a congestion notice to `src`'s NACK port for the ingest loop to send; false when
    /// the queue is full (it is not sent).
    fn queue_to_reporter(&mut self, src: SocketAddr, buf: [u8; 24], len: usize) -> bool {
        self.outbox.push(src.ip(), buf, len)
    }

    /// Authenticate what is sent to reporters with `auth` (`[translator] control_key_file`).
    pub fn set_control_auth(&mut self, auth: Arc<crate::control::ControlAuth>) {
        self.outbox.auth = Some(auth);
    }

    /// Share `budget` (one per collector) for the NACKs of this translator.
    pub fn with_nack_budget(mut self, budget: Arc<crate::control::NackBudget>) -> Self {
        self.outbox.budget = budget;
        self
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
            missing: 0,
        };
        let mut b = [0u8; 24];
        if let Ok(len) = n.emit(&mut b) {
            self.queue_nack(src, b, len);
        }
    }
}

/// A sequence NACK in the space's protocol: native selective (with the bitmap), prototype
/// "resend from".
fn seq_nack(space: &Space, n: Nack) -> Option<([u8; 24], usize)> {
    let mut b = [0u8; 24];
    let len = match space.numbering {
        Numbering::Prototype => prototype::NackRepr {
            seqnum: n.seq as u8,
            nack: true,
        }
        .emit(&mut b),
        Numbering::Native => native::NackRepr {
            reporter_id: space.reporter,
            seq: n.seq,
            sketch: None,
            missing: n.missing,
        }
        .emit(&mut b),
    };
    len.ok().map(|len| (b, len))
}

/// Queue a datagram for `ip`'s NACK port (a NACK or a congestion notice), if the queue
/// (bounded, drained by the ingest loop after each batch) has room: false when it had none.
/// What the translator sends reporters, queued for the ingest loop: NACKs within the shared
/// budget, everything authenticated when a control key is configured ([`crate::control`]).
pub(crate) struct Outbox {
    pub(crate) queue: Vec<PendingNack>,
    /// The reporters' NACK port.
    pub(crate) port: u16,
    pub(crate) auth: Option<Arc<crate::control::ControlAuth>>,
    pub(crate) budget: Arc<crate::control::NackBudget>,
}

impl Outbox {
    pub(crate) fn new(port: u16, budget: u64) -> Outbox {
        Outbox {
            queue: Vec::with_capacity(NACK_QUEUE),
            port,
            auth: None,
            budget: crate::control::NackBudget::new(budget),
        }
    }

    /// Room left in the queue.
    pub(crate) fn room(&self) -> usize {
        self.queue.capacity() - self.queue.len()
    }

    /// Queue a NACK to `ip` if the budget allows (counted `nacks_sent`, or
    /// `nacks_over_budget`: the tracker NACKs the gap again later).
    pub(crate) fn nack(&mut self, ip: IpAddr, buf: [u8; 24], len: usize, stats: &Stats) {
        if !self.budget.take(Instant::now()) {
            add(&stats.nacks_over_budget, 1);
            return;
        }
        if self.push(ip, buf, len) {
            add(&stats.nacks_sent, 1);
        }
    }

    /// Queue `buf[..len]` to `ip`'s NACK port, sealed when authenticating; false when full.
    pub(crate) fn push(&mut self, ip: IpAddr, buf: [u8; 24], len: usize) -> bool {
        if self.queue.len() == self.queue.capacity() {
            return false;
        }
        let mut b = [0u8; MAX_CONTROL_LEN];
        b[..len].copy_from_slice(&buf[..len]);
        // The prototype's 2-byte NACK has no room for a trailer (docs/security.md).
        let len = match &self.auth {
            Some(a) if len >= dta_wire::native::HEADER_LEN => a.seal(&mut b, len, ip),
            _ => len,
        };
        self.queue.push(PendingNack {
            to: SocketAddr::new(ip, self.port),
            buf: b,
            len,
        });
        true
    }
}

/// Whether `buf` is a native hello (kind 3), reporter to translator.
#[inline]
fn is_hello(buf: &[u8]) -> bool {
    native::Packet::new_checked(buf)
        .is_ok_and(|p| p.version() == native::VERSION && p.kind_raw() == native::Kind::Hello as u8)
}

/// A 64-bit key for a source address (IPv6 folded), for per-source limits.
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

/// Whether store `store`'s allow-list (if it has one) lets `src` in.
#[inline]
fn allowed(store_allow: &[Option<AllowList>], store: usize, src: IpAddr) -> bool {
    match store_allow.get(store) {
        Some(Some(a)) => a.allows(src),
        _ => true,
    }
}

#[cfg(test)]
mod ingress_tests {
    use std::time::Instant;

    use dta_wire::prototype::{BaseFormat, BaseRepr, Repr};
    use dta_wire::{Opcode, Report};

    use super::tests::{datagram, src, translator_with};
    use crate::config::{PrototypeHeader, TranslatorConfig};
    use crate::reason::Reason;

    const KW: Report<'static> = Report::KeyWrite {
        key: &[1, 2, 3, 4],
        data: &[5, 6, 7, 8],
        redundancy: 1,
        immediate: false,
    };

    fn proto(seq: u8, retransmittable: bool) -> Vec<u8> {
        let mut b = vec![0u8; 64];
        let r = Repr {
            base: BaseRepr {
                opcode: Opcode::KeyWrite,
                seqnum: Some(seq),
                immediate: false,
                retransmittable,
            },
            report: KW,
        };
        let n = r.emit(&mut b, BaseFormat::Long).unwrap();
        b.truncate(n);
        b
    }

    /// Sequence admission is one code path: both protocols apply in order and out of order
    /// within the window, drop retransmitted duplicates, and NACK a gap in their own NACK
    /// format, to the source's NACK port.
    #[test]
    fn admission_is_the_same_for_both_protocols() {
        let cfg = TranslatorConfig {
            prototype_header: PrototypeHeader::Long,
            nack_interval_ms: 0,
            ..TranslatorConfig::default()
        };
        let mut t = translator_with(&cfg);
        let now = Instant::now();
        // Native numbers past the first window (a new space below it starts at 0).
        let native = |seq: u32| datagram(true, 3, 1000 + seq, &[KW]);
        for (d, nack) in [
            (
                [10, 11, 11, 13, 12, 12].map(native),
                vec![0x11, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0x03, 0xf4],
            ),
            (
                [10, 11, 11, 13, 12, 12].map(|s| proto(s, true)),
                vec![12, 0x80],
            ),
        ] {
            let s = t.stats().clone();
            let (applied, dups) = (s.reports_of(Opcode::KeyWrite), count(&s.duplicates));
            for x in &d {
                t.handle_datagram(x, src(), now);
            }
            // 13 is applied ahead of the gap, 12 when it is resent; 11 and 12 again dropped.
            assert_eq!(s.reports_of(Opcode::KeyWrite) - applied, 4);
            assert_eq!(count(&s.duplicates) - dups, 2);
            let nacks: Vec<_> = t.drain_nacks().collect();
            assert_eq!(nacks.len(), 1);
            assert_eq!(nacks[0].to, (src().ip(), cfg.nack_port).into());
            assert_eq!(nacks[0].bytes(), &nack[..]);
        }
        // Both were medium (the prototype has no priority); nothing was lost.
        assert_eq!(count(&t.stats().duplicates_by_priority[1]), 4);
        assert_eq!(t.stats().lost.iter().map(count).sum::<u64>(), 0);
        assert_eq!(t.stats().rejected_by(Reason::OutOfOrder), 0);
    }

    /// A native NACK is selective: the lowest missing datagram and a bitmap of the missing
    /// ones after it, the datagrams the reporter resends.
    #[test]
    fn a_native_gap_is_nacked_with_the_missing_bitmap() {
        let mut t = translator_with(&TranslatorConfig::default());
        let now = Instant::now();
        for seq in [1020, 1023, 1025] {
            t.handle_datagram(&datagram(true, 7, seq, &[KW]), src(), now);
        }
        let nacks: Vec<_> = t.drain_nacks().collect();
        let parsed: Vec<_> = nacks
            .iter()
            .map(|n| dta_wire::native::NackRepr::parse(n.bytes()).unwrap())
            .collect();
        // 1023 reveals 1021 and 1022 (one NACK, 1021 + bit 0); 1025 reveals 1024 (its own NACK).
        assert_eq!(parsed.len(), 2);
        assert_eq!(
            (parsed[0].reporter_id, parsed[0].seq, parsed[0].missing),
            (7, 1021, 1)
        );
        assert_eq!(
            parsed[0].missing_seqs().collect::<Vec<_>>(),
            vec![1021, 1022]
        );
        assert_eq!(nacks[0].bytes().len(), 20);
        assert_eq!((parsed[1].seq, parsed[1].missing), (1024, 0));
        assert_eq!(t.stats().reports_of(Opcode::KeyWrite), 3);
    }

    /// Non-retransmittable datagrams are sequenced for accounting only: a repeat is applied
    /// (and counted), a gap is not NACKed, and what the window leaves behind is counted lost.
    #[test]
    fn non_retransmittable_datagrams_are_counted_never_dropped_or_nacked() {
        let cfg = TranslatorConfig {
            prototype_header: PrototypeHeader::Long,
            nack_interval_ms: 0,
            ..TranslatorConfig::default()
        };
        let mut t = translator_with(&cfg);
        let now = Instant::now();
        let s = t.stats().clone();
        for x in [1010, 1011, 1011, 1013]
            .map(|q| datagram(false, 3, q, &[KW]))
            .into_iter()
            .chain([10, 11, 11, 13].map(|q| proto(q, false)))
        {
            t.handle_datagram(&x, src(), now);
        }
        assert_eq!(s.reports_of(Opcode::KeyWrite), 8);
        assert_eq!(count(&s.duplicates_by_priority[1]), 2);
        assert_eq!(t.drain_nacks().count(), 0);
        // Native 1012 falls out of the window when 1269 slides it (W = 256); 1014..=1268 are
        // missing.
        t.handle_datagram(&datagram(false, 3, 1269, &[KW]), src(), now);
        assert_eq!(count(&s.lost[1]), 1);
        // The timer gives up the gaps resync_after has not filled: 255 native, 12 prototype.
        t.tick(now + std::time::Duration::from_millis(cfg.resync_after_ms + 1));
        assert_eq!(count(&s.lost[1]), 1 + 255 + 1);
        assert_eq!(count(&s.unrecovered), 0);
        assert_eq!(t.drain_nacks().count(), 0);
    }

    /// A tracker size that is not a bounded power of two is refused with a message, before
    /// anything is received; a valid one is exported.
    #[test]
    fn tracker_entries_are_validated_and_the_table_bytes_exported() {
        for bad in [0, 1000, 1 << 23] {
            let cfg = TranslatorConfig {
                tracker_entries: bad,
                ..TranslatorConfig::default()
            };
            let e = super::Translator::new(
                &cfg,
                &[],
                super::tests::Mem {
                    areas: vec![],
                    fail: false,
                    tally: vec![],
                    adds: vec![],
                    signals: Default::default(),
                },
                Default::default(),
            )
            .err()
            .expect("refused");
            assert!(e.to_string().contains("tracker_entries"), "{e}");
        }
        let t = translator_with(&TranslatorConfig {
            tracker_entries: 1 << 10,
            ..TranslatorConfig::default()
        });
        assert_eq!(
            count(&t.stats().tracker_bytes),
            (1 << 10) * 100 + (1 << 10) / 8
        );
    }

    fn count(c: &std::sync::atomic::AtomicU64) -> u64 {
        c.load(std::sync::atomic::Ordering::Relaxed)
    }

    #[test]
    fn a_native_nack_arriving_is_misdirected_and_nothing_is_applied_from_outside() {
        let mut t = translator_with(&TranslatorConfig::default());
        let mut nack = [0u8; 24];
        let n = dta_wire::native::NackRepr::new(1, 2)
            .emit(&mut nack)
            .unwrap();
        t.handle_datagram(&nack[..n], src(), Instant::now());
        assert_eq!(
            t.stats()
                .rejected_by(Reason::Wire(dta_wire::Error::UnknownKind)),
            1
        );
        t.handle_datagram(
            &datagram(false, 1, 0, &[KW]),
            "192.0.2.1:9".parse().unwrap(),
            Instant::now(),
        );
        assert_eq!(t.stats().rejected_by(Reason::SourceNotAllowed), 1);
        assert!(t.sinks().areas.iter().all(|a| a.iter().all(|&b| b == 0)));
    }
}
