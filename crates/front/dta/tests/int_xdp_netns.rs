//! `dta int-sink --xdp IFACE` and `--af-xdp IFACE` across a veth pair between two network
//! namespaces the test creates. The same trace (`dta pcap gen --flows 2000 --seed 42`) is
//! replayed into a sink:
//! - without and with the INT fast path (an XDP program aggregating the reports of known flows
//!   with no event): both sets of flow records are exact against the trace's ground truth, the
//!   stores' paths too, the fast path took most reports, and every switch's histograms read the
//!   same from both stores, equal to the ground truth's counts;
//! - with AF_XDP receive, two sink threads over a two-queue veth, busy polling: every report
//!   taken, none lost, the flows exact although a queue's reader hands half of them to the
//!   other thread;
//! - with the fast path and AF_XDP on the same interface (one program): the same, the fast path
//!   taking most reports and redirecting the rest to the AF_XDP sockets;
//! - with the fast path on one interface and AF_XDP on another (two programs): each takes what
//!   arrives on its own, a second trace whole through the AF_XDP sockets;
//! - reordered (every block of 128 reports last first), without and with the fast path: every
//!   flow's latest values the newest report's by number.
//!
//! Needs root (a counted skip otherwise).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use dta_int::{Buckets, Metric};
use dta_testkit::netns::VethPair;

mod common;

use common::dta;

fn write_config(d: &Path, listen: &str, allow: &str) {
    common::write_int_config(
        d,
        listen,
        &format!("idle_timeout_ms = 600000\nthreads = 2\nallow = [\"{allow}\"]"),
    );
}

/// One run: a sink in namespace `net.a` with `extra` arguments receiving the trace replayed
/// from namespace `net.b`; its final stats.
fn run(d: &Path, net: &VethPair, extra: &[&str]) -> serde_json::Value {
    run_replays(d, &net.a, &[(&net.b, &net.ip_a, "trace.pcap")], extra)
}

/// A sink in namespace `ns` with `extra` arguments receiving each replay (from its namespace,
/// to its address, of its pcap in `d`) one after the other: its final stats, every report sent
/// counted received and none dropped at its sockets.
fn run_replays(
    d: &Path,
    ns: &str,
    replays: &[(&str, &str, &str)],
    extra: &[&str],
) -> serde_json::Value {
    let exe = env!("CARGO_BIN_EXE_dta");
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns, exe, "int-sink", "--config"])
        .arg(d.join("int.toml"))
        .arg("--records")
        .arg(d.join("records.jsonl"))
        .args(extra);
    let mut sink = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Its start-up line says the sockets are bound.
    let mut err = BufReader::new(sink.stderr.take().unwrap());
    let mut lines = String::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !lines.contains("int-sink on udp://") {
        let mut l = String::new();
        if err.read_line(&mut l).unwrap() == 0 || Instant::now() > deadline {
            panic!("the sink did not start: {lines}");
        }
        lines.push_str(&l);
    }
    let rest = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut err, &mut s).unwrap();
        s
    });
    let mut sent = 0;
    for (from, to, pcap) in replays {
        let out = Command::new("ip")
            .args([
                "netns", "exec", from, exe, "pcap", "replay", "--rate", "40000",
            ])
            .args(["--to", &format!("{to}:32766")])
            .arg(d.join(pcap))
            .output()
            .unwrap();
        common::assert_success(&out);
        let replay: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        sent += replay["sent"].as_u64().unwrap();
    }
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: kill(2) on our own child's pid (`ip netns exec` execs the sink).
    assert_eq!(
        unsafe { libc::kill(sink.id() as libc::pid_t, libc::SIGTERM) },
        0
    );
    assert!(sink.wait().unwrap().success());
    let err = rest.join().unwrap();
    let stats: serde_json::Value =
        serde_json::from_str(&err[err.find("{\n").expect("final stats")..]).unwrap();
    assert_eq!(stats["reports"], sent, "{stats}");
    assert_eq!(stats["receive"]["kernel_drops"], 0, "{stats}");
    stats
}

/// `dta int-sink check` of `d`'s records against the trace, with the stores' paths.
fn check(d: &Path, flows: u64) {
    let out = dta()
        .args(["int-sink", "check", "--truth"])
        .arg(d.join("trace.json"))
        .arg("--records")
        .arg(d.join("records.jsonl"))
        .arg("--config")
        .arg(d.join("int.toml"))
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{v}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(v["flows_exact"], flows, "{v}");
    assert_eq!(v["paths_from_store"]["wrong"], 0, "{v}");
}

/// Log2 bucket counts per (switch, metric index).
type Histograms = BTreeMap<(u32, usize), Vec<u64>>;

/// Every (switch, metric) histogram of the store in `d`.
fn histograms(d: &Path, nodes: &BTreeSet<u32>) -> Histograms {
    let c = dta_collector::Collector::open_dir(&d.join("regions"), false).unwrap();
    let region = c.store("hist").unwrap().region.clone();
    let mut out = BTreeMap::new();
    for &n in nodes {
        for (m, metric) in Metric::ALL.iter().enumerate() {
            let h =
                dta_int::query::histogram(&region, n, *metric, Some(&Buckets::Log2), None).unwrap();
            out.insert((n, m), h.buckets.iter().map(|b| b.count).collect());
        }
    }
    out
}

/// The trace `dta pcap gen --flows 2000 --seed 42` in `base` (trace.pcap, trace.json).
fn gen_trace(base: &Path) {
    gen_trace_as(base, "trace", 42);
}

/// `dta pcap gen --flows 2000 --seed SEED` in `base` as NAME.pcap and NAME.json.
fn gen_trace_as(base: &Path, name: &str, seed: u64) {
    let out = dta()
        .args([
            "pcap",
            "gen",
            "--flows",
            "2000",
            "--seed",
            &seed.to_string(),
            "--out",
        ])
        .arg(base.join(format!("{name}.pcap")))
        .output()
        .unwrap();
    common::assert_success(&out);
}

/// The ground truth's histograms (per switch and metric, the log2 bucket counts) of the trace
/// in `base`, and its switches.
fn truth_histograms(base: &Path) -> (Histograms, BTreeSet<u32>) {
    let truth: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(base.join("trace.json")).unwrap()).unwrap();
    let mut want: Histograms = BTreeMap::new();
    let mut nodes = BTreeSet::new();
    for fr in truth["frames"].as_array().unwrap() {
        for h in fr["hops"].as_array().unwrap() {
            let h: Vec<u32> = h
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap() as u32)
                .collect();
            nodes.insert(h[0]);
            for m in 0..3 {
                let c = want.entry((h[0], m)).or_insert_with(|| vec![0; 33]);
                c[Buckets::Log2.bucket(h[1 + m]) as usize] += 1;
            }
        }
    }
    (want, nodes)
}

/// A fresh run directory under `base` with the trace and the sink's configuration.
fn run_dir(base: &Path, name: &str, net: &VethPair, net_id: u8) -> std::path::PathBuf {
    let d = base.join(name);
    std::fs::create_dir_all(&d).unwrap();
    for f in ["trace.pcap", "trace.json"] {
        std::fs::copy(base.join(f), d.join(f)).unwrap();
    }
    write_config(
        &d,
        &format!("{}:32766", net.ip_a),
        &format!("10.{net_id}.0.0/24"),
    );
    d
}

/// Nothing lost at the AF_XDP sockets, and the sockets took reports.
fn assert_af_xdp_lossless(stats: &serde_json::Value) {
    let a = &stats["af_xdp"];
    assert_eq!(a["lost"], 0, "{stats}");
    let frames: u64 = a["sockets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["frames"].as_u64().unwrap())
        .sum();
    assert!(frames > 0, "no frame through AF_XDP: {stats}");
}

#[test]
fn af_xdp_on_two_threads_hands_flows_over_and_keeps_them_exact() {
    if let Some(why) = dta_testkit::netns_unavailable() {
        dta_testkit::skip!("{why}");
    }
    let net = VethPair::with_queues("qa", 86, 2);
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path();
    gen_trace(base);
    let d = run_dir(base, "af_xdp", &net, 86);
    let stats = run(
        &d,
        &net,
        &["--af-xdp", &net.dev_a, "--af-xdp-busy-poll", "50"],
    );
    eprintln!("AF_XDP, two threads: {stats}");
    assert_af_xdp_lossless(&stats);
    assert_eq!(stats["receive"]["threads"], 2, "{stats}");
    let sockets = stats["af_xdp"]["sockets"].as_array().unwrap();
    assert_eq!(sockets.len(), 2);
    // The kernel holds the busy poll asked, on every socket.
    assert!(sockets.iter().all(|s| s["busy_poll_us"] == 50), "{stats}");
    // One sender socket: its reports arrive on one queue, whose reader hands the other
    // thread's flows over (about half).
    let handed = stats["af_xdp"]["handed_over"].as_u64().unwrap();
    let sent = stats["reports"].as_u64().unwrap();
    assert!(handed > sent / 5 && handed < sent, "{stats}");
    check(&d, 2000);
}

#[test]
fn xdp_fast_path_and_af_xdp_on_one_interface_keep_records_and_histograms_exact() {
    if let Some(why) = dta_testkit::netns_unavailable() {
        dta_testkit::skip!("{why}");
    }
    let net = VethPair::with_queues("qb", 87, 2);
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path();
    gen_trace(base);
    let (want, nodes) = truth_histograms(base);
    let d = run_dir(base, "both", &net, 87);
    let stats = run(&d, &net, &["--xdp", &net.dev_a, "--af-xdp", &net.dev_a]);
    eprintln!("fast path and AF_XDP: {stats}");
    assert_af_xdp_lossless(&stats);
    let x = &stats["xdp"];
    let sent = stats["reports"].as_u64().unwrap();
    let fast = x["fast"].as_u64().unwrap();
    assert!(fast > sent / 2, "{stats}");
    // What the program did not aggregate went to the AF_XDP sockets, none up the stack.
    let program = &stats["af_xdp"]["program"];
    assert_eq!(
        program["redirected"].as_u64().unwrap(),
        sent - fast,
        "{stats}"
    );
    assert_eq!(program["pass_no_socket"], 0, "{stats}");
    assert_eq!(x["af_xdp"], program["redirected"], "{stats}");
    check(&d, 2000);
    assert_eq!(histograms(&d, &nodes), want);
}

#[test]
fn xdp_fast_path_and_af_xdp_on_two_interfaces_each_take_their_own() {
    if let Some(why) = dta_testkit::netns_unavailable() {
        dta_testkit::skip!("{why}");
    }
    // Two pairs, both sink ends in one namespace: the fast path on the first, AF_XDP on the
    // second, each with its own program.
    let net = VethPair::new("qe", 88);
    let other = VethPair::new("qf", 89);
    for args in [
        vec!["-n", &other.a, "link", "set", &other.dev_a, "netns", &net.a],
        vec![
            "-n",
            &net.a,
            "addr",
            "add",
            "10.89.0.1/24",
            "dev",
            &other.dev_a,
        ],
        vec!["-n", &net.a, "link", "set", &other.dev_a, "up"],
    ] {
        assert!(dta_testkit::netns::ip(&args), "ip {args:?}");
    }
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path();
    gen_trace(base);
    let d = run_dir(base, "two", &net, 88);
    gen_trace_as(&d, "other", 43);
    write_config(&d, "0.0.0.0:32766", "10.0.0.0/8");
    let stats = run_replays(
        &d,
        &net.a,
        &[
            (&net.b, &net.ip_a, "trace.pcap"),
            (&other.b, &other.ip_a, "other.pcap"),
        ],
        &["--xdp", &net.dev_a, "--af-xdp", &other.dev_a],
    );
    eprintln!("fast path and AF_XDP on two interfaces: {stats}");
    assert_af_xdp_lossless(&stats);
    let sent: u64 = stats["reports"].as_u64().unwrap();
    let fast = stats["xdp"]["fast"].as_u64().unwrap();
    let redirected = stats["af_xdp"]["program"]["redirected"].as_u64().unwrap();
    // The second trace went whole to the AF_XDP sockets; the fast path, on the first
    // interface only, took most of the first and redirected nothing (no socket there).
    assert!(redirected > 0 && fast > (sent - redirected) / 2, "{stats}");
    assert_eq!(stats["xdp"]["af_xdp"], 0, "{stats}");
    assert_eq!(stats["af_xdp"]["program"]["pass_no_socket"], 0, "{stats}");
    let replayed = |name: &str| {
        let t: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d.join(name)).unwrap()).unwrap();
        t["frames"].as_array().unwrap().len() as u64
    };
    assert_eq!(redirected, replayed("other.json"), "{stats}");
    assert_eq!(sent, replayed("trace.json") + redirected, "{stats}");
    // Both interfaces' receive drops are watched.
    for dev in [&net.dev_a, &other.dev_a] {
        assert_eq!(stats["interfaces"][dev.as_str()]["missed"], 0, "{stats}");
    }
}

#[test]
fn xdp_fast_path_keeps_records_and_histograms_exact() {
    if let Some(why) = dta_testkit::netns_unavailable() {
        dta_testkit::skip!("{why}");
    }
    let net = VethPair::new("q", 83);
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path();
    gen_trace(base);
    let (want, nodes) = truth_histograms(base);
    let mut hists = vec![];
    for xdp in [false, true] {
        let d = run_dir(base, if xdp { "xdp" } else { "plain" }, &net, 83);
        let xdp_args = ["--xdp", net.dev_a.as_str(), "--xdp-generic"];
        let stats = run(&d, &net, if xdp { &xdp_args[..] } else { &[] });
        eprintln!("fast path {xdp}: {stats}");
        check(&d, 2000);
        if xdp {
            let x = &stats["xdp"];
            let sent = stats["reports"].as_u64().unwrap();
            let fast = x["fast"].as_u64().unwrap();
            // Every flow's first report is the sink's (it learns the flow); the rest are the
            // program's (no event: no thresholds are set).
            assert!(fast > sent / 2, "{stats}");
            assert_eq!(
                stats["fast_path_reports"].as_u64().unwrap(),
                fast,
                "{stats}"
            );
            assert_eq!(x["pass_event"], 0, "{stats}");
        } else {
            assert!(stats.get("xdp").is_none(), "{stats}");
        }
        hists.push(histograms(&d, &nodes));
    }
    assert_eq!(
        hists[0], hists[1],
        "histograms with and without the fast path"
    );
    for (k, counts) in &want {
        assert_eq!(
            &hists[1][k], counts,
            "histogram of switch {} metric {}",
            k.0, k.1
        );
    }
}

/// `d`'s trace.pcap with every block of `block` records written last first: each flow's
/// reports within a block arrive newest first (the records' order only; the replay paces by
/// rate, not by their times, and sends a report as it is, its number kept).
fn reverse_blocks(d: &Path, block: usize) {
    let path = d.join("trace.pcap");
    let bytes = std::fs::read(&path).unwrap();
    // Little-endian pcap, micro- or nanosecond times: the same 16-byte record headers.
    let magic = u32::from_le_bytes(bytes[..4].try_into().unwrap());
    assert!(matches!(magic, 0xa1b2_c3d4 | 0xa1b2_3c4d), "{magic:#x}");
    let mut records = vec![];
    let mut at = 24;
    while at < bytes.len() {
        let len = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        records.push(&bytes[at..at + 16 + len]);
        at += 16 + len;
    }
    assert!(records.len() > 4 * block, "{} records", records.len());
    let mut out = bytes[..24].to_vec();
    for chunk in records.chunks(block) {
        for r in chunk.iter().rev() {
            out.extend_from_slice(r);
        }
    }
    std::fs::write(&path, out).unwrap();
}

/// The trace with its reports reordered (every block of 128 last first): the flows' records
/// and the stores' paths are the newest reports' by their numbers, through the sink's sockets
/// alone and with the fast path taking most of them (the program takes late reports into the
/// counts and sums, not into the latest values).
#[test]
fn reordered_reports_leave_every_flow_exact_with_and_without_the_fast_path() {
    if let Some(why) = dta_testkit::netns_unavailable() {
        dta_testkit::skip!("{why}");
    }
    let net = VethPair::new("o", 85);
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path();
    // Telemetry reports as the sink switch numbers them (in the trace's order), then reordered
    // on the way: the replay sends them as they are.
    let out = dta()
        .args(["pcap", "gen", "--flows", "2000", "--seed", "42"])
        .args(["--format", "reports", "--out"])
        .arg(base.join("trace.pcap"))
        .output()
        .unwrap();
    common::assert_success(&out);
    reverse_blocks(base, 128);
    for xdp in [false, true] {
        let d = run_dir(base, if xdp { "xdp" } else { "plain" }, &net, 85);
        let xdp_args = ["--xdp", net.dev_a.as_str(), "--xdp-generic"];
        let stats = run(&d, &net, if xdp { &xdp_args[..] } else { &[] });
        eprintln!("reordered, fast path {xdp}: {stats}");
        check(&d, 2000);
        if xdp {
            let fast = stats["xdp"]["fast"].as_u64().unwrap();
            assert!(fast > stats["reports"].as_u64().unwrap() / 2, "{stats}");
        }
    }
}
