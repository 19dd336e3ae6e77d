//! What the translator sends reporters: authenticated with the control key when one is set
//! (every NACK and notice opens with the key, in order of its counter), and NACKs within the
//! budget shared by the translator's threads (the rest counted `nacks_over_budget`).

mod common;

use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use dta_translator::control::{ControlAuth, NackBudget};
use dta_wire::auth::{self, ControlKey};
use dta_wire::native::{DatagramBuilder, NackRepr};
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
    let (n, counter) = auth::open(nacks[0].bytes(), &key, None, &mut plain).unwrap();
    let nack = NackRepr::parse(&plain[..n]).unwrap();
    assert_eq!((nack.reporter_id, nack.seq), (5, 1));
    // Another key does not open it.
    assert!(auth::open(
        nacks[0].bytes(),
        &ControlKey::new([1; 16]),
        None,
        &mut plain
    )
    .is_err());
    // The next message carries a higher counter.
    t.handle_datagram(&datagram(6, 0), common::src(), now);
    t.handle_datagram(&datagram(6, 3), common::src(), now);
    let next: Vec<_> = t.drain_nacks().collect();
    let (_, c2) = auth::open(next[0].bytes(), &key, Some(counter), &mut plain).unwrap();
    assert!(c2 > counter);
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
