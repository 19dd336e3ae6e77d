//! `dta int-sink check`: the sink's flow records (and optionally its stores) against the
//! ground truth of a generated trace (`dta pcap gen`).

use std::path::PathBuf;

use anyhow::{bail, Context};
use dta_collector::Collector;
use dta_int::query;
use serde::Deserialize;

use crate::config::IntSinkFile;

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

/// What [`check`] compares.
#[derive(Debug, Clone)]
pub struct CheckArgs {
    /// The ground truth JSON `dta pcap gen` wrote beside the pcap.
    pub truth: PathBuf,
    /// Flow records as JSON lines (`dta int-sink --records`, or its `--events` output).
    pub records: PathBuf,
    /// Also query every flow's path from the stores of this sink configuration.
    pub config: Option<PathBuf>,
    /// The Key-Write store of paths in that configuration.
    pub paths_store: String,
}

/// The comparison: a summary (JSON) and every difference found, in flow order.
pub struct Checked {
    pub summary: serde_json::Value,
    pub problems: Vec<String>,
}

/// Compare the sink's flow records with a trace's ground truth: every flow present, its
/// packets, path and per-hop latest and average metrics exact; optionally every flow's path as
/// the stores answer it.
pub fn check(a: &CheckArgs) -> anyhow::Result<Checked> {
    use std::collections::HashMap;
    use std::io::BufRead;
    let truth = dta_int_trace::intgen::GroundTruth::load(&a.truth)
        .with_context(|| format!("reading {}", a.truth.display()))?;
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
    let file = std::fs::File::open(&a.records)
        .with_context(|| format!("reading {}", a.records.display()))?;
    let mut seen: HashMap<String, SeenFlow> = HashMap::new();
    let mut lines = 0u64;
    for (no, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let r: RecordLine = serde_json::from_str(&line)
            .with_context(|| format!("{} line {}", a.records.display(), no + 1))?;
        if r.kind.as_deref().is_some_and(|k| k != "flow") {
            continue;
        }
        let (Some(flow), Some(packets), Some(hops)) = (r.flow, r.packets, r.hops) else {
            bail!("{} line {}: not a flow record", a.records.display(), no + 1);
        };
        lines += 1;
        let s = seen.entry(flow).or_default();
        s.records += 1;
        s.packets += packets;
        let latest = r.last_ns.unwrap_or(0) >= s.last_ns;
        s.last_ns = s.last_ns.max(r.last_ns.unwrap_or(0));
        if s.nodes.len() < hops.len() {
            s.nodes.resize(hops.len(), vec![]);
            s.sum.resize(hops.len(), [0.0; 3]);
            s.last.resize(hops.len(), [None; 3]);
        }
        for (i, h) in hops.iter().enumerate() {
            s.nodes[i].push(h.node_id);
            s.path_changes += u64::from(h.path_changes);
            let avgs = [
                h.avg_hop_latency,
                h.avg_queue_occupancy,
                h.avg_egress_tx_util,
            ];
            let lasts = [h.hop_latency, h.queue_occupancy, h.egress_tx_util];
            for m in 0..3 {
                s.sum[i][m] += avgs[m].unwrap_or(0.0) * packets as f64;
                if latest {
                    s.last[i][m] = lasts[m];
                }
            }
        }
    }
    let mut problems: Vec<String> = vec![];
    let (mut exact, mut missing, mut split) = (0u64, 0u64, 0u64);
    let mut names: Vec<&String> = want.keys().collect();
    names.sort();
    for name in names {
        let t = &want[name];
        let Some(s) = seen.get(name) else {
            missing += 1;
            problems.push(format!("{name}: no flow record"));
            continue;
        };
        if s.records > 1 {
            split += 1;
        }
        let mut diff = vec![];
        if s.packets != t.packets {
            diff.push(format!("packets {} (truth {})", s.packets, t.packets));
        }
        if s.nodes.len() != t.path.len() {
            diff.push(format!("{} hops (truth {})", s.nodes.len(), t.path.len()));
        }
        for (i, nodes) in s.nodes.iter().enumerate().take(t.path.len()) {
            if let Some(bad) = nodes.iter().find(|n| **n != Some(t.path[i])) {
                diff.push(format!("hop {i} node {bad:?} (truth {})", t.path[i]));
            }
            for (m, metric) in METRICS.iter().enumerate() {
                let want_sum = t.sum[i][m] as f64;
                if (s.sum[i][m] - want_sum).abs() > 1e-6 * want_sum.max(1.0) {
                    diff.push(format!(
                        "hop {i} {metric} sum {:.3} (truth {want_sum})",
                        s.sum[i][m]
                    ));
                }
                if s.last[i][m] != Some(t.last[i][m]) {
                    diff.push(format!(
                        "hop {i} latest {metric} {:?} (truth {})",
                        s.last[i][m], t.last[i][m]
                    ));
                }
            }
        }
        if s.path_changes != 0 {
            diff.push(format!("{} path changes (truth 0)", s.path_changes));
        }
        if diff.is_empty() {
            exact += 1;
        } else {
            problems.push(format!("{name}: {}", diff.join(", ")));
        }
    }
    let unexpected = seen.keys().filter(|k| !want.contains_key(*k)).count();
    if unexpected > 0 {
        problems.push(format!(
            "{unexpected} flows with records are not in the trace"
        ));
    }
    // The stores' answers: every flow's path by Key-Write query.
    let mut paths = serde_json::Value::Null;
    if let Some(cfg) = &a.config {
        let f = IntSinkFile::load(cfg)?;
        let c = Collector::open_dir(&f.region_dir, false)?;
        let region = c.store(&a.paths_store)?.region.clone();
        let (mut found, mut wrong, mut unanswered) = (0u64, 0u64, 0u64);
        for fl in &truth.flows {
            let key = query::parse_flow(&fl.flow)?;
            let r = query::path(&region, &key, None)?;
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
        paths = serde_json::json!({
            "found_exact": found,
            "wrong": wrong,
            "empty_or_ambiguous": unanswered,
        });
    }
    let ok = problems.is_empty();
    let summary = serde_json::json!({
        "ok": ok,
        "flows": truth.flows.len(),
        "frames": truth.frames.len(),
        "records": lines,
        "flows_exact": exact,
        "flows_missing": missing,
        "flows_in_several_records": split,
        "flows_unexpected": unexpected,
        "differences": problems.len(),
        "paths_from_store": paths,
    });
    Ok(Checked { summary, problems })
}
