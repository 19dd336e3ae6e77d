//! `spec/vectors/reporter.json`: the reporter plays every scripted scenario (sends, then the
//! translator's NACKs and congestion notices at given times) and sends exactly the datagrams
//! the vectors expect; its counters end as the vectors say. The C and Python reporters play
//! the same file (c/tests/test_reporter_vectors.py, python/tests/test_reporter_vectors.py).

mod common;

use std::net::UdpSocket;
use std::time::Duration;

use common::config;
use dta_reporter::{flow, Clock, Protocol, Reporter, ReporterStats};
use dta_wire::prototype::BaseFormat;
use dta_wire::Priority;
use serde_json::Value;

const VECTORS: &str = include_str!("../../../../spec/vectors/reporter.json");

fn priority(v: &Value) -> Priority {
    match v.as_str().unwrap() {
        "low" => Priority::Low,
        "medium" => Priority::Medium,
        "high" => Priority::High,
        p => panic!("priority {p}"),
    }
}

/// How long a receiver waits for the next datagram before concluding there is none.
const WAIT: Duration = Duration::from_millis(30);

/// Every datagram waiting on `rx` (waiting up to `wait` for each; zero: none), as its sequence
/// number (native: 32 bits; prototype long: the 8-bit seqnum).
fn seqs(rx: &UdpSocket, prototype: bool, wait: Duration) -> Vec<u64> {
    rx.set_nonblocking(wait.is_zero()).unwrap();
    if !wait.is_zero() {
        rx.set_read_timeout(Some(wait)).unwrap();
    }
    let mut out = vec![];
    let mut b = [0u8; 2048];
    while let Ok(n) = rx.recv(&mut b) {
        out.push(if prototype {
            u64::from(b[1])
        } else {
            u64::from(u32::from_be_bytes(b[8..12].try_into().unwrap()))
        });
        assert!(n >= 3);
    }
    out
}

fn ints(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect()
}

fn stat(s: &ReporterStats, name: &str) -> u64 {
    match name {
        "datagrams" => s.datagrams,
        "retransmissions" => s.retransmissions,
        "nacks" => s.nacks,
        "nacks_held_off" => s.nacks_held_off,
        "unrecoverable_nacks" => s.unrecoverable_nacks,
        "notices" => s.notices,
        "nack_slowdowns" => s.nack_slowdowns,
        "suppressed" => s.suppressed,
        "bad_nacks" => s.bad_nacks,
        n => panic!("the vectors name a counter the reporter lacks: {n}"),
    }
}

fn play(sc: &Value) {
    let name = sc["name"].as_str().unwrap();
    let r = &sc["reporter"];
    let prototype = r["protocol"] == "prototype";
    let protocol = if prototype {
        Protocol::Prototype(BaseFormat::Long)
    } else {
        Protocol::Native {
            reporter_id: r["reporter_id"].as_u64().unwrap() as u32,
        }
    };
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut cfg = config(rx.local_addr().unwrap(), protocol);
    cfg.priority = priority(&r["priority"]);
    cfg.retransmittable = r["retransmittable"].as_bool().unwrap();
    cfg.retransmit_buffer = r["retransmit_buffer"].as_u64().unwrap() as usize;
    cfg.max_reports_per_datagram = 1;
    cfg.nack_port = None;
    let clock = Clock::manual();
    cfg.clock = clock.clone();
    let mut rep = Reporter::new(cfg).unwrap();
    for (i, step) in sc["steps"].as_array().unwrap().iter().enumerate() {
        clock.set(step["t_ms"].as_u64().unwrap());
        if let Some(n) = step["send"].as_u64() {
            let mut sent = vec![];
            for k in 0..n {
                rep.append(1, &(k as u32).to_be_bytes(), false).unwrap();
                // Drained as they go: a few hundred datagrams would overrun the socket buffer.
                sent.extend(seqs(&rx, prototype, Duration::ZERO));
            }
            sent.extend(seqs(&rx, prototype, WAIT));
            assert_eq!(sent, ints(&step["sent"]), "{name} step {i}: sent");
        } else {
            let hex = step["receive"].as_str().unwrap();
            let bytes: Vec<u8> = (0..hex.len())
                .step_by(2)
                .map(|j| u8::from_str_radix(&hex[j..j + 2], 16).unwrap())
                .collect();
            rep.handle_control(&bytes).unwrap();
            assert_eq!(
                seqs(&rx, prototype, WAIT),
                ints(&step["resent"]),
                "{name} step {i}: resent"
            );
        }
    }
    let st = rep.stats();
    for (k, v) in sc["stats"].as_object().unwrap() {
        assert_eq!(stat(&st, k), v.as_u64().unwrap(), "{name}: counter {k}");
    }
}

#[test]
fn every_scenario_plays_as_the_vectors_say() {
    let doc: Value = serde_json::from_str(VECTORS).unwrap();
    let scenarios = doc["scenarios"].as_array().unwrap();
    assert!(scenarios.len() >= 7);
    for sc in scenarios {
        play(sc);
    }
}

#[test]
fn defaults_are_the_vectors_defaults() {
    let doc: Value = serde_json::from_str(VECTORS).unwrap();
    let d = &doc["defaults"];
    assert_eq!(priority(&d["priority"]), flow::DEFAULT_PRIORITY);
    assert_eq!(
        d["retransmit_buffer"].as_u64().unwrap() as usize,
        flow::DEFAULT_RETRANSMIT_BUFFER
    );
    assert_eq!(
        d["tail_probes"].as_u64().unwrap() as u32,
        flow::DEFAULT_TAIL_PROBES
    );
    assert_eq!(
        Duration::from_millis(d["tail_probe_interval_ms"].as_u64().unwrap()),
        flow::DEFAULT_TAIL_PROBE_INTERVAL
    );
    assert_eq!(
        Duration::from_millis(d["nack_holdoff_ms"].as_u64().unwrap()),
        flow::DEFAULT_NACK_HOLDOFF
    );
    // And the reporter's configuration starts from them.
    let cfg = dta_reporter::ReporterConfig::new(
        "127.0.0.1:40040".parse().unwrap(),
        Protocol::Native { reporter_id: 0 },
    );
    assert_eq!(cfg.priority, flow::DEFAULT_PRIORITY);
    assert_eq!(cfg.retransmit_buffer, flow::DEFAULT_RETRANSMIT_BUFFER);
    assert_eq!(cfg.tail_probes, flow::DEFAULT_TAIL_PROBES);
    assert_eq!(cfg.tail_probe_interval, flow::DEFAULT_TAIL_PROBE_INTERVAL);
    assert_eq!(cfg.nack_holdoff, flow::DEFAULT_NACK_HOLDOFF);
}
