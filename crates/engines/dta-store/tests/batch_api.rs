//! The performance APIs: batch offsets, slot encoding, allocation-free lookup and
//! prefetch give exactly the answers of the one-report APIs ([DTA A.1] Algorithms 1-2, A.4).

use dta_store::key_write::MAX_SLOT;
use dta_store::{
    HashScheme, KeyIncrementLayout, KeyIncrementSpec, KeyWriteAnswer, KeyWriteLayout, KeyWriteSpec,
    Lookup, Region, StoreSpec, VecSink, MAX_REDUNDANCY,
};
use proptest::prelude::*;

fn kw(dir: &std::path::Path, slots: u64, key_len: u8, data_len: u8, hash: HashScheme) -> Region {
    let spec = StoreSpec::KeyWrite(KeyWriteSpec {
        slots,
        key_len,
        data_len,
        hash,
        redundancy: MAX_REDUNDANCY,
    });
    Region::create(
        &dir.join(format!("kw{key_len}-{data_len}-{hash:?}")),
        "kw",
        &spec,
        true,
    )
    .unwrap()
}

#[test]
fn slot_offsets_and_encode_slot_match_apply() {
    let dir = tempfile::tempdir().unwrap();
    for hash in [HashScheme::Native, HashScheme::Prototype] {
        let r = kw(dir.path(), 1 << 10, 4, 12, hash);
        let l = KeyWriteLayout::new(r.header()).unwrap();
        for k in 0u32..200 {
            let key = k.to_be_bytes();
            let data = [k as u8; 12];
            let mut offs = [0u64; MAX_REDUNDANCY as usize];
            let tag = l.slot_offsets(&key, 4, &mut offs);
            for n in 0..4u8 {
                assert_eq!(offs[n as usize], l.slot_offset(&key, n));
            }
            // Writing the encoded slot at those offsets gives the image apply() gives.
            let mut a = VecSink::new(r.mem().len() as usize);
            let mut b = a.clone();
            l.apply(&key, &data, 4, &mut a).unwrap();
            let mut slot = [0xAAu8; MAX_SLOT];
            let len = l.encode_slot(tag, &data, &mut slot).unwrap();
            assert_eq!(len, l.slot_len());
            for &o in &offs[..4] {
                dta_store::MemSink::write(&mut b, o, &slot[..len]).unwrap();
            }
            assert_eq!(a.bytes, b.bytes, "key {k} {hash:?}");
            // apply() also counts its N copies in the live counters.
            assert_eq!(a.tally.writes, 4);
        }
        let mut slot = [0u8; MAX_SLOT];
        let tag = l.slot_offsets(&[1, 2, 3, 4], 1, &mut [0; MAX_REDUNDANCY as usize]);
        assert!(l.encode_slot(tag, &[0; 4], &mut slot).is_err());
        assert!(l.encode_slot(tag, &[0; 13], &mut slot).is_err());
        let mut sink = VecSink::new(r.mem().len() as usize);
        assert!(l.apply(&[1, 2, 3], &[0; 12], 1, &mut sink).is_err());
    }
}

#[test]
fn counter_offsets_match_counter_offset() {
    let dir = tempfile::tempdir().unwrap();
    for hash in [HashScheme::Native, HashScheme::Prototype] {
        let spec = StoreSpec::KeyIncrement(KeyIncrementSpec {
            counters: 1 << 12,
            key_len: 4,
            hash,
            redundancy: 3,
            windows: 0,
            window_ms: 0,
        });
        let r = Region::create(&dir.path().join(format!("ki{hash:?}")), "ki", &spec, true).unwrap();
        let l = KeyIncrementLayout::new(r.header()).unwrap();
        for k in 0u32..500 {
            let mut offs = [0u64; MAX_REDUNDANCY as usize];
            l.counter_offsets(&k.to_be_bytes(), 3, &mut offs);
            for n in 0..3u8 {
                assert_eq!(offs[n as usize], l.counter_offset(&k.to_be_bytes(), n));
            }
        }
    }
}

#[test]
fn prefetch_never_faults_or_writes() {
    let dir = tempfile::tempdir().unwrap();
    let r = kw(dir.path(), 1 << 6, 4, 4, HashScheme::Native);
    let mem = r.mem();
    for off in [0, 7, mem.len() - 1, mem.len(), mem.len() + 4096, u64::MAX] {
        mem.prefetch(off);
    }
    let mut all = vec![0u8; mem.len() as usize];
    mem.read(0, &mut all).unwrap();
    assert!(all.iter().all(|&b| b == 0));
}

fn same(l: &KeyWriteLayout, mem: &dta_store::RegionMem, key: &[u8], n: u8, t: u8) {
    let mut out = [0u8; 64];
    if t > n {
        // A threshold above the copies read can never be met: both refuse it alike.
        let want = dta_store::QueryError::BadThreshold { got: t, n };
        assert_eq!(l.query(mem, key, Some(n), t).unwrap_err(), want);
        assert_eq!(l.lookup(mem, key, Some(n), t, &mut out).unwrap_err(), want);
        return;
    }
    let got = l.lookup(mem, key, Some(n), t, &mut out).unwrap();
    match (l.query(mem, key, Some(n), t).unwrap(), got) {
        (KeyWriteAnswer::Found { data, votes }, Lookup::Found { votes: v }) => {
            assert_eq!(votes, v);
            assert_eq!(&out[..data.len()], &data[..]);
        }
        (KeyWriteAnswer::Empty, Lookup::Empty) => {}
        (KeyWriteAnswer::Ambiguous { candidates }, Lookup::Ambiguous) => {
            assert!(candidates.iter().any(|(d, _)| d[..] == out[..d.len()]));
        }
        (q, l) => panic!("query {q:?} but lookup {l:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// On a small, crowded store (many overwrites, ambiguous and empty answers), lookup answers
    /// exactly what query answers.
    #[test]
    fn lookup_equals_query(writes in proptest::collection::vec((0u32..64, any::<u8>(), 1u8..=4), 0..300),
                           n in 1u8..=4, t in 0u8..=3, native in any::<bool>()) {
        let dir = tempfile::tempdir().unwrap();
        let hash = if native { HashScheme::Native } else { HashScheme::Prototype };
        let r = kw(dir.path(), 32, 4, 4, hash);
        let l = KeyWriteLayout::new(r.header()).unwrap();
        let mut sink = r.mem().sink();
        for (k, v, red) in writes {
            l.apply(&k.to_be_bytes(), &[v; 4], red, &mut sink).unwrap();
        }
        for k in 0u32..80 {
            same(&l, r.mem(), &k.to_be_bytes(), n, t);
        }
        let mut short = [0u8; 2];
        prop_assert!(l.lookup(r.mem(), &0u32.to_be_bytes(), Some(n), t, &mut short).is_err());
    }
}
