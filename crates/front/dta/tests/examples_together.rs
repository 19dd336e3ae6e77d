//! The example configurations run together as documented: `examples/int-sink.toml` and
//! `examples/dta.toml` copied side by side (only their ports made free), the collector serving
//! the INT sink's regions read-only beside its own as `examples/dta.toml` suggests
//! (`serve_read_only = ["int-regions"]`) and showing the sink's counters. `dta check`
//! understands both files (and the cluster map), the generic and the INT queries read the INT
//! sink's configuration, and the collector's HTTP API answers the INT routes from the sink's
//! stores, which no store of the collector's shadows.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Stdio;

use common::{assert_success, dta, free_tcp_port, free_udp_port, wait_for, Spawned};

const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../examples");

fn get(addr: &str, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(addr).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut r = String::new();
    s.read_to_string(&mut r).ok()?;
    let (head, body) = r.split_once("\r\n\r\n")?;
    let code = head.split(' ').nth(1)?.parse().ok()?;
    Some((code, body.to_owned()))
}

/// `examples/NAME` with each `(from, to)` replaced, each `from` required to be there.
fn example(name: &str, edits: &[(&str, String)]) -> String {
    let mut text = std::fs::read_to_string(Path::new(EXAMPLES).join(name)).unwrap();
    for (from, to) in edits {
        assert!(
            text.contains(from),
            "examples/{name} no longer has {from:?}"
        );
        text = text.replacen(from, to, 1);
    }
    text
}

#[test]
fn the_examples_run_together_as_documented() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (udp, int_metrics, http, translator) = (
        free_udp_port(),
        free_tcp_port(),
        free_tcp_port(),
        free_udp_port(),
    );
    std::fs::write(
        d.join("int-sink.toml"),
        example(
            "int-sink.toml",
            &[("127.0.0.1:32766", format!("127.0.0.1:{udp}"))],
        ),
    )
    .unwrap();
    // What examples/dta.toml says to uncomment to see the INT sink beside the collector.
    std::fs::write(
        d.join("dta.toml"),
        example(
            "dta.toml",
            &[
                ("127.0.0.1:40080", format!("127.0.0.1:{http}")),
                ("127.0.0.1:40040", format!("127.0.0.1:{translator}")),
                (
                    "# int_sink_metrics = \"127.0.0.1:9465\"",
                    format!("int_sink_metrics = \"127.0.0.1:{int_metrics}\""),
                ),
                (
                    "# serve_read_only = [\"int-regions\"]",
                    "serve_read_only = [\"int-regions\"]".to_owned(),
                ),
            ],
        ),
    )
    .unwrap();
    std::fs::copy(
        Path::new(EXAMPLES).join("cluster.toml"),
        d.join("cluster.toml"),
    )
    .unwrap();
    // `dta check` understands every file, and says which service each is for.
    for (file, says) in [
        ("int-sink.toml", "INT sink on udp://"),
        ("dta.toml", "translator on udp://"),
        ("cluster.toml", "cluster map"),
    ] {
        let out = dta()
            .args(["check", "--config"])
            .arg(d.join(file))
            .output()
            .unwrap();
        assert_success(&out);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(says), "{file}: {text}");
    }

    // The INT sink first (the collector serves its directory), fed a generated trace.
    let out = dta()
        .args(["pcap", "gen", "--flows", "8", "--seed", "3", "--out"])
        .arg(d.join("trace.pcap"))
        .output()
        .unwrap();
    assert_success(&out);
    let _sink = Spawned::from(
        dta()
            .args([
                "int-sink",
                "--metrics",
                &int_metrics.to_string(),
                "--config",
            ])
            .arg(d.join("int-sink.toml"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for("the INT sink's metrics", || {
        common::scrape(int_metrics).is_some()
    });
    let out = dta()
        .args(["pcap", "replay", "--to", &format!("127.0.0.1:{udp}")])
        .arg(d.join("trace.pcap"))
        .output()
        .unwrap();
    assert_success(&out);
    let _collector = Spawned::from(
        dta()
            .args(["collector", "--config"])
            .arg(d.join("dta.toml"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let addr = format!("127.0.0.1:{http}");
    wait_for("the collector's API", || {
        get(&addr, "/readyz").is_some_and(|(c, _)| c == 200)
    });

    // Both directories' stores, no name twice.
    let (code, body) = get(&addr, "/stores").unwrap();
    assert_eq!(code, 200, "{body}");
    let stores: serde_json::Value = serde_json::from_str(&body).unwrap();
    let names: Vec<&str> = stores
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            s["header"]["name"]
                .as_str()
                .unwrap_or_else(|| panic!("a store that is not available: {s}"))
        })
        .collect();
    for n in [
        "paths",
        "events",
        "int_paths",
        "int_events",
        "int_hist",
        "int_latency",
    ] {
        assert!(names.contains(&n), "{n} not served: {names:?}");
    }
    let mut unique = names.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "{names:?}");

    // The INT routes find the sink's stores by their layout, through the collector.
    wait_for("the sink's flows through the collector", || {
        get(&addr, "/int/network?window=all").is_some_and(|(c, b)| {
            c == 200
                && serde_json::from_str::<serde_json::Value>(&b)
                    .is_ok_and(|v| v["switches"].as_array().is_some_and(|s| !s.is_empty()))
        })
    });
    // The console shows the sink's counters: the collector reaches its /metrics.
    let (code, peers) = get(&addr, "/console/peers").unwrap();
    assert_eq!(code, 200, "{peers}");
    assert!(peers.contains("dta_int_"), "{peers}");

    // The INT sink's own configuration is what the queries read, generic and INT alike.
    let out = dta()
        .args(["query", "int", "network", "--window", "all", "--config"])
        .arg(d.join("int-sink.toml"))
        .output()
        .unwrap();
    assert_success(&out);
    let out = dta()
        .args([
            "query",
            "list",
            "--store",
            "int_events",
            "--list",
            "8",
            "--config",
        ])
        .arg(d.join("int-sink.toml"))
        .output()
        .unwrap();
    assert_success(&out);
}
