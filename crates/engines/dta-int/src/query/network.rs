//! "Where is it congested": the network map learned from the flows' paths, each switch with its
//! histograms over the window asked, switches and links ranked by a measure the caller names
//! ([`Congestion`]): a quantile of a metric, or the share of its samples over a threshold.

use std::collections::BTreeMap;

use serde::Serialize;

use dta_store::{KeyIncrementLayout, Region, WindowSel, WindowSpan};

use super::scan::FlowFilter;
use super::{
    empty_note, flows, histogram_in, layout_err, recorded_buckets, uncertain_note, FlowOrder,
    HistogramResult, QueryError, MAX_FLOW_SCAN,
};
use crate::layout::{Buckets, Metric};

/// The statistic of a switch's histogram that [`Congestion`] ranks by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stat {
    P50,
    P90,
    P99,
    Max,
    /// The share (0 to 1) of the samples above this value: each sample counted by its bucket's
    /// estimate, so within the histogram's relative error of the threshold.
    Over(u32),
}

/// What the network view ranks switches and links by: `METRIC:STAT`, where METRIC is
/// `hop_latency`, `queue_occupancy` or `egress_tx_util` and STAT is `p50`, `p90`, `p99`, `max` or
/// `over:THRESHOLD` (the share of samples above it). The default is `hop_latency:p99`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Congestion {
    pub metric: Metric,
    pub stat: Stat,
}

impl Default for Congestion {
    fn default() -> Self {
        Congestion {
            metric: Metric::HopLatency,
            stat: Stat::P99,
        }
    }
}

impl Congestion {
    /// Parse `METRIC:STAT` (type doc).
    pub fn parse(s: &str) -> Result<Congestion, String> {
        let usage = "expected METRIC:STAT, METRIC hop_latency, queue_occupancy or \
                     egress_tx_util, STAT p50, p90, p99, max or over:THRESHOLD \
                     (e.g. hop_latency:p99, queue_occupancy:over:100)";
        let (m, stat) = s
            .trim()
            .split_once(':')
            .ok_or_else(|| format!("rank {s:?}: {usage}"))?;
        let metric = Metric::from_name(m).ok_or_else(|| format!("rank {s:?}: {usage}"))?;
        let stat = match stat {
            "p50" => Stat::P50,
            "p90" => Stat::P90,
            "p99" => Stat::P99,
            "max" => Stat::Max,
            _ => match stat.strip_prefix("over:").map(str::parse::<u32>) {
                Some(Ok(t)) => Stat::Over(t),
                Some(Err(_)) => {
                    return Err(format!(
                        "rank {s:?}: the threshold is a whole number up to 2^32-1"
                    ))
                }
                None => return Err(format!("rank {s:?}: {usage}")),
            },
        };
        Ok(Congestion { metric, stat })
    }

    /// The measure of one switch's histogram of [`Congestion::metric`]; `None` without samples.
    fn of(&self, h: &HistogramResult) -> Option<f64> {
        let q = &h.quantiles;
        let v = |x: Option<u64>| x.map(|x| x as f64);
        match self.stat {
            Stat::P50 => v(q.p50),
            Stat::P90 => v(q.p90),
            Stat::P99 => v(q.p99),
            Stat::Max => v(q.max),
            Stat::Over(t) => {
                let scheme = h.histogram.as_ref()?;
                (h.total > 0).then(|| {
                    let above: u64 = h
                        .buckets
                        .iter()
                        .filter(|b| {
                            let at = u32::try_from(b.lo).unwrap_or(u32::MAX);
                            scheme.estimate(usize::from(scheme.bucket(at))) > u64::from(t)
                        })
                        .map(|b| b.count)
                        .sum();
                    above as f64 / h.total as f64
                })
            }
        }
    }
}

impl std::fmt::Display for Congestion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let m = self.metric.name();
        match self.stat {
            Stat::P50 => write!(f, "{m}:p50"),
            Stat::P90 => write!(f, "{m}:p90"),
            Stat::P99 => write!(f, "{m}:p99"),
            Stat::Max => write!(f, "{m}:max"),
            Stat::Over(t) => write!(f, "{m}:over:{t}"),
        }
    }
}

impl Serialize for Congestion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A switch of the network map.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Switch {
    pub node_id: u32,
    /// Flows through it among those read.
    pub flows: u64,
    /// Its value of the network's `rank` measure (`None`: no samples of that metric).
    pub score: Option<f64>,
    /// Its histograms over the windows read: samples, and the median and the 99th percentile
    /// as their buckets' midpoints, within the network's `relative_error` of the true ones
    /// (`None`: no samples).
    pub queue_samples: u64,
    pub queue_p50: Option<u64>,
    pub queue_p99: Option<u64>,
    pub latency_samples: u64,
    pub latency_p50: Option<u64>,
    pub latency_p99: Option<u64>,
}

/// A link of the network map: consecutive hops of a path, from the hop nearer the INT source.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Link {
    pub from: u32,
    pub to: u32,
    pub flows: u64,
    /// The `rank` measure of `from`, whose egress the link is (`None`: no samples).
    pub score: Option<f64>,
}

/// The network map: switches and links, learned from the flows' paths, the most congested
/// first by `rank`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Network {
    /// The histogram store read (the long tier's when the window asked for more than the
    /// histogram store holds).
    pub store: String,
    /// The measure the switches and links are ranked by (highest first; those without samples
    /// last).
    pub rank: Congestion,
    pub switches: Vec<Switch>,
    pub links: Vec<Link>,
    /// Flows read.
    pub flows: u64,
    /// The histograms' windows (empty: a cumulative store).
    pub windows: Vec<WindowSpan>,
    /// The histograms' bucketing, as the sink recorded it in those windows (`None`: nothing
    /// recorded there), and the bound on the quantiles' relative error it gives.
    pub histogram: Option<Buckets>,
    pub relative_error: Option<f64>,
    /// Whether the map holds every flow summary held and every switch on their paths (else
    /// only the newest summaries' and the first [`MAX_SWITCHES`] switches'), and its
    /// histograms all the time asked.
    pub complete: bool,
    /// What is missing when not complete.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// Most switches of a network map (with their histograms read).
pub const MAX_SWITCHES: usize = 1024;

/// Highest score first, no score last, then the more samples, then the lower id.
fn by_score(a: Option<f64>, b: Option<f64>) -> std::cmp::Ordering {
    match (a, b) {
        (Some(a), Some(b)) => b.total_cmp(&a),
        (a, b) => b.is_some().cmp(&a.is_some()),
    }
}

/// "Where is it congested": the switches and links of the paths of the flows the sink
/// summarised (at most [`MAX_FLOW_SCAN`]), each switch with its queue occupancy and hop latency
/// from the histogram store over `window` ([`histogram_in`]'s default: the current window;
/// from the long tier `long` when the window asks for more than `hist` holds, [`tier_for`]),
/// ranked by `rank`.
#[allow(clippy::too_many_arguments)]
pub fn network(
    events: &Region,
    paths: &Region,
    hist: &Region,
    long: Option<&Region>,
    list_base: u32,
    window: Option<WindowSel>,
    rank: Congestion,
    now_ms: u64,
) -> Result<Network, QueryError> {
    let flows = flows(
        events,
        Some(paths),
        list_base,
        &FlowFilter::default(),
        FlowOrder::Recent,
        MAX_FLOW_SCAN,
    )?;
    let complete = flows.complete && flows.more == 0;
    let flows = flows.flows;
    let mut nodes: BTreeMap<u32, u64> = Default::default();
    let mut links: BTreeMap<(u32, u32), u64> = Default::default();
    for f in &flows {
        let Some(p) = &f.path else { continue };
        for &n in p {
            *nodes.entry(n).or_default() += 1;
        }
        for w in p.windows(2) {
            *links.entry((w[0], w[1])).or_default() += 1;
        }
    }
    let mut windows = vec![];
    let mut notes = vec![];
    if !complete {
        notes.push(format!(
            "the map is learned from the newest {MAX_FLOW_SCAN} flow summaries held"
        ));
    }
    if nodes.len() > MAX_SWITCHES {
        notes.push(format!(
            "{} switches are on the flows' paths; the first {MAX_SWITCHES} are shown",
            nodes.len()
        ));
    }
    let hist = super::tier_for(hist, long, window);
    let scheme = recorded_buckets(hist, window, now_ms)?;
    if scheme.is_none() {
        let l = KeyIncrementLayout::new(hist.header()).map_err(|e| layout_err(hist, e))?;
        notes.push(empty_note(hist, &l, now_ms)?);
    }
    let mut switches = vec![];
    let (mut uncertain, mut uncertain_in) = (0u64, 0usize);
    for (&node_id, &n) in nodes.iter().take(MAX_SWITCHES) {
        let of = |metric| {
            histogram_in(
                hist,
                node_id,
                metric,
                Some(scheme.as_ref().unwrap_or(&Buckets::Log2)),
                None,
                window,
                now_ms,
            )
        };
        let (q, l) = (of(Metric::QueueOccupancy)?, of(Metric::HopLatency)?);
        let score = match rank.metric {
            Metric::QueueOccupancy => rank.of(&q),
            Metric::HopLatency => rank.of(&l),
            m => rank.of(&of(m)?),
        };
        windows = q.windows.clone();
        // One note for what is uncertain over all the switches; the others once each.
        for h in [&q, &l] {
            if h.uncertain > 0 {
                uncertain += h.uncertain;
                uncertain_in += 1;
            } else if let Some(n) = &h.coverage.note {
                if !notes.contains(n) {
                    notes.push(n.clone());
                }
            }
        }
        switches.push(Switch {
            node_id,
            flows: n,
            score,
            queue_samples: q.total,
            queue_p50: q.quantiles.p50,
            queue_p99: q.quantiles.p99,
            latency_samples: l.total,
            latency_p50: l.quantiles.p50,
            latency_p99: l.quantiles.p99,
        });
    }
    if uncertain > 0 {
        notes.push(uncertain_note(
            uncertain,
            &format!("{uncertain_in} of the switches' histograms"),
        ));
    }
    let score_of: BTreeMap<u32, Option<f64>> =
        switches.iter().map(|s| (s.node_id, s.score)).collect();
    switches.sort_by(|a, b| {
        by_score(a.score, b.score)
            .then(b.latency_samples.cmp(&a.latency_samples))
            .then(a.node_id.cmp(&b.node_id))
    });
    let mut links: Vec<Link> = links
        .into_iter()
        .map(|((from, to), flows)| Link {
            from,
            to,
            flows,
            score: score_of.get(&from).copied().flatten(),
        })
        .collect();
    links.sort_by(|a, b| {
        by_score(a.score, b.score)
            .then(b.flows.cmp(&a.flows))
            .then((a.from, a.to).cmp(&(b.from, b.to)))
    });
    Ok(Network {
        store: hist.header().name.clone(),
        rank,
        switches,
        links,
        flows: flows.len() as u64,
        windows,
        relative_error: scheme.as_ref().and_then(Buckets::relative_error),
        histogram: scheme,
        complete: notes.is_empty(),
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn congestion_parses_what_it_prints_and_refuses_the_rest() {
        for s in [
            "hop_latency:p99",
            "queue_occupancy:p50",
            "egress_tx_util:max",
            "hop_latency:over:20000",
            "queue_occupancy:p90",
        ] {
            assert_eq!(Congestion::parse(s).unwrap().to_string(), s);
        }
        assert_eq!(Congestion::default().to_string(), "hop_latency:p99");
        for bad in [
            "",
            "hop_latency",
            "latency:p99",
            "hop_latency:p98",
            "hop_latency:over:",
            "hop_latency:over:-1",
            "hop_latency:over:99999999999",
        ] {
            assert!(Congestion::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn scores_order_highest_first_and_unscored_last() {
        let mut v = [Some(1.0), None, Some(3.0), Some(2.0)];
        v.sort_by(|a, b| by_score(*a, *b));
        assert_eq!(v, [Some(3.0), Some(2.0), Some(1.0), None]);
    }
}
