//! The CLI end to end on loopback: `dta pcap gen` + `dta pcap replay` deliver every frame of the
//! trace, and `dta translator --metrics` serves counters that move as reports arrive.

use std::net::UdpSocket;
use std::process::Stdio;
use std::time::{Duration, Instant};

mod common;

use common::{dta, free_tcp_port, scrape};
use dta_int_trace::intgen::GroundTruth;
use dta_int_trace::pcap::read_pcap;
use dta_metrics::{parse_exposition, value};

/// A receiving socket with a large buffer (SO_RCVBUFFORCE as root), so a descheduled receiver
/// does not lose datagrams.
fn rx_socket() -> UdpSocket {
    dta_translator::ingest::bind("127.0.0.1:0".parse().unwrap(), 16 << 20).unwrap()
}

#[test]
fn pcap_gen_then_replay_delivers_every_frame() {
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("t.pcap");
    let out = dta()
        .args([
            "pcap",
            "gen",
            "--flows",
            "30",
            "--max-packets",
            "20",
            "--seed",
            "3",
        ])
        .arg("--out")
        .arg(&pcap)
        .output()
        .unwrap();
    common::assert_success(&out);
    let truth = GroundTruth::load(&pcap.with_extension("json")).unwrap();
    let n = read_pcap(&pcap).unwrap().len();
    assert_eq!(n, truth.frames.len());
    assert_eq!(truth.flows.len(), 30);
    assert!(truth.flows.iter().all(|f| f.path.len() == 5));

    let rx = rx_socket();
    let to = rx.local_addr().unwrap();
    // Until the n frames arrived (however late the replay process starts), then no more.
    let h = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let mut got = 0;
        rx.set_read_timeout(Some(dta_testkit::WAIT)).unwrap();
        while got < n && rx.recv(&mut buf).is_ok() {
            got += 1;
        }
        rx.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        while rx.recv(&mut buf).is_ok() {
            got += 1;
        }
        got
    });
    let out = dta()
        .args(["pcap", "replay", "--rate", "50000", "--to", &to.to_string()])
        .arg(&pcap)
        .output()
        .unwrap();
    common::assert_success(&out);
    let st: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(st["sent"], n as u64);
    assert_eq!(st["wrapped"], n as u64);
    assert_eq!(h.join().unwrap(), n);
}

/// A native datagram (docs/protocol.md): one Key-Increment report of `key` by 1, redundancy 1.
fn key_increment(seq: u32, key: u32) -> Vec<u8> {
    let mut d = vec![0x10, 0x00, 1, 0];
    d.extend_from_slice(&7u32.to_be_bytes());
    d.extend_from_slice(&seq.to_be_bytes());
    d.extend_from_slice(&[0x03, 0x00, 4, 8]);
    d.extend_from_slice(&key.to_be_bytes());
    d.extend_from_slice(&1u64.to_be_bytes());
    d
}

#[test]
fn translator_metrics_move_with_reports() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("dta.toml");
    let udp_port = {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.local_addr().unwrap().port()
    };
    std::fs::write(
        &cfg,
        format!(
            "region_dir = 'r'\n[translator]\nlisten = '127.0.0.1:{udp_port}'\n\
             [[store]]\nname = 'c'\nkind = 'key-increment'\ncounters = 1024\nkey_len = 4\nredundancy = 1\n"
        ),
    )
    .unwrap();
    let parsed: dta_node::config::Config = dta_node::config::Config::load(&cfg).unwrap();
    dta_collector::Collector::create(&parsed.region_dir, &parsed.store, false).unwrap();

    let mport = free_tcp_port();
    // --duration only ends a translator the test leaves behind when it fails; the test kills it.
    let mut child = dta()
        .args(["translator", "--stats-interval", "0", "--duration", "300"])
        .arg("--config")
        .arg(&cfg)
        .args(["--metrics", &format!("127.0.0.1:{mport}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let before =
        dta_testkit::wait_until("the metrics server", || scrape(mport), Option::is_some).unwrap();
    let s = parse_exposition(&before).unwrap();
    assert_eq!(
        value(
            &s,
            "dta_translator_reports_total",
            &[("primitive", "key_increment")]
        ),
        Some(0.0)
    );

    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    for i in 0..50u32 {
        tx.send_to(&key_increment(i, i % 5), ("127.0.0.1", udp_port))
            .unwrap();
    }
    // A datagram of an unknown version is dropped and counted by reason.
    tx.send_to(&[0x30, 0, 0, 0], ("127.0.0.1", udp_port))
        .unwrap();

    let deadline = Instant::now() + dta_testkit::WAIT;
    loop {
        let s = parse_exposition(&scrape(mport).unwrap()).unwrap();
        let ki = value(
            &s,
            "dta_translator_reports_total",
            &[("primitive", "key_increment")],
        );
        let dropped = value(
            &s,
            "dta_translator_dropped_total",
            &[("stage", "wire"), ("reason", "unknown_version")],
        );
        // The counters are published by different stages at different moments: wait until all
        // of them show the 51 datagrams.
        let datagrams = value(&s, "dta_translator_datagrams_total", &[]);
        let fetch_adds = value(
            &s,
            "dta_translator_memory_ops_total",
            &[("op", "fetch_add")],
        );
        let now = (ki, dropped, datagrams, fetch_adds);
        if now == (Some(50.0), Some(1.0), Some(51.0), Some(50.0)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "counters did not reach 50 reports, 1 dropped, 51 datagrams, 50 fetch-adds: {now:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}
