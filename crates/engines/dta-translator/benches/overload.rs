//! Overload: receive-side shedding (docs/benchmarks.md, "Overload: receive-side shedding").
//!
//! Over loopback UDP, a paced sender offers native Key-Write datagrams (`--per` reports each,
//! 20 % high, 30 % medium, 50 % low priority, from 8 sockets) to the co-located translator, run
//! either without the classifier (`ingest::run_threads`: each translator thread reads its socket) or behind
//! the first-stage classifier (`ingest::run_classified`). First the sustainable rate of each
//! mode is searched (the highest offered rate at which nothing is dropped or shed and the
//! translator applies at least 95 % of it within the run); then both modes are offered twice
//! the plain mode's sustainable rate, `--runs` times, and the medians printed by priority:
//! offered, applied, shed by the classifier, and dropped by the kernel at the full receive
//! buffer (offered - applied - shed; the socket's `SO_MEMINFO` drop count is printed beside it
//! as a check).
//!
//! The search's probes last at most a second each.
//!
//! `cargo bench -p dta-translator --bench overload -- [--secs S] [--runs N] [--threads N]
//! [--per N] [--rate DATAGRAMS_PER_S] [--depths LOW,MEDIUM,HIGH] [--smoke]`; `--rate` skips the search and takes that as
//! the sustainable rate. `scripts/bench.sh --only overload` runs it.

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dta_store::{HashScheme, KeyWriteSpec, Region, StoreSpec};
use dta_translator::classify::Lanes;
use dta_translator::{ingest, Shards, Stats, Translator, TranslatorConfig};
use dta_wire::native::DatagramBuilder;
use dta_wire::{Priority, Report};

struct Args {
    secs: f64,
    runs: usize,
    threads: usize,
    per: usize,
    rate: Option<f64>,
    /// Classifier queue depths low, medium, high (default: the configuration's).
    depths: Option<[usize; 3]>,
    smoke: bool,
}

fn parse_args() -> Args {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let smoke = argv.iter().any(|a| a == "--smoke");
    let mut a = Args {
        secs: if smoke { 0.2 } else { 2.0 },
        runs: if smoke { 1 } else { 3 },
        threads: 1,
        per: 64,
        rate: None,
        depths: None,
        smoke,
    };
    let val = |i: usize| -> String { argv.get(i + 1).cloned().unwrap_or_default() };
    let mut i = 0;
    while i < argv.len() {
        match argv[i].as_str() {
            "--secs" => a.secs = val(i).parse().expect("--secs S"),
            "--runs" => a.runs = val(i).parse().expect("--runs N"),
            "--threads" => a.threads = val(i).parse().expect("--threads N"),
            "--per" => a.per = val(i).parse().expect("--per N"),
            "--rate" => a.rate = Some(val(i).parse().expect("--rate DATAGRAMS_PER_S")),
            "--depths" => {
                let v: Vec<usize> = val(i)
                    .split(',')
                    .map(|x| x.parse().expect("--depths LOW,MEDIUM,HIGH"))
                    .collect();
                a.depths = Some([v[0], v[1], v[2]]);
            }
            _ => {
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    a.per = a.per.clamp(1, 255);
    a
}

/// Priority of datagram `i`: 2 in 10 high, 3 medium, 5 low, interleaved.
const MIX: [Priority; 10] = [
    Priority::Low,
    Priority::High,
    Priority::Medium,
    Priority::Low,
    Priority::Low,
    Priority::Medium,
    Priority::High,
    Priority::Low,
    Priority::Medium,
    Priority::Low,
];

/// 1000 datagrams of `per` Key-Write reports over random keys (reporter id = priority).
fn datagrams(per: usize) -> Vec<(Priority, Vec<u8>)> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut buf = vec![0u8; 9000];
    (0..1000)
        .map(|i| {
            let p = MIX[i % MIX.len()];
            let mut b = DatagramBuilder::new(&mut buf, p, false, p as u32, i as u32).unwrap();
            for _ in 0..per {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                b.push(&Report::KeyWrite {
                    key: &(x as u32).to_be_bytes(),
                    data: &((x >> 32) as u32).to_be_bytes(),
                    redundancy: 2,
                    immediate: false,
                })
                .unwrap();
            }
            let n = b.finish();
            (p, buf[..n].to_vec())
        })
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    Plain,
    Classified,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Plain => "without classifier",
            Mode::Classified => "with classifier",
        }
    }
}

/// One run's figures, per priority (low, medium, high) where indexed.
#[derive(Debug, Clone, Copy, Default)]
struct Outcome {
    offered: [u64; 3],
    /// Applied by the end of the sending period.
    applied_in_time: [u64; 3],
    /// Applied in all, the stop's drain included.
    applied: [u64; 3],
    shed: [u64; 3],
    socket_drops: u64,
    secs: f64,
}

impl Outcome {
    fn kernel(&self, p: usize) -> u64 {
        self.offered[p]
            .saturating_sub(self.applied[p])
            .saturating_sub(self.shed[p])
    }
    fn total(v: &[u64; 3]) -> u64 {
        v.iter().sum()
    }
    /// Nothing dropped or shed, and at least 95 % applied within the period.
    fn sustained(&self) -> bool {
        let off = Outcome::total(&self.offered);
        Outcome::total(&self.shed) == 0
            && (0..3).all(|p| self.kernel(p) == 0)
            && self.socket_drops == 0
            && Outcome::total(&self.applied_in_time) as f64 >= 0.95 * off as f64
    }
}

struct Bench<'a> {
    a: &'a Args,
    regions: Vec<Arc<Region>>,
    d: Vec<(Priority, Vec<u8>)>,
}

impl Bench<'_> {
    fn run(&self, mode: Mode, rate: f64) -> Outcome {
        self.run_for(mode, rate, self.a.secs)
    }

    fn run_for(&self, mode: Mode, rate: f64, secs: f64) -> Outcome {
        let cfg = TranslatorConfig::default();
        let threads = self.a.threads.max(1);
        let shards = Shards::new(threads, 8192);
        let stats: Vec<Arc<Stats>> = (0..=threads).map(|_| Arc::new(Stats::default())).collect();
        let mut ts: Vec<_> = (0..threads)
            .map(|i| {
                Translator::colocated(&cfg, self.regions.clone(), stats[i].clone())
                    .unwrap()
                    .with_shard(shards.shard(i))
            })
            .collect();
        let sockets = dta_translator::prio_sockets::bind(
            "127.0.0.1:0".parse().unwrap(),
            if mode == Mode::Classified { 1 } else { threads },
            cfg.recv_buffer,
        )
        .unwrap();
        let to = sockets[0].local_addr().unwrap();
        let depths = match self.a.depths {
            Some([low, medium, high]) => dta_translator::config::Depths { low, medium, high },
            None => cfg.classifier_depths(),
        };
        let lanes = Lanes::new(threads, depths, cfg.recv_batch).unwrap();
        let stop = AtomicBool::new(false);
        let mut o = Outcome {
            secs,
            ..Default::default()
        };
        std::thread::scope(|s| {
            let runner = s.spawn(|| match mode {
                Mode::Plain => ingest::run_threads(&mut ts, &sockets, cfg.recv_batch, &stop),
                Mode::Classified => ingest::run_classified(
                    &mut ts,
                    &sockets[0],
                    &lanes,
                    &cfg.allow,
                    &stats[threads],
                    cfg.recv_batch,
                    &stop,
                ),
            });
            o.offered = send(&self.d, to, rate, Duration::from_secs_f64(secs));
            let sum = Stats::sum(&stats);
            o.applied_in_time = std::array::from_fn(|p| sum.by_priority[p].load(Relaxed));
            stop.store(true, Relaxed);
            runner.join().unwrap().unwrap();
        });
        let sum = Stats::sum(&stats);
        o.applied = std::array::from_fn(|p| sum.by_priority[p].load(Relaxed));
        o.shed = std::array::from_fn(|p| sum.shed[p].load(Relaxed));
        o.socket_drops = sockets
            .iter()
            .map(|s| s.kernel_drops().iter().sum::<u64>())
            .sum();
        o
    }

    /// The highest rate (datagrams/s) `mode` sustains: doubling from 10 000/s, then bisecting;
    /// probes of at most a second.
    fn sustainable(&self, mode: Mode) -> f64 {
        let secs = self.a.secs.min(1.0);
        let (mut good, mut bad) = (0.0, f64::INFINITY);
        let mut r = 10_000.0;
        let steps = if self.a.smoke { 2 } else { 6 };
        while bad.is_infinite() && r < 4e6 {
            let o = self.run_for(mode, r, secs);
            eprintln!("  {}: {:.0}/s sustained: {}", mode.name(), r, o.sustained());
            if o.sustained() {
                good = r;
                r *= 2.0;
            } else {
                bad = r;
            }
        }
        for _ in 0..steps {
            if bad.is_infinite() {
                break;
            }
            let mid = (good + bad) / 2.0;
            let o = self.run_for(mode, mid, secs);
            eprintln!(
                "  {}: {:.0}/s sustained: {}",
                mode.name(),
                mid,
                o.sustained()
            );
            if o.sustained() {
                good = mid;
            } else {
                bad = mid;
            }
        }
        good
    }
}

/// Send `d` round-robin from 8 sockets to `to` at `rate` datagrams/s for `dur` (batches of 32
/// with `sendmmsg`); returns the datagrams the kernel accepted, by priority.
fn send(d: &[(Priority, Vec<u8>)], to: SocketAddr, rate: f64, dur: Duration) -> [u64; 3] {
    const BATCH: usize = 32;
    let txs: Vec<UdpSocket> = (0..8)
        .map(|_| {
            let s = UdpSocket::bind("127.0.0.1:0").unwrap();
            s.connect(to).unwrap();
            s
        })
        .collect();
    let mut offered = [0u64; 3];
    let mut iovecs: Vec<libc::iovec> = Vec::with_capacity(BATCH);
    // SAFETY: mmsghdr is a plain C struct for which all-zero is valid.
    let mut msgs: Vec<libc::mmsghdr> = (0..BATCH)
        .map(|_| unsafe { std::mem::MaybeUninit::zeroed().assume_init() })
        .collect();
    let t0 = Instant::now();
    let mut sent = 0u64;
    let mut next = 0usize;
    let mut turn = 0usize;
    loop {
        let el = t0.elapsed();
        if el >= dur {
            break;
        }
        let due = (rate * el.as_secs_f64()) as u64;
        if sent >= due {
            std::thread::sleep(Duration::from_micros(50));
            continue;
        }
        let n = ((due - sent) as usize).min(BATCH);
        iovecs.clear();
        for k in 0..n {
            let x = &d[(next + k) % d.len()].1;
            iovecs.push(libc::iovec {
                iov_base: x.as_ptr() as *mut libc::c_void,
                iov_len: x.len(),
            });
        }
        for (k, m) in msgs.iter_mut().enumerate().take(n) {
            m.msg_hdr.msg_iov = &mut iovecs[k];
            m.msg_hdr.msg_iovlen = 1;
        }
        let tx = &txs[turn % txs.len()];
        turn += 1;
        // SAFETY: the first n headers point at iovecs over datagrams that outlive the call.
        let r = unsafe { libc::sendmmsg(tx.as_raw_fd(), msgs.as_mut_ptr(), n as u32, 0) };
        // A refused send is not offered; the paced schedule goes on regardless.
        let ok = r.max(0) as usize;
        for k in 0..ok {
            offered[d[(next + k) % d.len()].0 as usize] += 1;
        }
        next = (next + n) % d.len();
        sent += n as u64;
    }
    offered
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let a = parse_args();
    let shm = if Path::new("/dev/shm").is_dir() {
        "/dev/shm"
    } else {
        "/tmp"
    };
    let dir = tempfile::tempdir_in(shm).unwrap();
    let spec = StoreSpec::KeyWrite(KeyWriteSpec {
        slots: 1 << 23,
        key_len: 4,
        data_len: 4,
        hash: HashScheme::Native,
        redundancy: 2,
    });
    let regions = vec![Arc::new(
        Region::create(&dir.path().join("kw.region"), "kw", &spec, true).unwrap(),
    )];
    let b = Bench {
        a: &a,
        regions,
        d: datagrams(a.per),
    };
    let d = TranslatorConfig::default().classifier_depths();
    println!(
        "# overload: {} Key-Write reports per datagram, 20/30/50 % high/medium/low, {} translator thread(s), classifier queues {:?} (low, medium, high), {:.1} s per run, median of {}{}",
        a.per,
        a.threads,
        a.depths.unwrap_or([d.low, d.medium, d.high]),
        a.secs,
        a.runs,
        if a.smoke { " (smoke)" } else { "" }
    );
    let (plain, classified) = match a.rate {
        Some(r) => (r, f64::NAN),
        None => {
            eprintln!("searching the sustainable rate (datagrams/s):");
            (b.sustainable(Mode::Plain), b.sustainable(Mode::Classified))
        }
    };
    println!(
        "sustainable: {plain:.0} datagrams/s without classifier ({:.2} M reports/s), {classified:.0} with",
        plain * a.per as f64 / 1e6
    );
    let offered_rate = 2.0 * plain;
    println!(
        "\n## offered {offered_rate:.0} datagrams/s (2x), medians of {} runs; datagrams per second of the run, by priority\n",
        a.runs
    );
    println!(
        "| mode | priority | offered/s | applied/s (during the run) | applied % (in all) | shed/s | kernel-dropped/s |"
    );
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: |");
    for mode in [Mode::Plain, Mode::Classified] {
        let runs: Vec<Outcome> = (0..a.runs).map(|_| b.run(mode, offered_rate)).collect();
        for p in [Priority::High, Priority::Medium, Priority::Low] {
            let i = p as usize;
            let m = |f: &dyn Fn(&Outcome) -> f64| median(runs.iter().map(f).collect());
            println!(
                "| {} | {} | {:.0} | {:.0} | {:.1} | {:.0} | {:.0} |",
                mode.name(),
                p.name(),
                m(&|o| o.offered[i] as f64 / o.secs),
                m(&|o| o.applied_in_time[i] as f64 / o.secs),
                m(&|o| 100.0 * o.applied[i] as f64 / o.offered[i].max(1) as f64),
                m(&|o| o.shed[i] as f64 / o.secs),
                m(&|o| o.kernel(i) as f64 / o.secs),
            );
        }
        let m = |f: &dyn Fn(&Outcome) -> f64| median(runs.iter().map(f).collect());
        println!(
            "| {} | all | {:.0} | {:.0} | {:.1} | {:.0} | {:.0} (socket SO_MEMINFO drops: {:.0}/s) |",
            mode.name(),
            m(&|o| Outcome::total(&o.offered) as f64 / o.secs),
            m(&|o| Outcome::total(&o.applied_in_time) as f64 / o.secs),
            m(&|o| 100.0 * Outcome::total(&o.applied) as f64
                / Outcome::total(&o.offered).max(1) as f64),
            m(&|o| Outcome::total(&o.shed) as f64 / o.secs),
            m(&|o| (0..3).map(|p| o.kernel(p)).sum::<u64>() as f64 / o.secs),
            m(&|o| o.socket_drops as f64 / o.secs),
        );
    }
}
