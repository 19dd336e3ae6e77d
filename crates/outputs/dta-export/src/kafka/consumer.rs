//! Reading a topic back: every partition from the oldest record held up to the end (the high
//! watermark at the time of reading). What `dta export kafka-consume` prints and what the tests
//! compare with what was written.

use std::collections::BTreeMap;
use std::time::Duration;

use rskafka::client::partition::{OffsetAt, UnknownTopicHandling};
use rskafka::client::ClientBuilder;
use rskafka::BackoffConfig;

use super::header;
use super::schema::{decode_to_json, RecordFormat};

/// One record read back.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Consumed {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub value: Vec<u8>,
    pub headers: BTreeMap<String, Vec<u8>>,
    pub timestamp_ms: i64,
}

impl Consumed {
    /// An Append record's (store, list, index), from its headers; `None` when any is missing or
    /// malformed.
    pub fn append_id(&self) -> Option<(String, u32, u64)> {
        let store = String::from_utf8(self.headers.get(header::STORE)?.clone()).ok()?;
        let list = u32::from_be_bytes(self.headers.get(header::LIST)?.as_slice().try_into().ok()?);
        let index = u64::from_be_bytes(
            self.headers
                .get(header::INDEX)?
                .as_slice()
                .try_into()
                .ok()?,
        );
        Some((store, list, index))
    }

    /// The record as one JSON object for printing: key and headers as UTF-8 when they are,
    /// else hex; the value decoded by its `dta.schema` and `dta.format` headers (protobuf or
    /// JSON alike) into the schema's JSON form.
    pub fn to_json(&self) -> serde_json::Value {
        let text = |b: &[u8]| match std::str::from_utf8(b) {
            Ok(s) if !s.chars().any(char::is_control) => serde_json::Value::from(s),
            _ => serde_json::Value::from(format!("0x{}", hex::encode(b))),
        };
        // A value is decoded by the schema and format its headers name (every record dta
        // writes carries them); anything else is shown as text or hex.
        let schema = self
            .headers
            .get(header::SCHEMA)
            .map(|b| String::from_utf8_lossy(b));
        let format = self
            .headers
            .get(header::FORMAT)
            .and_then(|b| RecordFormat::parse(&String::from_utf8_lossy(b)).ok());
        let value = match (schema, format) {
            (Some(name), Some(format)) => decode_to_json(&name, format, &self.value)
                .unwrap_or_else(
                    |e| serde_json::json!({ "undecodable": e, "bytes": hex::encode(&self.value) }),
                ),
            _ => serde_json::from_slice(&self.value)
                .unwrap_or_else(|_| serde_json::Value::from(hex::encode(&self.value))),
        };
        let mut headers = serde_json::Map::new();
        for (k, v) in &self.headers {
            let v = match (k.as_str(), v.len()) {
                (header::LIST, 4) => u32::from_be_bytes(v[..].try_into().unwrap()).into(),
                (header::INDEX, 8) => u64::from_be_bytes(v[..].try_into().unwrap()).into(),
                _ => text(v),
            };
            headers.insert(k.clone(), v);
        }
        serde_json::json!({
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
            "timestamp_ms": self.timestamp_ms,
            "key": self.key.as_deref().map(text),
            "headers": headers,
            "value": value,
        })
    }
}

/// Why a topic could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ConsumeError {
    #[error("connecting to {brokers:?}: {source}")]
    Connect {
        brokers: Vec<String>,
        source: rskafka::client::error::Error,
    },
    #[error("topic {0} does not exist")]
    NoTopic(String),
    #[error("reading {topic}/{partition}: {source}")]
    Read {
        topic: String,
        partition: i32,
        source: rskafka::client::error::Error,
    },
    #[error("reading {topic}: more than {max} records (raise --max)")]
    TooMany { topic: String, max: usize },
    #[error("starting the Kafka client's runtime: {0}")]
    Runtime(std::io::Error),
}

/// Every record of `topic` (all partitions, partition 0 first, each in offset order), at most
/// `max` (more is an error: memory is bounded).
pub fn read_topic(
    brokers: &[String],
    topic: &str,
    max: usize,
    timeout: Duration,
) -> Result<Vec<Consumed>, ConsumeError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ConsumeError::Runtime)?;
    rt.block_on(read_topic_async(brokers, topic, max, timeout))
}

async fn read_topic_async(
    brokers: &[String],
    topic: &str,
    max: usize,
    timeout: Duration,
) -> Result<Vec<Consumed>, ConsumeError> {
    let backoff = BackoffConfig {
        init_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(500),
        base: 2.0,
        deadline: Some(timeout),
    };
    let client = ClientBuilder::new(brokers.to_vec())
        .client_id("dta-export-consumer")
        .backoff_config(backoff)
        .build()
        .await
        .map_err(|source| ConsumeError::Connect {
            brokers: brokers.to_vec(),
            source,
        })?;
    let topics = client
        .list_topics()
        .await
        .map_err(|source| ConsumeError::Connect {
            brokers: brokers.to_vec(),
            source,
        })?;
    let partitions = topics
        .into_iter()
        .find(|t| t.name == topic)
        .ok_or_else(|| ConsumeError::NoTopic(topic.to_owned()))?
        .partitions;
    let mut out = Vec::new();
    for p in partitions {
        let read_err = |source| ConsumeError::Read {
            topic: topic.to_owned(),
            partition: p,
            source,
        };
        let pc = client
            .partition_client(topic, p, UnknownTopicHandling::Retry)
            .await
            .map_err(read_err)?;
        let mut offset = pc.get_offset(OffsetAt::Earliest).await.map_err(read_err)?;
        let end = pc.get_offset(OffsetAt::Latest).await.map_err(read_err)?;
        while offset < end {
            let (records, _hw) = pc
                .fetch_records(offset, 1..4_000_000, 500)
                .await
                .map_err(read_err)?;
            if records.is_empty() {
                break;
            }
            for r in records {
                if r.offset < offset {
                    continue;
                }
                offset = r.offset + 1;
                if out.len() >= max {
                    return Err(ConsumeError::TooMany {
                        topic: topic.to_owned(),
                        max,
                    });
                }
                out.push(Consumed {
                    topic: topic.to_owned(),
                    partition: p,
                    offset: r.offset,
                    key: r.record.key,
                    value: r.record.value.unwrap_or_default(),
                    headers: r.record.headers,
                    timestamp_ms: r.record.timestamp.timestamp_millis(),
                });
            }
        }
    }
    Ok(out)
}
