//! `dta int-sink check`: the sink's flow records (and optionally its stores) against the
//! ground truth of a generated trace (`dta pcap gen`), compared by [`dta_int_trace::check`].

use std::path::PathBuf;

use anyhow::Context;
use dta_collector::Collector;
pub use dta_int_trace::check::Checked;

use crate::config::IntSinkFile;

/// What [`check`] compares.
#[derive(Debug, Clone)]
pub struct CheckArgs {
    /// The ground truth JSON `dta pcap gen` wrote beside the pcap.
    pub truth: PathBuf,
    /// Flow records as JSON lines (`dta int-sink --records`, or its `--events` output).
    pub records: PathBuf,
    /// Also query every flow's path from the stores of this sink configuration.
    pub config: Option<PathBuf>,
    /// The Key-Write store of paths in that configuration; `None`: the one of the INT sink's
    /// path layout ([`dta_int::query::Role::Paths`]).
    pub paths_store: Option<String>,
}

/// Compare the sink's flow records with a trace's ground truth; with a sink configuration,
/// also every flow's path as its stores answer it.
pub fn check(a: &CheckArgs) -> anyhow::Result<Checked> {
    let truth = dta_int_trace::intgen::GroundTruth::load(&a.truth)
        .with_context(|| format!("reading {}", a.truth.display()))?;
    let region = match &a.config {
        Some(cfg) => {
            let f = IntSinkFile::load(cfg)?;
            let c = Collector::open_dir(&f.region_dir, false)?;
            let name = match &a.paths_store {
                Some(n) => n.clone(),
                None => dta_int::query::Role::Paths
                    .find(
                        c.stores()
                            .iter()
                            .map(|s| (s.name.as_str(), s.region.header())),
                    )?
                    .to_owned(),
            };
            Some(c.store(&name)?.region.clone())
        }
        None => None,
    };
    dta_int_trace::check::check(&truth, &a.records, region.as_deref())
}
