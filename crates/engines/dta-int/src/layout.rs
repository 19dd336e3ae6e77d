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

/// Key length of a histogram counter in the long tier: the key ‖ [`LONG_TIER`]. A Key-Increment
/// store of such keys (its windows longer, e.g. 24 of an hour) is the histograms' long tier:
/// the sink writes every histogram count into it too, and a question about more time than the
/// histogram store holds is answered from it (`docs/int-sink.md`, "Histograms").
pub const LONG_TIER_KEY_LEN: usize = HIST_KEY_LEN + 1;
/// The last byte of a long-tier key.
pub const LONG_TIER: u8 = 1;

/// Key length of a per-port histogram counter: `node_id u32 ‖ egress port u16 ‖ metric and
/// bucket (the histogram key's last 2 bytes)`. A Key-Increment store of such keys keeps the
/// histograms per port where the hops report their ports (INT bit 1).
pub const PORT_KEY_LEN: usize = HIST_KEY_LEN + 2;
/// The port of the per-port store's marker keys (no real port: a 16-bit port id of all ones).
pub const MARKER_PORT: u16 = 0xFFFF;

/// `key` for egress port `port` as the per-port store keys it.
pub fn port_key(key: &[u8; HIST_KEY_LEN], port: u16) -> [u8; PORT_KEY_LEN] {
    let mut k = [0u8; PORT_KEY_LEN];
    k[..4].copy_from_slice(&key[..4]);
    k[4..6].copy_from_slice(&port.to_be_bytes());
    k[6..].copy_from_slice(&key[4..]);
    k
}

/// `key` as the long tier keys it.
pub fn long_tier_key(key: &[u8; HIST_KEY_LEN]) -> [u8; LONG_TIER_KEY_LEN] {
    let mut k = [LONG_TIER; LONG_TIER_KEY_LEN];
    k[..HIST_KEY_LEN].copy_from_slice(key);
    k
}

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

/// Histogram bucketing:
///
/// - `Log2`: bucket 0 holds 0, bucket b ≥ 1 holds `[2^(b-1), 2^b)`; 33 buckets for u32 values.
/// - `Edges`: configured edges; bucket b holds `[edges[b-1], edges[b])`, bucket 0 below the first
///   edge and the last bucket from the last edge up, `edges.len() + 1` buckets.
/// - `LogLinear { bits }`: log-linear, as HdrHistogram buckets: values below `2^bits` each their
///   own bucket, then every power of two `[2^e, 2^(e+1))` cut into `2^bits` equal buckets, so a
///   bucket's width is at most `2^-bits` of its lower edge and its midpoint is within
///   [`Buckets::relative_error`] (`2^-(bits+1)`) of every value it holds. `bits` 1..=7 (up to
///   3 200 buckets for u32 values); configured by the error wanted
///   (`{ kind = "log_linear", relative_error = 0.01 }`: the coarsest buckets within it).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "BucketsConfig", into = "BucketsConfig")]
pub enum Buckets {
    #[default]
    Log2,
    Edges(Vec<u32>),
    LogLinear {
        bits: u8,
    },
}

/// How a configuration writes [`Buckets`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", deny_unknown_fields)]
enum BucketsConfig {
    Log2,
    Edges { edges: Vec<u32> },
    LogLinear { relative_error: f64 },
}

impl TryFrom<BucketsConfig> for Buckets {
    type Error = String;

    fn try_from(c: BucketsConfig) -> Result<Buckets, String> {
        let b = match c {
            BucketsConfig::Log2 => Buckets::Log2,
            BucketsConfig::Edges { edges } => Buckets::Edges(edges),
            BucketsConfig::LogLinear { relative_error } => Buckets::log_linear(relative_error)?,
        };
        b.validate()?;
        Ok(b)
    }
}

impl From<Buckets> for BucketsConfig {
    fn from(b: Buckets) -> BucketsConfig {
        match b {
            Buckets::Log2 => BucketsConfig::Log2,
            Buckets::Edges(edges) => BucketsConfig::Edges { edges },
            b @ Buckets::LogLinear { .. } => BucketsConfig::LogLinear {
                relative_error: b.relative_error().unwrap_or(0.0),
            },
        }
    }
}

/// Finest log-linear buckets: `2^-8` relative error, 3 200 buckets of a u32.
pub const MAX_LOG_LINEAR_BITS: u8 = 7;

/// The sink's default bucketing: log-linear within 1 % (`bits` 6: 0.78 %, 1 728 buckets).
pub const DEFAULT_HISTOGRAM: Buckets = Buckets::LogLinear { bits: 6 };

/// Key byte 4 of a log-linear bucket: the high bit set (log2 and edge keys hold the metric,
/// 1..=3, there), the metric in bits 4..=6, the bucket's high 4 bits below.
const LOG_LINEAR_TAG: u8 = 0x80;

/// The node id of the scheme marker: no switch (`0xFFFF_FFFF` is INT's "not available").
const MARKER_NODE: u32 = u32::MAX;
/// Key byte 4 of the scheme marker.
const MARKER_TAG: u8 = 0x7F;
/// The marker's scheme byte for `Log2` and `Edges` (the edges themselves are not recorded).
const MARKER_LOG2: u8 = 0;
const MARKER_EDGES: u8 = 0xFF;

impl Buckets {
    /// The coarsest log-linear buckets whose midpoints are within `relative_error` of every
    /// value they hold; an error outside `2^-(MAX_LOG_LINEAR_BITS+1)..=0.25`.
    pub fn log_linear(relative_error: f64) -> Result<Buckets, String> {
        (1..=MAX_LOG_LINEAR_BITS)
            .find(|&bits| (0.5f64).powi(i32::from(bits) + 1) <= relative_error)
            .filter(|_| relative_error <= 0.25)
            .map(|bits| Buckets::LogLinear { bits })
            .ok_or_else(|| {
                format!(
                    "histogram relative_error {relative_error}: between {} and 0.25",
                    (0.5f64).powi(i32::from(MAX_LOG_LINEAR_BITS) + 1)
                )
            })
    }

    /// The bucketing a query names: configured `edges` (checked), or `None` when it names none
    /// (empty or absent): the query then reads the one the sink recorded.
    pub fn named(edges: Option<Vec<u32>>) -> Result<Option<Buckets>, String> {
        match edges {
            Some(e) if !e.is_empty() => {
                let b = Buckets::Edges(e);
                b.validate()?;
                Ok(Some(b))
            }
            _ => Ok(None),
        }
    }

    /// Number of buckets.
    pub fn count(&self) -> usize {
        match self {
            Buckets::Log2 => 33,
            Buckets::Edges(e) => e.len() + 1,
            Buckets::LogLinear { bits } => {
                let sub = 1usize << bits;
                sub + (32 - usize::from(*bits)) * sub
            }
        }
    }

    /// The bucket of `v`.
    #[inline]
    pub fn bucket(&self, v: u32) -> u16 {
        match self {
            Buckets::Log2 => (32 - v.leading_zeros()) as u16,
            Buckets::Edges(e) => e.partition_point(|&x| x <= v) as u16,
            Buckets::LogLinear { bits } => {
                let bits = u32::from(*bits);
                if v < 1 << bits {
                    return v as u16;
                }
                let e = 31 - v.leading_zeros();
                let sub = (v >> (e - bits)) & ((1 << bits) - 1);
                ((1 << bits) + ((e - bits) << bits) + sub) as u16
            }
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
            Buckets::LogLinear { bits } => {
                let sub = 1usize << bits;
                if b < sub {
                    return (b as u64, Some(b as u64 + 1));
                }
                let e = (b - sub) / sub + usize::from(*bits);
                let width = 1u64 << (e - usize::from(*bits));
                let lo = (1u64 << e) + ((b - sub) % sub) as u64 * width;
                (lo, Some(lo + width))
            }
        }
    }

    /// What a bucket's count stands for: its midpoint (its one value when it holds one), the
    /// lower edge of an unbounded bucket.
    pub fn estimate(&self, b: usize) -> u64 {
        match self.range(b) {
            (lo, Some(hi)) => lo + (hi - lo - 1) / 2,
            (lo, None) => lo,
        }
    }

    /// The log2 bucket ([`Buckets::Log2`]) that holds every value of log-linear bucket `b`:
    /// its power of two. The sink writes each power of two's sum under its log2 key beside the
    /// log-linear buckets, so a query reads the 33 of them first and then only the log-linear
    /// buckets of the powers of two that hold samples (a Key-Increment store answers a key
    /// never written with another's count only when all its counters are shared, and fewer
    /// such keys asked is fewer such answers).
    pub fn octave(&self, b: usize) -> u8 {
        match self {
            Buckets::LogLinear { bits } => {
                let sub = 1usize << bits;
                if b < sub {
                    (usize::BITS - b.leading_zeros()) as u8
                } else {
                    ((b - sub) / sub + usize::from(*bits) + 1) as u8
                }
            }
            _ => Buckets::Log2.bucket(self.range(b).0 as u32) as u8,
        }
    }

    /// The log-linear buckets whose values log2 bucket `o` holds (in order).
    pub fn in_octave(&self, o: u8) -> std::ops::Range<usize> {
        match self {
            Buckets::LogLinear { bits } => {
                let (bits, o) = (usize::from(*bits), usize::from(o));
                let sub = 1usize << bits;
                if o <= bits {
                    // Values below 2^bits: one bucket each.
                    let (lo, hi) = Buckets::Log2.range(o);
                    lo as usize..hi.unwrap_or(0) as usize
                } else {
                    let first = sub + (o - 1 - bits) * sub;
                    first..first + sub
                }
            }
            _ => 0..self.count(),
        }
    }

    /// The bound on the relative error of [`Buckets::estimate`] for every value of a bounded
    /// bucket: `2^-(bits+1)` log-linear, `1/3` log2; `None` for configured edges (as wide as
    /// configured).
    pub fn relative_error(&self) -> Option<f64> {
        match self {
            Buckets::Log2 => Some(1.0 / 3.0),
            Buckets::Edges(_) => None,
            Buckets::LogLinear { bits } => Some((0.5f64).powi(i32::from(*bits) + 1)),
        }
    }

    /// Check the configuration: edges strictly increasing, at most 255 of them; log-linear
    /// `bits` 1..=[`MAX_LOG_LINEAR_BITS`].
    pub fn validate(&self) -> Result<(), String> {
        match self {
            Buckets::Edges(e) => {
                if e.is_empty() || e.len() > 255 {
                    return Err("histogram edges: 1..=255 edges".into());
                }
                if e.windows(2).any(|w| w[0] >= w[1]) {
                    return Err("histogram edges must be strictly increasing".into());
                }
            }
            Buckets::LogLinear { bits } if !(1..=MAX_LOG_LINEAR_BITS).contains(bits) => {
                return Err(format!(
                    "log-linear histogram bits {bits}: 1..={MAX_LOG_LINEAR_BITS}"
                ));
            }
            _ => {}
        }
        Ok(())
    }

    /// The Key-Increment key of bucket `b` of `metric` at switch `node_id` ([DTA Table 2]:
    /// per-switch, per-metric histograms → Key-Increment): `node_id u32 ‖ metric u8 ‖ bucket
    /// u8` for log2 and edges; log-linear `node_id u32 ‖ 0x80 | metric << 4 | b >> 8 ‖ b & 0xFF`
    /// (the high bit keeps the two apart).
    #[inline]
    pub fn key(&self, node_id: u32, metric: Metric, b: u16) -> [u8; HIST_KEY_LEN] {
        match self {
            Buckets::LogLinear { .. } => {
                let mut k = [0u8; HIST_KEY_LEN];
                k[..4].copy_from_slice(&node_id.to_be_bytes());
                k[4] = LOG_LINEAR_TAG | (metric as u8) << 4 | (b >> 8) as u8 & 0x0F;
                k[5] = b as u8;
                k
            }
            _ => hist_key(node_id, metric, b as u8),
        }
    }

    /// The key of the scheme marker: the sink adds to it at every histogram flush, so a query
    /// can tell which bucketing wrote a window ([`Buckets::detect`]). No switch's key (node
    /// `0xFFFF_FFFF`, byte 4 `0x7F`).
    pub fn marker_key(&self) -> [u8; HIST_KEY_LEN] {
        let mut k = [0u8; HIST_KEY_LEN];
        k[..4].copy_from_slice(&MARKER_NODE.to_be_bytes());
        k[4] = MARKER_TAG;
        k[5] = match self {
            Buckets::Log2 => MARKER_LOG2,
            Buckets::Edges(_) => MARKER_EDGES,
            Buckets::LogLinear { bits } => *bits,
        };
        k
    }

    /// The bucketing the sink recorded, from the marker counts `count(key)` reads: log2 or the
    /// log-linear bits whose marker is set (the one counted most when a window saw a change);
    /// `Ok(None)` when no marker is set (nothing written there yet, or a sink older than the
    /// marker); an error for configured edges, which the query must name.
    pub fn detect(
        mut count: impl FnMut(&[u8; HIST_KEY_LEN]) -> Result<u64, String>,
    ) -> Result<Option<Buckets>, String> {
        let mut best: Option<(u64, Buckets)> = None;
        let candidates = std::iter::once(Buckets::Log2)
            .chain((1..=MAX_LOG_LINEAR_BITS).map(|bits| Buckets::LogLinear { bits }))
            .chain(std::iter::once(Buckets::Edges(vec![])));
        for b in candidates {
            let n = count(&b.marker_key())?;
            if n > 0 && best.as_ref().is_none_or(|(m, _)| n > *m) {
                best = Some((n, b));
            }
        }
        match best {
            Some((_, Buckets::Edges(_))) => {
                Err("the sink wrote this histogram with configured edges: name them (edges)".into())
            }
            other => Ok(other.map(|(_, b)| b)),
        }
    }
}

/// The log2 / edges key of one histogram bucket: `node_id u32 ‖ metric u8 ‖ bucket u8`
/// ([`Buckets::key`] is every scheme's).
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
    fn log_linear_buckets_hold_every_value_within_the_stated_error() {
        for bits in 1..=MAX_LOG_LINEAR_BITS {
            let b = Buckets::LogLinear { bits };
            let err = b.relative_error().unwrap();
            assert_eq!(b.bucket(u32::MAX) as usize, b.count() - 1, "bits {bits}");
            // Every bucket boundary and its neighbours, and a spread of values.
            let mut vs: Vec<u32> = (0..200).collect();
            for e in 0..32 {
                for d in [-1i64, 0, 1] {
                    vs.push(((1i64 << e) + d).clamp(0, u32::MAX as i64) as u32);
                }
            }
            vs.extend((0..2000u64).map(|i| (i * 2_147_483 + 7) as u32));
            vs.push(u32::MAX);
            let mut last = 0;
            for v in {
                vs.sort();
                vs
            } {
                let k = b.bucket(v) as usize;
                assert!(k >= last, "buckets grow with the value");
                last = k;
                let (lo, hi) = b.range(k);
                assert!(
                    lo <= v as u64 && (v as u64) < hi.unwrap(),
                    "{v} in {lo}..{hi:?}"
                );
                let est = b.estimate(k) as f64;
                assert!(
                    (est - v as f64).abs() <= err * v as f64 + 0.5,
                    "bits {bits}: {v} estimated {est}, error over {err}"
                );
            }
        }
        assert_eq!(
            Buckets::log_linear(0.01),
            Ok(Buckets::LogLinear { bits: 6 })
        );
        assert_eq!(
            Buckets::log_linear(0.02),
            Ok(Buckets::LogLinear { bits: 5 })
        );
        assert!(Buckets::log_linear(0.001).is_err());
        assert!(Buckets::log_linear(0.5).is_err());
        assert_eq!(DEFAULT_HISTOGRAM.count(), 1728);
    }

    #[test]
    fn log_linear_buckets_sit_in_their_power_of_two() {
        for bits in 1..=MAX_LOG_LINEAR_BITS {
            let b = Buckets::LogLinear { bits };
            let mut all = vec![];
            for o in 0..=32u8 {
                let r = b.in_octave(o);
                for k in r.clone() {
                    assert_eq!(b.octave(k), o, "bits {bits} bucket {k}");
                    let (lo, _) = b.range(k);
                    assert_eq!(Buckets::Log2.bucket(lo as u32), u16::from(o));
                }
                all.extend(r);
            }
            assert_eq!(all, (0..b.count()).collect::<Vec<_>>(), "bits {bits}");
        }
    }

    #[test]
    fn keys_of_the_schemes_and_the_marker_never_meet() {
        let ll = Buckets::LogLinear { bits: 7 };
        let mut seen = std::collections::HashSet::new();
        for m in Metric::ALL {
            for b in 0..ll.count() as u16 {
                assert!(seen.insert(ll.key(9, m, b)));
            }
            for b in 0..=255u8 {
                assert!(seen.insert(hist_key(9, m, b)));
            }
        }
        for b in [Buckets::Log2, Buckets::Edges(vec![1]), ll.clone()] {
            assert!(seen.insert(b.marker_key()));
        }
        let counts =
            |want: [u8; HIST_KEY_LEN]| move |k: &[u8; HIST_KEY_LEN]| Ok(u64::from(*k == want) * 3);
        assert_eq!(
            Buckets::detect(counts(ll.marker_key())),
            Ok(Some(ll.clone()))
        );
        assert_eq!(
            Buckets::detect(counts(Buckets::Log2.marker_key())),
            Ok(Some(Buckets::Log2))
        );
        assert!(Buckets::detect(counts(Buckets::Edges(vec![1]).marker_key())).is_err());
        assert_eq!(Buckets::detect(|_| Ok(0)), Ok(None));
    }

    #[test]
    fn histogram_settings_read_and_written() {
        #[derive(Deserialize, Serialize)]
        struct F {
            h: Buckets,
        }
        let f: F = toml::from_str("h = { kind = \"log_linear\", relative_error = 0.02 }").unwrap();
        assert_eq!(f.h, Buckets::LogLinear { bits: 5 });
        let f: F = toml::from_str("h = { kind = \"edges\", edges = [10, 100] }").unwrap();
        assert_eq!(f.h, Buckets::Edges(vec![10, 100]));
        let f: F = toml::from_str("h = { kind = \"log2\" }").unwrap();
        assert_eq!(f.h, Buckets::Log2);
        assert!(toml::from_str::<F>("h = { kind = \"edges\", edges = [3, 3] }").is_err());
        assert!(
            toml::from_str::<F>("h = { kind = \"log_linear\", relative_error = 2.0 }").is_err()
        );
        let back = toml::to_string(&F {
            h: Buckets::LogLinear { bits: 6 },
        })
        .unwrap();
        assert!(back.contains("relative_error = 0.0078125"), "{back}");
    }

    #[test]
    fn hist_key_layout() {
        assert_eq!(
            hist_key(0x01020304, Metric::QueueOccupancy, 7),
            [1, 2, 3, 4, 2, 7]
        );
    }
}
