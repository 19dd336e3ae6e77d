//! `dta pcap gen` (a realistic INT trace as pcap, with its ground truth as JSON) and
//! `dta pcap replay` (send a pcap's telemetry to a translator or INT sink over UDP). The work is
//! in `dta_int_trace::{intgen, pcap}`; formats in `docs/exports.md`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};

use dta_int_trace::intgen::{generate, Episode, ExpMetric, FlowSizeCdf, TrafficConfig};
use dta_int_trace::pcap::{
    replay_with, write_pcap, PcapFormat, ReplayMode, ReplayOptions, DEFAULT_REPORT_PORT,
};

#[derive(Args)]
pub struct PcapArgs {
    #[command(subcommand)]
    cmd: PcapCmd,
}

#[derive(Subcommand)]
enum PcapCmd {
    /// Generate INT traffic ([INT-NIC §IV]: 5 hops, exponential metrics, heavy-tailed flows) as
    /// pcap, with the ground truth beside it as JSON.
    Gen(GenArgs),
    /// Send each record of a pcap as one UDP datagram (INT frames wrapped in telemetry reports).
    Replay(ReplayArgs),
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    /// INT-MD frames as captured at the sink switch.
    Frames,
    /// Telemetry reports v2.0 from the sink switch to the collector (the frame inside).
    Reports,
}

#[derive(Clone, Copy, ValueEnum)]
enum Mode {
    /// INT frames wrapped in a telemetry report, other UDP frames' payload.
    Auto,
    /// The UDP payload of every UDP frame.
    Payload,
    /// INT frames wrapped in a telemetry report; anything else skipped.
    Wrap,
}

#[derive(Args)]
struct GenArgs {
    /// The pcap to write.
    #[arg(long)]
    out: PathBuf,
    /// The ground truth JSON (default: OUT with the extension .json).
    #[arg(long)]
    truth: Option<PathBuf>,
    /// Flows.
    #[arg(long, default_value_t = 100)]
    flows: usize,
    /// Flow sizes: `fb_hadoop`, `websearch`, or a CDF file (`<bytes> <cumulative percent>`).
    #[arg(long, default_value = "fb_hadoop")]
    workload: String,
    /// Seed of every random draw: the same seed writes the same trace and ground truth.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// INT transit hops per packet.
    #[arg(long, default_value_t = 5)]
    hops: usize,
    /// Bytes of a flow per packet.
    #[arg(long, default_value_t = 1460)]
    mss: u64,
    /// Cap on a flow's packets (the CDFs reach 10-30 MB).
    #[arg(long, default_value_t = 1000)]
    max_packets: u64,
    /// frames: INT-MD packets as a switch forwards them (for `dta int-sink`'s frame port);
    /// reports: telemetry reports as an INT sink switch sends them.
    #[arg(long, value_enum, default_value = "frames")]
    format: Format,
    /// Mean hop latency, ns (exponential, capped at 50x the mean).
    #[arg(long, default_value_t = 2000.0)]
    mean_latency_ns: f64,
    /// Mean queue occupancy (exponential over 0..=--max-queue).
    #[arg(long, default_value_t = 40.0)]
    mean_queue: f64,
    /// Largest queue occupancy drawn.
    #[arg(long, default_value_t = 300)]
    max_queue: u32,
    /// Mean egress utilisation (exponential over 0..=1000).
    #[arg(long, default_value_t = 300.0)]
    mean_util: f64,
    /// INT over UDP destination port of the frames.
    #[arg(long, default_value_t = 5000)]
    int_udp_port: u16,
    /// UDP port of the reports in `--format reports`.
    #[arg(long, default_value_t = DEFAULT_REPORT_PORT)]
    report_port: u16,
    /// Inject congestion: NODE:START:DURATION:MAGNITUDE (e.g. 301:20ms:10ms:25) multiplies the
    /// hop latency and queue occupancy at switch NODE from START after the first packet for
    /// DURATION; recorded in the ground truth's `episodes`. Repeatable.
    #[arg(long, value_parser = Episode::parse)]
    episode: Vec<Episode>,
    /// Hops report their ports (INT bit 1, level 1): a hop's egress port leads to the next hop
    /// (`1 + j` of switch `(i + 2) * 100 + j`), the last hop's is 100; in the ground truth's
    /// `egress_ports`, and kept per port by an INT sink with a per-port histogram store.
    #[arg(long)]
    ports: bool,
}

#[derive(Args)]
struct ReplayArgs {
    /// The pcap (Ethernet link type).
    pcap: PathBuf,
    /// Where to send (a translator's or INT sink's UDP address).
    #[arg(long)]
    to: SocketAddr,
    /// Datagrams per second (default: as fast as possible).
    #[arg(long)]
    rate: Option<f64>,
    /// What to send of each frame: auto (INT frames wrapped in a telemetry report, other UDP
    /// frames' payload), payload (every UDP frame's payload) or wrap (INT frames only).
    #[arg(long, value_enum, default_value = "auto")]
    mode: Mode,
    /// The UDP port that announces INT in the frames.
    #[arg(long, default_value_t = 5000)]
    int_udp_port: u16,
    /// Stop after this many datagrams.
    #[arg(long)]
    limit: Option<u64>,
}

pub fn run(a: PcapArgs) -> anyhow::Result<ExitCode> {
    match a.cmd {
        PcapCmd::Gen(g) => gen(g),
        PcapCmd::Replay(r) => replay_cmd(r),
    }
}

fn gen(a: GenArgs) -> anyhow::Result<ExitCode> {
    let cdf = FlowSizeCdf::by_name_or_path(&a.workload)
        .with_context(|| format!("workload {:?}", a.workload))?;
    anyhow::ensure!(a.flows > 0, "--flows must be at least 1");
    anyhow::ensure!((1..=8).contains(&a.hops), "--hops must be 1..=8");
    let cfg = TrafficConfig {
        seed: a.seed,
        flows: a.flows,
        hops: a.hops,
        mss: a.mss.max(1),
        max_packets_per_flow: a.max_packets.max(1),
        hop_latency_ns: ExpMetric {
            mean: a.mean_latency_ns,
            max: (a.mean_latency_ns * 50.0).min(f64::from(u32::MAX - 1)) as u32,
        },
        queue_occupancy: ExpMetric {
            mean: a.mean_queue,
            max: a.max_queue,
        },
        egress_tx_util: ExpMetric {
            mean: a.mean_util,
            max: 1000,
        },
        int_udp_port: a.int_udp_port,
        episodes: a.episode,
        ports: a.ports,
        ..TrafficConfig::default()
    };
    let traffic = generate(&cfg, &cdf);
    let format = match a.format {
        Format::Frames => PcapFormat::Frames,
        Format::Reports => PcapFormat::Reports,
    };
    let n = write_pcap(&a.out, &traffic, format, a.report_port)
        .with_context(|| format!("writing {}", a.out.display()))?;
    let truth = a.truth.unwrap_or_else(|| a.out.with_extension("json"));
    traffic
        .truth
        .save(&truth)
        .with_context(|| format!("writing {}", truth.display()))?;
    for e in &traffic.truth.episodes {
        if e.hops == 0 {
            eprintln!(
                "warning: the episode at switch {} from {} ns touches no packet (the trace \
                 spans {} ns; is the switch on a path?)",
                e.episode.node_id,
                e.episode.start_ns,
                traffic
                    .truth
                    .frames
                    .last()
                    .map_or(0, |f| f.time_ns - cfg.start_ns)
            );
        }
    }
    eprintln!(
        "{n} frames of {} flows ({} switches, {} episodes) -> {}, ground truth -> {}",
        traffic.truth.flows.len(),
        traffic.truth.switches.len(),
        traffic.truth.episodes.len(),
        a.out.display(),
        truth.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn replay_cmd(a: ReplayArgs) -> anyhow::Result<ExitCode> {
    let opts = ReplayOptions {
        to: a.to,
        rate: a.rate,
        mode: match a.mode {
            Mode::Auto => ReplayMode::Auto,
            Mode::Payload => ReplayMode::Payload,
            Mode::Wrap => ReplayMode::Wrap,
        },
        int_udp_port: a.int_udp_port,
        limit: a.limit,
    };
    let bar = dta::output::progress(None, "datagrams", false);
    let st = replay_with(&a.pcap, &opts, &|st| bar.set_position(st.sent))
        .with_context(|| format!("replaying {}", a.pcap.display()))?;
    bar.finish_and_clear();
    println!("{}", serde_json::to_string(&st)?);
    Ok(if st.send_errors == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
