//! The Kafka records as a pipeline reads them: an INT trace (`dta pcap gen`, with its ground
//! truth) replayed into `dta int-sink --kafka` (protobuf, zstd) and its events store exported by
//! `dta export kafka` (JSON, lz4) with a key snapshot, against a real Kafka broker. Then tools we
//! did not write read them, knowing only the shipped schema files:
//! - `schemas/examples/consume.py` (kafka-python, protoc-generated code from `schemas/dta.proto`,
//!   `jsonschema` against `schemas/json/`) reads every record of every topic, each one the same
//!   as `dta export kafka-consume` decodes it;
//! - `schemas/examples/clickhouse.py` loads the topics into ClickHouse (chDB) with
//!   `schemas/clickhouse/tables.sql` and answers the operator's queries (top flows by latency per
//!   minute, a switch's latency over an hour), checked against the ground truth.
//!
//! A counted skip when Java or the Kafka jars are missing, or `.venv` lacks the Python packages
//! (`scripts/requirements-dev.txt`).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{assert_success, dta};
use dta_testkit::kafka::KafkaBroker;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../..");

/// The repository's `.venv` Python when it has every package the tools import.
fn python() -> Result<PathBuf, String> {
    let p = Path::new(ROOT).join(".venv/bin/python");
    let ok = Command::new(&p)
        .args([
            "-c",
            "import kafka, chdb, jsonschema, grpc_tools, lz4, zstandard",
        ])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        Ok(p)
    } else {
        Err(format!(
            "{} lacks kafka-python, chdb, jsonschema, grpcio-tools, lz4 or zstandard \
             (scripts/setup.sh installs them)",
            p.display()
        ))
    }
}

/// Run a tool of `schemas/examples` and return its JSON lines.
fn tool(python: &Path, script: &str, args: &[&str]) -> Vec<serde_json::Value> {
    let out = Command::new(python)
        .arg(Path::new(ROOT).join("schemas/examples").join(script))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{script} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    lines(&out.stdout)
}

/// A consumed record's (partition, offset).
fn at(r: &serde_json::Value) -> (u64, u64) {
    (
        r["partition"].as_u64().unwrap(),
        r["offset"].as_u64().unwrap(),
    )
}

fn lines(b: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(b)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// One flow of the ground truth as the records name it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct FiveTuple(String, String, u64, u64, u64);

impl FiveTuple {
    fn of(r: &serde_json::Value) -> FiveTuple {
        FiveTuple(
            r["src_addr"].as_str().unwrap().into(),
            r["dst_addr"].as_str().unwrap().into(),
            r["src_port"].as_u64().unwrap(),
            r["dst_port"].as_u64().unwrap(),
            r["protocol"].as_u64().unwrap(),
        )
    }

    /// From `SRC:SPORT-DST:DPORT/PROTO`.
    fn parse(s: &str) -> FiveTuple {
        let (a, proto) = s.split_once('/').unwrap();
        let (src, dst) = a.split_once('-').unwrap();
        let (sa, sp) = src.split_once(':').unwrap();
        let (da, dp) = dst.split_once(':').unwrap();
        FiveTuple(
            sa.into(),
            da.into(),
            sp.parse().unwrap(),
            dp.parse().unwrap(),
            proto.parse().unwrap(),
        )
    }
}

/// What the ground truth says of a flow: packets, path, each hop's (latency sum, count).
type FlowTruth = (u64, Vec<u64>, Vec<(u64, u64)>);

/// What the ground truth says of each flow and switch.
struct Truth {
    flows: BTreeMap<FiveTuple, FlowTruth>,
    /// By node id: (packets, latency sum).
    switches: BTreeMap<u64, (u64, u64)>,
}

fn truth(t: &serde_json::Value) -> Truth {
    let tf = t["flows"].as_array().unwrap();
    let mut flows: BTreeMap<FiveTuple, FlowTruth> = BTreeMap::new();
    let mut by_index = vec![];
    for f in tf {
        let k = FiveTuple::parse(f["flow"].as_str().unwrap());
        let path: Vec<u64> = f["path"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_u64().unwrap())
            .collect();
        let hops = vec![(0, 0); path.len()];
        flows.insert(k.clone(), (f["packets"].as_u64().unwrap(), path, hops));
        by_index.push(k);
    }
    for fr in t["frames"].as_array().unwrap() {
        let k = &by_index[fr["flow"].as_u64().unwrap() as usize];
        let f = flows.get_mut(k).unwrap();
        for (h, hop) in fr["hops"].as_array().unwrap().iter().enumerate() {
            f.2[h].0 += hop[1].as_u64().unwrap();
            f.2[h].1 += 1;
        }
    }
    let switches = t["switches"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(n, s)| {
            let l = &s["hop_latency"];
            (
                n.parse().unwrap(),
                (l["count"].as_u64().unwrap(), l["sum"].as_u64().unwrap()),
            )
        })
        .collect();
    Truth { flows, switches }
}

/// The path latency a flow record carries: its hops' average latencies summed, rounded.
fn path_latency(hops: &[(u64, u64)]) -> u64 {
    hops.iter()
        .map(|&(sum, n)| sum as f64 / n as f64)
        .sum::<f64>()
        .round() as u64
}

/// The view of the top flows per minute, its minute as Unix seconds.
const TOP: &str = "SELECT toUnixTimestamp(minute) AS minute_s, * EXCEPT minute \
    FROM dta.top_flows_by_latency_per_minute";

#[test]
fn a_consumer_and_clickhouse_read_every_record_from_the_schemas_alone() {
    let python = match python() {
        Ok(p) => p,
        Err(why) => dta_testkit::skip!("{why}"),
    };
    let broker = match KafkaBroker::start() {
        Ok(b) => b,
        Err(why) => dta_testkit::skip!("{why}"),
    };
    let b = broker.bootstrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();

    // The trace and its ground truth; the INT sink exports events and flow records as
    // protobuf in zstd-compressed batches.
    let export = [
        "--kafka",
        &b,
        "--kafka-format",
        "protobuf",
        "--kafka-compression",
        "zstd",
    ];
    let (t, _) = common::replay_into_int_sink(d, 120, 11, 8000, &export);
    let truth = truth(&t);

    // The events store's entries (events and flow summaries) and a snapshot of one flow's path:
    // JSON, lz4-compressed batches.
    let (first, _) = truth.flows.iter().next().unwrap();
    let flow_key = format!(
        "{}:{}-{}:{}/{}",
        first.0, first.2, first.1, first.3, first.4
    );
    let out = dta()
        .args(["export", "kafka", "--brokers", &b, "--duration", "1"])
        .args([
            "--format",
            "json",
            "--compression",
            "lz4",
            "--append",
            "events",
        ])
        .args(["--snapshot", &format!("paths={flow_key}")])
        .arg("--region-dir")
        .arg(d.join("regions"))
        .output()
        .unwrap();
    assert_success(&out);

    // Every topic read by the schema-only consumer equals what dta decodes, record for record.
    let mut read = BTreeMap::new();
    for topic in ["dta.flows", "dta.events", "dta.append", "dta.snapshots"] {
        let theirs = tool(&python, "consume.py", &["--brokers", &b, "--topic", topic]);
        let ours = lines(
            &dta()
                .args(["export", "kafka-consume", "--brokers", &b, "--topic", topic])
                .output()
                .unwrap()
                .stdout,
        );
        assert!(!theirs.is_empty(), "{topic}: no records");
        assert_eq!(theirs.len(), ours.len(), "{topic}");
        let ours: BTreeMap<_, _> = ours.iter().map(|r| (at(r), r)).collect();
        for r in &theirs {
            let o = ours[&at(r)];
            assert_eq!(r["record"], o["value"], "{topic}: {r} vs {o}");
            assert_eq!(r["schema"], o["headers"]["dta.schema"]);
        }
        read.insert(topic, theirs);
    }
    let formats = |topic: &str| -> Vec<String> {
        let mut f: Vec<String> = read[topic]
            .iter()
            .map(|r| r["format"].as_str().unwrap().to_owned())
            .collect();
        f.dedup();
        f
    };
    assert_eq!(formats("dta.flows"), ["protobuf"]);
    assert_eq!(formats("dta.append"), ["json"]);

    // Flow records: every flow of the trace, its packets, path and per-hop averages exact.
    let mut records: BTreeMap<FiveTuple, &serde_json::Value> = BTreeMap::new();
    for r in &read["dta.flows"] {
        records.insert(FiveTuple::of(&r["record"]), &r["record"]);
    }
    assert_eq!(records.len(), truth.flows.len(), "one record per flow");
    for (k, (packets, path, hops)) in &truth.flows {
        let r = records
            .get(k)
            .unwrap_or_else(|| panic!("{k:?}: no flow record"));
        assert_eq!(r["packets"], *packets, "{k:?}");
        let hr = r["hops"].as_array().unwrap();
        let nodes: Vec<u64> = hr.iter().map(|h| h["node_id"].as_u64().unwrap()).collect();
        assert_eq!(&nodes, path, "{k:?}");
        for (h, &(sum, n)) in hr.iter().zip(hops) {
            // serde_json parses floats to within an ulp.
            let (got, want) = (
                h["avg_hop_latency"].as_f64().unwrap(),
                sum as f64 / n as f64,
            );
            assert!((got - want).abs() <= 1e-9 * want, "{k:?}: {got} vs {want}");
        }
        assert_eq!(r["path_latency_ns"], path_latency(hops), "{k:?}");
    }
    // The Append entries carry the sink's flow summaries, decoded by the store's layout.
    let summaries: Vec<_> = read["dta.append"]
        .iter()
        .filter_map(|r| r["record"].get("flow_summary"))
        .collect();
    assert!(summaries.len() >= truth.flows.len(), "{}", summaries.len());
    for s in &summaries {
        let (packets, _, hops) = &truth.flows[&FiveTuple::of(s)];
        assert_eq!(s["packets"], *packets);
        assert_eq!(s["path_latency_ns"], path_latency(hops));
    }
    // The consumer checks what it reads: a value its headers call a protobuf IntEvent but that
    // is not one, and an event missing a field, are refused (exit status 1, each named).
    {
        use dta_export::kafka::{KafkaProducer, Message, ProducerOptions};
        let mut opts = ProducerOptions::new(vec![b.clone()]);
        opts.topics = vec!["bogus.events".into()];
        let p = KafkaProducer::start(opts).unwrap();
        let headers = |f: &str| {
            vec![
                ("dta.schema", b"dta.v1.IntEvent".to_vec()),
                ("dta.format", f.as_bytes().to_vec()),
            ]
        };
        for (value, format) in [
            (vec![9u8, 0x0a, 1], "protobuf"),
            (b"{\"seq\":1}".to_vec(), "json"),
        ] {
            p.send(Message {
                topic: "bogus.events".into(),
                partition: 0,
                key: None,
                value,
                headers: headers(format),
                timestamp_ms: 0,
            })
            .unwrap();
        }
        p.flush(std::time::Duration::from_secs(30)).unwrap();
        let out = Command::new(&python)
            .arg(Path::new(ROOT).join("schemas/examples/consume.py"))
            .args(["--brokers", &b, "--topic", "bogus.events"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(
            err.contains("bogus.events/0@0") && err.contains("bogus.events/0@1"),
            "{err}"
        );
        assert!(out.stdout.is_empty());
    }
    let snap = &read["dta.snapshots"].last().unwrap()["record"];
    assert_eq!(snap["key_write"]["status"], "found", "{snap}");

    // ClickHouse: the shipped tables and views, fed from the topics.
    let rows = tool(
        &python,
        "clickhouse.py",
        &[
            "--brokers",
            &b,
            "--db",
            d.join("ch").to_str().unwrap(),
            "--query",
            TOP,
            "--query",
            "switch_latency_per_hour",
            "--query",
            "switch_latency_histogram_per_hour",
            "--query",
            "events_per_minute",
            "--query",
            "SELECT uniqExact(store, list, `index`) AS entries FROM dta.append_entries",
        ],
    );
    let of =
        |q: &str| -> Vec<&serde_json::Value> { rows.iter().filter(|r| r["query"] == q).collect() };
    // Top flows: per minute of the flow's last packet, the ten of highest path latency.
    let minute_of = |last_ns: u64| last_ns / 1_000_000_000 / 60 * 60;
    let mut want: BTreeMap<u64, Vec<(u64, FiveTuple)>> = BTreeMap::new();
    for (k, (_, _, hops)) in &truth.flows {
        let last = records[k]["last_ns"].as_u64().unwrap();
        want.entry(minute_of(last))
            .or_default()
            .push((path_latency(hops), k.clone()));
    }
    for v in want.values_mut() {
        v.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        v.truncate(10);
    }
    let mut got: BTreeMap<u64, Vec<(u64, FiveTuple)>> = BTreeMap::new();
    for r in of(TOP) {
        got.entry(r["minute_s"].as_u64().unwrap())
            .or_default()
            .push((r["path_latency_ns"].as_u64().unwrap(), FiveTuple::of(r)));
    }
    assert_eq!(got, want, "top flows by latency per minute");
    // A switch's hour: its packets and mean latency exact, its histogram the flows' averages.
    let mut per_switch: BTreeMap<u64, (u64, f64)> = BTreeMap::new();
    for r in of("switch_latency_per_hour") {
        let e = per_switch
            .entry(r["node_id"].as_u64().unwrap())
            .or_default();
        let p = r["packets"].as_u64().unwrap();
        e.0 += p;
        e.1 += r["mean_latency_ns"].as_f64().unwrap() * p as f64;
    }
    assert_eq!(
        per_switch.keys().collect::<Vec<_>>(),
        truth.switches.keys().collect::<Vec<_>>()
    );
    for (n, &(packets, sum)) in &truth.switches {
        let (p, s) = per_switch[n];
        assert_eq!(p, packets, "switch {n}");
        assert!(
            (s - sum as f64).abs() <= 1e-6 * sum as f64,
            "switch {n}: {s} vs {sum}"
        );
    }
    let mut hist_want: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    for (packets, path, hops) in truth.flows.values() {
        for (node, &(sum, n)) in path.iter().zip(hops) {
            let bucket = ((sum as f64 / n as f64) as u64) / 1000 * 1000;
            *hist_want.entry((*node, bucket)).or_default() += packets;
        }
    }
    let mut hist_got: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    for r in of("switch_latency_histogram_per_hour") {
        *hist_got
            .entry((
                r["node_id"].as_u64().unwrap(),
                r["bucket_ns"].as_u64().unwrap(),
            ))
            .or_default() += r["packets"].as_u64().unwrap();
    }
    assert_eq!(hist_got, hist_want, "switch latency histograms");
    // Events: each counted once (duplicates of at-least-once delivery dropped by seq), by kind.
    let seqs: std::collections::BTreeSet<u64> = read["dta.events"]
        .iter()
        .map(|r| r["record"]["seq"].as_u64().unwrap())
        .collect();
    let counted: u64 = of("events_per_minute")
        .iter()
        .map(|r| {
            assert_eq!(r["kind"], "hop_latency");
            r["events"].as_u64().unwrap()
        })
        .sum();
    assert_eq!(counted, seqs.len() as u64);
    let entries: std::collections::BTreeSet<(u64, u64)> = read["dta.append"]
        .iter()
        .map(|r| {
            (
                r["record"]["list"].as_u64().unwrap(),
                r["record"]["index"].as_u64().unwrap(),
            )
        })
        .collect();
    let stored = rows
        .iter()
        .find_map(|r| r.get("entries"))
        .expect("append entries");
    assert_eq!(stored.as_u64(), Some(entries.len() as u64));
    drop(broker);
}
