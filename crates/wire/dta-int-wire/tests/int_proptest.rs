//! Property tests for `dta_int_wire`: no input panics any parser, and what parses re-emits to
//! something that parses back identically; hop values survive emit/parse.
#![cfg(feature = "json")]

use dta_int_wire::{
    self, emit_md, find_int, parse_report, HopMetadata, IntDetect, IntRepr, MdHeader,
    ReportBuilder, TelemetryReport,
};
use proptest::prelude::*;

fn detect() -> IntDetect {
    IntDetect {
        udp_port: Some(5000),
        dscp: Some((0x17, 0x3f)),
        probe_marker: Some(0x1234_5678_9abc_def0),
    }
}

fn no_ones32() -> impl Strategy<Value = Option<u32>> {
    proptest::option::of(0..u32::MAX)
}

fn no_ones64() -> impl Strategy<Value = Option<u64>> {
    proptest::option::of(0..u64::MAX)
}

prop_compose! {
    fn arb_hop()(
        node_id in no_ones32(), hop_latency in no_ones32(), tx in no_ones32(),
        l1 in proptest::option::of((any::<u16>(), any::<u16>())),
        q in proptest::option::of((0u8..0xff, 0u32..0xff_ffff)),
        its in no_ones64(), ets in no_ones64(),
        l2i in no_ones32(), l2e in no_ones32(), cs in no_ones32(),
    ) -> HopMetadata<'static> {
        // A pair word of all ones reads back as "not available".
        let l1 = l1.filter(|&(a, b)| (a, b) != (0xffff, 0xffff));
        HopMetadata {
            node_id,
            checksum_complement: cs,
            domain_specific: &[],
            baseline: dta_int_wire::Baseline {
                hop_latency,
                egress_tx_util: tx,
                l1_ingress_port: l1.map(|x| x.0),
                l1_egress_port: l1.map(|x| x.1),
                queue_id: q.map(|x| x.0),
                queue_occupancy: q.map(|x| x.1),
                ingress_timestamp: its,
                egress_timestamp: ets,
                l2_ingress_port: l2i,
                l2_egress_port: l2e,
                buffer_id: q.map(|x| x.0),
                buffer_occupancy: q.map(|x| x.1),
            },
        }
    }
}

/// Keep only the fields `bitmap` carries.
fn mask(h: &HopMetadata<'static>, bitmap: u16) -> HopMetadata<'static> {
    use dta_int_wire::instr::*;
    let k = |b: u16| bitmap & b != 0;
    HopMetadata {
        node_id: h.node_id.filter(|_| k(NODE_ID)),
        checksum_complement: h.checksum_complement.filter(|_| k(CHECKSUM)),
        domain_specific: &[],
        baseline: dta_int_wire::Baseline {
            l1_ingress_port: h.baseline.l1_ingress_port.filter(|_| k(L1_PORTS)),
            l1_egress_port: h.baseline.l1_egress_port.filter(|_| k(L1_PORTS)),
            hop_latency: h.baseline.hop_latency.filter(|_| k(HOP_LATENCY)),
            queue_id: h.baseline.queue_id.filter(|_| k(QUEUE)),
            queue_occupancy: h.baseline.queue_occupancy.filter(|_| k(QUEUE)),
            ingress_timestamp: h.baseline.ingress_timestamp.filter(|_| k(INGRESS_TS)),
            egress_timestamp: h.baseline.egress_timestamp.filter(|_| k(EGRESS_TS)),
            l2_ingress_port: h.baseline.l2_ingress_port.filter(|_| k(L2_PORTS)),
            l2_egress_port: h.baseline.l2_egress_port.filter(|_| k(L2_PORTS)),
            egress_tx_util: h.baseline.egress_tx_util.filter(|_| k(TX_UTIL)),
            buffer_id: h.baseline.buffer_id.filter(|_| k(BUFFER)),
            buffer_occupancy: h.baseline.buffer_occupancy.filter(|_| k(BUFFER)),
        },
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn no_panic_on_any_bytes(buf in proptest::collection::vec(any::<u8>(), 0..300)) {
        let d = detect();
        if let Ok(Some(r)) = find_int(&buf, &d) {
            let _ = dta_int_wire::int_to_json(&r);
        }
        if let Ok(r) = IntRepr::parse(&buf) {
            let mut out = vec![0u8; r.buffer_len()];
            let n = r.emit(&mut out).unwrap();
            let again = IntRepr::parse(&out[..n]).unwrap();
            prop_assert_eq!(again, r);
            let _ = dta_int_wire::int_to_json(&r);
        }
        if let Ok(r) = parse_report(&buf) {
            let _ = dta_int_wire::report_to_json(&r, &d);
            if let TelemetryReport::V2(v2) = r {
                let mut out = vec![0u8; buf.len() + 64];
                let mut b = ReportBuilder::new(&mut out, &v2.group).unwrap();
                for i in v2.iter() {
                    b.push(&i).unwrap();
                }
                let n = b.finish().unwrap();
                let TelemetryReport::V2(again) = parse_report(&out[..n]).unwrap() else {
                    panic!("v2 re-parses as v2")
                };
                prop_assert_eq!(again.group, v2.group);
                prop_assert!(again.iter().eq(v2.iter()));
            }
        }
        let _ = dta_int_wire::decode(&buf, &d);
    }

    #[test]
    fn md_round_trip(
        hops in proptest::collection::vec(arb_hop(), 0..6),
        bitmap in any::<u16>(),
        rhc in any::<u8>(),
        npt in 0u8..3,
        next in any::<u16>(),
    ) {
        let bitmap = bitmap & !dta_int_wire::instr::RESERVED;
        let hops: Vec<_> = hops.iter().map(|h| mask(h, bitmap)).collect();
        let header = MdHeader {
            hop_ml: dta_int_wire::baseline_words(bitmap) as u8,
            remaining_hop_count: rhc,
            instructions: bitmap,
            ..MdHeader::default()
        };
        let mut buf = vec![0u8; 1100];
        let n = emit_md(npt, next, &header, &hops, &mut buf).unwrap();
        let r = IntRepr::parse(&buf[..n]).unwrap();
        prop_assert_eq!(r.buffer_len(), n);
        let dta_int_wire::IntHeader::Md { header: h, stack } = r.header else { panic!("md") };
        prop_assert_eq!(h, header);
        if bitmap == 0 {
            prop_assert_eq!(stack.len(), 0);
        } else {
            prop_assert_eq!(stack.iter().collect::<Vec<_>>(), hops);
        }
    }
}
