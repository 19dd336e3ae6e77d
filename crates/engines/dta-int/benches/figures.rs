// Size: one benchmark binary for every reproduced figure, so they share the stores, the
// translator set-up, the datagram packing and the CSV writer (scripts/figures.sh runs it).
//! The papers' evaluation figures, reproduced on a CPU (docs/figures.md): each figure writes one
//! CSV file into `--out DIR`, which `scripts/figures.py` plots beside the paper's numbers.
//!
//! - `fig10`: Key-Write collection rate vs N = 1..4, 4-byte and 20-byte data ([DTA §6.5]).
//!   Baseline (same run): N random 8-byte writes per report into the same region.
//! - `fig11`: Key-Write query rate vs N on a filled store ([DTA §6.5.1]), one-key `lookup` and
//!   `lookup_batch`.
//! - `fig12`: query success vs load factor for N = 1..4 ([DTA §6.5.2]), measured through the
//!   translator, beside [DTA A.5]'s estimate averaged over the keys' ages.
//! - `fig13`: data longevity ([DTA §6.5.3]): queryability vs report age at several store sizes,
//!   20-byte paths, N = 2, scaled down (same load factors: keys and slots divided alike).
//! - `fig14`: Postcarding rate and success vs translator cache size ([DTA §6.6]), 5-hop paths
//!   whose postcards interleave with those of `C` other concurrent flows.
//! - `fig15`: Append rate vs batch size ([DTA §6.7]).
//! - `fig16`: Append list polling rate, alone and while the translator appends to the same list
//!   from another thread ([DTA §6.7.1], [DTA-draft §5.2.1]).
//! - `int3`: INT sink throughput vs hops x metrics ([INT-NIC §IV] Fig. 3a), INT-MD frames into
//!   the in-process sink and its stores; baseline: the INT stack parse alone.
//! - `int6`: metric accuracy at the host ([INT-NIC §IV] Fig. 6): the sink's per-switch
//!   histograms against the generated trace's ground truth.
//!
//! Rates are per second of the measuring thread's own CPU time (`CLOCK_THREAD_CPUTIME_ID`), i.e.
//! per core: the machine these run on is shared, and time spent descheduled is not the code's.
//!
//! `cargo bench -p dta-int --bench figures -- [--quick] [--out DIR] [--only fig10,...]
//! [--runs N] [--dir DIR]` (`--dir`: where the regions live, default /dev/shm).

use std::fmt::Write as _;
use std::hint::black_box;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dta_collector::{Collector, StoreConfig};
use dta_int::gen::{eth_ipv4_udp, generate, GenConfig, GenPacket, INSTRUCTIONS};
use dta_int::{query, Buckets, IntSink, IntSinkConfig, Metric};
use dta_int_wire::{emit_md, instr, HopMetadata, IntDetect, MdHeader};
use dta_store::{
    AppendLayout, AppendSpec, HashScheme, KeyWriteLayout, KeyWriteSpec, ListReader, Lookup,
    PostcardingSpec, Region, StoreSpec, Tally,
};
use dta_testkit::bench::{cpu_rate as rate, median, pow2_at_most, thread_cpu, Rng};
use dta_translator::{RegionSinks, Stats, Translator, TranslatorConfig};
use dta_wire::native::DatagramBuilder;
use dta_wire::{Priority, Report};

const FIGS: [&str; 9] = [
    "fig10", "fig11", "fig12", "fig13", "fig14", "fig15", "fig16", "int3", "int6",
];

struct Args {
    quick: bool,
    out: PathBuf,
    only: Vec<String>,
    runs: usize,
    dir: PathBuf,
}

fn parse_args() -> Args {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let quick = argv.iter().any(|a| a == "--quick");
    let mut a = Args {
        quick,
        out: PathBuf::from("target/figures"),
        only: vec![],
        runs: if quick { 1 } else { 5 },
        dir: PathBuf::from(if Path::new("/dev/shm").is_dir() {
            "/dev/shm"
        } else {
            "/tmp"
        }),
    };
    let mut i = 0;
    while i < argv.len() {
        let val = || argv.get(i + 1).cloned().unwrap_or_default();
        match argv[i].as_str() {
            "--out" => a.out = PathBuf::from(val()),
            "--dir" => a.dir = PathBuf::from(val()),
            "--runs" => a.runs = val().parse().expect("--runs N"),
            "--only" => {
                a.only = val().split(',').map(str::to_string).collect();
                for f in &a.only {
                    assert!(
                        FIGS.contains(&f.as_str()),
                        "--only: unknown figure {f:?} (one of {FIGS:?})"
                    );
                }
            }
            // cargo bench passes `--bench`; other flags are not ours.
            _ => {
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    a
}

/// One CSV file: a header and rows, written to `out/<name>.csv`.
struct Csv {
    name: &'static str,
    text: String,
}

impl Csv {
    fn new(name: &'static str, header: &str) -> Self {
        Csv {
            name,
            text: format!("{header}\n"),
        }
    }
    fn row(&mut self, cells: &[String]) {
        let _ = writeln!(self.text, "{}", cells.join(","));
    }
    fn write(&self, out: &Path) {
        let path = out.join(format!("{}.csv", self.name));
        std::fs::write(&path, &self.text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        print!("\n## {}\n{}", self.name, self.text);
    }
}

fn f(x: f64) -> String {
    format!("{x:.6}")
}

fn region(dir: &Path, name: &str, spec: StoreSpec) -> Arc<Region> {
    let path = dir.join(format!("dta-figures-{}-{name}.region", std::process::id()));
    let r = Region::create(&path, name, &spec, true).unwrap();
    // The mapping stays valid after the file is unlinked: nothing is left behind in /dev/shm.
    let _ = std::fs::remove_file(&path);
    Arc::new(r)
}

fn key_write(dir: &Path, slots: u64, data_len: u8, n: u8) -> Arc<Region> {
    region(
        dir,
        "kw",
        StoreSpec::KeyWrite(KeyWriteSpec {
            slots,
            key_len: 4,
            data_len,
            hash: HashScheme::Native,
            redundancy: n,
        }),
    )
}

fn translator(
    regions: &[Arc<Region>],
    postcard_cache: usize,
) -> (Translator<RegionSinks>, Arc<Stats>) {
    let cfg = TranslatorConfig {
        postcard_cache_entries: postcard_cache,
        ..Default::default()
    };
    let stats = Arc::new(Stats::default());
    let t = Translator::colocated(&cfg, regions.to_vec(), stats.clone()).unwrap();
    (t, stats)
}

const SRC: &str = "127.0.0.1:1";
/// Reports per datagram (as the suite: a reporter batching 32 reports per UDP datagram).
const PER_DATAGRAM: usize = 32;

/// Pack `reports` into native datagrams of at most [`PER_DATAGRAM`] reports each.
fn pack<'a>(reports: impl IntoIterator<Item = Report<'a>>) -> Vec<Vec<u8>> {
    let mut out = vec![];
    let mut buf = vec![0u8; 1472];
    let mut it = reports.into_iter().peekable();
    let mut seq = 0u32;
    while it.peek().is_some() {
        let mut b = DatagramBuilder::new(&mut buf, Priority::Medium, false, 1, seq).unwrap();
        while (b.count() as usize) < PER_DATAGRAM {
            match it.peek() {
                Some(r) if b.fits(r) => {
                    b.push(r).unwrap();
                    it.next();
                }
                _ => break,
            }
        }
        let len = b.finish();
        out.push(buf[..len].to_vec());
        seq = seq.wrapping_add(1);
    }
    out
}

fn apply(t: &mut Translator<RegionSinks>, d: &[Vec<u8>]) {
    let src: SocketAddr = SRC.parse().unwrap();
    let now = Instant::now();
    for x in d {
        t.handle_datagram(x, src, now);
    }
}

fn reports_in(d: &[Vec<u8>]) -> usize {
    d.iter().map(|x| x[2] as usize).sum()
}

/// Distinct 4-byte keys (a random permutation prefix of the u32 space: an odd multiplier).
fn keys(n: usize, seed: u64) -> Vec<[u8; 4]> {
    let mul = (Rng::new(seed).next() as u32) | 1;
    (0..n as u32)
        .map(|i| i.wrapping_mul(mul).wrapping_add(seed as u32).to_be_bytes())
        .collect()
}

/// The value stored under `key` (so a query's answer can be checked), `len` bytes.
fn value_of(key: &[u8; 4], len: usize) -> Vec<u8> {
    let x = u32::from_be_bytes(*key).wrapping_mul(0x9E37_79B9) ^ 0x5A5A_5A5A;
    x.to_le_bytes().iter().copied().cycle().take(len).collect()
}

/// Random 8-byte writes, `per` per report for `n` reports, into `region`: the memory baseline.
fn random_writes(region: &Region, n: usize, per: usize, seed: u64) -> f64 {
    let mem = region.mem();
    let mask = pow2_at_most(mem.len() / 8) - 1;
    let mut r = Rng::new(seed);
    rate(n, || {
        for i in 0..n * per {
            mem.write((r.next() & mask) * 8, &(i as u64).to_le_bytes())
                .unwrap();
        }
    })
}

// ---------------------------------------------------------------------------------------------

fn fig10(a: &Args) -> Csv {
    let bytes: u64 = if a.quick { 8 << 20 } else { 256 << 20 };
    let n = if a.quick { 20_000 } else { 1_000_000 };
    let mut csv = Csv::new("fig10", "n,data_len,reports_per_s,baseline_per_s");
    for data_len in [4u8, 20] {
        let slot = if data_len == 4 { 8 } else { 24 };
        let r = key_write(&a.dir, pow2_at_most(bytes / slot), data_len, 4);
        let ks = keys(n, 10);
        let vals: Vec<Vec<u8>> = ks.iter().map(|k| value_of(k, data_len as usize)).collect();
        for nn in 1..=4u8 {
            let d = pack(ks.iter().zip(&vals).map(|(k, v)| Report::KeyWrite {
                key: k,
                data: v,
                redundancy: nn,
                immediate: false,
            }));
            let m = reports_in(&d);
            let (mut t, _) = translator(std::slice::from_ref(&r), 1 << 16);
            apply(&mut t, &d); // warm the pages
            let (mut v, mut b) = (vec![], vec![]);
            for run in 0..a.runs {
                v.push(rate(m, || apply(&mut t, &d)));
                b.push(random_writes(&r, m, nn as usize, run as u64 + 3));
            }
            csv.row(&[
                nn.to_string(),
                data_len.to_string(),
                f(median(v)),
                f(median(b)),
            ]);
        }
    }
    csv
}

fn fig11(a: &Args) -> Csv {
    let bytes: u64 = if a.quick { 8 << 20 } else { 256 << 20 };
    let n = if a.quick { 20_000 } else { 1_000_000 };
    let mut csv = Csv::new("fig11", "n,lookup_per_s,lookup_batch_per_s,found");
    let r = key_write(&a.dir, pow2_at_most(bytes / 8), 4, 4);
    let layout = KeyWriteLayout::new(r.header()).unwrap();
    let mem = r.mem();
    let ks = keys(n, 11);
    let flat: Vec<u8> = ks.iter().flatten().copied().collect();
    const BATCH: usize = 64;
    let mut out = [0u8; 4];
    let mut outs = [0u8; 4 * BATCH];
    let mut answers = [Lookup::Empty; BATCH];
    for nn in 1..=4u8 {
        // Worst case of [DTA §6.5.1]: every key written at N, every query reads all N slots.
        let vals: Vec<Vec<u8>> = ks.iter().map(|k| value_of(k, 4)).collect();
        let d = pack(ks.iter().zip(&vals).map(|(k, v)| Report::KeyWrite {
            key: k,
            data: v,
            redundancy: nn,
            immediate: false,
        }));
        let (mut t, _) = translator(std::slice::from_ref(&r), 1 << 16);
        apply(&mut t, &d);
        let (mut l, mut b, mut found) = (vec![], vec![], 0usize);
        for _ in 0..a.runs {
            found = 0;
            l.push(rate(ks.len(), || {
                for k in &ks {
                    found += matches!(
                        layout.lookup(mem, k, Some(nn), 1, &mut out),
                        Ok(Lookup::Found { .. })
                    ) as usize;
                }
            }));
            b.push(rate(ks.len(), || {
                for k in flat.chunks(4 * BATCH) {
                    let c = k.len() / 4;
                    layout
                        .lookup_batch(mem, k, Some(nn), 1, &mut outs[..4 * c], &mut answers[..c])
                        .unwrap();
                    black_box(&answers);
                }
            }));
        }
        csv.row(&[
            nn.to_string(),
            f(median(l)),
            f(median(b)),
            f(found as f64 / ks.len() as f64),
        ]);
        // The next N starts from a clean store.
        mem.write(0, &vec![0u8; mem.len() as usize]).unwrap();
    }
    csv
}

/// [DTA A.5]: the probability that a key written `age` distinct keys ago is still answered at N
/// copies in `slots` slots: 1 − P(all N copies overwritten) − P(wrong) (the latter ~2^-32).
fn a5_success(age: u64, slots: u64, n: u8) -> f64 {
    let c = dta_store::confidence::key_write(
        Tally {
            writes: age * n as u64,
            added: 0,
        },
        slots,
        n,
    );
    1.0 - c.p_overwritten - c.p_wrong
}

/// [DTA A.5] averaged over the ages 0..keys of the keys stored (the paper's "average query
/// success rate" over every key reported).
fn a5_average(keys: u64, slots: u64, n: u8) -> f64 {
    const STEPS: u64 = 400;
    let s: f64 = (0..STEPS)
        .map(|i| a5_success((2 * i + 1) * keys / (2 * STEPS), slots, n))
        .sum();
    s / STEPS as f64
}

fn fig12(a: &Args) -> Csv {
    let slots: u64 = if a.quick { 1 << 13 } else { 1 << 18 };
    let alphas: Vec<f64> = (1..=16).map(|i| i as f64 * 0.125).collect();
    let mut csv = Csv::new("fig12", "n,load_factor,measured,a5");
    for nn in 1..=4u8 {
        let r = key_write(&a.dir, slots, 4, nn);
        let layout = KeyWriteLayout::new(r.header()).unwrap();
        let (mut t, _) = translator(std::slice::from_ref(&r), 1 << 16);
        let total = (alphas.last().unwrap() * slots as f64) as usize;
        let ks = keys(total, 12 + nn as u64);
        let vals: Vec<Vec<u8>> = ks.iter().map(|k| value_of(k, 4)).collect();
        let mut written = 0usize;
        let mut out = [0u8; 4];
        for &alpha in &alphas {
            let upto = (alpha * slots as f64) as usize;
            let d = pack(
                ks[written..upto]
                    .iter()
                    .zip(&vals[written..upto])
                    .map(|(k, v)| Report::KeyWrite {
                        key: k,
                        data: v,
                        redundancy: nn,
                        immediate: false,
                    }),
            );
            apply(&mut t, &d);
            written = upto;
            let ok = ks[..upto]
                .iter()
                .zip(&vals)
                .filter(|(k, v)| {
                    matches!(
                        layout.lookup(r.mem(), &k[..], Some(nn), 1, &mut out),
                        Ok(Lookup::Found { .. })
                    ) && out[..] == v[..]
                })
                .count();
            csv.row(&[
                nn.to_string(),
                f(alpha),
                f(ok as f64 / upto as f64),
                f(a5_average(upto as u64, slots, nn)),
            ]);
        }
    }
    csv
}

fn fig13(a: &Args) -> Csv {
    // The paper: 100 M 5-hop paths (20 B) at N = 2 with 4-byte checks into 3..30 GiB. Slots here
    // hold 4 + 20 bytes, padded to 24. Scaled down by `scale`: the flows and the slots divided
    // alike keep every load factor, so queryability at a (scaled) age is the paper's.
    let scale: f64 = if a.quick { 4096.0 } else { 256.0 };
    const PAPER_FLOWS: f64 = 100e6;
    const SLOT: f64 = 24.0;
    let mut csv = Csv::new(
        "fig13",
        "store_gib,slots,age_lo,age_hi,queryability,a5,paper_scale",
    );
    for gib in [3.0f64, 6.0, 12.0, 30.0] {
        let paper_slots = gib * (1u64 << 30) as f64 / SLOT;
        let slots = pow2_at_most((paper_slots / scale) as u64);
        // Ages are reported in the paper's units: one flow here stands for `eff` there.
        let eff = paper_slots / slots as f64;
        let flows = (PAPER_FLOWS / eff) as usize;
        let r = key_write(&a.dir, slots, 20, 2);
        let layout = KeyWriteLayout::new(r.header()).unwrap();
        let (mut t, _) = translator(std::slice::from_ref(&r), 1 << 16);
        let ks = keys(flows, 13);
        let vals: Vec<Vec<u8>> = ks.iter().map(|k| value_of(k, 20)).collect();
        apply(
            &mut t,
            &pack(ks.iter().zip(&vals).map(|(k, v)| Report::KeyWrite {
                key: k,
                data: v,
                redundancy: 2,
                immediate: false,
            })),
        );
        let mut out = [0u8; 20];
        let ok: Vec<bool> = ks
            .iter()
            .zip(&vals)
            .map(|(k, v)| {
                matches!(
                    layout.lookup(r.mem(), k, Some(2), 1, &mut out),
                    Ok(Lookup::Found { .. })
                ) && out[..] == v[..]
            })
            .collect();
        // Flow i has age flows - 1 - i (subsequent flows reported); 25 age bins.
        const BINS: usize = 25;
        for b in 0..BINS {
            let (lo, hi) = (b * flows / BINS, (b + 1) * flows / BINS);
            let hits = (lo..hi).filter(|&age| ok[flows - 1 - age]).count();
            let mid = ((lo + hi) / 2) as u64;
            csv.row(&[
                f(gib),
                slots.to_string(),
                f(lo as f64 * eff),
                f(hi as f64 * eff),
                f(hits as f64 / (hi - lo) as f64),
                f(a5_success(mid, slots, 2)),
                f(eff),
            ]);
        }
    }
    csv
}

fn fig14(a: &Args) -> Csv {
    let paths = if a.quick { 20_000 } else { 400_000 };
    let caches: Vec<usize> = if a.quick {
        vec![1 << 8, 1 << 12, 1 << 16]
    } else {
        (8..=20).step_by(2).map(|b| 1usize << b).collect()
    };
    let concurrency: &[usize] = if a.quick {
        &[1_000, 10_000]
    } else {
        &[1_000, 10_000, 100_000]
    };
    let mut csv = Csv::new(
        "fig14",
        "cache_entries,concurrent_flows,paths_per_s,postcards_per_s,success",
    );
    let r = region(
        &a.dir,
        "pc",
        StoreSpec::Postcarding(PostcardingSpec {
            chunks: if a.quick { 1 << 16 } else { 1 << 22 },
            hops: 5,
            slot_bits: 32,
            redundancy: 2,
            key_len: 4,
        }),
    );
    for &c in concurrency {
        // `c` flows in flight; each step one of them (at random) sends its next hop's postcard,
        // and a flow that sent all 5 is replaced by a new one.
        let mut rng = Rng::new(14);
        let mut next_flow = 0u32;
        let mut live: Vec<(u32, u8)> = (0..c)
            .map(|_| {
                next_flow += 1;
                (next_flow, 0u8)
            })
            .collect();
        let mut cards: Vec<([u8; 4], u8)> = Vec::with_capacity(paths * 5);
        while cards.len() < paths * 5 {
            let i = rng.below(c as u64) as usize;
            let (flow, hop) = live[i];
            cards.push((flow.to_be_bytes(), hop));
            live[i] = if hop == 4 {
                next_flow += 1;
                (next_flow, 0)
            } else {
                (flow, hop + 1)
            };
        }
        let d = pack(cards.iter().map(|(k, hop)| Report::Postcard {
            key: k,
            hop: *hop,
            path_len: 5,
            value: u32::from_be_bytes(*k).wrapping_add(*hop as u32) & 0x3_ffff,
            immediate: false,
        }));
        let m = reports_in(&d);
        for &cache in &caches {
            let (mut v, mut s) = (vec![], vec![]);
            for _ in 0..a.runs {
                let (mut t, stats) = translator(std::slice::from_ref(&r), cache);
                let secs = 1.0 / rate(1, || apply(&mut t, &d));
                // Flows still cached at the end are complete or not: flushing decides.
                t.flush_all();
                let complete = stats.postcard_chunks_complete.load(Relaxed) as f64;
                let emitted = complete
                    + stats.postcard_chunks_collision.load(Relaxed) as f64
                    + stats.postcard_chunks_timeout.load(Relaxed) as f64;
                // Success as the paper counts it: complete 5-hop paths over paths reported.
                let all = (m / 5) as f64;
                assert!(emitted >= all * 0.99, "emitted {emitted} of {all} paths");
                v.push(complete / secs);
                s.push(complete / all);
            }
            let paths_s = median(v);
            csv.row(&[
                cache.to_string(),
                c.to_string(),
                f(paths_s),
                f(paths_s * 5.0),
                f(median(s)),
            ]);
        }
    }
    csv
}

fn append_region(dir: &Path, lists: u32, capacity: u64, batch: u32) -> Arc<Region> {
    region(
        dir,
        "ap",
        StoreSpec::Append(AppendSpec {
            lists,
            capacity,
            entry_len: 4,
            batch,
            record: Default::default(),
        }),
    )
}

fn fig15(a: &Args) -> Csv {
    let n = if a.quick { 50_000 } else { 2_000_000 };
    let mut csv = Csv::new("fig15", "batch,entries_per_s,baseline_per_s");
    for batch in [1u32, 2, 4, 8, 16, 32] {
        // One list ([DTA §6.7]: "reporting data into a single list").
        let r = append_region(&a.dir, 1, 1 << 20, batch);
        let layout = AppendLayout::new(r.header()).unwrap();
        let ks = keys(n, 15);
        let d = pack(ks.iter().map(|k| Report::Append {
            list_id: 0,
            data: k,
            immediate: false,
        }));
        let m = reports_in(&d);
        let (mut t, _) = translator(std::slice::from_ref(&r), 1 << 16);
        apply(&mut t, &d);
        let (mut v, mut b) = (vec![], vec![]);
        for _ in 0..a.runs {
            v.push(rate(m, || apply(&mut t, &d)));
            // Baseline: the same bytes copied sequentially, `batch` entries per write.
            let mem = r.mem();
            let block = vec![7u8; 4 * batch as usize];
            let (base, len) = (layout.rings_offset(), (1u64 << 20) * 4);
            b.push(rate(m, || {
                let mut off = 0u64;
                for _ in 0..m / batch as usize {
                    mem.write(base + off, &block).unwrap();
                    off = (off + block.len() as u64) % len;
                }
            }));
        }
        csv.row(&[batch.to_string(), f(median(v)), f(median(b))]);
    }
    csv
}

/// One reader of `list` for `window`: polls it from one ring behind the head, again and again
/// (the "raw list polling rate": what the CPU reads, not how fast entries arrive). Returns the
/// entries read, those missed (overwritten while read) and the thread's CPU seconds.
fn poll_window(r: &Region, list: u32, window: Duration) -> (u64, u64, f64) {
    let layout = AppendLayout::new(r.header()).unwrap();
    let keep = layout.capacity() - 2 * layout.batch() as u64;
    let mem = r.mem();
    let mut out = Vec::with_capacity(4 * 4096);
    let (mut got, mut missed) = (0u64, 0u64);
    let (t0, c0) = (Instant::now(), thread_cpu());
    while t0.elapsed() < window {
        let head = mem.load_u64(layout.head_offset(list)).unwrap();
        let mut reader = ListReader::new(layout.clone(), list, 0, 1)
            .unwrap()
            .with_tail(head.saturating_sub(keep));
        loop {
            out.clear();
            let p = reader.poll(mem, 4096, &mut out);
            black_box(&out);
            got += p.entries as u64;
            missed += p.missed;
            if p.entries == 0 || reader.tail() >= head {
                break;
            }
        }
    }
    (got, missed, (thread_cpu() - c0).as_secs_f64())
}

fn fig16(a: &Args) -> Csv {
    let capacity: u64 = if a.quick { 1 << 16 } else { 1 << 22 };
    let window = Duration::from_millis(if a.quick { 200 } else { 2_000 });
    let mut csv = Csv::new(
        "fig16",
        "readers,collecting,poll_entries_per_s,missed_per_s,collect_entries_per_s",
    );
    // One list per reading core ([DTA §6.7.1]: "a number of lists equal to the number of CPU
    // cores", so readers never share a tail), B = 16 as the paper's collection.
    let r = append_region(&a.dir, 2, capacity, 16);
    let ks = keys(16_384, 16);
    let d = pack(ks.iter().enumerate().map(|(i, k)| Report::Append {
        list_id: (i & 1) as u32,
        data: k,
        immediate: false,
    }));
    // Fill both rings once so a reader has a full ring to read in either mode.
    let (mut t, _) = translator(std::slice::from_ref(&r), 1 << 16);
    for _ in 0..(2 * capacity as usize).div_ceil(ks.len()) + 1 {
        apply(&mut t, &d);
    }
    t.flush_all();
    let m = reports_in(&d) as u64;
    for (readers, collecting) in [(1u32, false), (2, false), (1, true), (2, true)] {
        let (mut polls, mut misses, mut collects) = (vec![], vec![], vec![]);
        for _ in 0..a.runs {
            let stop = Arc::new(AtomicBool::new(false));
            let written = Arc::new(AtomicU64::new(0));
            // The collector: the translator appending to the lists from another thread.
            let writer = collecting.then(|| {
                let (stop, written, d) = (stop.clone(), written.clone(), d.clone());
                let (mut t, _) = translator(std::slice::from_ref(&r), 1 << 16);
                std::thread::spawn(move || {
                    let c0 = thread_cpu();
                    while !stop.load(Relaxed) {
                        apply(&mut t, &d);
                        written.fetch_add(m, Relaxed);
                    }
                    written.load(Relaxed) as f64 / (thread_cpu() - c0).as_secs_f64()
                })
            });
            // Each reader's rate per second of its own CPU time, summed: the rate of `readers`
            // cores (this VM has 2 cores, shared, so wall-clock time would measure the sharing).
            let region: &Region = &r;
            let per: Vec<(u64, u64, f64)> = std::thread::scope(|s| {
                let hs: Vec<_> = (0..readers)
                    .map(|list| s.spawn(move || poll_window(region, list, window)))
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).collect()
            });
            stop.store(true, Relaxed);
            collects.push(writer.map_or(0.0, |w| w.join().unwrap()));
            polls.push(per.iter().map(|p| p.0 as f64 / p.2).sum());
            misses.push(per.iter().map(|p| p.1 as f64 / p.2).sum());
        }
        csv.row(&[
            readers.to_string(),
            (collecting as u8).to_string(),
            f(median(polls)),
            f(median(misses)),
            f(median(collects)),
        ]);
    }
    csv
}

// --- [INT-NIC] ---------------------------------------------------------------------------------

fn int_stores(quick: bool) -> Vec<StoreConfig> {
    let big = if quick { 1 << 16 } else { 1 << 20 };
    [
        format!("name = 'paths'\nkind = 'key-write'\nslots = {big}\nkey_len = 13\ndata_len = 24"),
        format!("name = 'latency'\nkind = 'postcarding'\nchunks = {big}\nhops = 5\nkey_len = 13"),
        "name = 'events'\nkind = 'append'\nlists = 8\ncapacity = 65536\nentry_len = 32\nbatch = 16"
            .to_string(),
        // Histograms at full size in either mode: a few thousand keys, so count-min noise stays
        // far below a count (the figure compares counts with the trace's).
        "name = 'hist'\nkind = 'key-increment'\ncounters = 1048576\nkey_len = 6".to_string(),
    ]
    .iter()
    .map(|t| toml::from_str(t).unwrap())
    .collect()
}

/// The instructions of the first `metrics` of [INT-NIC §IV]'s four (switch id, hop latency,
/// queue occupancy, link utilisation), and the words each hop carries for them.
fn instructions(metrics: usize) -> (u16, u8) {
    let all = [
        instr::NODE_ID,
        instr::HOP_LATENCY,
        instr::QUEUE,
        instr::TX_UTIL,
    ];
    let bits = all[..metrics].iter().fold(0, |a, b| a | b);
    debug_assert_eq!(all.iter().fold(0, |a, b| a | b), INSTRUCTIONS);
    (bits, metrics as u8)
}

/// An INT-MD frame of `p` carrying only `metrics` instructions per hop (as `gen::md_frame`
/// with all four).
fn md_frame_with(p: &GenPacket, port: u16, metrics: usize) -> Vec<u8> {
    let (instructions, hop_ml) = instructions(metrics);
    let header = MdHeader {
        discard: false,
        hop_count_exceeded: false,
        mtu_exceeded: false,
        hop_ml,
        remaining_hop_count: 8u8.saturating_sub(p.hops.len() as u8),
        instructions,
        domain_id: 0,
        ds_instructions: 0,
        ds_flags: 0,
    };
    let hops: Vec<HopMetadata<'_>> = p
        .hops
        .iter()
        .rev()
        .map(|h| HopMetadata {
            node_id: Some(h.node_id),
            baseline: dta_int_wire::Baseline {
                hop_latency: (metrics > 1).then_some(h.latency),
                queue_id: (metrics > 2).then_some(0),
                queue_occupancy: (metrics > 2).then_some(h.queue),
                egress_tx_util: (metrics > 3).then_some(h.util),
                ..dta_int_wire::Baseline::default()
            },
            ..HopMetadata::default()
        })
        .collect();
    let mut int = vec![0u8; 16 + 4 * hop_ml as usize * hops.len()];
    let dport = u16::from_be_bytes([p.flow[10], p.flow[11]]);
    let n = emit_md(1, dport, &header, &hops, &mut int).expect("valid INT-MD");
    int.truncate(n);
    eth_ipv4_udp(
        [2, 0, 0, 0, 0, 2],
        [2, 0, 0, 0, 0, 1],
        &p.flow,
        64 - p.hops.len() as u8,
        port,
        &int,
    )
}

fn int_sink(dir: &Path, quick: bool, port: u16) -> (IntSink<RegionSinks>, Collector) {
    let collector = Collector::create(dir, &int_stores(quick), true).unwrap();
    let translator = Translator::colocated(
        &TranslatorConfig::default(),
        collector.regions(),
        Arc::new(Stats::default()),
    )
    .unwrap();
    // The figures bucket by powers of two, as [INT-NIC §IV] Fig. 6 plots them.
    let cfg = IntSinkConfig {
        int_udp_port: Some(port),
        histogram: Buckets::Log2,
        ..IntSinkConfig::default()
    };
    (IntSink::new(&cfg, translator).unwrap(), collector)
}

fn int3(a: &Args) -> Csv {
    let target = if a.quick { 5_000 } else { 200_000 };
    let mut csv = Csv::new(
        "int3",
        "hops,metrics,frame_bytes,frames_per_s,parse_per_s,errors",
    );
    for hops in 1..=5usize {
        let gcfg = GenConfig {
            flows: if a.quick { 500 } else { 5_000 },
            max_flow_packets: 400,
            hops,
            ..GenConfig::default()
        };
        let packets = generate(&gcfg);
        let detect = IntDetect::udp_port(gcfg.int_udp_port);
        for metrics in 1..=4usize {
            let frames: Vec<(Vec<u8>, u64)> = packets
                .iter()
                .cycle()
                .take(target)
                .map(|p| (md_frame_with(p, gcfg.int_udp_port, metrics), p.time_ns))
                .collect();
            let n = frames.len();
            let tmp = tempfile::tempdir_in(&a.dir).unwrap();
            let (mut sink, _collector) = int_sink(tmp.path(), a.quick, gcfg.int_udp_port);
            let (mut v, mut b) = (vec![], vec![]);
            for _ in 0..a.runs {
                b.push(rate(n, || {
                    for (fr, _) in &frames {
                        if let Ok(Some(int)) = dta_int_wire::find_int(fr, &detect) {
                            if let Some(stack) = int.stack() {
                                for h in stack.iter() {
                                    black_box(h.baseline.hop_latency);
                                }
                            }
                        }
                    }
                }));
                v.push(rate(n, || {
                    for (fr, ts) in &frames {
                        sink.handle_frame(fr, *ts);
                    }
                }));
            }
            let errors: u64 = sink.stats_snapshot().errors.iter().map(|e| e.1).sum();
            csv.row(&[
                hops.to_string(),
                metrics.to_string(),
                frames[0].0.len().to_string(),
                f(median(v)),
                f(median(b)),
                errors.to_string(),
            ]);
        }
    }
    csv
}

fn int6(a: &Args) -> Csv {
    let gcfg = GenConfig {
        flows: if a.quick { 1_000 } else { 20_000 },
        max_flow_packets: 400,
        ..GenConfig::default()
    };
    let packets = generate(&gcfg);
    let tmp = tempfile::tempdir_in(&a.dir).unwrap();
    let (mut sink, collector) = int_sink(tmp.path(), a.quick, gcfg.int_udp_port);
    for p in &packets {
        sink.handle_frame(&md_frame_with(p, gcfg.int_udp_port, 4), p.time_ns);
    }
    sink.flush(packets.last().map_or(0, |p| p.time_ns) + 1);
    let s = sink.stats_snapshot();
    assert!(s.errors.iter().all(|e| e.1 == 0), "{:?}", s.errors);
    let hist = collector.store("hist").unwrap().region.clone();
    let buckets = Buckets::Log2;
    // [INT-NIC §IV] Fig. 6: (a) hop latency over all switches, (b) queue occupancy and (c) link
    // utilisation at the first switch of the path (hop 0; its switches are 100..).
    let mut csv = Csv::new("int6", "metric,bucket_lo,bucket_hi,truth,observed");
    for (metric, first_only) in [
        (Metric::HopLatency, false),
        (Metric::QueueOccupancy, true),
        (Metric::EgressTxUtil, true),
    ] {
        let mut truth = vec![0u64; buckets.count()];
        let mut nodes = std::collections::BTreeSet::new();
        for p in &packets {
            for (i, h) in p.hops.iter().enumerate() {
                if first_only && i > 0 {
                    continue;
                }
                nodes.insert(h.node_id);
                let v = match metric {
                    Metric::HopLatency => h.latency,
                    Metric::QueueOccupancy => h.queue,
                    Metric::EgressTxUtil => h.util,
                };
                truth[buckets.bucket(v) as usize] += 1;
            }
        }
        let mut observed = vec![0u64; buckets.count()];
        for node in nodes {
            let h = query::histogram(&hist, node, metric, Some(&buckets), None).unwrap();
            for (o, b) in observed.iter_mut().zip(&h.buckets) {
                *o += b.count;
            }
        }
        for (b, (t, o)) in truth.iter().zip(&observed).enumerate() {
            if *t == 0 && *o == 0 {
                continue;
            }
            let (lo, hi) = buckets.range(b);
            csv.row(&[
                metric.name().to_string(),
                lo.to_string(),
                hi.map_or("inf".to_string(), |h| h.to_string()),
                t.to_string(),
                o.to_string(),
            ]);
        }
    }
    csv
}

fn main() {
    let a = parse_args();
    std::fs::create_dir_all(&a.out).unwrap();
    let want = |name: &str| a.only.is_empty() || a.only.iter().any(|x| x == name);
    type Figure = (&'static str, fn(&Args) -> Csv);
    let figs: [Figure; 9] = [
        ("fig10", fig10),
        ("fig11", fig11),
        ("fig12", fig12),
        ("fig13", fig13),
        ("fig14", fig14),
        ("fig15", fig15),
        ("fig16", fig16),
        ("int3", int3),
        ("int6", int6),
    ];
    for (name, run) in figs {
        if want(name) {
            let t0 = Instant::now();
            run(&a).write(&a.out);
            eprintln!("{name}: {:.1} s", t0.elapsed().as_secs_f64());
        }
    }
}
