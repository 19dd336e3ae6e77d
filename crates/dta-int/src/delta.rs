//! Per-flush deltas of the histogram counters: the sink adds each sample's +1 here and writes one
//! Key-Increment per touched (node, metric, bucket) at the delta flush, with the sum as its
//! counter. Key-Increment is a wrapping add on each of its N counters ([DTA A.4]), so one add of
//! `k` leaves every counter exactly as `k` adds of 1 do. A fixed-capacity open-addressing table,
//! allocated once: nothing here allocates per report.

use crate::layout::{hist_key, Metric, HIST_KEY_LEN};

/// Histogram increments owed to the Key-Increment store.
pub struct HistDeltas {
    /// `(packed key, count)`: the key `node << 16 | metric << 8 | bucket` (never 0, as a metric
    /// is never 0), 0 for a free slot; key and count share a cache line.
    slots: Box<[(u64, u64)]>,
    /// Occupied slots, in first-touch order (what a flush walks).
    used: Vec<u32>,
    mask: usize,
    limit: usize,
}

#[inline]
fn pack(node: u32, metric: Metric, bucket: u8) -> u64 {
    (u64::from(node) << 16) | ((metric as u64) << 8) | u64::from(bucket)
}

impl HistDeltas {
    /// Room for `capacity` distinct counters (the table is twice that, rounded up to a power of
    /// two, and reports itself full at `capacity`).
    pub fn new(capacity: usize) -> HistDeltas {
        let capacity = capacity.max(1);
        let slots = (capacity * 2).next_power_of_two();
        HistDeltas {
            slots: vec![(0, 0); slots].into_boxed_slice(),
            used: Vec::with_capacity(capacity),
            mask: slots - 1,
            limit: capacity,
        }
    }

    /// Distinct counters owed.
    pub fn len(&self) -> usize {
        self.used.len()
    }

    pub fn is_empty(&self) -> bool {
        self.used.is_empty()
    }

    /// The table holds as many counters as it was built for: flush before the next add.
    pub fn is_full(&self) -> bool {
        self.used.len() >= self.limit
    }

    /// Add 1 to the counter of `(node, metric, bucket)`. The caller flushes when
    /// [`HistDeltas::is_full`], so a free slot always exists.
    #[inline]
    pub fn add(&mut self, node: u32, metric: Metric, bucket: u8) {
        let k = pack(node, metric, bucket);
        let mut i = (k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize & self.mask;
        loop {
            let slot = &mut self.slots[i];
            if slot.0 == k {
                slot.1 += 1;
                return;
            }
            if slot.0 == 0 {
                *slot = (k, 1);
                self.used.push(i as u32);
                return;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Hand every owed counter (its Key-Increment key and sum) to `write` and empty the table.
    pub fn drain(&mut self, mut write: impl FnMut(&[u8; HIST_KEY_LEN], u64)) {
        for &i in &self.used {
            let (k, count) = std::mem::take(&mut self.slots[i as usize]);
            let metric = match (k >> 8) as u8 {
                1 => Metric::HopLatency,
                2 => Metric::QueueOccupancy,
                _ => Metric::EgressTxUtil,
            };
            write(&hist_key((k >> 16) as u32, metric, k as u8), count);
        }
        self.used.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn sums_per_key_and_empties() {
        let mut d = HistDeltas::new(4);
        for _ in 0..3 {
            d.add(7, Metric::HopLatency, 2);
        }
        d.add(7, Metric::QueueOccupancy, 2);
        d.add(0, Metric::EgressTxUtil, 0);
        assert_eq!(d.len(), 3);
        assert!(!d.is_full());
        d.add(u32::MAX, Metric::HopLatency, 32);
        assert!(d.is_full());
        let mut got = HashMap::new();
        d.drain(|k, n| {
            got.insert(*k, n);
        });
        assert_eq!(got.len(), 4);
        assert_eq!(got[&hist_key(7, Metric::HopLatency, 2)], 3);
        assert_eq!(got[&hist_key(7, Metric::QueueOccupancy, 2)], 1);
        assert_eq!(got[&hist_key(0, Metric::EgressTxUtil, 0)], 1);
        assert_eq!(got[&hist_key(u32::MAX, Metric::HopLatency, 32)], 1);
        assert!(d.is_empty());
        let mut n = 0;
        d.drain(|_, _| n += 1);
        assert_eq!(n, 0);
        d.add(7, Metric::HopLatency, 2);
        d.drain(|k, c| {
            assert_eq!((*k, c), (hist_key(7, Metric::HopLatency, 2), 1));
        });
    }
}
