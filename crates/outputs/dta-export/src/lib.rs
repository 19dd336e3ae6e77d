//! Exports for DTA: INT events and flow records as Redis time series, as [INT-NIC §III.D] stores
//! them ([`redis_ts`]), and as InfluxDB line protocol ([`influx`]), both over the
//! exporter-neutral [`Record`]; INT records and collector stores to Kafka ([`kafka`]);
//! [`pipeline`] is the thread that drains the INT sink's notifications into the exporters, and
//! [`metrics`] counts what each exporter delivered and lost. Formats and names:
//! `docs/exports.md`, `docs/kafka.md`.

pub mod influx;
pub mod int_records;
pub mod kafka;
pub mod metrics;
pub mod pipeline;
pub mod record;
pub mod redis_ts;

pub use record::{FieldValue, Point, Record};
