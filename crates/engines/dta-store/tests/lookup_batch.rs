//! `KeyWriteLayout::lookup_batch` (docs/benchmarks.md §3, query) answers every key exactly as the
//! one-key `lookup` does, byte for byte, and `lookup` agrees with the allocating `query`
//! ([DTA A.1] Algorithm 2, [DTA A.5]'s plurality vote), on stores crowded enough that overwrites,
//! ties and empty answers are common.

use dta_store::{
    HashScheme, KeyWriteAnswer, KeyWriteLayout, KeyWriteSpec, Lookup, MemSink, QueryError, Region,
    RegionMem, StoreSpec,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn kw(dir: &std::path::Path, slots: u64, key_len: u8, data_len: u8, hash: HashScheme) -> Region {
    let spec = StoreSpec::KeyWrite(KeyWriteSpec {
        slots,
        key_len,
        data_len,
        hash,
        redundancy: dta_store::MAX_REDUNDANCY,
    });
    let name = format!("kw-{slots}-{key_len}-{data_len}-{hash:?}");
    Region::create(&dir.join(name), "kw", &spec, true).unwrap()
}

/// How often each answer came up, so a test can check it exercised all three.
#[derive(Default, Debug)]
struct Seen {
    found: usize,
    empty: usize,
    ambiguous: usize,
}

/// The one-key lookup as first written (byte-slice slots, candidates in copy order, the first
/// with the most votes wins a tie): the reference both faster paths must reproduce.
fn reference(l: &KeyWriteLayout, mem: &RegionMem, key: &[u8], n: u8, t: u8) -> (Lookup, Vec<u8>) {
    let tag = l.slot_offsets(key, n, &mut [0; dta_store::MAX_REDUNDANCY as usize]);
    let d = l.data_len();
    let mut cands: Vec<(Vec<u8>, u8)> = Vec::new();
    for i in 0..n {
        let mut slot = vec![0u8; l.slot_len()];
        if mem.read(l.slot_offset(key, i), &mut slot).is_err() || !l.slot_holds(tag, &slot) {
            continue;
        }
        match cands.iter_mut().find(|(c, _)| c[..] == slot[4..4 + d]) {
            Some((_, v)) => *v += 1,
            None => cands.push((slot[4..4 + d].to_vec(), 1)),
        }
    }
    let Some(top) = cands.iter().map(|c| c.1).max() else {
        return (Lookup::Empty, vec![]);
    };
    let best = cands.iter().position(|c| c.1 == top).unwrap();
    let unique = cands.iter().filter(|c| c.1 == top).count() == 1;
    let a = if unique && top >= t.max(1) {
        Lookup::Found { votes: top }
    } else {
        Lookup::Ambiguous
    };
    (a, cands.swap_remove(best).0)
}

/// `lookup_batch` over `keys` (concatenated), split into batches of `batch` keys, against
/// `lookup` key by key, and `lookup` against `query`. Both output buffers start with the same
/// junk so that bytes left untouched must match too.
fn check(
    l: &KeyWriteLayout,
    mem: &RegionMem,
    keys: &[u8],
    n: u8,
    t: u8,
    batch: usize,
    seen: &mut Seen,
) {
    let (kl, dl) = (l.key_len(), l.data_len());
    let count = keys.len() / kl;
    let mut out_b = vec![0xA5u8; count * dl];
    let mut ans_b = vec![Lookup::Ambiguous; count];
    if t > n {
        // A threshold above the copies read can never be met: every path refuses it alike.
        let want = dta_store::QueryError::BadThreshold { got: t, n };
        assert_eq!(
            l.lookup_batch(mem, keys, Some(n), t, &mut out_b, &mut ans_b),
            Err(want.clone())
        );
        let key = &keys[..kl];
        assert_eq!(
            l.lookup(mem, key, Some(n), t, &mut out_b[..dl]),
            Err(want.clone())
        );
        assert_eq!(l.query(mem, key, Some(n), t), Err(want));
        return;
    }
    for (i, (k, a)) in keys
        .chunks(batch * kl)
        .zip(ans_b.chunks_mut(batch))
        .enumerate()
    {
        let o = &mut out_b[i * batch * dl..][..a.len() * dl];
        l.lookup_batch(mem, k, Some(n), t, o, a).unwrap();
    }
    let mut out_1 = vec![0xA5u8; count * dl];
    for (i, key) in keys.chunks_exact(kl).enumerate() {
        let o = &mut out_1[i * dl..(i + 1) * dl];
        let a = l.lookup(mem, key, Some(n), t, o).unwrap();
        assert_eq!(
            ans_b[i], a,
            "key {i} ({key:02x?}) N={n} T={t} batch {batch}: lookup_batch vs lookup"
        );
        assert_eq!(
            out_b[i * dl..(i + 1) * dl],
            *o,
            "key {i} N={n} T={t} batch {batch}: value"
        );
        let (ra, rv) = reference(l, mem, key, n, t);
        assert_eq!(ra, a, "key {key:02x?} N={n} T={t}: reference vs lookup");
        if ra != Lookup::Empty {
            assert_eq!(rv[..], o[..], "key {key:02x?} N={n} T={t}: reference value");
        }
        match (l.query(mem, key, Some(n), t).unwrap(), a) {
            (KeyWriteAnswer::Found { data, votes }, Lookup::Found { votes: v }) => {
                assert_eq!((&data[..], votes), (&o[..], v));
                seen.found += 1;
            }
            (KeyWriteAnswer::Empty, Lookup::Empty) => {
                assert!(o.iter().all(|&b| b == 0xA5), "Empty wrote its value");
                seen.empty += 1;
            }
            (KeyWriteAnswer::Ambiguous { candidates }, Lookup::Ambiguous) => {
                // The value lookup returns is a tied candidate with the most votes.
                let top = candidates[0].1;
                assert!(candidates.iter().any(|(d, v)| *v == top && d[..] == o[..]));
                seen.ambiguous += 1;
            }
            (q, a) => panic!("key {key:02x?} N={n} T={t}: query {q:?} but lookup {a:?}"),
        }
    }
}

/// Small stores (collisions and overwrites everywhere), random keys and data, every layout shape
/// that changes the slot's word count or padding, both hash schemes, N = 1, 2, 4, T = 0..=2,
/// batch sizes around the group size; keys never written and repeated keys included.
#[test]
fn lookup_batch_equals_lookup_on_crowded_stores() {
    let seed = dta_testkit::test_seed(0x100c_ba7c);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    // (hash, key_len, data_len): slots of 8 bytes (prototype), 16 with 4 bytes of padding,
    // 24, 16 with 3 bytes of padding, and the largest (72).
    let shapes = [
        (HashScheme::Prototype, 4u8, 4u8),
        (HashScheme::Prototype, 4, 8),
        (HashScheme::Native, 4, 4),
        (HashScheme::Native, 13, 20),
        (HashScheme::Native, 8, 9),
        (HashScheme::Native, 16, 64),
    ];
    let mut seen = Seen::default();
    for (hash, kl, dl) in shapes {
        let (kl, dl) = (kl as usize, dl as usize);
        let r = kw(dir.path(), 64, kl as u8, dl as u8, hash);
        let l = KeyWriteLayout::new(r.header()).unwrap();
        let mem = r.mem();
        let mut sink = mem.sink();
        let written: Vec<Vec<u8>> = (0..60)
            .map(|_| (0..kl).map(|_| rng.gen()).collect())
            .collect();
        // Data from a small alphabet so different keys often carry equal values.
        let value = |rng: &mut StdRng| -> Vec<u8> {
            let v: u8 = rng.gen_range(0..3);
            (0..dl).map(|j| v.wrapping_add(j as u8)).collect()
        };
        for _ in 0..150 {
            let k = &written[rng.gen_range(0..written.len())];
            let red = rng.gen_range(1..=4);
            l.apply(k, &value(&mut rng), red, &mut sink).unwrap();
        }
        // Ties: a key written at N = 4, then rewritten with another value at N = 2 (copies 0
        // and 1 differ from copies 2 and 3 unless overwritten since).
        for k in &written[..8] {
            let a = value(&mut rng);
            let mut b = a.clone();
            b[0] ^= 0x80;
            l.apply(k, &a, 4, &mut sink).unwrap();
            l.apply(k, &b, 2, &mut sink).unwrap();
        }
        // Junk in the padding of every slot: no answer may depend on it.
        let slot_len = l.slot_len() as u64;
        if slot_len as usize > 4 + dl {
            let mut slot = vec![0u8; slot_len as usize];
            for s in 0..l.slots() {
                mem.read(s * slot_len, &mut slot).unwrap();
                for b in &mut slot[4 + dl..] {
                    *b = rng.gen();
                }
                sink.write(s * slot_len, &slot).unwrap();
            }
        }
        let mut keys = Vec::new();
        for k in &written {
            keys.extend_from_slice(k);
        }
        for _ in 0..40 {
            keys.extend((0..kl).map(|_| rng.gen::<u8>())); // never written
        }
        let w = written[3].clone();
        keys.extend_from_slice(&w); // a key twice in one batch
        for n in [1u8, 2, 4] {
            for t in 0..=2 {
                for batch in [1usize, 7, 16, 17, 33, 101] {
                    check(&l, mem, &keys, n, t, batch, &mut seen);
                }
            }
        }
    }
    // The crowding produced every kind of answer.
    eprintln!("{seen:?}");
    assert!(
        seen.found > 0 && seen.empty > 0 && seen.ambiguous > 0,
        "{seen:?}"
    );
}

/// A roomier store (few collisions, many groups in one call): mostly `Found`, every key the
/// same as `lookup` gives.
#[test]
fn lookup_batch_equals_lookup_on_a_filled_store() {
    let seed = dta_testkit::test_seed(0xf111ed);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    for hash in [HashScheme::Native, HashScheme::Prototype] {
        let r = kw(dir.path(), 1 << 14, 4, 4, hash);
        let l = KeyWriteLayout::new(r.header()).unwrap();
        let mut sink = r.mem().sink();
        let mut keys = Vec::new();
        for _ in 0..3000 {
            let k: [u8; 4] = rng.gen();
            let d: [u8; 4] = rng.gen();
            l.apply(&k, &d, rng.gen_range(1..=4), &mut sink).unwrap();
            keys.extend_from_slice(&k);
        }
        for _ in 0..500 {
            keys.extend_from_slice(&rng.gen::<[u8; 4]>());
        }
        let mut seen = Seen::default();
        for n in [1u8, 2, 4] {
            check(&l, r.mem(), &keys, n, 1, 3500, &mut seen);
            check(&l, r.mem(), &keys, n, 2, 64, &mut seen);
        }
        assert!(
            seen.found > seen.empty && seen.empty > 0,
            "{hash:?} {seen:?}"
        );
    }
}

/// Lengths that do not fit the store, or a redundancy out of range, are errors that write
/// nothing; an empty batch is fine.
#[test]
fn lookup_batch_rejects_bad_lengths() {
    let dir = tempfile::tempdir().unwrap();
    let r = kw(dir.path(), 64, 4, 8, HashScheme::Native);
    let l = KeyWriteLayout::new(r.header()).unwrap();
    let mem = r.mem();
    l.apply(&[1, 2, 3, 4], &[9; 8], 2, &mut mem.sink()).unwrap();
    let keys = [1u8, 2, 3, 4, 5, 6, 7, 8];
    let mut out = [0xA5u8; 16];
    let mut ans = [Lookup::Ambiguous; 2];
    let bad_key = |got, want| QueryError::BadKeyLen { got, want };
    let bad_out = |have| QueryError::BadBatch {
        got: 2,
        need: 16,
        have,
    };
    let bad_n = |got| QueryError::BadRedundancy { got, store: 4 };
    // N > MAX_REDUNDANCY (the wire's 4) is rejected like any N above the store's.
    let cases: [(&[u8], usize, usize, u8, QueryError); 6] = [
        (&keys[..7], 16, 2, 2, bad_key(7, 8)),
        (&keys, 16, 1, 2, bad_key(8, 4)),
        (&keys, 15, 2, 2, bad_out(15)),
        (&keys, 8, 2, 2, bad_out(8)),
        (&keys, 16, 2, 0, bad_n(0)),
        (&keys, 16, 2, 9, bad_n(9)),
    ];
    for (k, out_len, n_ans, red, err) in cases {
        let got = l.lookup_batch(mem, k, Some(red), 1, &mut out[..out_len], &mut ans[..n_ans]);
        assert_eq!(got, Err(err));
        assert_eq!(out, [0xA5; 16]);
        assert_eq!(ans, [Lookup::Ambiguous; 2]);
    }
    assert_eq!(l.lookup_batch(mem, &[], None, 1, &mut [], &mut []), Ok(()));
    assert_eq!(
        l.lookup_batch(mem, &keys, Some(2), 1, &mut out, &mut ans),
        Ok(())
    );
    assert_eq!(ans, [Lookup::Found { votes: 2 }, Lookup::Empty]);
    assert_eq!(out[..8], [9; 8]);
    assert_eq!(out[8..], [0xA5; 8]);
}
