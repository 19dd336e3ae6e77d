//! The INT sink: in-band network telemetry turned into DTA primitives ([DTA]
//! Table 2) and aggregated per flow as the SmartNIC INT sink of [INT-NIC §III] does. INT-MD
//! frames and telemetry reports (parsed by `dta_int_wire`) update a fixed-capacity
//! [`FlowCache`] (packet count, first/last update, latest and average per-hop switch id, hop
//! latency, queue occupancy and egress utilisation) with aging; threshold and change events,
//! with thresholds retunable at run time, reach subscribers in order over bounded channels; and
//! every packet becomes DTA reports applied by an in-process `dta_translator::Translator`: the
//! path trace a Key-Write under the 13-byte flow key, hop latencies Postcarding, events Append
//! records, per-switch per-metric histograms Key-Increment counters. [`query`] answers "path of
//! flow X", "hop latency of flow X at hop i", "latest events", "histogram of a metric at switch
//! S" from those stores; [`gen`] is a deterministic INT traffic generator ([INT-NIC §IV]). Layouts:
//! `docs/int-sink.md`.

pub mod cache;
pub mod delta;
pub mod events;
pub mod fast;
pub mod gen;
pub mod group;
pub mod layout;
pub mod query;
pub use query::scan;
pub mod shard;
pub mod sink;
pub mod steer;

pub use cache::FlowCache;
pub use events::{
    flow_string, Event, EventBus, EventKind, EvictReason, FlowRecord, FlowSummary, HopRecord,
    Notification, Subscription, ThresholdConfig, Thresholds,
};
pub use group::SinkGroup;
pub use layout::{Buckets, Metric};
pub use shard::shard_of;
pub use sink::{IntSink, IntSinkConfig, IntStats, IntStatsSnapshot, SourceReject};
