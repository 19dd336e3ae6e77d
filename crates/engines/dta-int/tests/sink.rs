// Size: the sink's end-to-end tests share one set of store fixtures (`Env`, `store`) and the
// generator's traffic; each test is one behaviour of the sink and its queries.
//! End to end: generated INT traffic through the sink into real region files; every query
//! answers against the generator's ground truth.

mod common;

use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use dta_collector::{Collector, StoreConfig};
use dta_int::gen::{generate, md_frame, postcard_report, stacked_report, GenConfig, GenPacket};
use dta_int::layout::MAX_PATH;
use dta_int::{query, EventKind, EvictReason, IntSink, IntSinkConfig, Metric, Notification};
use dta_translator::{RegionSinks, Stats, Translator, TranslatorConfig};

fn store(name: &str, kind: &str) -> StoreConfig {
    let mut s: StoreConfig = toml_like(name, kind);
    match kind {
        "key-write" => {
            s.slots = Some(1 << 16);
            s.key_len = Some(13);
            s.data_len = Some(24);
        }
        "postcarding" => {
            s.chunks = Some(1 << 16);
            s.hops = Some(5);
            s.key_len = Some(13);
        }
        "append" => {
            s.lists = Some(8);
            s.capacity = Some(1 << 14);
            s.entry_len = Some(32);
            s.batch = Some(16);
        }
        _ => {
            // Room for the default log-linear histograms' keys without collisions.
            s.counters = Some(1 << 22);
            s.key_len = Some(6);
        }
    }
    s
}

fn toml_like(name: &str, kind: &str) -> StoreConfig {
    serde_json::from_value(serde_json::json!({"name": name, "kind": kind})).unwrap()
}

struct Env {
    _dir: tempfile::TempDir,
    collector: Collector,
}

impl Env {
    fn new() -> Env {
        Env::with(&[
            store("paths", "key-write"),
            store("latency", "postcarding"),
            store("events", "append"),
            store("hist", "key-increment"),
        ])
    }

    /// The regions of `stores` in a directory of their own.
    fn with(stores: &[StoreConfig]) -> Env {
        let dir = tempfile::tempdir().unwrap();
        let collector = Collector::create(dir.path(), stores, false).unwrap();
        Env {
            _dir: dir,
            collector,
        }
    }
    fn sink(&self, cfg: &IntSinkConfig) -> IntSink<RegionSinks> {
        let t = Translator::colocated(
            &TranslatorConfig::default(),
            self.collector.regions(),
            Arc::new(Stats::default()),
        )
        .unwrap();
        IntSink::new(cfg, t).unwrap()
    }
    fn region(&self, name: &str) -> &dta_store::Region {
        &self.collector.store(name).unwrap().region
    }

    /// A sink of the default configuration over these stores that took every packet of
    /// `pkts` as an INT-MD frame and flushed at the last one's time.
    fn replayed(&self, pkts: &[GenPacket], int_udp_port: u16) -> IntSink<RegionSinks> {
        let mut sink = self.sink(&IntSinkConfig::default());
        for p in pkts {
            sink.handle_frame(&md_frame(p, int_udp_port), p.time_ns);
        }
        sink.flush(pkts.last().unwrap().time_ns);
        sink
    }
}

fn last_per_flow(pkts: &[GenPacket]) -> HashMap<[u8; 13], &GenPacket> {
    pkts.iter().map(|p| (p.flow, p)).collect()
}

#[test]
fn md_traffic_paths_latencies_histograms_events() {
    let env = Env::new();
    let cfg = IntSinkConfig {
        thresholds: dta_int::ThresholdConfig {
            queue_occupancy: 150,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut sink = env.sink(&cfg);
    let sub = sink.subscribe(1 << 16);
    let gen = GenConfig::default();
    let pkts = generate(&gen);
    assert!(pkts.len() > 500, "{}", pkts.len());
    for (i, p) in pkts.iter().enumerate() {
        let frame = md_frame(p, gen.int_udp_port);
        if i % 3 == 0 {
            // As a sink switch's stacked telemetry report.
            sink.handle_report(&stacked_report(999, i as u32, &frame), p.time_ns);
        } else {
            sink.handle_frame(&frame, p.time_ns);
        }
    }
    let end = pkts.last().unwrap().time_ns;
    sink.flush(end);
    let st = sink.stats_snapshot();
    assert_eq!(st.md_packets, pkts.len() as u64);
    assert!(st.errors.is_empty(), "{:?}", st.errors);
    assert_eq!(sink.translator().stats().total_rejected(), 0);

    // Path of flow X, hop latency of flow X at hop i: the flow's last packet.
    let pc = env.region("latency");
    let layout = dta_store::PostcardingLayout::new(pc.header()).unwrap();
    let table = dta_store::ValueTable::range(&layout, cfg.postcard_values).unwrap();
    for (flow, p) in last_per_flow(&pkts) {
        let r = query::path(env.region("paths"), &flow, None).unwrap();
        assert_eq!(r.status, "found");
        let truth: Vec<u32> = p.hops.iter().map(|h| h.node_id).collect();
        assert_eq!(r.path, truth);
        for (i, h) in p.hops.iter().enumerate() {
            let r = query::hop_latency_with(pc, &layout, &table, &flow, i as u8, 1).unwrap();
            assert_eq!(r.status, "found");
            assert_eq!(r.value, Some(cfg.postcard_value(h.latency)), "hop {i}");
        }
    }
    let flow = pkts[0].flow;
    let r = query::hop_latency(pc, &flow, 4, cfg.postcard_values, 1).unwrap();
    assert_eq!(
        r.latency,
        Some(last_per_flow(&pkts)[&flow].hops[4].latency as u64)
    );
    // A hop the store cannot hold is an error naming the range, never an "empty".
    let hops = layout.hops();
    let e = query::hop_latency(pc, &flow, hops as u8, cfg.postcard_values, 1).unwrap_err();
    assert!(
        e.to_string()
            .contains(&format!("paths of {hops} hops (hop 0..={})", hops - 1)),
        "{e}"
    );

    // Histograms: exact counts per switch, metric, bucket.
    let mut truth = common::Counts::new();
    for p in &pkts {
        for h in &p.hops {
            for (m, v) in [
                (Metric::HopLatency, h.latency),
                (Metric::QueueOccupancy, h.queue),
                (Metric::EgressTxUtil, h.util),
            ] {
                *truth
                    .entry((h.node_id, m, cfg.histogram.bucket(v)))
                    .or_default() += 1;
            }
        }
    }
    let nodes: std::collections::BTreeSet<u32> = truth.keys().map(|k| k.0).collect();
    assert!(nodes.len() >= 15);
    for &node in &nodes {
        for m in Metric::ALL {
            common::assert_histogram(env.region("hist"), &cfg.histogram, node, m, &truth);
        }
    }
    // An unknown switch has an empty histogram.
    let h = query::histogram(env.region("hist"), 7, Metric::HopLatency, None, None);
    assert_eq!(h.unwrap().total, 0);

    // Events: queue-occupancy threshold crossings and path changes, in order.
    let mut want = vec![];
    let mut prev: HashMap<[u8; 13], Vec<u32>> = HashMap::new();
    for p in &pkts {
        let ids: Vec<u32> = p.hops.iter().map(|h| h.node_id).collect();
        for (i, h) in p.hops.iter().enumerate() {
            if let Some(old) = prev.get(&p.flow) {
                if old[i] != h.node_id {
                    want.push((EventKind::PathChange, p.flow, i as u8, h.node_id, old[i]));
                }
            }
            if h.queue > 150 {
                want.push((
                    EventKind::QueueOccupancy,
                    p.flow,
                    i as u8,
                    h.node_id,
                    h.queue,
                ));
            }
        }
        prev.insert(p.flow, ids);
    }
    let got: Vec<_> = sub
        .rx
        .try_iter()
        .filter_map(|n| match n {
            Notification::Event(e) => Some(e),
            Notification::Flow(_) => None,
        })
        .collect();
    assert!(got.iter().enumerate().all(|(i, e)| e.seq == i as u64));
    let got_t: Vec<_> = got
        .iter()
        .map(|e| (e.kind, e.flow, e.hop, e.node_id, e.value))
        .collect();
    assert_eq!(got_t, want);
    let n_changes = want.iter().filter(|w| w.0 == EventKind::PathChange).count();
    assert!(
        n_changes > 0 && want.len() > n_changes + 10,
        "{}",
        want.len()
    );
    assert_eq!(sub.dropped.load(Relaxed), 0);

    // Latest congestion events from the Append list.
    let q: Vec<_> = want
        .iter()
        .filter(|w| w.0 == EventKind::QueueOccupancy)
        .collect();
    let latest = query::events(env.region("events"), 0, EventKind::QueueOccupancy, 10).unwrap();
    assert_eq!(latest.len(), 10);
    for (e, w) in latest.iter().zip(&q[q.len() - 10..]) {
        assert_eq!((e.kind, e.flow, e.hop, e.node_id, e.value), **w);
    }
    assert_eq!(latest.last().unwrap().seq, q.len() as u64 - 1);
    // A list base from a request past the store's lists (up to u32::MAX) is refused, saying why.
    for base in [8, u32::MAX - 1, u32::MAX] {
        let e = query::events(env.region("events"), base, EventKind::Drop, 10).unwrap_err();
        assert!(e.to_string().contains("is not one of its"), "{e}");
    }
    let bad = IntSinkConfig {
        event_list_base: u32::MAX,
        ..IntSinkConfig::default()
    };
    assert!(bad.validate().unwrap_err().contains("event_list_base"));
}

#[test]
fn thresholds_change_at_run_time() {
    let env = Env::new();
    let mut sink = env.sink(&IntSinkConfig {
        events_to_store: false,
        ..Default::default()
    });
    let sub = sink.subscribe(1 << 16);
    let th = sink.thresholds().clone();
    let gen = GenConfig {
        reroute_prob: 0.0,
        ..Default::default()
    };
    let pkts = generate(&gen);
    let half = pkts.len() / 2;
    for p in &pkts[..half] {
        sink.handle_frame(&md_frame(p, gen.int_udp_port), p.time_ns);
    }
    assert_eq!(sub.rx.try_iter().count(), 0, "all thresholds disabled");
    // Retune from another thread while the sink is idle.
    std::thread::spawn(move || th.hop_latency.store(6_000, Relaxed))
        .join()
        .unwrap();
    for p in &pkts[half..] {
        sink.handle_frame(&md_frame(p, gen.int_udp_port), p.time_ns);
    }
    let want: Vec<(u64, u8, u32)> = pkts[half..]
        .iter()
        .flat_map(|p| {
            p.hops
                .iter()
                .enumerate()
                .filter(|(_, h)| h.latency > 6_000)
                .map(|(i, h)| (p.time_ns, i as u8, h.latency))
                .collect::<Vec<_>>()
        })
        .collect();
    let got: Vec<_> = sub
        .rx
        .try_iter()
        .map(|n| match n {
            Notification::Event(e) => {
                assert_eq!(e.kind, EventKind::HopLatency);
                (e.time_ns, e.hop, e.value)
            }
            other => panic!("{other:?}"),
        })
        .collect();
    assert!(!want.is_empty());
    assert_eq!(got, want);
    assert_eq!(
        sink.stats().events_of(EventKind::HopLatency),
        want.len() as u64
    );
}

#[test]
fn aging_emits_flow_records() {
    let env = Env::new();
    let mut sink = env.sink(&IntSinkConfig {
        idle_timeout_ms: 10,
        ..Default::default()
    });
    let sub = sink.subscribe(1 << 16);
    let gen = GenConfig {
        flows: 50,
        ..Default::default()
    };
    let pkts = generate(&gen);
    for p in &pkts {
        sink.handle_frame(&md_frame(p, gen.int_udp_port), p.time_ns);
    }
    let last = pkts.last().unwrap().time_ns;
    let flows = last_per_flow(&pkts);
    assert_eq!(sink.flow_cache().occupied(), flows.len());
    // Not idle yet.
    sink.tick(last + 5_000_000);
    assert_eq!(sink.flow_cache().occupied(), flows.len());
    sink.tick(last + 20_000_000);
    assert_eq!(sink.flow_cache().occupied(), 0);
    let recs: Vec<_> = sub
        .rx
        .try_iter()
        .filter_map(|n| match n {
            Notification::Flow(f) => Some(f),
            _ => None,
        })
        .collect();
    assert_eq!(recs.len(), flows.len());
    for r in recs {
        assert_eq!(r.reason, EvictReason::Idle);
        let of_flow: Vec<_> = pkts.iter().filter(|p| p.flow == r.flow).collect();
        assert_eq!(r.packets, of_flow.len() as u64);
        assert_eq!(r.first_ns, of_flow[0].time_ns);
        assert_eq!(r.last_ns, of_flow.last().unwrap().time_ns);
        assert_eq!(r.hops.len(), MAX_PATH);
        let lastp = of_flow.last().unwrap();
        for (i, h) in r.hops.iter().enumerate() {
            assert_eq!(h.node_id, Some(lastp.hops[i].node_id));
            assert_eq!(h.queue_occupancy, Some(lastp.hops[i].queue));
            let avg = of_flow
                .iter()
                .map(|p| p.hops[i].latency as f64)
                .sum::<f64>()
                / of_flow.len() as f64;
            assert!((h.avg_hop_latency.unwrap() - avg).abs() < 1e-6);
        }
    }
    assert_eq!(sink.stats_snapshot().flows_idle, flows.len() as u64);
}

#[test]
fn postcards_and_drop_reports() {
    let env = Env::new();
    let cfg = IntSinkConfig {
        postcard_divisor: 16,
        postcard_values: 4096,
        ..Default::default()
    };
    let mut sink = env.sink(&cfg);
    let sub = sink.subscribe(1024);
    let gen = GenConfig {
        flows: 40,
        reroute_prob: 0.0,
        ..Default::default()
    };
    let pkts = generate(&gen);
    let mut seq = 0;
    for p in &pkts {
        for hop in 0..p.hops.len() {
            seq += 1;
            sink.handle_report(&postcard_report(p, hop, seq, 64, None), p.time_ns);
        }
    }
    // One drop report at hop 3 of the first packet, reason 42.
    sink.handle_report(
        &postcard_report(&pkts[0], 3, 0, 64, Some(42)),
        pkts[0].time_ns,
    );
    sink.flush(pkts.last().unwrap().time_ns);
    let st = sink.stats_snapshot();
    assert_eq!(st.postcards, pkts.len() as u64 * 5);
    assert_eq!(st.drop_reports, 1);
    let pc = env.region("latency");
    for (flow, p) in last_per_flow(&pkts) {
        for (i, h) in p.hops.iter().enumerate() {
            let r = query::hop_latency(pc, &flow, i as u8, 4096, 16).unwrap();
            assert_eq!(r.value, Some((h.latency / 16).min(4095)), "hop {i}");
        }
        let rec = sink.flow(&flow);
        assert!(rec.is_none(), "flushed");
    }
    let drops = query::events(env.region("events"), 0, EventKind::Drop, 10).unwrap();
    assert_eq!(drops.len(), 1);
    assert_eq!(drops[0].flow, pkts[0].flow);
    assert_eq!(drops[0].hop, 3);
    assert_eq!(drops[0].node_id, pkts[0].hops[3].node_id);
    assert_eq!(drops[0].value, 42);
    let drop_ev = sub.rx.try_iter().find_map(|n| match n {
        Notification::Event(e) if e.kind == EventKind::Drop => Some(e),
        _ => None,
    });
    assert_eq!(drop_ev.map(|e| e.value), Some(42));
}

#[test]
fn garbage_is_counted_not_fatal() {
    let env = Env::new();
    let mut sink = env.sink(&IntSinkConfig::default());
    sink.handle_report(&[], 0);
    sink.handle_report(&[0x70, 1, 2], 0);
    sink.handle_frame(&[0u8; 10], 0);
    let gen = GenConfig::default();
    let pkts = generate(&gen);
    let mut f = md_frame(&pkts[0], gen.int_udp_port);
    f[42 + 4] = 0x30; // INT-MD version 3
    sink.handle_frame(&f, 0);
    let f = md_frame(&pkts[0], gen.int_udp_port + 1); // not the INT port
    sink.handle_frame(&f, 0);
    let s = sink.stats();
    assert_eq!(s.errors_of(dta_int_wire::Error::Truncated), 2);
    assert_eq!(s.errors_of(dta_int_wire::Error::UnknownReportVersion), 1);
    assert_eq!(s.errors_of(dta_int_wire::Error::BadIntVersion), 1);
    assert_eq!(s.not_int.load(Relaxed), 1);
    assert_eq!(s.md_packets.load(Relaxed), 0);
}

/// A histogram store nothing was written to answers an empty histogram that says so, not
/// zeros in a bucketing it does not know.
#[test]
fn an_unwritten_histogram_store_says_it_holds_none() {
    let stores = [
        store("paths", "key-write"),
        store("latency", "postcarding"),
        store("events", "append"),
        store("hist", "key-increment"),
    ];
    let env = Env::with(&stores);
    let h = query::histogram(env.region("hist"), 101, Metric::HopLatency, None, None).unwrap();
    assert_eq!((h.total, h.histogram, h.relative_error), (0, None, None));
    assert!(h.buckets.is_empty());
    let note = h.coverage.note.unwrap();
    assert!(
        note.contains("no histogram was written") && note.contains("since the store was created"),
        "{note}"
    );
}

/// Histograms in rotating windows (docs/regions.md §2.2): a replay counts in the window of the
/// wall clock; the same trace replayed in the next window leaves the closed one as it was, the
/// current window holds the second replay alone, and all windows hold both.
#[test]
fn histogram_windows_close() {
    let mut hist = store("hist", "key-increment");
    hist.windows = Some(4);
    hist.window_ms = Some(300);
    let stores = [
        store("paths", "key-write"),
        store("latency", "postcarding"),
        store("events", "append"),
        hist,
    ];
    let env = Env::with(&stores);
    let region = env.region("hist");
    let gen = GenConfig {
        flows: 40,
        ..Default::default()
    };
    let pkts = generate(&gen);
    let node = pkts[0].hops[0].node_id;
    let replay = || {
        env.replayed(&pkts, gen.int_udp_port);
    };
    let now = dta_store::key_increment::unix_ms;
    let hist_of = |w| {
        query::histogram_in(region, node, Metric::HopLatency, None, None, Some(w), now()).unwrap()
    };
    // Start just after a window boundary, so the replay fits in its window.
    while now() % 300 > 50 {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    replay();
    let first = hist_of(query::WindowSel::Current);
    assert_eq!(first.windows.len(), 1);
    assert!(first.total > 0);
    let closed = first.windows[0];
    // The next window, then the same trace again.
    while now() < closed.end_ms + 20 {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    replay();
    let second = hist_of(query::WindowSel::Current);
    assert_eq!(second.windows.len(), 1);
    assert!(second.windows[0].number > closed.number);
    assert_eq!(
        second.total, first.total,
        "the current window: the second replay alone"
    );
    let again = hist_of(query::WindowSel::At(closed.start_ms));
    assert_eq!(
        again.buckets, first.buckets,
        "a closed window is not written again"
    );
    assert_eq!(again.windows[0].number, closed.number);
    assert!(!again.windows[0].open);
    let all = hist_of(query::WindowSel::All);
    assert_eq!(all.total, 2 * first.total);
    assert_eq!(all.windows.len(), 2);
}

/// Discovery (docs/int-sink.md): with the events store's flow-summary list, every flow the
/// sink flushed is listed once, ranked by packets and by path latency as the ground truth
/// ranks them, found by prefix, port and switch; the network map has exactly the switches and
/// links of the paths, each switch with its histogram's samples. Without the list, the query
/// says what to configure.
#[test]
fn flows_and_the_network_map_are_found_without_a_key() {
    let mut events = store("events", "append");
    events.lists = Some(16);
    let stores = [
        store("paths", "key-write"),
        store("latency", "postcarding"),
        events,
        store("hist", "key-increment"),
    ];
    let env = Env::with(&stores);
    let r = |n: &str| env.collector.store(n).unwrap().region.clone();
    let gen = GenConfig {
        flows: 60,
        reroute_prob: 0.0,
        ..Default::default()
    };
    let pkts = generate(&gen);
    env.replayed(&pkts, gen.int_udp_port);
    // The truth: packets and path per flow.
    let mut packets: HashMap<[u8; 13], u64> = HashMap::new();
    let mut paths: HashMap<[u8; 13], Vec<u32>> = HashMap::new();
    for p in &pkts {
        *packets.entry(p.flow).or_default() += 1;
        paths.insert(p.flow, p.hops.iter().map(|h| h.node_id).collect());
    }
    let (ev, pa, hi) = (r("events"), r("paths"), r("hist"));
    let all = query::flows(
        &ev,
        Some(&pa),
        0,
        &Default::default(),
        query::FlowOrder::Packets,
        10_000,
    )
    .unwrap()
    .flows;
    assert_eq!(all.len(), packets.len(), "every flow once");
    for f in &all {
        assert_eq!(f.summary.packets as u64, packets[&f.summary.flow]);
        assert_eq!(f.path.as_ref(), Some(&paths[&f.summary.flow]));
    }
    let most = packets.values().max().unwrap();
    assert_eq!(all[0].summary.packets as u64, *most);
    assert!(all
        .windows(2)
        .all(|w| w[0].summary.packets >= w[1].summary.packets));
    let worst = query::flows(
        &ev,
        None,
        0,
        &Default::default(),
        query::FlowOrder::Latency,
        3,
    )
    .unwrap()
    .flows;
    assert_eq!(worst.len(), 3);
    let top_latency = all.iter().map(|f| f.summary.path_latency).max().unwrap();
    assert_eq!(worst[0].summary.path_latency, top_latency);
    assert!(worst[0].summary.path_latency > 0);
    // Search: a switch, a port, a prefix.
    let node = paths.values().next().unwrap()[2];
    let through = query::flows(
        &ev,
        Some(&pa),
        0,
        &query::FlowFilter {
            node: Some(node),
            ..Default::default()
        },
        query::FlowOrder::Recent,
        10_000,
    )
    .unwrap()
    .flows;
    let want = paths.values().filter(|p| p.contains(&node)).count();
    assert_eq!(through.len(), want);
    assert!(query::flows(
        &ev,
        None,
        0,
        &query::FlowFilter {
            node: Some(node),
            ..Default::default()
        },
        query::FlowOrder::Recent,
        1
    )
    .is_err());
    let one = all[0].summary.flow;
    let dport = u16::from_be_bytes([one[10], one[11]]);
    let on_port = query::flows(
        &ev,
        None,
        0,
        &query::FlowFilter {
            port: Some(dport),
            ..Default::default()
        },
        query::FlowOrder::Recent,
        10_000,
    )
    .unwrap()
    .flows;
    assert!(on_port.iter().any(|f| f.summary.flow == one));
    let src = format!("{}.{}.{}.{}/32", one[0], one[1], one[2], one[3]);
    let from = query::flows(
        &ev,
        None,
        0,
        &query::FlowFilter {
            prefix: Some(src.parse().unwrap()),
            ..Default::default()
        },
        query::FlowOrder::Recent,
        10_000,
    )
    .unwrap()
    .flows;
    assert!(from.iter().all(|f| f.summary.flow[..4] == one[..4]));
    assert!(from.iter().any(|f| f.summary.flow == one));
    // The network map: the paths' switches and links, each switch with its samples.
    let net = query::network(&ev, &pa, &hi, None, 0, None, Default::default(), 0).unwrap();
    let nodes: std::collections::BTreeSet<u32> = paths.values().flatten().copied().collect();
    let got: std::collections::BTreeSet<u32> = net.switches.iter().map(|s| s.node_id).collect();
    assert_eq!(got, nodes);
    let links: std::collections::BTreeSet<(u32, u32)> = paths
        .values()
        .flat_map(|p| p.windows(2).map(|w| (w[0], w[1])))
        .collect();
    let got: std::collections::BTreeSet<(u32, u32)> =
        net.links.iter().map(|l| (l.from, l.to)).collect();
    assert_eq!(got, links);
    assert!(net.switches.iter().all(|s| s.queue_samples > 0));
    // Ranked by the default measure, which the answer names: hop latency p99.
    assert_eq!(net.rank.to_string(), "hop_latency:p99");
    assert!(net
        .switches
        .iter()
        .all(|s| s.score == s.latency_p99.map(|x| x as f64)));
    assert!(net.switches.windows(2).all(|w| w[0].score >= w[1].score));
    // Another measure: queue occupancy p99.
    let q = query::Congestion::parse("queue_occupancy:p99").unwrap();
    let by_queue = query::network(&ev, &pa, &hi, None, 0, None, q, 0).unwrap();
    assert!(by_queue
        .switches
        .windows(2)
        .all(|w| w[0].queue_p99 >= w[1].queue_p99));
    assert_eq!(by_queue.store, "hist");
    // Without the flow-summary list, the answer says what to configure.
    let e = query::flows(
        &Env::new().collector.store("events").unwrap().region,
        None,
        0,
        &Default::default(),
        query::FlowOrder::Recent,
        1,
    )
    .unwrap_err();
    assert!(e.to_string().contains("at least 9 lists"), "{e}");
}

/// A flow that runs longer than `active_timeout_ms` is summarised while it runs (one summary
/// per timeout), so it is found before it ends; asked for by its key, every summary comes back,
/// newest first: the flow over time. Without a timeout, only its last.
#[test]
fn a_long_flow_is_summarised_while_it_runs() {
    for (active_ms, want) in [(10_000u64, 4usize), (0, 1)] {
        let mut events = store("events", "append");
        events.lists = Some(16);
        let env = Env::with(&[store("paths", "key-write"), events]);
        let gen = GenConfig {
            flows: 3,
            reroute_prob: 0.0,
            ..Default::default()
        };
        let pkts = generate(&gen);
        let mut sink = env.sink(&IntSinkConfig {
            active_timeout_ms: active_ms,
            idle_timeout_ms: 2_000,
            ..Default::default()
        });
        // One packet of the first flow a second, for 35 s.
        let p = &pkts[0];
        let t0 = p.time_ns;
        for i in 0..36u64 {
            let now = t0 + i * 1_000_000_000;
            sink.handle_frame(&md_frame(p, gen.int_udp_port), now);
            sink.tick(now + 1);
        }
        let ev = env.region("events");
        let running = query::flows(
            ev,
            None,
            0,
            &Default::default(),
            query::FlowOrder::Recent,
            10,
        )
        .unwrap()
        .flows;
        if active_ms > 0 {
            assert_eq!(running.len(), 1, "found while it runs");
            assert_eq!(running[0].summary.flow, p.flow);
        } else {
            assert!(running.is_empty(), "no summary before it leaves");
        }
        sink.flush(t0 + 40_000_000_000);
        let over_time = query::flows(
            ev,
            None,
            0,
            &query::FlowFilter {
                flow: Some(p.flow),
                ..Default::default()
            },
            query::FlowOrder::Recent,
            100,
        )
        .unwrap()
        .flows;
        assert_eq!(over_time.len(), want, "{over_time:?}");
        assert_eq!(over_time[0].summary.packets, 36, "the newest first");
        assert!(over_time
            .windows(2)
            .all(|w| w[0].summary.packets > w[1].summary.packets
                && w[0].summary.last_ns > w[1].summary.last_ns));
        assert!(over_time.iter().all(|f| f.summary.flow == p.flow));
    }
}

/// With a store of the long tier's keys (7 bytes, longer windows) beside the histogram store,
/// the sink writes every histogram count into both; a question about more time than the
/// histogram store holds is answered from the long tier, which says so in its windows and
/// store, with the same counts for the time both hold.
#[test]
fn the_long_tier_holds_the_same_counts_and_answers_the_longer_questions() {
    let mut fine = store("hist", "key-increment");
    fine.windows = Some(4);
    fine.window_ms = Some(60_000);
    let mut long = store("hist_day", "key-increment");
    long.key_len = Some(dta_int::layout::LONG_TIER_KEY_LEN as u8);
    long.windows = Some(24);
    long.window_ms = Some(3_600_000);
    let mut events = store("events", "append");
    events.lists = Some(16);
    let env = Env::with(&[store("paths", "key-write"), events, fine, long]);
    let gen = GenConfig {
        flows: 20,
        ..Default::default()
    };
    let pkts = generate(&gen);
    env.replayed(&pkts, gen.int_udp_port);
    let (hi, day) = (env.region("hist"), env.region("hist_day"));
    let now = dta_store::key_increment::unix_ms();
    let node = pkts[0].hops[1].node_id;
    for m in [Metric::HopLatency, Metric::QueueOccupancy] {
        let a =
            query::histogram_in(hi, node, m, None, None, Some(query::WindowSel::All), now).unwrap();
        let b = query::histogram_in(day, node, m, None, None, Some(query::WindowSel::All), now)
            .unwrap();
        assert!(a.total > 0);
        assert_eq!(
            (a.total, &a.buckets, &a.histogram),
            (b.total, &b.buckets, &b.histogram)
        );
    }
    // The tier for the time asked: the fine store up to what it holds (4 minutes), the long
    // tier beyond; without a long tier, the fine store, its answer saying it is cut.
    let last = |ms| Some(query::WindowSel::Last(ms));
    assert_eq!(
        query::tier_for(hi, Some(day), last(240_000)).header().name,
        "hist"
    );
    assert_eq!(
        query::tier_for(hi, Some(day), last(240_001)).header().name,
        "hist_day"
    );
    assert_eq!(
        query::tier_for(hi, None, last(86_400_000)).header().name,
        "hist"
    );
    assert_eq!(query::tier_for(hi, Some(day), None).header().name, "hist");
    let (ev, pa) = (env.region("events"), env.region("paths"));
    let day_net = query::network(
        ev,
        pa,
        hi,
        Some(day),
        0,
        last(86_400_000),
        Default::default(),
        now,
    )
    .unwrap();
    assert_eq!(day_net.store, "hist_day");
    assert!(day_net
        .windows
        .iter()
        .all(|w| w.end_ms - w.start_ms == 3_600_000));
    let hour_net = query::network(
        ev,
        pa,
        hi,
        Some(day),
        0,
        last(120_000),
        Default::default(),
        now,
    )
    .unwrap();
    assert_eq!(hour_net.store, "hist");
    let scores = |n: &query::Network| -> Vec<(u32, Option<u64>)> {
        n.switches
            .iter()
            .map(|s| (s.node_id, s.latency_p99))
            .collect()
    };
    assert_eq!(scores(&day_net), scores(&hour_net), "the same samples");
    // Without the long tier, a day is cut to the fine store's 4 minutes, and the answer says so.
    let cut = query::network(
        ev,
        pa,
        hi,
        None,
        0,
        last(86_400_000),
        Default::default(),
        now,
    )
    .unwrap();
    assert!(!cut.complete);
    assert!(
        cut.notes.iter().any(|n| n.contains("4 min")),
        "{:?}",
        cut.notes
    );
}

/// Hops that report their ports (INT bit 1) are kept per egress port too when a per-port
/// histogram store (8-byte keys) is there: each port's histogram holds exactly its samples, the
/// ports of a switch add up to the switch, and a question names the port (and is refused
/// without one, or of a store that keeps none).
#[test]
fn hops_reporting_ports_are_kept_per_port() {
    let mut ports = store("hist_port", "key-increment");
    ports.key_len = Some(dta_int::layout::PORT_KEY_LEN as u8);
    let env = Env::with(&[store("hist", "key-increment"), ports]);
    let gen = GenConfig {
        flows: 30,
        ..Default::default()
    };
    let mut pkts = generate(&gen);
    let mut truth: HashMap<(u32, u16), u64> = HashMap::new();
    for p in &mut pkts {
        let nodes: Vec<u32> = p.hops.iter().map(|h| h.node_id).collect();
        for (i, h) in p.hops.iter_mut().enumerate() {
            let port = nodes.get(i + 1).map_or(100, |n| 1 + (n % 100) as u16);
            h.egress_port = Some(port);
            *truth.entry((h.node_id, port)).or_default() += 1;
        }
    }
    env.replayed(&pkts, gen.int_udp_port);
    let (hist, per_port) = (env.region("hist"), env.region("hist_port"));
    let now = dta_store::key_increment::unix_ms();
    let mut by_switch: HashMap<u32, u64> = HashMap::new();
    for (&(node, port), &n) in &truth {
        let h = query::histogram_at(
            per_port,
            node,
            Some(port),
            Metric::HopLatency,
            None,
            None,
            None,
            now,
        )
        .unwrap();
        assert_eq!(h.total, n, "switch {node} port {port}");
        assert_eq!(h.port, Some(port));
        assert!(h.quantiles.p99.is_some());
        *by_switch.entry(node).or_default() += n;
    }
    for (&node, &n) in &by_switch {
        let h = query::histogram(hist, node, Metric::HopLatency, None, None).unwrap();
        assert_eq!(h.total, n, "switch {node}: its ports add up to it");
    }
    // A port that carried nothing answers no samples, and says the histogram is empty.
    let (&(node, _), _) = truth.iter().next().unwrap();
    let none = query::histogram_at(
        per_port,
        node,
        Some(999),
        Metric::HopLatency,
        None,
        None,
        None,
        now,
    )
    .unwrap();
    assert_eq!(none.total, 0);
    // Questions that cannot be answered: a per-port store without a port, a port of a store
    // that keeps none, the marker's port.
    for (region, port, says) in [
        (&per_port, None, "name the port"),
        (&hist, Some(1), "no per-port histograms"),
        (&per_port, Some(dta_int::layout::MARKER_PORT), "marker"),
    ] {
        let e = query::histogram_at(
            region,
            node,
            port,
            Metric::HopLatency,
            None,
            None,
            None,
            now,
        )
        .unwrap_err();
        assert!(e.to_string().contains(says), "{e}");
    }
}

/// A late report (numbered before the flow's latest) is not the current one: it raises no
/// change event against the latest, counts no path change and leaves the path as the newest
/// report had it; a threshold crossing it carries is still raised.
#[test]
fn a_late_report_raises_no_change_event() {
    let env = Env::new();
    let cfg = IntSinkConfig {
        thresholds: dta_int::ThresholdConfig {
            hop_latency: 900,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut sink = env.sink(&cfg);
    let sub = sink.subscribe(64);
    let hop = |node_id, latency| dta_int::gen::HopTruth {
        node_id,
        latency,
        queue: 10,
        util: 10,
        egress_port: None,
    };
    let packet = |t, mid, latency| GenPacket {
        time_ns: t,
        flow: *b"\x0a\0\0\x01\x0a\0\0\x02\x10\x00\x20\x00\x11",
        hops: vec![hop(1, 5), hop(mid, latency), hop(3, 5)],
    };
    let port = GenConfig::default().int_udp_port;
    // Sent A (seq 1), B (seq 2), A (seq 3) with a latency over the threshold; arrive 1, 3, 2.
    let sent = [
        packet(1_000, 2, 5),
        packet(2_000, 5, 5),
        packet(3_000, 2, 950),
    ];
    for (seq, p) in [(1u32, &sent[0]), (3, &sent[2]), (2, &sent[1])] {
        sink.handle_report(&stacked_report(7, seq, &md_frame(p, port)), p.time_ns);
    }
    sink.flush(10_000);
    let mut events = vec![];
    let mut record = None;
    for n in sub.rx.try_iter() {
        match n {
            Notification::Event(e) => events.push((e.kind, e.hop, e.node_id, e.value)),
            Notification::Flow(r) => record = Some(r),
        }
    }
    // Seq 3 after seq 1: no change (same path), one threshold crossing. Seq 2, late: no
    // change event (path 5 against the latest 2, or latency against 950); nothing else.
    assert_eq!(events, vec![(EventKind::HopLatency, 1, 2, 950)]);
    let r = record.expect("the flow's record at flush");
    assert_eq!(r.packets, 3);
    assert_eq!(r.hops[1].node_id, Some(2), "the newest report's path");
    assert_eq!(r.hops[1].hop_latency, Some(950));
    assert_eq!(r.hops[1].path_changes, 0);
    let path = query::path(env.region("paths"), &sent[0].flow, None).unwrap();
    assert_eq!(path.path, vec![1, 2, 3]);
}
