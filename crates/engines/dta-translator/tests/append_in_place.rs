//! Append copied once ([DTA A.3], reserve-then-publish): a translator that maps the Append store
//! writes each entry straight into its slot and publishes the head when the batch is complete.
//! It must leave exactly what the buffered path (a remote sink's batch buffer) leaves, count the
//! same writes, and a reader polling while it writes must never get an entry that is not
//! complete or not yet published.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::Instant;

use dta_store::{AppendLayout, AppendSpec, ListReader, Region, SinkError, StoreSpec};
use dta_translator::{RegionSinks, Sinks, Stats, Translator, TranslatorConfig};
use dta_wire::native::DatagramBuilder;
use dta_wire::{Priority, Report};
use rand::{Rng, SeedableRng};

const ENTRY: usize = 16;

/// The co-located sink without its mapping ([`Sinks::region_mem`] is `None`): every operation
/// through the trait, as a remote (RDMA) sink, so the translator batches Append entries in its
/// buffer.
struct Remote(RegionSinks);

impl Sinks for Remote {
    fn write(
        &mut self,
        store: usize,
        offset: u64,
        bytes: &[u8],
        immediate: bool,
    ) -> Result<(), SinkError> {
        self.0.write(store, offset, bytes, immediate)
    }
    fn fetch_add(&mut self, store: usize, offset: u64, add: u64) -> Result<(), SinkError> {
        self.0.fetch_add(store, offset, add)
    }
    fn count(&mut self, store: usize, writes: u64, added: u64) -> Result<(), SinkError> {
        self.0.count(store, writes, added)
    }
}

fn region(dir: &std::path::Path, name: &str, lists: u32, capacity: u64, batch: u32) -> Arc<Region> {
    let spec = StoreSpec::Append(AppendSpec {
        lists,
        capacity,
        entry_len: ENTRY as u8,
        batch,
        record: Default::default(),
    });
    Arc::new(Region::create(&dir.join(name), name, &spec, true).unwrap())
}

/// Entry number `i` of `list`: its index, its list, and a check word over both.
fn entry(list: u32, i: u64) -> [u8; ENTRY] {
    let mut e = [0u8; ENTRY];
    e[..8].copy_from_slice(&i.to_le_bytes());
    e[8..12].copy_from_slice(&list.to_le_bytes());
    e[12..].copy_from_slice(&(i as u32 ^ list.rotate_left(7) ^ 0xA5A5_A5A5).to_le_bytes());
    e
}

/// The index of an entry read back, after checking that it is whole and of `list`.
fn index_of(list: u32, e: &[u8]) -> u64 {
    let i = u64::from_le_bytes(e[..8].try_into().unwrap());
    assert_eq!(e, entry(list, i), "an incomplete or foreign entry");
    i
}

fn datagram(seq: u32, reports: &[(u32, [u8; ENTRY])]) -> Vec<u8> {
    let mut buf = vec![0u8; 2000];
    let mut b = DatagramBuilder::new(&mut buf, Priority::Medium, false, 3, seq).unwrap();
    for (list, e) in reports {
        b.push(&Report::Append {
            list_id: *list,
            data: e,
            immediate: false,
        })
        .unwrap();
    }
    let len = b.finish();
    buf.truncate(len);
    buf
}

fn src() -> std::net::SocketAddr {
    "127.0.0.1:5555".parse().unwrap()
}

/// The same datagrams through the in-place path and through the buffered one: the same bytes in
/// the region (entries, wrap-around at the ring's end, heads after a partial flush), the same
/// writes, bytes and batches counted.
#[test]
fn in_place_matches_the_buffered_batches() {
    let dir = tempfile::tempdir().unwrap();
    let a = region(dir.path(), "a", 5, 64, 8);
    let b = region(dir.path(), "b", 5, 64, 8);
    let cfg = TranslatorConfig::default();
    let mut direct =
        Translator::colocated(&cfg, vec![a.clone()], Arc::new(Stats::default())).unwrap();
    let mut buffered = Translator::new(
        &cfg,
        &[dta_store::StoreInfo::from_region(&b).unwrap()],
        Remote(RegionSinks::new(vec![b.clone()])),
        Arc::new(Stats::default()),
    )
    .unwrap();
    assert!(direct.sinks().region_mem(0).is_some());
    let mut rng = rand::rngs::StdRng::seed_from_u64(0xA99E);
    let mut next = [0u64; 5];
    let now = Instant::now();
    for seq in 0..300u32 {
        let reports: Vec<(u32, [u8; ENTRY])> = (0..rng.gen_range(1..40))
            .map(|_| {
                // List 4 is quiet (mostly partial batches), the others wrap many times.
                let list = if rng.gen_bool(0.02) {
                    4
                } else {
                    rng.gen_range(0..4)
                };
                next[list as usize] += 1;
                (list, entry(list, next[list as usize] - 1))
            })
            .collect();
        let d = datagram(seq, &reports);
        direct.handle_datagram(&d, src(), now);
        buffered.handle_datagram(&d, src(), now);
        if seq % 97 == 0 {
            direct.flush_all();
            buffered.flush_all();
        }
    }
    direct.flush_all();
    buffered.flush_all();
    let image = |r: &Region| {
        let mut v = vec![0u8; r.mem().len() as usize];
        r.mem().read(0, &mut v).unwrap();
        v
    };
    assert_eq!(image(&a), image(&b));
    let l = AppendLayout::new(a.header()).unwrap();
    for (list, &n) in next.iter().enumerate() {
        assert_eq!(a.mem().load_u64(l.head_offset(list as u32)).unwrap(), n);
    }
    let (s, s2) = (direct.stats(), buffered.stats());
    assert!(s.append_partial_batches.load(Relaxed) > 0);
    for (what, x, y) in [
        ("writes", &s.writes, &s2.writes),
        ("write_bytes", &s.write_bytes, &s2.write_bytes),
        ("append_batches", &s.append_batches, &s2.append_batches),
        (
            "append_partial_batches",
            &s.append_partial_batches,
            &s2.append_partial_batches,
        ),
    ] {
        assert_eq!(x.load(Relaxed), y.load(Relaxed), "{what}");
    }
    assert_eq!(s.total_rejected(), 0);
}

/// A reader polls a list while the translator appends to it in place (batches spanning
/// datagrams, the ring lapped over and over): every entry it gets is whole, published (never an
/// older lap's entry from a slot reserved but not yet published, which would come out of order)
/// and in order, and what it gets plus what it counts as missed is every entry.
#[test]
fn a_polling_reader_never_gets_an_incomplete_entry() {
    let dir = tempfile::tempdir().unwrap();
    let r = region(dir.path(), "ap", 2, 256, 8);
    let l = AppendLayout::new(r.header()).unwrap();
    const TOTAL: u64 = 200_000;
    // 13 reports per datagram: batches of 8 span datagrams.
    const PER: u64 = 13;
    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicU64::new(0));
    let w = {
        let (r, stop, written) = (r.clone(), stop.clone(), written.clone());
        std::thread::spawn(move || {
            let mut t =
                Translator::colocated(&TranslatorConfig::default(), vec![r], Default::default())
                    .unwrap();
            let now = Instant::now();
            let mut i = 0u64;
            let mut seq = 0u32;
            while i < TOTAL && !stop.load(Relaxed) {
                let reports: Vec<(u32, [u8; ENTRY])> = (i..(i + PER).min(TOTAL))
                    .map(|k| (0, entry(0, k)))
                    .collect();
                i += reports.len() as u64;
                t.handle_datagram(&datagram(seq, &reports), src(), now);
                seq += 1;
                // Pace the writer now and then so the reader both keeps up and gets lapped.
                if i % 4096 < 2048 {
                    for _ in 0..300 {
                        std::hint::spin_loop();
                    }
                }
            }
            t.flush_all();
            written.store(t.stats().reports_of(dta_wire::Opcode::Append), Relaxed);
        })
    };
    let mut reader = ListReader::new(l, 0, 0, 1).unwrap();
    let (mut delivered, mut missed, mut last) = (0u64, 0u64, None::<u64>);
    let mut out = Vec::with_capacity(64 * ENTRY);
    let started = Instant::now();
    while reader.tail() < TOTAL {
        out.clear();
        let p = reader.poll(r.mem(), 64, &mut out);
        for e in out.chunks_exact(ENTRY) {
            let i = index_of(0, e);
            if let Some(x) = last {
                if i <= x {
                    stop.store(true, Relaxed);
                    panic!("entry {i} after {x}: a slot read before its batch was published");
                }
            }
            last = Some(i);
        }
        delivered += p.entries as u64;
        missed += p.missed;
        assert!(
            started.elapsed().as_secs() < 120,
            "the reader never reached the end"
        );
    }
    w.join().unwrap();
    assert_eq!(written.load(Relaxed), TOTAL);
    println!("in place: delivered {delivered}, missed {missed}");
    assert_eq!(delivered + missed, TOTAL);
    assert!(delivered > 0);
}
