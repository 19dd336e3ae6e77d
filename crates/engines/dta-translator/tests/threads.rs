//! Several translator threads over the same stores (`dta_translator::shard`): Key-Write
//! and Key-Increment applied by whichever thread receives them; Postcarding flows, Append lists
//! and sketches applied only by their owner thread, to which the others hand them.

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dta_store::{AppendLayout, KeyIncrementLayout, PostcardAnswer, PostcardingLayout, ValueTable};
use dta_translator::classify::Lanes;
use dta_translator::{ingest, RegionSinks, Shards, Stats, Translator, TranslatorConfig};
use dta_wire::native::DatagramBuilder;
use dta_wire::{Opcode, Priority, Report};
use rand::{Rng, SeedableRng};

fn sharded(
    regions: &[Arc<dta_store::Region>],
    shards: &Arc<Shards>,
) -> Vec<Translator<RegionSinks>> {
    (0..shards.threads())
        .map(|i| common::translator(regions).with_shard(shards.shard(i)))
        .collect()
}

fn image(r: &dta_store::Region) -> Vec<u8> {
    let mut v = vec![0u8; r.mem().len() as usize];
    r.mem().read(0, &mut v).unwrap();
    v
}

/// One datagram of mixed reports from `reporter`: Key-Write (both shapes), Key-Increment, the
/// postcard of hop `reporter` for several flows (each switch on the path is another reporter,
/// so another socket and, with `SO_REUSEPORT`, possibly another thread), Append, and this
/// reporter's Count-Min column `seq` of the sketch. Reporters 0-4 are the path's switches,
/// 0-1 the sketch's reporters; higher ones send the rest only.
fn datagram(rng: &mut impl Rng, reporter: u32, seq: u32, flows: &[[u8; 4]]) -> Vec<u8> {
    let mut buf = vec![0u8; 9000];
    let mut b = DatagramBuilder::new(&mut buf, Priority::Medium, false, reporter, seq).unwrap();
    for _ in 0..8 {
        let k: [u8; 4] = rng.gen::<u32>().to_be_bytes();
        let d: [u8; 4] = rng.gen::<u32>().to_be_bytes();
        b.push(&Report::KeyWrite {
            key: &k,
            data: &d,
            redundancy: 2,
            immediate: false,
        })
        .unwrap();
        let k13: [u8; 13] = rng.gen();
        let d8: [u8; 8] = rng.gen();
        b.push(&Report::KeyWrite {
            key: &k13,
            data: &d8,
            redundancy: 1,
            immediate: false,
        })
        .unwrap();
        let ki = [0, 0, 0, rng.gen_range(0..16u8)];
        b.push(&Report::KeyIncrement {
            key: &ki,
            counter: rng.gen_range(1..100),
            redundancy: 2,
            immediate: false,
        })
        .unwrap();
        let ap: [u8; 4] = rng.gen::<u32>().to_be_bytes();
        b.push(&Report::Append {
            list_id: rng.gen_range(0..4),
            data: &ap,
            immediate: false,
        })
        .unwrap();
    }
    for (f, key) in flows.iter().enumerate().filter(|_| reporter < 5) {
        b.push(&Report::Postcard {
            key,
            hop: reporter as u8,
            path_len: 5,
            value: (f as u32 * 5 + reporter) % 1000,
            immediate: false,
        })
        .unwrap();
    }
    if reporter < 2 && seq < 8 {
        // Two rows of big-endian u32 counters.
        let mut data = [0u8; 8];
        data[..4].copy_from_slice(&(seq + 1).to_be_bytes());
        data[4..].copy_from_slice(&(reporter + 1).to_be_bytes());
        b.push(&Report::SketchColumn {
            sketch_id: 1,
            column: seq as u16,
            epoch: 1,
            data: &data,
            immediate: false,
        })
        .unwrap();
    }
    let len = b.finish();
    buf.truncate(len);
    buf
}

/// Driven deterministically from one test thread: every datagram goes to the thread its source
/// hashes to, and both threads apply what they were handed after each datagram. The stores must
/// end byte-identical to a single translator's fed the same datagrams.
#[test]
fn two_shards_leave_the_single_translator_image() {
    let dir = tempfile::tempdir().unwrap();
    let regions = common::regions(dir.path());
    let shards = Shards::new(2, 64);
    let mut ts = sharded(&regions, &shards);
    let dir1 = tempfile::tempdir().unwrap();
    let reference_regions = common::regions(dir1.path());
    let mut reference = common::translator(&reference_regions);

    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5a4d);
    let now = Instant::now();
    let mut datagrams = 0;
    for round in 0..8u32 {
        let flows: Vec<[u8; 4]> = (0..6).map(|_| rng.gen::<u32>().to_be_bytes()).collect();
        for reporter in 0..5u32 {
            let d = datagram(&mut rng, reporter, round, &flows);
            let src: SocketAddr = format!("127.0.0.{}:4000", reporter + 1).parse().unwrap();
            ts[(reporter as usize * 7 + 3) % 2].handle_datagram(&d, src, now);
            for t in ts.iter_mut() {
                t.drain_inbox(now);
            }
            reference.handle_datagram(&d, src, now);
            datagrams += 1;
        }
    }
    for t in ts.iter_mut() {
        t.flush_all();
    }
    for t in ts.iter_mut() {
        t.flush_all();
    }
    reference.flush_all();

    for (i, (name, _)) in common::specs().iter().enumerate() {
        assert!(
            image(&regions[i]) == image(&reference_regions[i]),
            "store {name} differs from the single translator's"
        );
        assert!(
            image(&regions[i]).iter().any(|&b| b != 0),
            "store {name} empty"
        );
    }
    let stats: Vec<Arc<Stats>> = ts.iter().map(|t| t.stats().clone()).collect();
    let sum = Stats::sum(&stats);
    let r = reference.stats();
    assert_eq!(sum.datagrams.load(Relaxed), datagrams);
    for op in dta_translator::stats::PRIMITIVES {
        assert_eq!(sum.reports_of(op), r.reports_of(op), "{op:?}");
    }
    assert_eq!(sum.total_rejected(), 0);
    assert_eq!(r.total_rejected(), 0);
    assert!(sum.forwarded.load(Relaxed) > 0, "nothing was handed over");
    assert_eq!(sum.writes.load(Relaxed), r.writes.load(Relaxed));
}

/// Datagrams of one shape (only postcards, only Append entries) take the lean path on each
/// thread, which hands the postcards and entries another thread owns to it: the stores and
/// counters end as a single translator's. Each round's flows have one owner, so the paths that
/// share a chunk of the store are written in the single translator's order (two threads
/// completing paths at once may otherwise leave either one's chunk in a shared slot).
#[test]
fn two_shards_forward_from_the_lean_path() {
    let dir = tempfile::tempdir().unwrap();
    let regions = common::regions(dir.path());
    let shards = Shards::new(2, 64);
    let mut ts = sharded(&regions, &shards);
    let dir1 = tempfile::tempdir().unwrap();
    let reference_regions = common::regions(dir1.path());
    let mut reference = common::translator(&reference_regions);
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x1EA9);
    let now = Instant::now();
    let mut seq = 0;
    for round in 0..8u32 {
        let flows: Vec<[u8; 4]> = std::iter::repeat_with(|| rng.gen::<u32>().to_be_bytes())
            .filter(|k| dta_store::hash::fnv1a64(k) % 2 == u64::from(round % 2))
            .take(20)
            .collect();
        for reporter in 0..5u32 {
            let mut one_shape = vec![];
            for postcards in [true, false] {
                let mut buf = vec![0u8; 9000];
                let mut b =
                    DatagramBuilder::new(&mut buf, Priority::Medium, false, reporter, seq).unwrap();
                seq += 1;
                for (f, key) in flows.iter().enumerate() {
                    let entry = (round * 100 + f as u32).to_be_bytes();
                    let r = if postcards {
                        Report::Postcard {
                            key,
                            hop: reporter as u8,
                            path_len: 5,
                            value: (f as u32 * 5 + reporter) % 1000,
                            immediate: false,
                        }
                    } else {
                        Report::Append {
                            list_id: f as u32 % 4,
                            data: &entry,
                            immediate: false,
                        }
                    };
                    b.push(&r).unwrap();
                }
                let len = b.finish();
                buf.truncate(len);
                one_shape.push(buf);
            }
            let src: SocketAddr = format!("127.0.0.{}:4000", reporter + 1).parse().unwrap();
            for d in &one_shape {
                ts[(reporter as usize) % 2].handle_datagram(d, src, now);
                for t in ts.iter_mut() {
                    t.drain_inbox(now);
                }
                reference.handle_datagram(d, src, now);
            }
        }
    }
    for _ in 0..2 {
        for t in ts.iter_mut() {
            t.flush_all();
        }
    }
    reference.flush_all();
    for (i, (name, _)) in common::specs().iter().enumerate() {
        if *name == "paths" || *name == "events" {
            assert!(
                image(&regions[i]) == image(&reference_regions[i]),
                "store {name} differs from the single translator's"
            );
            assert!(image(&regions[i]).iter().any(|&b| b != 0), "{name} empty");
        }
    }
    let stats: Vec<Arc<Stats>> = ts.iter().map(|t| t.stats().clone()).collect();
    let sum = Stats::sum(&stats);
    let r = reference.stats();
    for op in [Opcode::Postcarding, Opcode::Append] {
        assert_eq!(sum.reports_of(op), r.reports_of(op), "{op:?}");
        assert_eq!(r.reports_of(op), 8 * 5 * 20);
    }
    assert_eq!(sum.total_rejected(), 0);
    assert!(sum.forwarded.load(Relaxed) > 0, "nothing was handed over");
    assert_eq!(sum.writes.load(Relaxed), r.writes.load(Relaxed));
    assert_eq!(
        sum.postcard_chunks_complete.load(Relaxed),
        r.postcard_chunks_complete.load(Relaxed)
    );
}

/// Two real threads on two `SO_REUSEPORT` sockets of one port, fed by sixteen reporters, each
/// with its own socket (so both threads receive, unless all sixteen hash alike: 2^-15):
/// Key-Increment sums exact, every complete path found, every appended entry counted.
#[test]
fn run_threads_over_reuseport_sockets() {
    sixteen_reporters(false);
}

/// The same behind the first-stage classifier (one socket, one receiving thread queueing to the
/// two translator threads by source): the same results, nothing shed at this rate, and the
/// classifier spreads the sources over both threads as `SO_REUSEPORT` does.
#[test]
fn run_classified_over_one_socket() {
    sixteen_reporters(true);
}

fn sixteen_reporters(classified: bool) {
    let dir = tempfile::tempdir().unwrap();
    let regions = common::regions(dir.path());
    let shards = Shards::new(2, 1024);
    let mut ts = sharded(&regions, &shards);
    let cfg = TranslatorConfig::default();
    let sockets = dta_translator::prio_sockets::bind(
        "127.0.0.1:0".parse().unwrap(),
        if classified { 1 } else { 2 },
        cfg.recv_buffer,
    )
    .unwrap();
    let to = sockets[0].local_addr().unwrap();
    assert!(sockets.iter().all(|s| s.local_addr().unwrap() == to));
    let stop = AtomicBool::new(false);
    let classifier_stats = Arc::new(Stats::default());
    let lanes = Lanes::new(2, cfg.classifier_depths(), 64).unwrap();
    let per_thread_stats: Vec<Arc<Stats>> = ts.iter().map(|t| t.stats().clone()).collect();
    let mut stats = per_thread_stats.clone();
    stats.push(classifier_stats.clone());

    let ki = KeyIncrementLayout::new(regions[2].header()).unwrap();
    let pc = PostcardingLayout::new(regions[3].header()).unwrap();
    let mut expected_ki = [0u64; 16];
    let mut all_flows = vec![];
    let mut appends = 0u64;
    let mut sent = 0u64;
    std::thread::scope(|s| {
        let runner = s.spawn(|| {
            if classified {
                ingest::run_classified(
                    &mut ts,
                    &sockets[0],
                    &lanes,
                    &cfg.allow,
                    &classifier_stats,
                    64,
                    &stop,
                )
            } else {
                ingest::run_threads(&mut ts, &sockets, 64, &stop)
            }
        });
        let senders: Vec<UdpSocket> = (0..16)
            .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
            .collect();
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x2c0e);
        for round in 0..40u32 {
            let flows: Vec<[u8; 4]> = (0..6).map(|_| rng.gen::<u32>().to_be_bytes()).collect();
            for reporter in 0..16u32 {
                let d = datagram(&mut rng, reporter, round, &flows);
                // Tally what this datagram carries.
                let dg = dta_wire::native::Datagram::parse(&d).unwrap();
                for r in dg.reports() {
                    match r {
                        Report::KeyIncrement { key, counter, .. } => {
                            expected_ki[key[3] as usize] += counter
                        }
                        Report::Append { .. } => appends += 1,
                        _ => {}
                    }
                }
                senders[reporter as usize].send_to(&d, to).unwrap();
                sent += 1;
                // Pace a little: loopback drops nothing at this rate.
                std::thread::sleep(Duration::from_micros(100));
            }
            all_flows.extend(flows);
        }
        // Stopped once every datagram was taken (the assertion below shows any shortfall).
        let deadline = Instant::now() + dta_testkit::WAIT;
        while Stats::sum(&stats).datagrams.load(Relaxed) < sent && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        stop.store(true, Relaxed);
        runner.join().unwrap().unwrap();
    });

    let sum = Stats::sum(&stats);
    assert_eq!(
        sum.datagrams.load(Relaxed),
        sent,
        "datagrams lost on loopback"
    );
    assert_eq!(sum.total_rejected(), 0);
    let per_thread: Vec<u64> = per_thread_stats
        .iter()
        .map(|s| s.datagrams.load(Relaxed))
        .collect();
    assert!(
        per_thread.iter().all(|&n| n > 0),
        "a thread was left idle: {per_thread:?}"
    );
    assert_eq!(sum.shed.iter().map(|c| c.load(Relaxed)).sum::<u64>(), 0);
    assert!(sum.forwarded.load(Relaxed) > 0);
    for (k, want) in expected_ki.iter().enumerate() {
        // Count-min never underestimates; with 16 keys in 4096 counters it is exact.
        assert_eq!(
            ki.query(regions[2].mem(), &[0, 0, 0, k as u8], None),
            Ok(*want),
            "key {k}"
        );
    }
    // 240 paths in 1024 chunks (N = 2): some are overwritten by later ones ([DTA A.6]), none may
    // be answered wrong, and most must be found.
    let table = ValueTable::range(&pc, 1000).unwrap();
    let mut found = 0;
    for (f, key) in all_flows.iter().enumerate() {
        let want: Vec<u32> = (0..5).map(|h| ((f % 6) as u32 * 5 + h) % 1000).collect();
        match pc.query(regions[3].mem(), key, &table).unwrap() {
            PostcardAnswer::Found(v) => {
                assert_eq!(v, want, "flow {f}");
                found += 1;
            }
            PostcardAnswer::Empty | PostcardAnswer::Ambiguous => {}
        }
    }
    assert!(
        found * 10 >= all_flows.len() * 8,
        "{found} of {} paths",
        all_flows.len()
    );
    assert_eq!(
        sum.postcard_chunks_complete.load(Relaxed),
        all_flows.len() as u64,
        "every path completes in its owner's cache"
    );
    let ap = AppendLayout::new(regions[4].header()).unwrap();
    let heads: u64 = (0..ap.lists())
        .map(|l| regions[4].mem().load_u64(ap.head_offset(l)).unwrap())
        .sum();
    assert_eq!(heads, appends);
    assert_eq!(sum.reports_of(Opcode::Append), appends);
}

/// Stopping behind the classifier: what the kernel already holds when the stop comes is queued
/// and applied before the final flush. Here every datagram is sent before the translator starts
/// and the stop is already set, so only that drain can apply them.
#[test]
fn run_classified_applies_what_arrived_before_the_stop() {
    let dir = tempfile::tempdir().unwrap();
    let regions = common::regions(dir.path());
    let shards = Shards::new(2, 1024);
    let mut ts = sharded(&regions, &shards);
    let cfg = TranslatorConfig::default();
    let socket = ingest::PrioSockets::single(
        ingest::bind("127.0.0.1:0".parse().unwrap(), cfg.recv_buffer).unwrap(),
    );
    let to = socket.local_addr().unwrap();
    let senders: Vec<UdpSocket> = (0..8)
        .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
        .collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0xd2a1);
    let mut appends = 0;
    let mut sent = 0;
    for round in 0..30u32 {
        for (reporter, tx) in senders.iter().enumerate() {
            let d = datagram(&mut rng, 8 + reporter as u32, round, &[]);
            appends += dta_wire::native::Datagram::parse(&d)
                .unwrap()
                .reports()
                .filter(|r| matches!(r, Report::Append { .. }))
                .count() as u64;
            tx.send_to(&d, to).unwrap();
            sent += 1;
        }
    }
    let classifier_stats = Arc::new(Stats::default());
    // Queues smaller than what waits in the kernel: the drain waits for room, it does not shed.
    let depths = dta_translator::config::Depths {
        low: 4,
        medium: 4,
        high: 4,
    };
    let lanes = Lanes::new(2, depths, 16).unwrap();
    let stop = AtomicBool::new(true);
    ingest::run_classified(
        &mut ts,
        &socket,
        &lanes,
        &cfg.allow,
        &classifier_stats,
        16,
        &stop,
    )
    .unwrap();
    let mut all: Vec<Arc<Stats>> = ts.iter().map(|t| t.stats().clone()).collect();
    all.push(classifier_stats);
    let sum = Stats::sum(&all);
    assert_eq!(sum.datagrams.load(Relaxed), sent);
    assert_eq!(sum.shed.iter().map(|c| c.load(Relaxed)).sum::<u64>(), 0);
    assert_eq!(sum.total_rejected(), 0);
    // Flushed: every Append entry is in the store, partial batches included.
    let ap = AppendLayout::new(regions[4].header()).unwrap();
    let heads: u64 = (0..ap.lists())
        .map(|l| regions[4].mem().load_u64(ap.head_offset(l)).unwrap())
        .sum();
    assert_eq!(heads, appends);
}
