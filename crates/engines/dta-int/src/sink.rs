// Size: the INT sink's pipeline (admission, parsing, FlowCache, events, the writes into its stores)
// runs per report in this order and shares the sink's state.
//! The INT sink ([INT-NIC §III]) on top of DTA's translator ([DTA Table 2]). Every INT packet or
//! telemetry report updates the FlowCache and raises its events at once; what it owes the
//! stores is aggregated (the flow's latest path record and postcards in its FlowCache entry,
//! histogram increments summed per counter in [`HistDeltas`]) and written as DTA reports at the
//! delta flush ([`IntSinkConfig::delta_flush_ms`], capacity evictions, aging, a stop),
//! fed to an in-process [`Translator`] through [`Translator::apply`], so the stores it writes are
//! the same stores any DTA reporter writes (`docs/int-sink.md`, "Aggregation"):
//!
//! | INT data | DTA report |
//! | --- | --- |
//! | INT-MD path trace | Key-Write, key = 13-byte flow, data = path record (`layout`) |
//! | per-hop latency (INT-MD hops, INT-MX/XD postcards) | Postcarding, key = flow, hop index |
//! | threshold / change events, drop reports | Append, one list per event kind |
//! | per-switch per-metric histograms | Key-Increment, key = node ‖ metric ‖ bucket, +1; with a store of the long tier's keys, there too (key ‖ 1) |
//! | per-port histograms, where hops report ports (INT bit 1) | with a store of 8-byte keys: Key-Increment, key = node ‖ egress port ‖ metric ‖ bucket, +1 |

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use dta_int_wire as int;
use dta_int_wire::{
    find_int, find_int_ip, parse_report, GroupHeader, HopStack, IndividualReport, IntDetect,
    LegacyReport, LegacySubHeader, TelemetryReport,
};
use dta_net::{ethernet, ipv4};
use dta_translator::{Sinks, Translator};
use dta_wire::prefix::AllowList;
use dta_wire::Report;

use crate::cache::{FlowCache, FlowEntry, Pending, ReportSeq, LATENCY, QUEUE, UTIL};
use crate::delta::HistDeltas;
use crate::events::{
    Event, EventBus, EventKind, EvictReason, FlowRecord, FlowSummary, Notification, Subscription,
    ThresholdConfig, Thresholds, HOP_NONE,
};
use crate::fast::{FastFlow, FastPath, FastThresholds, FAST_METRICS};
use crate::layout::{
    encode_path, Buckets, Metric, EVENT_LEN, FLOW_KEY_LEN, MAX_PATH, PATH_DATA_LEN,
};

/// The `[int_sink]` configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IntSinkConfig {
    /// INT detection inside frames (INT v2.1 §5.7.3): UDP destination port of INT over UDP.
    pub int_udp_port: Option<u16>,
    /// INT detection by DSCP value (mask 0x3F).
    pub int_dscp: Option<u8>,
    /// INT detection by a 64-bit probe marker.
    pub probe_marker: Option<u64>,
    /// Flows the FlowCache holds (rounded up).
    pub flow_capacity: usize,
    /// A flow not updated for this long is evicted and its record emitted (aging).
    pub idle_timeout_ms: u64,
    /// A flow still active is summarised again every this long (NetFlow's active timeout,
    /// [RFC 7011] §5 "active timeout"): long flows appear in discovery while they run, and
    /// their summaries are the flow over time. 0: only when they leave the FlowCache.
    pub active_timeout_ms: u64,
    /// Copies of each Key-Write path record and Key-Increment counter ([DTA A.5]).
    pub redundancy: u8,
    /// Append list of the first event kind; kind k goes to `event_list_base + k - 1`.
    pub event_list_base: u32,
    /// Write events to the Append store (they always go to subscribers).
    pub events_to_store: bool,
    /// Histogram bucketing (default: log-linear within 1 %, [`crate::layout::DEFAULT_HISTOGRAM`]).
    pub histogram: Buckets,
    /// Postcarding value of a hop latency: `min(latency / postcard_divisor, postcard_values - 1)`.
    pub postcard_divisor: u32,
    /// Size of the Postcarding value set V = 0..postcard_values (the store's `values`).
    pub postcard_values: u32,
    /// Also send INT-MD hops' latencies as postcards (so hop latency queries work for MD too).
    pub md_postcards: bool,
    /// Hop index of an INT-MX/XD postcard = `initial_ttl - TTL` of its inner packet.
    pub initial_ttl: u8,
    pub thresholds: ThresholdConfig,
    /// Reporter prefixes telemetry reports are taken from (`["10.0.0.0/8", "::1/128"]`), as
    /// the translator's `allow`: default loopback only. Others are dropped unparsed and
    /// counted (`sources_rejected`).
    pub allow: AllowList,
    /// `dta int-sink`: sink threads, each with its own `SO_REUSEPORT` socket, flows steered to
    /// them by a hash of the reported flow; 0: one per available core.
    pub threads: usize,
    /// `dta int-sink`: receive buffer per socket, bytes (forced with `SO_RCVBUFFORCE` where
    /// permitted, else capped by `net.core.rmem_max`; a smaller grant is warned about and
    /// counted in `recv_buffer_short`): what a burst can fill before the kernel drops reports.
    pub recv_buffer: usize,
    /// `dta int-sink`: datagrams taken per `recvmmsg` call.
    pub recv_batch: usize,
    /// `dta int-sink`: after a partial batch, how long a sink thread lets the next gather
    /// (microseconds; 0: no pause): at most this much latency, and at most one wake-up per this
    /// long at paced rates, where a wake-up costs more than the few reports it brings.
    pub recv_gather_us: u64,
    /// Aggregate store writes into per-flush deltas (`false`: every report's writes go to the
    /// stores before the next report, at ~21 translator reports per 5-hop report).
    pub aggregate: bool,
    /// Longest time between delta flushes ([`IntSink::tick`]): what a query may miss.
    pub delta_flush_ms: u64,
    /// Histogram counters held between flushes (as blocks of 3 metrics × buckets per switch:
    /// `hist_deltas / (3 · buckets)` switches, 8 bytes each); a full table is flushed early.
    /// The default, 2^20 (8 MiB per sink thread), holds 202 switches of the default log-linear
    /// buckets, 10 592 of log2.
    pub hist_deltas: usize,
}

/// Default `active_timeout_ms`: a running flow is summarised every 10 s, the console's
/// resolution of a flow over time.
pub const DEFAULT_ACTIVE_TIMEOUT_MS: u64 = 10_000;

/// Most `dta int-sink` threads.
pub use crate::shard::MAX_THREADS;
/// Default `recv_buffer`: 64 MiB per socket, what lost no report at the sender's full rate end
/// to end on a loaded 2-core VM (`docs/benchmarks.md`, "INT sink end to end"; 8 MiB lost
/// 0.01-1 % there while the sink threads waited for a CPU).
pub const DEFAULT_RECV_BUFFER: usize = 64 << 20;
/// Default `recv_gather_us`: 500 us, the translator's.
pub use dta_translator::config::DEFAULT_RECV_GATHER_US;
/// Largest `recv_batch`: the translator's.
pub use dta_translator::config::MAX_RECV_BATCH;
/// Largest `recv_gather_us`: the translator's.
pub use dta_translator::config::MAX_RECV_GATHER_US;
/// Smallest and largest `recv_buffer`: the translator's.
pub use dta_translator::config::RECV_BUFFER_RANGE;

impl Default for IntSinkConfig {
    fn default() -> Self {
        IntSinkConfig {
            int_udp_port: Some(5000),
            int_dscp: None,
            probe_marker: None,
            flow_capacity: 1 << 16,
            idle_timeout_ms: 1000,
            active_timeout_ms: DEFAULT_ACTIVE_TIMEOUT_MS,
            redundancy: dta_wire::DEFAULT_REDUNDANCY,
            event_list_base: 0,
            events_to_store: true,
            histogram: crate::layout::DEFAULT_HISTOGRAM,
            postcard_divisor: 1,
            postcard_values: 1 << 16,
            md_postcards: true,
            initial_ttl: 64,
            thresholds: ThresholdConfig::default(),
            allow: AllowList::loopback(),
            threads: 0,
            recv_buffer: DEFAULT_RECV_BUFFER,
            recv_batch: 64,
            recv_gather_us: DEFAULT_RECV_GATHER_US,
            aggregate: true,
            delta_flush_ms: 100,
            hist_deltas: 1 << 20,
        }
    }
}

impl IntSinkConfig {
    pub fn detect(&self) -> IntDetect {
        IntDetect {
            udp_port: self.int_udp_port,
            dscp: self.int_dscp.map(|d| (d, 0x3f)),
            probe_marker: self.probe_marker,
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        self.histogram.validate()?;
        self.allow.validate("allow")?;
        if !(1..=dta_wire::MAX_REDUNDANCY).contains(&self.redundancy) {
            return Err(format!(
                "redundancy must be 1..={}",
                dta_wire::MAX_REDUNDANCY
            ));
        }
        if self.postcard_divisor == 0 || self.postcard_values == 0 {
            return Err("postcard_divisor and postcard_values must be > 0".into());
        }
        if self.threads > MAX_THREADS {
            return Err(format!(
                "threads must be 0 (one per core) ..= {MAX_THREADS}"
            ));
        }
        if !RECV_BUFFER_RANGE.contains(&self.recv_buffer) {
            return Err(format!(
                "recv_buffer must be {}..={} bytes",
                RECV_BUFFER_RANGE.start(),
                RECV_BUFFER_RANGE.end()
            ));
        }
        if !(1..=MAX_RECV_BATCH).contains(&self.recv_batch) {
            return Err(format!("recv_batch must be 1..={MAX_RECV_BATCH}"));
        }
        if self.recv_gather_us > MAX_RECV_GATHER_US {
            return Err(format!(
                "recv_gather_us must be 0..={MAX_RECV_GATHER_US} microseconds"
            ));
        }
        if self.hist_deltas == 0 || self.hist_deltas > 1 << 24 {
            return Err("hist_deltas must be 1..=16777216".into());
        }
        // The event kinds' lists and the flow summaries' follow the base.
        let max_base = u32::MAX - crate::events::FLOW_SUMMARY_LIST;
        if self.event_list_base > max_base {
            return Err(format!("event_list_base must be 0..={max_base}"));
        }
        Ok(())
    }

    /// The Postcarding value of a hop latency.
    pub fn postcard_value(&self, latency: u32) -> u32 {
        (latency / self.postcard_divisor).min(self.postcard_values - 1)
    }
}

/// Why a datagram was dropped for its source, before parsing; counted per variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceReject {
    /// The source address is outside the allow-list (the translator's reason name).
    NotAllowed,
}

impl SourceReject {
    /// Every reason, in counter order.
    pub const ALL: [SourceReject; 1] = [SourceReject::NotAllowed];

    /// The counter name.
    pub fn reason(self) -> &'static str {
        match self {
            SourceReject::NotAllowed => "source_not_allowed",
        }
    }
}

/// The sink's counters (single writer: the sink's thread; readable anywhere).
#[derive(Debug, Default)]
pub struct IntStats {
    pub frames: AtomicU64,
    pub not_int: AtomicU64,
    pub reports: AtomicU64,
    pub individual_reports: AtomicU64,
    pub md_packets: AtomicU64,
    pub postcards: AtomicU64,
    pub drop_reports: AtomicU64,
    pub ignored_reports: AtomicU64,
    pub ipv6_flows: AtomicU64,
    pub truncated_paths: AtomicU64,
    pub events: [AtomicU64; 8],
    pub flows_idle: AtomicU64,
    pub flows_capacity: AtomicU64,
    pub flows_flushed: AtomicU64,
    pub errors: [AtomicU64; int::Error::ALL.len()],
    /// Datagrams dropped for their source, by [`SourceReject`].
    pub sources_rejected: [AtomicU64; SourceReject::ALL.len()],
    /// Receive sockets the kernel gave a smaller buffer than `recv_buffer` (`dta int-sink`).
    pub recv_buffer_short: AtomicU64,
    /// Reports the fast path took (`dta int-sink --xdp`; also counted in `reports`,
    /// `individual_reports` and `md_packets`).
    pub fast_path_reports: AtomicU64,
    /// Flows the fast path could not take on (its table full): their reports stay the sink's.
    pub fast_path_full: AtomicU64,
    /// Flow summaries not written: more flows left the FlowCache between two delta flushes
    /// than are held.
    pub flow_summaries_dropped: AtomicU64,
    /// Summaries of flows still active (`active_timeout_ms`).
    pub flows_active_summaries: AtomicU64,
}

fn add(c: &AtomicU64, n: u64) {
    c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
}

/// A plain copy of [`IntStats`] (for exporters: JSON, Prometheus).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IntStatsSnapshot {
    pub frames: u64,
    pub not_int: u64,
    pub reports: u64,
    pub individual_reports: u64,
    pub md_packets: u64,
    pub postcards: u64,
    pub drop_reports: u64,
    pub ignored_reports: u64,
    pub ipv6_flows: u64,
    pub truncated_paths: u64,
    /// By event kind name.
    pub events: Vec<(&'static str, u64)>,
    pub flows_idle: u64,
    pub flows_capacity: u64,
    pub flows_flushed: u64,
    /// By `int::Error::reason`, non-zero only.
    pub errors: Vec<(&'static str, u64)>,
    /// Notifications subscribers lost.
    pub notifications_dropped: u64,
    /// By `SourceReject::reason`, non-zero only.
    pub sources_rejected: Vec<(&'static str, u64)>,
    pub recv_buffer_short: u64,
    pub fast_path_reports: u64,
    pub fast_path_full: u64,
    pub flow_summaries_dropped: u64,
    pub flows_active_summaries: u64,
}

impl IntStats {
    pub fn error(&self, e: int::Error) {
        if let Some(i) = int::Error::ALL.iter().position(|x| *x == e) {
            add(&self.errors[i], 1);
        }
    }

    pub fn errors_of(&self, e: int::Error) -> u64 {
        int::Error::ALL
            .iter()
            .position(|x| *x == e)
            .map_or(0, |i| self.errors[i].load(Relaxed))
    }

    /// Datagrams dropped for their source for `r`.
    pub fn sources_rejected_of(&self, r: SourceReject) -> u64 {
        self.sources_rejected[r as usize].load(Relaxed)
    }

    pub fn events_of(&self, k: EventKind) -> u64 {
        self.events[k as usize - 1].load(Relaxed)
    }

    pub fn snapshot(&self, notifications_dropped: u64) -> IntStatsSnapshot {
        let l = |c: &AtomicU64| c.load(Relaxed);
        IntStatsSnapshot {
            frames: l(&self.frames),
            not_int: l(&self.not_int),
            reports: l(&self.reports),
            individual_reports: l(&self.individual_reports),
            md_packets: l(&self.md_packets),
            postcards: l(&self.postcards),
            drop_reports: l(&self.drop_reports),
            ignored_reports: l(&self.ignored_reports),
            ipv6_flows: l(&self.ipv6_flows),
            truncated_paths: l(&self.truncated_paths),
            events: EventKind::ALL
                .iter()
                .map(|k| (k.name(), self.events_of(*k)))
                .collect(),
            flows_idle: l(&self.flows_idle),
            flows_capacity: l(&self.flows_capacity),
            flows_flushed: l(&self.flows_flushed),
            errors: int::Error::ALL
                .iter()
                .zip(&self.errors)
                .filter(|(_, c)| l(c) > 0)
                .map(|(e, c)| (e.reason(), l(c)))
                .collect(),
            notifications_dropped,
            sources_rejected: SourceReject::ALL
                .iter()
                .map(|r| (r.reason(), self.sources_rejected_of(*r)))
                .filter(|(_, n)| *n > 0)
                .collect(),
            recv_buffer_short: l(&self.recv_buffer_short),
            fast_path_reports: l(&self.fast_path_reports),
            fast_path_full: l(&self.fast_path_full),
            flow_summaries_dropped: l(&self.flow_summaries_dropped),
            flows_active_summaries: l(&self.flows_active_summaries),
        }
    }
}

/// One hop's sample.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    node_id: Option<u32>,
    latency: Option<u32>,
    queue: Option<u32>,
    util: Option<u32>,
    /// The level 1 egress port, where the hop reports it (INT bit 1).
    egress_port: Option<u16>,
}

/// Events of one packet: at most 4 per hop plus the end-to-end one, held on the stack.
const MAX_PACKET_EVENTS: usize = 4 * MAX_PATH + 1;
struct EventBuf {
    ev: [(EventKind, u8, u32, u32); MAX_PACKET_EVENTS],
    n: usize,
}
impl EventBuf {
    fn new() -> Self {
        EventBuf {
            ev: [(EventKind::Drop, 0, 0, 0); MAX_PACKET_EVENTS],
            n: 0,
        }
    }
    fn push(&mut self, kind: EventKind, hop: u8, node: u32, value: u32) {
        if self.n < MAX_PACKET_EVENTS {
            self.ev[self.n] = (kind, hop, node, value);
            self.n += 1;
        }
    }
}

/// Evicted flows whose writes wait for the next delta flush; when this many wait, it runs.
const EVICTED_PENDING: usize = 256;
/// Marks an [`IntSink`] flush-order entry as an index into its evicted list.
const EVICTED_BIT: u32 = 1 << 31;

/// A telemetry report found to carry one INT-MD packet of an IPv4 flow
/// ([`IntSink::handle_reports`]).
#[derive(Clone, Copy)]
struct MdReport<'b> {
    stack: HopStack<'b>,
    key: [u8; FLOW_KEY_LEN],
    /// [`FlowCache::hash`] of `key`, computed once.
    hash: u64,
    /// A v2.0 report (it counts one individual report).
    v2: bool,
    /// Where it stands in its reporter's numbering.
    seq: ReportSeq,
}

/// The sink.
pub struct IntSink<S: Sinks> {
    cfg: IntSinkConfig,
    detect: IntDetect,
    translator: Translator<S>,
    cache: FlowCache,
    thresholds: Arc<Thresholds>,
    bus: EventBus,
    stats: Arc<IntStats>,
    base: Instant,
    first_ns: Option<u64>,
    /// Event sequence numbers, shared by the sinks of a [`crate::group::SinkGroup`].
    next_seq: Arc<AtomicU64>,
    last_expire_ns: u64,
    src: SocketAddr,
    /// `(index, threads)` of this sink in its group (`(0, 1)` alone).
    shard: (usize, usize),
    /// Report sequence number since the last delta flush: the order owed writes are replayed in.
    report_seq: u32,
    /// FlowCache indices of entries with owed writes (each at most once while dirty).
    dirty: Vec<u32>,
    /// Owed writes of flows evicted since the last delta flush.
    evicted: Vec<([u8; FLOW_KEY_LEN], Pending)>,
    /// Summaries of flows evicted since the last delta flush.
    summaries: Summaries,
    /// Scratch of the delta flush: `(seq, index)`.
    order: Vec<(u32, u32)>,
    hist: HistDeltas,
    /// Whether a store of the histograms' long tier is there (every count is written there too).
    long_tier: bool,
    /// The per-port counts owed, when a per-port histogram store is there
    /// ([`crate::layout::PORT_KEY_LEN`]).
    ports: Option<HistDeltas>,
    last_delta_flush_ns: u64,
    /// The fast path in front of this sink, if any, and the FlowCache indices it took reports
    /// of since the last drain ([`FastPath::changed`]; kept to reuse its allocation).
    fast: Option<Box<dyn FastPath>>,
    fast_changed: Vec<u32>,
    /// Flows handed to the fast path (learned, or learned again on a new path), ever.
    handed_over: u64,
    /// Scratch of the fast path's histogram drain: `(node, metric index, bucket, count)`.
    fast_hist: Vec<(u32, u8, u8, u64)>,
}

fn evicted(
    bus: &mut EventBus,
    stats: &IntStats,
    summaries: &mut Summaries,
    e: &FlowEntry,
    why: EvictReason,
) {
    add(
        match why {
            EvictReason::Idle => &stats.flows_idle,
            EvictReason::Capacity => &stats.flows_capacity,
            EvictReason::Flush => &stats.flows_flushed,
        },
        1,
    );
    let wanted = summaries.list.is_some();
    if bus.active() || wanted {
        let record = e.record(why);
        if wanted {
            summaries.push(FlowSummary::of(&record).encode(), stats);
        }
        if bus.active() {
            bus.publish(&Notification::Flow(record));
        }
    }
}

/// Flow summaries waiting to be written to the events store (at the next delta flush).
struct Summaries {
    /// Their Append list, when the events store has one for them.
    list: Option<u32>,
    pending: Vec<[u8; EVENT_LEN]>,
}

/// Most flow summaries held between two delta flushes; more are dropped and counted.
const SUMMARIES_PENDING: usize = 1 << 16;

impl Summaries {
    fn push(&mut self, rec: [u8; EVENT_LEN], stats: &IntStats) {
        if self.pending.len() < SUMMARIES_PENDING {
            self.pending.push(rec);
        } else {
            add(&stats.flow_summaries_dropped, 1);
        }
    }
}

impl<S: Sinks> IntSink<S> {
    /// A sink writing through `translator` (built over the collector's stores).
    pub fn new(cfg: &IntSinkConfig, translator: Translator<S>) -> Result<Self, String> {
        cfg.validate()?;
        let cache = FlowCache::new(cfg.flow_capacity);
        // Flow summaries go to the list after the event kinds', where the events store has it.
        let summary_list = cfg.event_list_base + crate::events::FLOW_SUMMARY_LIST;
        let summaries = Summaries {
            list: translator
                .append_lists()
                .filter(|&lists| summary_list < lists)
                .map(|_| summary_list),
            pending: Vec::new(),
        };
        let slots = cache.capacity() + EVICTED_PENDING;
        let long_tier = translator.has_key_increment(crate::layout::LONG_TIER_KEY_LEN);
        let ports = translator
            .has_key_increment(crate::layout::PORT_KEY_LEN)
            .then(|| HistDeltas::new(cfg.hist_deltas, &cfg.histogram));
        Ok(IntSink {
            long_tier,
            ports,
            dirty: Vec::with_capacity(slots),
            evicted: Vec::with_capacity(EVICTED_PENDING),
            summaries,
            order: Vec::with_capacity(slots),
            hist: HistDeltas::new(cfg.hist_deltas, &cfg.histogram),
            last_delta_flush_ns: 0,
            fast: None,
            fast_changed: Vec::new(),
            handed_over: 0,
            fast_hist: Vec::new(),
            report_seq: 0,
            shard: (0, 1),
            detect: cfg.detect(),
            cache,
            thresholds: Arc::new(Thresholds::new(&cfg.thresholds)),
            cfg: cfg.clone(),
            translator,
            bus: EventBus::default(),
            stats: Arc::new(IntStats::default()),
            base: Instant::now(),
            first_ns: None,
            next_seq: Arc::new(AtomicU64::new(0)),
            last_expire_ns: 0,
            src: SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)),
        })
    }

    pub fn config(&self) -> &IntSinkConfig {
        &self.cfg
    }

    /// Put `fast` in front of this sink ([`crate::fast`]): flows it handles MD reports of are
    /// handed to it as they are learned, and its aggregates drained at each delta flush.
    pub fn set_fast_path(&mut self, mut fast: Box<dyn FastPath>) {
        fast.set_thresholds(&self.fast_thresholds());
        self.fast_changed = Vec::with_capacity(self.cache.capacity());
        self.fast = Some(fast);
    }

    /// What the fast path may take under the current thresholds: nothing while a change event
    /// (which compares a report with the one before), per-report writes or non-log2 histograms
    /// are configured.
    fn fast_thresholds(&self) -> FastThresholds {
        let th = self.thresholds.get();
        FastThresholds {
            enabled: th.latency_change == u32::MAX
                && th.queue_change == u32::MAX
                && self.cfg.aggregate
                && self.cfg.histogram == Buckets::Log2,
            hop_latency: th.hop_latency,
            queue_occupancy: th.queue_occupancy,
            egress_tx_util: th.egress_tx_util,
            path_latency: th.path_latency,
        }
    }

    /// Join a group of sinks sharing the stores (one per thread): share its thresholds and
    /// event sequence, and own the flows [`crate::shard::shard_of`] gives `index`.
    pub(crate) fn join(
        mut self,
        index: usize,
        threads: usize,
        thresholds: Arc<Thresholds>,
        next_seq: Arc<AtomicU64>,
    ) -> Self {
        self.shard = (index, threads);
        self.thresholds = thresholds;
        self.next_seq = next_seq;
        self
    }

    /// Whether flow `key` is this sink's ([`crate::shard::shard_of`]); always true alone.
    pub fn owns(&self, key: &[u8; FLOW_KEY_LEN]) -> bool {
        crate::shard::shard_of(key, self.shard.1) == self.shard.0
    }

    pub fn translator_mut(&mut self) -> &mut Translator<S> {
        &mut self.translator
    }

    /// The run-time thresholds: store into them from any thread.
    pub fn thresholds(&self) -> &Arc<Thresholds> {
        &self.thresholds
    }

    pub fn stats(&self) -> &Arc<IntStats> {
        &self.stats
    }

    pub fn stats_snapshot(&self) -> IntStatsSnapshot {
        self.stats.snapshot(self.bus.dropped())
    }

    pub fn translator(&self) -> &Translator<S> {
        &self.translator
    }

    pub fn flow_cache(&self) -> &FlowCache {
        &self.cache
    }

    /// Flows handed to the fast path so far (each learning of a flow or of its new path): a
    /// receive loop that sees it grow does not pause to gather the next batch, since the flow's
    /// next reports, already on their way, reach the sink instead of the fast path until the
    /// program knows it.
    pub fn handed_over(&self) -> u64 {
        self.handed_over
    }

    /// The live record of a cached flow.
    pub fn flow(&self, key: &[u8; FLOW_KEY_LEN]) -> Option<FlowRecord> {
        self.cache.get(key).map(|e| e.record(EvictReason::Flush))
    }

    /// Subscribe to events and flow records (a bounded channel of `capacity`).
    pub fn subscribe(&mut self, capacity: usize) -> Subscription {
        self.bus.subscribe(capacity)
    }

    fn instant(&mut self, now_ns: u64) -> Instant {
        let first = *self.first_ns.get_or_insert(now_ns);
        self.base + Duration::from_nanos(now_ns.saturating_sub(first))
    }

    fn apply(&mut self, r: &Report<'_>, now_ns: u64) {
        let now = self.instant(now_ns);
        self.translator.apply(r, 0, self.src, now);
    }

    /// An Ethernet frame that may carry INT-MD (the sink sees the packet itself).
    pub fn handle_frame(&mut self, frame: &[u8], now_ns: u64) {
        add(&self.stats.frames, 1);
        match find_int(frame, &self.detect) {
            Err(e) => self.stats.error(e),
            Ok(None) => add(&self.stats.not_int, 1),
            Ok(Some(repr)) => self.handle_int(&repr, None, now_ns),
        }
    }

    fn handle_int(&mut self, repr: &int::IntRepr<'_>, seq: Option<ReportSeq>, now_ns: u64) {
        let key = match repr.flow.as_ref().map(|f| f.key13()) {
            Some(Some(k)) => k,
            Some(None) => {
                add(&self.stats.ipv6_flows, 1);
                return;
            }
            None => {
                add(&self.stats.not_int, 1);
                return;
            }
        };
        match repr.stack() {
            Some(stack) => self.md_hashed(&key, FlowCache::hash(&key), &stack, seq, now_ns),
            // INT-MX / INT-Destination carry no stack: their hops report separately.
            None => add(&self.stats.ignored_reports, 1),
        }
    }

    /// Count `n` reports refused for their source before they reached the sink (by the XDP
    /// program that holds the same allow-list, AF_XDP receive).
    pub fn count_source_rejects(&self, n: u64) {
        if n > 0 {
            add(
                &self.stats.sources_rejected[SourceReject::NotAllowed as usize],
                n,
            );
        }
    }

    /// Whether telemetry reports from `source` are taken (the allow-list); a refused source is
    /// counted in `sources_rejected`.
    pub fn admit(&self, source: std::net::IpAddr) -> bool {
        let ok = self.cfg.allow.allows(source);
        if !ok {
            add(
                &self.stats.sources_rejected[SourceReject::NotAllowed as usize],
                1,
            );
        }
        ok
    }

    /// Telemetry reports received together (one receive batch, `(payload, now_ns)` each):
    /// handled exactly as [`IntSink::handle_report`] one by one, in order, but each report is
    /// parsed once up front and the FlowCache rows, then entries, of the batch's flows are
    /// prefetched before any is updated, so their cache misses overlap.
    pub fn handle_reports(&mut self, batch: &[(&[u8], u64)]) {
        const LANES: usize = 16;
        for chunk in batch.chunks(LANES) {
            let mut md: [Option<MdReport<'_>>; LANES] = [None; LANES];
            for (slot, (buf, _)) in md.iter_mut().zip(chunk) {
                *slot = self.md_report(buf);
                if let Some(m) = slot {
                    self.cache.prefetch_row(m.hash);
                }
            }
            for m in md.iter().flatten() {
                self.cache.prefetch_entry(m.hash);
            }
            for (slot, &(buf, now_ns)) in md.iter().zip(chunk) {
                match slot {
                    Some(m) => {
                        add(&self.stats.reports, 1);
                        if m.v2 {
                            add(&self.stats.individual_reports, 1);
                        }
                        self.md_hashed(&m.key, m.hash, &m.stack, Some(m.seq), now_ns);
                    }
                    None => self.handle_report(buf, now_ns),
                }
            }
        }
    }

    /// `buf` when [`IntSink::handle_report`] would take it as exactly one INT-MD packet of an
    /// IPv4 flow (a v2.0 report of one individual report, neither dropped nor a drop report,
    /// whose inner packet carries an INT-MD stack; or a v0.5/v1.0 report of such a frame), with
    /// its flow key; `None` for anything else, left to `handle_report`.
    fn md_report<'b>(&self, buf: &'b [u8]) -> Option<MdReport<'b>> {
        let (repr, v2, seq) = match parse_report(buf).ok()? {
            TelemetryReport::V2(ref r) if r.len() == 1 => {
                let ir = r.first();
                let drop = ir.main.as_ref().and_then(|m| m.metadata.drop_reason);
                if ir.dropped || drop.is_some() {
                    return None;
                }
                (ir.inner_int(&self.detect).ok()??, true, group_seq(&r.group))
            }
            TelemetryReport::Legacy(l) if l.sub == LegacySubHeader::None => {
                (l.inner_int(&self.detect).ok()??, false, legacy_seq(&l))
            }
            _ => return None,
        };
        let stack = repr.stack()?;
        let key = repr.flow?.key13()?;
        Some(MdReport {
            stack,
            key,
            hash: FlowCache::hash(&key),
            v2,
            seq,
        })
    }

    /// A telemetry report (UDP payload): v2.0, v1.0 or v0.5.
    pub fn handle_report(&mut self, buf: &[u8], now_ns: u64) {
        add(&self.stats.reports, 1);
        match parse_report(buf) {
            Err(e) => self.stats.error(e),
            Ok(TelemetryReport::V2(r)) => {
                for ir in r.iter() {
                    add(&self.stats.individual_reports, 1);
                    self.handle_individual(&r.group, &ir, now_ns);
                }
            }
            Ok(TelemetryReport::Legacy(l)) => {
                if let LegacySubHeader::Drop {
                    switch_id,
                    drop_reason,
                    ..
                } = l.sub
                {
                    let (key, hop) = self.inner_flow(int::report::IN_TYPE_ETHERNET, l.inner);
                    self.drop_event(key, hop, switch_id, drop_reason as u32, now_ns);
                } else {
                    match l.inner_int(&self.detect) {
                        Err(e) => self.stats.error(e),
                        Ok(Some(repr)) => self.handle_int(&repr, Some(legacy_seq(&l)), now_ns),
                        Ok(None) => add(&self.stats.ignored_reports, 1),
                    }
                }
            }
        }
    }

    fn handle_individual(&mut self, group: &GroupHeader, ir: &IndividualReport<'_>, now_ns: u64) {
        let node_id = group.node_id;
        let md = ir.main.as_ref().map(|m| m.metadata);
        let drop_reason = md.and_then(|m| m.drop_reason);
        if ir.dropped || drop_reason.is_some() {
            let (key, hop) = match ir.inner_packet() {
                Some((t, p)) => self.inner_flow(t, p),
                None => ([0; FLOW_KEY_LEN], HOP_NONE),
            };
            self.drop_event(key, hop, node_id, drop_reason.unwrap_or(0) as u32, now_ns);
            return;
        }
        // A stacked INT-MD report from a sink switch.
        match ir.inner_int(&self.detect) {
            Err(e) => {
                self.stats.error(e);
                return;
            }
            Ok(Some(repr)) if repr.stack().is_some() => {
                self.handle_int(&repr, Some(group_seq(group)), now_ns);
                return;
            }
            Ok(_) => {}
        }
        // A per-hop postcard (INT-MX or INT-XD): this node's metadata about the inner packet.
        let (Some(m), Some((t, p))) = (md, ir.inner_packet()) else {
            add(&self.stats.ignored_reports, 1);
            return;
        };
        let (key, hop) = self.inner_flow(t, p);
        if hop == HOP_NONE || hop as usize >= MAX_PATH || key == [0; FLOW_KEY_LEN] {
            add(&self.stats.ignored_reports, 1);
            return;
        }
        add(&self.stats.postcards, 1);
        let s = Sample {
            node_id: Some(node_id),
            latency: m.baseline.hop_latency,
            queue: m.baseline.queue_occupancy,
            util: m.baseline.egress_tx_util,
            egress_port: m.baseline.l1_egress_port,
        };
        self.handle_hops(
            &key,
            FlowCache::hash(&key),
            &[s],
            hop,
            0,
            None,
            None,
            now_ns,
        );
    }

    /// The flow key and hop index (`initial_ttl - TTL`) of a report's inner packet (InType 3
    /// Ethernet, 4 IPv4). `(zeros, HOP_NONE)` when it cannot be told.
    fn inner_flow(&self, in_type: u8, p: &[u8]) -> ([u8; FLOW_KEY_LEN], u8) {
        let none = ([0; FLOW_KEY_LEN], HOP_NONE);
        let ip = match in_type {
            int::report::IN_TYPE_ETHERNET => {
                match ethernet::Packet::new_checked(p).and_then(|f| f.untagged_payload()) {
                    Ok((ethernet::ETHERTYPE_IPV4, ip)) => ip,
                    _ => return none,
                }
            }
            int::report::IN_TYPE_IPV4 => p,
            _ => return none,
        };
        let Ok(v4) = ipv4::Packet::new_checked(ip) else {
            return none;
        };
        let ttl = ip[8];
        let hop = self.cfg.initial_ttl.checked_sub(ttl).unwrap_or(HOP_NONE);
        // An INT-MX packet: the original 5-tuple comes from the INT block (NPT 1/2).
        if let Ok(Some(repr)) = find_int_ip(ip, &self.detect) {
            if let Some(k) = repr.flow.and_then(|f| f.key13()) {
                return (k, hop);
            }
        }
        let l4 = ipv4::Packet::new_unchecked(ip).into_payload();
        let ports = match v4.protocol() {
            dta_net::IPPROTO_UDP | dta_net::IPPROTO_TCP if l4.len() >= 4 => {
                [l4[0], l4[1], l4[2], l4[3]]
            }
            _ => [0; 4],
        };
        let mut k = [0u8; FLOW_KEY_LEN];
        k[0..4].copy_from_slice(&v4.src());
        k[4..8].copy_from_slice(&v4.dst());
        k[8..12].copy_from_slice(&ports);
        k[12] = v4.protocol();
        (k, hop)
    }

    fn drop_event(
        &mut self,
        key: [u8; FLOW_KEY_LEN],
        hop: u8,
        node_id: u32,
        reason: u32,
        now_ns: u64,
    ) {
        add(&self.stats.drop_reports, 1);
        self.emit_event(EventKind::Drop, key, hop, node_id, reason, now_ns);
    }

    /// An INT-MD stack (newest hop first) of flow `key` ([INT-NIC §III], per packet).
    pub fn handle_md(&mut self, key: &[u8; FLOW_KEY_LEN], stack: &HopStack<'_>, now_ns: u64) {
        self.md_hashed(key, FlowCache::hash(key), stack, None, now_ns);
    }

    /// [`IntSink::handle_md`] of a key of [`FlowCache::hash`] `hash`, from a telemetry report
    /// numbered `seq`.
    fn md_hashed(
        &mut self,
        key: &[u8; FLOW_KEY_LEN],
        hash: u64,
        stack: &HopStack<'_>,
        seq: Option<ReportSeq>,
        now_ns: u64,
    ) {
        add(&self.stats.md_packets, 1);
        let len = stack.len();
        if len > MAX_PATH {
            add(&self.stats.truncated_paths, 1);
        }
        let n = len.min(MAX_PATH);
        // Hop index i (0 = the INT source) is stack entry len-1-i.
        let mut hops = [Sample::default(); MAX_PATH];
        // One pass over the stack's oldest n entries (newest first), hop n-1 down to 0.
        for (h, m) in hops[..n].iter_mut().rev().zip(stack.iter().skip(len - n)) {
            *h = Sample {
                node_id: m.node_id,
                latency: m.baseline.hop_latency,
                queue: m.baseline.queue_occupancy,
                util: m.baseline.egress_tx_util,
                egress_port: m.baseline.l1_egress_port,
            };
        }
        // [DTA Table 2]: the path trace → Key-Write (13-byte key, path record).
        let mut ids = [0u32; MAX_PATH];
        for i in 0..n {
            ids[i] = hops[n - 1 - i].node_id.unwrap_or(u32::MAX);
        }
        let data = encode_path(&ids[..n]);
        self.handle_hops(key, hash, &hops[..n], 0, n as u8, Some(&data), seq, now_ns);
    }

    /// Hops `first_hop..first_hop + samples.len()` of one packet of `key` (of
    /// [`FlowCache::hash`] `hash`); `path_len` 0 if unknown (a single postcard); `path` the
    /// INT-MD path record to write; `seq` where a telemetry report stands in its reporter's
    /// numbering. A report older than the one the flow's latest values came from (by `seq`: the
    /// fast path, another receive path or the network delivered a later one first) still
    /// counts, but leaves the latest values and owed writes as they are.
    #[allow(clippy::too_many_arguments)]
    fn handle_hops(
        &mut self,
        key: &[u8; FLOW_KEY_LEN],
        hash: u64,
        samples: &[Sample],
        first_hop: u8,
        path_len: u8,
        path: Option<&[u8; PATH_DATA_LEN]>,
        seq: Option<ReportSeq>,
        now_ns: u64,
    ) {
        if self.report_seq == u32::MAX {
            // The owed writes' order is counted from the last flush: flush before it wraps.
            self.flush_deltas(now_ns);
        }
        let th = self.thresholds.get();
        let mut evs = EventBuf::new();
        self.report_seq += 1;
        let md_postcards = path_len > 0 && self.cfg.md_postcards;
        {
            let (cache, bus, stats, owed, fast, summaries) = (
                &mut self.cache,
                &mut self.bus,
                &*self.stats,
                &mut self.evicted,
                &mut self.fast,
                &mut self.summaries,
            );
            let (cfg, owed_seq) = (&self.cfg, self.report_seq);
            let idx = cache.entry_index(key, hash, now_ns, |i, old| {
                let mut old = *old;
                if let Some(f) = fast.as_deref_mut() {
                    fast_leave(f, cfg, stats, i, &mut old, owed_seq, now_ns);
                }
                evicted(bus, stats, summaries, &old, EvictReason::Capacity);
                if old.pending.dirty {
                    owed.push((old.key, old.pending));
                }
            });
            let e = cache.at_mut(idx);
            // What the fast path took of this flow since the last drain first (a read of its
            // slot's count when it took nothing): a report passed up to the sink (a path
            // change, an event) is then ordered against those too.
            if e.fast {
                if let Some(d) = fast.as_deref_mut().and_then(|f| f.take(idx as u32, now_ns)) {
                    fast_fold(cfg, stats, e, idx as u32, &d, owed_seq, &mut self.dirty);
                }
            }
            // A flow's latest values are its newest report's by the reporter's numbering, not
            // the last one handled: the fast path, the AF_XDP and the UDP sockets each deliver
            // in order, but not in order with one another.
            let newest = e.take_latest(seq);
            if newest && (path.is_some() || md_postcards) {
                let p = &mut e.pending;
                if !p.dirty {
                    p.dirty = true;
                    self.dirty.push(idx as u32);
                }
                p.seq = self.report_seq;
                if let Some(d) = path {
                    p.has_path = true;
                    p.path = *d;
                }
                if md_postcards {
                    // The newest report's postcards replace the owed ones: the translator
                    // writes a flow's chunk whole, so only the last one stays in the store.
                    p.path_len = path_len;
                    p.postcard_mask = 0;
                    for (j, s) in samples.iter().enumerate() {
                        if let Some(v) = s.latency {
                            let hop = first_hop as usize + j;
                            p.postcard_mask |= 1 << hop;
                            p.postcard[hop] = self.cfg.postcard_value(v);
                        }
                    }
                }
            }
            if first_hop == 0 {
                e.packets += 1;
            }
            e.last_ns = e.last_ns.max(now_ns);
            let mut path_latency: u64 = 0;
            let mut path_changed = false;
            for (j, s) in samples.iter().enumerate() {
                let hop = first_hop + j as u8;
                let h = hop as usize;
                e.hops = e.hops.max(hop + 1);
                let (a, present) = (&mut e.hop[h], &mut e.present[h]);
                let node = s.node_id.unwrap_or(u32::MAX);
                // [INT-NIC §III] 𝒞 events: per switch, previous vs current. A late report
                // is not the current one: it raises none, and teaches the fast path nothing.
                if let Some(id) = s.node_id {
                    if newest && *present & 1 != 0 && a.last[0] != id {
                        path_changed = true;
                        e.path_changes[h] += 1;
                        if th.path_change {
                            evs.push(EventKind::PathChange, hop, id, a.last[0]);
                        }
                    }
                    if newest {
                        a.last[0] = id;
                        *present |= 1;
                    }
                }
                if let Some(v) = s.latency {
                    const BIT: u8 = 1 << (1 + LATENCY);
                    if newest
                        && *present & BIT != 0
                        && a.last[1 + LATENCY].abs_diff(v) > th.latency_change
                    {
                        evs.push(EventKind::LatencyChange, hop, node, v);
                    }
                    // [INT-NIC §III] 𝒯 events: the current value above the threshold.
                    if v > th.hop_latency {
                        evs.push(EventKind::HopLatency, hop, node, v);
                    }
                    if newest {
                        a.last[1 + LATENCY] = v;
                        *present |= BIT;
                    }
                    a.sum[LATENCY] += u64::from(v);
                    a.n[LATENCY] += 1;
                    path_latency += u64::from(v);
                }
                if let Some(v) = s.queue {
                    const BIT: u8 = 1 << (1 + QUEUE);
                    if newest
                        && *present & BIT != 0
                        && a.last[1 + QUEUE].abs_diff(v) > th.queue_change
                    {
                        evs.push(EventKind::QueueChange, hop, node, v);
                    }
                    if v > th.queue_occupancy {
                        evs.push(EventKind::QueueOccupancy, hop, node, v);
                    }
                    if newest {
                        a.last[1 + QUEUE] = v;
                        *present |= BIT;
                    }
                    a.sum[QUEUE] += u64::from(v);
                    a.n[QUEUE] += 1;
                }
                if let Some(v) = s.util {
                    if v > th.egress_tx_util {
                        evs.push(EventKind::EgressTxUtil, hop, node, v);
                    }
                    if newest {
                        a.last[1 + UTIL] = v;
                        *present |= 1 << (1 + UTIL);
                    }
                    a.sum[UTIL] += u64::from(v);
                    a.n[UTIL] += 1;
                }
            }
            // A flow's whole path, newly seen in a numbered report (the program orders the
            // reports it takes by their numbers, from the latest's on): hand the flow to the
            // fast path (again).
            if let Some(f) = fast.as_deref_mut() {
                if newest
                    && e.seq_known
                    && path.is_some()
                    && first_hop == 0
                    && (!e.fast || path_changed)
                {
                    let mut ids = [0u32; MAX_PATH];
                    let known = samples.iter().zip(&mut ids).all(|(s, id)| {
                        *id = s.node_id.unwrap_or(0);
                        s.node_id.is_some()
                    });
                    if !known {
                        // A hop without its node id: the fast path cannot check the path.
                    } else if f
                        .learn(key, idx as u32, &ids[..samples.len()], e.report_seq)
                        .is_ok()
                    {
                        e.fast = true;
                        self.handed_over += 1;
                    } else {
                        add(&stats.fast_path_full, 1);
                    }
                }
            }
            // [INT-NIC §III] end-to-end: the aggregate hop latency of a whole path.
            if path_len > 0 && path_latency > th.path_latency as u64 {
                let last = samples.last().and_then(|s| s.node_id).unwrap_or(u32::MAX);
                evs.push(
                    EventKind::PathLatency,
                    HOP_NONE,
                    last,
                    path_latency.min(u32::MAX as u64) as u32,
                );
            }
        }
        for &(kind, hop, node, value) in &evs.ev[..evs.n] {
            self.emit_event(kind, *key, hop, node, value, now_ns);
        }
        // [DTA Table 2]: histograms → Key-Increment, summed until the delta flush; an INT-MX/XD
        // postcard (path length unknown) → Postcarding at once (the translator's postcard
        // cache assembles a flow's chunk from several reports).
        for (j, s) in samples.iter().enumerate() {
            if path_len == 0 {
                if let Some(v) = s.latency {
                    let value = self.cfg.postcard_value(v);
                    self.apply(
                        &Report::Postcard {
                            key,
                            hop: first_hop + j as u8,
                            path_len,
                            value,
                            immediate: false,
                        },
                        now_ns,
                    );
                }
            }
            let Some(node) = s.node_id else { continue };
            let b = &self.cfg.histogram;
            let buckets = [
                s.latency.map(|v| b.bucket(v)),
                s.queue.map(|v| b.bucket(v)),
                s.util.map(|v| b.bucket(v)),
            ];
            if buckets != [None; 3] {
                if self.hist.is_full() || self.ports.as_ref().is_some_and(HistDeltas::is_full) {
                    self.flush_hist(now_ns);
                }
                self.hist.add_hop(node, buckets);
                if let (Some(ports), Some(port)) = (&mut self.ports, s.egress_port) {
                    ports.add_hop_of(crate::delta::port_subject(node, port), buckets);
                }
            }
        }
        if !self.cfg.aggregate || self.evicted.len() >= EVICTED_PENDING {
            self.flush_deltas(now_ns);
        }
    }

    /// Write every owed store write: the flows' path records and postcards in the order of
    /// their last reports (so a slot two flows share ends as it would have without
    /// aggregation), then the histogram sums.
    pub fn flush_deltas(&mut self, now_ns: u64) {
        self.last_delta_flush_ns = now_ns;
        self.write_summaries(now_ns);
        self.drain_fast(now_ns);
        let mut order = std::mem::take(&mut self.order);
        order.clear();
        for &i in &self.dirty {
            let p = &self.cache.at_mut(i as usize).pending;
            if p.dirty {
                order.push((p.seq, i));
            }
        }
        for (j, (_, p)) in self.evicted.iter().enumerate() {
            order.push((p.seq, EVICTED_BIT | j as u32));
        }
        order.sort_unstable_by_key(|&(seq, _)| seq);
        for &(_, i) in &order {
            let (key, p) = if i & EVICTED_BIT != 0 {
                self.evicted[(i & !EVICTED_BIT) as usize]
            } else {
                let e = self.cache.at_mut(i as usize);
                let p = e.pending;
                e.pending = Pending::default();
                (e.key, p)
            };
            self.write_pending(&key, &p, now_ns);
        }
        self.dirty.clear();
        self.evicted.clear();
        self.report_seq = 0;
        self.order = order;
        self.flush_hist(now_ns);
    }

    fn write_pending(&mut self, key: &[u8; FLOW_KEY_LEN], p: &Pending, now_ns: u64) {
        // [DTA Table 2]: the path trace → Key-Write (13-byte key, path record).
        if p.has_path {
            self.apply(
                &Report::KeyWrite {
                    key,
                    data: &p.path,
                    redundancy: self.cfg.redundancy,
                    immediate: false,
                },
                now_ns,
            );
        }
        // Hop latencies → Postcarding.
        for hop in 0..MAX_PATH as u8 {
            if p.postcard_mask & (1 << hop) != 0 {
                self.apply(
                    &Report::Postcard {
                        key,
                        hop,
                        path_len: p.path_len,
                        value: p.postcard[hop as usize],
                        immediate: false,
                    },
                    now_ns,
                );
            }
        }
    }

    fn flush_hist(&mut self, now_ns: u64) {
        let now = self.instant(now_ns);
        let (hist, translator, src, redundancy, long_tier) = (
            &mut self.hist,
            &mut self.translator,
            self.src,
            self.cfg.redundancy,
            self.long_tier,
        );
        let mut add = |key: &[u8], counter: u64| {
            translator.apply(
                &Report::KeyIncrement {
                    key,
                    counter,
                    redundancy,
                    immediate: false,
                },
                0,
                src,
                now,
            )
        };
        hist.drain(|key, counter| {
            add(key, counter);
            if long_tier {
                add(&crate::layout::long_tier_key(key), counter);
            }
        });
        if let Some(ports) = &mut self.ports {
            ports.drain_subjects(|subject, key, counter| {
                add(
                    &crate::layout::port_key(key, crate::delta::subject_port(subject)),
                    counter,
                )
            });
        }
    }

    fn emit_event(
        &mut self,
        kind: EventKind,
        flow: [u8; FLOW_KEY_LEN],
        hop: u8,
        node_id: u32,
        value: u32,
        now_ns: u64,
    ) {
        let ev = Event {
            seq: self.next_seq.fetch_add(1, Relaxed),
            time_ns: now_ns,
            kind,
            flow,
            hop,
            node_id,
            value,
        };
        add(&self.stats.events[kind as usize - 1], 1);
        if self.cfg.events_to_store {
            let rec = ev.encode();
            // Flagged: once its batch is written, the translator announces it on the region
            // directory's ring ([DTA §7] "Push notifications"; `dta watch`).
            self.apply(
                &Report::Append {
                    list_id: self.cfg.event_list_base + kind as u32 - 1,
                    data: &rec,
                    immediate: true,
                },
                now_ns,
            );
        }
        if self.bus.active() {
            self.bus.publish(&Notification::Event(ev));
        }
    }

    /// Write the flow summaries held ([`FlowSummary`]) to their list of the events store.
    fn write_summaries(&mut self, now_ns: u64) {
        let Some(list) = self.summaries.list else {
            return;
        };
        let pending = std::mem::take(&mut self.summaries.pending);
        for rec in &pending {
            self.apply(
                &Report::Append {
                    list_id: list,
                    data: rec,
                    immediate: false,
                },
                now_ns,
            );
        }
        self.summaries.pending = pending;
        self.summaries.pending.clear();
    }

    /// Run the timers: the delta flush (every `delta_flush_ms`), the aging of idle flows (at most
    /// every idle_timeout/4, after a delta flush) and the translator's.
    pub fn tick(&mut self, now_ns: u64) {
        // Windowed stores move to the wall clock's window before the deltas are written.
        self.translator.enter_windows();
        let idle = self.cfg.idle_timeout_ms.saturating_mul(1_000_000);
        let expire = now_ns.saturating_sub(self.last_expire_ns) >= idle / 4;
        let delta = self.cfg.delta_flush_ms.saturating_mul(1_000_000);
        if expire || now_ns.saturating_sub(self.last_delta_flush_ns) >= delta {
            self.flush_deltas(now_ns);
        }
        if expire {
            self.summarise_active(now_ns);
            self.last_expire_ns = now_ns;
            self.expire(now_ns, Some(idle), EvictReason::Idle);
        }
        let now = self.instant(now_ns);
        self.translator.tick(now);
    }

    /// Write the owed deltas, evict every flow (emitting their records) and write out everything
    /// the translator holds.
    pub fn flush(&mut self, now_ns: u64) {
        self.flush_deltas(now_ns);
        self.expire(now_ns, None, EvictReason::Flush);
        // What the fast path took of the flows just evicted.
        self.flush_deltas(now_ns);
        self.translator.flush_all();
    }

    /// Summarise every flow that was active since the previous pass and whose age crossed a
    /// multiple of `active_timeout_ms` since then (no state per flow: the boundary is counted
    /// from the flow's first packet).
    fn summarise_active(&mut self, now_ns: u64) {
        let active = self.cfg.active_timeout_ms.saturating_mul(1_000_000);
        if active == 0 || self.summaries.list.is_none() {
            return;
        }
        let prev = self.last_expire_ns;
        let (stats, summaries) = (&*self.stats, &mut self.summaries);
        self.cache.for_each(|_, e| {
            let age = |t: u64| t.saturating_sub(e.first_ns) / active;
            if e.last_ns > prev && age(now_ns) > age(prev.max(e.first_ns)) {
                add(&stats.flows_active_summaries, 1);
                summaries.push(
                    FlowSummary::of(&e.record(EvictReason::Flush)).encode(),
                    stats,
                );
            }
        });
    }

    /// Evict the flows idle longer than `idle_ns` (all: `None`), emitting their records; what
    /// the fast path took of them is folded in first (its writes owed to the next delta flush).
    fn expire(&mut self, now_ns: u64, idle_ns: Option<u64>, why: EvictReason) {
        let (bus, stats, owed, fast, cfg, summaries) = (
            &mut self.bus,
            &*self.stats,
            &mut self.evicted,
            &mut self.fast,
            &self.cfg,
            &mut self.summaries,
        );
        let seq = self.report_seq;
        self.cache.expire(now_ns, idle_ns, |i, e| {
            let mut e = *e;
            if let Some(f) = fast.as_deref_mut() {
                fast_leave(f, cfg, stats, i, &mut e, seq, now_ns);
                if e.pending.dirty {
                    owed.push((e.key, e.pending));
                }
            }
            evicted(bus, stats, summaries, &e, why)
        });
    }

    /// Fold what the fast path took since the last drain into the FlowCache and the histogram
    /// deltas, and give it the current thresholds.
    fn drain_fast(&mut self, now_ns: u64) {
        if self.fast.is_none() {
            return;
        }
        let th = self.fast_thresholds();
        let Some(f) = self.fast.as_deref_mut() else {
            return;
        };
        f.set_thresholds(&th);
        add(
            &self.stats.sources_rejected[SourceReject::NotAllowed as usize],
            f.take_source_rejects(),
        );
        let mut slots = std::mem::take(&mut self.fast_changed);
        slots.clear();
        f.changed(&mut slots);
        let capacity = self.cache.capacity();
        for &i in &slots {
            // A slot whose flow left took its remainder then (`fast_leave`).
            if i as usize >= capacity || !self.cache.at_mut(i as usize).fast {
                continue;
            }
            if let Some(d) = f.take(i, now_ns) {
                self.report_seq += 1;
                let e = self.cache.at_mut(i as usize);
                fast_fold(
                    &self.cfg,
                    &self.stats,
                    e,
                    i,
                    &d,
                    self.report_seq,
                    &mut self.dirty,
                );
            }
        }
        self.fast_changed = slots;
        let mut counts = std::mem::take(&mut self.fast_hist);
        f.take_hist(&mut |node, m, bucket, n| counts.push((node, m as u8, bucket, n)));
        for &(node, m, bucket, n) in &counts {
            if self.hist.is_full() {
                self.flush_hist(now_ns);
            }
            self.hist
                .add_n(node, Metric::ALL[m as usize], u16::from(bucket), n);
        }
        counts.clear();
        self.fast_hist = counts;
    }
}

/// Where a v2.0 report stands in its reporter's numbering.
fn group_seq(g: &GroupHeader) -> ReportSeq {
    ReportSeq {
        node: g.node_id,
        hw_id: g.hw_id,
        seq: g.sequence,
    }
}

/// Where a v1.0 or v0.5 report stands in its reporter's numbering (v0.5 names no switch).
fn legacy_seq(l: &LegacyReport<'_>) -> ReportSeq {
    ReportSeq {
        node: l.switch_id.unwrap_or(0),
        hw_id: l.hw_id,
        seq: l.sequence,
    }
}

/// [`fast_apply`] of entry `e` at FlowCache index `slot`, which joins `dirty` when that makes it
/// owe writes.
fn fast_fold(
    cfg: &IntSinkConfig,
    stats: &IntStats,
    e: &mut FlowEntry,
    slot: u32,
    d: &FastFlow,
    seq: u32,
    dirty: &mut Vec<u32>,
) {
    let was_dirty = e.pending.dirty;
    fast_apply(cfg, stats, e, d, seq);
    if e.pending.dirty && !was_dirty {
        dirty.push(slot);
    }
}

/// Fold the fast path's aggregate `d` of flow entry `e` into it, as the sink's own handling of
/// those reports would have left it: counts and sums added, the latest values, path record and
/// postcards taken when its latest report is newer than the entry's (its writes owed with
/// sequence `seq`).
fn fast_apply(cfg: &IntSinkConfig, stats: &IntStats, e: &mut FlowEntry, d: &FastFlow, seq: u32) {
    let n = usize::from(d.hops).min(MAX_PATH);
    for c in [
        &stats.reports,
        &stats.individual_reports,
        &stats.md_packets,
        &stats.fast_path_reports,
    ] {
        add(c, d.packets);
    }
    e.packets += d.packets;
    // The program's latest report against the sink's, by sequence number (the order the
    // switch sent them in): a flow is shared only from a numbered report, and the program
    // takes its reports only on the path the sink learned, so from the reporter it knows.
    let numbered = ReportSeq {
        node: e.reporter,
        hw_id: e.reporter_hw,
        seq: d.seq,
    };
    let latest = d.latest && e.take_latest(Some(numbered));
    for h in 0..n {
        let a = &mut e.hop[h];
        for m in 0..FAST_METRICS {
            a.sum[m] += d.sum[h][m];
            a.n[m] += d.packets;
            if latest {
                a.last[1 + m] = d.last[h][m];
            }
        }
        if latest {
            e.present[h] |= 0b1110;
        }
    }
    e.last_ns = e.last_ns.max(d.last_ns);
    if !latest {
        return;
    }
    // The path record lists the newest hop first, as the report's stack (`handle_md`).
    let mut ids = [0u32; MAX_PATH];
    for (i, id) in ids[..n].iter_mut().enumerate() {
        *id = e.hop[n - 1 - i].last[0];
    }
    let p = &mut e.pending;
    p.dirty = true;
    p.seq = seq;
    p.has_path = true;
    p.path = encode_path(&ids[..n]);
    if cfg.md_postcards {
        p.path_len = n as u8;
        p.postcard_mask = ((1u16 << n) - 1) as u8;
        for h in 0..n {
            p.postcard[h] = cfg.postcard_value(d.last[h][LATENCY]);
        }
    }
}

/// Flow entry `e` (at FlowCache index `slot`) leaves the cache: the fast path forgets it, and
/// what it took since the last drain is folded in.
fn fast_leave(
    f: &mut dyn FastPath,
    cfg: &IntSinkConfig,
    stats: &IntStats,
    slot: usize,
    e: &mut FlowEntry,
    seq: u32,
    now_ns: u64,
) {
    if !e.fast {
        return;
    }
    f.forget(&e.key);
    if let Some(d) = f.take(slot as u32, now_ns) {
        fast_apply(cfg, stats, e, &d, seq);
    }
    e.fast = false;
}
