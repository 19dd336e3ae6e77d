//! The DTA translator: the last hop before the collector ([DTA §3, §5.2]).
//!
//! It receives DTA reports over UDP (either the prototype protocol or the native one), parses and
//! validates them with `dta-wire`, counts every report by primitive and every rejected datagram or
//! report by reason ([`Stats`]), and translates each report into memory operations on the
//! collector's stores ([DTA §4]): Key-Write and Key-Increment through the store layouts,
//! Postcarding through a path cache ([`postcard`]), Append through per-list batches
//! ([`append`]), Sketch-Merge through per-reporter in-order column tracking and merging
//! ([`sketch`]). Sequenced datagrams go through a selective-repeat tracker ([`sequence`]):
//! retransmittable ones are applied exactly once and their gaps NACKed, the others counted.
//! The operations go to a [`Sinks`]: in this crate the co-located shared-memory sink
//! ([`RegionSinks`]); the RDMA layer provides a RoCEv2 one. Several translator threads can share
//! the stores and one UDP port ([`shard`], [`ingest::run_threads`]); a first-stage classifier
//! can receive for them and shed by priority under overload ([`classify`],
//! [`ingest::run_classified`]). Flow control (docs/flow-control.md): a write meter per
//! collector ([`meter`]) admits datagrams by priority ([`overload`]), spills high priority it
//! cannot write yet ([`spill`]) and re-injects it in order, notifies reporters of drops and
//! lowers low-priority Key-Write redundancy under sustained pressure.

pub mod append;
pub mod baseline;
pub mod claims;
pub mod classify;
pub mod config;
pub mod control;
pub mod engine;
pub mod ingest;
pub mod meter;
pub mod overload;
pub mod postcard;
pub mod prio_sockets;
pub mod reason;
pub mod rules;
pub mod sequence;
pub mod shard;
pub mod sinks;
pub mod sketch;
pub mod sockets;
pub mod spill;
pub mod stats;

pub use config::{FlowControlConfig, PrototypeHeader, TranslatorConfig};
pub use engine::{unreachable_stores, BuildError, PendingNack, Translator};
pub use meter::Meter;
pub use reason::Reason;
pub use shard::{Shard, Shards};
pub use sinks::{Congestion, RegionSinks, Sinks};
pub use stats::Stats;
