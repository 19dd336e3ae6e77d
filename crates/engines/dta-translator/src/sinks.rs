//! Where translated memory operations go.
//!
//! A [`Sinks`] executes region-relative WRITEs and FETCH_ADDs on the translator's stores, indexed
//! by store number. [`RegionSinks`] is the co-located mode: the translator maps the collector's
//! region files and writes into them directly (shared memory). The RoCEv2 sink of the RDMA layer
//! implements the same trait, turning each operation into an RDMA WRITE (WITH IMMEDIATE) or
//! FETCH_ADD on the queue pair of that store.

use std::sync::Arc;

use dta_store::notify::{Announce, NotifyRing};
use dta_store::{MemSink, Region, RegionMem, SinkError};

use crate::stats::{add, Stats};

/// Executes memory operations on the translator's stores.
pub trait Sinks {
    /// WRITE `bytes` at `offset` of store `store`'s data area. `immediate` asks for a notification
    /// to the collector (RDMA WRITE WITH IMMEDIATE).
    fn write(
        &mut self,
        store: usize,
        offset: u64,
        bytes: &[u8],
        immediate: bool,
    ) -> Result<(), SinkError>;
    /// WRITE the little-endian u64 `word` at `offset` (8-byte aligned) of store `store`: the
    /// same bytes as [`Self::write`] of `word.to_le_bytes()`, which it is unless the sink can
    /// store a word at once (the co-located sink: one aligned store, an 8-byte Key-Write slot).
    #[inline]
    fn write_u64(
        &mut self,
        store: usize,
        offset: u64,
        word: u64,
        immediate: bool,
    ) -> Result<(), SinkError> {
        self.write(store, offset, &word.to_le_bytes(), immediate)
    }
    /// [`Self::write_u64`] of the same `word` at each of `offsets` (a Key-Write report's N
    /// copies): every offset is written, the first error returned.
    #[inline]
    fn write_u64_at(
        &mut self,
        store: usize,
        offsets: &[u64],
        word: u64,
        immediate: bool,
    ) -> Result<(), SinkError> {
        let mut res = Ok(());
        for &o in offsets {
            res = res.and(self.write_u64(store, o, word, immediate));
        }
        res
    }
    /// [`Self::fetch_add`] of the same `add` at each of `offsets` (a Key-Increment report's N
    /// counters): every offset is added to, the first error returned.
    #[inline]
    fn fetch_add_at(&mut self, store: usize, offsets: &[u64], add: u64) -> Result<(), SinkError> {
        let mut res = Ok(());
        for &o in offsets {
            res = res.and(self.fetch_add(store, o, add));
        }
        res
    }
    /// FETCH_ADD `add` to the little-endian u64 at `offset` of store `store`.
    fn fetch_add(&mut self, store: usize, offset: u64, add: u64) -> Result<(), SinkError>;
    /// Add to store `store`'s live counters ([`MemSink::count`], `docs/regions.md` §1): called
    /// once per batch written, not per report. The RDMA sink issues a FETCH_ADD per counter.
    fn count(&mut self, store: usize, writes: u64, added: u64) -> Result<(), SinkError>;
    /// Make everything issued so far durable/visible (e.g. wait for RDMA ACKs).
    fn flush(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
    /// Housekeeping without waiting, called by the translator's timer even when no reports
    /// arrive: a reliable sink reads its acknowledgements and retransmits what timed out.
    fn poll(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
    /// Hint that `offset` of store `store` is about to be written: the co-located sink
    /// prefetches the cache line (the batched apply); remote sinks ignore it.
    #[inline(always)]
    fn prefetch(&self, _store: usize, _offset: u64) {}
    /// The mapped data area of store `store`, when this sink writes straight into it (the
    /// co-located sink): the batched apply then issues a stage's operations on it directly,
    /// with exactly the effect of [`Self::write`], [`Self::write_u64_at`] and
    /// [`Self::fetch_add_at`] on this sink. `None` (the default): every operation through the
    /// trait.
    #[inline(always)]
    fn region_mem(&self, _store: usize) -> Option<&RegionMem> {
        None
    }
    /// [`Self::prefetch`] of each of `offsets`.
    #[inline(always)]
    fn prefetch_at(&self, store: usize, offsets: &[u64]) {
        for &o in offsets {
            self.prefetch(store, o);
        }
    }
    /// The collector's congestion signals seen since the last call, for the translator's rate
    /// meter ([DTA-draft §3.2]). The co-located sink has none.
    fn congestion(&mut self) -> Congestion {
        Congestion::default()
    }
    /// Announce that flagged reports' data is now in store `store` ([DTA §7] "Push
    /// notifications"): called once per flagged Key-Write or Key-Increment report, Append
    /// batch or path, after its writes were issued. The co-located sink puts a notice on the
    /// region directory's ring ([`dta_store::notify`]); a remote sink has already carried the
    /// flag as WRITE WITH IMMEDIATE (default: nothing).
    #[inline]
    fn announce(&mut self, _store: usize, _flagged: &Flagged<'_>) {}
    /// Announce on `ring` (the region directory's notification ring). True when this sink
    /// announces there (the co-located sink); a remote sink carries announcements as WRITE WITH
    /// IMMEDIATE to the collector, whose responder puts them on its ring, and returns false.
    fn set_ring(&mut self, _ring: Arc<NotifyRing>) -> bool {
        false
    }
}

/// Flagged reports whose data a write group carried ([`Sinks::announce`]).
#[derive(Debug, Clone, Copy)]
pub struct Flagged<'a> {
    pub primitive: dta_wire::Opcode,
    /// The report's key (the path's flow key); empty for Append.
    pub key: &'a [u8],
    /// An Append's list.
    pub list: u64,
    /// Flagged reports covered.
    pub reports: u32,
}

/// Congestion signals from the path to the collector, counted since the last
/// [`Sinks::congestion`] call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Congestion {
    /// RNR NAKs: the responder had no resources ([IBTA §9.7.5.2.8]).
    pub rnr_naks: u64,
    /// PSN sequence error NAKs: packets to the collector were lost.
    pub sequence_naks: u64,
    /// Congestion notification packets ([RoCEv2 A17.9]).
    pub cnps: u64,
    /// Times the retransmission window was full.
    pub window_full: u64,
}

impl Congestion {
    /// Whether any signal was seen.
    pub fn any(&self) -> bool {
        self.rnr_naks + self.sequence_naks + self.cnps + self.window_full > 0
    }
}

/// The co-located sink: writes straight into mapped region files shared with the collector.
pub struct RegionSinks {
    regions: Vec<Arc<Region>>,
    /// The region directory's notification ring, if flagged reports are announced.
    ring: Option<Arc<NotifyRing>>,
}

impl RegionSinks {
    pub fn new(regions: Vec<Arc<Region>>) -> Self {
        RegionSinks {
            regions,
            ring: None,
        }
    }

    pub fn regions(&self) -> &[Arc<Region>] {
        &self.regions
    }
}

impl Sinks for RegionSinks {
    fn set_ring(&mut self, ring: Arc<NotifyRing>) -> bool {
        self.ring = Some(ring);
        true
    }

    #[inline]
    fn write(
        &mut self,
        store: usize,
        offset: u64,
        bytes: &[u8],
        _immediate: bool,
    ) -> Result<(), SinkError> {
        // In shared memory the write itself is the notification: readers poll the region. The
        // immediate flag is counted by the translator and carried as WRITE WITH IMMEDIATE by
        // the RDMA sink.
        self.regions[store].mem().write(offset, bytes)
    }

    #[inline]
    fn write_u64(
        &mut self,
        store: usize,
        offset: u64,
        word: u64,
        _immediate: bool,
    ) -> Result<(), SinkError> {
        self.regions[store].mem().store_u64(offset, word)
    }

    #[inline]
    fn write_u64_at(
        &mut self,
        store: usize,
        offsets: &[u64],
        word: u64,
        _immediate: bool,
    ) -> Result<(), SinkError> {
        self.regions[store].mem().store_u64_at(offsets, word)
    }

    #[inline]
    fn fetch_add(&mut self, store: usize, offset: u64, add: u64) -> Result<(), SinkError> {
        self.regions[store]
            .mem()
            .fetch_add_u64(offset, add)
            .map(|_| ())
    }

    #[inline]
    fn fetch_add_at(&mut self, store: usize, offsets: &[u64], add: u64) -> Result<(), SinkError> {
        self.regions[store].mem().fetch_add_u64_at(offsets, add)
    }

    #[inline]
    fn count(&mut self, store: usize, writes: u64, added: u64) -> Result<(), SinkError> {
        self.regions[store].mem().count(writes, added)
    }

    fn flush(&mut self) -> Result<(), SinkError> {
        Ok(())
    }

    #[inline(always)]
    fn prefetch(&self, store: usize, offset: u64) {
        if let Some(r) = self.regions.get(store) {
            r.mem().prefetch(offset);
        }
    }

    #[inline(always)]
    fn region_mem(&self, store: usize) -> Option<&RegionMem> {
        self.regions.get(store).map(|r| r.mem())
    }

    #[inline(always)]
    fn prefetch_at(&self, store: usize, offsets: &[u64]) {
        if let Some(r) = self.regions.get(store) {
            r.mem().prefetch_at(offsets);
        }
    }

    fn announce(&mut self, store: usize, f: &Flagged<'_>) {
        if let (Some(ring), Some(r)) = (&self.ring, self.regions.get(store)) {
            ring.announce(&Announce {
                store: &r.header().name,
                primitive: f.primitive as u8,
                key: f.key,
                list: f.list,
                reports: f.reports,
            });
        }
    }
}

/// Adapts one store of a [`Sinks`] to the `MemSink` a store layout writes through, counting
/// every operation.
pub(crate) struct StoreSink<'a, S: Sinks + ?Sized> {
    pub sinks: &'a mut S,
    pub store: usize,
    pub immediate: bool,
    pub stats: &'a Stats,
}

impl<S: Sinks + ?Sized> MemSink for StoreSink<'_, S> {
    fn write(&mut self, offset: u64, bytes: &[u8]) -> Result<(), SinkError> {
        add(&self.stats.writes, 1);
        add(&self.stats.write_bytes, bytes.len() as u64);
        self.sinks.write(self.store, offset, bytes, self.immediate)
    }

    fn fetch_add(&mut self, offset: u64, add: u64) -> Result<(), SinkError> {
        crate::stats::add(&self.stats.fetch_adds, 1);
        self.sinks.fetch_add(self.store, offset, add)
    }

    fn count(&mut self, writes: u64, added: u64) -> Result<(), SinkError> {
        self.sinks.count(self.store, writes, added)
    }
}
