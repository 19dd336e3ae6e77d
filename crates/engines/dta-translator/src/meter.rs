//! The write meter: one token bucket of memory writes per collector, shared lock-free by all of
//! its translator threads ([DTA-draft §4.2]: "flow control is achieved by a combination of
//! meters and per-reporter packet sequence trackers"; docs/flow-control.md).
//!
//! A token is one memory operation the sink issues: an RDMA WRITE, WRITE WITH IMMEDIATE or
//! FETCH_ADD (the shared-memory sink counts the same operations). The bucket refills at the
//! effective budget (writes per second) up to `burst` tokens; writes are debited exactly as the
//! sink issues them ([`Metered`]), so the level may go negative (debt) and admission waits for
//! the refill to repay it. The effective budget adapts to the sink's congestion signals (AIMD,
//! [`Meter::adapt`]). The level, as a fraction of `burst`, decides admission by priority
//! ([`crate::overload`]) and, when it stays low, lowered redundancy ([`Meter::pressure`]).
//!
//! Everything is an atomic: the refill is claimed by a compare-and-swap of its timestamp, a
//! debit is one `fetch_sub`, so threads never wait for each other.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use dta_store::SinkError;

use crate::config::FlowControlConfig;
use crate::sinks::{Congestion, Sinks};

/// Fixed point of the level: sub-tokens per write (refills of a fraction of a write add up).
const SCALE: i64 = 1024;
/// The refill runs at most once per this many nanoseconds (fewer compare-and-swaps between
/// threads; the tokens of the interval are not lost, they come with the next refill).
const REFILL_GRANULE_NS: u64 = 1_000;
/// Timestamps are stored plus one so that 0 means "never".
const NEVER: u64 = 0;

/// The shared write meter of one collector.
#[derive(Debug)]
pub struct Meter {
    epoch: Instant,
    /// The configured budget, writes/s; 0: unmetered.
    configured: u64,
    min_budget: u64,
    /// `burst` in sub-tokens.
    full: i64,
    adapt_interval_ns: u64,
    /// Admission levels in sub-tokens (thresholds x `full`).
    low_at: i64,
    medium_at: i64,
    redundancy_at: i64,
    redundancy_after_ns: u64,
    /// The bucket, in sub-tokens; negative: debt.
    level: AtomicI64,
    /// Nanoseconds since `epoch` the bucket was last refilled to.
    refilled: AtomicU64,
    /// The effective budget, writes/s.
    budget: AtomicU64,
    last_cut: AtomicU64,
    last_signal: AtomicU64,
    last_raise: AtomicU64,
    /// Since when (ns + 1) the level has been below `redundancy_at`; [`NEVER`]: it is not.
    below_since: AtomicU64,
}

/// Where the level stands against the admission thresholds (see [`crate::overload::admission`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Level {
    /// Sub-tokens in the bucket (negative: debt).
    pub raw: i64,
    pub low_at: i64,
    pub medium_at: i64,
}

impl Level {
    /// Low priority is admitted.
    pub fn low_ok(&self) -> bool {
        self.raw >= self.low_at
    }
    /// Medium priority is admitted; the spill is re-injected.
    pub fn medium_ok(&self) -> bool {
        self.raw >= self.medium_at
    }
    /// High priority is admitted (otherwise spilled).
    pub fn high_ok(&self) -> bool {
        self.raw > 0
    }
}

impl Meter {
    /// A meter for `cfg` (validated), full.
    pub fn new(cfg: &FlowControlConfig) -> Self {
        let full = cfg.burst.clamp(1, crate::config::MAX_BURST) as i64 * SCALE;
        let at = |f: f64| (f.clamp(0.0, 1.0) * full as f64) as i64;
        Meter {
            epoch: Instant::now(),
            configured: cfg.write_budget,
            min_budget: cfg.min_budget.min(cfg.write_budget),
            full,
            adapt_interval_ns: cfg.adapt_interval_ms.max(1) * 1_000_000,
            low_at: at(cfg.low_threshold),
            medium_at: at(cfg.medium_threshold),
            redundancy_at: at(cfg.redundancy_threshold),
            redundancy_after_ns: cfg.redundancy_after_ms * 1_000_000,
            level: AtomicI64::new(full),
            refilled: AtomicU64::new(0),
            budget: AtomicU64::new(cfg.write_budget),
            last_cut: AtomicU64::new(NEVER),
            last_signal: AtomicU64::new(NEVER),
            last_raise: AtomicU64::new(NEVER),
            below_since: AtomicU64::new(NEVER),
        }
    }

    /// The instant the meter's clock starts at (its creation).
    pub fn epoch(&self) -> Instant {
        self.epoch
    }

    /// Whether writes are metered (`write_budget` > 0).
    #[inline]
    pub fn metered(&self) -> bool {
        self.configured > 0
    }

    /// Nanoseconds from the meter's creation to `now` (0 before it).
    pub(crate) fn ns(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.epoch).as_nanos() as u64
    }

    /// Take `writes` tokens (the sink issued that many operations). The level may go negative.
    #[inline]
    pub fn debit(&self, writes: u64) {
        if writes > 0 {
            self.level.fetch_sub(
                (writes.min(i64::MAX as u64 / SCALE as u64) as i64) * SCALE,
                Relaxed,
            );
        }
    }

    /// Add the tokens the budget earned since the last refill, up to `burst`. Lock-free: the
    /// thread whose compare-and-swap moves the refill timestamp adds them.
    pub fn refill(&self, now: Instant) {
        let t = self.ns(now);
        let last = self.refilled.load(Relaxed);
        if t < last.saturating_add(REFILL_GRANULE_NS) {
            return;
        }
        let budget = self.budget.load(Relaxed) as u128;
        let earned = ((t - last) as u128 * budget * SCALE as u128 / 1_000_000_000) as i64;
        if earned == 0 {
            return;
        }
        if self
            .refilled
            .compare_exchange(last, t, Relaxed, Relaxed)
            .is_err()
        {
            return; // another thread refilled this interval
        }
        let full = self.full;
        let _ = self.level.fetch_update(Relaxed, Relaxed, |l| {
            Some(if l >= full {
                l
            } else {
                l.saturating_add(earned).min(full)
            })
        });
    }

    /// Refill, then the level against the thresholds; also tracks how long it has been below
    /// the redundancy threshold ([`Self::pressure`]).
    pub fn level(&self, now: Instant) -> Level {
        self.refill(now);
        let raw = self.level.load(Relaxed);
        let below = self.below_since.load(Relaxed);
        if raw < self.redundancy_at {
            if below == NEVER {
                let _ =
                    self.below_since
                        .compare_exchange(NEVER, self.ns(now) + 1, Relaxed, Relaxed);
            }
        } else if below != NEVER {
            self.below_since.store(NEVER, Relaxed);
        }
        Level {
            raw,
            low_at: self.low_at,
            medium_at: self.medium_at,
        }
    }

    /// The level as a fraction of `burst` (negative: debt), as last refilled.
    pub fn fraction(&self) -> f64 {
        self.level.load(Relaxed) as f64 / self.full as f64
    }

    /// Sustained pressure ([DTA-draft §6] "dynamic redundancies"): the level has been below
    /// `redundancy_threshold` for at least `redundancy_after_ms` (as of the last
    /// [`Self::level`]).
    pub fn pressure(&self, now: Instant) -> bool {
        let since = self.below_since.load(Relaxed);
        since != NEVER && self.ns(now) + 1 >= since.saturating_add(self.redundancy_after_ns)
    }

    /// The effective budget, writes/s.
    pub fn budget(&self) -> u64 {
        self.budget.load(Relaxed)
    }

    /// The control law (AIMD, docs/flow-control.md). `signals`: congestion signals the sink
    /// reported since the last call. A signal cuts the budget to half (floor `min_budget`), at
    /// most once per `adapt_interval`; an interval in which no signal arrived and nothing
    /// changed raises it by `write_budget / 16`, up to `write_budget`. Returns the budget.
    pub fn adapt(&self, signals: u64, now: Instant) -> u64 {
        if !self.metered() {
            return 0;
        }
        let t = self.ns(now) + 1;
        let iv = self.adapt_interval_ns;
        let since = |at: &AtomicU64| {
            let v = at.load(Relaxed);
            (v == NEVER || t >= v.saturating_add(iv), v)
        };
        if signals > 0 {
            self.last_signal.store(t, Relaxed);
            let (due, was) = since(&self.last_cut);
            if due
                && self
                    .last_cut
                    .compare_exchange(was, t, Relaxed, Relaxed)
                    .is_ok()
            {
                let min = self.min_budget;
                let _ = self
                    .budget
                    .fetch_update(Relaxed, Relaxed, |b| Some((b / 2).max(min)));
            }
        } else {
            let (quiet, _) = since(&self.last_signal);
            let (cut_ago, _) = since(&self.last_cut);
            let (due, was) = since(&self.last_raise);
            let configured = self.configured;
            if quiet
                && cut_ago
                && due
                && self.budget.load(Relaxed) < configured
                && self
                    .last_raise
                    .compare_exchange(was, t, Relaxed, Relaxed)
                    .is_ok()
            {
                let step = (configured / 16).max(1);
                let _ = self.budget.fetch_update(Relaxed, Relaxed, |b| {
                    Some(b.saturating_add(step).min(configured))
                });
            }
        }
        self.budget()
    }
}

/// A [`Sinks`] whose operations are debited from a [`Meter`]: the one place writes are counted
/// for the meter. It counts locally (no shared atomic per operation) and [`Metered::settle`]
/// debits the total, before every admission decision and in the timer, so the meter sees
/// every operation, exactly.
pub struct Metered<S> {
    pub(crate) inner: S,
    pending: u64,
}

impl<S: Sinks> Metered<S> {
    pub fn new(inner: S) -> Self {
        Metered { inner, pending: 0 }
    }

    /// Debit the operations issued since the last settle.
    #[inline]
    pub fn settle(&mut self, meter: &Meter) {
        if self.pending > 0 {
            meter.debit(self.pending);
            self.pending = 0;
        }
    }

    /// Count `ops` operations issued straight on the inner sink's memory
    /// ([`Sinks::region_mem`]), as if each had gone through this sink.
    #[inline]
    pub(crate) fn issued(&mut self, ops: u64) {
        self.pending += ops;
    }

    /// Operations issued and not yet settled.
    pub fn pending(&self) -> u64 {
        self.pending
    }
}

impl<S: Sinks> Sinks for Metered<S> {
    #[inline]
    fn announce(&mut self, store: usize, flagged: &crate::sinks::Flagged<'_>) {
        self.inner.announce(store, flagged)
    }

    #[inline]
    fn write(
        &mut self,
        store: usize,
        offset: u64,
        bytes: &[u8],
        immediate: bool,
    ) -> Result<(), SinkError> {
        self.pending += 1;
        self.inner.write(store, offset, bytes, immediate)
    }

    #[inline]
    fn write_u64(
        &mut self,
        store: usize,
        offset: u64,
        word: u64,
        immediate: bool,
    ) -> Result<(), SinkError> {
        self.pending += 1;
        self.inner.write_u64(store, offset, word, immediate)
    }

    #[inline]
    fn write_u64_at(
        &mut self,
        store: usize,
        offsets: &[u64],
        word: u64,
        immediate: bool,
    ) -> Result<(), SinkError> {
        self.pending += offsets.len() as u64;
        self.inner.write_u64_at(store, offsets, word, immediate)
    }

    #[inline]
    fn fetch_add_at(&mut self, store: usize, offsets: &[u64], add: u64) -> Result<(), SinkError> {
        self.pending += offsets.len() as u64;
        self.inner.fetch_add_at(store, offsets, add)
    }

    #[inline]
    fn fetch_add(&mut self, store: usize, offset: u64, add: u64) -> Result<(), SinkError> {
        self.pending += 1;
        self.inner.fetch_add(store, offset, add)
    }

    /// The live counters: one FETCH_ADD per counter that changes (as the RDMA sink issues
    /// them).
    #[inline]
    fn count(&mut self, store: usize, writes: u64, added: u64) -> Result<(), SinkError> {
        self.pending += (writes != 0) as u64 + (added != 0) as u64;
        self.inner.count(store, writes, added)
    }

    fn flush(&mut self) -> Result<(), SinkError> {
        self.inner.flush()
    }

    fn poll(&mut self) -> Result<(), SinkError> {
        self.inner.poll()
    }

    fn congestion(&mut self) -> Congestion {
        self.inner.congestion()
    }

    #[inline(always)]
    fn prefetch(&self, store: usize, offset: u64) {
        self.inner.prefetch(store, offset)
    }

    #[inline(always)]
    fn prefetch_at(&self, store: usize, offsets: &[u64]) {
        self.inner.prefetch_at(store, offsets)
    }

    #[inline(always)]
    fn region_mem(&self, store: usize) -> Option<&dta_store::RegionMem> {
        self.inner.region_mem(store)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn cfg(budget: u64, burst: u64) -> FlowControlConfig {
        FlowControlConfig {
            write_budget: budget,
            burst,
            min_budget: budget / 8,
            adapt_interval_ms: 10,
            ..FlowControlConfig::default()
        }
    }

    fn tokens(m: &Meter) -> f64 {
        m.level.load(Relaxed) as f64 / SCALE as f64
    }

    #[test]
    fn refill_debit_and_debt() {
        let m = Meter::new(&cfg(1000, 100));
        let t0 = m.epoch;
        assert_eq!(tokens(&m), 100.0, "starts full");
        m.debit(150);
        assert_eq!(tokens(&m), -50.0, "debt");
        assert!(!m.level(t0).high_ok());
        // 1000 writes/s: 60 ms earn 60 writes.
        m.refill(t0 + Duration::from_millis(60));
        assert_eq!(tokens(&m), 10.0);
        assert!(m.level(t0 + Duration::from_millis(60)).high_ok());
        // Capped at burst, however long it waits.
        m.refill(t0 + Duration::from_secs(100));
        assert_eq!(tokens(&m), 100.0);
        // Sub-write refills add up (fixed point): 10 x 0.5 ms = 5 writes.
        m.debit(100);
        let t1 = t0 + Duration::from_secs(100);
        for i in 1..=10 {
            m.refill(t1 + Duration::from_micros(500 * i));
        }
        assert_eq!(tokens(&m), 5.0);
        // Time going backwards (another thread's older `now`) earns nothing.
        m.refill(t0);
        assert_eq!(tokens(&m), 5.0);
    }

    #[test]
    fn thresholds_read_the_level_as_a_fraction_of_burst() {
        let m = Meter::new(&cfg(1000, 100));
        let t0 = m.epoch;
        let l = m.level(t0);
        assert!(l.low_ok() && l.medium_ok() && l.high_ok());
        m.debit(51); // 49 % left
        let l = m.level(t0);
        assert!(!l.low_ok() && l.medium_ok() && l.high_ok());
        m.debit(25); // 24 %
        let l = m.level(t0);
        assert!(!l.low_ok() && !l.medium_ok() && l.high_ok());
        m.debit(24); // 0
        assert!(!m.level(t0).high_ok());
    }

    #[test]
    fn aimd_cuts_on_signals_at_most_once_per_interval_and_rises_when_quiet() {
        let m = Meter::new(&cfg(1600, 100));
        let t0 = m.epoch;
        let ms = |n| t0 + Duration::from_millis(n);
        assert_eq!(m.adapt(0, ms(0)), 1600, "never above the configured budget");
        assert_eq!(m.adapt(3, ms(1)), 800);
        assert_eq!(m.adapt(5, ms(5)), 800, "one cut per interval");
        assert_eq!(m.adapt(1, ms(11)), 400);
        assert_eq!(m.adapt(1, ms(21)), 200, "floor min_budget = 200");
        assert_eq!(m.adapt(1, ms(31)), 200);
        // Quiet: not before an interval after the last signal, then + 1600/16 per interval.
        assert_eq!(m.adapt(0, ms(35)), 200);
        assert_eq!(m.adapt(0, ms(41)), 300);
        assert_eq!(m.adapt(0, ms(45)), 300, "one raise per interval");
        assert_eq!(m.adapt(0, ms(51)), 400);
        for i in 0..20 {
            m.adapt(0, ms(61 + 10 * i));
        }
        assert_eq!(m.budget(), 1600);
        // The refill follows the effective budget.
        let m = Meter::new(&cfg(1000, 1000));
        m.adapt(1, m.epoch);
        m.debit(1000);
        m.refill(m.epoch + Duration::from_millis(100));
        assert_eq!(tokens(&m), 50.0, "500 writes/s after the cut");
        // Unmetered: nothing adapts.
        assert_eq!(Meter::new(&cfg(0, 10)).adapt(1, t0), 0);
    }

    #[test]
    fn pressure_needs_the_level_low_for_the_whole_interval() {
        let c = FlowControlConfig {
            redundancy_threshold: 0.75,
            redundancy_after_ms: 100,
            ..cfg(1000, 1000)
        };
        let m = Meter::new(&c);
        let t0 = m.epoch;
        let ms = |n| t0 + Duration::from_millis(n);
        m.debit(500);
        m.level(ms(0));
        assert!(!m.pressure(ms(50)));
        m.debit(50); // keep it low while the refill earns
        m.level(ms(50));
        m.debit(50);
        m.level(ms(100));
        assert!(m.pressure(ms(100)));
        // Back above the threshold: off at once.
        m.refill(ms(2000));
        m.level(ms(2000));
        assert!(!m.pressure(ms(2000)));
    }

    #[test]
    fn metered_sinks_count_what_the_sink_issues() {
        struct Null;
        impl Sinks for Null {
            fn write(&mut self, _: usize, _: u64, _: &[u8], _: bool) -> Result<(), SinkError> {
                Ok(())
            }
            fn fetch_add(&mut self, _: usize, _: u64, _: u64) -> Result<(), SinkError> {
                Ok(())
            }
            fn count(&mut self, _: usize, _: u64, _: u64) -> Result<(), SinkError> {
                Ok(())
            }
        }
        let m = Meter::new(&cfg(1000, 100));
        let mut s = Metered::new(Null);
        s.write(0, 0, &[1], false).unwrap();
        s.fetch_add(0, 0, 1).unwrap();
        s.count(0, 2, 0).unwrap(); // one counter changes: one FETCH_ADD
        s.count(0, 1, 5).unwrap(); // two
        assert_eq!(s.pending(), 5);
        assert_eq!(tokens(&m), 100.0, "not debited before settle");
        s.settle(&m);
        assert_eq!(tokens(&m), 95.0);
        assert_eq!(s.pending(), 0);
    }
}
