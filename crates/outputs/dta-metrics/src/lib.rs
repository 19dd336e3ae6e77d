// Size: the translator's and the INT sink's families share their encoding helpers; about 300 of
// its lines are unit tests that scrape both through one server.
//! The Prometheus families of the translator and the INT sink, read at scrape time from their
//! engines' counters ([`dta_translator::Stats`], [`dta_int::IntStats`], the receive sockets'),
//! so the data path keeps its single-writer relaxed counters and pays nothing per report. The
//! engines do not know this crate: it reads what they publish. Served by
//! [`dta_http::metrics::MetricsServer`] or beside a query API.
//!
//! Metric names (OpenMetrics text; counters get the `_total` suffix on their samples) are listed
//! in `docs/exports.md`; `dashboards/grafana-dta.json` uses only these.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Registry;

use dta_int::{EventKind, IntStats};
use dta_translator::stats::{CONGESTION_KINDS, PRIMITIVES, PRIORITIES};
use dta_translator::Reason;
use dta_translator::Stats;

use dta_http::metrics::{counter, counter_family, gauge};

/// The translator's counters, summed over the `Stats` of every ingest thread, read on each
/// scrape.
#[derive(Debug, Clone)]
pub struct TranslatorMetrics {
    stats: Vec<Arc<Stats>>,
    /// The families' prefix: `dta_translator`, or the INT sink's for its embedded translator
    /// (so that sums over jobs do not count its reports twice).
    prefix: &'static str,
}

/// The prefix of a translator's families.
pub const TRANSLATOR_PREFIX: &str = "dta_translator";
/// The prefix of the INT sink service's own receive families (its sockets, AF_XDP, interfaces);
/// its INT counters are `dta_int_*` ([`IntSinkMetrics`]).
pub const INT_SINK_PREFIX: &str = "dta_int_sink";
/// The prefix of the INT sink's embedded translator's families.
pub const INT_SINK_TRANSLATOR_PREFIX: &str = "dta_int_sink_translator";

impl TranslatorMetrics {
    pub fn new(stats: Vec<Arc<Stats>>) -> Self {
        TranslatorMetrics {
            stats,
            prefix: TRANSLATOR_PREFIX,
        }
    }

    /// The same families under another prefix (the INT sink's embedded translator's).
    pub fn with_prefix(mut self, prefix: &'static str) -> Self {
        self.prefix = prefix;
        self
    }

    /// A family's name: the prefix, then `what`.
    fn n(&self, what: &str) -> String {
        format!("{}_{what}", self.prefix)
    }

    /// A registry holding just these metrics.
    pub fn registry(self) -> Registry {
        let mut r = Registry::default();
        r.register_collector(Box::new(self));
        r
    }

    fn sum(&self, f: impl Fn(&Stats) -> u64) -> u64 {
        self.stats
            .iter()
            .map(|s| f(s))
            .fold(0u64, u64::wrapping_add)
    }
}

fn labelled_counter<'a>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (Vec<(&'a str, &'a str)>, u64)>,
) -> Result<(), std::fmt::Error> {
    counter_family(enc, name, help, series)
}

impl Collector for TranslatorMetrics {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let l = |c: &std::sync::atomic::AtomicU64| c.load(Relaxed);
        counter(
            &mut enc,
            &self.n("datagrams"),
            "UDP datagrams received",
            self.sum(|s| l(&s.datagrams)),
        )?;
        counter(
            &mut enc,
            &self.n("bytes"),
            "UDP payload bytes received",
            self.sum(|s| l(&s.bytes)),
        )?;
        labelled_counter(
            &mut enc,
            &self.n("reports"),
            "Reports translated, by primitive ([DTA §4])",
            PRIMITIVES.iter().map(|op| {
                (
                    vec![("primitive", op.name())],
                    self.sum(|s| s.reports_of(*op)),
                )
            }),
        )?;
        labelled_counter(
            &mut enc,
            &self.n("reports_by_priority"),
            "Native datagrams' reports by priority",
            PRIORITIES
                .iter()
                .enumerate()
                .map(|(i, p)| (vec![("priority", *p)], self.sum(|s| l(&s.by_priority[i])))),
        )?;
        labelled_counter(
            &mut enc,
            &self.n("shed"),
            "Datagrams the first-stage classifier shed because their priority's queue was full",
            ["low", "medium", "high"]
                .iter()
                .enumerate()
                .map(|(i, p)| (vec![("priority", *p)], self.sum(|s| l(&s.shed[i])))),
        )?;
        labelled_counter(
            &mut enc,
            &self.n("dropped"),
            "Datagrams (wire) and reports (translator) dropped, by reason",
            Reason::ALL.iter().map(|r| {
                (
                    vec![("stage", r.stage()), ("reason", r.name())],
                    self.sum(|s| s.rejected_by(*r)),
                )
            }),
        )?;
        labelled_counter(
            &mut enc,
            &self.n("duplicates"),
            "Sequenced datagrams received again, by priority (retransmittable ones dropped)",
            PRIORITIES.iter().enumerate().map(|(i, p)| {
                (
                    vec![("priority", *p)],
                    self.sum(|s| l(&s.duplicates_by_priority[i])),
                )
            }),
        )?;
        labelled_counter(
            &mut enc,
            &self.n("lost"),
            "Sequence numbers never received, by priority ([DTA-draft §4.2])",
            PRIORITIES
                .iter()
                .enumerate()
                .map(|(i, p)| (vec![("priority", *p)], self.sum(|s| l(&s.lost[i])))),
        )?;
        gauge(
            &mut enc,
            &self.n("tracker_bytes"),
            "Memory of the sequence trackers' tables",
            self.sum(|s| l(&s.tracker_bytes)),
        )?;
        for (name, help, f) in [
            (
                &*self.n("unrecovered"),
                "Lost datagrams of retransmittable reporters (NACKs did not recover them)",
                (|s: &Stats| s.unrecovered.load(Relaxed)) as fn(&Stats) -> u64,
            ),
            (
                &*self.n("tracker_evictions"),
                "Sequence spaces evicted from a full tracker table",
                |s| s.tracker_evictions.load(Relaxed),
            ),
            (
                &*self.n("resyncs"),
                "Sequence spaces resynchronised (restarted or evicted reporters)",
                |s| s.resyncs.load(Relaxed),
            ),
            (
                &*self.n("nacks_over_budget"),
                "NACKs not sent: the translator's NACK budget was spent",
                |s| s.nacks_over_budget.load(Relaxed),
            ),
            (&*self.n("nacks"), "NACKs sent to reporters", |s| {
                s.nacks_sent.load(Relaxed)
            }),
            (
                &*self.n("immediates"),
                "Reports with the immediate flag",
                |s| s.immediates.load(Relaxed),
            ),
            (
                &*self.n("memory_write_bytes"),
                "Bytes written into regions",
                |s| s.write_bytes.load(Relaxed),
            ),
            (
                &*self.n("append_batches"),
                "Append batches written ([DTA §4.4])",
                |s| s.append_batches.load(Relaxed),
            ),
            (
                &*self.n("append_partial_batches"),
                "Append batches flushed before they were full",
                |s| s.append_partial_batches.load(Relaxed),
            ),
            (
                &*self.n("sketch_columns_written"),
                "Sketch-Merge columns written ([DTA-draft §3.1])",
                |s| s.sketch_columns_written.load(Relaxed),
            ),
            (
                &*self.n("forwarded"),
                "Reports handed to the translator thread owning their state",
                |s| s.forwarded.load(Relaxed),
            ),
        ] {
            counter(&mut enc, name, help, self.sum(f))?;
        }
        labelled_counter(
            &mut enc,
            &self.n("memory_ops"),
            "Memory operations issued (RDMA WRITE / FETCH_ADD equivalents)",
            [
                (vec![("op", "write")], self.sum(|s| l(&s.writes))),
                (vec![("op", "fetch_add")], self.sum(|s| l(&s.fetch_adds))),
            ],
        )?;
        labelled_counter(
            &mut enc,
            &self.n("hellos"),
            "Hellos from reporters (the life NACKs and notices are bound to), by outcome",
            dta_translator::control::HelloOutcome::ALL.iter().map(|o| {
                (
                    vec![("outcome", o.name())],
                    self.sum(|s| l(&s.hellos[o.index()])),
                )
            }),
        )?;
        // The sources claiming priority beyond their budget, the most first (bounded).
        counter_family(
            &mut enc,
            &self.n("priority_demoted_by_source"),
            "Datagrams a source claimed high or medium priority for beyond its budget, treated \
             as low: the sources demoted most, at most 16 (0.0.0.0: sources beyond the table)",
            Stats::demoted_sources_of(&self.stats)
                .into_iter()
                .map(|(a, n)| (vec![("source", a.to_string())], n)),
        )?;
        // Flow control (docs/flow-control.md).
        for (name, help, a) in [
            (
                &*self.n("overload_admitted"),
                "Datagrams admitted by the write meter, by priority",
                (|s: &Stats| &s.overload_admitted)
                    as fn(&Stats) -> &[std::sync::atomic::AtomicU64; 3],
            ),
            (
                &*self.n("overload_dropped"),
                "Datagrams dropped by the write meter, by priority (high: spill full)",
                |s| &s.overload_dropped,
            ),
            (
                &*self.n("priority_demoted"),
                "Datagrams whose source claimed this priority beyond its per-source budget, \
                 treated as low (high_per_source, medium_per_source)",
                |s| &s.demoted,
            ),
        ] {
            labelled_counter(
                &mut enc,
                name,
                help,
                PRIORITIES
                    .iter()
                    .enumerate()
                    .map(|(i, p)| (vec![("priority", *p)], self.sum(|s| l(&a(s)[i])))),
            )?;
        }
        for (name, help, f) in [
            (
                &*self.n("spilled"),
                "High-priority datagrams spilled to wait for the write budget",
                (|s: &Stats| s.spilled.load(Relaxed)) as fn(&Stats) -> u64,
            ),
            (
                &*self.n("reinjected"),
                "Spilled datagrams applied again",
                |s| s.reinjected.load(Relaxed),
            ),
            (
                &*self.n("spill_dropped"),
                "High-priority datagrams dropped because the spill was full (spill_full)",
                |s| s.spill_dropped.load(Relaxed),
            ),
            (
                &*self.n("spill_file_errors"),
                "Spill file writes that failed (its filesystem full, an I/O error)",
                |s| s.spill_file_errors.load(Relaxed),
            ),
            (
                &*self.n("notices_sent"),
                "Congestion notices sent to reporters",
                |s| s.notices_sent.load(Relaxed),
            ),
            (
                &*self.n("redundancy_lowered"),
                "Low-priority Key-Write reports written with redundancy 1 ([DTA-draft §6])",
                |s| s.redundancy_lowered.load(Relaxed),
            ),
        ] {
            counter(&mut enc, name, help, self.sum(f))?;
        }
        labelled_counter(
            &mut enc,
            &self.n("congestion_signals"),
            "Congestion signals from the sink, by kind",
            CONGESTION_KINDS.iter().enumerate().map(|(i, k)| {
                (
                    vec![("kind", *k)],
                    self.sum(|s| l(&s.congestion_signals[i])),
                )
            }),
        )?;
        gauge(
            &mut enc,
            &self.n("spill_bytes"),
            "Bytes held in the spill",
            self.sum(|s| l(&s.spill_bytes)),
        )?;
        gauge(
            &mut enc,
            &self.n("budget"),
            "Effective write budget, memory writes per second (0: unmetered)",
            // One meter for all threads: its value, not a sum.
            self.stats.iter().map(|s| l(&s.budget)).max().unwrap_or(0),
        )?;
        labelled_counter(
            &mut enc,
            &self.n("postcard_chunks"),
            "Postcarding chunks emitted, by outcome ([DTA §4.3])",
            [
                (
                    vec![("outcome", "complete")],
                    self.sum(|s| l(&s.postcard_chunks_complete)),
                ),
                (
                    vec![("outcome", "collision")],
                    self.sum(|s| l(&s.postcard_chunks_collision)),
                ),
                (
                    vec![("outcome", "timeout")],
                    self.sum(|s| l(&s.postcard_chunks_timeout)),
                ),
            ],
        )?;
        Ok(())
    }
}

/// The INT sink's counters ([`dta_int::IntStats`], single-writer atomics like the
/// translator's), read on each scrape: frames and reports received, events by kind
/// ([INT-NIC §III.C]), flows leaving the FlowCache by reason, parse errors by reason.
#[derive(Debug, Clone)]
pub struct IntSinkMetrics {
    stats: Vec<Arc<IntStats>>,
}

impl IntSinkMetrics {
    pub fn new(stats: Vec<Arc<IntStats>>) -> Self {
        IntSinkMetrics { stats }
    }

    fn sum(&self, f: impl Fn(&IntStats) -> u64) -> u64 {
        self.stats
            .iter()
            .map(|s| f(s))
            .fold(0u64, u64::wrapping_add)
    }
}

/// A UDP receiver's sockets (one per thread), read on each scrape: the receive buffer the
/// kernel granted each (`SO_RCVBUF`, as asked: half what the kernel reports) and the datagrams
/// it dropped because a buffer was full (`SO_MEMINFO`): reports the receiver never saw.
#[derive(Debug)]
pub struct UdpReceiveMetrics {
    prefix: &'static str,
    sockets: Vec<std::net::UdpSocket>,
}

impl UdpReceiveMetrics {
    /// Metrics named `PREFIX_recv_buffer_bytes` and `PREFIX_kernel_drops`.
    pub fn new(prefix: &'static str, sockets: Vec<std::net::UdpSocket>) -> Self {
        UdpReceiveMetrics { prefix, sockets }
    }
}

impl Collector for UdpReceiveMetrics {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let buffer = self
            .sockets
            .first()
            .and_then(|s| socket2::SockRef::from(s).recv_buffer_size().ok())
            .map_or(0, |b| b / 2);
        gauge(
            &mut enc,
            &format!("{}_recv_buffer_bytes", self.prefix),
            "Receive buffer of each socket, bytes (net.core.rmem_max caps it without CAP_NET_ADMIN)",
            buffer as u64,
        )?;
        let drops = self
            .sockets
            .iter()
            .map(|s| dta_translator::ingest::kernel_drops(s).unwrap_or(0))
            .fold(0u64, u64::wrapping_add);
        counter(
            &mut enc,
            &format!("{}_kernel_drops", self.prefix),
            "Datagrams the kernel dropped because a receive buffer was full",
            drops,
        )
    }
}

/// The translator's receive sockets, read on each scrape: the receive buffer of each socket and
/// the datagrams the kernel dropped at a full buffer, by priority (each receiver has one socket
/// per priority, `dta_translator::prio_sockets`).
pub struct PriorityReceiveMetrics {
    receivers: Vec<dta_translator::prio_sockets::PrioSockets>,
}

impl PriorityReceiveMetrics {
    /// Metrics `dta_translator_recv_buffer_bytes` and `dta_translator_kernel_drops{priority}`.
    pub fn new(receivers: Vec<dta_translator::prio_sockets::PrioSockets>) -> Self {
        PriorityReceiveMetrics { receivers }
    }
}

impl std::fmt::Debug for PriorityReceiveMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "PriorityReceiveMetrics({} receivers)",
            self.receivers.len()
        )
    }
}

impl Collector for PriorityReceiveMetrics {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let buffer = self
            .receivers
            .first()
            .and_then(|r| socket2::SockRef::from(r.sender()).recv_buffer_size().ok())
            .map_or(0, |b| b / 2);
        gauge(
            &mut enc,
            "dta_translator_recv_buffer_bytes",
            "Receive buffer of each socket, bytes (net.core.rmem_max caps it without CAP_NET_ADMIN)",
            buffer as u64,
        )?;
        let mut drops = [0u64; 3];
        for r in &self.receivers {
            for (d, x) in drops.iter_mut().zip(r.kernel_drops()) {
                *d = d.wrapping_add(x);
            }
        }
        labelled_counter(
            &mut enc,
            "dta_translator_kernel_drops",
            "Datagrams the kernel dropped because a receive buffer was full, by priority (each \
             priority has its own socket)",
            dta_translator::prio_sockets::SLOTS
                .iter()
                .zip(drops)
                .map(|(p, d)| (vec![("priority", p.name())], d)),
        )
    }
}

impl Collector for IntSinkMetrics {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let l = |c: &std::sync::atomic::AtomicU64| c.load(Relaxed);
        for (name, help, f) in [
            (
                "dta_int_frames",
                "Frames given to the INT sink",
                (|s: &IntStats| s.frames.load(Relaxed)) as fn(&IntStats) -> u64,
            ),
            (
                "dta_int_md_packets",
                "INT-MD packets (sink frames or stacked reports) processed",
                |s| s.md_packets.load(Relaxed),
            ),
            (
                "dta_int_telemetry_reports",
                "Telemetry reports received",
                |s| s.reports.load(Relaxed),
            ),
            ("dta_int_postcards", "INT-XD/MX postcards processed", |s| {
                s.postcards.load(Relaxed)
            }),
            ("dta_int_drop_reports", "Drop reports received", |s| {
                s.drop_reports.load(Relaxed)
            }),
        ] {
            counter(&mut enc, name, help, self.sum(f))?;
        }
        labelled_counter(
            &mut enc,
            "dta_int_events",
            "INT events detected by the sink ([INT-NIC §III.C]), by kind and class",
            EventKind::ALL.iter().map(|k| {
                (
                    vec![("kind", k.name()), ("class", k.class())],
                    self.sum(|s| s.events_of(*k)),
                )
            }),
        )?;
        labelled_counter(
            &mut enc,
            "dta_int_flows_evicted",
            "Flows leaving the FlowCache, by reason (aging, capacity, flush)",
            [
                (vec![("reason", "idle")], self.sum(|s| l(&s.flows_idle))),
                (
                    vec![("reason", "capacity")],
                    self.sum(|s| l(&s.flows_capacity)),
                ),
                (vec![("reason", "flush")], self.sum(|s| l(&s.flows_flushed))),
            ],
        )?;
        counter(
            &mut enc,
            "dta_int_flows_active_summaries",
            "Summaries of flows still active, written every active_timeout_ms",
            self.sum(|s| l(&s.flows_active_summaries)),
        )?;
        labelled_counter(
            &mut enc,
            "dta_int_errors",
            "INT frames and telemetry reports rejected, by reason",
            dta_int_wire::Error::ALL
                .iter()
                .map(|e| (vec![("reason", e.reason())], self.sum(|s| s.errors_of(*e)))),
        )?;
        labelled_counter(
            &mut enc,
            "dta_int_sources_rejected",
            "Datagrams the INT sink dropped for their source (allow-list), by reason",
            dta_int::SourceReject::ALL.iter().map(|r| {
                (
                    vec![("reason", r.reason())],
                    self.sum(|s| s.sources_rejected_of(*r)),
                )
            }),
        )?;
        Ok(())
    }
}

pub use dta_http::exposition::{parse_exposition, value, Sample};
pub use dta_http::metrics::{encode, metrics_router, MetricsServer, CONTENT_TYPE};

#[cfg(test)]
mod tests {
    use super::*;
    use dta_wire::Error as WireError;
    use dta_wire::Opcode;

    #[test]
    fn parses_labels_with_escapes() {
        let s = parse_exposition(
            "# TYPE x counter\nx_total{a=\"1\",b=\"q\\\"u,o}te\"} 5\ny 2.5 1700000000\n# EOF\n",
        )
        .unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].name, "x_total");
        assert_eq!(s[0].label("b"), Some("q\"u,o}te"));
        assert_eq!(s[0].value, 5.0);
        assert_eq!(s[1].value, 2.5);
        assert!(parse_exposition("x{a=1} 3\n").is_err());
        assert!(parse_exposition("x notanumber\n").is_err());
    }

    #[test]
    fn translator_counters_are_summed_over_threads() {
        let (a, b) = (Arc::new(Stats::default()), Arc::new(Stats::default()));
        a.report(Opcode::KeyWrite);
        b.report(Opcode::KeyWrite);
        b.report(Opcode::Append);
        a.wire_error(WireError::Truncated);
        b.reject(Reason::NoStore);
        dta_translator::stats::add(&a.nacks_sent, 3);
        dta_translator::stats::add(&a.lost[2], 4);
        dta_translator::stats::add(&b.lost[0], 1);
        dta_translator::stats::add(&a.duplicates_by_priority[1], 2);
        dta_translator::stats::add(&b.unrecovered, 4);
        dta_translator::stats::add(&b.tracker_evictions, 6);
        a.tracker_bytes
            .store(1000, std::sync::atomic::Ordering::Relaxed);
        b.tracker_bytes
            .store(1000, std::sync::atomic::Ordering::Relaxed);
        dta_translator::stats::add(&a.overload_dropped[0], 4);
        dta_translator::stats::add(&b.overload_dropped[0], 1);
        dta_translator::stats::add(&b.congestion_signals[2], 2);
        a.budget.store(500, Relaxed);
        b.budget.store(500, Relaxed);
        b.spill_bytes.store(100, Relaxed);
        a.spill_bytes.store(20, Relaxed);
        dta_translator::stats::add(&a.shed[0], 5);
        dta_translator::stats::add(&b.shed[0], 2);
        let reg = TranslatorMetrics::new(vec![a, b]).registry();
        let s = parse_exposition(&encode(&reg)).unwrap();
        let v = |n, l: &[(&str, &str)]| value(&s, n, l).unwrap();
        assert_eq!(
            v(
                "dta_translator_reports_total",
                &[("primitive", "key_write")]
            ),
            2.0
        );
        assert_eq!(
            v("dta_translator_reports_total", &[("primitive", "append")]),
            1.0
        );
        assert_eq!(
            v(
                "dta_translator_dropped_total",
                &[("stage", "wire"), ("reason", "truncated")]
            ),
            1.0
        );
        assert_eq!(
            v(
                "dta_translator_dropped_total",
                &[("stage", "translator"), ("reason", "no_store")]
            ),
            1.0
        );
        assert_eq!(v("dta_translator_dropped_total", &[]), 2.0);
        assert_eq!(v("dta_translator_nacks_total", &[]), 3.0);
        assert_eq!(v("dta_translator_lost_total", &[("priority", "high")]), 4.0);
        assert_eq!(v("dta_translator_lost_total", &[("priority", "low")]), 1.0);
        assert_eq!(v("dta_translator_lost_total", &[]), 5.0);
        assert_eq!(
            v("dta_translator_duplicates_total", &[("priority", "medium")]),
            2.0
        );
        assert_eq!(v("dta_translator_unrecovered_total", &[]), 4.0);
        assert_eq!(v("dta_translator_tracker_evictions_total", &[]), 6.0);
        assert_eq!(v("dta_translator_tracker_bytes", &[]), 2000.0);
        assert_eq!(
            v(
                "dta_translator_overload_dropped_total",
                &[("priority", "low")]
            ),
            5.0
        );
        assert_eq!(
            v(
                "dta_translator_overload_dropped_total",
                &[("priority", "high")]
            ),
            0.0
        );
        assert_eq!(
            v(
                "dta_translator_congestion_signals_total",
                &[("kind", "cnp")]
            ),
            2.0
        );
        assert_eq!(
            v("dta_translator_budget", &[]),
            500.0,
            "one meter, not summed"
        );
        assert_eq!(v("dta_translator_spill_bytes", &[]), 120.0);
        assert_eq!(v("dta_translator_shed_total", &[("priority", "low")]), 7.0);
        assert_eq!(v("dta_translator_shed_total", &[("priority", "high")]), 0.0);
    }

    #[test]
    fn int_sink_counters_by_kind_class_and_reason() {
        use std::sync::atomic::Ordering::Relaxed;
        let (a, b) = (Arc::new(IntStats::default()), Arc::new(IntStats::default()));
        a.events[EventKind::QueueOccupancy as usize - 1].store(2, Relaxed);
        b.events[EventKind::QueueOccupancy as usize - 1].store(3, Relaxed);
        b.events[EventKind::PathChange as usize - 1].store(1, Relaxed);
        a.flows_idle.store(4, Relaxed);
        b.error(dta_int_wire::Error::BadHopMl);
        a.md_packets.store(10, Relaxed);
        let mut reg = Registry::default();
        reg.register_collector(Box::new(IntSinkMetrics::new(vec![a, b])));
        let s = parse_exposition(&encode(&reg)).unwrap();
        let v = |n, l: &[(&str, &str)]| value(&s, n, l).unwrap();
        assert_eq!(
            v(
                "dta_int_events_total",
                &[("kind", "queue_occupancy"), ("class", "threshold")]
            ),
            5.0
        );
        assert_eq!(
            v(
                "dta_int_events_total",
                &[("kind", "path_change"), ("class", "change")]
            ),
            1.0
        );
        assert_eq!(v("dta_int_events_total", &[("class", "drop")]), 0.0);
        assert_eq!(v("dta_int_flows_evicted_total", &[("reason", "idle")]), 4.0);
        assert_eq!(v("dta_int_errors_total", &[("reason", "bad_hop_ml")]), 1.0);
        assert_eq!(v("dta_int_md_packets_total", &[]), 10.0);
        // Every event kind has a series.
        assert_eq!(
            s.iter()
                .filter(|x| x.name == "dta_int_events_total")
                .count(),
            EventKind::ALL.len()
        );
    }

    #[test]
    fn server_answers_metrics_404_and_405_then_stops() {
        use std::io::{Read, Write};
        use std::net::TcpStream;
        let stats = Arc::new(Stats::default());
        let reg = Arc::new(TranslatorMetrics::new(vec![stats.clone()]).registry());
        let srv = MetricsServer::start("127.0.0.1:0".parse().unwrap(), reg).unwrap();
        let addr = srv.local_addr();
        let req = |r: &str| {
            let mut c = TcpStream::connect(addr).unwrap();
            c.write_all(r.as_bytes()).unwrap();
            let mut out = String::new();
            c.read_to_string(&mut out).unwrap();
            out
        };
        stats.report(dta_wire::Opcode::Append);
        let ok = req("GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: application/openmetrics-text\r\nConnection: close\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.contains(CONTENT_TYPE));
        // Without asking for OpenMetrics: the Prometheus text format, the same samples.
        let text = req("GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        assert!(
            text.contains(dta_http::exposition::PROMETHEUS_TEXT),
            "{text}"
        );
        assert!(!text.contains("# EOF"), "{text}");
        let body = ok.split_once("\r\n\r\n").unwrap().1;
        let s = parse_exposition(body).unwrap();
        assert_eq!(
            value(
                &s,
                "dta_translator_reports_total",
                &[("primitive", "append")]
            ),
            Some(1.0)
        );
        assert!(req("GET / HTTP/1.1\r\nConnection: close\r\n\r\n").starts_with("HTTP/1.1 404"));
        assert!(
            req("POST /metrics HTTP/1.1\r\nConnection: close\r\n\r\n").starts_with("HTTP/1.1 405")
        );
        assert!(
            req("GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n").starts_with("HTTP/1.1 200")
        );
        drop(srv);
        assert!(TcpStream::connect(addr).is_err(), "stopped when dropped");
    }

    /// Open `n` connections that send nothing (and one that sends half a request head), then
    /// scrape: the answer must come within 1 s.
    fn scrape_past_idle_connections(srv: &MetricsServer, n: usize) -> String {
        use std::io::{Read, Write};
        use std::net::TcpStream;
        let addr = srv.local_addr();
        let mut idle: Vec<TcpStream> = (0..n).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let mut half = TcpStream::connect(addr).unwrap();
        half.write_all(b"GET /metrics HTTP/1.1\r\nHost:").unwrap();
        idle.push(half);
        let mut c = TcpStream::connect(addr).unwrap();
        // Far below the header read timeout the idle connections would hold a one-at-a-time
        // server for, far above a loaded machine's delay.
        c.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out)
            .expect("the scrape answered within 5 s despite idle connections");
        drop(idle);
        out
    }

    #[test]
    fn translator_metrics_scrape_answers_past_50_idle_connections() {
        let stats = Arc::new(Stats::default());
        let reg = Arc::new(TranslatorMetrics::new(vec![stats]).registry());
        let srv = MetricsServer::start_with(
            "127.0.0.1:0".parse().unwrap(),
            reg,
            dta_http::ServerOptions::default(),
        )
        .unwrap();
        let out = scrape_past_idle_connections(&srv, 50);
        assert!(out.starts_with("HTTP/1.1 200"), "{out}");
        assert!(out.contains("dta_translator_datagrams_total"), "{out}");
    }

    #[test]
    fn int_sink_metrics_scrape_answers_past_50_idle_connections() {
        let stats = Arc::new(Stats::default());
        let mut reg = TranslatorMetrics::new(vec![stats]).registry();
        reg.register_collector(Box::new(IntSinkMetrics::new(vec![Arc::new(
            IntStats::default(),
        )])));
        let srv = MetricsServer::start_with(
            "127.0.0.1:0".parse().unwrap(),
            Arc::new(reg),
            dta_http::ServerOptions::default(),
        )
        .unwrap();
        let out = scrape_past_idle_connections(&srv, 50);
        assert!(out.starts_with("HTTP/1.1 200"), "{out}");
        assert!(out.contains("dta_int_"), "{out}");
    }

    #[test]
    fn metrics_token_required_when_set_and_non_loopback_refused_without() {
        use std::io::{Read, Write};
        use std::net::TcpStream;
        let reg = Arc::new(TranslatorMetrics::new(vec![Arc::new(Stats::default())]).registry());
        let err = MetricsServer::start_with(
            "0.0.0.0:0".parse().unwrap(),
            reg.clone(),
            dta_http::ServerOptions::default(),
        )
        .err()
        .expect("a non-loopback bind without a token is refused");
        assert!(err.to_string().contains("token is required"), "{err}");
        let opts = dta_http::ServerOptions {
            token: Some(dta_http::Token::new("0123456789abcdef-metrics", "test").unwrap()),
            ..Default::default()
        };
        let srv = MetricsServer::start_with("127.0.0.1:0".parse().unwrap(), reg, opts).unwrap();
        let req = |auth: &str| {
            let mut c = TcpStream::connect(srv.local_addr()).unwrap();
            write!(
                c,
                "GET /metrics HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n"
            )
            .unwrap();
            let mut out = String::new();
            c.read_to_string(&mut out).unwrap();
            out
        };
        assert!(req("").starts_with("HTTP/1.1 401"));
        assert!(req("Authorization: Bearer nope\r\n").starts_with("HTTP/1.1 401"));
        assert!(
            req("Authorization: Bearer 0123456789abcdef-metrics\r\n").starts_with("HTTP/1.1 200")
        );
    }
}
