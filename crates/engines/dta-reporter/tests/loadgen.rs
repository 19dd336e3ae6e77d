//! The load generator: what arrives is what `keys` says, pacing holds the rate, Zipf is skewed.

mod common;

use std::cell::Cell;
use std::collections::HashMap;
use std::time::Duration;

use common::{config, Sink};
use dta_reporter::keys::{append_list, key_vec};
use dta_reporter::loadgen::{
    self, build_count_min, expected_counter, expected_data, key_indices, postcard_value, KeyDist,
    LoadError, LoadSpec,
};
use dta_reporter::{Protocol, Reporter};
use dta_wire::prototype::BaseFormat;
use dta_wire::{parse, Datagram, Opcode, Report};

/// Every report in the received datagrams, as owned (opcode, key-or-list, data, extra).
fn decode(got: &[Vec<u8>], format: BaseFormat) -> Vec<(Opcode, Vec<u8>, Vec<u8>, u64)> {
    let mut out = vec![];
    for d in got {
        let reps: Vec<Report> = match parse(d, format).unwrap() {
            Datagram::Native(n) => n.reports().collect(),
            Datagram::Prototype(p) => vec![p.report],
        };
        for r in reps {
            out.push(match r {
                Report::KeyWrite {
                    key,
                    data,
                    redundancy,
                    ..
                } => (
                    Opcode::KeyWrite,
                    key.to_vec(),
                    data.to_vec(),
                    redundancy as u64,
                ),
                Report::KeyIncrement { key, counter, .. } => {
                    (Opcode::KeyIncrement, key.to_vec(), vec![], counter)
                }
                Report::Append { list_id, data, .. } => (
                    Opcode::Append,
                    list_id.to_be_bytes().to_vec(),
                    data.to_vec(),
                    0,
                ),
                Report::Postcard {
                    key,
                    hop,
                    path_len,
                    value,
                    ..
                } => (
                    Opcode::Postcarding,
                    key.to_vec(),
                    value.to_be_bytes().to_vec(),
                    (hop as u64) << 8 | path_len as u64,
                ),
                Report::SketchColumn { column, data, .. } => {
                    (Opcode::SketchMerge, vec![], data.to_vec(), column as u64)
                }
            });
        }
    }
    out
}

fn native(sink: &Sink) -> Reporter {
    Reporter::new(config(sink.addr, Protocol::Native { reporter_id: 3 })).unwrap()
}

#[test]
fn key_writes_carry_the_replayable_keys_and_derived_data() {
    let sink = Sink::start();
    let mut r = native(&sink);
    let mut spec = LoadSpec::new(Opcode::KeyWrite);
    spec.count = Some(3000);
    spec.keys = KeyDist::Zipf { n: 500, s: 1.1 };
    spec.key_len = 13;
    spec.data_len = 20;
    spec.redundancy = 3;
    spec.seed = 42;
    let calls = Cell::new(0);
    let stats = loadgen::run(&spec, &mut r, &|p| {
        calls.set(calls.get() + 1);
        assert!(p.reports <= 3000);
    })
    .unwrap();
    assert!(calls.get() >= 1, "progress is reported at least at the end");
    assert_eq!(stats.reports, 3000);
    drop(r);
    let got = sink.finish();
    assert_eq!(stats.datagrams, got.len() as u64);
    let reports = decode(&got, BaseFormat::Short);
    assert_eq!(reports.len(), 3000);
    let replay: Vec<u64> = key_indices(&spec).unwrap().take(3000).collect();
    for ((op, key, data, red), i) in reports.iter().zip(&replay) {
        assert_eq!(*op, Opcode::KeyWrite);
        assert_eq!(key, &key_vec(*i, 13));
        assert_eq!(data, &expected_data(key, 20));
        assert_eq!(*red, 3);
    }
}

#[test]
fn increments_appends_and_postcard_paths() {
    // Key-Increment over the prototype (long header).
    let sink = Sink::start();
    let mut r = Reporter::new(config(sink.addr, Protocol::Prototype(BaseFormat::Long))).unwrap();
    let mut spec = LoadSpec::new(Opcode::KeyIncrement);
    spec.count = Some(200);
    spec.rate = Some(20_000.0); // gentle on the receiver: one report per datagram
    let stats = loadgen::run(&spec, &mut r, &|_| {}).unwrap();
    assert_eq!((stats.reports, stats.datagrams), (200, 200));
    let got = sink.finish();
    let replay: Vec<u64> = key_indices(&spec).unwrap().take(200).collect();
    for ((op, key, _, counter), i) in decode(&got, BaseFormat::Long).iter().zip(&replay) {
        assert_eq!(*op, Opcode::KeyIncrement);
        assert_eq!(key, &key_vec(*i, 4));
        assert_eq!(*counter, expected_counter(key));
    }

    // Append over 4 lists from list 10, 8-byte entries.
    let sink = Sink::start();
    let mut r = native(&sink);
    let mut spec = LoadSpec::new(Opcode::Append);
    spec.count = Some(400);
    spec.lists = 4;
    spec.first_list = 10;
    spec.data_len = 8;
    loadgen::run(&spec, &mut r, &|_| {}).unwrap();
    drop(r);
    let got = decode(&sink.finish(), BaseFormat::Short);
    assert_eq!(got.len(), 400);
    let replay: Vec<u64> = key_indices(&spec).unwrap().take(400).collect();
    for ((_, list, data, _), i) in got.iter().zip(&replay) {
        assert_eq!(list, &append_list(*i, 10, 4).to_be_bytes());
        assert_eq!(data, &expected_data(&key_vec(*i, 4), 8));
    }

    // Postcarding: count 7 reports of 3-hop paths is rounded up to 3 whole paths.
    let sink = Sink::start();
    let mut r = native(&sink);
    let mut spec = LoadSpec::new(Opcode::Postcarding);
    spec.count = Some(7);
    spec.hops = 3;
    spec.key_len = 13;
    let stats = loadgen::run(&spec, &mut r, &|_| {}).unwrap();
    assert_eq!(stats.reports, 9);
    drop(r);
    let got = decode(&sink.finish(), BaseFormat::Short);
    let flows: Vec<u64> = key_indices(&spec).unwrap().take(3).collect();
    assert_eq!(got.len(), 9);
    for (j, (_, key, value, hp)) in got.iter().enumerate() {
        let hop = (j % 3) as u8;
        assert_eq!(key, &key_vec(flows[j / 3], 13));
        assert_eq!(*hp, (hop as u64) << 8 | 3, "hop {hop} of a 3-hop path");
        assert_eq!(
            value,
            &postcard_value(key, hop, spec.postcard_values).to_be_bytes()
        );
    }
}

#[test]
fn pacing_respects_the_rate() {
    let sink = Sink::start();
    let mut r = native(&sink);
    let mut spec = LoadSpec::new(Opcode::KeyWrite);
    let (count, rate) = (1500u64, 5000.0);
    spec.count = Some(count);
    spec.rate = Some(rate);
    let stats = loadgen::run(&spec, &mut r, &|_| {}).unwrap();
    assert_eq!(stats.reports, count);
    let min = count as f64 / rate * 0.8;
    assert!(
        stats.elapsed.as_secs_f64() >= min,
        "{count} reports at {rate}/s took {:?}, less than {min}s",
        stats.elapsed
    );
    assert!(stats.rate() <= rate * 1.25, "rate {}", stats.rate());
    drop(r);
    assert_eq!(
        decode(&sink.finish(), BaseFormat::Short).len() as u64,
        count
    );
}

#[test]
fn duration_bounds_a_paced_run() {
    let sink = Sink::start();
    let mut r = native(&sink);
    let mut spec = LoadSpec::new(Opcode::KeyIncrement);
    spec.duration = Some(Duration::from_millis(300));
    spec.rate = Some(2000.0);
    let stats = loadgen::run(&spec, &mut r, &|_| {}).unwrap();
    let secs = stats.elapsed.as_secs_f64();
    assert!(secs >= 0.3 * 0.8, "{secs}");
    // At most the rate over the time taken, plus one batch.
    assert!(stats.reports as f64 <= 2000.0 * secs + 2.0, "{stats:?}");
    assert!(stats.reports > 0);
}

#[test]
fn zipf_keys_are_skewed_rank_one_first() {
    let mut spec = LoadSpec::new(Opcode::KeyWrite);
    spec.keys = KeyDist::Zipf { n: 1000, s: 1.2 };
    spec.seed = 7;
    let draws = 200_000;
    let mut freq: HashMap<u64, u64> = HashMap::new();
    for i in key_indices(&spec).unwrap().take(draws) {
        *freq.entry(i).or_default() += 1;
    }
    let f = |i: u64| *freq.get(&i).unwrap_or(&0) as f64;
    let top = freq
        .iter()
        .max_by_key(|(_, &c)| c)
        .map(|(&k, _)| k)
        .unwrap();
    assert_eq!(top, 0, "rank 1 (key 0) is the most frequent");
    assert!(f(0) > f(1) && f(1) > f(2) && f(2) > f(9) && f(9) > f(99));
    // P(rank r) ∝ r^-s: f(1)/f(2) = 2^1.2 ≈ 2.30.
    let ratio = f(0) / f(1);
    assert!((ratio - 2f64.powf(1.2)).abs() < 0.2, "ratio {ratio}");
    // Uniform, for contrast: no key is far above the mean.
    let mut spec = LoadSpec::new(Opcode::KeyWrite);
    spec.keys = KeyDist::Uniform { n: 1000 };
    let mut freq: HashMap<u64, u64> = HashMap::new();
    for i in key_indices(&spec).unwrap().take(draws) {
        *freq.entry(i).or_default() += 1;
    }
    assert_eq!(freq.len(), 1000);
    assert!(*freq.values().max().unwrap() < 2 * draws as u64 / 1000);
    // The same seed replays the same keys; another seed does not.
    let a: Vec<u64> = key_indices(&spec).unwrap().take(50).collect();
    assert_eq!(a, key_indices(&spec).unwrap().take(50).collect::<Vec<_>>());
    spec.seed = 2;
    assert_ne!(a, key_indices(&spec).unwrap().take(50).collect::<Vec<_>>());
}

#[test]
fn sketch_merge_sends_the_count_min_of_the_drawn_keys() {
    let sink = Sink::start();
    let mut r = native(&sink);
    let mut spec = LoadSpec::new(Opcode::SketchMerge);
    spec.count = Some(5000);
    spec.sketch_rows = 4;
    spec.sketch_columns = 64;
    spec.sketch_id = 9;
    spec.epoch = 4;
    spec.linger = Duration::from_millis(30);
    let stats = loadgen::run(&spec, &mut r, &|_| {}).unwrap();
    let sk = stats.sketch.unwrap();
    assert_eq!((sk.columns_sent, sk.restarts, sk.complete), (64, 0, true));
    assert_eq!(stats.reports, 64);
    drop(r);
    let cm = build_count_min(&spec).unwrap();
    // Every key occurrence added 1 to each row.
    assert_eq!((0..64).map(|c| cm.column(c)[0] as u64).sum::<u64>(), 5000);
    let got = decode(&sink.finish(), BaseFormat::Short);
    assert_eq!(got.len(), 64);
    for (c, (op, _, data, col)) in got.iter().enumerate() {
        assert_eq!((*op, *col), (Opcode::SketchMerge, c as u64));
        let mut want = vec![0u8; 16];
        cm.column_wire(c as u32, &mut want);
        assert_eq!(data, &want);
    }
}

#[test]
fn invalid_specs_are_rejected() {
    let to = "127.0.0.1:9".parse().unwrap();
    let mut proto = Reporter::new(config(to, Protocol::Prototype(BaseFormat::Short))).unwrap();
    let mut spec = LoadSpec::new(Opcode::KeyWrite);
    spec.count = Some(1);
    spec.key_len = 8;
    assert!(matches!(
        loadgen::run(&spec, &mut proto, &|_| {}),
        Err(LoadError::Spec(_))
    ));
    spec.key_len = 4;
    spec.data_len = 8;
    assert!(matches!(
        loadgen::run(&spec, &mut proto, &|_| {}),
        Err(LoadError::Spec(_))
    ));
    let mut spec = LoadSpec::new(Opcode::SketchMerge);
    spec.count = Some(1);
    assert!(matches!(
        loadgen::run(&spec, &mut proto, &|_| {}),
        Err(LoadError::Spec(_))
    ));
    let mut spec = LoadSpec::new(Opcode::KeyWrite);
    assert!(spec.validate(Protocol::Native { reporter_id: 1 }).is_err()); // no count/duration
    spec.count = Some(1);
    spec.keys = KeyDist::Uniform { n: 70_000 };
    spec.key_len = 2;
    assert!(spec.validate(Protocol::Native { reporter_id: 1 }).is_err());
    spec.keys = KeyDist::Zipf { n: 10, s: -1.0 };
    spec.key_len = 4;
    assert!(matches!(
        spec.validate(Protocol::Native { reporter_id: 1 }),
        Err(LoadError::Keys(_))
    ));
    assert_eq!(proto.stats().datagrams, 0);
}

/// The in-memory datagrams of a raw run carry the same reports, in the same order, as a
/// socket run would send: the keys `key_indices` yields, whole paths per datagram, every
/// datagram within a 1500-byte frame.
#[test]
fn native_datagrams_carry_the_runs_reports() {
    use dta_reporter::loadgen::{key_indices, native_datagrams, MAX_UDP_PAYLOAD};
    use dta_wire::{native::Datagram, Opcode, Priority, Report};

    let mut spec = LoadSpec::new(Opcode::KeyWrite);
    spec.key_len = 13;
    spec.data_len = 64;
    spec.keys = KeyDist::Uniform { n: 1000 };
    let ds = native_datagrams(&spec, 9, Priority::High, 32, 10).unwrap();
    assert_eq!(ds.len(), 10);
    let mut keys = key_indices(&spec).unwrap();
    let mut total = 0;
    for (seq, d) in ds.iter().enumerate() {
        assert!(d.len() <= MAX_UDP_PAYLOAD, "{} bytes", d.len());
        let dg = Datagram::parse(d).unwrap();
        assert_eq!(dg.header.reporter_id, 9);
        assert_eq!(dg.header.seq, seq as u32);
        assert_eq!(dg.header.priority, Priority::High);
        // 81-byte reports: 18 fit in a frame (12 + 18 x 81 = 1470 <= 1472), not the 32 asked.
        assert_eq!(dg.header.count, 18);
        for r in dg.reports() {
            let Report::KeyWrite { key, data, .. } = r else {
                panic!("{r:?}")
            };
            let want = dta_reporter::loadgen::key_vec(keys.next().unwrap(), 13);
            assert_eq!(key, &want[..]);
            assert_eq!(data, &dta_reporter::loadgen::expected_data(key, 64)[..]);
            total += 1;
        }
    }
    assert_eq!(total, 180);

    let mut spec = LoadSpec::new(Opcode::Postcarding);
    spec.hops = 5;
    let ds = native_datagrams(&spec, 1, Priority::Medium, 32, 3).unwrap();
    for d in &ds {
        let dg = Datagram::parse(d).unwrap();
        assert_eq!(dg.header.count, 30, "whole paths of 5");
    }
    let sketch = LoadSpec::new(Opcode::SketchMerge);
    assert!(native_datagrams(&sketch, 1, Priority::Medium, 32, 1).is_err());
}
