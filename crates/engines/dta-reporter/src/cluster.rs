//! Reporting to many collectors ([DTA-draft §3.2] "Supporting Multiple Collectors": the
//! reporter picks the collector by stateless rules). A [`ClusterReporter`] holds one
//! [`Reporter`] per translator address of a [`ClusterMap`] and sends each report to the
//! translator of the collector owning its key ([`ClusterMap::route`]); collectors sharing a
//! translator address share its reporter (one open datagram per translator).
//!
//! The translator answers NACKs and congestion notices to the reporter's IP on one port, so
//! only the first translator's reporter binds the NACK port: retransmission is refused for a
//! map with more than one translator address ([`ClusterError::Retransmit`]), and notices of
//! the other translators are not seen.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use dta_cluster::{ClusterMap, RouteError};
use dta_wire::Report;

use crate::reporter::{Protocol, ReportError, Reporter, ReporterConfig, ReporterStats};

/// Why a cluster reporter could not be built or could not send.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// Retransmission asked for with several translators (see the module doc).
    #[error(
        "retransmission needs one NACK port per translator; this map has {0} translator \
         addresses (send without retransmission, or one reporter per translator)"
    )]
    Retransmit(usize),
    /// A socket could not be opened.
    #[error("reporter for translator {addr}: {source}")]
    Io {
        /// The translator.
        addr: SocketAddr,
        /// Why.
        source: io::Error,
    },
}

/// What a load run sends through: one [`Reporter`], or a [`ClusterReporter`] routing by key.
pub trait ReportSink {
    /// Send (or pack) one report.
    fn send(&mut self, report: &Report<'_>) -> Result<(), ReportError>;
    /// Send every open datagram.
    fn flush(&mut self) -> Result<(), ReportError>;
    /// See [`Reporter::take_refused`].
    fn take_refused(&mut self) -> io::Result<()>;
    /// Handle waiting NACKs and notices, without blocking.
    fn poll_nacks(&mut self) -> io::Result<usize>;
    /// See [`Reporter::linger`].
    fn linger(&mut self, quiet: Duration, max: Duration) -> Result<usize, ReportError>;
    /// The counters, summed over every translator.
    fn stats(&self) -> ReporterStats;
    /// The protocol spoken.
    fn protocol(&self) -> Protocol;
    /// Whether datagrams are kept for retransmission.
    fn retransmittable(&self) -> bool;
    /// The reporter a Sketch-Merge sketch of `sketch_id` is sent through (its owner's).
    fn sketch_reporter(&mut self, sketch_id: u16) -> Result<&mut Reporter, ReportError>;
}

impl ReportSink for Reporter {
    fn send(&mut self, report: &Report<'_>) -> Result<(), ReportError> {
        self.report(report)
    }
    fn flush(&mut self) -> Result<(), ReportError> {
        Reporter::flush(self)
    }
    fn take_refused(&mut self) -> io::Result<()> {
        Reporter::take_refused(self)
    }
    fn poll_nacks(&mut self) -> io::Result<usize> {
        Reporter::poll_nacks(self)
    }
    fn linger(&mut self, quiet: Duration, max: Duration) -> Result<usize, ReportError> {
        Reporter::linger(self, quiet, max)
    }
    fn stats(&self) -> ReporterStats {
        Reporter::stats(self)
    }
    fn protocol(&self) -> Protocol {
        self.config().protocol
    }
    fn retransmittable(&self) -> bool {
        self.config().retransmittable
    }
    fn sketch_reporter(&mut self, _sketch_id: u16) -> Result<&mut Reporter, ReportError> {
        Ok(self)
    }
}

/// One reporter per translator address of a cluster map, each report sent to its owner's.
pub struct ClusterReporter {
    map: Arc<ClusterMap>,
    /// The reporters, one per distinct translator address.
    reporters: Vec<Reporter>,
    /// Collector index to its reporter's index.
    of_collector: Vec<usize>,
    /// Reports sent per collector (index as in the map).
    per_collector: Vec<u64>,
    /// The reporter id (Sketch-Merge sections are chosen by it).
    reporter_id: u32,
    /// The collector a sketch was sent through [`ReportSink::sketch_reporter`] to, and its
    /// reporter's report count before.
    sketch_to: Option<(usize, u64)>,
}

impl ClusterReporter {
    /// Reporters for every translator of `map`, configured as `base` (whose `destination` is
    /// replaced by each translator's address).
    pub fn new(map: Arc<ClusterMap>, base: &ReporterConfig) -> Result<Self, ClusterError> {
        let mut addrs: Vec<SocketAddr> = vec![];
        let of_collector = map
            .collectors
            .iter()
            .map(|c| match addrs.iter().position(|a| *a == c.translator) {
                Some(i) => i,
                None => {
                    addrs.push(c.translator);
                    addrs.len() - 1
                }
            })
            .collect();
        if base.retransmittable && addrs.len() > 1 {
            return Err(ClusterError::Retransmit(addrs.len()));
        }
        let reporters = addrs
            .iter()
            .enumerate()
            .map(|(i, &addr)| {
                let mut cfg = base.clone();
                cfg.destination = addr;
                if i > 0 {
                    cfg.nack_port = None;
                    cfg.control_hub = None;
                } else {
                    // The one NACK socket hears every translator's notices.
                    cfg.control_from.extend(addrs.iter().copied());
                }
                Reporter::new(cfg).map_err(|source| ClusterError::Io { addr, source })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let reporter_id = match base.protocol {
            Protocol::Native { reporter_id } => reporter_id,
            Protocol::Prototype(_) => 0,
        };
        Ok(ClusterReporter {
            per_collector: vec![0; map.collectors.len()],
            map,
            reporters,
            of_collector,
            reporter_id,
            sketch_to: None,
        })
    }

    /// The map routed by.
    pub fn map(&self) -> &ClusterMap {
        &self.map
    }

    /// Reports sent to each collector so far (indexed as the map's collectors), sketch
    /// columns included.
    pub fn per_collector(&self) -> Vec<u64> {
        let mut v = self.per_collector.clone();
        if let Some((c, before)) = self.sketch_to {
            v[c] += self.reporters[self.of_collector[c]].stats().reports - before;
        }
        v
    }

    /// The reporter of translator address number `i` (in the map's order of first appearance).
    pub fn reporters(&self) -> &[Reporter] {
        &self.reporters
    }

    /// Send `report` to its owner's translator; the collector's index.
    pub fn route(&mut self, report: &Report<'_>) -> Result<usize, ReportError> {
        let c = self
            .map
            .route(report, self.reporter_id)
            .map_err(route_err)?;
        self.reporters[self.of_collector[c]].report(report)?;
        self.per_collector[c] += 1;
        Ok(c)
    }

    /// Flush every reporter and close them; the summed counters.
    pub fn close(self) -> Result<ReporterStats, ReportError> {
        let mut sum = ReporterStats::default();
        for r in self.reporters {
            sum.add(&r.close()?);
        }
        Ok(sum)
    }
}

fn route_err(e: RouteError) -> ReportError {
    ReportError::Unroutable(e.to_string())
}

impl ReportSink for ClusterReporter {
    fn send(&mut self, report: &Report<'_>) -> Result<(), ReportError> {
        self.route(report).map(|_| ())
    }
    fn flush(&mut self) -> Result<(), ReportError> {
        self.reporters.iter_mut().try_for_each(Reporter::flush)
    }
    fn take_refused(&mut self) -> io::Result<()> {
        self.reporters
            .iter_mut()
            .try_for_each(Reporter::take_refused)
    }
    fn poll_nacks(&mut self) -> io::Result<usize> {
        let mut n = 0;
        for r in &mut self.reporters {
            n += r.poll_nacks()?;
        }
        Ok(n)
    }
    fn linger(&mut self, quiet: Duration, max: Duration) -> Result<usize, ReportError> {
        let mut n = 0;
        for r in &mut self.reporters {
            n += r.linger(quiet, max)?;
        }
        Ok(n)
    }
    fn stats(&self) -> ReporterStats {
        let mut sum = ReporterStats::default();
        for r in &self.reporters {
            sum.add(&r.stats());
        }
        sum
    }
    fn protocol(&self) -> Protocol {
        self.reporters[0].config().protocol
    }
    fn retransmittable(&self) -> bool {
        self.reporters[0].config().retransmittable
    }
    fn sketch_reporter(&mut self, sketch_id: u16) -> Result<&mut Reporter, ReportError> {
        let probe = Report::SketchColumn {
            sketch_id,
            column: 0,
            epoch: 0,
            data: &[],
            immediate: false,
        };
        let c = self
            .map
            .route(&probe, self.reporter_id)
            .map_err(route_err)?;
        let r = &mut self.reporters[self.of_collector[c]];
        self.sketch_to = Some((c, r.stats().reports));
        Ok(r)
    }
}
