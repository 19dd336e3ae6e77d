//! The monitoring systems end to end (docs/systems.md): a collector and translator run from
//! `examples/systems.toml` (free ports, a temp region directory, nothing else changed),
//! `dta report --workload <system>` over a synthesized trace, then `dta query <system> ...` with
//! default options (the region directory only) answers what the workload's ground truth says: Marple, NetSeer, TurboFlow, PINT, Sonata and
//! Trajectory Sampling.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{assert_success, dta, Stack};
use serde_json::Value;

const SYSTEMS: &str = include_str!("../../../../examples/systems.toml");

/// `dta query ARGS --region-dir DIR --json`: `Ok(answer)` on success, `Err(stderr)` otherwise.
fn query(regions: &Path, args: &[&str]) -> Result<Value, String> {
    let out = dta()
        .arg("query")
        .args(args)
        .arg("--region-dir")
        .arg(regions)
        .arg("--json")
        .output()
        .unwrap();
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "dta query {args:?}: not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    }))
}

/// Start the stack, send `workload`'s reports over a seeded trace, stop the translator (its
/// Append batches flushed); the region directory and the ground truth.
fn run(workload: &str, flows: u32) -> (Stack, PathBuf, Value) {
    // Each stack has its own NACK port, so the runs' retransmittable reporters do not contend.
    let mut s = Stack::start_from(SYSTEMS, "dta-systems-regions");
    let regions = s.config.parent().unwrap().join("regions");
    let truth = s.config.parent().unwrap().join("truth.json");
    let out = dta()
        .args(["report", "--to", &s.listen, "-q", "--retransmittable"])
        .args(["--nack-port", &s.nack_port.to_string()])
        .args(["--workload", workload, "--workload-cdf", "fb_hadoop"])
        .args(["--flows", &flows.to_string(), "--seed", "7", "--truth"])
        .arg(&truth)
        .output()
        .unwrap();
    assert_success(&out);
    // The last Append batch is written on the translator's flush timer.
    std::thread::sleep(Duration::from_millis(300));
    let stats = s.stop_translator();
    let rejected: u64 = stats["rejected"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(rejected, 0, "rejected: {}", stats["rejected"]);
    let truth: Value = serde_json::from_slice(&std::fs::read(&truth).unwrap()).unwrap();
    (s, regions, truth)
}

/// Every `step`-th key of a JSON object (bounded work per query kind).
fn sample(o: &Value, step: usize) -> Vec<(&String, &Value)> {
    o.as_object().unwrap().iter().step_by(step).collect()
}

#[test]
fn marple_queries_answer_the_ground_truth() {
    let (_s, regions, truth) = run("marple", 200);

    // Lossy connections: exactly the truth's flows and rates (Append is exact while no list
    // wrapped, which the answer says).
    let a = query(&regions, &["marple", "lossy"]).unwrap();
    assert_eq!(a["overwritten"], 0);
    let got: BTreeMap<String, f64> = a["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["flow"].as_str().unwrap().to_owned(),
                f["loss_rate"].as_f64().unwrap(),
            )
        })
        .collect();
    let want: BTreeMap<String, f64> = truth["lossy"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_f64().unwrap()))
        .collect();
    assert!(!want.is_empty(), "the trace has lossy flows");
    assert_eq!(got, want);
    // A range: the truth's flows in it.
    let a = query(&regions, &["marple", "lossy", "--range", "0.05..0.2"]).unwrap();
    let mut got: Vec<&str> = a["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["flow"].as_str().unwrap())
        .collect();
    got.sort_unstable();
    let want: Vec<&str> = want
        .iter()
        .filter(|(_, r)| (0.05..0.2).contains(*r))
        .map(|(k, _)| k.as_str())
        .collect();
    assert_eq!(got, want);
    let e = query(&regions, &["marple", "lossy", "--range", "0..0.01"]).unwrap_err();
    assert!(e.contains("never reported"), "{e}");

    // TCP timeouts: Key-Write, found for every flow the switch saw.
    let mut timeouts = 0;
    for (flow, n) in sample(&truth["timeouts"], 5) {
        let a = query(&regions, &["marple", "timeouts", "--flow", flow]).unwrap();
        assert_eq!(a["timeouts"], *n, "{flow}");
        timeouts += n.as_u64().unwrap();
    }
    assert!(timeouts > 0, "the sample has timeouts");
    let e = query(
        &regions,
        &["marple", "timeouts", "--flow", "1.2.3.4:1-5.6.7.8:2/6"],
    )
    .unwrap_err();
    assert!(e.contains("not in marple_timeouts"), "{e}");
    let e = query(&regions, &["marple", "timeouts", "--flow", "1.2.3.4"]).unwrap_err();
    assert!(e.contains("bad flow"), "{e}");

    // Flowlet sizes: each flow's sizes exactly.
    for (flow, sizes) in sample(&truth["flowlets"], 5) {
        let a = query(&regions, &["marple", "flowlets", "--flow", flow]).unwrap();
        let mut want: Vec<u64> = sizes
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        want.sort_unstable();
        let got: Vec<u64> = a["sizes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        assert_eq!(got, want, "{flow}");
        assert_eq!(a["overwritten"], 0);
    }
    let all = query(&regions, &["marple", "flowlets"]).unwrap();
    let flowlets: usize = truth["flowlets"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_array().unwrap().len())
        .sum();
    assert_eq!(all["flowlets"].as_u64().unwrap() as usize, flowlets);

    // Host counters: Key-Write exact, Key-Increment within its count-min bound.
    for (host, c) in sample(&truth["hosts"], 3) {
        let a = query(&regions, &["marple", "host", "--key", host]).unwrap();
        let (p, b) = (c["packets"].as_u64().unwrap(), c["bytes"].as_u64().unwrap());
        assert_eq!(a["key_write"]["packets"].as_u64().unwrap(), p, "{host}");
        assert_eq!(a["key_write"]["bytes"].as_u64().unwrap(), b, "{host}");
        let ki = &a["key_increment"];
        let (kp, kb) = (
            ki["packets"].as_u64().unwrap(),
            ki["bytes"].as_u64().unwrap(),
        );
        assert!(
            kp >= p && kp - p <= ki["packets_bound"]["error"].as_u64().unwrap(),
            "{host}: {kp} vs {p}"
        );
        assert!(
            kb >= b && kb - b <= ki["bytes_bound"]["error"].as_u64().unwrap(),
            "{host}: {kb} vs {b}"
        );
    }
    let e = query(&regions, &["marple", "host", "--key", "192.0.2.1"]).unwrap_err();
    assert!(e.contains("no counters"), "{e}");
}

#[test]
fn a_query_before_any_report_is_an_error_with_a_message() {
    let s = Stack::start_from(SYSTEMS, "dta-systems-regions");
    let regions = s.config.parent().unwrap().join("regions");
    let e = query(&regions, &["marple", "lossy"]).unwrap_err();
    assert!(e.contains("no lossy flow was ever reported"), "{e}");
    let e = query(&regions, &["marple", "flowlets"]).unwrap_err();
    assert!(e.contains("no flowlet was ever reported"), "{e}");
    let e = query(
        &regions.join("missing"),
        &["marple", "timeouts", "--flow", "1.2.3.4:1-5.6.7.8:2/6"],
    )
    .unwrap_err();
    assert!(e.contains("cannot open"), "{e}");
}

/// NetSeer, TurboFlow, PINT, Sonata and Trajectory Sampling, one after another.
#[test]
fn table2_systems_answer_the_ground_truth() {
    netseer_losses_are_the_ground_truth();
    turboflow_counters_are_within_the_bound();
    pint_digests_are_rebuilt_or_refused();
    sonata_results_and_tuples_are_the_ground_truth();
    trajectories_of_sampled_packets_are_the_ground_truth();
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap()
}

fn netseer_losses_are_the_ground_truth() {
    let (_s, regions, truth) = run("netseer", 200);
    let a = query(&regions, &["netseer", "losses", "--list", "100000"]).unwrap();
    assert_eq!(a["overwritten"], 0);
    let mut got: BTreeMap<(String, u64, String), u64> = BTreeMap::new();
    for e in a["events"].as_array().unwrap() {
        let k = (
            e["flow"].as_str().unwrap().to_owned(),
            u(&e["switch"]),
            e["reason"].as_str().unwrap().to_owned(),
        );
        *got.entry(k).or_default() += u(&e["count"]);
    }
    let want: BTreeMap<(String, u64, String), u64> = truth
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                (
                    e["flow"].as_str().unwrap().to_owned(),
                    u(&e["switch"]),
                    e["reason"].as_str().unwrap().to_owned(),
                ),
                u(&e["count"]),
            )
        })
        .collect();
    assert!(!want.is_empty(), "the trace loses packets");
    assert_eq!(got, want);
    // One switch's list, what came since its head: nothing, said with a message.
    let sw = truth[0]["switch"].to_string();
    let one = query(&regions, &["netseer", "losses", "--switch", &sw]).unwrap();
    let head = one["appended"].to_string();
    let e = query(
        &regions,
        &["netseer", "losses", "--switch", &sw, "--since", &head],
    )
    .unwrap_err();
    assert!(e.contains("no loss event matches"), "{e}");
    let e = query(&regions, &["netseer", "losses", "--reason", "heat"]).unwrap_err();
    assert!(e.contains("bad reason"), "{e}");
}

fn turboflow_counters_are_within_the_bound() {
    let (_s, regions, truth) = run("turboflow", 200);
    for (flow, c) in truth.as_object().unwrap().iter().step_by(4) {
        let a = query(&regions, &["turboflow", "flow", "--flow", flow]).unwrap();
        let (p, b) = (u(&c["packets"]), u(&c["bytes"]));
        let (ap, ab) = (u(&a["packets"]), u(&a["bytes"]));
        assert!(
            ap >= p && ap - p <= u(&a["packets_bound"]["error"]),
            "{flow}"
        );
        assert!(ab >= b && ab - b <= u(&a["bytes_bound"]["error"]), "{flow}");
    }
    let e = query(
        &regions,
        &["turboflow", "flow", "--flow", "192.0.2.1:1-192.0.2.2:2/6"],
    )
    .unwrap_err();
    assert!(e.contains("no counters"), "{e}");
}

fn pint_digests_are_rebuilt_or_refused() {
    let (_s, regions, truth) = run("pint", 200);
    let (mut complete, mut partial) = (0, 0);
    for (flow, v) in truth.as_object().unwrap().iter().step_by(3) {
        let r = query(&regions, &["pint", "digest", "--flow", flow]);
        if v["complete"].as_bool().unwrap() {
            complete += 1;
            assert_eq!(r.unwrap()["digest"], v["digest"], "{flow}");
        } else {
            partial += 1;
            let e = r.unwrap_err();
            assert!(e.contains("cannot be rebuilt"), "{e}");
        }
    }
    assert!(complete > 0 && partial > 0, "{complete} {partial}");
}

fn sonata_results_and_tuples_are_the_ground_truth() {
    let (_s, regions, truth) = run("sonata", 200);
    let mut windows = 0;
    for r in truth["results"].as_array().unwrap() {
        let (q, w) = (r["query"].as_str().unwrap(), r["window"].to_string());
        let a = query(
            &regions,
            &["sonata", "result", "--query", q, "--window", &w],
        )
        .unwrap();
        let vals: Vec<u64> = r["values"].as_array().unwrap().iter().map(u).collect();
        let res = &a["result"];
        let got = match q {
            "new-conns" => vec![u(&res["syns"]), u(&res["destinations"])],
            "retransmissions" => vec![u(&res["retransmissions"]), u(&res["flows"])],
            _ => {
                let ip = match res["destination"].as_str() {
                    Some(s) => u64::from(u32::from(s.parse::<std::net::Ipv4Addr>().unwrap())),
                    None => 0,
                };
                vec![ip, u(&res["bytes"])]
            }
        };
        assert_eq!(got, vals, "{q} window {w}");
        windows += 1;
    }
    assert!(windows >= 3);
    for (q, n) in truth["tuples"].as_object().unwrap() {
        let a = query(&regions, &["sonata", "tuples", "--query", q, "--list", "0"]).unwrap();
        assert_eq!(a["matched"], *n, "{q}");
        assert_eq!(a["overwritten"], 0);
    }
    let e = query(
        &regions,
        &[
            "sonata",
            "result",
            "--query",
            "heavy-dst",
            "--window",
            "99999",
        ],
    )
    .unwrap_err();
    assert!(e.contains("no result"), "{e}");
    let e = query(&regions, &["sonata", "tuples", "--query", "heavy-dst"]).unwrap_err();
    assert!(e.contains("no raw tuples"), "{e}");
}

fn trajectories_of_sampled_packets_are_the_ground_truth() {
    let (_s, regions, truth) = run("trajectory", 200);
    let sampled = truth.as_object().unwrap();
    assert!(sampled.len() > 10, "{} sampled", sampled.len());
    for (label, p) in sampled.iter().step_by(3) {
        let a = query(&regions, &["trajectory", "packet", "--label", label]).unwrap();
        assert_eq!(a["path"], p["path"], "{label}");
        // The same packet by flow and sequence number.
        let (flow, seq) = (p["flow"].as_str().unwrap(), p["seq"].to_string());
        let b = query(
            &regions,
            &["trajectory", "packet", "--flow", flow, "--seq", &seq],
        )
        .unwrap();
        assert_eq!(b["label"].as_str().unwrap(), label);
    }
    let e = query(&regions, &["trajectory", "packet", "--label", "0123"]).unwrap_err();
    assert!(e.contains("no trajectory"), "{e}");
}
