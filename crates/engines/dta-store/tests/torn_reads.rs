//! Consistent reads (docs/regions.md "Consistent reads"): a writer rewriting one key while
//! readers query it never makes a query return a value that was never written. Each write's data
//! is derived from a counter, so data torn between two writes shows up as parts that disagree:
//! Key-Write data carry the counter in every 8-byte word, a Postcarding path carries
//! `counter mod PC_VALUES + i` at hop i.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use dta_store::{
    HashScheme, KeyWriteLayout, KeyWriteSpec, Lookup, PostcardAnswer, PostcardingLayout,
    PostcardingSpec, Region, StoreSpec, ValueTable,
};

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

/// Postcarding reads per redundancy, over all reader threads: 3 redundancies × this >= 10^7.
const PC_READS_PER_N: u64 = 3_400_000;
/// B: the widest chunk (16 slots of 4 bytes and the check).
const PC_HOPS: usize = 16;
/// Path `i` starts at `i mod PC_VALUES`; V = 0..PC_VALUES + PC_HOPS.
const PC_VALUES: u64 = 1 << 12;

/// The path of write number `i`: hop h carries `i mod PC_VALUES + h`.
fn path_of(i: u64) -> [Option<u32>; PC_HOPS] {
    let base = (i % PC_VALUES) as u32;
    std::array::from_fn(|h| Some(base + h as u32))
}

/// Whether `p` is a path some write produced: all B hops, each hop h = the first + h.
fn path_was_written(p: &[u32]) -> bool {
    p.len() == PC_HOPS && p.iter().enumerate().all(|(h, v)| *v == p[0] + h as u32)
}

/// Hammer one Postcarding key at redundancy `n`; returns (reads, found answers, never-written
/// answers).
fn hammer_postcard(n: u8) -> (u64, u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let spec = StoreSpec::Postcarding(PostcardingSpec {
        chunks: 1 << 6,
        hops: PC_HOPS as u8,
        slot_bits: 32,
        redundancy: n,
        key_len: 4,
    });
    let region = Region::create(&dir.path().join("pc"), "pc", &spec, true).unwrap();
    let layout = PostcardingLayout::new(region.header()).unwrap();
    assert_eq!(layout.chunk_len(), PC_HOPS * 4 + 4);
    let table = ValueTable::range(&layout, (PC_VALUES + PC_HOPS as u64) as u32).unwrap();
    let key = [10, 0, 0, 2];
    let stop = AtomicBool::new(false);
    layout
        .apply_chunk(&key, &path_of(0), &mut region.mem().sink())
        .unwrap();
    let (region, layout, table, stop) = (&region, &layout, &table, &stop);
    std::thread::scope(|s| {
        s.spawn(move || {
            let mut sink = region.mem().sink();
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                layout.apply_chunk(&key, &path_of(i), &mut sink).unwrap();
            }
        });
        let readers: Vec<_> = (0..READERS)
            .map(|_| {
                s.spawn(move || {
                    let (mut found, mut bad) = (0u64, 0u64);
                    for _ in 0..PC_READS_PER_N / READERS {
                        let a = layout.query(region.mem(), &key, table).unwrap();
                        if let PostcardAnswer::Found(p) = a {
                            found += 1;
                            bad += !path_was_written(&p) as u64;
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
        (PC_READS_PER_N, found, bad)
    })
}

#[test]
fn postcarding_never_returns_a_torn_chunk() {
    let mut total = 0;
    for n in [1u8, 2, 4] {
        let (reads, found, bad) = hammer_postcard(n);
        eprintln!("postcarding N = {n}: {reads} reads, {found} found, {bad} never written");
        assert_eq!(
            bad, 0,
            "N = {n}: {bad} of {found} found paths were never written"
        );
        // A read between the writes of two copies sees copies that disagree (ambiguous), more
        // often the larger N; at least a tenth must still find a path for the test to mean much.
        assert!(
            found > reads / 10,
            "N = {n}: only {found} of {reads} reads found the key"
        );
        total += reads;
    }
    assert!(total >= 10_000_000);
}
