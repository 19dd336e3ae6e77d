//! A monitoring system's workload over a trace: which system (for Marple, which queries) with
//! its parameters, the reports it sends, and the ground truth its queries should answer. The
//! one dispatch over the systems, for `dta report --workload` and anything else that replays
//! a system.

use crate::trace::Trace;
use crate::{marple, netseer, pint, sonata, trajectory, turboflow, Emit, SystemError};

/// A system and its parameters.
#[derive(Debug, Clone)]
pub enum Workload {
    /// Marple's queries ([`marple::Query`]), each over the whole trace.
    Marple {
        /// The queries, in order.
        queries: Vec<marple::Query>,
        /// Their parameters.
        params: marple::Params,
    },
    /// NetSeer's loss events.
    Netseer(netseer::Params),
    /// TurboFlow's flow records.
    Turboflow(turboflow::Params),
    /// PINT's per-packet digests.
    Pint,
    /// Sonata's windowed queries.
    Sonata(sonata::Params),
    /// Trajectory Sampling's postcards.
    Trajectory(trajectory::Params),
}

/// Reports a workload sent, by primitive.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Sent {
    /// Key-Write, Key-Increment and Append reports.
    #[serde(flatten)]
    pub reports: marple::Sent,
    /// Postcarding reports.
    pub postcards: u64,
}

impl Sent {
    /// All reports.
    pub fn total(&self) -> u64 {
        self.reports.total() + self.postcards
    }
}

impl Workload {
    /// Every report of the system over `trace`, to `emit`; what was sent.
    pub fn reports(&self, trace: &Trace, emit: &mut Emit) -> Result<Sent, SystemError> {
        let mut sent = Sent::default();
        let r = &mut sent.reports;
        match self {
            Workload::Marple { queries, params } => {
                for q in queries {
                    let s = marple::reports(*q, trace, params, emit)?;
                    r.key_write += s.key_write;
                    r.key_increment += s.key_increment;
                    r.append += s.append;
                }
            }
            Workload::Netseer(p) => r.append = netseer::reports(trace, p, emit)?,
            Workload::Turboflow(p) => {
                r.key_increment = turboflow::reports(trace, p, emit)?.key_increment
            }
            Workload::Pint => r.key_write = pint::reports(trace, emit)?.key_write,
            Workload::Sonata(p) => {
                let s = sonata::reports(trace, p, emit)?;
                r.key_write = s.key_write;
                r.append = s.append;
            }
            Workload::Trajectory(p) => {
                sent.postcards = trajectory::reports(trace, p, emit)?.postcards
            }
        }
        Ok(sent)
    }

    /// The ground truth of the system's queries over `trace`, as JSON.
    pub fn truth(&self, trace: &Trace) -> Result<serde_json::Value, SystemError> {
        Ok(match self {
            Workload::Marple { params, .. } => marple::truth(trace, params).to_json(),
            Workload::Netseer(_) => netseer::truth_json(&netseer::truth(trace)),
            Workload::Turboflow(_) => turboflow::truth_json(&turboflow::truth(trace)),
            Workload::Pint => pint::truth_json(&pint::truth(trace)),
            Workload::Sonata(p) => sonata::truth(trace, p)?.to_json(),
            Workload::Trajectory(p) => trajectory::truth_json(&trajectory::truth(trace, p)),
        })
    }
}
