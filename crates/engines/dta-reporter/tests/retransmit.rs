//! NACK-driven retransmission: a native NACK makes the reporter resend exactly the datagrams it
//! names (its `seq` and bitmap), byte for byte, once per hold-off; a prototype NACK resends from
//! its seqnum on (go-back-N). The tail probe recovers a lost last datagram; congestion notices
//! pause and lift a priority.

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use common::{config, recv};
use dta_reporter::{Protocol, Reporter};
use dta_wire::native::{NackRepr, NoticeRepr, SketchNack, RATE_UNLIMITED};
use dta_wire::prototype::{self, BaseFormat};
use dta_wire::Priority;

struct Rig {
    rx: UdpSocket,
    reporter: Reporter,
    nack_to: SocketAddr,
}

fn rig(protocol: Protocol, ring: usize) -> Rig {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut cfg = config(rx.local_addr().unwrap(), protocol);
    cfg.retransmittable = true;
    cfg.max_reports_per_datagram = 1;
    cfg.retransmit_buffer = ring;
    let reporter = Reporter::new(cfg).unwrap();
    let port = reporter.nack_addr().unwrap().port();
    Rig {
        rx,
        reporter,
        nack_to: SocketAddr::from(([127, 0, 0, 1], port)),
    }
}

fn native_nack(rx: &UdpSocket, to: SocketAddr, reporter_id: u32, seq: u32) {
    native_nack_bitmap(rx, to, reporter_id, seq, 0);
}

fn native_nack_bitmap(rx: &UdpSocket, to: SocketAddr, reporter_id: u32, seq: u32, missing: u64) {
    let mut b = [0u8; 32];
    let n = NackRepr {
        missing,
        ..NackRepr::new(reporter_id, seq)
    }
    .emit(&mut b)
    .unwrap();
    rx.send_to(&b[..n], to).unwrap();
}

/// Receive until 150 ms pass without a datagram.
fn drain(rx: &UdpSocket) -> Vec<Vec<u8>> {
    rx.set_read_timeout(Some(Duration::from_millis(150)))
        .unwrap();
    let mut out = vec![];
    let mut b = [0u8; 2048];
    while let Ok(n) = rx.recv(&mut b) {
        out.push(b[..n].to_vec());
    }
    out
}

#[test]
fn native_nack_resends_exactly_the_missing_datagrams() {
    let mut t = rig(Protocol::Native { reporter_id: 5 }, 64);
    let mut sent = vec![];
    for i in 0..10u32 {
        t.reporter
            .key_write(&i.to_be_bytes(), &[i as u8; 8], 1, false)
            .unwrap();
        sent.push(recv(&t.rx).unwrap());
    }
    assert_eq!(t.reporter.next_seq(), 10);
    // The translator lost datagrams 3, 5 and 8: it names 3, with bits 1 (5) and 4 (8).
    native_nack_bitmap(&t.rx, t.nack_to, 5, 3, 0b10010);
    assert_eq!(t.reporter.wait_nack(Duration::from_secs(2)).unwrap(), 1);
    let resent = drain(&t.rx);
    assert_eq!(
        resent,
        vec![sent[3].clone(), sent[5].clone(), sent[8].clone()]
    );
    let st = t.reporter.stats();
    assert_eq!(st.retransmissions, 3);
    assert_eq!(st.nacks, 1);
    assert_eq!(st.datagrams, 10, "retransmissions are not new datagrams");

    // A repeat of the same NACK within the hold-off is ignored; after it, honoured again.
    native_nack(&t.rx, t.nack_to, 5, 8);
    native_nack(&t.rx, t.nack_to, 5, 8);
    std::thread::sleep(Duration::from_millis(5));
    t.reporter.poll_nacks().unwrap();
    assert_eq!(drain(&t.rx), vec![sent[8].clone()]);
    assert_eq!(t.reporter.stats().nacks_held_off, 1);
    std::thread::sleep(Duration::from_millis(15));
    native_nack(&t.rx, t.nack_to, 5, 8);
    assert_eq!(t.reporter.wait_nack(Duration::from_secs(2)).unwrap(), 1);
    assert_eq!(drain(&t.rx), vec![sent[8].clone()]);

    // Expecting the next, unsent datagram: nothing is missing.
    native_nack(&t.rx, t.nack_to, 5, 10);
    // Another reporter's NACK, and garbage: ignored.
    native_nack(&t.rx, t.nack_to, 6, 0);
    t.rx.send_to(&[0xFF, 0, 1], t.nack_to).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(t.reporter.poll_nacks().unwrap(), 3);
    assert!(drain(&t.rx).is_empty());
    assert_eq!(t.reporter.stats().bad_nacks, 2);
}

#[test]
fn nack_older_than_the_ring_is_unrecoverable() {
    let mut t = rig(Protocol::Native { reporter_id: 1 }, 4);
    for i in 0..10u32 {
        t.reporter.append(0, &i.to_be_bytes(), false).unwrap();
        recv(&t.rx).unwrap();
    }
    native_nack(&t.rx, t.nack_to, 1, 5); // only 6..9 are kept
    t.reporter.wait_nack(Duration::from_secs(2)).unwrap();
    assert!(drain(&t.rx).is_empty());
    assert_eq!(t.reporter.stats().unrecoverable_nacks, 1);
    native_nack_bitmap(&t.rx, t.nack_to, 1, 4, 0b1111); // 4, then 5..8: 4 and 5 gone
    t.reporter.wait_nack(Duration::from_secs(2)).unwrap();
    assert_eq!(drain(&t.rx).len(), 3, "6, 7, 8: the bitmap names no 9");
    assert_eq!(t.reporter.stats().unrecoverable_nacks, 3);
}

#[test]
fn prototype_nack_resends_across_the_u8_wrap() {
    let mut t = rig(Protocol::Prototype(BaseFormat::Long), 128);
    let mut sent = vec![];
    for i in 0..260u32 {
        t.reporter.append(2, &i.to_be_bytes(), false).unwrap();
        sent.push(recv(&t.rx).unwrap());
    }
    // Datagram 254 (seqnum 254) was lost; seqnums 255, 0, 1, 2, 3 followed.
    let mut b = [0u8; 2];
    prototype::NackRepr {
        seqnum: 254,
        nack: true,
    }
    .emit(&mut b)
    .unwrap();
    t.rx.send_to(&b, t.nack_to).unwrap();
    t.reporter.wait_nack(Duration::from_secs(2)).unwrap();
    let resent = drain(&t.rx);
    assert_eq!(resent, sent[254..].to_vec());
    assert_eq!(resent[2][1], 0, "seqnum wrapped to 0");
    // N bit clear: not a NACK.
    t.rx.send_to(&[3, 0], t.nack_to).unwrap();
    t.reporter.wait_nack(Duration::from_secs(2)).unwrap();
    assert!(drain(&t.rx).is_empty());
}

#[test]
fn nacks_are_polled_while_sending() {
    let mut t = rig(Protocol::Native { reporter_id: 9 }, 256);
    for i in 0..10u32 {
        t.reporter.append(0, &i.to_be_bytes(), false).unwrap();
    }
    native_nack_bitmap(&t.rx, t.nack_to, 9, 2, 0b101);
    std::thread::sleep(Duration::from_millis(20));
    // No explicit poll: the reporter looks at its NACK socket every 64 datagrams.
    for i in 10..100u32 {
        t.reporter.append(0, &i.to_be_bytes(), false).unwrap();
    }
    assert_eq!(t.reporter.stats().nacks, 1);
    // 2, 3 and 5 resent when datagram 63 went out (the 64th).
    assert_eq!(t.reporter.stats().retransmissions, 3);
}

#[test]
fn sketch_nacks_are_kept_for_the_sketch_sender() {
    let mut t = rig(Protocol::Native { reporter_id: 4 }, 16);
    t.reporter.append(0, &[0; 4], false).unwrap();
    let mut b = [0u8; 32];
    let s = SketchNack {
        sketch_id: 2,
        column: 17,
        epoch: 3,
    };
    let n = NackRepr {
        reporter_id: 4,
        seq: 0,
        sketch: Some(s),
        missing: 0,
    }
    .emit(&mut b)
    .unwrap();
    t.rx.send_to(&b[..n], t.nack_to).unwrap();
    assert_eq!(t.reporter.wait_nack(Duration::from_secs(2)).unwrap(), 1);
    assert_eq!(t.reporter.take_sketch_nack(), Some(s));
    assert_eq!(t.reporter.take_sketch_nack(), None);
    // A sketch NACK names a column, not datagrams: nothing resent.
    assert_eq!(t.reporter.stats().retransmissions, 0);
}

#[test]
fn tail_probe_recovers_a_lost_last_datagram() {
    let mut t = rig(Protocol::Native { reporter_id: 3 }, 16);
    let mut sent = vec![];
    for i in 0..5u32 {
        t.reporter.append(0, &i.to_be_bytes(), false).unwrap();
        sent.push(recv(&t.rx).unwrap());
    }
    // The path lost the last datagram: the receiver discarded it above. No gap follows it,
    // so no NACK could name it; the tail probe resends it (twice, 10 ms apart).
    let t0 = std::time::Instant::now();
    assert_eq!(t.reporter.tail_probe().unwrap(), 2);
    assert!(t0.elapsed() >= Duration::from_millis(20));
    assert_eq!(drain(&t.rx), vec![sent[4].clone(), sent[4].clone()]);
    let st = t.reporter.stats();
    assert_eq!(
        (st.tail_probes, st.datagrams, st.retransmissions),
        (2, 5, 0)
    );

    // A NACK arriving during the probe is answered within it.
    native_nack(&t.rx, t.nack_to, 3, 1);
    t.reporter.tail_probe().unwrap();
    assert_eq!(
        drain(&t.rx),
        vec![sent[1].clone(), sent[4].clone(), sent[4].clone()]
    );
    let st = t.reporter.close().unwrap();
    assert_eq!(
        (st.tail_probes, st.retransmissions),
        (6, 1),
        "close probes too"
    );
}

#[test]
fn a_reporter_that_is_not_retransmittable_does_not_probe() {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut r = Reporter::new(config(
        rx.local_addr().unwrap(),
        Protocol::Native { reporter_id: 1 },
    ))
    .unwrap();
    r.append(0, &[1; 4], false).unwrap();
    assert_eq!(r.tail_probe().unwrap(), 0, "flushed, not probed");
    assert_eq!(drain(&rx).len(), 1);
}

fn notice(rx: &UdpSocket, to: SocketAddr, n: NoticeRepr) {
    let mut b = [0u8; 32];
    let len = n.emit(&mut b).unwrap();
    rx.send_to(&b[..len], to).unwrap();
}

#[test]
fn a_notice_pauses_low_priority_then_is_lifted() {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut cfg = config(
        rx.local_addr().unwrap(),
        Protocol::Native { reporter_id: 8 },
    );
    cfg.priority = Priority::Low;
    cfg.max_reports_per_datagram = 1;
    let mut r = Reporter::new(cfg).unwrap();
    let to = SocketAddr::from(([127, 0, 0, 1], r.nack_addr().unwrap().port()));
    r.append(0, &[0; 4], false).unwrap();
    assert_eq!(drain(&rx).len(), 1);
    let pause = NoticeRepr {
        reporter_id: 8,
        hold_ms: 60_000,
        low_rate: 0,
        medium_rate: RATE_UNLIMITED,
    };
    notice(&rx, to, pause);
    assert_eq!(r.wait_nack(Duration::from_secs(2)).unwrap(), 1);
    // Paused: nothing goes out, nothing blocks, no sequence number is used.
    let t0 = std::time::Instant::now();
    for i in 0..100u32 {
        r.append(0, &i.to_be_bytes(), false).unwrap();
    }
    // Far below the 60 s hold a blocking reporter would wait, far above what a loaded machine
    // takes for 100 suppressed appends.
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    assert!(drain(&rx).is_empty());
    let st = r.stats();
    assert_eq!(
        (st.suppressed, st.suppressed_reports, st.notices),
        (100, 100, 1)
    );
    assert_eq!(r.next_seq(), 1);
    // Lifted (hold_ms 0): seen by the poll every 64 datagrams while still suppressed, then
    // sending resumes at the next number.
    notice(
        &rx,
        to,
        NoticeRepr {
            hold_ms: 0,
            ..pause
        },
    );
    std::thread::sleep(Duration::from_millis(20));
    for i in 0..64u32 {
        r.append(0, &i.to_be_bytes(), false).unwrap();
    }
    let after = r.stats().suppressed;
    assert!(
        after < 100 + 64,
        "the lifting notice was polled while suppressed"
    );
    r.append(0, &[9; 4], false).unwrap();
    let got = drain(&rx);
    assert_eq!(got.len() as u64, 100 + 64 + 1 - after);
    let last = got.last().unwrap();
    assert_eq!(
        u32::from_be_bytes(last[8..12].try_into().unwrap()),
        r.next_seq() - 1
    );
    assert_eq!(r.stats().notices, 2);
}
