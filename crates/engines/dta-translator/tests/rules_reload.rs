//! A rule reload under load loses no report: one thread translates a stream of Key-Increment
//! reports while another replaces the rule set as fast as it can, alternating two sets that
//! both append every report's key to a list. Every report is applied once and derives exactly
//! one entry, whichever set it met.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

use dta_store::{
    AppendLayout, AppendSpec, HashScheme, KeyIncrementSpec, Region, StoreSpec, DEFAULT_REDUNDANCY,
};
use dta_translator::rules::RuleConfig;
use dta_translator::{Stats, Translator, TranslatorConfig};
use dta_wire::native::DatagramBuilder;
use dta_wire::{Opcode, Priority, Report};

const REPORTS: u32 = 100_000;
const PER_DATAGRAM: u32 = 32;

fn specs() -> Vec<(&'static str, StoreSpec)> {
    vec![
        (
            "ki",
            StoreSpec::KeyIncrement(KeyIncrementSpec {
                counters: 1 << 12,
                key_len: 4,
                hash: HashScheme::Native,
                redundancy: DEFAULT_REDUNDANCY,
                windows: 0,
                window_ms: 0,
            }),
        ),
        (
            "seen",
            StoreSpec::Append(AppendSpec {
                lists: 2,
                capacity: 1 << 17,
                entry_len: 16,
                batch: 4,
                record: Default::default(),
            }),
        ),
    ]
}

fn rule(toml_text: &str) -> Vec<RuleConfig> {
    #[derive(serde::Deserialize)]
    struct F {
        rules: Vec<RuleConfig>,
    }
    toml::from_str::<F>(toml_text).unwrap().rules
}

#[test]
fn a_reload_under_load_loses_and_doubles_no_report() {
    let dir = tempfile::tempdir().unwrap();
    let specs = specs();
    let regions: Vec<Arc<Region>> = specs
        .iter()
        .map(|(n, s)| {
            Arc::new(Region::create(&dir.path().join(format!("{n}.region")), n, s, true).unwrap())
        })
        .collect();
    let cat: Vec<_> = specs.iter().map(|(n, s)| (*n, s)).collect();
    let a = rule(
        "[[rules]]\nname = 'a'\nprimitive = 'key-increment'\naction = 'append'\nlist = 0\nentry = 'key'\n",
    );
    // The same effect written differently (a mask matching every key, a field always true).
    let b = rule(
        "[[rules]]\nname = 'b'\nprimitive = 'key-increment'\nkey_mask = '00'\nkey_value = '00'\n\
         fields = [{ offset = 0, width = 8, op = 'ge', value = 0 }]\naction = 'append'\nlist = 0\n",
    );
    let cfg = TranslatorConfig {
        rules: a.clone(),
        ..TranslatorConfig::default()
    };
    let stats = Arc::new(Stats::default());
    let mut t = Translator::colocated(&cfg, regions.clone(), stats.clone()).unwrap();
    let rules = t.rules().clone();

    let datagrams: Vec<Vec<u8>> = (0..REPORTS / PER_DATAGRAM)
        .map(|d| {
            let mut buf = vec![0u8; 1500];
            let mut bld = DatagramBuilder::new(&mut buf, Priority::Medium, false, 1, d).unwrap();
            let keys: Vec<[u8; 4]> = (0..PER_DATAGRAM)
                .map(|i| (d * PER_DATAGRAM + i).to_be_bytes())
                .collect();
            for k in &keys {
                bld.push(&Report::KeyIncrement {
                    key: k,
                    counter: 1,
                    redundancy: DEFAULT_REDUNDANCY,
                    immediate: false,
                })
                .unwrap();
            }
            let n = bld.finish();
            buf.truncate(n);
            buf
        })
        .collect();

    let done = AtomicBool::new(false);
    let reloads = std::thread::scope(|s| {
        let reloader = s.spawn(|| {
            let mut n = 0u64;
            while !done.load(Relaxed) {
                let set = if n % 2 == 0 { &b } else { &a };
                rules.replace(set, &cat).unwrap();
                n += 1;
                std::thread::yield_now();
            }
            n
        });
        let src = "127.0.0.1:5555".parse().unwrap();
        for (i, d) in datagrams.iter().enumerate() {
            // However the threads are scheduled, reloads land all along the stream: every
            // 100 datagrams, wait for the next one.
            if i % 100 == 0 {
                let r0 = rules.stats().reloads.load(Relaxed);
                while rules.stats().reloads.load(Relaxed) == r0 {
                    std::thread::yield_now();
                }
            }
            t.handle_datagram(d, src, Instant::now());
        }
        t.flush_all();
        done.store(true, Relaxed);
        reloader.join().unwrap()
    });
    let spread = datagrams.len() as u64 / 100;
    assert!(reloads >= spread, "{reloads} reloads during the stream");
    assert_eq!(
        stats.reports_of(Opcode::KeyIncrement),
        REPORTS as u64,
        "every report applied"
    );

    let seen = &regions[1];
    let layout = AppendLayout::new(seen.header()).unwrap();
    let head = seen.mem().load_u64(layout.head_offset(0)).unwrap();
    assert_eq!(head, REPORTS as u64, "one entry per report");
    let q = dta_store::append::ListReader::new(layout.clone(), 0, 0, 1).unwrap();
    let mut reader = q.with_tail(0);
    let mut buf = vec![];
    reader.poll(seen.mem(), REPORTS as usize, &mut buf);
    let keys: HashSet<u32> = buf
        .chunks(16)
        .map(|e| u32::from_be_bytes(e[..4].try_into().unwrap()))
        .collect();
    assert_eq!(
        keys.len(),
        REPORTS as usize,
        "each report's key exactly once"
    );
    assert!(keys.iter().all(|&k| k < REPORTS));
    assert_eq!(rules.stats().derived_overflow.load(Relaxed), 0);
}
