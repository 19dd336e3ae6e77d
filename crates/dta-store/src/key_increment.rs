//! Key-Increment ([DTA A.4], Algorithms 5-6): a count-min sketch in collector memory.
//!
//! The data area is `counters` little-endian u64 counters. A report adds its counter to N
//! counters `index(scheme, key, n, counters)` with RDMA FETCH_ADD; a query returns the minimum of
//! the N counters, which never underestimates.

use crate::hash;
use crate::{
    ApplyError, HashScheme, Header, MemSink, QueryError, RegionMem, StoreError, StoreKind,
    StoreSpec, MAX_REDUNDANCY,
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyIncrementLayout {
    counters: u64,
    key_len: usize,
    hash: HashScheme,
    redundancy: u8,
}

impl KeyIncrementLayout {
    pub fn new(h: &Header) -> Result<Self, StoreError> {
        match &h.spec {
            StoreSpec::KeyIncrement(s) => Ok(KeyIncrementLayout {
                counters: s.counters,
                key_len: s.key_len as usize,
                hash: s.hash,
                redundancy: s.redundancy,
            }),
            _ => Err(StoreError::WrongKind {
                expected: StoreKind::KeyIncrement,
                found: h.kind,
            }),
        }
    }

    pub fn key_len(&self) -> usize {
        self.key_len
    }
    pub fn counters(&self) -> u64 {
        self.counters
    }
    pub fn hash(&self) -> HashScheme {
        self.hash
    }
    /// The store's N (from its header): every report and query uses exactly this N.
    pub fn redundancy(&self) -> u8 {
        self.redundancy
    }

    /// Byte offset of counter `n` of `key`.
    #[inline]
    pub fn counter_offset(&self, key: &[u8], n: u8) -> u64 {
        hash::index(self.hash, key, n, self.counters) * 8
    }

    /// The byte offsets of the `redundancy` counters of `key` into `out[..redundancy]` ([DTA A.4]
    /// Algorithm 5), hashing the key once: the batch API (compute, prefetch, then FETCH_ADD).
    /// Redundancy is capped at [`MAX_REDUNDANCY`].
    #[inline(always)]
    pub fn counter_offsets(
        &self,
        key: &[u8],
        redundancy: u8,
        out: &mut [u64; MAX_REDUNDANCY as usize],
    ) {
        let n = redundancy.min(MAX_REDUNDANCY);
        match self.hash {
            HashScheme::Native => {
                let h = hash::fnv1a64(key);
                for i in 0..n {
                    out[i as usize] = hash::native_index(h, i, self.counters) * 8;
                }
            }
            HashScheme::Prototype => {
                for i in 0..n {
                    out[i as usize] = self.counter_offset(key, i);
                }
            }
        }
    }

    /// Whether a report of `key` at `redundancy` can be applied: `BadKeyLen`, `BadRedundancy`
    /// (outside 1..=MAX_REDUNDANCY) or `RedundancyMismatch` (not the store's N).
    #[inline]
    pub fn check(&self, key: &[u8], redundancy: u8) -> Result<(), ApplyError> {
        crate::check_report(key, self.key_len, redundancy, MAX_REDUNDANCY)?;
        if redundancy != self.redundancy {
            return Err(ApplyError::RedundancyMismatch);
        }
        Ok(())
    }

    /// N FETCH_ADDs ([DTA A.4] Algorithm 5). The report's N must be the store's: a minimum over
    /// more counters than were added to reads 0, over fewer it loses accuracy, so a mismatch is
    /// `RedundancyMismatch`.
    #[inline]
    pub fn apply(
        &self,
        key: &[u8],
        counter: u64,
        redundancy: u8,
        sink: &mut impl MemSink,
    ) -> Result<(), ApplyError> {
        self.check(key, redundancy)?;
        let mut offs = [0u64; MAX_REDUNDANCY as usize];
        self.counter_offsets(key, redundancy, &mut offs);
        for &o in &offs[..redundancy as usize] {
            sink.fetch_add(o, counter)?;
        }
        sink.count(redundancy as u64, counter)?;
        Ok(())
    }

    /// The count-min error bound of an answer, from the region's live counters
    /// ([`crate::confidence::key_increment`]).
    pub fn bound(&self, mem: &RegionMem) -> crate::CountBound {
        crate::confidence::key_increment(mem.tally(), self.counters, self.redundancy)
    }

    /// The minimum of the key's N counters ([DTA A.4] Algorithm 6); `redundancy` `None` reads
    /// the store's N. A key of the wrong length or an N outside 1..=store N is an error (a
    /// minimum over more counters than were written would read 0).
    pub fn query(
        &self,
        mem: &RegionMem,
        key: &[u8],
        redundancy: Option<u8>,
    ) -> Result<u64, QueryError> {
        QueryError::key(key, self.key_len)?;
        let redundancy = QueryError::redundancy(redundancy, self.redundancy)?;
        let mut offs = [0u64; MAX_REDUNDANCY as usize];
        self.counter_offsets(key, redundancy, &mut offs);
        Ok(offs[..redundancy as usize]
            .iter()
            .filter_map(|&o| mem.load_u64(o).ok())
            .min()
            .unwrap_or(0))
    }
}
