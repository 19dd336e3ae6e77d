//! The FlowCache ([INT-NIC §III, Fig. 2]: "a large hash table ... 2^19 rows ... 12 buckets per
//! row"; each bucket a flow key, packet count, last-update timestamp and per-hop latest and average
//! INT metrics). Fixed capacity, allocated once: rows of [`WAYS`] buckets, the row chosen by
//! hashing the 13-byte flow key. A packet of a new flow takes a free bucket of its row, or evicts
//! the row's least recently updated flow (003 "Eviction"). [`FlowCache::expire`] ages out flows
//! idle longer than the timeout (003: the CMEs "age out the entries ... not updated over a
//! predefined time period"). Nothing here allocates per packet.

use crate::events::{EvictReason, FlowRecord, HopRecord};
use crate::layout::{FLOW_KEY_LEN, MAX_PATH, PATH_DATA_LEN};

/// Buckets per row.
pub const WAYS: usize = 8;

/// One hop's aggregate.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HopAgg {
    pub node_id: Option<u32>,
    pub latency: Option<u32>,
    pub queue: Option<u32>,
    pub util: Option<u32>,
    pub sum_latency: u64,
    pub n_latency: u64,
    pub sum_queue: u64,
    pub n_queue: u64,
    pub sum_util: u64,
    pub n_util: u64,
    pub path_changes: u32,
}

impl HopAgg {
    fn record(&self) -> HopRecord {
        let avg = |s: u64, n: u64| (n > 0).then(|| s as f64 / n as f64);
        HopRecord {
            node_id: self.node_id,
            hop_latency: self.latency,
            avg_hop_latency: avg(self.sum_latency, self.n_latency),
            queue_occupancy: self.queue,
            avg_queue_occupancy: avg(self.sum_queue, self.n_queue),
            egress_tx_util: self.util,
            avg_egress_tx_util: avg(self.sum_util, self.n_util),
            path_changes: self.path_changes,
        }
    }
}

/// The store writes a flow owes since the last delta flush (`docs/int-sink.md`, "Aggregation"):
/// the latest INT-MD path record (Key-Write) and the latest Postcarding value per hop. Only the
/// newest matters: a Key-Write or a Postcarding chunk of a flow overwrites the previous one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pending {
    /// The sink's report sequence number of the last update: writes are replayed in this
    /// order, so a slot shared by two flows ends with the one written last, as without
    /// aggregation.
    pub seq: u64,
    /// Some write is owed (the entry is on the sink's dirty list).
    pub dirty: bool,
    /// A path record is owed.
    pub has_path: bool,
    pub path: [u8; PATH_DATA_LEN],
    /// Postcarding path length of the owed postcards.
    pub path_len: u8,
    /// Hops (bit i = hop i) with an owed postcard value.
    pub postcard_mask: u8,
    pub postcard: [u32; MAX_PATH],
}

impl Default for Pending {
    fn default() -> Self {
        Pending {
            seq: 0,
            dirty: false,
            has_path: false,
            path: [0; PATH_DATA_LEN],
            path_len: 0,
            postcard_mask: 0,
            postcard: [0; MAX_PATH],
        }
    }
}

/// One flow's entry.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FlowEntry {
    pub key: [u8; FLOW_KEY_LEN],
    pub in_use: bool,
    pub packets: u64,
    pub first_ns: u64,
    pub last_ns: u64,
    /// Hops seen (the highest hop index + 1).
    pub hops: u8,
    pub hop: [HopAgg; MAX_PATH],
    /// Writes owed to the stores (aggregation).
    pub pending: Pending,
}

impl FlowEntry {
    /// The flow record of this entry.
    pub fn record(&self, reason: EvictReason) -> FlowRecord {
        FlowRecord {
            flow: self.key,
            packets: self.packets,
            first_ns: self.first_ns,
            last_ns: self.last_ns,
            reason,
            hops: self.hop[..self.hops as usize]
                .iter()
                .map(HopAgg::record)
                .collect(),
        }
    }
}

/// The cache.
pub struct FlowCache {
    buckets: Vec<FlowEntry>,
    /// Per bucket, a tag of its flow's key hash (never 0) or 0 when free: a row's [`WAYS`] tags
    /// share one cache line, so a lookup reads one line and then only the matching entry.
    tags: Vec<u64>,
    row_mask: usize,
    occupied: usize,
}

impl FlowCache {
    /// At least `capacity` flows (rounded up to a power of two of rows of [`WAYS`]).
    pub fn new(capacity: usize) -> FlowCache {
        let rows = capacity.div_ceil(WAYS).max(1).next_power_of_two();
        FlowCache {
            buckets: vec![FlowEntry::default(); rows * WAYS],
            tags: vec![0; rows * WAYS],
            row_mask: rows - 1,
            occupied: 0,
        }
    }

    pub fn capacity(&self) -> usize {
        self.buckets.len()
    }

    pub fn occupied(&self) -> usize {
        self.occupied
    }

    /// The first bucket of `key`'s row and its tag.
    #[inline]
    fn row(&self, key: &[u8; FLOW_KEY_LEN]) -> (usize, u64) {
        let h = dta_store::hash::fmix64(dta_store::hash::fnv1a64(key));
        ((h as usize & self.row_mask) * WAYS, h | 1)
    }

    /// The bucket holding `key` in the row at `r`.
    #[inline]
    fn find(&self, r: usize, tag: u64, key: &[u8; FLOW_KEY_LEN]) -> Option<usize> {
        (r..r + WAYS).find(|&i| self.tags[i] == tag && self.buckets[i].key == *key)
    }

    /// Start loading the row of `key` (its tags' cache line) into the cache: a batch of reports
    /// issues these for all its flows first, so their misses overlap.
    #[inline]
    pub fn prefetch_row(&self, key: &[u8; FLOW_KEY_LEN]) {
        let (r, _) = self.row(key);
        prefetch(&self.tags[r] as *const u64 as *const u8);
    }

    /// Start loading the entry of `key`, if cached (after [`FlowCache::prefetch_row`]).
    #[inline]
    pub fn prefetch_entry(&self, key: &[u8; FLOW_KEY_LEN]) {
        let (r, tag) = self.row(key);
        if let Some(i) = (r..r + WAYS).find(|&i| self.tags[i] == tag) {
            let e = &self.buckets[i];
            let base = e as *const FlowEntry as *const u8;
            for off in (0..core::mem::size_of::<FlowEntry>()).step_by(64) {
                prefetch(base.wrapping_add(off));
            }
        }
    }

    /// The entry of `key`, if cached.
    pub fn get(&self, key: &[u8; FLOW_KEY_LEN]) -> Option<&FlowEntry> {
        let (r, tag) = self.row(key);
        self.find(r, tag, key).map(|i| &self.buckets[i])
    }

    /// The entry of `key`, created if needed (packets 0, first_ns = now). A flow evicted to make
    /// room is passed to `evict` first.
    pub fn entry(
        &mut self,
        key: &[u8; FLOW_KEY_LEN],
        now_ns: u64,
        evict: impl FnOnce(&FlowEntry),
    ) -> &mut FlowEntry {
        let i = self.entry_index(key, now_ns, evict);
        &mut self.buckets[i]
    }

    /// The entry at `index` (from [`FlowCache::entry_index`]; it may hold another flow since).
    pub fn at_mut(&mut self, index: usize) -> &mut FlowEntry {
        &mut self.buckets[index]
    }

    /// [`FlowCache::entry`], returning the entry's index.
    pub fn entry_index(
        &mut self,
        key: &[u8; FLOW_KEY_LEN],
        now_ns: u64,
        evict: impl FnOnce(&FlowEntry),
    ) -> usize {
        let (r, tag) = self.row(key);
        if let Some(i) = self.find(r, tag, key) {
            return i;
        }
        let i = match (r..r + WAYS).find(|&i| self.tags[i] == 0) {
            Some(i) => {
                self.occupied += 1;
                i
            }
            None => {
                let i = (r..r + WAYS)
                    .min_by_key(|&i| self.buckets[i].last_ns)
                    .expect("WAYS > 0");
                evict(&self.buckets[i]);
                i
            }
        };
        self.tags[i] = tag;
        self.buckets[i] = FlowEntry {
            key: *key,
            in_use: true,
            first_ns: now_ns,
            last_ns: now_ns,
            ..FlowEntry::default()
        };
        i
    }

    /// Evict every flow not updated for more than `idle_ns` (every flow when `None`).
    pub fn expire(&mut self, now_ns: u64, idle_ns: Option<u64>, mut evict: impl FnMut(&FlowEntry)) {
        if self.occupied == 0 {
            return;
        }
        for (e, tag) in self.buckets.iter_mut().zip(self.tags.iter_mut()) {
            if *tag != 0 && idle_ns.is_none_or(|t| now_ns.saturating_sub(e.last_ns) > t) {
                evict(e);
                e.in_use = false;
                *tag = 0;
                self.occupied -= 1;
            }
        }
    }
}

/// A prefetch hint for the cache line holding address `p` (never dereferenced); nothing on
/// architectures without one.
#[inline(always)]
fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 is a hint: it never faults, whatever the address, and writes nothing.
    unsafe {
        core::arch::x86_64::_mm_prefetch(p as *const i8, core::arch::x86_64::_MM_HINT_T0)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u32) -> [u8; 13] {
        let mut k = [0u8; 13];
        k[..4].copy_from_slice(&i.to_be_bytes());
        k
    }

    #[test]
    fn entries_persist_and_age_out() {
        let mut c = FlowCache::new(64);
        c.entry(&key(1), 10, |_| panic!()).packets += 1;
        c.entry(&key(1), 20, |_| panic!()).packets += 1;
        c.entry(&key(2), 30, |_| panic!()).packets += 1;
        assert_eq!(c.get(&key(1)).unwrap().packets, 2);
        assert_eq!(c.get(&key(1)).unwrap().first_ns, 10);
        assert_eq!(c.occupied(), 2);
        c.entry(&key(1), 100, |_| panic!()).last_ns = 100;
        let mut gone = vec![];
        c.expire(140, Some(50), |e| gone.push(e.key));
        assert_eq!(gone, vec![key(2)]);
        assert!(c.get(&key(2)).is_none());
        assert_eq!(c.occupied(), 1);
        c.expire(140, None, |e| gone.push(e.key));
        assert_eq!(c.occupied(), 0);
    }

    #[test]
    fn full_row_evicts_least_recent() {
        let mut c = FlowCache::new(WAYS); // one row
        for i in 0..WAYS as u32 {
            let e = c.entry(&key(i), 100 + i as u64, |_| panic!("room left"));
            e.last_ns = 100 + i as u64;
        }
        c.entry(&key(0), 500, |_| panic!()).last_ns = 500;
        let mut evicted = None;
        c.entry(&key(99), 600, |e| evicted = Some(e.key));
        assert_eq!(evicted, Some(key(1)));
        assert!(c.get(&key(99)).is_some());
        assert!(c.get(&key(0)).is_some());
        assert_eq!(c.occupied(), WAYS);
    }
}
