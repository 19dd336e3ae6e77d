//! Regenerates `spec/vectors/int.json`: `cargo run -p dta-int-wire --example gen_int_vectors [--
//! OUT_DIR]`. Frames and reports are built with the emitters (and one INT-MD packet is written
//! out by hand from the INT v2.1 spec example); the expected fields are the parser's JSON, which
//! `tests/int_vectors.rs` checks against independently written assertions as well as byte-exact
//! re-emission. Commit the JSON only after reviewing the diff.

use std::path::PathBuf;

use dta_int_wire::report::{IN_TYPE_ETHERNET, IN_TYPE_IPV4, IN_TYPE_TLV, REP_MD_DROP};
use dta_int_wire::{
    emit_md, emit_mx, instr, GroupHeader, HopMetadata, IndividualReport, IntDetect, IntReportMain,
    MdHeader, MxHeader, ReportBuilder, ReportMetadata,
};
use serde_json::{json, Value};

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// The detection every vector is decoded with.
pub const UDP_PORT: u16 = 5000;
const DSCP: (u8, u8) = (0x17, 0x3f);
const MARKER: u64 = 0x1234_5678_9abc_def0;

fn detect() -> IntDetect {
    IntDetect {
        udp_port: Some(UDP_PORT),
        dscp: Some(DSCP),
        probe_marker: Some(MARKER),
    }
}

/// Ethernet + IPv4 (no checksum computed: parsers here do not check it) + L4 + `l4_payload`.
fn frame_v4(dscp: u8, proto: u8, l4: &[u8], l4_payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00];
    let total = 20 + l4.len() + l4_payload.len();
    f.extend_from_slice(&[0x45, dscp << 2]);
    f.extend_from_slice(&(total as u16).to_be_bytes());
    f.extend_from_slice(&[0, 1, 0x40, 0, 64, proto, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    f.extend_from_slice(l4);
    f.extend_from_slice(l4_payload);
    f
}

fn frame_v6(proto: u8, l4: &[u8], l4_payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x86, 0xdd];
    let n = (l4.len() + l4_payload.len()) as u16;
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&n.to_be_bytes());
    f.extend_from_slice(&[proto, 64]);
    let mut a = [0u8; 16];
    a[0] = 0x20;
    a[1] = 0x01;
    a[15] = 1;
    f.extend_from_slice(&a);
    a[15] = 2;
    f.extend_from_slice(&a);
    f.extend_from_slice(l4);
    f.extend_from_slice(l4_payload);
    f
}

/// Append `n` zero bytes to an IPv4 frame, keeping its total length consistent.
fn grow(f: &mut Vec<u8>, n: usize) {
    f.resize(f.len() + n, 0);
    let total = u16::from_be_bytes([f[16], f[17]]) + n as u16;
    f[16..18].copy_from_slice(&total.to_be_bytes());
}

fn udp(sport: u16, dport: u16, payload_len: usize) -> Vec<u8> {
    let mut u = Vec::new();
    u.extend_from_slice(&sport.to_be_bytes());
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&((8 + payload_len) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u
}

fn tcp(sport: u16, dport: u16) -> Vec<u8> {
    let mut t = Vec::new();
    t.extend_from_slice(&sport.to_be_bytes());
    t.extend_from_slice(&dport.to_be_bytes());
    t.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
    t
}

fn hop(i: u32) -> HopMetadata<'static> {
    HopMetadata {
        node_id: Some(100 + i),
        checksum_complement: Some(0xabcd_0000 + i),
        domain_specific: &[],
        baseline: dta_int_wire::Baseline {
            l1_ingress_port: Some(i as u16 + 1),
            l1_egress_port: Some(i as u16 + 2),
            hop_latency: Some(1000 * (i + 1)),
            queue_id: Some(i as u8),
            queue_occupancy: Some(0x10 * (i + 1)),
            ingress_timestamp: Some(0x0001_0000_0000 + u64::from(i)),
            egress_timestamp: Some(0x0001_0000_1000 + u64::from(i)),
            l2_ingress_port: Some(0x1000 + i),
            l2_egress_port: Some(0x2000 + i),
            egress_tx_util: Some(50 + i),
            buffer_id: Some(1),
            buffer_occupancy: Some(0x200 + i),
        },
    }
}

fn md_block(bitmap: u16, hops: &[HopMetadata<'_>], rhc: u8, npt: u8, next: u16) -> Vec<u8> {
    let hop_ml = dta_int_wire::baseline_words(bitmap) as u8
        + (hops.first().map_or(0, |h| h.domain_specific.len() / 4) as u8);
    let h = MdHeader {
        hop_ml,
        remaining_hop_count: rhc,
        instructions: bitmap,
        ..MdHeader::default()
    };
    let mut b = vec![0u8; 1024];
    let n = emit_md(npt, next, &h, hops, &mut b).unwrap();
    b.truncate(n);
    b
}

fn udp_int_frame(block: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut p = block.to_vec();
    p.extend_from_slice(payload);
    frame_v4(0, 17, &udp(40000, UDP_PORT, p.len()), &p)
}

fn vector(name: &str, kind: &str, bytes: &[u8], note: &str) -> Value {
    let d = detect();
    let expect = match kind {
        "frame" => dta_int_wire::int_to_json(&dta_int_wire::find_int(bytes, &d).unwrap().unwrap()),
        _ => dta_int_wire::report_to_json(&dta_int_wire::parse_report(bytes).unwrap(), &d),
    };
    json!({"name": name, "kind": kind, "note": note, "hex": hex(bytes), "expect": expect})
}

fn invalid(name: &str, kind: &str, bytes: &[u8], note: &str) -> Value {
    let d = detect();
    let err = match kind {
        "frame" => dta_int_wire::find_int(bytes, &d).map(|_| ()).unwrap_err(),
        _ => dta_int_wire::parse_report(bytes).map(|_| ()).unwrap_err(),
    };
    json!({"name": name, "kind": kind, "note": note, "hex": hex(bytes), "error": err.reason()})
}

fn main() {
    let out = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../spec/vectors"));
    let mut v = Vec::new();
    let payload = b"payload!";

    // INT-MD over UDP (NPT 1, original dport 4791 in the shim), 1..=5 hops, various bitmaps.
    let bitmaps: [(u16, &str); 5] = [
        (instr::NODE_ID, "node id only"),
        (instr::NODE_ID | instr::HOP_LATENCY, "node id + hop latency"),
        (
            instr::NODE_ID | instr::L1_PORTS | instr::HOP_LATENCY | instr::QUEUE,
            "the paper-003 set: node id, L1 ports, hop latency, queue",
        ),
        (
            instr::NODE_ID | instr::INGRESS_TS | instr::EGRESS_TS | instr::TX_UTIL,
            "8-byte timestamps and tx utilisation",
        ),
        (0xff81, "every baseline bit and the checksum complement"),
    ];
    for (n, (bitmap, what)) in (1..=5u32).zip(bitmaps) {
        let hops: Vec<_> = (0..n).map(|i| hop(n - 1 - i)).collect();
        let block = md_block(bitmap, &hops, 8 - n as u8, 1, 4791);
        v.push(vector(
            &format!("int_md_udp_{n}hop"),
            "frame",
            &udp_int_frame(&block, payload),
            &format!("INT-MD over UDP, NPT 1, {n} hops, {what}"),
        ));
    }
    // Not-available values and a reserved bit (9) filled with 0xFF by the hop.
    let mut na = hop(0);
    na.baseline.hop_latency = None;
    na.baseline.queue_id = None;
    na.baseline.queue_occupancy = None;
    let block = md_block(
        instr::NODE_ID | instr::HOP_LATENCY | instr::QUEUE | 0x0040,
        &[na, hop(1)],
        3,
        1,
        4791,
    );
    v.push(vector(
        "int_md_udp_not_available",
        "frame",
        &udp_int_frame(&block, payload),
        "hop 0 reports hop latency and queue as all-ones (null); bit 9 reserved is skipped",
    ));
    // Domain specific metadata: Hop ML one word above the baseline.
    let ds = [0xde, 0xad, 0xbe, 0xef];
    let mut h0 = hop(0);
    h0.domain_specific = &ds;
    let block = md_block(instr::NODE_ID | instr::CHECKSUM, &[h0], 4, 1, 4791);
    v.push(vector(
        "int_md_udp_domain_specific",
        "frame",
        &udp_int_frame(&block, payload),
        "Hop ML 3: node id, one DS word, then the checksum complement last",
    ));

    // The INT v2.1 spec example (INT over TCP, DSCP 0x17), written out by hand: Hop ML 2
    // (switch id + queue id/occupancy), two hops pushed (switch 2 on top), remaining hop count
    // 6, then the TCP payload.
    let int_hand = unhex(
        "10 07 0000
         20 00 02 06  9000 0000  0000 0000
         00000002 00000020
         00000001 00000010",
    );
    let f = frame_v4(0x17, 6, &tcp(1234, 80), &[&int_hand[..], payload].concat());
    v.push(vector(
        "int_md_tcp_spec_example",
        "frame",
        &f,
        "INT v2.1 example: TCP, DSCP 0x17, shim len 7, two hops of switch id + queue",
    ));
    // INT-MD over TCP by DSCP with 3 hops of the [INT-NIC] bitmap.
    let hops: Vec<_> = (0..3).map(hop).collect();
    let block = md_block(
        instr::NODE_ID | instr::L1_PORTS | instr::HOP_LATENCY | instr::QUEUE,
        &hops,
        5,
        0,
        0x17 << 2,
    );
    let f = frame_v4(0x17, 6, &tcp(5555, 443), &[&block[..], payload].concat());
    v.push(vector(
        "int_md_tcp_dscp_3hop",
        "frame",
        &f,
        "NPT 0 with the original DSCP in the shim",
    ));
    // NPT 2: a UDP header inserted before the original TCP header; the flow takes proto 6 and
    // the inner TCP ports.
    let block = md_block(instr::NODE_ID, &[hop(0), hop(1)], 6, 2, 6);
    let mut p = block.clone();
    p.extend_from_slice(&tcp(7777, 22));
    let f = frame_v4(0, 17, &udp(40001, UDP_PORT, p.len()), &p);
    v.push(vector(
        "int_md_udp_npt2",
        "frame",
        &f,
        "NPT 2: original IP proto 6 in the shim",
    ));
    // IPv6.
    let block = md_block(
        instr::NODE_ID | instr::HOP_LATENCY,
        &[hop(0), hop(1)],
        6,
        1,
        53,
    );
    let p = [&block[..], payload].concat();
    let f = frame_v6(17, &udp(40002, UDP_PORT, p.len()), &p);
    v.push(vector(
        "int_md_ipv6_udp",
        "frame",
        &f,
        "INT-MD over UDP over IPv6",
    ));
    // Probe marker over UDP on an unrelated port.
    let block = md_block(instr::NODE_ID, &[hop(3)], 7, 0, 0);
    let p = [&MARKER.to_be_bytes()[..], &block[..], payload].concat();
    let f = frame_v4(0, 17, &udp(40003, 9999, p.len()), &p);
    v.push(vector(
        "int_md_probe_marker",
        "frame",
        &f,
        "64-bit probe marker before the shim",
    ));
    // INT-MX.
    let mx = MxHeader {
        instructions: instr::NODE_ID | instr::HOP_LATENCY | instr::QUEUE,
        domain_id: 7,
        ..MxHeader::default()
    };
    let mut b = [0u8; 16];
    emit_mx(1, 4791, &mx, &mut b).unwrap();
    v.push(vector(
        "int_mx_udp",
        "frame",
        &udp_int_frame(&b, payload),
        "INT-MX: no stack",
    ));

    // Telemetry reports v2.0.
    let inner_frame = udp_int_frame(
        &md_block(
            instr::NODE_ID | instr::HOP_LATENCY,
            &[hop(1), hop(0)],
            6,
            1,
            4791,
        ),
        b"data!!",
    );
    // Frames are 2 mod 4 bytes long without the payload; "data!!" makes the frame whole words.
    let main = IntReportMain {
        rep_md_bits: instr::L1_PORTS | instr::QUEUE | REP_MD_DROP,
        domain_id: 0,
        ds_md_bits: 0,
        ds_md_status: 0,
        metadata: ReportMetadata {
            drop_queue_id: Some(2),
            drop_reason: Some(71),
            baseline: dta_int_wire::Baseline {
                l1_ingress_port: Some(3),
                l1_egress_port: Some(4),
                queue_id: Some(2),
                queue_occupancy: Some(0x400),
                ..dta_int_wire::Baseline::default()
            },
        },
        ds_metadata: &[],
    };
    let group = GroupHeader {
        hw_id: 5,
        sequence: 0x2_0001,
        node_id: 99,
    };
    let one = IndividualReport {
        rep_type: 1,
        in_type: IN_TYPE_ETHERNET,
        dropped: true,
        tracked_flow: true,
        main: Some(main),
        inner: &inner_frame,
        ..IndividualReport::default()
    };
    let mut buf = vec![0u8; 2048];
    let mut rb = ReportBuilder::new(&mut buf, &group).unwrap();
    rb.push(&one).unwrap();
    let n = rb.finish().unwrap();
    v.push(vector(
        "report_v2_one",
        "report",
        &buf[..n],
        "one INT report, Ethernet inner with INT-MD",
    ));
    // Two reports: the second is an IPv4 packet wrapped in a TLV.
    // The IP packet padded to whole words (the IPv4 total length bounds the packet).
    let ip_inner = &[&inner_frame[14..], &[0u8, 0][..]].concat()[..];
    let mut tlv = vec![0x20, (ip_inner.len() / 4) as u8, 0, 0];
    tlv.extend_from_slice(ip_inner);
    let two = IndividualReport {
        rep_type: 1,
        in_type: IN_TYPE_TLV,
        congested_queue: true,
        intermediate: true,
        main: Some(IntReportMain {
            rep_md_bits: instr::HOP_LATENCY | instr::INGRESS_TS,
            metadata: ReportMetadata {
                baseline: dta_int_wire::Baseline {
                    hop_latency: Some(777),
                    ingress_timestamp: None,
                    ..dta_int_wire::Baseline::default()
                },
                ..ReportMetadata::default()
            },
            ..IntReportMain::default()
        }),
        inner: &tlv,
        ..IndividualReport::default()
    };
    let mut rb = ReportBuilder::new(&mut buf, &group).unwrap();
    rb.push(&one).unwrap();
    rb.push(&two).unwrap();
    let n = rb.finish().unwrap();
    v.push(vector(
        "report_v2_two",
        "report",
        &buf[..n],
        "two reports; the second has a TLV",
    ));
    // Report Length 0xFF with an inner IPv4 packet that is not a whole number of words.
    let odd = &inner_frame[14..inner_frame.len() - 1];
    let ff = IndividualReport {
        rep_type: 1,
        in_type: IN_TYPE_IPV4,
        report_length: 0xff,
        main: Some(IntReportMain {
            rep_md_bits: instr::HOP_LATENCY,
            metadata: ReportMetadata {
                baseline: dta_int_wire::Baseline {
                    hop_latency: Some(5),
                    ..dta_int_wire::Baseline::default()
                },
                ..ReportMetadata::default()
            },
            ..IntReportMain::default()
        }),
        inner: odd,
        ..IndividualReport::default()
    };
    let mut rb = ReportBuilder::new(&mut buf, &group).unwrap();
    rb.push(&ff).unwrap();
    let n = rb.finish().unwrap();
    v.push(vector(
        "report_v2_length_ff",
        "report",
        &buf[..n],
        "Report Length 0xFF: to the end",
    ));

    // v0.5: drop report (NProto 1), hand written.
    let v05 = [
        &unhex("01 a0 00 05  00000007  0000beef  00000063 0003 0004 02 2a 0000")[..],
        &inner_frame,
    ]
    .concat();
    v.push(vector(
        "report_v05_drop",
        "report",
        &v05,
        "v0.5 drop report, D and F set, hw_id 5",
    ));
    // v1.0: switch-local report (NProto 2), hand written: Ver 1, Len 8, NProto 2, D Q F 0 1 0.
    let v10 = [
        &unhex("18 40 00 83  00000063  00000008  00001000  00000063 0001 0002 03 000400 00002000")
            [..],
        &inner_frame,
    ]
    .concat();
    v.push(vector(
        "report_v10_local",
        "report",
        &v10,
        "v1.0 switch-local report, Q set, hw_id 3",
    ));

    // Invalid.
    let ok = udp_int_frame(
        &md_block(instr::NODE_ID, &[hop(0), hop(1)], 6, 1, 4791),
        b"",
    );
    let shim = 14 + 20 + 8;
    let mut bad = ok.clone();
    bad[shim] = 0x04; // type 0
    v.push(invalid("int_bad_type", "frame", &bad, "shim type 0"));
    let mut bad = ok.clone();
    bad[shim] = 0x1c; // NPT 3
    v.push(invalid("int_bad_npt", "frame", &bad, "NPT 3"));
    let mut bad = ok.clone();
    bad[shim + 4] = 0x10; // version 1
    v.push(invalid(
        "int_bad_version",
        "frame",
        &bad,
        "INT-MD version 1",
    ));
    let mut bad = ok.clone();
    bad[shim + 6] = 0; // hop ML 0 with a stack
    v.push(invalid(
        "int_hop_ml_zero",
        "frame",
        &bad,
        "Hop ML 0 with two hops of stack",
    ));
    let mut bad = ok.clone();
    bad[shim + 8] = 0xc0; // bitmap needs 2 words, Hop ML is 1
    v.push(invalid(
        "int_hop_ml_too_small",
        "frame",
        &bad,
        "bitmap node id + L1 ports, Hop ML 1",
    ));
    let mut bad = ok.clone();
    bad[shim + 6] = 2; // 2 hops of 1 word read as Hop ML 2 -> one hop; set length 6 -> 3 words
    bad[shim + 1] = 6;
    grow(&mut bad, 4);
    v.push(invalid(
        "int_stack_not_whole_hops",
        "frame",
        &bad,
        "3 stack words with Hop ML 2",
    ));
    let mut bad = ok.clone();
    bad[shim + 1] = 2;
    v.push(invalid(
        "int_length_below_header",
        "frame",
        &bad,
        "shim Length 2 < 3",
    ));
    v.push(invalid(
        "int_stack_cut",
        "frame",
        &ok[..ok.len() - 2],
        "frame ends inside the stack",
    ));
    let mut bad = udp_int_frame(&b, b"");
    bad[shim + 1] = 4;
    grow(&mut bad, 4);
    v.push(invalid(
        "int_mx_with_stack",
        "frame",
        &bad,
        "INT-MX with Length 4",
    ));
    v.push(invalid(
        "ipv4_ihl_4",
        "frame",
        &{
            let mut f = ok.clone();
            f[14] = 0x44;
            f
        },
        "IPv4 IHL 4",
    ));
    v.push(invalid(
        "report_version_3",
        "report",
        &unhex("30000000 00000000"),
        "version 3",
    ));
    v.push(invalid(
        "report_v2_no_reports",
        "report",
        &unhex("20000001 00000063"),
        "group only",
    ));
    v.push(invalid(
        "report_v2_md_too_short",
        "report",
        &unhex("20000001 00000063  10 03 01 00  5000 0000 0000 0000 00000001 00000002"),
        "RepMdBits L1 ports + queue need 2 words, MD Length 1",
    ));
    v.push(invalid(
        "report_v2_length_short_of_md",
        "report",
        &unhex("20000001 00000063  10 02 01 00  2000 0000 0000 0000"),
        "Report Length 2 but MD Length 1 needs 3",
    ));
    v.push(invalid(
        "report_v2_cut",
        "report",
        &unhex("20000001 00000063  10 05 01 00  2000 0000 0000 0000 00000001"),
        "Report Length 5 past the end",
    ));
    v.push(invalid(
        "report_v2_tlv_overrun",
        "report",
        &unhex("20000001 00000063  11 04 01 00  2000 0000 0000 0000 00000001 20 05 0000"),
        "TLV Length 5 past its report",
    ));
    v.push(invalid(
        "report_v10_nproto_5",
        "report",
        &unhex("18a00000 00000001 00000002 00000003"),
        "v1.0 NProto 5",
    ));
    v.push(invalid(
        "report_v05_cut",
        "report",
        &unhex("00000000 0000"),
        "v0.5 header cut",
    ));

    let doc = json!({
        "detect": {"udp_port": UDP_PORT, "dscp": [DSCP.0, DSCP.1], "probe_marker": format!("{MARKER:016x}")},
        "vectors": v,
    });
    let path = out.join("int.json");
    std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap() + "\n").unwrap();
    println!("wrote {}", path.display());
}
