//! Consistent reads (docs/regions.md "Consistent reads"): a writer rewriting one key while
//! readers query it never makes a query return a value that was never written. Each write's data
//! is derived from a counter (every 8-byte chunk of the data is the counter), so a slot torn
//! between two writes shows up as chunks that disagree.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use dta_store::{HashScheme, KeyWriteLayout, KeyWriteSpec, Lookup, Region, StoreSpec};

/// Reads per redundancy, over all reader threads: 3 redundancies × this >= 10^7.
const READS_PER_N: u64 = 3_400_000;
const READERS: u64 = 2;
const DATA_LEN: usize = 64;

/// The data of write number `i`: the counter in each of its 8-byte chunks.
fn data_of(i: u64) -> [u8; DATA_LEN] {
    let mut d = [0u8; DATA_LEN];
    for c in d.chunks_exact_mut(8) {
        c.copy_from_slice(&i.to_le_bytes());
    }
    d
}

/// Whether `d` is the data of a write numbered at most `max`.
fn was_written(d: &[u8], max: u64) -> bool {
    let first = u64::from_le_bytes(d[..8].try_into().unwrap());
    first <= max && d.chunks_exact(8).all(|c| c == &d[..8])
}

/// Hammer one key at redundancy `n`; returns (reads, found answers, never-written answers).
fn hammer(n: u8) -> (u64, u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let spec = StoreSpec::KeyWrite(KeyWriteSpec {
        slots: 1 << 6,
        key_len: 4,
        data_len: DATA_LEN as u8,
        hash: HashScheme::Native,
        redundancy: n,
    });
    let region = Arc::new(Region::create(&dir.path().join("kw"), "kw", &spec, true).unwrap());
    let layout = Arc::new(KeyWriteLayout::new(region.header()).unwrap());
    let key = [10, 0, 0, 1];
    let written = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    // The first write happens before any reader starts.
    layout
        .apply(&key, &data_of(0), n, &mut region.mem().sink())
        .unwrap();
    let writer = {
        let (region, layout, written, stop) = (
            region.clone(),
            layout.clone(),
            written.clone(),
            stop.clone(),
        );
        std::thread::spawn(move || {
            let mut sink = region.mem().sink();
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                // Publish the counter before the write so readers accept every value up to it.
                written.store(i, Ordering::SeqCst);
                layout.apply(&key, &data_of(i), n, &mut sink).unwrap();
            }
        })
    };
    let readers: Vec<_> = (0..READERS)
        .map(|_| {
            let (region, layout, written) = (region.clone(), layout.clone(), written.clone());
            std::thread::spawn(move || {
                let (mut found, mut bad) = (0u64, 0u64);
                let mut out = [0u8; DATA_LEN];
                for _ in 0..READS_PER_N / READERS {
                    let a = layout
                        .lookup(region.mem(), &key, None, 1, &mut out)
                        .unwrap();
                    let max = written.load(Ordering::SeqCst);
                    if let Lookup::Found { .. } = a {
                        found += 1;
                        bad += !was_written(&out, max) as u64;
                    }
                }
                (found, bad)
            })
        })
        .collect();
    let (mut found, mut bad) = (0, 0);
    for r in readers {
        let (f, b) = r.join().unwrap();
        found += f;
        bad += b;
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    (READS_PER_N, found, bad)
}

#[test]
fn key_write_never_returns_a_torn_slot() {
    let mut total = 0;
    for n in [1u8, 2, 4] {
        let (reads, found, bad) = hammer(n);
        eprintln!("N = {n}: {reads} reads, {found} found, {bad} never written");
        assert_eq!(
            bad, 0,
            "N = {n}: {bad} of {found} found answers were never written"
        );
        assert!(
            found > reads / 2,
            "N = {n}: only {found} of {reads} reads found the key"
        );
        total += reads;
    }
    assert!(total >= 10_000_000);
}
