//! A fast path in front of the sink: reports of flows the sink knows, on the path it knows, with
//! no event, aggregated before they reach it (`dta int-sink --xdp IFACE`: an XDP program,
//! `bpf/int_xdp.bpf.c`), and drained at each delta flush into the same FlowCache entries and
//! histogram deltas the sink's own reports update, so flow records, stores and histograms are
//! what they would be had the sink seen every report ([`crate::IntSink::set_fast_path`]).
//!
//! What the fast path may take is what makes no event and needs no per-report state: the change
//! events (latency and queue change) compare a report with the one before, so with either
//! configured the sink hands nothing over ([`FastPath::set_thresholds`] with `enabled` false).

use crate::layout::{FLOW_KEY_LEN, MAX_PATH};

/// Metrics per hop the fast path aggregates (the order of [`crate::Metric::ALL`]).
pub const FAST_METRICS: usize = 3;

/// One flow's aggregate since its last drain.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FastFlow {
    /// Reports aggregated.
    pub packets: u64,
    /// Hops of the path they took (the flow's learned path).
    pub hops: u8,
    /// When the latest of them arrived, on the sink's clock (the `now_ns` it is given).
    pub last_ns: u64,
    /// The Telemetry Report sequence number of the latest ([`crate::cache::FlowEntry::take_latest`]
    /// orders it against the reports the sink handled).
    pub seq: u32,
    /// `last` and `seq` are of a report taken since the flow was learned or last taken (false:
    /// none of those was newer than the latest the sink had; `last` is then not the flow's).
    pub latest: bool,
    /// Per hop and metric, the sum of the values.
    pub sum: [[u64; FAST_METRICS]; MAX_PATH],
    /// Per hop and metric, the latest report's value.
    pub last: [[u32; FAST_METRICS]; MAX_PATH],
}

/// The event thresholds the fast path must leave to the sink: a report with any value above its
/// threshold is the sink's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FastThresholds {
    /// Hand anything over at all (false: every report goes to the sink).
    pub enabled: bool,
    pub hop_latency: u32,
    pub queue_occupancy: u32,
    pub egress_tx_util: u32,
    pub path_latency: u32,
}

/// The fast path as the sink drives it (one per sink thread).
pub trait FastPath: Send {
    /// Flow `key` at FlowCache index `slot` has path `nodes` (hop 0 first): reports of it on
    /// this path without an event may be taken from now on, their latest values only from
    /// reports numbered after `seq` (the 22-bit sequence number of the flow's latest report,
    /// [`crate::cache::FlowEntry::take_latest`]). Called again when its path changes. An error
    /// (a full table) leaves the flow to the sink.
    fn learn(
        &mut self,
        key: &[u8; FLOW_KEY_LEN],
        slot: u32,
        nodes: &[u32],
        seq: u32,
    ) -> Result<(), String>;
    /// Flow `key` leaves the FlowCache: no more reports of it are taken.
    fn forget(&mut self, key: &[u8; FLOW_KEY_LEN]);
    /// Take (and zero) the aggregate of `slot`; `None` when no report was taken there.
    fn take(&mut self, slot: u32, now_ns: u64) -> Option<FastFlow>;
    /// Append to `out` (each once, ascending) the slots a report was taken in since the last
    /// call: a drain takes these, so its work scales with the flows that reported, not with
    /// the flows handed over.
    fn changed(&mut self, out: &mut Vec<u32>);
    /// Hand every histogram count taken (switch, metric index, bucket, count) to `add`, zeroing
    /// it.
    fn take_hist(&mut self, add: &mut dyn FnMut(u32, usize, u8, u64));
    /// The thresholds (the sink's run-time ones, at each drain).
    fn set_thresholds(&mut self, t: &FastThresholds);
    /// Datagrams the fast path dropped for their source (outside `[sink] allow`) since the
    /// last call, counted by the sink as its own `source_not_allowed` (one sink thread of a
    /// group takes them; the others get 0).
    fn take_source_rejects(&mut self) -> u64 {
        0
    }
}
