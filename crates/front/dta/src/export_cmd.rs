//! `dta export kafka` (Append lists and key snapshots of a collector's regions to Kafka) and
//! `dta export kafka-consume` (read a topic back as JSON lines). The exporter is
//! `dta_export::kafka`; topics and schema: docs/kafka.md.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};

use dta_export::kafka::consumer::read_topic;
use dta_export::kafka::{Compression, ProducerOptions, RecordFormat, DEFAULT_TOPIC_PREFIX};

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
    /// How record values are written: json (one object per record) or protobuf
    /// (length-delimited), the messages of the shipped schemas/dta.proto.
    #[arg(long, default_value_t = RecordFormat::Json)]
    pub format: RecordFormat,
    /// Record batch compression: none, lz4 or zstd.
    #[arg(long, default_value_t = Compression::None)]
    pub compression: Compression,
}

impl KafkaConn {
    pub fn conn(&self) -> dta_node::exports::KafkaConn {
        dta_node::exports::KafkaConn {
            topic_prefix: self.topic_prefix.clone(),
            partitions: self.partitions,
            cluster: self.cluster.clone(),
            max_queue_bytes: self.max_queue_bytes,
            format: self.format,
            compression: self.compression,
        }
    }
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
    /// How often each --snapshot key's value is exported.
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
    /// How often the --cursors file is written (what a restart re-sends at most).
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
    /// Give up after this many seconds without the records asked for.
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
    let brokers = dta_node::exports::split_brokers(&c.brokers)?;
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

fn kafka(a: KafkaArgs, stop: Arc<AtomicBool>) -> anyhow::Result<ExitCode> {
    let e = dta_node::exports::KafkaExport {
        region_dir: a.region_dir,
        brokers: a.brokers,
        conn: a.conn.conn(),
        append: a.append,
        snapshot: a.snapshot,
        snapshot_interval: Duration::from_millis(a.snapshot_interval_ms.max(1)),
        poll: Duration::from_millis(a.poll_ms.max(1)),
        start: match a.start {
            StartAt::Oldest => dta_node::exports::StartAt::Oldest,
            StartAt::Now => dta_node::exports::StartAt::Now,
        },
        cursors: a.cursors,
        checkpoint: Duration::from_millis(a.checkpoint_ms.max(1)),
        duration: a.duration,
    };
    let bar = dta::output::progress(None, "records", false);
    let (summary, flushed) = dta_node::exports::run_kafka(&e, &stop, &|n| bar.set_position(n))?;
    bar.finish_and_clear();
    eprintln!("{}", serde_json::to_string_pretty(&summary)?);
    if let Err(e) = flushed {
        eprintln!("dta export kafka: {e}");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
