//! The delivery thread: at-least-once delivery of [`Message`]s to Kafka with counted retries and
//! bounded memory.
//!
//! Senders ([`KafkaProducer::send`]) queue a message if its bytes fit in `max_queue_bytes`, else
//! it is refused and counted as dropped. The thread keeps one queue per (topic, partition) and
//! produces a batch (up to `batch_records` / `batch_bytes`) when it is full or its oldest message
//! waited `linger`. A batch leaves its queue only when the broker acknowledged it
//! (`acks = all`); a failed produce drops the connection, waits (exponential backoff up to
//! `max_backoff`), reconnects and sends the same batch again, first in its partition, so order
//! within a partition is kept and a broker restart loses nothing. A batch the broker wrote but
//! whose acknowledgement was lost is written twice: delivery is at least once, and consumers
//! drop duplicates by the record's identity (docs/kafka.md).

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rskafka::client::error::{Error as KafkaError, ProtocolError};
use rskafka::client::partition::{
    Compression as WireCompression, PartitionClient, UnknownTopicHandling,
};
use rskafka::client::{Client, ClientBuilder};
use rskafka::record::Record as KafkaRecord;
use rskafka::BackoffConfig;

/// One record to deliver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub topic: String,
    pub partition: i32,
    pub key: Option<Vec<u8>>,
    pub value: Vec<u8>,
    /// Record headers (names from [`super::header`]).
    pub headers: Vec<(&'static str, Vec<u8>)>,
    /// Milliseconds since the Unix epoch.
    pub timestamp_ms: i64,
}

impl Message {
    /// Bytes this message holds while queued (what `max_queue_bytes` bounds).
    pub fn size(&self) -> usize {
        const OVERHEAD: usize = 64;
        OVERHEAD
            + self.topic.len()
            + self.key.as_ref().map_or(0, Vec::len)
            + self.value.len()
            + self
                .headers
                .iter()
                .map(|(k, v)| k.len() + v.len())
                .sum::<usize>()
    }

    fn record(&self) -> KafkaRecord {
        KafkaRecord {
            key: self.key.clone(),
            value: Some(self.value.clone()),
            headers: self
                .headers
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect(),
            timestamp: rskafka::chrono::DateTime::from_timestamp_millis(self.timestamp_ms)
                .unwrap_or_default(),
        }
    }
}

/// How record batches are compressed on the wire (Kafka record batch compression; the consumer's
/// client decompresses). The client library also has gzip and snappy; these two are the ones
/// worth their CPU for small telemetry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Compression {
    #[default]
    None,
    Lz4,
    Zstd,
}

impl Compression {
    pub const ALL: [Compression; 3] = [Compression::None, Compression::Lz4, Compression::Zstd];

    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }

    /// By [`Compression::name`]; an error lists the choices.
    pub fn parse(s: &str) -> Result<Compression, String> {
        Compression::ALL
            .into_iter()
            .find(|c| c.name() == s.trim())
            .ok_or_else(|| format!("unknown compression {s:?}: none, lz4 or zstd"))
    }

    fn wire(self) -> WireCompression {
        match self {
            Compression::None => WireCompression::NoCompression,
            Compression::Lz4 => WireCompression::Lz4,
            Compression::Zstd => WireCompression::Zstd,
        }
    }
}

impl std::str::FromStr for Compression {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Compression::parse(s)
    }
}

impl std::fmt::Display for Compression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Delivery settings. Defaults: [`ProducerOptions::new`].
#[derive(Debug, Clone)]
pub struct ProducerOptions {
    /// Bootstrap brokers, `host:port`.
    pub brokers: Vec<String>,
    /// Topics to create if missing, each with `partitions` partitions (replication 1 on a
    /// single broker; more brokers: create the topics yourself).
    pub topics: Vec<String>,
    /// Partitions of a created topic (the number of collectors).
    pub partitions: u32,
    /// Most bytes queued (sent but not yet acknowledged); past it, sends are refused (dropped).
    pub max_queue_bytes: usize,
    /// Most records in one produce request.
    pub batch_records: usize,
    /// Most bytes in one produce request.
    pub batch_bytes: usize,
    /// How long a queued message may wait for its batch to fill.
    pub linger: Duration,
    /// How long one connect or produce may take before it counts as failed.
    pub request_timeout: Duration,
    /// First wait after a failure; doubled after each further failure up to `max_backoff`.
    pub backoff: Duration,
    pub max_backoff: Duration,
    /// Record batch compression.
    pub compression: Compression,
}

impl ProducerOptions {
    pub const DEFAULT_MAX_QUEUE_BYTES: usize = 64 << 20;
    pub const DEFAULT_BATCH_RECORDS: usize = 1000;
    pub const DEFAULT_BATCH_BYTES: usize = 1 << 20;
    pub const DEFAULT_LINGER: Duration = Duration::from_millis(20);
    pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
    pub const DEFAULT_BACKOFF: Duration = Duration::from_millis(100);
    pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(2);

    pub fn new(brokers: Vec<String>) -> ProducerOptions {
        ProducerOptions {
            brokers,
            topics: vec![],
            partitions: 1,
            max_queue_bytes: Self::DEFAULT_MAX_QUEUE_BYTES,
            batch_records: Self::DEFAULT_BATCH_RECORDS,
            batch_bytes: Self::DEFAULT_BATCH_BYTES,
            linger: Self::DEFAULT_LINGER,
            request_timeout: Self::DEFAULT_REQUEST_TIMEOUT,
            backoff: Self::DEFAULT_BACKOFF,
            max_backoff: Self::DEFAULT_MAX_BACKOFF,
            compression: Compression::None,
        }
    }

    /// Refuse settings that cannot work, with the reason.
    pub fn validate(&self) -> Result<(), String> {
        if self.brokers.is_empty() {
            return Err("no brokers given".into());
        }
        if self.partitions == 0 || self.partitions > i32::MAX as u32 {
            return Err(format!("partitions {} is not 1..=2^31-1", self.partitions));
        }
        if self.batch_records == 0 || self.batch_bytes == 0 {
            return Err("batch_records and batch_bytes must be at least 1".into());
        }
        if self.max_queue_bytes < self.batch_bytes {
            return Err(format!(
                "max_queue_bytes {} is below batch_bytes {}",
                self.max_queue_bytes, self.batch_bytes
            ));
        }
        Ok(())
    }
}

/// What the delivery did (single writer per counter, read at any time).
#[derive(Debug, Default)]
pub struct KafkaStats {
    /// Messages accepted into the queue.
    pub queued: AtomicU64,
    /// Messages the broker acknowledged, each once (a batch re-sent after a failed attempt the
    /// broker had written anyway is stored twice, but counted here once).
    pub delivered: AtomicU64,
    /// Messages refused because the queue was full (`max_queue_bytes`).
    pub dropped: AtomicU64,
    /// Messages still queued when the producer was closed past its deadline.
    pub abandoned: AtomicU64,
    /// Produce requests acknowledged.
    pub batches: AtomicU64,
    /// Produce requests that failed and were sent again.
    pub retries: AtomicU64,
    /// Connections made and found usable (the first one included).
    pub connects: AtomicU64,
    /// Connection attempts that failed, or found a topic with too few partitions.
    pub connect_errors: AtomicU64,
    /// Bytes queued now (gauge).
    pub queued_bytes: AtomicU64,
}

/// A copy of [`KafkaStats`] at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct StatsSnapshot {
    pub queued: u64,
    pub delivered: u64,
    pub dropped: u64,
    pub abandoned: u64,
    pub batches: u64,
    pub retries: u64,
    pub connects: u64,
    pub connect_errors: u64,
    pub queued_bytes: u64,
}

impl KafkaStats {
    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            queued: self.queued.load(Relaxed),
            delivered: self.delivered.load(Relaxed),
            dropped: self.dropped.load(Relaxed),
            abandoned: self.abandoned.load(Relaxed),
            batches: self.batches.load(Relaxed),
            retries: self.retries.load(Relaxed),
            connects: self.connects.load(Relaxed),
            connect_errors: self.connect_errors.load(Relaxed),
            queued_bytes: self.queued_bytes.load(Relaxed),
        }
    }
}

/// Why a message was not queued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    #[error("the Kafka queue is full ({queued} of {max} bytes); message dropped")]
    QueueFull { queued: u64, max: usize },
    #[error("the Kafka producer is closed")]
    Closed,
}

/// Why [`KafkaProducer::flush`] returned before everything was acknowledged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{pending} messages still unacknowledged after {waited:?} (broker unreachable?)")]
pub struct FlushTimeout {
    pub pending: u64,
    pub waited: Duration,
}

enum Cmd {
    Send(Message),
    /// Send everything queued now, without waiting for `linger`.
    Flush,
}

/// The handle: queue messages, wait for their delivery, read the counters.
pub struct KafkaProducer {
    tx: Option<Sender<Cmd>>,
    stats: Arc<KafkaStats>,
    max_queue_bytes: usize,
    /// Set by `close`: how long the thread may still try to deliver.
    close_deadline: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl KafkaProducer {
    /// Start the delivery thread; it connects in the background (and again after failures), so a
    /// broker down now is no error.
    pub fn start(opts: ProducerOptions) -> Result<KafkaProducer, String> {
        opts.validate()?;
        let stats = Arc::new(KafkaStats::default());
        let (tx, rx) = mpsc::channel();
        let close_deadline = Arc::new(AtomicU64::new(u64::MAX));
        let max_queue_bytes = opts.max_queue_bytes;
        let st = stats.clone();
        let cd = close_deadline.clone();
        let thread = std::thread::Builder::new()
            .name("dta-kafka".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a current-thread tokio runtime");
                rt.block_on(Delivery::new(opts, st, cd).run(rx));
            })
            .map_err(|e| format!("spawning the Kafka thread: {e}"))?;
        Ok(KafkaProducer {
            tx: Some(tx),
            stats,
            max_queue_bytes,
            close_deadline,
            thread: Some(thread),
        })
    }

    /// Queue `m` for delivery, or refuse it (counted as dropped) when the queue is full.
    pub fn send(&self, m: Message) -> Result<(), SendError> {
        let size = m.size() as u64;
        let tx = self.tx.as_ref().ok_or(SendError::Closed)?;
        let max = self.max_queue_bytes as u64;
        if let Err(queued) = self
            .stats
            .queued_bytes
            .fetch_update(Relaxed, Relaxed, |q| (q + size <= max).then_some(q + size))
        {
            self.stats.dropped.fetch_add(1, Relaxed);
            return Err(SendError::QueueFull {
                queued,
                max: self.max_queue_bytes,
            });
        }
        self.stats.queued.fetch_add(1, Relaxed);
        tx.send(Cmd::Send(m)).map_err(|_| {
            self.stats.queued_bytes.fetch_sub(size, Relaxed);
            self.stats.queued.fetch_sub(1, Relaxed);
            SendError::Closed
        })
    }

    /// Bytes that can still be queued.
    pub fn room(&self) -> usize {
        self.max_queue_bytes
            .saturating_sub(self.stats.queued_bytes.load(Relaxed) as usize)
    }

    /// Messages queued but not yet acknowledged.
    pub fn pending(&self) -> u64 {
        let s = &self.stats;
        s.queued
            .load(Relaxed)
            .saturating_sub(s.delivered.load(Relaxed) + s.abandoned.load(Relaxed))
    }

    /// Wait until everything queued so far was acknowledged, or `timeout`.
    pub fn flush(&self, timeout: Duration) -> Result<(), FlushTimeout> {
        let start = Instant::now();
        if let Some(tx) = &self.tx {
            let _ = tx.send(Cmd::Flush);
        }
        loop {
            let pending = self.pending();
            if pending == 0 {
                return Ok(());
            }
            if start.elapsed() >= timeout {
                return Err(FlushTimeout {
                    pending,
                    waited: start.elapsed(),
                });
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    pub fn stats(&self) -> &Arc<KafkaStats> {
        &self.stats
    }

    /// Deliver what is queued, trying for at most `timeout`, then stop; what is left is counted
    /// as abandoned. Returns the final counters.
    pub fn close(mut self, timeout: Duration) -> StatsSnapshot {
        self.shutdown(timeout);
        self.stats.snapshot()
    }

    fn shutdown(&mut self, timeout: Duration) {
        let deadline_ms = epoch_ms().saturating_add(timeout.as_millis() as u64);
        self.close_deadline.store(deadline_ms, Relaxed);
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for KafkaProducer {
    fn drop(&mut self) {
        self.shutdown(Duration::ZERO);
    }
}

fn epoch_ms() -> u64 {
    super::now_ms().max(0) as u64
}

/// The delivery thread's state.
struct Delivery {
    opts: ProducerOptions,
    stats: Arc<KafkaStats>,
    close_deadline: Arc<AtomicU64>,
    client: Option<Client>,
    partitions: BTreeMap<(String, i32), PartitionClient>,
    queues: BTreeMap<(String, i32), Queue>,
    /// Consecutive failures, for the backoff.
    failures: u32,
    flush: bool,
}

#[derive(Default)]
struct Queue {
    msgs: VecDeque<Message>,
    bytes: usize,
    /// When the oldest queued message arrived.
    since: Option<Instant>,
}

impl Delivery {
    fn new(opts: ProducerOptions, stats: Arc<KafkaStats>, close_deadline: Arc<AtomicU64>) -> Self {
        Delivery {
            opts,
            stats,
            close_deadline,
            client: None,
            partitions: BTreeMap::new(),
            queues: BTreeMap::new(),
            failures: 0,
            flush: false,
        }
    }

    fn pending(&self) -> bool {
        self.queues.values().any(|q| !q.msgs.is_empty())
    }

    async fn run(mut self, rx: Receiver<Cmd>) {
        let mut open = true;
        loop {
            if open {
                open = self.receive(&rx);
            }
            if !open {
                self.flush = true;
                if !self.pending() {
                    return;
                }
                if epoch_ms() >= self.close_deadline.load(Relaxed) {
                    self.abandon();
                    return;
                }
            }
            if let Err(e) = self.send_due().await {
                self.failures += 1;
                tracing::warn!("kafka: {e}; reconnecting");
                self.client = None;
                self.partitions.clear();
                let wait = self
                    .opts
                    .backoff
                    .saturating_mul(1 << self.failures.min(16).saturating_sub(1))
                    .min(self.opts.max_backoff);
                // Keep draining the channel while waiting, so senders see the queue's bytes.
                let until = Instant::now() + wait;
                while open && Instant::now() < until {
                    open = self.receive_for(&rx, until.saturating_duration_since(Instant::now()));
                }
                if !open {
                    let left = self.close_deadline.load(Relaxed).saturating_sub(epoch_ms());
                    tokio::time::sleep(wait.min(Duration::from_millis(left))).await;
                }
            }
        }
    }

    /// Take what the channel holds, waiting up to `linger` for the first; false once closed.
    fn receive(&mut self, rx: &Receiver<Cmd>) -> bool {
        let wait = if self.pending() {
            let oldest = self.queues.values().filter_map(|q| q.since).min();
            oldest.map_or(self.opts.linger, |t| {
                self.opts.linger.saturating_sub(t.elapsed())
            })
        } else {
            self.opts.linger
        };
        self.receive_for(rx, wait)
    }

    fn receive_for(&mut self, rx: &Receiver<Cmd>, wait: Duration) -> bool {
        match rx.recv_timeout(wait) {
            Ok(c) => self.take(c),
            Err(RecvTimeoutError::Timeout) => return true,
            Err(RecvTimeoutError::Disconnected) => return false,
        }
        // Bounded: at most one batch's worth per call, so produce keeps up.
        for _ in 0..self.opts.batch_records {
            match rx.try_recv() {
                Ok(c) => self.take(c),
                Err(mpsc::TryRecvError::Empty) => break,
                Err(mpsc::TryRecvError::Disconnected) => return false,
            }
        }
        true
    }

    fn take(&mut self, c: Cmd) {
        match c {
            Cmd::Send(m) => {
                let q = self
                    .queues
                    .entry((m.topic.clone(), m.partition))
                    .or_default();
                q.since.get_or_insert_with(Instant::now);
                q.bytes += m.size();
                q.msgs.push_back(m);
            }
            Cmd::Flush => self.flush = true,
        }
    }

    fn abandon(&mut self) {
        for q in self.queues.values_mut() {
            self.stats.abandoned.fetch_add(q.msgs.len() as u64, Relaxed);
            self.stats.queued_bytes.fetch_sub(q.bytes as u64, Relaxed);
            *q = Queue::default();
        }
    }

    async fn connect(&mut self) -> Result<(), String> {
        if self.client.is_some() {
            return Ok(());
        }
        let backoff = BackoffConfig {
            init_backoff: Duration::from_millis(20),
            max_backoff: Duration::from_millis(500),
            base: 2.0,
            deadline: Some(self.opts.request_timeout),
        };
        let built = tokio::time::timeout(
            self.opts.request_timeout,
            ClientBuilder::new(self.opts.brokers.clone())
                .client_id("dta-export")
                .backoff_config(backoff)
                .build(),
        )
        .await;
        let client = match built {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => {
                self.stats.connect_errors.fetch_add(1, Relaxed);
                return Err(format!("connecting to {:?}: {e}", self.opts.brokers));
            }
            Err(_) => {
                self.stats.connect_errors.fetch_add(1, Relaxed);
                return Err(format!(
                    "connecting to {:?}: no answer in {:?}",
                    self.opts.brokers, self.opts.request_timeout
                ));
            }
        };
        match self.prepare_topics(&client).await {
            Ok(()) => {
                self.stats.connects.fetch_add(1, Relaxed);
                self.client = Some(client);
                Ok(())
            }
            Err(e) => {
                self.stats.connect_errors.fetch_add(1, Relaxed);
                Err(e)
            }
        }
    }

    /// Create the topics that are missing and check every one has a partition per collector.
    async fn prepare_topics(&self, client: &Client) -> Result<(), String> {
        let ctl = client
            .controller_client()
            .map_err(|e| format!("controller client: {e}"))?;
        for t in &self.opts.topics {
            match ctl
                .create_topic(
                    t,
                    self.opts.partitions as i32,
                    1,
                    self.opts.request_timeout.as_millis() as i32,
                )
                .await
            {
                Ok(()) => {}
                Err(KafkaError::ServerError {
                    protocol_error: ProtocolError::TopicAlreadyExists,
                    ..
                }) => {}
                Err(e) => return Err(format!("creating topic {t}: {e}")),
            }
        }
        // A topic created earlier with fewer partitions than collectors would refuse the
        // records of the missing ones forever: say so on every attempt.
        let listed = client
            .list_topics()
            .await
            .map_err(|e| format!("listing topics: {e}"))?;
        for t in &self.opts.topics {
            let have = listed
                .iter()
                .find(|l| &l.name == t)
                .map_or(0, |l| l.partitions.len());
            if have < self.opts.partitions as usize {
                return Err(format!(
                    "topic {t} has {have} partitions, {} needed (one per collector): add them \
                     with kafka-topics.sh --alter --partitions {}",
                    self.opts.partitions, self.opts.partitions
                ));
            }
        }
        Ok(())
    }

    /// Produce every batch that is due; the first failure stops the round.
    async fn send_due(&mut self) -> Result<(), String> {
        let due: Vec<(String, i32)> = self
            .queues
            .iter()
            .filter(|(_, q)| {
                !q.msgs.is_empty()
                    && (self.flush
                        || q.msgs.len() >= self.opts.batch_records
                        || q.bytes >= self.opts.batch_bytes
                        || q.since.is_some_and(|t| t.elapsed() >= self.opts.linger))
            })
            .map(|(k, _)| k.clone())
            .collect();
        if due.is_empty() {
            self.flush = false;
            return Ok(());
        }
        self.connect().await?;
        for k in due {
            // Everything queued for this partition, batch after batch.
            while self.queues.get(&k).is_some_and(|q| !q.msgs.is_empty()) {
                self.produce_one(&k).await?;
            }
        }
        self.flush = false;
        Ok(())
    }

    async fn produce_one(&mut self, k: &(String, i32)) -> Result<(), String> {
        if !self.partitions.contains_key(k) {
            let client = self.client.as_ref().expect("connected");
            let pc = tokio::time::timeout(
                self.opts.request_timeout,
                client.partition_client(k.0.clone(), k.1, UnknownTopicHandling::Retry),
            )
            .await
            .map_err(|_| {
                format!(
                    "{}/{}: no leader in {:?}",
                    k.0, k.1, self.opts.request_timeout
                )
            })?
            .map_err(|e| format!("{}/{}: {e}", k.0, k.1))?;
            self.partitions.insert(k.clone(), pc);
        }
        let q = self.queues.get(k).expect("due queue");
        let mut n = 0;
        let mut bytes = 0;
        let mut records = Vec::new();
        for m in &q.msgs {
            if n > 0 && (n >= self.opts.batch_records || bytes + m.size() > self.opts.batch_bytes) {
                break;
            }
            n += 1;
            bytes += m.size();
            records.push(m.record());
        }
        let pc = &self.partitions[k];
        let sent = tokio::time::timeout(
            self.opts.request_timeout,
            pc.produce(records, self.opts.compression.wire()),
        )
        .await;
        match sent {
            Ok(Ok(_offsets)) => {}
            Ok(Err(e)) => {
                self.stats.retries.fetch_add(1, Relaxed);
                return Err(format!("producing {n} records to {}/{}: {e}", k.0, k.1));
            }
            Err(_) => {
                self.stats.retries.fetch_add(1, Relaxed);
                return Err(format!(
                    "producing {n} records to {}/{}: no acknowledgement in {:?}",
                    k.0, k.1, self.opts.request_timeout
                ));
            }
        }
        let q = self.queues.get_mut(k).expect("due queue");
        q.msgs.drain(..n);
        q.bytes -= bytes;
        q.since = if q.msgs.is_empty() {
            None
        } else {
            Some(Instant::now())
        };
        self.stats.queued_bytes.fetch_sub(bytes as u64, Relaxed);
        self.stats.delivered.fetch_add(n as u64, Relaxed);
        self.stats.batches.fetch_add(1, Relaxed);
        self.failures = 0;
        Ok(())
    }
}
