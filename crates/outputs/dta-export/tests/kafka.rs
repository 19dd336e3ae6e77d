//! The Kafka export against a real single-node Kafka broker (KRaft) started here from the jars
//! `scripts/setup.sh` resolves (`dta_testkit::kafka`), restarted once mid-run, and stopped at the
//! end. A counted skip only when Java or the jars are missing.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::sync_channel;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dta_collector::{Collector, StoreConfig};
use dta_export::kafka::consumer::read_topic;
use dta_export::kafka::schema::{self, AppendEntry, IntEvent, KeySnapshot};
use dta_export::kafka::source::{AppendSource, SnapshotSource, Start};
use dta_export::kafka::{
    header, now_ms, Compression, KafkaProducer, OwnerKey, Partitioner, ProducerOptions,
    RecordFormat, TopicKind,
};
use dta_export::pipeline::{self, ExportOptions, KafkaTarget, Target};
use dta_int::{Event, EventKind, Notification};
use dta_store::append::AppendLayout;
use dta_store::key_increment::KeyIncrementLayout;
use dta_testkit::kafka::KafkaBroker;
use prost::Message as _;
use rand::{Rng, SeedableRng};

const PREFIX: &str = "dtatest";
const LISTS: u32 = 4;
const ENTRY_LEN: usize = 16;
const BATCH: usize = 8;

fn stores() -> Vec<StoreConfig> {
    [
        "name = 'log'\nkind = 'append'\nlists = 4\ncapacity = 65536\nentry_len = 16\nbatch = 8",
        "name = 'hits'\nkind = 'key-increment'\ncounters = 4096\nkey_len = 4",
    ]
    .iter()
    .map(|t| toml::from_str(t).unwrap())
    .collect()
}

/// Lists 0 and 1 on c0 and c1, the others on c2; keys by rendezvous hashing.
fn cluster_map() -> dta_cluster::ClusterMap {
    dta_cluster::ClusterMap::parse(
        r#"
version = 1
[[collector]]
name = "c0"
translator = "127.0.0.1:40140"
mode = "shm"
[[collector]]
name = "c1"
translator = "127.0.0.1:40141"
mode = "shm"
[[collector]]
name = "c2"
translator = "127.0.0.1:40142"
mode = "shm"
[[store]]
name = "log"
kind = "append"
table = { c0 = [0], c1 = [1] }
collector = "c2"
[[store]]
name = "hits"
kind = "key-increment"
[[store]]
name = "paths"
kind = "key-write"
key_len = 13
"#,
    )
    .unwrap()
}

fn event(seq: u64) -> Event {
    let mut flow = [0u8; 13];
    flow[..8].copy_from_slice(&seq.to_be_bytes());
    flow[12] = 17;
    Event {
        seq,
        time_ns: 1_700_000_000_000_000_000 + seq,
        kind: EventKind::HopLatency,
        flow,
        hop: (seq % 5) as u8,
        node_id: 100 + (seq % 7) as u32,
        value: (seq * 31 % 1000) as u32,
    }
}

/// Every Append entry and INT event written while the broker is restarted once is read back
/// from its topic, length-delimited protobuf in lz4-compressed batches, with the same bytes and
/// fields, in the partition of its owner; duplicates (at least once) are counted and reported,
/// never missing records.
#[test]
fn every_append_entry_and_event_is_read_back_across_a_broker_restart() {
    let mut broker = match KafkaBroker::start() {
        Ok(b) => b,
        Err(why) => dta_testkit::skip!("{why}"),
    };
    let seed = dta_testkit::test_seed(0x6b61666b61);
    let dir = tempfile::tempdir().unwrap();
    let collector = Collector::create(dir.path(), &stores(), false).unwrap();
    let log = collector.store("log").unwrap().region.clone();
    let hits = collector.store("hits").unwrap().region.clone();

    // Three collectors: a topic has three partitions, each record in its owner's.
    let partitioner: Arc<dyn Partitioner> = Arc::new(cluster_map());
    let mut opts = ProducerOptions::new(vec![broker.bootstrap()]);
    opts.topics = TopicKind::ALL.iter().map(|k| k.topic(PREFIX)).collect();
    opts.partitions = partitioner.partitions();
    let request_timeout = Duration::from_secs(3);
    opts.request_timeout = request_timeout;
    opts.compression = Compression::Lz4;
    let producer = Arc::new(KafkaProducer::start(opts).unwrap());

    // Append: the exporter polls the lists while a writer appends batches.
    let pb = RecordFormat::Protobuf;
    let mut source =
        AppendSource::new("log", log.clone(), PREFIX, &*partitioner, Start::Oldest, pb)
            .expect("append source");
    let mut snapshots = SnapshotSource::new(PREFIX, pb);
    snapshots
        .add("hits", hits.clone(), vec![1, 2, 3, 4], &*partitioner)
        .unwrap();
    // INT events through the export thread, as `dta int-sink --kafka` runs it.
    let (ev_tx, ev_rx) = sync_channel::<Notification>(1 << 16);
    let export = pipeline::spawn(
        ev_rx,
        vec![Target::Kafka(KafkaTarget {
            producer: producer.clone(),
            prefix: PREFIX.into(),
            partitioner: partitioner.clone(),
            flow_store: "paths".into(),
            format: pb,
        })],
        Default::default(),
        ExportOptions {
            batch: 64,
            max_delay: Duration::from_millis(10),
        },
    )
    .unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (log, hits, stop) = (log.clone(), hits.clone(), stop.clone());
        std::thread::spawn(move || {
            let layout = AppendLayout::new(log.header()).unwrap();
            let ki = KeyIncrementLayout::new(hits.header()).unwrap();
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let mut written: BTreeMap<(u32, u64), Vec<u8>> = BTreeMap::new();
            let mut events = Vec::new();
            let mut heads = [0u64; LISTS as usize];
            let mut step = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let l = (step % LISTS as u64) as u32;
                let mut batch = vec![0u8; BATCH * ENTRY_LEN];
                rng.fill(&mut batch[..]);
                let first = heads[l as usize];
                layout
                    .write_entries(l, first, &batch, &mut log.mem().sink())
                    .unwrap();
                for (i, e) in batch.chunks(ENTRY_LEN).enumerate() {
                    written.insert((l, first + i as u64), e.to_vec());
                }
                heads[l as usize] += BATCH as u64;
                let ev = event(step);
                ev_tx.send(Notification::Event(ev)).unwrap();
                events.push(ev);
                ki.apply(&[1, 2, 3, 4], 1, ki.redundancy(), &mut hits.mem().sink())
                    .unwrap();
                step += 1;
                std::thread::sleep(Duration::from_millis(5));
            }
            (written, events)
        })
    };
    let exporter = {
        let (producer, stop) = (producer.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut last_snapshot = Instant::now();
            loop {
                let done = stop.load(Ordering::Relaxed);
                source.poll(&producer, now_ms());
                if last_snapshot.elapsed() >= Duration::from_millis(200) {
                    snapshots.poll(&producer, now_ms()).unwrap();
                    last_snapshot = Instant::now();
                }
                if done {
                    // One more poll after the writer stopped picks up its last batches.
                    source.poll(&producer, now_ms());
                    snapshots.poll(&producer, now_ms()).unwrap();
                    return (source, snapshots);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };

    std::thread::sleep(Duration::from_millis(1500));
    // Down for longer than the client's own retry deadline (request_timeout), so the restart is
    // seen by the delivery thread's retry and reconnect, not absorbed inside the client library.
    let restart_started = Instant::now();
    broker.stop();
    std::thread::sleep(request_timeout + Duration::from_secs(1));
    broker.start_again();
    eprintln!(
        "kafka test: broker restarted in {:?}",
        restart_started.elapsed()
    );
    std::thread::sleep(Duration::from_millis(1500));
    stop.store(true, Ordering::Relaxed);
    let (written, events) = writer.join().unwrap();
    let export_summary = export.join().unwrap();
    let (source, snapshots) = exporter.join().unwrap();
    producer
        .flush(Duration::from_secs(120))
        .expect("everything delivered");
    let stats = producer.stats().snapshot();
    eprintln!("kafka test: producer {stats:?}, append {:?}", source.total);
    assert_eq!(broker.starts, 2);
    assert_eq!(
        export_summary.targets,
        vec![("kafka".into(), events.len() as u64, 0)]
    );
    assert_eq!(source.total.missed, 0);
    assert_eq!(stats.dropped, 0);
    assert_eq!(stats.abandoned, 0);
    assert!(
        stats.retries + stats.connect_errors > 0,
        "the broker was down for seconds while the exporter produced: {stats:?}"
    );
    assert!(
        stats.connects >= 2,
        "reconnected after the restart: {stats:?}"
    );

    let brokers = vec![broker.bootstrap()];
    let max = 1 << 22;
    // Append entries: every one, same bytes, in its list's owner partition.
    let got = read_topic(
        &brokers,
        &TopicKind::Append.topic(PREFIX),
        max,
        Duration::from_secs(30),
    )
    .unwrap();
    let mut seen: BTreeMap<(u32, u64), u32> = BTreeMap::new();
    for r in &got {
        let (store, list, index) = r.append_id().expect("append headers");
        assert_eq!(store, "log");
        assert_eq!(r.headers[header::SCHEMA], b"dta.v1.AppendEntry");
        assert_eq!(r.headers[header::FORMAT], b"protobuf");
        let want = written
            .get(&(list, index))
            .unwrap_or_else(|| panic!("entry {list}/{index} was never written"));
        let entry = AppendEntry::decode_length_delimited(&r.value[..]).expect("an AppendEntry");
        assert_eq!(
            (entry.store.as_str(), entry.list, entry.index),
            ("log", list, index)
        );
        assert_eq!((entry.record.as_str(), entry.decoded), ("raw", None));
        assert_eq!(&entry.raw, want, "entry {list}/{index}");
        assert_eq!(
            r.partition as u32,
            partitioner.partition("log", OwnerKey::List(list)).unwrap()
        );
        *seen.entry((list, index)).or_default() += 1;
    }
    let missing: Vec<_> = written.keys().filter(|k| !seen.contains_key(k)).collect();
    assert!(
        missing.is_empty(),
        "{} of {} entries missing, first {:?}",
        missing.len(),
        written.len(),
        &missing[..missing.len().min(5)]
    );
    let append_dups = got.len() - seen.len();
    // The map puts list 0 on c0, list 1 on c1, lists 2 and 3 on c2.
    let mut per_partition = [0u64; 3];
    for r in &got {
        per_partition[r.partition as usize] += 1;
    }
    let per_list = |l: u32| written.keys().filter(|k| k.0 == l).count() as u64;
    assert!(per_partition[0] >= per_list(0) && per_partition[1] >= per_list(1));
    assert!(per_partition[2] >= per_list(2) + per_list(3));
    // A list lives in one partition and its entries arrive in order there: the first copy of
    // each entry comes after the first copy of every earlier one (re-sent copies may follow).
    let mut first_seen: BTreeMap<(u32, u64), ()> = BTreeMap::new();
    let mut last: BTreeMap<u32, u64> = BTreeMap::new();
    for r in &got {
        let (_, list, index) = r.append_id().unwrap();
        if first_seen.insert((list, index), ()).is_none() {
            if let Some(p) = last.insert(list, index) {
                assert!(
                    index > p,
                    "list {list}: entry {index} first arrived after {p}"
                );
            }
        }
    }

    // Events: every one, its fields those of the event, in the flow's partition.
    let got_ev = read_topic(
        &brokers,
        &TopicKind::Events.topic(PREFIX),
        max,
        Duration::from_secs(30),
    )
    .unwrap();
    let mut ev_seen: BTreeMap<u64, u32> = BTreeMap::new();
    for r in &got_ev {
        let got = IntEvent::decode_length_delimited(&r.value[..]).expect("an IntEvent");
        let seq = got.seq;
        let want = &events[seq as usize];
        assert_eq!(got, IntEvent::of(want), "event {seq}");
        assert_eq!(r.key.as_deref(), Some(&want.flow[..]));
        assert_eq!(
            r.partition as u32,
            partitioner
                .partition("paths", OwnerKey::Bytes(&want.flow))
                .unwrap()
        );
        *ev_seen.entry(seq).or_default() += 1;
    }
    assert_eq!(ev_seen.len(), events.len(), "events missing");
    let event_dups = got_ev.len() - ev_seen.len();

    // Snapshots: the last one of the key carries the final count.
    let got_snap = read_topic(
        &brokers,
        &TopicKind::Snapshots.topic(PREFIX),
        max,
        Duration::from_secs(30),
    )
    .unwrap();
    assert!(got_snap.len() as u64 >= snapshots.exported.min(2));
    let last_snap =
        KeySnapshot::decode_length_delimited(&got_snap.last().expect("a snapshot").value[..])
            .unwrap();
    assert_eq!(last_snap.store, "hits");
    assert_eq!(last_snap.key, [1, 2, 3, 4]);
    match last_snap.answer {
        Some(schema::Answer::KeyIncrement(a)) => assert!(a.count >= events.len() as u64),
        other => panic!("a Key-Increment answer, not {other:?}"),
    }

    // A map with more collectors than the topics have partitions is refused, counted and
    // explained, never silently sent elsewhere.
    let mut opts = ProducerOptions::new(vec![broker.bootstrap()]);
    opts.topics = vec![TopicKind::Append.topic(PREFIX)];
    opts.partitions = 4;
    opts.request_timeout = Duration::from_secs(2);
    let wide = KafkaProducer::start(opts).unwrap();
    wide.send(dta_export::kafka::Message {
        topic: TopicKind::Append.topic(PREFIX),
        partition: 3,
        key: None,
        value: vec![1],
        headers: vec![],
        timestamp_ms: 0,
    })
    .unwrap();
    assert!(wide.flush(Duration::from_secs(3)).is_err());
    // Its delivery thread has tried (however late a loaded machine runs it) before it closes.
    dta_testkit::wait_until(
        "the wide producer's failed connection",
        || wide.stats().snapshot(),
        |s| s.connect_errors >= 1,
    );
    let w = wide.close(Duration::ZERO);
    assert_eq!((w.delivered, w.abandoned), (0, 1), "{w:?}");
    assert!(w.connect_errors >= 1 && w.connects == 0, "{w:?}");

    eprintln!(
        "kafka test: {} append entries ({} duplicates), {} events ({} duplicates), {} snapshots, \
         producer retries {} connect errors {}",
        written.len(),
        append_dups,
        events.len(),
        event_dups,
        got_snap.len(),
        stats.retries,
        stats.connect_errors
    );
}

/// With no broker reachable nothing is lost silently: what fits the byte bound is queued, the
/// rest refused and counted as dropped, and at close what was never acknowledged is counted as
/// abandoned.
#[test]
fn the_queue_is_bounded_and_every_refusal_is_counted() {
    // A loopback port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut opts = ProducerOptions::new(vec![format!("127.0.0.1:{port}")]);
    opts.max_queue_bytes = 64 << 10;
    opts.batch_bytes = 16 << 10;
    opts.request_timeout = Duration::from_millis(200);
    let p = KafkaProducer::start(opts).unwrap();
    let msg = |i: u32| dta_export::kafka::Message {
        topic: "t".into(),
        partition: 0,
        key: None,
        value: vec![i as u8; 1000],
        headers: vec![],
        timestamp_ms: 0,
    };
    let size = msg(0).size();
    let (mut ok, mut refused) = (0u64, 0u64);
    for i in 0..200 {
        match p.send(msg(i)) {
            Ok(()) => ok += 1,
            Err(_) => refused += 1,
        }
    }
    assert_eq!(ok, (64 << 10) as u64 / size as u64);
    assert_eq!(refused, 200 - ok);
    assert!(p.room() < size);
    assert!(p.flush(Duration::from_millis(300)).is_err());
    // The delivery thread has tried the dead port (however late a loaded machine runs it)
    // before the producer closes.
    dta_testkit::wait_until(
        "a failed connection",
        || p.stats().snapshot(),
        |s| s.connect_errors >= 1,
    );
    let s = p.close(Duration::from_millis(300));
    assert_eq!(s.queued, ok);
    assert_eq!(s.dropped, refused);
    assert_eq!(s.delivered, 0);
    assert_eq!(s.abandoned, ok);
    assert_eq!(s.queued_bytes, 0);
    assert!(s.connect_errors >= 1, "{s:?}");
}
