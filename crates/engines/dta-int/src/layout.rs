//! How INT data is encoded into DTA reports ([DTA Table 2]): the Key-Write path record, the Append
//! event record, the Key-Increment histogram key and bucketing, the Postcarding value. These are
//! the byte layouts `docs/int-sink.md` documents; the queries decode exactly what this encodes.

use serde::{Deserialize, Serialize};

/// Longest path the sink records ([DTA Table 2] and [INT-NIC §IV] use 5 hops): the Key-Write path
/// record holds 5 node ids, the FlowCache 5 hops per flow.
pub const MAX_PATH: usize = 5;

/// Key length of every flow-keyed store: `FlowKey::key13()`, `src dst sport dport proto`.
pub const FLOW_KEY_LEN: usize = 13;

/// Data length of the Key-Write path record: `hops u8, reserved [u8; 3]`, then `MAX_PATH` node
/// ids (u32 big-endian) in stack order (newest hop first, as INT carries them); unused ids are
/// 0xFFFF_FFFF.
pub const PATH_DATA_LEN: usize = 4 + 4 * MAX_PATH;

/// Length of one Append event record.
pub const EVENT_LEN: usize = 32;

/// Key length of a histogram counter: `node_id u32 ‖ metric u8 ‖ bucket u8`.
pub const HIST_KEY_LEN: usize = 6;

/// Encode a path (node ids newest first) as the Key-Write data ([DTA Table 2]: "INT path traces:
/// flow 5-tuple → list of node ids"). Paths longer than [`MAX_PATH`] keep the newest hops.
pub fn encode_path(newest_first: &[u32]) -> [u8; PATH_DATA_LEN] {
    let mut d = [0xFFu8; PATH_DATA_LEN];
    let n = newest_first.len().min(MAX_PATH);
    d[0] = n as u8;
    d[1..4].fill(0);
    for (i, id) in newest_first[..n].iter().enumerate() {
        d[4 + 4 * i..8 + 4 * i].copy_from_slice(&id.to_be_bytes());
    }
    d
}

/// Decode a path record into node ids from the INT source (hop 0) to the last hop. `None` if
/// the record is malformed.
pub fn decode_path(d: &[u8]) -> Option<Vec<u32>> {
    if d.len() != PATH_DATA_LEN || d[0] as usize > MAX_PATH {
        return None;
    }
    let n = d[0] as usize;
    let mut v: Vec<u32> = (0..n)
        .map(|i| u32::from_be_bytes(d[4 + 4 * i..8 + 4 * i].try_into().unwrap()))
        .collect();
    v.reverse();
    Some(v)
}

/// The metrics the sink tracks per hop ([INT-NIC §III]: switch id, hop latency, queue occupancy,
/// link utilisation). The discriminant is the histogram key's metric byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    HopLatency = 1,
    QueueOccupancy = 2,
    EgressTxUtil = 3,
}

impl Metric {
    pub const ALL: [Metric; 3] = [
        Metric::HopLatency,
        Metric::QueueOccupancy,
        Metric::EgressTxUtil,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Metric::HopLatency => "hop_latency",
            Metric::QueueOccupancy => "queue_occupancy",
            Metric::EgressTxUtil => "egress_tx_util",
        }
    }

    pub fn from_name(s: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.name() == s)
    }
}

/// Histogram bucketing: log2 (bucket 0 holds 0, bucket b ≥ 1 holds `[2^(b-1), 2^b)`, 33 buckets
/// for u32 values) or configured edges (bucket b holds `[edges[b-1], edges[b])`, with bucket 0
/// below the first edge and the last bucket from the last edge up: `edges.len() + 1` buckets).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case", tag = "kind", content = "edges")]
pub enum Buckets {
    #[default]
    Log2,
    Edges(Vec<u32>),
}

impl Buckets {
    /// Number of buckets (at most 256: the bucket is one byte of the key).
    pub fn count(&self) -> usize {
        match self {
            Buckets::Log2 => 33,
            Buckets::Edges(e) => e.len() + 1,
        }
    }

    /// The bucket of `v`.
    #[inline]
    pub fn bucket(&self, v: u32) -> u8 {
        match self {
            Buckets::Log2 => (32 - v.leading_zeros()) as u8,
            Buckets::Edges(e) => e.partition_point(|&x| x <= v) as u8,
        }
    }

    /// `[lo, hi)` of bucket `b` (`hi = None`: unbounded).
    pub fn range(&self, b: usize) -> (u64, Option<u64>) {
        match self {
            Buckets::Log2 if b == 0 => (0, Some(1)),
            Buckets::Log2 => (1u64 << (b - 1), (b < 32).then(|| 1u64 << b)),
            Buckets::Edges(e) => (
                if b == 0 { 0 } else { e[b - 1] as u64 },
                e.get(b).map(|&x| x as u64),
            ),
        }
    }

    /// Check the configuration: edges strictly increasing, at most 255 of them.
    pub fn validate(&self) -> Result<(), String> {
        if let Buckets::Edges(e) = self {
            if e.is_empty() || e.len() > 255 {
                return Err("histogram edges: 1..=255 edges".into());
            }
            if e.windows(2).any(|w| w[0] >= w[1]) {
                return Err("histogram edges must be strictly increasing".into());
            }
        }
        Ok(())
    }
}

/// The Key-Increment key of one histogram bucket ([DTA Table 2]: per-switch, per-metric
/// histograms → Key-Increment).
pub fn hist_key(node_id: u32, metric: Metric, bucket: u8) -> [u8; HIST_KEY_LEN] {
    let mut k = [0u8; HIST_KEY_LEN];
    k[..4].copy_from_slice(&node_id.to_be_bytes());
    k[4] = metric as u8;
    k[5] = bucket;
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_round_trip_and_truncation() {
        let d = encode_path(&[5, 4, 3]);
        assert_eq!(d[0], 3);
        assert_eq!(&d[4..8], &5u32.to_be_bytes());
        assert_eq!(&d[16..20], &[0xff; 4]);
        assert_eq!(decode_path(&d).unwrap(), vec![3, 4, 5]);
        let d = encode_path(&[7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(decode_path(&d).unwrap(), vec![3, 4, 5, 6, 7]);
        assert!(decode_path(&d[..10]).is_none());
    }

    #[test]
    fn log2_buckets() {
        let b = Buckets::Log2;
        assert_eq!(b.bucket(0), 0);
        assert_eq!(b.bucket(1), 1);
        assert_eq!(b.bucket(2), 2);
        assert_eq!(b.bucket(3), 2);
        assert_eq!(b.bucket(4), 3);
        assert_eq!(b.bucket(u32::MAX), 32);
        for v in [0u32, 1, 5, 1000, 1 << 31, u32::MAX] {
            let (lo, hi) = b.range(b.bucket(v) as usize);
            assert!(lo <= v as u64 && hi.is_none_or(|h| (v as u64) < h), "{v}");
        }
    }

    #[test]
    fn edge_buckets() {
        let b = Buckets::Edges(vec![10, 100]);
        assert_eq!(b.count(), 3);
        assert_eq!(b.bucket(9), 0);
        assert_eq!(b.bucket(10), 1);
        assert_eq!(b.bucket(99), 1);
        assert_eq!(b.bucket(100), 2);
        assert_eq!(b.range(2), (100, None));
        assert!(Buckets::Edges(vec![3, 3]).validate().is_err());
    }

    #[test]
    fn hist_key_layout() {
        assert_eq!(
            hist_key(0x01020304, Metric::QueueOccupancy, 7),
            [1, 2, 3, 4, 2, 7]
        );
    }
}
