//! `dta rnic-collector` (only with the `rdma-core` feature): create the configured regions like
//! `dta collector`, then serve them to a translator through a real RDMA NIC with rdma-core
//! (`dta_rnic`), and answer queries over HTTP like `dta collector`. See `docs/rdma.md`, "With a ConnectX NIC (rdma-core)".

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;

use dta::config::Config;
use dta_collector::{region_path, Collector};
use dta_rnic::rnic::RnicCollector;
use dta_rnic::RnicConfig;

#[derive(Args)]
pub struct RnicArgs {
    /// Configuration file (TOML) with the stores; without it, the embedded example configuration.
    #[arg(short, long)]
    pub config: Option<PathBuf>,
    /// Override the configuration's region directory.
    #[arg(long)]
    pub region_dir: Option<PathBuf>,
    /// RNIC settings: a TOML file with an `[rnic]` table (`dta_rnic::RnicConfig`).
    #[arg(long)]
    pub rnic_config: Option<PathBuf>,
    /// IP:PORT (or IP) for RDMA CM to listen on; the IP must be on the RNIC's netdev
    /// (overrides `[rnic] listen`; default 0.0.0.0:7471).
    #[arg(long, value_parser = dta_rnic::parse_listen)]
    pub listen: Option<std::net::SocketAddr>,
    /// Store the prototype-compatible 16-byte advertisement describes (default: the first).
    #[arg(long)]
    pub prototype_store: Option<String>,
    /// Print the final counters as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Translator addresses (CIDR prefixes) allowed to connect (overrides `[rnic] allow`); one
    /// is required: a host that connects is sent the stores' R_Keys.
    #[arg(long = "allow", value_name = "PREFIX", num_args = 1..)]
    pub allow: Vec<dta_wire::prefix::Prefix>,
}

fn rnic_config(a: &RnicArgs) -> anyhow::Result<RnicConfig> {
    let mut r = match &a.rnic_config {
        Some(p) => {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            RnicConfig::from_toml(&text).with_context(|| format!("in {}", p.display()))?
        }
        None => RnicConfig::default(),
    };
    if let Some(l) = a.listen {
        r.listen = l;
    }
    if let Some(s) = &a.prototype_store {
        r.prototype_store = Some(s.clone());
    }
    if !a.allow.is_empty() {
        r.allow = Some(dta_wire::prefix::AllowList::new(a.allow.clone()));
    }
    match &r.allow {
        Some(l) if !l.prefixes().is_empty() => {}
        _ => anyhow::bail!(
            "no translator may connect: name their addresses with --allow PREFIX (or [rnic] allow); \
             a host that connects is sent the stores' R_Keys"
        ),
    }
    r.validate()?;
    Ok(r)
}

pub fn run(a: RnicArgs, stop: Arc<AtomicBool>) -> anyhow::Result<ExitCode> {
    let mut cfg = match &a.config {
        Some(p) => Config::load(p)?,
        None => Config::embedded(),
    };
    if let Some(d) = &a.region_dir {
        cfg.region_dir = d.clone();
    }
    let rcfg = rnic_config(&a)?;
    let c = Collector::create(&cfg.region_dir, &cfg.store, cfg.collector.force)?;
    for s in c.stores() {
        eprintln!(
            "store {:<12} {:<14} {}",
            s.name,
            format!("{:?}", s.region.header().kind),
            region_path(c.dir(), &s.name).display()
        );
    }
    let listen = rcfg.listen;
    let mut rnic = RnicCollector::new(rcfg, &c).context("starting the RNIC collector")?;
    // Flagged reports arrive as WRITE WITH IMMEDIATE: each becomes a notice for `dta watch`.
    rnic.set_ring(Arc::new(dta_store::notify::NotifyRing::open_or_create(
        &cfg.region_dir,
        dta_store::notify::DEFAULT_CAPACITY,
    )?));
    for r in rnic.registrations() {
        tracing::debug!(store = %r.name, length = r.length, "mapped for registration");
    }
    eprintln!("rnic-collector listening with RDMA CM on {listen}; Ctrl-C to stop");
    let c = Arc::new(c);
    // The HTTP query API of `dta collector`, on its own thread: the RNIC loop stays on this one
    // (its verbs objects are not shared across threads).
    let http = if cfg.collector.http.is_empty() {
        None
    } else {
        let opts = dta_collector::http::options(&cfg.collector)?;
        let (c, stop, addr) = (c.clone(), stop.clone(), cfg.collector.http.clone());
        eprintln!("HTTP queries on http://{addr}");
        Some(std::thread::spawn(move || -> anyhow::Result<()> {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()?;
            rt.block_on(async move {
                let shutdown = async move {
                    while !stop.load(Ordering::Relaxed) {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                };
                dta_collector::http::serve_with(c, &addr, opts, shutdown).await
            })?;
            Ok(())
        }))
    };
    let served = rnic.run(&stop);
    stop.store(true, Ordering::Relaxed);
    if let Some(h) = http {
        h.join()
            .map_err(|_| anyhow::anyhow!("the HTTP thread panicked"))??;
    }
    served?;
    for r in c.regions() {
        r.flush()?;
    }
    let stats = serde_json::to_string_pretty(rnic.stats())?;
    if a.json {
        println!("{stats}");
    } else {
        eprintln!("{stats}");
    }
    Ok(ExitCode::SUCCESS)
}
