//! The packet trace the systems run on: TCP/IPv4 packets (5-tuple, timestamp, size, flags,
//! sequence number) in time order, read from an Ethernet pcap ([`from_pcap`]) or synthesized
//! ([`synthesize`]) from a flow-size CDF of `shared/workloads/` (`dta_reporter::workload`'s
//! [`FlowSizeCdf`], the one CDF reader).
//!
//! Synthesis is seeded and gives every system something to find: flows start as a Poisson
//! process, send `ceil(size / mss)` segments (a SYN first, FIN on the last) in bursts separated
//! by idle gaps longer than the flowlet gap and shorter than the RTO; a fraction of the flows
//! lose segments downstream of the monitoring switch (the switch sees the segment, then its
//! retransmission as the flow's next packet), and some of those retransmissions come only after
//! a retransmission timeout. What was injected is returned ([`Injected`]) so tests can check that
//! the systems' ground truth, computed from the packets alone, finds it.

use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::io::BufReader;
use std::net::Ipv4Addr;
use std::path::Path;

use pcap_file::pcap::PcapReader;
use pcap_file::DataLink;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use dta_net::{ethernet, ipv4, tcp, IPPROTO_TCP};
pub use dta_reporter::workload::{FlowSizeCdf, BUILTIN_WORKLOADS};

use crate::{flow_key, FlowKey, SystemError};

/// The most packets a trace holds (about 40 bytes each in memory): a larger pcap is refused.
pub const MAX_PACKETS: usize = 8_000_000;
/// The most flows [`synthesize`] makes.
pub const MAX_FLOWS: usize = 1_000_000;

/// One TCP packet as a switch sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Packet {
    /// Time since the trace's start, nanoseconds.
    pub ts_ns: u64,
    /// The flow's 5-tuple key.
    pub flow: FlowKey,
    /// Bytes on the wire (the IPv4 total length).
    pub size: u16,
    /// TCP payload bytes.
    pub payload: u16,
    /// TCP sequence number.
    pub seq: u32,
    /// TCP control bits (`dta_net::tcp::FLAG_*`).
    pub flags: u8,
}

impl Packet {
    /// The sequence number after this segment (SYN and FIN take one each).
    pub fn seq_end(&self) -> u32 {
        let ctl = u32::from(self.flags & (tcp::FLAG_SYN | tcp::FLAG_FIN) != 0);
        self.seq
            .wrapping_add(u32::from(self.payload))
            .wrapping_add(ctl)
    }
}

/// Why a pcap record is not in the trace (one counter each, [`Skipped`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// Not IPv4 (IPv6, ARP, ...).
    NotIpv4,
    /// IPv4 but not TCP.
    NotTcp,
    /// A fragment other than the first (no TCP header).
    Fragment,
    /// Truncated or malformed headers.
    Malformed,
}

/// Pcap records left out of a trace, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Skipped {
    /// [`SkipReason::NotIpv4`].
    pub not_ipv4: u64,
    /// [`SkipReason::NotTcp`].
    pub not_tcp: u64,
    /// [`SkipReason::Fragment`].
    pub fragment: u64,
    /// [`SkipReason::Malformed`].
    pub malformed: u64,
}

impl Skipped {
    fn count(&mut self, r: SkipReason) {
        match r {
            SkipReason::NotIpv4 => self.not_ipv4 += 1,
            SkipReason::NotTcp => self.not_tcp += 1,
            SkipReason::Fragment => self.fragment += 1,
            SkipReason::Malformed => self.malformed += 1,
        }
    }
}

/// A time-ordered packet trace.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    /// The packets, by timestamp.
    pub packets: Vec<Packet>,
    /// Records of the source left out.
    pub skipped: Skipped,
}

impl Trace {
    /// The trace's duration, nanoseconds (first to last packet).
    pub fn duration_ns(&self) -> u64 {
        match (self.packets.first(), self.packets.last()) {
            (Some(a), Some(b)) => b.ts_ns - a.ts_ns,
            _ => 0,
        }
    }

    /// Distinct flows.
    pub fn flows(&self) -> usize {
        self.packets
            .iter()
            .map(|p| p.flow)
            .collect::<HashSet<_>>()
            .len()
    }
}

/// Read the TCP/IPv4 packets of an Ethernet pcap (VLAN tags allowed), at most [`MAX_PACKETS`];
/// timestamps made relative to the first record and the packets sorted by time.
pub fn from_pcap(path: &Path) -> Result<Trace, SystemError> {
    let err = |e: String| SystemError::Trace(format!("{}: {e}", path.display()));
    let f = File::open(path).map_err(|e| err(e.to_string()))?;
    let mut r = PcapReader::new(BufReader::new(f)).map_err(|e| err(e.to_string()))?;
    if r.header().datalink != DataLink::ETHERNET {
        return Err(err(format!(
            "link type {:?}: only Ethernet pcaps are read",
            r.header().datalink
        )));
    }
    let mut t = Trace::default();
    let mut first = None;
    while let Some(p) = r.next_packet() {
        let p = p.map_err(|e| err(e.to_string()))?;
        let ts = p.timestamp.as_nanos() as u64;
        let base = *first.get_or_insert(ts);
        match parse_frame(&p.data) {
            Ok(mut pkt) => {
                if t.packets.len() == MAX_PACKETS {
                    return Err(err(format!(
                        "more than {MAX_PACKETS} TCP packets: cut the pcap (e.g. editcap -r)"
                    )));
                }
                pkt.ts_ns = ts.saturating_sub(base);
                t.packets.push(pkt);
            }
            Err(reason) => t.skipped.count(reason),
        }
    }
    t.packets.sort_by_key(|p| p.ts_ns);
    Ok(t)
}

/// The TCP packet of one Ethernet frame (timestamp 0).
pub fn parse_frame(frame: &[u8]) -> Result<Packet, SkipReason> {
    let eth = ethernet::Packet::new_checked(frame).map_err(|_| SkipReason::Malformed)?;
    let (ethertype, l3) = eth.untagged_payload().map_err(|_| SkipReason::Malformed)?;
    if ethertype != ethernet::ETHERTYPE_IPV4 {
        return Err(SkipReason::NotIpv4);
    }
    let ip = ipv4::Packet::new_checked(l3).map_err(|_| SkipReason::Malformed)?;
    if ip.protocol() != IPPROTO_TCP {
        return Err(SkipReason::NotTcp);
    }
    if ip.frag_offset() != 0 {
        return Err(SkipReason::Fragment);
    }
    let (src, dst, total) = (ip.src(), ip.dst(), ip.total_len());
    let seg = tcp::Packet::new_checked(ip.into_payload()).map_err(|_| SkipReason::Malformed)?;
    // The payload by the IP lengths (a capture may be cut short or padded).
    let hdrs = l3[0] as usize % 16 * 4 + seg.header_len();
    let payload = (total as usize).saturating_sub(hdrs).min(u16::MAX as usize) as u16;
    Ok(Packet {
        ts_ns: 0,
        flow: flow_key(
            src.into(),
            dst.into(),
            seg.src_port(),
            seg.dst_port(),
            IPPROTO_TCP,
        ),
        size: total,
        payload,
        seq: seg.seq(),
        flags: seg.flags(),
    })
}

/// How [`synthesize`] builds a trace. Times in nanoseconds.
#[derive(Debug, Clone, Serialize)]
pub struct SynthConfig {
    /// Flows (at most [`MAX_FLOWS`]).
    pub flows: usize,
    /// The seed of every random choice.
    pub seed: u64,
    /// TCP payload bytes of a full segment.
    pub mss: u16,
    /// Cap on a flow's segments (the CDFs reach tens of MB).
    pub max_segments: u64,
    /// Source hosts (10.0.x.y) the flows are spread over.
    pub hosts: u32,
    /// Mean gap between flow starts (Poisson arrivals).
    pub flow_arrival_ns: u64,
    /// Gap between packets of a burst.
    pub packet_gap_ns: u64,
    /// Mean segments per burst (geometric).
    pub burst_segments: f64,
    /// Idle gaps between bursts are uniform in this range.
    pub idle_gap_ns: (u64, u64),
    /// Fraction of flows that lose segments.
    pub lossy_flows: f64,
    /// A lossy flow's loss probability per segment is uniform in this range.
    pub loss_rate: (f64, f64),
    /// Probability that a lost segment is retransmitted only after a timeout.
    pub timeout_prob: f64,
    /// Gaps before a timed-out retransmission are uniform in this range.
    pub timeout_gap_ns: (u64, u64),
}

impl Default for SynthConfig {
    /// Bursts within the default flowlet gap (`marple::DEFAULT_FLOWLET_GAP_NS`, 1 ms), idle gaps
    /// of 2-50 ms (new flowlets, no timeout), timeouts after 250-400 ms (above the default RTO of
    /// 200 ms); a fifth of the flows lossy at 1-25 %.
    fn default() -> Self {
        SynthConfig {
            flows: 200,
            seed: 1,
            mss: 1460,
            max_segments: 1000,
            hosts: 64,
            flow_arrival_ns: 200_000,
            packet_gap_ns: 10_000,
            burst_segments: 16.0,
            idle_gap_ns: (2_000_000, 50_000_000),
            lossy_flows: 0.2,
            loss_rate: (0.01, 0.25),
            timeout_prob: 0.1,
            timeout_gap_ns: (250_000_000, 400_000_000),
        }
    }
}

/// What [`synthesize`] put into one flow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Injected {
    /// Packets of the flow (SYN, segments, retransmissions).
    pub packets: u64,
    /// Retransmitted segments (each a segment lost downstream of the switch).
    pub retransmissions: u64,
    /// Retransmissions that came after a timeout gap.
    pub timeouts: u64,
    /// Bursts (the flowlets at the default flowlet gap, counting a timed-out retransmission
    /// as the start of a new one).
    pub bursts: u64,
}

/// A trace of `cfg.flows` flows with sizes from `cdf`, and what was injected per flow.
pub fn synthesize(
    cfg: &SynthConfig,
    cdf: &FlowSizeCdf,
) -> Result<(Trace, BTreeMap<FlowKey, Injected>), SystemError> {
    let bad = |m: String| SystemError::BadRequest(format!("trace synthesis: {m}"));
    if cfg.flows == 0 || cfg.flows > MAX_FLOWS {
        return Err(bad(format!("flows = {}: 1..={MAX_FLOWS}", cfg.flows)));
    }
    if cfg.mss == 0 || cfg.hosts == 0 || cfg.hosts > 65_536 || cfg.max_segments == 0 {
        return Err(bad(
            "mss, max_segments and hosts (<= 65536) must be positive".into(),
        ));
    }
    if cfg.idle_gap_ns.0 > cfg.idle_gap_ns.1 || cfg.timeout_gap_ns.0 > cfg.timeout_gap_ns.1 {
        return Err(bad("gap ranges must be LOW <= HIGH".into()));
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(cfg.seed);
    let mut packets: Vec<Packet> = vec![];
    let mut injected = BTreeMap::new();
    let mut used = HashSet::new();
    let mut start = 0u64;
    for _ in 0..cfg.flows {
        start += (-(1.0 - rng.gen::<f64>()).ln() * cfg.flow_arrival_ns as f64) as u64;
        let h = rng.gen_range(0..cfg.hosts);
        let src = Ipv4Addr::new(10, 0, (h >> 8) as u8, h as u8);
        let dst = Ipv4Addr::new(10, 1, rng.gen(), rng.gen::<u8>().max(1));
        let dport = [80u16, 443, 5001][rng.gen_range(0..3)];
        let key = loop {
            let k = flow_key(src, dst, rng.gen_range(1024..=65535), dport, IPPROTO_TCP);
            if used.insert(k) {
                break k;
            }
        };
        let bytes = cdf.sample(&mut rng);
        let segments = bytes.div_ceil(cfg.mss as u64).clamp(1, cfg.max_segments);
        let loss = if rng.gen::<f64>() < cfg.lossy_flows {
            rng.gen_range(cfg.loss_rate.0..=cfg.loss_rate.1)
        } else {
            0.0
        };
        let budget = MAX_PACKETS.saturating_sub(packets.len()) as u64;
        if budget < 2 * segments + 1 {
            return Err(bad(format!(
                "more than {MAX_PACKETS} packets: ask for fewer flows"
            )));
        }
        let mut inj = Injected::default();
        let isn: u32 = rng.gen();
        let mut t = start;
        let mut push = |ts: u64, seq: u32, payload: u16, flags: u8, inj: &mut Injected| {
            packets.push(Packet {
                ts_ns: ts,
                flow: key,
                size: 40 + payload,
                payload,
                seq,
                flags,
            });
            inj.packets += 1;
        };
        push(t, isn, 0, tcp::FLAG_SYN, &mut inj);
        inj.bursts = 1;
        let mut left_in_burst = burst_len(&mut rng, cfg.burst_segments);
        for i in 0..segments {
            if left_in_burst == 0 {
                t += rng.gen_range(cfg.idle_gap_ns.0..=cfg.idle_gap_ns.1);
                inj.bursts += 1;
                left_in_burst = burst_len(&mut rng, cfg.burst_segments);
            } else {
                t += cfg.packet_gap_ns;
            }
            left_in_burst -= 1;
            let last = i + 1 == segments;
            let payload = if last {
                (bytes - (segments - 1) * cfg.mss as u64).clamp(1, cfg.mss as u64) as u16
            } else {
                cfg.mss
            };
            let seq = isn
                .wrapping_add(1)
                .wrapping_add((i * cfg.mss as u64) as u32);
            let flags = tcp::FLAG_ACK | if last { tcp::FLAG_FIN } else { 0 };
            push(t, seq, payload, flags, &mut inj);
            if loss > 0.0 && rng.gen::<f64>() < loss {
                // Lost after the switch: the sender's retransmission is the flow's next packet,
                // at once (fast retransmit) or after a timeout.
                if rng.gen::<f64>() < cfg.timeout_prob {
                    t += rng.gen_range(cfg.timeout_gap_ns.0..=cfg.timeout_gap_ns.1);
                    inj.timeouts += 1;
                    inj.bursts += 1;
                    left_in_burst = burst_len(&mut rng, cfg.burst_segments);
                } else {
                    t += cfg.packet_gap_ns;
                }
                push(t, seq, payload, flags, &mut inj);
                inj.retransmissions += 1;
            }
        }
        injected.insert(key, inj);
    }
    // Stable: a flow's packets keep their order at equal timestamps.
    packets.sort_by_key(|p| p.ts_ns);
    Ok((
        Trace {
            packets,
            skipped: Skipped::default(),
        },
        injected,
    ))
}

/// A burst length: geometric with mean `mean`, at least 1.
fn burst_len<R: Rng>(rng: &mut R, mean: f64) -> u64 {
    let p = 1.0 / mean.max(1.0);
    let u = 1.0 - rng.gen::<f64>();
    (u.ln() / (1.0 - p).ln()).floor().max(0.0) as u64 + 1
}

/// Where a workload's packets come from: a pcap, or synthesis from a flow-size CDF (a built-in
/// name of [`BUILTIN_WORKLOADS`] or a CDF file).
#[derive(Debug, Clone)]
pub enum Source {
    /// An Ethernet pcap.
    Pcap(std::path::PathBuf),
    /// A flow-size CDF, with the synthesis parameters.
    Cdf(String, SynthConfig),
}

impl Source {
    /// The trace (and, when synthesized, what was injected).
    pub fn load(&self) -> Result<(Trace, Option<BTreeMap<FlowKey, Injected>>), SystemError> {
        match self {
            Source::Pcap(p) => Ok((from_pcap(p)?, None)),
            Source::Cdf(name, cfg) => {
                let cdf = FlowSizeCdf::by_name_or_path(name)
                    .map_err(|e| SystemError::Trace(format!("workload {name:?}: {e}")))?;
                let (t, inj) = synthesize(cfg, &cdf)?;
                Ok((t, Some(inj)))
            }
        }
    }
}

/// A seeded synthesized trace of `flows` FB_Hadoop flows and what it injected: the systems'
/// unit tests' input.
#[cfg(test)]
pub(crate) fn test_trace(flows: usize) -> (Trace, BTreeMap<FlowKey, Injected>) {
    synthesize(
        &SynthConfig {
            flows,
            ..SynthConfig::default()
        },
        &FlowSizeCdf::builtin("fb_hadoop").unwrap(),
    )
    .unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cdf() -> FlowSizeCdf {
        FlowSizeCdf::builtin("fb_hadoop").unwrap()
    }

    #[test]
    fn synthesis_is_seeded_ordered_and_injects_losses() {
        let cfg = SynthConfig {
            flows: 300,
            ..SynthConfig::default()
        };
        let (a, inj) = synthesize(&cfg, &cdf()).unwrap();
        let (b, _) = synthesize(&cfg, &cdf()).unwrap();
        assert_eq!(a.packets, b.packets);
        assert!(a.packets.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns));
        assert_eq!(a.flows(), 300);
        assert_eq!(
            inj.values().map(|i| i.packets).sum::<u64>(),
            a.packets.len() as u64
        );
        assert!(inj.values().any(|i| i.retransmissions > 0));
        assert!(inj.values().any(|i| i.timeouts > 0));
        assert!(inj.values().any(|i| i.bursts > 3));
        let other = synthesize(
            &SynthConfig {
                seed: 2,
                ..cfg.clone()
            },
            &cdf(),
        )
        .unwrap()
        .0;
        assert_ne!(other.packets, a.packets);
    }

    #[test]
    fn bad_parameters_are_errors() {
        for cfg in [
            SynthConfig {
                flows: 0,
                ..SynthConfig::default()
            },
            SynthConfig {
                hosts: 0,
                ..SynthConfig::default()
            },
            SynthConfig {
                idle_gap_ns: (5, 1),
                ..SynthConfig::default()
            },
        ] {
            assert!(synthesize(&cfg, &cdf()).is_err());
        }
    }

    #[test]
    fn frames_parse_and_others_are_counted() {
        // Ethernet / IPv4 / TCP with a 3-byte payload.
        let mut f = vec![0u8; 14 + 20 + 20 + 3];
        f[12..14].copy_from_slice(&ethernet::ETHERTYPE_IPV4.to_be_bytes());
        f[14] = 0x45;
        f[16..18].copy_from_slice(&43u16.to_be_bytes());
        f[23] = IPPROTO_TCP;
        f[26..30].copy_from_slice(&[10, 0, 0, 1]);
        f[30..34].copy_from_slice(&[10, 0, 0, 2]);
        f[34..36].copy_from_slice(&1234u16.to_be_bytes());
        f[36..38].copy_from_slice(&80u16.to_be_bytes());
        f[38..42].copy_from_slice(&77u32.to_be_bytes());
        f[46] = 5 << 4;
        f[47] = tcp::FLAG_ACK | tcp::FLAG_FIN;
        let p = parse_frame(&f).unwrap();
        assert_eq!(crate::flow_string(&p.flow), "10.0.0.1:1234-10.0.0.2:80/6");
        assert_eq!((p.size, p.payload, p.seq, p.seq_end()), (43, 3, 77, 81));
        let mut udp = f.clone();
        udp[23] = 17;
        assert_eq!(parse_frame(&udp), Err(SkipReason::NotTcp));
        let mut v6 = f.clone();
        v6[12..14].copy_from_slice(&ethernet::ETHERTYPE_IPV6.to_be_bytes());
        assert_eq!(parse_frame(&v6), Err(SkipReason::NotIpv4));
        assert_eq!(parse_frame(&f[..40]), Err(SkipReason::Malformed));
    }
}
