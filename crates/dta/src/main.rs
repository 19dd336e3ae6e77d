// Size: the CLI's argument definitions (clap derives) and their dispatch; each command's work lives
// in its own module (report, query, int_cmd, rdma_cmd, decode_cmd, demo).
//! `dta`: the command line of Direct Telemetry Access. Thin: it parses arguments and calls the
//! library crates.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::{Args, Parser, Subcommand, ValueEnum};

mod check_cmd;
mod cluster_cmd;
mod decode_cmd;
mod export_cmd;
mod generate_cmd;
mod int_cmd;
mod pcap_cmd;
mod rdma_cmd;
#[cfg(feature = "rdma-core")]
mod rnic_cmd;
mod watch_cmd;
mod xdp_cmd;

use dta::config::Config;
use dta::output;
use dta_collector::{query, region_path, Collector};
use dta_translator::{ingest, Shards, Stats, Translator};

#[derive(Parser)]
#[command(
    name = "dta",
    version,
    about = "Direct Telemetry Access: collect switch telemetry into queryable memory"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log format on stderr: text (colours only on a terminal) or json (one object a line).
    #[arg(long, global = true, value_enum, env = dta::ops::LOG_FORMAT_ENV, default_value_t)]
    log_format: dta::ops::LogFormat,
}

#[derive(Subcommand)]
enum Command {
    /// Run the demo: collector, translator and reporters on loopback, then queries (embedded config).
    Demo(DemoArgs),
    /// Create the configured regions and serve queries over HTTP until interrupted.
    Collector(CollectorArgs),
    /// Receive DTA reports and write them into the collector's regions (co-located mode).
    Translator(TranslatorArgs),
    /// Send reports of any primitive at a given rate (the load generator).
    Report(dta::report::ReportArgs),
    /// Query a store.
    Query(QueryArgs),
    /// Validate a configuration (and a cluster map) and print what the collector would create,
    /// with sizes, and what would listen where; nothing is created.
    Check(check_cmd::CheckArgs),
    /// Validate a cluster map or print its assignment of keys to collectors.
    #[command(subcommand)]
    Cluster(cluster_cmd::ClusterCmd),
    /// Show regions' headers and how full they are.
    Inspect(InspectArgs),
    /// Decode a DTA datagram, a RoCEv2 frame or INT / a telemetry report, given as hex (a whole
    /// Ethernet frame or a UDP payload), and print its fields as JSON.
    Decode(decode_cmd::DecodeArgs),
    /// Receive INT telemetry reports on UDP, run the INT sink, write the DTA stores.
    IntSink(int_cmd::IntSinkArgs),
    /// Generate an INT trace as pcap (with ground truth), or replay a pcap over UDP.
    Pcap(pcap_cmd::PcapArgs),
    /// Export the stores to Kafka (Append lists, key snapshots), or read a topic back.
    Export(export_cmd::ExportArgs),
    /// Serve the collector's regions over RoCEv2 with the software responder (no RDMA NIC needed).
    Responder(rdma_cmd::ResponderArgs),
    /// Serve the collector's regions through a real RDMA NIC (rdma-core; built with feature rdma-core).
    #[cfg(feature = "rdma-core")]
    RnicCollector(rnic_cmd::RnicArgs),
    /// Print push notifications (the writes of reports flagged immediate) as JSON lines.
    Watch(watch_cmd::WatchArgs),
    /// Write the man pages or the shell completions of this CLI into a directory (packaging).
    #[command(hide = true, subcommand)]
    Generate(generate_cmd::Generate),
}

#[derive(Args, Clone)]
pub(crate) struct ConfigArgs {
    /// Configuration file (TOML); without it, the embedded example configuration.
    #[arg(short, long)]
    config: Option<PathBuf>,
    /// Override the configuration's region directory.
    #[arg(long)]
    region_dir: Option<PathBuf>,
}

impl ConfigArgs {
    pub(crate) fn load(&self) -> anyhow::Result<Config> {
        let mut cfg = match &self.config {
            Some(p) => Config::load(p)?,
            None => Config::embedded(),
        };
        if let Some(d) = &self.region_dir {
            cfg.region_dir = d.clone();
        }
        Ok(cfg)
    }
}

#[derive(Args)]
struct CollectorArgs {
    #[command(flatten)]
    config: ConfigArgs,
    /// A cluster map (docs/scale-out.md): also answer `/cluster/...` HTTP queries, asking the
    /// owners of each key (this collector's regions, or peers' HTTP APIs).
    #[arg(long, value_name = "MAP", requires = "name")]
    cluster: Option<PathBuf>,
    /// With --cluster: this collector's name in the map.
    #[arg(long, requires = "cluster")]
    name: Option<String>,
}

#[derive(Args)]
struct DemoArgs {
    /// Keep the regions here instead of in a temporary directory.
    #[arg(long)]
    region_dir: Option<PathBuf>,
    /// Flows per primitive.
    #[arg(long, default_value_t = 1000)]
    flows: u32,
    /// Print the answers as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct TranslatorArgs {
    #[command(flatten)]
    config: ConfigArgs,
    /// Override the listen address.
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// Translator threads sharing the port with SO_REUSEPORT (co-located mode; overrides the
    /// configuration's `threads`). One per core.
    #[arg(long)]
    threads: Option<usize>,
    /// Stop after this many seconds (default: run until interrupted).
    #[arg(long)]
    duration: Option<f64>,
    /// Seconds between progress lines on stderr (0 = none).
    #[arg(long, default_value_t = 5.0)]
    stats_interval: f64,
    /// Print the final counters as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Serve Prometheus metrics at http://ADDR/metrics: PORT (on 127.0.0.1) or IP:PORT; a
    /// non-loopback IP needs a token (DTA_HTTP_TOKEN_FILE or DTA_HTTP_TOKEN).
    #[arg(long, value_parser = dta_http::parse_listen_addr)]
    metrics: Option<SocketAddr>,
    #[command(flatten)]
    rdma: rdma_cmd::RdmaArgs,
    #[command(flatten)]
    xdp: xdp_cmd::XdpArgs,
    /// A cluster map (docs/scale-out.md): serve the collectors named by --collectors, each on
    /// its own translator address of the map, into its own region directory, with its own
    /// sequence spaces and write meter (its `nic_budget`). Shared-memory collectors only.
    #[arg(long, value_name = "MAP", requires = "collectors", conflicts_with_all = ["listen", "region_dir"])]
    cluster: Option<PathBuf>,
    /// With --cluster: the collectors this translator serves (comma-separated names).
    #[arg(long, value_delimiter = ',', requires = "cluster")]
    collectors: Vec<String>,
}

#[derive(Args)]
struct QueryArgs {
    #[command(subcommand)]
    what: QueryWhat,
}

#[derive(Args, Clone)]
struct StoreSel {
    /// The store's name (its region is REGION_DIR/NAME.region).
    #[arg(short, long)]
    store: Option<String>,
    /// A region file, instead of --store.
    #[arg(long)]
    region: Option<PathBuf>,
    #[command(flatten)]
    config: ConfigArgs,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
    /// A cluster map (docs/scale-out.md): ask the collector(s) owning the key, through their
    /// region directory when readable here, else their HTTP API (token from DTA_HTTP_TOKEN_FILE
    /// or DTA_HTTP_TOKEN). Comma-separated keys are a batch, the owners asked in parallel.
    #[arg(long, value_name = "MAP", conflicts_with = "region")]
    cluster: Option<PathBuf>,
}

impl StoreSel {
    fn open(&self) -> anyhow::Result<(dta_store::Region, Option<dta_collector::StoreConfig>)> {
        let cfg = self.config.load()?;
        let (path, store_cfg) = match (&self.region, &self.store) {
            (Some(p), _) => (p.clone(), None),
            (None, Some(name)) => (
                region_path(&cfg.region_dir, name),
                cfg.store.iter().find(|s| &s.name == name).cloned(),
            ),
            (None, None) => bail!("say which store: --store NAME or --region FILE"),
        };
        let region = dta_store::Region::open_read_only(&path)
            .with_context(|| format!("opening region {}", path.display()))?;
        Ok((region, store_cfg))
    }
}

#[derive(Subcommand)]
enum QueryWhat {
    /// INT sink queries: path, hop-latency, events, histogram.
    #[command(subcommand)]
    Int(int_cmd::IntQuery),
    /// The monitoring systems' queries (docs/systems.md): `dta query marple lossy ...`.
    #[command(flatten)]
    System(dta::systems_cmd::SystemQuery),
    /// Key-Write: the value stored for a key (plurality vote over N slots).
    Kw {
        #[command(flatten)]
        sel: StoreSel,
        /// The key: 0xHEX, a decimal integer, an IPv4 address, or SRC:SPORT-DST:DPORT/PROTO.
        #[arg(short, long)]
        key: String,
        /// Slots to read, 1..=the store's N (default: the store's N, from its header).
        #[arg(short = 'n', long)]
        redundancy: Option<u8>,
        /// Copies that must agree (consensus threshold T).
        #[arg(short, long, default_value_t = 1)]
        threshold: u8,
    },
    /// Key-Increment: a key's count (count-min estimate).
    Ki {
        #[command(flatten)]
        sel: StoreSel,
        #[arg(short, long)]
        key: String,
        /// Counters to take the minimum of: the store's N (its header's, the default); an N
        /// other than the one the reporters used reads a wrong count.
        #[arg(short = 'n', long)]
        redundancy: Option<u8>,
    },
    /// Postcarding: the per-hop values (e.g. the path) of a flow.
    Postcard {
        #[command(flatten)]
        sel: StoreSel,
        #[arg(short, long)]
        key: String,
        /// Size of the value set V = 0..VALUES (default: the store's `values`, else 2^18).
        #[arg(long)]
        values: Option<u32>,
    },
    /// Append: read entries of a list.
    List {
        #[command(flatten)]
        sel: StoreSel,
        #[arg(short, long, default_value_t = 0)]
        list: u32,
        /// Absolute index to read from (default: the oldest entry still held).
        #[arg(long)]
        tail: Option<u64>,
        /// Most entries to print.
        #[arg(long, default_value_t = 32)]
        max: usize,
    },
    /// Sketch-Merge: a key's count estimate (Count-Min) or the cardinality (HyperLogLog).
    Sketch {
        #[command(flatten)]
        sel: StoreSel,
        #[arg(short, long)]
        key: Option<String>,
    },
}

#[derive(Args)]
struct InspectArgs {
    /// Region files to inspect (default: every region of the configuration's region directory).
    regions: Vec<PathBuf>,
    #[command(flatten)]
    config: ConfigArgs,
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum HeaderFormat {
    Short,
    Long,
}

fn main() -> ExitCode {
    // Like other Unix filters: when the reader of our output goes away (`dta ... | head`), exit
    // quietly instead of failing to print.
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    dta::ops::init_logging(cli.log_format);
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("dta: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Demo(a) => {
            let ok = dta::demo::run(&dta::demo::DemoOptions {
                region_dir: a.region_dir,
                flows: a.flows,
                json: a.json,
            })?;
            Ok(if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Command::Collector(a) => collector(a),
        Command::Translator(a) => translator(a),
        Command::Report(a) => dta::report::run(a),
        Command::Query(q) => query_cmd(q),
        Command::Check(a) => check_cmd::run(a),
        Command::Cluster(c) => cluster_cmd::run(c),
        Command::Inspect(a) => inspect(a),
        Command::Decode(a) => decode_cmd::decode(a),
        Command::IntSink(a) => int_cmd::int_sink(a, stop_on_ctrl_c()?),
        Command::Pcap(a) => pcap_cmd::run(a),
        Command::Export(a) => export_cmd::run(a, stop_on_ctrl_c),
        Command::Responder(a) => rdma_cmd::responder(a, stop_on_ctrl_c()?),
        #[cfg(feature = "rdma-core")]
        Command::RnicCollector(a) => rnic_cmd::run(a, stop_on_ctrl_c()?),
        Command::Watch(a) => watch_cmd::watch(a, &*stop_on_ctrl_c()?),
        Command::Generate(g) => generate_cmd::run(g, <Cli as clap::CommandFactory>::command()),
    }
}

fn stop_on_ctrl_c() -> anyhow::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    ctrlc::set_handler(move || s.store(true, Ordering::Relaxed))
        .context("installing Ctrl-C handler")?;
    Ok(stop)
}

/// How long `dta collector` lets in-flight HTTP requests finish after SIGTERM/SIGINT.
const COLLECTOR_DRAIN: Duration = Duration::from_secs(5);
/// How often `dta collector` checks that every served region is still whole.
const COLLECTOR_CHECK: Duration = Duration::from_secs(1);

/// The processes whose counters the web console shows: `[collector] translator_metrics` and
/// `int_sink_metrics` (an address as `--metrics` takes it; empty: not configured).
fn console_peers(
    c: &dta_collector::CollectorConfig,
) -> anyhow::Result<Vec<dta_http::console::Peer>> {
    [
        ("translator", "translator_metrics", &c.translator_metrics),
        ("int-sink", "int_sink_metrics", &c.int_sink_metrics),
    ]
    .into_iter()
    .map(|(name, key, addr)| {
        let addr = match addr.as_str() {
            "" => None,
            a => Some(
                dta_http::parse_listen_addr(a)
                    .map_err(|e| anyhow::anyhow!("[collector] {key}: {e}"))?,
            ),
        };
        Ok(dta_http::console::Peer {
            name: name.into(),
            addr,
        })
    })
    .collect()
}

fn collector(args: CollectorArgs) -> anyhow::Result<ExitCode> {
    let a = &args.config;
    let cfg = a.load()?;
    let cluster_map = args
        .cluster
        .as_deref()
        .map(|p| {
            dta_cluster::ClusterMap::load(p).with_context(|| format!("cluster map {}", p.display()))
        })
        .transpose()?;
    let started = Instant::now();
    let mut http_opts = dta_collector::http::options(&cfg.collector)?;
    let console_peers = console_peers(&cfg.collector)?;
    // Takes the directory's collector lock first: a second collector is refused here.
    let c = Collector::create(&cfg.region_dir, &cfg.store, cfg.collector.force)?;
    for s in c.stores() {
        eprintln!(
            "store {:<12} {:<14} {}",
            s.name,
            format!("{:?}", s.region.header().kind),
            region_path(c.dir(), &s.name).display()
        );
    }
    for b in c.bad() {
        eprintln!(
            "store {:<12} {:<14} {}: {}",
            b.name,
            "UNAVAILABLE",
            b.path.display(),
            b.reason
        );
    }
    // SIGTERM, SIGINT (and SIGHUP) set `stop`; the handler restarts interrupted system calls.
    let stop = stop_on_ctrl_c()?;
    let c = Arc::new(c);
    http_opts.ready = dta::ops::collector_ready(c.clone());
    let cluster = match (cluster_map, &args.name) {
        (Some(m), Some(name)) => Some(Arc::new(
            dta_collector::cluster::ClusterQuery::new(Arc::new(m), http_opts.token.clone())
                .with_local(name, c.clone())
                .map_err(anyhow::Error::msg)?,
        )),
        _ => None,
    };
    if cluster.is_some() && cfg.collector.http.is_empty() {
        bail!("--cluster answers over the HTTP API: set [collector] http");
    }
    if cfg.collector.http.is_empty() {
        eprintln!("collector ready (no HTTP API); Ctrl-C or SIGTERM to stop");
        let mut checked = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(100));
            if checked.elapsed() >= COLLECTOR_CHECK {
                c.check_stores();
                checked = Instant::now();
            }
        }
    } else {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        let served = c.clone();
        rt.block_on(async move {
            let (tx, mut rx) = tokio::sync::watch::channel(false);
            let shutdown = async move {
                let _ = rx.wait_for(|stopping| *stopping).await;
            };
            // The query API, the INT queries, and the web console over them.
            let routes = dta_collector::http::router_with(served.clone(), cluster)
                .merge(dta::int_http::router(served.clone()))
                .merge(dta_http::console::router(
                    console_peers,
                    http_opts.token.clone(),
                ));
            let server =
                dta_collector::http::serve_router(routes, &cfg.collector.http, http_opts, shutdown);
            tokio::pin!(server);
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            let mut checked = Instant::now();
            loop {
                tokio::select! {
                    r = &mut server => return r,
                    _ = tick.tick() => {}
                }
                if checked.elapsed() >= COLLECTOR_CHECK {
                    served.check_stores();
                    checked = Instant::now();
                }
                if stop.load(Ordering::Relaxed) {
                    break;
                }
            }
            // Stop accepting; requests in flight get COLLECTOR_DRAIN to finish.
            let _ = tx.send(true);
            match tokio::time::timeout(COLLECTOR_DRAIN, &mut server).await {
                Ok(r) => r,
                Err(_) => {
                    tracing::warn!(
                        "requests still in flight after {COLLECTOR_DRAIN:?}; closing them"
                    );
                    Ok(())
                }
            }
        })?;
    }
    let unavailable = c.check_stores();
    let flush_failed = c.flush();
    eprintln!(
        "collector stopped after {:.1} s: {} stores served, {unavailable} unavailable, regions \
         flushed ({flush_failed} failed)",
        started.elapsed().as_secs_f64(),
        c.status().iter().filter(|s| s.available.is_ok()).count(),
    );
    for st in c.status() {
        // A region lost at this point is listed as such, it does not fail the exit.
        let inspected = st.available.and_then(|()| {
            let s = c.store(&st.name).map_err(|e| e.to_string())?;
            let i = query::inspect(&s.region, &st.path.display().to_string())
                .map_err(|e| e.to_string())?;
            s.check().map_err(|e| e.to_string())?;
            Ok(i)
        });
        match inspected {
            Ok(i) => {
                let appended = i
                    .appended
                    .map(|n| format!(", {n} entries appended"))
                    .unwrap_or_default();
                eprintln!(
                    "  store {:<12} {:.2}% of words non-zero{appended}",
                    st.name,
                    i.fill * 100.0
                );
            }
            Err(reason) => eprintln!("  store {:<12} unavailable: {reason}", st.name),
        }
    }
    Ok(if flush_failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn translator(a: TranslatorArgs) -> anyhow::Result<ExitCode> {
    if let Some(map) = &a.cluster {
        return cluster_translator(&a, map);
    }
    let mut cfg = a.config.load()?;
    if let Some(l) = a.listen {
        cfg.translator.listen = l;
    }
    if let Some(n) = a.threads {
        cfg.translator.threads = n;
        cfg.translator
            .validate()
            .map_err(|e| anyhow::anyhow!("--threads {n}: {e}"))?;
    }
    if cfg.translator.threads > 1 && (a.rdma.rdma.is_some() || a.xdp.xdp.is_some()) {
        bail!(
            "--threads {}: several translator threads are supported in the co-located mode only \
             (the RoCEv2 sink has one queue pair per collector; the XDP translator runs in the \
             driver, its userspace half on one thread)",
            cfg.translator.threads
        );
    }
    // One translator per port: with SO_REUSEPORT a second one would silently take a share.
    ingest::refuse_shared_port(cfg.translator.listen.port())
        .with_context(|| format!("listening on {}", cfg.translator.listen))?;
    if a.rdma.rdma.is_some() {
        return rdma_cmd::translator(&cfg, &a.rdma, stop_on_ctrl_c()?, a.duration, a.json);
    }
    if a.xdp.xdp.is_some() {
        return xdp_cmd::translator(
            &cfg,
            &a.xdp,
            a.config.config.clone(),
            stop_on_ctrl_c()?,
            a.duration,
            a.json,
        );
    }
    let stats = colocated(&cfg, &a, stop_on_ctrl_c()?, None)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&stats)?);
    } else {
        eprintln!("{}", serde_json::to_string_pretty(&stats)?);
    }
    Ok(ExitCode::SUCCESS)
}

/// `dta translator --cluster MAP --collectors A,B`: one co-located translator per collector
/// (its listen address, region directory and write budget from the map), each on its own
/// threads, all stopped together; the final counters per collector.
fn cluster_translator(a: &TranslatorArgs, map_path: &std::path::Path) -> anyhow::Result<ExitCode> {
    let map = dta_cluster::ClusterMap::load(map_path)
        .with_context(|| format!("cluster map {}", map_path.display()))?;
    if a.rdma.rdma.is_some() || a.xdp.xdp.is_some() {
        bail!(
            "--cluster serves shared-memory collectors; for an RDMA or XDP collector run one \
             `dta translator --listen ADDR` per collector, ADDR its translator address in the map"
        );
    }
    let base = a.config.load()?;
    let mut cfgs = vec![];
    for name in &a.collectors {
        let c = map
            .collector(name)
            .with_context(|| format!("the cluster map names no collector {name:?}"))?;
        if c.mode != dta_cluster::Mode::Shm {
            bail!("collector {name} is an RDMA collector; --cluster serves shared-memory ones");
        }
        let Some(dir) = &c.region_dir else {
            bail!("collector {name} has no region_dir in the cluster map");
        };
        let mut cfg = base.clone();
        cfg.region_dir = dir.clone();
        cfg.translator.listen = c.translator;
        if let Some(n) = a.threads {
            cfg.translator.threads = n;
        }
        if c.nic_budget > 0 {
            cfg.translator.flow_control.write_budget = c.nic_budget;
            cfg.translator
                .flow_control
                .validate()
                .map_err(anyhow::Error::msg)
                .with_context(|| format!("collector {name}'s nic_budget"))?;
        }
        ingest::refuse_shared_port(c.translator.port())
            .with_context(|| format!("collector {name}: listening on {}", c.translator))?;
        cfgs.push((name.clone(), cfg));
    }
    if a.metrics.is_some() {
        bail!("--metrics with --cluster: not supported (one metrics server per translator)");
    }
    let stop = stop_on_ctrl_c()?;
    let results: Vec<(String, anyhow::Result<serde_json::Value>)> = std::thread::scope(|s| {
        let hs: Vec<_> = cfgs
            .iter()
            .map(|(name, cfg)| {
                let stop = stop.clone();
                let h = s.spawn(move || colocated(cfg, a, stop.clone(), Some(name)));
                (name.clone(), h)
            })
            .collect();
        hs.into_iter()
            .map(|(n, h)| {
                let r = h
                    .join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("translator thread panicked")));
                if r.is_err() {
                    // One collector's translator failing stops the others.
                    stop.store(true, Ordering::Relaxed);
                }
                (n, r)
            })
            .collect()
    });
    let mut all = serde_json::Map::new();
    for (n, r) in results {
        all.insert(n.clone(), r.with_context(|| format!("collector {n}"))?);
    }
    let v = serde_json::Value::Object(all);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        eprintln!("{}", serde_json::to_string_pretty(&v)?);
    }
    Ok(ExitCode::SUCCESS)
}

/// The co-located translator of `cfg` until `stop` (or `--duration`); its final counters.
/// `label`: the collector's name when one process serves several.
fn colocated(
    cfg: &Config,
    a: &TranslatorArgs,
    stop: Arc<AtomicBool>,
    label: Option<&str>,
) -> anyhow::Result<serde_json::Value> {
    // One writer per region directory (two would race on slots and Append heads).
    let _writer = dta_store::lock::InstanceLock::acquire_in(
        &cfg.region_dir,
        dta_store::lock::WRITER_LOCK,
        &format!("region directory {} as writer", cfg.region_dir.display()),
    )?;
    let collector = Collector::open_dir(&cfg.region_dir, true)
        .with_context(|| "start the collector first (`dta collector`), it creates the regions")?;
    if collector.stores().is_empty() {
        bail!(
            "no regions in {}: start `dta collector` with this configuration first",
            cfg.region_dir.display()
        );
    }
    let threads = cfg.translator.threads.max(1);
    let classified = cfg.translator.classifier_enabled();
    // One `Stats` per translator thread, and the classifier's (its shed and refused datagrams).
    let all_stats: Vec<Arc<Stats>> = (0..threads + usize::from(classified))
        .map(|_| Arc::new(Stats::default()))
        .collect();
    // One translator per thread over the same regions; Postcarding flows, Append lists and
    // sketches each owned by one of them (dta_translator::shard).
    let shards = Shards::new(threads, SHARD_INBOX);
    // One write meter for the collector, shared by its translator threads (docs/flow-control.md).
    let meter = Arc::new(dta_translator::Meter::new(&cfg.translator.flow_control));
    // The rules (docs/rules.md), compiled against the stores being served, one set shared by
    // the threads and replaced on reload; flagged reports announced on the directory's ring.
    let headers: Vec<dta_store::Header> = collector
        .regions()
        .iter()
        .map(|r| r.header().clone())
        .collect();
    let rules = dta_translator::rules::Rules::new(cfg.compile_rules_for(&headers, 0)?);
    let ring = Arc::new(dta_store::notify::NotifyRing::open_or_create(
        &cfg.region_dir,
        dta_store::notify::DEFAULT_CAPACITY,
    )?);
    let mut ts = all_stats[..threads]
        .iter()
        .enumerate()
        .map(|(i, stats)| {
            let mut t = Translator::colocated(&cfg.translator, collector.regions(), stats.clone())?
                .with_shard(shards.shard(i))
                .with_meter(meter.clone())
                .with_rules(rules.clone(), cfg.translator.rule_state_entries);
            t.sinks_mut().set_ring(ring.clone());
            for st in &cfg.store {
                if let Some(allow) = &st.allow {
                    t.set_store_allow(&st.name, allow.clone())?;
                }
            }
            Ok(t)
        })
        .collect::<Result<Vec<_>, dta_translator::BuildError>>()?;
    // Behind the classifier one socket is read by one thread; without it every translator
    // thread reads its own SO_REUSEPORT socket.
    let sockets = ingest::bind_group(
        cfg.translator.listen,
        if classified { 1 } else { threads },
        cfg.translator.recv_buffer,
    )
    .with_context(|| format!("binding {}", cfg.translator.listen))?;
    // The metrics server answers once the UDP sockets are bound: a scrape that succeeds means
    // reports sent from then on are received (queued by the kernel until the threads start).
    let _metrics = match a.metrics {
        Some(addr) => {
            let reg = dta_export::prom::TranslatorMetrics::new(all_stats.clone()).registry();
            let opts = dta::ops::metrics_options(dta::ops::regions_ready(collector.regions()))?;
            let m = dta_export::prom::MetricsServer::start_with(addr, Arc::new(reg), opts)
                .with_context(|| format!("metrics server on {addr}"))?;
            eprintln!("metrics on http://{}/metrics", m.local_addr());
            Some(m)
        }
        None => None,
    };
    let lanes = if classified {
        Some(dta_translator::classify::Lanes::from_config(
            threads,
            &cfg.translator,
        )?)
    } else {
        None
    };
    eprintln!(
        "translator{} on udp://{} ({threads} thread{}{}) -> {} stores in {}",
        label
            .map(|l| format!(" of collector {l}"))
            .unwrap_or_default(),
        sockets[0].local_addr()?,
        if threads == 1 { "" } else { "s" },
        match &lanes {
            Some(l) => format!(
                " behind the priority classifier, {} MiB of queue buffers",
                l.pool_bytes() >> 20
            ),
            None => String::new(),
        },
        collector.stores().len(),
        cfg.region_dir.display()
    );
    watch_cmd::reload_on_sighup();
    if let Some(d) = a.duration {
        let s = stop.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs_f64(d));
            s.store(true, Ordering::Relaxed);
        });
    }
    std::thread::scope(|scope| -> anyhow::Result<()> {
        if let Some(path) = a.config.config.clone() {
            let (rules, headers, stop) = (&rules, &headers, &stop);
            scope.spawn(move || watch_cmd::reload_loop(path, rules, headers, stop));
        }
        if a.stats_interval > 0.0 {
            let (all_stats, stop) = (all_stats.clone(), stop.clone());
            scope.spawn(move || {
                let start = Instant::now();
                let mut last = 0u64;
                let mut next = Duration::from_secs_f64(a.stats_interval);
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(50));
                    if start.elapsed() >= next {
                        let stats = Stats::sum(&all_stats);
                        let total: u64 = stats
                            .reports
                            .iter()
                            .map(|c| c.load(Ordering::Relaxed))
                            .sum();
                        eprintln!(
                            "{}{:>8.1}s reports {:>12} ({:>10.0}/s) rejected {}",
                            label.map(|l| format!("{l}: ")).unwrap_or_default(),
                            start.elapsed().as_secs_f64(),
                            total,
                            (total - last) as f64 / a.stats_interval,
                            stats.total_rejected()
                        );
                        last = total;
                        next += Duration::from_secs_f64(a.stats_interval);
                    }
                }
            });
        }
        match &lanes {
            Some(lanes) => ingest::run_classified(
                &mut ts,
                &sockets[0],
                lanes,
                &cfg.translator.allow,
                &all_stats[threads],
                cfg.translator.recv_batch,
                &stop,
            )?,
            None => ingest::run_threads(&mut ts, &sockets, cfg.translator.recv_batch, &stop)?,
        }
        Ok(())
    })?;
    for r in collector.regions() {
        r.flush()?;
    }
    let stats = Stats::sum(&all_stats);
    let mut snap = serde_json::to_value(stats.snapshot())?;
    snap["rules"] = serde_json::to_value(rules.stats().snapshot())?;
    Ok(snap)
}

/// Reports a translator thread's inbox holds for the others ([`Shards`]).
const SHARD_INBOX: usize = 8192;

fn key_len_of(region: &dta_store::Region) -> Option<usize> {
    query::key_len(region.header())
}

/// The result of a query on `region`, unless the region was found lost meanwhile (its file
/// truncated under the mapping reads as zeros): then that error, which names the file.
fn answered<T, E>(region: &dta_store::Region, r: Result<T, E>) -> anyhow::Result<T>
where
    E: std::error::Error + Send + Sync + 'static,
{
    region.check()?;
    r.with_context(|| format!("region {}", region.path().display()))
}

fn query_cmd(q: QueryArgs) -> anyhow::Result<ExitCode> {
    if let Some(code) = cluster_cmd::query(&q.what)? {
        return Ok(code);
    }
    let mut out = std::io::stdout().lock();
    match q.what {
        QueryWhat::Int(iq) => int_cmd::query_int(iq),
        QueryWhat::System(sq) => dta::systems_cmd::query(sq),
        QueryWhat::Kw {
            sel,
            key,
            redundancy,
            threshold,
        } => {
            let (region, _) = sel.open()?;
            let key = query::parse_key(&key, key_len_of(&region))?;
            let r = answered(
                &region,
                query::key_write(&region, &key, redundancy, threshold),
            )?;
            output::print(&mut out, sel.json, &r, output::key_write)?;
            Ok(if r.status == "found" {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        QueryWhat::Ki {
            sel,
            key,
            redundancy,
        } => {
            let (region, _) = sel.open()?;
            let key = query::parse_key(&key, key_len_of(&region))?;
            let r = answered(&region, query::key_increment(&region, &key, redundancy))?;
            output::print(&mut out, sel.json, &r, output::key_increment)?;
            Ok(ExitCode::SUCCESS)
        }
        QueryWhat::Postcard { sel, key, values } => {
            let (region, store_cfg) = sel.open()?;
            let key = query::parse_key(&key, key_len_of(&region))?;
            let values = values
                .or(store_cfg.and_then(|c| c.values))
                .unwrap_or(dta_wire::DEFAULT_POSTCARD_VALUES);
            let r = answered(&region, query::postcard(&region, &key, values))?;
            output::print(&mut out, sel.json, &r, output::postcard)?;
            Ok(if r.status == "found" {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        QueryWhat::List {
            sel,
            list,
            tail,
            max,
        } => {
            let (region, _) = sel.open()?;
            let r = answered(&region, query::list(&region, list, tail, max))?;
            output::print(&mut out, sel.json, &r, output::list)?;
            Ok(ExitCode::SUCCESS)
        }
        QueryWhat::Sketch { sel, key } => {
            let (region, _) = sel.open()?;
            let key = key
                .map(|k| query::parse_key(&k, key_len_of(&region)))
                .transpose()?;
            let r = answered(&region, query::sketch(&region, key.as_deref()))?;
            output::print(&mut out, sel.json, &r, output::sketch)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Print every region that opens; an error line for each that does not (exit 1 if any).
fn inspect(a: InspectArgs) -> anyhow::Result<ExitCode> {
    let mut regions = vec![];
    let mut bad: Vec<(PathBuf, String)> = vec![];
    if a.regions.is_empty() {
        let cfg = a.config.load()?;
        let c = Collector::open_dir(&cfg.region_dir, false)?;
        for s in c.stores() {
            regions.push((region_path(c.dir(), &s.name), s.region.clone()));
        }
        bad.extend(c.bad().iter().map(|b| (b.path.clone(), b.reason.clone())));
    } else {
        for p in &a.regions {
            match dta_store::Region::open_read_only(p) {
                Ok(r) => regions.push((p.clone(), Arc::new(r))),
                Err(e) => bad.push((p.clone(), e.to_string())),
            }
        }
    }
    let mut all = vec![];
    for (p, region) in &regions {
        // Checked after reading: a region truncated while read was read as zeros.
        match query::inspect(region, &p.display().to_string())
            .map_err(|e| e.to_string())
            .and_then(|i| region.check().map(|()| i).map_err(|e| e.to_string()))
        {
            Ok(i) => all.push(i),
            Err(e) => bad.push((p.clone(), e)),
        }
    }
    let mut out = std::io::stdout().lock();
    if a.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&all)?)?;
    } else {
        for i in &all {
            output::inspection(&mut out, i)?;
        }
    }
    out.flush()?;
    for (p, e) in &bad {
        eprintln!("dta: error: region {}: {e}", p.display());
    }
    Ok(if bad.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
