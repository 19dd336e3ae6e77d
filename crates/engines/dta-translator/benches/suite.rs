// Size: one benchmark binary so every section shares the region set-up, the workloads and the table
// printer (scripts/bench.sh runs it).
//! The benchmark suite (docs/benchmarks.md §3): every benchmark prints a table and compares, in the
//! same run, against its own baseline; figures are medians of `--runs` runs.
//!
//! 1. `apply`: apply rate per primitive, one core, native datagrams of 32 reports through the
//!    batched path (`handle_batch` of a `recv_batch` of datagrams, as the ingest loop; Key-Write
//!    and Key-Increment also one datagram at a time), against a plain loop doing the same
//!    number of random 8-byte writes (or sequential bytes for Append) on the same region.
//! 2. `cuckoo` (or `hashmap`): the same Key-Write datagrams, i.e. the same distinct keys, into a
//!    DTA Key-Write store sized for them at [`KW_LOAD_FACTOR`] keys per slot, and into a
//!    conventional CPU collector that parses each report and inserts it into a hashbrown
//!    `HashMap` keyed by flow ([DTA §6]'s "Cuckoo" collector) reserved to the same memory; rate
//!    and memory of both side by side.
//! 3. `query`: Key-Write queries at N = 2 on the filled store: `lookup_batch` (64 keys per
//!    call) against one-key `lookup`, and `lookup` against the allocating `query`.
//! 4. `e2e`: over loopback UDP (userspace half): a sender thread and the translator's
//!    `recvmmsg` loop, 32 reports per datagram; baseline: the same datagrams received and
//!    dropped; per second of wall clock and per second of the translator thread's CPU time
//!    (kernel receive included), medians of up to 3 runs.
//! 5. `refs`: memory references per report under `valgrind --tool=cachegrind` for each primitive
//!    and the baseline of 2 (the difference of two runs of N and 2N reports, so set-up cancels).
//! 6. `scaling`: Key-Write datagrams on 1 and on 2 threads, each with its own translator and
//!    `Stats`, into the same region.
//! 7. `tracker`: the sequence tracker's `check` per datagram with 65 536 active spaces (one per
//!    reporter, round robin, 1 % lost so gaps are NACKed), against a go-back-N tracker in a std
//!    `HashMap` keyed the same way (the tracker this one replaced).
//! 8. `sketch`: Sketch-Merge columns merged per second, a 3-row Count-Min of 2^16 columns (the
//!    simulation's per-flow accounting store) from 4 reporters, native datagrams of 32 columns:
//!    in order (every reporter streams its whole sketch, per epoch; columns written in runs of
//!    the batch once all 4 sent them) and with ApproSync (every reporter sends every column
//!    again, grown, in a random order; each column written at once), against a plain loop over
//!    the same datagrams that parses each column, adds it into an array of sums and writes the
//!    column's 32-byte record into the region (no sequence tracking, no per-reporter state).
//!
//! `cargo bench -p dta-translator --bench suite -- [--smoke] [--mib N | --gib N] [--reports N]
//! [--runs N] [--only apply,cuckoo,query,e2e,refs,scaling,tracker,sketch] [--prims kw,ki,pc,ap]`
//! `[--cpu-time]` (rates over the measuring thread's CPU time, not wall-clock time)
//! `[--dir DIR]` (regions' directory, default /dev/shm; a hugetlbfs mount for huge pages)
//! `[--hash native|xxh3]` (the Key-Write and Key-Increment stores' hash scheme, default native)
//! `[--write-budget N]` (every translator metered at N writes/s with the largest burst,
//! docs/flow-control.md: the cost of the metering itself, nothing is dropped);
//! `scripts/bench.sh` runs it.

use std::hint::black_box;
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dta_store::{
    AppendSpec, HashScheme, KeyIncrementSpec, KeyWriteLayout, KeyWriteSpec, Lookup,
    PostcardingSpec, Region, SketchKind, SketchSpec, SketchSync, StoreSpec,
};
use dta_testkit::bench::{self, median, pow2_at_most, Rng};
use dta_translator::sequence::{Space, Tracker, DEFAULT_ENTRIES};
use dta_translator::{ingest, RegionSinks, Shards, Stats, Translator, TranslatorConfig};
use dta_wire::native::DatagramBuilder;
use dta_wire::{Datagram, Priority, Report};

struct Args {
    smoke: bool,
    bytes: u64,
    reports: usize,
    runs: usize,
    only: Vec<String>,
    prims: Vec<String>,
    dir: Option<String>,
    refs: Option<(String, usize)>,
}

fn parse_args() -> Args {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let smoke = argv.iter().any(|a| a == "--smoke");
    let _ = CPU_TIME.set(argv.iter().any(|a| a == "--cpu-time"));
    let mut a = Args {
        smoke,
        bytes: if smoke { 8 << 20 } else { 256 << 20 },
        reports: if smoke { 20_000 } else { 2_000_000 },
        runs: if smoke { 1 } else { 5 },
        only: vec![],
        prims: vec![],
        dir: None,
        refs: None,
    };
    let mut i = 0;
    let val = |i: usize| -> String { argv.get(i + 1).cloned().unwrap_or_default() };
    while i < argv.len() {
        match argv[i].as_str() {
            "--mib" => a.bytes = val(i).parse::<u64>().expect("--mib N") << 20,
            "--gib" => a.bytes = val(i).parse::<u64>().expect("--gib N") << 30,
            "--reports" => a.reports = val(i).parse().expect("--reports N"),
            "--runs" => a.runs = val(i).parse().expect("--runs N"),
            "--only" => a.only = val(i).split(',').map(str::to_string).collect(),
            "--prims" => a.prims = val(i).split(',').map(str::to_string).collect(),
            "--dir" => a.dir = Some(val(i)),
            "--write-budget" => {
                let _ = WRITE_BUDGET.set(val(i).parse().expect("--write-budget N"));
            }
            "--hash" => {
                let scheme = match val(i).as_str() {
                    "native" => HashScheme::Native,
                    "xxh3" => HashScheme::Xxh3,
                    other => panic!("--hash {other}: native or xxh3"),
                };
                let _ = HASH.set(scheme);
            }
            "--refs" => {
                a.refs = Some((val(i), argv[i + 2].parse().expect("--refs PRIM N")));
                i += 1;
            }
            _ => {
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    a
}

const SRC: &str = "127.0.0.1:1";

/// The stores: Key-Write 4/4 N=2, Key-Increment, Postcarding B=5 N=2, Append B=16 (16 lists).
/// Key-Write and Key-Increment get `bytes` each; Postcarding and Append at most 1 GiB. With
/// `--prims`, a primitive not listed gets an 8 MiB store (so the huge pages a run needs are
/// those of the primitives it measures).
fn make_regions(dir: &Path, bytes: u64, prims: &[String]) -> Vec<Arc<Region>> {
    let size = |p: &str, b: u64| {
        if prims.is_empty() || prims.iter().any(|x| x == p) {
            b
        } else {
            b.min(8 << 20)
        }
    };
    let small = |p: &str| size(p, bytes.min(1 << 30));
    let bytes_of = |p: &str| size(p, bytes);
    let specs = [
        (
            "kw",
            StoreSpec::KeyWrite(KeyWriteSpec {
                slots: pow2_at_most(bytes_of("kw") / 8),
                key_len: 4,
                data_len: 4,
                hash: hash_scheme(),
                redundancy: 2,
            }),
        ),
        (
            "ki",
            StoreSpec::KeyIncrement(KeyIncrementSpec {
                counters: pow2_at_most(bytes_of("ki") / 8),
                key_len: 4,
                hash: hash_scheme(),
                redundancy: 2,
                windows: 0,
                window_ms: 0,
            }),
        ),
        (
            "pc",
            StoreSpec::Postcarding(PostcardingSpec {
                chunks: pow2_at_most(small("pc") / 20),
                hops: 5,
                slot_bits: 32,
                redundancy: 2,
                key_len: 4,
            }),
        ),
        (
            "ap",
            StoreSpec::Append(AppendSpec {
                lists: 16,
                capacity: pow2_at_most(small("ap") / 64),
                entry_len: 4,
                batch: 16,
                record: Default::default(),
            }),
        ),
    ];
    specs
        .iter()
        .map(|(name, spec)| {
            Arc::new(Region::create(&dir.join(format!("{name}.region")), name, spec, true).unwrap())
        })
        .collect()
}

/// `--write-budget`: the translators' `flow_control.write_budget` (0: unmetered).
static WRITE_BUDGET: std::sync::OnceLock<u64> = std::sync::OnceLock::new();

fn translator(regions: &[Arc<Region>]) -> Translator<RegionSinks> {
    let cfg = TranslatorConfig {
        postcard_cache_entries: 1 << 16,
        flow_control: dta_translator::FlowControlConfig {
            write_budget: WRITE_BUDGET.get().copied().unwrap_or(0),
            min_budget: 1,
            // The timed loops pass one `now`: a bucket no run empties, so every datagram takes
            // the whole metered path (debit, level, admission) and is applied.
            burst: dta_translator::config::MAX_BURST,
            ..Default::default()
        },
        ..Default::default()
    };
    Translator::colocated(&cfg, regions.to_vec(), Arc::new(Stats::default())).unwrap()
}

/// Native datagrams of 32 reports of primitive `prim` over `n` random 4-byte keys.
fn datagrams(prim: &str, n: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = Rng(seed | 1);
    let keys: Vec<[u8; 4]> = (0..n).map(|_| (rng.next() as u32).to_be_bytes()).collect();
    let data = [1u8, 2, 3, 4];
    let mut out = vec![];
    // One scratch buffer, and each datagram copied out at its length: the datagrams lie back to
    // back in the heap, as a `recvmmsg` batch lies in the ingest loop's buffers.
    let mut buf = vec![0u8; 1500];
    for (c, chunk) in keys.chunks(32).enumerate() {
        let mut b = DatagramBuilder::new(&mut buf, Priority::Medium, false, 1, c as u32).unwrap();
        for (j, k) in chunk.iter().enumerate() {
            let i = c * 32 + j;
            let flow = &keys[i / 5 * 5];
            let r = match prim {
                "kw" => Report::KeyWrite {
                    key: k,
                    data: &data,
                    redundancy: 2,
                    immediate: false,
                },
                "ki" => Report::KeyIncrement {
                    key: k,
                    counter: 1,
                    redundancy: 2,
                    immediate: false,
                },
                // 5-hop paths, postcards in hop order.
                "pc" => Report::Postcard {
                    key: flow,
                    hop: (i % 5) as u8,
                    path_len: 5,
                    value: i as u32 & 0x3ffff,
                    immediate: false,
                },
                "ap" => Report::Append {
                    list_id: (i & 15) as u32,
                    data: k,
                    immediate: false,
                },
                other => panic!("unknown primitive {other}"),
            };
            b.push(&r).unwrap();
        }
        let len = b.finish();
        out.push(buf[..len].to_vec());
    }
    out
}

fn reports_in(d: &[Vec<u8>]) -> usize {
    d.iter().map(|x| x[2] as usize).sum()
}

/// `--hash native|xxh3`: the hash scheme of the Key-Write and Key-Increment stores (default
/// native).
static HASH: std::sync::OnceLock<HashScheme> = std::sync::OnceLock::new();

fn hash_scheme() -> HashScheme {
    HASH.get().copied().unwrap_or(HashScheme::Native)
}

/// `--cpu-time`: rates over the calling thread's CPU time instead of wall-clock time (on a
/// shared machine, time the thread spends descheduled is not the code's).
static CPU_TIME: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// Reports per second of `f` over `n` reports (wall clock, or thread CPU time with
/// `--cpu-time`).
fn rate(n: usize, f: impl FnOnce()) -> f64 {
    if CPU_TIME.get().copied().unwrap_or(false) {
        bench::cpu_rate(n, f)
    } else {
        bench::rate(n, f)
    }
}

/// Random 8-byte writes, `per` per report, into `region`: the memory baseline.
fn random_writes(region: &Region, n: usize, per: usize, seed: u64) -> f64 {
    let mem = region.mem();
    let words = mem.len() / 8;
    let mut r = Rng(seed | 1);
    rate(n, || {
        for i in 0..n * per {
            let w = r.next() & (pow2_at_most(words) - 1);
            mem.write(w * 8, &(i as u64).to_le_bytes()).unwrap();
        }
    })
}

/// The same entry bytes copied sequentially in 64-byte blocks: the Append baseline.
fn sequential(region: &Region, n: usize, entry: usize) -> f64 {
    let mem = region.mem();
    let block = [7u8; 64];
    let len = mem.len() - 64;
    let total = (n * entry) as u64;
    rate(n, || {
        let mut off = 0;
        while off < total {
            mem.write(off % len, &block).unwrap();
            off += 64;
        }
    })
}

struct Table {
    title: String,
    rows: Vec<[String; 5]>,
}

impl Table {
    fn new(title: impl Into<String>) -> Self {
        Table {
            title: title.into(),
            rows: vec![],
        }
    }
    fn row(&mut self, what: &str, v: f64, base: f64, base_what: &str, unit: f64) {
        self.rows.push([
            what.into(),
            format!("{:.2}", v / unit),
            format!("{:.2}", base / unit),
            format!("{:.2}", v / base),
            base_what.into(),
        ]);
    }
    fn print(&self, head: [&str; 5]) {
        println!("\n## {}", self.title);
        println!(
            "| {:<44} | {:>10} | {:>12} | {:>6} | {} |",
            head[0], head[1], head[2], head[3], head[4]
        );
        println!("| --- | ---: | ---: | ---: | --- |");
        for r in &self.rows {
            println!(
                "| {:<44} | {:>10} | {:>12} | {:>6} | {} |",
                r[0], r[1], r[2], r[3], r[4]
            );
        }
    }
}

const HEAD: [&str; 5] = ["what", "M/s", "baseline M/s", "ratio", "baseline"];

fn run_apply(a: &Args, regions: &[Arc<Region>]) {
    let mut t = translator(regions);
    let src: SocketAddr = SRC.parse().unwrap();
    let now = Instant::now();
    let n = a.reports;
    let mut table = Table::new(format!(
        "1. apply rate per primitive, one core, native datagrams of 32 ({} MiB Key-Write and Key-Increment regions, huge pages: {}; each baseline in its primitive's own region)",
        a.bytes >> 20,
        regions[0].huge_pages()
    ));
    // Warm the pages of every store once (first-touch page faults are not the data path).
    for (i, p) in ["kw", "ki", "pc", "ap"].iter().enumerate() {
        let d = datagrams(p, n, 99 + i as u64);
        for x in &d {
            t.handle_datagram(x, src, now);
        }
    }
    for r in regions {
        random_writes(r, n, 2, 5);
    }
    for (p, what, per, base_what) in [
        (
            "kw",
            "Key-Write N=2",
            2.0,
            "2 random 8-byte writes per report",
        ),
        (
            "ki",
            "Key-Increment N=2 (FETCH_ADD)",
            2.0,
            "2 random 8-byte writes per report",
        ),
        (
            "pc",
            "Postcarding B=5 N=2, per postcard",
            0.4,
            "2 random writes per 5 postcards",
        ),
        (
            "ap",
            "Append B=16, 16 lists, per entry",
            0.0,
            "sequential 64-byte writes, same bytes",
        ),
    ] {
        if !a.prims.is_empty() && !a.prims.iter().any(|x| x == p) {
            continue;
        }
        let d = datagrams(p, n, 1);
        let m = reports_in(&d);
        // The baseline writes into the primitive's own store (make_regions' order).
        let own = &regions[["kw", "ki", "pc", "ap"]
            .iter()
            .position(|x| *x == p)
            .unwrap()];
        let recv_batch = TranslatorConfig::default().recv_batch;
        let mut v = vec![];
        let mut v1 = vec![];
        let mut b = vec![];
        for run in 0..a.runs {
            // As the ingest loop hands them over: a `recvmmsg` batch at a time (`recv_batch`).
            v.push(rate(m, || {
                for batch in d.chunks(recv_batch) {
                    t.handle_batch(batch.iter().map(|x| (&x[..], src)), now);
                }
            }));
            if per != 0.0 {
                v1.push(rate(m, || {
                    for x in &d {
                        t.handle_datagram(x, src, now);
                    }
                }));
            }
            b.push(if per == 0.0 {
                sequential(own, m, 4)
            } else {
                // The baseline does `per` writes per report: 2 per report, or 2 per 5 postcards.
                let k = (m as f64 * per / 2.0) as usize;
                random_writes(own, k, 2, run as u64 + 11) * m as f64 / k as f64
            });
        }
        let (v, b) = (median(v), median(b));
        table.row(what, v, b, base_what, 1e6);
        if !v1.is_empty() {
            let what = format!("{what}, one datagram at a time");
            table.row(&what, median(v1), b, base_what, 1e6);
        }
    }
    t.flush_all();
    table.print(HEAD);
}

/// Keys per Key-Write slot the comparison sizes the DTA store at: where N = 2, the redundancy
/// the suite writes, is the best N by [DTA A.5]'s survival bound `1 - (1 - e^{-αN})^N` (the
/// background of [DTA §6] Fig. 12: N = 2 leads from about α = 0.27 to 0.48, N = 3 below).
const KW_LOAD_FACTOR: f64 = 0.25;

/// [DTA A.5]: the probability that a key written `α·slots` distinct keys ago still has one of
/// its N copies (a query can answer it).
fn a5_success(alpha: f64, n: u8) -> f64 {
    1.0 - (1.0 - (-alpha * n as f64).exp()).powi(n as i32)
}

/// The hash-map comparison ([DTA §6] "Cuckoo"): the same Key-Write datagrams (the same distinct
/// keys) into (a) a DTA Key-Write store sized for those keys at [`KW_LOAD_FACTOR`], through
/// the translator, and (b) a conventional collector that parses each report and inserts it
/// into a `hashbrown::HashMap` keyed by flow, given the same memory up front (its capacity
/// reserved to the store's bytes, the nearest its power-of-two table allows). Both are reported
/// side by side with their memory.
fn run_cuckoo(a: &Args, dir: &Path) {
    let d = datagrams("kw", a.reports, 1);
    let m = reports_in(&d);
    let distinct = {
        let mut keys: Vec<[u8; 4]> = Vec::with_capacity(m);
        for x in &d {
            if let Ok(Datagram::Native(dg)) =
                dta_wire::parse(x, dta_wire::prototype::BaseFormat::Short)
            {
                for v in dg.views() {
                    if let Report::KeyWrite { key, .. } = v.report() {
                        keys.push(key.try_into().unwrap());
                    }
                }
            }
        }
        keys.sort_unstable();
        keys.dedup();
        keys.len()
    };
    // The store: a power of two of slots, the smallest at or under the load factor.
    let slots = (distinct as f64 / KW_LOAD_FACTOR).ceil() as u64;
    let slots = slots.next_power_of_two();
    let alpha = distinct as f64 / slots as f64;
    let spec = StoreSpec::KeyWrite(KeyWriteSpec {
        slots,
        key_len: 4,
        data_len: 4,
        hash: hash_scheme(),
        redundancy: 2,
    });
    let region = Arc::new(Region::create(&dir.join("kw-sized.region"), "kw", &spec, true).unwrap());
    let store_bytes = region.mem().len();
    let mut t = translator(std::slice::from_ref(&region));
    let src: SocketAddr = SRC.parse().unwrap();
    let now = Instant::now();
    // The map reserved to the store's bytes: hashbrown's table is a power of two of buckets of
    // (key, value) plus one control byte each, `capacity` = 7/8 of the buckets.
    let bucket = std::mem::size_of::<([u8; 4], [u8; 4])>() + 1;
    let below = pow2_at_most(store_bytes / bucket as u64).max(16);
    // The power of two whose table is nearest the store's bytes.
    let buckets = if (2 * below * bucket as u64).abs_diff(store_bytes)
        < (below * bucket as u64).abs_diff(store_bytes)
    {
        2 * below
    } else {
        below
    };
    let reserve = (buckets as usize / 8) * 7;
    let fresh = || hashbrown::HashMap::<[u8; 4], [u8; 4]>::with_capacity(reserve);
    let map_bytes = fresh().allocation_size() as u64;
    // Warm both (first-touch page faults are not the data path): the store's pages, the map's
    // allocator.
    for x in &d {
        t.handle_datagram(x, src, now);
    }
    black_box(fresh().len());
    let (mut v, mut b, mut w) = (vec![], vec![], vec![]);
    for run in 0..a.runs {
        v.push(rate(m, || {
            for x in &d {
                t.handle_datagram(x, src, now);
            }
        }));
        let mut map = fresh();
        b.push(rate(m, || cuckoo_collect(&d, &mut map)));
        assert_eq!(map.len(), distinct);
        assert!(map.allocation_size() as u64 == map_bytes, "the map grew");
        black_box(map.len());
        w.push(random_writes(&region, m, 2, run as u64 + 11));
    }
    let (v, b, w) = (median(v), median(b), median(w));
    println!(
        "\n## 2. Key-Write vs a conventional CPU collector (parse + hashbrown insert keyed by flow): \
         {distinct} distinct keys, {m} reports, store at load factor {alpha:.3} \
         ([DTA A.5] query success at N=2: {:.1} %), matched memory",
        100.0 * a5_success(alpha, 2)
    );
    println!("| what | M reports/s | memory MiB | ratio to the other | ratio to 2 random writes per report |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    println!(
        "| DTA Key-Write N=2 ({slots} slots of 8 bytes) | {:.2} | {:.1} | {:.2} | {:.2} |",
        v / 1e6,
        store_bytes as f64 / (1 << 20) as f64,
        v / b,
        v / w
    );
    println!(
        "| parse + hashbrown insert ({} buckets reserved) | {:.2} | {:.1} | {:.2} | {:.2} |",
        buckets,
        b / 1e6,
        map_bytes as f64 / (1 << 20) as f64,
        b / v,
        b / w
    );
    println!(
        "| baseline: 2 random 8-byte writes per report in the store | {:.2} | | | |",
        w / 1e6
    );
    t.flush_all();
}

/// The conventional collector of [DTA §6] ("Cuckoo"): parse every report, insert it keyed by
/// flow.
fn cuckoo_collect(d: &[Vec<u8>], map: &mut hashbrown::HashMap<[u8; 4], [u8; 4]>) {
    for x in d {
        dta_translator::baseline::collect(x, map);
    }
}

fn run_query(a: &Args, regions: &[Arc<Region>]) {
    // Fill the store with the keys we query.
    let mut t = translator(regions);
    let src: SocketAddr = SRC.parse().unwrap();
    let d = datagrams("kw", a.reports, 3);
    for x in &d {
        t.handle_datagram(x, src, Instant::now());
    }
    let mut rng = Rng(3);
    let keys: Vec<[u8; 4]> = (0..a.reports)
        .map(|_| (rng.next() as u32).to_be_bytes())
        .collect();
    let flat: Vec<u8> = keys.iter().flatten().copied().collect();
    let layout = KeyWriteLayout::new(regions[0].header()).unwrap();
    let mem = regions[0].mem();
    const BATCH: usize = 64;
    let (mut found, mut found_batch) = (0, 0);
    let mut out = [0u8; 4];
    let mut outs = [0u8; 4 * BATCH];
    let mut answers = [Lookup::Empty; BATCH];
    // The three are timed in turn within each run (so drift on this shared machine hits all
    // three alike); figures are medians over the runs.
    let (mut b, mut l, mut q) = (vec![], vec![], vec![]);
    for _ in 0..a.runs {
        b.push(rate(keys.len(), || {
            for k in flat.chunks(4 * BATCH) {
                let n = k.len() / 4;
                layout
                    .lookup_batch(mem, k, Some(2), 1, &mut outs[..4 * n], &mut answers[..n])
                    .unwrap();
                found_batch += answers[..n]
                    .iter()
                    .filter(|x| matches!(x, Lookup::Found { .. }))
                    .count();
            }
        }));
        l.push(rate(keys.len(), || {
            for k in &keys {
                found += matches!(
                    layout.lookup(mem, k, Some(2), 1, &mut out),
                    Ok(Lookup::Found { .. })
                ) as usize;
            }
        }));
        q.push(rate(keys.len(), || {
            for k in &keys {
                black_box(layout.query(mem, k, Some(2), 1).ok());
            }
        }));
    }
    assert_eq!(found, found_batch, "lookup_batch and lookup disagree");
    let (b, l, q) = (median(b), median(l), median(q));
    let mut table = Table::new(format!(
        "3. Key-Write queries N=2 on a filled store ({} MiB, {:.1}% found), goal >= 10 M/s per core: {}",
        mem.len() >> 20,
        100.0 * found as f64 / (keys.len() * a.runs) as f64,
        if b >= 10e6 {
            "met by lookup_batch"
        } else {
            "not met"
        }
    ));
    table.row(
        &format!("lookup_batch ({BATCH} keys per call)"),
        b,
        l,
        "lookup (one key per call)",
        1e6,
    );
    table.row(
        "lookup (allocation-free)",
        l,
        q,
        "query (allocating answer)",
        1e6,
    );
    table.print(HEAD);
}

fn run_scaling(a: &Args, regions: &[Arc<Region>]) {
    let d = datagrams("kw", a.reports, 1);
    let m = reports_in(&d);
    let src: SocketAddr = SRC.parse().unwrap();
    // Translators are built before the clock starts; only handle_datagram is timed.
    let timed = |threads: usize| -> f64 {
        // The translator threads of `dta translator --threads`: one shard each.
        let shards = Shards::new(threads, 8192);
        let mut ts: Vec<_> = (0..threads)
            .map(|i| translator(regions).with_shard(shards.shard(i)))
            .collect();
        let parts: Vec<&[Vec<u8>]> = d.chunks(d.len().div_ceil(threads)).collect();
        let barrier = std::sync::Barrier::new(threads);
        let now = Instant::now();
        let secs: Vec<f64> = std::thread::scope(|s| {
            let hs: Vec<_> = ts
                .iter_mut()
                .zip(&parts)
                .map(|(t, part)| {
                    let barrier = &barrier;
                    s.spawn(move || {
                        barrier.wait();
                        let t0 = Instant::now();
                        for x in part.iter() {
                            t.handle_datagram(x, src, now);
                        }
                        t0.elapsed().as_secs_f64()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        // Stats are per thread and summed; the wall time is the slowest thread's.
        let total: u64 = ts.iter().map(|t| t.stats().reports[0].load(Relaxed)).sum();
        assert_eq!(total as usize, m);
        m as f64 / secs.iter().cloned().fold(0.0, f64::max)
    };
    timed(1); // warm the pages
    let r1 = median((0..a.runs).map(|_| timed(1)).collect());
    let r2 = median((0..a.runs).map(|_| timed(2)).collect());
    let mut table = Table::new("6. scaling, Key-Write N=2 datagrams of 32, in memory, same region");
    table.row(
        "2 translator threads (sharded, one Stats each)",
        r2,
        r1,
        "1 thread",
        1e6,
    );
    table.print(HEAD);
}

/// `Tracker::check` per datagram at 65 536 active spaces, against a std `HashMap` go-back-N
/// tracker (next expected number per space) over the same datagrams.
fn run_tracker(a: &Args) {
    const SPACES: usize = 65_536;
    let spaces: Vec<Space> = (0..SPACES)
        .map(|r| {
            let ip = std::net::IpAddr::V4(std::net::Ipv4Addr::from(0x0A00_0000 | r as u32));
            Space::native(ip, r as u32, dta_wire::Priority::High)
        })
        .collect();
    let mut table = Table::new(format!(
        "7. sequence tracker, 65 536 active spaces round robin, {} datagrams per run",
        a.reports
    ));
    let mut bytes = 0;
    for loss in [0u64, 1] {
        // Numbers from 1 (0 opens each space); `loss` % never arrive and are not resent, so
        // the spaces keep gaps (NACKs computed) until the window slides past them.
        let mut rng = Rng(0x5EED);
        let d: Vec<(u32, u32)> = (0..a.reports)
            .filter(|_| rng.next() % 100 >= loss)
            .map(|j| ((j % SPACES) as u32, 1 + (j / SPACES) as u32))
            .collect();
        let tracker = |bytes: &mut usize| -> f64 {
            let mut t = Tracker::new(
                DEFAULT_ENTRIES,
                Duration::from_millis(5),
                Duration::from_millis(1000),
                Arc::new(Stats::default()),
            )
            .unwrap();
            *bytes = t.bytes();
            let now = Instant::now();
            for s in &spaces {
                t.check(s, 0, true, now);
            }
            rate(d.len(), || {
                let mut now = Instant::now();
                for (j, &(s, seq)) in d.iter().enumerate() {
                    // One clock read per receive batch, as the ingest loop does.
                    if j % 64 == 0 {
                        now = Instant::now();
                    }
                    black_box(t.check(&spaces[s as usize], seq, true, now));
                }
            })
        };
        let hashmap = || -> f64 {
            let mut m: std::collections::HashMap<(std::net::IpAddr, u32, dta_wire::Priority), u32> =
                std::collections::HashMap::new();
            for s in &spaces {
                m.insert((s.ip, s.reporter, s.priority), 1);
            }
            rate(d.len(), || {
                for &(s, seq) in &d {
                    let sp = &spaces[s as usize];
                    let next = m.entry((sp.ip, sp.reporter, sp.priority)).or_insert(seq);
                    if *next == seq {
                        *next = seq + 1;
                    }
                    black_box(*next);
                }
            })
        };
        tracker(&mut bytes); // warm
        let v = median((0..a.runs).map(|_| tracker(&mut bytes)).collect());
        let b = median((0..a.runs).map(|_| hashmap()).collect());
        table.row(
            &format!("Tracker::check, {loss} % lost ({:.0} ns a check)", 1e9 / v),
            v,
            b,
            "go-back-N in a std HashMap",
            1e6,
        );
    }
    table.title += &format!(" (table {:.1} MiB)", bytes as f64 / (1 << 20) as f64);
    table.print(HEAD);
}

/// Loopback UDP: a sender thread sends prebuilt datagrams as fast as it can for `dur`; the
/// receiver is either the translator's ingest loop or a `recvmmsg`-and-drop loop (baseline).
fn run_e2e(a: &Args, regions: &[Arc<Region>]) {
    let dur = if a.smoke {
        Duration::from_millis(300)
    } else {
        Duration::from_secs(3)
    };
    let d = datagrams("kw", 32 * 4096, 1);
    // (reports/s wall clock, reports per second of the translator thread's CPU time, reports
    // translated, reports sent)
    let measure = |translate: bool| -> (f64, f64, u64, u64) {
        let sock = ingest::bind("127.0.0.1:0".parse().unwrap(), 8 << 20).unwrap();
        let to = sock.local_addr().unwrap();
        let stats = Arc::new(Stats::default());
        let cfg = TranslatorConfig::default();
        let mut t = if translate {
            Translator::colocated(&cfg, regions.to_vec(), stats.clone()).unwrap()
        } else {
            // No stores: every report is parsed and counted as no_store (receive + parse only).
            Translator::new(&cfg, &[], RegionSinks::new(vec![]), stats.clone()).unwrap()
        };
        let sent = std::thread::scope(|s| {
            let h = s.spawn(|| {
                let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
                let t0 = Instant::now();
                let mut sent = 0u64;
                while t0.elapsed() < dur {
                    for x in d.iter().take(256) {
                        if tx.send_to(x, to).is_ok() {
                            sent += 32;
                        }
                    }
                }
                sent
            });
            let cpu = bench::thread_cpu();
            ingest::run_for(
                &mut t,
                &ingest::PrioSockets::single(sock),
                256,
                dur + Duration::from_millis(100),
            )
            .unwrap();
            (h.join().unwrap(), bench::thread_cpu() - cpu)
        });
        let (sent, cpu) = sent;
        let got = stats.reports[0].load(Relaxed);
        (
            got as f64 / dur.as_secs_f64(),
            got as f64 / cpu.as_secs_f64().max(1e-9),
            got,
            sent,
        )
    };
    let (mut r, mut rc, mut b, mut bc) = (vec![], vec![], vec![], vec![]);
    let (mut got, mut sent, mut bgot, mut bsent) = (0, 0, 0, 0);
    for _ in 0..a.runs.min(3) {
        let x = measure(true);
        (got, sent) = (x.2, x.3);
        r.push(x.0);
        rc.push(x.1);
        let y = measure(false);
        (bgot, bsent) = (y.2, y.3);
        b.push(y.0);
        bc.push(y.1);
    }
    let (r, rc, b, bc) = (median(r), median(rc), median(b), median(bc));
    let mut table = Table::new(format!(
        "4. end to end over loopback UDP, 32 Key-Write reports per datagram, reporter and translator on 2 cores ({:.1}s, median of {} runs; last run: translated {got} of {sent} sent, baseline received {bgot} of {bsent})",
        dur.as_secs_f64(),
        a.runs.min(3)
    ));
    table.row(
        "userspace translator (recvmmsg, batched apply)",
        r,
        b,
        "recvmmsg + parse, no stores",
        1e6,
    );
    table.row(
        "the same, per second of the translator thread's CPU time",
        rc,
        bc,
        "recvmmsg + parse, no stores, per CPU second",
        1e6,
    );
    table.print(HEAD);
}

/// The internal mode for cachegrind: apply `n` reports of `prim` (or the cuckoo baseline).
fn refs_mode(prim: &str, n: usize) {
    let dir = tempfile::tempdir_in(shm()).unwrap();
    let regions = make_regions(dir.path(), 8 << 20, &[]);
    // "gen-PRIM" only builds the datagrams: its counts are subtracted from PRIM's.
    let (gen_only, prim) = match prim.strip_prefix("gen-") {
        Some(p) => (true, p),
        None => (false, prim),
    };
    let d = datagrams(if prim == "cuckoo" { "kw" } else { prim }, n, 1);
    // Both runs build the translator and the map, so only the per-report work differs.
    let mut t = translator(&regions);
    let mut map = hashbrown::HashMap::new();
    if gen_only {
        black_box(&d);
    } else if prim == "cuckoo" {
        cuckoo_collect(&d, &mut map);
    } else {
        let src: SocketAddr = SRC.parse().unwrap();
        let now = Instant::now();
        for x in &d {
            t.handle_datagram(x, src, now);
        }
    }
    black_box(map.len());
    black_box(t.stats().reports[0].load(Relaxed));
}

fn cachegrind(exe: &Path, prim: &str, n: usize) -> Option<(u64, u64)> {
    let out = std::process::Command::new("valgrind")
        .args([
            "--tool=cachegrind",
            "--cache-sim=yes",
            "--cachegrind-out-file=/dev/null",
        ])
        .arg(exe)
        .args(["--refs", prim, &n.to_string()])
        .args(["--hash", &format!("{:?}", hash_scheme()).to_lowercase()])
        .output()
        .ok()?;
    let err = String::from_utf8_lossy(&out.stderr);
    // Lines look like "==123== I   refs:      4,982,374".
    let grab = |label: &str| -> Option<u64> {
        err.lines().find_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.len() > 3 && w[1] == label && w[2] == "refs:")
                .then(|| w[3].replace(',', "").parse().ok())
                .flatten()
        })
    };
    Some((grab("I")?, grab("D")?))
}

fn run_refs(a: &Args) {
    let exe: PathBuf = std::env::current_exe().unwrap();
    if std::process::Command::new("valgrind")
        .arg("--version")
        .output()
        .is_err()
    {
        println!("\n## 5. memory references per report: valgrind not found, skipped");
        return;
    }
    let n1 = if a.smoke { 3_200 } else { 32_000 };
    println!(
        "\n## 5. memory references per report (cachegrind, {n1} reports, minus a run that only builds them)"
    );
    println!("| what | instructions | data refs (loads + stores) |");
    println!("| --- | ---: | ---: |");
    for (p, what) in [
        ("kw", "Key-Write N=2"),
        ("ki", "Key-Increment N=2"),
        ("pc", "Postcarding B=5 N=2 (per postcard)"),
        ("ap", "Append B=16 (per entry)"),
        ("cuckoo", "baseline of 2: parse + hashbrown insert"),
    ] {
        match (
            cachegrind(&exe, &format!("gen-{p}"), n1),
            cachegrind(&exe, p, n1),
        ) {
            (Some((i1, d1)), Some((i2, d2))) => println!(
                "| {what} | {:.1} | {:.1} |",
                (i2 as f64 - i1 as f64) / n1 as f64,
                (d2 as f64 - d1 as f64) / n1 as f64
            ),
            _ => println!("| {what} | failed | failed |"),
        }
    }
}

/// Rows, columns and reporters of the `sketch` benchmark's Count-Min.
const SKETCH_ROWS: u32 = 3;
const SKETCH_COLUMNS: u32 = 1 << 16;
const SKETCH_REPORTERS: u32 = 4;

/// Column reports of `rounds` rounds: in each, every reporter sends every column once (in
/// order, or shuffled), `round + 1` in every counter, 32 columns per datagram. In order, round
/// k is epoch `epoch0 + k`; with ApproSync every round is epoch `epoch0` (the values grow).
fn sketch_datagrams(
    sync: SketchSync,
    rounds: u32,
    epoch0: u32,
    value0: u32,
    seq: &mut [u32],
    rng: &mut Rng,
) -> Vec<(Vec<u8>, SocketAddr)> {
    let mut out = vec![];
    let mut buf = vec![0u8; 1500];
    let mut order: Vec<u16> = (0..SKETCH_COLUMNS).map(|c| c as u16).collect();
    for k in 0..rounds {
        let epoch = match sync {
            SketchSync::InOrder => epoch0 + k,
            SketchSync::Approsync => epoch0,
        };
        let mut data = [0u8; SKETCH_ROWS as usize * 4];
        for v in data.chunks_exact_mut(4) {
            v.copy_from_slice(&(value0 + k + 1).to_be_bytes());
        }
        for r in 0..SKETCH_REPORTERS {
            if sync == SketchSync::Approsync {
                // Fisher-Yates with the suite's generator.
                for i in (1..order.len()).rev() {
                    order.swap(i, (rng.next() % (i as u64 + 1)) as usize);
                }
            }
            let src = SocketAddr::from(([127, 0, 0, 1], 2000 + r as u16));
            for chunk in order.chunks(32) {
                let s = &mut seq[r as usize];
                let mut b =
                    DatagramBuilder::new(&mut buf, Priority::Medium, false, r + 1, *s).unwrap();
                *s = s.wrapping_add(1);
                for &column in chunk {
                    b.push(&Report::SketchColumn {
                        sketch_id: 1,
                        column,
                        epoch,
                        data: &data,
                        immediate: false,
                    })
                    .unwrap();
                }
                let len = b.finish();
                out.push((buf[..len].to_vec(), src));
            }
        }
    }
    out
}

/// The `sketch` baseline: every column of `d` parsed, its counters added into `sums`, and its
/// record (8 bytes of header, then the sums as u64) written at the column's place in `region`.
fn merge_plain(d: &[(Vec<u8>, SocketAddr)], sums: &mut [u64], region: &Region, record: usize) {
    let mem = region.mem();
    let mut rec = [0u8; 64];
    for (x, _) in d {
        let Ok(Datagram::Native(n)) = dta_wire::parse(x, dta_wire::prototype::BaseFormat::Short)
        else {
            unreachable!("the suite's own datagrams parse")
        };
        for r in n.reports() {
            let Report::SketchColumn { column, data, .. } = r else {
                continue;
            };
            let at = column as usize * SKETCH_ROWS as usize;
            for (i, c) in data.chunks_exact(4).enumerate() {
                sums[at + i] += u32::from_be_bytes(c.try_into().unwrap()) as u64;
                rec[8 + 8 * i..16 + 8 * i].copy_from_slice(&sums[at + i].to_le_bytes());
            }
            mem.write((column as usize * record) as u64, &rec[..record])
                .unwrap();
        }
    }
}

fn run_sketch(a: &Args, dir: &Path) {
    let mut table = Table::new(format!(
        "8. Sketch-Merge columns merged per second, Count-Min {SKETCH_ROWS} x {SKETCH_COLUMNS} \
         from {SKETCH_REPORTERS} reporters, native datagrams of 32 columns, in-order batch {}",
        TranslatorConfig::default().sketch_batch_columns
    ));
    let per_round = (SKETCH_COLUMNS * SKETCH_REPORTERS) as usize;
    let rounds = (a.reports / per_round).max(1) as u32;
    let record = 8 + 8 * SKETCH_ROWS as usize;
    for (sync, what) in [
        (SketchSync::InOrder, "in order (a sketch per epoch)"),
        (
            SketchSync::Approsync,
            "ApproSync (every column grown, shuffled)",
        ),
    ] {
        let spec = StoreSpec::SketchMerge(SketchSpec {
            sketch_id: 1,
            kind: SketchKind::CountMin {
                rows: SKETCH_ROWS,
                columns: SKETCH_COLUMNS,
            },
            reporters: SKETCH_REPORTERS,
            sync,
        });
        let name = format!("sketch-{}", sync as u8);
        let region = Arc::new(
            Region::create(&dir.join(format!("{name}.region")), &name, &spec, true).unwrap(),
        );
        let mut t = translator(std::slice::from_ref(&region));
        let now = Instant::now();
        let mut seq = vec![0u32; SKETCH_REPORTERS as usize];
        let mut rng = Rng(0x5eed);
        // One round unmeasured: the region's pages and the translator's state are touched once.
        let mut next = 1u32;
        for (d, src) in sketch_datagrams(sync, 1, next, 0, &mut seq, &mut rng) {
            t.handle_datagram(&d, src, now);
        }
        next += 1;
        let mut sums = vec![0u64; (SKETCH_COLUMNS * SKETCH_ROWS) as usize];
        let (mut v, mut b) = (vec![], vec![]);
        for _ in 0..a.runs {
            // In order: fresh epochs; ApproSync: the first epoch, grown past every earlier round.
            let d = match sync {
                SketchSync::InOrder => sketch_datagrams(sync, rounds, next, 0, &mut seq, &mut rng),
                SketchSync::Approsync => {
                    sketch_datagrams(sync, rounds, 1, next, &mut seq, &mut rng)
                }
            };
            next += rounds;
            let m = rounds as usize * per_round;
            let written = t.stats().sketch_columns_written.load(Relaxed);
            v.push(rate(m, || {
                for (x, src) in &d {
                    t.handle_datagram(x, *src, now);
                }
            }));
            let merged = t.stats().sketch_columns_written.load(Relaxed) - written;
            assert!(
                merged > 0 && t.stats().total_rejected() == 0,
                "{what}: {}",
                t.stats().snapshot()
            );
            b.push(rate(m, || merge_plain(&d, &mut sums, &region, record)));
        }
        table.row(
            what,
            median(v),
            median(b),
            "parse, sum, write each record",
            1e6,
        );
    }
    table.print(["what", "M columns/s", "baseline M/s", "ratio", "baseline"]);
}

fn shm() -> &'static str {
    if Path::new("/dev/shm").is_dir() {
        "/dev/shm"
    } else {
        "/tmp"
    }
}

fn main() {
    let a = parse_args();
    if let Some((prim, n)) = &a.refs {
        refs_mode(prim, *n);
        return;
    }
    let want = |s: &str| a.only.is_empty() || a.only.iter().any(|o| o == s);
    // Regions in /dev/shm, or in `--dir` (e.g. a hugetlbfs mount: scripts/hugepages.sh).
    let parent = a.dir.clone().unwrap_or_else(|| shm().to_string());
    let dir = tempfile::tempdir_in(&parent).unwrap();
    let needs_regions = ["apply", "query", "e2e", "scaling"].iter().any(|s| want(s));
    let regions = if needs_regions {
        make_regions(dir.path(), a.bytes, &a.prims)
    } else {
        vec![]
    };
    println!(
        "# dta benchmark suite: {} reports per run, median of {} runs, regions in {}{}",
        a.reports,
        a.runs,
        parent,
        if a.smoke { " (smoke)" } else { "" }
    );
    if want("apply") {
        run_apply(&a, &regions);
    }
    if want("cuckoo") || want("hashmap") {
        run_cuckoo(&a, dir.path());
    }
    if want("query") {
        run_query(&a, &regions);
    }
    if want("e2e") {
        run_e2e(&a, &regions);
    }
    if want("refs") {
        run_refs(&a);
    }
    if want("scaling") {
        run_scaling(&a, &regions);
    }
    if want("tracker") {
        run_tracker(&a);
    }
    if want("sketch") {
        run_sketch(&a, dir.path());
    }
}
