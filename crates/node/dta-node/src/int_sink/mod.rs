//! The INT sink service (`dta int-sink`): telemetry reports received on UDP by one thread per
//! core (flows steered to threads in the kernel, [`dta_int::steer`]), aggregated by the sink
//! (`dta_int`) into DTA stores through its own translators (built through the one ingress
//! policy, [`IngressPolicy::apply`]), with the XDP fast path in front when asked
//! ([`IntSinkOptions::xdp`], [`fast_path`]), exports, flow records and events ([`outputs`]),
//! metrics, and the flush on stop ([`receive`]). With AF_XDP receive ([`IntSinkOptions::af_xdp`])
//! the threads share the AF_XDP sockets, and a report of a flow another thread owns is handed to
//! it ([`handoff`]); with the fast path on the same interface, its program redirects what it
//! passes to the sink into those sockets. What the sink file asks that the sink cannot
//! honour is refused at start ([`crate::modes::check_int_sink`]).

mod fast_path;
mod handoff;
mod outputs;
mod receive;

use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use dta_collector::Collector;
use dta_int::{IntSink, SinkGroup};
use dta_translator::ingest;
use dta_translator::sinks::RegionSinks;
use dta_translator::{Stats, Translator};
use dta_xdp::IntXdp;
use prometheus_client::registry::Registry;

use crate::config::IntSinkFile;
use crate::exports::KafkaConn;
use crate::interfaces::InterfaceDrops;
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
    /// Receive through AF_XDP on this interface too ([`crate::af_xdp`]).
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
    crate::modes::check_int_sink(f, mode)?;
    if let (Some((x, _)), Some(a)) = (&o.xdp, &o.af_xdp) {
        if *x == a.iface && a.generic {
            anyhow::bail!(
                "--af-xdp-generic with --xdp {x}: the fast path's program also does the AF_XDP \
                 redirect on {x}, attached as --xdp decides: use --xdp-generic"
            );
        }
    }
    let threads = sink_threads(f);
    let (collector, stats, mut sinks) = open_sinks(f, threads)?;
    let xdp = match &o.xdp {
        Some((iface, generic)) => Some(fast_path::attach(f, iface, *generic, &mut sinks)?),
        None => None,
    };
    let sockets = bind(f, threads, &sinks)?;
    let mut af_xdp = open_af_xdp(f, o, xdp.as_ref().map(|(x, _)| x))?;
    // With AF_XDP and several threads, the inboxes a queue's reader hands other threads' flows
    // to.
    let handoff = match &af_xdp {
        Some(_) if threads > 1 => Some(Arc::new(handoff::Handoff::new(threads)?)),
        _ => None,
    };
    let exports = outputs::Exports::open(o)?;
    let named: Vec<&str> = (o.xdp.iter().map(|(i, _)| i.as_str()))
        .chain(o.af_xdp.iter().map(|a| a.iface.as_str()))
        .collect();
    let interfaces = InterfaceDrops::watch("int-sink", f.listen.ip(), &named);
    let _metrics = match o.metrics {
        Some(addr) => {
            let mut reg = registry(
                &stats,
                &sinks,
                &sockets,
                af_xdp.as_ref(),
                handoff.as_ref(),
                xdp.as_ref(),
                &exports,
            )?;
            reg.register_collector(Box::new(interfaces.metrics()));
            let ready = crate::ops::regions_ready(collector.regions());
            Some(crate::ops::start_metrics(addr, reg, ready, "int-sink")?)
        }
        None => None,
    };
    let drains = exports.start(o, &mut sinks)?;
    eprintln!(
        "int-sink on udp://{} ({threads} thread{}, receive buffer {} bytes) -> {} stores in {}{}",
        sockets.sockets[0].local_addr()?,
        if threads == 1 { "" } else { "s" },
        sockets.recv_buffer,
        collector.stores().len(),
        f.region_dir.display(),
        af_xdp
            .as_ref()
            .map(|a| format!("; {}", a.describe()))
            .unwrap_or_default()
    );
    let results = receive_all(
        f,
        o,
        &mut sinks,
        &sockets.sockets,
        af_xdp.as_mut(),
        handoff.as_deref(),
        stop,
    );
    for r in collector.regions() {
        r.flush()?;
    }
    let mut summary = summarise(&sinks, &sockets, threads)?;
    if let Some((x, _stats_fd)) = &xdp {
        summary["xdp"] = serde_json::to_value(fast_path::lock(x).stats()?)?;
    }
    if let Some(a) = &af_xdp {
        summary["af_xdp"] = a.snapshot();
        if let Some(h) = &handoff {
            summary["af_xdp"]["handed_over"] = h.handed().into();
            summary["af_xdp"]["handoff_full_waits"] = h.full_waits().into();
        }
    }
    summary["interfaces"] = interfaces.snapshot();
    // The subscribers end once the sinks are gone; then what they wrote is whole.
    drop(sinks);
    drains.join(&mut summary)?;
    exports.finish(&mut summary)?;
    for r in results {
        r.context("receiving")?;
    }
    Ok(summary)
}

/// Sink threads: `[sink] threads`, 0 for one per core.
fn sink_threads(f: &IntSinkFile) -> usize {
    match f.sink.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
    .min(dta_int::sink::MAX_THREADS)
}

/// The sink's stores, each sink thread's translator counters, and the sinks.
type Opened = (Collector, Vec<Arc<Stats>>, Vec<IntSink<RegionSinks>>);

/// The sink's stores and one sink per thread over them, each with its own translator built
/// through the ingress policy. The sinks share their thresholds and event sequence, the
/// translators the stateful primitives' ownership (a flow's postcards owned by the thread its
/// reports are steered to: one sharding function, `dta_int::shard`) and one write meter.
fn open_sinks(f: &IntSinkFile, threads: usize) -> anyhow::Result<Opened> {
    let collector = if f.store.is_empty() {
        Collector::open_dir(&f.region_dir, true)?
    } else {
        Collector::create(&f.region_dir, &f.store, false)?
    };
    // The policy's write meter and the ring the sink's events are announced on ([DTA §7]
    // "Push notifications"); what the sink cannot honour of it was refused at start.
    let policy = IngressPolicy::compile(
        &f.translator,
        &f.store,
        &collector.headers(),
        Some(crate::translator::ring(&f.region_dir)?),
    )?;
    let group = SinkGroup::new(&f.sink, threads, crate::translator::SHARD_INBOX);
    let stats: Vec<Arc<Stats>> = (0..threads).map(|_| Arc::new(Stats::default())).collect();
    let mut sinks = Vec::with_capacity(threads);
    for (i, s) in stats.iter().enumerate() {
        let t = Translator::colocated(&f.translator, collector.regions(), s.clone())?;
        let t = policy.apply(t)?;
        sinks.push(group.sink(i, &f.sink, t).map_err(anyhow::Error::msg)?);
    }
    Ok((collector, stats, sinks))
}

/// The receive sockets: one `SO_REUSEPORT` socket per thread, flows steered to them in the
/// kernel, and the smallest receive buffer the kernel granted.
struct Sockets {
    sockets: Vec<UdpSocket>,
    recv_buffer: usize,
}

/// Bind the sink's sockets and attach the steering program. A socket granted a smaller buffer
/// than configured (where bursts are lost: `ingest` warns) is counted `recv_buffer_short` by
/// its sink.
fn bind(
    f: &IntSinkFile,
    threads: usize,
    sinks: &[IntSink<RegionSinks>],
) -> anyhow::Result<Sockets> {
    ingest::refuse_shared_port(f.listen.port())
        .with_context(|| format!("listening on {}", f.listen))?;
    let sockets = ingest::bind_group(f.listen, threads, f.sink.recv_buffer)
        .with_context(|| format!("binding {}", f.listen))?;
    dta_int::steer::attach(&sockets).context("attaching the flow-steering program")?;
    for s in &sockets {
        s.set_read_timeout(Some(receive::RECV_WAIT))?;
    }
    // Linux reports double what was asked: it counts its bookkeeping.
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
    Ok(Sockets {
        sockets,
        recv_buffer,
    })
}

/// AF_XDP beside the sockets, one AF_XDP socket on each receive queue, shared by the sink
/// threads; with the fast path (`fast`) on the same interface, its program redirects to them.
/// Where the kernel or the driver cannot, the sockets alone, said once; busy polling the kernel
/// refuses is an error.
fn open_af_xdp(
    f: &IntSinkFile,
    o: &IntSinkOptions,
    fast: Option<&Arc<Mutex<IntXdp>>>,
) -> anyhow::Result<Option<crate::af_xdp::AfXdp>> {
    let Some(a) = o.af_xdp.as_ref() else {
        return Ok(None);
    };
    let queues = dta_xdp::xsk::rx_queues(&a.iface)
        .unwrap_or(1)
        .clamp(1, dta_xdp::xsk::MAX_QUEUES) as usize;
    let port = f.listen.port();
    let opened = match fast {
        Some(x) if o.xdp.as_ref().is_some_and(|(i, _)| *i == a.iface) => {
            crate::af_xdp::AfXdp::open_with(
                a,
                port,
                Box::new(fast_path::Redirect(x.clone())),
                queues,
                "int-sink",
            )
        }
        _ => crate::af_xdp::AfXdp::open(a, port, &f.sink.allow, queues, "int-sink"),
    };
    crate::af_xdp::AfXdp::start(a, opened)
}

/// The INT sink's `/metrics`: the sink's families, its embedded translator's under the sink's
/// own prefix (a sum over jobs of `dta_translator_*` counts each report once), the sockets',
/// the XDP or AF_XDP program's, and the exporters'.
fn registry(
    stats: &[Arc<Stats>],
    sinks: &[IntSink<RegionSinks>],
    sockets: &Sockets,
    af_xdp: Option<&crate::af_xdp::AfXdp>,
    handoff: Option<&Arc<handoff::Handoff>>,
    xdp: Option<&(Arc<Mutex<IntXdp>>, Option<std::os::fd::OwnedFd>)>,
    exports: &outputs::Exports,
) -> anyhow::Result<Registry> {
    let mut reg = dta_metrics::TranslatorMetrics::new(stats.to_vec())
        .with_prefix(dta_metrics::INT_SINK_TRANSLATOR_PREFIX)
        .registry();
    reg.register_collector(Box::new(dta_metrics::IntSinkMetrics::new(
        sinks.iter().map(|s| s.stats().clone()).collect(),
    )));
    reg.register_collector(Box::new(dta_metrics::UdpReceiveMetrics::new(
        dta_metrics::INT_SINK_PREFIX,
        sockets
            .sockets
            .iter()
            .map(UdpSocket::try_clone)
            .collect::<std::io::Result<_>>()?,
    )));
    if let Some(a) = af_xdp {
        reg.register_collector(Box::new(a.watch().metrics()));
    }
    if let Some(h) = handoff {
        let h = h.clone();
        reg.register_collector(Box::new(crate::ops::ProgramActions::new(
            "dta_int_sink_af_xdp_handoff",
            "AF_XDP reports a sink thread read of a flow another thread owns, by action: \
             handed_over to that thread, or full_wait (its inbox was full: the reader applied \
             its own inbox and tried again; nothing is dropped)",
            move || vec![("handed_over", h.handed()), ("full_wait", h.full_waits())],
        )));
    }
    if let Some((x, _)) = xdp {
        let x = x.clone();
        reg.register_collector(Box::new(crate::ops::ProgramActions::new(
            "dta_int_sink_xdp_program",
            "Frames the INT fast path's XDP program handled, by action: aggregated in the \
             driver (fast), passed up to the sink (pass_*), dropped",
            move || {
                fast_path::lock(&x)
                    .stats()
                    .map(|s| s.actions().to_vec())
                    .unwrap_or_default()
            },
        )));
    }
    exports.metrics.register(&mut reg);
    if let Some((p, _)) = &exports.kafka {
        reg.register_collector(Box::new(dta_export::metrics::KafkaMetrics::new(
            p.stats().clone(),
        )));
    }
    Ok(reg)
}

/// Run one receive thread per sink until `stop` or `o.duration`; each thread's result. With
/// AF_XDP the threads share the AF_XDP sockets (socket `j` read by thread `j % threads`),
/// handing each other's flows over through `handoff`, and a watch thread publishes the
/// program's counters off the receive path.
fn receive_all(
    f: &IntSinkFile,
    o: &IntSinkOptions,
    sinks: &mut [IntSink<RegionSinks>],
    sockets: &[UdpSocket],
    af_xdp: Option<&mut crate::af_xdp::AfXdp>,
    handoff: Option<&handoff::Handoff>,
    stop: &AtomicBool,
) -> Vec<std::io::Result<()>> {
    let deadline = o
        .duration
        .map(|d| Instant::now() + Duration::from_secs_f64(d.max(0.0)));
    let threads = sinks.len();
    let flushed = AtomicUsize::new(0);
    let received = AtomicUsize::new(0);
    let watch = af_xdp.as_ref().map(|a| a.watch());
    let mut sources = match af_xdp {
        Some(a) => a.sources(),
        None => vec![],
    };
    let mut shares: Vec<Vec<_>> = (0..threads).map(|_| vec![]).collect();
    for (j, s) in sources.iter_mut().enumerate() {
        shares[j % threads.max(1)].push(s);
    }
    std::thread::scope(|scope| {
        if let Some(w) = &watch {
            scope.spawn(|| w.run(stop, |_| {}));
        }
        let handles: Vec<_> = sinks
            .iter_mut()
            .zip(sockets)
            .zip(shares)
            .enumerate()
            .map(|(i, ((sink, socket), share))| {
                let flushed = &flushed;
                let rx = receive::Receive {
                    socket,
                    sources: share,
                    // One thread counts the program's drops as the sink's rejects.
                    watch: watch.as_deref().filter(|_| i == 0),
                    steer: handoff.map(|handoff| receive::Steer {
                        handoff,
                        me: i,
                        threads,
                        received: &received,
                    }),
                    batch: f.sink.recv_batch,
                    gather: Duration::from_micros(f.sink.recv_gather_us),
                };
                std::thread::Builder::new()
                    .name(format!("dta-int-sink-{i}"))
                    .spawn_scoped(scope, move || {
                        receive::run_sink(sink, rx, stop, deadline, flushed, threads)
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
    })
}

/// The final counters: every sink's summed, and the receive side's.
fn summarise(
    sinks: &[IntSink<RegionSinks>],
    sockets: &Sockets,
    threads: usize,
) -> anyhow::Result<serde_json::Value> {
    let kernel_drops = sockets
        .sockets
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
        "recv_buffer": sockets.recv_buffer,
        "kernel_drops": kernel_drops,
        "cpu_seconds": crate::ops::cpu_seconds(),
    });
    Ok(summary)
}

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
