//! The options of `dta int-sink` (the service is `dta_node::int_sink`) and `dta query int ...`
//! (path, hop latency, events, histogram: `dta_int::query`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::bail;
use clap::{Args, Subcommand};

use dta_collector::Collector;
use dta_int::{query, Buckets, EventKind, Metric};
use dta_node::config::IntSinkFile;

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct IntSinkArgs {
    #[command(subcommand)]
    cmd: Option<IntSinkCmd>,
    /// Configuration (TOML): region_dir, listen, [sink], [translator], [[store]].
    #[arg(short, long, required = true)]
    config: Option<PathBuf>,
    /// Write every flow record (a flow leaving the FlowCache: aged, evicted or flushed at the
    /// stop) as a JSON line to FILE.
    #[arg(long, value_name = "FILE")]
    records: Option<PathBuf>,
    /// Stop after this many seconds.
    #[arg(long)]
    duration: Option<f64>,
    /// Print events and flow records as JSON lines on stdout.
    #[arg(long)]
    events: bool,
    /// Serve Prometheus metrics (translator, INT sink, exports) at http://ADDR/metrics: PORT
    /// (on 127.0.0.1) or IP:PORT; a non-loopback IP needs a token (DTA_HTTP_TOKEN_FILE or
    /// DTA_HTTP_TOKEN).
    #[arg(long, value_parser = dta_http::parse_listen_addr)]
    metrics: Option<std::net::SocketAddr>,
    /// Export events and flow records to Redis (e.g. redis://127.0.0.1:6379).
    #[arg(long)]
    redis: Option<String>,
    /// Export events and flow records as InfluxDB line protocol: a file path, `-` for stdout,
    /// udp://HOST:PORT, or InfluxDB's HTTP write API: http://HOST:PORT/write?db=DB (1.x) or
    /// http://HOST:PORT/api/v2/write?org=ORG&bucket=BUCKET (2.x; token from
    /// DTA_INFLUX_TOKEN_FILE or DTA_INFLUX_TOKEN).
    #[arg(long)]
    influx: Option<String>,
    /// Export events and flow records to Kafka: bootstrap brokers HOST:PORT[,HOST:PORT...]
    /// (topics PREFIX.events and PREFIX.flows; docs/kafka.md).
    #[arg(long, value_name = "BROKERS")]
    kafka: Option<String>,
    /// Kafka topic prefix.
    #[arg(long, default_value = dta_export::kafka::DEFAULT_TOPIC_PREFIX)]
    kafka_topic_prefix: String,
    /// Kafka partitions per topic, one per collector (by a hash of the flow key).
    #[arg(long, default_value_t = 1, conflicts_with = "kafka_cluster")]
    kafka_partitions: u32,
    /// Cluster map (TOML, docs/scale-out.md): one Kafka partition per collector, each
    /// notification in the partition of the collector owning its flow key in --kafka-flow-store.
    #[arg(long, value_name = "FILE")]
    kafka_cluster: Option<PathBuf>,
    /// The store whose owner of a flow key decides a notification's partition.
    #[arg(long, default_value = "paths")]
    kafka_flow_store: String,
    /// How Kafka record values are written: json or protobuf (length-delimited), the messages
    /// of the shipped schemas/dta.proto.
    #[arg(long, default_value_t = dta_export::kafka::RecordFormat::Json)]
    kafka_format: dta_export::kafka::RecordFormat,
    /// Kafka record batch compression: none, lz4 or zstd.
    #[arg(long, default_value_t = dta_export::kafka::Compression::None)]
    kafka_compression: dta_export::kafka::Compression,
    /// Put the XDP fast path on IFACE (native mode where the driver has it, else generic mode,
    /// which works on loopback and veth): telemetry reports of flows the sink knows, on their
    /// known path, with no event, are aggregated in the kernel and drained at each delta flush
    /// (docs/int-sink.md "XDP fast path").
    #[arg(long, value_name = "IFACE")]
    xdp: Option<String>,
    /// With --xdp: attach in generic mode even where the driver has a native one.
    #[arg(long, requires = "xdp")]
    xdp_generic: bool,
    /// Kernel-bypass receive: an XDP program on IFACE redirects the telemetry reports to the
    /// listen port into AF_XDP sockets, one per receive queue, read by the sink threads (a
    /// report of a flow another thread owns is handed to it), checking `[sink] allow` in the
    /// driver; the rest still reaches the UDP socket. With --xdp on the same interface the fast
    /// path's program redirects what it passes to the sink. Falls back to the socket, with a
    /// warning, where AF_XDP is unavailable (docs/xdp.md "AF_XDP receive").
    #[arg(long, value_name = "IFACE")]
    af_xdp: Option<String>,
    /// With --af-xdp: attach the redirect program in generic (SKB) mode (with --xdp on the same
    /// interface, --xdp-generic decides: one program is attached).
    #[arg(long, requires = "af_xdp")]
    af_xdp_generic: bool,
    /// With --af-xdp: busy-poll the AF_XDP sockets for up to USECS microseconds when their
    /// rings are empty (SO_PREFER_BUSY_POLL): the sink thread runs the driver's receive itself.
    /// Refused at start where the kernel refuses it (needs CAP_NET_ADMIN).
    #[arg(long, value_name = "USECS", requires = "af_xdp", value_parser = clap::value_parser!(u32).range(1..=dta_node::af_xdp::MAX_BUSY_POLL_US as i64))]
    af_xdp_busy_poll: Option<u32>,
}

pub fn int_sink(a: IntSinkArgs, stop: Arc<AtomicBool>) -> anyhow::Result<ExitCode> {
    if let Some(IntSinkCmd::Check(c)) = a.cmd {
        return check(c);
    }
    let config = a
        .config
        .expect("clap requires --config without a subcommand");
    let f = IntSinkFile::load(&config)?;
    let kafka = a.kafka.map(|brokers| dta_node::int_sink::IntKafka {
        brokers,
        conn: dta_node::exports::KafkaConn {
            topic_prefix: a.kafka_topic_prefix.clone(),
            partitions: a.kafka_partitions,
            cluster: a.kafka_cluster.clone(),
            max_queue_bytes: dta_export::kafka::ProducerOptions::DEFAULT_MAX_QUEUE_BYTES,
            format: a.kafka_format,
            compression: a.kafka_compression,
        },
        flow_store: a.kafka_flow_store.clone(),
    });
    let o = dta_node::int_sink::IntSinkOptions {
        records: a.records,
        events: a.events,
        metrics: a.metrics,
        redis: a.redis,
        influx: a.influx,
        kafka,
        xdp: a.xdp.map(|i| (i, a.xdp_generic)),
        af_xdp: a.af_xdp.map(|iface| dta_node::af_xdp::AfXdpOptions {
            iface,
            generic: a.af_xdp_generic,
            busy_poll_us: a.af_xdp_busy_poll,
        }),
        duration: a.duration,
    };
    let summary = dta_node::int_sink::run(&f, &o, &stop)?;
    eprintln!("{}", serde_json::to_string_pretty(&summary)?);
    Ok(ExitCode::SUCCESS)
}

#[derive(Args)]
pub struct IntStoreArgs {
    #[command(flatten)]
    dir: IntDirArgs,
    /// Store name.
    #[arg(long)]
    store: String,
}

impl IntStoreArgs {
    fn region(&self) -> anyhow::Result<Arc<dta_store::Region>> {
        let c = self.dir.open()?;
        Ok(c.store(&self.store)?.region.clone())
    }
}

/// Where the INT stores are: as the other queries take it, a configuration and an override.
#[derive(Args)]
pub struct IntDirArgs {
    /// A collector's or an INT sink's configuration (TOML): the stores of its region_dir
    /// (default: the embedded example collector configuration's, dta-regions).
    #[arg(short, long)]
    config: Option<PathBuf>,
    /// Override the configuration's region directory.
    #[arg(long)]
    region_dir: Option<PathBuf>,
}

impl IntDirArgs {
    fn dir(&self) -> anyhow::Result<PathBuf> {
        if let Some(d) = &self.region_dir {
            return Ok(d.clone());
        }
        match &self.config {
            Some(p) => dta_node::config::ServiceFile::load(p).map(|f| f.region_dir().to_path_buf()),
            None => Ok(dta_node::config::Config::embedded().region_dir),
        }
    }

    fn open(&self) -> anyhow::Result<Collector> {
        Ok(Collector::open_dir(&self.dir()?, false)?)
    }
}

#[derive(Subcommand)]
pub enum IntQuery {
    /// Path of a flow (Key-Write store of 13-byte keys, 24-byte path records).
    Path {
        #[command(flatten)]
        sel: IntStoreArgs,
        /// SRC:SPORT-DST:DPORT/PROTO
        #[arg(long)]
        flow: String,
        /// Slots to read, 1..=the store's N (default: the store's N, from its region header).
        #[arg(long)]
        redundancy: Option<u8>,
    },
    /// Hop latency of a flow at a hop (Postcarding store).
    HopLatency {
        #[command(flatten)]
        sel: IntStoreArgs,
        /// The flow: SRC:SPORT-DST:DPORT/PROTO.
        #[arg(long)]
        flow: String,
        /// The hop: 0 is the INT source, then each transit hop.
        #[arg(long)]
        hop: u8,
        /// The sink's postcard_values.
        #[arg(long, default_value_t = dta_int::sink::IntSinkConfig::default().postcard_values)]
        values: u32,
        /// The sink's postcard_divisor.
        #[arg(long, default_value_t = dta_int::sink::IntSinkConfig::default().postcard_divisor)]
        divisor: u32,
    },
    /// The newest events (Append store), decoded, newest first: every kind unless --kind names
    /// some, at a switch (--node), of a flow (--flow), since a time (--since-ms).
    Events {
        #[command(flatten)]
        sel: IntStoreArgs,
        /// Event kinds, comma-separated: hop_latency, queue_occupancy, egress_tx_util,
        /// path_latency, path_change, latency_change, queue_change, drop (default: all).
        #[arg(long, value_delimiter = ',', value_parser = EventKind::parse)]
        kind: Vec<EventKind>,
        /// Only events at this switch (node id).
        #[arg(long)]
        node: Option<u32>,
        /// Only events of this flow (SRC:SPORT-DST:DPORT/PROTO).
        #[arg(long)]
        flow: Option<String>,
        /// Only events at or after this time (Unix milliseconds).
        #[arg(long)]
        since_ms: Option<u64>,
        /// Only events at or before this time (Unix milliseconds; with --since-ms, an
        /// episode's rows).
        #[arg(long)]
        until_ms: Option<u64>,
        /// At most this many events (1..=4096), the newest of those the filter keeps anywhere
        /// in the lists held; the answer says whether it holds them all (`complete`) and, if
        /// not, where the next page starts (`next`, for --before).
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=4096))]
        max: u64,
        /// The Append list of the first event kind ([sink] event_list_base).
        #[arg(long, default_value_t = 0)]
        list_base: u32,
        /// Continue a paged answer: its `next` (KIND:INDEX,...).
        #[arg(long, value_parser = query::EventCursor::parse)]
        before: Option<query::EventCursor>,
    },
    /// Threshold crossings grouped into episodes (events store): per switch and kind (and,
    /// with --per-flow, flow), a run with no quiet time longer than --gap-ms; the newest first,
    /// with the crossings per switch and kind over time. An episode's rows: `events --node N
    /// --kind K --since-ms START --until-ms END`.
    Episodes {
        #[command(flatten)]
        sel: IntStoreArgs,
        /// Event kinds, comma-separated (default: the threshold kinds hop_latency,
        /// queue_occupancy, egress_tx_util, path_latency).
        #[arg(long, value_delimiter = ',', value_parser = EventKind::parse)]
        kind: Vec<EventKind>,
        /// Only episodes at this switch (node id).
        #[arg(long)]
        node: Option<u32>,
        /// Only crossings at or after this time (Unix milliseconds).
        #[arg(long)]
        since_ms: Option<u64>,
        /// A quiet time longer than this ends an episode, milliseconds.
        #[arg(long, default_value_t = query::episodes::DEFAULT_GAP_NS / 1_000_000,
              value_parser = clap::value_parser!(u64).range(1..=query::episodes::MAX_GAP_MS))]
        gap_ms: u64,
        /// One episode per flow too.
        #[arg(long)]
        per_flow: bool,
        /// At most this many episodes (1..=4096), the newest.
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=4096))]
        max: u64,
        /// The Append list of the first event kind ([sink] event_list_base).
        #[arg(long, default_value_t = 0)]
        list_base: u32,
    },
    /// The flows the sink summarised (events store; with --paths, their paths): newest first,
    /// or the worst by --top; searched by --prefix, --port, --node (needs --paths), --since-ms.
    Flows {
        #[command(flatten)]
        sel: IntStoreArgs,
        /// The paths store (Key-Write): each flow's path, and the --node filter.
        #[arg(long)]
        paths: Option<String>,
        /// Source or destination address in this prefix (CIDR).
        #[arg(long)]
        prefix: Option<dta_wire::prefix::Prefix>,
        /// Source or destination port.
        #[arg(long)]
        port: Option<u16>,
        /// Through this switch (node id).
        #[arg(long)]
        node: Option<u32>,
        /// Seen at or after this time (Unix milliseconds).
        #[arg(long)]
        since_ms: Option<u64>,
        /// One flow (SRC:SPORT-DST:DPORT/PROTO): every summary of it held, newest first (the
        /// flow over time: one per [sink] active_timeout_ms while it ran).
        #[arg(long)]
        flow: Option<String>,
        /// recent (default), latency (the newest summary's), worst (the highest path latency of
        /// any of the flow's summaries since --since-ms: the worst of that time), packets or
        /// hops: the highest first.
        #[arg(long, default_value = "recent", value_parser = query::FlowOrder::parse)]
        top: query::FlowOrder,
        /// At most this many flows (1..=16384).
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=16384))]
        max: u64,
        /// The Append list of the first event kind ([sink] event_list_base).
        #[arg(long, default_value_t = 0)]
        list_base: u32,
    },
    /// The network map learned from the flows' paths: switches and links, the most congested
    /// first by --rank, each switch with its queue occupancy and hop latency over the window.
    Network {
        #[command(flatten)]
        dir: IntDirArgs,
        /// The events store (Append; default: the one of record layout int-event, `events`
        /// first).
        #[arg(long)]
        events: Option<String>,
        /// The paths store (Key-Write; default: the one of 13-byte keys and 24-byte records,
        /// `paths` first).
        #[arg(long)]
        paths: Option<String>,
        /// The histogram store (Key-Increment; default: the one of 6-byte keys, `hist`
        /// first).
        #[arg(long)]
        hist: Option<String>,
        /// The histograms' long tier (Key-Increment of 7-byte keys; default: the one of that
        /// layout, `int_hist_day` first, if any): read when --window last:D asks for more than
        /// the histogram store holds.
        #[arg(long)]
        long_tier: Option<String>,
        /// The histograms' windows: current (default for a windowed store), all, last:5m,
        /// at:UNIX_MS.
        #[arg(long, value_parser = dta_int::query::WindowSel::parse)]
        window: Option<dta_int::query::WindowSel>,
        /// The Append list of the first event kind ([sink] event_list_base).
        #[arg(long, default_value_t = 0)]
        list_base: u32,
        /// What ranks switches and links, the highest first: METRIC:STAT, METRIC hop_latency,
        /// queue_occupancy or egress_tx_util, STAT p50, p90, p99, max or over:THRESHOLD (the
        /// share of samples above it).
        #[arg(long, default_value = "hop_latency:p99", value_parser = dta_int::query::Congestion::parse)]
        rank: dta_int::query::Congestion,
    },
    /// Histogram of a metric at a switch (Key-Increment store).
    Histogram {
        #[command(flatten)]
        sel: IntStoreArgs,
        /// The switch (its INT node id).
        #[arg(long)]
        node: u32,
        /// The switch's egress port, from a per-port histogram store (Key-Increment of 8-byte
        /// keys, `int_hist_port`), where the hops report their ports.
        #[arg(long)]
        port: Option<u16>,
        /// hop_latency, queue_occupancy or egress_tx_util.
        #[arg(long, default_value = "queue_occupancy")]
        metric: String,
        /// Bucket edges (comma separated) if the sink was configured with edges; else log2.
        #[arg(long, value_delimiter = ',')]
        edges: Vec<u32>,
        /// Slots to read, 1..=the store's N (default: the store's N, from its region header).
        #[arg(long)]
        redundancy: Option<u8>,
        /// The time windows to count, for a store that keeps windows: current (the default),
        /// all, last:DURATION (e.g. last:5m) or at:UNIX_MS; a cumulative store answers all.
        #[arg(long, value_parser = dta_int::query::WindowSel::parse)]
        window: Option<dta_int::query::WindowSel>,
    },
}

pub fn query_int(q: IntQuery) -> anyhow::Result<ExitCode> {
    let v = match q {
        IntQuery::Path {
            sel,
            flow,
            redundancy,
        } => serde_json::to_value(query::path(
            &*sel.region()?,
            &query::parse_flow(&flow)?,
            redundancy,
        )?)?,
        IntQuery::HopLatency {
            sel,
            flow,
            hop,
            values,
            divisor,
        } => serde_json::to_value(query::hop_latency(
            &*sel.region()?,
            &query::parse_flow(&flow)?,
            hop,
            values,
            divisor,
        )?)?,
        IntQuery::Episodes {
            sel,
            kind,
            node,
            since_ms,
            gap_ms,
            per_flow,
            max,
            list_base,
        } => {
            let q = query::EpisodeQuery {
                kinds: kind,
                node,
                since_ns: since_ms.map(|ms| ms.saturating_mul(1_000_000)),
                gap_ns: gap_ms * 1_000_000,
                per_flow,
            };
            serde_json::to_value(query::episodes(
                &*sel.region()?,
                list_base,
                &q,
                max as usize,
                dta_store::key_increment::unix_ms().saturating_mul(1_000_000),
            )?)?
        }
        IntQuery::Events {
            sel,
            kind,
            node,
            flow,
            since_ms,
            until_ms,
            max,
            list_base,
            before,
        } => {
            let filter = query::EventFilter {
                kinds: kind,
                node,
                flow: flow.as_deref().map(query::parse_flow).transpose()?,
                since_ns: since_ms.map(|ms| ms.saturating_mul(1_000_000)),
                until_ns: until_ms.map(query::end_of_ms),
                before,
            };
            serde_json::to_value(query::recent_events(
                &*sel.region()?,
                list_base,
                &filter,
                max as usize,
            )?)?
        }
        IntQuery::Flows {
            sel,
            paths,
            prefix,
            port,
            node,
            since_ms,
            flow,
            top,
            max,
            list_base,
        } => {
            let c = sel.dir.open()?;
            let events = c.store(&sel.store)?.region.clone();
            let paths = match &paths {
                Some(p) => Some(c.store(p)?.region.clone()),
                None => None,
            };
            let filter = query::FlowFilter {
                prefix,
                port,
                node,
                since_ns: since_ms.map(|ms| ms.saturating_mul(1_000_000)),
                flow: flow.as_deref().map(query::parse_flow).transpose()?,
            };
            serde_json::to_value(query::flows(
                &events,
                paths.as_deref(),
                list_base,
                &filter,
                top,
                max as usize,
            )?)?
        }
        IntQuery::Network {
            dir,
            events,
            paths,
            hist,
            long_tier,
            window,
            list_base,
            rank,
        } => {
            let c = dir.open()?;
            let r =
                |n: Option<String>, role: query::Role| -> anyhow::Result<Arc<dta_store::Region>> {
                    let n = match n {
                        Some(n) => n,
                        None => role
                            .find(
                                c.stores()
                                    .iter()
                                    .map(|s| (s.name.as_str(), s.region.header())),
                            )?
                            .to_owned(),
                    };
                    Ok(c.store(&n)?.region.clone())
                };
            serde_json::to_value(query::network(
                &*r(events, query::Role::Events)?,
                &*r(paths, query::Role::Paths)?,
                &*r(hist, query::Role::Hist)?,
                match long_tier {
                    Some(n) => Some(r(Some(n), query::Role::LongTier)?),
                    None => r(None, query::Role::LongTier).ok(),
                }
                .as_deref(),
                list_base,
                window,
                rank,
                dta_store::key_increment::unix_ms(),
            )?)?
        }
        IntQuery::Histogram {
            sel,
            node,
            port,
            metric,
            edges,
            redundancy,
            window,
        } => {
            let Some(m) = Metric::from_name(&metric) else {
                bail!("unknown metric {metric:?}");
            };
            let b = Buckets::named(Some(edges)).map_err(anyhow::Error::msg)?;
            serde_json::to_value(query::histogram_at(
                &*sel.region()?,
                node,
                port,
                m,
                b.as_ref(),
                redundancy,
                window,
                dta_store::key_increment::unix_ms(),
            )?)?
        }
    };
    println!("{}", serde_json::to_string_pretty(&v)?);
    Ok(ExitCode::SUCCESS)
}

#[derive(Subcommand)]
enum IntSinkCmd {
    /// Compare the sink's flow records (`--records`) with a trace's ground truth (`dta pcap
    /// gen`): every flow present, its packets, path and per-hop latest and average metrics
    /// exact; optionally every flow's path as the stores answer it. Exit 1 on any difference.
    Check(CheckArgs),
}

#[derive(Args)]
struct CheckArgs {
    /// The ground truth JSON `dta pcap gen` wrote beside the pcap.
    #[arg(long)]
    truth: PathBuf,
    /// Flow records as JSON lines: `dta int-sink --records`, or its `--events` output (lines
    /// that are not flow records are skipped).
    #[arg(long)]
    records: PathBuf,
    /// Also query every flow's path from the stores of this sink configuration.
    #[arg(long)]
    config: Option<PathBuf>,
    /// The Key-Write store of paths in that configuration (default: the store of the INT sink's
    /// path layout).
    #[arg(long)]
    paths_store: Option<String>,
    /// Differences printed at most.
    #[arg(long, default_value_t = 10)]
    show: usize,
}

fn check(a: CheckArgs) -> anyhow::Result<ExitCode> {
    let c = dta_node::int_check::check(&dta_node::int_check::CheckArgs {
        truth: a.truth,
        records: a.records,
        config: a.config,
        paths_store: a.paths_store,
    })?;
    for p in c.problems.iter().take(a.show) {
        eprintln!("{p}");
    }
    println!("{}", serde_json::to_string_pretty(&c.summary)?);
    Ok(if c.problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
