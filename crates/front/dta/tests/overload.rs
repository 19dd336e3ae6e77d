//! High priority survives a low-priority flood ([DTA-draft §3.2]; docs/flow-control.md): `dta
//! translator` with the default configuration, two senders flooding low-priority datagrams as
//! fast as they can and a paced high-priority stream, all on this machine's cores. Every
//! high-priority datagram is applied, exactly once (its Append entries read back, each once),
//! whether the stream is retransmittable or not, and behind the classifier or not; what the
//! kernel drops is the flood's (the per-priority sockets of `dta_translator::prio_sockets`).
//! Nothing here is timed: the flood lasts as long as the high stream takes to send.

use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use dta_reporter::{Protocol, Reporter, ReporterConfig};
use dta_wire::native::DatagramBuilder;
use dta_wire::{Priority, Report};

mod common;

/// High-priority reports sent, one Append entry each.
const HIGH: u32 = 20_000;
/// Their pace, datagrams per second.
const HIGH_RATE: f64 = 20_000.0;

fn config(dir: &Path, port: u16, nack_port: u16, translator: &str) -> std::path::PathBuf {
    let cfg = dir.join("dta.toml");
    std::fs::write(
        &cfg,
        format!(
            "region_dir = 'r'\n[collector]\nhttp = ''\n[translator]\nlisten = '127.0.0.1:{port}'\n\
             nack_port = {nack_port}\n{translator}\n\
             [[store]]\nname = 'flood'\nkind = 'key-increment'\ncounters = 65536\nkey_len = 8\n\
             [[store]]\nname = 'high'\nkind = 'append'\nlists = 1\ncapacity = 65536\n\
             entry_len = 4\nbatch = 16\n"
        ),
    )
    .unwrap();
    cfg
}

/// A low-priority datagram of 32 Key-Increment reports to the flood store.
fn flood_datagram(first: u64) -> Vec<u8> {
    let mut buf = vec![0u8; 1500];
    let keys: Vec<[u8; 8]> = (first..first + 32).map(u64::to_be_bytes).collect();
    let mut b = DatagramBuilder::new(&mut buf, Priority::Low, false, 77, 0).unwrap();
    for k in &keys {
        b.push(&Report::KeyIncrement {
            key: k,
            counter: 1,
            redundancy: 2,
            immediate: false,
        })
        .unwrap();
    }
    let n = b.finish();
    buf.truncate(n);
    buf
}

fn run(translator_cfg: &str, retransmittable: bool) {
    run_with(translator_cfg, retransmittable, None)
}

/// [`run`], the NACKs authenticated with `key` when given (`control_key_file`).
fn run_with(translator_cfg: &str, retransmittable: bool, key: Option<&str>) {
    let dir = tempfile::tempdir().unwrap();
    let translator_cfg = match key {
        Some(k) => {
            std::fs::write(dir.path().join("control.key"), k).unwrap();
            format!("{translator_cfg}\ncontrol_key_file = 'control.key'")
        }
        None => translator_cfg.to_string(),
    };
    let translator_cfg = translator_cfg.as_str();
    let port = common::free_udp_port();
    let to: SocketAddr = ([127, 0, 0, 1], port).into();
    // The high-priority reporter first: the translator sends its NACKs to its port.
    let mut rc = ReporterConfig::new(to, Protocol::Native { reporter_id: 9 });
    rc.priority = Priority::High;
    rc.retransmittable = retransmittable;
    rc.nack_port = Some(0);
    rc.max_reports_per_datagram = 1;
    rc.control_key = key.map(|k| dta_wire::auth::ControlKey::from_hex(k).unwrap());
    let mut high = Reporter::new(rc).unwrap();
    let nack_port = high.nack_addr().unwrap().port();
    let cfg = config(dir.path(), port, nack_port, translator_cfg);
    let c = dta_node::config::Config::load(&cfg).unwrap();
    drop(dta_node::collector::create(&c).unwrap());
    let t = common::dta()
        .args(["translator", "--json", "--stats-interval", "0", "--config"])
        .arg(&cfg)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    common::wait_for("the translator bound its port", || {
        common::udp_port_bound(port)
    });

    let stop = AtomicBool::new(false);
    let sent_low = std::thread::scope(|s| {
        let flooders: Vec<_> = (0..2u64)
            .map(|i| {
                let stop = &stop;
                s.spawn(move || {
                    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        // A full socket buffer refuses some: the flood goes on.
                        if tx
                            .send_to(&flood_datagram((i << 32) | (n * 32)), to)
                            .is_ok()
                        {
                            n += 1;
                        }
                    }
                    n
                })
            })
            .collect();
        let start = Instant::now();
        for i in 0..HIGH {
            let due = start + Duration::from_secs_f64(f64::from(i) / HIGH_RATE);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            high.report(&Report::Append {
                list_id: 0,
                data: &i.to_be_bytes(),
                immediate: false,
            })
            .unwrap();
            high.poll_nacks().unwrap();
        }
        high.flush().unwrap();
        stop.store(true, Ordering::Relaxed);
        flooders.into_iter().map(|f| f.join().unwrap()).sum::<u64>()
    });
    if retransmittable {
        high.tail_probe().unwrap();
        high.linger(Duration::from_millis(300), Duration::from_secs(30))
            .unwrap();
    }
    common::interrupt(&t, libc::SIGTERM);
    // SIGTERM: what the sockets hold is applied, then the final counters.
    let out = t.wait_with_output().unwrap();
    common::assert_success(&out);
    let st: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    eprintln!(
        "{translator_cfg:?} retransmittable {retransmittable}: {sent_low} flood datagrams, \
         priority {} shed {} dropped {}",
        st["priority"], st["shed"], st["flow_control"]["dropped"]
    );
    assert!(
        st["priority"]["low"].as_u64().unwrap() > 0,
        "the flood reached the translator: {st}"
    );
    let c = dta_collector::Collector::open_dir(&dir.path().join("r"), false).unwrap();
    let region = c.store("high").unwrap().region.clone();
    let mut seen = vec![0u32; HIGH as usize];
    let mut tail = None;
    loop {
        let l =
            dta_collector::query::list(&region, 0, tail, 4096, dta_collector::query::raw_records)
                .unwrap();
        if l.entries.is_empty() {
            break;
        }
        for e in &l.entries {
            let v = u32::from_str_radix(e, 16).unwrap();
            seen[v as usize] += 1;
        }
        tail = Some(l.next_tail);
    }
    let missing: Vec<usize> = (0..HIGH as usize).filter(|&i| seen[i] == 0).collect();
    let twice: Vec<usize> = (0..HIGH as usize).filter(|&i| seen[i] > 1).collect();
    let rs = high.stats();
    assert_eq!(
        (
            rs.control_wrong_source,
            rs.control_unauthenticated,
            rs.control_bad_authenticator
        ),
        (0, 0, 0),
        "every control message came from the translator, authenticated as configured"
    );
    if key.is_some() {
        // The reporter said hello (again, once the translator was up) and what it obeyed was
        // bound to its life.
        assert!(rs.hellos >= 2, "{rs:?}");
        assert_eq!(rs.control_stale_life, 0, "{rs:?}");
        assert!(
            st["flow_control"]["hellos"]["accepted"].as_u64().unwrap() >= 1,
            "{st}"
        );
    }
    assert!(
        missing.is_empty() && twice.is_empty(),
        "high priority: {} of {HIGH} missing (first {:?}), {} applied twice; reporter {:?}; {st}",
        missing.len(),
        &missing[..missing.len().min(10)],
        twice.len(),
        high.stats()
    );
}

#[test]
fn high_priority_survives_a_flood_behind_the_classifier() {
    run("classifier = true", false);
}

#[test]
fn retransmittable_high_priority_survives_a_flood_behind_the_classifier() {
    run("classifier = true", true);
}

#[test]
fn retransmittable_high_priority_survives_a_flood_with_authenticated_nacks() {
    run_with(
        "classifier = true",
        true,
        Some("0f1e2d3c4b5a69788796a5b4c3d2e1f0"),
    );
}

#[test]
fn high_priority_survives_a_flood_without_the_classifier() {
    run("classifier = false", false);
}

#[test]
fn high_priority_survives_a_flood_on_two_threads() {
    run("classifier = false\nthreads = 2", false);
}
