//! The monitoring systems of [DTA Table 2] on the command line (`docs/systems.md`):
//! `dta report --workload <system-query>` names a system and its parameters (the run is
//! `dta_systems::workload`), `dta query <system> <query> ...` answers the system's queries from the stores. The
//! work is in `dta_systems`; the stores are those of `examples/systems.toml`, the default
//! configuration of these queries.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};

use dta_systems::trace::{Source, SynthConfig, Trace};
use dta_systems::{marple, netseer, pint, sonata, trajectory, turboflow, Stores};

use crate::output::print;
use dta_node::config::Config;

/// A system's query whose reports `dta report --workload` sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Workload {
    /// Marple host counters: Key-Write of per-host totals, Key-Increment of their deltas.
    MarpleHostCounters,
    /// Marple lossy connections: Append by loss-rate range.
    MarpleLossy,
    /// Marple TCP timeouts: Key-Write of per-flow counts.
    MarpleTcpTimeouts,
    /// Marple flowlet sizes: Append by size bin.
    MarpleFlowlets,
    /// Every Marple query at once (the Fig. 7b workload).
    Marple,
    /// NetSeer loss events: Append to each switch's list.
    Netseer,
    /// TurboFlow evicted microflow counters: Key-Increment by flow.
    Turboflow,
    /// PINT path digests as 1-byte fragments: Key-Write by (flow, fragment).
    Pint,
    /// Sonata per-window query results (Key-Write by query id and window) and raw tuples
    /// (Append).
    Sonata,
    /// Trajectory Sampling: every hop's postcard of label-sampled packets (Postcarding).
    Trajectory,
}

/// `dta report` options of the systems' workloads (with `--workload`).
#[derive(Args, Clone)]
pub struct WorkloadArgs {
    /// Send a monitoring system's reports, computed from a packet trace, instead of synthetic
    /// load (docs/systems.md). `--count`, `--primitive`, `--keys` do not apply.
    #[arg(long, value_enum)]
    pub workload: Option<Workload>,
    /// The packet trace: an Ethernet pcap (TCP/IPv4 packets are used).
    #[arg(
        long,
        value_name = "FILE.pcap",
        requires = "workload",
        conflicts_with = "workload_cdf"
    )]
    pub trace: Option<PathBuf>,
    /// Synthesize the trace from a flow-size CDF: `fb_hadoop`, `websearch` or a CDF file
    /// (the default when no --trace is given; seeded by --seed).
    #[arg(long, value_name = "NAME|PATH", requires = "workload")]
    pub workload_cdf: Option<String>,
    /// Synthesized trace: flows.
    #[arg(long, default_value_t = SynthConfig::default().flows, requires = "workload")]
    pub flows: usize,
    /// Write the workload's ground truth (JSON) here.
    #[arg(long, value_name = "FILE", requires = "workload")]
    pub truth: Option<PathBuf>,
    /// Marple: a gap longer than this ends a flowlet, microseconds.
    #[arg(long, default_value_t = marple::DEFAULT_FLOWLET_GAP_NS / 1000, requires = "workload")]
    pub flowlet_gap_us: u64,
    /// Marple: a gap longer than this is a TCP timeout, milliseconds.
    #[arg(long, default_value_t = marple::DEFAULT_RTO_NS / 1_000_000, requires = "workload")]
    pub rto_ms: u64,
    /// Marple: flows with a loss rate above this fraction are lossy.
    #[arg(long, default_value_t = marple::DEFAULT_LOSS_THRESHOLD_BP as f64 / 10_000.0, requires = "workload")]
    pub loss_threshold: f64,
    /// NetSeer: the switches' event tables are flushed this often, milliseconds.
    #[arg(long, default_value_t = netseer::DEFAULT_WINDOW_NS / 1_000_000, requires = "workload")]
    pub netseer_window_ms: u64,
    /// TurboFlow: microflow cache slots of the switch.
    #[arg(long, default_value_t = turboflow::DEFAULT_CACHE_SLOTS, requires = "workload")]
    pub cache_slots: usize,
    /// Sonata: query window, milliseconds.
    #[arg(long, default_value_t = sonata::DEFAULT_WINDOW_NS / 1_000_000, requires = "workload")]
    pub sonata_window_ms: u64,
    /// Trajectory Sampling: sampled packets per million.
    #[arg(long, default_value_t = trajectory::DEFAULT_SAMPLE_PPM, requires = "workload")]
    pub sample_ppm: u32,
}

impl WorkloadArgs {
    fn source(&self, seed: u64) -> Source {
        match &self.trace {
            Some(p) => Source::Pcap(p.clone()),
            None => Source::Cdf(
                self.workload_cdf
                    .clone()
                    .unwrap_or_else(|| dta_systems::trace::BUILTIN_WORKLOADS[0].into()),
                SynthConfig {
                    flows: self.flows,
                    seed,
                    ..SynthConfig::default()
                },
            ),
        }
    }

    fn marple_params(&self) -> anyhow::Result<marple::Params> {
        if !(0.0..1.0).contains(&self.loss_threshold) {
            anyhow::bail!(
                "--loss-threshold {}: a fraction below 1",
                self.loss_threshold
            );
        }
        let p = marple::Params {
            flowlet_gap_ns: self.flowlet_gap_us.saturating_mul(1000),
            rto_ns: self.rto_ms.saturating_mul(1_000_000),
            loss_threshold_bp: (self.loss_threshold * 10_000.0).round() as u32,
            ..marple::Params::default()
        };
        p.validate()?;
        Ok(p)
    }
}

impl WorkloadArgs {
    /// The system `w` names, with these parameters ([`dta_systems::workload`]).
    pub fn workload(&self, w: Workload) -> anyhow::Result<dta_systems::workload::Workload> {
        use dta_systems::workload::Workload as W;
        let marple = |queries: &[marple::Query]| -> anyhow::Result<W> {
            Ok(W::Marple {
                queries: queries.to_vec(),
                params: self.marple_params()?,
            })
        };
        Ok(match w {
            Workload::MarpleHostCounters => marple(&[marple::Query::HostCounters])?,
            Workload::MarpleLossy => marple(&[marple::Query::Lossy])?,
            Workload::MarpleTcpTimeouts => marple(&[marple::Query::TcpTimeouts])?,
            Workload::MarpleFlowlets => marple(&[marple::Query::Flowlets])?,
            Workload::Marple => marple(&marple::Query::ALL)?,
            Workload::Netseer => W::Netseer(netseer::Params {
                window_ns: self.netseer_window_ms.saturating_mul(1_000_000),
            }),
            Workload::Turboflow => W::Turboflow(turboflow::Params {
                cache_slots: self.cache_slots,
            }),
            Workload::Pint => W::Pint,
            Workload::Sonata => W::Sonata(sonata::Params {
                window_ns: self.sonata_window_ms.saturating_mul(1_000_000),
            }),
            Workload::Trajectory => W::Trajectory(trajectory::Params {
                sample_ppm: self.sample_ppm,
            }),
        })
    }

    /// The trace: the pcap given, or one synthesized from the flow-size CDF (seeded by `seed`).
    pub fn load_trace(&self, seed: u64) -> anyhow::Result<Trace> {
        let (trace, _injected) = self.source(seed).load()?;
        if trace.packets.is_empty() {
            anyhow::bail!("the trace has no TCP/IPv4 packet: nothing to report");
        }
        Ok(trace)
    }
}

impl Workload {
    /// The name the command line spells.
    pub fn name(self) -> String {
        self.to_possible_value()
            .map(|v| v.get_name().to_owned())
            .unwrap_or_default()
    }
}

/// Which stores a systems query reads.
#[derive(Args, Clone)]
pub struct SystemsSel {
    /// Configuration file (TOML); without it, the embedded `examples/systems.toml`.
    #[arg(short, long)]
    pub config: Option<PathBuf>,
    /// Override the configuration's region directory.
    #[arg(long)]
    pub region_dir: Option<PathBuf>,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

impl SystemsSel {
    fn stores(&self) -> anyhow::Result<Stores> {
        let mut cfg = match &self.config {
            Some(p) => Config::load(p)?,
            None => {
                Config::parse(dta_systems::STORES_TOML).expect("examples/systems.toml is valid")
            }
        };
        if let Some(d) = &self.region_dir {
            cfg.region_dir = d.clone();
        }
        Ok(Stores::new(&cfg.region_dir))
    }
}

/// The systems' queries: `dta query <system> <query>`.
#[derive(Subcommand)]
pub enum SystemQuery {
    /// Marple queries ([DTA §6.1] Fig. 7b): host, lossy, timeouts, flowlets.
    #[command(subcommand)]
    Marple(MarpleQuery),
    /// NetSeer loss events.
    #[command(subcommand)]
    Netseer(NetseerQuery),
    /// TurboFlow per-flow counters.
    #[command(subcommand)]
    Turboflow(TurboflowQuery),
    /// PINT per-flow path digests.
    #[command(subcommand)]
    Pint(PintQuery),
    /// Sonata query results and raw tuples.
    #[command(subcommand)]
    Sonata(SonataQuery),
    /// Trajectory Sampling: a sampled packet's trajectory.
    #[command(subcommand)]
    Trajectory(TrajectoryQuery),
}

/// `dta query netseer ...`.
#[derive(Subcommand)]
pub enum NetseerQuery {
    /// Loss events (flow, switch, reason, packets lost), with totals per reason.
    Losses {
        /// Only this switch's events (its list).
        #[arg(long)]
        switch: Option<u16>,
        /// Only this flow: SRC_IP:SPORT-DST_IP:DPORT/PROTO.
        #[arg(long)]
        flow: Option<String>,
        /// Only this reason: congestion, corruption or pipeline.
        #[arg(long)]
        reason: Option<String>,
        /// Only events at or after this position of their list (a previous answer's
        /// `appended` with --switch: what came since).
        #[arg(long)]
        since: Option<u64>,
        /// List at most this many events (all matching ones are counted).
        #[arg(long, default_value_t = dta_systems::DEFAULT_LIST)]
        list: usize,
        #[command(flatten)]
        sel: SystemsSel,
    },
}

/// `dta query turboflow ...`.
#[derive(Subcommand)]
pub enum TurboflowQuery {
    /// A flow's packet and byte totals (count-min sums of its evicted records).
    Flow {
        /// The flow: SRC_IP:SPORT-DST_IP:DPORT/PROTO.
        #[arg(long)]
        flow: String,
        #[command(flatten)]
        sel: SystemsSel,
    },
}

/// `dta query pint ...`.
#[derive(Subcommand)]
pub enum PintQuery {
    /// A flow's path digest rebuilt from its 1-byte fragments (an error when it cannot be).
    Digest {
        /// The flow: SRC_IP:SPORT-DST_IP:DPORT/PROTO.
        #[arg(long)]
        flow: String,
        #[command(flatten)]
        sel: SystemsSel,
    },
}

/// `dta query sonata ...`.
#[derive(Subcommand)]
pub enum SonataQuery {
    /// A query's result for one window.
    Result {
        /// The query: new-conns, retransmissions or heavy-dst.
        #[arg(long)]
        query: String,
        /// The window (index from the trace's start).
        #[arg(long)]
        window: u32,
        #[command(flatten)]
        sel: SystemsSel,
    },
    /// A query's raw tuples (new-conns, retransmissions).
    Tuples {
        /// The query: new-conns or retransmissions.
        #[arg(long)]
        query: String,
        /// Only tuples at or after this position of the query's list.
        #[arg(long)]
        since: Option<u64>,
        /// List at most this many tuples.
        #[arg(long, default_value_t = dta_systems::DEFAULT_LIST)]
        list: usize,
        #[command(flatten)]
        sel: SystemsSel,
    },
}

/// `dta query trajectory ...`.
#[derive(Subcommand)]
pub enum TrajectoryQuery {
    /// A sampled packet's trajectory, by label (`--truth` lists them) or by flow and TCP
    /// sequence number.
    Packet {
        /// The packet's label: 16 hex digits.
        #[arg(long, conflicts_with_all = ["flow", "seq"], required_unless_present = "flow")]
        label: Option<String>,
        /// The packet's flow: SRC_IP:SPORT-DST_IP:DPORT/PROTO (with --seq).
        #[arg(long, requires = "seq")]
        flow: Option<String>,
        /// The packet's TCP sequence number (with --flow).
        #[arg(long, requires = "flow")]
        seq: Option<u32>,
        #[command(flatten)]
        sel: SystemsSel,
    },
}

/// `dta query marple ...`.
#[derive(Subcommand)]
pub enum MarpleQuery {
    /// A host's packet and byte counters (Key-Write totals and Key-Increment sums).
    Host {
        /// The host's IPv4 address.
        #[arg(short, long)]
        key: Ipv4Addr,
        #[command(flatten)]
        sel: SystemsSel,
    },
    /// Flows reported with a loss rate in a range.
    Lossy {
        /// Loss rates `A..B` as fractions (`0.05..` = from 5 %); default: every reported flow.
        #[arg(long)]
        range: Option<String>,
        #[command(flatten)]
        sel: SystemsSel,
    },
    /// A flow's TCP timeout count.
    Timeouts {
        /// The flow: SRC_IP:SPORT-DST_IP:DPORT/PROTO.
        #[arg(long)]
        flow: String,
        #[command(flatten)]
        sel: SystemsSel,
    },
    /// A flow's flowlet-size histogram (every flow's without --flow).
    Flowlets {
        /// The flow: SRC_IP:SPORT-DST_IP:DPORT/PROTO.
        #[arg(long)]
        flow: Option<String>,
        #[command(flatten)]
        sel: SystemsSel,
    },
}

/// Answer a systems query: JSON or text on stdout; an unanswerable request is an error.
pub fn query(q: SystemQuery) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    match q {
        SystemQuery::Marple(m) => match m {
            MarpleQuery::Host { key, sel } => {
                let a = marple::query_host(&sel.stores()?, key)?;
                print(&mut out, sel.json, &a, |o, a| {
                    writeln!(
                        o,
                        "host {}: Key-Write {} packets, {} bytes (wrong with probability {:.1e}); \
                         Key-Increment {} packets, {} bytes (at most +{} / +{})",
                        a.host,
                        a.key_write.packets,
                        a.key_write.bytes,
                        a.key_write.confidence.p_wrong,
                        a.key_increment.packets,
                        a.key_increment.bytes,
                        a.key_increment.packets_bound.error,
                        a.key_increment.bytes_bound.error
                    )
                })?;
            }
            MarpleQuery::Lossy { range, sel } => {
                let r = match &range {
                    Some(r) => dta_systems::parse_fraction_range(r)?,
                    None => marple::LOSS_RANGES_BP[0]..10_001,
                };
                let a = marple::query_lossy(&sel.stores()?, r)?;
                print(&mut out, sel.json, &a, |o, a| {
                    writeln!(
                        o,
                        "{} lossy flows with loss rate in [{}, {}){}",
                        a.flows.len(),
                        a.from,
                        a.to.min(1.0),
                        if a.overwritten > 0 {
                            format!(" ({} older reports overwritten)", a.overwritten)
                        } else {
                            String::new()
                        }
                    )?;
                    for f in &a.flows {
                        writeln!(
                            o,
                            "  {:<44} {:>6.2} % ({} of {} packets retransmitted)",
                            f.flow,
                            100.0 * f.loss_rate,
                            f.retransmissions,
                            f.packets
                        )?;
                    }
                    Ok(())
                })?;
            }
            MarpleQuery::Timeouts { flow, sel } => {
                let f = dta_systems::parse_flow(&flow)?;
                let a = marple::query_timeouts(&sel.stores()?, &f)?;
                print(&mut out, sel.json, &a, |o, a| {
                    writeln!(
                        o,
                        "flow {}: {} TCP timeouts (wrong with probability {:.1e})",
                        a.flow, a.timeouts, a.confidence.p_wrong
                    )
                })?;
            }
            MarpleQuery::Flowlets { flow, sel } => {
                let f = flow.as_deref().map(dta_systems::parse_flow).transpose()?;
                let a = marple::query_flowlets(&sel.stores()?, f.as_ref())?;
                print(&mut out, sel.json, &a, |o, a| {
                    writeln!(
                        o,
                        "{}: {} flowlets{}",
                        a.flow.as_deref().unwrap_or("every flow"),
                        a.flowlets,
                        if a.overwritten > 0 {
                            format!(" ({} older reports overwritten)", a.overwritten)
                        } else {
                            String::new()
                        }
                    )?;
                    for (lo, n) in &a.histogram {
                        writeln!(o, "  {:>6}..{:<6} packets: {n}", lo, lo * 2 - 1)?;
                    }
                    Ok(())
                })?;
            }
        },
        SystemQuery::Netseer(NetseerQuery::Losses {
            switch,
            flow,
            reason,
            since,
            list,
            sel,
        }) => {
            let f = netseer::LossFilter {
                switch,
                flow: flow.as_deref().map(dta_systems::parse_flow).transpose()?,
                reason: reason.as_deref().map(netseer::Reason::parse).transpose()?,
                since,
                max: list,
            };
            let a = netseer::query_losses(&sel.stores()?, &f)?;
            print(&mut out, sel.json, &a, |o, a| {
                writeln!(
                    o,
                    "{} loss events, {} packets lost ({}) in lists {:?}{}",
                    a.matched,
                    a.packets_lost,
                    a.by_reason
                        .iter()
                        .map(|(r, n)| format!("{r} {n}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    a.lists,
                    if a.overwritten > 0 {
                        format!(" ({} older events overwritten)", a.overwritten)
                    } else {
                        String::new()
                    }
                )?;
                for e in &a.events {
                    writeln!(
                        o,
                        "  {:<44} switch {:>3} {:<11} {:>5} lost (list {} #{})",
                        e.flow, e.switch, e.reason, e.count, e.list, e.position
                    )?;
                }
                Ok(())
            })?;
        }
        SystemQuery::Turboflow(TurboflowQuery::Flow { flow, sel }) => {
            let f = dta_systems::parse_flow(&flow)?;
            let a = turboflow::query_flow(&sel.stores()?, &f)?;
            print(&mut out, sel.json, &a, |o, a| {
                writeln!(
                    o,
                    "flow {}: {} packets, {} bytes (count-min: at most +{} / +{} with probability \
                     {:.2})",
                    a.flow,
                    a.packets,
                    a.bytes,
                    a.packets_bound.error,
                    a.bytes_bound.error,
                    1.0 - a.packets_bound.delta
                )
            })?;
        }
        SystemQuery::Pint(PintQuery::Digest { flow, sel }) => {
            let f = dta_systems::parse_flow(&flow)?;
            let a = pint::query_digest(&sel.stores()?, &f)?;
            print(&mut out, sel.json, &a, |o, a| {
                writeln!(
                    o,
                    "flow {}: path digest {} (wrong with probability {:.1e})",
                    a.flow, a.digest, a.p_wrong
                )
            })?;
        }
        SystemQuery::Sonata(SonataQuery::Result { query, window, sel }) => {
            let q = sonata::Query::parse(&query)?;
            let a = sonata::query_result(&sel.stores()?, q, window)?;
            print(&mut out, sel.json, &a, |o, a| {
                writeln!(
                    o,
                    "{} window {}: {} (wrong with probability {:.1e})",
                    a.query, a.window, a.result, a.confidence.p_wrong
                )
            })?;
        }
        SystemQuery::Sonata(SonataQuery::Tuples {
            query,
            since,
            list,
            sel,
        }) => {
            let q = sonata::Query::parse(&query)?;
            let a = sonata::query_tuples(&sel.stores()?, q, since, list)?;
            print(&mut out, sel.json, &a, |o, a| {
                writeln!(
                    o,
                    "{}: {} tuples (list {}, {} appended{})",
                    a.query,
                    a.matched,
                    a.list,
                    a.appended,
                    if a.overwritten > 0 {
                        format!(", {} overwritten", a.overwritten)
                    } else {
                        String::new()
                    }
                )?;
                for t in &a.tuples {
                    writeln!(
                        o,
                        "  #{:<6} {:<44} seq {:>10} window {}",
                        t.position, t.flow, t.seq, t.window
                    )?;
                }
                Ok(())
            })?;
        }
        SystemQuery::Trajectory(TrajectoryQuery::Packet {
            label,
            flow,
            seq,
            sel,
        }) => {
            let l = match (label, flow, seq) {
                (Some(l), _, _) => trajectory::parse_label(&l)?,
                (None, Some(f), Some(s)) => trajectory::label(&dta_systems::parse_flow(&f)?, s),
                _ => anyhow::bail!("name the packet: --label L, or --flow F --seq N"),
            };
            let a = trajectory::query_packet(&sel.stores()?, l)?;
            print(&mut out, sel.json, &a, |o, a| {
                let hops: Vec<String> = a
                    .path
                    .iter()
                    .zip(&a.roles)
                    .map(|(s, r)| format!("{s} ({r})"))
                    .collect();
                writeln!(
                    o,
                    "packet {}: {} (wrong with probability {:.1e})",
                    a.label,
                    hops.join(" -> "),
                    a.confidence.p_wrong
                )
            })?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
