//! `dta report`: the load generator. Sends reports of one primitive at a given rate, with keys
//! drawn uniformly or from a Zipf distribution, and shows progress.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, ValueEnum};

use anyhow::Context;
use dta_reporter::loadgen::{self, KeyDist, LoadSpec, LoadStats};
use dta_reporter::raw;
use dta_reporter::{ClusterReporter, Protocol, Reporter, ReporterConfig};
use dta_wire::{prototype::BaseFormat, Opcode, Priority};

#[derive(Clone, Copy, ValueEnum)]
pub enum Primitive {
    /// Key-Write (also key-write, key_write: the configuration's and the labels' spellings)
    #[value(alias = "key-write", alias = "key_write")]
    Kw,
    /// Key-Increment
    #[value(alias = "key-increment", alias = "key_increment")]
    Ki,
    /// Append
    Append,
    /// Postcarding (a whole path of --hops postcards per flow)
    #[value(alias = "postcarding")]
    Postcard,
    /// Sketch-Merge (Count-Min columns)
    #[value(alias = "sketch-merge", alias = "sketch_merge")]
    Sketch,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum ProtocolArg {
    Native,
    PrototypeShort,
    PrototypeLong,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Dist {
    Uniform,
    Zipf,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum PriorityArg {
    Low,
    Medium,
    High,
}

#[derive(Args)]
pub struct ReportArgs {
    /// The translator's address.
    #[arg(long, default_value = "127.0.0.1:40040")]
    pub to: SocketAddr,
    /// A cluster map (docs/scale-out.md): send each report to the translator of the collector
    /// owning its key instead of --to.
    #[arg(long, value_name = "MAP", conflicts_with_all = ["raw", "reporters"])]
    pub cluster: Option<std::path::PathBuf>,
    /// The primitive of the reports (docs/protocol.md): which store kind they are written to.
    #[arg(short, long, value_enum, default_value = "kw")]
    pub primitive: Primitive,
    /// The wire protocol: native (batched reports, sequence numbers, priorities) or the
    /// prototype's one-report datagrams.
    #[arg(long, value_enum, default_value = "native")]
    pub protocol: ProtocolArg,
    /// Reports to send (default 100 000 unless --duration is given).
    #[arg(short = 'c', long)]
    pub count: Option<u64>,
    /// Stop after this many seconds.
    #[arg(long)]
    pub duration: Option<f64>,
    /// Reports per second (default: as fast as possible).
    #[arg(short, long)]
    pub rate: Option<f64>,
    /// Number of distinct keys.
    #[arg(long, default_value_t = 100_000)]
    pub keys: u64,
    /// How keys are drawn from the --keys distinct keys: uniform, or Zipf-skewed (a few hot
    /// keys, as switch telemetry is).
    #[arg(long, value_enum, default_value = "uniform")]
    pub dist: Dist,
    /// Zipf exponent.
    #[arg(long, default_value_t = 1.1)]
    pub zipf_s: f64,
    /// Key length in bytes (the prototype: 4).
    #[arg(long, default_value_t = 4)]
    pub key_len: u8,
    /// Data length in bytes.
    #[arg(long, default_value_t = 4)]
    pub data_len: u8,
    /// Key-Write / Key-Increment: copies per report (1..=4; `dta query` reads the store's).
    #[arg(short = 'n', long, default_value_t = dta_wire::DEFAULT_REDUNDANCY)]
    pub redundancy: u8,
    /// Postcarding: the store's value set size; values sent are below it (the example
    /// configuration's `values`).
    #[arg(long, default_value_t = dta_wire::DEFAULT_POSTCARD_VALUES)]
    pub values: u32,
    /// Append: number of lists the events are spread over.
    #[arg(long, default_value_t = 1)]
    pub lists: u32,
    /// Postcarding: hops per path.
    #[arg(long, default_value_t = 5)]
    pub hops: u8,
    /// Native protocol: the reporter id.
    #[arg(long, default_value_t = 1)]
    pub reporter_id: u32,
    /// Native protocol: the datagrams' priority (docs/flow-control.md: high is never shed
    /// before lower ones).
    #[arg(long, value_enum, default_value = "medium")]
    pub priority: PriorityArg,
    /// Keep the datagrams sent and resend them on the translator's NACKs (native, or the
    /// prototype's long header); the run ends after the NACKs stop.
    #[arg(long)]
    pub retransmittable: bool,
    /// With --retransmittable: times the newest datagram is resent at the end of the run, 10 ms
    /// apart, while NACKs are handled (a lost last datagram leaves no gap the translator could
    /// NACK). Each probe is lost independently, so at loss rate p a run's tail goes unseen with
    /// probability p^(N+1) per reporter: raise it when many reporters end at once.
    #[arg(long, value_name = "N", default_value_t = dta_reporter::flow::DEFAULT_TAIL_PROBES,
          value_parser = clap::value_parser!(u32).range(0..=dta_reporter::flow::MAX_TAIL_PROBES as i64))]
    pub tail_probes: u32,
    /// The control key shared with the translator (`[translator] control_key_file`: a file of
    /// 32 hexadecimal digits): NACKs and congestion notices are obeyed only with a valid
    /// authenticator (docs/security.md). Without it, those from the translator's address are
    /// obeyed.
    #[arg(long, value_name = "FILE")]
    pub control_key_file: Option<std::path::PathBuf>,
    /// The key read from --control-key-file.
    #[arg(skip)]
    pub control_key: Option<dta_wire::auth::ControlKey>,
    /// Run without flow control: no control socket (UDP 40044), so the translator's NACKs and
    /// congestion notices are not received. Without it, a control port another process holds
    /// is an error naming that process.
    #[arg(long, conflicts_with_all = ["retransmittable", "control_key_file", "nack_port"])]
    pub no_flow_control: bool,
    /// The control port NACKs and congestion notices are received on (the translator's
    /// `nack_port` must match; 0: an ephemeral one, for a translator that is told it).
    #[arg(long, value_name = "PORT", default_value_t = dta_wire::NACK_PORT)]
    pub nack_port: u16,
    /// The control socket the senders of this process share (`--senders` > 1).
    #[arg(skip)]
    pub control_hub: Option<Arc<dta_reporter::ControlHub>>,
    /// Native protocol: most reports packed into one datagram.
    #[arg(long, default_value_t = 32)]
    pub batch: u8,
    /// Seed of the key and value draws: the same seed sends the same reports.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Reporters sending at once, each on its own thread and UDP socket (reporter ids
    /// REPORTER_ID.., seeds SEED..), the count and rate split between them: what spreads the
    /// load over `dta translator --threads` (SO_REUSEPORT hashes by source port).
    #[arg(long, default_value_t = 1)]
    pub senders: u32,
    /// Simulate this many retransmittable reporters (ids REPORTER_ID..) from one socket, each
    /// sending --datagrams datagrams of one report, round-robin, and keeping its last
    /// --in-flight for retransmission (resent on NACKs, then tail-probed): the tracker at
    /// scale. Native protocol; the count is reporters x datagrams.
    #[arg(long, value_name = "N")]
    pub reporters: Option<u32>,
    /// With --reporters: datagrams each reporter keeps for retransmission.
    #[arg(long, default_value_t = 256, requires = "reporters")]
    pub in_flight: u32,
    /// With --reporters: datagrams each reporter sends (default: --in-flight).
    #[arg(long, requires = "reporters")]
    pub datagrams: Option<u32>,
    /// Send prebuilt Ethernet/IPv4/UDP frames on an AF_PACKET socket bound to IFACE (root),
    /// bypassing the UDP stack and the qdisc, as fast as the kernel takes them: the load
    /// generator that saturates a translator. Native protocol, no pacing, no retransmission;
    /// `--senders` threads, each with its own socket (and `--tx-ring`, its own ring), reporter
    /// id and seed, cycling through `--frames` distinct datagrams of its own.
    #[arg(long, value_name = "IFACE")]
    pub raw: Option<String>,
    /// With --raw: the frames' source address (default: IFACE's IPv4 address, port 40000).
    #[arg(long, value_name = "IP:PORT", requires = "raw")]
    pub src: Option<std::net::SocketAddrV4>,
    /// With --raw: the destination MAC address (the translator's interface).
    #[arg(long, default_value = "ff:ff:ff:ff:ff:ff", requires = "raw")]
    pub dst_mac: String,
    /// With --raw: distinct datagrams built before sending (then sent cyclically), per sender.
    #[arg(long, default_value_t = 4096, requires = "raw")]
    pub frames: usize,
    /// With --raw: send through a PACKET_MMAP transmit ring per sender (frames written into
    /// the ring once, no per-frame copy or system call) instead of `sendmmsg(2)`.
    #[arg(long, requires = "raw")]
    pub tx_ring: bool,
    /// With --raw: source ports per sender (sender i sends from PORT + i*K .. PORT + i*K + K-1,
    /// frame by frame): spreads one sender's frames over `dta translator --threads` sockets,
    /// which SO_REUSEPORT picks by the source port.
    #[arg(long, default_value_t = 1, value_name = "K", requires = "raw")]
    pub src_ports: u16,
    /// Print the final statistics as JSON.
    #[arg(long)]
    pub json: bool,
    /// No progress bar.
    #[arg(short, long)]
    pub quiet: bool,
    #[command(flatten)]
    pub systems: crate::systems_cmd::WorkloadArgs,
}

pub fn run(mut a: ReportArgs) -> anyhow::Result<ExitCode> {
    if let Some(f) = &a.control_key_file {
        if a.reporters.is_some() || a.raw.is_some() {
            anyhow::bail!(
                "--control-key-file: --reporters and --raw do not verify control messages"
            );
        }
        a.control_key = Some(dta_node::config::read_control_key(f)?);
    }
    if let Some(w) = a.systems.workload {
        return run_workload(&a, w);
    }
    if let Some(iface) = &a.raw {
        return run_raw(&a, iface);
    }
    if let Some(n) = a.reporters {
        return run_many(&a, n);
    }
    let senders = a.senders.max(1);
    let primitive = match a.primitive {
        Primitive::Kw => Opcode::KeyWrite,
        Primitive::Ki => Opcode::KeyIncrement,
        Primitive::Append => Opcode::Append,
        Primitive::Postcard => Opcode::Postcarding,
        Primitive::Sketch => Opcode::SketchMerge,
    };
    if senders > 1 && primitive == Opcode::SketchMerge {
        anyhow::bail!("--senders: Sketch-Merge load is one reporter's sketch; use --senders 1");
    }
    if !a.no_flow_control {
        a.control_hub = dta_reporter::ControlHub::for_senders(
            a.to,
            a.nack_port,
            senders,
            matches!(a.protocol, ProtocolArg::Native),
        )?;
    }
    let count = match (a.count, a.duration) {
        (None, None) => Some(100_000),
        (c, _) => c,
    };
    let bar = crate::output::progress(count, "reports", a.quiet);
    let map = a
        .cluster
        .as_deref()
        .map(|p| {
            dta_cluster::ClusterMap::load(p)
                .map(Arc::new)
                .with_context(|| format!("cluster map {}", p.display()))
        })
        .transpose()?;
    // Reports per collector of the map, over every sender.
    let collectors = map.as_ref().map_or(0, |m| m.collectors.len());
    let per_collector: Vec<AtomicU64> = (0..collectors).map(|_| AtomicU64::new(0)).collect();
    let sent: Vec<AtomicU64> = (0..senders).map(|_| AtomicU64::new(0)).collect();
    let results: Vec<anyhow::Result<LoadStats>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..senders)
            .map(|i| {
                let (a, bar, sent, map, per_collector) = (&a, &bar, &sent, &map, &per_collector);
                s.spawn(move || -> anyhow::Result<LoadStats> {
                    let spec = load_spec(a, primitive, count, i, senders);
                    let progress = |p: loadgen::Progress| {
                        sent[i as usize].store(p.reports, Ordering::Relaxed);
                        bar.set_position(sent.iter().map(|c| c.load(Ordering::Relaxed)).sum());
                    };
                    match map {
                        None => {
                            let mut reporter = Reporter::new(reporter_config(a, i))?;
                            Ok(loadgen::run(&spec, &mut reporter, &progress)?)
                        }
                        Some(map) => {
                            let mut reporter =
                                ClusterReporter::new(map.clone(), &reporter_config(a, i))?;
                            let stats = loadgen::run(&spec, &mut reporter, &progress)?;
                            for (c, n) in per_collector.iter().zip(reporter.per_collector()) {
                                c.fetch_add(n, Ordering::Relaxed);
                            }
                            Ok(stats)
                        }
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("sender thread panicked")))
            })
            .collect()
    });
    bar.finish_and_clear();
    let all = results.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
    let stats = if all.len() == 1 {
        all[0]
    } else {
        LoadStats::combine(&all)
    };
    // With a cluster map: the reports each collector was sent.
    let routed: Option<serde_json::Map<String, serde_json::Value>> = map.as_ref().map(|m| {
        m.collectors
            .iter()
            .zip(&per_collector)
            .map(|(c, n)| (c.name.clone(), n.load(Ordering::Relaxed).into()))
            .collect()
    });
    if a.json {
        let mut v = serde_json::to_value(stats)?;
        if let (Some(r), Some(o)) = (&routed, v.as_object_mut()) {
            o.insert("per_collector".into(), r.clone().into());
        }
        if let Some(o) = v.as_object_mut() {
            o.insert("flow_control".into(), (!a.no_flow_control).into());
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        if let Some(r) = &routed {
            let list: Vec<String> = r.iter().map(|(c, n)| format!("{c} {n}")).collect();
            println!("reports per collector: {}", list.join(", "));
        }
        println!(
            "sent {} reports in {} datagrams ({} bytes) in {:.2}s: {:.0} reports/s{}",
            stats.reports,
            stats.datagrams,
            stats.bytes,
            stats.elapsed.as_secs_f64(),
            stats.reports as f64 / stats.elapsed.as_secs_f64().max(1e-9),
            if senders > 1 {
                format!(" ({senders} senders)")
            } else {
                String::new()
            }
        );
    }
    if stats.suppressed > 0 {
        eprintln!(
            "warning: {} datagrams were not sent: the translator's congestion notices limited \
             this priority (their reports are not in the counts above)",
            stats.suppressed
        );
    }
    if stats.send_errors > 0 {
        eprintln!(
            "error: {} of {} datagrams to {} were refused (nothing listens there: ICMP port \
             unreachable); their reports are lost",
            stats.send_errors,
            stats.datagrams,
            match &a.cluster {
                Some(p) => format!("the translators of {}", p.display()),
                None => a.to.to_string(),
            }
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// Sender `i`'s reporter: its own socket, reporter id `reporter_id + i`.
pub(crate) fn reporter_config(a: &ReportArgs, i: u32) -> ReporterConfig {
    let protocol = match a.protocol {
        ProtocolArg::Native => Protocol::Native {
            reporter_id: a.reporter_id.wrapping_add(i),
        },
        ProtocolArg::PrototypeShort => Protocol::Prototype(BaseFormat::Short),
        ProtocolArg::PrototypeLong => Protocol::Prototype(BaseFormat::Long),
    };
    let mut cfg = ReporterConfig::new(a.to, protocol);
    cfg.priority = match a.priority {
        PriorityArg::Low => Priority::Low,
        PriorityArg::Medium => Priority::Medium,
        PriorityArg::High => Priority::High,
    };
    cfg.max_reports_per_datagram = a.batch;
    cfg.retransmittable = a.retransmittable;
    cfg.tail_probes = a.tail_probes;
    cfg.control_key = a.control_key.clone();
    cfg.nack_port = (!a.no_flow_control).then_some(a.nack_port);
    cfg.control_hub = a.control_hub.clone();
    cfg
}

/// Sender `i` of `n`'s share of the load: the count and the rate split evenly (the remainder
/// to the first senders), its own seed.
fn load_spec(a: &ReportArgs, primitive: Opcode, count: Option<u64>, i: u32, n: u32) -> LoadSpec {
    let mut spec = LoadSpec::new(primitive);
    spec.rate = a.rate.map(|r| r / n as f64);
    spec.count = count.map(|c| c / n as u64 + u64::from((i as u64) < c % n as u64));
    spec.duration = a.duration.map(Duration::from_secs_f64);
    spec.keys = match a.dist {
        Dist::Uniform => KeyDist::Uniform { n: a.keys },
        Dist::Zipf => KeyDist::Zipf {
            n: a.keys,
            s: a.zipf_s,
        },
    };
    spec.key_len = a.key_len;
    spec.data_len = a.data_len;
    spec.redundancy = a.redundancy;
    spec.postcard_values = a.values;
    spec.lists = a.lists;
    spec.hops = a.hops;
    spec.seed = a.seed.wrapping_add(i as u64);
    spec
}

/// `--reporters N`: many simulated reporters from one socket (`loadgen::run_many`).
fn run_many(a: &ReportArgs, reporters: u32) -> anyhow::Result<ExitCode> {
    let primitive = match a.primitive {
        Primitive::Kw => Opcode::KeyWrite,
        Primitive::Ki => Opcode::KeyIncrement,
        Primitive::Append => Opcode::Append,
        _ => anyhow::bail!("--reporters: Key-Write, Key-Increment or Append"),
    };
    if a.senders > 1 || a.count.is_some() || a.duration.is_some() {
        anyhow::bail!(
            "--reporters sends reporters x in-flight reports: no --senders, --count or --duration"
        );
    }
    if !matches!(a.protocol, ProtocolArg::Native) {
        anyhow::bail!("--reporters: native protocol only");
    }
    let mut spec = load_spec(a, primitive, Some(1), 0, 1);
    spec.linger = Duration::from_millis(300);
    let many = loadgen::ManySpec {
        reporters,
        first_id: a.reporter_id,
        in_flight: a.in_flight,
        datagrams: a.datagrams.unwrap_or(a.in_flight),
        priority: priority_of(a.priority),
        nack_port: a.nack_port,
        tail_probes: a.tail_probes,
        tail_probe_interval: dta_reporter::flow::DEFAULT_TAIL_PROBE_INTERVAL,
    };
    let stats = loadgen::run_many(&spec, &many, a.to, &|_| {})?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&stats)?);
    } else {
        println!(
            "{reporters} reporters sent {} reports in {:.2}s ({} resent on {} NACKs)",
            stats.reports,
            stats.elapsed.as_secs_f64(),
            stats.retransmissions,
            stats.nacks
        );
    }
    Ok(if stats.send_errors > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn priority_of(p: PriorityArg) -> Priority {
    match p {
        PriorityArg::Low => Priority::Low,
        PriorityArg::Medium => Priority::Medium,
        PriorityArg::High => Priority::High,
    }
}

/// What a workload run did (`--json`).
#[derive(serde::Serialize)]
struct WorkloadStats {
    workload: String,
    packets: usize,
    flows: usize,
    trace_seconds: f64,
    skipped: dta_systems::trace::Skipped,
    sent: dta_systems::marple::Sent,
    /// Postcarding reports (Trajectory Sampling).
    postcards: u64,
    datagrams: u64,
    elapsed_seconds: f64,
}

/// `--workload W`: the system's reports over the trace ([`dta_systems::workload`]), paced by
/// `--rate`, to `--to`; its ground truth to `--truth`.
fn run_workload(a: &ReportArgs, w: crate::systems_cmd::Workload) -> anyhow::Result<ExitCode> {
    if a.count.is_some() || a.duration.is_some() || a.senders > 1 || a.reporters.is_some() {
        anyhow::bail!(
            "--workload sends the system's reports for the whole trace: no --count, --duration, \
             --senders or --reporters"
        );
    }
    let workload = a.systems.workload(w)?;
    let trace = a.systems.load_trace(a.seed)?;
    let mut reporter =
        Reporter::new(reporter_config(a, 0)).with_context(|| format!("reporter to {}", a.to))?;
    let mut pacer = dta_reporter::pacing::Pacer::new(a.rate);
    let mut granted = 0u64;
    let started = std::time::Instant::now();
    let sent = workload.reports(&trace, &mut |r: &dta_wire::Report<'_>| {
        if granted == 0 {
            granted = pacer.grant(u64::MAX, None);
        }
        granted -= 1;
        reporter
            .report(r)
            .map_err(|e| dta_systems::SystemError::Send(e.to_string()))
    })?;
    reporter.flush()?;
    if a.retransmittable {
        reporter.linger(Duration::from_millis(200), Duration::from_secs(5))?;
    }
    reporter.take_refused()?;
    let rs = reporter.stats();
    if let Some(path) = &a.systems.truth {
        std::fs::write(
            path,
            serde_json::to_string_pretty(&workload.truth(&trace)?)?,
        )
        .with_context(|| format!("writing {}", path.display()))?;
    }
    let stats = WorkloadStats {
        workload: w.name(),
        packets: trace.packets.len(),
        flows: trace.flows(),
        trace_seconds: trace.duration_ns() as f64 / 1e9,
        skipped: trace.skipped,
        sent: sent.reports,
        postcards: sent.postcards,
        datagrams: rs.datagrams,
        elapsed_seconds: started.elapsed().as_secs_f64(),
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&stats)?);
    } else {
        eprintln!(
            "{}: {} packets of {} flows -> {} reports ({} Key-Write, {} Key-Increment, {} Append, \
             {} Postcarding) in {} datagrams to {} in {:.2}s",
            stats.workload,
            stats.packets,
            stats.flows,
            sent.total(),
            sent.reports.key_write,
            sent.reports.key_increment,
            sent.reports.append,
            sent.postcards,
            rs.datagrams,
            a.to,
            stats.elapsed_seconds
        );
    }
    if rs.send_errors > 0 {
        eprintln!(
            "error: {} datagrams to {} were refused (nothing listens there); their reports are lost",
            rs.send_errors, a.to
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// `--raw IFACE`: the frames of a native run sent on AF_PACKET sockets
/// ([`dta_reporter::raw`]).
fn run_raw(a: &ReportArgs, iface: &str) -> anyhow::Result<ExitCode> {
    use anyhow::bail;
    if a.rate.is_some() || !matches!(a.protocol, ProtocolArg::Native) {
        bail!("--raw sends native datagrams as fast as it can: no --rate or --protocol");
    }
    let std::net::SocketAddr::V4(to) = a.to else {
        bail!("--raw: --to must be an IPv4 address");
    };
    let primitive = match a.primitive {
        Primitive::Kw => Opcode::KeyWrite,
        Primitive::Ki => Opcode::KeyIncrement,
        Primitive::Append => Opcode::Append,
        Primitive::Postcard => Opcode::Postcarding,
        Primitive::Sketch => bail!("--raw: Sketch-Merge is sent whole, by one reporter"),
    };
    let count = match (a.count, a.duration) {
        (None, None) => Some(100_000),
        (c, _) => c,
    };
    let o = raw::RawOptions {
        iface: iface.to_owned(),
        to,
        src: a.src,
        dst_mac: raw::parse_mac(&a.dst_mac).map_err(anyhow::Error::msg)?,
        senders: a.senders.max(1),
        src_ports: a.src_ports,
        frames: a.frames,
        tx_ring: a.tx_ring,
        reporter_id: a.reporter_id,
        priority: priority_of(a.priority),
        batch: a.batch,
        duration: a.duration.map(Duration::from_secs_f64),
    };
    let n = o.senders;
    let st = raw::send(&o, |i| load_spec(a, primitive, count, i, n)).context("--raw")?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&st.load)?);
    } else {
        let l = &st.load;
        println!(
            "sent {} reports in {} raw frames on {iface} in {:.2}s: {:.0} reports/s, {:.0} frames/s \
             ({n} sender{}, {}, {} system calls)",
            l.reports,
            l.datagrams,
            l.elapsed.as_secs_f64(),
            l.rate(),
            l.datagrams as f64 / l.elapsed.as_secs_f64().max(1e-9),
            if n == 1 { "" } else { "s" },
            if a.tx_ring { "tx ring" } else { "sendmmsg" },
            st.calls,
        );
    }
    Ok(ExitCode::SUCCESS)
}
