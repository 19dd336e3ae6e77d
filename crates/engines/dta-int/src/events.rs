//! INT events ([INT-NIC §III]): threshold-crossing events 𝒯 (a hop's value above a threshold),
//! change events 𝒞 (a hop's node id changed: the path changed; a hop's value changed by more
//! than a threshold), and drop reports. Thresholds live in [`Thresholds`], atomics shared with
//! whoever retunes them at run time. Events and flow records go to subscribers through one
//! bounded channel each, in order; a slow subscriber loses notifications (counted), it never
//! stalls the data path.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::layout::{EVENT_LEN, FLOW_KEY_LEN};

/// What happened. The discriminant is the record's kind byte; the Append list of a kind is
/// `list_base + kind - 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// 𝒯: hop latency above its threshold (a congestion event).
    HopLatency = 1,
    /// 𝒯: queue occupancy above its threshold (a congestion event).
    QueueOccupancy = 2,
    /// 𝒯: egress utilisation above its threshold.
    EgressTxUtil = 3,
    /// 𝒯, end to end: the sum of the hop latencies above its threshold.
    PathLatency = 4,
    /// 𝒞: the node id at a hop changed.
    PathChange = 5,
    /// 𝒞: a hop's latency changed by more than its threshold.
    LatencyChange = 6,
    /// 𝒞: a hop's queue occupancy changed by more than its threshold.
    QueueChange = 7,
    /// A drop report (telemetry report D flag / drop reason).
    Drop = 8,
}

impl EventKind {
    pub const ALL: [EventKind; 8] = [
        EventKind::HopLatency,
        EventKind::QueueOccupancy,
        EventKind::EgressTxUtil,
        EventKind::PathLatency,
        EventKind::PathChange,
        EventKind::LatencyChange,
        EventKind::QueueChange,
        EventKind::Drop,
    ];

    pub fn from_u8(v: u8) -> Option<EventKind> {
        EventKind::ALL.get((v as usize).wrapping_sub(1)).copied()
    }

    pub fn name(self) -> &'static str {
        match self {
            EventKind::HopLatency => "hop_latency",
            EventKind::QueueOccupancy => "queue_occupancy",
            EventKind::EgressTxUtil => "egress_tx_util",
            EventKind::PathLatency => "path_latency",
            EventKind::PathChange => "path_change",
            EventKind::LatencyChange => "latency_change",
            EventKind::QueueChange => "queue_change",
            EventKind::Drop => "drop",
        }
    }

    /// `threshold` (𝒯), `change` (𝒞) or `drop`: the kind's class ([INT-NIC §III.C]).
    pub fn class(self) -> &'static str {
        match self {
            EventKind::HopLatency
            | EventKind::QueueOccupancy
            | EventKind::EgressTxUtil
            | EventKind::PathLatency => "threshold",
            EventKind::PathChange | EventKind::LatencyChange | EventKind::QueueChange => "change",
            EventKind::Drop => "drop",
        }
    }

    pub fn from_name(s: &str) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// [`EventKind::from_name`], or an error that lists the kinds.
    pub fn parse(s: &str) -> Result<EventKind, String> {
        EventKind::from_name(s.trim()).ok_or_else(|| {
            format!(
                "unknown event kind {s:?}: {}",
                EventKind::ALL.map(|k| k.name()).join(", ")
            )
        })
    }
}

/// Hop value meaning "the whole path" (end-to-end events) or "unknown" (drop reports).
pub const HOP_NONE: u8 = 0xFF;

/// One event. As an Append record (32 bytes, big-endian):
/// `time_ns u64 | flow [u8; 13] | kind u8 | hop u8 | reserved u8 | node_id u32 | value u32`.
/// `value` is the measured value (𝒯), the new value (𝒞 value changes), the previous node id
/// (path change; `node_id` is the new one) or the drop reason (drop).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Event {
    /// Position in the sink's event stream (0, 1, 2, ...); not stored in the record.
    pub seq: u64,
    pub time_ns: u64,
    pub kind: EventKind,
    #[serde(serialize_with = "ser_flow")]
    pub flow: [u8; FLOW_KEY_LEN],
    /// Hop index from the INT source (0), or [`HOP_NONE`].
    pub hop: u8,
    pub node_id: u32,
    pub value: u32,
}

/// A flow key rendered as `SRC:SPORT-DST:DPORT/PROTO` (the syntax queries accept).
pub fn flow_string(k: &[u8; FLOW_KEY_LEN]) -> String {
    format!(
        "{}.{}.{}.{}:{}-{}.{}.{}.{}:{}/{}",
        k[0],
        k[1],
        k[2],
        k[3],
        u16::from_be_bytes([k[8], k[9]]),
        k[4],
        k[5],
        k[6],
        k[7],
        u16::from_be_bytes([k[10], k[11]]),
        k[12]
    )
}

pub(crate) fn ser_flow<S: serde::Serializer>(
    k: &[u8; FLOW_KEY_LEN],
    s: S,
) -> Result<S::Ok, S::Error> {
    s.serialize_str(&flow_string(k))
}

impl Event {
    /// The Append record.
    pub fn encode(&self) -> [u8; EVENT_LEN] {
        let mut r = [0u8; EVENT_LEN];
        r[0..8].copy_from_slice(&self.time_ns.to_be_bytes());
        r[8..21].copy_from_slice(&self.flow);
        r[21] = self.kind as u8;
        r[22] = self.hop;
        r[24..28].copy_from_slice(&self.node_id.to_be_bytes());
        r[28..32].copy_from_slice(&self.value.to_be_bytes());
        r
    }

    /// Decode an Append record (`seq` is the entry's index in its list). `None`: not an event
    /// record (wrong length or unknown kind).
    pub fn decode(r: &[u8], seq: u64) -> Option<Event> {
        if r.len() != EVENT_LEN {
            return None;
        }
        Some(Event {
            seq,
            time_ns: u64::from_be_bytes(r[0..8].try_into().ok()?),
            flow: r[8..21].try_into().ok()?,
            kind: EventKind::from_u8(r[21])?,
            hop: r[22],
            node_id: u32::from_be_bytes(r[24..28].try_into().ok()?),
            value: u32::from_be_bytes(r[28..32].try_into().ok()?),
        })
    }
}

/// Event thresholds, changeable at run time from any thread ([INT-NIC §III]: "mutate threshold
/// parameters dynamically"). `u32::MAX` disables a threshold. An event fires when the value is
/// strictly above the threshold (𝒯) or differs from the previous one by strictly more (𝒞).
#[derive(Debug)]
pub struct Thresholds {
    pub hop_latency: AtomicU32,
    pub queue_occupancy: AtomicU32,
    pub egress_tx_util: AtomicU32,
    pub path_latency: AtomicU32,
    pub latency_change: AtomicU32,
    pub queue_change: AtomicU32,
    /// Path-change events on (1) or off (0).
    pub path_change: AtomicU32,
}

/// Plain threshold values (configuration, serde).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ThresholdConfig {
    pub hop_latency: u32,
    pub queue_occupancy: u32,
    pub egress_tx_util: u32,
    pub path_latency: u32,
    pub latency_change: u32,
    pub queue_change: u32,
    pub path_change: bool,
}

impl Default for ThresholdConfig {
    fn default() -> Self {
        ThresholdConfig {
            hop_latency: u32::MAX,
            queue_occupancy: u32::MAX,
            egress_tx_util: u32::MAX,
            path_latency: u32::MAX,
            latency_change: u32::MAX,
            queue_change: u32::MAX,
            path_change: true,
        }
    }
}

impl Thresholds {
    pub fn new(c: &ThresholdConfig) -> Thresholds {
        let t = Thresholds {
            hop_latency: AtomicU32::new(0),
            queue_occupancy: AtomicU32::new(0),
            egress_tx_util: AtomicU32::new(0),
            path_latency: AtomicU32::new(0),
            latency_change: AtomicU32::new(0),
            queue_change: AtomicU32::new(0),
            path_change: AtomicU32::new(0),
        };
        t.set(c);
        t
    }

    /// Replace every threshold.
    pub fn set(&self, c: &ThresholdConfig) {
        self.hop_latency.store(c.hop_latency, Relaxed);
        self.queue_occupancy.store(c.queue_occupancy, Relaxed);
        self.egress_tx_util.store(c.egress_tx_util, Relaxed);
        self.path_latency.store(c.path_latency, Relaxed);
        self.latency_change.store(c.latency_change, Relaxed);
        self.queue_change.store(c.queue_change, Relaxed);
        self.path_change.store(c.path_change as u32, Relaxed);
    }

    /// The current values.
    pub fn get(&self) -> ThresholdConfig {
        ThresholdConfig {
            hop_latency: self.hop_latency.load(Relaxed),
            queue_occupancy: self.queue_occupancy.load(Relaxed),
            egress_tx_util: self.egress_tx_util.load(Relaxed),
            path_latency: self.path_latency.load(Relaxed),
            latency_change: self.latency_change.load(Relaxed),
            queue_change: self.queue_change.load(Relaxed),
            path_change: self.path_change.load(Relaxed) != 0,
        }
    }
}

/// Why a flow left the FlowCache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EvictReason {
    /// Not updated for the idle timeout (aging, [INT-NIC §III]).
    Idle,
    /// Its row was full and it was the least recently updated ([INT-NIC §III] "Eviction").
    Capacity,
    /// Shutdown or explicit flush.
    Flush,
}

/// One hop of a flow record: latest and average values ([INT-NIC §III]: "the most recent as well as
/// the average statistics ... for each INT transit node"). `None`: never reported.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub struct HopRecord {
    pub node_id: Option<u32>,
    pub hop_latency: Option<u32>,
    pub avg_hop_latency: Option<f64>,
    pub queue_occupancy: Option<u32>,
    pub avg_queue_occupancy: Option<f64>,
    pub egress_tx_util: Option<u32>,
    pub avg_egress_tx_util: Option<f64>,
    /// Times the node id at this hop changed.
    pub path_changes: u32,
}

/// The events store's list of flow summaries, after the event kinds' lists:
/// An entry of an Append store of record layout `int-event` (its bytes, its index in its
/// list), decoded: `{"type": "event", ...}` ([`Event`]) or `{"type": "flow_summary", ...}`
/// ([`FlowSummary`]) by its kind byte; `None` for another layout or bytes that are neither.
pub fn decode_record(
    record: dta_store::AppendRecord,
    entry: &[u8],
    seq: u64,
) -> Option<serde_json::Value> {
    if record != dta_store::AppendRecord::IntEvent {
        return None;
    }
    let tagged = |kind: &str, v: serde_json::Result<serde_json::Value>| {
        let mut v = v.ok()?;
        v.as_object_mut()?.insert("type".into(), kind.into());
        Some(v)
    };
    match FlowSummary::decode(entry, seq) {
        Some(f) => tagged("flow_summary", serde_json::to_value(f)),
        None => tagged("event", serde_json::to_value(Event::decode(entry, seq)?)),
    }
}

/// `event_list_base + FLOW_SUMMARY_LIST` (written when the store has that list).
pub const FLOW_SUMMARY_LIST: u32 = EventKind::ALL.len() as u32;
/// The kind byte of a flow summary record (after the event kinds').
pub const FLOW_SUMMARY_KIND: u8 = EventKind::ALL.len() as u8 + 1;

/// A flow's summary, written to the events store when the flow leaves the FlowCache (idle,
/// evicted or flushed): what `dta query int flows` lists, searches and ranks, and the network
/// map is learned from. As an Append record (32 bytes, big-endian, the event record's frame):
/// `last_ns u64 | flow [u8; 13] | 9 u8 | hops u8 | reserved u8 | packets u32 |
/// path_latency u32` (the sum of the hops' average latencies, ns, saturating).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FlowSummary {
    /// The entry's index in its list; not stored in the record.
    pub seq: u64,
    pub last_ns: u64,
    #[serde(serialize_with = "ser_flow")]
    pub flow: [u8; FLOW_KEY_LEN],
    pub hops: u8,
    pub packets: u32,
    pub path_latency: u32,
}

impl FlowSummary {
    /// The summary of a flow record.
    pub fn of(r: &FlowRecord) -> FlowSummary {
        let latency: f64 = r
            .hops
            .iter()
            .map(|h| {
                h.avg_hop_latency
                    .or(h.hop_latency.map(f64::from))
                    .unwrap_or(0.0)
            })
            .sum();
        FlowSummary {
            seq: 0,
            last_ns: r.last_ns,
            flow: r.flow,
            hops: r.hops.len().min(u8::MAX as usize) as u8,
            packets: r.packets.min(u32::MAX as u64) as u32,
            path_latency: latency.round().min(u32::MAX as f64) as u32,
        }
    }

    /// The Append record.
    pub fn encode(&self) -> [u8; EVENT_LEN] {
        let mut r = [0u8; EVENT_LEN];
        r[0..8].copy_from_slice(&self.last_ns.to_be_bytes());
        r[8..21].copy_from_slice(&self.flow);
        r[21] = FLOW_SUMMARY_KIND;
        r[22] = self.hops;
        r[24..28].copy_from_slice(&self.packets.to_be_bytes());
        r[28..32].copy_from_slice(&self.path_latency.to_be_bytes());
        r
    }

    /// Decode an Append record (`seq` is the entry's index in its list); `None` when it is
    /// not a flow summary.
    pub fn decode(r: &[u8], seq: u64) -> Option<FlowSummary> {
        if r.len() != EVENT_LEN || r[21] != FLOW_SUMMARY_KIND {
            return None;
        }
        Some(FlowSummary {
            seq,
            last_ns: u64::from_be_bytes(r[0..8].try_into().ok()?),
            flow: r[8..21].try_into().ok()?,
            hops: r[22],
            packets: u32::from_be_bytes(r[24..28].try_into().ok()?),
            path_latency: u32::from_be_bytes(r[28..32].try_into().ok()?),
        })
    }
}

/// A flow leaving the FlowCache.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlowRecord {
    #[serde(serialize_with = "ser_flow")]
    pub flow: [u8; FLOW_KEY_LEN],
    pub packets: u64,
    pub first_ns: u64,
    pub last_ns: u64,
    pub reason: EvictReason,
    /// Hop 0 (the INT source) first.
    pub hops: Vec<HopRecord>,
}

/// What subscribers receive, in the order the sink produced it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Notification {
    Event(Event),
    Flow(FlowRecord),
}

struct Subscriber {
    tx: SyncSender<Notification>,
    dropped: Arc<AtomicU64>,
}

/// A subscription: the receiving end and its drop counter.
pub struct Subscription {
    pub rx: Receiver<Notification>,
    /// Notifications this subscriber lost because its channel was full.
    pub dropped: Arc<AtomicU64>,
}

/// The sink's fan-out to subscribers: one bounded channel each.
#[derive(Default)]
pub struct EventBus {
    subs: Vec<Subscriber>,
    dropped: AtomicU64,
}

impl EventBus {
    /// A new subscriber whose channel holds `capacity` notifications.
    pub fn subscribe(&mut self, capacity: usize) -> Subscription {
        let (tx, rx) = sync_channel(capacity.max(1));
        let dropped = Arc::new(AtomicU64::new(0));
        self.subs.push(Subscriber {
            tx,
            dropped: dropped.clone(),
        });
        Subscription { rx, dropped }
    }

    /// Whether anyone listens (skip building notifications otherwise).
    pub fn active(&self) -> bool {
        !self.subs.is_empty()
    }

    /// Deliver `n` to every subscriber without blocking; disconnected subscribers are removed.
    pub fn publish(&mut self, n: &Notification) {
        let total = &self.dropped;
        self.subs.retain(|s| match s.tx.try_send(n.clone()) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                s.dropped.fetch_add(1, Relaxed);
                total.fetch_add(1, Relaxed);
                true
            }
            Err(TrySendError::Disconnected(_)) => false,
        });
    }

    /// Notifications lost over all subscribers.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Relaxed)
    }

    pub fn subscribers(&self) -> usize {
        self.subs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_record_round_trip() {
        let e = Event {
            seq: 3,
            time_ns: 0x0102030405060708,
            kind: EventKind::QueueOccupancy,
            flow: [10, 0, 0, 1, 10, 0, 0, 2, 4, 210, 0, 80, 6],
            hop: 2,
            node_id: 0xa0b0c0d,
            value: 77,
        };
        let r = e.encode();
        assert_eq!(r[21], 2);
        assert_eq!(&r[0..8], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(Event::decode(&r, 3), Some(e));
        let mut bad = r;
        bad[21] = 9;
        assert_eq!(Event::decode(&bad, 3), None);
        assert_eq!(flow_string(&e.flow), "10.0.0.1:1234-10.0.0.2:80/6");
    }

    #[test]
    fn slow_subscriber_loses_and_counts_fast_one_gets_all_in_order() {
        let mut bus = EventBus::default();
        let slow = bus.subscribe(2);
        let fast = bus.subscribe(100);
        for i in 0..10u64 {
            let mut e = Event::decode(&[0; 32], i).unwrap_or(Event {
                seq: i,
                time_ns: i,
                kind: EventKind::Drop,
                flow: [0; 13],
                hop: HOP_NONE,
                node_id: 0,
                value: 0,
            });
            e.seq = i;
            bus.publish(&Notification::Event(e));
        }
        let got: Vec<u64> = fast
            .rx
            .try_iter()
            .map(|n| match n {
                Notification::Event(e) => e.seq,
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(got, (0..10).collect::<Vec<_>>());
        assert_eq!(slow.rx.try_iter().count(), 2);
        assert_eq!(slow.dropped.load(Relaxed), 8);
        assert_eq!(bus.dropped(), 8);
        drop(fast);
        bus.publish(&Notification::Event(Event {
            seq: 10,
            time_ns: 0,
            kind: EventKind::Drop,
            flow: [0; 13],
            hop: HOP_NONE,
            node_id: 0,
            value: 0,
        }));
        assert_eq!(bus.subscribers(), 1);
    }
}
