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
