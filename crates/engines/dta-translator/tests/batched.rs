// Size: one file because every test here holds the batched and lean paths to the per-report path
// on the same fixtures and generators; split, they would each repeat them.
//! The batched apply path: a native datagram's Key-Write and Key-Increment reports are
//! routed, hashed and prefetched first, then written. It must leave exactly the memory image the
//! store layouts give report by report ([DTA A.1] Algorithm 1, A.4 Algorithm 5), in report order
//! (a key written twice in one datagram keeps its last value), interleaved correctly with the
//! stateful primitives, with the same counters. Postcarding and Append datagrams of one shape
//! take the lean path too, and must leave what the general path leaves report by report.

mod common;

use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use dta_store::{KeyIncrementLayout, KeyWriteLayout, VecSink};
use dta_wire::native::DatagramBuilder;
use dta_wire::{Opcode, Priority, Report};
use rand::{Rng, SeedableRng};

#[derive(Clone)]
enum Gen {
    Kw4([u8; 4], [u8; 4], u8, bool),
    Kw13([u8; 13], [u8; 8], u8),
    Ki([u8; 4], u64, u8),
    Ap(u32, [u8; 4]),
    NoStore([u8; 5], [u8; 4]),
}

impl Gen {
    fn report(&self) -> Report<'_> {
        match self {
            Gen::Kw4(k, d, n, i) => Report::KeyWrite {
                key: k,
                data: d,
                redundancy: *n,
                immediate: *i,
            },
            Gen::Kw13(k, d, n) => Report::KeyWrite {
                key: k,
                data: d,
                redundancy: *n,
                immediate: false,
            },
            Gen::Ki(k, c, n) => Report::KeyIncrement {
                key: k,
                counter: *c,
                redundancy: *n,
                immediate: false,
            },
            Gen::Ap(l, d) => Report::Append {
                list_id: *l,
                data: d,
                immediate: false,
            },
            Gen::NoStore(k, d) => Report::KeyWrite {
                key: k,
                data: d,
                redundancy: 1,
                immediate: false,
            },
        }
    }
}

fn random_report(rng: &mut impl Rng) -> Gen {
    // A small key space, so keys repeat inside one datagram and slots are overwritten.
    let k = rng.gen_range(0u32..40).to_be_bytes();
    let n = rng.gen_range(1..=4);
    match rng.gen_range(0..10) {
        0..=3 => Gen::Kw4(k, rng.gen(), n, rng.gen_bool(0.2)),
        4 | 5 => {
            let mut k13 = [0u8; 13];
            k13[..4].copy_from_slice(&k);
            Gen::Kw13(k13, rng.gen(), n)
        }
        // Key-Increment reports use the store's N.
        6 | 7 => Gen::Ki(k, rng.gen_range(1..1000), dta_store::DEFAULT_REDUNDANCY),
        8 => Gen::Ap(rng.gen_range(0..4), rng.gen()),
        _ => Gen::NoStore([1, 2, 3, 4, 5], [9; 4]),
    }
}

#[test]
fn batched_datagrams_equal_per_report_layouts() {
    let dir = tempfile::tempdir().unwrap();
    let regions = common::regions(dir.path());
    let mut t = common::translator(&regions);
    // The reference for the stateful Append store: a second translator fed report by report.
    let dir2 = tempfile::tempdir().unwrap();
    let regions2 = common::regions(dir2.path());
    let mut t2 = common::translator(&regions2);

    let kw = KeyWriteLayout::new(regions[0].header()).unwrap();
    let flows = KeyWriteLayout::new(regions[1].header()).unwrap();
    let ki = KeyIncrementLayout::new(regions[2].header()).unwrap();
    let mut img_kw = VecSink::new(regions[0].mem().len() as usize);
    let mut img_flows = VecSink::new(regions[1].mem().len() as usize);
    let mut img_ki = VecSink::new(regions[2].mem().len() as usize);

    let mut rng = rand::rngs::StdRng::seed_from_u64(0xBA7C);
    let (mut n_kw, mut n_ki, mut writes, mut fetch_adds, mut no_store, mut imm) =
        (0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
    let now = Instant::now();
    for seq in 0..400u32 {
        let count = rng.gen_range(1..=70); // more than one stage of 32
        let gens: Vec<Gen> = (0..count).map(|_| random_report(&mut rng)).collect();
        let mut buf = vec![0u8; 9000];
        let mut b = DatagramBuilder::new(&mut buf, Priority::Medium, false, 7, seq).unwrap();
        for g in &gens {
            b.push(&g.report()).unwrap();
        }
        let len = b.finish();
        t.handle_datagram(&buf[..len], common::src(), now);
        for g in &gens {
            t2.apply(&g.report(), 7, common::src(), now);
            match g {
                Gen::Kw4(k, d, n, i) => {
                    kw.apply(k, d, *n, &mut img_kw).unwrap();
                    n_kw += 1;
                    writes += *n as u64;
                    imm += *i as u64;
                }
                Gen::Kw13(k, d, n) => {
                    flows.apply(k, d, *n, &mut img_flows).unwrap();
                    n_kw += 1;
                    writes += *n as u64;
                }
                Gen::Ki(k, c, n) => {
                    ki.apply(k, *c, *n, &mut img_ki).unwrap();
                    n_ki += 1;
                    fetch_adds += *n as u64;
                }
                Gen::Ap(..) => {}
                Gen::NoStore(..) => {
                    n_kw += 1;
                    no_store += 1;
                }
            }
        }
    }
    t.flush_all();
    t2.flush_all();
    let image = |r: &dta_store::Region| {
        let mut v = vec![0u8; r.mem().len() as usize];
        r.mem().read(0, &mut v).unwrap();
        v
    };
    assert_eq!(
        image(&regions[0]),
        img_kw.bytes,
        "prototype Key-Write store"
    );
    assert_eq!(
        image(&regions[1]),
        img_flows.bytes,
        "native Key-Write store"
    );
    assert_eq!(image(&regions[2]), img_ki.bytes, "Key-Increment store");
    assert_eq!(image(&regions[4]), image(&regions2[4]), "Append store");
    assert!(img_ki.bytes.iter().any(|&b| b != 0));

    let s = t.stats();
    assert_eq!(s.reports_of(Opcode::KeyWrite), n_kw);
    assert_eq!(s.reports_of(Opcode::KeyIncrement), n_ki);
    assert_eq!(s.rejected("no_store"), no_store);
    assert_eq!(s.immediates.load(Relaxed), imm);
    assert_eq!(s.fetch_adds.load(Relaxed), fetch_adds);
    // Append batch writes are counted too: the batched path adds exactly the Key-Write ones.
    let s2 = t2.stats();
    assert_eq!(s.writes.load(Relaxed), s2.writes.load(Relaxed));
    assert_eq!(s.write_bytes.load(Relaxed), s2.write_bytes.load(Relaxed));
    assert!(s.writes.load(Relaxed) >= writes);
    assert_eq!(s.reports_of(Opcode::Append), s2.reports_of(Opcode::Append));
}

#[test]
fn last_write_in_a_datagram_wins() {
    let dir = tempfile::tempdir().unwrap();
    let regions = common::regions(dir.path());
    let mut t = common::translator(&regions);
    let key = [10, 0, 0, 1];
    let mut buf = vec![0u8; 2000];
    let mut b = DatagramBuilder::new(&mut buf, Priority::High, false, 1, 0).unwrap();
    for v in 0u8..50 {
        b.push(&Report::KeyWrite {
            key: &key,
            data: &[v, v, v, v],
            redundancy: 3,
            immediate: false,
        })
        .unwrap();
    }
    let len = b.finish();
    t.handle_datagram(&buf[..len], common::src(), Instant::now());
    let l = KeyWriteLayout::new(regions[0].header()).unwrap();
    let mut out = [0u8; 4];
    assert_eq!(
        l.lookup(regions[0].mem(), &key, Some(3), 1, &mut out),
        Ok(dta_store::Lookup::Found { votes: 3 })
    );
    assert_eq!(out, [49; 4]);
    assert_eq!(t.stats().writes.load(Relaxed), 150);
}

/// A sink that fails every operation: each failing report is counted once as `sink_error` and
/// nothing panics.
#[test]
fn sink_errors_are_counted_per_report() {
    struct Failing;
    impl dta_translator::Sinks for Failing {
        fn write(
            &mut self,
            _: usize,
            _: u64,
            _: &[u8],
            _: bool,
        ) -> Result<(), dta_store::SinkError> {
            Err(dta_store::SinkError::ReadOnly)
        }
        fn fetch_add(&mut self, _: usize, _: u64, _: u64) -> Result<(), dta_store::SinkError> {
            Err(dta_store::SinkError::ReadOnly)
        }
        fn count(&mut self, _: usize, _: u64, _: u64) -> Result<(), dta_store::SinkError> {
            Err(dta_store::SinkError::ReadOnly)
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let regions = common::regions(dir.path());
    let infos: Vec<_> = regions
        .iter()
        .map(|r| dta_store::StoreInfo::from_region(r).unwrap())
        .collect();
    let stats = std::sync::Arc::new(dta_translator::Stats::default());
    let mut t = dta_translator::Translator::new(
        &dta_translator::TranslatorConfig::default(),
        &infos,
        Failing,
        stats.clone(),
    )
    .unwrap();
    let mut buf = vec![0u8; 2000];
    let mut b = DatagramBuilder::new(&mut buf, Priority::Low, false, 1, 0).unwrap();
    for i in 0u32..5 {
        b.push(&Report::KeyWrite {
            key: &i.to_be_bytes(),
            data: &[0; 4],
            redundancy: 2,
            immediate: false,
        })
        .unwrap();
        b.push(&Report::KeyIncrement {
            key: &i.to_be_bytes(),
            counter: 1,
            redundancy: 2,
            immediate: false,
        })
        .unwrap();
    }
    let len = b.finish();
    t.handle_datagram(&buf[..len], common::src(), Instant::now());
    assert_eq!(stats.rejected("sink_error"), 10);
}

/// `Translator::apply` (the INT sink's and the prototype's way in) stages every redundancy the
/// store accepts: Key-Write N = 1..=store N (4 here) and Key-Increment at the store's N (2) leave
/// the layouts' image; Key-Write N = 0 or 5, Key-Increment N = 3 (`redundancy_mismatch`) and a
/// report of no store's shape are rejected by reason, changing nothing.
#[test]
fn apply_stages_every_store_redundancy() {
    let dir = tempfile::tempdir().unwrap();
    let regions = common::regions(dir.path());
    let mut t = common::translator(&regions);
    let flows = KeyWriteLayout::new(regions[1].header()).unwrap();
    let ki = KeyIncrementLayout::new(regions[2].header()).unwrap();
    assert_eq!((flows.redundancy(), ki.redundancy()), (4, 2));
    let mut img_flows = VecSink::new(regions[1].mem().len() as usize);
    let mut img_ki = VecSink::new(regions[2].mem().len() as usize);
    let now = Instant::now();
    for n in 1..=4u8 {
        let key = [n; 13];
        let data = [n ^ 0x5a; 8];
        let r = Report::KeyWrite {
            key: &key,
            data: &data,
            redundancy: n,
            immediate: false,
        };
        t.apply(&r, 0, common::src(), now);
        flows.apply(&key, &data, n, &mut img_flows).unwrap();
        let k4 = [0, 0, 1, n];
        let r = Report::KeyIncrement {
            key: &k4,
            counter: n as u64,
            redundancy: 2,
            immediate: false,
        };
        t.apply(&r, 0, common::src(), now);
        ki.apply(&k4, n as u64, 2, &mut img_ki).unwrap();
    }
    for (n, key) in [(0u8, [1u8; 13]), (5, [2; 13])] {
        let r = Report::KeyWrite {
            key: &key,
            data: &[0; 8],
            redundancy: n,
            immediate: false,
        };
        t.apply(&r, 0, common::src(), now);
    }
    t.apply(
        &Report::KeyIncrement {
            key: &[0, 0, 2, 0],
            counter: 1,
            redundancy: 3,
            immediate: false,
        },
        0,
        common::src(),
        now,
    );
    t.apply(
        &Report::KeyIncrement {
            key: &[1, 2, 3, 4, 5],
            counter: 1,
            redundancy: 2,
            immediate: false,
        },
        0,
        common::src(),
        now,
    );
    let image = |r: &dta_store::Region| {
        let mut v = vec![0u8; r.mem().len() as usize];
        r.mem().read(0, &mut v).unwrap();
        v
    };
    assert_eq!(image(&regions[1]), img_flows.bytes);
    assert_eq!(image(&regions[2]), img_ki.bytes);
    let s = t.stats();
    assert_eq!(s.rejected("bad_redundancy"), 2);
    assert_eq!(s.rejected("redundancy_mismatch"), 1);
    assert_eq!(s.rejected("no_store"), 1);
    assert_eq!(s.writes.load(Relaxed), (1..=4).sum::<u64>());
    assert_eq!(s.fetch_adds.load(Relaxed), 4 * 2);
    assert_eq!(s.reports_of(Opcode::KeyWrite), 6);
    assert_eq!(s.reports_of(Opcode::KeyIncrement), 6);
}

/// Stages for one store go straight to its mapped memory (`Sinks::region_mem`): for a native
/// 4-byte Key-Write store (one-word slots) and a Key-Increment store, datagrams of one store at
/// one N and at mixed N leave exactly the image and live counters the layouts give report by
/// report, and count the same writes, FETCH_ADDs and reports.
#[test]
fn single_store_stages_equal_per_report_layouts() {
    use dta_store::{HashScheme, KeyIncrementSpec, KeyWriteSpec, Region, StoreSpec};
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    let specs = [
        (
            "kw",
            StoreSpec::KeyWrite(KeyWriteSpec {
                slots: 1 << 10,
                key_len: 4,
                data_len: 4,
                hash: HashScheme::Native,
                redundancy: 4,
            }),
        ),
        (
            "ki",
            StoreSpec::KeyIncrement(KeyIncrementSpec {
                counters: 1 << 10,
                key_len: 4,
                hash: HashScheme::Native,
                redundancy: 2,
                windows: 0,
                window_ms: 0,
            }),
        ),
    ];
    let regions: Vec<Arc<Region>> = specs
        .iter()
        .map(|(name, spec)| {
            Arc::new(Region::create(&dir.path().join(*name), name, spec, true).unwrap())
        })
        .collect();
    let mut t = common::translator(&regions);
    let kw = KeyWriteLayout::new(regions[0].header()).unwrap();
    let ki = KeyIncrementLayout::new(regions[1].header()).unwrap();
    let mut img_kw = VecSink::new(regions[0].mem().len() as usize);
    let mut img_ki = VecSink::new(regions[1].mem().len() as usize);
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x51_7E);
    let now = Instant::now();
    let (mut writes, mut fetch_adds) = (0u64, 0u64);
    for seq in 0..300u32 {
        // A third at one N for the whole datagram, the rest at random N; keys from a small
        // set so slots are overwritten within and across datagrams.
        let uniform = rng.gen_range(1..=4u8);
        let kind = seq % 3;
        let count = rng.gen_range(1..=32);
        let mut buf = vec![0u8; 1500];
        let mut b = DatagramBuilder::new(&mut buf, Priority::Medium, false, 9, seq).unwrap();
        for i in 0..count {
            let key: [u8; 4] = rng.gen_range(0u32..3000).to_be_bytes();
            if seq % 2 == 0 {
                let n = if kind == 0 {
                    uniform
                } else {
                    rng.gen_range(1..=4)
                };
                let data: [u8; 4] = (seq * 100 + i).to_le_bytes();
                b.push(&Report::KeyWrite {
                    key: &key,
                    data: &data,
                    redundancy: n,
                    immediate: i % 5 == 0,
                })
                .unwrap();
                kw.apply(&key, &data, n, &mut img_kw).unwrap();
                writes += n as u64;
            } else {
                let c = rng.gen_range(0..1000u64);
                b.push(&Report::KeyIncrement {
                    key: &key,
                    counter: c,
                    redundancy: 2,
                    immediate: false,
                })
                .unwrap();
                ki.apply(&key, c, 2, &mut img_ki).unwrap();
                fetch_adds += 2;
            }
        }
        let len = b.finish();
        t.handle_datagram(&buf[..len], common::src(), now);
    }
    let image = |r: &Region| {
        let mut v = vec![0u8; r.mem().len() as usize];
        r.mem().read(0, &mut v).unwrap();
        v
    };
    assert_eq!(image(&regions[0]), img_kw.bytes, "Key-Write store");
    assert_eq!(image(&regions[1]), img_ki.bytes, "Key-Increment store");
    assert_eq!(regions[0].mem().tally(), img_kw.tally);
    assert_eq!(regions[1].mem().tally(), img_ki.tally);
    let s = t.stats();
    assert_eq!(s.writes.load(Relaxed), writes);
    assert_eq!(s.fetch_adds.load(Relaxed), fetch_adds);
    assert_eq!(s.total_rejected(), 0);
    assert!(writes > 0 && fetch_adds > 0);
}

/// A received batch through `handle_batch` (Key-Write and Key-Increment stages spanning its
/// datagrams; Append, prototype datagrams and reports no store takes in between) leaves every
/// store exactly as the same datagrams one at a time, with the same counters.
#[test]
fn a_batch_equals_its_datagrams_one_at_a_time() {
    let (dir, dir2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (regions, regions2) = (common::regions(dir.path()), common::regions(dir2.path()));
    let (mut t, mut t2) = (common::translator(&regions), common::translator(&regions2));
    let mut rng = rand::rngs::StdRng::seed_from_u64(0xBA7D);
    let now = Instant::now();
    let mut datagrams = vec![];
    for seq in 0..600u32 {
        if seq % 50 == 7 {
            // A prototype Key-Write between native datagrams (applied at once, in order).
            let key = rng.gen_range(0u32..40).to_be_bytes();
            let repr = dta_wire::prototype::Repr {
                base: dta_wire::prototype::BaseRepr {
                    opcode: Opcode::KeyWrite,
                    immediate: false,
                    retransmittable: false,
                    seqnum: None,
                },
                report: Report::KeyWrite {
                    key: &key,
                    data: &[7, 7, 7, 7],
                    redundancy: 2,
                    immediate: false,
                },
            };
            let mut buf = vec![0u8; 64];
            let format = dta_translator::TranslatorConfig::default()
                .prototype_header
                .into();
            let len = repr.emit(&mut buf, format).unwrap();
            buf.truncate(len);
            datagrams.push(buf);
            continue;
        }
        // Mostly Key-Write and Key-Increment, so stages fill across datagrams.
        let count = rng.gen_range(1..=45);
        let gens: Vec<Gen> = (0..count)
            .map(|_| {
                if rng.gen_bool(0.8) {
                    let k = rng.gen_range(0u32..40).to_be_bytes();
                    if rng.gen_bool(0.5) {
                        Gen::Kw4(k, rng.gen(), rng.gen_range(1..=4), false)
                    } else {
                        Gen::Ki(k, rng.gen_range(1..1000), dta_store::DEFAULT_REDUNDANCY)
                    }
                } else {
                    random_report(&mut rng)
                }
            })
            .collect();
        let mut buf = vec![0u8; 9000];
        let mut b = DatagramBuilder::new(&mut buf, Priority::Medium, false, 7, seq).unwrap();
        for g in &gens {
            b.push(&g.report()).unwrap();
        }
        let len = b.finish();
        buf.truncate(len);
        datagrams.push(buf);
    }
    for chunk in datagrams.chunks(13) {
        t.handle_batch(chunk.iter().map(|d| (&d[..], common::src())), now);
        for d in chunk {
            t2.handle_datagram(d, common::src(), now);
        }
    }
    t.flush_all();
    t2.flush_all();
    let image = |r: &dta_store::Region| {
        let mut v = vec![0u8; r.mem().len() as usize];
        r.mem().read(0, &mut v).unwrap();
        v
    };
    for (a, b) in regions.iter().zip(&regions2) {
        assert_eq!(image(a), image(b), "store {}", a.header().name);
    }
    let (s, s2) = (t.stats(), t2.stats());
    for op in [Opcode::KeyWrite, Opcode::KeyIncrement, Opcode::Append] {
        assert_eq!(s.reports_of(op), s2.reports_of(op), "{op:?}");
    }
    assert!(s.reports_of(Opcode::KeyWrite) > 3_000);
    for (what, x, y) in [
        ("writes", &s.writes, &s2.writes),
        ("write_bytes", &s.write_bytes, &s2.write_bytes),
        ("fetch_adds", &s.fetch_adds, &s2.fetch_adds),
        ("datagrams", &s.datagrams, &s2.datagrams),
    ] {
        assert_eq!(x.load(Relaxed), y.load(Relaxed), "{what}");
    }
    assert_eq!(s.total_rejected(), s2.total_rejected());
    assert_eq!(s.rejected("no_store"), s2.rejected("no_store"));
    assert!(s.rejected("no_store") > 0);
}

/// Datagrams of one shape (the lean path: every report the same primitive, key and data
/// lengths, at the store's N, none immediate) leave the image the layouts give report by
/// report and the counters a translator fed report by report counts; those the lean path
/// declines (another N, an immediate report, data of another length) go the general way among
/// them, in order; a store whose allow-list refuses the source counts every report once.
#[test]
fn one_shape_datagrams_equal_per_report_layouts() {
    let dir = tempfile::tempdir().unwrap();
    let regions = common::regions(dir.path());
    let mut t = common::translator(&regions);
    let dir2 = tempfile::tempdir().unwrap();
    let regions2 = common::regions(dir2.path());
    let mut t2 = common::translator(&regions2);
    let kw = KeyWriteLayout::new(regions[0].header()).unwrap();
    let ki = KeyIncrementLayout::new(regions[2].header()).unwrap();
    let mut img_kw = VecSink::new(regions[0].mem().len() as usize);
    let mut img_ki = VecSink::new(regions[2].mem().len() as usize);
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x1EA7);
    let now = Instant::now();
    for seq in 0..600u32 {
        let count = rng.gen_range(1..=100);
        let shape = rng.gen_range(0..6);
        let gens: Vec<Gen> = (0..count)
            .map(|i| {
                let k = rng.gen_range(0u32..50).to_be_bytes();
                match shape {
                    // At the stores' N: the lean path.
                    0 | 1 => Gen::Kw4(k, rng.gen(), kw.redundancy(), false),
                    2 | 3 => Gen::Ki(k, rng.gen(), ki.redundancy()),
                    // Declined: another N in one report, or one flagged immediate.
                    4 => Gen::Kw4(
                        k,
                        rng.gen(),
                        kw.redundancy() - (i == count / 2) as u8,
                        false,
                    ),
                    _ => Gen::Kw4(k, rng.gen(), kw.redundancy(), i == 0),
                }
            })
            .collect();
        let mut buf = vec![0u8; 9000];
        let mut b = DatagramBuilder::new(&mut buf, Priority::Medium, false, 7, seq).unwrap();
        for g in &gens {
            b.push(&g.report()).unwrap();
        }
        let len = b.finish();
        t.handle_datagram(&buf[..len], common::src(), now);
        for g in &gens {
            t2.apply(&g.report(), 7, common::src(), now);
            match g {
                Gen::Kw4(k, d, n, _) => kw.apply(k, d, *n, &mut img_kw).unwrap(),
                Gen::Ki(k, c, n) => ki.apply(k, *c, *n, &mut img_ki).unwrap(),
                _ => unreachable!(),
            }
        }
    }
    let image = |r: &dta_store::Region| {
        let mut v = vec![0u8; r.mem().len() as usize];
        r.mem().read(0, &mut v).unwrap();
        v
    };
    assert_eq!(image(&regions[0]), img_kw.bytes, "Key-Write store");
    assert_eq!(image(&regions[2]), img_ki.bytes, "Key-Increment store");
    assert_eq!(image(&regions[0]), image(&regions2[0]));
    assert_eq!(image(&regions[2]), image(&regions2[2]));
    let (s, s2) = (t.stats(), t2.stats());
    for op in [Opcode::KeyWrite, Opcode::KeyIncrement] {
        assert_eq!(s.reports_of(op), s2.reports_of(op), "{op:?}");
    }
    for (what, a, b) in [
        ("writes", &s.writes, &s2.writes),
        ("write_bytes", &s.write_bytes, &s2.write_bytes),
        ("fetch_adds", &s.fetch_adds, &s2.fetch_adds),
        ("immediates", &s.immediates, &s2.immediates),
    ] {
        assert_eq!(a.load(Relaxed), b.load(Relaxed), "{what}");
    }
    assert_eq!(s.total_rejected(), 0);
    // The stores' live counters (docs/regions.md §1) agree too.
    for i in [0, 2] {
        assert_eq!(regions[i].mem().tally(), regions2[i].mem().tally());
    }

    // A store whose allow-list refuses the source: every report refused, nothing written.
    let before = image(&regions[0]);
    let only = dta_wire::prefix::AllowList::new(vec!["10.9.9.9/32".parse().unwrap()]);
    t.set_store_allow("kw", only).unwrap();
    let mut buf = vec![0u8; 2000];
    let mut b = DatagramBuilder::new(&mut buf, Priority::Medium, false, 7, 600).unwrap();
    for i in 0u32..40 {
        b.push(&Gen::Kw4(i.to_be_bytes(), [1; 4], kw.redundancy(), false).report())
            .unwrap();
    }
    let len = b.finish();
    t.handle_datagram(&buf[..len], common::src(), now);
    assert_eq!(t.stats().rejected("source_not_allowed"), 40);
    assert_eq!(image(&regions[0]), before);
}

/// Postcarding datagrams of one shape take the lean path (each postcard into the path cache,
/// the chunks it lets go written a block at a time, the live counters added once per
/// datagram); the same postcards applied one by one through the general path must leave the
/// same chunks, the same counters and the same live counters, whatever the mix: complete paths,
/// paths cut short by their length, collisions in a small cache, a hop past B, datagrams the
/// lean path declines (a flagged postcard) whose flagged paths it later evicts.
#[test]
fn one_shape_postcards_equal_the_general_path() {
    let cfg = dta_translator::TranslatorConfig {
        postcard_cache_entries: 16,
        ..Default::default()
    };
    let make = |dir: &std::path::Path| {
        let regions = common::regions(dir);
        let t = dta_translator::Translator::colocated(
            &cfg,
            regions.clone(),
            std::sync::Arc::new(dta_translator::Stats::default()),
        )
        .unwrap();
        (regions, t)
    };
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (regions, mut lean) = make(d1.path());
    let (regions2, mut general) = make(d2.path());
    let paths = regions
        .iter()
        .position(|r| r.header().name == "paths")
        .unwrap();
    let hops = 5u8;
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x9057);
    let now = Instant::now();
    for seq in 0..400u32 {
        let count = rng.gen_range(1..=120);
        // One datagram in eight carries a flagged postcard: the lean path declines it.
        let flagged_at = (rng.gen_range(0..8) == 0).then(|| rng.gen_range(0..count));
        let postcards: Vec<([u8; 4], u8, u8, u32, bool)> = (0..count)
            .map(|i| {
                let key = rng.gen_range(0u32..40).to_be_bytes();
                // Hop B is past the store's hops: rejected on both paths.
                let hop = rng.gen_range(0..=hops);
                let path_len = if rng.gen_range(0..4) == 0 { 3 } else { 0 };
                (key, hop, path_len, rng.gen(), flagged_at == Some(i))
            })
            .collect();
        fn report(p: &([u8; 4], u8, u8, u32, bool)) -> Report<'_> {
            Report::Postcard {
                key: &p.0[..],
                hop: p.1,
                path_len: p.2,
                value: p.3 & 0xffff,
                immediate: p.4,
            }
        }
        let mut buf = vec![0u8; 9000];
        let mut b = DatagramBuilder::new(&mut buf, Priority::Medium, false, 7, seq).unwrap();
        for p in &postcards {
            b.push(&report(p)).unwrap();
        }
        let len = b.finish();
        lean.handle_datagram(&buf[..len], common::src(), now);
        for p in &postcards {
            general.apply(&report(p), 7, common::src(), now);
        }
    }
    // The paths still in the caches, then the bytes.
    lean.flush_all();
    general.flush_all();
    let image = |r: &dta_store::Region| {
        let mut v = vec![0u8; r.mem().len() as usize];
        r.mem().read(0, &mut v).unwrap();
        v
    };
    assert_eq!(image(&regions[paths]), image(&regions2[paths]));
    assert!(
        image(&regions[paths]).iter().any(|&b| b != 0),
        "chunks were written"
    );
    assert_eq!(regions[paths].mem().tally(), regions2[paths].mem().tally());
    let (s, s2) = (lean.stats(), general.stats());
    assert_eq!(
        s.reports_of(Opcode::Postcarding),
        s2.reports_of(Opcode::Postcarding)
    );
    for (what, a, b) in [
        ("writes", &s.writes, &s2.writes),
        ("write_bytes", &s.write_bytes, &s2.write_bytes),
        ("immediates", &s.immediates, &s2.immediates),
        (
            "complete",
            &s.postcard_chunks_complete,
            &s2.postcard_chunks_complete,
        ),
        (
            "collision",
            &s.postcard_chunks_collision,
            &s2.postcard_chunks_collision,
        ),
        (
            "timeout",
            &s.postcard_chunks_timeout,
            &s2.postcard_chunks_timeout,
        ),
    ] {
        assert_eq!(a.load(Relaxed), b.load(Relaxed), "{what}");
    }
    assert!(
        s.postcard_chunks_collision.load(Relaxed) > 0,
        "collisions exercised"
    );
    assert!(s.rejected("bad_hop") > 0, "hops past B exercised");
    assert_eq!(s.rejected("bad_hop"), s2.rejected("bad_hop"));
    assert_eq!(s.total_rejected(), s2.total_rejected());
}

/// Append datagrams of one shape take the lean path (each entry straight into the slot its list
/// reserves, a head published per complete batch); the same entries applied one by one through
/// the general path leave the same rings, heads and counters, with lists past the store's
/// refused on both and flagged datagrams (declined by the lean path) between them.
#[test]
fn one_shape_appends_equal_the_general_path() {
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (regions, regions2) = (common::regions(d1.path()), common::regions(d2.path()));
    let (mut lean, mut general) = (common::translator(&regions), common::translator(&regions2));
    let events = regions
        .iter()
        .position(|r| r.header().name == "events")
        .unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0xA99E);
    let now = Instant::now();
    for seq in 0..300u32 {
        let count = rng.gen_range(1..=150);
        let flagged_at = (rng.gen_range(0..8) == 0).then(|| rng.gen_range(0..count));
        // Lists 0..4 exist; 4 and 5 do not.
        let entries: Vec<(u32, [u8; 4], bool)> = (0..count)
            .map(|i| (rng.gen_range(0..6), rng.gen(), flagged_at == Some(i)))
            .collect();
        let mut buf = vec![0u8; 9000];
        let mut b = DatagramBuilder::new(&mut buf, Priority::Medium, false, 7, seq).unwrap();
        for (list_id, data, immediate) in &entries {
            b.push(&Report::Append {
                list_id: *list_id,
                data,
                immediate: *immediate,
            })
            .unwrap();
        }
        let len = b.finish();
        lean.handle_datagram(&buf[..len], common::src(), now);
        for (list_id, data, immediate) in &entries {
            let r = Report::Append {
                list_id: *list_id,
                data,
                immediate: *immediate,
            };
            general.apply(&r, 7, common::src(), now);
        }
    }
    let image = |r: &dta_store::Region| {
        let mut v = vec![0u8; r.mem().len() as usize];
        r.mem().read(0, &mut v).unwrap();
        v
    };
    let compare = |lean: &dta_translator::Translator<_>,
                   general: &dta_translator::Translator<_>| {
        assert_eq!(image(&regions[events]), image(&regions2[events]));
        let (s, s2) = (lean.stats(), general.stats());
        assert_eq!(s.reports_of(Opcode::Append), s2.reports_of(Opcode::Append));
        for (what, a, b) in [
            ("writes", &s.writes, &s2.writes),
            ("write_bytes", &s.write_bytes, &s2.write_bytes),
            ("immediates", &s.immediates, &s2.immediates),
            ("batches", &s.append_batches, &s2.append_batches),
            (
                "partial batches",
                &s.append_partial_batches,
                &s2.append_partial_batches,
            ),
        ] {
            assert_eq!(a.load(Relaxed), b.load(Relaxed), "{what}");
        }
        assert!(
            s.rejected("bad_list_id") > 0,
            "lists past the store exercised"
        );
        assert_eq!(s.rejected("bad_list_id"), s2.rejected("bad_list_id"));
        assert_eq!(s.total_rejected(), s2.total_rejected());
        assert_eq!(
            regions[events].mem().tally(),
            regions2[events].mem().tally()
        );
    };
    compare(&lean, &general);
    assert!(lean.stats().append_batches.load(Relaxed) > 0);
    // The partial batches, published on both.
    lean.flush_all();
    general.flush_all();
    compare(&lean, &general);
}
