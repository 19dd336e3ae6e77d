//! The reporter side of Direct Telemetry Access ([DTA §3]: reporters send telemetry reports
//! over UDP to a translator). [`Reporter`] builds reports of every primitive (Key-Write,
//! Key-Increment, Append, Postcarding, and Sketch-Merge from [DTA-draft §3.1]) in the prototype
//! protocol
//! (one report per datagram) or the native protocol (many per datagram, packed into a buffer
//! allocated once), numbers datagrams, keeps the last ones of a retransmittable reporter and
//! resends the datagrams a NACK from the translator names (selective repeat; go-back-N for the
//! prototype's NACK), probes the tail of a run, and obeys congestion notices ([`flow`]). [`SketchSender`] sends a sketch column
//! by column and restarts from a NACKed column; [`ApproSync`] keeps a Count-Min sketch in
//! approximate sync with an ApproSync Sketch-Merge store, sending a column when it diverges. [`loadgen`] is the load generator behind
//! `dta report`: token-bucket pacing in batches, uniform or Zipf keys from a seed, and data
//! derived from the key ([`keys`]) so tests can check what the collector stored. Hashing and
//! placement are the translator's job (`docs/architecture.md`): reporters never compute indices.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cluster;
pub mod control;
pub mod flow;
pub mod keys;
pub mod loadgen;
pub mod pacing;
pub mod raw;
pub mod reporter;
pub mod sketch;
pub mod workload;

pub use cluster::{ClusterError, ClusterReporter, ReportSink};
pub use control::ControlHub;
pub use reporter::{
    Clock, Protocol, ReportError, Reporter, ReporterConfig, ReporterStats, DEFAULT_MAX_DATAGRAM,
};
pub use sketch::{ApproSync, ColumnSource, HllColumns, SketchOutcome, SketchSender};
