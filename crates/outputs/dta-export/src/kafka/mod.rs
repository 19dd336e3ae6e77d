//! Export to Apache Kafka, where operators already run their telemetry pipelines: Append lists
//! (every new entry of every list, each list's position kept by its own reader), INT events and
//! flow records, and periodic snapshots of chosen Key-Write / Key-Increment keys ([DTA §4]
//! primitives; [DTA-draft §6]: Key-Write data ages out and must be warehoused for long-term
//! accountability). Every record is a message of `schemas/dta.proto` ([`schema`]), written as
//! length-delimited protobuf or JSON as the operator chooses; `docs/kafka.md` describes the topics.
//!
//! - [`producer`]: the delivery thread. At least once: a batch stays queued until the broker
//!   acknowledged it; a failed batch is re-sent (counted as a retry) over a new connection
//!   (counted), so a broker restart loses nothing but may duplicate. Memory is bounded in bytes;
//!   what does not fit is refused and counted as dropped ([`KafkaStats`]).
//! - [`source`]: what is exported: [`source::AppendSource`] (Append lists),
//!   [`source::SnapshotSource`] (keys), [`notification_message`] (INT events and flow records).
//! - [`consumer`]: reads a topic back (every partition, from the oldest record held).
//! - [`Partitioner`]: a topic has one partition per collector, and a record goes to the
//!   partition of the collector that owns its key, so a topic's partitions follow the
//!   collectors.

pub mod consumer;
pub mod producer;
pub mod schema;
pub mod source;

pub use producer::{Compression, KafkaProducer, KafkaStats, Message, ProducerOptions, SendError};
pub use schema::{RecordFormat, Schema};

use dta_int::Notification;

/// Default topic prefix: topics are `{prefix}.append`, `{prefix}.events`, `{prefix}.flows`,
/// `{prefix}.snapshots`.
pub const DEFAULT_TOPIC_PREFIX: &str = "dta";

/// The topics the exporter writes, one per kind of data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TopicKind {
    /// Append entries (`dta.v1.AppendEntry`).
    Append,
    /// INT events (`dta.v1.IntEvent`).
    Events,
    /// INT flow records (`dta.v1.FlowRecord`).
    Flows,
    /// Key-Write / Key-Increment key snapshots (`dta.v1.KeySnapshot`).
    Snapshots,
}

impl TopicKind {
    pub const ALL: [TopicKind; 4] = [
        TopicKind::Append,
        TopicKind::Events,
        TopicKind::Flows,
        TopicKind::Snapshots,
    ];

    /// The suffix after the prefix.
    pub fn suffix(self) -> &'static str {
        match self {
            TopicKind::Append => "append",
            TopicKind::Events => "events",
            TopicKind::Flows => "flows",
            TopicKind::Snapshots => "snapshots",
        }
    }

    /// `{prefix}.{suffix}`.
    pub fn topic(self, prefix: &str) -> String {
        format!("{prefix}.{}", self.suffix())
    }
}

/// Record header names (docs/kafka.md).
pub mod header {
    /// The store's name (UTF-8).
    pub const STORE: &str = "dta.store";
    /// An Append entry's list id, u32 big-endian.
    pub const LIST: &str = "dta.list";
    /// An Append entry's absolute index in its list (0, 1, ...), u64 big-endian: with the store
    /// and list it identifies the entry, so a consumer can drop the duplicates at-least-once
    /// delivery may bring.
    pub const INDEX: &str = "dta.index";
    /// The value's message of `schemas/dta.proto`, e.g. `dta.v1.IntEvent`.
    pub const SCHEMA: &str = "dta.schema";
    /// How the value is written: `json` or `protobuf` ([`super::RecordFormat`]).
    pub const FORMAT: &str = "dta.format";
}

/// The headers every record carries: its schema and format.
pub fn schema_headers<M: Schema>(format: RecordFormat) -> [(&'static str, Vec<u8>); 2] {
    [
        (header::SCHEMA, M::NAME.as_bytes().to_vec()),
        (header::FORMAT, format.name().as_bytes().to_vec()),
    ]
}

/// What decides the owning collector of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnerKey<'a> {
    /// A Key-Write / Key-Increment / Postcarding key (INT flows: the 13-byte flow key).
    Bytes(&'a [u8]),
    /// An Append list id.
    List(u32),
}

/// Maps a record to its topic partition: the index of the collector owning it
/// ([`dta_cluster::ClusterMap`]; [`HashPartitioner`] without a map).
pub trait Partitioner: Send + Sync {
    /// Partitions of every topic (the number of collectors).
    fn partitions(&self) -> u32;
    /// The partition of `key` of store `store`, or why it has none.
    fn partition(&self, store: &str, key: OwnerKey<'_>) -> Result<u32, String>;
}

/// Without a cluster map: `partitions` partitions, keys by CRC-32, lists by id, modulo
/// `partitions`. With one partition (one collector) everything goes to partition 0.
#[derive(Debug, Clone, Copy)]
pub struct HashPartitioner {
    partitions: u32,
}

impl HashPartitioner {
    /// `partitions` ≥ 1.
    pub fn new(partitions: u32) -> Result<HashPartitioner, String> {
        if partitions == 0 || partitions > i32::MAX as u32 {
            return Err(format!(
                "partitions must be 1..={}, not {partitions}",
                i32::MAX
            ));
        }
        Ok(HashPartitioner { partitions })
    }
}

impl Partitioner for HashPartitioner {
    fn partitions(&self) -> u32 {
        self.partitions
    }
    fn partition(&self, _store: &str, key: OwnerKey<'_>) -> Result<u32, String> {
        Ok(match key {
            OwnerKey::Bytes(k) => crc32fast::hash(k) % self.partitions,
            OwnerKey::List(l) => l % self.partitions,
        })
    }
}

/// With a cluster map (`dta-cluster`): one partition per collector of the map, in the map's
/// order; a record goes to the partition of the collector owning it (Key-Write / Key-Increment
/// keys by rendezvous hashing, Append lists by the store's table). A store the map lacks, or a
/// list no table assigns, is an error.
impl Partitioner for dta_cluster::ClusterMap {
    fn partitions(&self) -> u32 {
        self.collectors.len() as u32
    }
    fn partition(&self, store: &str, key: OwnerKey<'_>) -> Result<u32, String> {
        let key = match key {
            OwnerKey::Bytes(b) => dta_cluster::Key::Bytes(b),
            OwnerKey::List(l) => dta_cluster::Key::List(l),
        };
        self.owner_index(store, key)
            .map(|i| i as u32)
            .map_err(|e| e.to_string())
    }
}

/// The partitioner of the cluster map in `path` (validated as `dta cluster check` does).
pub fn cluster_partitioner(path: &std::path::Path) -> Result<dta_cluster::ClusterMap, String> {
    dta_cluster::ClusterMap::load(path).map_err(|e| format!("cluster map {}: {e}", path.display()))
}

/// How INT notifications are routed: by the owner of their flow key in `flow_store` (the store
/// the INT sink writes flows into, e.g. its Key-Write `paths`), else by hash.
pub struct NotificationRoute<'a> {
    pub partitioner: &'a dyn Partitioner,
    pub flow_store: &'a str,
}

/// The Kafka message of an INT event (topic `{prefix}.events`, `dta.v1.IntEvent`) or flow record
/// (`{prefix}.flows`, `dta.v1.FlowRecord`) in `format`: key the 13-byte flow key, partition the
/// flow's owner.
pub fn notification_message(
    n: &Notification,
    prefix: &str,
    route: &NotificationRoute<'_>,
    format: RecordFormat,
    timestamp_ms: i64,
) -> Result<Message, String> {
    let (kind, flow, value, headers) = match n {
        Notification::Event(e) => (
            TopicKind::Events,
            e.flow,
            schema::IntEvent::of(e).encode_as(format),
            schema_headers::<schema::IntEvent>(format),
        ),
        Notification::Flow(f) => (
            TopicKind::Flows,
            f.flow,
            schema::FlowRecord::of(f).encode_as(format),
            schema_headers::<schema::FlowRecord>(format),
        ),
    };
    let partition = route
        .partitioner
        .partition(route.flow_store, OwnerKey::Bytes(&flow))?;
    Ok(Message {
        topic: kind.topic(prefix),
        partition: partition as i32,
        key: Some(flow.to_vec()),
        value,
        headers: headers.to_vec(),
        timestamp_ms,
    })
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_partitioner_spreads_lists_and_keys_within_range() {
        let p = HashPartitioner::new(3).unwrap();
        assert_eq!(p.partition("s", OwnerKey::List(4)).unwrap(), 1);
        let mut seen = [0u32; 3];
        for i in 0u32..300 {
            let part = p.partition("s", OwnerKey::Bytes(&i.to_be_bytes())).unwrap();
            seen[part as usize] += 1;
        }
        assert!(seen.iter().all(|&c| c > 50), "{seen:?}");
        assert!(HashPartitioner::new(0).is_err());
    }

    #[test]
    fn an_event_is_keyed_by_its_flow_with_its_five_tuple_as_fields() {
        let e = dta_int::Event {
            seq: 7,
            time_ns: 1,
            kind: dta_int::EventKind::HopLatency,
            flow: [9; 13],
            hop: 2,
            node_id: 301,
            value: 250,
        };
        let p = HashPartitioner::new(2).unwrap();
        let route = NotificationRoute {
            partitioner: &p,
            flow_store: "paths",
        };
        let m = notification_message(&Notification::Event(e), "t", &route, RecordFormat::Json, 5)
            .unwrap();
        assert_eq!(m.topic, "t.events");
        assert_eq!(m.key.as_deref(), Some(&[9u8; 13][..]));
        assert_eq!(
            m.partition as u32,
            p.partition("paths", OwnerKey::Bytes(&[9; 13])).unwrap()
        );
        let v: serde_json::Value = serde_json::from_slice(&m.value).unwrap();
        assert_eq!(v["kind"], "hop_latency");
        assert_eq!(v["seq"], 7);
        assert_eq!(v["node_id"], 301);
        assert_eq!(
            (v["src_addr"].as_str(), v["protocol"].as_u64()),
            (Some("9.9.9.9"), Some(9))
        );
        let h: std::collections::BTreeMap<_, _> = m.headers.iter().cloned().collect();
        assert_eq!(h[header::SCHEMA], b"dta.v1.IntEvent");
        assert_eq!(h[header::FORMAT], b"json");
        let pb = notification_message(
            &Notification::Event(e),
            "t",
            &route,
            RecordFormat::Protobuf,
            5,
        )
        .unwrap();
        let back =
            schema::decode_to_json(schema::IntEvent::NAME, RecordFormat::Protobuf, &pb.value);
        assert_eq!(back.unwrap(), v);
    }
}
