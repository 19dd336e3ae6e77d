//! The FlowCache ([INT-NIC §III, Fig. 2]: "a large hash table ... 2^19 rows ... 12 buckets per
//! row"; each bucket a flow key, packet count, last-update timestamp and per-hop latest and average
//! INT metrics). Fixed capacity, allocated once: rows of [`WAYS`] buckets, the row chosen by
//! hashing the 13-byte flow key. A packet of a new flow takes a free bucket of its row, or evicts
//! the row's least recently updated flow (003 "Eviction"). [`FlowCache::expire`] ages out flows
//! idle longer than the timeout (003: the CMEs "age out the entries ... not updated over a
//! predefined time period"). Nothing here allocates per packet.

use crate::events::{EvictReason, FlowRecord, HopRecord};
use crate::layout::{Metric, FLOW_KEY_LEN, MAX_PATH, PATH_DATA_LEN};

/// Buckets per row.
pub const WAYS: usize = 8;

/// The metrics a hop aggregates, in [`HopAgg`]'s arrays (`sum`, `n`; `last` after the node id).
/// (The order of [`Metric::ALL`].)
pub const LATENCY: usize = Metric::HopLatency as usize - 1;
pub const QUEUE: usize = Metric::QueueOccupancy as usize - 1;
pub const UTIL: usize = Metric::EgressTxUtil as usize - 1;

/// One hop's aggregate, one cache line: the latest node id and metrics (`last[0]` the node id,
/// `last[1 + m]` metric `m`, each valid where its bit of the entry's `present[hop]` is set), and
/// per metric the sum and count of its samples.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[repr(C, align(64))]
pub struct HopAgg {
    pub sum: [u64; 3],
    pub n: [u64; 3],
    pub last: [u32; 4],
}

/// The store writes a flow owes since the last delta flush (`docs/int-sink.md`, "Aggregation"):
/// the latest INT-MD path record (Key-Write) and the latest Postcarding value per hop. Only the
/// newest matters: a Key-Write or a Postcarding chunk of a flow overwrites the previous one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct Pending {
    /// The sink's report sequence number of the last update, counted from the last delta flush
    /// (which runs before it could wrap): writes are replayed in this order, so a slot shared by
    /// two flows ends with the one written last, as without aggregation.
    pub seq: u32,
    /// Some write is owed (the entry is on the sink's dirty list).
    pub dirty: bool,
    /// A path record is owed.
    pub has_path: bool,
    /// Postcarding path length of the owed postcards.
    pub path_len: u8,
    /// Hops (bit i = hop i) with an owed postcard value.
    pub postcard_mask: u8,
    pub path: [u8; PATH_DATA_LEN],
    pub postcard: [u32; MAX_PATH],
}

impl Default for Pending {
    fn default() -> Self {
        Pending {
            seq: 0,
            dirty: false,
            has_path: false,
            path_len: 0,
            postcard_mask: 0,
            path: [0; PATH_DATA_LEN],
            postcard: [0; MAX_PATH],
        }
    }
}

/// One flow's entry: 7 cache lines, aligned to one: the key, counters, per-hop flags and owed
/// writes in the first two, then one line per hop, so a report touches no more than it needs.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[repr(C, align(64))]
pub struct FlowEntry {
    pub key: [u8; FLOW_KEY_LEN],
    /// Hops seen (the highest hop index + 1).
    pub hops: u8,
    /// Per hop, bit i: `hop[h].last[i]` holds a value.
    pub present: [u8; MAX_PATH],
    /// The sink's fast path knows this flow ([`crate::fast::FastPath::learn`]).
    pub fast: bool,
    /// `report_seq` holds the Telemetry Report sequence number ([TR v2.0 §3.2], 22 bits) of the
    /// report the latest values came from, numbered by `reporter` and `reporter_hw`: a flow's
    /// reports are ordered by it ([`FlowEntry::take_latest`]), not by when they were handled
    /// (the fast path, the AF_XDP sockets and the UDP sockets each deliver in order, not in
    /// order with one another).
    pub seq_known: bool,
    /// The hardware id of the numbering of `report_seq`.
    pub reporter_hw: u8,
    pub report_seq: u32,
    /// The reporting node of the numbering of `report_seq` (v2.0 node id, v1.0 switch id).
    pub reporter: u32,
    pub packets: u64,
    pub first_ns: u64,
    pub last_ns: u64,
    /// Per hop, times its node id changed.
    pub path_changes: [u32; MAX_PATH],
    /// Writes owed to the stores (aggregation).
    pub pending: Pending,
    pub hop: [HopAgg; MAX_PATH],
}

impl FlowEntry {
    /// Hop `h`'s latest `last[i]` (0 node id, 1 + m metric m), if any.
    #[inline]
    pub fn latest(&self, h: usize, i: usize) -> Option<u32> {
        (self.present[h] & (1 << i) != 0).then_some(self.hop[h].last[i])
    }

    /// Whether the report `r` (none: not numbered) is at least as new as the one the latest
    /// values came from, recording it as theirs when it is. A report of another numbering than
    /// theirs (another reporter, or none) is taken as the newest: sequence numbers compare only
    /// within one reporter's ([TR v2.0 §3.2]: "per (node, hw_id) and destination").
    #[inline]
    pub fn take_latest(&mut self, r: Option<ReportSeq>) -> bool {
        let Some(r) = r else { return true };
        let seq = r.seq & SEQ_MASK;
        if self.seq_known
            && self.reporter == r.node
            && self.reporter_hw == r.hw_id
            && !seq_newer(seq, self.report_seq)
        {
            return false;
        }
        self.seq_known = true;
        self.reporter = r.node;
        self.reporter_hw = r.hw_id;
        self.report_seq = seq;
        true
    }

    /// The flow record of this entry.
    pub fn record(&self, reason: EvictReason) -> FlowRecord {
        FlowRecord {
            flow: self.key,
            packets: self.packets,
            first_ns: self.first_ns,
            last_ns: self.last_ns,
            reason,
            hops: (0..self.hops as usize)
                .map(|h| self.hop_record(h))
                .collect(),
        }
    }

    fn hop_record(&self, h: usize) -> HopRecord {
        let a = &self.hop[h];
        let avg = |m: usize| (a.n[m] > 0).then(|| a.sum[m] as f64 / a.n[m] as f64);
        HopRecord {
            node_id: self.latest(h, 0),
            hop_latency: self.latest(h, 1 + LATENCY),
            avg_hop_latency: avg(LATENCY),
            queue_occupancy: self.latest(h, 1 + QUEUE),
            avg_queue_occupancy: avg(QUEUE),
            egress_tx_util: self.latest(h, 1 + UTIL),
            avg_egress_tx_util: avg(UTIL),
            path_changes: self.path_changes[h],
        }
    }
}

/// Where a telemetry report stands in its reporter's numbering: sequence numbers count "per
/// (node, hw_id) and destination" ([TR v2.0 §3.2]); v1.0 names the node by its switch id,
/// v0.5 by none (`node` 0: one flow's reports come from one sink switch, its path's last hop).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReportSeq {
    pub node: u32,
    pub hw_id: u8,
    /// As carried (v0.5 and v1.0 carry 32 bits; the low 22 are compared).
    pub seq: u32,
}

/// Whether Telemetry Report sequence number `a` is `b`, comes after it (22-bit serial
/// arithmetic), or lies more than [`REORDER_WINDOW`] before it: no receive path holds that
/// many reports back, so such a number is the reporter's numbering starting again (a restart),
/// and newer.
#[inline]
pub fn seq_newer(a: u32, b: u32) -> bool {
    let behind = b.wrapping_sub(a) & SEQ_MASK;
    behind == 0 || behind > REORDER_WINDOW
}

/// The 22 bits of a Telemetry Report v2.0 sequence number.
pub const SEQ_MASK: u32 = 0x3f_ffff;

/// The most reports of one reporter that may arrive after a later one of it: what a receive
/// path can hold back while another delivers, many times an AF_XDP socket's frames (at most
/// 64 Ki) and the datagrams of the sink's default 64 MiB socket buffer (about 175 000 at the
/// kernel's 768 bytes of memory a small datagram, doubled as `SO_RCVBUF` does), and under half
/// the 22-bit numbering, which no window can pass. A number further behind is a restart.
pub const REORDER_WINDOW: u32 = 1 << 20;

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

    /// The hash of `key` the cache places it by: compute it once per report and hand it to the
    /// `*_hashed` methods.
    #[inline]
    pub fn hash(key: &[u8; FLOW_KEY_LEN]) -> u64 {
        dta_store::hash::fmix64(dta_store::hash::fnv1a64(key))
    }

    /// The first bucket of the row of a key of hash `h` and its tag.
    #[inline]
    fn row(&self, h: u64) -> (usize, u64) {
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
    pub fn prefetch_row(&self, hash: u64) {
        let (r, _) = self.row(hash);
        prefetch(&self.tags[r] as *const u64 as *const u8);
    }

    /// Start loading the entry of a key of hash `hash`, if cached (after
    /// [`FlowCache::prefetch_row`]).
    #[inline]
    pub fn prefetch_entry(&self, hash: u64) {
        let (r, tag) = self.row(hash);
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
        let (r, tag) = self.row(Self::hash(key));
        self.find(r, tag, key).map(|i| &self.buckets[i])
    }

    /// The entry of `key`, created if needed (packets 0, first_ns = now). A flow evicted to make
    /// room is passed to `evict` first, with its index.
    pub fn entry(
        &mut self,
        key: &[u8; FLOW_KEY_LEN],
        now_ns: u64,
        evict: impl FnOnce(usize, &FlowEntry),
    ) -> &mut FlowEntry {
        let i = self.entry_index(key, Self::hash(key), now_ns, evict);
        &mut self.buckets[i]
    }

    /// The entry at `index` (from [`FlowCache::entry_index`]; it may hold another flow since).
    pub fn at_mut(&mut self, index: usize) -> &mut FlowEntry {
        &mut self.buckets[index]
    }

    /// [`FlowCache::entry`] of `key` of hash `hash` ([`FlowCache::hash`]), returning the
    /// entry's index.
    #[inline]
    pub fn entry_index(
        &mut self,
        key: &[u8; FLOW_KEY_LEN],
        hash: u64,
        now_ns: u64,
        evict: impl FnOnce(usize, &FlowEntry),
    ) -> usize {
        let (r, tag) = self.row(hash);
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
                evict(i, &self.buckets[i]);
                i
            }
        };
        self.tags[i] = tag;
        self.buckets[i] = FlowEntry {
            key: *key,
            first_ns: now_ns,
            last_ns: now_ns,
            ..FlowEntry::default()
        };
        i
    }

    /// Every flow held, with its index.
    pub fn for_each(&self, mut f: impl FnMut(usize, &FlowEntry)) {
        if self.occupied == 0 {
            return;
        }
        for (i, (e, tag)) in self.buckets.iter().zip(self.tags.iter()).enumerate() {
            if *tag != 0 {
                f(i, e);
            }
        }
    }

    /// Evict every flow not updated for more than `idle_ns` (every flow when `None`), each
    /// passed to `evict` with its index.
    pub fn expire(
        &mut self,
        now_ns: u64,
        idle_ns: Option<u64>,
        mut evict: impl FnMut(usize, &FlowEntry),
    ) {
        if self.occupied == 0 {
            return;
        }
        for (i, (e, tag)) in self.buckets.iter().zip(self.tags.iter_mut()).enumerate() {
            if *tag != 0 && idle_ns.is_none_or(|t| now_ns.saturating_sub(e.last_ns) > t) {
                evict(i, e);
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

    #[test]
    fn sequence_numbers_compare_across_the_wrap() {
        assert!(seq_newer(5, 5));
        assert!(seq_newer(6, 5));
        assert!(!seq_newer(5, 6));
        assert!(seq_newer(2, SEQ_MASK - 3));
        assert!(!seq_newer(SEQ_MASK - 3, 2));
        assert!(seq_newer(1 << 20, 0));
        assert!(seq_newer(1 << 21, 0));
        // Up to the window behind is a late report; further behind, a restart.
        assert!(!seq_newer(0, REORDER_WINDOW));
        assert!(seq_newer(0, REORDER_WINDOW + 1));
        assert!(!seq_newer(SEQ_MASK - 10, REORDER_WINDOW - 12));
        assert!(seq_newer(0, SEQ_MASK));
    }

    #[test]
    fn latest_values_follow_one_reporters_numbering() {
        let r = |node, hw_id, seq| Some(ReportSeq { node, hw_id, seq });
        let mut e = FlowEntry::default();
        assert!(e.take_latest(r(7, 1, 100)));
        assert!(
            !e.take_latest(r(7, 1, 99)),
            "a late report of the same reporter"
        );
        assert!(
            e.take_latest(r(7, 1, 100)),
            "the same report again (redundancy) stays latest"
        );
        // The 32-bit numbers of v0.5/v1.0 compare by their low 22 bits.
        assert!(e.take_latest(r(7, 1, (5 << 22) | 101)));
        assert!(!e.take_latest(r(7, 1, 100)));
        // Another numbering does not compare: the latest is the one handled last.
        assert!(e.take_latest(r(8, 1, 3)));
        assert!(e.take_latest(r(8, 2, 2)));
        assert!(!e.take_latest(r(8, 2, 1)));
        assert!(e.take_latest(None));
        assert!(
            !e.take_latest(r(8, 2, 1)),
            "an unnumbered report leaves the numbering"
        );
        // A restart of the numbering far behind is followed.
        assert!(e.take_latest(r(8, 2, 2 + REORDER_WINDOW + 1)));
        assert!(e.take_latest(r(8, 2, 0)));
        assert_eq!((e.reporter, e.reporter_hw, e.report_seq), (8, 2, 0));
    }

    #[test]
    fn an_entry_is_seven_cache_lines() {
        assert_eq!(core::mem::size_of::<HopAgg>(), 64);
        assert_eq!(core::mem::offset_of!(FlowEntry, hop), 128);
        assert_eq!(core::mem::size_of::<FlowEntry>(), 7 * 64);
        assert_eq!(core::mem::align_of::<FlowEntry>(), 64);
    }

    fn key(i: u32) -> [u8; 13] {
        let mut k = [0u8; 13];
        k[..4].copy_from_slice(&i.to_be_bytes());
        k
    }

    #[test]
    fn entries_persist_and_age_out() {
        let mut c = FlowCache::new(64);
        c.entry(&key(1), 10, |_, _| panic!()).packets += 1;
        c.entry(&key(1), 20, |_, _| panic!()).packets += 1;
        c.entry(&key(2), 30, |_, _| panic!()).packets += 1;
        assert_eq!(c.get(&key(1)).unwrap().packets, 2);
        assert_eq!(c.get(&key(1)).unwrap().first_ns, 10);
        assert_eq!(c.occupied(), 2);
        c.entry(&key(1), 100, |_, _| panic!()).last_ns = 100;
        let mut gone = vec![];
        c.expire(140, Some(50), |_, e| gone.push(e.key));
        assert_eq!(gone, vec![key(2)]);
        assert!(c.get(&key(2)).is_none());
        assert_eq!(c.occupied(), 1);
        c.expire(140, None, |_, e| gone.push(e.key));
        assert_eq!(c.occupied(), 0);
    }

    #[test]
    fn full_row_evicts_least_recent() {
        let mut c = FlowCache::new(WAYS); // one row
        for i in 0..WAYS as u32 {
            let e = c.entry(&key(i), 100 + i as u64, |_, _| panic!("room left"));
            e.last_ns = 100 + i as u64;
        }
        c.entry(&key(0), 500, |_, _| panic!()).last_ns = 500;
        let mut evicted = None;
        c.entry(&key(99), 600, |_, e| evicted = Some(e.key));
        assert_eq!(evicted, Some(key(1)));
        assert!(c.get(&key(99)).is_some());
        assert!(c.get(&key(0)).is_some());
        assert_eq!(c.occupied(), WAYS);
    }
}
