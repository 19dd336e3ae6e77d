//! INT ingest rate, one core: telemetry reports (v2.0, each carrying an INT-MD frame of 5 hops)
//! through the INT sink — parse, FlowCache, events, histograms — into the DTA stores (path
//! Key-Write, hop-latency Postcarding, event Append, histogram Key-Increment) in memory. The
//! baseline measured in the same run is parsing alone (`dta_int_wire::parse_report` and the
//! inner INT stack), so the ratio says what the sink and the stores cost on top of parsing.
//!
//! `cargo bench -p dta-int --bench ingest` (env DTA_BENCH_PACKETS, default 200 000;
//! DTA_BENCH_RUNS, default 5). Prints medians.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use dta_collector::{Collector, StoreConfig};
use dta_int::gen::{generate, md_frame, stacked_report, GenConfig};
use dta_int::{IntSink, IntSinkConfig};
use dta_int_wire::{parse_report, IntDetect, TelemetryReport};
use dta_translator::{Stats, Translator, TranslatorConfig};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn stores() -> Vec<StoreConfig> {
    [
        "name = 'paths'\nkind = 'key-write'\nslots = 1048576\nkey_len = 13\ndata_len = 24",
        "name = 'latency'\nkind = 'postcarding'\nchunks = 1048576\nhops = 5\nkey_len = 13",
        "name = 'events'\nkind = 'append'\nlists = 8\ncapacity = 65536\nentry_len = 32\nbatch = 16",
        "name = 'hist'\nkind = 'key-increment'\ncounters = 1048576\nkey_len = 6",
    ]
    .iter()
    .map(|t| toml::from_str(t).unwrap())
    .collect()
}

fn main() {
    let target = env("DTA_BENCH_PACKETS", 200_000);
    let runs = env("DTA_BENCH_RUNS", 5);
    let cfg = GenConfig {
        flows: 5_000,
        max_flow_packets: 400,
        ..GenConfig::default()
    };
    let packets = generate(&cfg);
    let reports: Vec<(Vec<u8>, u64)> = packets
        .iter()
        .cycle()
        .take(target)
        .enumerate()
        .map(|(i, p)| {
            (
                stacked_report(7, i as u32, &md_frame(p, cfg.int_udp_port)),
                p.time_ns,
            )
        })
        .collect();
    let n = reports.len();
    let detect = IntDetect::udp_port(cfg.int_udp_port);

    let parse: Vec<f64> = (0..runs)
        .map(|_| {
            let t0 = Instant::now();
            for (r, _) in &reports {
                if let Ok(TelemetryReport::V2(v2)) = parse_report(r) {
                    for ind in v2.iter() {
                        if let Ok(Some(int)) = ind.inner_int(&detect) {
                            if let Some(stack) = int.stack() {
                                for h in stack.iter() {
                                    black_box(h.hop_latency);
                                }
                            }
                        }
                    }
                }
            }
            n as f64 / t0.elapsed().as_secs_f64()
        })
        .collect();

    let base = if std::path::Path::new("/dev/shm").is_dir() {
        "/dev/shm"
    } else {
        "/tmp"
    };
    let dir = tempfile::tempdir_in(base).unwrap();
    let collector = Collector::create(dir.path(), &stores(), true).unwrap();
    let translator = Translator::colocated(
        &TranslatorConfig::default(),
        collector.regions(),
        Arc::new(Stats::default()),
    )
    .unwrap();
    let sink_cfg = IntSinkConfig {
        int_udp_port: Some(cfg.int_udp_port),
        ..IntSinkConfig::default()
    };
    let mut sink = IntSink::new(&sink_cfg, translator).unwrap();
    let ingest: Vec<f64> = (0..runs)
        .map(|_| {
            let t0 = Instant::now();
            for (r, ts) in &reports {
                sink.handle_report(r, *ts);
            }
            n as f64 / t0.elapsed().as_secs_f64()
        })
        .collect();
    let s = sink.stats_snapshot();
    assert!(s.errors.is_empty(), "{:?}", s.errors);

    let (p, i) = (median(parse), median(ingest));
    println!("dta INT ingest benchmark: {n} telemetry reports (5-hop INT-MD) per run, median of {runs}, one core");
    println!("{:<52} {:>12} {:>10}", "what", "K reports/s", "M hops/s");
    println!(
        "{:<52} {:>12.0} {:>10.2}",
        "parse only (baseline)",
        p / 1e3,
        p * 5.0 / 1e6
    );
    println!(
        "{:<52} {:>12.0} {:>10.2}",
        "INT sink -> DTA stores (path, latency, events, hist)",
        i / 1e3,
        i * 5.0 / 1e6
    );
    println!("ratio ingest / parse: {:.2}", i / p);
}
