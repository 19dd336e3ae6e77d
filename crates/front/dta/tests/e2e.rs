//! End to end over loopback: reporters → UDP → translator → regions → queries, for every
//! primitive, in both wire protocols; and the `dta` binary's commands on the result.

mod common;

use common::dta;

use dta::demo::{self, DemoOptions};

#[test]
fn every_primitive_round_trips_in_both_protocols() {
    let report = demo::measure(&DemoOptions {
        region_dir: None,
        flows: 400,
        json: false,
    })
    .unwrap();
    for row in &report.rows {
        assert_eq!(
            (row.correct, row.empty, row.wrong),
            (row.queried, 0, 0),
            "{} over {} into {}: {row:?}",
            row.primitive,
            row.protocol,
            row.store
        );
    }
    let has = |p: &str, proto: &str| {
        report
            .rows
            .iter()
            .any(|r| r.primitive.starts_with(p) && r.protocol == proto && r.queried > 0)
    };
    for p in ["Key-Write", "Key-Increment", "Postcarding", "Append"] {
        assert!(has(p, "native"), "{p} native");
        assert!(has(p, "prototype"), "{p} prototype");
    }
    assert!(has("Sketch-Merge (Count-Min)", "native"));
    assert!(has("Sketch-Merge (HyperLogLog)", "native"));
    // Nothing the reporters sent was rejected.
    let rejected: u64 = report.translator["rejected"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(rejected, 0, "{}", report.translator);
}

fn json_of(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn cli_demo_then_query_and_inspect_the_regions() {
    let dir = tempfile::tempdir().unwrap();
    let out = dta()
        .args(["demo", "--flows", "200", "--region-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    common::assert_success(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Postcarding"), "{text}");

    // Key-Write, prototype stream: key 4 000 000 holds kw_data(0).
    let out = dta()
        .args([
            "query",
            "kw",
            "--store",
            "kw",
            "--key",
            "4000000",
            "--json",
            "--region-dir",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    let v = json_of(&out);
    assert_eq!(v["status"], "found");
    assert_eq!(v["data"], hex::encode(demo::kw_data(0)));

    // The 5-tuple form of a 13-byte key.
    let out = dta()
        .args([
            "query",
            "kw",
            "--store",
            "flows",
            "--key",
            "10.0.0.5:1029-10.1.0.1:80/6",
            "--region-dir",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    common::assert_success(&out);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&hex::encode(demo::flow_data(5))),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // Postcarding: flow 3 000 002's path.
    let out = dta()
        .args([
            "query",
            "postcard",
            "--store",
            "paths",
            "--key",
            "3000002",
            "--json",
            "--region-dir",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    let v = json_of(&out);
    let want: Vec<serde_json::Value> = demo::path(2, 5).into_iter().map(Into::into).collect();
    assert_eq!(v["path"], serde_json::Value::Array(want));

    // Append list 1 holds 0, 1, 2, ...
    let out = dta()
        .args([
            "query",
            "list",
            "--store",
            "events",
            "--list",
            "1",
            "--tail",
            "0",
            "--max",
            "3",
            "--json",
            "--region-dir",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    let v = json_of(&out);
    assert_eq!(
        v["entries"],
        serde_json::json!(["00000000", "00000001", "00000002"])
    );

    // An unknown key is "empty", with exit status 1.
    let out = dta()
        .args([
            "query",
            "kw",
            "--store",
            "kw",
            "--key",
            "0xdeadbeef",
            "--region-dir",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("empty"));

    let out = dta()
        .args(["inspect", "--json", "--region-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let v = json_of(&out);
    assert_eq!(v.as_array().unwrap().len(), 7);
    assert!(v
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["fill"].as_f64().unwrap() > 0.0));
}

#[test]
fn cli_decode_both_protocols_and_errors() {
    // Prototype Key-Write, short header: redundancy 2, key 7, data 01020304.
    let out = dta()
        .args(["decode", "--hex", "0100020000000701020304"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v = json_of(&out);
    assert_eq!(v["protocol"], "prototype");
    let s = v.to_string();
    assert!(s.contains("key_write") && s.contains("01020304"), "{s}");

    // Native: one Append report on list 3.
    let out = dta()
        .args([
            "decode",
            "--hex",
            "10800100000000010000000502000004000000030a0b0c0d",
        ])
        .output()
        .unwrap();
    let v = json_of(&out);
    assert_eq!(v["protocol"], "native", "{v}");
    assert!(v.to_string().contains("0a0b0c0d"), "{v}");

    // An INT-MD frame over UDP (the first INT spec vector), detected by its UDP port.
    let vectors: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../spec/vectors/int.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let frame = vectors["vectors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["expect"]["hops"].as_array().is_some_and(|h| h.len() >= 2))
        .unwrap();
    let out = dta()
        .args(["decode", "--as", "int", "--int-udp-port", "5000", "--hex"])
        .arg(frame["hex"].as_str().unwrap())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let v = json_of(&out);
    assert_eq!(v["hops"], frame["expect"]["hops"], "{v}");
    assert_eq!(v["flow"], frame["expect"]["flow"], "{v}");

    // A RoCEv2 frame: fields and a valid ICRC; with one ICRC byte flipped, icrc_valid is false
    // and the exit status 1.
    let roce: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../spec/vectors/roce.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let hex_frame = roce["vectors"][0]["hex"].as_str().unwrap().to_owned();
    let out = dta()
        .args(["decode", "--hex", &hex_frame])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v = json_of(&out);
    assert_eq!(v["icrc_valid"], true, "{v}");
    assert_eq!(v["bth"]["opcode"], "rc_rdma_write_only", "{v}");
    let mut bad = hex::decode(&hex_frame).unwrap();
    *bad.last_mut().unwrap() ^= 0x01;
    let out = dta()
        .args(["decode", "--hex", &hex::encode(&bad)])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json_of(&out)["icrc_valid"], false);

    // Garbage: a clear error reason and exit status 1.
    let out = dta().args(["decode", "--hex", "0901"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json_of(&out)["error"], "undecodable");
    assert_eq!(json_of(&out)["tried"]["dta"], "unknown_version");
    let out = dta().args(["decode", "--hex", "zz"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not valid hex"));
}
