//! `dta responder` (the software RoCE responder serving the collector's regions) and the options
//! of `dta translator --rdma IFACE --collector IP`; the services are `dta_node::rdma`'s.
//! See `docs/rdma.md`.

use std::net::Ipv4Addr;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;

#[derive(Args)]
pub struct ResponderArgs {
    #[command(flatten)]
    pub config: crate::ConfigArgs,
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
    /// Print the final counters as JSON on stdout.
    #[arg(long)]
    pub json: bool,
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

impl RdmaArgs {
    pub fn options(&self) -> anyhow::Result<Option<dta_node::rdma::RdmaOptions>> {
        let Some(iface) = &self.rdma else {
            return Ok(None);
        };
        let Some(collector) = self.collector else {
            bail!("--rdma IFACE needs --collector IP");
        };
        Ok(Some(dta_node::rdma::RdmaOptions {
            iface: iface.clone(),
            collector,
            local_ip: self.local_ip,
            cm_port: self.cm_port,
            rate: self.rdma_rate,
        }))
    }
}

pub fn responder(a: ResponderArgs, stop: Arc<AtomicBool>) -> anyhow::Result<ExitCode> {
    let cfg = a.config.load()?;
    let idle_timeout = a
        .idle_timeout
        .map(|secs| {
            Duration::try_from_secs_f64(secs)
                .with_context(|| format!("--idle-timeout {secs}: not a duration"))
        })
        .transpose()?;
    let opts = dta_node::rdma::ResponderOptions {
        iface: a.iface,
        ip: a.ip,
        port: a.port,
        idle_timeout,
        allow: dta_wire::prefix::AllowList::new(a.allow),
    };
    let stats = dta_node::rdma::run_responder(&cfg, &opts, &stop)?;
    crate::print_summary(a.json, &stats)?;
    Ok(ExitCode::SUCCESS)
}
