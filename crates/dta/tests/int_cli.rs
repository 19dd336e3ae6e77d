//! INT end to end through the real commands: `dta pcap gen` writes a trace and its ground truth,
//! `dta int-sink` (with line-protocol export and Prometheus metrics) receives `dta pcap replay`,
//! and `dta query int path` answers every flow as the ground truth says.

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{dta, free_tcp_port, free_udp_port, scrape};

#[test]
fn pcap_replay_into_int_sink_then_query_paths() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pcap = d.join("trace.pcap");
    let out = dta()
        .args([
            "pcap",
            "gen",
            "--flows",
            "40",
            "--max-packets",
            "20",
            "--seed",
            "3",
            "--out",
        ])
        .arg(&pcap)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let truth: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("trace.json")).unwrap()).unwrap();

    let port = free_udp_port();
    let mport = free_tcp_port();
    std::fs::write(
        d.join("int.toml"),
        format!(
            r#"region_dir = "regions"
listen = "127.0.0.1:{port}"
[sink]
int_udp_port = 5000
[[store]]
name = "paths"
kind = "key-write"
slots = 65536
key_len = 13
data_len = 24
[[store]]
name = "latency"
kind = "postcarding"
chunks = 65536
hops = 5
key_len = 13
[[store]]
name = "events"
kind = "append"
lists = 8
capacity = 16384
entry_len = 32
batch = 16
[[store]]
name = "hist"
kind = "key-increment"
counters = 262144
key_len = 6
"#
        ),
    )
    .unwrap();
    let lp = d.join("export.lp");
    let mut sink = dta()
        .args([
            "int-sink",
            "--duration",
            "5",
            "--metrics",
            &format!("127.0.0.1:{mport}"),
        ])
        .arg("--config")
        .arg(d.join("int.toml"))
        .arg("--influx")
        .arg(&lp)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for its metrics endpoint: then its UDP socket is bound too.
    let deadline = Instant::now() + Duration::from_secs(5);
    while scrape(mport).is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = dta()
        .args([
            "pcap",
            "replay",
            "--rate",
            "5000",
            "--to",
            &format!("127.0.0.1:{port}"),
        ])
        .arg(&pcap)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::thread::sleep(Duration::from_millis(300));
    let metrics = scrape(mport).expect("metrics endpoint");
    assert!(metrics.contains("dta_int"), "{metrics}");
    let status = sink.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(sink.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(status.success(), "{err}");

    // Flow records were exported as line protocol when the sink flushed its FlowCache.
    let lines = std::fs::read_to_string(&lp).unwrap();
    assert!(lines.lines().any(|l| l.starts_with("int_flow")), "{lines}");

    // Every flow's path, through the CLI.
    let flows = truth["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 40);
    for f in flows {
        let flow = f["flow"].as_str().unwrap();
        let out = dta()
            .args([
                "query",
                "int",
                "path",
                "--store",
                "paths",
                "--flow",
                flow,
                "--region-dir",
            ])
            .arg(d.join("regions"))
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{flow}: not JSON ({e}): {}",
                String::from_utf8_lossy(&out.stdout)
            )
        });
        assert_eq!(v["status"], "found", "{flow}: {v}");
        assert_eq!(v["path"], f["path"], "{flow}: {v}");
    }
}
