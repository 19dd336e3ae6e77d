//! What the translator sends reporters: authenticated with the control key when one is set
//! (every NACK and notice opens with the key, in order of its counter, bound to the life the
//! reporter announced in its hello), and NACKs within the budget shared by the translator's
//! threads (the rest counted `nacks_over_budget`).

mod common;

use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use dta_translator::control::{ControlAuth, HelloOutcome, NackBudget};
use dta_wire::auth::{self, AuthError, ControlKey};
use dta_wire::native::{DatagramBuilder, HelloRepr, NackRepr};
use dta_wire::{Priority, Report};

fn datagram(reporter: u32, seq: u32) -> Vec<u8> {
    let mut buf = vec![0u8; 128];
    let mut b = DatagramBuilder::new(&mut buf, Priority::High, true, reporter, seq).unwrap();
    b.push(&Report::KeyIncrement {
        key: &[0, 0, 0, 1],
        counter: 1,
        redundancy: 2,
        immediate: false,
    })
    .unwrap();
    let n = b.finish();
    buf.truncate(n);
    buf
}

#[test]
fn nacks_are_authenticated_with_the_control_key() {
    let dir = tempfile::tempdir().unwrap();
    let regions = common::regions(dir.path());
    let mut t = common::translator(&regions);
    let key = ControlKey::new([0x42; 16]);
    t.set_control_auth(ControlAuth::new(key.clone()));
    let now = Instant::now();
    t.handle_datagram(&datagram(5, 0), common::src(), now);
    t.handle_datagram(&datagram(5, 2), common::src(), now);
    let nacks: Vec<_> = t.drain_nacks().collect();
    assert_eq!(nacks.len(), 1);
    let mut plain = [0u8; 64];
    let o = auth::open(nacks[0].bytes(), &key, None, None, &mut plain).unwrap();
    let nack = NackRepr::parse(&plain[..o.len]).unwrap();
    assert_eq!((nack.reporter_id, nack.seq), (5, 1));
    // Another key does not open it.
    assert!(auth::open(
        nacks[0].bytes(),
        &ControlKey::new([1; 16]),
        None,
        None,
        &mut plain
    )
    .is_err());
    // The next message carries a higher counter.
    t.handle_datagram(&datagram(6, 0), common::src(), now);
    t.handle_datagram(&datagram(6, 3), common::src(), now);
    let next: Vec<_> = t.drain_nacks().collect();
    let c2 = auth::open(next[0].bytes(), &key, None, Some(o.counter), &mut plain)
        .unwrap()
        .counter;
    assert!(c2 > o.counter);
}

fn hello(key: &ControlKey, reporter_id: u32, life: u64, counter: u64) -> Vec<u8> {
    let mut b = [0u8; 64];
    let n = HelloRepr { reporter_id, life }.emit(&mut b).unwrap();
    let n = auth::seal(&mut b, n, key, counter);
    b[..n].to_vec()
}

/// A hello arriving on the translator's port binds what is sent to that reporter to its life:
/// a reporter started later (another life) opens none of it.
#[test]
fn nacks_are_bound_to_the_life_of_the_reporters_hello() {
    let dir = tempfile::tempdir().unwrap();
    let regions = common::regions(dir.path());
    let mut t = common::translator(&regions);
    let key = ControlKey::new([0x42; 16]);
    t.set_control_auth(ControlAuth::new(key.clone()));
    let now = Instant::now();
    t.handle_datagram(&hello(&key, 5, 0xa11ce, 1), common::src(), now);
    t.handle_datagram(
        &hello(&ControlKey::new([1; 16]), 5, 0xbad, 2),
        common::src(),
        now,
    );
    t.handle_datagram(&hello(&key, 5, 0xa11ce, 1), common::src(), now);
    t.handle_datagram(&datagram(5, 0), common::src(), now);
    t.handle_datagram(&datagram(5, 2), common::src(), now);
    let nacks: Vec<_> = t.drain_nacks().collect();
    let mut plain = [0u8; 64];
    let o = auth::open(nacks[0].bytes(), &key, Some(0xa11ce), None, &mut plain).unwrap();
    assert_eq!(o.life, Some(0xa11ce));
    assert_eq!(
        auth::open(nacks[0].bytes(), &key, Some(0xb0b), None, &mut plain),
        Err(AuthError::StaleLife)
    );
    let st = t.stats();
    let count = |o: HelloOutcome| st.hellos[o.index()].load(Relaxed);
    assert_eq!(count(HelloOutcome::Accepted), 1);
    assert_eq!(count(HelloOutcome::BadAuthenticator), 1);
    assert_eq!(count(HelloOutcome::Replayed), 1);
    // A hello is not a report datagram: no wire error, nothing applied.
    assert_eq!(st.total_rejected(), 0);

    // Without a key a hello is counted and changes nothing.
    let mut plain_t = common::translator(&regions);
    plain_t.handle_datagram(&hello(&key, 5, 1, 1), common::src(), now);
    assert_eq!(
        plain_t.stats().hellos[HelloOutcome::NoKey.index()].load(Relaxed),
        1
    );
}

#[test]
fn nacks_stay_within_the_shared_budget() {
    let dir = tempfile::tempdir().unwrap();
    let regions = common::regions(dir.path());
    let budget = NackBudget::new(100);
    let mut t = common::translator(&regions).with_nack_budget(budget);
    let now = Instant::now();
    // 1000 reporters each with a gap: 1000 NACKs owed at once.
    let mut sent = 0;
    for r in 0..1000 {
        t.handle_datagram(&datagram(100 + r, 0), common::src(), now);
        t.handle_datagram(&datagram(100 + r, 2), common::src(), now);
        sent += t.drain_nacks().count();
    }
    let st = t.stats();
    // A tenth of a second's worth at once.
    assert_eq!(sent, 10, "burst of the budget");
    assert_eq!(st.nacks_sent.load(Relaxed), 10);
    assert_eq!(st.nacks_over_budget.load(Relaxed), 990);
}
