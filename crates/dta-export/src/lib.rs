//! Metrics and exports for DTA: Prometheus exposition of the translator's and the INT
//! sink's counters, served on `/metrics` through `dta-http` ([`prom`]); INT events and flow records as
//! Redis time series, as [INT-NIC §III.D] stores them ([`redis_ts`]), and as InfluxDB line
//! protocol ([`influx`]), both over the exporter-neutral [`Record`]; and a generator of
//! realistic INT traffic written as pcap with its ground truth, plus a replayer that sends a
//! pcap's telemetry to a translator ([`intgen`], [`pcap`]); [`pipeline`] is the thread that
//! drains the INT sink's notifications into the exporters. Formats and names:
//! `docs/exports.md`.

pub mod influx;
pub mod int_records;
pub mod intgen;
pub mod kafka;
pub mod pcap;
pub mod pipeline;
pub mod prom;
pub mod record;
pub mod redis_ts;

pub use record::{FieldValue, Point, Record};
