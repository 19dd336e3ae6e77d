//! `dta rnic-collector` (only with the `rdma-core` feature): create the configured regions like
//! `dta collector`, then serve them to a translator through a real RDMA NIC with rdma-core
//! (`dta_rnic`). See `docs/rdma.md`, "With a ConnectX NIC (rdma-core)".

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

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
    eprintln!(
        "rnic-collector listening with RDMA CM on {listen}: regions are registered at the first \
         connection; Ctrl-C to stop"
    );
    rnic.run(&stop)?;
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
