//! Where the INT sink's notifications go besides its stores: the exporters (Redis, InfluxDB
//! line protocol, Kafka) on one thread, events as JSON lines on stdout, flow records to a file;
//! each a subscriber of every sink, joined on stop so nothing queued is lost.

use std::io::Write;
use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{bail, Context};
use dta_export::kafka::{KafkaProducer, Partitioner};
use dta_export::metrics::ExportMetrics;
use dta_export::pipeline::{self, Target};
use dta_int::{IntSink, Notification};
use dta_translator::sinks::RegionSinks;

use super::IntSinkOptions;

/// The Kafka producer and the partitioner that places a flow's records.
pub(super) type Kafka = (Arc<KafkaProducer>, Arc<dyn Partitioner>);

/// The exporters' counters and the Kafka connection: opened before the metrics server, which
/// counts them.
pub(super) struct Exports {
    pub(super) metrics: ExportMetrics,
    pub(super) kafka: Option<Kafka>,
}

impl Exports {
    /// Connect to Kafka if asked; a flow store the cluster map cannot place is an error now,
    /// not a dropped record later.
    pub(super) fn open(o: &IntSinkOptions) -> anyhow::Result<Exports> {
        let kafka = match &o.kafka {
            Some(k) => {
                let (producer, partitioner) = k.conn.producer(&k.brokers)?;
                partitioner
                    .partition(
                        &k.flow_store,
                        dta_export::kafka::OwnerKey::Bytes(&[0; dta_int::layout::FLOW_KEY_LEN]),
                    )
                    .map_err(|e| anyhow::anyhow!("--kafka-flow-store: {e}"))?;
                Some((Arc::new(producer), partitioner))
            }
            None => None,
        };
        Ok(Exports {
            metrics: ExportMetrics::default(),
            kafka,
        })
    }

    /// The export targets `o` asks for, each checked now (Redis connected, InfluxDB answering,
    /// files created).
    fn targets(&self, o: &IntSinkOptions) -> anyhow::Result<Vec<Target>> {
        let mut targets = vec![];
        if let Some(url) = &o.redis {
            targets.push(Target::Redis(
                dta_export::redis_ts::RedisExporter::connect(url, Default::default())
                    .with_context(|| format!("connecting to {url}"))?,
            ));
        }
        if let Some(to) = &o.influx {
            targets.push(influx_target(to)?);
        }
        if let (Some((producer, partitioner)), Some(k)) = (&self.kafka, &o.kafka) {
            targets.push(Target::Kafka(pipeline::KafkaTarget {
                producer: producer.clone(),
                prefix: k.conn.topic_prefix.clone(),
                partitioner: partitioner.clone(),
                flow_store: k.flow_store.clone(),
                format: k.conn.format,
            }));
        }
        Ok(targets)
    }

    /// Start every subscriber `o` asks for: the export thread, the events printer, the flow
    /// record writer.
    pub(super) fn start(
        &self,
        o: &IntSinkOptions,
        sinks: &mut [IntSink<RegionSinks>],
    ) -> anyhow::Result<Drains> {
        let targets = self.targets(o)?;
        let exporter = if targets.is_empty() {
            None
        } else {
            Some(pipeline::spawn(
                merged(sinks)?,
                targets,
                self.metrics.clone(),
                Default::default(),
            )?)
        };
        let printer = if o.events {
            Some(print_events(merged(sinks)?))
        } else {
            None
        };
        let records = match &o.records {
            Some(path) => Some(write_records(merged(sinks)?, path)?),
            None => None,
        };
        Ok(Drains {
            exporter,
            printer,
            records,
        })
    }

    /// At least once: wait for the broker's acknowledgement of what was queued; the Kafka
    /// counters into `summary`.
    pub(super) fn finish(self, summary: &mut serde_json::Value) -> anyhow::Result<()> {
        if let Some((p, _)) = self.kafka {
            if let Err(e) = p.flush(Duration::from_secs(30)) {
                eprintln!("kafka export: {e}");
            }
            summary["kafka"] = serde_json::to_value(p.stats().snapshot())?;
        }
        Ok(())
    }
}

/// The running subscribers; they end once the sinks are dropped.
pub(super) struct Drains {
    exporter: Option<JoinHandle<pipeline::ExportSummary>>,
    printer: Option<JoinHandle<()>>,
    records: Option<JoinHandle<std::io::Result<()>>>,
}

impl Drains {
    /// Wait for every subscriber to write what it was handed (call after the sinks are
    /// dropped); what the exporters delivered into `summary`.
    pub(super) fn join(self, summary: &mut serde_json::Value) -> anyhow::Result<()> {
        if let Some(p) = self.printer {
            let _ = p.join();
        }
        if let Some(r) = self.records {
            match r.join() {
                Ok(r) => r.context("writing the flow records")?,
                Err(_) => bail!("the flow record writer panicked"),
            }
        }
        if let Some(e) = self.exporter {
            match e.join() {
                Ok(s) => summary["exported"] = serde_json::to_value(&s)?,
                Err(_) => eprintln!("the export thread panicked"),
            }
        }
        Ok(())
    }
}

/// `--influx TO`: InfluxDB over HTTP(S) (checked to answer), `udp://HOST:PORT`, `-` (stdout)
/// or a file.
fn influx_target(to: &str) -> anyhow::Result<Target> {
    Ok(if to.starts_with("http://") || to.starts_with("https://") {
        let token = influx_token()?;
        let sink = dta_export::influx::HttpLineSink::new(to, token)
            .map_err(|e| anyhow::anyhow!("--influx {e}"))?;
        sink.ping()
            .map_err(|e| anyhow::anyhow!("--influx {to}: InfluxDB does not answer: {e}"))?;
        Target::LinesHttp(sink)
    } else if let Some(addr) = to.strip_prefix("udp://") {
        let addr: std::net::SocketAddr = addr
            .parse()
            .with_context(|| format!("--influx {to}: expected udp://HOST:PORT"))?;
        Target::LinesUdp(dta_export::influx::UdpLineSink::new(addr, 1400)?)
    } else {
        let out: Box<dyn std::io::Write + Send> = if to == "-" {
            Box::new(std::io::stdout())
        } else {
            Box::new(std::fs::File::create(to).with_context(|| format!("creating {to}"))?)
        };
        Target::Lines(dta_export::influx::LineWriter::new(out))
    })
}

/// Events and flow records as JSON lines on stdout.
fn print_events(rx: Receiver<Notification>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let out = std::io::stdout();
        let mut out = std::io::BufWriter::new(out.lock());
        for n in rx {
            if let Ok(s) = serde_json::to_string(&n) {
                let _ = writeln!(out, "{s}");
            }
        }
        let _ = out.flush();
    })
}

/// Every flow record as a JSON line to `path`.
fn write_records(
    rx: Receiver<Notification>,
    path: &Path,
) -> anyhow::Result<JoinHandle<std::io::Result<()>>> {
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    Ok(std::thread::spawn(move || -> std::io::Result<()> {
        let mut out = std::io::BufWriter::new(file);
        for n in rx {
            if let Notification::Flow(r) = n {
                serde_json::to_writer(&mut out, &r)?;
                writeln!(out)?;
            }
        }
        out.flush()
    }))
}

/// One receiver of every sink's notifications, in each sink's order (a forwarding thread per
/// sink; they end when the sinks are dropped).
fn merged(sinks: &mut [IntSink<RegionSinks>]) -> anyhow::Result<Receiver<Notification>> {
    if let [one] = sinks {
        return Ok(one.subscribe(NOTIFY_CAPACITY).rx);
    }
    let (tx, rx) = sync_channel(NOTIFY_CAPACITY);
    for (i, s) in sinks.iter_mut().enumerate() {
        let sub = s.subscribe(NOTIFY_CAPACITY);
        let tx = tx.clone();
        std::thread::Builder::new()
            .name(format!("dta-int-notify-{i}"))
            .spawn(move || {
                for n in sub.rx {
                    if tx.send(n).is_err() {
                        break;
                    }
                }
            })?;
    }
    Ok(rx)
}

/// Notifications a subscriber's channel holds.
const NOTIFY_CAPACITY: usize = 1 << 16;

/// The InfluxDB token: the file `DTA_INFLUX_TOKEN_FILE` names (trimmed), else `DTA_INFLUX_TOKEN`,
/// else none.
fn influx_token() -> anyhow::Result<Option<String>> {
    if let Some(path) = std::env::var_os("DTA_INFLUX_TOKEN_FILE") {
        let t = dta_http::secret::read(Path::new(&path), "InfluxDB token file")
            .context("DTA_INFLUX_TOKEN_FILE")?;
        return Ok(Some(t.text));
    }
    Ok(std::env::var("DTA_INFLUX_TOKEN").ok())
}
