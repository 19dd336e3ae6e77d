//! The INT sink service (`dta int-sink`): telemetry reports received on UDP by one thread per
//! core (flows steered to threads in the kernel, [`dta_int::steer`]), aggregated by the sink
//! (`dta_int`) into DTA stores through its own translators, with the XDP fast path in front
//! when asked ([`IntSinkOptions::xdp`]), exports (Redis, InfluxDB line protocol, Kafka), flow
//! records, metrics, and the flush on stop. What the sink file asks that the sink cannot honour
//! is refused at start ([`crate::modes::check_int_sink`]).

use std::io::Write;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use dta_collector::Collector;
use dta_int::fast::{FastFlow, FastPath, FastThresholds};
use dta_int::{IntSink, Notification, SinkGroup};
use dta_int_wire::instr;
use dta_net::mmsg::RecvBatch;
use dta_translator::ingest::{self, DatagramSource};
use dta_translator::sinks::RegionSinks;
use dta_translator::{Stats, Translator};
use dta_xdp::{IntXdp, IntXdpConfig};

use crate::config::IntSinkFile;
use crate::exports::KafkaConn;
use crate::policy::IngressPolicy;

/// Where the INT sink's notifications go besides its stores.
#[derive(Debug, Clone, Default)]
pub struct IntSinkOptions {
    /// Write every flow record (a flow leaving the FlowCache) as a JSON line to this file.
    pub records: Option<PathBuf>,
    /// Print events and flow records as JSON lines on stdout.
    pub events: bool,
    /// Serve `/metrics`, `/healthz`, `/readyz` here.
    pub metrics: Option<SocketAddr>,
    /// Export events and flow records to Redis at this URL.
    pub redis: Option<String>,
    /// Export events and flow records as InfluxDB line protocol: a file, `-` (stdout) or
    /// `udp://HOST:PORT`.
    pub influx: Option<String>,
    /// Export events and flow records to Kafka.
    pub kafka: Option<IntKafka>,
    /// The XDP fast path on this interface (`generic`: in generic mode).
    pub xdp: Option<(String, bool)>,
    /// Receive through AF_XDP on this interface too ([`crate::af_xdp`]; one sink thread).
    pub af_xdp: Option<crate::af_xdp::AfXdpOptions>,
    /// Stop after this many seconds.
    pub duration: Option<f64>,
}

/// Kafka for the INT sink: the brokers, the connection, and the store whose owner of a flow
/// key decides a notification's partition.
#[derive(Debug, Clone)]
pub struct IntKafka {
    pub brokers: String,
    pub conn: KafkaConn,
    pub flow_store: String,
}

/// Run the INT sink of `f` until `stop` (or the duration); the final counters.
pub fn run(
    f: &IntSinkFile,
    o: &IntSinkOptions,
    stop: &AtomicBool,
) -> anyhow::Result<serde_json::Value> {
    let mode = crate::modes::int_sink_mode(o.xdp.is_some(), o.af_xdp.is_some());
    crate::modes::check_int_sink(f, mode, o.af_xdp.is_some())?;
    let threads = match f.sink.threads {
        // AF_XDP hands datagrams over by receive queue, not by flow: one thread reads them all.
        0 if o.af_xdp.is_some() => 1,
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
    .min(dta_int::sink::MAX_THREADS);
    let collector = if f.store.is_empty() {
        Collector::open_dir(&f.region_dir, true)?
    } else {
        Collector::create(&f.region_dir, &f.store, false)?
    };
    // One sink per thread over the same regions, each with its own translator; the sinks share
    // their thresholds and event sequence, the translators the stateful primitives' ownership
    // (a flow's postcards owned by the thread its reports are steered to: one sharding
    // function, dta_int::shard) and one write meter.
    let group = SinkGroup::new(&f.sink, threads, crate::translator::SHARD_INBOX);
    let all_stats: Vec<Arc<Stats>> = (0..threads).map(|_| Arc::new(Stats::default())).collect();
    // The one ingress policy of every mode: here its write meter and the ring the sink's events
    // are announced on ([DTA §7] "Push notifications"); what the sink cannot honour of it was
    // refused above.
    let policy = IngressPolicy::compile(
        &f.translator,
        &f.store,
        &collector.headers(),
        Some(crate::translator::ring(&f.region_dir)?),
    )?;
    let mut sinks = Vec::with_capacity(threads);
    for (i, stats) in all_stats.iter().enumerate() {
        let t = policy.apply(Translator::colocated(
            &f.translator,
            collector.regions(),
            stats.clone(),
        )?)?;
        sinks.push(group.sink(i, &f.sink, t).map_err(anyhow::Error::msg)?);
    }
    // The XDP fast path, shared by the sink threads (each its own range of flow slots).
    let xdp = match &o.xdp {
        Some((iface, generic)) => Some(attach_xdp(f, iface, *generic, &mut sinks)?),
        None => None,
    };
    // Receive: one SO_REUSEPORT socket per thread, flows steered to them in the kernel.
    ingest::refuse_shared_port(f.listen.port())
        .with_context(|| format!("listening on {}", f.listen))?;
    let sockets = ingest::bind_group(f.listen, threads, f.sink.recv_buffer)
        .with_context(|| format!("binding {}", f.listen))?;
    dta_int::steer::attach(&sockets).context("attaching the flow-steering program")?;
    for s in &sockets {
        s.set_read_timeout(Some(RECV_WAIT))?;
    }
    // What the kernel granted each socket (Linux reports double what was asked: it counts its
    // bookkeeping); a smaller buffer than configured is where bursts are lost: `ingest` warns,
    // each such socket is counted (`recv_buffer_short`).
    let granted: Vec<usize> = sockets
        .iter()
        .map(|s| socket2::SockRef::from(s).recv_buffer_size().unwrap_or(0) / 2)
        .collect();
    for (sink, &g) in sinks.iter().zip(&granted) {
        if g < f.sink.recv_buffer {
            sink.stats()
                .recv_buffer_short
                .fetch_add(1, Ordering::Relaxed);
        }
    }
    let recv_buffer = granted.iter().copied().min().unwrap_or(0);
    // AF_XDP beside the socket, one AF_XDP socket on each receive queue, all read by the one
    // sink thread; where the kernel or the driver cannot, the socket alone, said once.
    let mut af_xdp = o.af_xdp.as_ref().and_then(|a| {
        let queues = dta_xdp::xsk::rx_queues(&a.iface)
            .unwrap_or(1)
            .clamp(1, dta_xdp::xsk::MAX_QUEUES) as usize;
        match crate::af_xdp::AfXdp::open(a, f.listen.port(), &f.sink.allow, queues, "int-sink") {
            Ok(x) => Some(x),
            Err(e) => {
                eprintln!("warning: {e}; receiving through the UDP socket instead");
                None
            }
        }
    });
    let export_metrics = dta_export::metrics::ExportMetrics::default();
    let kafka = match &o.kafka {
        Some(k) => {
            let (producer, partitioner) = k.conn.producer(&k.brokers)?;
            // A flow store the map cannot place is an error now, not a dropped record later.
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
    let _metrics = match o.metrics {
        Some(addr) => {
            // The embedded translator's families under the sink's own prefix: a sum over jobs
            // of dta_translator_* counts each report once.
            let mut reg = dta_metrics::TranslatorMetrics::new(all_stats.clone())
                .with_prefix(dta_metrics::INT_SINK_TRANSLATOR_PREFIX)
                .registry();
            reg.register_collector(Box::new(dta_metrics::IntSinkMetrics::new(
                sinks.iter().map(|s| s.stats().clone()).collect(),
            )));
            reg.register_collector(Box::new(dta_metrics::UdpReceiveMetrics::new(
                "dta_int_sink",
                sockets
                    .iter()
                    .map(UdpSocket::try_clone)
                    .collect::<std::io::Result<_>>()?,
            )));
            if let Some(a) = &af_xdp {
                reg.register_collector(Box::new(a.watch().metrics()));
            }
            if let Some((x, _)) = &xdp {
                let x = x.clone();
                reg.register_collector(Box::new(crate::ops::ProgramActions::new(
                    "dta_int_sink_xdp_program",
                    "Frames the INT fast path's XDP program handled, by action: aggregated in \
                     the driver (fast), passed up to the sink (pass_*), dropped",
                    move || {
                        lock(&x)
                            .stats()
                            .map(|s| s.actions().to_vec())
                            .unwrap_or_default()
                    },
                )));
            }
            export_metrics.register(&mut reg);
            if let Some((p, _)) = &kafka {
                reg.register_collector(Box::new(dta_export::metrics::KafkaMetrics::new(
                    p.stats().clone(),
                )));
            }
            Some(crate::ops::start_metrics(
                addr,
                reg,
                crate::ops::regions_ready(collector.regions()),
                "int-sink",
            )?)
        }
        None => None,
    };
    let mut targets = vec![];
    if let Some(url) = &o.redis {
        targets.push(dta_export::pipeline::Target::Redis(
            dta_export::redis_ts::RedisExporter::connect(url, Default::default())
                .with_context(|| format!("connecting to {url}"))?,
        ));
    }
    if let Some(to) = &o.influx {
        targets.push(if to.starts_with("http://") || to.starts_with("https://") {
            let token = influx_token()?;
            let sink = dta_export::influx::HttpLineSink::new(to, token)
                .map_err(|e| anyhow::anyhow!("--influx {e}"))?;
            sink.ping()
                .map_err(|e| anyhow::anyhow!("--influx {to}: InfluxDB does not answer: {e}"))?;
            dta_export::pipeline::Target::LinesHttp(sink)
        } else if let Some(addr) = to.strip_prefix("udp://") {
            let addr: std::net::SocketAddr = addr
                .parse()
                .with_context(|| format!("--influx {to}: expected udp://HOST:PORT"))?;
            dta_export::pipeline::Target::LinesUdp(dta_export::influx::UdpLineSink::new(
                addr, 1400,
            )?)
        } else {
            let out: Box<dyn std::io::Write + Send> = if to == "-" {
                Box::new(std::io::stdout())
            } else {
                Box::new(std::fs::File::create(to).with_context(|| format!("creating {to}"))?)
            };
            dta_export::pipeline::Target::Lines(dta_export::influx::LineWriter::new(out))
        });
    }
    if let (Some((producer, partitioner)), Some(k)) = (&kafka, &o.kafka) {
        targets.push(dta_export::pipeline::Target::Kafka(
            dta_export::pipeline::KafkaTarget {
                producer: producer.clone(),
                prefix: k.conn.topic_prefix.clone(),
                partitioner: partitioner.clone(),
                flow_store: k.flow_store.clone(),
                format: k.conn.format,
            },
        ));
    }
    let exporter = if targets.is_empty() {
        None
    } else {
        Some(dta_export::pipeline::spawn(
            merged(&mut sinks)?,
            targets,
            export_metrics.clone(),
            Default::default(),
        )?)
    };
    eprintln!(
        "int-sink on udp://{} ({threads} thread{}, receive buffer {recv_buffer} bytes) -> {} \
         stores in {}{}",
        sockets[0].local_addr()?,
        if threads == 1 { "" } else { "s" },
        collector.stores().len(),
        f.region_dir.display(),
        af_xdp
            .as_ref()
            .map(|a| format!("; {}", a.describe()))
            .unwrap_or_default()
    );
    let printer = if o.events {
        let rx = merged(&mut sinks)?;
        Some(std::thread::spawn(move || {
            let out = std::io::stdout();
            let mut out = std::io::BufWriter::new(out.lock());
            for n in rx {
                if let Ok(s) = serde_json::to_string(&n) {
                    let _ = writeln!(out, "{s}");
                }
            }
            let _ = out.flush();
        }))
    } else {
        None
    };
    let records = match &o.records {
        Some(path) => {
            let rx = merged(&mut sinks)?;
            let file = std::fs::File::create(path)
                .with_context(|| format!("creating {}", path.display()))?;
            Some(std::thread::spawn(move || -> std::io::Result<()> {
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
        None => None,
    };
    let deadline = o
        .duration
        .map(|d| Instant::now() + Duration::from_secs_f64(d.max(0.0)));
    let flushed = AtomicUsize::new(0);
    let watch = af_xdp.as_ref().map(|a| a.watch());
    let mut sources = match &mut af_xdp {
        Some(a) => a.sources(),
        None => vec![],
    };
    let results: Vec<std::io::Result<()>> = std::thread::scope(|scope| {
        // AF_XDP's counters read off the receive path: the program's drops published for the
        // sink thread, the sockets' loss logged when it grows.
        if let Some(w) = &watch {
            scope.spawn(|| w.run(stop, |_| {}));
        }
        // The one sink thread of AF_XDP receive reads every AF_XDP socket.
        let mut sources = Some(&mut sources[..]);
        let handles: Vec<_> = sinks
            .iter_mut()
            .zip(&sockets)
            .enumerate()
            .map(|(i, (sink, socket))| {
                let flushed = &flushed;
                let rx = Receive {
                    socket,
                    sources: sources.take().unwrap_or_default(),
                    watch: watch.as_deref(),
                    batch: f.sink.recv_batch,
                    gather: Duration::from_micros(f.sink.recv_gather_us),
                };
                std::thread::Builder::new()
                    .name(format!("dta-int-sink-{i}"))
                    .spawn_scoped(scope, move || {
                        run_sink(sink, rx, stop, deadline, flushed, threads)
                    })
                    .expect("spawn sink thread")
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(std::io::Error::other("sink thread panicked")))
            })
            .collect()
    });
    for r in collector.regions() {
        r.flush()?;
    }
    let kernel_drops = sockets
        .iter()
        .map(|s| ingest::kernel_drops(s).unwrap_or(0))
        .sum::<u64>();
    let mut summary = sum_json(
        sinks
            .iter()
            .map(|s| serde_json::to_value(s.stats_snapshot()))
            .collect::<Result<Vec<_>, _>>()?,
    );
    summary["receive"] = serde_json::json!({
        "threads": threads,
        "recv_buffer": recv_buffer,
        "kernel_drops": kernel_drops,
        "cpu_seconds": crate::ops::cpu_seconds(),
    });
    if let Some((x, _stats_fd)) = &xdp {
        let s = lock(x).stats()?;
        summary["xdp"] = serde_json::to_value(s)?;
    }
    if let Some(a) = &af_xdp {
        summary["af_xdp"] = a.snapshot();
    }
    drop(sinks);
    if let Some(p) = printer {
        let _ = p.join();
    }
    if let Some(r) = records {
        match r.join() {
            Ok(r) => r.context("writing the flow records")?,
            Err(_) => bail!("the flow record writer panicked"),
        }
    }
    if let Some(e) = exporter {
        match e.join() {
            Ok(s) => summary["exported"] = serde_json::to_value(&s)?,
            Err(_) => eprintln!("the export thread panicked"),
        }
    }
    if let Some((p, _)) = kafka {
        // At least once: wait for the broker's acknowledgement of what was queued.
        if let Err(e) = p.flush(Duration::from_secs(30)) {
            eprintln!("kafka export: {e}");
        }
        summary["kafka"] = serde_json::to_value(p.stats().snapshot())?;
    }
    for r in results {
        r.context("receiving")?;
    }
    Ok(summary)
}

/// Histogram blocks of the XDP fast path: switches whose histograms it counts (3 metrics × 33
/// log2 buckets × 8 bytes each, 3.2 MiB in all); flows through other switches stay the sink's.
const XDP_SWITCHES: u32 = 4096;

fn lock(x: &Mutex<IntXdp>) -> std::sync::MutexGuard<'_, IntXdp> {
    x.lock().unwrap_or_else(|e| e.into_inner())
}

/// Load the INT fast path for `f`'s sinks, attach it to `iface` and give each sink its part
/// (flow slots `i * capacity ..`); with the kernel's BPF run-time statistics on while the
/// returned descriptor lives.
fn attach_xdp(
    f: &IntSinkFile,
    iface: &str,
    force_generic: bool,
    sinks: &mut [IntSink<RegionSinks>],
) -> anyhow::Result<(Arc<Mutex<IntXdp>>, Option<std::os::fd::OwnedFd>)> {
    let Some(int_port) = f.sink.int_udp_port else {
        bail!("--xdp needs [sink] int_udp_port (INT over UDP is what the fast path reads)");
    };
    let per = sinks.first().map_or(0, |s| s.flow_cache().capacity()) as u32;
    let cfg = IntXdpConfig {
        port: f.listen.port(),
        int_port,
        instructions: instr::NODE_ID | instr::HOP_LATENCY | instr::QUEUE | instr::TX_UTIL,
        flows: per
            .checked_mul(sinks.len() as u32)
            .context("flow_capacity x threads")?,
        switches: XDP_SWITCHES,
        allow: f.sink.allow.clone(),
    };
    let mut x = IntXdp::load(&cfg).context("loading the INT XDP program")?;
    let mode = x
        .attach(iface, force_generic)
        .with_context(|| format!("attaching the INT XDP program to {iface}"))?;
    let stats_fd = match dta_xdp::enable_run_time_stats() {
        Ok(fd) => Some(fd),
        Err(e) => {
            eprintln!("warning: {e}: the XDP program's run time is not measured");
            None
        }
    };
    eprintln!("INT XDP fast path on {iface} ({mode:?} mode)");
    let x = Arc::new(Mutex::new(x));
    for (i, s) in sinks.iter_mut().enumerate() {
        s.set_fast_path(Box::new(XdpFast {
            xdp: x.clone(),
            base: i as u32 * per,
            sources_taken: 0,
        }));
    }
    Ok((x, stats_fd))
}

/// One sink thread's view of the shared fast path.
struct XdpFast {
    xdp: Arc<Mutex<IntXdp>>,
    /// This sink's first flow slot.
    base: u32,
    /// The program's `source_not_allowed` already handed to the sink (sink 0 takes them).
    sources_taken: u64,
}

/// CLOCK_MONOTONIC, ns (the clock of `bpf_ktime_get_ns`).
fn monotonic_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

impl FastPath for XdpFast {
    fn learn(&mut self, key: &[u8; 13], slot: u32, nodes: &[u32]) -> Result<(), String> {
        lock(&self.xdp)
            .learn(key, self.base + slot, nodes)
            .map_err(|e| e.to_string())
    }

    fn forget(&mut self, key: &[u8; 13]) {
        lock(&self.xdp).forget(key);
    }

    fn take(&mut self, slot: u32, now_ns: u64) -> Option<FastFlow> {
        let a = lock(&self.xdp).take(self.base + slot)?;
        Some(FastFlow {
            packets: a.packets,
            hops: a.hops,
            // The sink's clock: as long before now as the report was.
            last_ns: now_ns.saturating_sub(monotonic_ns().saturating_sub(a.last_mono_ns)),
            seq: a.seq,
            sum: a.sum,
            last: a.last,
        })
    }

    fn take_hist(&mut self, add: &mut dyn FnMut(u32, usize, u8, u64)) {
        lock(&self.xdp).take_hist(add);
    }

    fn take_source_rejects(&mut self) -> u64 {
        if self.base != 0 {
            return 0;
        }
        let now = lock(&self.xdp).stats().map_or(0, |s| s.source_not_allowed);
        now.saturating_sub(std::mem::replace(&mut self.sources_taken, now))
    }

    fn set_thresholds(&mut self, t: &FastThresholds) {
        if let Err(e) = lock(&self.xdp).set_thresholds(
            t.enabled,
            t.hop_latency,
            t.queue_occupancy,
            t.egress_tx_util,
            t.path_latency,
        ) {
            eprintln!("INT XDP fast path: {e}");
        }
    }
}

/// How long a sink thread waits for a datagram before it runs its timers and looks at `stop`.
const RECV_WAIT: Duration = Duration::from_millis(10);

/// Nanoseconds since the Unix epoch (the sink's clock for FlowCache ages and events).
fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The datagrams of one `recvmmsg`, to the sink, a slice of admitted ones at a time
/// ([`IntSink::handle_reports`]: the same as one by one, in order, with their cache misses
/// overlapped).
fn take(sink: &mut IntSink<RegionSinks>, m: &RecvBatch, n: usize) {
    let unknown = SocketAddr::from(([0, 0, 0, 0], 0));
    take_from(
        sink,
        &mut (0..n).map(|i| {
            let (data, from) = m.datagram(i);
            (data, from.unwrap_or(unknown))
        }),
    );
}

/// Where one sink thread receives: its socket, the AF_XDP sockets it reads beside it (none
/// without AF_XDP receive), whose program's drops it counts as its own rejects.
struct Receive<'a, 's> {
    socket: &'a UdpSocket,
    sources: &'a mut [&'s mut (dyn DatagramSource + Send)],
    watch: Option<&'a crate::af_xdp::Watch>,
    batch: usize,
    /// After a partial batch, how long the next gathers ([`RecvBatch::gather`]).
    gather: Duration,
}

/// One sink thread: receive until `stop` (a signal, an error on any thread) or `deadline`,
/// take what the kernel already holds (bounded), then flush: this thread's flows first, then,
/// once every thread has flushed its flows (which may hand reports to the translator that owns
/// them), what the others handed this one. A signal interrupting `recvmmsg` is not an error.
fn run_sink(
    sink: &mut IntSink<RegionSinks>,
    rx: Receive<'_, '_>,
    stop: &AtomicBool,
    deadline: Option<Instant>,
    flushed: &AtomicUsize,
    threads: usize,
) -> std::io::Result<()> {
    let Receive {
        socket,
        sources,
        watch,
        batch,
        gather,
    } = rx;
    let mut m = ingest::recv_batch(batch);
    let fd = socket.as_raw_fd();
    let mut turns = ingest::SourceTurns::default();
    let mut fds = vec![fd];
    fds.extend(sources.iter().map(|s| s.fd()));
    // The program's drops already counted as this sink's rejects.
    let mut mirrored = 0;
    let r = loop {
        if stop.load(Ordering::Relaxed) {
            break Ok(());
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            stop.store(true, Ordering::Relaxed);
            break Ok(());
        }
        if sources.is_empty() {
            // The socket alone: one blocking receive (its timeout runs the timers).
            match m.recv(fd, libc::MSG_WAITFORONE) {
                Ok(n) => {
                    take(sink, &m, n);
                    sink.tick(now_ns());
                    m.gather(n, gather);
                }
                Err(e) => break Err(e),
            }
            continue;
        }
        let a = match from_sources(sink, sources, batch) {
            Ok(a) => a,
            Err(e) => break Err(e),
        };
        let n = if turns.read_sockets(a, batch) {
            match m.recv(fd, libc::MSG_DONTWAIT) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => 0,
                Err(e) => break Err(e),
            }
        } else {
            0
        };
        take(sink, &m, n);
        match turns.after(n + a) {
            // A partial batch: let the next one gather, as from the socket alone (at paced
            // rates one wake-up per `gather`, not one per few reports).
            ingest::Idle::Busy if n + a < batch && !gather.is_zero() => std::thread::sleep(gather),
            ingest::Idle::Busy => {}
            ingest::Idle::Nap => ingest::Idle::Nap.pause(),
            ingest::Idle::Wait => {
                if let Err(e) = ingest::wait_readable(&fds, RECV_WAIT) {
                    break Err(e);
                }
            }
        }
        sink.tick(now_ns());
        if let Some(w) = watch {
            mirrored = mirror_rejects(sink, w, mirrored);
        }
    };
    if r.is_err() {
        stop.store(true, Ordering::Relaxed);
    }
    // Reports that arrived before the stop, bounded so a flood cannot hold the exit.
    let mut drained = 0;
    while drained < ingest::MAX_DRAIN_DATAGRAMS {
        let a = from_sources(sink, sources, batch).unwrap_or(0);
        let n = m.recv(fd, libc::MSG_DONTWAIT).unwrap_or_default();
        if n + a == 0 {
            break;
        }
        take(sink, &m, n);
        drained += n + a;
    }
    if let Some(w) = watch {
        w.refresh();
        mirror_rejects(sink, w, mirrored);
    }
    sink.flush(now_ns());
    flushed.fetch_add(1, Ordering::AcqRel);
    while flushed.load(Ordering::Acquire) < threads {
        // `tick` applies what the other threads hand this one.
        sink.tick(now_ns());
        std::thread::sleep(Duration::from_micros(200));
    }
    sink.tick(now_ns());
    sink.flush(now_ns());
    r
}

/// A batch from each AF_XDP socket, to the sink as [`take`] hands it a socket's; how many
/// datagrams they held.
fn from_sources(
    sink: &mut IntSink<RegionSinks>,
    sources: &mut [&mut (dyn DatagramSource + Send)],
    batch: usize,
) -> std::io::Result<usize> {
    let mut got = 0;
    for s in sources.iter_mut() {
        got += s.recv_batch(batch, &mut |it| take_from(sink, it))?;
    }
    Ok(got)
}

/// Datagrams (payload, source) to the sink, a slice of admitted ones at a time, as [`take`].
fn take_from(sink: &mut IntSink<RegionSinks>, it: &mut dyn Iterator<Item = (&[u8], SocketAddr)>) {
    const SLICE: usize = 64;
    let now = now_ns();
    let mut batch: [(&[u8], u64); SLICE] = [(&[], 0); SLICE];
    let mut k = 0;
    for (data, from) in it {
        if sink.admit(from.ip()) {
            batch[k] = (data, now);
            k += 1;
            if k == SLICE {
                sink.handle_reports(&batch);
                k = 0;
            }
        }
    }
    sink.handle_reports(&batch[..k]);
}

/// Count the AF_XDP program's `source_not_allowed` drops since `already` as the sink's own
/// source rejects (the driver refused them before the sink saw them); the new total. One
/// atomic load: the watch thread reads the program's counters.
fn mirror_rejects(sink: &IntSink<RegionSinks>, w: &crate::af_xdp::Watch, already: u64) -> u64 {
    let total = w.source_not_allowed();
    sink.count_source_rejects(total.saturating_sub(already));
    total.max(already)
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

/// Sum JSON statistics of several sinks: numbers added, objects by key, `[name, n]` lists by
/// name (the shape of [`dta_int::IntStatsSnapshot`], whatever its fields).
fn sum_json(all: Vec<serde_json::Value>) -> serde_json::Value {
    use serde_json::Value;
    fn add(into: &mut Value, v: Value) {
        match (into, v) {
            (Value::Number(a), Value::Number(b)) => {
                if let (Some(x), Some(y)) = (a.as_u64(), b.as_u64()) {
                    *a = (x.wrapping_add(y)).into();
                }
            }
            (Value::Object(a), Value::Object(b)) => {
                for (k, v) in b {
                    match a.get_mut(&k) {
                        Some(x) => add(x, v),
                        None => {
                            a.insert(k, v);
                        }
                    }
                }
            }
            (Value::Array(a), Value::Array(b)) => {
                for item in b {
                    let name = item.get(0).and_then(Value::as_str).map(str::to_owned);
                    let same = a.iter_mut().find(|x| {
                        name.is_some() && x.get(0).and_then(Value::as_str) == name.as_deref()
                    });
                    match (same, item) {
                        (Some(Value::Array(x)), Value::Array(mut y)) if x.len() == 2 => {
                            if let Some(n) = y.pop() {
                                add(&mut x[1], n);
                            }
                        }
                        (_, item) => a.push(item),
                    }
                }
            }
            _ => {}
        }
    }
    let mut it = all.into_iter();
    let mut total = it.next().unwrap_or(Value::Null);
    for v in it {
        add(&mut total, v);
    }
    total
}

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
