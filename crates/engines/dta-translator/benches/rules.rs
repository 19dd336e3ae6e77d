//! Translator rules and push notifications (docs/benchmarks.md "Translator rules and push
//! notifications"):
//!
//! 1. `cost`: ns per report applied on one core, native datagrams of 32 reports, with rule sets
//!    of growing cost against the same datagrams with no rules (the same run's baseline):
//!    Key-Increment with 1 and 32 non-matching rules (each with 4 field tests), a window
//!    COUNT rule matching every report, and Postcarding with the `SUM(latency) > T` path rule.
//! 2. `notify`: latency from handing a flagged Key-Write report to the translator to a
//!    subscriber (another thread, asleep on the ring's futex) holding its notice; percentiles.
//!
//! `cargo bench -p dta-translator --bench rules -- [--reports N] [--runs N] [--notices N]`

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use dta_store::notify::{NotifyRing, DEFAULT_CAPACITY};
use dta_store::{
    AppendSpec, HashScheme, KeyIncrementSpec, KeyWriteSpec, PostcardingSpec, Region, StoreSpec,
};
use dta_testkit::bench::{median, Rng};
use dta_translator::rules::RuleConfig;
use dta_translator::{RegionSinks, Stats, Translator, TranslatorConfig};
use dta_wire::native::DatagramBuilder;
use dta_wire::{Priority, Report};

fn arg(name: &str, default: usize) -> usize {
    let a: Vec<String> = std::env::args().collect();
    a.iter()
        .position(|x| x == name)
        .and_then(|i| a.get(i + 1))
        .map(|v| v.parse().expect("a number"))
        .unwrap_or(default)
}

fn regions(dir: &std::path::Path) -> Vec<Arc<Region>> {
    let specs = [
        (
            "kw",
            StoreSpec::KeyWrite(KeyWriteSpec {
                slots: 1 << 20,
                key_len: 4,
                data_len: 8,
                hash: HashScheme::Native,
                redundancy: 2,
            }),
        ),
        (
            "ki",
            StoreSpec::KeyIncrement(KeyIncrementSpec {
                counters: 1 << 20,
                key_len: 4,
                hash: HashScheme::Native,
                redundancy: 2,
                windows: 0,
                window_ms: 0,
            }),
        ),
        (
            "paths",
            StoreSpec::Postcarding(PostcardingSpec {
                chunks: 1 << 18,
                hops: 5,
                slot_bits: 32,
                redundancy: 1,
                key_len: 4,
            }),
        ),
        (
            "out",
            StoreSpec::Append(AppendSpec {
                lists: 2,
                capacity: 1 << 20,
                entry_len: 16,
                batch: 16,
                record: Default::default(),
            }),
        ),
    ];
    specs
        .iter()
        .map(|(n, s)| {
            Arc::new(Region::create(&dir.join(format!("{n}.region")), n, s, true).unwrap())
        })
        .collect()
}

fn rules(text: &str) -> Vec<RuleConfig> {
    if text.is_empty() {
        return vec![];
    }
    toml::from_str::<toml::Table>(text).unwrap()["rules"]
        .clone()
        .try_into()
        .unwrap()
}

fn translator(regions: &[Arc<Region>], rules: Vec<RuleConfig>) -> Translator<RegionSinks> {
    let cfg = TranslatorConfig {
        rules,
        postcard_cache_entries: 1 << 16,
        ..TranslatorConfig::default()
    };
    Translator::colocated(&cfg, regions.to_vec(), Arc::new(Stats::default())).unwrap()
}

/// Datagrams of 32 Key-Increment reports, or of 5-hop paths' postcards (latencies 0..400).
fn datagrams(prim: &str, n: usize) -> Vec<Vec<u8>> {
    let mut rng = Rng(0x5eed);
    let keys: Vec<[u8; 4]> = (0..n).map(|_| (rng.next() as u32).to_be_bytes()).collect();
    let mut out = vec![];
    let mut buf = vec![0u8; 1500];
    for (c, chunk) in keys.chunks(32).enumerate() {
        let mut b = DatagramBuilder::new(&mut buf, Priority::Medium, false, 1, c as u32).unwrap();
        for (j, k) in chunk.iter().enumerate() {
            let i = c * 32 + j;
            let r = match prim {
                "ki" => Report::KeyIncrement {
                    key: k,
                    counter: 1,
                    redundancy: 2,
                    immediate: false,
                },
                _ => Report::Postcard {
                    key: &keys[i / 5 * 5],
                    hop: (i % 5) as u8,
                    path_len: 5,
                    value: rng.below(400) as u32,
                    immediate: false,
                },
            };
            b.push(&r).unwrap();
        }
        let len = b.finish();
        out.push(buf[..len].to_vec());
    }
    out
}

/// ns per report of applying `d` once with rule set `set`.
fn ns_per_report(regions: &[Arc<Region>], set: &str, d: &[Vec<u8>], reports: usize) -> f64 {
    let src = "127.0.0.1:9".parse().unwrap();
    let mut t = translator(regions, rules(set));
    let now = Instant::now();
    let t0 = Instant::now();
    for x in d {
        t.handle_datagram(x, src, now);
    }
    t.flush_all();
    t0.elapsed().as_nanos() as f64 / reports as f64
}

fn cost(regions: &[Arc<Region>], reports: usize, runs: usize) {
    let nomatch = |i: usize| {
        format!(
            "[[rules]]\nname = 'r{i}'\nprimitive = 'key-increment'\nkey_prefix = 'ffffff{i:02x}'\n\
             fields = [{{offset = 0, width = 8, op = 'eq', value = 7}}, \
             {{offset = 0, width = 4, op = 'gt', value = 1}}, \
             {{offset = 4, width = 4, op = 'lt', value = 1}}, \
             {{offset = 2, width = 2, op = 'ne', value = 1}}]\naction = 'drop'\n"
        )
    };
    let one = nomatch(0);
    let all: String = (0..32).map(nomatch).collect();
    let window = "[[rules]]\nname = 'heavy'\nprimitive = 'key-increment'\naggregate = 'count'\n\
                  over = 'window'\nwindow_ms = 1000\nwhen = { op = 'ge', value = 1000000 }\n\
                  action = 'append'\nlist = 0\n";
    let path = "[[rules]]\nname = 'slow'\nprimitive = 'postcarding'\nstore = 'paths'\n\
                aggregate = 'sum'\nover = 'path'\nwhen = { op = 'gt', value = 1000 }\n\
                action = 'append'\nlist = 0\nentry = 'key_value'\n";
    let ki = datagrams("ki", reports);
    let pc = datagrams("pc", reports);
    let cases: [(&str, &str, &Vec<Vec<u8>>); 6] = [
        ("key_increment, no rules", "", &ki),
        ("key_increment, 1 rule, no match (4 field tests)", &one, &ki),
        (
            "key_increment, 32 rules, no match (4 field tests)",
            &all,
            &ki,
        ),
        ("key_increment, window COUNT, every report", window, &ki),
        ("postcarding, no rules", "", &pc),
        ("postcarding, SUM(latency) > T path rule", path, &pc),
    ];
    // One untimed pass touches every page of the regions; then the cases take turns, run
    // after run, so a change in the machine's load falls on all of them alike.
    for (_, set, d) in &cases {
        ns_per_report(regions, set, d, reports);
    }
    let mut ns: Vec<Vec<f64>> = vec![vec![]; cases.len()];
    for _ in 0..runs {
        for (i, (_, set, d)) in cases.iter().enumerate() {
            ns[i].push(ns_per_report(regions, set, d, reports));
        }
    }
    let ns: Vec<f64> = ns.into_iter().map(median).collect();
    println!("rule cost, {reports} reports, median of {runs} runs (ns/report; ratio to no rules)");
    for (i, (what, _, _)) in cases.iter().enumerate() {
        let base = if i < 4 { ns[0] } else { ns[4] };
        println!(
            "  {what:<52} {:>7.1}  {:.2}x  ({:+.1} ns)",
            ns[i],
            ns[i] / base,
            ns[i] - base
        );
    }
}

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

fn notify(dir: &std::path::Path, regions: &[Arc<Region>], n: usize) {
    let mut t = translator(regions, vec![]);
    let ring = Arc::new(NotifyRing::open_or_create(dir, DEFAULT_CAPACITY).unwrap());
    dta_translator::Sinks::set_ring(t.sinks_mut(), ring.clone());
    let reader = NotifyRing::open(dir).unwrap();
    let sent: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
    let src = "127.0.0.1:9".parse().unwrap();
    let lat = std::thread::scope(|s| {
        let sent2 = sent.clone();
        let mut cursor = reader.subscribe();
        let reader = &reader;
        let h = s.spawn(move || {
            let mut lat = Vec::with_capacity(n);
            while lat.len() < n {
                let Some(notice) = reader.next(&mut cursor, Duration::from_secs(5)) else {
                    break;
                };
                let now = unix_ns();
                let k = u32::from_str_radix(&notice.key, 16).unwrap() as usize;
                lat.push(now.saturating_sub(sent2[k].load(Relaxed)) as f64 / 1000.0);
            }
            lat
        });
        let mut buf = vec![0u8; 1500];
        for i in 0..n {
            let key = (i as u32).to_be_bytes();
            let data = [0u8; 8];
            let mut b =
                DatagramBuilder::new(&mut buf, Priority::Medium, false, 1, i as u32).unwrap();
            b.push(&Report::KeyWrite {
                key: &key,
                data: &data,
                redundancy: 2,
                immediate: true,
            })
            .unwrap();
            let len = b.finish();
            sent[i].store(unix_ns(), Relaxed);
            t.handle_datagram(&buf[..len], src, Instant::now());
            // Let the subscriber go back to sleep: each notice wakes it from the futex.
            std::thread::sleep(Duration::from_micros(200));
        }
        h.join().unwrap()
    });
    let mut l = lat;
    l.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let p = |q: f64| l[((l.len() as f64 - 1.0) * q) as usize];
    println!(
        "notification latency, {} flagged Key-Write reports (us): p50 {:.1}  p90 {:.1}  p99 {:.1}  max {:.1}",
        l.len(),
        p(0.5),
        p(0.9),
        p(0.99),
        p(1.0)
    );
}

fn main() {
    let reports = arg("--reports", 1 << 20);
    let runs = arg("--runs", 5);
    let notices = arg("--notices", 5000);
    let base = if std::path::Path::new("/dev/shm").is_dir() {
        "/dev/shm"
    } else {
        "/tmp"
    };
    let dir = tempfile::tempdir_in(base).unwrap();
    let regions = regions(dir.path());
    cost(&regions, reports, runs);
    notify(dir.path(), &regions, notices);
}
