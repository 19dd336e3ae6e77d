//! The DTA collector: it owns the memory the translator writes into, and answers queries by
//! reading it ([DTA §3, §5.3]). From its configuration it creates one region file per store
//! (reopening existing files, so data survives restarts), and it serves queries — Key-Write,
//! Key-Increment, Postcarding, Append lists, Sketch-Merge — to the CLI, over HTTP, and to
//! anything else that maps the region files. It does no work per report: the translator (or an
//! RDMA NIC on its behalf) writes the stores directly.

pub mod cluster;
pub mod collector;
pub mod config;
pub mod http;
pub mod limits;
pub mod metrics;
pub mod notify_http;
pub mod query;

pub use collector::{
    planned_spec, region_path, BadStore, Collector, CollectorError, Store, StoreStatus,
};
pub use config::{CollectorConfig, StoreConfig};
