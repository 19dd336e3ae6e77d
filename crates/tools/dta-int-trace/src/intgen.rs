//! Realistic INT traffic ([INT-NIC §IV.A.3]: "5 INT transit nodes and 4 instructions on each node,
//! the values ... randomly generated according to exponential distributed probabilities across
//! all possible values for each measurement (i.e., hop latency, queue occupancy, link
//! utilization) ... the queue occupancy takes values from 0 to 300 with exponential decreasing
//! probabilities"), with flow sizes drawn from a measured data-center flow-size CDF
//! (`shared/workloads/*.txt`: FB Hadoop, web search), heavy-tailed. The frames are built by
//! `dta_int::gen` (INT-MD over UDP, NPT 1, instructions node id, hop latency, queue, egress
//! utilisation); this module decides what is sent when, and keeps the ground truth.
//!
//! Congestion episodes ([`Episode`]): for a time, one switch's hop latency and queue occupancy
//! are multiplied by a magnitude (its egress queue backs up); the ground truth records each
//! episode and what it touched, so tests and operators can check that the congested switch is
//! found first and its episode at the right time.
//!
//! Timing: flows start as a Poisson process (`flow_arrival_ns` mean gap); a flow sends its
//! packets `packet_gap_ns` apart; all packets are merged in time order. Paths are fixed per flow
//! (ECMP): hop i's node is `(i + 1) * 100 + j`, `j < switches_per_hop`, as in `dta_int::gen`.

use std::collections::BTreeMap;
use std::path::Path;

use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp};
use serde::{Deserialize, Serialize};

use dta_int::gen::{GenPacket, HopTruth};
pub use dta_reporter::workload::{CdfError, FlowSizeCdf, BUILTIN_WORKLOADS};

/// An exponential distribution of integers truncated to `0..=max` by rejection ("exponential
/// decreasing probabilities across all possible values", [INT-NIC §IV.A.3]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ExpMetric {
    pub mean: f64,
    pub max: u32,
}

impl ExpMetric {
    fn sample<R: Rng>(&self, exp: &Exp<f64>, rng: &mut R) -> u32 {
        loop {
            let v = exp.sample(rng).floor();
            if v <= f64::from(self.max) {
                return v as u32;
            }
        }
    }
}

/// Generator parameters (recorded in the ground truth).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrafficConfig {
    pub seed: u64,
    pub flows: usize,
    /// INT transit hops per packet ([INT-NIC §IV]: 5).
    pub hops: usize,
    pub switches_per_hop: u32,
    /// Bytes of a flow carried per packet (its size / this, rounded up, is its packet count).
    pub mss: u64,
    /// At most this many packets per flow (the CDFs reach 10-30 MB).
    pub max_packets_per_flow: u64,
    pub hop_latency_ns: ExpMetric,
    pub queue_occupancy: ExpMetric,
    pub egress_tx_util: ExpMetric,
    /// Mean gap between flow starts, ns (Poisson arrivals).
    pub flow_arrival_ns: f64,
    /// Gap between a flow's packets, ns.
    pub packet_gap_ns: u64,
    /// Time of the first flow start, ns since the epoch.
    pub start_ns: u64,
    /// INT over UDP destination port.
    pub int_udp_port: u16,
    /// Congestion injected at switches.
    #[serde(default)]
    pub episodes: Vec<Episode>,
    /// Whether hops report their ports (INT bit 1): a hop's egress port is `1 + j` of the next
    /// hop's switch `(i + 2) * 100 + j`, the last hop's [`HOST_PORT`].
    #[serde(default)]
    pub ports: bool,
}

/// The egress port of a path's last hop (towards the host) when hops report ports.
pub const HOST_PORT: u16 = 100;

/// A congestion episode: from `start_ns` after the trace's first packet for `duration_ns`,
/// every hop at switch `node_id` has its hop latency and queue occupancy multiplied by
/// `magnitude` (saturating at `u32::MAX - 1` and the 24-bit queue field).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Episode {
    pub node_id: u32,
    pub start_ns: u64,
    pub duration_ns: u64,
    pub magnitude: f64,
}

impl Episode {
    /// Parse `NODE:START:DURATION:MAGNITUDE`, times as a number and its unit (`ns`, `us`,
    /// `ms`, `s`), e.g. `301:20ms:10ms:25`.
    pub fn parse(s: &str) -> Result<Episode, String> {
        let usage = "expected NODE:START:DURATION:MAGNITUDE, e.g. 301:20ms:10ms:25";
        let f: Vec<&str> = s.split(':').collect();
        let [node, start, duration, magnitude] = f[..] else {
            return Err(format!("episode {s:?}: {usage}"));
        };
        let time = |t: &str| -> Result<u64, String> {
            let i = t
                .find(|c: char| !c.is_ascii_digit())
                .ok_or_else(|| format!("episode {s:?}: {t:?} needs a unit (ns, us, ms or s)"))?;
            let n: u64 = t[..i]
                .parse()
                .map_err(|_| format!("episode {s:?}: {t:?} is not a time"))?;
            let mult = match &t[i..] {
                "ns" => 1,
                "us" => 1_000,
                "ms" => 1_000_000,
                "s" => 1_000_000_000,
                u => return Err(format!("episode {s:?}: unit {u:?}: ns, us, ms or s")),
            };
            n.checked_mul(mult)
                .ok_or_else(|| format!("episode {s:?}: {t:?} is too long"))
        };
        let e = Episode {
            node_id: node
                .parse()
                .map_err(|_| format!("episode {s:?}: node {node:?} is not a node id"))?,
            start_ns: time(start)?,
            duration_ns: time(duration)?,
            magnitude: magnitude
                .parse()
                .map_err(|_| format!("episode {s:?}: magnitude {magnitude:?} is not a number"))?,
        };
        if !(e.magnitude.is_finite() && e.magnitude > 0.0 && e.magnitude <= 1e6) {
            return Err(format!(
                "episode {s:?}: the magnitude is above 0, at most 1e6"
            ));
        }
        if e.duration_ns == 0 {
            return Err(format!("episode {s:?}: the duration is above 0"));
        }
        Ok(e)
    }

    /// Whether a hop at `node_id` at `offset_ns` after the trace's start is in it.
    fn covers(&self, node_id: u32, offset_ns: u64) -> bool {
        node_id == self.node_id
            && offset_ns >= self.start_ns
            && offset_ns - self.start_ns < self.duration_ns
    }
}

/// What an episode touched, in the ground truth.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeTruth {
    #[serde(flatten)]
    pub episode: Episode,
    /// Hops at the switch in the episode (its samples), and the frames that carried them:
    /// the first and the last (indices into `frames`, in pcap order).
    pub hops: u64,
    pub first_frame: Option<usize>,
    pub last_frame: Option<usize>,
    /// Distinct flows through the switch in the episode.
    pub flows: u64,
    /// The highest hop latency at the switch in the episode, ns.
    pub peak_hop_latency: u32,
}

impl Default for TrafficConfig {
    fn default() -> Self {
        TrafficConfig {
            seed: 1,
            flows: 100,
            hops: 5,
            switches_per_hop: 4,
            mss: 1460,
            max_packets_per_flow: 1000,
            hop_latency_ns: ExpMetric {
                mean: 2_000.0,
                max: 100_000,
            },
            queue_occupancy: ExpMetric {
                mean: 40.0,
                max: 300,
            },
            egress_tx_util: ExpMetric {
                mean: 300.0,
                max: 1000,
            },
            flow_arrival_ns: 20_000.0,
            packet_gap_ns: 1_200,
            start_ns: 1_700_000_000_000_000_000,
            int_udp_port: 5000,
            episodes: vec![],
            ports: false,
        }
    }
}

/// One flow of the ground truth.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowTruth {
    /// `SRC:SPORT-DST:DPORT/PROTO`.
    pub flow: String,
    /// `FlowKey::key13()` in hex.
    pub key13: String,
    /// Drawn from the CDF.
    pub size_bytes: u64,
    /// Packets sent (size / mss rounded up, capped).
    pub packets: u64,
    /// Node ids, hop 0 (the INT source) first.
    pub path: Vec<u32>,
    pub first_ns: u64,
    pub last_ns: u64,
}

/// One frame of the ground truth, in pcap order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrameTruth {
    pub time_ns: u64,
    /// Index into `flows`.
    pub flow: usize,
    /// `[node_id, hop_latency, queue_occupancy, egress_tx_util]` per hop, hop 0 first (the wire
    /// stack holds them newest first).
    pub hops: Vec<[u32; 4]>,
    /// Each hop's egress port, hop 0 first, when the hops report ports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub egress_ports: Vec<u16>,
}

/// Count, sum, min and max of one metric at one switch: what a histogram of the trace must add
/// up to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct MetricSummary {
    pub count: u64,
    pub sum: u64,
    pub min: u32,
    pub max: u32,
}

impl MetricSummary {
    fn add(&mut self, v: u32) {
        if self.count == 0 {
            self.min = v;
            self.max = v;
        }
        self.count += 1;
        self.sum += u64::from(v);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }
}

/// Per switch: its metrics over the whole trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct SwitchTruth {
    pub hop_latency: MetricSummary,
    pub queue_occupancy: MetricSummary,
    pub egress_tx_util: MetricSummary,
}

/// Everything the generator knows: written beside the pcap as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroundTruth {
    pub config: TrafficConfig,
    /// The CDF the sizes came from.
    pub cdf: FlowSizeCdf,
    pub flows: Vec<FlowTruth>,
    pub frames: Vec<FrameTruth>,
    /// By node id.
    pub switches: BTreeMap<u32, SwitchTruth>,
    /// The injected episodes, as `config.episodes`, with what each touched.
    #[serde(default)]
    pub episodes: Vec<EpisodeTruth>,
}

impl GroundTruth {
    /// Write as JSON.
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        let f = std::io::BufWriter::new(std::fs::File::create(path)?);
        serde_json::to_writer(f, self).map_err(std::io::Error::other)
    }

    /// Read what [`GroundTruth::save`] wrote.
    pub fn load(path: &Path) -> std::io::Result<GroundTruth> {
        let f = std::io::BufReader::new(std::fs::File::open(path)?);
        serde_json::from_reader(f).map_err(std::io::Error::other)
    }
}

/// The generated trace: packets (for `dta_int::gen`'s frame builders) and the ground truth.
pub struct Traffic {
    pub packets: Vec<GenPacket>,
    pub truth: GroundTruth,
}

fn flow_key(i: usize, rng: &mut impl Rng) -> [u8; 13] {
    let mut k = [0u8; 13];
    k[0..4].copy_from_slice(&[10, 0, (i >> 8) as u8, i as u8]);
    k[4..8].copy_from_slice(&[10, 1, rng.gen(), rng.gen()]);
    k[8..10].copy_from_slice(&rng.gen_range(1024u16..65535).to_be_bytes());
    let dport: u16 = [80, 443, 8080, 9000][rng.gen_range(0..4)];
    k[10..12].copy_from_slice(&dport.to_be_bytes());
    k[12] = 17;
    k
}

/// Generate the trace (deterministic for a seed).
pub fn generate(cfg: &TrafficConfig, cdf: &FlowSizeCdf) -> Traffic {
    let mut rng = rand::rngs::StdRng::seed_from_u64(cfg.seed);
    let arrivals = Exp::new(1.0 / cfg.flow_arrival_ns.max(1.0)).expect("positive rate");
    let lat = Exp::new(1.0 / cfg.hop_latency_ns.mean.max(1e-9)).expect("positive mean");
    let q = Exp::new(1.0 / cfg.queue_occupancy.mean.max(1e-9)).expect("positive mean");
    let u = Exp::new(1.0 / cfg.egress_tx_util.mean.max(1e-9)).expect("positive mean");
    let mut flows = Vec::with_capacity(cfg.flows);
    let mut keys = Vec::with_capacity(cfg.flows);
    // (time, flow, packet index): every packet of every flow, then sorted by time.
    let mut schedule: Vec<(u64, usize)> = Vec::new();
    let mut t = cfg.start_ns as f64;
    for f in 0..cfg.flows {
        let key = flow_key(f, &mut rng);
        let path: Vec<u32> = (0..cfg.hops)
            .map(|i| (i as u32 + 1) * 100 + rng.gen_range(0..cfg.switches_per_hop.max(1)))
            .collect();
        let size = cdf.sample(&mut rng);
        let packets = size
            .div_ceil(cfg.mss.max(1))
            .clamp(1, cfg.max_packets_per_flow.max(1));
        let start = t as u64;
        for p in 0..packets {
            schedule.push((start + p * cfg.packet_gap_ns, f));
        }
        flows.push(FlowTruth {
            flow: dta_int::flow_string(&key),
            key13: key.iter().map(|b| format!("{b:02x}")).collect(),
            size_bytes: size,
            packets,
            path,
            first_ns: start,
            last_ns: start + (packets - 1) * cfg.packet_gap_ns,
        });
        keys.push(key);
        t += arrivals.sample(&mut rng);
    }
    schedule.sort_unstable();
    let mut packets = Vec::with_capacity(schedule.len());
    let mut frames = Vec::with_capacity(schedule.len());
    let mut switches: BTreeMap<u32, SwitchTruth> = BTreeMap::new();
    let mut episodes: Vec<(EpisodeTruth, std::collections::HashSet<usize>)> = cfg
        .episodes
        .iter()
        .map(|&episode| {
            let t = EpisodeTruth {
                episode,
                hops: 0,
                first_frame: None,
                last_frame: None,
                flows: 0,
                peak_hop_latency: 0,
            };
            (t, Default::default())
        })
        .collect();
    for (time_ns, f) in schedule {
        let offset = time_ns - cfg.start_ns;
        let frame = frames.len();
        let path = &flows[f].path;
        let hops: Vec<HopTruth> = path
            .iter()
            .enumerate()
            .map(|(i, &node_id)| {
                let mut h = HopTruth {
                    node_id,
                    latency: cfg.hop_latency_ns.sample(&lat, &mut rng),
                    queue: cfg.queue_occupancy.sample(&q, &mut rng),
                    util: cfg.egress_tx_util.sample(&u, &mut rng),
                    egress_port: cfg.ports.then(|| {
                        path.get(i + 1)
                            .map_or(HOST_PORT, |next| 1 + (next % 100) as u16)
                    }),
                };
                for (t, seen) in episodes.iter_mut() {
                    if t.episode.covers(node_id, offset) {
                        let m = t.episode.magnitude;
                        h.latency = (f64::from(h.latency) * m).min(f64::from(u32::MAX - 1)) as u32;
                        h.queue = (f64::from(h.queue) * m).min(f64::from(0xFF_FFFE)) as u32;
                        t.hops += 1;
                        t.first_frame.get_or_insert(frame);
                        t.last_frame = Some(frame);
                        t.peak_hop_latency = t.peak_hop_latency.max(h.latency);
                        seen.insert(f);
                    }
                }
                h
            })
            .collect();
        for h in &hops {
            let s = switches.entry(h.node_id).or_default();
            s.hop_latency.add(h.latency);
            s.queue_occupancy.add(h.queue);
            s.egress_tx_util.add(h.util);
        }
        frames.push(FrameTruth {
            time_ns,
            flow: f,
            hops: hops
                .iter()
                .map(|h| [h.node_id, h.latency, h.queue, h.util])
                .collect(),
            egress_ports: hops.iter().filter_map(|h| h.egress_port).collect(),
        });
        packets.push(GenPacket {
            time_ns,
            flow: keys[f],
            hops,
        });
    }
    Traffic {
        packets,
        truth: GroundTruth {
            config: cfg.clone(),
            cdf: cdf.clone(),
            flows,
            frames,
            switches,
            episodes: episodes
                .into_iter()
                .map(|(mut t, seen)| {
                    t.flows = seen.len() as u64;
                    t
                })
                .collect(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FB: &str = "0 0\n100 1\n200 2\n300 5\n350 15\n400 20\n500 30\n600 40\n700 50\n1000 60\n2000 67\n7000 70\n30000 72\n50000 82\n80000 87\n120000 90\n300000 95\n1000000 97.5\n2000000 99\n10000000 100\n";

    #[test]
    fn metrics_are_truncated_exponentials_and_truth_adds_up() {
        let c = FlowSizeCdf::parse(FB).unwrap();
        let cfg = TrafficConfig {
            flows: 300,
            max_packets_per_flow: 50,
            ..TrafficConfig::default()
        };
        let t = generate(&cfg, &c);
        let n: u64 = t.truth.flows.iter().map(|f| f.packets).sum();
        assert_eq!(t.packets.len() as u64, n);
        assert_eq!(t.truth.frames.len() as u64, n);
        assert!(t.packets.windows(2).all(|w| w[0].time_ns <= w[1].time_ns));
        let mut queues = Vec::new();
        for p in &t.packets {
            assert_eq!(p.hops.len(), 5);
            for (i, h) in p.hops.iter().enumerate() {
                assert_eq!(h.node_id / 100, i as u32 + 1);
                assert!(h.queue <= 300 && h.util <= 1000 && h.latency <= 100_000);
                queues.push(h.queue);
            }
        }
        // Exponential with mean 40 truncated at 300: mean within a few percent of 40, and about
        // e^-1 of the values at or above the mean.
        let mean = queues.iter().map(|&q| f64::from(q)).sum::<f64>() / queues.len() as f64;
        assert!((36.0..44.0).contains(&mean), "mean queue {mean}");
        let above = queues.iter().filter(|&&q| q >= 40).count() as f64 / queues.len() as f64;
        assert!((0.31..0.43).contains(&above), "P(q >= mean) {above}");
        // The per-switch summaries count every hop of every frame exactly.
        let total: u64 = t
            .truth
            .switches
            .values()
            .map(|s| s.queue_occupancy.count)
            .sum();
        assert_eq!(total, n * 5);
        let lat_sum: u64 = t
            .packets
            .iter()
            .flat_map(|p| &p.hops)
            .map(|h| u64::from(h.latency))
            .sum();
        assert_eq!(
            lat_sum,
            t.truth
                .switches
                .values()
                .map(|s| s.hop_latency.sum)
                .sum::<u64>()
        );
        // Deterministic.
        let again = generate(&cfg, &c);
        assert_eq!(again.truth, t.truth);
    }

    #[test]
    fn an_episode_multiplies_its_switch_in_its_time_and_is_recorded() {
        let c = FlowSizeCdf::parse(FB).unwrap();
        let plain = TrafficConfig {
            flows: 300,
            max_packets_per_flow: 50,
            ..TrafficConfig::default()
        };
        let span = {
            let t = generate(&plain, &c);
            t.truth.frames.last().unwrap().time_ns - plain.start_ns
        };
        let e = Episode::parse(&format!("301:{}ns:{}ns:20", span / 4, span / 4)).unwrap();
        let cfg = TrafficConfig {
            episodes: vec![e],
            ..plain.clone()
        };
        let t = generate(&cfg, &c);
        let truth = &t.truth.episodes[0];
        assert_eq!(truth.episode, e);
        let (first, last) = (truth.first_frame.unwrap(), truth.last_frame.unwrap());
        let mut inside = 0;
        for (i, p) in t.packets.iter().enumerate() {
            let offset = p.time_ns - cfg.start_ns;
            let in_time = (span / 4..span / 2).contains(&offset);
            for h in p.hops.iter().filter(|h| h.node_id == 301) {
                if in_time {
                    inside += 1;
                    assert!((first..=last).contains(&i));
                } else {
                    assert!(h.latency <= 100_000, "outside the episode: untouched");
                }
            }
        }
        assert_eq!(truth.hops, inside);
        assert!(truth.hops > 100 && truth.flows > 1, "{truth:?}");
        // Its switch's mean latency inside is about 20 times the configured mean.
        let lat: Vec<f64> = t
            .packets
            .iter()
            .filter(|p| (span / 4..span / 2).contains(&(p.time_ns - cfg.start_ns)))
            .flat_map(|p| &p.hops)
            .filter(|h| h.node_id == 301)
            .map(|h| f64::from(h.latency))
            .collect();
        let mean = lat.iter().sum::<f64>() / lat.len() as f64;
        assert!((30_000.0..50_000.0).contains(&mean), "mean {mean}");
        assert_eq!(
            truth.peak_hop_latency as f64,
            lat.iter().cloned().fold(0.0, f64::max)
        );
        // Through JSON and back.
        let d = tempfile::tempdir().unwrap();
        t.truth.save(&d.path().join("t.json")).unwrap();
        assert_eq!(
            GroundTruth::load(&d.path().join("t.json")).unwrap(),
            t.truth
        );
    }

    #[test]
    fn ports_lead_to_the_next_hop_and_ride_in_the_frames() {
        let c = FlowSizeCdf::parse(FB).unwrap();
        let cfg = TrafficConfig {
            flows: 20,
            max_packets_per_flow: 5,
            ports: true,
            ..TrafficConfig::default()
        };
        let t = generate(&cfg, &c);
        let detect = dta_int_wire::IntDetect::udp_port(cfg.int_udp_port);
        for (p, fr) in t.packets.iter().zip(&t.truth.frames) {
            let want: Vec<u16> = p
                .hops
                .iter()
                .enumerate()
                .map(|(i, _)| {
                    p.hops
                        .get(i + 1)
                        .map_or(HOST_PORT, |n| 1 + (n.node_id % 100) as u16)
                })
                .collect();
            assert_eq!(fr.egress_ports, want);
            let frame = dta_int::gen::md_frame(p, cfg.int_udp_port);
            let int = dta_int_wire::find_int(&frame, &detect).unwrap().unwrap();
            let stack = int.stack().unwrap();
            // The stack holds the newest hop first.
            let on_wire: Vec<u16> = (0..p.hops.len())
                .rev()
                .map(|i| stack.get(i).unwrap().baseline.l1_egress_port.unwrap())
                .collect();
            assert_eq!(on_wire, want);
        }
        // Without ports, none on the wire and none in the truth.
        let plain = generate(
            &TrafficConfig {
                ports: false,
                ..cfg
            },
            &c,
        );
        assert!(plain.truth.frames.iter().all(|f| f.egress_ports.is_empty()));
    }

    #[test]
    fn episodes_parse_with_units_and_refuse_the_rest() {
        let e = Episode::parse("301:20ms:1s:2.5").unwrap();
        assert_eq!(
            e,
            Episode {
                node_id: 301,
                start_ns: 20_000_000,
                duration_ns: 1_000_000_000,
                magnitude: 2.5
            }
        );
        for bad in [
            "",
            "301",
            "301:20:10ms:2",
            "301:20ms:0ms:2",
            "301:20ms:10ms:0",
            "301:20ms:10ms:nan",
            "301:20ms:10ms:inf",
            "x:20ms:10ms:2",
            "301:20h:10ms:2",
            "301:99999999999999999999s:1s:2",
            "301:20ms:10ms:2:9",
        ] {
            assert!(Episode::parse(bad).is_err(), "{bad:?}");
        }
    }
}
