//! Key-Increment ([DTA A.4]): a count-min in collector memory never underestimates, and its
//! error stays within the count-min bound on a Zipf-like workload.

use dta_store::{ApplyError, HashScheme, KeyIncrementLayout, KeyIncrementSpec, Region, StoreSpec};
use rand::{Rng, SeedableRng};

#[test]
fn never_underestimates_and_error_within_cm_bound() {
    let dir = tempfile::tempdir().unwrap();
    const M: u64 = 1 << 16;
    let spec = StoreSpec::KeyIncrement(KeyIncrementSpec {
        counters: M,
        key_len: 13,
        hash: HashScheme::Native,
        redundancy: 3,
        windows: 0,
        window_ms: 0,
    });
    let r = Region::create(&dir.path().join("ki"), "bytes", &spec, false).unwrap();
    let l = KeyIncrementLayout::new(r.header()).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(dta_testkit::test_seed(0x4b49));
    const KEYS: usize = 40_000;
    let keys: Vec<[u8; 13]> = (0..KEYS as u64)
        .map(|i| {
            let mut k = [0u8; 13];
            k[..8].copy_from_slice(&dta_store::hash::fmix64(i + 1).to_le_bytes());
            k
        })
        .collect();
    // Zipf(1)-like sizes, reported in several increments each, interleaved.
    let truth: Vec<u64> = (0..KEYS).map(|i| 2_000_000 / (i as u64 + 1)).collect();
    let total: u64 = truth.iter().sum();
    let n = 3u8;
    let mut left = truth.clone();
    let mut sink = r.mem().sink();
    let mut active: Vec<usize> = (0..KEYS).collect();
    while !active.is_empty() {
        let j = rng.gen_range(0..active.len());
        let i = active[j];
        let c = left[i].min(rng.gen_range(1..=1000));
        l.apply(&keys[i], c, n, &mut sink).unwrap();
        left[i] -= c;
        if left[i] == 0 {
            active.swap_remove(j);
        }
    }
    // Each key's N counters each carry on average N·total/M of other keys' mass; by Markov a
    // counter exceeds e times that with probability <= 1/e, all N with probability <= e^-N.
    let bound = std::f64::consts::E * n as f64 * total as f64 / M as f64;
    let mut over = 0;
    let mut exact = 0;
    for (k, &t) in keys.iter().zip(&truth) {
        let est = l.query(r.mem(), k, Some(n)).unwrap();
        assert!(est >= t, "underestimate: {est} < {t}");
        if (est - t) as f64 > bound {
            over += 1;
        }
        if est == t {
            exact += 1;
        }
    }
    let frac = over as f64 / KEYS as f64;
    println!(
        "key-increment: {over} of {KEYS} keys over the bound {bound:.0} ({:.3}%, e^-N = {:.3}%), {exact} exact",
        frac * 100.0,
        (-(n as f64)).exp() * 100.0
    );
    assert!(frac <= (-(n as f64)).exp());
    // The bound each answer carries is this one, from the store's own counters: the total added
    // and N counter adds per report were counted.
    let b = l.bound(r.mem());
    assert_eq!(b.total, total);
    assert_eq!(r.mem().tally().added, total);
    assert_eq!(b.error, bound.ceil() as u64);
    assert!((b.delta - (-(n as f64)).exp()).abs() < 1e-12);
    assert!((b.epsilon * total as f64 - bound).abs() < 1e-6 * bound);
    let over_carried = keys
        .iter()
        .zip(&truth)
        .filter(|&(k, &t)| l.query(r.mem(), k, None).unwrap() - t > b.error)
        .count();
    assert!(over_carried as f64 / KEYS as f64 <= b.delta);
    // The heaviest key's counters are dominated by itself.
    assert!(l.query(r.mem(), &keys[0], None).unwrap() - truth[0] <= bound as u64);
    // Shapes.
    assert_eq!(
        l.apply(&[0; 4], 1, 1, &mut sink),
        Err(ApplyError::BadKeyLen)
    );
    assert_eq!(
        l.apply(&keys[0], 1, 0, &mut sink),
        Err(ApplyError::BadRedundancy)
    );
    // A report must use exactly the store's N (a minimum over more counters than were added
    // to reads 0).
    for other in [1, 2, 4] {
        assert_eq!(
            l.apply(&keys[0], 1, other, &mut sink),
            Err(ApplyError::RedundancyMismatch)
        );
    }
    // Queries: N from the header by default; an N outside 1..=store N or a key of the wrong
    // length is an error, never a 0.
    assert_eq!(
        l.query(r.mem(), &keys[0], None),
        l.query(r.mem(), &keys[0], Some(3))
    );
    for bad in [0, 4, 9, 255] {
        let e = l.query(r.mem(), &keys[0], Some(bad)).unwrap_err();
        assert!(e.to_string().contains("1..=3"), "{e}");
    }
    assert!(l.query(r.mem(), &[0; 4], None).is_err());
}

#[test]
fn concurrent_fetch_adds_are_exact() {
    let dir = tempfile::tempdir().unwrap();
    let spec = StoreSpec::KeyIncrement(KeyIncrementSpec {
        counters: 1 << 4,
        key_len: 4,
        hash: HashScheme::Prototype,
        redundancy: 2,
        windows: 0,
        window_ms: 0,
    });
    let r = std::sync::Arc::new(Region::create(&dir.path().join("ki"), "c", &spec, false).unwrap());
    let l = KeyIncrementLayout::new(r.header()).unwrap();
    let hs: Vec<_> = (0..2)
        .map(|_| {
            let (r, l) = (r.clone(), l.clone());
            std::thread::spawn(move || {
                let mut s = r.mem().sink();
                for _ in 0..100_000 {
                    l.apply(&[10, 0, 0, 1], 3, 2, &mut s).unwrap();
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(l.query(r.mem(), &[10, 0, 0, 1], None), Ok(600_000));
}

/// Rotating windows (`docs/regions.md` §2.2): each window counts only what was added while it
/// was current; entering a window zeroes its table once, whichever writer comes first; a
/// closed window is never written again (a writer whose clock steps back stays where it is);
/// queries name the windows they read and refuse what cannot be answered.
#[test]
fn windows_count_their_own_time_and_close() {
    use dta_store::{WindowSel, WindowSpan};
    let dir = tempfile::tempdir().unwrap();
    let spec = StoreSpec::KeyIncrement(KeyIncrementSpec {
        windows: 3,
        window_ms: 1000,
        ..KeyIncrementSpec::new(1 << 10, 6)
    });
    let r = Region::create(&dir.path().join("w"), "hist", &spec, false).unwrap();
    assert_eq!(r.header().data_len, 4096 + 3 * (1 << 10) * 8);
    let (mem, key) = (r.mem(), [1, 2, 3, 4, 5, 6]);
    let mut a = KeyIncrementLayout::new(r.header()).unwrap();
    let mut b = a.clone();
    let n = a.redundancy();
    let add = |l: &KeyIncrementLayout, v: u64| l.apply(&key, v, n, &mut mem.sink()).unwrap();
    let t0 = 1_700_000_000_000u64; // window 1_700_000_000 starts here
                                   // Nothing written yet: a query says so.
    let e = a
        .query_windows(mem, &key, None, WindowSel::Current, t0)
        .unwrap_err();
    assert!(e.to_string().contains("nothing has been written"), "{e}");
    assert!(
        a.enter_window(mem, t0).unwrap(),
        "the first writer zeroes the table"
    );
    assert!(
        !b.enter_window(mem, t0 + 10).unwrap(),
        "the second finds it entered"
    );
    add(&a, 5);
    add(&b, 7);
    // The next window: its table zeroed once (it held garbage), the first one's count kept.
    let next = 1_700_000_001u64;
    let slot = (next % 3) as usize;
    let junk = vec![0xAAu8; 8 << 10];
    mem.write(4096 + slot as u64 * 8192, &junk).unwrap();
    assert!(a.enter_window(mem, t0 + 1000).unwrap());
    add(&a, 100);
    // b has not ticked yet: its reports still count in the window it is in.
    add(&b, 1);
    assert!(!b.enter_window(mem, t0 + 1500).unwrap());
    add(&b, 10);
    // A clock that steps back does not reopen a closed window.
    assert!(!b.enter_window(mem, t0 + 900).unwrap());
    add(&b, 1000);
    let q = |sel, now| a.query_windows(mem, &key, None, sel, now).unwrap();
    let now = t0 + 1600;
    let w0 = WindowSpan {
        number: next - 1,
        start_ms: t0,
        end_ms: t0 + 1000,
        open: false,
    };
    let w1 = WindowSpan {
        number: next,
        start_ms: t0 + 1000,
        end_ms: t0 + 2000,
        open: true,
    };
    assert_eq!(q(WindowSel::Current, now), (1110, vec![w1]));
    assert_eq!(q(WindowSel::All, now), (1123, vec![w0, w1]));
    assert_eq!(q(WindowSel::At(t0 + 999), now), (13, vec![w0]));
    assert_eq!(q(WindowSel::Last(500), now), (1110, vec![w1]));
    assert_eq!(q(WindowSel::Last(700), now), (1123, vec![w0, w1]));
    // The plain query reads the current window (by the wall clock: none of these is current
    // now, so the newest held).
    assert_eq!(a.query(mem, &key, None).unwrap(), 1110);
    let e = a
        .query_windows(mem, &key, None, WindowSel::At(t0 - 1), now)
        .unwrap_err();
    assert!(e.to_string().contains("holds 2 window(s)"), "{e}");
    // Three windows later the oldest table is reused: window 0 is gone, the others remain.
    assert!(a.enter_window(mem, t0 + 2000).unwrap());
    assert!(a.enter_window(mem, t0 + 3000).unwrap());
    let held: Vec<u64> = a
        .held_windows(mem, t0 + 3001)
        .iter()
        .map(|w| w.number)
        .collect();
    assert_eq!(held, vec![next, next + 1, next + 2]);
    // A cumulative store refuses a window other than all.
    let c = Region::create(
        &dir.path().join("c"),
        "c",
        &StoreSpec::KeyIncrement(KeyIncrementSpec::new(64, 6)),
        false,
    )
    .unwrap();
    let l = KeyIncrementLayout::new(c.header()).unwrap();
    let e = l
        .query_windows(c.mem(), &key, None, WindowSel::Current, now)
        .unwrap_err();
    assert!(e.to_string().contains("keeps no windows"), "{e}");
    assert_eq!(
        l.query_windows(c.mem(), &key, None, WindowSel::All, now)
            .unwrap(),
        (0, vec![])
    );
    // Windows are checked when the store is described.
    for (w, ms) in [(1, 1000), (513, 1000), (4, 10), (0, 1000)] {
        let bad = StoreSpec::KeyIncrement(KeyIncrementSpec {
            windows: w,
            window_ms: ms,
            ..KeyIncrementSpec::new(64, 6)
        });
        assert!(bad.validate().is_err(), "windows {w} window_ms {ms}");
    }
    assert_eq!(
        WindowSel::parse("last:5m").unwrap(),
        WindowSel::Last(300_000)
    );
    assert!(WindowSel::parse("last:5y").is_err());
    assert!(WindowSel::parse("yesterday").is_err());
    // A duration says its unit, and is above 0.
    for bad in ["last:5", "last:0s", "last:", "last:m"] {
        let e = WindowSel::parse(bad).unwrap_err();
        assert!(
            e.contains("unit") || e.contains("above 0") || e.contains("number"),
            "{bad}: {e}"
        );
    }
    assert_eq!(
        WindowSel::parse("last:1d").unwrap(),
        WindowSel::Last(86_400_000)
    );
    assert_eq!(
        WindowSel::parse("last:250ms").unwrap(),
        WindowSel::Last(250)
    );
    // Three windows of a second: the last 2 s are held whole; the last minute is cut, and said.
    assert_eq!(
        a.coverage(WindowSel::Last(2000), now),
        dta_store::Coverage::COMPLETE
    );
    assert_eq!(
        a.coverage(WindowSel::All, now),
        dta_store::Coverage::COMPLETE
    );
    let cut = a.coverage(WindowSel::Last(60_000), now);
    assert!(!cut.complete);
    let note = cut.note.unwrap();
    assert!(
        note.contains("last 1 min") && note.contains("keeps 3 windows of 1 s (3 s)"),
        "{note}"
    );
    // A cumulative store holds all it ever counted: nothing to cut.
    assert_eq!(
        l.coverage(WindowSel::All, now),
        dta_store::Coverage::COMPLETE
    );
}
