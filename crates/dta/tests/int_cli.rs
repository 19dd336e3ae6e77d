//! INT end to end through the real commands: `dta pcap gen` writes a trace and its ground truth,
//! `dta int-sink` (with line-protocol export and Prometheus metrics) receives `dta pcap replay`,
//! and `dta query int path` answers every flow as the ground truth says.

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{dta, free_tcp_port, free_udp_port, scrape};

/// `d/int.toml`: an INT sink on 127.0.0.1:`port` with stores in `d/regions`; `sink` adds
/// lines to its `[sink]` table.
fn write_config(d: &std::path::Path, port: u16, sink: &str) {
    std::fs::write(
        d.join("int.toml"),
        format!(
            r#"region_dir = "regions"
listen = "127.0.0.1:{port}"
[sink]
int_udp_port = 5000
{sink}
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
}

/// `dta pcap gen` of `flows` flows into `d/trace.pcap` (ground truth `d/trace.json`).
fn gen_trace(d: &std::path::Path, flows: u32) -> serde_json::Value {
    let pcap = d.join("trace.pcap");
    let out = dta()
        .args([
            "pcap",
            "gen",
            "--max-packets",
            "20",
            "--seed",
            "3",
            "--flows",
        ])
        .arg(flows.to_string())
        .arg("--out")
        .arg(&pcap)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(d.join("trace.json")).unwrap()).unwrap()
}

/// `dta query int path` of `flow`: its JSON.
fn query_path(d: &std::path::Path, flow: &str) -> serde_json::Value {
    let out = dta()
        .args(["query", "int", "path", "--store", "paths", "--flow", flow])
        .arg("--region-dir")
        .arg(d.join("regions"))
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{flow}: not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

#[test]
fn pcap_replay_into_int_sink_then_query_paths() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let truth = gen_trace(d, 40);
    let pcap = d.join("trace.pcap");

    let port = free_udp_port();
    let mport = free_tcp_port();
    write_config(d, port, "");
    let lp = d.join("export.lp");
    let mut sink = dta()
        .args([
            "int-sink",
            "--duration",
            "60",
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
    // Stop it once the replay is done (a fixed --duration could end before a loaded machine has
    // sent everything): SIGTERM flushes every flow held.
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(
        unsafe { libc::kill(sink.id() as libc::pid_t, libc::SIGTERM) },
        0
    );
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
        let v = query_path(d, flow);
        assert_eq!(v["status"], "found", "{flow}: {v}");
        assert_eq!(v["path"], f["path"], "{flow}: {v}");
    }
}

/// SIGTERM (what a service manager sends) ends `dta int-sink` cleanly: the flows it holds are
/// written and it exits 0; Ctrl-C (SIGINT) the same.
#[test]
fn int_sink_flushes_and_exits_zero_on_sigterm_and_sigint() {
    for sig in [libc::SIGTERM, libc::SIGINT] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let truth = gen_trace(d, 5);
        let (port, mport) = (free_udp_port(), free_tcp_port());
        write_config(d, port, "");
        let sink = dta()
            .args(["int-sink", "--metrics", &format!("127.0.0.1:{mport}")])
            .arg("--config")
            .arg(d.join("int.toml"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while scrape(mport).is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = dta()
            .args(["pcap", "replay", "--to", &format!("127.0.0.1:{port}")])
            .arg(d.join("trace.pcap"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(200));
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(sink.id() as libc::pid_t, sig) }, 0);
        let out = sink.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "signal {sig}: {:?}: {err}",
            out.status
        );
        assert!(!err.contains("Interrupted"), "{err}");
        for f in truth["flows"].as_array().unwrap() {
            let flow = f["flow"].as_str().unwrap();
            let v = query_path(d, flow);
            assert_eq!(v["status"], "found", "signal {sig}, {flow}: {v}");
            assert_eq!(v["path"], f["path"], "{flow}: {v}");
        }
    }
}

/// The `[sink] allow` list (default loopback): a source outside it is dropped and counted by
/// reason; inside it, taken.
#[test]
fn int_sink_takes_reports_only_from_allowed_sources() {
    for (allow, taken) in [
        (r#"["10.0.0.0/8", "::1"]"#, false),
        (r#"["127.0.0.0/8"]"#, true),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let truth = gen_trace(d, 3);
        let (port, mport) = (free_udp_port(), free_tcp_port());
        write_config(d, port, &format!("allow = {allow}"));
        let mut sink = dta()
            .args(["int-sink", "--metrics", &format!("127.0.0.1:{mport}")])
            .arg("--config")
            .arg(d.join("int.toml"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while scrape(mport).is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = dta()
            .args(["pcap", "replay", "--to", &format!("127.0.0.1:{port}")])
            .arg(d.join("trace.pcap"))
            .output()
            .unwrap();
        assert!(out.status.success());
        std::thread::sleep(Duration::from_millis(200));
        let metrics = scrape(mport).expect("metrics");
        let rejected = metrics
            .lines()
            .find(|l| {
                l.starts_with("dta_int_sources_rejected_total{reason=\"source_not_allowed\"}")
            })
            .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("no dta_int_sources_rejected: {metrics}"));
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(
            unsafe { libc::kill(sink.id() as libc::pid_t, libc::SIGTERM) },
            0
        );
        assert!(sink.wait().unwrap().success());
        let flow = truth["flows"][0]["flow"].as_str().unwrap();
        let v = query_path(d, flow);
        if taken {
            assert_eq!(rejected, 0, "{allow}");
            assert_eq!(v["status"], "found", "{allow}: {v}");
        } else {
            assert!(rejected > 0, "{allow}: {metrics}");
            assert_ne!(v["status"], "found", "{allow}: {v}");
        }
    }
}
