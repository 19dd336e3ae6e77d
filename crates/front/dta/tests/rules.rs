//! `SELECT flowID, path WHERE SUM(latency) > T` end to end ([DTA §7]), with the example
//! configuration examples/rules-latency.toml: a generated trace of postcards with per-hop
//! latencies goes through the co-located translator into the regions the collector created;
//! the list the rule appends to holds exactly the flows whose path latency exceeds T, each with
//! its sum, and the paths themselves are all in the Postcarding store.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use dta_collector::{query, Collector};
use dta_node::config::Config;
use dta_translator::{Stats, Translator};
use dta_wire::native::DatagramBuilder;
use dta_wire::{Priority, Report};

const FLOWS: u32 = 4000;
/// Flows whose postcards are in flight at once (interleaved).
const IN_FLIGHT: usize = 8;

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) % n
    }
}

fn config() -> Config {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../examples/rules-latency.toml");
    Config::load(&p).unwrap()
}

#[test]
fn flows_over_t_are_exactly_those_in_the_list() {
    let mut cfg = config();
    let rule = &cfg.translator.rules[0];
    let t = rule.when.unwrap().value;
    assert_eq!((rule.name.as_str(), t), ("slow-paths", 1000));
    let dir = tempfile::tempdir().unwrap();
    cfg.region_dir = dir.path().to_path_buf();
    let collector = Collector::create(&cfg.region_dir, &cfg.store, false).unwrap();
    let stats = Arc::new(Stats::default());
    let mut tr =
        Translator::colocated(&cfg.translator, collector.regions(), stats.clone()).unwrap();

    // The trace: each flow crosses 1..=5 switches, each adding 0..400 us; its postcards
    // arrive interleaved with those of the flows in flight with it, hop order shuffled.
    let mut rng = Rng(0x5eed);
    let mut truth = BTreeMap::new();
    let mut paths: Vec<(u32, Vec<u32>)> = vec![];
    for f in 0..FLOWS {
        let flow = 0x0a00_0000 | f;
        let hops = 1 + rng.below(5) as usize;
        let lat: Vec<u32> = (0..hops).map(|_| rng.below(400) as u32).collect();
        let sum: u64 = lat.iter().map(|&l| l as u64).sum();
        if sum > t {
            truth.insert(flow, sum);
        }
        paths.push((flow, lat));
    }
    assert!(
        truth.len() > FLOWS as usize / 10 && truth.len() < FLOWS as usize / 2,
        "a trace with slow and fast flows: {} of {FLOWS} over T",
        truth.len()
    );
    let mut postcards: Vec<(u32, u8, u8, u32)> = vec![];
    for group in paths.chunks(IN_FLIGHT) {
        let mut cards: Vec<_> = group
            .iter()
            .flat_map(|(flow, lat)| {
                lat.iter()
                    .enumerate()
                    .map(|(h, &l)| (*flow, h as u8, lat.len() as u8, l))
            })
            .collect();
        for i in (1..cards.len()).rev() {
            cards.swap(i, rng.below(i as u64 + 1) as usize);
        }
        postcards.extend(cards);
    }
    let src = "127.0.0.1:7000".parse().unwrap();
    for (seq, chunk) in postcards.chunks(32).enumerate() {
        let mut buf = vec![0u8; 1500];
        let mut b = DatagramBuilder::new(&mut buf, Priority::Medium, false, 1, seq as u32).unwrap();
        let keys: Vec<[u8; 4]> = chunk.iter().map(|c| c.0.to_be_bytes()).collect();
        for (c, key) in chunk.iter().zip(&keys) {
            b.push(&Report::Postcard {
                key,
                hop: c.1,
                path_len: c.2,
                value: c.3,
                immediate: false,
            })
            .unwrap();
        }
        let n = b.finish();
        tr.handle_datagram(&buf[..n], src, Instant::now());
    }
    tr.flush_all();
    let snap = stats.snapshot();
    assert_eq!(
        snap["postcarding"]["collision"], 0,
        "no path split by a cache collision: {snap}"
    );
    assert_eq!(stats.total_rejected(), 0, "{snap}");

    // The list: exactly the flows over T, each with its path's sum.
    let slow = collector.store("slow").unwrap();
    let list = query::list(&slow.region, 0, None, 1 << 16, query::raw_records).unwrap();
    let got: BTreeMap<u32, u64> = list
        .entries
        .iter()
        .map(|h| {
            let e = hex::decode(h).unwrap();
            (
                u32::from_be_bytes(e[..4].try_into().unwrap()),
                u64::from_be_bytes(e[4..12].try_into().unwrap()),
            )
        })
        .collect();
    assert_eq!(got.len(), list.entries.len(), "no flow listed twice");
    assert_eq!(got, truth);

    // The paths of the listed flows are in the Postcarding store, hop by hop.
    let paths_store = collector.store("paths").unwrap();
    for (flow, lat) in paths.iter().filter(|(f, _)| truth.contains_key(f)).take(50) {
        let r = query::postcard(&paths_store.region, &flow.to_be_bytes(), 4096).unwrap();
        assert_eq!(r.status, "found", "flow {flow:#x}");
        assert_eq!(&r.path[..lat.len()], &lat[..], "flow {flow:#x}");
    }
}

/// `dta` validates the rules of a configuration when it loads it, with the rule's name in the
/// message.
#[test]
fn the_configuration_validates_its_rules() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../examples/rules-latency.toml"),
    )
    .unwrap();
    assert!(Config::parse(&text).is_ok());
    let bad = text.replace("list = 0", "list = 3");
    let e = format!("{:#}", Config::parse(&bad).unwrap_err());
    assert!(e.contains("slow-paths") && e.contains("list = 3"), "{e}");
    let bad = text.replace("store = \"paths\"", "store = \"slow\"");
    let e = format!("{:#}", Config::parse(&bad).unwrap_err());
    assert!(e.contains("is not a Postcarding store"), "{e}");
}
