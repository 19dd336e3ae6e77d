//! The raw sender and the userspace translator end to end, as processes, across a veth pair
//! between two network namespaces (docs/benchmarks.md, "Sender and end to end: before and
//! after"). Native datagrams of 32 Key-Write reports (4-byte keys and data, N = 2: the suite's
//! section 4 workload), prebuilt by `dta report --raw`.
//!
//! 1. The sender alone: `dta report --raw` into the drop-only XDP program
//!    (`dta_xdp::DropProgram`) on the receiving end: `sendmmsg` (one sender, today's) against
//!    the PACKET_MMAP ring (`--tx-ring`, one and `--senders` threads). Frames/s the sender got
//!    accepted and frames/s the drop program counted, and the sender's frames per second of its
//!    own CPU time (`wait4` rusage).
//! 2. End to end: `dta translator --threads T` (T = 1, 2; classifier off) in one namespace, the
//!    sender in the other, before (`sendmmsg`, one sender) and after (`--tx-ring --senders S`).
//!    Reports applied per second of the translator process's own CPU time (utime + stime from
//!    `/proc/<pid>/stat` over the sending window), reports applied per second of wall clock,
//!    datagrams lost (sent, not counted by the translator), and which side was the bottleneck.
//!
//! Every case runs `--runs` times, alternating, `--secs` each; medians. Needs root (namespaces,
//! BPF): prints a SKIPPED line and exits otherwise.
//! `cargo bench -p dta --bench e2e_raw -- [--secs N] [--runs N] [--senders S] [--recv-batch N]
//! [--recv-gather-us N] [--only send,e2e]`

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use dta_testkit::bench::median;
use dta_testkit::netns::{run_in, VethPair};

const DTA: &str = env!("CARGO_BIN_EXE_dta");
/// Subnet of the veth pair: 10.NET.0.1 (translator) and 10.NET.0.2 (sender).
const NET: u8 = 87;
/// Distinct datagrams per sender (`dta report --frames`).
const FRAMES: &str = "4096";
/// Key-Write slots of the store: 2^25 x 8 bytes = 256 MiB, the suite's default store size.
const SLOTS: u64 = 1 << 25;

struct Args {
    secs: f64,
    runs: usize,
    senders: u32,
    /// The translator's `recv_batch` (datagrams per `recvmmsg`).
    recv_batch: usize,
    /// The translator's `recv_gather_us`; `None`: its default.
    recv_gather_us: Option<u64>,
    only: Vec<String>,
}

fn parse_args() -> Args {
    let mut a = Args {
        secs: 3.0,
        runs: 3,
        senders: 2,
        recv_batch: 64,
        recv_gather_us: None,
        only: vec!["send".into(), "e2e".into()],
    };
    let mut it = std::env::args().skip(1);
    while let Some(x) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| panic!("{x} needs a value"));
        match x.as_str() {
            "--secs" => a.secs = val().parse().expect("--secs N"),
            "--runs" => a.runs = val().parse::<usize>().expect("--runs N").max(1),
            "--senders" => a.senders = val().parse().expect("--senders N"),
            "--recv-batch" => a.recv_batch = val().parse().expect("--recv-batch N"),
            "--recv-gather-us" => {
                a.recv_gather_us = Some(val().parse().expect("--recv-gather-us N"))
            }
            "--only" => a.only = val().split(',').map(String::from).collect(),
            _ => {} // cargo bench passes --bench
        }
    }
    a
}

fn mac_text(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

fn clk_tck() -> f64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) as f64 }
}

/// (utime, stime) of process `pid`, seconds (`/proc/<pid>/stat`, all its threads).
fn proc_cpu(pid: u32) -> (f64, f64) {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/<pid>/stat");
    // Fields after the command name (which may hold spaces) start at the state, field 3.
    let rest = &s[s.rfind(')').expect("stat format") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f[i].parse::<f64>().unwrap() / clk_tck();
    (tick(11), tick(12))
}

/// Wait for `child` (its stdout read first) and return its stdout and its CPU seconds
/// (user + system, from `wait4`'s rusage).
fn wait_with_cpu(mut child: Child) -> (String, f64) {
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let mut status = 0;
    // SAFETY: rusage is plain data; wait4 on our own child, which std has not reaped.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut ru) };
    assert_eq!(r, child.id() as i32, "wait4");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child failed: {err}"
    );
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    (out, tv(ru.ru_utime) + tv(ru.ru_stime))
}

/// How the frames are sent.
#[derive(Clone, Copy)]
struct Sender {
    name: &'static str,
    ring: bool,
    senders: u32,
    /// Source ports per sender (`--src-ports`; today's sender: one).
    ports: u32,
}

/// One `dta report --raw` run in namespace `ns` for `secs`: (frames sent, reports sent,
/// elapsed seconds, the sender's CPU seconds).
fn send(net: &VethPair, dst_mac: &str, s: Sender, secs: f64) -> (f64, f64, f64, f64) {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", &net.b, DTA, "report", "--raw", &net.dev_b])
        .args(["--to", &format!("{}:40040", net.ip_a), "--dst-mac", dst_mac])
        .args(["-p", "kw", "-n", "2", "--batch", "32", "--keys", "1000000"])
        .args(["--frames", FRAMES, "--src-ports", &s.ports.to_string()])
        .args(["--json", "--quiet"])
        .args(["--duration", &secs.to_string()])
        .args(["--senders", &s.senders.to_string()]);
    if s.ring {
        c.arg("--tx-ring");
    }
    let child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (out, cpu) = wait_with_cpu(child);
    let v: serde_json::Value = serde_json::from_str(&out).expect("report --json");
    let el =
        v["elapsed"]["secs"].as_f64().unwrap() + v["elapsed"]["nanos"].as_f64().unwrap() * 1e-9;
    (
        v["datagrams"].as_f64().unwrap(),
        v["reports"].as_f64().unwrap(),
        el,
        cpu,
    )
}

fn part_send(a: &Args, net: &VethPair, dst_mac: &str, senders: &[Sender]) {
    let dev = net.dev_a.clone();
    let drop = run_in(&net.a, move || {
        dta_xdp::DropProgram::load_attach(&dev).expect("drop program")
    });
    eprintln!("e2e_raw: drop program attached in {:?} mode", drop.mode());
    let mut sent: Vec<Vec<f64>> = vec![vec![]; senders.len()];
    let mut got: Vec<Vec<f64>> = vec![vec![]; senders.len()];
    let mut per_cpu: Vec<Vec<f64>> = vec![vec![]; senders.len()];
    let mut ratio: Vec<Vec<f64>> = vec![vec![]; senders.len()];
    for run in 0..a.runs {
        eprintln!("e2e_raw: sender alone, run {}/{}", run + 1, a.runs);
        for (i, s) in senders.iter().enumerate() {
            let p0 = drop.packets().unwrap();
            let (frames, _, el, cpu) = send(net, dst_mac, *s, a.secs);
            let p = (drop.packets().unwrap() - p0) as f64;
            sent[i].push(frames / el);
            got[i].push(p / el);
            per_cpu[i].push(frames / cpu.max(1e-9));
        }
        for i in 0..senders.len() {
            ratio[i].push(sent[i][run] / sent[0][run]);
        }
    }
    drop_print(a, senders, &sent, &got, &per_cpu, &ratio);
}

fn drop_print(
    a: &Args,
    senders: &[Sender],
    sent: &[Vec<f64>],
    got: &[Vec<f64>],
    per_cpu: &[Vec<f64>],
    ratio: &[Vec<f64>],
) {
    println!(
        "\n1. sender alone into the drop-only XDP program, 32 Key-Write reports per frame \
         ({} s per case, median of {} runs)",
        a.secs, a.runs
    );
    println!(
        "{:<34} {:>14} {:>14} {:>18} {:>10}",
        "sender", "sent frames/s", "dropped /s", "frames/CPU-second", "vs before"
    );
    for (i, s) in senders.iter().enumerate() {
        println!(
            "{:<34} {:>14.0} {:>14.0} {:>18.0} {:>10.2}",
            s.name,
            median(sent[i].clone()),
            median(got[i].clone()),
            median(per_cpu[i].clone()),
            median(ratio[i].clone())
        );
    }
}

/// The translator's configuration: one Key-Write store like the suite's, the sender's subnet
/// allowed, the classifier off (its thread would be counted in the process's CPU time).
fn write_config(
    dir: &std::path::Path,
    net: &VethPair,
    recv_batch: usize,
    recv_gather_us: Option<u64>,
) -> std::path::PathBuf {
    let shm = std::path::Path::new("/dev/shm");
    let regions = if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap().keep()
    } else {
        dir.join("regions")
    };
    let cfg = dir.join("dta.toml");
    std::fs::write(
        &cfg,
        format!(
            "region_dir = '{}'\n[translator]\nlisten = '{}:40040'\nallow = ['10.{NET}.0.0/24']\n\
             classifier = false\nrecv_buffer = 67108864\nrecv_batch = {recv_batch}\n{gather}\
             [[store]]\nname = 'kw'\nkind = 'key-write'\nslots = {SLOTS}\nkey_len = 4\n\
             data_len = 4\nredundancy = 2\n",
            regions.display(),
            net.ip_a,
            gather = recv_gather_us
                .map(|us| format!("recv_gather_us = {us}\n"))
                .unwrap_or_default(),
        ),
    )
    .unwrap();
    let parsed = dta_node::config::Config::load(&cfg).unwrap();
    dta_collector::Collector::create(&parsed.region_dir, &parsed.store, true).unwrap();
    cfg
}

struct E2e {
    /// Reports applied per second of the translator process's CPU time.
    per_cpu: f64,
    /// Reports applied per second of the sending window.
    wall: f64,
    /// Fraction of the datagrams sent that the translator did not count.
    lost: f64,
    /// The translator's CPU seconds per second of wall clock (its threads' utilisation).
    busy: f64,
    /// The kernel's share (stime) of the translator's CPU time: receiving, against applying.
    sys: f64,
    /// Frames the sender got accepted per second.
    sent: f64,
    /// Fraction of the datagrams sent dropped at the translator's full socket buffer.
    socket_lost: f64,
    /// Fraction dropped at the kernel's per-CPU receive backlog (before any socket).
    backlog_lost: f64,
}

/// Frames the kernel dropped at the per-CPU receive backlog (`/proc/net/softnet_stat`'s second
/// column, every CPU): frames the veth handed to a receive path that was behind.
fn backlog_drops() -> u64 {
    let t = std::fs::read_to_string("/proc/net/softnet_stat").unwrap_or_default();
    t.lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .map(|x| u64::from_str_radix(x, 16).unwrap_or(0))
        .sum()
}

/// UDP datagrams dropped for a full socket receive buffer in process `pid`'s network namespace
/// (`/proc/<pid>/net/snmp`, `Udp: RcvbufErrors`).
fn socket_drops(pid: u32) -> u64 {
    let t = std::fs::read_to_string(format!("/proc/{pid}/net/snmp")).unwrap_or_default();
    let udp: Vec<&str> = t.lines().filter(|l| l.starts_with("Udp:")).collect();
    if udp.len() < 2 {
        return 0;
    }
    let names: Vec<&str> = udp[0].split_whitespace().collect();
    let vals: Vec<&str> = udp[1].split_whitespace().collect();
    names
        .iter()
        .position(|n| *n == "RcvbufErrors")
        .and_then(|i| vals.get(i))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// One translator run: the translator receives while the sender sends; its CPU time is taken
/// over the sending window (and the 150 ms after it, while it drains its receive buffer).
fn one_e2e(
    net: &VethPair,
    cfg: &std::path::Path,
    dst_mac: &str,
    threads: u32,
    s: Sender,
    secs: f64,
) -> E2e {
    let child = Command::new("ip")
        .args(["netns", "exec", &net.a, DTA, "translator", "--config"])
        .arg(cfg)
        .args([
            "--threads",
            &threads.to_string(),
            "--stats-interval",
            "0",
            "--json",
        ])
        .args(["--duration", "120"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    std::thread::sleep(Duration::from_millis(600));
    let (c0, b0, s0) = (proc_cpu(pid), backlog_drops(), socket_drops(pid));
    let t0 = Instant::now();
    let (frames, _, _, _) = send(net, dst_mac, s, secs);
    // The translator drains its receive buffer; counted in its time.
    std::thread::sleep(Duration::from_millis(150));
    let (c1, b1, s1) = (proc_cpu(pid), backlog_drops(), socket_drops(pid));
    let wall = t0.elapsed().as_secs_f64();
    // SAFETY: a signal to our own child (`ip netns exec` executes the translator in place).
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "translator: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let st: serde_json::Value = serde_json::from_slice(&out.stdout).expect("translator --json");
    let reports = st["reports"]["key_write"].as_f64().unwrap();
    let datagrams = st["datagrams"].as_f64().unwrap();
    let cpu = (c1.0 + c1.1) - (c0.0 + c0.1);
    let frames = frames.max(1.0);
    E2e {
        per_cpu: reports / cpu.max(1e-9),
        wall: reports / wall,
        lost: 1.0 - datagrams / frames,
        socket_lost: (s1 - s0) as f64 / frames,
        backlog_lost: (b1 - b0) as f64 / frames,
        busy: cpu / wall,
        sys: (c1.1 - c0.1) / cpu.max(1e-9),
        sent: frames / secs,
    }
}

fn part_e2e(a: &Args, net: &VethPair, dst_mac: &str, before: Sender, after: Sender) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(dir.path(), net, a.recv_batch, a.recv_gather_us);
    let cases: Vec<(u32, Sender)> = [1u32, 2]
        .iter()
        .flat_map(|&t| [(t, before), (t, after)])
        .collect();
    let mut res: Vec<Vec<E2e>> = cases.iter().map(|_| vec![]).collect();
    for run in 0..a.runs {
        eprintln!("e2e_raw: end to end, run {}/{}", run + 1, a.runs);
        for (i, (t, s)) in cases.iter().enumerate() {
            res[i].push(one_e2e(net, &cfg, dst_mac, *t, *s, a.secs));
        }
    }
    let parsed = dta_node::config::Config::load(&cfg).unwrap();
    let _ = std::fs::remove_dir_all(&parsed.region_dir);
    println!(
        "\n2. end to end: dta report --raw (namespace B) -> veth -> dta translator (namespace A), \
         32 Key-Write reports per datagram, N = 2, 256 MiB store, recv_batch {}, recv_gather_us {} \
         ({} s per case, median of {} runs)",
        a.recv_batch,
        a.recv_gather_us
            .map_or("default".to_string(), |us| us.to_string()),
        a.secs,
        a.runs
    );
    println!(
        "{:<8} {:<30} {:>12} {:>12} {:>10} {:>7} {:>8} {:>8} {:>6} {:>6} {:>10}",
        "threads",
        "sender",
        "M rep/CPU-s",
        "M rep/s wall",
        "sent fr/s",
        "lost",
        "socket",
        "backlog",
        "busy",
        "sys",
        "bound by"
    );
    for (i, (t, s)) in cases.iter().enumerate() {
        let m = |f: fn(&E2e) -> f64| median(res[i].iter().map(f).collect());
        let (sock, backlog, busy) = (m(|e| e.socket_lost), m(|e| e.backlog_lost), m(|e| e.busy));
        // Drops at the translator's socket: it could not keep up; at the receive backlog: the
        // kernel's receive path (softirq) could not; neither: the sender set the pace.
        let bound = if sock > 0.01 || busy > 0.9 * *t as f64 {
            "translator"
        } else if backlog > 0.01 {
            "kernel rx"
        } else {
            "sender"
        };
        println!(
            "{:<8} {:<30} {:>12.2} {:>12.2} {:>10.0} {:>6.1}% {:>7.1}% {:>7.1}% {:>6.2} {:>5.0}% {:>10}",
            t,
            s.name,
            m(|e| e.per_cpu) / 1e6,
            m(|e| e.wall) / 1e6,
            m(|e| e.sent),
            m(|e| e.lost) * 100.0,
            sock * 100.0,
            backlog * 100.0,
            busy,
            m(|e| e.sys) * 100.0,
            bound
        );
    }
    for t in [1u32, 2] {
        let at = |ring: bool| {
            cases
                .iter()
                .position(|c| c.0 == t && c.1.ring == ring)
                .unwrap()
        };
        let (i, j) = (at(false), at(true));
        let ratio = |f: fn(&E2e) -> f64| {
            median(
                res[j]
                    .iter()
                    .zip(&res[i])
                    .map(|(x, y)| f(x) / f(y))
                    .collect(),
            )
        };
        let after_cpu = median(res[j].iter().map(|e| e.per_cpu).collect());
        let best = res[j]
            .iter()
            .chain(&res[i])
            .map(|e| e.per_cpu)
            .fold(0.0f64, f64::max);
        println!(
            "--threads {t}: after/before (same run, median of per-run ratios): wall-clock \
             reports/s {:.2}, reports per translator CPU-second {:.2}; translator {:.2} M reports \
             per CPU-second after (best run of either {:.2}); goal >= 15: {}",
            ratio(|e| e.wall),
            ratio(|e| e.per_cpu),
            after_cpu / 1e6,
            best / 1e6,
            if after_cpu >= 15e6 { "met" } else { "NOT met" }
        );
    }
}

fn main() {
    let a = parse_args();
    if let Some(why) = dta_testkit::netns_unavailable() {
        println!("e2e_raw: SKIPPED ({why}; BPF needs root too)");
        return;
    }
    let net = VethPair::new("e", NET);
    let dev = net.dev_a.clone();
    let (mac, _) = run_in(&net.a, move || dta_net::raw::iface_mac_index(&dev).unwrap());
    let dst_mac = mac_text(mac);
    let before = Sender {
        name: "before: sendmmsg, 1 sender",
        ring: false,
        senders: 1,
        ports: 1,
    };
    let ring1 = Sender {
        name: "after: tx ring, 1 sender",
        ring: true,
        senders: 1,
        ports: 8,
    };
    let name: &'static str =
        Box::leak(format!("after: tx ring, {} senders", a.senders).into_boxed_str());
    let after = Sender {
        name,
        ring: true,
        senders: a.senders,
        ports: 8,
    };
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("e2e_raw: load average at start {}", load.trim());
    if a.only.iter().any(|o| o == "send") {
        let mut ss = vec![before, ring1];
        if a.senders > 1 {
            ss.push(after);
        }
        part_send(&a, &net, &dst_mac, &ss);
    }
    if a.only.iter().any(|o| o == "e2e") {
        part_e2e(&a, &net, &dst_mac, before, after);
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("e2e_raw: load average at end {}", load.trim());
}
