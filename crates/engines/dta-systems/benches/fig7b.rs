//! [DTA §6.1] Fig. 7b in spirit: how many Marple reporters (switches) one collector supports
//! before it loses reports, DTA (the translator writing the stores of `examples/systems.toml`
//! in shared memory) against a conventional CPU collector (`dta_translator::baseline`: parse
//! every report, insert it into hash maps and per-list rings).
//!
//! Each switch replays the same synthesized trace (`fb_hadoop`, seeded) at the trace's own
//! rate: its Marple reports (host counters, lossy connections, TCP timeouts, flowlet sizes),
//! native datagrams of up to 32 reports, each switch with its own reporter id and sequence
//! numbers. Over loopback UDP, one sender paces `switches x rate` reports per second for
//! `--secs` per step; the collector thread receives with `recvmmsg`. Switches double per step
//! until the collector counts fewer reports than were sent (by more than [`LOSS_LIMIT`]), or
//! the sender cannot offer the load (then the figure says the sender bounded the ramp). The
//! number of switches supported is the last step without loss.
//!
//! `cargo bench -p dta-systems --bench fig7b -- [--quick] [--secs S] [--flows N]
//! [--max-switches N] [--json FILE]`; `scripts/marple_fig7b.py` runs it and plots.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dta_collector::{Collector, StoreConfig};
use dta_systems::marple::{self, Params, Query};
use dta_systems::trace::{synthesize, FlowSizeCdf, SynthConfig};
use dta_translator::baseline::{collect, HashMapCollector};
use dta_translator::ingest;
use dta_translator::{Stats, Translator, TranslatorConfig};
use dta_wire::native::{DatagramBuilder, Packet};
use dta_wire::{Priority, Report};

/// A step loses reports when the collector counted fewer than `1 - LOSS_LIMIT` of those sent.
const LOSS_LIMIT: f64 = 0.001;
/// Reports per datagram (the native reporter's default batch).
const BATCH: usize = 32;
/// The sender must send at least this fraction of the step's datagrams, else the ramp stops.
const SENDER_SLACK: f64 = 0.95;

const SYSTEMS: &str = include_str!("../../../../examples/systems.toml");

#[derive(serde::Deserialize)]
struct SystemsToml {
    store: Vec<StoreConfig>,
}

struct Args {
    secs: f64,
    flows: usize,
    max_switches: u32,
    json: Option<std::path::PathBuf>,
}

fn args() -> Args {
    let mut a = Args {
        secs: 2.0,
        flows: 400,
        max_switches: 4096,
        json: None,
    };
    let v: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < v.len() {
        let next = |i: usize| v.get(i + 1).cloned().unwrap_or_default();
        match v[i].as_str() {
            "--quick" => a.secs = 0.3,
            "--secs" => {
                a.secs = next(i).parse().expect("--secs S");
                i += 1;
            }
            "--flows" => {
                a.flows = next(i).parse().expect("--flows N");
                i += 1;
            }
            "--max-switches" => {
                a.max_switches = next(i).parse().expect("--max-switches N");
                i += 1;
            }
            "--json" => {
                a.json = Some(next(i).into());
                i += 1;
            }
            _ => {} // `--bench` from cargo
        }
        i += 1;
    }
    a
}

/// A report held to be packed: kind (0 Key-Write, 1 Key-Increment, 2 Append), key, data,
/// counter, list.
type Owned = (u8, Vec<u8>, Vec<u8>, u64, u32);

/// One switch's Marple reports over the trace, as native datagrams (reporter id and sequence
/// number patched per send); the reports in each.
fn datagrams(flows: usize) -> (Vec<(Vec<u8>, u64)>, f64) {
    let cdf = FlowSizeCdf::builtin("fb_hadoop").expect("built-in workload");
    let (trace, _) = synthesize(
        &SynthConfig {
            flows,
            seed: 1,
            ..SynthConfig::default()
        },
        &cdf,
    )
    .expect("synthesis");
    let mut out = vec![];
    let mut buf = vec![0u8; 1472];
    let mut reports = 0u64;
    // Reports are owned briefly to pack them; the datagram builder is the one encoder.
    let mut owned: Vec<Owned> = vec![];
    for q in Query::ALL {
        marple::reports(q, &trace, &Params::default(), &mut |r: &Report<'_>| {
            owned.push(match *r {
                Report::KeyWrite { key, data, .. } => (0, key.to_vec(), data.to_vec(), 0, 0),
                Report::KeyIncrement { key, counter, .. } => (1, key.to_vec(), vec![], counter, 0),
                Report::Append { list_id, data, .. } => (2, vec![], data.to_vec(), 0, list_id),
                _ => unreachable!("Marple sends Key-Write, Key-Increment and Append"),
            });
            Ok(())
        })
        .expect("Marple reports");
    }
    for chunk in owned.chunks(BATCH) {
        let mut b = DatagramBuilder::new(&mut buf, Priority::Medium, false, 1, 0).unwrap();
        for (kind, key, data, counter, list) in chunk {
            let r = match kind {
                0 => Report::KeyWrite {
                    key,
                    data,
                    redundancy: marple::REDUNDANCY,
                    immediate: false,
                },
                1 => Report::KeyIncrement {
                    key,
                    counter: *counter,
                    redundancy: marple::REDUNDANCY,
                    immediate: false,
                },
                _ => Report::Append {
                    list_id: *list,
                    data,
                    immediate: false,
                },
            };
            b.push(&r).expect("fits a datagram");
        }
        let n = b.finish();
        reports += chunk.len() as u64;
        out.push((buf[..n].to_vec(), chunk.len() as u64));
    }
    let rate = reports as f64 / (trace.duration_ns() as f64 / 1e9);
    eprintln!(
        "trace: {} flows, {} packets over {:.2} s -> {} Marple reports per switch in {} datagrams: {:.0} reports/s per switch",
        flows,
        trace.packets.len(),
        trace.duration_ns() as f64 / 1e9,
        reports,
        out.len(),
        rate
    );
    (out, rate)
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Dta,
    HashMap,
}

#[derive(serde::Serialize, Clone)]
struct Step {
    switches: u32,
    offered: f64,
    achieved: f64,
    sent: u64,
    received: u64,
    loss: f64,
    /// The sender could not offer the step's load.
    sender_behind: bool,
    /// CPU seconds of the collector's receiving thread during the step.
    collector_cpu: f64,
    /// Reports the collector handled per second of its CPU time.
    per_cpu_second: f64,
}

/// CPU time of the calling thread, seconds.
fn thread_cpu() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// One step: `switches` switches for `secs` into a fresh receiver of `mode`.
fn step(
    mode: Mode,
    dgs: &[(Vec<u8>, u64)],
    switches: u32,
    rate: f64,
    secs: f64,
    regions: &Collector,
    map: &mut HashMapCollector,
) -> Step {
    let cfg = TranslatorConfig::default();
    let sock = ingest::bind("127.0.0.1:0".parse().unwrap(), cfg.recv_buffer).unwrap();
    let to: SocketAddr = sock.local_addr().unwrap();
    let stop = AtomicBool::new(false);
    let stats = Arc::new(Stats::default());
    let offered = switches as f64 * rate;
    let (sent, elapsed, behind, received, cpu) = std::thread::scope(|s| {
        let rx = s.spawn(|| -> (u64, f64) {
            let cpu0 = thread_cpu();
            let n = match mode {
                Mode::Dta => {
                    let mut t = Translator::colocated(&cfg, regions.regions(), stats.clone())
                        .expect("translator");
                    ingest::run(
                        &mut t,
                        &ingest::PrioSockets::single(sock),
                        cfg.recv_batch,
                        &stop,
                    )
                    .expect("ingest");
                    stats.reports.iter().map(|c| c.load(Relaxed)).sum()
                }
                Mode::HashMap => {
                    let mut bufs = ingest::recv_batch(cfg.recv_batch);
                    let fd = std::os::fd::AsRawFd::as_raw_fd(&sock);
                    let mut n = 0u64;
                    while !stop.load(Relaxed) {
                        let got = bufs.recv(fd, libc::MSG_WAITFORONE).unwrap_or(0);
                        for i in 0..got {
                            n += collect(bufs.datagram(i).0, map) as u64;
                        }
                    }
                    n
                }
            };
            (n, thread_cpu() - cpu0)
        });
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(to).unwrap();
        let mut seqs = vec![0u32; switches as usize];
        let mut cursor = vec![0usize; switches as usize];
        // Paced in datagrams: the offered reports per second over the reports per datagram,
        // catching up after a late wake-up (on a loaded machine a sleep overshoots; the
        // reporter's `Pacer` deliberately never bursts to catch up, which would bound the
        // ramp by the sender's sleeps rather than the collector).
        let per_datagram = dgs.iter().map(|d| d.1).sum::<u64>() as f64 / dgs.len() as f64;
        let dgram_rate = offered / per_datagram;
        let mut buf = vec![0u8; 1500];
        let (mut sent, mut datagrams) = (0u64, 0u64);
        let start = Instant::now();
        let deadline = start + Duration::from_secs_f64(secs);
        let mut sw = 0usize;
        while Instant::now() < deadline {
            let due = (dgram_rate * start.elapsed().as_secs_f64()) as u64;
            if datagrams >= due {
                std::thread::sleep(Duration::from_micros(500));
                continue;
            }
            for _ in 0..(due - datagrams).min(4096) {
                let (d, n) = &dgs[cursor[sw]];
                cursor[sw] = (cursor[sw] + 1) % dgs.len();
                buf[..d.len()].copy_from_slice(d);
                let mut p = Packet::new_unchecked(&mut buf[..d.len()]);
                p.set_reporter_id(sw as u32 + 1);
                p.set_seq(seqs[sw]);
                seqs[sw] = seqs[sw].wrapping_add(1);
                if tx.send(&buf[..d.len()]).is_ok() {
                    sent += n;
                }
                datagrams += 1;
                sw = (sw + 1) % switches as usize;
            }
        }
        let elapsed = start.elapsed().as_secs_f64();
        // Behind when more than a few datagrams short of the paced count.
        let behind = (datagrams as f64) < SENDER_SLACK * dgram_rate * elapsed - 4.0;
        // Let the receiver drain what the kernel holds.
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, Relaxed);
        let (received, cpu) = rx.join().unwrap();
        (sent, elapsed, behind, received, cpu)
    });
    Step {
        switches,
        offered,
        achieved: sent as f64 / elapsed,
        sent,
        received,
        loss: 1.0 - received as f64 / sent.max(1) as f64,
        sender_behind: behind,
        collector_cpu: cpu,
        per_cpu_second: received as f64 / cpu.max(1e-9),
    }
}

fn main() {
    let a = args();
    let (dgs, rate) = datagrams(a.flows);
    let stores: SystemsToml = toml::from_str(SYSTEMS).expect("examples/systems.toml");
    let dir = tempfile::tempdir_in(if std::path::Path::new("/dev/shm").is_dir() {
        "/dev/shm"
    } else {
        "/tmp"
    })
    .unwrap();
    let regions = Collector::create(dir.path(), &stores.store, true).expect("regions");
    let mut map = HashMapCollector::new(
        1 << 16,
        dta_systems::lists::TOTAL,
        16_384,
        dta_systems::ENTRY_LEN,
    );
    let mut results = serde_json::Map::new();
    println!("\n## Marple reporters one collector supports ([DTA §6.1] Fig. 7b in spirit)");
    println!(
        "per switch: {:.0} reports/s (the trace's rate), {} reports in {} datagrams; {:.1} s per step",
        rate,
        dgs.iter().map(|d| d.1).sum::<u64>(),
        dgs.len(),
        a.secs
    );
    println!("| collector | switches supported | reports/s at that load | first loss at | loss there | bounded by | M reports per CPU-second (last step) | switches per collector core |");
    println!("| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: |");
    for (mode, name) in [(Mode::Dta, "dta"), (Mode::HashMap, "hashmap")] {
        let mut steps: Vec<Step> = vec![];
        let mut k = 1u32;
        let mut bound = "max-switches";
        while k <= a.max_switches {
            let s = step(mode, &dgs, k, rate, a.secs, &regions, &mut map);
            eprintln!(
                "{name}: {k} switches offered {:.0}/s sent {:.0}/s received {} of {} (loss {:.4})",
                s.offered, s.achieved, s.received, s.sent, s.loss
            );
            steps.push(s.clone());
            if s.loss > LOSS_LIMIT {
                bound = "collector loss";
                break;
            }
            if s.sender_behind {
                bound = "sender";
                break;
            }
            k *= 2;
        }
        let ok: Vec<&Step> = steps.iter().filter(|s| s.loss <= LOSS_LIMIT).collect();
        let supported = ok.last().map(|s| s.switches).unwrap_or(0);
        let last = steps.last().unwrap();
        // The collector's cost at the heaviest step: switches one of its cores would serve.
        let per_core = last.per_cpu_second / rate;
        println!(
            "| {name} | {supported} | {:.0} | {} | {:.4} | {bound} | {:.2} | {:.0} |",
            ok.last().map(|s| s.achieved).unwrap_or(0.0),
            if last.loss > LOSS_LIMIT {
                last.switches.to_string()
            } else {
                "-".into()
            },
            last.loss,
            last.per_cpu_second / 1e6,
            per_core
        );
        results.insert(
            name.into(),
            serde_json::json!({"supported": supported, "bounded_by": bound,
                "per_cpu_second": last.per_cpu_second, "switches_per_core": per_core,
                "steps": steps}),
        );
    }
    results.insert("per_switch_rate".into(), rate.into());
    results.insert("secs".into(), a.secs.into());
    if let Some(p) = &a.json {
        std::fs::write(p, serde_json::to_string_pretty(&results).unwrap()).unwrap();
    }
}
