//! Control messages (NACKs, congestion notices) are obeyed only from the translator the reporter
//! sends to, and, with a control key, only with a valid authenticator whose counter was not
//! seen before (docs/security.md). Everything else changes nothing and is counted by reason.

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use dta_reporter::{Protocol, Reporter, ReporterConfig};
use dta_wire::auth::{self, ControlKey};
use dta_wire::native::NoticeRepr;
use dta_wire::{Priority, Report};

/// A congestion notice pausing reporter 1's low priority for a minute.
fn pause() -> Vec<u8> {
    let mut b = vec![0u8; 64];
    let n = NoticeRepr {
        reporter_id: 1,
        hold_ms: 60_000,
        low_rate: 0,
        medium_rate: 0,
    }
    .emit(&mut b)
    .unwrap();
    b.truncate(n);
    b
}

fn sealed(msg: &[u8], key: &ControlKey, counter: u64) -> Vec<u8> {
    let mut b = vec![0u8; 64];
    b[..msg.len()].copy_from_slice(msg);
    let n = auth::seal(&mut b, msg.len(), key, counter);
    b.truncate(n);
    b
}

/// A reporter sending low priority to `translator`, its NACK socket on an ephemeral port.
fn reporter(translator: SocketAddr, key: Option<ControlKey>) -> Reporter {
    let mut cfg = ReporterConfig::new(translator, Protocol::Native { reporter_id: 1 });
    cfg.priority = Priority::Low;
    cfg.nack_port = Some(0);
    cfg.max_reports_per_datagram = 1;
    cfg.control_key = key;
    Reporter::new(cfg).unwrap()
}

/// Deliver `msg` from `from` to the reporter's NACK socket and let it handle what arrived.
fn deliver(r: &mut Reporter, from: &UdpSocket, msg: &[u8]) {
    from.send_to(msg, r.nack_addr().unwrap()).unwrap();
    assert_eq!(r.wait_nack(Duration::from_secs(5)).unwrap(), 1);
}

/// Whether low priority still goes out (a report is sent, not suppressed).
fn sends(r: &mut Reporter) -> bool {
    let before = r.stats().suppressed;
    r.report(&Report::KeyWrite {
        key: &[1, 2, 3, 4],
        data: &[5, 6, 7, 8],
        redundancy: 1,
        immediate: false,
    })
    .unwrap();
    r.flush().unwrap();
    r.stats().suppressed == before
}

#[test]
fn only_the_translator_is_obeyed() {
    let translator = UdpSocket::bind("127.0.0.1:0").unwrap();
    let forger = UdpSocket::bind("127.0.0.9:0").unwrap();
    let mut r = reporter(translator.local_addr().unwrap(), None);
    // From another address: nothing changes, counted.
    deliver(&mut r, &forger, &pause());
    assert_eq!(r.stats().control_wrong_source, 1);
    assert_eq!(r.stats().notices, 0);
    assert!(sends(&mut r));
    // From the translator's own port on another address, or another port of its address:
    // not the translator either.
    let same_ip = UdpSocket::bind("127.0.0.1:0").unwrap();
    deliver(&mut r, &same_ip, &pause());
    assert_eq!(r.stats().control_wrong_source, 2);
    assert!(sends(&mut r));
    // From the translator: obeyed.
    deliver(&mut r, &translator, &pause());
    assert_eq!(r.stats().notices, 1);
    assert!(!sends(&mut r), "the notice pauses low priority");
}

#[test]
fn with_a_key_only_authenticated_fresh_messages_are_obeyed() {
    let key = ControlKey::from_hex("00112233445566778899aabbccddeeff").unwrap();
    let translator = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut r = reporter(translator.local_addr().unwrap(), Some(key.clone()));
    // Unauthenticated, even from the translator's address (a spoofed source).
    deliver(&mut r, &translator, &pause());
    assert_eq!(r.stats().control_unauthenticated, 1);
    // Another key.
    let other = ControlKey::new([7; 16]);
    deliver(&mut r, &translator, &sealed(&pause(), &other, 10));
    assert_eq!(r.stats().control_bad_authenticator, 1);
    // Tampered.
    let mut t = sealed(&pause(), &key, 11);
    t[13] ^= 0x01;
    deliver(&mut r, &translator, &t);
    assert_eq!(r.stats().control_bad_authenticator, 2);
    assert_eq!(r.stats().notices, 0);
    assert!(sends(&mut r));
    // The real one: obeyed; again (a replay): not.
    let good = sealed(&pause(), &key, 12);
    deliver(&mut r, &translator, &good);
    assert_eq!(r.stats().notices, 1);
    assert!(!sends(&mut r));
    deliver(&mut r, &translator, &good);
    assert_eq!(r.stats().control_replayed, 1);
    assert_eq!(r.stats().notices, 1);
    // Out of order within the window is fine (the translator's threads share one counter);
    // far behind is a replay.
    deliver(&mut r, &translator, &sealed(&pause(), &key, 100));
    deliver(&mut r, &translator, &sealed(&pause(), &key, 99));
    assert_eq!(r.stats().notices, 3);
    deliver(&mut r, &translator, &sealed(&pause(), &key, 30));
    assert_eq!(r.stats().control_replayed, 2);
}

#[test]
fn without_a_key_a_signed_message_is_still_understood() {
    let key = ControlKey::new([3; 16]);
    let translator = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut r = reporter(translator.local_addr().unwrap(), None);
    deliver(&mut r, &translator, &sealed(&pause(), &key, 1));
    assert_eq!(r.stats().notices, 1);
    assert_eq!(r.stats().bad_nacks, 0);
}
