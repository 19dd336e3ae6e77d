//! `dta int-sink --xdp IFACE`: the INT fast path (an XDP program aggregating the reports of
//! known flows with no event) across a veth pair between two network namespaces the test
//! creates. The same trace (`dta pcap gen --flows 2000 --seed 42`) is replayed into a sink
//! without and with the fast path: both sets of flow records are exact against the trace's
//! ground truth, the stores' paths too, the fast path took most reports, and every switch's
//! histograms read the same from both stores, equal to the ground truth's counts. Needs root (a
//! counted skip otherwise).

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

/// One run: a sink in namespace `ns` (with `--xdp dev` if given) receiving the trace replayed
/// from namespace `from`; its final stats.
fn run(d: &Path, net: &VethPair, xdp: bool) -> serde_json::Value {
    let exe = env!("CARGO_BIN_EXE_dta");
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &net.a, exe, "int-sink", "--config"])
        .arg(d.join("int.toml"))
        .arg("--records")
        .arg(d.join("records.jsonl"));
    if xdp {
        cmd.args(["--xdp", &net.dev_a, "--xdp-generic"]);
    }
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
    let out = Command::new("ip")
        .args([
            "netns", "exec", &net.b, exe, "pcap", "replay", "--rate", "40000",
        ])
        .args(["--to", &format!("{}:32766", net.ip_a)])
        .arg(d.join("trace.pcap"))
        .output()
        .unwrap();
    common::assert_success(&out);
    let replay: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
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
    assert_eq!(stats["reports"], replay["sent"], "{stats}\n{replay}");
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

/// Every (switch, metric) histogram of the store in `d`.
fn histograms(d: &Path, nodes: &BTreeSet<u32>) -> BTreeMap<(u32, usize), Vec<u64>> {
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

#[test]
fn xdp_fast_path_keeps_records_and_histograms_exact() {
    if let Some(why) = dta_testkit::netns_unavailable() {
        dta_testkit::skip!("{why}");
    }
    let net = VethPair::new("q", 83);
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path();
    let out = dta()
        .args(["pcap", "gen", "--flows", "2000", "--seed", "42", "--out"])
        .arg(base.join("trace.pcap"))
        .output()
        .unwrap();
    common::assert_success(&out);
    let truth: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(base.join("trace.json")).unwrap()).unwrap();
    // The ground truth's histograms: per switch and metric, the log2 bucket counts.
    let mut want: BTreeMap<(u32, usize), Vec<u64>> = BTreeMap::new();
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
    let mut hists = vec![];
    for xdp in [false, true] {
        let d = base.join(if xdp { "xdp" } else { "plain" });
        std::fs::create_dir_all(&d).unwrap();
        for f in ["trace.pcap", "trace.json"] {
            std::fs::copy(base.join(f), d.join(f)).unwrap();
        }
        write_config(&d, &format!("{}:32766", net.ip_a), "10.83.0.0/24");
        let stats = run(&d, &net, xdp);
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
