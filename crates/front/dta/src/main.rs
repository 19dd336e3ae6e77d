// Size: the CLI's argument definitions (clap derives) and their dispatch; each command's work lives
// in its own module (report, query, int_cmd, rdma_cmd, decode_cmd, demo).
//! `dta`: the command line of Direct Telemetry Access. Thin: it parses arguments and calls the
//! library crates.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

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

use dta::output;
use dta_collector::{query, region_path, Collector};
use dta_node::config::Config;

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
    #[arg(long, global = true, value_enum, env = dta_node::ops::LOG_FORMAT_ENV, default_value_t)]
    log_format: LogFormat,
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

    /// The region directory and stores of the configuration, of whichever service it is for
    /// (a node's or an INT sink's, [`dta_node::config::ServiceFile`]): what queries read.
    pub(crate) fn regions(&self) -> anyhow::Result<(PathBuf, Vec<dta_collector::StoreConfig>)> {
        let (dir, stores) = match &self.config {
            Some(p) => {
                let f = dta_node::config::ServiceFile::load(p)?;
                (f.region_dir().to_path_buf(), f.stores().to_vec())
            }
            None => {
                let c = Config::embedded();
                (c.region_dir, c.store)
            }
        };
        Ok((self.region_dir.clone().unwrap_or(dir), stores))
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
    /// Kernel-bypass receive: an XDP program on this interface redirects the datagrams to the
    /// listen port into AF_XDP sockets, one per receive queue and translator thread (checking
    /// `allow` in the driver); the rest still reaches the UDP socket. Falls back to the socket,
    /// with a warning, where AF_XDP is unavailable (docs/xdp.md "AF_XDP receive").
    #[arg(long, value_name = "IFACE", conflicts_with_all = ["xdp", "rdma", "cluster"])]
    af_xdp: Option<String>,
    /// With --af-xdp: attach the redirect program in generic (SKB) mode.
    #[arg(long, requires = "af_xdp")]
    af_xdp_generic: bool,
    /// With --af-xdp: busy-poll the AF_XDP sockets for up to USECS microseconds when their
    /// rings are empty (SO_PREFER_BUSY_POLL): the translator thread runs the driver's receive itself.
    /// Refused at start where the kernel refuses it (needs CAP_NET_ADMIN).
    #[arg(long, value_name = "USECS", requires = "af_xdp", value_parser = clap::value_parser!(u32).range(1..=dta_node::af_xdp::MAX_BUSY_POLL_US as i64))]
    af_xdp_busy_poll: Option<u32>,
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
    /// or DTA_HTTP_TOKEN). Comma-separated keys are a batch, the owners asked in parallel, each
    /// within 5 s; every key's answer or error (naming the collector, "timed out" or "refused")
    /// is printed. Exit status 0 when every key is found, 1 when one is not, 2 when one could
    /// not be answered.
    #[arg(long, value_name = "MAP", conflicts_with = "region")]
    cluster: Option<PathBuf>,
}

impl StoreSel {
    fn open(&self) -> anyhow::Result<(dta_store::Region, Option<dta_collector::StoreConfig>)> {
        let (region_dir, stores) = self.config.regions()?;
        let (path, store_cfg) = match (&self.region, &self.store) {
            (Some(p), _) => (p.clone(), None),
            (None, Some(name)) => (
                region_path(&region_dir, name),
                stores.iter().find(|s| &s.name == name).cloned(),
            ),
            (None, None) => bail!("say which store: --store NAME or --region FILE"),
        };
        if let (None, Some(name), false) = (&self.region, &self.store, path.exists()) {
            return Err(dta_collector::collector::no_such_store(
                name,
                &region_dir,
                stores.iter().map(|s| s.name.as_str()),
            )
            .into());
        }
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
    #[command(visible_aliases = ["key-write", "key_write"])]
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
    #[command(visible_aliases = ["key-increment", "key_increment"])]
    Ki {
        #[command(flatten)]
        sel: StoreSel,
        /// The key: 0xHEX, a decimal integer, an IPv4 address, or SRC:SPORT-DST:DPORT/PROTO.
        #[arg(short, long)]
        key: String,
        /// Counters to take the minimum of: the store's N (its header's, the default); an N
        /// other than the one the reporters used reads a wrong count.
        #[arg(short = 'n', long)]
        redundancy: Option<u8>,
        /// A store kept in time windows: current (the default), all, last:DURATION (e.g.
        /// last:5m) or at:UNIX_MS; the answer lists the windows it covers. A cumulative store
        /// takes only all.
        #[arg(long, value_parser = dta_store::WindowSel::parse)]
        window: Option<dta_store::WindowSel>,
    },
    /// Postcarding: the per-hop values (e.g. the path) of a flow.
    #[command(visible_aliases = ["postcarding"])]
    Postcard {
        #[command(flatten)]
        sel: StoreSel,
        /// The key: 0xHEX, a decimal integer, an IPv4 address, or SRC:SPORT-DST:DPORT/PROTO.
        #[arg(short, long)]
        key: String,
        /// Size of the value set V = 0..VALUES (default: the store's `values`, else 2^18).
        #[arg(long)]
        values: Option<u32>,
    },
    /// Append: read entries of a list.
    #[command(visible_aliases = ["append"])]
    List {
        #[command(flatten)]
        sel: StoreSel,
        /// The list (0..the store's lists).
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
    #[command(visible_aliases = ["sketch-merge", "sketch_merge"])]
    Sketch {
        #[command(flatten)]
        sel: StoreSel,
        /// Count-Min: the key whose count to estimate (as --key of `query kw`); HyperLogLog
        /// takes none (the answer is the cardinality).
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
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum HeaderFormat {
    Short,
    Long,
}

/// How log events are written to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
enum LogFormat {
    /// One line per event; colours only when stderr is a terminal (and `NO_COLOR` is unset).
    #[default]
    Text,
    /// One JSON object per line: `timestamp`, `level`, `target` and the event's fields
    /// (`message` among them).
    Json,
}

fn main() -> ExitCode {
    // Like other Unix filters: when the reader of our output goes away (`dta ... | head`), exit
    // quietly instead of failing to print.
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = parse();
    dta_node::ops::init_logging(match cli.log_format {
        LogFormat::Text => dta_node::ops::LogFormat::Text,
        LogFormat::Json => dta_node::ops::LogFormat::Json,
    });
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            let said = dta_log::say_once(e.chain().map(|c| c.to_string()));
            eprintln!("dta: error: {}", dta_log::elide(&said));
            ExitCode::from(2)
        }
    }
}

/// The arguments, with a version line that says what this build left out.
fn parse() -> Cli {
    use clap::{CommandFactory, FromArgMatches};
    let version: &'static str = Box::leak(dta_node::ops::build_note().into_boxed_str());
    let matches = Cli::command().version(version).get_matches();
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
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
    dta_node::signals::stop_on_signals()
}

fn collector(args: CollectorArgs) -> anyhow::Result<ExitCode> {
    let cfg = args.config.load()?;
    let cluster = match (&args.cluster, &args.name) {
        (Some(p), Some(name)) => Some((
            dta_cluster::ClusterMap::load(p)
                .with_context(|| format!("cluster map {}", p.display()))?,
            name.clone(),
        )),
        _ => None,
    };
    // SIGTERM, SIGINT (and SIGHUP) set `stop`; the handler restarts interrupted system calls.
    let stop = dta_node::signals::stop_on_signals()?;
    let s = dta_node::collector::run(&cfg, cluster, &stop)?;
    eprintln!(
        "collector stopped after {:.1} s: {} stores served, {} unavailable, regions flushed ({} \
         failed)",
        s.seconds,
        s.stores.iter().filter(|(_, r)| r.is_ok()).count(),
        s.unavailable,
        s.flush_failed,
    );
    for (name, inspected) in &s.stores {
        match inspected {
            Ok(i) => {
                let appended = i
                    .appended
                    .map(|n| format!(", {n} entries appended"))
                    .unwrap_or_default();
                eprintln!(
                    "  store {name:<12} {:.2}% of words non-zero{appended}",
                    i.fill * 100.0
                );
            }
            Err(reason) => eprintln!("  store {name:<12} unavailable: {reason}"),
        }
    }
    Ok(if s.flush_failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn translator(a: TranslatorArgs) -> anyhow::Result<ExitCode> {
    let opts = dta_node::translator::Options {
        config_path: a.config.config.clone(),
        // Before the configuration is read below.
        config_mtime: a.config.config.as_deref().and_then(dta_node::reload::mtime),
        metrics: a.metrics,
        progress: (a.stats_interval > 0.0)
            .then(|| Duration::try_from_secs_f64(a.stats_interval))
            .transpose()
            .context("--stats-interval")?,
        label: None,
        af_xdp: a
            .af_xdp
            .clone()
            .map(|iface| dta_node::af_xdp::AfXdpOptions {
                iface,
                generic: a.af_xdp_generic,
                busy_poll_us: a.af_xdp_busy_poll,
            }),
    };
    let stop = dta_node::signals::stop_on_signals()?;
    dta_node::signals::stop_after(&stop, a.duration)?;
    let summary = if let Some(map) = &a.cluster {
        if a.rdma.rdma.is_some() || a.xdp.xdp.is_some() {
            bail!(
                "--cluster serves shared-memory collectors; for an RDMA or XDP collector run one \
                 `dta translator --listen ADDR` per collector, ADDR its translator address in \
                 the map"
            );
        }
        let map = dta_cluster::ClusterMap::load(map)
            .with_context(|| format!("cluster map {}", map.display()))?;
        let cfgs = dta_node::translator::cluster_configs(
            &a.config.load()?,
            &map,
            &a.collectors,
            a.threads,
        )?;
        dta_node::translator::run_cluster(&cfgs, &opts, &stop)?
    } else {
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
        if let Some(r) = a.rdma.options()? {
            let t = dta_node::rdma::RdmaTranslator::build(&cfg, opts, &r)?;
            eprintln!("{}", t.describe());
            t.run(&stop)?
        } else if let Some(x) = a.xdp.options() {
            let t = dta_node::xdp::XdpNode::build(&cfg, opts, &x)?;
            eprintln!("{}", t.describe());
            t.run(&stop)?
        } else {
            let t = dta_node::translator::MemoryTranslator::build(&cfg, opts)?;
            eprintln!("{}", t.describe());
            t.run(&stop)?
        }
    };
    print_summary(a.json, &summary)?;
    Ok(ExitCode::SUCCESS)
}

/// A service's final counters: on stdout with `--json`, else on stderr.
pub(crate) fn print_summary(json: bool, v: &serde_json::Value) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(v)?;
    if json {
        println!("{text}");
    } else {
        eprintln!("{text}");
    }
    Ok(())
}

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
            window,
        } => {
            let (region, _) = sel.open()?;
            let key = query::parse_key(&key, key_len_of(&region))?;
            let r = answered(
                &region,
                query::key_increment_in(&region, &key, redundancy, window),
            )?;
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
            let r = answered(
                &region,
                query::list(&region, list, tail, max, dta_int::events::decode_record),
            )?;
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
            regions.push((s.path.clone(), s.region.clone()));
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
        let said = dta_log::say_once([format!("region {}", p.display()), e.clone()]);
        eprintln!("dta: error: {said}");
    }
    Ok(if bad.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Every option and argument of every command says what it is (`dta CMD --help`).
    #[test]
    fn every_option_has_help_text() {
        fn walk(c: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for a in c.get_arguments() {
                let id = a.get_id().as_str();
                if id == "help" || id == "version" {
                    continue;
                }
                let said = a
                    .get_help()
                    .or(a.get_long_help())
                    .is_some_and(|h| !h.to_string().trim().is_empty());
                if !said {
                    missing.push(format!("{path} --{id}"));
                }
            }
            for s in c.get_subcommands() {
                walk(s, &format!("{path} {}", s.get_name()), missing);
            }
        }
        let mut missing = vec![];
        walk(&super::Cli::command(), "dta", &mut missing);
        assert!(
            missing.is_empty(),
            "options without help:\n{}",
            missing.join("\n")
        );
    }
}
