//! The export thread: drains the INT sink's notifications (a subscription's receiver, delivered
//! in the order the sink produced them) into Redis, InfluxDB line protocol and/or Kafka, in batches
//! ([INT-NIC §III.D]: the host "periodically flushes" notifications to Redis from a dedicated
//! core), counting what it wrote in [`ExportMetrics`]. Ends when the sink drops its sender.

use std::io::Write;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// An export target that keeps failing (down, full disk) fails per batch: logged at most every
/// [`dta_log::DEFAULT_INTERVAL`], counted exactly in the pipeline's `failed`.
static EXPORT_FAILED: dta_log::Throttle = dta_log::Throttle::new(dta_log::DEFAULT_INTERVAL);

use dta_int::Notification;

use crate::influx::{HttpLineSink, LineWriter, UdpLineSink};
use crate::int_records::notification_record;
use crate::kafka::{notification_message, KafkaProducer, NotificationRoute, Partitioner};
use crate::metrics::ExportMetrics;
use crate::record::Record;
use crate::redis_ts::RedisExporter;

/// Where points go.
pub enum Target {
    Redis(RedisExporter),
    /// Line protocol to a file, stdout, ...
    Lines(LineWriter<Box<dyn Write + Send>>),
    /// Line protocol over UDP.
    LinesUdp(UdpLineSink),
    /// Line protocol to InfluxDB's HTTP write API.
    LinesHttp(HttpLineSink),
    /// Kafka topics `{prefix}.events` and `{prefix}.flows` (docs/kafka.md).
    Kafka(KafkaTarget),
}

/// INT notifications to Kafka. The producer is shared: its owner reads its counters and waits
/// for delivery ([`KafkaProducer::flush`]) once the export thread ended.
pub struct KafkaTarget {
    pub producer: Arc<KafkaProducer>,
    /// Topic prefix.
    pub prefix: String,
    pub partitioner: Arc<dyn Partitioner>,
    /// The store whose owner of a flow key decides the partition (the INT sink's flow store).
    pub flow_store: String,
    /// How values are written.
    pub format: crate::kafka::RecordFormat,
}

impl KafkaTarget {
    /// Queue the batch; returns (queued, refused).
    fn write(&self, pending: &[Notification]) -> (u64, u64) {
        let route = NotificationRoute {
            partitioner: &*self.partitioner,
            flow_store: &self.flow_store,
        };
        let ts = crate::kafka::now_ms();
        let (mut ok, mut failed) = (0, 0);
        for n in pending {
            match notification_message(n, &self.prefix, &route, self.format, ts) {
                Ok(m) => match self.producer.send(m) {
                    Ok(()) => ok += 1,
                    Err(_) => failed += 1,
                },
                Err(e) => {
                    dta_log::warn_throttled!(EXPORT_FAILED, "kafka export: {e}");
                    failed += 1;
                }
            }
        }
        (ok, failed)
    }
}

impl Target {
    fn name(&self) -> &'static str {
        match self {
            Target::Redis(_) => "redis",
            Target::Lines(_) | Target::LinesUdp(_) | Target::LinesHttp(_) => "influx",
            Target::Kafka(_) => "kafka",
        }
    }

    /// Write a batch (`pending` and the same notifications as `batch`'s records); returns
    /// (written, failed).
    fn write(&mut self, pending: &[Notification], batch: &[&dyn Record]) -> (u64, u64) {
        match self {
            Target::Kafka(k) => k.write(pending),
            Target::Redis(r) => match r.write_batch(batch) {
                Ok(()) => (batch.len() as u64, 0),
                Err(e) => {
                    dta_log::warn_throttled!(EXPORT_FAILED, "redis export: {e}");
                    (0, batch.len() as u64)
                }
            },
            Target::Lines(w) => {
                let (w0, r0) = (w.written, w.rejected);
                let mut io_failed = 0;
                for r in batch {
                    if w.write(*r).is_err() {
                        io_failed += 1;
                    }
                }
                if let Err(e) = w.flush() {
                    dta_log::warn_throttled!(EXPORT_FAILED, "line protocol export: {e}");
                }
                (w.written - w0, w.rejected - r0 + io_failed)
            }
            Target::LinesUdp(u) => {
                let (w0, r0) = (u.written, u.rejected);
                let mut io_failed = 0;
                for r in batch {
                    if u.write(*r).is_err() {
                        io_failed += 1;
                    }
                }
                if u.flush().is_err() {
                    io_failed += 1;
                }
                (u.written - w0, u.rejected - r0 + io_failed)
            }
            Target::LinesHttp(h) => {
                let (w0, r0, f0) = (h.written, h.rejected, h.failed);
                for r in batch {
                    if let Err(e) = h.write(*r) {
                        dta_log::warn_throttled!(EXPORT_FAILED, "influx export: {e}");
                    }
                }
                if let Err(e) = h.flush() {
                    dta_log::warn_throttled!(EXPORT_FAILED, "influx export: {e}");
                }
                (h.written - w0, h.rejected - r0 + h.failed - f0)
            }
        }
    }
}

/// Batching of the export thread.
#[derive(Debug, Clone, Copy)]
pub struct ExportOptions {
    /// Write when this many notifications are pending...
    pub batch: usize,
    /// ... or when the oldest pending one waited this long.
    pub max_delay: Duration,
}

impl Default for ExportOptions {
    fn default() -> Self {
        ExportOptions {
            batch: 512,
            max_delay: Duration::from_millis(100),
        }
    }
}

/// What the export thread did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ExportSummary {
    pub notifications: u64,
    pub batches: u64,
    /// Per target, in the order given: (name, written, failed).
    pub targets: Vec<(String, u64, u64)>,
}

/// Start the export thread over `rx`; it returns its summary when `rx`'s sender is dropped.
pub fn spawn(
    rx: Receiver<Notification>,
    mut targets: Vec<Target>,
    metrics: ExportMetrics,
    opts: ExportOptions,
) -> std::io::Result<JoinHandle<ExportSummary>> {
    std::thread::Builder::new()
        .name("dta-export".into())
        .spawn(move || {
            let mut sum = ExportSummary {
                targets: targets
                    .iter()
                    .map(|t| (t.name().to_owned(), 0, 0))
                    .collect(),
                ..ExportSummary::default()
            };
            let mut pending: Vec<Notification> = Vec::with_capacity(opts.batch.max(1));
            let mut oldest: Option<Instant> = None;
            let mut open = true;
            while open || !pending.is_empty() {
                let wait = oldest.map_or(opts.max_delay, |t| {
                    opts.max_delay.saturating_sub(t.elapsed())
                });
                if open {
                    match rx.recv_timeout(wait) {
                        Ok(n) => {
                            oldest.get_or_insert_with(Instant::now);
                            pending.push(n);
                            sum.notifications += 1;
                        }
                        Err(RecvTimeoutError::Timeout) => {}
                        Err(RecvTimeoutError::Disconnected) => open = false,
                    }
                }
                let due = oldest.is_some_and(|t| t.elapsed() >= opts.max_delay);
                if !pending.is_empty() && (pending.len() >= opts.batch.max(1) || due || !open) {
                    let batch: Vec<&dyn Record> = pending.iter().map(notification_record).collect();
                    for (t, s) in targets.iter_mut().zip(sum.targets.iter_mut()) {
                        let (ok, failed) = t.write(&pending, &batch);
                        s.1 += ok;
                        s.2 += failed;
                        metrics.exported(t.name(), ok, failed);
                    }
                    sum.batches += 1;
                    pending.clear();
                    oldest = None;
                }
            }
            sum
        })
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use dta_int::{Event, EventKind};

    use super::*;

    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn event(i: u64) -> Notification {
        Notification::Event(Event {
            seq: i,
            time_ns: i,
            kind: EventKind::HopLatency,
            flow: [0; 13],
            hop: 0,
            node_id: 1,
            value: 5,
        })
    }

    #[test]
    fn a_partial_batch_is_written_after_max_delay_and_the_rest_at_the_end() {
        let out = Shared::default();
        let (tx, rx) = std::sync::mpsc::sync_channel(16);
        // Queued before the export thread starts, so the three are one batch: sent while it
        // runs, a sender descheduled for the 30 ms between two of them would split it.
        for i in 0..3 {
            tx.send(event(i)).unwrap();
        }
        let h = spawn(
            rx,
            vec![Target::Lines(LineWriter::new(Box::new(out.clone())))],
            ExportMetrics::default(),
            ExportOptions {
                batch: 100,
                max_delay: Duration::from_millis(30),
            },
        )
        .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while out
            .0
            .lock()
            .unwrap()
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            < 3
        {
            assert!(Instant::now() < deadline, "partial batch never written");
            std::thread::sleep(Duration::from_millis(10));
        }
        tx.send(event(3)).unwrap();
        drop(tx);
        let sum = h.join().unwrap();
        assert_eq!(sum.notifications, 4);
        assert_eq!(sum.batches, 2);
        assert_eq!(sum.targets, vec![("influx".to_string(), 4, 0)]);
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        assert_eq!(text.lines().count(), 4);
        assert!(text.lines().last().unwrap().ends_with(",seq=3i 3"));
    }
}
