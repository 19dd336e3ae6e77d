//! `dta rnic-collector` (only with the `rdma-core` feature): create the configured regions like
//! `dta collector`, then serve them to a translator through a real RDMA NIC with rdma-core
//! (`dta_rnic`), and answer queries over HTTP like `dta collector`. See `docs/rdma.md`, "With a ConnectX NIC (rdma-core)".

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use clap::Args;

use dta_node::config::Config;

#[derive(Args)]
pub struct RnicArgs {
    /// Configuration file (TOML) with the stores; without it, the embedded example configuration.
    #[arg(short, long)]
    pub config: Option<PathBuf>,
    /// Override the configuration's region directory.
    #[arg(long)]
    pub region_dir: Option<PathBuf>,
    /// RNIC settings: a TOML file with an `[rnic]` table (docs/rdma.md).
    #[arg(long)]
    pub rnic_config: Option<PathBuf>,
    /// IP:PORT (or IP) for RDMA CM to listen on; the IP must be on the RNIC's netdev
    /// (overrides `[rnic] listen`; default 0.0.0.0:7471).
    #[arg(long, value_parser = dta_node::rnic::parse_listen)]
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

pub fn run(a: RnicArgs, stop: Arc<AtomicBool>) -> anyhow::Result<ExitCode> {
    let mut cfg = match &a.config {
        Some(p) => Config::load(p)?,
        None => Config::embedded(),
    };
    if let Some(d) = &a.region_dir {
        cfg.region_dir = d.clone();
    }
    let rcfg = dta_node::rnic::rnic_config(a.rnic_config.as_deref(), |r| {
        if let Some(l) = a.listen {
            r.listen = l;
        }
        if let Some(s) = &a.prototype_store {
            r.prototype_store = Some(s.clone());
        }
        if !a.allow.is_empty() {
            r.allow = Some(dta_wire::prefix::AllowList::new(a.allow.clone()));
        }
    })?;
    let stats = dta_node::rnic::run(&cfg, rcfg, &stop)?;
    crate::print_summary(a.json, &stats)?;
    Ok(ExitCode::SUCCESS)
}
