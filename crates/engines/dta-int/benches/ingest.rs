//! INT ingest rate in process: telemetry reports (v2.0, each carrying an INT-MD frame of 5 hops
//! with node id, hop latency, queue occupancy and egress utilisation: 3 histogram metrics)
//! through the INT sink — parse, FlowCache, events, aggregated histograms, path records and
//! postcards — into the DTA stores (path Key-Write, hop-latency Postcarding, event Append,
//! histogram Key-Increment) in memory. Rows, all measured in the same run:
//!
//! - parse only: `dta_int_wire::parse_report`, the inner INT stack, every hop decoded (the
//!   baseline the sink rows are compared with);
//! - the sink writing every report's DTA reports at once (`aggregate = false`: ~21 translator
//!   reports per telemetry report, the sink's behaviour without aggregation);
//! - the sink aggregating into per-flush deltas (the default), one thread, one report per call;
//! - the same, handed batches of 32 reports (`IntSink::handle_reports`, as a `recvmmsg` receive
//!   loop does: the batch's FlowCache misses overlap);
//! - two sinks of a [`SinkGroup`] on two threads over the same stores, flows sharded by
//!   [`shard_of`] (reports pre-sorted per sink, as a flow-steering receive side hands them),
//!   batches of 32.
//!
//! Each row gives reports per second of wall time and per second of the measuring threads' own
//! CPU time (`getrusage(RUSAGE_THREAD)`, summed over threads: robust on a shared machine).
//!
//! `cargo bench -p dta-int --bench ingest` or `scripts/bench.sh --only int` (env
//! DTA_BENCH_PACKETS, default 200 000; DTA_BENCH_RUNS, default 5; DTA_BENCH_INT_LONG_TIER=1, the
//! histograms' long tier among the stores; DTA_BENCH_INT_ROWS, a
//! comma-separated subset of `parse,per_report,deltas,batches,two_threads` to profile one row, the
//! others printing 0). Prints medians.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use dta_collector::{Collector, StoreConfig};
use dta_int::gen::{generate, md_frame, stacked_report, GenConfig};
use dta_int::{shard_of, IntSink, IntSinkConfig, SinkGroup};
use dta_int_wire::{parse_report, IntDetect, TelemetryReport};
use dta_translator::{RegionSinks, Stats, Translator, TranslatorConfig};

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

/// This thread's CPU time (user + system), seconds.
fn thread_cpu() -> f64 {
    // SAFETY: getrusage writes the struct it is given; RUSAGE_THREAD is the calling thread.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

/// The sink's stores; with DTA_BENCH_INT_LONG_TIER=1 the histograms' long tier too (a
/// Key-Increment store of 7-byte keys, which the sink then writes every count into as well).
fn stores() -> Vec<StoreConfig> {
    let long_tier = env("DTA_BENCH_INT_LONG_TIER", 0) == 1;
    [
        "name = 'paths'\nkind = 'key-write'\nslots = 1048576\nkey_len = 13\ndata_len = 24",
        "name = 'latency'\nkind = 'postcarding'\nchunks = 1048576\nhops = 5\nkey_len = 13",
        "name = 'events'\nkind = 'append'\nlists = 8\ncapacity = 65536\nentry_len = 32\nbatch = 16",
        "name = 'hist'\nkind = 'key-increment'\ncounters = 1048576\nkey_len = 6",
        "name = 'hist_day'\nkind = 'key-increment'\ncounters = 1048576\nkey_len = 7",
    ]
    .iter()
    .take(if long_tier { 5 } else { 4 })
    .map(|t| toml::from_str(t).unwrap())
    .collect()
}

type Reports = Vec<(Vec<u8>, u64)>;

/// Reports per receive batch.
const BATCH: usize = 32;

/// Feed `reports` to `sink` one by one or in batches of [`BATCH`], ticking every 1024 (the delta
/// flush and aging run on the trace's clock) and writing the owed deltas at the end, inside the
/// measurement.
fn run_sink(sink: &mut IntSink<RegionSinks>, reports: &Reports, batched: bool) {
    if batched {
        let mut batch: Vec<(&[u8], u64)> = Vec::with_capacity(BATCH);
        for (i, chunk) in reports.chunks(BATCH).enumerate() {
            batch.clear();
            batch.extend(chunk.iter().map(|(r, t)| (&r[..], *t)));
            sink.handle_reports(&batch);
            if i % (1024 / BATCH) == 1024 / BATCH - 1 {
                sink.tick(chunk.last().unwrap().1);
            }
        }
    } else {
        for (i, (r, ts)) in reports.iter().enumerate() {
            sink.handle_report(r, *ts);
            if i % 1024 == 1023 {
                sink.tick(*ts);
            }
        }
    }
    if let Some((_, ts)) = reports.last() {
        sink.flush_deltas(*ts);
    }
}

/// (reports/s wall, reports/s of CPU time) of one run.
struct Rate {
    wall: f64,
    cpu: f64,
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
    let reports: Reports = packets
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
    // Per sink of two: its flows' reports, in trace order.
    let mut halves: [Reports; 2] = [vec![], vec![]];
    for (r, p) in reports.iter().zip(packets.iter().cycle()) {
        halves[shard_of(&p.flow, 2)].push(r.clone());
    }

    let base = if std::path::Path::new("/dev/shm").is_dir() {
        "/dev/shm"
    } else {
        "/tmp"
    };
    let dir = tempfile::tempdir_in(base).unwrap();
    let collector = Collector::create(dir.path(), &stores(), true).unwrap();
    let translator = || {
        Translator::colocated(
            &TranslatorConfig::default(),
            collector.regions(),
            Arc::new(Stats::default()),
        )
        .unwrap()
    };
    let sink_cfg = IntSinkConfig {
        int_udp_port: Some(cfg.int_udp_port),
        ..IntSinkConfig::default()
    };
    let per_report_cfg = IntSinkConfig {
        aggregate: false,
        ..sink_cfg.clone()
    };
    let mut per_report = IntSink::new(&per_report_cfg, translator()).unwrap();
    let mut aggregated = IntSink::new(&sink_cfg, translator()).unwrap();
    let mut batches = IntSink::new(&sink_cfg, translator()).unwrap();
    let group = SinkGroup::new(&sink_cfg, 2, 4096);
    let mut pair: Vec<IntSink<RegionSinks>> = (0..2)
        .map(|i| group.sink(i, &sink_cfg, translator()).unwrap())
        .collect();

    let rows = std::env::var("DTA_BENCH_INT_ROWS")
        .unwrap_or_else(|_| "parse,per_report,deltas,batches,two_threads".into());
    let on = |row: &str| rows.split(',').any(|r| r == row);
    let skipped = Rate {
        wall: 0.0,
        cpu: 0.0,
    };
    let (mut parse, mut per, mut agg, mut bat, mut two) = (vec![], vec![], vec![], vec![], vec![]);
    // The rows alternate within each run, so load on the machine hits them alike.
    for _ in 0..runs {
        if !on("parse") {
            parse.push(Rate { ..skipped });
        }
        let (t0, c0) = (Instant::now(), thread_cpu());
        for (r, _) in reports.iter().take(if on("parse") { n } else { 0 }) {
            if let Ok(TelemetryReport::V2(v2)) = parse_report(r) {
                for ind in v2.iter() {
                    if let Ok(Some(int)) = ind.inner_int(&detect) {
                        if let Some(stack) = int.stack() {
                            for h in stack.iter() {
                                black_box(h.baseline.hop_latency);
                            }
                        }
                    }
                }
            }
        }
        if on("parse") {
            parse.push(Rate {
                wall: n as f64 / t0.elapsed().as_secs_f64(),
                cpu: n as f64 / (thread_cpu() - c0),
            });
        }

        for (sink, out, row, batched) in [
            (&mut per_report, &mut per, "per_report", false),
            (&mut aggregated, &mut agg, "deltas", false),
            (&mut batches, &mut bat, "batches", true),
        ] {
            if !on(row) {
                out.push(Rate { ..skipped });
                continue;
            }
            let (t0, c0) = (Instant::now(), thread_cpu());
            run_sink(sink, &reports, batched);
            out.push(Rate {
                wall: n as f64 / t0.elapsed().as_secs_f64(),
                cpu: n as f64 / (thread_cpu() - c0),
            });
        }

        if !on("two_threads") {
            two.push(Rate { ..skipped });
            continue;
        }
        let t0 = Instant::now();
        let cpu: f64 = std::thread::scope(|s| {
            let handles: Vec<_> = pair
                .iter_mut()
                .zip(&halves)
                .map(|(sink, part)| {
                    s.spawn(move || {
                        let c0 = thread_cpu();
                        run_sink(sink, part, true);
                        thread_cpu() - c0
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        two.push(Rate {
            wall: n as f64 / t0.elapsed().as_secs_f64(),
            cpu: n as f64 / cpu,
        });
    }
    for s in [&per_report, &aggregated, &batches, &pair[0], &pair[1]] {
        let st = s.stats_snapshot();
        assert!(st.errors.is_empty(), "{:?}", st.errors);
        assert_eq!(s.translator().stats().total_rejected(), 0);
    }

    let med = |v: &[Rate]| {
        (
            median(v.iter().map(|r| r.wall).collect()),
            median(v.iter().map(|r| r.cpu).collect()),
        )
    };
    let (p, pr, ag, ba, tw) = (med(&parse), med(&per), med(&agg), med(&bat), med(&two));
    println!(
        "dta INT ingest benchmark: {n} telemetry reports (5-hop INT-MD, 3 metrics) per run, median of {runs}"
    );
    println!(
        "{:<58} {:>12} {:>14} {:>10}",
        "what", "K reports/s", "K/s CPU time", "vs parse"
    );
    for (what, (w, c)) in [
        ("parse only (baseline)", p),
        (
            "INT sink, per-report writes (aggregate = false), 1 thread",
            pr,
        ),
        ("INT sink, per-flush deltas, 1 thread", ag),
        ("INT sink, per-flush deltas, batches of 32, 1 thread", ba),
        ("INT sink, deltas, batches, 2 threads (SinkGroup)", tw),
    ] {
        println!(
            "{:<58} {:>12.0} {:>14.0} {:>10.2}",
            what,
            w / 1e3,
            c / 1e3,
            c / p.1
        );
    }
    println!(
        "deltas / per-report (CPU time): {:.2}; batches / per-report: {:.2}; 2 threads / 1 thread (wall): {:.2}",
        ag.1 / pr.1,
        ba.1 / pr.1,
        tw.0 / ba.0
    );
}
