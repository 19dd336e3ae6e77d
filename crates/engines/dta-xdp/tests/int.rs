//! The INT sink's fast-path program run on frames (`BPF_PROG_TEST_RUN`, no interface): a
//! drain finds exactly the slots the program wrote (`IntXdp::changed`), each sink thread only
//! in its own range of slots even where two ranges share a bitmap word, a report taken after a
//! drain is found by the next one, and the histogram counts land in the log2 bucket of each
//! value. Needs root (loading BPF): a counted skip otherwise.

use std::collections::BTreeMap;

use dta_int::gen::{self, GenPacket, HopTruth};
use dta_int::Buckets;
use dta_int_wire::instr;
use dta_xdp::{IntXdp, IntXdpConfig, XdpError};

const PORT: u16 = 9555;
const INT_PORT: u16 = 5000;
const XDP_DROP: u32 = 1;
const XDP_PASS: u32 = 2;
/// Slots of the program: four bitmap words, the last partly used.
const SLOTS: u32 = 200;

fn load() -> Option<IntXdp> {
    let cfg = IntXdpConfig {
        port: PORT,
        int_port: INT_PORT,
        instructions: instr::NODE_ID | instr::HOP_LATENCY | instr::QUEUE | instr::TX_UTIL,
        flows: SLOTS,
        switches: 64,
        allow: dta_wire::prefix::AllowList::any(),
    };
    match IntXdp::load(&cfg) {
        Ok(mut x) => {
            x.set_thresholds(true, u32::MAX, u32::MAX, u32::MAX, u32::MAX)
                .unwrap();
            Some(x)
        }
        Err(XdpError::NotBuilt) => None,
        Err(e) => panic!("loading the INT XDP program: {e}"),
    }
}

/// Flow `i`'s key: 10.0.0.i → 10.1.0.1, UDP ports 1000 + i → 80.
fn flow(i: u8) -> [u8; 13] {
    let mut k = [0u8; 13];
    k[..4].copy_from_slice(&[10, 0, 0, i]);
    k[4..8].copy_from_slice(&[10, 1, 0, 1]);
    k[8..10].copy_from_slice(&(1000 + u16::from(i)).to_be_bytes());
    k[10..12].copy_from_slice(&80u16.to_be_bytes());
    k[12] = 17;
    k
}

/// The five hops' node ids (hop 0 first) and per hop (latency, queue, util): values on every
/// edge of the bucket computation (0, 1, a byte's last, the next, the 16-bit edge, the largest),
/// the path's latency under the largest value (its threshold).
const NODES: [u32; 5] = [101, 202, 303, 404, 505];
const VALUES: [[u32; 3]; 5] = [
    [0, 65_535, 1 << 31],
    [1, 65_536, 3],
    [255, 7, 100],
    [256, 8, 4096],
    [1 << 20, 0xff_ffff, u32::MAX],
];

/// A telemetry report v2.0 of flow `f` numbered `seq`, as the sink's port receives it.
fn report(f: [u8; 13], seq: u32) -> Vec<u8> {
    let p = GenPacket {
        time_ns: 0,
        flow: f,
        hops: NODES
            .iter()
            .zip(VALUES)
            .map(|(&node_id, [latency, queue, util])| HopTruth {
                node_id,
                latency,
                queue,
                util,
                egress_port: None,
            })
            .collect(),
    };
    let tr = gen::stacked_report(NODES[4], seq, &gen::md_frame(&p, INT_PORT));
    let mut outer = [0u8; 13];
    outer[..4].copy_from_slice(&[10, 9, 0, 2]);
    outer[4..8].copy_from_slice(&[10, 9, 0, 1]);
    outer[8..10].copy_from_slice(&40_000u16.to_be_bytes());
    outer[12] = 17;
    gen::eth_ipv4_udp(
        [2, 0, 0, 0, 0, 2],
        [2, 0, 0, 0, 0, 1],
        &outer,
        64,
        PORT,
        &tr,
    )
}

fn changed(x: &mut IntXdp, from: u32, to: u32) -> Vec<u32> {
    let mut v = vec![];
    x.changed(from, to, &mut v);
    v
}

#[test]
fn a_drain_finds_the_slots_written_each_range_its_own() {
    if !dta_testkit::is_root() {
        dta_testkit::skip!("loading the INT XDP program needs root");
    }
    let Some(mut x) = load() else {
        dta_testkit::skip!("the XDP programs were not built (no clang)");
    };
    // Slots 3 and 70 are thread 0's (0..100), 110 thread 1's (100..200); word 1 (64..127)
    // holds bits of both.
    for (i, slot) in [(1, 3), (2, 70), (3, 110)] {
        x.learn(&flow(i), slot, &NODES, 0).unwrap();
    }
    assert_eq!(
        changed(&mut x, 0, SLOTS),
        Vec::<u32>::new(),
        "nothing taken yet"
    );

    assert_eq!(x.test_run(&report(flow(1), 1)).unwrap(), XDP_DROP);
    assert_eq!(x.test_run(&report(flow(2), 1)).unwrap(), XDP_DROP);
    assert_eq!(x.test_run(&report(flow(3), 1)).unwrap(), XDP_DROP);
    // An unknown flow goes to the sink and writes no slot.
    assert_eq!(x.test_run(&report(flow(4), 1)).unwrap(), XDP_PASS);
    let s = x.stats().unwrap();
    assert_eq!((s.fast, s.pass_unknown_flow), (3, 1), "{s:?}");

    // Thread 1 drains first: its bit of the shared word, not thread 0's.
    assert_eq!(changed(&mut x, 100, SLOTS), vec![110]);
    assert_eq!(changed(&mut x, 100, SLOTS), Vec::<u32>::new(), "cleared");
    assert_eq!(changed(&mut x, 0, 100), vec![3, 70]);
    assert_eq!(changed(&mut x, 0, 100), Vec::<u32>::new(), "cleared");
    for slot in [3, 70, 110] {
        let a = x.take(slot).expect("a report taken");
        assert_eq!(a.packets, 1, "slot {slot}");
        assert_eq!(a.sum[4][2], u64::from(u32::MAX), "slot {slot}");
    }

    // A report after a drain's clearing, before its take: the take reads it, and the next
    // drain finds the slot again (its take then reads nothing new).
    assert_eq!(x.test_run(&report(flow(2), 2)).unwrap(), XDP_DROP);
    assert_eq!(changed(&mut x, 0, 100), vec![70]);
    assert_eq!(x.test_run(&report(flow(2), 3)).unwrap(), XDP_DROP);
    assert_eq!(x.take(70).map(|a| a.packets), Some(2));
    assert_eq!(changed(&mut x, 0, 100), vec![70]);
    assert_eq!(x.take(70), None);
    assert_eq!(changed(&mut x, 0, SLOTS), Vec::<u32>::new());

    // Five reports in all, each counting every hop's three values once, in its log2 bucket.
    let mut got = BTreeMap::new();
    x.take_hist(&mut |node, m, bucket, n| {
        *got.entry((node, m, bucket)).or_insert(0) += n;
    });
    let mut want = BTreeMap::new();
    for (node, values) in NODES.iter().zip(VALUES) {
        for (m, v) in values.into_iter().enumerate() {
            *want
                .entry((*node, m, Buckets::Log2.bucket(v) as u8))
                .or_insert(0) += 5;
        }
    }
    assert_eq!(got, want);
}
