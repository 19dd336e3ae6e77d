//! Per-flush deltas of the histogram counters: the sink adds each sample's +1 here and writes one
//! Key-Increment per touched (node, metric, bucket) at the delta flush, with the sum as its
//! counter. Key-Increment is a wrapping add on each of its N counters ([DTA A.4]), so one add of
//! `k` leaves every counter exactly as `k` adds of 1 do. Fixed capacity, allocated once:
//! nothing here allocates per report.

use crate::layout::{hist_key, Buckets, Metric, HIST_KEY_LEN};

/// Histogram increments owed to the Key-Increment store: per switch, a dense block of
/// `metrics × buckets` sums, found through a small open-addressing table of node ids. A report's
/// 15 samples (5 hops × 3 metrics) touch 5 node slots and 5 blocks, which stay in the L1/L2
/// cache for the switches in use.
pub struct HistDeltas {
    /// Node id + 1 per slot (0: free), then the slot's block index.
    nodes: Box<[(u64, u32)]>,
    node_mask: usize,
    /// Blocks of `Metric::ALL.len() * buckets` sums, one per node in use.
    sums: Box<[u64]>,
    buckets: usize,
    /// The bucketing whose keys the counters are written under.
    scheme: Buckets,
    /// Subjects of the blocks in use, in first-touch order: a switch's node id, or a port's
    /// `port << 32 | node id` ([`port_subject`]).
    used: Vec<u64>,
    max_nodes: usize,
}

const METRICS: usize = Metric::ALL.len();

impl HistDeltas {
    /// Room for `capacity` counters of histograms bucketed by `scheme`: `capacity / (3 ·
    /// buckets)` switches (at least one) between flushes.
    pub fn new(capacity: usize, scheme: &Buckets) -> HistDeltas {
        let buckets = scheme.count().max(1);
        let nodes = (capacity / (METRICS * buckets)).max(1);
        let slots = (nodes * 2).next_power_of_two();
        HistDeltas {
            nodes: vec![(0, 0); slots].into_boxed_slice(),
            node_mask: slots - 1,
            sums: vec![0; nodes * METRICS * buckets].into_boxed_slice(),
            buckets,
            scheme: scheme.clone(),
            used: Vec::with_capacity(nodes),
            max_nodes: nodes,
        }
    }

    /// The first slot a node (`id + 1`) is looked for in.
    #[inline]
    fn home(&self, k: u64) -> usize {
        (k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize & self.node_mask
    }

    /// Switches with owed counters.
    pub fn len(&self) -> usize {
        self.used.len()
    }

    pub fn is_empty(&self) -> bool {
        self.used.is_empty()
    }

    /// Every switch block is in use: drain before the next add.
    pub fn is_full(&self) -> bool {
        self.used.len() >= self.max_nodes
    }

    /// Add 1 to the counter of `(node, metric, bucket)` (`bucket` below the histogram's bucket
    /// count). The caller drains when [`HistDeltas::is_full`], so there is always room.
    #[inline]
    pub fn add(&mut self, node: u32, metric: Metric, bucket: u16) {
        self.add_n(node, metric, bucket, 1);
    }

    /// Add `n` to the counter of `(node, metric, bucket)`, as [`HistDeltas::add`].
    pub fn add_n(&mut self, node: u32, metric: Metric, bucket: u16, n: u64) {
        let block = self.block(u64::from(node));
        let at = (block * METRICS + metric as usize - 1) * self.buckets
            + usize::from(bucket).min(self.buckets - 1);
        self.sums[at] += n;
    }

    /// Add 1 to the counter of `(node, Metric::ALL[m], bucket)` for every `Some(bucket)` at
    /// `buckets[m]`: one hop's samples, its switch looked up once.
    #[inline]
    pub fn add_hop(&mut self, node: u32, buckets: [Option<u16>; METRICS]) {
        self.add_hop_of(u64::from(node), buckets);
    }

    /// [`HistDeltas::add_hop`] for a subject (a switch's node id, or [`port_subject`]).
    #[inline]
    pub fn add_hop_of(&mut self, subject: u64, buckets: [Option<u16>; METRICS]) {
        let base = self.block(subject) * METRICS * self.buckets;
        for (m, b) in buckets.iter().enumerate() {
            if let Some(b) = *b {
                self.sums[base + m * self.buckets + usize::from(b).min(self.buckets - 1)] += 1;
            }
        }
    }

    /// The block of `subject`'s sums, taken if it has none.
    #[inline]
    fn block(&mut self, subject: u64) -> usize {
        let k = subject.wrapping_add(1);
        let mut i = self.home(k);
        loop {
            let (id, block) = self.nodes[i];
            if id == k {
                break block as usize;
            }
            if id == 0 {
                let block = self.used.len();
                self.nodes[i] = (k, block as u32);
                self.used.push(subject);
                break block;
            }
            i = (i + 1) & self.node_mask;
        }
    }

    /// Hand every owed counter (its Key-Increment key and sum) to `write` and empty the table;
    /// when any was owed, then the scheme's marker ([`Buckets::marker_key`]: how a query knows
    /// the bucketing of a window) with the samples drained, so that the marker counts every
    /// sample however often the table is flushed.
    pub fn drain(&mut self, mut write: impl FnMut(&[u8; HIST_KEY_LEN], u64)) {
        self.drain_subjects(|_, k, n| write(k, n));
    }

    /// [`HistDeltas::drain`], each counter with its subject (the marker's: [`MARKER_SUBJECT`]);
    /// keys name the subject's node (its low 32 bits).
    pub fn drain_subjects(&mut self, mut write: impl FnMut(u64, &[u8; HIST_KEY_LEN], u64)) {
        if self.used.is_empty() {
            return;
        }
        let per_node = METRICS * self.buckets;
        let mut samples = 0u64;
        // Log-linear sums are also written per power of two, under its log2 key
        // ([`Buckets::octave`]): a bucket's power of two never decreases along the block.
        let octaves = matches!(self.scheme, Buckets::LogLinear { .. });
        for (block, &subject) in self.used.iter().enumerate() {
            let node = subject as u32;
            let sums = &mut self.sums[block * per_node..(block + 1) * per_node];
            for (m, metric) in Metric::ALL.into_iter().enumerate() {
                let mut octave: Option<(u8, u64)> = None;
                for (b, c) in sums[m * self.buckets..(m + 1) * self.buckets]
                    .iter_mut()
                    .enumerate()
                {
                    if *c == 0 {
                        continue;
                    }
                    samples = samples.wrapping_add(*c);
                    write(subject, &self.scheme.key(node, metric, b as u16), *c);
                    if octaves {
                        let o = self.scheme.octave(b);
                        match &mut octave {
                            Some((at, sum)) if *at == o => *sum += *c,
                            _ => {
                                if let Some((at, sum)) = octave.replace((o, *c)) {
                                    write(subject, &hist_key(node, metric, at), sum);
                                }
                            }
                        }
                    }
                    *c = 0;
                }
                if let Some((at, sum)) = octave {
                    write(subject, &hist_key(node, metric, at), sum);
                }
            }
        }
        // Free the node slots of the drained switches alone, newest first: a later node's probe
        // may pass an earlier one's slot, which must still be taken while it is looked up.
        for &subject in self.used.iter().rev() {
            let k = subject.wrapping_add(1);
            let mut i = self.home(k);
            while self.nodes[i].0 != k {
                i = (i + 1) & self.node_mask;
            }
            self.nodes[i] = (0, 0);
        }
        self.used.clear();
        write(MARKER_SUBJECT, &self.scheme.marker_key(), samples);
    }
}

/// The subject of a port's histograms: `port << 32 | node id` (its low 32 bits the node's, as
/// a switch's subject is its node id).
pub fn port_subject(node: u32, port: u16) -> u64 {
    u64::from(port) << 32 | u64::from(node)
}

/// The port of a subject [`port_subject`] made.
pub fn subject_port(subject: u64) -> u16 {
    (subject >> 32) as u16
}

/// The subject [`HistDeltas::drain_subjects`] gives the marker: a port subject of node
/// 0xFFFF_FFFF (the marker key's) and port [`crate::layout::MARKER_PORT`].
pub const MARKER_SUBJECT: u64 = (crate::layout::MARKER_PORT as u64) << 32 | 0xFFFF_FFFF;

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn sums_per_key_and_empties() {
        let mut d = HistDeltas::new(4 * 3 * 33, &Buckets::Log2);
        for _ in 0..3 {
            d.add(7, Metric::HopLatency, 2);
        }
        d.add(7, Metric::QueueOccupancy, 2);
        d.add(0, Metric::EgressTxUtil, 0);
        assert_eq!(d.len(), 2);
        assert!(!d.is_full());
        d.add(u32::MAX, Metric::HopLatency, 32);
        assert!(!d.is_full());
        d.add(9, Metric::HopLatency, 1);
        assert!(d.is_full(), "4 switches held");
        let mut got = HashMap::new();
        d.drain(|k, n| {
            got.insert(*k, n);
        });
        // The four switches' five counters and the scheme's marker.
        assert_eq!(got.len(), 6);
        assert_eq!(
            got[&Buckets::Log2.marker_key()],
            3 + 1 + 1 + 1 + 1,
            "every sample"
        );
        assert_eq!(got[&hist_key(7, Metric::HopLatency, 2)], 3);
        assert_eq!(got[&hist_key(7, Metric::QueueOccupancy, 2)], 1);
        assert_eq!(got[&hist_key(0, Metric::EgressTxUtil, 0)], 1);
        assert_eq!(got[&hist_key(u32::MAX, Metric::HopLatency, 32)], 1);
        assert!(d.is_empty());
        let mut n = 0;
        d.drain(|_, _| n += 1);
        assert_eq!(n, 0);
        // Many switches sharing probe chains, drained and refilled: every one found again.
        let mut d2 = HistDeltas::new(64 * 3 * 33, &Buckets::Log2);
        for round in 0..3u64 {
            for node in 0..64u32 {
                for _ in 0..=node % 3 {
                    d2.add(node * 0x1_0001, Metric::QueueOccupancy, (node % 33) as u16);
                }
            }
            assert!(d2.is_full());
            let mut got = HashMap::new();
            d2.drain(|k, n| {
                got.insert(*k, n);
            });
            assert_eq!(got.len(), 65, "round {round}: 64 switches and the marker");
            for node in 0..64u32 {
                let k = hist_key(node * 0x1_0001, Metric::QueueOccupancy, (node % 33) as u8);
                assert_eq!(got[&k], u64::from(node % 3) + 1);
            }
            assert!(d2.is_empty());
        }
        d.add(7, Metric::HopLatency, 2);
        let mut got = vec![];
        d.drain(|k, c| got.push((*k, c)));
        assert_eq!(
            got,
            [
                (hist_key(7, Metric::HopLatency, 2), 1),
                (Buckets::Log2.marker_key(), 1)
            ]
        );
    }
}
