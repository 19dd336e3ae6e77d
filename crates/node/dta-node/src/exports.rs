//! The exporters as services: Kafka from a collector's regions (`dta export kafka`: Append lists
//! and key snapshots, at least once, with resumable cursors) and the INT sink's export targets
//! (Redis, InfluxDB line protocol, Kafka). The exporters themselves are `dta_export`'s.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use dta_collector::{query, Collector};
use dta_export::kafka::source::{AppendSource, SnapshotSource, Start};
use dta_export::kafka::{
    cluster_partitioner, now_ms, Compression, HashPartitioner, KafkaProducer, Partitioner,
    ProducerOptions, RecordFormat, TopicKind,
};
use dta_store::StoreKind;

/// How records reach Kafka: topics, partitions, the queue bound.
#[derive(Debug, Clone)]
pub struct KafkaConn {
    /// Topics are PREFIX.append, PREFIX.events, PREFIX.flows, PREFIX.snapshots.
    pub topic_prefix: String,
    /// Partitions of each topic (ignored with `cluster`).
    pub partitions: u32,
    /// A cluster map: one partition per collector, each record in its owner's.
    pub cluster: Option<PathBuf>,
    /// Most bytes waiting for the broker's acknowledgement; past it records are dropped.
    pub max_queue_bytes: usize,
    /// How record values are written (`schemas/dta.proto` messages as protobuf or JSON).
    pub format: RecordFormat,
    /// Record batch compression.
    pub compression: Compression,
}

impl KafkaConn {
    pub fn producer(&self, brokers: &str) -> anyhow::Result<(KafkaProducer, Arc<dyn Partitioner>)> {
        let partitioner: Arc<dyn Partitioner> = match &self.cluster {
            Some(path) => Arc::new(cluster_partitioner(path).map_err(anyhow::Error::msg)?),
            None => Arc::new(HashPartitioner::new(self.partitions).map_err(anyhow::Error::msg)?),
        };
        let mut opts = ProducerOptions::new(split_brokers(brokers)?);
        opts.topics = TopicKind::ALL
            .iter()
            .map(|k| k.topic(&self.topic_prefix))
            .collect();
        opts.partitions = partitioner.partitions();
        opts.max_queue_bytes = self.max_queue_bytes;
        opts.compression = self.compression;
        let p = KafkaProducer::start(opts).map_err(anyhow::Error::msg)?;
        Ok((p, partitioner))
    }
}

/// `HOST:PORT[,HOST:PORT...]` as a list; an empty list or a broker without a port is an error.
pub fn split_brokers(s: &str) -> anyhow::Result<Vec<String>> {
    let v: Vec<String> = s
        .split(',')
        .map(str::trim)
        .filter(|b| !b.is_empty())
        .map(str::to_owned)
        .collect();
    if v.is_empty() {
        bail!("--brokers: no broker given (HOST:PORT[,HOST:PORT...])");
    }
    for b in &v {
        if !b.contains(':') {
            bail!("--brokers: {b:?} is not HOST:PORT");
        }
    }
    Ok(v)
}

/// Where a list's export starts when the cursors file has no position for it.
#[derive(Debug, Clone, Copy)]
pub enum StartAt {
    Oldest,
    Now,
}

/// What `dta export kafka` exports, and how often.
#[derive(Debug, Clone)]
pub struct KafkaExport {
    pub region_dir: PathBuf,
    pub brokers: String,
    pub conn: KafkaConn,
    /// Append stores to export; empty: every Append store of the directory.
    pub append: Vec<String>,
    /// `STORE=KEY` snapshots.
    pub snapshot: Vec<String>,
    pub snapshot_interval: Duration,
    pub poll: Duration,
    pub start: StartAt,
    pub cursors: Option<PathBuf>,
    pub checkpoint: Duration,
    pub duration: Option<f64>,
}

type Cursors = BTreeMap<String, Vec<u64>>;

fn load_cursors(path: &Path) -> anyhow::Result<Cursors> {
    match std::fs::read_to_string(path) {
        Ok(t) => serde_json::from_str(&t).with_context(|| format!("parsing {}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Cursors::new()),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

fn save_cursors(path: &Path, c: &Cursors) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(c)?)
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))
}

/// Export until `stop` (or the duration); the summary, and whether everything queued was
/// acknowledged at the end (an error says why not).
pub fn run_kafka(
    a: &KafkaExport,
    stop: &AtomicBool,
    progress: &dyn Fn(u64),
) -> anyhow::Result<(serde_json::Value, anyhow::Result<()>)> {
    let collector = Collector::open_dir(&a.region_dir, false)
        .with_context(|| format!("opening {}", a.region_dir.display()))?;
    let (producer, partitioner) = a.conn.producer(&a.brokers)?;
    let saved = match &a.cursors {
        Some(p) => load_cursors(p)?,
        None => Cursors::new(),
    };
    let append: Vec<String> = if a.append.is_empty() {
        collector
            .stores()
            .iter()
            .filter(|s| s.region.header().kind == StoreKind::Append)
            .map(|s| s.name.clone())
            .collect()
    } else {
        a.append.clone()
    };
    let mut sources = Vec::new();
    for name in &append {
        let store = collector.store(name)?;
        let start = match (saved.get(name), a.start) {
            (Some(c), _) => Start::At(c.clone()),
            (None, StartAt::Oldest) => Start::Oldest,
            (None, StartAt::Now) => Start::Now,
        };
        sources.push(
            AppendSource::new(
                name,
                store.region.clone(),
                &a.conn.topic_prefix,
                &*partitioner,
                start,
                a.conn.format,
            )
            .map_err(anyhow::Error::msg)?,
        );
    }
    let mut snapshots = SnapshotSource::new(&a.conn.topic_prefix, a.conn.format);
    for s in &a.snapshot {
        let (name, key) = s
            .split_once('=')
            .with_context(|| format!("--snapshot {s}: expected STORE=KEY"))?;
        let store = collector.store(name)?;
        let key = query::parse_key(key, query::key_len(store.region.header()))
            .with_context(|| format!("--snapshot {s}"))?;
        snapshots
            .add(name, store.region.clone(), key, &*partitioner)
            .map_err(anyhow::Error::msg)?;
    }
    if sources.is_empty() && snapshots.is_empty() {
        bail!(
            "nothing to export: no Append store in {} and no --snapshot",
            a.region_dir.display()
        );
    }
    eprintln!(
        "exporting {} Append store(s) and {} key snapshot(s) to {} (topics {}.*)",
        sources.len(),
        snapshots.len(),
        a.brokers,
        a.conn.topic_prefix
    );
    let deadline = a
        .duration
        .map(|d| Instant::now() + Duration::from_secs_f64(d.max(0.0)));
    let poll = a.poll.max(Duration::from_millis(1));
    let (mut last_snap, mut last_checkpoint) = (Instant::now(), Instant::now());
    let cursors_of = |sources: &[AppendSource]| -> Cursors {
        append
            .iter()
            .cloned()
            .zip(sources.iter().map(AppendSource::cursors))
            .collect()
    };
    loop {
        let done = stop.load(Ordering::Relaxed) || deadline.is_some_and(|d| Instant::now() >= d);
        let ts = now_ms();
        for s in &mut sources {
            s.poll(&producer, ts);
        }
        if !snapshots.is_empty() && (done || last_snap.elapsed() >= a.snapshot_interval) {
            snapshots.poll(&producer, ts).map_err(anyhow::Error::msg)?;
            last_snap = Instant::now();
        }
        if let Some(path) = &a.cursors {
            if done || last_checkpoint.elapsed() >= a.checkpoint {
                // Positions are saved only once everything before them was acknowledged.
                let c = cursors_of(&sources);
                if producer
                    .flush(ProducerOptions::DEFAULT_REQUEST_TIMEOUT)
                    .is_ok()
                {
                    save_cursors(path, &c)?;
                }
                last_checkpoint = Instant::now();
            }
        }
        progress(sources.iter().map(|s| s.total.exported).sum::<u64>() + snapshots.exported);
        if done {
            break;
        }
        std::thread::sleep(poll);
    }
    let flushed = producer.flush(Duration::from_secs(30));
    let stats = producer.close(Duration::ZERO);
    let append_totals: BTreeMap<&str, _> = append
        .iter()
        .map(String::as_str)
        .zip(sources.iter().map(|s| s.total))
        .collect();
    let summary = serde_json::json!({
        "kafka": stats,
        "append": append_totals,
        "snapshots": {"exported": snapshots.exported, "dropped": snapshots.dropped},
    });
    Ok((summary, flushed.map_err(|e| anyhow::anyhow!("{e}"))))
}
