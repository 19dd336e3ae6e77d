//! The exporters' own counters: points exported and refused per sink, and the Kafka export's
//! delivery counters, in the families of `docs/exports.md`.

use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use dta_http::metrics::{counter, gauge};

type SinkLabel = [(&'static str, String); 1];

/// The exporters' own counters (prometheus-client families: a read lock per increment; they
/// count exported points, not reports).
#[derive(Debug, Clone, Default)]
pub struct ExportMetrics {
    exported: Family<SinkLabel, Counter>,
    export_errors: Family<SinkLabel, Counter>,
}

impl ExportMetrics {
    /// Register the families in `registry` (`dta_export_points_total`,
    /// `dta_export_errors_total`, label `sink`).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "dta_export_points",
            "Points exported, by sink (redis, influx)",
            self.exported.clone(),
        );
        registry.register(
            "dta_export_errors",
            "Points an exporter failed to write or refused, by sink",
            self.export_errors.clone(),
        );
    }

    /// Count `ok` points exported and `failed` refused or lost by `sink`.
    pub fn exported(&self, sink: &str, ok: u64, failed: u64) {
        self.exported
            .get_or_create(&[("sink", sink.to_owned())])
            .inc_by(ok);
        if failed > 0 {
            self.export_errors
                .get_or_create(&[("sink", sink.to_owned())])
                .inc_by(failed);
        }
    }
}

/// The Kafka export's delivery counters (`dta_export_kafka_*`, [`crate::kafka::KafkaStats`]),
/// read at scrape time.
#[derive(Debug)]
pub struct KafkaMetrics {
    stats: Arc<crate::kafka::KafkaStats>,
}

impl KafkaMetrics {
    pub fn new(stats: Arc<crate::kafka::KafkaStats>) -> KafkaMetrics {
        KafkaMetrics { stats }
    }
}

impl Collector for KafkaMetrics {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = self.stats.snapshot();
        for (name, help, v) in [
            (
                "dta_export_kafka_queued",
                "Messages queued for Kafka",
                s.queued,
            ),
            (
                "dta_export_kafka_delivered",
                "Messages the broker acknowledged (each once)",
                s.delivered,
            ),
            (
                "dta_export_kafka_dropped",
                "Messages refused because the queue was full (max_queue_bytes)",
                s.dropped,
            ),
            (
                "dta_export_kafka_abandoned",
                "Messages still unacknowledged when the exporter stopped",
                s.abandoned,
            ),
            (
                "dta_export_kafka_batches",
                "Produce requests acknowledged",
                s.batches,
            ),
            (
                "dta_export_kafka_retries",
                "Produce requests that failed and were sent again (at least once: may duplicate)",
                s.retries,
            ),
            (
                "dta_export_kafka_connects",
                "Connections to the brokers made",
                s.connects,
            ),
            (
                "dta_export_kafka_connect_errors",
                "Connection attempts that failed",
                s.connect_errors,
            ),
        ] {
            counter(&mut enc, name, help, v)?;
        }
        gauge(
            &mut enc,
            "dta_export_kafka_queued_bytes",
            "Bytes queued for Kafka, not yet acknowledged",
            s.queued_bytes,
        )
    }
}
