//! What the Kafka exporter reads from the stores: every new entry of the Append lists, and
//! snapshots of chosen Key-Write / Key-Increment keys, each as its `schemas/dta.proto` message.

use std::sync::Arc;

use dta_collector::query;
use dta_store::append::{AppendLayout, ListReader};
use dta_store::{AppendRecord, Region, StoreKind};

use super::schema::{AppendEntry, KeySnapshot, RecordFormat, Schema};
use super::{header, schema_headers, KafkaProducer, Message, OwnerKey, Partitioner, TopicKind};

/// Where a new [`AppendSource`] starts reading each list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    /// The oldest entry each list still holds.
    Oldest,
    /// Only entries appended from now on.
    Now,
    /// At these absolute indices, one per list (e.g. [`AppendSource::cursors`] saved before a
    /// restart).
    At(Vec<u64>),
}

/// What one [`AppendSource::poll`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct AppendPoll {
    /// Entries queued for Kafka.
    pub exported: u64,
    /// Entries overwritten in the ring before they could be read (the writer lapped the
    /// exporter: it fell `capacity` entries behind, e.g. while the broker was down that long).
    pub missed: u64,
    /// Lists not read this time because the producer's queue had no room; their entries stay in
    /// the ring until the next poll.
    pub deferred: u64,
}

/// Exports an Append store: one reader per list, each keeping its own position, so every entry
/// is sent once (then at least once to the broker) in list order.
pub struct AppendSource {
    store: String,
    region: Arc<Region>,
    layout: AppendLayout,
    record: AppendRecord,
    format: RecordFormat,
    readers: Vec<ListReader>,
    partitions: Vec<i32>,
    topic: String,
    buf: Vec<u8>,
    /// Totals over all polls.
    pub total: AppendPoll,
}

impl AppendSource {
    /// Most entries one poll reads from one list.
    pub const MAX_PER_LIST: usize = 4096;

    /// A source over the Append store `store` in `region`, writing `dta.v1.AppendEntry` records
    /// in `format` to `{prefix}.append`.
    pub fn new(
        store: &str,
        region: Arc<Region>,
        prefix: &str,
        partitioner: &dyn Partitioner,
        start: Start,
        format: RecordFormat,
    ) -> Result<AppendSource, String> {
        if region.header().kind != StoreKind::Append {
            return Err(format!(
                "store {store} is {:?}, not an Append store",
                region.header().kind
            ));
        }
        let layout = AppendLayout::new(region.header()).map_err(|e| format!("{store}: {e}"))?;
        let record = region.header().append_record();
        let lists = layout.lists();
        if let Start::At(c) = &start {
            if c.len() != lists as usize {
                return Err(format!(
                    "store {store}: {} cursors given for {lists} lists",
                    c.len()
                ));
            }
        }
        let mut readers = Vec::with_capacity(lists as usize);
        let mut partitions = Vec::with_capacity(lists as usize);
        for l in 0..lists {
            let r =
                ListReader::new(layout.clone(), l, 0, 1).map_err(|e| format!("{store}: {e}"))?;
            let head = region
                .mem()
                .load_u64(layout.head_offset(l))
                .map_err(|e| format!("{store}: list {l}: {e}"))?;
            let tail = match &start {
                Start::Oldest => head.saturating_sub(layout.capacity()),
                Start::Now => head,
                Start::At(c) => c[l as usize],
            };
            readers.push(r.with_tail(tail));
            partitions.push(partitioner.partition(store, OwnerKey::List(l))? as i32);
        }
        Ok(AppendSource {
            store: store.to_owned(),
            region,
            layout,
            record,
            format,
            readers,
            partitions,
            topic: TopicKind::Append.topic(prefix),
            buf: Vec::new(),
            total: AppendPoll::default(),
        })
    }

    /// The next index each list's reader will export, list 0 first.
    pub fn cursors(&self) -> Vec<u64> {
        self.readers.iter().map(ListReader::tail).collect()
    }

    /// Queue every list's new entries (up to [`Self::MAX_PER_LIST`] each) for Kafka. A list is
    /// read only when the producer has room for all it may read, so nothing read is dropped.
    pub fn poll(&mut self, producer: &KafkaProducer, timestamp_ms: i64) -> AppendPoll {
        let e = self.layout.entry_len();
        let mut p = AppendPoll::default();
        // The largest message one entry can make: its value, key, headers and topic.
        let per_entry =
            AppendEntry::max_encoded_len(self.store.len(), e) + 3 * self.store.len() + 256;
        for (reader, &partition) in self.readers.iter_mut().zip(&self.partitions) {
            let need = Self::MAX_PER_LIST * (per_entry + self.topic.len());
            if producer.room() < need {
                p.deferred += 1;
                continue;
            }
            self.buf.clear();
            let list = reader.list();
            let r = reader.poll(self.region.mem(), Self::MAX_PER_LIST, &mut self.buf);
            p.missed += r.missed;
            // Indices returned are consecutive, ending just before the new tail.
            let first = reader.tail() - r.entries as u64;
            for (i, entry) in self.buf.chunks_exact(e).enumerate() {
                let index = first + i as u64;
                let value = AppendEntry::new(&self.store, list, index, self.record, entry)
                    .encode_as(self.format);
                let mut headers = vec![
                    (header::STORE, self.store.as_bytes().to_vec()),
                    (header::LIST, list.to_be_bytes().to_vec()),
                    (header::INDEX, index.to_be_bytes().to_vec()),
                ];
                headers.extend(schema_headers::<AppendEntry>(self.format));
                let m = Message {
                    topic: self.topic.clone(),
                    partition,
                    key: Some(format!("{}/{list}", self.store).into_bytes()),
                    value,
                    headers,
                    timestamp_ms,
                };
                // Room was checked above for the whole poll; a refusal is counted by the
                // producer as dropped.
                if producer.send(m).is_ok() {
                    p.exported += 1;
                }
            }
        }
        self.total.exported += p.exported;
        self.total.missed += p.missed;
        self.total.deferred += p.deferred;
        p
    }
}

/// One key whose value is exported periodically.
#[derive(Debug, Clone)]
struct SnapshotKey {
    store: String,
    region: Arc<Region>,
    key: Vec<u8>,
    partition: i32,
}

/// Exports the current value of chosen Key-Write / Key-Increment keys on every
/// [`SnapshotSource::poll`] (the caller's period), to `{prefix}.snapshots`: the answer a
/// `dta query` of the key gives, as a `dta.v1.KeySnapshot` in the source's format.
pub struct SnapshotSource {
    keys: Vec<SnapshotKey>,
    topic: String,
    format: RecordFormat,
    /// Snapshots queued, and refused because the queue was full, over all polls.
    pub exported: u64,
    pub dropped: u64,
}

impl SnapshotSource {
    pub fn new(prefix: &str, format: RecordFormat) -> SnapshotSource {
        SnapshotSource {
            keys: vec![],
            topic: TopicKind::Snapshots.topic(prefix),
            format,
            exported: 0,
            dropped: 0,
        }
    }

    /// Add `key` of store `store` (a Key-Write or Key-Increment store of the key's length).
    pub fn add(
        &mut self,
        store: &str,
        region: Arc<Region>,
        key: Vec<u8>,
        partitioner: &dyn Partitioner,
    ) -> Result<(), String> {
        let h = region.header();
        if !matches!(h.kind, StoreKind::KeyWrite | StoreKind::KeyIncrement) {
            return Err(format!(
                "store {store} is {:?}: snapshots take Key-Write or Key-Increment stores",
                h.kind
            ));
        }
        if let Some(len) = query::key_len(h) {
            if key.len() != len {
                return Err(format!(
                    "store {store} has {len}-byte keys, {} given ({})",
                    key.len(),
                    hex::encode(&key)
                ));
            }
        }
        let partition = partitioner.partition(store, OwnerKey::Bytes(&key))? as i32;
        self.keys.push(SnapshotKey {
            store: store.to_owned(),
            region,
            key,
            partition,
        });
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Query every key now and queue the answers.
    pub fn poll(&mut self, producer: &KafkaProducer, timestamp_ms: i64) -> Result<(), String> {
        for k in &self.keys {
            let value = snapshot(k, timestamp_ms)?.encode_as(self.format);
            let mut headers = vec![(header::STORE, k.store.as_bytes().to_vec())];
            headers.extend(schema_headers::<KeySnapshot>(self.format));
            let m = Message {
                topic: self.topic.clone(),
                partition: k.partition,
                key: Some(format!("{}/{}", k.store, hex::encode(&k.key)).into_bytes()),
                value,
                headers,
                timestamp_ms,
            };
            match producer.send(m) {
                Ok(()) => self.exported += 1,
                Err(_) => self.dropped += 1,
            }
        }
        Ok(())
    }
}

fn snapshot(k: &SnapshotKey, timestamp_ms: i64) -> Result<KeySnapshot, String> {
    let err = |e: query::QueryError| format!("{}/{}: {e}", k.store, hex::encode(&k.key));
    Ok(match k.region.header().kind {
        StoreKind::KeyWrite => KeySnapshot::key_write(
            &query::key_write(&k.region, &k.key, None, 1).map_err(err)?,
            &k.key,
            timestamp_ms,
        ),
        StoreKind::KeyIncrement => KeySnapshot::key_increment(
            &query::key_increment(&k.region, &k.key, None).map_err(err)?,
            &k.key,
            timestamp_ms,
        ),
        other => return Err(format!("{}: {other:?} has no key snapshots", k.store)),
    })
}
