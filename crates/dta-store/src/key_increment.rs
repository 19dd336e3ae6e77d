//! Key-Increment (001 Appendix A.4, Algorithms 5-6): a count-min sketch in collector memory.
//!
//! The data area is `counters` little-endian u64 counters. A report adds its counter to N
//! counters `index(scheme, key, n, counters)` with RDMA FETCH_ADD; a query returns the minimum of
//! the N counters, which never underestimates.

use crate::hash;
use crate::{
    ApplyError, HashScheme, Header, MemSink, RegionMem, StoreError, StoreKind, StoreSpec,
    MAX_REDUNDANCY,
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyIncrementLayout {
    counters: u64,
    key_len: usize,
    hash: HashScheme,
}

impl KeyIncrementLayout {
    pub fn new(h: &Header) -> Result<Self, StoreError> {
        match &h.spec {
            StoreSpec::KeyIncrement(s) => Ok(KeyIncrementLayout {
                counters: s.counters,
                key_len: s.key_len as usize,
                hash: s.hash,
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

    /// Byte offset of counter `n` of `key`.
    #[inline]
    pub fn counter_offset(&self, key: &[u8], n: u8) -> u64 {
        hash::index(self.hash, key, n, self.counters) * 8
    }

    /// The byte offsets of the `redundancy` counters of `key` into `out[..redundancy]` (001 A.4
    /// Algorithm 5), hashing the key once: the batch API (compute, prefetch, then FETCH_ADD).
    /// Redundancy is capped at [`MAX_REDUNDANCY`].
    #[inline]
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

    fn check(&self, key: &[u8], redundancy: u8) -> Result<(), ApplyError> {
        if key.len() != self.key_len {
            return Err(ApplyError::BadKeyLen);
        }
        if redundancy == 0 || redundancy > MAX_REDUNDANCY {
            return Err(ApplyError::BadRedundancy);
        }
        Ok(())
    }

    /// N FETCH_ADDs (001 A.4 Algorithm 5).
    #[inline]
    pub fn apply(
        &self,
        key: &[u8],
        counter: u64,
        redundancy: u8,
        sink: &mut impl MemSink,
    ) -> Result<(), ApplyError> {
        self.check(key, redundancy)?;
        for n in 0..redundancy {
            sink.fetch_add(self.counter_offset(key, n), counter)?;
        }
        Ok(())
    }

    /// The minimum of the key's N counters (001 A.4 Algorithm 6). 0 for a key the store cannot
    /// hold.
    pub fn query(&self, mem: &RegionMem, key: &[u8], redundancy: u8) -> u64 {
        if self.check(key, redundancy).is_err() {
            return 0;
        }
        (0..redundancy)
            .filter_map(|n| mem.load_u64(self.counter_offset(key, n)).ok())
            .min()
            .unwrap_or(0)
    }
}
