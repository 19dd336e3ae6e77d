//! The collector for real RDMA NICs (`dta rnic-collector`, feature `rdma-core`): the configured
//! regions created as `dta collector` creates them, registered with an RDMA NIC through
//! rdma-core (`dta_rnic`) and served to translators over RDMA CM, with the collector's HTTP API
//! beside it ([`crate::collector::HttpService`]). docs/rdma.md "With a ConnectX NIC".

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context};
use dta_rnic::rnic::RnicCollector;
use dta_rnic::RnicConfig;

/// Parses `--listen IP[:PORT]` for RDMA CM (default port 7471).
pub use dta_rnic::parse_listen;

use crate::config::Config;

/// The `[rnic]` settings: from `file` (TOML) or the defaults, then the command line's
/// overrides; at least one translator prefix must be allowed.
pub fn rnic_config(
    file: Option<&Path>,
    edit: impl FnOnce(&mut RnicConfig),
) -> anyhow::Result<RnicConfig> {
    let mut r = match file {
        Some(p) => {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            RnicConfig::from_toml(&text).with_context(|| format!("in {}", p.display()))?
        }
        None => RnicConfig::default(),
    };
    edit(&mut r);
    match &r.allow {
        Some(l) if !l.prefixes().is_empty() => {}
        _ => bail!(
            "no translator may connect: name their addresses with --allow PREFIX (or [rnic] \
             allow); a host that connects is sent the stores' R_Keys"
        ),
    }
    r.validate()?;
    Ok(r)
}

/// Serve `cfg`'s regions through the RDMA NIC until `stop`; the NIC loop's counters.
pub fn run(
    cfg: &Config,
    rcfg: RnicConfig,
    stop: &Arc<AtomicBool>,
) -> anyhow::Result<serde_json::Value> {
    let c = crate::collector::create(cfg)?;
    let listen = rcfg.listen;
    let mut rnic = RnicCollector::new(rcfg, &c).context("starting the RNIC collector")?;
    // Flagged reports arrive as WRITE WITH IMMEDIATE: each becomes a notice for `dta watch`.
    rnic.set_ring(crate::translator::ring(&cfg.region_dir)?);
    for r in rnic.registrations() {
        tracing::debug!(store = %r.name, length = r.length, "mapped for registration");
    }
    eprintln!("rnic-collector listening with RDMA CM on {listen}; Ctrl-C to stop");
    let c = Arc::new(c);
    // The HTTP API on its own thread: the RNIC loop stays on this one (its verbs objects are
    // not shared across threads).
    let http = crate::collector::HttpService::spawn(cfg, c.clone(), None, stop.clone())?;
    let served = rnic.run(stop);
    stop.store(true, Ordering::Relaxed);
    if let Some(h) = http {
        h.join()?;
    }
    served?;
    for r in c.regions() {
        r.flush()?;
    }
    Ok(serde_json::to_value(rnic.stats())?)
}
