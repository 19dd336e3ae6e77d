//! `dta int-sink` (receive telemetry reports on UDP, run the INT sink, write the DTA stores) and
//! `dta query int ...` (path, hop latency, events, histogram). The sink itself is `dta-int`.

use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use serde::Deserialize;

use dta_collector::{Collector, StoreConfig};
use dta_int::{query, Buckets, EventKind, IntSink, IntSinkConfig, Metric, Notification};
use dta_translator::{Stats, Translator, TranslatorConfig};

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

/// Loopback: reports from elsewhere need an explicit `listen` (and an allow-list).
fn default_listen() -> SocketAddr {
    "127.0.0.1:32766".parse().unwrap()
}

#[derive(Args)]
pub struct IntSinkArgs {
    /// Configuration (TOML): region_dir, listen, [sink], [translator], [[store]].
    #[arg(short, long)]
    config: PathBuf,
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
}

/// Datagrams read from the socket after a stop signal before the final flush (a receive
/// buffer's worth of small reports; a flood cannot delay the exit beyond it).
const MAX_DRAIN_DATAGRAMS: usize = 65_536;

pub fn int_sink(a: IntSinkArgs, stop: Arc<AtomicBool>) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(&a.config)
        .with_context(|| format!("reading {}", a.config.display()))?;
    let mut f: IntFile =
        toml::from_str(&text).with_context(|| format!("in {}", a.config.display()))?;
    if f.region_dir.is_relative() {
        if let Some(p) = a.config.parent() {
            f.region_dir = p.join(&f.region_dir);
        }
    }
    let collector = if f.store.is_empty() {
        Collector::open_dir(&f.region_dir, true)?
    } else {
        Collector::create(&f.region_dir, &f.store, false)?
    };
    let stats = Arc::new(Stats::default());
    let t = Translator::colocated(&f.translator, collector.regions(), stats.clone())?;
    let mut sink = IntSink::new(&f.sink, t).map_err(anyhow::Error::msg)?;
    let export_metrics = dta_export::prom::ExportMetrics::default();
    let _metrics = match a.metrics {
        Some(addr) => {
            let mut reg = dta_export::prom::TranslatorMetrics::new(vec![stats]).registry();
            reg.register_collector(Box::new(dta_export::prom::IntSinkMetrics::new(vec![sink
                .stats()
                .clone()])));
            export_metrics.register(&mut reg);
            let m = dta_export::prom::MetricsServer::start(addr, Arc::new(reg))
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
    let exporter = if targets.is_empty() {
        None
    } else {
        let sub = sink.subscribe(1 << 16);
        Some(dta_export::pipeline::spawn(
            sub.rx,
            targets,
            export_metrics.clone(),
            Default::default(),
        )?)
    };
    let socket = UdpSocket::bind(f.listen).with_context(|| format!("binding {}", f.listen))?;
    socket.set_read_timeout(Some(Duration::from_millis(10)))?;
    eprintln!(
        "int-sink on udp://{} -> {} stores in {}",
        socket.local_addr()?,
        collector.stores().len(),
        f.region_dir.display()
    );
    let printer = a.events.then(|| {
        let sub = sink.subscribe(1 << 16);
        std::thread::spawn(move || {
            for n in sub.rx {
                if let Ok(s) = serde_json::to_string(&n) {
                    println!("{s}");
                }
            }
        })
    });
    let start = Instant::now();
    let now_ns = || {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    };
    let mut buf = vec![0u8; 65536];
    while !stop.load(Ordering::Relaxed)
        && a.duration.is_none_or(|d| start.elapsed().as_secs_f64() < d)
    {
        match socket.recv_from(&mut buf) {
            Ok((n, from)) => {
                if sink.admit(from.ip()) {
                    sink.handle_report(&buf[..n], now_ns());
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        // A signal (SIGTERM/SIGINT sets `stop`): the loop condition decides.
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e.into()),
        }
        sink.tick(now_ns());
    }
    // Stopping: take what the kernel already holds for us (reports sent before the signal),
    // bounded so a flood cannot hold the exit, then flush every flow held.
    socket.set_nonblocking(true)?;
    for _ in 0..MAX_DRAIN_DATAGRAMS {
        match socket.recv_from(&mut buf) {
            Ok((n, from)) => {
                if sink.admit(from.ip()) {
                    sink.handle_report(&buf[..n], now_ns());
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    sink.flush(now_ns());
    for r in collector.regions() {
        r.flush()?;
    }
    eprintln!("{}", serde_json::to_string_pretty(&sink.stats_snapshot())?);
    drop(sink);
    if let Some(p) = printer {
        let _ = p.join();
    }
    if let Some(e) = exporter {
        match e.join() {
            Ok(summary) => eprintln!("exported: {summary:?}"),
            Err(_) => eprintln!("the export thread panicked"),
        }
    }
    Ok(ExitCode::SUCCESS)
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
        #[arg(long, default_value_t = 65536)]
        values: u32,
        /// The sink's postcard_divisor.
        #[arg(long, default_value_t = 1)]
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
