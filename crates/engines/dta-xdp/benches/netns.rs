//! Benchmark 4 (docs/benchmarks.md §4): end to end in network namespaces over a veth pair
//! ([DTA §5.2], [DTA §6]). In one run, for `--secs` each (default 3), `--runs` times (default 3,
//! medians reported):
//! (a) the drop-only XDP program (`DropProgram`): packets/s it counts;
//! (b) the XDP translator (`XdpTranslator`): prototype Key-Write frames, and native datagrams of
//!     8 Key-Write reports: packets/s and reports/s applied in the driver;
//! (c) the userspace translator (`ingest::run`, no XDP attached) on native datagrams of 32
//!     Key-Write reports: reports/s applied by its one thread.
//! With `--rules`, instead: the XDP translator on native datagrams of 8 Key-Write reports with
//! no rules and with four rules in the driver (docs/benchmarks.md "Translator rules in the XDP
//! program"), alternating in each run: reports/s and the program's CPU-seconds per million
//! reports (the kernel's run-time statistics, BPF_ENABLE_STATS).
//! Frames are sent by `dta_net::raw::RawSocket` (AF_PACKET, sendmmsg) from the peer namespace.
//! Needs root (namespaces, BPF); prints a message and exits otherwise.
//! `cargo bench -p dta-xdp --bench netns -- [--secs N] [--runs N] [--rules]`

use std::net::{IpAddr, SocketAddr, SocketAddrV4};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dta_net::raw::RawSocket;
use dta_net::udp_frame_between;
use dta_store::{Header, KeyWriteSpec, Region, StoreSpec};
use dta_translator::{ingest, Stats, Translator, TranslatorConfig};
use dta_wire::prefix::{AllowList, Prefix};
use dta_xdp::{DropProgram, XdpConfig, XdpTranslator};

const MAC_A: [u8; 6] = [0x02, 0xd7, 0xa0, 0, 0, 1];
const MAC_B: [u8; 6] = [0x02, 0xd7, 0xa0, 0, 0, 2];

/// The program's settings with every source allowed (the senders are in the peer namespace).
fn any_source() -> XdpConfig {
    XdpConfig {
        allow: AllowList::any(),
        ..Default::default()
    }
}

fn sh(args: &[&str]) {
    let st = Command::new(args[0]).args(&args[1..]).status().unwrap();
    assert!(st.success(), "{args:?} failed");
}

struct Net {
    a: String,
    b: String,
    ip_a: SocketAddrV4,
    ip_b: SocketAddrV4,
}

impl Net {
    fn new() -> Net {
        let id = std::process::id() % 200 + 20;
        let (a, b) = (format!("dtanba{id}"), format!("dtanbb{id}"));
        let _ = Command::new("ip").args(["netns", "del", &a]).status();
        let _ = Command::new("ip").args(["netns", "del", &b]).status();
        sh(&["ip", "netns", "add", &a]);
        sh(&["ip", "netns", "add", &b]);
        sh(&[
            "ip", "link", "add", "veth0", "netns", &a, "type", "veth", "peer", "name", "veth1",
            "netns", &b,
        ]);
        let mac = |m: [u8; 6]| {
            m.iter()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(":")
        };
        sh(&[
            "ip",
            "-n",
            &a,
            "link",
            "set",
            "veth0",
            "address",
            &mac(MAC_A),
        ]);
        sh(&[
            "ip",
            "-n",
            &b,
            "link",
            "set",
            "veth1",
            "address",
            &mac(MAC_B),
        ]);
        sh(&[
            "ip",
            "-n",
            &a,
            "addr",
            "add",
            &format!("10.98.{id}.1/24"),
            "dev",
            "veth0",
        ]);
        sh(&[
            "ip",
            "-n",
            &b,
            "addr",
            "add",
            &format!("10.98.{id}.2/24"),
            "dev",
            "veth1",
        ]);
        sh(&["ip", "-n", &a, "link", "set", "veth0", "up"]);
        sh(&["ip", "-n", &b, "link", "set", "veth1", "up"]);
        sh(&["ip", "-n", &a, "link", "set", "lo", "up"]);
        // Native XDP on veth sees frames only if the peer has GRO on (or an XDP program).
        let _ = Command::new("ip")
            .args(["netns", "exec", &b, "ethtool", "-K", "veth1", "gro", "on"])
            .status();
        Net {
            ip_a: format!("10.98.{id}.1:40040").parse().unwrap(),
            ip_b: format!("10.98.{id}.2:5000").parse().unwrap(),
            a,
            b,
        }
    }

    /// Spawn `f` on a thread inside namespace `ns`.
    fn spawn_in<T: Send + 'static>(
        ns: &str,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> std::thread::JoinHandle<T> {
        let path = format!("/var/run/netns/{ns}");
        std::thread::spawn(move || {
            let f2 = std::fs::File::open(&path).unwrap();
            // SAFETY: setns on a namespace fd we opened; affects this thread only.
            let r = unsafe { libc::setns(f2.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(r, 0, "setns {path}");
            f()
        })
    }

    fn run_in<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
        Net::spawn_in(ns, f).join().unwrap()
    }

    /// Blast `payloads` from namespace b to a's port 40040 for `secs`; returns frames sent.
    fn blast(&self, payloads: &[Vec<u8>], secs: f64) -> u64 {
        let frames: Vec<Vec<u8>> = payloads
            .iter()
            .map(|p| udp_frame_between(MAC_B, MAC_A, self.ip_b, self.ip_a, p).expect("frame"))
            .collect();
        Net::run_in(&self.b, move || {
            pin(0);
            let s = RawSocket::open_send_only("veth1").expect("AF_PACKET socket");
            let end = Instant::now() + Duration::from_secs_f64(secs);
            s.send_cyclic(&frames, 64, u64::MAX, || Instant::now() >= end)
                .expect("sendmmsg")
        })
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.a]).status();
        let _ = Command::new("ip").args(["netns", "del", &self.b]).status();
    }
}

fn headers() -> Vec<Header> {
    [
        ("kwp", KeyWriteSpec::new(1 << 16, 4, 4)),
        ("kwn", KeyWriteSpec::new(1 << 16, 13, 4)),
    ]
    .iter()
    .map(|(n, s)| Header::new(n, &StoreSpec::KeyWrite(s.clone())).unwrap())
    .collect()
}

/// Prototype Key-Write (short base header, redundancy 1, 4 bytes of data).
fn proto_kw(key: u32) -> Vec<u8> {
    let mut v = vec![0x01, 0x00, 1];
    v.extend(key.to_be_bytes());
    v.extend(key.wrapping_mul(7).to_be_bytes());
    v
}

/// A native, non-retransmittable datagram of `n` Key-Write reports (13-byte keys, 4-byte data,
/// not immediate, redundancy 1, medium priority), keys starting at `first`.
fn native_kw(first: u32, n: u8) -> Vec<u8> {
    let mut v = vec![0x10, 0x40, n, 0, 0, 0, 0, 7, 0, 0, 0, 1];
    for i in 0..n as u32 {
        let k = first + i;
        v.extend([1, 0x00, 13, 4]);
        v.extend(k.to_be_bytes());
        v.extend([10, 0, 1, 2, 3, 4, 5, 6, 7]);
        v.extend(k.wrapping_mul(7).to_be_bytes());
    }
    v
}

/// Run the calling thread on CPU `cpu` only (when the machine has it): the sender and the
/// translator on cores of their own, so one does not take the other's.
fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t with one bit set, for this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// CPU time of the calling thread, in seconds.
fn thread_cpu_secs() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

struct Row {
    name: &'static str,
    pps: Vec<f64>,
    rps: Vec<f64>,
    sent: Vec<f64>,
}

fn main() {
    let mut secs = 3.0f64;
    let mut runs = 3usize;
    let mut rules = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--rules" => rules = true,
            "--secs" => secs = args.next().and_then(|s| s.parse().ok()).expect("--secs N"),
            "--runs" => runs = args.next().and_then(|s| s.parse().ok()).expect("--runs N"),
            _ => {} // cargo bench passes --bench
        }
    }
    if !dta_testkit::is_root() {
        println!("netns: SKIPPED (needs root: network namespaces and BPF)");
        return;
    }
    let net = Net::new();
    let proto: Vec<Vec<u8>> = (0..4096u32).map(|i| proto_kw(0x0a00_0000 + i)).collect();
    let nat8: Vec<Vec<u8>> = (0..512u32).map(|i| native_kw(i * 8, 8)).collect();
    let nat32: Vec<Vec<u8>> = (0..128u32).map(|i| native_kw(i * 32, 32)).collect();
    if rules {
        rules_bench(&net, &nat8, secs, runs);
        return;
    }

    let mut rows = vec![
        Row {
            name: "(a) XDP drop only, prototype KW frames",
            pps: vec![],
            rps: vec![],
            sent: vec![],
        },
        Row {
            name: "(b) XDP translator, prototype Key-Write",
            pps: vec![],
            rps: vec![],
            sent: vec![],
        },
        Row {
            name: "(b') XDP translator, native 8 KW/datagram",
            pps: vec![],
            rps: vec![],
            sent: vec![],
        },
        Row {
            name: "(c) userspace translator, native 32 KW/dgram",
            pps: vec![],
            rps: vec![],
            sent: vec![],
        },
        Row {
            name: "(d) the same, AF_XDP receive",
            pps: vec![],
            rps: vec![],
            sent: vec![],
        },
    ];
    let mut cpu_rate: [Vec<f64>; 2] = [vec![], vec![]];
    for run in 0..runs {
        eprintln!("netns: run {}/{runs}", run + 1);
        // (a) drop only.
        let d = Net::run_in(&net.a, || {
            DropProgram::load_attach("veth0").expect("drop program")
        });
        eprintln!("  drop program attached in {:?} mode", d.mode());
        let p0 = d.packets().unwrap();
        let t0 = Instant::now();
        let sent = net.blast(&proto, secs);
        let el = t0.elapsed().as_secs_f64();
        let p = (d.packets().unwrap() - p0) as f64 / el;
        rows[0].pps.push(p);
        rows[0].rps.push(p);
        rows[0].sent.push(sent as f64 / el);
        drop(d);

        // (b) XDP translator.
        let hs = headers();
        let x = Net::run_in(&net.a, move || {
            let mut x = XdpTranslator::load(&any_source(), &hs).expect("load XDP");
            let m = x.attach("veth0", false).expect("attach");
            eprintln!("  XDP translator attached in {m:?} mode");
            x
        });
        for (row, work) in [(1usize, &proto), (2, &nat8)] {
            let s0 = x.stats().unwrap();
            let t0 = Instant::now();
            let sent = net.blast(work, secs);
            let el = t0.elapsed().as_secs_f64();
            let s1 = x.stats().unwrap();
            if s1.passed() > s0.passed() {
                eprintln!(
                    "  WARNING: {} datagrams passed to userspace",
                    s1.passed() - s0.passed()
                );
            }
            rows[row]
                .pps
                .push((s1.datagrams - s0.datagrams) as f64 / el);
            rows[row]
                .rps
                .push((s1.reports() - s0.reports()) as f64 / el);
            rows[row].sent.push(sent as f64 / el);
        }
        drop(x);

        // (c) userspace translator, no XDP attached; (d) the same behind AF_XDP receive.
        for (row, xsk) in [(3usize, false), (4, true)] {
            let (rps, pps, sent, cpu) = userspace(&net, &nat32, secs, xsk);
            cpu_rate[row - 3].push(cpu);
            rows[row].pps.push(pps);
            rows[row].rps.push(rps);
            rows[row].sent.push(sent);
        }
    }

    println!("netns benchmark: {secs} s per case, median of {runs} runs, veth pair across two namespaces");
    println!(
        "{:<46} {:>12} {:>12} {:>14}",
        "case", "sent pkt/s", "pkt/s", "reports/s"
    );
    for r in &rows {
        println!(
            "{:<46} {:>12.0} {:>12.0} {:>14.0}",
            r.name,
            median(r.sent.clone()),
            median(r.pps.clone()),
            median(r.rps.clone())
        );
    }
    let a = median(rows[0].pps.clone());
    let b = median(rows[1].pps.clone());
    let ratios: Vec<f64> = rows[1]
        .pps
        .iter()
        .zip(&rows[0].pps)
        .map(|(b, a)| b / a)
        .collect();
    println!(
        "ratio (b)/(a) = {:.3} (medians; per run {:?}); goal >= 0.80: {}",
        b / a,
        ratios.iter().map(|r| format!("{r:.3}")).collect::<Vec<_>>(),
        if b / a >= 0.8 { "met" } else { "NOT met" }
    );
    let c = median(rows[3].rps.clone());
    println!(
        "(c) userspace translator, one thread: {:.2} M reports/s; goal >= 15 M/s per core: {}",
        c / 1e6,
        if c >= 15e6 { "met" } else { "NOT met" }
    );
    for (i, name) in ["(c) socket", "(d) AF_XDP"].iter().enumerate() {
        let cc = median(cpu_rate[i].clone());
        println!(
            "{name}: per second of the translator thread's CPU time: {:.2} M reports/s (runs {:?})",
            cc / 1e6,
            cpu_rate[i]
                .iter()
                .map(|r| format!("{:.2}", r / 1e6))
                .collect::<Vec<_>>()
        );
    }
    let (c, d) = (median(cpu_rate[0].clone()), median(cpu_rate[1].clone()));
    println!(
        "(d)/(c) per CPU-second = {:.2} (goal >= 2); the drop-only floor (a) = {:.0} packets/s",
        d / c,
        median(rows[0].pps.clone())
    );
    println!("load average: {}", load_average());
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// One userspace translator thread in namespace `a` over fresh regions, receiving `work`
/// blasted for `secs`, through its UDP socket or (`xsk`) AF_XDP: (reports/s applied,
/// datagrams/s, sent datagrams/s, reports applied per second of the thread's CPU time).
fn userspace(net: &Net, work: &[Vec<u8>], secs: f64, xsk: bool) -> (f64, f64, f64, f64) {
    let dir = tempfile::tempdir().unwrap();
    let regions: Vec<Arc<Region>> = headers()
        .iter()
        .map(|h| {
            Arc::new(Region::create(&dir.path().join(&h.name), &h.name, &h.spec, false).unwrap())
        })
        .collect();
    let stats = Arc::new(Stats::default());
    let stop = Arc::new(AtomicBool::new(false));
    let (st2, stop2, addr) = (stats.clone(), stop.clone(), SocketAddr::V4(net.ip_a));
    // The translator accepts loopback only unless told otherwise: allow the sender.
    let cfg = TranslatorConfig {
        allow: AllowList::new(vec![Prefix::new(IpAddr::V4(*net.ip_b.ip()), 32).unwrap()]),
        recv_gather_us: std::env::var("GATHER")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(500),
        ..TranslatorConfig::default()
    };
    let h = Net::spawn_in(&net.a, move || {
        pin(1);
        let mut t = Translator::colocated(&cfg, regions, st2).unwrap();
        let sock = ingest::PrioSockets::single(ingest::bind(addr, 64 << 20).unwrap());
        let af = xsk.then(|| {
            let mut p =
                dta_xdp::xsk::XskProgram::load_attach("veth0", addr.port(), &cfg.allow, false)
                    .expect("the AF_XDP redirect program");
            let r =
                dta_xdp::xsk::XskReceiver::open("veth0", 0, addr.port()).expect("AF_XDP socket");
            p.register(0, r.fd()).unwrap();
            (p, r)
        });
        let c0 = thread_cpu_secs();
        match af {
            Some((p, mut r)) => {
                ingest::run_source(&mut t, &mut r, &sock, 64, &stop2).unwrap();
                eprintln!(
                    "  AF_XDP: program {:?}, kernel {:?}, zero-copy {}",
                    p.stats().ok(),
                    r.kernel_stats(),
                    r.zero_copy()
                );
            }
            None => ingest::run(&mut t, &sock, 64, &stop2).unwrap(),
        }
        thread_cpu_secs() - c0
    });
    std::thread::sleep(Duration::from_millis(300));
    let reports = |s: &Stats| -> u64 { s.reports.iter().map(|r| r.load(Ordering::Relaxed)).sum() };
    let (r0, d0) = (reports(&stats), stats.datagrams.load(Ordering::Relaxed));
    let t0 = Instant::now();
    let sent = net.blast(work, secs);
    // Let the translator drain what is queued, counted in the elapsed time.
    std::thread::sleep(Duration::from_millis(100));
    let el = t0.elapsed().as_secs_f64();
    let (r1, d1) = (reports(&stats), stats.datagrams.load(Ordering::Relaxed));
    stop.store(true, Ordering::Relaxed);
    let cpu = h.join().unwrap();
    (
        (r1 - r0) as f64 / el,
        (d1 - d0) as f64 / el,
        sent as f64 / el,
        reports(&stats) as f64 / cpu,
    )
}

/// Four rules on the Key-Write reports of `native_kw`, all evaluated on every report: a drop
/// whose key prefix never matches, an Append of the key when the data is below 64 (keys 0..=9
/// of each 4096), an Append and a drop whose field tests never hold.
const BENCH_RULES: &str = r#"
[[rules]]
name = "drop-ff"
primitive = "key-write"
key_prefix = "ff"
action = "drop"

[[rules]]
name = "small"
primitive = "key-write"
store = "kwn"
fields = [{ offset = 0, width = 4, op = "lt", value = 64 }]
action = "append"
list = 0
entry = "key"

[[rules]]
name = "huge"
primitive = "key-write"
fields = [{ offset = 0, width = 4, op = "ge", value = 4294901760 }]
action = "append"
list = 0
entry = "key"

[[rules]]
name = "drop-ff-data"
primitive = "key-write"
fields = [{ offset = 0, width = 1, op = "eq", value = 255 }]
action = "drop"
"#;

fn rules_bench(net: &Net, nat8: &[Vec<u8>], secs: f64, runs: usize) {
    use dta_store::AppendSpec;
    use dta_translator::rules::{RuleConfig, RuleSet};
    #[derive(serde::Deserialize)]
    struct F {
        rules: Vec<RuleConfig>,
    }
    let _stats = dta_xdp::enable_run_time_stats().expect("BPF_ENABLE_STATS");
    let mut hs = headers();
    hs.push(
        Header::new(
            "app",
            &StoreSpec::Append(AppendSpec {
                lists: 1,
                capacity: 1 << 16,
                entry_len: 16,
                batch: 4,
                record: Default::default(),
            }),
        )
        .unwrap(),
    );
    let cat: Vec<(&str, &StoreSpec)> = hs.iter().map(|h| (h.name.as_str(), &h.spec)).collect();
    let user = dta_xdp::userspace_primitives(&hs);
    let on = RuleSet::compile(&toml::from_str::<F>(BENCH_RULES).unwrap().rules, &cat, 1).unwrap();
    let off = RuleSet::compile(&[], &cat, 1).unwrap();
    assert_eq!(on.split_xdp(&user).xdp.len(), 4, "every rule in the driver");
    let hs2 = hs.clone();
    let mut x = Net::run_in(&net.a, move || {
        let mut x = XdpTranslator::load(&any_source(), &hs2).expect("load XDP");
        let m = x.attach("veth0", false).expect("attach");
        eprintln!("  XDP translator attached in {m:?} mode");
        x
    });
    // Per case: reports/s, program CPU-seconds per million reports, sent pkt/s.
    let mut res: [Vec<(f64, f64, f64)>; 2] = [vec![], vec![]];
    for run in 0..runs {
        eprintln!("netns --rules: run {}/{runs}", run + 1);
        for (case, set) in [(0usize, &off), (1, &on)] {
            x.install_rules(&set.split_xdp(&user)).unwrap();
            let (s0, (t0, _)) = (x.stats().unwrap(), x.run_time().unwrap());
            let w0 = Instant::now();
            let sent = net.blast(nat8, secs);
            let el = w0.elapsed().as_secs_f64();
            let (s1, (t1, _)) = (x.stats().unwrap(), x.run_time().unwrap());
            let reports = (s1.reports() + s1.rule_dropped - s0.reports() - s0.rule_dropped) as f64;
            let cpu = (t1 - t0).as_secs_f64();
            res[case].push((reports / el, cpu / reports * 1e6, sent as f64 / el));
        }
    }
    let rs = x.rule_stats().unwrap();
    println!(
        "netns --rules: {secs} s per case, median of {runs} runs, native 8 KW/datagram, veth pair"
    );
    println!(
        "{:<34} {:>12} {:>14} {:>22}",
        "case", "sent pkt/s", "reports/s", "XDP CPU-s per M reports"
    );
    let med = |c: usize, f: fn(&(f64, f64, f64)) -> f64| median(res[c].iter().map(f).collect());
    for (c, name) in [
        (0, "XDP translator, no rules"),
        (1, "XDP translator, 4 rules"),
    ] {
        println!(
            "{:<34} {:>12.0} {:>14.0} {:>22.4}",
            name,
            med(c, |r| r.2),
            med(c, |r| r.0),
            med(c, |r| r.1)
        );
    }
    let ratios: Vec<String> = res[1]
        .iter()
        .zip(&res[0])
        .map(|(on, off)| format!("{:.3}", on.1 / off.1))
        .collect();
    println!(
        "CPU per report, rules on / off: {:.3} (medians; per run {ratios:?})",
        med(1, |r| r.1) / med(0, |r| r.1)
    );
    println!(
        "rules in the driver: matched {}, fired {}, derived {}",
        rs.total(dta_translator::rules::RuleCounter::Matched),
        rs.total(dta_translator::rules::RuleCounter::Fired),
        rs.total(dta_translator::rules::RuleCounter::Derived)
    );
}
