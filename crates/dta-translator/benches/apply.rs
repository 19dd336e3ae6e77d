//! Apply-rate benchmark: how fast the translator turns reports into memory writes, per
//! primitive, on one core, with no network — against a plain loop doing the same number of
//! random 8-byte writes into the same region (the memory baseline), measured in the same run.
//! Also: datagram parsing + apply for native datagrams of 32 reports, and Key-Write queries.
//!
//! `cargo bench -p dta-translator --bench apply` (env: DTA_BENCH_MB region size, default 256;
//! DTA_BENCH_REPORTS per run, default 2 000 000; DTA_BENCH_RUNS, default 5). Prints medians.

use std::hint::black_box;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use dta_store::{
    AppendSpec, HashScheme, KeyIncrementSpec, KeyWriteLayout, KeyWriteSpec, PostcardingSpec,
    Region, StoreSpec,
};
use dta_translator::{Stats, Translator, TranslatorConfig};
use dta_wire::native::DatagramBuilder;
use dta_wire::{Priority, Report};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn pow2_at_most(x: u64) -> u64 {
    1u64 << (63 - x.max(1).leading_zeros())
}

fn main() {
    let mb = env("DTA_BENCH_MB", 256);
    let n = env("DTA_BENCH_REPORTS", 2_000_000) as usize;
    let runs = env("DTA_BENCH_RUNS", 5) as usize;
    let base = if Path::new("/dev/shm").is_dir() {
        "/dev/shm"
    } else {
        "/tmp"
    };
    let dir = tempfile::tempdir_in(base).unwrap();
    let bytes = mb << 20;
    let specs = [
        (
            "kw",
            StoreSpec::KeyWrite(KeyWriteSpec {
                slots: pow2_at_most(bytes / 8),
                key_len: 4,
                data_len: 4,
                hash: HashScheme::Native,
            }),
        ),
        (
            "ki",
            StoreSpec::KeyIncrement(KeyIncrementSpec {
                counters: pow2_at_most(bytes / 8),
                key_len: 4,
                hash: HashScheme::Native,
            }),
        ),
        (
            "pc",
            StoreSpec::Postcarding(PostcardingSpec {
                chunks: pow2_at_most(bytes / 20),
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
                capacity: pow2_at_most(bytes / 64),
                entry_len: 4,
                batch: 16,
            }),
        ),
    ];
    let regions: Vec<Arc<Region>> = specs
        .iter()
        .map(|(name, spec)| {
            Arc::new(
                Region::create(&dir.path().join(format!("{name}.region")), name, spec, true)
                    .unwrap(),
            )
        })
        .collect();
    let cfg = TranslatorConfig {
        postcard_cache_entries: 1 << 16,
        ..Default::default()
    };
    let mut t = Translator::colocated(&cfg, regions.clone(), Arc::new(Stats::default())).unwrap();
    let src: SocketAddr = "127.0.0.1:1".parse().unwrap();

    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let keys: Vec<[u8; 4]> = (0..n).map(|_| (rng.next() as u32).to_be_bytes()).collect();
    let data = [1u8, 2, 3, 4];

    let time = |f: &mut dyn FnMut()| -> f64 {
        let t0 = Instant::now();
        f();
        n as f64 / t0.elapsed().as_secs_f64()
    };

    // Baseline: the same number of random 8-byte writes into the Key-Write region, `per` per report.
    let kw_mem = regions[0].mem();
    let words = kw_mem.len() / 8;
    let baseline = |per: usize| -> f64 {
        let mut r = Rng(7);
        let t0 = Instant::now();
        for i in 0..n * per {
            let w = r.next() % words;
            kw_mem.write(w * 8, &(i as u64).to_le_bytes()).unwrap();
        }
        n as f64 / t0.elapsed().as_secs_f64()
    };

    let mut rows: Vec<(&str, f64, f64, &str)> = vec![];
    let base2: Vec<f64> = (0..runs).map(|_| baseline(2)).collect();
    let base2 = median(base2);

    let now = Instant::now();
    let kw: Vec<f64> = (0..runs)
        .map(|_| {
            time(&mut || {
                for k in &keys {
                    t.apply(
                        &Report::KeyWrite {
                            key: k,
                            data: &data,
                            redundancy: 2,
                            immediate: false,
                        },
                        0,
                        src,
                        now,
                    );
                }
            })
        })
        .collect();
    rows.push((
        "Key-Write N=2",
        median(kw),
        base2,
        "2 random 8-byte writes/report",
    ));

    let ki: Vec<f64> = (0..runs)
        .map(|_| {
            time(&mut || {
                for k in &keys {
                    t.apply(
                        &Report::KeyIncrement {
                            key: k,
                            counter: 1,
                            redundancy: 2,
                            immediate: false,
                        },
                        0,
                        src,
                        now,
                    );
                }
            })
        })
        .collect();
    rows.push((
        "Key-Increment N=2",
        median(ki),
        base2,
        "2 random 8-byte writes/report",
    ));

    // Postcarding: 5-hop paths, postcards in hop order; rate counted in postcards.
    let pc: Vec<f64> = (0..runs)
        .map(|_| {
            time(&mut || {
                for (i, k) in keys.iter().enumerate() {
                    let flow = if i % 5 == 0 { k } else { &keys[i / 5 * 5] };
                    t.apply(
                        &Report::Postcard {
                            key: flow,
                            hop: (i % 5) as u8,
                            path_len: 5,
                            value: i as u32 & 0x3ffff,
                            immediate: false,
                        },
                        0,
                        src,
                        now,
                    );
                }
            })
        })
        .collect();
    // A 5-hop path is 5 postcards and 2 random chunk writes: the baseline is 2 random writes per
    // 5 reports.
    rows.push((
        "Postcarding B=5 N=2 (per postcard)",
        median(pc),
        base2 * 5.0,
        "2 random writes per 5 postcards",
    ));

    let ap: Vec<f64> = (0..runs)
        .map(|_| {
            time(&mut || {
                for (i, k) in keys.iter().enumerate() {
                    t.apply(
                        &Report::Append {
                            list_id: (i & 15) as u32,
                            data: k,
                            immediate: false,
                        },
                        0,
                        src,
                        now,
                    );
                }
            })
        })
        .collect();
    // Sequential baseline: the same bytes copied sequentially in 64-byte blocks.
    let seq: Vec<f64> = (0..runs)
        .map(|_| {
            let block = [7u8; 64];
            let len = kw_mem.len();
            let t0 = Instant::now();
            let total = n as u64 * 4;
            let mut off = 0;
            while off < total {
                kw_mem.write(off % (len - 64), &block).unwrap();
                off += 64;
            }
            n as f64 / t0.elapsed().as_secs_f64()
        })
        .collect();
    rows.push((
        "Append B=16, 16 lists",
        median(ap),
        median(seq),
        "sequential 64-byte writes of the same bytes",
    ));

    // Parse + apply: native datagrams of 32 Key-Write reports.
    let mut dgrams: Vec<Vec<u8>> = vec![];
    for chunk in keys.chunks(32) {
        let mut buf = vec![0u8; 1500];
        let mut b = DatagramBuilder::new(&mut buf, Priority::Medium, false, 1, 0).unwrap();
        for k in chunk {
            b.push(&Report::KeyWrite {
                key: k,
                data: &data,
                redundancy: 2,
                immediate: false,
            })
            .unwrap();
        }
        let len = b.finish();
        buf.truncate(len);
        dgrams.push(buf);
    }
    let dg: Vec<f64> = (0..runs)
        .map(|_| {
            time(&mut || {
                for d in &dgrams {
                    t.handle_datagram(d, src, now);
                }
            })
        })
        .collect();
    rows.push((
        "Key-Write N=2, parse+apply, 32/datagram",
        median(dg),
        base2,
        "2 random 8-byte writes/report",
    ));

    // Queries on the filled Key-Write store.
    let layout = KeyWriteLayout::new(regions[0].header()).unwrap();
    let q: Vec<f64> = (0..runs)
        .map(|_| {
            time(&mut || {
                for k in &keys {
                    black_box(layout.query(kw_mem, k, 2, 1));
                }
            })
        })
        .collect();
    rows.push((
        "Key-Write query N=2",
        median(q),
        base2,
        "baseline: 2 random 8-byte writes",
    ));

    println!("dta apply benchmark: region {mb} MiB per store in {base}, {n} reports per run, median of {runs} runs, one core");
    println!(
        "{:<42} {:>12} {:>14} {:>7}  baseline",
        "what", "M ops/s", "baseline M/s", "ratio"
    );
    for (what, rate, base, note) in rows {
        println!(
            "{:<42} {:>12.2} {:>14.2} {:>7.2}  {note}",
            what,
            rate / 1e6,
            base / 1e6,
            rate / base
        );
    }
    println!("translator counters: {}", t.stats().snapshot()["memory"]);
}
