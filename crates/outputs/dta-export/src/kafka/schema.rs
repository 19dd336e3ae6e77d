//! The Kafka records' contract: the messages of `schemas/dta.proto`, one Rust type each, and the
//! one function that encodes a record in the operator's [`RecordFormat`]: length-delimited
//! protobuf (as goflow2 writes flow records, as ClickHouse's `Protobuf` format and its Kafka
//! engine read them) or JSON with the same field names (`schemas/json/`, generated from the
//! `.proto` by `scripts/schemas.py`). The types are declared with `prost`'s derive rather than
//! generated at build time, so building needs no `protoc`; `crates/front/dta/tests/kafka_pipeline.rs`
//! reads what this module writes with code protoc generates from the shipped `.proto` and
//! validates every record against the shipped JSON Schemas (`schemas/examples/consume.py`), so
//! the types and the files cannot drift apart.

use std::net::Ipv4Addr;

use dta_int::events::{EvictReason, FlowSummary as IntFlowSummary};
use dta_int::layout::FLOW_KEY_LEN;
use dta_store::AppendRecord;
use serde::Serialize;

/// How a record's value is written, as the operator chooses (`dta export kafka --format`,
/// `dta int-sink --kafka-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordFormat {
    /// One JSON object per record, the `.proto`'s field names (`schemas/json/`).
    #[default]
    Json,
    /// The `.proto` message, length-delimited (a varint length first).
    Protobuf,
}

impl RecordFormat {
    pub const ALL: [RecordFormat; 2] = [RecordFormat::Json, RecordFormat::Protobuf];

    pub fn name(self) -> &'static str {
        match self {
            RecordFormat::Json => "json",
            RecordFormat::Protobuf => "protobuf",
        }
    }

    /// By [`RecordFormat::name`]; an error lists the formats.
    pub fn parse(s: &str) -> Result<RecordFormat, String> {
        RecordFormat::ALL
            .into_iter()
            .find(|f| f.name() == s.trim())
            .ok_or_else(|| format!("unknown record format {s:?}: json or protobuf"))
    }
}

impl std::str::FromStr for RecordFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        RecordFormat::parse(s)
    }
}

impl std::fmt::Display for RecordFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A message of `schemas/dta.proto`: its full name, and both encodings.
pub trait Schema: prost::Message + Serialize + Default + Sized {
    /// The `.proto` message's full name (the `dta.schema` header).
    const NAME: &'static str;

    /// The record's value in `format`.
    fn encode_as(&self, format: RecordFormat) -> Vec<u8> {
        match format {
            RecordFormat::Protobuf => self.encode_length_delimited_to_vec(),
            // Serialising plain structs of numbers, strings and hex cannot fail.
            RecordFormat::Json => serde_json::to_vec(self).unwrap_or_default(),
        }
    }
}

/// Every message a topic may carry, by its [`Schema::NAME`]: decodes a value in `format` back to
/// its JSON form (what `dta export kafka-consume` prints).
pub fn decode_to_json(
    name: &str,
    format: RecordFormat,
    value: &[u8],
) -> Result<serde_json::Value, String> {
    fn one<M: Schema>(format: RecordFormat, value: &[u8]) -> Result<serde_json::Value, String> {
        match format {
            RecordFormat::Json => serde_json::from_slice(value).map_err(|e| e.to_string()),
            RecordFormat::Protobuf => {
                let m = M::decode_length_delimited(value).map_err(|e| e.to_string())?;
                serde_json::to_value(&m).map_err(|e| e.to_string())
            }
        }
    }
    match name {
        IntEvent::NAME => one::<IntEvent>(format, value),
        FlowRecord::NAME => one::<FlowRecord>(format, value),
        AppendEntry::NAME => one::<AppendEntry>(format, value),
        KeySnapshot::NAME => one::<KeySnapshot>(format, value),
        other => Err(format!("unknown schema {other:?}")),
    }
}

fn hex_bytes<S: serde::Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&hex::encode(b))
}

/// The 5-tuple of a 13-byte flow key (src IPv4, dst IPv4, src port, dst port, protocol).
struct FiveTuple {
    src_addr: String,
    dst_addr: String,
    src_port: u32,
    dst_port: u32,
    protocol: u32,
}

impl FiveTuple {
    fn of(k: &[u8; FLOW_KEY_LEN]) -> FiveTuple {
        FiveTuple {
            src_addr: Ipv4Addr::new(k[0], k[1], k[2], k[3]).to_string(),
            dst_addr: Ipv4Addr::new(k[4], k[5], k[6], k[7]).to_string(),
            src_port: u16::from_be_bytes([k[8], k[9]]).into(),
            dst_port: u16::from_be_bytes([k[10], k[11]]).into(),
            protocol: k[12].into(),
        }
    }
}

/// `dta.v1.IntEvent`.
#[derive(Clone, PartialEq, prost::Message, Serialize, serde::Deserialize)]
pub struct IntEvent {
    #[prost(uint64, tag = "1")]
    pub seq: u64,
    #[prost(uint64, tag = "2")]
    pub time_ns: u64,
    #[prost(string, tag = "3")]
    pub kind: String,
    #[prost(string, tag = "4")]
    pub src_addr: String,
    #[prost(string, tag = "5")]
    pub dst_addr: String,
    #[prost(uint32, tag = "6")]
    pub src_port: u32,
    #[prost(uint32, tag = "7")]
    pub dst_port: u32,
    #[prost(uint32, tag = "8")]
    pub protocol: u32,
    #[prost(uint32, tag = "9")]
    pub hop: u32,
    #[prost(uint32, tag = "10")]
    pub node_id: u32,
    #[prost(uint32, tag = "11")]
    pub value: u32,
}

impl Schema for IntEvent {
    const NAME: &'static str = "dta.v1.IntEvent";
}

impl IntEvent {
    pub fn of(e: &dta_int::Event) -> IntEvent {
        let t = FiveTuple::of(&e.flow);
        IntEvent {
            seq: e.seq,
            time_ns: e.time_ns,
            kind: e.kind.name().to_owned(),
            src_addr: t.src_addr,
            dst_addr: t.dst_addr,
            src_port: t.src_port,
            dst_port: t.dst_port,
            protocol: t.protocol,
            hop: e.hop.into(),
            node_id: e.node_id,
            value: e.value,
        }
    }
}

/// `dta.v1.Hop`.
#[derive(Clone, PartialEq, prost::Message, Serialize, serde::Deserialize)]
pub struct Hop {
    #[prost(uint32, optional, tag = "1")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_id: Option<u32>,
    #[prost(uint32, optional, tag = "2")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hop_latency: Option<u32>,
    #[prost(double, optional, tag = "3")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub avg_hop_latency: Option<f64>,
    #[prost(uint32, optional, tag = "4")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_occupancy: Option<u32>,
    #[prost(double, optional, tag = "5")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub avg_queue_occupancy: Option<f64>,
    #[prost(uint32, optional, tag = "6")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub egress_tx_util: Option<u32>,
    #[prost(double, optional, tag = "7")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub avg_egress_tx_util: Option<f64>,
    #[prost(uint32, tag = "8")]
    pub path_changes: u32,
}

/// `dta.v1.FlowRecord`.
#[derive(Clone, PartialEq, prost::Message, Serialize, serde::Deserialize)]
pub struct FlowRecord {
    #[prost(string, tag = "1")]
    pub src_addr: String,
    #[prost(string, tag = "2")]
    pub dst_addr: String,
    #[prost(uint32, tag = "3")]
    pub src_port: u32,
    #[prost(uint32, tag = "4")]
    pub dst_port: u32,
    #[prost(uint32, tag = "5")]
    pub protocol: u32,
    #[prost(uint64, tag = "6")]
    pub packets: u64,
    #[prost(uint64, tag = "7")]
    pub first_ns: u64,
    #[prost(uint64, tag = "8")]
    pub last_ns: u64,
    #[prost(string, tag = "9")]
    pub reason: String,
    #[prost(uint64, tag = "10")]
    pub path_latency_ns: u64,
    #[prost(message, repeated, tag = "11")]
    pub hops: Vec<Hop>,
}

impl Schema for FlowRecord {
    const NAME: &'static str = "dta.v1.FlowRecord";
}

impl FlowRecord {
    pub fn of(r: &dta_int::FlowRecord) -> FlowRecord {
        let t = FiveTuple::of(&r.flow);
        FlowRecord {
            src_addr: t.src_addr,
            dst_addr: t.dst_addr,
            src_port: t.src_port,
            dst_port: t.dst_port,
            protocol: t.protocol,
            packets: r.packets,
            first_ns: r.first_ns,
            last_ns: r.last_ns,
            reason: match r.reason {
                EvictReason::Idle => "idle",
                EvictReason::Capacity => "capacity",
                EvictReason::Flush => "flush",
            }
            .to_owned(),
            // The summary's path latency is the one definition of it.
            path_latency_ns: IntFlowSummary::of(r).path_latency.into(),
            hops: r
                .hops
                .iter()
                .map(|h| Hop {
                    node_id: h.node_id,
                    hop_latency: h.hop_latency,
                    avg_hop_latency: h.avg_hop_latency,
                    queue_occupancy: h.queue_occupancy,
                    avg_queue_occupancy: h.avg_queue_occupancy,
                    egress_tx_util: h.egress_tx_util,
                    avg_egress_tx_util: h.avg_egress_tx_util,
                    path_changes: h.path_changes,
                })
                .collect(),
        }
    }
}

/// `dta.v1.FlowSummary`.
#[derive(Clone, PartialEq, prost::Message, Serialize, serde::Deserialize)]
pub struct FlowSummary {
    #[prost(uint64, tag = "1")]
    pub seq: u64,
    #[prost(uint64, tag = "2")]
    pub last_ns: u64,
    #[prost(string, tag = "3")]
    pub src_addr: String,
    #[prost(string, tag = "4")]
    pub dst_addr: String,
    #[prost(uint32, tag = "5")]
    pub src_port: u32,
    #[prost(uint32, tag = "6")]
    pub dst_port: u32,
    #[prost(uint32, tag = "7")]
    pub protocol: u32,
    #[prost(uint32, tag = "8")]
    pub hops: u32,
    #[prost(uint32, tag = "9")]
    pub packets: u32,
    #[prost(uint32, tag = "10")]
    pub path_latency_ns: u32,
}

impl FlowSummary {
    pub fn of(s: &IntFlowSummary) -> FlowSummary {
        let t = FiveTuple::of(&s.flow);
        FlowSummary {
            seq: s.seq,
            last_ns: s.last_ns,
            src_addr: t.src_addr,
            dst_addr: t.dst_addr,
            src_port: t.src_port,
            dst_port: t.dst_port,
            protocol: t.protocol,
            hops: s.hops.into(),
            packets: s.packets,
            path_latency_ns: s.path_latency,
        }
    }
}

/// `dta.v1.AppendEntry`.
#[derive(Clone, PartialEq, prost::Message, Serialize, serde::Deserialize)]
pub struct AppendEntry {
    #[prost(string, tag = "1")]
    pub store: String,
    #[prost(uint32, tag = "2")]
    pub list: u32,
    #[prost(uint64, tag = "3")]
    pub index: u64,
    #[prost(string, tag = "4")]
    pub record: String,
    #[prost(bytes = "vec", tag = "5")]
    #[serde(serialize_with = "hex_bytes", deserialize_with = "de_hex")]
    pub raw: Vec<u8>,
    #[prost(oneof = "Decoded", tags = "6, 7")]
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub decoded: Option<Decoded>,
}

/// `AppendEntry.decoded`: the entry decoded by its store's record layout.
#[derive(Clone, PartialEq, prost::Oneof, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decoded {
    #[prost(message, tag = "6")]
    Event(IntEvent),
    #[prost(message, tag = "7")]
    FlowSummary(FlowSummary),
}

impl Schema for AppendEntry {
    const NAME: &'static str = "dta.v1.AppendEntry";
}

impl AppendEntry {
    /// The longest a decoded entry (an [`IntEvent`] or a [`FlowSummary`] with every number at its
    /// maximum) encodes to in JSON, the larger format.
    const MAX_DECODED_JSON: usize = 512;

    /// The most bytes an entry of `entry_len` bytes of a store named with `store_len` bytes
    /// encodes to in either format (the store's name escaped at worst six bytes a byte in JSON;
    /// the raw bytes hex; the fixed fields and names): what the exporter reserves per entry.
    pub fn max_encoded_len(store_len: usize, entry_len: usize) -> usize {
        128 + 6 * store_len + 2 * entry_len + Self::MAX_DECODED_JSON
    }

    /// Entry `index` of list `list` of store `store` (record layout `record`), its bytes `raw`,
    /// decoded by the layout (an `int-event` entry that is neither an event nor a flow summary
    /// keeps only its bytes).
    pub fn new(store: &str, list: u32, index: u64, record: AppendRecord, raw: &[u8]) -> Self {
        let decoded = match record {
            AppendRecord::Raw => None,
            AppendRecord::IntEvent => match IntFlowSummary::decode(raw, index) {
                Some(s) => Some(Decoded::FlowSummary(FlowSummary::of(&s))),
                None => {
                    dta_int::Event::decode(raw, index).map(|e| Decoded::Event(IntEvent::of(&e)))
                }
            },
        };
        AppendEntry {
            store: store.to_owned(),
            list,
            index,
            record: record.name().to_owned(),
            raw: raw.to_vec(),
            decoded,
        }
    }
}

/// `dta.v1.Candidate`.
#[derive(Clone, PartialEq, prost::Message, Serialize, serde::Deserialize)]
pub struct Candidate {
    #[prost(bytes = "vec", tag = "1")]
    #[serde(serialize_with = "hex_bytes", deserialize_with = "de_hex")]
    pub data: Vec<u8>,
    #[prost(uint32, tag = "2")]
    pub votes: u32,
}

/// `dta.v1.KeyWriteAnswer`.
#[derive(Clone, PartialEq, prost::Message, Serialize, serde::Deserialize)]
pub struct KeyWriteAnswer {
    #[prost(string, tag = "1")]
    pub status: String,
    #[prost(bytes = "vec", tag = "2")]
    #[serde(serialize_with = "hex_bytes", deserialize_with = "de_hex")]
    pub data: Vec<u8>,
    #[prost(uint32, tag = "3")]
    pub votes: u32,
    #[prost(message, repeated, tag = "4")]
    pub candidates: Vec<Candidate>,
    #[prost(double, tag = "5")]
    pub load: f64,
    #[prost(double, tag = "6")]
    pub p_overwritten: f64,
    #[prost(double, tag = "7")]
    pub p_wrong: f64,
}

/// `dta.v1.KeyIncrementAnswer`.
#[derive(Clone, PartialEq, prost::Message, Serialize, serde::Deserialize)]
pub struct KeyIncrementAnswer {
    #[prost(uint64, tag = "1")]
    pub count: u64,
    #[prost(uint64, tag = "2")]
    pub total: u64,
    #[prost(double, tag = "3")]
    pub epsilon: f64,
    #[prost(uint64, tag = "4")]
    pub error: u64,
    #[prost(double, tag = "5")]
    pub delta: f64,
    #[prost(message, repeated, tag = "6")]
    pub windows: Vec<Window>,
}

/// `dta.v1.Window`.
#[derive(Clone, PartialEq, prost::Message, Serialize, serde::Deserialize)]
pub struct Window {
    #[prost(uint64, tag = "1")]
    pub number: u64,
    #[prost(uint64, tag = "2")]
    pub start_ms: u64,
    #[prost(uint64, tag = "3")]
    pub end_ms: u64,
    #[prost(bool, tag = "4")]
    pub open: bool,
}

/// `KeySnapshot.answer`.
#[derive(Clone, PartialEq, prost::Oneof, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    #[prost(message, tag = "6")]
    KeyWrite(KeyWriteAnswer),
    #[prost(message, tag = "7")]
    KeyIncrement(KeyIncrementAnswer),
}

/// `dta.v1.KeySnapshot`.
#[derive(Clone, PartialEq, prost::Message, Serialize, serde::Deserialize)]
pub struct KeySnapshot {
    #[prost(string, tag = "1")]
    pub store: String,
    #[prost(bytes = "vec", tag = "2")]
    #[serde(serialize_with = "hex_bytes", deserialize_with = "de_hex")]
    pub key: Vec<u8>,
    #[prost(int64, tag = "3")]
    pub ts_ms: i64,
    #[prost(uint32, tag = "4")]
    pub redundancy: u32,
    #[prost(oneof = "Answer", tags = "6, 7")]
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub answer: Option<Answer>,
}

impl Schema for KeySnapshot {
    const NAME: &'static str = "dta.v1.KeySnapshot";
}

impl KeySnapshot {
    /// A Key-Write answer (`dta_collector::query::key_write`) read at `ts_ms`.
    pub fn key_write(r: &dta_collector::query::KeyWriteResult, key: &[u8], ts_ms: i64) -> Self {
        let unhex = |s: &str| hex::decode(s).unwrap_or_default();
        KeySnapshot {
            store: r.store.clone(),
            key: key.to_vec(),
            ts_ms,
            redundancy: r.redundancy.into(),
            answer: Some(Answer::KeyWrite(KeyWriteAnswer {
                status: r.status.to_owned(),
                data: r.data.as_deref().map(unhex).unwrap_or_default(),
                votes: r.votes.into(),
                candidates: r
                    .candidates
                    .iter()
                    .map(|(d, v)| Candidate {
                        data: unhex(d),
                        votes: (*v).into(),
                    })
                    .collect(),
                load: r.confidence.load,
                p_overwritten: r.confidence.p_overwritten,
                p_wrong: r.confidence.p_wrong,
            })),
        }
    }

    /// A Key-Increment answer (`dta_collector::query::key_increment`) read at `ts_ms`.
    pub fn key_increment(
        r: &dta_collector::query::KeyIncrementResult,
        key: &[u8],
        ts_ms: i64,
    ) -> Self {
        KeySnapshot {
            store: r.store.clone(),
            key: key.to_vec(),
            ts_ms,
            redundancy: r.redundancy.into(),
            answer: Some(Answer::KeyIncrement(KeyIncrementAnswer {
                count: r.count,
                total: r.bound.total,
                epsilon: r.bound.epsilon,
                error: r.bound.error,
                delta: r.bound.delta,
                windows: r
                    .windows
                    .iter()
                    .flatten()
                    .map(|w| Window {
                        number: w.number,
                        start_ms: w.start_ms,
                        end_ms: w.end_ms,
                        open: w.open,
                    })
                    .collect(),
            })),
        }
    }
}

fn de_hex<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    let s = <String as serde::Deserialize>::deserialize(d)?;
    hex::decode(s).map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event() -> dta_int::Event {
        dta_int::Event {
            seq: 7,
            time_ns: 1_700_000_000_000_000_000,
            kind: dta_int::EventKind::HopLatency,
            flow: [10, 0, 0, 1, 10, 0, 0, 2, 0x1f, 0x90, 0, 80, 6],
            hop: 2,
            node_id: 301,
            value: 250_000,
        }
    }

    #[test]
    fn both_formats_carry_the_same_fields_and_decode_back() {
        let e = IntEvent::of(&event());
        assert_eq!((e.src_addr.as_str(), e.src_port), ("10.0.0.1", 8080));
        assert_eq!(
            (e.dst_addr.as_str(), e.dst_port, e.protocol),
            ("10.0.0.2", 80, 6)
        );
        let json = decode_to_json(
            IntEvent::NAME,
            RecordFormat::Json,
            &e.encode_as(RecordFormat::Json),
        );
        let pb = decode_to_json(
            IntEvent::NAME,
            RecordFormat::Protobuf,
            &e.encode_as(RecordFormat::Protobuf),
        );
        assert_eq!(json.unwrap(), pb.unwrap());
        // Length-delimited: the first byte is the message's length.
        let v = e.encode_as(RecordFormat::Protobuf);
        assert_eq!(v[0] as usize, v.len() - 1);
    }

    #[test]
    fn the_reserved_length_bounds_every_entry() {
        let max_event = dta_int::Event {
            seq: u64::MAX,
            time_ns: u64::MAX,
            kind: dta_int::EventKind::QueueOccupancy,
            flow: [255; 13],
            hop: 254,
            node_id: u32::MAX,
            value: u32::MAX,
        };
        let max_summary = IntFlowSummary {
            seq: u64::MAX,
            last_ns: u64::MAX,
            flow: [255; 13],
            hops: u8::MAX,
            packets: u32::MAX,
            path_latency: u32::MAX,
        };
        let store = "\u{1}\"x".repeat(10);
        for raw in [max_event.encode(), max_summary.encode(), [0xff; 32]] {
            let e = AppendEntry::new(&store, u32::MAX, u64::MAX, AppendRecord::IntEvent, &raw);
            for f in RecordFormat::ALL {
                let len = e.encode_as(f).len();
                assert!(
                    len <= AppendEntry::max_encoded_len(store.len(), raw.len()),
                    "{f}: {len}"
                );
            }
            if let Some(d) = &e.decoded {
                assert!(serde_json::to_vec(d).unwrap().len() <= AppendEntry::MAX_DECODED_JSON);
            }
        }
    }

    #[test]
    fn append_entries_are_decoded_by_their_store_layout() {
        let raw = event().encode();
        let e = AppendEntry::new("events", 0, 3, AppendRecord::IntEvent, &raw);
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["record"], "int-event");
        assert_eq!(v["event"]["kind"], "hop_latency");
        assert_eq!(v["event"]["seq"], 3);
        assert_eq!(v["raw"], hex::encode(raw));
        let back = <AppendEntry as prost::Message>::decode_length_delimited(
            &e.encode_as(RecordFormat::Protobuf)[..],
        )
        .unwrap();
        assert_eq!(back, e);
        let r = AppendEntry::new("log", 1, 0, AppendRecord::Raw, b"abc");
        let v = serde_json::to_value(&r).unwrap();
        assert!(
            v.get("event").is_none() && v.get("flow_summary").is_none(),
            "{v}"
        );
        assert!(decode_to_json("dta.v1.Nope", RecordFormat::Json, b"{}").is_err());
    }
}
