//! `dta translator` as a process: SIGTERM (and SIGINT) write out everything pending before it
//! exits, and a second translator on the same port or region directory refuses to start,
//! naming the process that has them.

use std::io::{BufRead, BufReader};
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

use common::dta;

/// A config with one Append store whose batches are large and never flushed by the timer, so
/// entries stay pending in the translator until it shuts down. Lists 0-3 take the load; list
/// `QUIET_LIST` takes one entry before it, so one batch is always partial at the signal.
fn setup(dir: &Path, udp_port: u16) -> PathBuf {
    let cfg = dir.join("dta.toml");
    std::fs::write(
        &cfg,
        format!(
            "region_dir = 'r'\n[translator]\nlisten = '127.0.0.1:{udp_port}'\n\
             append_flush_ms = 3600000\n\
             [[store]]\nname = 'ev'\nkind = 'append'\nlists = 5\ncapacity = 65536\n\
             entry_len = 4\nbatch = 64\n"
        ),
    )
    .unwrap();
    let parsed = dta_node::config::Config::load(&cfg).unwrap();
    dta_collector::Collector::create(&parsed.region_dir, &parsed.store, false).unwrap();
    cfg
}

/// Start `dta translator` (with `args`) and wait until it listens (its "translator on udp://"
/// line).
fn start(cfg: &Path, args: &[&str]) -> (Child, std::thread::JoinHandle<String>) {
    let mut child = dta()
        .args(["translator", "--stats-interval", "0", "--json"])
        .arg("--config")
        .arg(cfg)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let stderr = std::thread::spawn(move || {
        let mut all = String::new();
        let mut line = String::new();
        while err.read_line(&mut line).unwrap_or(0) > 0 {
            if line.contains("translator on udp://") {
                let _ = tx.send(());
            }
            all.push_str(&line);
            line.clear();
        }
        all
    });
    if rx.recv_timeout(dta_testkit::WAIT).is_err() {
        let _ = child.kill();
        panic!("translator did not start: {}", stderr.join().unwrap());
    }
    (child, stderr)
}

/// The Append list that holds one entry, less than a batch, whatever the load's timing.
const QUIET_LIST: u32 = 4;

/// One native Append datagram (docs/protocol.md): `entry` to `list`.
fn append(list: u32, entry: u32) -> Vec<u8> {
    let mut d = vec![0x10, 0x00, 1, 0];
    d.extend_from_slice(&1u32.to_be_bytes());
    d.extend_from_slice(&entry.to_be_bytes());
    d.extend_from_slice(&[0x02, 0x00, 0, 4]);
    d.extend_from_slice(&list.to_be_bytes());
    d.extend_from_slice(&entry.to_be_bytes());
    d
}

/// The translator's count of Append reports applied, from its metrics on `mport`.
fn appended(mport: u16) -> Option<f64> {
    let s = dta_metrics::parse_exposition(&common::scrape(mport)?).ok()?;
    dta_metrics::value(
        &s,
        "dta_translator_reports_total",
        &[("primitive", "append")],
    )
}

fn list_entries(cfg: &Path, list: u32) -> Vec<serde_json::Value> {
    let out = dta()
        .args(["query", "list", "--store", "ev", "--json", "--tail", "0"])
        .args(["--list", &list.to_string(), "--max", "65536"])
        .arg("--config")
        .arg(cfg)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
    });
    v["entries"].as_array().cloned().unwrap_or_default()
}

fn signal_under_load_keeps_every_entry(sig: i32) {
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_udp_port();
    let cfg = setup(dir.path(), port);
    let mport = common::free_tcp_port();
    let (child, stderr) = start(&cfg, &["--metrics", &format!("127.0.0.1:{mport}")]);

    // One entry that no load completes a batch of, so something is pending at the signal
    // whichever datagram the translator reads last (the load alone can end on whole batches).
    let quiet = UdpSocket::bind("127.0.0.1:0").unwrap();
    quiet
        .send_to(&append(QUIET_LIST, u32::MAX), ("127.0.0.1", port))
        .unwrap();

    // Load: a sender that keeps going until well after the signal.
    let stop = Arc::new(AtomicBool::new(false));
    let sender = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let s = UdpSocket::bind("127.0.0.1:0").unwrap();
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) && n < 200_000 {
                let _ = s.send_to(&append(n % 4, n), ("127.0.0.1", port));
                n += 1;
                if n % 64 == 0 {
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
            n
        })
    };
    // The signal comes once the translator has applied more than a batch of the load (however
    // slowly a loaded machine runs it).
    dta_testkit::wait_until(
        "the translator to apply more than 64 Append reports",
        || appended(mport),
        |&n| n > Some(64.0),
    );
    // SAFETY: kill(2) on our own child's PID.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    let sent = sender.join().unwrap();

    let t0 = Instant::now();
    let out = child.wait_with_output().unwrap();
    let stderr = stderr.join().unwrap();
    assert!(
        out.status.success(),
        "signal {sig}: translator exited with {:?}\n{stderr}",
        out.status
    );
    assert!(
        t0.elapsed() < Duration::from_secs(30),
        "signal {sig}: exit took {:?}",
        t0.elapsed()
    );
    let st: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "final stats not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    let applied = st["reports"]["append"].as_u64().unwrap();
    assert!(applied > 64, "too little load to test: {st}");
    assert!(applied <= sent as u64 + 1);
    // Some entries were pending at the signal (at least the quiet list's).
    assert!(
        st["append"]["partial_batches"].as_u64().unwrap() > 0,
        "nothing was pending at the signal: {st}"
    );
    let mut seen = std::collections::HashSet::new();
    for list in 0..=QUIET_LIST {
        for e in list_entries(&cfg, list) {
            assert!(seen.insert(e.to_string()), "entry {e} twice");
        }
    }
    assert_eq!(
        seen.len() as u64,
        applied,
        "every appended entry is queryable: {st}"
    );
}

#[test]
fn sigterm_under_load_writes_every_pending_append_entry() {
    signal_under_load_keeps_every_entry(libc::SIGTERM);
}

#[test]
fn sigint_under_load_writes_every_pending_append_entry() {
    signal_under_load_keeps_every_entry(libc::SIGINT);
}

#[test]
fn a_second_translator_on_the_port_or_directory_refuses_naming_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_udp_port();
    let cfg = setup(dir.path(), port);
    let (mut first, stderr) = start(&cfg, &[]);
    let pid = first.id().to_string();

    // Same port (and directory).
    let out = dta()
        .args(["translator", "--duration", "2", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    let msg = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "second translator started: {msg}");
    assert!(
        msg.contains(&pid) && msg.contains(&port.to_string()),
        "{msg}"
    );

    // Another port, same region directory: the writer lock.
    let other = common::free_udp_port();
    let out = dta()
        .args(["translator", "--duration", "2", "--listen"])
        .arg(format!("127.0.0.1:{other}"))
        .arg("--config")
        .arg(&cfg)
        .output()
        .unwrap();
    let msg = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "second writer started: {msg}");
    assert!(msg.contains(&pid), "{msg}");

    // SAFETY: kill(2) on our own child's PID.
    unsafe { libc::kill(first.id() as i32, libc::SIGTERM) };
    assert!(
        first.wait().unwrap().success(),
        "{}",
        stderr.join().unwrap()
    );
}
