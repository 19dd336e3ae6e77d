//! `dta export kafka` (Append lists and key snapshots of a collector's regions to Kafka) and
//! `dta export kafka-consume` (read a topic back as JSON lines). The exporter is
//! `dta_export::kafka`; topics and schema: docs/kafka.md.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::{Args, Subcommand, ValueEnum};

use dta_collector::{query, Collector};
use dta_export::kafka::consumer::read_topic;
use dta_export::kafka::source::{AppendSource, SnapshotSource, Start};
use dta_export::kafka::{
    cluster_partitioner, now_ms, HashPartitioner, KafkaProducer, Partitioner, ProducerOptions,
    TopicKind, DEFAULT_TOPIC_PREFIX,
};
use dta_store::StoreKind;

#[derive(Args)]
pub struct ExportArgs {
    #[command(subcommand)]
    cmd: ExportCmd,
}

#[derive(Subcommand)]
enum ExportCmd {
    /// Export Append lists (every new entry) and snapshots of chosen keys to Kafka, at least
    /// once, until interrupted.
    Kafka(KafkaArgs),
    /// Print every record of a topic (all partitions, oldest first) as JSON lines.
    KafkaConsume(ConsumeArgs),
}

/// The Kafka connection options `dta export kafka` and `dta int-sink --kafka` share.
#[derive(Args, Clone)]
pub struct KafkaConn {
    /// Topic prefix: topics are PREFIX.append, PREFIX.events, PREFIX.flows, PREFIX.snapshots.
    #[arg(long, default_value = DEFAULT_TOPIC_PREFIX)]
    pub topic_prefix: String,
    /// Partitions of each topic, one per collector (records go to their owner's partition by a
    /// hash of the key); with --cluster, the map's collectors decide.
    #[arg(long, default_value_t = 1, conflicts_with = "cluster")]
    pub partitions: u32,
    /// Cluster map (TOML, docs/scale-out.md): one partition per collector, each record in the
    /// partition of the collector owning it.
    #[arg(long, value_name = "FILE")]
    pub cluster: Option<PathBuf>,
    /// Most bytes waiting for the broker's acknowledgement; past it records are dropped
    /// (counted).
    #[arg(long, default_value_t = ProducerOptions::DEFAULT_MAX_QUEUE_BYTES)]
    pub max_queue_bytes: usize,
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
        let p = KafkaProducer::start(opts).map_err(anyhow::Error::msg)?;
        Ok((p, partitioner))
    }
}

fn split_brokers(s: &str) -> anyhow::Result<Vec<String>> {
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

#[derive(Copy, Clone, ValueEnum)]
enum StartAt {
    /// The oldest entry each list still holds.
    Oldest,
    /// Only entries appended from now on.
    Now,
}

#[derive(Args)]
struct KafkaArgs {
    /// The collector's region directory (read only).
    #[arg(long)]
    region_dir: PathBuf,
    /// Bootstrap brokers, HOST:PORT[,HOST:PORT...].
    #[arg(long)]
    brokers: String,
    #[command(flatten)]
    conn: KafkaConn,
    /// Append stores to export (repeat); default: every Append store in the directory.
    #[arg(long = "append", value_name = "STORE")]
    append: Vec<String>,
    /// A key whose value is exported every --snapshot-interval-ms: STORE=KEY (a Key-Write or
    /// Key-Increment store; KEY as `dta query` takes it: 0xHEX, decimal, IPv4, 5-tuple).
    #[arg(long = "snapshot", value_name = "STORE=KEY")]
    snapshot: Vec<String>,
    #[arg(long, default_value_t = 1000)]
    snapshot_interval_ms: u64,
    /// How often the Append lists are polled.
    #[arg(long, default_value_t = 10)]
    poll_ms: u64,
    /// Where a list's export starts when --cursors has no position for it.
    #[arg(long, value_enum, default_value = "oldest")]
    start: StartAt,
    /// Keep each list's position in FILE (JSON), written once what precedes it was
    /// acknowledged, and resume from it: a restarted exporter re-sends at most one checkpoint
    /// interval of entries.
    #[arg(long, value_name = "FILE")]
    cursors: Option<PathBuf>,
    #[arg(long, default_value_t = 1000)]
    checkpoint_ms: u64,
    /// Stop after this many seconds (default: until interrupted).
    #[arg(long)]
    duration: Option<f64>,
}

#[derive(Args)]
struct ConsumeArgs {
    /// Bootstrap brokers, HOST:PORT[,HOST:PORT...].
    #[arg(long)]
    brokers: String,
    /// The topic, e.g. dta.append.
    #[arg(long)]
    topic: String,
    /// Most records read (more is an error).
    #[arg(long, default_value_t = 10_000_000)]
    max: usize,
    #[arg(long, default_value_t = 30)]
    timeout_s: u64,
}

pub fn run(
    a: ExportArgs,
    stop: impl FnOnce() -> anyhow::Result<Arc<AtomicBool>>,
) -> anyhow::Result<ExitCode> {
    match a.cmd {
        ExportCmd::Kafka(k) => kafka(k, stop()?),
        ExportCmd::KafkaConsume(c) => consume(c),
    }
}

fn consume(c: ConsumeArgs) -> anyhow::Result<ExitCode> {
    let brokers = split_brokers(&c.brokers)?;
    let records = read_topic(&brokers, &c.topic, c.max, Duration::from_secs(c.timeout_s))?;
    let out = std::io::stdout();
    let mut out = std::io::BufWriter::new(out.lock());
    for r in &records {
        serde_json::to_writer(&mut out, &r.to_json())?;
        writeln!(out)?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
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

fn kafka(a: KafkaArgs, stop: Arc<AtomicBool>) -> anyhow::Result<ExitCode> {
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
            )
            .map_err(anyhow::Error::msg)?,
        );
    }
    let mut snapshots = SnapshotSource::new(&a.conn.topic_prefix);
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
    let poll = Duration::from_millis(a.poll_ms.max(1));
    let snap_every = Duration::from_millis(a.snapshot_interval_ms.max(1));
    let checkpoint_every = Duration::from_millis(a.checkpoint_ms.max(1));
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
        if !snapshots.is_empty() && (done || last_snap.elapsed() >= snap_every) {
            snapshots.poll(&producer, ts).map_err(anyhow::Error::msg)?;
            last_snap = Instant::now();
        }
        if let Some(path) = &a.cursors {
            if done || last_checkpoint.elapsed() >= checkpoint_every {
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
    eprintln!(
        "{}",
        serde_json::to_string_pretty(&serde_json::json!({
            "kafka": stats,
            "append": append_totals,
            "snapshots": {"exported": snapshots.exported, "dropped": snapshots.dropped},
        }))?
    );
    if let Err(e) = flushed {
        eprintln!("dta export kafka: {e}");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
