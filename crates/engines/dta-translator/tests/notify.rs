//! Push notifications in the co-located (shared-memory) mode: every report carrying the
//! immediate flag, set by its reporter or by a rule, is announced on the region directory's
//! ring exactly once, after its data is in the region; unflagged reports are not announced.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dta_store::notify::{NotifyRing, DEFAULT_CAPACITY};
use dta_store::{KeyIncrementLayout, Region};
use dta_translator::rules::RuleConfig;
use dta_translator::{Stats, Translator, TranslatorConfig};
use dta_wire::native::DatagramBuilder;
use dta_wire::{Opcode, Priority, Report};

fn datagram(seq: u32, reports: &[Report<'_>]) -> Vec<u8> {
    let mut buf = vec![0u8; 9000];
    let mut b = DatagramBuilder::new(&mut buf, Priority::Medium, false, 1, seq).unwrap();
    for r in reports {
        b.push(r).unwrap();
    }
    let n = b.finish();
    buf.truncate(n);
    buf
}

#[test]
fn every_flagged_report_is_announced_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let regions: Vec<Arc<Region>> = common::regions(dir.path());
    // A rule flags Key-Increment reports of keys starting 0xff; reporters flag the rest.
    let rules: Vec<RuleConfig> = toml::from_str::<toml::Table>(
        "[[rules]]\nname = 'hot'\nprimitive = 'key-increment'\nkey_prefix = 'ff'\naction = 'immediate'\n",
    )
    .unwrap()["rules"]
        .clone()
        .try_into()
        .unwrap();
    let cfg = TranslatorConfig {
        rules,
        ..TranslatorConfig::default()
    };
    let mut t = Translator::colocated(&cfg, regions.clone(), Arc::new(Stats::default())).unwrap();
    let ring = Arc::new(NotifyRing::open_or_create(dir.path(), DEFAULT_CAPACITY).unwrap());
    dta_translator::Sinks::set_ring(t.sinks_mut(), ring.clone());
    // A second mapping, as a subscriber in another process has.
    let reader = NotifyRing::open(dir.path()).unwrap();
    let mut cursor = reader.subscribe();

    let mut want: BTreeMap<(u8, String), u32> = BTreeMap::new();
    let mut expect = |p: Opcode, key: String, n: u32| *want.entry((p as u8, key)).or_default() += n;
    let keys: Vec<[u8; 4]> = (0..300u32).map(|k| k.to_be_bytes()).collect();
    let hot: Vec<[u8; 4]> = (0..50u32)
        .map(|k| (0xff00_0000 | k).to_be_bytes())
        .collect();
    let mut seq = 0;
    for chunk in keys.chunks(20) {
        let mut reports = vec![];
        for k in chunk {
            let flag = k[3] % 3 == 0;
            reports.push(Report::KeyWrite {
                key: k,
                data: k,
                redundancy: 2,
                immediate: flag,
            });
            reports.push(Report::KeyIncrement {
                key: k,
                counter: 1,
                redundancy: dta_store::DEFAULT_REDUNDANCY,
                immediate: flag,
            });
            if flag {
                expect(Opcode::KeyWrite, hex::encode(k), 1);
                expect(Opcode::KeyIncrement, hex::encode(k), 1);
            }
        }
        t.handle_datagram(&datagram(seq, &reports), common::src(), Instant::now());
        seq += 1;
    }
    for chunk in hot.chunks(25) {
        let reports: Vec<_> = chunk
            .iter()
            .map(|k| Report::KeyIncrement {
                key: k,
                counter: 1,
                redundancy: dta_store::DEFAULT_REDUNDANCY,
                immediate: false,
            })
            .collect();
        for k in chunk {
            expect(Opcode::KeyIncrement, hex::encode(k), 1);
        }
        t.handle_datagram(&datagram(seq, &reports), common::src(), Instant::now());
        seq += 1;
    }
    // Append: 4-entry batches; 3 flagged entries in list 1 land in one batch and one notice.
    let e: Vec<[u8; 4]> = (0..8u32).map(|i| i.to_be_bytes()).collect();
    let appends: Vec<_> = e
        .iter()
        .enumerate()
        .map(|(i, d)| Report::Append {
            list_id: 1,
            data: d,
            immediate: (1..4).contains(&i),
        })
        .collect();
    t.handle_datagram(&datagram(seq, &appends), common::src(), Instant::now());
    seq += 1;
    // A path of 2 hops with 1 flagged postcard: one notice when the path is written.
    let flow = [9u8, 9, 9, 9];
    let cards: Vec<_> = (0..2u8)
        .map(|h| Report::Postcard {
            key: &flow,
            hop: h,
            path_len: 2,
            value: h as u32,
            immediate: h == 1,
        })
        .collect();
    t.handle_datagram(&datagram(seq, &cards), common::src(), Instant::now());
    t.flush_all();

    let mut got: BTreeMap<(u8, String), u32> = BTreeMap::new();
    let mut appended = 0;
    while let Some(n) = reader.next(&mut cursor, Duration::from_millis(50)) {
        if n.primitive == Opcode::Append as u8 {
            assert_eq!((n.store.as_str(), n.list), ("events", 1));
            appended += n.reports;
            continue;
        }
        // When a Key-Increment notice arrives, its counter is already in the region.
        if n.primitive == Opcode::KeyIncrement as u8 {
            let key = hex::decode(&n.key).unwrap();
            let ki = &regions[2];
            let layout = KeyIncrementLayout::new(ki.header()).unwrap();
            assert!(layout.query(ki.mem(), &key, None).unwrap() >= 1, "{n:?}");
        }
        *got.entry((n.primitive, n.key.clone())).or_default() += n.reports;
    }
    assert_eq!(cursor.missed(), 0);
    assert_eq!(appended, 3, "the flagged Append entries, once");
    expect(Opcode::Postcarding, hex::encode(flow), 1);
    assert_eq!(got, want);
}
