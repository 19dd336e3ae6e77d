//! Flow control end to end over the shared-memory sink: reports offered at twice the write
//! budget, in simulated time (each step passes its `now`; nothing here is timed). Every
//! high-priority report is stored (queried back from the region), low priority is dropped and
//! counted, the memory writes stay within the budget, the spill stays within its size, and a
//! low-priority Key-Write written under sustained pressure reads back with 1 vote of N.

use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use dta_store::{HashScheme, KeyWriteAnswer, KeyWriteLayout, KeyWriteSpec, Region, StoreSpec};
use dta_translator::{FlowControlConfig, Stats, Translator, TranslatorConfig};
use dta_wire::native::DatagramBuilder;
use dta_wire::{Opcode, Priority, Report};

const BUDGET: u64 = 10_000;
const BURST: u64 = 1_000;
const SPILL: u64 = 16 << 10;
const LOW_N: u8 = 4;

fn src() -> SocketAddr {
    "127.0.0.1:5555".parse().unwrap()
}

fn datagram(p: Priority, reporter: u32, reports: &[Report<'_>]) -> Vec<u8> {
    let mut buf = vec![0u8; 1500];
    let mut b = DatagramBuilder::new(&mut buf, p, false, reporter, 0).unwrap();
    for r in reports {
        b.push(r).unwrap();
    }
    let n = b.finish();
    buf.truncate(n);
    buf
}

/// High priority: one Key-Write (N = 2) to the `hi` store, 3 memory operations.
fn high(key: u32) -> Vec<u8> {
    let k = key.to_be_bytes();
    let d = (key ^ 0xA5A5_A5A5).to_be_bytes();
    datagram(
        Priority::High,
        1,
        &[Report::KeyWrite {
            key: &k,
            data: &d,
            redundancy: 2,
            immediate: false,
        }],
    )
}

/// Low priority: four Key-Writes (N = 4) to the `lo` store, 17 memory operations.
fn low(first: u64) -> Vec<u8> {
    let keys: Vec<[u8; 8]> = (first..first + 4).map(|k| k.to_be_bytes()).collect();
    let reports: Vec<Report<'_>> = keys
        .iter()
        .map(|k| Report::KeyWrite {
            key: k,
            data: &k[4..],
            redundancy: LOW_N,
            immediate: false,
        })
        .collect();
    datagram(Priority::Low, 2, &reports)
}

fn store(dir: &std::path::Path, name: &str, slots: u64, key_len: u8, n: u8) -> Arc<Region> {
    let spec = StoreSpec::KeyWrite(KeyWriteSpec {
        slots,
        key_len,
        data_len: 4,
        hash: HashScheme::Native,
        redundancy: n,
    });
    Arc::new(Region::create(&dir.join(format!("{name}.region")), name, &spec, true).unwrap())
}

fn answer(r: &Region, key: &[u8]) -> KeyWriteAnswer {
    KeyWriteLayout::new(r.header())
        .unwrap()
        .query(r.mem(), key, None, 1)
        .unwrap()
}

#[test]
fn twice_the_budget_stores_every_high_report_and_drops_low_within_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let regions = vec![
        store(dir.path(), "hi", 1 << 20, 4, 2),
        store(dir.path(), "lo", 1 << 20, 8, LOW_N),
    ];
    let cfg = TranslatorConfig {
        flow_control: FlowControlConfig {
            write_budget: BUDGET,
            burst: BURST,
            min_budget: 1,
            spill_memory: SPILL,
            ..FlowControlConfig::default()
        },
        ..TranslatorConfig::default()
    };
    let stats = Arc::new(Stats::default());
    let mut t = Translator::colocated(&cfg, regions.clone(), stats.clone()).unwrap();
    let t0 = t.meter().epoch();
    // Per millisecond: one high datagram (3 operations) and one low (17): 20 000 operations
    // per second against a budget of 10 000. At 400 ms, a burst of 300 high datagrams at once
    // (900 operations, most of the bucket): the spill takes what the level cannot.
    let mut high_keys = vec![];
    let mut lowered_low: Vec<u64> = vec![];
    let mut full_low: Vec<u64> = vec![];
    let mut max_spill = 0;
    let steps = 1000u64;
    for ms in 0..steps {
        let now = t0 + Duration::from_millis(ms);
        t.tick(now);
        t.reinject(now);
        let key = ms as u32;
        t.handle_datagram(&high(key), src(), now);
        high_keys.push(key);
        if ms == 400 {
            for b in 0..300 {
                let key = 1_000_000 + b;
                t.handle_datagram(&high(key), src(), now);
                high_keys.push(key);
            }
        }
        let (admitted, lowered) = (
            stats.overload_admitted[0].load(Relaxed),
            stats.redundancy_lowered.load(Relaxed),
        );
        t.handle_datagram(&low(ms * 4), src(), now);
        if stats.overload_admitted[0].load(Relaxed) > admitted {
            if stats.redundancy_lowered.load(Relaxed) > lowered {
                lowered_low.push(ms * 4);
            } else {
                full_low.push(ms * 4);
            }
        }
        max_spill = max_spill.max(stats.spill_bytes.load(Relaxed));
    }
    // The spill waited for the level; now the budget's second is over. Stop drains it.
    assert!(stats.spilled.load(Relaxed) > 0, "the burst was spilled");
    t.flush_all();
    assert_eq!(t.spilled(), 0);

    // Every high report is stored.
    let hi = &regions[0];
    for &k in &high_keys {
        let want = (k ^ 0xA5A5_A5A5).to_be_bytes().to_vec();
        match answer(hi, &k.to_be_bytes()) {
            KeyWriteAnswer::Found { data, votes } => {
                assert_eq!(data, want, "key {k}");
                assert!(votes >= 1);
            }
            a => panic!("high key {k}: {a:?}"),
        }
    }
    let s = &stats;
    assert_eq!(s.overload_dropped[2].load(Relaxed), 0);
    assert_eq!(s.spill_dropped.load(Relaxed), 0);
    assert_eq!(
        s.overload_admitted[2].load(Relaxed) + s.spilled.load(Relaxed),
        high_keys.len() as u64
    );
    assert_eq!(s.reinjected.load(Relaxed), s.spilled.load(Relaxed));
    // Low priority: dropped and counted (fewer than half: once the pressure is sustained, low
    // Key-Write costs 5 operations instead of 17, dynamic redundancy's point).
    let (la, ld) = (
        s.overload_admitted[0].load(Relaxed),
        s.overload_dropped[0].load(Relaxed),
    );
    assert_eq!(la + ld, steps);
    assert!(ld > steps / 10, "low dropped: {ld} of {steps}");
    assert!(la > 0, "low admitted while the budget allowed");
    assert_eq!(
        s.reports_of(Opcode::KeyWrite),
        high_keys.len() as u64 + 4 * la
    );
    // The slot writes never outran the budget: what one second earns plus the bucket (plus the
    // one datagram admitted on the last token, and the spill drained on stop regardless).
    let drained = 3 * s.reinjected.load(Relaxed);
    assert!(
        s.writes.load(Relaxed) <= BUDGET + BURST + 17 + drained,
        "{} writes",
        s.writes.load(Relaxed)
    );
    // The spill's memory is bounded by its size.
    assert!(
        max_spill > 0 && max_spill <= SPILL,
        "spill held {max_spill}"
    );

    // Sustained pressure lowered low-priority Key-Write to one copy: it reads back with 1 vote
    // of N = 4; a low report admitted before that has its 4 copies.
    assert!(!lowered_low.is_empty(), "redundancy was lowered");
    let lo = &regions[1];
    let k = lowered_low[lowered_low.len() - 1] + 3;
    assert_eq!(
        answer(lo, &k.to_be_bytes()),
        KeyWriteAnswer::Found {
            data: k.to_be_bytes()[4..].to_vec(),
            votes: 1
        }
    );
    let k = full_low[0];
    assert_eq!(
        answer(lo, &k.to_be_bytes()),
        KeyWriteAnswer::Found {
            data: k.to_be_bytes()[4..].to_vec(),
            votes: LOW_N
        }
    );
    assert_eq!(
        s.redundancy_lowered.load(Relaxed),
        4 * lowered_low.len() as u64
    );
}
