//! Postcarding against [DTA A.6]: |V| = 2^18, B = 5, N = 2, b = 32, α = 0.1. Formulas
//! (9)-(11) bound the unanswered rate by 3.3% (exactly 3.286%); (12) makes a wrong path
//! essentially impossible. Every path of a stream is queried right after exactly αC further
//! paths have been written.

use dta_store::hash::fmix64;
use dta_store::{
    PostcardAnswer, PostcardingLayout, PostcardingSpec, Region, StoreSpec, ValueTable, VecSink,
};
use rand::{Rng, SeedableRng};

const C: u64 = 1 << 18;
const V: u32 = 1 << 18;

fn key(t: u64, salt: u64) -> [u8; 13] {
    let mut k = [0u8; 13];
    k[..8].copy_from_slice(&fmix64(t ^ salt).to_le_bytes());
    k[8..].copy_from_slice(&fmix64(t.wrapping_add(salt)).to_le_bytes()[..5]);
    k
}

fn spec(bits: u8) -> StoreSpec {
    StoreSpec::Postcarding(PostcardingSpec {
        chunks: C,
        hops: 5,
        slot_bits: bits,
        redundancy: 2,
        key_len: 13,
    })
}

#[test]
fn a6_bound_holds() {
    let dir = tempfile::tempdir().unwrap();
    let r = Region::create(&dir.path().join("pc"), "paths", &spec(32), false).unwrap();
    let layout = PostcardingLayout::new(r.header()).unwrap();
    assert_eq!(layout.chunk_len(), 24);
    let table = ValueTable::range(&layout, V).unwrap();
    let seed: u64 = dta_testkit::test_seed(0xA6);
    println!("seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let salt: u64 = rng.gen();
    let lag = (0.1 * C as f64).round() as usize;
    let queries: u64 = 12_000_000;
    // Ring of the paths written in the last `lag` steps.
    let mut paths = vec![([None; 5], 0usize); lag + 1];
    let mut sink = r.mem().sink();
    let (mut answered, mut wrong, mut ambiguous) = (0u64, 0u64, 0u64);
    for t in 0..queries + lag as u64 {
        let len = rng.gen_range(1..=5);
        let mut vals = [None; 5];
        for v in vals.iter_mut().take(len) {
            *v = Some(rng.gen_range(0..V));
        }
        layout.apply_chunk(&key(t, salt), &vals, &mut sink).unwrap();
        paths[t as usize % (lag + 1)] = (vals, len);
        if t >= lag as u64 {
            let q = t - lag as u64;
            let (want, len) = paths[q as usize % (lag + 1)];
            match layout.query(r.mem(), &key(q, salt), &table).unwrap() {
                PostcardAnswer::Found(p) => {
                    let ok = p.len() == len && p.iter().zip(&want).all(|(a, b)| Some(*a) == *b);
                    if ok {
                        answered += 1;
                    } else {
                        wrong += 1;
                    }
                }
                PostcardAnswer::Ambiguous => ambiguous += 1,
                PostcardAnswer::Empty => {}
            }
        }
    }
    let rate = answered as f64 / queries as f64;
    let over = 1.0 - (-0.2f64).exp();
    println!(
        "postcarding |V|=2^18 B=5 N=2 b=32 a=0.1: answered {:.4}% (A.6: >= {:.4}%), wrong {wrong}, ambiguous {ambiguous}, of {queries}",
        rate * 100.0,
        (1.0 - over * over) * 100.0
    );
    assert!(rate >= 0.967, "answered {rate}");
    assert_eq!(wrong, 0);
}

#[test]
fn chunk_bytes_and_short_paths() {
    // One path in a tiny store: the chunk is checksum(x,i) ^ g(v_i), blanks after the path,
    // then the check over key and slots.
    let spec = PostcardingSpec {
        chunks: 4,
        hops: 3,
        slot_bits: 16,
        redundancy: 1,
        key_len: 4,
    };
    let h = dta_store::Header::new("p", &StoreSpec::Postcarding(spec)).unwrap();
    let layout = PostcardingLayout::new(&h).unwrap();
    let mut sink = VecSink::new(h.data_len as usize);
    let key = [1, 2, 3, 4];
    layout
        .apply_chunk(&key, &[Some(7), None, None], &mut sink)
        .unwrap();
    let hk = dta_store::hash::fnv1a64(&key);
    let at = layout.chunk_offset(hk, 0) as usize;
    for (i, v) in [7u32, dta_store::hash::BLANK, dta_store::hash::BLANK]
        .into_iter()
        .enumerate()
    {
        let s = dta_store::hash::postcard_checksum(hk, i as u8, 16)
            ^ dta_store::hash::postcard_g(v, 16);
        assert_eq!(
            &sink.bytes[at + 2 * i..at + 2 * i + 2],
            &(s as u16).to_le_bytes()
        );
    }
    assert_eq!(layout.chunk_len(), 3 * 2 + 4);
    let mut word = [0u8; 8];
    word[..6].copy_from_slice(&sink.bytes[at..at + 6]);
    let check =
        dta_store::hash::data_check(dta_store::hash::check_seed(hk), &[u64::from_le_bytes(word)]);
    assert_eq!(&sink.bytes[at + 6..at + 10], &check.to_le_bytes());
    // Wrong shapes are rejected and write nothing.
    let before = sink.bytes.clone();
    assert_eq!(
        layout.apply_chunk(&key, &[Some(1), None], &mut sink),
        Err(dta_store::ApplyError::BadHop)
    );
    assert_eq!(
        layout.apply_chunk(&[1, 2, 3], &[None; 3], &mut sink),
        Err(dta_store::ApplyError::BadKeyLen)
    );
    assert_eq!(sink.bytes, before);
}

#[test]
fn query_decodes_and_rejects_mixed_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let r = Region::create(&dir.path().join("pc"), "p", &spec(32), false).unwrap();
    let layout = PostcardingLayout::new(r.header()).unwrap();
    let table = ValueTable::new(&layout, [10u32, 20, 30, 40, 50, 60]).unwrap();
    let mut sink = r.mem().sink();
    let k = [9u8; 13];
    assert_eq!(
        layout.query(r.mem(), &k, &table).unwrap(),
        PostcardAnswer::Empty
    );
    layout
        .apply_chunk(&k, &[Some(10), Some(20), Some(30), None, None], &mut sink)
        .unwrap();
    assert_eq!(
        layout.query(r.mem(), &k, &table).unwrap(),
        PostcardAnswer::Found(vec![10, 20, 30])
    );
    // A value outside V makes the chunk invalid.
    layout
        .apply_chunk(&k, &[Some(10), Some(21), None, None, None], &mut sink)
        .unwrap();
    assert_eq!(
        layout.query(r.mem(), &k, &table).unwrap(),
        PostcardAnswer::Empty
    );
    // Two valid chunks that disagree: overwrite copy 1 only with another path.
    layout
        .apply_chunk(&k, &[Some(40), None, None, None, None], &mut sink)
        .unwrap();
    let hk = dta_store::hash::fnv1a64(&k);
    let mut other = VecSink::new(r.mem().len() as usize);
    layout
        .apply_chunk(&k, &[Some(50), Some(60), None, None, None], &mut other)
        .unwrap();
    let at = layout.chunk_offset(hk, 1);
    let bytes = other.bytes[at as usize..at as usize + layout.chunk_len()].to_vec();
    r.mem().write(at, &bytes).unwrap();
    if layout.chunk_offset(hk, 0) != at {
        assert_eq!(
            layout.query(r.mem(), &k, &table).unwrap(),
            PostcardAnswer::Ambiguous
        );
    }
    // A chunk whose slots all decode but whose check fails (slot 0 of one path, the rest of
    // another: a torn read) is not a candidate, though its slots alone decode to a path.
    let mut a = VecSink::new(r.mem().len() as usize);
    let mut b = VecSink::new(r.mem().len() as usize);
    layout
        .apply_chunk(&k, &[Some(10), Some(20), None, None, None], &mut a)
        .unwrap();
    layout
        .apply_chunk(&k, &[Some(50), Some(60), None, None, None], &mut b)
        .unwrap();
    let len = layout.chunk_len();
    for j in 0..2 {
        let at = layout.chunk_offset(hk, j) as usize;
        let mut torn = b.bytes[at..at + len].to_vec();
        torn[..4].copy_from_slice(&a.bytes[at..at + 4]);
        assert_eq!(layout.decode_slots(&k, &torn, &table), Some(vec![10, 60]));
        r.mem().write(at as u64, &torn).unwrap();
    }
    assert_eq!(
        layout.query(r.mem(), &k, &table).unwrap(),
        PostcardAnswer::Empty
    );
    // A hole (blank before a value) is invalid.
    layout
        .apply_chunk(&k, &[Some(10), None, Some(30), None, None], &mut sink)
        .unwrap();
    assert_eq!(
        layout.query(r.mem(), &k, &table).unwrap(),
        PostcardAnswer::Empty
    );
}

/// The outcome of one [`confidence_round`] over its probes.
#[derive(Default)]
struct Round {
    queried: u64,
    /// Queries that did not find the probe's path.
    lost: u64,
    /// Queries that found another path.
    wrong: u64,
    /// Probes for which a chunk's slots alone, without the chunk check
    /// ([`PostcardingLayout::decode_slots`]), decode to another path.
    slots_wrong: u64,
}

/// One round: a fresh store of `C` chunks, `probes` paths written first, then others until
/// `paths` in all; returns the outcome over the probes and the carried confidence.
fn confidence_round(
    dir: &std::path::Path,
    spec: &PostcardingSpec,
    values: u32,
    paths: u64,
    probes: u64,
    seed: u64,
) -> (Round, dta_store::Confidence) {
    let path = dir.join(format!("conf-{seed}"));
    let r = Region::create(&path, "p", &StoreSpec::Postcarding(spec.clone()), true).unwrap();
    let layout = PostcardingLayout::new(r.header()).unwrap();
    let table = ValueTable::range(&layout, values).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let salt: u64 = rng.gen();
    let hops = spec.hops as usize;
    let mut want = vec![];
    let mut sink = r.mem().sink();
    for t in 0..paths {
        let len = rng.gen_range(1..=hops);
        let mut vals = [None; 16];
        for v in vals.iter_mut().take(len) {
            *v = Some(rng.gen_range(0..values));
        }
        layout
            .apply_chunk(&key(t, salt), &vals[..hops], &mut sink)
            .unwrap();
        if t < probes {
            want.push(vals);
        }
    }
    assert_eq!(r.mem().tally().writes, paths * spec.redundancy as u64);
    let c = layout.confidence(r.mem(), &table);
    let mut out = Round {
        queried: probes,
        ..Round::default()
    };
    let mut chunk = vec![0u8; layout.chunk_len()];
    for (t, w) in want.iter().enumerate() {
        let k = key(t as u64, salt);
        let len = w.iter().take_while(|v| v.is_some()).count();
        let other = |p: &[u32]| p.len() != len || p.iter().zip(w).any(|(a, b)| Some(*a) != *b);
        match layout.query(r.mem(), &k, &table).unwrap() {
            PostcardAnswer::Found(p) => out.wrong += other(&p) as u64,
            _ => out.lost += 1,
        }
        let hk = dta_store::hash::fnv1a64(&k);
        out.slots_wrong += (0..spec.redundancy).any(|j| {
            r.mem()
                .read(layout.chunk_offset(hk, j), &mut chunk)
                .unwrap();
            layout
                .decode_slots(&k, &chunk, &table)
                .is_some_and(|p| other(&p))
        }) as u64;
    }
    drop(r);
    std::fs::remove_file(&path).unwrap();
    (out, c)
}

/// The confidence a Postcarding answer carries against measured rates. With b = 32 a path is
/// lost about as often as all its N chunks were overwritten (`p_overwritten`, within 15 %: the
/// probes, 1/16 of the paths, saw slightly fewer later writes than the oldest path the estimate
/// describes). With b = 8, |V| = 16, B = 2 and N = 1 the slots of a foreign chunk decode as a
/// valid path often enough to count: [DTA A.6] (12) for the slot decoder alone
/// (`p_overwritten · postcard_slots_valid`) is an upper bound that must hold and be tight (the
/// measured rate is at least half of it: values whose 8-bit g collide decode to nothing, and a
/// valid path may not start with a blank). The chunk check rejects every such chunk: queries
/// answer no wrong path, and `p_wrong` (the same times 2^-32) is below one per query made.
#[test]
fn confidence_matches_measured_rates() {
    let dir = tempfile::tempdir().unwrap();
    let seed = dta_testkit::test_seed(0xC6);
    const CH: u64 = 1 << 12;

    let wide = PostcardingSpec {
        chunks: CH,
        hops: 5,
        slot_bits: 32,
        redundancy: 2,
        key_len: 13,
    };
    let (mut q, mut lost, mut wrong, mut est) = (0, 0, 0, 0.0);
    for round in 0..160 {
        let (o, conf) = confidence_round(dir.path(), &wide, 1 << 10, CH / 2, 128, seed ^ round);
        (q, lost, wrong, est) = (
            q + o.queried,
            lost + o.lost,
            wrong + o.wrong,
            conf.p_overwritten,
        );
        assert!(conf.p_wrong < 1e-12);
    }
    let rate = lost as f64 / q as f64;
    println!(
        "postcarding b=32 N=2 load 1: lost {:.3}% of {q}, p_overwritten {:.3}%",
        rate * 100.0,
        est * 100.0
    );
    assert!((rate - est).abs() <= 0.15 * est, "lost {rate} vs {est}");
    assert_eq!(wrong, 0);

    let narrow = PostcardingSpec {
        chunks: CH,
        hops: 2,
        slot_bits: 8,
        redundancy: 1,
        key_len: 13,
    };
    let (mut q, mut wrong, mut slots_wrong, mut est, mut p_wrong) = (0, 0, 0, 0.0, 0.0);
    for round in 0..200 {
        let (o, conf) =
            confidence_round(dir.path(), &narrow, 16, 3 * CH, 1024, seed ^ (round << 20));
        (q, wrong, slots_wrong) = (q + o.queried, wrong + o.wrong, slots_wrong + o.slots_wrong);
        // The table holds V = 0..16 and the blank.
        est = conf.p_overwritten * dta_store::confidence::postcard_slots_valid(1, 2, 8, 17);
        p_wrong = conf.p_wrong;
    }
    let rate = slots_wrong as f64 / q as f64;
    println!(
        "postcarding b=8 |V|=16 B=2 N=1 load 3: slots alone decode wrong {:.4}% of {q} \
         ([DTA A.6] (12) {:.4}%); queries wrong {wrong}, p_wrong {p_wrong:e}",
        rate * 100.0,
        est * 100.0
    );
    assert!(
        rate <= est * 1.1,
        "slots wrong {rate} above the bound {est}"
    );
    assert!(
        rate >= est * 0.5,
        "slots wrong {rate} far below the estimate {est}"
    );
    assert_eq!(
        wrong, 0,
        "the chunk check let {wrong} foreign chunks through"
    );
    assert!(p_wrong < 1.0 / q as f64, "p_wrong {p_wrong} of {q} queries");
    assert!((p_wrong - est * 2f64.powi(-32)).abs() <= 1e-9 * p_wrong);
}
