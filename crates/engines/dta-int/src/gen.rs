//! A deterministic INT traffic generator ([INT-NIC §IV]: 5 INT transit hops, exponentially
//! distributed
//! metrics; flow sizes from a heavy-tailed (Pareto) distribution). It keeps the ground truth of
//! every packet and builds the bytes a sink receives: INT-MD frames (Ethernet/IPv4/UDP, INT over
//! UDP with NPT 1, `emit_md`), stacked telemetry reports of those frames, and per-hop postcards
//! (telemetry report v2.0 with the hop's metadata and the inner IPv4 packet, TTL =
//! `initial_ttl - hop`), all with `dta_int_wire` emitters. The pcap writer reuses it.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp, Pareto};

use dta_int_wire::{
    emit_md, emit_md_as, instr, GroupHeader, HopMetadata, IndividualReport, IntReportMain,
    IntVersion, LegacyReport, LegacySubHeader, MdHeader, ReportBuilder, ReportMetadata,
};

use dta_net::{ethernet, ipv4, udp};

use crate::layout::FLOW_KEY_LEN;

/// Generator parameters.
#[derive(Debug, Clone)]
pub struct GenConfig {
    pub seed: u64,
    pub flows: usize,
    /// Hops per path (1..=5 for the sink's full path record).
    pub hops: usize,
    /// Pareto shape of flow sizes (packets); smaller is heavier-tailed.
    pub pareto_shape: f64,
    /// Largest flow, packets.
    pub max_flow_packets: usize,
    pub mean_latency_ns: f64,
    pub mean_queue: f64,
    pub mean_util: f64,
    /// Switches per hop layer: the node at hop i is `(i + 1) * 100 + j`, j < this.
    pub switches_per_hop: u32,
    /// Per packet, the probability that the flow is re-routed at hop 2 (a path change).
    pub reroute_prob: f64,
    /// INT over UDP destination port.
    pub int_udp_port: u16,
    /// Time between packets, ns.
    pub gap_ns: u64,
    pub start_ns: u64,
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig {
            seed: 1,
            flows: 200,
            hops: 5,
            pareto_shape: 1.2,
            max_flow_packets: 200,
            mean_latency_ns: 2_000.0,
            mean_queue: 40.0,
            mean_util: 500.0,
            switches_per_hop: 4,
            reroute_prob: 0.01,
            int_udp_port: 5000,
            gap_ns: 1_000,
            start_ns: 1_000_000,
        }
    }
}

/// One hop's true values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HopTruth {
    pub node_id: u32,
    pub latency: u32,
    pub queue: u32,
    pub util: u32,
    /// The egress port the hop reports (INT bit 1, level 1 ports), if it reports ports.
    pub egress_port: Option<u16>,
}

/// One generated packet and its ground truth.
#[derive(Debug, Clone)]
pub struct GenPacket {
    pub time_ns: u64,
    pub flow: [u8; FLOW_KEY_LEN],
    /// Hop 0 (the INT source) first.
    pub hops: Vec<HopTruth>,
}

/// Generate the packets, in time order.
pub fn generate(cfg: &GenConfig) -> Vec<GenPacket> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(cfg.seed);
    let sizes = Pareto::new(1.0, cfg.pareto_shape).expect("shape > 0");
    let lat = Exp::new(1.0 / cfg.mean_latency_ns).expect("mean > 0");
    let q = Exp::new(1.0 / cfg.mean_queue).expect("mean > 0");
    let u = Exp::new(1.0 / cfg.mean_util).expect("mean > 0");
    let mut flows = Vec::with_capacity(cfg.flows);
    let mut order = Vec::new();
    for f in 0..cfg.flows {
        let mut k = [0u8; FLOW_KEY_LEN];
        k[0..4].copy_from_slice(&[10, 0, (f >> 8) as u8, f as u8]);
        k[4..8].copy_from_slice(&[10, 1, rng.gen(), rng.gen()]);
        k[8..10].copy_from_slice(&rng.gen_range(1024u16..65535).to_be_bytes());
        k[10..12].copy_from_slice(&[0, 80]);
        k[12] = 17;
        let path: Vec<u32> = (0..cfg.hops)
            .map(|i| (i as u32 + 1) * 100 + rng.gen_range(0..cfg.switches_per_hop))
            .collect();
        flows.push((k, path));
        let n = (sizes.sample(&mut rng) as usize).clamp(1, cfg.max_flow_packets);
        order.extend(std::iter::repeat_n(f, n));
    }
    order.shuffle(&mut rng);
    let mut out = Vec::with_capacity(order.len());
    for (i, f) in order.into_iter().enumerate() {
        let (key, path) = &mut flows[f];
        if cfg.hops > 2 && rng.gen_bool(cfg.reroute_prob) {
            path[2] = 300 + (path[2] - 300 + 1) % cfg.switches_per_hop;
        }
        let hops = path
            .iter()
            .map(|&node_id| HopTruth {
                node_id,
                latency: lat.sample(&mut rng) as u32,
                queue: (q.sample(&mut rng) as u32).min(0xFF_FFFE),
                util: u.sample(&mut rng) as u32,
                egress_port: None,
            })
            .collect();
        out.push(GenPacket {
            time_ns: cfg.start_ns + i as u64 * cfg.gap_ns,
            flow: *key,
            hops,
        });
    }
    out
}

/// The instruction bitmap of generated INT-MD frames (with [`instr::L1_PORTS`] too when the hops
/// report ports: [`instructions_of`]).
pub const INSTRUCTIONS: u16 = instr::NODE_ID | instr::HOP_LATENCY | instr::QUEUE | instr::TX_UTIL;

/// The instruction bitmap of `p`'s INT-MD frame and its words per hop.
pub fn instructions_of(p: &GenPacket) -> (u16, u8) {
    if p.hops.iter().any(|h| h.egress_port.is_some()) {
        (INSTRUCTIONS | instr::L1_PORTS, 5)
    } else {
        (INSTRUCTIONS, 4)
    }
}

/// The IPv4 and UDP headers of a generated packet: addresses and source port from `flow`,
/// identification 0, no DF, UDP checksum 0.
fn headers(flow: &[u8; FLOW_KEY_LEN], ttl: u8, dport: u16) -> (ipv4::Repr, udp::Repr) {
    let ip = ipv4::Repr {
        src: [flow[0], flow[1], flow[2], flow[3]],
        dst: [flow[4], flow[5], flow[6], flow[7]],
        dscp_ecn: 0,
        ident: 0,
        dont_fragment: false,
        ttl,
        protocol: dta_net::IPPROTO_UDP,
    };
    let u = udp::Repr {
        src_port: u16::from_be_bytes([flow[8], flow[9]]),
        dst_port: dport,
        checksum: 0,
    };
    (ip, u)
}

/// Generated payloads (an INT block, a report of one frame) are far below 64 KiB.
const FITS: &str = "generated packets fit the IPv4 and UDP length fields";

/// IPv4 (20 bytes) + UDP (8) + `payload`, addresses and source port from `flow`.
pub fn ipv4_udp(flow: &[u8; FLOW_KEY_LEN], ttl: u8, dport: u16, payload: &[u8]) -> Vec<u8> {
    let (ip, u) = headers(flow, ttl, dport);
    dta_net::ipv4_udp_packet(&ip, &u, payload).expect(FITS)
}

/// [`ipv4_udp`] in an Ethernet frame from `src_mac` to `dst_mac`.
pub fn eth_ipv4_udp(
    dst_mac: [u8; 6],
    src_mac: [u8; 6],
    flow: &[u8; FLOW_KEY_LEN],
    ttl: u8,
    dport: u16,
    payload: &[u8],
) -> Vec<u8> {
    let eth = ethernet::Repr {
        dst: dst_mac,
        src: src_mac,
        ethertype: ethernet::ETHERTYPE_IPV4,
    };
    let (ip, u) = headers(flow, ttl, dport);
    dta_net::udp_frame(&eth, &ip, &u, payload).expect(FITS)
}

/// The INT-MD frame of `p` as the INT sink receives it: INT over UDP to `int_udp_port`, NPT 1
/// (the original destination port in the shim), the stack newest hop first, 16 payload bytes.
pub fn md_frame(p: &GenPacket, int_udp_port: u16) -> Vec<u8> {
    let (instructions, hop_ml) = instructions_of(p);
    let header = MdHeader {
        discard: false,
        hop_count_exceeded: false,
        mtu_exceeded: false,
        hop_ml,
        remaining_hop_count: 8u8.saturating_sub(p.hops.len() as u8),
        instructions,
        domain_id: 0,
        ds_instructions: 0,
        ds_flags: 0,
    };
    let hops = hop_metadata(p);
    let mut int = vec![0u8; 16 + 4 * usize::from(hop_ml) * hops.len() + 16];
    let dport = u16::from_be_bytes([p.flow[10], p.flow[11]]);
    let n = emit_md(1, dport, &header, &hops, &mut int).expect("valid INT-MD");
    int.truncate(n);
    int.extend_from_slice(&[0xab; 16]);
    let ttl = 64 - p.hops.len() as u8;
    eth_ipv4_udp(
        [2, 0, 0, 0, 0, 2],
        [2, 0, 0, 0, 0, 1],
        &p.flow,
        ttl,
        int_udp_port,
        &int,
    )
}

/// The DSCP an INT v1.0 source marks packets with in [`md_frame_v1`] (INT v1.0 over TCP/UDP
/// is detected by a DSCP value; the packet keeps its own ports). A sink reading them is
/// configured with `int_dscp = V1_DSCP`.
pub const V1_DSCP: u8 = 0x17;

/// The INT v1.0 INT-MD frame of `p` ([INT v1.0 §4.6.1, §4.7]): IPv4/UDP with the flow's own
/// ports and DSCP [`V1_DSCP`], the v1.0 shim (the original DSCP 0 in its last byte), the 8-byte
/// header and the stack newest hop first, the same metadata as [`md_frame`], 16 payload bytes.
pub fn md_frame_v1(p: &GenPacket) -> Vec<u8> {
    let (instructions, hop_ml) = instructions_of(p);
    let header = MdHeader {
        hop_ml,
        remaining_hop_count: 8u8.saturating_sub(p.hops.len() as u8),
        instructions,
        ..MdHeader::default()
    };
    let hops = hop_metadata(p);
    let mut int = vec![0u8; 12 + 4 * usize::from(hop_ml) * hops.len() + 16];
    let n = emit_md_as(IntVersion::V1, 0, 0, &header, &hops, &mut int).expect("valid INT-MD");
    int.truncate(n);
    int.extend_from_slice(&[0xab; 16]);
    let dport = u16::from_be_bytes([p.flow[10], p.flow[11]]);
    let (mut ip, u) = headers(&p.flow, 64 - p.hops.len() as u8, dport);
    ip.dscp_ecn = V1_DSCP << 2;
    let eth = ethernet::Repr {
        dst: [2, 0, 0, 0, 0, 2],
        src: [2, 0, 0, 0, 0, 1],
        ethertype: ethernet::ETHERTYPE_IPV4,
    };
    dta_net::udp_frame(&eth, &ip, &u, &int).expect(FITS)
}

/// A telemetry report v1.0 (NProto 0: the frame follows the 16-byte header) from switch
/// `switch_id` carrying `frame`.
pub fn report_v1(switch_id: u32, seq: u32, frame: &[u8]) -> Vec<u8> {
    let r = LegacyReport {
        version: 1,
        length: 4,
        next_proto: 0,
        rep_md_bits: 0,
        dropped: false,
        congested_queue: false,
        tracked_flow: true,
        hw_id: 0,
        switch_id: Some(switch_id),
        sequence: seq,
        ingress_timestamp: 0,
        sub: LegacySubHeader::None,
        inner: frame,
    };
    let mut buf = vec![0u8; r.buffer_len()];
    r.emit(&mut buf).expect("sized");
    buf
}

/// What a generated hop reports: its latency, queue 0's occupancy and its egress utilisation.
fn baseline_of(h: &HopTruth) -> dta_int_wire::Baseline {
    dta_int_wire::Baseline {
        hop_latency: Some(h.latency),
        queue_id: Some(0),
        queue_occupancy: Some(h.queue),
        egress_tx_util: Some(h.util),
        // Ports reported: the ingress port is not modelled (0).
        l1_ingress_port: h.egress_port.map(|_| 0),
        l1_egress_port: h.egress_port,
        ..dta_int_wire::Baseline::default()
    }
}

/// `p`'s hops as INT metadata, newest first (as a stack carries them).
fn hop_metadata(p: &GenPacket) -> Vec<HopMetadata<'static>> {
    p.hops
        .iter()
        .rev()
        .map(|h| HopMetadata {
            node_id: Some(h.node_id),
            baseline: baseline_of(h),
            ..HopMetadata::default()
        })
        .collect()
}

/// A telemetry report v2.0 from sink switch `node_id` carrying `frame` (InType 3, RepType 0).
pub fn stacked_report(node_id: u32, seq: u32, frame: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; 64 + frame.len()];
    let mut b = ReportBuilder::new(
        &mut buf,
        &GroupHeader {
            hw_id: 0,
            sequence: seq & 0x3f_ffff,
            node_id,
        },
    )
    .expect("room");
    b.push(&IndividualReport {
        rep_type: 0,
        in_type: 3,
        report_length: 0xFF,
        md_length: 0,
        dropped: false,
        congested_queue: false,
        tracked_flow: true,
        intermediate: false,
        main: None,
        inner: frame,
    })
    .expect("valid report");
    let n = b.finish().expect("one report");
    buf.truncate(n);
    buf
}

/// The postcard of hop `hop` of `p` (INT-XD/MX: each hop reports its own metadata): a telemetry
/// report v2.0 from that hop's node, RepType 1 with hop latency, queue and egress utilisation,
/// the inner IPv4 packet with TTL `initial_ttl - hop`. With `dropped`, a drop report instead
/// (D flag, RepMdBits bit 15, `drop_reason`).
pub fn postcard_report(
    p: &GenPacket,
    hop: usize,
    seq: u32,
    initial_ttl: u8,
    drop_reason: Option<u8>,
) -> Vec<u8> {
    let h = p.hops[hop];
    let dport = u16::from_be_bytes([p.flow[10], p.flow[11]]);
    let inner = ipv4_udp(&p.flow, initial_ttl - hop as u8, dport, &[0xcd; 8]);
    let mut bits = instr::HOP_LATENCY | instr::QUEUE | instr::TX_UTIL;
    if drop_reason.is_some() {
        bits |= 0x0001;
    }
    let metadata = ReportMetadata {
        drop_queue_id: drop_reason.map(|_| 0),
        drop_reason,
        baseline: baseline_of(&h),
    };
    let mut buf = vec![0u8; 128 + inner.len()];
    let mut b = ReportBuilder::new(
        &mut buf,
        &GroupHeader {
            hw_id: 0,
            sequence: seq & 0x3f_ffff,
            node_id: h.node_id,
        },
    )
    .expect("room");
    b.push(&IndividualReport {
        rep_type: 1,
        in_type: 4,
        report_length: 0xFF,
        md_length: 0,
        dropped: drop_reason.is_some(),
        congested_queue: false,
        tracked_flow: false,
        intermediate: hop + 1 < p.hops.len(),
        main: Some(IntReportMain {
            rep_md_bits: bits,
            domain_id: 0,
            ds_md_bits: 0,
            ds_md_status: 0,
            metadata,
            ds_metadata: &[],
        }),
        inner: &inner,
    })
    .expect("valid report");
    let n = b.finish().expect("one report");
    buf.truncate(n);
    buf
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The generated IPv4/UDP packet, checked against bytes written by hand: no DF,
    /// identification 0, UDP checksum 0, addresses and source port from the flow key.
    #[test]
    fn ipv4_udp_bytes_by_hand() {
        let flow = [10, 0, 0, 1, 10, 1, 2, 3, 0x9c, 0x40, 0, 80, 17];
        // Header sum 4500+001d+0000+0000+3c11+0a00+0001+0a01+0203 = 0x9733, checksum 0x68cc.
        let want = [
            0x45, 0, 0, 0x1d, 0, 0, 0, 0, 60, 17, 0x68, 0xcc, 10, 0, 0, 1, 10, 1, 2, 3, 0x9c, 0x40,
            0x13, 0x88, 0, 9, 0, 0, 0xab,
        ];
        assert_eq!(ipv4_udp(&flow, 60, 5000, &[0xab]), want);
        let f = eth_ipv4_udp(
            [2, 0, 0, 0, 0, 2],
            [2, 0, 0, 0, 0, 1],
            &flow,
            60,
            5000,
            &[0xab],
        );
        assert_eq!(&f[..14], &[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0]);
        assert_eq!(&f[14..], &want);
    }
}
