//! RoCEv2: the translator writing through the RoCEv2 sink instead of shared memory
//! (`dta translator --rdma IFACE --collector IP`), and the software responder serving the
//! collector's regions (`dta responder`). docs/rdma.md.
//!
//! The translator's policy is the node's ([`IngressPolicy`]), compiled against the stores the
//! collector advertises: the allow-lists, the rules and the write meter (fed by the sink's
//! congestion signals). Flagged reports travel as WRITE WITH IMMEDIATE; the responder puts them
//! on its region directory's ring.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use dta_rdma::link::{ipv4_of, PacketLink};
use dta_rdma::Endpoint;
use dta_rdma_requester::{connect, RequesterConfig, RoceSinks};
use dta_rdma_responder::{Responder, ResponderConfig};
use dta_store::Header;
use dta_translator::ingest::PrioSockets;
use dta_translator::{ingest, Stats, Translator};
use dta_wire::prefix::AllowList;

use crate::config::Config;
use crate::interfaces::InterfaceDrops;
use crate::modes::{self, Mode};
use crate::policy::IngressPolicy;
use crate::translator::{rule_installer, Options, Serving};

/// Where the RoCEv2 translator writes.
#[derive(Debug, Clone)]
pub struct RdmaOptions {
    pub iface: String,
    /// The collector's IPv4 address.
    pub collector: Ipv4Addr,
    /// Our address on `iface` (default: its first).
    pub local_ip: Option<Ipv4Addr>,
    /// The collector's RDMA CM port.
    pub cm_port: u16,
    /// Messages per second to the collector (default: unlimited).
    pub rate: Option<f64>,
}

fn endpoint(link: &PacketLink, iface: &str, ip: Option<Ipv4Addr>) -> anyhow::Result<Endpoint> {
    let ip = match ip {
        Some(a) => a.octets(),
        None => ipv4_of(iface)?,
    };
    Ok(Endpoint {
        mac: link.mac(),
        ip,
    })
}

/// The RoCEv2 translator, built (connected, policy applied, socket bound, metrics serving).
pub struct RdmaTranslator {
    cfg: Config,
    opts: Options,
    collector: Ipv4Addr,
    translator: Translator<RoceSinks<PacketLink>>,
    rstats: Arc<dta_rdma_requester::RequesterStats>,
    /// The translator's, then the classifier's.
    stats: Vec<Arc<Stats>>,
    socket: PrioSockets,
    policy: IngressPolicy,
    headers: Vec<Header>,
    /// The drops of the interfaces reports and acknowledgements arrive on.
    interfaces: Arc<InterfaceDrops>,
    _metrics: Option<dta_metrics::MetricsServer>,
}

impl RdmaTranslator {
    pub fn build(cfg: &Config, opts: Options, ro: &RdmaOptions) -> anyhow::Result<RdmaTranslator> {
        modes::check_translator(Mode::Rdma, cfg)?;
        if cfg.translator.threads > 1 {
            bail!(
                "threads = {}: the RoCEv2 translator has one queue pair per collector and runs \
                 on one thread",
                cfg.translator.threads
            );
        }
        // Bound first: a port already in use fails before the collector is connected.
        let socket = crate::translator::bind_sockets(cfg, 1)?.remove(0);
        let link = PacketLink::open(&ro.iface).with_context(|| format!("opening {}", ro.iface))?;
        let me = endpoint(&link, &ro.iface, ro.local_ip)?;
        let mut rc = RequesterConfig::new(me, ro.collector.octets());
        rc.port = ro.cm_port;
        rc.rate = ro.rate;
        let conn = connect(link, rc).with_context(|| format!("connecting to {}", ro.collector))?;
        eprintln!(
            "connected to {} over {}: {} stores advertised",
            ro.collector,
            ro.iface,
            conn.stores.len()
        );
        let infos = conn.store_infos();
        let headers: Vec<Header> = infos.iter().map(|i| i.header.clone()).collect();
        let rstats = conn.sinks.stats();
        let stats: Vec<Arc<Stats>> = (0..2).map(|_| Arc::new(Stats::default())).collect();
        let policy = IngressPolicy::of_config(cfg, &headers, None)?;
        let translator = policy.apply(Translator::new(
            &cfg.translator,
            &infos,
            conn.sinks,
            stats[0].clone(),
        )?)?;
        let interfaces =
            InterfaceDrops::watch("translator", cfg.translator.listen.ip(), &[&ro.iface]);
        // The collector's regions are remote: readiness is the spill file's.
        let metrics = crate::translator::start_translator_metrics(
            opts.metrics,
            &stats,
            std::slice::from_ref(&socket),
            None,
            None,
            &interfaces,
            vec![],
        )?;
        Ok(RdmaTranslator {
            cfg: cfg.clone(),
            opts,
            collector: ro.collector,
            translator,
            rstats,
            stats,
            socket,
            policy,
            headers,
            interfaces,
            _metrics: metrics,
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    pub fn stats(&self) -> &[Arc<Stats>] {
        &self.stats
    }

    pub fn describe(&self) -> String {
        format!(
            "translator on udp://{} -> RoCEv2 to {}",
            self.local_addr()
                .map_or_else(|e| e.to_string(), |a| a.to_string()),
            self.collector
        )
    }

    /// Receive until `stop`; every exit flushes and sends the DREQ of docs/rdma.md, so the
    /// collector frees our queue pair at once (dropping the sinks on an early error still
    /// sends one).
    pub fn run(mut self, stop: &AtomicBool) -> anyhow::Result<serde_json::Value> {
        let serving = Serving {
            stats: &self.stats,
            opts: &self.opts,
            config: &self.cfg,
        };
        let install = rule_installer(self.policy.rules().clone(), &self.headers);
        let (t, socket, tcfg, stats) = (
            &mut self.translator,
            &self.socket,
            &self.cfg.translator,
            &self.stats,
        );
        // ACKs are handled as the sink sends (and whenever its window fills); the final flush
        // waits for every outstanding packet to be acknowledged.
        let ran = serving.run(stop, install, || {
            ingest::run_one(t, socket, tcfg, &stats[1], stop)
        });
        let disconnected = self.translator.sinks_mut().disconnect();
        ran?;
        let out = serde_json::json!({
            "translator": Stats::sum(&self.stats).snapshot(),
            "rules": self.policy.rules().stats().snapshot(),
            "rdma": self.rstats.snapshot(),
            "interfaces": self.interfaces.snapshot(),
        });
        disconnected.with_context(|| format!("disconnecting from {}", self.collector))?;
        eprintln!("disconnected from {}", self.collector);
        Ok(out)
    }
}

/// What the software responder is asked besides the configuration.
#[derive(Debug, Clone)]
pub struct ResponderOptions {
    pub iface: String,
    /// Our IPv4 address (default: the interface's first).
    pub ip: Option<Ipv4Addr>,
    /// The RDMA CM port.
    pub port: u16,
    /// Tear down a connection idle this long.
    pub idle_timeout: Option<Duration>,
    /// Translators allowed to connect (required: a host that connects is sent the R_Keys).
    pub allow: AllowList,
}

/// The software responder: the collector's regions (created as `dta collector` creates them)
/// served over RoCEv2 until `stop`, its HTTP API beside it when `[collector] http` is set.
pub fn run_responder(
    cfg: &Config,
    ro: &ResponderOptions,
    stop: &Arc<AtomicBool>,
) -> anyhow::Result<serde_json::Value> {
    if ro.allow.prefixes().is_empty() {
        bail!("no translator may connect: name their addresses with --allow PREFIX");
    }
    let c = Arc::new(crate::collector::create(cfg)?);
    let link = PacketLink::open(&ro.iface).with_context(|| format!("opening {}", ro.iface))?;
    let me = endpoint(&link, &ro.iface, ro.ip)?;
    let mut rc = ResponderConfig::new(me);
    rc.port = ro.port;
    rc.idle_timeout = ro.idle_timeout;
    rc.allow = ro.allow.clone();
    let mut r = Responder::new(link, rc, c.regions());
    // Flagged reports arrive as WRITE WITH IMMEDIATE: each becomes a notice for `dta watch`.
    r.set_ring(crate::translator::ring(&cfg.region_dir)?);
    for (i, s) in c.stores().iter().enumerate() {
        if let Some((va, len, rkey)) = r.registration(i) {
            eprintln!(
                "store {:<12} va {va:#x} len {len} rkey {rkey:#010x}",
                s.name
            );
        }
    }
    eprintln!(
        "software RoCE responder on {} ({}), RDMA CM port {}, connections from {}; Ctrl-C to \
         stop",
        ro.iface,
        Ipv4Addr::from(me.ip),
        ro.port,
        ro.allow
    );
    let http = crate::collector::HttpService::spawn(cfg, c.clone(), None, stop.clone())?;
    let served = r.run(stop);
    let http = http.map(|h| h.join()).transpose();
    for reg in c.regions() {
        reg.flush()?;
    }
    served?;
    http?;
    Ok(serde_json::to_value(r.stats().snapshot())?)
}
