//! `dta responder` (the software RoCE responder serving the collector's regions) and
//! `dta translator --rdma IFACE --collector IP` (the translator writing through the RoCEv2 sink
//! instead of shared memory). See `docs/rdma.md`.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;

use dta::config::Config;
use dta_collector::Collector;
use dta_rdma::link::{iface_ipv4, PacketLink};
use dta_rdma::Endpoint;
use dta_rdma_requester::{connect, RequesterConfig};
use dta_rdma_responder::{Responder, ResponderConfig};
use dta_translator::{ingest, Stats, Translator};

#[derive(Args)]
pub struct ResponderArgs {
    /// Configuration file (TOML); without it, the embedded example configuration.
    #[arg(short, long)]
    pub config: Option<PathBuf>,
    /// Override the configuration's region directory.
    #[arg(long)]
    pub region_dir: Option<PathBuf>,
    /// Interface to serve RoCEv2 on (raw AF_PACKET socket; needs CAP_NET_RAW).
    #[arg(long)]
    pub iface: String,
    /// Our IPv4 address (default: the interface's first).
    #[arg(long)]
    pub ip: Option<Ipv4Addr>,
    /// RDMA CM port to listen on.
    #[arg(long, default_value_t = dta_rdma::DEFAULT_CM_PORT)]
    pub port: u16,
    /// Tear down a connection that sends nothing for this many seconds (default: never; a
    /// restarted translator's new REQ replaces its old connection anyway).
    #[arg(long, value_name = "SECS")]
    pub idle_timeout: Option<f64>,
    /// Translator addresses (CIDR prefixes, e.g. 10.0.0.1/32) allowed to connect; repeat for
    /// several. Required: a host that connects is sent the stores' R_Keys. `0.0.0.0/0` admits
    /// any host on the segment.
    #[arg(long = "allow", value_name = "PREFIX", required = true, num_args = 1..)]
    pub allow: Vec<dta_wire::prefix::Prefix>,
}

/// Options of `dta translator` for the RoCEv2 sink.
#[derive(Args, Clone, Default)]
pub struct RdmaArgs {
    /// Write to the collector over RoCEv2 on this interface instead of shared memory.
    #[arg(long, value_name = "IFACE", requires = "collector")]
    pub rdma: Option<String>,
    /// The collector's IPv4 address (with --rdma).
    #[arg(long)]
    pub collector: Option<Ipv4Addr>,
    /// Our IPv4 address on IFACE (default: the interface's first).
    #[arg(long = "ip")]
    pub local_ip: Option<Ipv4Addr>,
    /// The collector's RDMA CM port.
    #[arg(long, default_value_t = dta_rdma::DEFAULT_CM_PORT)]
    pub cm_port: u16,
    /// Messages per second to the collector (default: unlimited).
    #[arg(long)]
    pub rdma_rate: Option<f64>,
}

fn load(config: &Option<PathBuf>, region_dir: &Option<PathBuf>) -> anyhow::Result<Config> {
    let mut cfg = match config {
        Some(p) => Config::load(p)?,
        None => Config::embedded(),
    };
    if let Some(d) = region_dir {
        cfg.region_dir = d.clone();
    }
    Ok(cfg)
}

fn endpoint(link: &PacketLink, iface: &str, ip: Option<Ipv4Addr>) -> anyhow::Result<Endpoint> {
    let ip = match ip {
        Some(a) => a.octets(),
        None => iface_ipv4(iface)?,
    };
    Ok(Endpoint {
        mac: link.mac(),
        ip,
    })
}

pub fn responder(a: ResponderArgs, stop: Arc<AtomicBool>) -> anyhow::Result<ExitCode> {
    let cfg = load(&a.config, &a.region_dir)?;
    let c = Collector::create(&cfg.region_dir, &cfg.store, cfg.collector.force)?;
    let link = PacketLink::open(&a.iface).with_context(|| format!("opening {}", a.iface))?;
    let me = endpoint(&link, &a.iface, a.ip)?;
    let mut rc = ResponderConfig::new(me);
    rc.port = a.port;
    if let Some(secs) = a.idle_timeout {
        rc.idle_timeout = Some(
            Duration::try_from_secs_f64(secs)
                .with_context(|| format!("--idle-timeout {secs}: not a duration"))?,
        );
    }
    rc.allow = dta_wire::prefix::AllowList::new(a.allow.clone());
    let rc_allow = rc.allow.to_string();
    let mut r = Responder::new(link, rc, c.regions());
    // Flagged reports arrive as WRITE WITH IMMEDIATE: each becomes a notice for `dta watch`.
    r.set_ring(Arc::new(dta_store::notify::NotifyRing::open_or_create(
        &cfg.region_dir,
        dta_store::notify::DEFAULT_CAPACITY,
    )?));
    for (i, s) in c.stores().iter().enumerate() {
        let (va, len, rkey) = r.registration(i).unwrap();
        eprintln!(
            "store {:<12} va {va:#x} len {len} rkey {rkey:#010x}",
            s.name
        );
    }
    eprintln!(
        "software RoCE responder on {} ({}), RDMA CM port {}, connections from {}; Ctrl-C to stop",
        a.iface,
        Ipv4Addr::from(me.ip),
        a.port,
        rc_allow
    );
    r.run(&stop)?;
    for reg in c.regions() {
        reg.flush()?;
    }
    eprintln!("{}", serde_json::to_string_pretty(&r.stats().snapshot())?);
    Ok(ExitCode::SUCCESS)
}

/// The translator writing through the RoCEv2 sink.
pub fn translator(
    cfg: &Config,
    rdma: &RdmaArgs,
    stop: Arc<AtomicBool>,
    duration: Option<f64>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    if let Some(d) = duration {
        let s = stop.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs_f64(d));
            s.store(true, Ordering::Relaxed);
        });
    }
    let (Some(iface), Some(collector)) = (&rdma.rdma, rdma.collector) else {
        bail!("--rdma IFACE needs --collector IP");
    };
    let link = PacketLink::open(iface).with_context(|| format!("opening {iface}"))?;
    let me = endpoint(&link, iface, rdma.local_ip)?;
    let mut rc = RequesterConfig::new(me, collector.octets());
    rc.port = rdma.cm_port;
    rc.rate = rdma.rdma_rate;
    let conn = connect(link, rc).with_context(|| format!("connecting to {collector}"))?;
    eprintln!(
        "connected to {collector} over {iface}: {} stores advertised",
        conn.stores.len()
    );
    let infos = conn.store_infos();
    let rstats = conn.sinks.stats();
    let stats = Arc::new(Stats::default());
    let mut t = Translator::new(&cfg.translator, &infos, conn.sinks, stats.clone())?;
    let socket = ingest::bind(cfg.translator.listen, cfg.translator.recv_buffer)
        .with_context(|| format!("binding {}", cfg.translator.listen))?;
    eprintln!("translator on udp://{} -> RoCEv2", socket.local_addr()?);
    // ACKs are handled as the sink sends (and whenever its window fills); the final flush
    // waits for every outstanding packet to be acknowledged.
    let classifier = Arc::new(Stats::default());
    let ran = ingest::run_one(&mut t, &socket, &cfg.translator, &classifier, &stop);
    // Every exit (stop by signal or --duration, or an ingest error) flushes and sends the DREQ
    // of docs/rdma.md, so the collector frees our queue pair at once. Dropping the sinks on a
    // path that skips this (an early `?`) still sends one DREQ.
    let disconnected = t.sinks_mut().disconnect();
    ran?;
    let stats = Stats::sum(&[stats, classifier]);
    let out = serde_json::json!({ "translator": stats.snapshot(), "rdma": rstats.snapshot() });
    if json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        eprintln!("{}", serde_json::to_string_pretty(&out)?);
    }
    disconnected.with_context(|| format!("disconnecting from {collector}"))?;
    eprintln!("disconnected from {collector}");
    Ok(ExitCode::SUCCESS)
}
