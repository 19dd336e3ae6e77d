//! "What went wrong, where, and for how long": the events of the threshold kinds grouped into
//! episodes. An episode is a run of one switch's crossings of one kind (and, asked, of one flow)
//! with no gap longer than `gap_ns` between consecutive ones: its start, end, peak, rows and the
//! flows it touched. The raw rows of an episode are the events query over its switch, kind and
//! time (`since_ms`/`until_ms`). Beside them, the crossings per switch and kind over time.
//!
//! The lists are read back from their heads as [`super::recent_events`] reads them, within the
//! same budget ([`MAX_SCAN`] entries); an answer that could not read every held event since the
//! time asked says so and from when it covers.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;

use dta_store::{AppendLayout, Region, StoreKind};

use super::scan::{scan_back, MAX_SCAN};
use super::{event_list, expect, layout_err, QueryError};
use crate::events::{flow_string, Event, EventKind};
use crate::layout::FLOW_KEY_LEN;

/// Most episodes one answer lists (the newest).
pub const MAX_EPISODES: usize = 4096;
/// Time steps of the crossings-over-time series.
pub const SERIES_STEPS: usize = 60;
/// Most (switch, kind) series one answer holds (the busiest).
pub const MAX_SERIES: usize = 256;
/// The gap that ends an episode unless asked otherwise: a second without a crossing.
pub const DEFAULT_GAP_NS: u64 = 1_000_000_000;
/// The longest gap a query may give, milliseconds: a day.
pub const MAX_GAP_MS: u64 = 86_400_000;

/// What [`episodes`] groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpisodeQuery {
    /// These kinds (empty: the threshold kinds, [`EventKind::class`] `threshold`).
    pub kinds: Vec<EventKind>,
    /// At this switch.
    pub node: Option<u32>,
    /// At or after this time (Unix nanoseconds, the sink's clock).
    pub since_ns: Option<u64>,
    /// A longer time between two crossings ends an episode.
    pub gap_ns: u64,
    /// One episode per flow too (else a switch's crossings of a kind, whichever flows).
    pub per_flow: bool,
}

impl Default for EpisodeQuery {
    fn default() -> Self {
        EpisodeQuery {
            kinds: vec![],
            node: None,
            since_ns: None,
            gap_ns: DEFAULT_GAP_NS,
            per_flow: false,
        }
    }
}

/// A run of crossings.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Episode {
    pub node_id: u32,
    pub kind: EventKind,
    /// The flow, when grouped per flow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flow: Option<String>,
    /// The first and the last crossing (Unix ns, the sink's clock).
    pub start_ns: u64,
    pub end_ns: u64,
    /// The highest value crossed, when, and the flow that carried it.
    pub peak: u32,
    pub peak_ns: u64,
    pub peak_flow: String,
    /// Crossings (event rows).
    pub count: u64,
    /// Distinct flows among them.
    pub flows: u64,
}

/// Crossings of one switch and kind: in all, and per step of the answer's series.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Series {
    pub node_id: u32,
    pub kind: EventKind,
    pub events: u64,
    pub episodes: u64,
    /// [`SERIES_STEPS`] counts from `series_from_ns`, `series_step_ns` each.
    pub counts: Vec<u64>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct EpisodePage {
    /// The newest first (by their last crossing), at most `max`.
    pub episodes: Vec<Episode>,
    /// Episodes found beyond `max`.
    pub more: usize,
    /// Per switch and kind, the busiest first (at most [`MAX_SERIES`]).
    pub series: Vec<Series>,
    pub series_from_ns: u64,
    pub series_step_ns: u64,
    /// Event rows read.
    pub scanned: u64,
    /// Whether every held event since the time asked was read.
    pub complete: bool,
    /// What the answer covers when not complete, and other caveats.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// The episode being built for one group, read newest first (so it grows backwards).
struct Open {
    ep: Episode,
    flows: HashSet<[u8; FLOW_KEY_LEN]>,
}

impl Open {
    fn new(e: &Event, per_flow: bool) -> Open {
        Open {
            ep: Episode {
                node_id: e.node_id,
                kind: e.kind,
                flow: per_flow.then(|| flow_string(&e.flow)),
                start_ns: e.time_ns,
                end_ns: e.time_ns,
                peak: e.value,
                peak_ns: e.time_ns,
                peak_flow: flow_string(&e.flow),
                count: 0,
                flows: 0,
            },
            flows: HashSet::new(),
        }
    }

    fn add(&mut self, e: &Event) {
        let ep = &mut self.ep;
        ep.start_ns = ep.start_ns.min(e.time_ns);
        ep.end_ns = ep.end_ns.max(e.time_ns);
        if e.value > ep.peak {
            ep.peak = e.value;
            ep.peak_ns = e.time_ns;
            ep.peak_flow = flow_string(&e.flow);
        }
        ep.count += 1;
        self.flows.insert(e.flow);
    }

    fn close(mut self) -> Episode {
        self.ep.flows = self.flows.len() as u64;
        self.ep
    }
}

/// "Which switches crossed a threshold, when, how long, how badly": the events of `q`'s kinds
/// since its time grouped into episodes (module doc), the newest `max` (at most
/// [`MAX_EPISODES`]), and the crossings per switch and kind over the time covered. `now_ns`
/// ends the series (the sink's clock).
pub fn episodes(
    region: &Region,
    list_base: u32,
    q: &EpisodeQuery,
    max: usize,
    now_ns: u64,
) -> Result<EpisodePage, QueryError> {
    expect(region, StoreKind::Append, "append")?;
    let l = AppendLayout::new(region.header()).map_err(|e| layout_err(region, e))?;
    let max = max.clamp(1, MAX_EPISODES);
    let kinds: Vec<EventKind> = if q.kinds.is_empty() {
        EventKind::ALL
            .into_iter()
            .filter(|k| k.class() == "threshold")
            .collect()
    } else {
        q.kinds.clone()
    };
    let gap = q.gap_ns.max(1);
    let mut budget = MAX_SCAN;
    let mut done = vec![];
    let mut complete = true;
    let mut covered_from: Option<u64> = None;
    // Crossings per (switch, kind) per second, re-stepped at the end.
    let mut per_second: BTreeMap<(u32, EventKind, u64), u64> = BTreeMap::new();
    for k in kinds {
        let list = event_list(region, &l, list_base, k as u32 - 1)?;
        let mut open: HashMap<(u32, Option<[u8; FLOW_KEY_LEN]>), Open> = HashMap::new();
        let (_, all) = scan_back(region, &l, list, u64::MAX, &mut budget, |i, bytes| {
            let Some(e) = Event::decode(bytes, i) else {
                return true;
            };
            if q.since_ns.is_some_and(|t| e.time_ns < t) || q.node.is_some_and(|n| e.node_id != n) {
                return true;
            }
            let key = (e.node_id, q.per_flow.then_some(e.flow));
            match open.get_mut(&key) {
                Some(o) if o.ep.start_ns.saturating_sub(e.time_ns) <= gap => o.add(&e),
                _ => {
                    let mut o = Open::new(&e, q.per_flow);
                    o.add(&e);
                    if let Some(old) = open.insert(key, o) {
                        done.push(old.close());
                    }
                }
            }
            *per_second
                .entry((e.node_id, e.kind, e.time_ns / 1_000_000_000))
                .or_default() += 1;
            true
        })?;
        if !all {
            complete = false;
            // The oldest row read of this kind bounds what the answer covers.
            let oldest = open.values().map(|o| o.ep.start_ns).min();
            covered_from = match (covered_from, oldest) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
        }
        done.extend(open.into_values().map(Open::close));
    }
    let mut notes = vec![];
    if !complete {
        notes.push(format!(
            "the answer read the newest {MAX_SCAN} event rows{}: older episodes may be missing or \
             start earlier than given",
            covered_from.map_or(String::new(), |t| format!(", back to {t} (Unix ns)"))
        ));
    }
    done.sort_by(|a, b| {
        (b.end_ns, b.start_ns, b.node_id, b.kind).cmp(&(a.end_ns, a.start_ns, a.node_id, a.kind))
    });
    let more = done.len().saturating_sub(max);
    let (series, from, step) = series(&per_second, &done, q.since_ns, now_ns);
    done.truncate(max);
    Ok(EpisodePage {
        episodes: done,
        more,
        series,
        series_from_ns: from,
        series_step_ns: step,
        scanned: MAX_SCAN - budget,
        complete,
        notes,
    })
}

/// The crossings per switch and kind in [`SERIES_STEPS`] steps from `since_ns` (else the oldest
/// crossing read) to `now_ns`, whole seconds each; with each series' episodes.
fn series(
    per_second: &BTreeMap<(u32, EventKind, u64), u64>,
    episodes: &[Episode],
    since_ns: Option<u64>,
    now_ns: u64,
) -> (Vec<Series>, u64, u64) {
    const S: u64 = 1_000_000_000;
    let oldest = per_second.keys().map(|&(_, _, s)| s).min();
    let from_s = since_ns.map(|t| t / S).or(oldest).unwrap_or(now_ns / S);
    let span_s = (now_ns / S).saturating_sub(from_s) + 1;
    let step_s = span_s.div_ceil(SERIES_STEPS as u64).max(1);
    let mut by: BTreeMap<(u32, EventKind), Series> = BTreeMap::new();
    for (&(node_id, kind, s), &n) in per_second {
        let row = by.entry((node_id, kind)).or_insert_with(|| Series {
            node_id,
            kind,
            events: 0,
            episodes: 0,
            counts: vec![0; SERIES_STEPS],
        });
        row.events += n;
        let i = (s.saturating_sub(from_s) / step_s) as usize;
        row.counts[i.min(SERIES_STEPS - 1)] += n;
    }
    for e in episodes {
        if let Some(row) = by.get_mut(&(e.node_id, e.kind)) {
            row.episodes += 1;
        }
    }
    let mut rows: Vec<Series> = by.into_values().collect();
    rows.sort_by(|a, b| {
        b.events
            .cmp(&a.events)
            .then((a.node_id, a.kind).cmp(&(b.node_id, b.kind)))
    });
    rows.truncate(MAX_SERIES);
    (rows, from_s * S, step_s * S)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn store(dir: &std::path::Path, events: &[Event]) -> Region {
        super::super::scan::tests::events_region(dir, 4096, events.iter().copied())
    }

    fn ev(t: u64, kind: EventKind, node_id: u32, flow: u8, value: u32) -> Event {
        Event {
            seq: 0,
            time_ns: t,
            kind,
            flow: [flow; FLOW_KEY_LEN],
            hop: 1,
            node_id,
            value,
        }
    }

    #[test]
    fn crossings_group_by_switch_kind_and_gap() {
        let d = tempfile::tempdir().unwrap();
        let t0 = 1_000 * S;
        let mut evs = vec![];
        // Switch 301: 50 hop-latency crossings 10 ms apart from t0+5 s (one episode), by 5
        // flows, peak 90 000 at the 20th; then one more 3 s later (a second episode).
        for i in 0..50u64 {
            let v = if i == 20 { 90_000 } else { 60_000 };
            evs.push(ev(
                t0 + 5 * S + i * 10_000_000,
                EventKind::HopLatency,
                301,
                (i % 5) as u8,
                v,
            ));
        }
        evs.push(ev(
            t0 + 8 * S + 490_000_000,
            EventKind::HopLatency,
            301,
            9,
            51_000,
        ));
        // Switch 402: queue crossings, and a change event (not a threshold kind).
        for i in 0..3u64 {
            evs.push(ev(t0 + 2 * S + i, EventKind::QueueOccupancy, 402, 1, 400));
        }
        evs.push(ev(t0 + 3 * S, EventKind::LatencyChange, 402, 1, 7));
        let r = store(d.path(), &evs);
        let p = episodes(&r, 0, &EpisodeQuery::default(), 100, t0 + 10 * S).unwrap();
        assert!(p.complete && p.notes.is_empty(), "{p:?}");
        assert_eq!(p.episodes.len(), 3, "{:#?}", p.episodes);
        let [late, main, queue] = [&p.episodes[0], &p.episodes[1], &p.episodes[2]];
        assert_eq!((late.node_id, late.count, late.flows), (301, 1, 1));
        assert_eq!(main.node_id, 301);
        assert_eq!(main.kind, EventKind::HopLatency);
        assert_eq!(main.start_ns, t0 + 5 * S);
        assert_eq!(main.end_ns, t0 + 5 * S + 49 * 10_000_000);
        assert_eq!((main.count, main.flows, main.peak), (50, 5, 90_000));
        assert_eq!(main.peak_ns, t0 + 5 * S + 200_000_000);
        assert_eq!(
            (queue.node_id, queue.kind, queue.count),
            (402, EventKind::QueueOccupancy, 3)
        );
        // The series: 301's 51 crossings first, in the steps of their seconds.
        assert_eq!(p.series[0].node_id, 301);
        assert_eq!((p.series[0].events, p.series[0].episodes), (51, 2));
        assert_eq!(p.series[0].counts.iter().sum::<u64>(), 51);
        assert_eq!(p.series_step_ns, S);
        assert_eq!(p.series_from_ns, t0 + 2 * S);
        assert_eq!(p.series[0].counts[3], 50, "t0+5 s is 3 steps after t0+2 s");
        // A longer gap joins the two episodes of 301; per flow splits them by flow.
        let joined = episodes(
            &r,
            0,
            &EpisodeQuery {
                gap_ns: 5 * S,
                node: Some(301),
                ..Default::default()
            },
            100,
            t0 + 10 * S,
        )
        .unwrap();
        assert_eq!(joined.episodes.len(), 1);
        assert_eq!(joined.episodes[0].count, 51);
        let per_flow = episodes(
            &r,
            0,
            &EpisodeQuery {
                per_flow: true,
                node: Some(301),
                ..Default::default()
            },
            100,
            t0 + 10 * S,
        )
        .unwrap();
        assert_eq!(per_flow.episodes.len(), 6);
        assert!(per_flow
            .episodes
            .iter()
            .all(|e| e.flows == 1 && e.flow.is_some()));
        // since: only what crossed after it; max: the newest, the rest counted.
        let since = episodes(
            &r,
            0,
            &EpisodeQuery {
                since_ns: Some(t0 + 4 * S),
                ..Default::default()
            },
            1,
            t0 + 10 * S,
        )
        .unwrap();
        assert_eq!(since.episodes.len(), 1);
        assert_eq!(since.more, 1);
        assert_eq!(since.episodes[0].end_ns, t0 + 8 * S + 490_000_000);
        // The change kind when asked for.
        let change = episodes(
            &r,
            0,
            &EpisodeQuery {
                kinds: vec![EventKind::LatencyChange],
                ..Default::default()
            },
            10,
            t0 + 10 * S,
        )
        .unwrap();
        assert_eq!(change.episodes.len(), 1);
    }

    #[test]
    fn an_empty_store_answers_no_episodes_and_complete() {
        let d = tempfile::tempdir().unwrap();
        let r = store(d.path(), &[]);
        let p = episodes(&r, 0, &EpisodeQuery::default(), 10, 5 * S).unwrap();
        assert!(p.episodes.is_empty() && p.series.is_empty() && p.complete);
        assert_eq!(p.series_step_ns, S);
    }
}
