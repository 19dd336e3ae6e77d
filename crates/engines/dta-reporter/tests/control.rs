//! Control messages (NACKs, congestion notices) are obeyed only from the translator the reporter
//! sends to, and, with a control key, only with a valid authenticator whose counter was not
//! seen before, bound to the life the reporter announced in its hello (docs/security.md).
//! Everything else changes nothing and is counted by reason.

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

/// `msg` sealed for the reporter's life `life`, as a translator that heard its hello seals.
fn bound(msg: &[u8], key: &ControlKey, counter: u64, life: u64) -> Vec<u8> {
    let mut b = vec![0u8; 64];
    b[..msg.len()].copy_from_slice(msg);
    let n = auth::seal_bound(&mut b, msg.len(), key, counter, life);
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
    let life = r.life().expect("a keyed native reporter announces a life");
    // Unauthenticated, even from the translator's address (a spoofed source).
    deliver(&mut r, &translator, &pause());
    assert_eq!(r.stats().control_unauthenticated, 1);
    // Another key.
    let other = ControlKey::new([7; 16]);
    deliver(&mut r, &translator, &bound(&pause(), &other, 10, life));
    assert_eq!(r.stats().control_bad_authenticator, 1);
    // Tampered.
    let mut t = bound(&pause(), &key, 11, life);
    t[13] ^= 0x01;
    deliver(&mut r, &translator, &t);
    assert_eq!(r.stats().control_bad_authenticator, 2);
    assert_eq!(r.stats().notices, 0);
    assert!(sends(&mut r));
    // The real one: obeyed; again (a replay): not.
    let good = bound(&pause(), &key, 12, life);
    deliver(&mut r, &translator, &good);
    assert_eq!(r.stats().notices, 1);
    assert!(!sends(&mut r));
    deliver(&mut r, &translator, &good);
    assert_eq!(r.stats().control_replayed, 1);
    assert_eq!(r.stats().notices, 1);
    // Out of order within the window is fine (the translator's threads share one counter);
    // far behind is a replay.
    deliver(&mut r, &translator, &bound(&pause(), &key, 100, life));
    deliver(&mut r, &translator, &bound(&pause(), &key, 99, life));
    assert_eq!(r.stats().notices, 3);
    deliver(&mut r, &translator, &bound(&pause(), &key, 30, life));
    assert_eq!(r.stats().control_replayed, 2);
}

/// Messages recorded from a keyed translator and replayed to a reporter started afterwards with
/// the same id and key are not obeyed: they are bound to the earlier reporter's life (or to
/// none), and the new one says hello again when it sees one bound to none.
#[test]
fn a_new_reporter_obeys_nothing_recorded_in_an_earlier_life() {
    let key = ControlKey::from_hex("00112233445566778899aabbccddeeff").unwrap();
    let translator = UdpSocket::bind("127.0.0.1:0").unwrap();
    translator
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let first = reporter(translator.local_addr().unwrap(), Some(key.clone()));
    let old_life = first.life().unwrap();
    // The translator hears the first reporter's hello: sealed, with its life.
    let mut b = [0u8; 64];
    let n = translator.recv(&mut b).unwrap();
    let mut plain = [0u8; 64];
    let o = auth::open(&b[..n], &key, None, None, &mut plain).unwrap();
    let hello = dta_wire::native::HelloRepr::parse(&plain[..o.len]).unwrap();
    assert_eq!((hello.reporter_id, hello.life), (1, old_life));
    assert_eq!(first.stats().hellos, 1);
    let recorded = [
        bound(&pause(), &key, 1_000, old_life),
        bound(&pause(), &key, 1_001, old_life),
        sealed(&pause(), &key, 1_002),
    ];
    drop(first);

    let mut r = reporter(translator.local_addr().unwrap(), Some(key.clone()));
    assert_ne!(r.life(), Some(old_life), "a life is drawn anew");
    translator.recv(&mut b).unwrap();
    for m in &recorded[..2] {
        deliver(&mut r, &translator, m);
    }
    assert_eq!(r.stats().control_stale_life, 2);
    // A message bound to no life makes it say hello again (at most every 100 ms).
    std::thread::sleep(Duration::from_millis(150));
    deliver(&mut r, &translator, &recorded[2]);
    assert_eq!(r.stats().control_unbound, 1);
    assert_eq!(r.stats().notices, 0);
    assert_eq!(r.stats().hellos, 2);
    let n = translator.recv(&mut b).unwrap();
    assert!(auth::is_sealed(&b[..n]));
    assert_eq!(b[0] & 0x0f, dta_wire::native::Kind::Hello as u8);
    assert!(sends(&mut r), "nothing recorded paused the new reporter");
}

/// Without a key nothing is announced: no life, no hello.
#[test]
fn an_unkeyed_reporter_says_no_hello() {
    let translator = UdpSocket::bind("127.0.0.1:0").unwrap();
    let r = reporter(translator.local_addr().unwrap(), None);
    assert_eq!((r.life(), r.stats().hellos), (None, 0));
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
