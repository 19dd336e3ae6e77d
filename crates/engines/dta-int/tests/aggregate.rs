//! Aggregation, INT v1.0 and sharding, end to end into real region files: the same trace through
//! a sink writing every report's DTA reports at once (`aggregate = false`) and through one
//! writing per-flush deltas leaves every store's data area byte for byte the same (the header's
//! live write counter counts writes, the thing aggregation saves); a Telemetry Report v1.0 trace
//! answers every query as the v2.0 one does; two sinks of a group answer as one.

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use dta_collector::{Collector, StoreConfig};
use dta_int::gen::{
    generate, md_frame, md_frame_v1, report_v1, stacked_report, GenConfig, V1_DSCP,
};
use dta_int::layout::FLOW_KEY_LEN;
use dta_int::{query, shard_of, IntSink, IntSinkConfig, Metric, SinkGroup};
use dta_translator::{RegionSinks, Stats, Translator, TranslatorConfig};

const STORES: [&str; 4] = ["paths", "latency", "events", "hist"];

/// Small stores, so that flows share slots and the order of writes matters.
fn stores(small: bool) -> Vec<StoreConfig> {
    let (slots, chunks, counters) = if small {
        (1 << 9, 1 << 8, 1 << 10)
    } else {
        // Room for the default log-linear histograms' keys (thousands per switch) without a
        // key colliding on all its counters.
        (1 << 16, 1 << 16, 1 << 22)
    };
    [
        format!("name = 'paths'\nkind = 'key-write'\nslots = {slots}\nkey_len = 13\ndata_len = 24"),
        format!(
            "name = 'latency'\nkind = 'postcarding'\nchunks = {chunks}\nhops = 5\nkey_len = 13"
        ),
        "name = 'events'\nkind = 'append'\nlists = 8\ncapacity = 16384\nentry_len = 32\nbatch = 16"
            .to_string(),
        format!("name = 'hist'\nkind = 'key-increment'\ncounters = {counters}\nkey_len = 6"),
    ]
    .iter()
    .map(|t| toml::from_str(t).unwrap())
    .collect()
}

struct Env {
    _dir: tempfile::TempDir,
    collector: Collector,
}

impl Env {
    fn new(small: bool) -> Env {
        let dir = tempfile::tempdir().unwrap();
        let collector = Collector::create(dir.path(), &stores(small), false).unwrap();
        Env {
            _dir: dir,
            collector,
        }
    }
    fn translator(&self) -> Translator<RegionSinks> {
        Translator::colocated(
            &TranslatorConfig::default(),
            self.collector.regions(),
            Arc::new(Stats::default()),
        )
        .unwrap()
    }
    fn sink(&self, cfg: &IntSinkConfig) -> IntSink<RegionSinks> {
        IntSink::new(cfg, self.translator()).unwrap()
    }
    fn region(&self, name: &str) -> &dta_store::Region {
        &self.collector.store(name).unwrap().region
    }
    fn bytes(&self, name: &str) -> Vec<u8> {
        let r = self.region(name);
        let mut b = vec![0u8; r.mem().len() as usize];
        r.mem().read(0, &mut b).unwrap();
        b
    }
}

/// Feed `pkts` (alternately as frames and stacked reports), ticking every 50 packets.
fn feed(sink: &mut IntSink<RegionSinks>, pkts: &[dta_int::gen::GenPacket], port: u16) {
    for (i, p) in pkts.iter().enumerate() {
        let frame = md_frame(p, port);
        if i % 2 == 0 {
            sink.handle_report(&stacked_report(9, i as u32, &frame), p.time_ns);
        } else {
            sink.handle_frame(&frame, p.time_ns);
        }
        if i % 50 == 49 {
            sink.tick(p.time_ns);
        }
    }
    sink.flush(pkts.last().unwrap().time_ns + 1);
}

#[test]
fn aggregated_stores_equal_per_report_stores_byte_for_byte() {
    let gen = GenConfig {
        flows: 600,
        reroute_prob: 0.05,
        ..GenConfig::default()
    };
    let pkts = generate(&gen);
    assert!(pkts.len() > 2000, "{}", pkts.len());
    let base = IntSinkConfig {
        int_udp_port: Some(gen.int_udp_port),
        // Fewer flows than the trace: capacity evictions with owed writes.
        flow_capacity: 64,
        // Room for 12 of the 20 switches' histograms: early flushes.
        hist_deltas: 12 * 3 * dta_int::layout::DEFAULT_HISTOGRAM.count(),
        thresholds: dta_int::ThresholdConfig {
            queue_occupancy: 150,
            ..Default::default()
        },
        ..IntSinkConfig::default()
    };
    let (a, b) = (Env::new(true), Env::new(true));
    let mut per_report = a.sink(&IntSinkConfig {
        aggregate: false,
        ..base.clone()
    });
    let mut aggregated = b.sink(&IntSinkConfig {
        aggregate: true,
        delta_flush_ms: 1_000_000,
        ..base.clone()
    });
    feed(&mut per_report, &pkts, gen.int_udp_port);
    feed(&mut aggregated, &pkts, gen.int_udp_port);
    let (sa, sb) = (per_report.stats_snapshot(), aggregated.stats_snapshot());
    assert_eq!(sa, sb);
    assert!(sa.flows_capacity > 0, "no capacity eviction: {sa:?}");
    assert_eq!(per_report.translator().stats().total_rejected(), 0);
    assert_eq!(aggregated.translator().stats().total_rejected(), 0);

    for name in STORES {
        let (x, y) = (a.bytes(name), b.bytes(name));
        assert_eq!(x.len(), y.len());
        let differ: Vec<usize> = (0..x.len()).filter(|&i| x[i] != y[i]).collect();
        assert!(
            differ.is_empty(),
            "{name}: {} bytes differ, first at {:?}",
            differ.len(),
            differ.first()
        );
    }
    // Key-Increment: the same total added, in fewer writes.
    let (ta, tb) = (
        a.region("hist").mem().tally(),
        b.region("hist").mem().tally(),
    );
    assert_eq!(ta.added, tb.added);
    assert!(tb.writes < ta.writes, "{} vs {}", tb.writes, ta.writes);
    let (pa, pb) = (
        a.region("paths").mem().tally(),
        b.region("paths").mem().tally(),
    );
    assert!(pb.writes < pa.writes, "{} vs {}", pb.writes, pa.writes);
}

#[test]
fn queries_see_the_deltas_after_a_tick_of_delta_flush_ms() {
    let env = Env::new(false);
    let gen = GenConfig::default();
    let pkts = generate(&gen);
    let cfg = IntSinkConfig {
        int_udp_port: Some(gen.int_udp_port),
        delta_flush_ms: 10,
        idle_timeout_ms: 1_000_000,
        thresholds: dta_int::ThresholdConfig {
            path_change: false,
            ..Default::default()
        },
        ..IntSinkConfig::default()
    };
    let mut sink = env.sink(&cfg);
    let p = &pkts[0];
    sink.handle_frame(&md_frame(p, gen.int_udp_port), p.time_ns);
    // Owed, not yet written: a query does not find the path.
    let r = query::path(env.region("paths"), &p.flow, None).unwrap();
    assert_ne!(r.status, "found");
    sink.tick(p.time_ns + 5_000_000);
    assert_ne!(
        query::path(env.region("paths"), &p.flow, None)
            .unwrap()
            .status,
        "found"
    );
    sink.tick(p.time_ns + 10_000_000);
    let r = query::path(env.region("paths"), &p.flow, None).unwrap();
    assert_eq!(r.status, "found");
    assert_eq!(r.path, p.hops.iter().map(|h| h.node_id).collect::<Vec<_>>());
    let h = query::histogram(
        env.region("hist"),
        p.hops[0].node_id,
        Metric::HopLatency,
        None,
        None,
    )
    .unwrap();
    assert_eq!(h.total, 1);
}

/// Every query of `env` answers `pkts`' ground truth: the path and hop latencies of each flow's
/// last packet, exact histograms.
fn check_truth(env: &Env, cfg: &IntSinkConfig, pkts: &[dta_int::gen::GenPacket]) {
    let last: HashMap<[u8; FLOW_KEY_LEN], _> = pkts.iter().map(|p| (p.flow, p)).collect();
    let pc = env.region("latency");
    for (flow, p) in &last {
        let r = query::path(env.region("paths"), flow, None).unwrap();
        assert_eq!(r.status, "found");
        assert_eq!(r.path, p.hops.iter().map(|h| h.node_id).collect::<Vec<_>>());
        for (i, h) in p.hops.iter().enumerate() {
            let r = query::hop_latency(pc, flow, i as u8, cfg.postcard_values, 1).unwrap();
            assert_eq!(
                r.latency,
                Some(cfg.postcard_value(h.latency) as u64),
                "hop {i}"
            );
        }
    }
    let mut truth = common::Counts::new();
    for p in pkts {
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
    for &node in &nodes {
        for m in Metric::ALL {
            common::assert_histogram(env.region("hist"), &cfg.histogram, node, m, &truth);
        }
    }
}

#[test]
fn telemetry_report_v1_with_int_v1_goes_through_the_whole_sink() {
    let env = Env::new(false);
    let gen = GenConfig::default();
    let pkts = generate(&gen);
    let cfg = IntSinkConfig {
        int_udp_port: None,
        int_dscp: Some(V1_DSCP),
        ..IntSinkConfig::default()
    };
    let mut sink = env.sink(&cfg);
    let sub = sink.subscribe(1 << 16);
    for (i, p) in pkts.iter().enumerate() {
        sink.handle_report(&report_v1(99, i as u32, &md_frame_v1(p)), p.time_ns);
    }
    sink.flush(pkts.last().unwrap().time_ns + 1);
    let st = sink.stats_snapshot();
    assert!(st.errors.is_empty(), "{:?}", st.errors);
    assert_eq!(st.ignored_reports, 0);
    assert_eq!(st.md_packets, pkts.len() as u64);
    assert_eq!(sink.translator().stats().total_rejected(), 0);
    check_truth(&env, &cfg, &pkts);
    // Flow records: packets per flow and the latest hop values, as for v2.0.
    let mut packets: HashMap<[u8; FLOW_KEY_LEN], u64> = HashMap::new();
    for p in &pkts {
        *packets.entry(p.flow).or_default() += 1;
    }
    let records: Vec<_> = sub
        .rx
        .try_iter()
        .filter_map(|n| match n {
            dta_int::Notification::Flow(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(records.len(), packets.len());
    for r in &records {
        assert_eq!(r.packets, packets[&r.flow]);
        assert_eq!(r.hops.len(), gen.hops);
    }
}

#[test]
fn two_sinks_of_a_group_answer_as_one() {
    let gen = GenConfig::default();
    let pkts = generate(&gen);
    let cfg = IntSinkConfig {
        int_udp_port: Some(gen.int_udp_port),
        ..IntSinkConfig::default()
    };
    let env = Env::new(false);
    let group = SinkGroup::new(&cfg, 2, 1024);
    let mut sinks: Vec<_> = (0..2)
        .map(|i| group.sink(i, &cfg, env.translator()).unwrap())
        .collect();
    assert!(group.sink(2, &cfg, env.translator()).is_err());
    let mut per = [0usize; 2];
    for (i, p) in pkts.iter().enumerate() {
        let s = shard_of(&p.flow, 2);
        per[s] += 1;
        assert!(sinks[s].owns(&p.flow) && !sinks[1 - s].owns(&p.flow));
        sinks[s].handle_report(
            &stacked_report(9, i as u32, &md_frame(p, gen.int_udp_port)),
            p.time_ns,
        );
    }
    assert!(per[0] > 0 && per[1] > 0, "{per:?}");
    let end = pkts.last().unwrap().time_ns + 1;
    for s in &mut sinks {
        s.flush(end);
    }
    // Events handed between the translators' inboxes are applied on their owners' next tick.
    for s in &mut sinks {
        s.tick(end);
    }
    for s in &sinks {
        assert_eq!(s.translator().stats().total_rejected(), 0);
        assert!(s.stats_snapshot().errors.is_empty());
    }
    check_truth(&env, &cfg, &pkts);
}

#[test]
fn a_batch_is_handled_as_its_reports_one_by_one() {
    let gen = GenConfig {
        flows: 300,
        ..GenConfig::default()
    };
    let pkts = generate(&gen);
    // Every kind of input: stacked v2.0 reports, v1.0 reports, postcards, drop reports,
    // garbage.
    let mut reports: Vec<(Vec<u8>, u64)> = vec![];
    for (i, p) in pkts.iter().enumerate() {
        let r = match i % 7 {
            0 => report_v1(5, i as u32, &md_frame_v1(p)),
            1 => dta_int::gen::postcard_report(p, i % gen.hops, i as u32, 64, None),
            2 if i % 5 == 0 => dta_int::gen::postcard_report(p, 1, i as u32, 64, Some(3)),
            3 if i % 11 == 0 => vec![0x2f; 9],
            _ => stacked_report(9, i as u32, &md_frame(p, gen.int_udp_port)),
        };
        reports.push((r, p.time_ns));
    }
    let cfg = IntSinkConfig {
        int_udp_port: Some(gen.int_udp_port),
        int_dscp: Some(V1_DSCP),
        flow_capacity: 128,
        thresholds: dta_int::ThresholdConfig {
            queue_occupancy: 150,
            ..Default::default()
        },
        ..IntSinkConfig::default()
    };
    let (a, b) = (Env::new(true), Env::new(true));
    let (mut one, mut batched) = (a.sink(&cfg), b.sink(&cfg));
    let (sub_a, sub_b) = (one.subscribe(1 << 16), batched.subscribe(1 << 16));
    for (r, t) in &reports {
        one.handle_report(r, *t);
    }
    for chunk in reports.chunks(37) {
        let batch: Vec<(&[u8], u64)> = chunk.iter().map(|(r, t)| (&r[..], *t)).collect();
        batched.handle_reports(&batch);
    }
    let end = pkts.last().unwrap().time_ns + 1;
    one.flush(end);
    batched.flush(end);
    let (sa, sb) = (one.stats_snapshot(), batched.stats_snapshot());
    assert_eq!(sa, sb);
    assert!(sa.md_packets > 0 && sa.postcards > 0 && sa.drop_reports > 0 && !sa.errors.is_empty());
    let (na, nb): (Vec<_>, Vec<_>) = (sub_a.rx.try_iter().collect(), sub_b.rx.try_iter().collect());
    assert_eq!(format!("{na:?}"), format!("{nb:?}"));
    for name in STORES {
        assert!(a.bytes(name) == b.bytes(name), "{name} differs");
    }
}

/// Reports that arrive out of the order their reporter numbered them in (two receive paths,
/// the network) leave each flow's path record and hop latencies to its newest report by
/// number, in v2.0 and v1.0 alike; the counts and histograms take every report.
#[test]
fn late_reports_leave_each_flows_latest_to_its_newest_by_number() {
    let gen = GenConfig {
        flows: 300,
        reroute_prob: 0.2,
        ..GenConfig::default()
    };
    let pkts = generate(&gen);
    // Each block of 256 reports delivered last first: within blocks, every flow's reports arrive
    // newest first.
    let order: Vec<usize> = (0..pkts.len())
        .collect::<Vec<_>>()
        .chunks(256)
        .flat_map(|c| c.iter().rev().copied().collect::<Vec<_>>())
        .collect();
    // Flows whose last report delivered is not their newest: arrival order would get them wrong.
    let newest: HashMap<[u8; FLOW_KEY_LEN], usize> =
        pkts.iter().enumerate().map(|(i, p)| (p.flow, i)).collect();
    let delivered_last: HashMap<[u8; FLOW_KEY_LEN], usize> =
        order.iter().map(|&i| (pkts[i].flow, i)).collect();
    let wrong = newest.iter().filter(|(f, i)| delivered_last[*f] != **i);
    let differ = wrong
        .filter(|(f, &i)| {
            let (a, b) = (&pkts[i], &pkts[delivered_last[*f]]);
            a.hops
                .iter()
                .zip(&b.hops)
                .any(|(x, y)| x.latency != y.latency)
        })
        .count();
    assert!(differ > 20, "{differ} flows: the trace reorders too few");
    for v1 in [false, true] {
        let env = Env::new(false);
        let cfg = IntSinkConfig {
            int_udp_port: (!v1).then_some(gen.int_udp_port),
            int_dscp: v1.then_some(V1_DSCP),
            ..IntSinkConfig::default()
        };
        let mut sink = env.sink(&cfg);
        let sub = sink.subscribe(1 << 16);
        // The numbering starts near the 22-bit wrap: the order holds across it.
        let base = dta_int::cache::SEQ_MASK - 1000;
        for &i in &order {
            let p = &pkts[i];
            let seq = base.wrapping_add(i as u32);
            let report = if v1 {
                report_v1(99, seq, &md_frame_v1(p))
            } else {
                stacked_report(
                    9,
                    seq & dta_int::cache::SEQ_MASK,
                    &md_frame(p, gen.int_udp_port),
                )
            };
            sink.handle_report(&report, p.time_ns);
        }
        sink.flush(pkts.last().unwrap().time_ns + 1);
        let st = sink.stats_snapshot();
        assert!(st.errors.is_empty(), "{:?}", st.errors);
        assert_eq!(st.md_packets, pkts.len() as u64);
        check_truth(&env, &cfg, &pkts);
        // The flow records' latest hop values are the newest report's.
        let last: HashMap<[u8; FLOW_KEY_LEN], _> = pkts.iter().map(|p| (p.flow, p)).collect();
        let mut records = 0;
        for n in sub.rx.try_iter() {
            if let dta_int::Notification::Flow(r) = n {
                records += 1;
                let p = last[&r.flow];
                let nodes: Vec<_> = r.hops.iter().map(|h| h.node_id).collect();
                let want: Vec<_> = p.hops.iter().map(|h| Some(h.node_id)).collect();
                assert_eq!(nodes, want, "v1 {v1}: the path of the newest report");
                let lat: Vec<_> = r.hops.iter().map(|h| h.hop_latency).collect();
                let want: Vec<_> = p.hops.iter().map(|h| Some(h.latency)).collect();
                assert_eq!(lat, want, "v1 {v1}: the newest report's hop latencies");
            }
        }
        assert_eq!(records, last.len());
    }
}
