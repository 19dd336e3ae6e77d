//! Malformed input is counted under its reason, dropped, never panics, and leaves what is already
//! stored intact.

mod common;

use std::time::Instant;

use dta_store::{KeyWriteAnswer, KeyWriteLayout, Region};
use dta_wire::native::DatagramBuilder;
use dta_wire::{Priority, Report};

fn kw_answer(r: &Region, key: u32) -> KeyWriteAnswer {
    KeyWriteLayout::new(r.header())
        .unwrap()
        .query(r.mem(), &key.to_be_bytes(), Some(2), 1)
        .unwrap()
}

fn snapshot(regions: &[std::sync::Arc<Region>]) -> Vec<Vec<u8>> {
    regions
        .iter()
        .map(|r| {
            let mut b = vec![0u8; r.mem().len() as usize];
            r.mem().read(0, &mut b).unwrap();
            b
        })
        .collect()
}

#[test]
fn malformed_datagrams_are_counted_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let regions = common::regions(dir.path());
    let mut t = common::translator(&regions);
    let now = Instant::now();

    // Valid data first: prototype Key-Write key 7 -> 0x01020304 (short base header).
    let valid = [0x01, 0x00, 0x02, 0, 0, 0, 7, 1, 2, 3, 4];
    t.handle_datagram(&valid, common::src(), now);
    assert_eq!(
        kw_answer(&regions[0], 7),
        KeyWriteAnswer::Found {
            data: vec![1, 2, 3, 4],
            votes: 2
        }
    );
    let before = snapshot(&regions);

    let mut native_bad_list = [0u8; 64];
    let mut b = DatagramBuilder::new(&mut native_bad_list, Priority::High, false, 9, 0).unwrap();
    b.push(&Report::Append {
        list_id: 4, // the store has lists 0..4
        data: &[9, 9, 9, 9],
        immediate: false,
    })
    .unwrap();
    let n = b.finish();

    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("truncated", vec![0x01, 0x00, 0x02, 0, 0]),
        ("truncated", vec![]),
        (
            "unknown_version",
            vec![0x07, 0x00, 1, 2, 3, 4, 5, 6, 7, 8, 9],
        ),
        ("unknown_version", vec![0xff; 20]),
        // Key-Write with 5 bytes of data: not 4, 12 or 28.
        (
            "bad_length",
            vec![0x01, 0x00, 0x02, 0, 0, 0, 7, 1, 2, 3, 4, 5],
        ),
        // Redundancy 0 and 9 cannot be honoured.
        (
            "bad_redundancy",
            vec![0x01, 0x00, 0x00, 0, 0, 0, 7, 1, 2, 3, 4],
        ),
        (
            "bad_redundancy",
            vec![0x01, 0x00, 0x09, 0, 0, 0, 7, 1, 2, 3, 4],
        ),
        // Native header promising 2 reports, carrying 1.
        (
            "truncated",
            vec![
                0x10, 0x40, 2, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0x02, 0, 0, 4, 0, 0, 0, 0, 1, 2, 3, 4,
            ],
        ),
        // Native report with an unknown opcode 0x09.
        (
            "unknown_opcode",
            vec![
                0x10, 0x40, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0x09, 0, 0, 4, 1, 2, 3, 4,
            ],
        ),
        ("bad_list_id", native_bad_list[..n].to_vec()),
        // Key-Write with a 3-byte key: no store has that shape.
        (
            "no_store",
            vec![
                0x10, 0x40, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0x01, 0x01, 3, 4, 1, 2, 3, 9, 9, 9, 9,
            ],
        ),
    ];
    for (reason, bytes) in &cases {
        let rejected_before = t.stats().rejected(reason);
        t.handle_datagram(bytes, common::src(), now);
        t.flush_all();
        assert_eq!(
            t.stats().rejected(reason),
            rejected_before + 1,
            "{reason}: {}",
            hex::encode(bytes)
        );
    }
    assert_eq!(
        snapshot(&regions),
        before,
        "a malformed datagram changed stored bytes"
    );
    assert_eq!(
        kw_answer(&regions[0], 7),
        KeyWriteAnswer::Found {
            data: vec![1, 2, 3, 4],
            votes: 2
        }
    );
}

#[test]
fn random_bytes_never_panic_and_never_touch_memory() {
    use rand::{Rng, SeedableRng};
    let dir = tempfile::tempdir().unwrap();
    let regions = common::regions(dir.path());
    let mut t = common::translator(&regions);
    let before = snapshot(&regions);
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let now = Instant::now();
    let mut accepted_reports = 0;
    for _ in 0..20_000 {
        let len = rng.gen_range(0..64);
        let mut b: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        // Force the first byte into a valid version most of the time so parsing goes deep.
        if !b.is_empty() && rng.gen_bool(0.7) {
            b[0] = if rng.gen_bool(0.5) {
                0x10
            } else {
                rng.gen_range(1..=4)
            };
        }
        let reports_before: u64 = dta_translator::stats::PRIMITIVES
            .iter()
            .map(|&op| t.stats().reports_of(op))
            .sum();
        t.handle_datagram(&b, common::src(), now);
        let reports_after: u64 = dta_translator::stats::PRIMITIVES
            .iter()
            .map(|&op| t.stats().reports_of(op))
            .sum();
        accepted_reports += reports_after - reports_before;
    }
    t.flush_all();
    let st = t.stats();
    // Every datagram was either rejected or yielded reports.
    assert!(st.total_rejected() > 10_000);
    if accepted_reports == 0 {
        assert_eq!(snapshot(&regions), before);
    }
}
