//! `dta translator --threads 2`: two translator threads on one UDP port (SO_REUSEPORT), fed by
//! many reporters at once; every report is applied once, and the counters are summed.

use std::net::UdpSocket;
use std::process::Stdio;
use std::time::Duration;

mod common;

use common::{dta, free_tcp_port, scrape};

/// A native datagram (docs/protocol.md) from `reporter`: a Key-Increment of `key` by 1
/// (redundancy 1) and an Append of `entry` to list `list`.
fn datagram(reporter: u32, seq: u32, key: u32, list: u32, entry: u32) -> Vec<u8> {
    let mut d = vec![0x10, 0x00, 2, 0];
    d.extend_from_slice(&reporter.to_be_bytes());
    d.extend_from_slice(&seq.to_be_bytes());
    d.extend_from_slice(&[0x03, 0x00, 4, 8]);
    d.extend_from_slice(&key.to_be_bytes());
    d.extend_from_slice(&1u64.to_be_bytes());
    d.extend_from_slice(&[0x02, 0x00, 0, 4]);
    d.extend_from_slice(&list.to_be_bytes());
    d.extend_from_slice(&entry.to_be_bytes());
    d
}

#[test]
fn translator_threads_share_the_port() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("dta.toml");
    let udp_port = common::free_udp_port();
    std::fs::write(
        &cfg,
        format!(
            "region_dir = 'r'\n[translator]\nlisten = '127.0.0.1:{udp_port}'\nthreads = 1\n\
             [[store]]\nname = 'c'\nkind = 'key-increment'\ncounters = 4096\nkey_len = 4\nredundancy = 1\n\
             [[store]]\nname = 'ev'\nkind = 'append'\nlists = 4\ncapacity = 4096\n\
             entry_len = 4\nbatch = 4\n\
             [[store]]\nname = 'kw'\nkind = 'key-write'\nslots = 65536\nkey_len = 4\n\
             data_len = 4\n"
        ),
    )
    .unwrap();
    let parsed: dta_node::config::Config = dta_node::config::Config::load(&cfg).unwrap();
    dta_collector::Collector::create(&parsed.region_dir, &parsed.store, false).unwrap();

    let mport = free_tcp_port();
    let child = dta()
        .args(["translator", "--threads", "2", "--stats-interval", "0"])
        .arg("--json")
        .arg("--config")
        .arg(&cfg)
        .args(["--metrics", &format!("127.0.0.1:{mport}")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    common::wait_for("the translator's metrics endpoint", || {
        scrape(mport).is_some()
    });

    // Sixteen reporters, each on its own socket: the kernel spreads them over both threads.
    let senders: Vec<UdpSocket> = (0..16)
        .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
        .collect();
    let mut counts = [0u64; 8];
    let mut sent = 0u64;
    for seq in 0..50u32 {
        for (r, s) in senders.iter().enumerate() {
            let key = (seq + r as u32) % 8;
            counts[key as usize] += 1;
            // The kernel steers a reporter to thread `id mod 2` (prio_sockets); lists `(r / 2) % 4`
            // are owned by thread `list mod 2` (shard): half the appends change threads.
            let d = datagram(r as u32, seq, key, ((r / 2) % 4) as u32, seq);
            s.send_to(&d, ("127.0.0.1", udp_port)).unwrap();
            sent += 1;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    // The load generator's own senders: four reporters on four sockets.
    let out = dta()
        .args(["report", "-p", "kw", "--count", "4000", "--rate", "100000"])
        .args(["--senders", "4", "--quiet", "--json"])
        .args(["--to", &format!("127.0.0.1:{udp_port}")])
        .output()
        .unwrap();
    common::assert_success(&out);
    let rep: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rep["reports"], 4000, "{rep}");
    let kw_datagrams = rep["datagrams"].as_u64().unwrap();

    // Stopped once everything is sent (a fixed --duration could end before a loaded machine
    // has sent it all): SIGINT applies what the sockets hold, then prints the final counters.
    common::interrupt(&child, libc::SIGINT);
    let out = child.wait_with_output().unwrap();
    common::assert_success(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("(2 threads)"), "{stderr}");
    let st: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(st["datagrams"], sent + kw_datagrams, "{st}");
    assert_eq!(st["reports"]["key_write"], 4000, "{st}");
    assert_eq!(st["reports"]["key_increment"], sent, "{st}");
    assert_eq!(st["reports"]["append"], sent, "{st}");
    // Lists are owned by one thread each: the other thread's appends were handed over.
    assert!(st["forwarded"].as_u64().unwrap() > 0, "{st}");

    for (key, want) in counts.iter().enumerate() {
        let out = dta()
            .args(["query", "ki", "--store", "c", "-n", "1", "--json"])
            .args(["--key", &key.to_string()])
            .arg("--config")
            .arg(&cfg)
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["count"], *want, "key {key}: {v}");
    }
    for list in 0..4 {
        let out = dta()
            .args(["query", "list", "--store", "ev", "--json", "--tail", "0"])
            .args(["--list", &list.to_string(), "--max", "1000"])
            .arg("--config")
            .arg(&cfg)
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            v["entries"].as_array().map(Vec::len),
            Some(200),
            "list {list}: {v}"
        );
    }
}

#[test]
fn threads_with_rdma_is_refused() {
    let out = dta()
        .args(["translator", "--threads", "2", "--rdma", "lo"])
        .args(["--collector", "127.0.0.1", "--duration", "1"])
        .output()
        .unwrap();
    // Errors exit with status 2 (`dta: error: ...`).
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("threads = 2") && stderr.contains("one thread"),
        "{stderr}"
    );
}
