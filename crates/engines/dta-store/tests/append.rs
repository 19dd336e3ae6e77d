//! Append ([DTA A.3]): ordering, wrap-around, lapped readers, shards, 131 072 lists, and a
//! concurrent writer/reader that must never deliver an overwritten entry.

use std::sync::Arc;

use dta_store::{AppendLayout, AppendSpec, ApplyError, ListReader, Region, StoreSpec};

fn make(dir: &tempfile::TempDir, lists: u32, capacity: u64, entry_len: u8, batch: u32) -> Region {
    let spec = StoreSpec::Append(AppendSpec {
        lists,
        capacity,
        entry_len,
        batch,
        record: Default::default(),
    });
    Region::create(&dir.path().join("ap"), "events", &spec, true).unwrap()
}

fn entry(list: u32, i: u64) -> [u8; 16] {
    let mut e = [0u8; 16];
    e[..8].copy_from_slice(&i.to_le_bytes());
    e[8..12].copy_from_slice(&list.to_le_bytes());
    e[12..].copy_from_slice(&(i as u32 ^ 0xA5A5_A5A5).to_le_bytes());
    e
}

/// Append `n` entries to `list` in batches of `batch`, like the translator.
fn append(r: &Region, l: &AppendLayout, list: u32, head: &mut u64, n: u64) {
    let mut buf = Vec::new();
    let mut sink = r.mem().sink();
    for i in *head..*head + n {
        buf.extend_from_slice(&entry(list, i));
        if buf.len() == l.batch() * 16 || i + 1 == *head + n {
            let first = i + 1 - (buf.len() / 16) as u64;
            l.write_entries(list, first, &buf, &mut sink).unwrap();
            buf.clear();
        }
    }
    *head += n;
}

fn indices(out: &[u8]) -> Vec<u64> {
    out.chunks_exact(16)
        .map(|e| {
            let i = u64::from_le_bytes(e[..8].try_into().unwrap());
            assert_eq!(
                e[12..],
                (i as u32 ^ 0xA5A5_A5A5).to_le_bytes(),
                "torn entry"
            );
            i
        })
        .collect()
}

#[test]
fn ordering_and_wrap_around() {
    let dir = tempfile::tempdir().unwrap();
    let r = make(&dir, 4, 64, 16, 4);
    let l = AppendLayout::new(r.header()).unwrap();
    let mut reader = ListReader::new(l.clone(), 2, 0, 1).unwrap();
    let mut other = ListReader::new(l.clone(), 1, 0, 1).unwrap();
    let mut head = 0;
    let mut got = vec![];
    for round in 0..10 {
        append(&r, &l, 2, &mut head, 30);
        let mut out = vec![];
        let p = reader.poll(r.mem(), usize::MAX, &mut out);
        assert_eq!(p.missed, 0, "round {round}");
        assert_eq!(p.entries, 30);
        got.extend(indices(&out));
    }
    assert_eq!(got, (0..300).collect::<Vec<_>>());
    assert_eq!(r.mem().load_u64(l.head_offset(2)).unwrap(), 300);
    // Other lists untouched.
    let mut out = vec![];
    assert_eq!(other.poll(r.mem(), 100, &mut out).entries, 0);
    assert_eq!(r.mem().load_u64(l.head_offset(1)).unwrap(), 0);
    // `max` limits a poll.
    let mut out = vec![];
    append(&r, &l, 2, &mut head, 8);
    assert_eq!(reader.poll(r.mem(), 5, &mut out).entries, 5);
    assert_eq!(reader.poll(r.mem(), 5, &mut out).entries, 3);
    assert_eq!(indices(&out), (300..308).collect::<Vec<_>>());
}

#[test]
fn batch_split_at_ring_end() {
    let dir = tempfile::tempdir().unwrap();
    let r = make(&dir, 2, 16, 16, 8);
    let l = AppendLayout::new(r.header()).unwrap();
    let mut batch = vec![];
    for i in 12..20u64 {
        batch.extend_from_slice(&entry(1, i));
    }
    l.write_entries(1, 12, &batch, &mut r.mem().sink()).unwrap();
    let mut b = [0u8; 16];
    for i in 12..20u64 {
        r.mem().read(l.entry_offset(1, i), &mut b).unwrap();
        assert_eq!(b, entry(1, i));
    }
    assert_eq!(l.entry_offset(1, 16), l.entry_offset(1, 0));
    assert_eq!(l.entry_offset(1, 0), l.rings_offset() + 16 * 16);
    assert_eq!(r.mem().load_u64(l.head_offset(1)).unwrap(), 20);
    // Shapes.
    let mut s = r.mem().sink();
    assert_eq!(
        l.write_entries(2, 0, &batch, &mut s),
        Err(ApplyError::BadListId)
    );
    assert_eq!(
        l.write_entries(1, 0, &batch[..15], &mut s),
        Err(ApplyError::BadDataLen)
    );
    assert_eq!(
        l.write_entries(1, 0, &vec![0; 17 * 16], &mut s),
        Err(ApplyError::BadDataLen)
    );
}

#[test]
fn lapped_reader_counts_missed_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let r = make(&dir, 1, 64, 16, 8);
    let l = AppendLayout::new(r.header()).unwrap();
    let mut reader = ListReader::new(l.clone(), 0, 0, 1).unwrap();
    let mut head = 0;
    append(&r, &l, 0, &mut head, 200);
    let mut out = vec![];
    let p = reader.poll(r.mem(), usize::MAX, &mut out);
    // The reader keeps one batch clear of the overwrite frontier: 200 + 8 - 64 = 144.
    assert_eq!(p.missed, 144);
    assert_eq!(p.entries, 56);
    assert_eq!(indices(&out), (144..200).collect::<Vec<_>>());
    // Then it follows without loss.
    append(&r, &l, 0, &mut head, 40);
    out.clear();
    let p = reader.poll(r.mem(), usize::MAX, &mut out);
    assert_eq!((p.entries, p.missed), (40, 0));
    assert_eq!(indices(&out), (200..240).collect::<Vec<_>>());
    // A reader starting at the head sees only new entries.
    let mut fresh = ListReader::new(l.clone(), 0, 0, 1).unwrap().with_tail(head);
    out.clear();
    assert_eq!(fresh.poll(r.mem(), 10, &mut out).entries, 0);
    append(&r, &l, 0, &mut head, 3);
    assert_eq!(fresh.poll(r.mem(), 10, &mut out).entries, 3);
    assert_eq!(indices(&out), vec![240, 241, 242]);
}

#[test]
fn shards_are_disjoint_and_complete() {
    let dir = tempfile::tempdir().unwrap();
    let r = make(&dir, 3, 256, 16, 4);
    let l = AppendLayout::new(r.header()).unwrap();
    let mut readers: Vec<_> = (0..3)
        .map(|s| ListReader::new(l.clone(), 1, s, 3).unwrap())
        .collect();
    let mut head = 0;
    let mut all = vec![];
    for _ in 0..5 {
        append(&r, &l, 1, &mut head, 37);
        for (s, rd) in readers.iter_mut().enumerate() {
            let mut out = vec![];
            let p = rd.poll(r.mem(), usize::MAX, &mut out);
            assert_eq!(p.missed, 0);
            let idx = indices(&out);
            assert!(idx.iter().all(|i| i % 3 == s as u64));
            assert!(idx.windows(2).all(|w| w[0] < w[1]));
            all.extend(idx);
        }
    }
    all.sort();
    assert_eq!(all, (0..185).collect::<Vec<_>>());
    assert!(ListReader::new(l.clone(), 1, 3, 3).is_err());
    assert!(ListReader::new(l.clone(), 1, 0, 0).is_err());
    assert!(ListReader::new(l, 3, 0, 1).is_err());
}

#[test]
fn many_lists() {
    let dir = tempfile::tempdir().unwrap();
    let r = make(&dir, 131_072, 32, 4, 16);
    let l = AppendLayout::new(r.header()).unwrap();
    assert_eq!(l.lists(), 131_072);
    let last = 131_071;
    l.write_entries(last, 0, &[1, 2, 3, 4, 5, 6, 7, 8], &mut r.mem().sink())
        .unwrap();
    let mut rd = ListReader::new(l.clone(), last, 0, 1).unwrap();
    let mut out = vec![];
    assert_eq!(rd.poll(r.mem(), 16, &mut out).entries, 2);
    assert_eq!(out, vec![1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(
        l.entry_offset(last, 31) + 4,
        r.mem().len(),
        "last list's ring ends the data area"
    );
    let too_many = StoreSpec::Append(AppendSpec {
        lists: 131_073,
        capacity: 32,
        entry_len: 4,
        batch: 16,
        record: Default::default(),
    });
    assert!(Region::create(&dir.path().join("x"), "x", &too_many, true).is_err());
    let one_batch_ring = StoreSpec::Append(AppendSpec {
        lists: 1,
        capacity: 16,
        entry_len: 4,
        batch: 16,
        record: Default::default(),
    });
    assert!(Region::create(&dir.path().join("y"), "y", &one_batch_ring, true).is_err());
}

#[test]
fn concurrent_reader_never_sees_overwritten_entries() {
    let dir = tempfile::tempdir().unwrap();
    let r = Arc::new(make(&dir, 1, 256, 16, 8));
    let l = AppendLayout::new(r.header()).unwrap();
    const TOTAL: u64 = 400_000;
    let w = {
        let (r, l) = (r.clone(), l.clone());
        std::thread::spawn(move || {
            let mut head = 0;
            while head < TOTAL {
                append(&r, &l, 0, &mut head, 8);
                // Pace the writer now and then so the reader both keeps up and gets lapped.
                if head % 4096 < 2048 {
                    for _ in 0..400 {
                        std::hint::spin_loop();
                    }
                }
            }
        })
    };
    let mut reader = ListReader::new(l.clone(), 0, 0, 1).unwrap();
    let (mut delivered, mut missed, mut last) = (0u64, 0u64, None::<u64>);
    let mut out = Vec::with_capacity(64 * 16);
    loop {
        out.clear();
        let p = reader.poll(r.mem(), 64, &mut out);
        for i in indices(&out) {
            assert!(
                last.is_none_or(|x| i > x),
                "out of order {i} after {last:?}"
            );
            last = Some(i);
        }
        delivered += p.entries as u64;
        missed += p.missed;
        if reader.tail() >= TOTAL {
            break;
        }
    }
    w.join().unwrap();
    println!("concurrent: delivered {delivered}, missed {missed}");
    assert_eq!(delivered + missed, TOTAL);
    assert!(delivered > 0);
}
