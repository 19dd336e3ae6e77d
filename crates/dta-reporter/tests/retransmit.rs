//! NACK-driven retransmission: a NACK for sequence number s makes the reporter resend exactly
//! the datagrams s..newest (go-back-N), byte for byte, once per hold-off.

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use common::{config, recv};
use dta_reporter::{Protocol, Reporter};
use dta_wire::native::{NackRepr, SketchNack};
use dta_wire::prototype::{self, BaseFormat};

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
    let mut b = [0u8; 32];
    let n = NackRepr::new(reporter_id, seq).emit(&mut b).unwrap();
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
    // The translator lost datagram 3 and dropped 4..9 after the gap: it expects 3.
    native_nack(&t.rx, t.nack_to, 5, 3);
    let n = t
        .reporter
        .linger(Duration::from_millis(100), Duration::from_secs(2))
        .unwrap();
    assert_eq!(n, 1);
    let resent = drain(&t.rx);
    assert_eq!(resent, sent[3..].to_vec());
    let st = t.reporter.stats();
    assert_eq!(st.retransmissions, 7);
    assert_eq!(st.nacks, 1);
    assert_eq!(st.datagrams, 10, "retransmissions are not new datagrams");

    // A repeat of the same NACK within the hold-off is ignored; after it, honoured again.
    native_nack(&t.rx, t.nack_to, 5, 8);
    native_nack(&t.rx, t.nack_to, 5, 8);
    t.reporter
        .linger(Duration::from_millis(50), Duration::from_secs(1))
        .unwrap();
    assert_eq!(drain(&t.rx), sent[8..].to_vec());
    assert_eq!(t.reporter.stats().nacks_held_off, 1);
    std::thread::sleep(Duration::from_millis(15));
    native_nack(&t.rx, t.nack_to, 5, 8);
    t.reporter
        .linger(Duration::from_millis(50), Duration::from_secs(1))
        .unwrap();
    assert_eq!(drain(&t.rx), sent[8..].to_vec());

    // Expecting the next, unsent datagram: nothing is missing.
    native_nack(&t.rx, t.nack_to, 5, 10);
    // Another reporter's NACK, and garbage: ignored.
    native_nack(&t.rx, t.nack_to, 6, 0);
    t.rx.send_to(&[0xFF, 0, 1], t.nack_to).unwrap();
    t.reporter
        .linger(Duration::from_millis(50), Duration::from_secs(1))
        .unwrap();
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
    t.reporter
        .linger(Duration::from_millis(50), Duration::from_secs(1))
        .unwrap();
    assert!(drain(&t.rx).is_empty());
    assert_eq!(t.reporter.stats().unrecoverable_nacks, 1);
    native_nack(&t.rx, t.nack_to, 1, 6); // the oldest kept
    t.reporter
        .linger(Duration::from_millis(50), Duration::from_secs(1))
        .unwrap();
    assert_eq!(drain(&t.rx).len(), 4);
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
    t.reporter
        .linger(Duration::from_millis(100), Duration::from_secs(2))
        .unwrap();
    let resent = drain(&t.rx);
    assert_eq!(resent, sent[254..].to_vec());
    assert_eq!(resent[2][1], 0, "seqnum wrapped to 0");
    // N bit clear: not a NACK.
    t.rx.send_to(&[3, 0], t.nack_to).unwrap();
    t.reporter
        .linger(Duration::from_millis(50), Duration::from_secs(1))
        .unwrap();
    assert!(drain(&t.rx).is_empty());
}

#[test]
fn nacks_are_polled_while_sending() {
    let mut t = rig(Protocol::Native { reporter_id: 9 }, 256);
    for i in 0..10u32 {
        t.reporter.append(0, &i.to_be_bytes(), false).unwrap();
    }
    native_nack(&t.rx, t.nack_to, 9, 2);
    std::thread::sleep(Duration::from_millis(20));
    // No explicit poll: the reporter looks at its NACK socket every 64 datagrams.
    for i in 10..100u32 {
        t.reporter.append(0, &i.to_be_bytes(), false).unwrap();
    }
    assert_eq!(t.reporter.stats().nacks, 1);
    // 2..63 resent when datagram 63 went out (the 64th).
    assert_eq!(t.reporter.stats().retransmissions, 62);
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
    // A sketch NACK is not a go-back-N NACK: nothing resent.
    assert_eq!(t.reporter.stats().retransmissions, 0);
}
