//! `dta export kafka` and `dta export kafka-consume` against a real single-node Kafka broker
//! (`dta_testkit::kafka`): what the exporter writes with default options, the consumer reads
//! back; with `--cursors` a second run exports only what was appended since. A counted skip
//! only when Java or the Kafka jars are missing.

use std::path::Path;
use std::process::Command;

use dta_collector::{Collector, StoreConfig};
use dta_store::append::AppendLayout;
use dta_store::key_increment::KeyIncrementLayout;
use dta_testkit::kafka::KafkaBroker;

const STORES: &[&str] = &[
    "name = 'events'\nkind = 'append'\nlists = 2\ncapacity = 1024\nentry_len = 8\nbatch = 4",
    "name = 'counters'\nkind = 'key-increment'\ncounters = 4096\nkey_len = 4",
];

/// Append `n` entries to each list (entry = list, index as bytes) and add `n` to the counter of
/// key 01020304; returns the (list, index, entry) written.
fn write(dir: &Path, from: u64, n: u64) -> Vec<(u32, u64, Vec<u8>)> {
    let stores: Vec<StoreConfig> = STORES.iter().map(|t| toml::from_str(t).unwrap()).collect();
    let c = Collector::create(dir, &stores, false).unwrap();
    let ev = c.store("events").unwrap().region.clone();
    let layout = AppendLayout::new(ev.header()).unwrap();
    let mut out = vec![];
    for l in 0..2u32 {
        for i in from..from + n {
            let mut e = (i as u32).to_be_bytes().to_vec();
            e.extend_from_slice(&l.to_be_bytes());
            layout
                .write_entries(l, i, &e, &mut ev.mem().sink())
                .unwrap();
            out.push((l, i, e));
        }
    }
    let ki = c.store("counters").unwrap().region.clone();
    let kl = KeyIncrementLayout::new(ki.header()).unwrap();
    kl.apply(&[1, 2, 3, 4], n, kl.redundancy(), &mut ki.mem().sink())
        .unwrap();
    c.flush();
    out
}

fn dta(args: &[&str]) -> std::process::Output {
    let out = Command::new(env!("CARGO_BIN_EXE_dta"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "dta {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn consume(broker: &str, topic: &str) -> Vec<serde_json::Value> {
    let out = dta(&[
        "export",
        "kafka-consume",
        "--brokers",
        broker,
        "--topic",
        topic,
    ]);
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn exported_entries_and_snapshots_read_back_and_cursors_resume() {
    let broker = match KafkaBroker::start() {
        Ok(b) => b,
        Err(why) => dta_testkit::skip!("{why}"),
    };
    let tmp = tempfile::tempdir().unwrap();
    let regions = tmp.path().join("regions");
    let cursors = tmp.path().join("cursors.json");
    let b = broker.bootstrap();
    let (regions_s, cursors_s) = (regions.to_str().unwrap(), cursors.to_str().unwrap());
    let export = |extra: &[&str]| {
        let mut a = vec![
            "export",
            "kafka",
            "--region-dir",
            regions_s,
            "--brokers",
            &b,
            "--cursors",
            cursors_s,
            "--duration",
            "1",
        ];
        a.extend_from_slice(extra);
        let out = dta(&a);
        let stderr = String::from_utf8(out.stderr).unwrap();
        let json = &stderr[stderr.find("{\n").expect("summary JSON")..];
        serde_json::from_str::<serde_json::Value>(json).unwrap()
    };

    let mut written = write(&regions, 0, 100);
    let s1 = export(&["--snapshot", "counters=0x01020304"]);
    assert_eq!(s1["append"]["events"]["exported"], 200, "{s1}");
    assert_eq!(s1["kafka"]["delivered"], s1["kafka"]["queued"]);
    assert_eq!(s1["kafka"]["dropped"], 0);

    // More entries; the second run starts where the cursors say.
    written.extend(write(&regions, 100, 50));
    let s2 = export(&["--format", "protobuf", "--compression", "zstd"]);
    assert_eq!(s2["append"]["events"]["exported"], 100, "{s2}");

    let got = consume(&b, "dta.append");
    assert_eq!(got.len(), written.len(), "each entry exactly once");
    for r in &got {
        let (l, i) = (
            r["headers"]["dta.list"].as_u64().unwrap() as u32,
            r["headers"]["dta.index"].as_u64().unwrap(),
        );
        let (_, _, e) = written
            .iter()
            .find(|w| w.0 == l && w.1 == i)
            .unwrap_or_else(|| panic!("{l}/{i} never written"));
        // Both runs' records read back alike (JSON, then zstd-compressed protobuf).
        assert_eq!(r["value"]["raw"], hex_of(e), "{r}");
        assert_eq!(r["value"]["index"], i);
        assert_eq!(r["value"]["record"], "raw");
        let format = if i < 100 { "json" } else { "protobuf" };
        assert_eq!(r["headers"]["dta.format"], format);
        assert_eq!(r["key"], format!("events/{l}"));
        assert_eq!(r["headers"]["dta.store"], "events");
        assert_eq!(r["partition"], 0);
    }
    let snaps = consume(&b, "dta.snapshots");
    assert!(!snaps.is_empty());
    let last = &snaps.last().unwrap()["value"];
    assert_eq!(last["store"], "counters");
    assert_eq!(last["key"], "01020304");
    assert!(
        last["key_increment"]["count"].as_u64().unwrap() >= 100,
        "{last}"
    );
}

fn hex_of(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
