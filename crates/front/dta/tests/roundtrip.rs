//! What one tool writes, another reads back with default options: `dta report` of every
//! primitive into a `dta translator` run from the example configuration (free ports, a temp
//! region directory, nothing else changed), then `dta query` of the keys it sent; `dta report`
//! to a dead port fails.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::{dta, free_udp_port, Stack};
use dta_reporter::loadgen::{
    build_count_min, expected_counter, expected_data, key_indices, key_vec, postcard_value,
    LoadSpec,
};
use dta_wire::Opcode;

/// The key indices a default `dta report` of `primitive` with `COUNT` reports draws.
fn spec(primitive: Opcode) -> LoadSpec {
    let mut s = LoadSpec::new(primitive);
    s.count = Some(COUNT);
    s
}

/// How often each key index occurs in the first `n` draws of `spec`.
fn occurrences(spec: &LoadSpec, n: u64) -> HashMap<u64, u64> {
    let mut m = HashMap::new();
    for i in key_indices(spec).unwrap().take(n as usize) {
        *m.entry(i).or_default() += 1;
    }
    m
}

fn hex_of(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Reports each `dta report` run sends (the only option besides `--to`, `--quiet` and, for the
/// second Sketch-Merge reporter, `--reporter-id`).
const COUNT: u64 = 1000;

#[test]
fn every_primitive_reported_with_defaults_reads_back_with_defaults() {
    let mut s = Stack::start();
    for p in ["kw", "ki", "postcard", "append", "sketch"] {
        s.report(COUNT, &["--primitive", p]);
    }
    // The example's Count-Min merges 2 reporters: the second is reporter 0.
    s.report(COUNT, &["--primitive", "sketch", "--reporter-id", "0"]);
    // The last Append batch and the Postcarding cache are flushed on the translator's timers.
    std::thread::sleep(Duration::from_millis(300));
    let stats = s.stop_translator();
    let rejected: u64 = stats["rejected"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(rejected, 0, "rejected: {}", stats["rejected"]);

    // Key-Write: every key holds its data.
    let kw = spec(Opcode::KeyWrite);
    for &i in occurrences(&kw, COUNT).keys().take(50) {
        let v = s.query("kw", &["--store", "kw", "--key", &i.to_string()]);
        assert_eq!(v["status"], "found", "kw key {i}: {v}");
        assert_eq!(v["data"], hex_of(&expected_data(&key_vec(i, 4), 4)), "{v}");
    }

    // Postcarding: every flow's whole path, values within the store's value set.
    let pc = spec(Opcode::Postcarding);
    let flows = occurrences(&pc, COUNT / u64::from(pc.hops));
    for &i in flows.keys().take(50) {
        let key = key_vec(i, 4);
        let v = s.query("postcard", &["--store", "paths", "--key", &i.to_string()]);
        assert_eq!(v["status"], "found", "postcard key {i}: {v}");
        let want: Vec<u32> = (0..pc.hops)
            .map(|h| postcard_value(&key, h, pc.postcard_values))
            .collect();
        assert_eq!(v["path"], serde_json::json!(want), "postcard key {i}: {v}");
    }

    // Append: list 0 holds the entries in the order sent.
    let ap = spec(Opcode::Append);
    let v = s.query("list", &["--store", "events", "--max", &COUNT.to_string()]);
    let want: Vec<String> = key_indices(&ap)
        .unwrap()
        .take(COUNT as usize)
        .map(|i| hex_of(&expected_data(&key_vec(i, 4), 4)))
        .collect();
    assert_eq!(v["entries"], serde_json::json!(want), "append list 0");

    // Sketch-Merge: the merged Count-Min of the two reporters' (identical) sketches.
    let sk = spec(Opcode::SketchMerge);
    let cm = build_count_min(&sk).unwrap();
    for &i in occurrences(&sk, COUNT).keys().take(50) {
        let key = key_vec(i, 4);
        let v = s.query("sketch", &["--store", "flowsizes", "--key", &i.to_string()]);
        assert_eq!(v["estimate"], 2 * cm.estimate(&key), "sketch key {i}: {v}");
    }

    // Key-Increment: every key counts its counter once per occurrence (the query reads the
    // store's redundancy, not its own default).
    let ki = spec(Opcode::KeyIncrement);
    for (&i, &n) in occurrences(&ki, COUNT).iter().take(50) {
        let v = s.query("ki", &["--store", "counters", "--key", &i.to_string()]);
        let want = n * expected_counter(&key_vec(i, 4));
        assert_eq!(v["count"], want, "ki key {i} ({n} reports): {v}");
    }
}

#[test]
fn report_to_a_dead_port_fails_with_a_message() {
    let dead = format!("127.0.0.1:{}", free_udp_port());
    for p in ["kw", "postcard"] {
        for count in ["1", "1000"] {
            let out = dta()
                .args([
                    "report",
                    "--no-flow-control",
                    "--to",
                    &dead,
                    "-q",
                    "-c",
                    count,
                ])
                .args(["--primitive", p])
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{p} x{count} to a dead port: {err}");
            assert!(err.contains("refused"), "{err}");
        }
    }
}
