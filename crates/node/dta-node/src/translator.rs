//! The translator service in shared memory: one or several translator threads (`threads`),
//! behind the priority classifier or each on its own `SO_REUSEPORT` socket, writing the
//! collector's regions; and what every translator mode shares ([`Options`], [`Serving`]): the
//! metrics server, the rule reloads, the progress line, the flush on stop, the summary.
//! The XDP and RoCEv2 modes are [`crate::xdp`] and [`crate::rdma`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use dta_collector::Collector;
use dta_store::lock::InstanceLock;
use dta_store::notify::{NotifyRing, DEFAULT_CAPACITY};
use dta_store::Header;
use dta_translator::classify::Lanes;
use dta_translator::prio_sockets::{self, PrioSockets};
use dta_translator::{ingest, RegionSinks, Shards, Stats, Translator};

use crate::config::Config;
use crate::interfaces::InterfaceDrops;
use crate::modes::{self, Mode};
use crate::policy::IngressPolicy;

/// What a translator service is asked besides its configuration.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The configuration file: its rules are reloaded when it changes or on SIGHUP.
    pub config_path: Option<PathBuf>,
    /// The file's modification time before the running configuration was read from it, so an
    /// edit made while the service starts is seen as a change ([`crate::reload::mtime`]).
    pub config_mtime: Option<std::time::SystemTime>,
    /// Serve `/metrics`, `/healthz` and `/readyz` here.
    pub metrics: Option<SocketAddr>,
    /// Print a progress line this often (none: never).
    pub progress: Option<Duration>,
    /// The collector's name when one process serves several (cluster).
    pub label: Option<String>,
    /// Receive through AF_XDP on this interface too (`--af-xdp IFACE`, [`crate::af_xdp`]).
    pub af_xdp: Option<crate::af_xdp::AfXdpOptions>,
}

/// Reports a translator thread's inbox holds for the others ([`Shards`]).
pub const SHARD_INBOX: usize = 8192;

/// What every translator mode runs beside its receive loop, until the stop: the progress line
/// and the rule reloads.
pub(crate) struct Serving<'a> {
    pub stats: &'a [Arc<Stats>],
    pub opts: &'a Options,
    pub config: &'a Config,
}

impl Serving<'_> {
    /// Run `receive` on this thread, with the progress printer and the reload loop (`install`,
    /// given each new configuration, returns what it did) on scoped threads; all end at `stop`.
    pub fn run<R>(
        &self,
        stop: &AtomicBool,
        install: impl FnMut(&Config) -> anyhow::Result<String> + Send,
        receive: impl FnOnce() -> R,
    ) -> R {
        crate::signals::reload_on_sighup();
        std::thread::scope(|scope| {
            if let Some(path) = self.opts.config_path.clone() {
                let running = self.config.clone();
                let seen = self.opts.config_mtime;
                scope.spawn(move || crate::reload::reload_loop(path, seen, running, stop, install));
            }
            if let Some(every) = self.opts.progress.filter(|d| !d.is_zero()) {
                let (stats, label) = (self.stats, self.opts.label.as_deref());
                scope.spawn(move || progress(stats, label, every, stop));
            }
            let r = receive();
            stop.store(true, Ordering::Relaxed);
            r
        })
    }
}

/// What a reload installs in a translator serving `headers`' stores: the new configuration's
/// rules compiled against them and swapped in as the next generation; what it did, for the log.
pub(crate) fn rule_installer<'a>(
    rules: Arc<dta_translator::rules::Rules>,
    headers: &'a [Header],
) -> impl FnMut(&Config) -> anyhow::Result<String> + Send + 'a {
    move |c: &Config| {
        let cat: Vec<_> = headers.iter().map(|h| (h.name.as_str(), &h.spec)).collect();
        let g = rules
            .replace(&c.translator.rules, &cat)
            .map_err(anyhow::Error::msg)?;
        Ok(format!("generation {g}, {} rules", rules.current().len()))
    }
}

/// A progress line on stderr every `every` until `stop`.
fn progress(all: &[Arc<Stats>], label: Option<&str>, every: Duration, stop: &AtomicBool) {
    let start = Instant::now();
    let mut last = 0u64;
    let mut next = every;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
        if start.elapsed() < next {
            continue;
        }
        let stats = Stats::sum(all);
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
            (total - last) as f64 / every.as_secs_f64(),
            stats.total_rejected()
        );
        last = total;
        next += every;
    }
}

/// The region directory's notification ring (the translator and `dta watch` both create it).
pub(crate) fn ring(dir: &std::path::Path) -> anyhow::Result<Arc<NotifyRing>> {
    Ok(Arc::new(NotifyRing::open_or_create(dir, DEFAULT_CAPACITY)?))
}

/// How long a translator started beside its collector waits for the configured stores' regions.
pub const REGIONS_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Wait (at most `wait`, and only while a collector holds the directory) until every store of
/// the configuration has its region: a collector started at the same moment publishes them one
/// by one, and a translator that listed the directory half-way would serve only some stores.
/// What is still missing then is warned about by name (the translator runs with the stores
/// present).
fn wait_for_regions(cfg: &Config, wait: std::time::Duration) {
    let collector_lock = cfg.region_dir.join(dta_store::lock::COLLECTOR_LOCK);
    let deadline = std::time::Instant::now() + wait;
    let missing = || -> Vec<&str> {
        cfg.store
            .iter()
            .map(|s| s.name.as_str())
            .filter(|n| !dta_collector::region_path(&cfg.region_dir, n).exists())
            .collect()
    };
    let mut said = false;
    loop {
        let m = missing();
        if m.is_empty() {
            return;
        }
        if std::time::Instant::now() >= deadline
            || !dta_store::lock::InstanceLock::held(&collector_lock)
        {
            tracing::warn!(
                "configured stores without a region in {}: {} (their reports are dropped as \
                 no_store; is the collector running with this configuration?)",
                cfg.region_dir.display(),
                m.join(", ")
            );
            return;
        }
        if !said {
            tracing::info!(
                "waiting for the collector's regions of {} in {}",
                m.join(", "),
                cfg.region_dir.display()
            );
            said = true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The stores a translator writes, as the collector created them; the writer lock first (two
/// writers would race on slots and Append heads).
pub(crate) fn open_regions(cfg: &Config) -> anyhow::Result<(InstanceLock, Collector)> {
    let writer = InstanceLock::acquire_in(
        &cfg.region_dir,
        dta_store::lock::WRITER_LOCK,
        &format!("region directory {} as writer", cfg.region_dir.display()),
    )?;
    wait_for_regions(cfg, REGIONS_WAIT);
    let collector = Collector::open_dir(&cfg.region_dir, true)
        .with_context(|| "start the collector first (`dta collector`), it creates the regions")?;
    if collector.stores().is_empty() {
        bail!(
            "no regions in {}: start `dta collector` with this configuration first",
            cfg.region_dir.display()
        );
    }
    Ok((writer, collector))
}

/// The mode a shared-memory translator of `cfg` runs in (`af_xdp`: receiving through AF_XDP).
pub fn memory_mode(cfg: &Config, af_xdp: bool) -> Mode {
    if af_xdp {
        Mode::AfXdp
    } else if cfg.translator.classifier_enabled() {
        Mode::Classifier
    } else if cfg.translator.threads > 1 {
        Mode::Threads
    } else {
        Mode::Memory
    }
}

/// The shared-memory translator, built (regions mapped, sockets bound, metrics serving) and
/// not yet receiving.
pub struct MemoryTranslator {
    cfg: Config,
    opts: Options,
    translators: Vec<Translator<RegionSinks>>,
    /// One per translator thread, then the classifier's.
    stats: Vec<Arc<Stats>>,
    sockets: Vec<PrioSockets>,
    lanes: Option<Lanes>,
    policy: IngressPolicy,
    headers: Vec<Header>,
    collector: Collector,
    /// Kernel-bypass receive, when asked for and available.
    af_xdp: Option<crate::af_xdp::AfXdp>,
    /// The drops of the interfaces it receives on.
    interfaces: Arc<InterfaceDrops>,
    _metrics: Option<dta_metrics::MetricsServer>,
    _writer: InstanceLock,
}

impl MemoryTranslator {
    /// Build the translator of `cfg`: take the writer lock, map the regions, compile and apply
    /// the policy to every thread, bind the sockets and start the metrics server.
    pub fn build(cfg: &Config, opts: Options) -> anyhow::Result<MemoryTranslator> {
        let mode = memory_mode(cfg, opts.af_xdp.is_some());
        modes::check_translator(mode, cfg)?;
        let threads = cfg.translator.threads.max(1);
        if let Some(o) = &opts.af_xdp {
            if cfg.translator.classifier == Some(true) {
                return Err(modes::Refusal {
                    setting: "[translator] classifier = true".into(),
                    mode,
                    why: "AF_XDP hands each receive queue's datagrams to its translator thread; \
                          the classifier reads sockets (leave classifier unset or false)",
                }
                .into());
            }
            crate::af_xdp::AfXdp::check_queues(o, threads)?;
        }
        refuse_shared_port(cfg)?;
        let (writer, collector) = open_regions(cfg)?;
        // AF_XDP threads read their queues directly: no classifier.
        let classified = cfg.translator.classifier_enabled() && opts.af_xdp.is_none();
        // One per thread, the classifier's, and one the AF_XDP program's drops are mirrored in.
        let slots = threads + usize::from(classified) + usize::from(opts.af_xdp.is_some());
        let stats: Vec<Arc<Stats>> = (0..slots).map(|_| Arc::new(Stats::default())).collect();
        let headers = collector.headers();
        let policy = IngressPolicy::of_config(cfg, &headers, Some(ring(&cfg.region_dir)?))?;
        // One translator per thread over the same regions; Postcarding flows, Append lists and
        // sketches each owned by one of them (dta_translator::shard).
        let shards = Shards::new(threads, SHARD_INBOX);
        let translators = stats[..threads]
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let t = Translator::colocated(&cfg.translator, collector.regions(), s.clone())?
                    .with_shard(shards.shard(i));
                policy.apply(t)
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        // Behind the classifier one receiver (three sockets, one per priority) is read by one
        // thread; without it every translator thread reads its own (prio_sockets).
        let sockets = bind_sockets(cfg, if classified { 1 } else { threads })?;
        let lanes = classified
            .then(|| Lanes::from_config(threads, &cfg.translator))
            .transpose()?;
        // AF_XDP beside the sockets; where the kernel or the driver cannot, the sockets alone,
        // said once.
        let af_xdp = match &opts.af_xdp {
            Some(o) => crate::af_xdp::AfXdp::start(
                o,
                crate::af_xdp::AfXdp::open(
                    o,
                    cfg.translator.listen.port(),
                    policy.allow(),
                    threads,
                    "translator",
                ),
            )?,
            None => None,
        };
        let interfaces = InterfaceDrops::watch(
            "translator",
            cfg.translator.listen.ip(),
            &opts
                .af_xdp
                .iter()
                .map(|o| o.iface.as_str())
                .collect::<Vec<_>>(),
        );
        // The metrics server answers once the UDP sockets are bound: a scrape that succeeds
        // means reports sent from then on are received (queued until the threads start).
        let metrics = start_translator_metrics(
            opts.metrics,
            &stats,
            &sockets,
            af_xdp.as_ref(),
            None,
            &interfaces,
            collector.regions(),
        )?;
        Ok(MemoryTranslator {
            cfg: cfg.clone(),
            opts,
            translators,
            stats,
            sockets,
            lanes,
            policy,
            headers,
            collector,
            af_xdp,
            interfaces,
            _metrics: metrics,
            _writer: writer,
        })
    }

    /// Where reports are received.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.sockets[0].local_addr()
    }

    /// The counters of every thread (and of the classifier).
    pub fn stats(&self) -> &[Arc<Stats>] {
        &self.stats
    }

    /// One line saying what runs where.
    pub fn describe(&self) -> String {
        let threads = self.translators.len();
        format!(
            "translator{} on udp://{} ({threads} thread{}{}) -> {} stores in {}",
            self.opts
                .label
                .as_deref()
                .map(|l| format!(" of collector {l}"))
                .unwrap_or_default(),
            self.local_addr()
                .map_or_else(|e| e.to_string(), |a| a.to_string()),
            if threads == 1 { "" } else { "s" },
            match &self.lanes {
                Some(l) => format!(
                    " behind the priority classifier, {} MiB of queue buffers",
                    l.pool_bytes() >> 20
                ),
                None => String::new(),
            },
            self.collector.stores().len(),
            self.cfg.region_dir.display()
        ) + &self
            .af_xdp
            .as_ref()
            .map(|a| format!("; {}", a.describe()))
            .unwrap_or_default()
    }

    /// Receive until `stop`, then write out everything held and flush the regions; the final
    /// counters.
    pub fn run(mut self, stop: &AtomicBool) -> anyhow::Result<serde_json::Value> {
        let threads = self.translators.len();
        let serving = Serving {
            stats: &self.stats,
            opts: &self.opts,
            config: &self.cfg,
        };
        let install = rule_installer(self.policy.rules().clone(), &self.headers);
        let (ts, sockets, lanes) = (&mut self.translators, &self.sockets, &self.lanes);
        let (policy, stats, batch) = (&self.policy, &self.stats, self.cfg.translator.recv_batch);
        let af_xdp = &mut self.af_xdp;
        serving.run(stop, install, || match (lanes, af_xdp) {
            (_, Some(af)) => {
                let into = stats.last().expect("the AF_XDP slot");
                let watch = af.watch();
                let sources = af.sources().into_iter().map(Some).collect();
                std::thread::scope(|s| {
                    // The program's drops mirrored and the sockets' loss watched while the
                    // threads receive.
                    s.spawn(|| watch.run(stop, |w| w.mirror(into)));
                    ingest::run_threads_from(ts, sockets, sources, batch, stop)
                })
            }
            (Some(lanes), None) => ingest::run_classified(
                ts,
                &sockets[0],
                lanes,
                policy.allow(),
                &stats[threads],
                batch,
                stop,
            ),
            (None, None) => ingest::run_threads(ts, sockets, batch, stop),
        })?;
        for r in self.collector.regions() {
            r.flush()?;
        }
        let mut snap = serde_json::to_value(Stats::sum(&self.stats).snapshot())?;
        snap["rules"] = serde_json::to_value(self.policy.rules().stats().snapshot())?;
        if let Some(af) = &self.af_xdp {
            let w = af.watch();
            w.refresh();
            w.mirror(self.stats.last().expect("the AF_XDP slot"));
            snap = serde_json::to_value(Stats::sum(&self.stats).snapshot())?;
            snap["rules"] = serde_json::to_value(self.policy.rules().stats().snapshot())?;
            snap["af_xdp"] = af.snapshot();
        }
        snap["interfaces"] = self.interfaces.snapshot();
        Ok(snap)
    }
}

/// Refuse a port another process already listens on (a second translator would silently take
/// a share): checked first, before anything is locked or mapped, and again at the bind.
pub(crate) fn refuse_shared_port(cfg: &Config) -> anyhow::Result<()> {
    let listen = cfg.translator.listen;
    ingest::refuse_shared_port(listen.port()).with_context(|| format!("listening on {listen}"))
}

/// Bind `n` receivers on the configured address, each one socket per priority in the port's
/// `SO_REUSEPORT` group ([`prio_sockets`]), after [`refuse_shared_port`].
pub(crate) fn bind_sockets(cfg: &Config, n: usize) -> anyhow::Result<Vec<PrioSockets>> {
    refuse_shared_port(cfg)?;
    let listen = cfg.translator.listen;
    prio_sockets::bind(listen, n, cfg.translator.recv_buffer)
        .with_context(|| format!("binding {listen}"))
}

/// The one start-up of a translator's metrics server, every mode's (shared memory, XDP,
/// RoCEv2), at `addr` if asked: its counters (`stats`: every thread's, the classifier's, the
/// driver's), its receive sockets' (buffer, kernel drops by priority), its AF_XDP sockets', the
/// XDP program's actions, the drops of the interfaces it receives on; ready when `regions`
/// (the collector's, none when they are remote) and the spill file are.
pub(crate) fn start_translator_metrics(
    addr: Option<SocketAddr>,
    stats: &[Arc<Stats>],
    sockets: &[PrioSockets],
    af_xdp: Option<&crate::af_xdp::AfXdp>,
    program: Option<crate::ops::ProgramActions>,
    interfaces: &Arc<InterfaceDrops>,
    regions: Vec<Arc<dta_store::Region>>,
) -> anyhow::Result<Option<dta_metrics::MetricsServer>> {
    let Some(addr) = addr else {
        return Ok(None);
    };
    let mut reg = dta_metrics::TranslatorMetrics::new(stats.to_vec()).registry();
    reg.register_collector(Box::new(interfaces.metrics()));
    if let Some(a) = af_xdp {
        reg.register_collector(Box::new(a.watch().metrics()));
    }
    reg.register_collector(Box::new(dta_metrics::PriorityReceiveMetrics::new(
        sockets
            .iter()
            .map(PrioSockets::try_clone)
            .collect::<std::io::Result<_>>()?,
    )));
    if let Some(p) = program {
        reg.register_collector(Box::new(p));
    }
    let ready = crate::ops::translator_ready(regions, stats.to_vec());
    crate::ops::start_metrics(addr, reg, ready, "translator").map(Some)
}

/// `dta translator --cluster MAP --collectors A,B`: the configuration of each collector's
/// translator (its listen address, region directory and write budget from the map).
pub fn cluster_configs(
    base: &Config,
    map: &dta_cluster::ClusterMap,
    collectors: &[String],
    threads: Option<usize>,
) -> anyhow::Result<Vec<(String, Config)>> {
    let mut cfgs = vec![];
    for name in collectors {
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
        if let Some(n) = threads {
            cfg.translator.threads = n;
        }
        if c.nic_budget > 0 {
            cfg.translator.flow_control.write_budget = c.nic_budget;
        }
        cfg.translator
            .validate()
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("collector {name}'s translator (nic_budget, threads)"))?;
        cfgs.push((name.clone(), cfg));
    }
    Ok(cfgs)
}

/// Run one shared-memory translator per collector of `cfgs`, each on its own threads, all
/// stopped together (one failing stops the others); the final counters by collector.
pub fn run_cluster(
    cfgs: &[(String, Config)],
    opts: &Options,
    stop: &Arc<AtomicBool>,
) -> anyhow::Result<serde_json::Value> {
    if opts.metrics.is_some() {
        bail!("--metrics with --cluster: not supported (one metrics server per translator)");
    }
    let built = cfgs
        .iter()
        .map(|(name, cfg)| {
            let o = Options {
                label: Some(name.clone()),
                ..opts.clone()
            };
            let t = MemoryTranslator::build(cfg, o).with_context(|| format!("collector {name}"))?;
            eprintln!("{}", t.describe());
            Ok((name.clone(), t))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let results: Vec<(String, anyhow::Result<serde_json::Value>)> = std::thread::scope(|s| {
        let hs: Vec<_> = built
            .into_iter()
            .map(|(name, t)| (name, s.spawn(move || t.run(stop))))
            .collect();
        hs.into_iter()
            .map(|(n, h)| {
                let r = h
                    .join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("translator thread panicked")));
                if r.is_err() {
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
    Ok(serde_json::Value::Object(all))
}
