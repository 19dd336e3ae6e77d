// Size: Marple's four queries share the trace pass, the switch-side state and the store readers.
//! Marple ([DTA Table 2], [DTA §6.1] Fig. 7b): the switch queries of Marple run over a packet
//! trace, their results sent as DTA reports, and the collector-side queries over the stores.
//!
//! | query | switch side (per packet, per flow or host state) | report | store |
//! | --- | --- | --- | --- |
//! | host counters | packets and bytes per source IP, reported every [`Params::host_report_every`] packets of the host and at the end | Key-Write `ip -> (packets u32, bytes u32)` (non-merging: the running total) and Key-Increment `(ip, 0) += packets`, `(ip, 1) += bytes` (addition: the delta) | [`STORE_HOSTS`], [`STORE_HOST_COUNTS`] |
//! | lossy connections | packets and retransmissions per flow (a segment ending at or below the highest sequence number seen is a retransmission); at the end, a flow of at least [`Params::min_packets`] packets whose loss rate exceeds the threshold is reported | Append `(flow, rate, packets, retransmissions)` to the list of its loss-rate range ([`LOSS_RANGES_BP`]) | [`crate::APPEND_STORE`] lists [`crate::lists::MARPLE_LOSSY`] |
//! | TCP timeouts | per flow, gaps between consecutive packets longer than the RTO | Key-Write `flow -> count u32` at each timeout and at the end (so every flow can be asked) | [`STORE_TIMEOUTS`] |
//! | flowlet sizes | per flow, packets since the last gap longer than the flowlet gap | Append `(flow, packets u32)` when a flowlet ends, to the list of its size's power of two ([`FLOWLET_BINS`]) | [`crate::APPEND_STORE`] lists [`crate::lists::MARPLE_FLOWLETS`] |
//!
//! The ground truth ([`truth`]) is computed from the whole trace, per flow, without the
//! switch's streaming state. Exact primitives (Append while a list has not wrapped; Key-Write
//! found) answer it exactly; the Key-Increment count is never below it and above it by at most
//! the store's count-min bound.

use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;
use std::ops::Range;

use serde::Serialize;

use dta_store::Region;
use dta_wire::Report;

use crate::trace::{Packet, Trace};
use crate::{flow_string, lists, read_list, Emit, FlowKey, Stores, SystemError, ENTRY_LEN};

/// Key-Write store of per-host counters: 4-byte source IP keys, 8 bytes of data (packets u32,
/// bytes u32, big-endian; saturating).
pub const STORE_HOSTS: &str = "marple_hosts";
/// Key-Increment store of per-host counters: 5-byte keys, the source IP and [`COUNT_PACKETS`]
/// or [`COUNT_BYTES`].
pub const STORE_HOST_COUNTS: &str = "marple_host_counts";
/// Key-Write store of per-flow timeout counts: 13-byte flow keys, 4 bytes of data (u32).
pub const STORE_TIMEOUTS: &str = "marple_timeouts";
/// Last key byte of a host's packet counter in [`STORE_HOST_COUNTS`].
pub const COUNT_PACKETS: u8 = 0;
/// Last key byte of a host's byte counter in [`STORE_HOST_COUNTS`].
pub const COUNT_BYTES: u8 = 1;
/// Copies per Key-Write and Key-Increment report (the stores' `redundancy`).
pub const REDUNDANCY: u8 = dta_wire::DEFAULT_REDUNDANCY;

/// Lower edges of the lossy-connection ranges, basis points (1/10 000): list
/// `lists::MARPLE_LOSSY.start + i` holds flows with a loss rate in `[edge i, edge i+1)` (the
/// last up to 100 %). The first edge is the lowest threshold a switch may use.
pub const LOSS_RANGES_BP: [u32; 8] = [100, 200, 500, 1000, 2000, 3000, 5000, 7500];
/// Flowlet-size histogram bins: bin `b` holds flowlets of `2^b ..= 2^(b+1) - 1` packets (the
/// last bin everything above), list `lists::MARPLE_FLOWLETS.start + b`.
pub const FLOWLET_BINS: u32 = 16;

/// Default loss-rate threshold of the lossy-connections query: 1 %.
pub const DEFAULT_LOSS_THRESHOLD_BP: u32 = LOSS_RANGES_BP[0];
/// Default flowlet gap: 1 ms.
pub const DEFAULT_FLOWLET_GAP_NS: u64 = 1_000_000;
/// Default retransmission timeout: 200 ms (Linux's minimum RTO).
pub const DEFAULT_RTO_NS: u64 = 200_000_000;
/// Default fewest packets before a flow's loss rate is judged.
pub const DEFAULT_MIN_PACKETS: u64 = 10;
/// Default host packets between host-counter reports.
pub const DEFAULT_HOST_REPORT_EVERY: u64 = 16;

const _: () =
    assert!(LOSS_RANGES_BP.len() as u32 == lists::MARPLE_LOSSY.end - lists::MARPLE_LOSSY.start);
const _: () = assert!(FLOWLET_BINS == lists::MARPLE_FLOWLETS.end - lists::MARPLE_FLOWLETS.start);

/// The Marple queries, each a workload of `dta report` and a query of `dta query marple`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Query {
    /// Per-host packet and byte counters (Key-Write and Key-Increment).
    HostCounters,
    /// Flows whose loss rate exceeds a threshold (Append by loss-rate range).
    Lossy,
    /// Per-flow TCP timeout counts (Key-Write).
    TcpTimeouts,
    /// Per-flow flowlet sizes (Append by size bin).
    Flowlets,
}

impl Query {
    /// Every query, in the order of [`DTA §6.1`]'s Fig. 7b workload (which runs all of them).
    pub const ALL: [Query; 4] = [
        Query::HostCounters,
        Query::Lossy,
        Query::TcpTimeouts,
        Query::Flowlets,
    ];
}

/// The switch queries' parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Params {
    /// A gap longer than this ends a flowlet, ns.
    pub flowlet_gap_ns: u64,
    /// A gap longer than this is a TCP timeout, ns.
    pub rto_ns: u64,
    /// Flows whose loss rate exceeds this (basis points) are lossy; at least
    /// [`LOSS_RANGES_BP`]`[0]`.
    pub loss_threshold_bp: u32,
    /// Fewest packets before a flow's loss rate is judged.
    pub min_packets: u64,
    /// Host packets between host-counter reports (>= 1).
    pub host_report_every: u64,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            flowlet_gap_ns: DEFAULT_FLOWLET_GAP_NS,
            rto_ns: DEFAULT_RTO_NS,
            loss_threshold_bp: DEFAULT_LOSS_THRESHOLD_BP,
            min_packets: DEFAULT_MIN_PACKETS,
            host_report_every: DEFAULT_HOST_REPORT_EVERY,
        }
    }
}

impl Params {
    /// Check the parameters the stores can represent.
    pub fn validate(&self) -> Result<(), SystemError> {
        if self.loss_threshold_bp < LOSS_RANGES_BP[0] || self.loss_threshold_bp >= 10_000 {
            return Err(SystemError::BadRequest(format!(
                "loss threshold {} %: {} % ..< 100 % (the lowest range of the lossy lists)",
                self.loss_threshold_bp as f64 / 100.0,
                LOSS_RANGES_BP[0] as f64 / 100.0
            )));
        }
        if self.host_report_every == 0 || self.flowlet_gap_ns == 0 || self.rto_ns == 0 {
            return Err(SystemError::BadRequest(
                "host_report_every, flowlet gap and RTO must be positive".into(),
            ));
        }
        Ok(())
    }
}

/// Reports sent, by primitive.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Sent {
    /// Key-Write reports.
    pub key_write: u64,
    /// Key-Increment reports.
    pub key_increment: u64,
    /// Append reports.
    pub append: u64,
}

impl Sent {
    /// All reports.
    pub fn total(&self) -> u64 {
        self.key_write + self.key_increment + self.append
    }
}

/// Loss rate in basis points, rounded down.
fn rate_bp(retransmissions: u64, packets: u64) -> u32 {
    (retransmissions * 10_000).checked_div(packets).unwrap_or(0) as u32
}

/// The list of a loss rate (at least `LOSS_RANGES_BP[0]`).
pub fn loss_list(rate_bp: u32) -> u32 {
    let i = LOSS_RANGES_BP
        .iter()
        .rposition(|&e| e <= rate_bp)
        .unwrap_or(0);
    lists::MARPLE_LOSSY.start + i as u32
}

/// The histogram bin of a flowlet of `packets` (>= 1) packets.
pub fn flowlet_bin(packets: u64) -> u32 {
    (63 - packets.max(1).leading_zeros()).min(FLOWLET_BINS - 1)
}

fn host_of(flow: &FlowKey) -> [u8; 4] {
    [flow[0], flow[1], flow[2], flow[3]]
}

/// `a` is at or below `b` in sequence space.
fn seq_le(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) <= 0
}

/// Per-flow switch state.
#[derive(Default)]
struct FlowState {
    packets: u64,
    retransmissions: u64,
    max_end: u32,
    last_ts: u64,
    flowlet: u64,
    timeouts: u32,
}

impl FlowState {
    /// Account one packet; whether it is a retransmission.
    fn packet(&mut self, p: &Packet) -> bool {
        let first = self.packets == 0;
        self.packets += 1;
        let end = p.seq_end();
        if !first && end != p.seq && seq_le(end, self.max_end) {
            self.retransmissions += 1;
            return true;
        }
        if first || !seq_le(end, self.max_end) {
            self.max_end = end;
        }
        false
    }
}

#[derive(Default)]
struct HostState {
    packets: u64,
    bytes: u64,
    since: u64,
    d_packets: u64,
    d_bytes: u64,
}

/// Run query `q` of the switch over `trace`, sending its reports to `emit`.
pub fn reports(q: Query, trace: &Trace, p: &Params, emit: &mut Emit) -> Result<Sent, SystemError> {
    p.validate()?;
    let mut sent = Sent::default();
    let mut flows: HashMap<FlowKey, FlowState> = HashMap::new();
    let mut hosts: HashMap<[u8; 4], HostState> = HashMap::new();
    let mut entry = [0u8; ENTRY_LEN];
    for pkt in &trace.packets {
        if q == Query::HostCounters {
            let h = hosts.entry(host_of(&pkt.flow)).or_default();
            h.packets += 1;
            h.bytes += u64::from(pkt.size);
            h.d_packets += 1;
            h.d_bytes += u64::from(pkt.size);
            h.since += 1;
            if h.since == p.host_report_every {
                host_reports(&host_of(&pkt.flow), h, emit, &mut sent)?;
            }
            continue;
        }
        let f = flows.entry(pkt.flow).or_default();
        let first = f.packets == 0;
        let gap = pkt.ts_ns.saturating_sub(f.last_ts);
        f.packet(pkt);
        f.last_ts = pkt.ts_ns;
        match q {
            Query::TcpTimeouts if !first && gap > p.rto_ns => {
                f.timeouts = f.timeouts.saturating_add(1);
                emit(&Report::KeyWrite {
                    key: &pkt.flow,
                    data: &f.timeouts.to_be_bytes(),
                    redundancy: REDUNDANCY,
                    immediate: false,
                })?;
                sent.key_write += 1;
            }
            Query::Flowlets if !first && gap > p.flowlet_gap_ns => {
                flowlet_entry(&pkt.flow, f.flowlet, &mut entry);
                emit(&Report::Append {
                    list_id: lists::MARPLE_FLOWLETS.start + flowlet_bin(f.flowlet),
                    data: &entry,
                    immediate: false,
                })?;
                sent.append += 1;
                f.flowlet = 1;
            }
            Query::Flowlets => f.flowlet += 1,
            _ => {}
        }
    }
    // The end of the trace ends every flow: the remaining state is reported, in key order.
    let mut keys: Vec<FlowKey> = flows.keys().copied().collect();
    keys.sort_unstable();
    for k in &keys {
        let f = &flows[k];
        match q {
            Query::Lossy => {
                let rate = rate_bp(f.retransmissions, f.packets);
                if f.packets >= p.min_packets && rate > p.loss_threshold_bp {
                    lossy_entry(k, rate, f.packets, f.retransmissions, &mut entry);
                    emit(&Report::Append {
                        list_id: loss_list(rate),
                        data: &entry,
                        immediate: false,
                    })?;
                    sent.append += 1;
                }
            }
            Query::TcpTimeouts => {
                emit(&Report::KeyWrite {
                    key: k,
                    data: &f.timeouts.to_be_bytes(),
                    redundancy: REDUNDANCY,
                    immediate: false,
                })?;
                sent.key_write += 1;
            }
            Query::Flowlets => {
                flowlet_entry(k, f.flowlet, &mut entry);
                emit(&Report::Append {
                    list_id: lists::MARPLE_FLOWLETS.start + flowlet_bin(f.flowlet),
                    data: &entry,
                    immediate: false,
                })?;
                sent.append += 1;
            }
            Query::HostCounters => {}
        }
    }
    let mut hs: Vec<_> = hosts.into_iter().filter(|(_, h)| h.since > 0).collect();
    hs.sort_unstable_by_key(|(ip, _)| *ip);
    for (ip, mut h) in hs {
        host_reports(&ip, &mut h, emit, &mut sent)?;
    }
    Ok(sent)
}

/// A host's Key-Write of its totals and Key-Increments of its deltas since the last report.
fn host_reports(
    ip: &[u8; 4],
    h: &mut HostState,
    emit: &mut Emit,
    sent: &mut Sent,
) -> Result<(), SystemError> {
    let mut data = [0u8; 8];
    data[..4].copy_from_slice(&sat32(h.packets).to_be_bytes());
    data[4..].copy_from_slice(&sat32(h.bytes).to_be_bytes());
    emit(&Report::KeyWrite {
        key: ip,
        data: &data,
        redundancy: REDUNDANCY,
        immediate: false,
    })?;
    for (kind, delta) in [(COUNT_PACKETS, h.d_packets), (COUNT_BYTES, h.d_bytes)] {
        emit(&Report::KeyIncrement {
            key: &counter_key(ip, kind),
            counter: delta,
            redundancy: REDUNDANCY,
            immediate: false,
        })?;
    }
    sent.key_write += 1;
    sent.key_increment += 2;
    h.since = 0;
    h.d_packets = 0;
    h.d_bytes = 0;
    Ok(())
}

fn sat32(v: u64) -> u32 {
    v.min(u32::MAX as u64) as u32
}

/// The [`STORE_HOST_COUNTS`] key of a host's counter `kind`.
pub fn counter_key(ip: &[u8; 4], kind: u8) -> [u8; 5] {
    [ip[0], ip[1], ip[2], ip[3], kind]
}

/// A lossy-connection entry: flow (13), rate in basis points (u16), packets (u32),
/// retransmissions (u32), zeros.
fn lossy_entry(k: &FlowKey, rate: u32, packets: u64, retrans: u64, e: &mut [u8; ENTRY_LEN]) {
    e.fill(0);
    e[..13].copy_from_slice(k);
    e[13..15].copy_from_slice(&(rate.min(10_000) as u16).to_be_bytes());
    e[15..19].copy_from_slice(&sat32(packets).to_be_bytes());
    e[19..23].copy_from_slice(&sat32(retrans).to_be_bytes());
}

/// A flowlet entry: flow (13), packets (u32), zeros.
fn flowlet_entry(k: &FlowKey, packets: u64, e: &mut [u8; ENTRY_LEN]) {
    e.fill(0);
    e[..13].copy_from_slice(k);
    e[13..17].copy_from_slice(&sat32(packets).to_be_bytes());
}

fn entry_flow(e: &[u8; ENTRY_LEN]) -> FlowKey {
    e[..13].try_into().expect("13 bytes")
}

use dta_net::be::rd32 as be32;

/// What the switch queries should find, computed from the whole trace.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Truth {
    /// Per source host: packets and bytes.
    pub hosts: BTreeMap<[u8; 4], (u64, u64)>,
    /// Per flow: packets, retransmissions, rate (basis points).
    pub flows: BTreeMap<FlowKey, (u64, u64, u32)>,
    /// The flows the lossy-connections query reports (loss rate above the threshold, enough
    /// packets), with their rate.
    pub lossy: BTreeMap<FlowKey, u32>,
    /// Per flow: TCP timeouts.
    pub timeouts: BTreeMap<FlowKey, u32>,
    /// Per flow: flowlet sizes in packets, in time order.
    pub flowlets: BTreeMap<FlowKey, Vec<u64>>,
}

/// The ground truth of every query over `trace`.
pub fn truth(trace: &Trace, p: &Params) -> Truth {
    let mut by_flow: BTreeMap<FlowKey, Vec<&Packet>> = BTreeMap::new();
    let mut t = Truth::default();
    for pkt in &trace.packets {
        by_flow.entry(pkt.flow).or_default().push(pkt);
        let h = t.hosts.entry(host_of(&pkt.flow)).or_default();
        h.0 += 1;
        h.1 += u64::from(pkt.size);
    }
    for (k, pkts) in by_flow {
        // A retransmission ends at or below the highest sequence number seen before it.
        let mut max_end = pkts[0].seq_end();
        let mut retrans = 0u64;
        let mut timeouts = 0u32;
        let mut flowlets = vec![1u64];
        for w in pkts.windows(2) {
            let (prev, cur) = (w[0], w[1]);
            let end = cur.seq_end();
            if end != cur.seq && seq_le(end, max_end) {
                retrans += 1;
            } else if !seq_le(end, max_end) {
                max_end = end;
            }
            let gap = cur.ts_ns - prev.ts_ns;
            timeouts += u32::from(gap > p.rto_ns);
            if gap > p.flowlet_gap_ns {
                flowlets.push(1);
            } else {
                *flowlets.last_mut().expect("one flowlet") += 1;
            }
        }
        let n = pkts.len() as u64;
        let rate = rate_bp(retrans, n);
        t.flows.insert(k, (n, retrans, rate));
        if n >= p.min_packets && rate > p.loss_threshold_bp {
            t.lossy.insert(k, rate);
        }
        t.timeouts.insert(k, timeouts);
        t.flowlets.insert(k, flowlets);
    }
    t
}

impl Truth {
    /// The truth as JSON: flows as `SRC:SPORT-DST:DPORT/PROTO`, hosts as dotted IPs.
    pub fn to_json(&self) -> serde_json::Value {
        let ip = |h: &[u8; 4]| Ipv4Addr::from(*h).to_string();
        serde_json::json!({
            "hosts": self.hosts.iter().map(|(h, (p, b))| (ip(h), serde_json::json!({"packets": p, "bytes": b}))).collect::<serde_json::Map<_, _>>(),
            "lossy": self.lossy.iter().map(|(k, r)| (flow_string(k), serde_json::json!(*r as f64 / 10_000.0))).collect::<serde_json::Map<_, _>>(),
            "timeouts": self.timeouts.iter().map(|(k, n)| (flow_string(k), serde_json::json!(n))).collect::<serde_json::Map<_, _>>(),
            "flowlets": self.flowlets.iter().map(|(k, v)| (flow_string(k), serde_json::json!(v))).collect::<serde_json::Map<_, _>>(),
        })
    }
}

/// A host's counters as the stores hold them.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct HostAnswer {
    /// The host.
    pub host: String,
    /// From [`STORE_HOSTS`] (the running totals the switch wrote last; exact unless the slots
    /// were overwritten, see `confidence`).
    pub key_write: HostTotals,
    /// From [`STORE_HOST_COUNTS`] (sums of the deltas; count-min: never below the truth, above
    /// it by at most `bound.error` with probability `1 - bound.delta`).
    pub key_increment: HostCounts,
}

/// Key-Write totals of a host.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct HostTotals {
    /// Packets (saturating at 2^32 - 1).
    pub packets: u32,
    /// Bytes (saturating at 2^32 - 1).
    pub bytes: u32,
    /// How sure the Key-Write answer is.
    pub confidence: dta_store::Confidence,
}

/// Key-Increment counts of a host.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct HostCounts {
    /// Packets.
    pub packets: u64,
    /// Bytes.
    pub bytes: u64,
    /// The packet counter's count-min bound.
    pub packets_bound: dta_store::CountBound,
    /// The byte counter's count-min bound.
    pub bytes_bound: dta_store::CountBound,
}

fn query_err(store: &str, e: impl std::fmt::Display) -> SystemError {
    SystemError::Store {
        store: store.to_owned(),
        msg: e.to_string(),
    }
}

/// Host counters of `ip`: an error when the Key-Write store holds nothing for it (never a 0).
pub fn query_host(stores: &Stores, ip: Ipv4Addr) -> Result<HostAnswer, SystemError> {
    let kw = stores.open(STORE_HOSTS)?;
    let key = ip.octets();
    let r = dta_collector::query::key_write(&kw, &key, None, 1)
        .map_err(|e| query_err(STORE_HOSTS, e))?;
    kw.check().map_err(|e| query_err(STORE_HOSTS, e))?;
    let data = match (r.status, &r.data) {
        ("found", Some(d)) => hex::decode(d).map_err(|e| query_err(STORE_HOSTS, e))?,
        ("ambiguous", _) => {
            return Err(SystemError::NotFound(format!(
                "host {ip}: {STORE_HOSTS} holds {} different values for it (slots overwritten by \
                 other hosts); no answer",
                r.candidates.len()
            )))
        }
        _ => {
            return Err(SystemError::NotFound(format!(
                "host {ip}: no counters in {STORE_HOSTS} (no packet of it was reported, or its \
                 slots were overwritten: p = {:.2e})",
                r.confidence.p_overwritten
            )))
        }
    };
    if data.len() != 8 {
        return Err(query_err(
            STORE_HOSTS,
            "data is not 8 bytes: not a Marple host store",
        ));
    }
    let ki = stores.open(STORE_HOST_COUNTS)?;
    let count = |kind| {
        dta_collector::query::key_increment(&ki, &counter_key(&key, kind), None)
            .map_err(|e| query_err(STORE_HOST_COUNTS, e))
    };
    let (cp, cb) = (count(COUNT_PACKETS)?, count(COUNT_BYTES)?);
    ki.check().map_err(|e| query_err(STORE_HOST_COUNTS, e))?;
    Ok(HostAnswer {
        host: ip.to_string(),
        key_write: HostTotals {
            packets: be32(&data[..4]),
            bytes: be32(&data[4..]),
            confidence: r.confidence,
        },
        key_increment: HostCounts {
            packets: cp.count,
            bytes: cb.count,
            packets_bound: cp.bound,
            bytes_bound: cb.bound,
        },
    })
}

/// A lossy flow as reported.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LossyFlow {
    /// The flow.
    pub flow: String,
    /// Its loss rate (retransmissions / packets).
    pub loss_rate: f64,
    /// Packets the switch saw.
    pub packets: u32,
    /// Retransmissions the switch saw.
    pub retransmissions: u32,
}

/// The lossy flows of a loss-rate range.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LossyAnswer {
    /// The range asked, as fractions `[from, to)`.
    pub from: f64,
    /// End of the range (exclusive; above 1 when open).
    pub to: f64,
    /// The lists read.
    pub lists: Vec<u32>,
    /// Flows in the range, most recently reported last per list.
    pub flows: Vec<LossyFlow>,
    /// Entries of the lists read that were overwritten before this query (the answer misses
    /// them; 0 means it is complete).
    pub overwritten: u64,
    /// Lossy flows reported over all ranges (the store is live when this is not 0).
    pub reported: u64,
}

/// Flows reported lossy with a rate in `range` (basis points, from [`crate::parse_fraction_range`]).
pub fn query_lossy(stores: &Stores, range: Range<u32>) -> Result<LossyAnswer, SystemError> {
    let region = stores.open(crate::APPEND_STORE)?;
    let mut a = LossyAnswer {
        from: range.start as f64 / 10_000.0,
        to: range.end as f64 / 10_000.0,
        lists: vec![],
        flows: vec![],
        overwritten: 0,
        reported: 0,
    };
    for (i, &lo) in LOSS_RANGES_BP.iter().enumerate() {
        let hi = LOSS_RANGES_BP.get(i + 1).copied().unwrap_or(10_001);
        let list = lists::MARPLE_LOSSY.start + i as u32;
        let l = read_list(&region, list)?;
        a.reported += l.appended;
        if hi <= range.start || lo >= range.end {
            continue;
        }
        a.lists.push(list);
        a.overwritten += l.overwritten;
        for e in &l.entries {
            let rate = u32::from(u16::from_be_bytes([e[13], e[14]]));
            if range.contains(&rate) {
                a.flows.push(LossyFlow {
                    flow: flow_string(&entry_flow(e)),
                    loss_rate: rate as f64 / 10_000.0,
                    packets: be32(&e[15..19]),
                    retransmissions: be32(&e[19..23]),
                });
            }
        }
    }
    if a.reported == 0 {
        return Err(SystemError::NotFound(format!(
            "no lossy flow was ever reported to {} (lists {:?}): has `dta report --workload \
             marple-lossy` sent to this collector?",
            crate::APPEND_STORE,
            lists::MARPLE_LOSSY
        )));
    }
    if range.start < LOSS_RANGES_BP[0] {
        // Rates below the lowest range are never reported: say so rather than answer "none".
        return Err(SystemError::BadRequest(format!(
            "loss rates below {} are never reported (the lowest range); ask from {} up",
            LOSS_RANGES_BP[0] as f64 / 10_000.0,
            LOSS_RANGES_BP[0] as f64 / 10_000.0
        )));
    }
    Ok(a)
}

/// A flow's timeout count.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TimeoutAnswer {
    /// The flow.
    pub flow: String,
    /// TCP timeouts (gaps longer than the switch's RTO).
    pub timeouts: u32,
    /// How sure the Key-Write answer is.
    pub confidence: dta_store::Confidence,
}

/// The timeouts of `flow`: an error when the store holds nothing for it.
pub fn query_timeouts(stores: &Stores, flow: &FlowKey) -> Result<TimeoutAnswer, SystemError> {
    let kw = stores.open(STORE_TIMEOUTS)?;
    let r = dta_collector::query::key_write(&kw, flow, None, 1)
        .map_err(|e| query_err(STORE_TIMEOUTS, e))?;
    kw.check().map_err(|e| query_err(STORE_TIMEOUTS, e))?;
    match (r.status, &r.data) {
        ("found", Some(d)) => {
            let d = hex::decode(d).map_err(|e| query_err(STORE_TIMEOUTS, e))?;
            if d.len() != 4 {
                return Err(query_err(STORE_TIMEOUTS, "data is not 4 bytes"));
            }
            Ok(TimeoutAnswer {
                flow: flow_string(flow),
                timeouts: be32(&d),
                confidence: r.confidence,
            })
        }
        ("ambiguous", _) => Err(SystemError::NotFound(format!(
            "flow {}: {STORE_TIMEOUTS} holds {} different counts for it; no answer",
            flow_string(flow),
            r.candidates.len()
        ))),
        _ => Err(SystemError::NotFound(format!(
            "flow {}: not in {STORE_TIMEOUTS} (the switch reports every flow it saw at its end; \
             this one was not seen, or its slots were overwritten: p = {:.2e})",
            flow_string(flow),
            r.confidence.p_overwritten
        ))),
    }
}

/// Flowlet sizes of one flow (or of all flows).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FlowletAnswer {
    /// The flow asked, or `null` for every flow.
    pub flow: Option<String>,
    /// Flowlets found.
    pub flowlets: u64,
    /// Sizes in packets, ascending.
    pub sizes: Vec<u32>,
    /// Histogram: `(smallest size of the bin, flowlets)` for every non-empty bin.
    pub histogram: Vec<(u64, u64)>,
    /// Entries of the flowlet lists overwritten before this query (0: the answer is complete).
    pub overwritten: u64,
}

/// Most sizes a whole-store flowlet answer lists (its histogram counts all).
pub const MAX_LISTED_SIZES: usize = 10_000;

/// The flowlet-size histogram of `flow` (every flow: `None`), from every flowlet list.
pub fn query_flowlets(
    stores: &Stores,
    flow: Option<&FlowKey>,
) -> Result<FlowletAnswer, SystemError> {
    let region = stores.open(crate::APPEND_STORE)?;
    query_flowlets_in(&region, flow)
}

fn query_flowlets_in(
    region: &Region,
    flow: Option<&FlowKey>,
) -> Result<FlowletAnswer, SystemError> {
    let mut a = FlowletAnswer {
        flow: flow.map(flow_string),
        flowlets: 0,
        sizes: vec![],
        histogram: vec![],
        overwritten: 0,
    };
    let mut appended = 0;
    for bin in 0..FLOWLET_BINS {
        let l = read_list(region, lists::MARPLE_FLOWLETS.start + bin)?;
        appended += l.appended;
        a.overwritten += l.overwritten;
        let mut n = 0;
        for e in &l.entries {
            if flow.is_none_or(|f| entry_flow(e) == *f) {
                n += 1;
                if a.sizes.len() < MAX_LISTED_SIZES || flow.is_some() {
                    a.sizes.push(be32(&e[13..17]));
                }
            }
        }
        if n > 0 {
            a.histogram.push((1u64 << bin, n));
            a.flowlets += n;
        }
    }
    a.sizes.sort_unstable();
    if appended == 0 {
        return Err(SystemError::NotFound(format!(
            "no flowlet was ever reported to {} (lists {:?}): has `dta report --workload \
             marple-flowlets` sent to this collector?",
            crate::APPEND_STORE,
            lists::MARPLE_FLOWLETS
        )));
    }
    if a.flowlets == 0 {
        let f = a.flow.clone().unwrap_or_default();
        return Err(SystemError::NotFound(format!(
            "flow {f}: no flowlet in the lists{}",
            if a.overwritten > 0 {
                format!(" ({} older entries were overwritten)", a.overwritten)
            } else {
                " (the switch reports every flow's flowlets: this flow was not seen)".into()
            }
        )));
    }
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace() -> (Trace, BTreeMap<FlowKey, crate::trace::Injected>) {
        crate::trace::test_trace(300)
    }

    #[test]
    fn truth_finds_what_synthesis_injected() {
        let (t, inj) = trace();
        let truth = truth(&t, &Params::default());
        assert_eq!(truth.flows.len(), inj.len());
        for (k, i) in &inj {
            let (n, r, _) = truth.flows[k];
            assert_eq!((n, r), (i.packets, i.retransmissions), "{}", flow_string(k));
            assert_eq!(truth.timeouts[k] as u64, i.timeouts);
            assert_eq!(truth.flowlets[k].len() as u64, i.bursts);
            assert_eq!(truth.flowlets[k].iter().sum::<u64>(), i.packets);
        }
        assert!(!truth.lossy.is_empty());
        assert!(truth.lossy.len() < inj.len());
    }

    #[test]
    fn bins_and_ranges() {
        assert_eq!(flowlet_bin(1), 0);
        assert_eq!(flowlet_bin(3), 1);
        assert_eq!(flowlet_bin(4), 2);
        assert_eq!(flowlet_bin(1 << 40), FLOWLET_BINS - 1);
        assert_eq!(loss_list(100), lists::MARPLE_LOSSY.start);
        assert_eq!(loss_list(199), lists::MARPLE_LOSSY.start);
        assert_eq!(loss_list(10_000), lists::MARPLE_LOSSY.end - 1);
    }

    #[test]
    fn reports_match_the_truth_in_memory() {
        // The switch's streaming state reports what the whole-trace truth says.
        let (t, _) = trace();
        let p = Params::default();
        let truth = truth(&t, &p);
        let mut lossy = BTreeMap::new();
        let mut timeouts = BTreeMap::new();
        let mut flowlets: BTreeMap<FlowKey, Vec<u64>> = BTreeMap::new();
        let mut hosts_kw = BTreeMap::new();
        let mut hosts_ki: BTreeMap<[u8; 5], u64> = BTreeMap::new();
        for q in Query::ALL {
            reports(q, &t, &p, &mut |r: &Report<'_>| {
                match *r {
                    Report::Append { list_id, data, .. } => {
                        let e: [u8; ENTRY_LEN] = data.try_into().unwrap();
                        if lists::MARPLE_LOSSY.contains(&list_id) {
                            let rate = u16::from_be_bytes([e[13], e[14]]) as u32;
                            assert_eq!(loss_list(rate), list_id);
                            lossy.insert(entry_flow(&e), rate);
                        } else {
                            let n = be32(&e[13..17]) as u64;
                            assert_eq!(lists::MARPLE_FLOWLETS.start + flowlet_bin(n), list_id);
                            flowlets.entry(entry_flow(&e)).or_default().push(n);
                        }
                    }
                    Report::KeyWrite { key, data, .. } if key.len() == 13 => {
                        timeouts.insert(<FlowKey>::try_from(key).unwrap(), be32(data));
                    }
                    Report::KeyWrite { key, data, .. } => {
                        hosts_kw.insert(
                            <[u8; 4]>::try_from(key).unwrap(),
                            (be32(data) as u64, be32(&data[4..]) as u64),
                        );
                    }
                    Report::KeyIncrement { key, counter, .. } => {
                        *hosts_ki.entry(key.try_into().unwrap()).or_default() += counter;
                    }
                    _ => unreachable!(),
                }
                Ok(())
            })
            .unwrap();
        }
        assert_eq!(lossy, truth.lossy);
        assert_eq!(timeouts, truth.timeouts);
        assert_eq!(flowlets, truth.flowlets);
        assert_eq!(hosts_kw, truth.hosts);
        for (h, (p, b)) in &truth.hosts {
            assert_eq!(hosts_ki[&counter_key(h, COUNT_PACKETS)], *p);
            assert_eq!(hosts_ki[&counter_key(h, COUNT_BYTES)], *b);
        }
    }

    #[test]
    fn bad_parameters_are_refused() {
        let (t, _) = trace();
        for p in [
            Params {
                loss_threshold_bp: 50,
                ..Params::default()
            },
            Params {
                host_report_every: 0,
                ..Params::default()
            },
        ] {
            let e = reports(Query::Lossy, &t, &p, &mut |_| Ok(())).unwrap_err();
            assert!(matches!(e, SystemError::BadRequest(_)), "{e}");
        }
    }
}
