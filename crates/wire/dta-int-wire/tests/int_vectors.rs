//! `spec/vectors/int.json` is the truth for INT and telemetry reports: every vector must decode
//! to exactly its expected fields, re-emit byte for byte (INT blocks, v2.0 reports), and every
//! invalid vector must fail with its reason. Independent assertions pin the fields of the
//! hand-written vectors (the INT v2.1 spec example, v0.5 and v1.0 reports).
#![cfg(feature = "json")]

use dta_int_wire::{
    find_int, parse_report, Error, IntDetect, IntHeader, IntRepr, LegacySubHeader, ReportBuilder,
    TelemetryReport,
};
use serde_json::Value;

const INT: &str = include_str!("../../../../spec/vectors/int.json");
const IND_INT: &str = include_str!("../../../../spec/vectors/independent/int.json");

fn doc() -> Value {
    serde_json::from_str(INT).unwrap()
}

fn detect(d: &Value) -> IntDetect {
    let t = &d["detect"];
    IntDetect {
        udp_port: Some(t["udp_port"].as_u64().unwrap() as u16),
        dscp: Some((
            t["dscp"][0].as_u64().unwrap() as u8,
            t["dscp"][1].as_u64().unwrap() as u8,
        )),
        probe_marker: Some(u64::from_str_radix(t["probe_marker"].as_str().unwrap(), 16).unwrap()),
    }
}

fn vector(d: &Value, name: &str) -> Vec<u8> {
    let v = d["vectors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("vector {name}"));
    hex::decode(v["hex"].as_str().unwrap()).unwrap()
}

/// Where `inner` sits in `outer` (it is a sub-slice).
fn offset_in(outer: &[u8], inner: &[u8]) -> usize {
    inner.as_ptr() as usize - outer.as_ptr() as usize
}

fn int_block<'a>(frame: &'a [u8], r: &IntRepr<'_>) -> &'a [u8] {
    // The stack (or, for MX, the end of the frame minus the payload) locates the block.
    let n = r.buffer_len();
    let start = match r.header {
        IntHeader::Md { stack, .. } => {
            offset_in(frame, stack.as_bytes()) - 4 - r.shim.version.header_len()
        }
        _ => (0..frame.len() - n + 1)
            .find(|&i| IntRepr::parse(&frame[i..]).ok().map(|x| x.shim) == Some(r.shim))
            .unwrap(),
    };
    &frame[start..start + n]
}

/// Every valid vector of an INT vector file decodes to its expected fields and re-emits its
/// bytes; returns how many (frames, reports) were checked.
fn check_valid_vectors(d: &Value) -> (usize, usize) {
    let det = detect(d);
    let mut counted = (0, 0);
    for v in d["vectors"].as_array().unwrap() {
        if v.get("error").is_some() {
            continue;
        }
        let name = v["name"].as_str().unwrap();
        let bytes = hex::decode(v["hex"].as_str().unwrap()).unwrap();
        match v["kind"].as_str().unwrap() {
            "frame" => {
                let r = find_int(&bytes, &det).unwrap().expect(name);
                assert_eq!(dta_int_wire::int_to_json(&r), v["expect"], "{name}");
                let block = int_block(&bytes, &r);
                let mut out = vec![0u8; r.buffer_len()];
                assert_eq!(r.emit(&mut out), Ok(block.len()), "{name}");
                assert_eq!(out, block, "{name}: re-emitted INT block");
                counted.0 += 1;
            }
            "report" => {
                let r = parse_report(&bytes).expect(name);
                assert_eq!(
                    dta_int_wire::report_to_json(&r, &det),
                    v["expect"],
                    "{name}"
                );
                let mut out = vec![0u8; bytes.len()];
                match r {
                    TelemetryReport::V2(v2) => {
                        let mut b = ReportBuilder::new(&mut out, &v2.group).unwrap();
                        for i in v2.iter() {
                            b.push(&i).unwrap();
                        }
                        let n = b.finish().unwrap();
                        assert_eq!(&out[..n], &bytes[..], "{name}: re-emitted report");
                    }
                    TelemetryReport::Legacy(l) => {
                        assert_eq!(l.emit(&mut out), Ok(bytes.len()), "{name}");
                        assert_eq!(out, bytes, "{name}: re-emitted v0.5/v1.0 report");
                    }
                }
                counted.1 += 1;
            }
            k => panic!("kind {k}"),
        }
    }
    counted
}

#[test]
fn every_valid_vector_decodes_to_its_fields_and_re_emits() {
    assert_eq!(check_valid_vectors(&doc()), (13, 5));
}

/// The INT v2.1 frames and Telemetry Report v2.0 payloads built from the specifications by
/// `spec/tools/independent_vectors.py`, not by these emitters.
#[test]
fn independent_vectors_decode_to_their_fields_and_re_emit() {
    let d: Value = serde_json::from_str(IND_INT).unwrap();
    assert_eq!(check_valid_vectors(&d), (5, 4));
}

#[test]
fn every_invalid_vector_fails_with_its_reason() {
    let d = doc();
    let det = detect(&d);
    let mut n = 0;
    for v in d["vectors"].as_array().unwrap() {
        let Some(reason) = v.get("error") else {
            continue;
        };
        let name = v["name"].as_str().unwrap();
        let bytes = hex::decode(v["hex"].as_str().unwrap()).unwrap();
        let err = match v["kind"].as_str().unwrap() {
            "frame" => find_int(&bytes, &det).map(|_| ()).unwrap_err(),
            _ => parse_report(&bytes).map(|_| ()).unwrap_err(),
        };
        assert_eq!(
            Some(err),
            Error::from_reason(reason.as_str().unwrap()),
            "{name}"
        );
        n += 1;
    }
    assert_eq!(n, 18);
}

#[test]
fn spec_example_fields() {
    // INT v2.1 §6 example: Hop ML 2 (switch id + queue), two hops, switch 2 on top.
    let d = doc();
    let f = vector(&d, "int_md_tcp_spec_example");
    let r = find_int(&f, &detect(&d)).unwrap().unwrap();
    assert_eq!(r.shim.int_type, dta_int_wire::IntType::Md);
    assert_eq!(r.shim.length, 7);
    assert_eq!(r.shim.npt, 0);
    let IntHeader::Md { header, stack } = r.header else {
        panic!("MD expected")
    };
    assert_eq!(header.hop_ml, 2);
    assert_eq!(header.remaining_hop_count, 6);
    assert_eq!(
        header.instructions,
        dta_int_wire::instr::NODE_ID | dta_int_wire::instr::QUEUE
    );
    assert_eq!(stack.len(), 2);
    let hops: Vec<_> = stack.iter().collect();
    assert_eq!(hops[0].node_id, Some(2));
    assert_eq!(hops[0].baseline.queue_occupancy, Some(0x20));
    assert_eq!(hops[1].node_id, Some(1));
    assert_eq!(hops[1].baseline.queue_id, Some(0));
    assert_eq!(hops[1].baseline.hop_latency, None);
    let flow = r.flow.unwrap();
    assert_eq!(
        flow.key13().unwrap(),
        [10, 0, 0, 1, 10, 0, 0, 2, 0x04, 0xd2, 0x00, 0x50, 6]
    );
}

#[test]
fn five_hops_all_bits_and_not_available() {
    let d = doc();
    let det = detect(&d);
    let f = vector(&d, "int_md_udp_5hop");
    let r = find_int(&f, &det).unwrap().unwrap();
    let s = r.stack().unwrap();
    assert_eq!(s.len(), 5);
    let h = s.get(0).unwrap();
    // Newest first: the generator pushed hop(4) last.
    assert_eq!(h.node_id, Some(104));
    assert_eq!(h.baseline.ingress_timestamp, Some(0x0001_0000_0004));
    assert_eq!(h.baseline.l2_egress_port, Some(0x2004));
    assert_eq!(h.baseline.buffer_occupancy, Some(0x204));
    assert_eq!(h.checksum_complement, Some(0xabcd_0004));
    assert_eq!(s.get(4).unwrap().node_id, Some(100));
    assert!(s.get(5).is_none());
    assert_eq!(
        r.flow.unwrap().dst_port,
        4791,
        "NPT 1 restores the original port"
    );

    let f = vector(&d, "int_md_udp_not_available");
    let s = find_int(&f, &det).unwrap().unwrap().stack().unwrap();
    let h = s.get(0).unwrap();
    assert_eq!(
        (
            h.baseline.hop_latency,
            h.baseline.queue_id,
            h.baseline.queue_occupancy
        ),
        (None, None, None)
    );
    assert_eq!(h.node_id, Some(100));
    assert_eq!(s.get(1).unwrap().baseline.hop_latency, Some(2000));

    let f = vector(&d, "int_md_udp_domain_specific");
    let h = find_int(&f, &det)
        .unwrap()
        .unwrap()
        .stack()
        .unwrap()
        .get(0)
        .unwrap();
    assert_eq!(h.domain_specific, &[0xde, 0xad, 0xbe, 0xef]);
    assert_eq!(h.checksum_complement, Some(0xabcd_0000));

    let f = vector(&d, "int_md_udp_npt2");
    let flow = find_int(&f, &det).unwrap().unwrap().flow.unwrap();
    assert_eq!((flow.protocol, flow.src_port, flow.dst_port), (6, 7777, 22));

    let f = vector(&d, "int_mx_udp");
    let r = find_int(&f, &det).unwrap().unwrap();
    assert!(matches!(r.header, IntHeader::Mx(m) if m.domain_id == 7));
}

#[test]
fn reports_fields() {
    let d = doc();
    let det = detect(&d);
    let b_r_464 = vector(&d, "report_v2_two");
    let TelemetryReport::V2(r) = parse_report(&b_r_464).unwrap() else {
        panic!("v2")
    };
    assert_eq!(
        (r.group.hw_id, r.group.sequence, r.group.node_id),
        (5, 0x2_0001, 99)
    );
    assert_eq!(r.len(), 2);
    let reps: Vec<_> = r.iter().collect();
    assert!(reps[0].dropped && reps[0].tracked_flow && !reps[0].congested_queue);
    let m = reps[0].main.unwrap();
    assert_eq!(m.metadata.baseline.l1_egress_port, Some(4));
    assert_eq!(m.metadata.drop_reason, Some(71));
    assert_eq!(m.metadata.baseline.queue_occupancy, Some(0x400));
    assert!(reps[1].intermediate && reps[1].congested_queue);
    assert_eq!(
        reps[1].main.unwrap().metadata.baseline.ingress_timestamp,
        None
    );
    assert_eq!(reps[1].tlvs().count(), 1);
    for i in &reps {
        let inner = i.inner_int(&det).unwrap().unwrap();
        assert_eq!(inner.stack().unwrap().len(), 2);
    }

    let b_r_64 = vector(&d, "report_v2_length_ff");
    let TelemetryReport::V2(r) = parse_report(&b_r_64).unwrap() else {
        panic!("v2")
    };
    let i = r.iter().next().unwrap();
    assert_eq!(i.report_length, 0xff);
    assert_eq!(i.inner.len() % 4, 1, "to the end, not whole words");

    let b_l_343 = vector(&d, "report_v05_drop");
    let TelemetryReport::Legacy(l) = parse_report(&b_l_343).unwrap() else {
        panic!("legacy")
    };
    assert_eq!(
        (l.version, l.hw_id, l.sequence, l.ingress_timestamp),
        (0, 5, 7, 0xbeef)
    );
    assert!(l.dropped && !l.congested_queue && l.tracked_flow);
    assert_eq!(
        l.sub,
        LegacySubHeader::Drop {
            switch_id: 99,
            ingress_port: 3,
            egress_port: 4,
            queue_id: 2,
            drop_reason: 42
        }
    );
    assert!(l.inner_int(&det).unwrap().is_some());

    let b_l_315 = vector(&d, "report_v10_local");
    let TelemetryReport::Legacy(l) = parse_report(&b_l_315).unwrap() else {
        panic!("legacy")
    };
    assert_eq!(
        (l.version, l.length, l.hw_id, l.switch_id),
        (1, 8, 3, Some(99))
    );
    assert!(!l.dropped && l.congested_queue && !l.tracked_flow);
    assert!(matches!(
        l.sub,
        LegacySubHeader::Local {
            queue_occupancy: 0x400,
            egress_timestamp: 0x2000,
            ..
        }
    ));
}

#[test]
fn detection_rules_are_respected() {
    let d = doc();
    let f = vector(&d, "int_md_udp_2hop");
    // No rule: not INT.
    assert_eq!(find_int(&f, &IntDetect::default()), Ok(None));
    // Another port: not INT.
    assert_eq!(find_int(&f, &IntDetect::udp_port(5001)), Ok(None));
    assert!(find_int(&f, &IntDetect::udp_port(5000)).unwrap().is_some());
    // The TCP example is found by DSCP only; a single-bit mask also matches 0x17.
    let t = vector(&d, "int_md_tcp_spec_example");
    assert_eq!(find_int(&t, &IntDetect::udp_port(5000)), Ok(None));
    let bit = IntDetect {
        dscp: Some((0x10, 0x10)),
        ..IntDetect::default()
    };
    assert!(find_int(&t, &bit).unwrap().is_some());
    // Probe marker frames need the marker.
    let p = vector(&d, "int_md_probe_marker");
    let wrong = IntDetect {
        probe_marker: Some(1),
        ..IntDetect::default()
    };
    assert_eq!(find_int(&p, &wrong), Ok(None));
    // Not IP: not INT.
    let mut arp = f.clone();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    assert_eq!(find_int(&arp, &IntDetect::udp_port(5000)), Ok(None));
}

/// INT v1.0 ([INT v1.0 §4.6.1, §4.7]), from the independent vectors: the shim's Length counts
/// the shim, the header is 8 bytes, timestamps 4 bytes; each malformed field fails with its
/// reason.
#[test]
fn int_v1_fields_and_rejections() {
    let d: Value = serde_json::from_str(IND_INT).unwrap();
    let det = detect(&d);
    let frame = vector(&d, "ind_int_v1_md_5hop_all_bits");
    let r = find_int(&frame, &det).unwrap().unwrap();
    assert_eq!(r.shim.version, dta_int_wire::IntVersion::V1);
    let IntHeader::Md { header, stack } = r.header else {
        panic!("INT-MD")
    };
    // node, L1 ports, latency, queue, 2 timestamps, L2 ports (2 words), util, checksum.
    assert_eq!(header.hop_ml, 10);
    assert!(header.mtu_exceeded && !header.hop_count_exceeded && !header.discard);
    assert_eq!(stack.len(), 5);
    let newest = stack.get(0).unwrap();
    assert_eq!(newest.node_id, Some(0x1005));
    assert_eq!(newest.baseline.ingress_timestamp, Some(0x0304_0005));
    assert_eq!(newest.baseline.egress_timestamp, Some(0x0304_1005));
    assert_eq!(newest.baseline.l2_egress_port, Some(0x00BB_0005));
    assert_eq!(newest.checksum_complement, Some(0xC0DE_0005));
    assert_eq!(stack.iter().last().unwrap().node_id, Some(0x1001));
    assert_eq!(r.flow.unwrap().dst_port, 4791);

    let shim = 14 + 20 + 8;
    let bad = |at: usize, v: u8| {
        let mut f = frame.clone();
        f[at] = v;
        find_int(&f, &det).map(|_| ())
    };
    assert_eq!(bad(shim, 3), Err(Error::UnknownIntType));
    assert_eq!(bad(shim + 2, 0), Err(Error::BadIntLength));
    assert_eq!(bad(shim + 2, 2), Err(Error::BadIntLength)); // shorter than the 8-byte header
    assert_eq!(bad(shim + 2, frame[shim + 2] - 1), Err(Error::BadIntLength)); // not whole hops
    assert_eq!(bad(shim + 2, 255), Err(Error::Truncated));
    assert_eq!(bad(shim + 4, 0x20), Err(Error::BadIntVersion));
    assert_eq!(bad(shim + 6, 9), Err(Error::BadHopMl)); // below the bitmap's 10 words
}
