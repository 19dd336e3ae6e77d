//! A generated trace's ground truth against what an INT sink made of it (`dta int-sink
//! check`): every flow present in the sink's flow records, its packets, path and per-hop latest
//! and average metrics exact; optionally every flow's path as the stores answer it.

use std::collections::HashMap;
use std::io::BufRead;
use std::path::Path;

use anyhow::{bail, Context};
use dta_int::query;
use dta_store::Region;
use serde::Deserialize;

use crate::intgen::GroundTruth;

/// One flow as the trace made it: per hop, the sums and the last value of each metric.
struct TruthFlow {
    packets: u64,
    path: Vec<u32>,
    sum: Vec<[u64; 3]>,
    last: Vec<[u32; 3]>,
}

/// One flow as the sink's records say (several records when it aged out and came back).
#[derive(Default)]
struct SeenFlow {
    records: u64,
    packets: u64,
    last_ns: u64,
    /// Per hop: node ids seen, the sums (average x packets of each record), the latest values.
    nodes: Vec<Vec<Option<u32>>>,
    sum: Vec<[f64; 3]>,
    last: Vec<[Option<u32>; 3]>,
    path_changes: u64,
}

/// The fields of a flow record the check reads.
#[derive(Deserialize)]
struct RecordLine {
    #[serde(rename = "type")]
    kind: Option<String>,
    flow: Option<String>,
    packets: Option<u64>,
    last_ns: Option<u64>,
    hops: Option<Vec<HopLine>>,
}

#[derive(Deserialize)]
struct HopLine {
    node_id: Option<u32>,
    hop_latency: Option<u32>,
    avg_hop_latency: Option<f64>,
    queue_occupancy: Option<u32>,
    avg_queue_occupancy: Option<f64>,
    egress_tx_util: Option<u32>,
    avg_egress_tx_util: Option<f64>,
    path_changes: u32,
}

const METRICS: [&str; 3] = ["hop_latency", "queue_occupancy", "egress_tx_util"];

/// The comparison: a summary (JSON) and every difference found, in flow order.
pub struct Checked {
    pub summary: serde_json::Value,
    pub problems: Vec<String>,
}

/// Compare the flow records in `records` (JSON lines: `dta int-sink --records`, or its
/// `--events` output) with `truth`; with `paths`, the sink's Key-Write store of paths, also
/// every flow's path as the store answers it.
pub fn check(
    truth: &GroundTruth,
    records: &Path,
    paths: Option<&Region>,
) -> anyhow::Result<Checked> {
    let want = truth_flows(truth)?;
    let (seen, lines) = read_records(records)?;
    let mut problems = vec![];
    let tally = compare(&want, &seen, &mut problems);
    let paths = match paths {
        Some(region) => check_paths(truth, region, &mut problems)?,
        None => serde_json::Value::Null,
    };
    let summary = serde_json::json!({
        "ok": problems.is_empty(),
        "flows": truth.flows.len(),
        "frames": truth.frames.len(),
        "records": lines,
        "flows_exact": tally.exact,
        "flows_missing": tally.missing,
        "flows_in_several_records": tally.split,
        "flows_unexpected": tally.unexpected,
        "differences": problems.len(),
        "paths_from_store": paths,
    });
    Ok(Checked { summary, problems })
}

/// Every flow of the trace with its packets and per-hop sums and last values.
fn truth_flows(truth: &GroundTruth) -> anyhow::Result<HashMap<String, TruthFlow>> {
    let mut want: HashMap<String, TruthFlow> = truth
        .flows
        .iter()
        .map(|f| {
            let n = f.path.len();
            (
                f.flow.clone(),
                TruthFlow {
                    packets: 0,
                    path: f.path.clone(),
                    sum: vec![[0; 3]; n],
                    last: vec![[0; 3]; n],
                },
            )
        })
        .collect();
    for fr in &truth.frames {
        let name = &truth
            .flows
            .get(fr.flow)
            .with_context(|| format!("frame of flow {} beyond the flows", fr.flow))?
            .flow;
        let t = want.get_mut(name).expect("every flow is in the map");
        t.packets += 1;
        for (i, h) in fr.hops.iter().enumerate().take(t.sum.len()) {
            t.last[i].copy_from_slice(&h[1..4]);
            for (sum, v) in t.sum[i].iter_mut().zip(&h[1..4]) {
                *sum += u64::from(*v);
            }
        }
    }
    Ok(want)
}

/// The flows of a record file (several records of one flow merged: packets and sums added,
/// the latest record's values kept); how many flow records it held.
fn read_records(path: &Path) -> anyhow::Result<(HashMap<String, SeenFlow>, u64)> {
    let file = std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
    let mut seen: HashMap<String, SeenFlow> = HashMap::new();
    let mut lines = 0u64;
    for (no, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let r: RecordLine = serde_json::from_str(&line)
            .with_context(|| format!("{} line {}", path.display(), no + 1))?;
        if r.kind.as_deref().is_some_and(|k| k != "flow") {
            continue;
        }
        let (Some(flow), Some(packets), Some(hops)) = (r.flow, r.packets, r.hops) else {
            bail!("{} line {}: not a flow record", path.display(), no + 1);
        };
        lines += 1;
        seen.entry(flow)
            .or_default()
            .add(packets, r.last_ns.unwrap_or(0), &hops);
    }
    Ok((seen, lines))
}

impl SeenFlow {
    /// One more record of the flow.
    fn add(&mut self, packets: u64, last_ns: u64, hops: &[HopLine]) {
        self.records += 1;
        self.packets += packets;
        let latest = last_ns >= self.last_ns;
        self.last_ns = self.last_ns.max(last_ns);
        if self.nodes.len() < hops.len() {
            self.nodes.resize(hops.len(), vec![]);
            self.sum.resize(hops.len(), [0.0; 3]);
            self.last.resize(hops.len(), [None; 3]);
        }
        for (i, h) in hops.iter().enumerate() {
            self.nodes[i].push(h.node_id);
            self.path_changes += u64::from(h.path_changes);
            let avgs = [
                h.avg_hop_latency,
                h.avg_queue_occupancy,
                h.avg_egress_tx_util,
            ];
            let lasts = [h.hop_latency, h.queue_occupancy, h.egress_tx_util];
            for m in 0..3 {
                self.sum[i][m] += avgs[m].unwrap_or(0.0) * packets as f64;
                if latest {
                    self.last[i][m] = lasts[m];
                }
            }
        }
    }

    /// How the flow differs from the truth (empty: exact).
    fn differences(&self, t: &TruthFlow) -> Vec<String> {
        let mut diff = vec![];
        if self.packets != t.packets {
            diff.push(format!("packets {} (truth {})", self.packets, t.packets));
        }
        if self.nodes.len() != t.path.len() {
            diff.push(format!(
                "{} hops (truth {})",
                self.nodes.len(),
                t.path.len()
            ));
        }
        for (i, nodes) in self.nodes.iter().enumerate().take(t.path.len()) {
            if let Some(bad) = nodes.iter().find(|n| **n != Some(t.path[i])) {
                diff.push(format!("hop {i} node {bad:?} (truth {})", t.path[i]));
            }
            for (m, metric) in METRICS.iter().enumerate() {
                let want_sum = t.sum[i][m] as f64;
                if (self.sum[i][m] - want_sum).abs() > 1e-6 * want_sum.max(1.0) {
                    diff.push(format!(
                        "hop {i} {metric} sum {:.3} (truth {want_sum})",
                        self.sum[i][m]
                    ));
                }
                if self.last[i][m] != Some(t.last[i][m]) {
                    diff.push(format!(
                        "hop {i} latest {metric} {:?} (truth {})",
                        self.last[i][m], t.last[i][m]
                    ));
                }
            }
        }
        if self.path_changes != 0 {
            diff.push(format!("{} path changes (truth 0)", self.path_changes));
        }
        diff
    }
}

/// How the flows compared.
#[derive(Default)]
struct Tally {
    exact: u64,
    missing: u64,
    split: u64,
    unexpected: usize,
}

/// Every flow of the truth against the records, in flow order; the differences into
/// `problems`.
fn compare(
    want: &HashMap<String, TruthFlow>,
    seen: &HashMap<String, SeenFlow>,
    problems: &mut Vec<String>,
) -> Tally {
    let mut tally = Tally::default();
    let mut names: Vec<&String> = want.keys().collect();
    names.sort();
    for name in names {
        let Some(s) = seen.get(name) else {
            tally.missing += 1;
            problems.push(format!("{name}: no flow record"));
            continue;
        };
        if s.records > 1 {
            tally.split += 1;
        }
        let diff = s.differences(&want[name]);
        if diff.is_empty() {
            tally.exact += 1;
        } else {
            problems.push(format!("{name}: {}", diff.join(", ")));
        }
    }
    tally.unexpected = seen.keys().filter(|k| !want.contains_key(*k)).count();
    if tally.unexpected > 0 {
        problems.push(format!(
            "{} flows with records are not in the trace",
            tally.unexpected
        ));
    }
    tally
}

/// Every flow's path as the Key-Write store of paths answers it.
fn check_paths(
    truth: &GroundTruth,
    region: &Region,
    problems: &mut Vec<String>,
) -> anyhow::Result<serde_json::Value> {
    let (mut found, mut wrong, mut unanswered) = (0u64, 0u64, 0u64);
    for fl in &truth.flows {
        let key = query::parse_flow(&fl.flow)?;
        let r = query::path(region, &key, None)?;
        match r.status {
            "found" if r.path == fl.path => found += 1,
            "found" => {
                wrong += 1;
                problems.push(format!(
                    "{}: stored path {:?} (truth {:?})",
                    fl.flow, r.path, fl.path
                ));
            }
            _ => unanswered += 1,
        }
    }
    Ok(serde_json::json!({
        "found_exact": found,
        "wrong": wrong,
        "empty_or_ambiguous": unanswered,
    }))
}
