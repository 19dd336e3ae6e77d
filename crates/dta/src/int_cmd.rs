//! `dta int-sink` (receive telemetry reports on UDP, run the INT sink, write the DTA stores) and
//! `dta query int ...` (path, hop latency, events, histogram). The sink itself is `dta-int`.

use std::io::Write;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use serde::Deserialize;

use dta_collector::{Collector, StoreConfig};
use dta_int::fast::{FastFlow, FastPath, FastThresholds};
use dta_int::{query, Buckets, EventKind, IntSink, IntSinkConfig, Metric, Notification, SinkGroup};
use dta_int_wire::instr;
use dta_translator::ingest::{self, MmsgBuffers};
use dta_translator::sinks::RegionSinks;
use dta_translator::{Stats, Translator, TranslatorConfig};
use dta_xdp::{IntXdp, IntXdpConfig};

/// The INT sink's configuration file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct IntFile {
    region_dir: PathBuf,
    /// Where telemetry reports arrive.
    #[serde(default = "default_listen")]
    listen: SocketAddr,
    #[serde(default)]
    sink: IntSinkConfig,
    #[serde(default)]
    translator: TranslatorConfig,
    /// Stores to create (or reopen) in `region_dir`; empty: use the regions already there.
    #[serde(default)]
    store: Vec<StoreConfig>,
}

impl IntFile {
    /// Read and parse `path`; every relative path of the file (`region_dir`, the
    /// `[translator]` spill file) is taken relative to the file's directory, as in `dta.toml`.
    fn load(path: &std::path::Path) -> anyhow::Result<IntFile> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let mut f: IntFile =
            toml::from_str(&text).with_context(|| format!("in {}", path.display()))?;
        f.translator
            .validate()
            .map_err(|e| anyhow::anyhow!("in {}: {e}", path.display()))?;
        let base = dta::config::config_dir(path);
        dta::config::resolve(base, &mut f.region_dir);
        dta::config::resolve_translator_paths(base, &mut f.translator);
        Ok(f)
    }
}

/// Loopback: reports from elsewhere need an explicit `listen` (and an allow-list).
fn default_listen() -> SocketAddr {
    "127.0.0.1:32766".parse().unwrap()
}

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
    /// or udp://HOST:PORT.
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
    /// Put the XDP fast path on IFACE (native mode where the driver has it, else generic mode,
    /// which works on loopback and veth): telemetry reports of flows the sink knows, on their
    /// known path, with no event, are aggregated in the kernel and drained at each delta flush
    /// (docs/int-sink.md "XDP fast path").
    #[arg(long, value_name = "IFACE")]
    xdp: Option<String>,
    /// With --xdp: attach in generic mode even where the driver has a native one.
    #[arg(long, requires = "xdp")]
    xdp_generic: bool,
}

pub fn int_sink(a: IntSinkArgs, stop: Arc<AtomicBool>) -> anyhow::Result<ExitCode> {
    if let Some(IntSinkCmd::Check(c)) = a.cmd {
        return check(c);
    }
    let config = a
        .config
        .expect("clap requires --config without a subcommand");
    let f = IntFile::load(&config)?;
    f.sink
        .validate()
        .map_err(|e| anyhow::anyhow!("{}: [sink] {e}", config.display()))?;
    let threads = match f.sink.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
    .min(dta_int::sink::MAX_THREADS);
    let collector = if f.store.is_empty() {
        Collector::open_dir(&f.region_dir, true)?
    } else {
        Collector::create(&f.region_dir, &f.store, false)?
    };
    // One sink per thread over the same regions, each with its own translator; the sinks share
    // their thresholds and event sequence, the translators the stateful primitives' ownership
    // (a flow's postcards owned by the thread its reports are steered to: one sharding
    // function, dta_int::shard) and one write meter.
    let group = SinkGroup::new(&f.sink, threads, crate::SHARD_INBOX);
    let all_stats: Vec<Arc<Stats>> = (0..threads).map(|_| Arc::new(Stats::default())).collect();
    let mut meter = None;
    let mut sinks = Vec::with_capacity(threads);
    for (i, stats) in all_stats.iter().enumerate() {
        let t = Translator::colocated(&f.translator, collector.regions(), stats.clone())?;
        let m = meter.get_or_insert_with(|| t.meter().clone()).clone();
        sinks.push(
            group
                .sink(i, &f.sink, t.with_meter(m))
                .map_err(anyhow::Error::msg)?,
        );
    }
    // The XDP fast path, shared by the sink threads (each its own range of flow slots).
    let xdp = match &a.xdp {
        Some(iface) => Some(attach_xdp(&f, iface, a.xdp_generic, &mut sinks)?),
        None => None,
    };
    // Receive: one SO_REUSEPORT socket per thread, flows steered to them in the kernel.
    let sockets = ingest::bind_group(f.listen, threads, f.sink.recv_buffer)
        .with_context(|| format!("binding {}", f.listen))?;
    dta::int_steer::attach(&sockets).context("attaching the flow-steering program")?;
    for s in &sockets {
        s.set_read_timeout(Some(RECV_WAIT))?;
    }
    // What the kernel granted each socket (Linux reports double what was asked: it counts its
    // bookkeeping); a smaller buffer than configured is where bursts are lost: `ingest` warns,
    // each such socket is counted (`recv_buffer_short`).
    let granted: Vec<usize> = sockets
        .iter()
        .map(|s| socket2::SockRef::from(s).recv_buffer_size().unwrap_or(0) / 2)
        .collect();
    for (sink, &g) in sinks.iter().zip(&granted) {
        if g < f.sink.recv_buffer {
            sink.stats()
                .recv_buffer_short
                .fetch_add(1, Ordering::Relaxed);
        }
    }
    let recv_buffer = granted.iter().copied().min().unwrap_or(0);
    let export_metrics = dta_export::prom::ExportMetrics::default();
    let kafka = match &a.kafka {
        Some(brokers) => {
            let conn = crate::export_cmd::KafkaConn {
                topic_prefix: a.kafka_topic_prefix.clone(),
                partitions: a.kafka_partitions,
                cluster: a.kafka_cluster.clone(),
                max_queue_bytes: dta_export::kafka::ProducerOptions::DEFAULT_MAX_QUEUE_BYTES,
            };
            let (producer, partitioner) = conn.producer(brokers)?;
            // A flow store the map cannot place is an error now, not a dropped record later.
            partitioner
                .partition(
                    &a.kafka_flow_store,
                    dta_export::kafka::OwnerKey::Bytes(&[0; dta_int::layout::FLOW_KEY_LEN]),
                )
                .map_err(|e| anyhow::anyhow!("--kafka-flow-store: {e}"))?;
            Some((Arc::new(producer), partitioner))
        }
        None => None,
    };
    let _metrics = match a.metrics {
        Some(addr) => {
            let mut reg = dta_export::prom::TranslatorMetrics::new(all_stats.clone()).registry();
            reg.register_collector(Box::new(dta_export::prom::IntSinkMetrics::new(
                sinks.iter().map(|s| s.stats().clone()).collect(),
            )));
            reg.register_collector(Box::new(dta_export::prom::UdpReceiveMetrics::new(
                "dta_int_sink",
                sockets
                    .iter()
                    .map(UdpSocket::try_clone)
                    .collect::<std::io::Result<_>>()?,
            )));
            export_metrics.register(&mut reg);
            if let Some((p, _)) = &kafka {
                reg.register_collector(Box::new(dta_export::prom::KafkaMetrics::new(
                    p.stats().clone(),
                )));
            }
            let opts = dta::ops::metrics_options(dta::ops::regions_ready(collector.regions()))?;
            let m = dta_export::prom::MetricsServer::start_with(addr, Arc::new(reg), opts)
                .with_context(|| format!("metrics server on {addr}"))?;
            eprintln!("metrics on http://{}/metrics", m.local_addr());
            Some(m)
        }
        None => None,
    };
    let mut targets = vec![];
    if let Some(url) = &a.redis {
        targets.push(dta_export::pipeline::Target::Redis(
            dta_export::redis_ts::RedisExporter::connect(url, Default::default())
                .with_context(|| format!("connecting to {url}"))?,
        ));
    }
    if let Some(to) = &a.influx {
        targets.push(if let Some(addr) = to.strip_prefix("udp://") {
            let addr: std::net::SocketAddr = addr
                .parse()
                .with_context(|| format!("--influx {to}: expected udp://HOST:PORT"))?;
            dta_export::pipeline::Target::LinesUdp(dta_export::influx::UdpLineSink::new(
                addr, 1400,
            )?)
        } else {
            let out: Box<dyn std::io::Write + Send> = if to == "-" {
                Box::new(std::io::stdout())
            } else {
                Box::new(std::fs::File::create(to).with_context(|| format!("creating {to}"))?)
            };
            dta_export::pipeline::Target::Lines(dta_export::influx::LineWriter::new(out))
        });
    }
    if let Some((producer, partitioner)) = &kafka {
        targets.push(dta_export::pipeline::Target::Kafka(
            dta_export::pipeline::KafkaTarget {
                producer: producer.clone(),
                prefix: a.kafka_topic_prefix.clone(),
                partitioner: partitioner.clone(),
                flow_store: a.kafka_flow_store.clone(),
            },
        ));
    }
    let exporter = if targets.is_empty() {
        None
    } else {
        Some(dta_export::pipeline::spawn(
            merged(&mut sinks)?,
            targets,
            export_metrics.clone(),
            Default::default(),
        )?)
    };
    eprintln!(
        "int-sink on udp://{} ({threads} thread{}, receive buffer {recv_buffer} bytes) -> {} \
         stores in {}",
        sockets[0].local_addr()?,
        if threads == 1 { "" } else { "s" },
        collector.stores().len(),
        f.region_dir.display()
    );
    let printer = if a.events {
        let rx = merged(&mut sinks)?;
        Some(std::thread::spawn(move || {
            let out = std::io::stdout();
            let mut out = std::io::BufWriter::new(out.lock());
            for n in rx {
                if let Ok(s) = serde_json::to_string(&n) {
                    let _ = writeln!(out, "{s}");
                }
            }
            let _ = out.flush();
        }))
    } else {
        None
    };
    let records = match &a.records {
        Some(path) => {
            let rx = merged(&mut sinks)?;
            let file = std::fs::File::create(path)
                .with_context(|| format!("creating {}", path.display()))?;
            Some(std::thread::spawn(move || -> std::io::Result<()> {
                let mut out = std::io::BufWriter::new(file);
                for n in rx {
                    if let Notification::Flow(r) = n {
                        serde_json::to_writer(&mut out, &r)?;
                        writeln!(out)?;
                    }
                }
                out.flush()
            }))
        }
        None => None,
    };
    let deadline = a
        .duration
        .map(|d| Instant::now() + Duration::from_secs_f64(d.max(0.0)));
    let flushed = AtomicUsize::new(0);
    let results: Vec<std::io::Result<()>> = std::thread::scope(|scope| {
        let handles: Vec<_> = sinks
            .iter_mut()
            .zip(&sockets)
            .enumerate()
            .map(|(i, (sink, socket))| {
                let (stop, flushed) = (&*stop, &flushed);
                let batch = f.sink.recv_batch;
                std::thread::Builder::new()
                    .name(format!("dta-int-sink-{i}"))
                    .spawn_scoped(scope, move || {
                        run_sink(sink, socket, batch, stop, deadline, flushed, threads)
                    })
                    .expect("spawn sink thread")
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(std::io::Error::other("sink thread panicked")))
            })
            .collect()
    });
    for r in collector.regions() {
        r.flush()?;
    }
    let kernel_drops = sockets
        .iter()
        .map(|s| ingest::kernel_drops(s).unwrap_or(0))
        .sum::<u64>();
    let mut summary = sum_json(
        sinks
            .iter()
            .map(|s| serde_json::to_value(s.stats_snapshot()))
            .collect::<Result<Vec<_>, _>>()?,
    );
    summary["receive"] = serde_json::json!({
        "threads": threads,
        "recv_buffer": recv_buffer,
        "kernel_drops": kernel_drops,
        "cpu_seconds": cpu_seconds(),
    });
    if let Some((x, _stats_fd)) = &xdp {
        let s = lock(x).stats()?;
        summary["xdp"] = serde_json::to_value(s)?;
    }
    eprintln!("{}", serde_json::to_string_pretty(&summary)?);
    drop(sinks);
    if let Some(p) = printer {
        let _ = p.join();
    }
    if let Some(r) = records {
        match r.join() {
            Ok(r) => r.context("writing the flow records")?,
            Err(_) => bail!("the flow record writer panicked"),
        }
    }
    if let Some(e) = exporter {
        match e.join() {
            Ok(summary) => eprintln!("exported: {summary:?}"),
            Err(_) => eprintln!("the export thread panicked"),
        }
    }
    if let Some((p, _)) = kafka {
        // At least once: wait for the broker's acknowledgement of what was queued.
        if let Err(e) = p.flush(Duration::from_secs(30)) {
            eprintln!("kafka export: {e}");
        }
        eprintln!("kafka: {:?}", p.stats().snapshot());
    }
    for r in results {
        r.context("receiving")?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Histogram blocks of the XDP fast path: switches whose histograms it counts (3 metrics × 33
/// log2 buckets × 8 bytes each, 3.2 MiB in all); flows through other switches stay the sink's.
const XDP_SWITCHES: u32 = 4096;

fn lock(x: &Mutex<IntXdp>) -> std::sync::MutexGuard<'_, IntXdp> {
    x.lock().unwrap_or_else(|e| e.into_inner())
}

/// Load the INT fast path for `f`'s sinks, attach it to `iface` and give each sink its part
/// (flow slots `i * capacity ..`); with the kernel's BPF run-time statistics on while the
/// returned descriptor lives.
fn attach_xdp(
    f: &IntFile,
    iface: &str,
    force_generic: bool,
    sinks: &mut [IntSink<RegionSinks>],
) -> anyhow::Result<(Arc<Mutex<IntXdp>>, Option<std::os::fd::OwnedFd>)> {
    let Some(int_port) = f.sink.int_udp_port else {
        bail!("--xdp needs [sink] int_udp_port (INT over UDP is what the fast path reads)");
    };
    let per = sinks.first().map_or(0, |s| s.flow_cache().capacity()) as u32;
    let cfg = IntXdpConfig {
        port: f.listen.port(),
        int_port,
        instructions: instr::NODE_ID | instr::HOP_LATENCY | instr::QUEUE | instr::TX_UTIL,
        flows: per
            .checked_mul(sinks.len() as u32)
            .context("flow_capacity x threads")?,
        switches: XDP_SWITCHES,
    };
    let mut x = IntXdp::load(&cfg).context("loading the INT XDP program")?;
    let mode = x
        .attach(iface, force_generic)
        .with_context(|| format!("attaching the INT XDP program to {iface}"))?;
    let stats_fd = match dta_xdp::int::enable_run_time_stats() {
        Ok(fd) => Some(fd),
        Err(e) => {
            eprintln!("warning: {e}: the XDP program's run time is not measured");
            None
        }
    };
    eprintln!("INT XDP fast path on {iface} ({mode:?} mode)");
    let x = Arc::new(Mutex::new(x));
    for (i, s) in sinks.iter_mut().enumerate() {
        s.set_fast_path(Box::new(XdpFast {
            xdp: x.clone(),
            base: i as u32 * per,
        }));
    }
    Ok((x, stats_fd))
}

/// One sink thread's view of the shared fast path.
struct XdpFast {
    xdp: Arc<Mutex<IntXdp>>,
    /// This sink's first flow slot.
    base: u32,
}

/// CLOCK_MONOTONIC, ns (the clock of `bpf_ktime_get_ns`).
fn monotonic_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

impl FastPath for XdpFast {
    fn learn(&mut self, key: &[u8; 13], slot: u32, nodes: &[u32]) -> Result<(), String> {
        lock(&self.xdp)
            .learn(key, self.base + slot, nodes)
            .map_err(|e| e.to_string())
    }

    fn forget(&mut self, key: &[u8; 13]) {
        lock(&self.xdp).forget(key);
    }

    fn take(&mut self, slot: u32, now_ns: u64) -> Option<FastFlow> {
        let a = lock(&self.xdp).take(self.base + slot)?;
        Some(FastFlow {
            packets: a.packets,
            hops: a.hops,
            // The sink's clock: as long before now as the report was.
            last_ns: now_ns.saturating_sub(monotonic_ns().saturating_sub(a.last_mono_ns)),
            seq: a.seq,
            sum: a.sum,
            last: a.last,
        })
    }

    fn take_hist(&mut self, add: &mut dyn FnMut(u32, usize, u8, u64)) {
        lock(&self.xdp).take_hist(add);
    }

    fn set_thresholds(&mut self, t: &FastThresholds) {
        if let Err(e) = lock(&self.xdp).set_thresholds(
            t.enabled,
            t.hop_latency,
            t.queue_occupancy,
            t.egress_tx_util,
            t.path_latency,
        ) {
            eprintln!("INT XDP fast path: {e}");
        }
    }
}

/// How long a sink thread lets datagrams gather after a partial batch: the translator's
/// default ([`MmsgBuffers::gather`]).
const GATHER: Duration = Duration::from_micros(dta_translator::config::DEFAULT_RECV_GATHER_US);

/// How long a sink thread waits for a datagram before it runs its timers and looks at `stop`.
const RECV_WAIT: Duration = Duration::from_millis(10);

/// Nanoseconds since the Unix epoch (the sink's clock for FlowCache ages and events).
fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The datagrams of one `recvmmsg`, to the sink, a slice of admitted ones at a time
/// ([`IntSink::handle_reports`]: the same as one by one, in order, with their cache misses
/// overlapped).
fn take(sink: &mut IntSink<RegionSinks>, m: &MmsgBuffers, n: usize) {
    const SLICE: usize = 64;
    let now = now_ns();
    let mut batch: [(&[u8], u64); SLICE] = [(&[], 0); SLICE];
    let mut k = 0;
    for i in 0..n {
        let (data, from) = m.datagram(i);
        if from.is_some_and(|f| sink.admit(f.ip())) {
            batch[k] = (data, now);
            k += 1;
            if k == SLICE {
                sink.handle_reports(&batch);
                k = 0;
            }
        }
    }
    sink.handle_reports(&batch[..k]);
}

/// One sink thread: receive until `stop` (a signal, an error on any thread) or `deadline`,
/// take what the kernel already holds (bounded), then flush: this thread's flows first, then,
/// once every thread has flushed its flows (which may hand reports to the translator that owns
/// them), what the others handed this one. A signal interrupting `recvmmsg` is not an error.
fn run_sink(
    sink: &mut IntSink<RegionSinks>,
    socket: &UdpSocket,
    batch: usize,
    stop: &AtomicBool,
    deadline: Option<Instant>,
    flushed: &AtomicUsize,
    threads: usize,
) -> std::io::Result<()> {
    let mut m = MmsgBuffers::new(batch);
    let fd = socket.as_raw_fd();
    let r = loop {
        if stop.load(Ordering::Relaxed) {
            break Ok(());
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            stop.store(true, Ordering::Relaxed);
            break Ok(());
        }
        match m.recv(fd, libc::MSG_WAITFORONE) {
            Ok(n) => {
                take(sink, &m, n);
                sink.tick(now_ns());
                m.gather(n, GATHER);
            }
            Err(e) => break Err(e),
        }
    };
    if r.is_err() {
        stop.store(true, Ordering::Relaxed);
    }
    // Reports that arrived before the stop, bounded so a flood cannot hold the exit.
    let mut drained = 0;
    while drained < ingest::MAX_DRAIN_DATAGRAMS {
        match m.recv(fd, libc::MSG_DONTWAIT) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                take(sink, &m, n);
                drained += n;
            }
        }
    }
    sink.flush(now_ns());
    flushed.fetch_add(1, Ordering::AcqRel);
    while flushed.load(Ordering::Acquire) < threads {
        // `tick` applies what the other threads hand this one.
        sink.tick(now_ns());
        std::thread::sleep(Duration::from_micros(200));
    }
    sink.tick(now_ns());
    sink.flush(now_ns());
    r
}

/// One receiver of every sink's notifications, in each sink's order (a forwarding thread per
/// sink; they end when the sinks are dropped).
fn merged(sinks: &mut [IntSink<RegionSinks>]) -> anyhow::Result<Receiver<Notification>> {
    if let [one] = sinks {
        return Ok(one.subscribe(NOTIFY_CAPACITY).rx);
    }
    let (tx, rx) = sync_channel(NOTIFY_CAPACITY);
    for (i, s) in sinks.iter_mut().enumerate() {
        let sub = s.subscribe(NOTIFY_CAPACITY);
        let tx = tx.clone();
        std::thread::Builder::new()
            .name(format!("dta-int-notify-{i}"))
            .spawn(move || {
                for n in sub.rx {
                    if tx.send(n).is_err() {
                        break;
                    }
                }
            })?;
    }
    Ok(rx)
}

/// Notifications a subscriber's channel holds.
const NOTIFY_CAPACITY: usize = 1 << 16;

/// Sum JSON statistics of several sinks: numbers added, objects by key, `[name, n]` lists by
/// name (the shape of [`dta_int::IntStatsSnapshot`], whatever its fields).
fn sum_json(all: Vec<serde_json::Value>) -> serde_json::Value {
    use serde_json::Value;
    fn add(into: &mut Value, v: Value) {
        match (into, v) {
            (Value::Number(a), Value::Number(b)) => {
                if let (Some(x), Some(y)) = (a.as_u64(), b.as_u64()) {
                    *a = (x.wrapping_add(y)).into();
                }
            }
            (Value::Object(a), Value::Object(b)) => {
                for (k, v) in b {
                    match a.get_mut(&k) {
                        Some(x) => add(x, v),
                        None => {
                            a.insert(k, v);
                        }
                    }
                }
            }
            (Value::Array(a), Value::Array(b)) => {
                for item in b {
                    let name = item.get(0).and_then(Value::as_str).map(str::to_owned);
                    let same = a.iter_mut().find(|x| {
                        name.is_some() && x.get(0).and_then(Value::as_str) == name.as_deref()
                    });
                    match (same, item) {
                        (Some(Value::Array(x)), Value::Array(mut y)) if x.len() == 2 => {
                            if let Some(n) = y.pop() {
                                add(&mut x[1], n);
                            }
                        }
                        (_, item) => a.push(item),
                    }
                }
            }
            _ => {}
        }
    }
    let mut it = all.into_iter();
    let mut total = it.next().unwrap_or(Value::Null);
    for v in it {
        add(&mut total, v);
    }
    total
}

/// This process's CPU time so far (user + system), seconds.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return f64::NAN;
    }
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

#[derive(Args)]
pub struct IntStoreArgs {
    /// Region directory.
    #[arg(long, default_value = "dta-regions")]
    region_dir: PathBuf,
    /// Store name.
    #[arg(long)]
    store: String,
}

impl IntStoreArgs {
    fn region(&self) -> anyhow::Result<Arc<dta_store::Region>> {
        let c = Collector::open_dir(&self.region_dir, false)?;
        Ok(c.store(&self.store)?.region.clone())
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
        #[arg(long)]
        flow: String,
        #[arg(long)]
        hop: u8,
        /// The sink's postcard_values.
        #[arg(long, default_value_t = dta_int::sink::IntSinkConfig::default().postcard_values)]
        values: u32,
        /// The sink's postcard_divisor.
        #[arg(long, default_value_t = dta_int::sink::IntSinkConfig::default().postcard_divisor)]
        divisor: u32,
    },
    /// Latest events of a kind (Append store): hop_latency, queue_occupancy, path_change, drop, ...
    Events {
        #[command(flatten)]
        sel: IntStoreArgs,
        #[arg(long, default_value = "queue_occupancy")]
        kind: String,
        #[arg(long, default_value_t = 20)]
        max: usize,
        #[arg(long, default_value_t = 0)]
        list_base: u32,
    },
    /// Histogram of a metric at a switch (Key-Increment store).
    Histogram {
        #[command(flatten)]
        sel: IntStoreArgs,
        #[arg(long)]
        node: u32,
        /// hop_latency, queue_occupancy or egress_tx_util.
        #[arg(long, default_value = "queue_occupancy")]
        metric: String,
        /// Bucket edges (comma separated) if the sink was configured with edges; else log2.
        #[arg(long, value_delimiter = ',')]
        edges: Vec<u32>,
        /// Slots to read, 1..=the store's N (default: the store's N, from its region header).
        #[arg(long)]
        redundancy: Option<u8>,
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
        IntQuery::Events {
            sel,
            kind,
            max,
            list_base,
        } => {
            let Some(k) = EventKind::from_name(&kind) else {
                bail!("unknown event kind {kind:?}");
            };
            let evs: Vec<_> = query::events(&*sel.region()?, list_base, k, max)?
                .into_iter()
                .map(Notification::Event)
                .collect();
            serde_json::to_value(evs)?
        }
        IntQuery::Histogram {
            sel,
            node,
            metric,
            edges,
            redundancy,
        } => {
            let Some(m) = Metric::from_name(&metric) else {
                bail!("unknown metric {metric:?}");
            };
            let b = if edges.is_empty() {
                Buckets::Log2
            } else {
                Buckets::Edges(edges)
            };
            b.validate().map_err(anyhow::Error::msg)?;
            serde_json::to_value(query::histogram(&*sel.region()?, node, m, &b, redundancy)?)?
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
    /// The Key-Write store of paths in that configuration.
    #[arg(long, default_value = "paths")]
    paths_store: String,
    /// Differences printed at most.
    #[arg(long, default_value_t = 10)]
    show: usize,
}

/// One flow as the trace made it: per hop, the sums and the last value of each metric.
struct TruthFlow {
    packets: u64,
    path: Vec<u32>,
    sum: Vec<[u64; 3]>,
    last: Vec<[u32; 3]>,
}

/// One flow as the sink's records say (several records when it aged out and came back).
#[derive(Default)]
struct SeenFlow {
    records: u64,
    packets: u64,
    last_ns: u64,
    /// Per hop: node ids seen, the sums (average x packets of each record), the latest values.
    nodes: Vec<Vec<Option<u32>>>,
    sum: Vec<[f64; 3]>,
    last: Vec<[Option<u32>; 3]>,
    path_changes: u64,
}

/// The fields of a flow record the check reads.
#[derive(Deserialize)]
struct RecordLine {
    #[serde(rename = "type")]
    kind: Option<String>,
    flow: Option<String>,
    packets: Option<u64>,
    last_ns: Option<u64>,
    hops: Option<Vec<HopLine>>,
}

#[derive(Deserialize)]
struct HopLine {
    node_id: Option<u32>,
    hop_latency: Option<u32>,
    avg_hop_latency: Option<f64>,
    queue_occupancy: Option<u32>,
    avg_queue_occupancy: Option<f64>,
    egress_tx_util: Option<u32>,
    avg_egress_tx_util: Option<f64>,
    path_changes: u32,
}

const METRICS: [&str; 3] = ["hop_latency", "queue_occupancy", "egress_tx_util"];

fn check(a: CheckArgs) -> anyhow::Result<ExitCode> {
    use std::collections::HashMap;
    use std::io::BufRead;
    let truth = dta_export::intgen::GroundTruth::load(&a.truth)
        .with_context(|| format!("reading {}", a.truth.display()))?;
    let mut want: HashMap<String, TruthFlow> = truth
        .flows
        .iter()
        .map(|f| {
            let n = f.path.len();
            (
                f.flow.clone(),
                TruthFlow {
                    packets: 0,
                    path: f.path.clone(),
                    sum: vec![[0; 3]; n],
                    last: vec![[0; 3]; n],
                },
            )
        })
        .collect();
    for fr in &truth.frames {
        let name = &truth
            .flows
            .get(fr.flow)
            .with_context(|| format!("frame of flow {} beyond the flows", fr.flow))?
            .flow;
        let t = want.get_mut(name).expect("every flow is in the map");
        t.packets += 1;
        for (i, h) in fr.hops.iter().enumerate().take(t.sum.len()) {
            t.last[i].copy_from_slice(&h[1..4]);
            for (sum, v) in t.sum[i].iter_mut().zip(&h[1..4]) {
                *sum += u64::from(*v);
            }
        }
    }
    let file = std::fs::File::open(&a.records)
        .with_context(|| format!("reading {}", a.records.display()))?;
    let mut seen: HashMap<String, SeenFlow> = HashMap::new();
    let mut lines = 0u64;
    for (no, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let r: RecordLine = serde_json::from_str(&line)
            .with_context(|| format!("{} line {}", a.records.display(), no + 1))?;
        if r.kind.as_deref().is_some_and(|k| k != "flow") {
            continue;
        }
        let (Some(flow), Some(packets), Some(hops)) = (r.flow, r.packets, r.hops) else {
            bail!("{} line {}: not a flow record", a.records.display(), no + 1);
        };
        lines += 1;
        let s = seen.entry(flow).or_default();
        s.records += 1;
        s.packets += packets;
        let latest = r.last_ns.unwrap_or(0) >= s.last_ns;
        s.last_ns = s.last_ns.max(r.last_ns.unwrap_or(0));
        if s.nodes.len() < hops.len() {
            s.nodes.resize(hops.len(), vec![]);
            s.sum.resize(hops.len(), [0.0; 3]);
            s.last.resize(hops.len(), [None; 3]);
        }
        for (i, h) in hops.iter().enumerate() {
            s.nodes[i].push(h.node_id);
            s.path_changes += u64::from(h.path_changes);
            let avgs = [
                h.avg_hop_latency,
                h.avg_queue_occupancy,
                h.avg_egress_tx_util,
            ];
            let lasts = [h.hop_latency, h.queue_occupancy, h.egress_tx_util];
            for m in 0..3 {
                s.sum[i][m] += avgs[m].unwrap_or(0.0) * packets as f64;
                if latest {
                    s.last[i][m] = lasts[m];
                }
            }
        }
    }
    let mut problems: Vec<String> = vec![];
    let (mut exact, mut missing, mut split) = (0u64, 0u64, 0u64);
    let mut names: Vec<&String> = want.keys().collect();
    names.sort();
    for name in names {
        let t = &want[name];
        let Some(s) = seen.get(name) else {
            missing += 1;
            problems.push(format!("{name}: no flow record"));
            continue;
        };
        if s.records > 1 {
            split += 1;
        }
        let mut diff = vec![];
        if s.packets != t.packets {
            diff.push(format!("packets {} (truth {})", s.packets, t.packets));
        }
        if s.nodes.len() != t.path.len() {
            diff.push(format!("{} hops (truth {})", s.nodes.len(), t.path.len()));
        }
        for (i, nodes) in s.nodes.iter().enumerate().take(t.path.len()) {
            if let Some(bad) = nodes.iter().find(|n| **n != Some(t.path[i])) {
                diff.push(format!("hop {i} node {bad:?} (truth {})", t.path[i]));
            }
            for (m, metric) in METRICS.iter().enumerate() {
                let want_sum = t.sum[i][m] as f64;
                if (s.sum[i][m] - want_sum).abs() > 1e-6 * want_sum.max(1.0) {
                    diff.push(format!(
                        "hop {i} {metric} sum {:.3} (truth {want_sum})",
                        s.sum[i][m]
                    ));
                }
                if s.last[i][m] != Some(t.last[i][m]) {
                    diff.push(format!(
                        "hop {i} latest {metric} {:?} (truth {})",
                        s.last[i][m], t.last[i][m]
                    ));
                }
            }
        }
        if s.path_changes != 0 {
            diff.push(format!("{} path changes (truth 0)", s.path_changes));
        }
        if diff.is_empty() {
            exact += 1;
        } else {
            problems.push(format!("{name}: {}", diff.join(", ")));
        }
    }
    let unexpected = seen.keys().filter(|k| !want.contains_key(*k)).count();
    if unexpected > 0 {
        problems.push(format!(
            "{unexpected} flows with records are not in the trace"
        ));
    }
    // The stores' answers: every flow's path by Key-Write query.
    let mut paths = serde_json::Value::Null;
    if let Some(cfg) = &a.config {
        let f = IntFile::load(cfg)?;
        let c = Collector::open_dir(&f.region_dir, false)?;
        let region = c.store(&a.paths_store)?.region.clone();
        let (mut found, mut wrong, mut unanswered) = (0u64, 0u64, 0u64);
        for fl in &truth.flows {
            let key = query::parse_flow(&fl.flow)?;
            let r = query::path(&region, &key, None)?;
            match r.status {
                "found" if r.path == fl.path => found += 1,
                "found" => {
                    wrong += 1;
                    problems.push(format!(
                        "{}: stored path {:?} (truth {:?})",
                        fl.flow, r.path, fl.path
                    ));
                }
                _ => unanswered += 1,
            }
        }
        paths = serde_json::json!({
            "found_exact": found,
            "wrong": wrong,
            "empty_or_ambiguous": unanswered,
        });
    }
    for p in problems.iter().take(a.show) {
        eprintln!("{p}");
    }
    let ok = problems.is_empty();
    println!(
        "{}",
        serde_json::to_string_pretty(&serde_json::json!({
            "ok": ok,
            "flows": truth.flows.len(),
            "frames": truth.frames.len(),
            "records": lines,
            "flows_exact": exact,
            "flows_missing": missing,
            "flows_in_several_records": split,
            "flows_unexpected": unexpected,
            "differences": problems.len(),
            "paths_from_store": paths,
        }))?
    );
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
