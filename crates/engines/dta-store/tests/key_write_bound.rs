//! Key-Write against the bound of [DTA A.5], formulas (1)-(3), and the prototype scheme's
//! correlated copies (architecture.md "Hashing").
//!
//! Every key of a stream is queried right after exactly αM further keys have been written, so
//! each query sees α = 0.1 exactly.

use dta_store::hash::{fmix32, fmix64};
use dta_store::{HashScheme, KeyWriteAnswer, KeyWriteLayout, KeyWriteSpec, Region, StoreSpec};

const M: u64 = 1 << 20;
const ALPHA: f64 = 0.1;

/// A.5: probability of an empty return, (1) + (2) + (3).
fn a5_empty(alpha: f64, n: u32, b: u32) -> f64 {
    let nf = n as f64;
    let over = 1.0 - (-alpha * nf).exp();
    let q = 1.0 - 2f64.powi(-(b as i32));
    let p = 2f64.powi(-(b as i32));
    let t1 = over.powi(n as i32) * q.powi(n as i32);
    let t2 = over.powi(n as i32) * (1.0 - q.powi(n as i32) - nf * p * q.powi(n as i32 - 1));
    let mut t3 = 0.0;
    for j in 1..n {
        let binom = (0..j).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64);
        t3 += binom
            * over.powi(j as i32)
            * (-alpha * nf * (n - j) as f64).exp()
            * (1.0 - q.powi(j as i32));
    }
    t1 + t2 + t3
}

/// Distinct pseudo-random keys: a bijection of the stream position, salted per run.
fn key(t: u64, len: usize, salt: u64, out: &mut [u8; 16]) {
    if len == 4 {
        out[..4].copy_from_slice(&fmix32(t as u32 ^ salt as u32).to_be_bytes());
    } else {
        out[..8].copy_from_slice(&fmix64(t ^ salt).to_le_bytes());
        out[8..16].copy_from_slice(&fmix64(t.wrapping_add(salt).rotate_left(17)).to_le_bytes());
        // bytes 0..8 are a bijection of t, so keys are distinct for any len >= 8
    }
}

fn data(t: u64, salt: u64) -> [u8; 4] {
    (fmix64(t ^ salt.rotate_left(32)) as u32).to_be_bytes()
}

struct Outcome {
    queries: u64,
    empty: u64,
    wrong: u64,
}

fn stream(layout: &KeyWriteLayout, region: &Region, n: u8, queries: u64) -> Outcome {
    let salt: u64 = dta_testkit::test_seed(0xA5);
    let klen = layout.key_len();
    let lag = (ALPHA * M as f64).round() as u64;
    let mut sink = region.mem().sink();
    let mut k = [0u8; 16];
    let mut out = Outcome {
        queries: 0,
        empty: 0,
        wrong: 0,
    };
    for t in 0..queries + lag {
        key(t, klen, salt, &mut k);
        layout
            .apply(&k[..klen], &data(t, salt), n, &mut sink)
            .unwrap();
        if t >= lag {
            let q = t - lag;
            key(q, klen, salt, &mut k);
            out.queries += 1;
            match layout.query(region.mem(), &k[..klen], Some(n), 1).unwrap() {
                KeyWriteAnswer::Found { data: d, .. } if d == data(q, salt) => {}
                KeyWriteAnswer::Found { .. } => out.wrong += 1,
                _ => out.empty += 1,
            }
        }
    }
    out
}

fn region(dir: &tempfile::TempDir, spec: KeyWriteSpec) -> (Region, KeyWriteLayout) {
    let r = Region::create(
        &dir.path().join("kw"),
        "kw",
        &StoreSpec::KeyWrite(spec),
        true,
    )
    .unwrap();
    let l = KeyWriteLayout::new(r.header()).unwrap();
    (r, l)
}

#[test]
fn native_scheme_meets_the_a5_bound() {
    let dir = tempfile::tempdir().unwrap();
    for key_len in [13u8, 4] {
        let mut spec = KeyWriteSpec::new(M, key_len, 4);
        spec.hash = HashScheme::Native;
        spec.redundancy = 4;
        let (r, layout) = region(&dir, spec);
        for n in [1u8, 2, 4] {
            let o = stream(&layout, &r, n, 1_000_000);
            let rate = o.empty as f64 / o.queries as f64;
            let want = a5_empty(ALPHA, n as u32, 32);
            println!(
                "native key_len={key_len} N={n}: empty {:.3}% (A.5 formula {:.3}%), wrong {} of {} queries",
                rate * 100.0,
                want * 100.0,
                o.wrong,
                o.queries
            );
            assert!(
                (rate - want).abs() <= 0.005,
                "N={n}: empty rate {rate} vs formula {want}"
            );
            assert_eq!(o.wrong, 0, "wrong answers with N={n}");
        }
    }
    // The paper's own numbers (A.5): 9.5%, 3.3%, 1.2%.
    assert!((a5_empty(0.1, 1, 32) - 0.095).abs() < 0.0005);
    assert!((a5_empty(0.1, 2, 32) - 0.033).abs() < 0.0005);
    assert!((a5_empty(0.1, 4, 32) - 0.012).abs() < 0.0005);
}

/// Finding: the prototype's CRC slots satisfy slot(k, n) = slot(k, 0) XOR c_n, so another key
/// overwrites both copies of a key or neither. With N = 2 the empty rate is 1 - e^{-2α} ≈ 18%,
/// not A.5's 3.3%.
#[test]
fn prototype_scheme_copies_are_correlated() {
    let dir = tempfile::tempdir().unwrap();
    // Native is the default, also for 4-byte keys and data; the prototype layout only on request.
    let mut spec = KeyWriteSpec::new(M, 4, 4);
    assert_eq!(spec.hash, HashScheme::Native);
    spec.hash = HashScheme::Prototype;
    let (r, layout) = region(&dir, spec);

    // The XOR structure itself.
    let c1 = layout.slot_offset(&[0, 0, 0, 0], 1) ^ layout.slot_offset(&[0, 0, 0, 0], 0);
    assert_ne!(c1, 0);
    for t in 0..10_000u32 {
        let k = fmix32(t).to_be_bytes();
        assert_eq!(layout.slot_offset(&k, 1) ^ layout.slot_offset(&k, 0), c1);
    }

    let o = stream(&layout, &r, 2, 1_000_000);
    let rate = o.empty as f64 / o.queries as f64;
    let correlated = 1.0 - (-2.0 * ALPHA).exp();
    let independent = a5_empty(ALPHA, 2, 32);
    println!(
        "prototype N=2: empty {:.3}% (correlated model 1-e^(-2a) = {:.3}%, A.5 with independent hashes {:.3}%), wrong {}",
        rate * 100.0,
        correlated * 100.0,
        independent * 100.0,
        o.wrong
    );
    assert!((rate - correlated).abs() <= 0.005, "empty rate {rate}");
    assert!(rate > 5.0 * independent);
    assert_eq!(o.wrong, 0);
}

/// The confidence an answer carries, against measured rates. Each round writes probe keys into
/// a fresh store, then other keys until the store's load (copies written per slot) is `LOAD`,
/// and queries the probes: the share lost (empty) must match `p_overwritten`, computed from the
/// store's live counters, within 15 % (the probes, 1/32 of the writes, saw slightly fewer later
/// writes than the oldest key the estimate describes) and no found answer may be wrong
/// (`p_wrong` is ~2^-32 times smaller).
#[test]
fn confidence_matches_measured_rates() {
    const SLOTS: u64 = 1 << 16;
    const LOAD: f64 = 0.5;
    let dir = tempfile::tempdir().unwrap();
    let salt: u64 = dta_testkit::test_seed(0xC0);
    let mut k = [0u8; 16];
    for n in [1u8, 2, 4] {
        let writes = (LOAD * SLOTS as f64) as u64;
        let reports = writes / n as u64;
        let probes = reports / 32;
        let rounds = 40_000 / probes + 1;
        let (mut lost, mut queried, mut wrong, mut estimate) = (0u64, 0u64, 0u64, 0.0f64);
        for round in 0..rounds {
            let path = dir.path().join(format!("c{n}-{round}"));
            let mut spec = KeyWriteSpec::new(SLOTS, 13, 4);
            spec.redundancy = n;
            let r = Region::create(&path, "kw", &StoreSpec::KeyWrite(spec), true).unwrap();
            let l = KeyWriteLayout::new(r.header()).unwrap();
            let mut sink = r.mem().sink();
            let s = salt ^ round.rotate_left(40) ^ n as u64;
            for t in 0..reports {
                key(t, 13, s, &mut k);
                l.apply(&k[..13], &data(t, s), n, &mut sink).unwrap();
            }
            let c = l.confidence(r.mem(), None);
            assert_eq!(r.mem().tally().writes, reports * n as u64);
            assert!((c.load - (reports * n as u64) as f64 / SLOTS as f64).abs() < 1e-12);
            assert!(c.p_wrong < 1e-9 && c.p_wrong > 0.0);
            estimate = c.p_overwritten;
            for t in 0..probes {
                key(t, 13, s, &mut k);
                queried += 1;
                match l.query(r.mem(), &k[..13], None, 1).unwrap() {
                    KeyWriteAnswer::Found { data: d, .. } if d == data(t, s) => {}
                    KeyWriteAnswer::Found { .. } => wrong += 1,
                    _ => lost += 1,
                }
            }
            drop(r);
            std::fs::remove_file(&path).unwrap();
        }
        let rate = lost as f64 / queried as f64;
        println!(
            "key-write N={n} load {LOAD}: lost {:.3}% of {queried}, p_overwritten {:.3}%",
            rate * 100.0,
            estimate * 100.0
        );
        assert!(
            (rate - estimate).abs() <= 0.15 * estimate,
            "N={n}: lost {rate} vs p_overwritten {estimate}"
        );
        assert_eq!(wrong, 0);
    }
}
