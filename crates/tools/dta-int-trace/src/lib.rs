//! INT traffic for tests, benchmarks and operators: [`intgen`] generates realistic INT traces
//! (flows drawn from a flow-size distribution over a leaf-spine path, per-hop metadata as
//! [INT-spec §5] defines it) with their ground truth; [`pcap`] writes them as pcap (raw INT
//! frames or wrapped in telemetry reports) and replays a pcap's telemetry to a translator or an
//! INT sink; [`check`] compares what an INT sink made of a trace with its ground truth.
//! Formats: `docs/exports.md`.

pub mod check;
pub mod intgen;
pub mod pcap;
