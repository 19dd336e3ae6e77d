//! The node embedded in a program (the C ABI's `dta_collector_open`): the collector's regions,
//! created as `dta collector` creates them, and one translator over them in shared memory,
//! under the same policy as `dta translator` ([`IngressPolicy::apply`]); the program hands it
//! datagrams itself.

use std::path::Path;
use std::sync::Arc;

use anyhow::anyhow;
use dta_collector::Collector;
use dta_store::lock::InstanceLock;
use dta_translator::{RegionSinks, Stats, Translator};

use crate::config::Config;
use crate::modes::{self, Mode};
use crate::policy::IngressPolicy;

/// Why the node did not open: its configuration, or its files (regions, locks).
#[derive(Debug)]
pub enum OpenError {
    Config(anyhow::Error),
    Io(anyhow::Error),
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::Config(e) | OpenError::Io(e) => write!(f, "{e:#}"),
        }
    }
}

impl std::error::Error for OpenError {}

/// An open embedded node.
pub struct EmbeddedNode {
    // Field order is drop order: the translator (which writes into the regions) goes first, the
    // locks last.
    pub translator: Translator<RegionSinks>,
    pub stats: Arc<Stats>,
    pub collector: Collector,
    pub writer: InstanceLock,
}

impl EmbeddedNode {
    /// Open as `dta collector --config path` then `dta translator --config path` would: the
    /// collector lock and the regions, then the writer lock and one translator over them.
    /// `region_dir`, when given, overrides the configuration's. A region that does not open is
    /// an error here (an embedding program has no readiness endpoint to report it).
    pub fn open(config_path: &Path, region_dir: Option<&Path>) -> Result<EmbeddedNode, OpenError> {
        let mut cfg = Config::load(config_path).map_err(OpenError::Config)?;
        if let Some(d) = region_dir {
            cfg.region_dir = d.into();
        }
        if cfg.store.is_empty() {
            return Err(OpenError::Config(anyhow!(
                "{}: the configuration has no [[store]]",
                config_path.display()
            )));
        }
        EmbeddedNode::from_config(&cfg)
    }

    pub fn from_config(cfg: &Config) -> Result<EmbeddedNode, OpenError> {
        use OpenError::{Config as C, Io};
        modes::check_translator(Mode::Capi, cfg).map_err(|e| C(e.into()))?;
        let collector = Collector::create(&cfg.region_dir, &cfg.store, cfg.collector.force)
            .map_err(|e| Io(e.into()))?;
        if let Some(b) = collector.bad().first() {
            return Err(Io(anyhow!(
                "store {}: {}: {}",
                b.name,
                b.path.display(),
                b.reason
            )));
        }
        let writer = InstanceLock::acquire_in(
            &cfg.region_dir,
            dta_store::lock::WRITER_LOCK,
            &format!("region directory {} as writer", cfg.region_dir.display()),
        )
        .map_err(|e| Io(e.into()))?;
        let headers = collector.headers();
        let ring = crate::translator::ring(&cfg.region_dir).map_err(Io)?;
        let policy = IngressPolicy::of_config(cfg, &headers, Some(ring)).map_err(C)?;
        let stats = Arc::new(Stats::default());
        let translator = Translator::colocated(&cfg.translator, collector.regions(), stats.clone())
            .map_err(|e| C(e.into()))?;
        let translator = policy.apply(translator).map_err(C)?;
        Ok(EmbeddedNode {
            translator,
            stats,
            collector,
            writer,
        })
    }
}
