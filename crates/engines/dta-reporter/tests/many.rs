//! `loadgen::run_many`: many simulated reporters from one socket send their datagrams round by
//! round with the run's keys, resend the datagram a NACK names from their retransmission ring,
//! and tail-probe their newest datagram.

use std::collections::HashMap;
use std::net::UdpSocket;
use std::time::Duration;

use dta_reporter::loadgen::{self, expected_counter, key_indices, key_vec, KeyDist, LoadSpec};
use dta_wire::native::{self, NackRepr};
use dta_wire::{Opcode, Priority, Report};

const REPORTERS: u32 = 50;
const IN_FLIGHT: u32 = 4;
const FIRST_ID: u32 = 1000;

fn nack(reporter_id: u32, seq: u32, missing: u64) -> Vec<u8> {
    let n = NackRepr {
        missing,
        ..NackRepr::new(reporter_id, seq)
    };
    let mut b = vec![0u8; n.buffer_len()];
    n.emit(&mut b).unwrap();
    b
}

#[test]
fn many_reporters_send_round_robin_resend_on_nack_and_tail_probe() {
    // A buffer for the whole run, however far this thread falls behind the sender.
    let translator = dta_testkit::udp_receiver("127.0.0.1:0");
    translator
        .set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let to = translator.local_addr().unwrap();
    let nack_port = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut spec = LoadSpec::new(Opcode::KeyIncrement);
    spec.keys = KeyDist::Uniform { n: 100 };
    spec.seed = 5;
    // How long the run waits for NACKs after its last datagram: the NACK below is sent when
    // this thread reads reporter 7's datagram 2, which a loaded machine can delay by far more
    // than the sending takes.
    spec.linger = Duration::from_secs(2);
    let many = loadgen::ManySpec {
        reporters: REPORTERS,
        first_id: FIRST_ID,
        in_flight: 256,
        datagrams: IN_FLIGHT,
        priority: Priority::High,
        nack_port,
        tail_probes: 1,
        tail_probe_interval: Duration::from_millis(5),
    };
    let (s, m) = (spec.clone(), many.clone());
    let run = std::thread::spawn(move || loadgen::run_many(&s, &m, to, &|_| {}).unwrap());

    let mut got: Vec<(u32, u32, Vec<u8>, u64)> = vec![];
    let mut nacked = false;
    let mut buf = [0u8; 2048];
    // Until the run has ended (every datagram it sent is in the buffer by then) and a read
    // after that finds the buffer empty.
    let mut ended = false;
    loop {
        let n = match translator.recv(&mut buf) {
            Ok(n) => n,
            Err(_) if ended => break,
            Err(_) => {
                ended = run.is_finished();
                continue;
            }
        };
        let d = native::Datagram::parse(&buf[..n]).unwrap();
        assert_eq!(d.header.priority, Priority::High);
        assert!(d.header.retransmittable);
        let reports: Vec<Report> = d.reports().collect();
        assert_eq!(reports.len(), 1, "one report per datagram");
        let Report::KeyIncrement { key, counter, .. } = reports[0] else {
            panic!("{:?}", reports[0]);
        };
        got.push((d.header.reporter_id, d.header.seq, key.to_vec(), counter));
        // Once reporter 7 has sent datagram 2, NACK its datagram 0 and, in the bitmap, 2 (not
        // 1); and one NACK for a reporter the run does not simulate (ignored).
        if !nacked && d.header.reporter_id == FIRST_ID + 7 && d.header.seq == 2 {
            nacked = true;
            // From the translator's address: the reporters take control messages from it only.
            let s = &translator;
            s.send_to(&nack(FIRST_ID + 7, 0, 0b10), ("127.0.0.1", nack_port))
                .unwrap();
            s.send_to(&nack(FIRST_ID + REPORTERS, 0, 0), ("127.0.0.1", nack_port))
                .unwrap();
        }
    }
    let stats = run.join().unwrap();
    let total = (REPORTERS * IN_FLIGHT) as usize;
    assert_eq!(stats.reports, total as u64);
    assert_eq!(stats.datagrams, total as u64);
    assert_eq!(stats.nacks, 1, "the foreign NACK is not counted");
    // Two resends on the NACK, one tail probe per reporter.
    assert_eq!(stats.retransmissions, 2 + REPORTERS as u64);
    assert_eq!(got.len(), total + 2 + REPORTERS as usize);

    // First transmissions (the first copy of each datagram; a resend on the NACK may arrive
    // before the last round is sent): round by round, every reporter in turn, keys in draw
    // order.
    let mut seen = std::collections::HashSet::new();
    let first: Vec<_> = got
        .iter()
        .filter(|(id, seq, _, _)| seen.insert((*id, *seq)))
        .collect();
    assert_eq!(first.len(), total);
    let keys: Vec<u64> = key_indices(&spec).unwrap().take(total).collect();
    for (i, (id, seq, key, counter)) in first.into_iter().enumerate() {
        assert_eq!(*seq, i as u32 / REPORTERS, "datagram {i}");
        assert_eq!(*id, FIRST_ID + i as u32 % REPORTERS, "datagram {i}");
        assert_eq!(*key, key_vec(keys[i], 4));
        assert_eq!(*counter, expected_counter(key));
    }
    // Resends are byte-for-byte copies: the NACKed one and every reporter's newest.
    let mut copies: HashMap<(u32, u32), usize> = HashMap::new();
    for (id, seq, _, _) in &got {
        *copies.entry((*id, *seq)).or_default() += 1;
    }
    assert_eq!(copies[&(FIRST_ID + 7, 0)], 2);
    assert_eq!(copies[&(FIRST_ID + 7, 1)], 1, "not named by the NACK");
    assert_eq!(copies[&(FIRST_ID + 7, 2)], 2);
    for r in 0..REPORTERS {
        assert_eq!(
            copies[&(FIRST_ID + r, IN_FLIGHT - 1)],
            2,
            "tail probe of {r}"
        );
    }
    // Every copy carries what the first transmission carried.
    let mut first: HashMap<(u32, u32), &Vec<u8>> = HashMap::new();
    for (id, seq, key, _) in &got {
        assert_eq!(*first.entry((*id, *seq)).or_insert(key), key);
    }
}

#[test]
fn many_refuses_what_it_cannot_simulate() {
    let to = "127.0.0.1:9".parse().unwrap();
    let spec = LoadSpec::new(Opcode::Postcarding);
    let many = loadgen::ManySpec {
        reporters: 2,
        first_id: 0,
        in_flight: 2,
        datagrams: 2,
        priority: Priority::High,
        nack_port: 0,
        tail_probes: 0,
        tail_probe_interval: Duration::ZERO,
    };
    let e = loadgen::run_many(&spec, &many, to, &|_| {}).unwrap_err();
    assert!(e.to_string().contains("Key-Write"), "{e}");
    let spec = LoadSpec::new(Opcode::KeyIncrement);
    for (reporters, in_flight, datagrams) in [
        (0, 1, 1),
        (1, 0, 1),
        (1, loadgen::MAX_IN_FLIGHT + 1, 1),
        (1, 1, 0),
    ] {
        let m = loadgen::ManySpec {
            reporters,
            in_flight,
            datagrams,
            ..many.clone()
        };
        assert!(loadgen::run_many(&spec, &m, to, &|_| {}).is_err());
    }
}
