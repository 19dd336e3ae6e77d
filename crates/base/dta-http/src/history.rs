//! The console's history: the last hour of the counters an operator watches, sampled once a
//! second from the translator's and the INT sink's `/metrics`, the collector's own stores and
//! the cluster's collectors' `/readyz`, and kept in memory (`GET /console/history`).
//!
//! - What is kept is [`WATCHED`]: per family, one series per value of one label (reports by
//!   primitive, losses by priority, rejects by reason, fill by store, ...), counters as rates
//!   per second, gauges as read. At most [`MAX_SERIES`] series of [`POINTS`] points each: the
//!   memory is bounded whatever a peer exports (series beyond it are counted, not kept).
//! - A source that does not answer within [`SAMPLE_TIMEOUT`] leaves a gap in its series (a
//!   `null` point), never a 0. A counter's first sample, and one that went backwards (its
//!   process restarted), gives no rate: no point.
//! - Sampling runs on a thread of its own that asks every source in parallel, so a hung peer
//!   costs its own points only; the thread ends when the console's router is dropped.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::exposition::{parse_exposition, Sample};
use crate::Token;

/// Time between two samples.
pub const STEP: Duration = Duration::from_secs(1);
/// Points kept per series: an hour at [`STEP`].
pub const POINTS: usize = 3600;
/// Series kept at most.
pub const MAX_SERIES: usize = 128;
/// How long one source may take to answer one sample.
pub const SAMPLE_TIMEOUT: Duration = Duration::from_millis(800);

/// How a family's samples become points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A counter: its increase per second since the previous sample.
    Rate,
    /// A gauge: its value.
    Gauge,
}

/// A family the history keeps.
#[derive(Debug)]
pub struct Watch {
    /// The chart the page draws it in.
    pub chart: &'static str,
    /// The sample name (counters with their `_total`).
    pub family: &'static str,
    /// One series per value of this label (samples with other labels summed); `None`: one
    /// series, the sum.
    pub by: Option<&'static str>,
    pub kind: Kind,
    /// The unit of a point, for the axis.
    pub unit: &'static str,
}

const fn w(
    chart: &'static str,
    family: &'static str,
    by: Option<&'static str>,
    kind: Kind,
    unit: &'static str,
) -> Watch {
    Watch {
        chart,
        family,
        by,
        kind,
        unit,
    }
}

/// The families kept: ingest per primitive and priority, loss, NACKs, sheds and rejects, the
/// INT sink's intake and events, store fill, and the cluster's readiness.
pub const WATCHED: &[Watch] = &[
    w(
        "ingest",
        "dta_translator_reports_total",
        Some("primitive"),
        Kind::Rate,
        "reports/s",
    ),
    w(
        "ingest",
        "dta_int_sink_translator_reports_total",
        Some("primitive"),
        Kind::Rate,
        "reports/s",
    ),
    w(
        "priority",
        "dta_translator_reports_by_priority_total",
        Some("priority"),
        Kind::Rate,
        "reports/s",
    ),
    w(
        "loss",
        "dta_translator_lost_total",
        Some("priority"),
        Kind::Rate,
        "datagrams/s",
    ),
    w(
        "loss",
        "dta_translator_unrecovered_total",
        None,
        Kind::Rate,
        "datagrams/s",
    ),
    w(
        "loss",
        "dta_translator_af_xdp_kernel_drops_total",
        Some("reason"),
        Kind::Rate,
        "datagrams/s",
    ),
    w(
        "loss",
        "dta_translator_interface_rx_drops_total",
        Some("reason"),
        Kind::Rate,
        "frames/s",
    ),
    w(
        "loss",
        "dta_int_sink_kernel_drops_total",
        None,
        Kind::Rate,
        "datagrams/s",
    ),
    w(
        "loss",
        "dta_int_sink_af_xdp_kernel_drops_total",
        Some("reason"),
        Kind::Rate,
        "datagrams/s",
    ),
    w(
        "loss",
        "dta_int_sink_interface_rx_drops_total",
        Some("reason"),
        Kind::Rate,
        "frames/s",
    ),
    w(
        "nacks",
        "dta_translator_nacks_total",
        None,
        Kind::Rate,
        "NACKs/s",
    ),
    w(
        "nacks",
        "dta_translator_nacks_over_budget_total",
        None,
        Kind::Rate,
        "NACKs/s",
    ),
    w(
        "shed",
        "dta_translator_shed_total",
        Some("priority"),
        Kind::Rate,
        "datagrams/s",
    ),
    w(
        "shed",
        "dta_translator_overload_dropped_total",
        Some("priority"),
        Kind::Rate,
        "datagrams/s",
    ),
    w(
        "shed",
        "dta_translator_kernel_drops_total",
        Some("priority"),
        Kind::Rate,
        "datagrams/s",
    ),
    w(
        "rejects",
        "dta_translator_dropped_total",
        Some("reason"),
        Kind::Rate,
        "per s",
    ),
    w(
        "rejects",
        "dta_int_errors_total",
        Some("reason"),
        Kind::Rate,
        "per s",
    ),
    w(
        "rejects",
        "dta_int_sources_rejected_total",
        Some("reason"),
        Kind::Rate,
        "per s",
    ),
    w(
        "int",
        "dta_int_telemetry_reports_total",
        None,
        Kind::Rate,
        "reports/s",
    ),
    w(
        "int",
        "dta_int_postcards_total",
        None,
        Kind::Rate,
        "reports/s",
    ),
    w(
        "int",
        "dta_int_events_total",
        Some("class"),
        Kind::Rate,
        "events/s",
    ),
    w(
        "fill",
        "dta_store_fill_ratio",
        Some("store"),
        Kind::Gauge,
        "ratio",
    ),
    w(
        "cluster",
        "dta_collector_ready",
        Some("collector"),
        Kind::Gauge,
        "ready",
    ),
];

/// Where samples come from.
#[derive(Clone)]
pub enum Source {
    /// A process's `/metrics` over HTTP (the translator, the INT sink).
    Metrics { name: String, addr: SocketAddr },
    /// An exposition produced in this process (the collector's stores), every `every` steps.
    Local {
        name: String,
        every: u32,
        encode: Arc<dyn Fn() -> String + Send + Sync>,
    },
    /// A collector of the cluster map: `/readyz` as `dta_collector_ready{collector=NAME}`.
    Ready { name: String, addr: SocketAddr },
}

impl Source {
    fn name(&self) -> &str {
        match self {
            Source::Metrics { name, .. } | Source::Local { name, .. } => name,
            Source::Ready { name, .. } => name,
        }
    }
}

/// One kept series.
#[derive(Debug, serde::Serialize)]
struct Series {
    chart: &'static str,
    /// The source it was read from (`translator`, `int-sink`, `collector`, `cluster`).
    source: String,
    family: &'static str,
    /// The value of the watch's `by` label (empty: the family's sum).
    label: String,
    unit: &'static str,
    /// `[unix ms, value or null]`, oldest first.
    #[serde(skip)]
    points: VecDeque<(u64, Option<f64>)>,
    #[serde(skip)]
    last: Option<(u64, f64)>,
}

#[derive(Default)]
struct Inner {
    series: Vec<Series>,
    index: HashMap<(String, &'static str, String), usize>,
    /// Series not kept: [`MAX_SERIES`] were.
    dropped: u64,
    /// Samples taken (rounds).
    rounds: u64,
}

/// The history, shared by the sampler thread and the HTTP handler.
pub struct History {
    inner: Mutex<Inner>,
}

/// The answer of `GET /console/history`.
#[derive(serde::Serialize)]
pub struct Answer {
    pub step_ms: u64,
    pub now_ms: u64,
    pub series_dropped: u64,
    pub series: Vec<serde_json::Value>,
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl History {
    pub fn new() -> Arc<History> {
        Arc::new(History {
            inner: Mutex::new(Inner::default()),
        })
    }

    /// Sample `sources` every [`STEP`] on a thread of its own, until the last `Arc` of the
    /// history is dropped.
    pub fn start(self: &Arc<Self>, sources: Vec<Source>, token: Option<Token>) {
        if sources.is_empty() {
            return;
        }
        let weak: Weak<History> = Arc::downgrade(self);
        let spawned = std::thread::Builder::new()
            .name("console-history".into())
            .spawn(move || {
                let mut round: u64 = 0;
                loop {
                    let started = std::time::Instant::now();
                    let got = sample_all(&sources, token.as_ref(), round);
                    match weak.upgrade() {
                        Some(h) => h.record(unix_ms(), &got),
                        None => return,
                    }
                    round += 1;
                    std::thread::sleep(STEP.saturating_sub(started.elapsed()));
                }
            });
        if let Err(e) = spawned {
            tracing::warn!("the console's history is not kept: cannot start its thread: {e}");
        }
    }

    /// Record one round at `now_ms`: per source asked, its samples (`Err`: it did not answer,
    /// its series get a gap).
    pub fn record(&self, now_ms: u64, got: &[(String, Result<Vec<Sample>, String>)]) {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.rounds += 1;
        for (source, samples) in got {
            match samples {
                Ok(samples) => {
                    let mut sums: HashMap<(usize, String), f64> = HashMap::new();
                    for s in samples {
                        for (i, wa) in WATCHED.iter().enumerate() {
                            if wa.family != s.name {
                                continue;
                            }
                            let label = wa.by.map_or(String::new(), |b| {
                                s.label(b).unwrap_or_default().to_owned()
                            });
                            *sums.entry((i, label)).or_default() += s.value;
                        }
                    }
                    // In a stable order: series are created in it.
                    let mut sums: Vec<_> = sums.into_iter().collect();
                    sums.sort_by(|a, b| a.0.cmp(&b.0));
                    for ((i, label), v) in sums {
                        g.point(source, &WATCHED[i], label, now_ms, Some(v));
                    }
                }
                Err(_) => {
                    // Every series of this source gets a gap.
                    let idx: Vec<usize> = g
                        .series
                        .iter()
                        .enumerate()
                        .filter(|(_, s)| &s.source == source)
                        .map(|(i, _)| i)
                        .collect();
                    for i in idx {
                        let s = &mut g.series[i];
                        s.last = None;
                        push(&mut s.points, (now_ms, None));
                    }
                }
            }
        }
    }

    /// Every series' points after `since_ms`.
    pub fn answer(&self, since_ms: u64) -> Answer {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let series = g
            .series
            .iter()
            .map(|s| {
                let points: Vec<_> = s
                    .points
                    .iter()
                    .filter(|(t, _)| *t > since_ms)
                    .map(|&(t, v)| serde_json::json!([t, v]))
                    .collect();
                let mut v = serde_json::to_value(s).unwrap_or_default();
                v["points"] = serde_json::Value::Array(points);
                v
            })
            .collect();
        Answer {
            step_ms: STEP.as_millis() as u64,
            now_ms: unix_ms(),
            series_dropped: g.dropped,
            series,
        }
    }
}

impl Inner {
    fn point(
        &mut self,
        source: &str,
        wa: &'static Watch,
        label: String,
        now_ms: u64,
        v: Option<f64>,
    ) {
        let key = (source.to_owned(), wa.family, label);
        let i = match self.index.get(&key) {
            Some(&i) => i,
            None if self.series.len() >= MAX_SERIES => {
                self.dropped += 1;
                return;
            }
            None => {
                self.series.push(Series {
                    chart: wa.chart,
                    source: key.0.clone(),
                    family: wa.family,
                    label: key.2.clone(),
                    unit: wa.unit,
                    points: VecDeque::new(),
                    last: None,
                });
                self.index.insert(key, self.series.len() - 1);
                self.series.len() - 1
            }
        };
        let s = &mut self.series[i];
        let point = match (wa.kind, v) {
            (Kind::Gauge, v) => v,
            (Kind::Rate, Some(v)) => {
                let last = s.last.replace((now_ms, v));
                match last {
                    Some((t, prev)) if v >= prev && now_ms > t => {
                        Some((v - prev) * 1000.0 / (now_ms - t) as f64)
                    }
                    // The first sample, or a counter that went back (a restart): no rate yet,
                    // and no point (a null point says the source did not answer).
                    _ => return,
                }
            }
            (Kind::Rate, None) => {
                s.last = None;
                None
            }
        };
        push(&mut s.points, (now_ms, point));
    }
}

fn push(q: &mut VecDeque<(u64, Option<f64>)>, p: (u64, Option<f64>)) {
    if q.len() == POINTS {
        q.pop_front();
    }
    q.push_back(p);
}

/// Ask every source due in `round`, in parallel, each within [`SAMPLE_TIMEOUT`].
fn sample_all(
    sources: &[Source],
    token: Option<&Token>,
    round: u64,
) -> Vec<(String, Result<Vec<Sample>, String>)> {
    std::thread::scope(|sc| {
        let asks: Vec<_> = sources
            .iter()
            .filter(|s| match s {
                Source::Local { every, .. } => round % u64::from((*every).max(1)) == 0,
                _ => true,
            })
            .map(|s| (s.name().to_owned(), sc.spawn(move || sample(s, token))))
            .collect();
        asks.into_iter()
            .map(|(n, h)| {
                (
                    n,
                    h.join()
                        .unwrap_or_else(|_| Err("the sampler panicked".into())),
                )
            })
            .collect()
    })
}

/// One source's samples now.
pub fn sample(s: &Source, token: Option<&Token>) -> Result<Vec<Sample>, String> {
    match s {
        Source::Local { encode, .. } => parse_exposition(&encode()),
        Source::Metrics { addr, .. } => {
            let a = crate::client::get(*addr, "/metrics", token, SAMPLE_TIMEOUT)
                .map_err(|e| e.to_string())?;
            if a.status != 200 {
                return Err(format!("GET /metrics answered {}", a.status));
            }
            parse_exposition(&String::from_utf8_lossy(&a.body))
        }
        Source::Ready { name, addr } => {
            // Unreachable and not ready alike: 0 (the chart says which collectors were up).
            let ready = crate::client::get(*addr, "/readyz", None, SAMPLE_TIMEOUT)
                .is_ok_and(|a| a.status == 200);
            Ok(vec![Sample {
                name: "dta_collector_ready".into(),
                labels: vec![("collector".into(), name.clone())],
                value: f64::from(u8::from(ready)),
            }])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(text: &str) -> Result<Vec<Sample>, String> {
        parse_exposition(text)
    }

    #[test]
    fn counters_become_rates_with_gaps_never_zeros() {
        let h = History::new();
        let t = "dta_translator_reports_total{primitive=\"append\"} 100\n\
                 dta_translator_reports_total{primitive=\"key_write\"} 10\n\
                 dta_store_fill_ratio{store=\"a\",kind=\"x\"} 0.5\n\
                 unwatched_total 7\n";
        h.record(1000, &[("translator".into(), samples(t))]);
        let t2 = t.replace(" 100\n", " 300\n");
        h.record(2000, &[("translator".into(), samples(&t2))]);
        h.record(3000, &[("translator".into(), Err("timed out".into()))]);
        h.record(4000, &[("translator".into(), samples(&t2))]);
        h.record(5000, &[("translator".into(), samples(t))]);
        let a = h.answer(0);
        let find = |family: &str, label: &str| {
            a.series
                .iter()
                .find(|s| s["family"] == family && s["label"] == label)
                .unwrap_or_else(|| panic!("{family} {label}: {:?}", a.series))
                .clone()
        };
        let append = find("dta_translator_reports_total", "append");
        assert_eq!(append["chart"], "ingest");
        assert_eq!(append["unit"], "reports/s");
        // First sample: no rate (no point); then 200/s; a gap (null); after a gap no rate; a
        // counter that went back (a restart): no rate.
        assert_eq!(
            append["points"],
            serde_json::json!([[2000, 200.0], [3000, null]])
        );
        let kw = find("dta_translator_reports_total", "key_write");
        assert_eq!(kw["points"][0], serde_json::json!([2000, 0.0]));
        let fill = find("dta_store_fill_ratio", "a");
        assert_eq!(fill["points"][0], serde_json::json!([1000, 0.5]));
        assert_eq!(fill["points"][2], serde_json::json!([3000, null]));
        assert_eq!(a.series.len(), 3, "unwatched families are not kept");
        // Only what is newer than since_ms.
        let later = h.answer(2500);
        assert_eq!(later.series[0]["points"], serde_json::json!([[3000, null]]));
    }

    #[test]
    fn memory_is_bounded() {
        let h = History::new();
        let mut text = String::new();
        for i in 0..(MAX_SERIES + 10) {
            text.push_str(&format!(
                "dta_translator_dropped_total{{reason=\"r{i}\"}} 1\n"
            ));
        }
        for t in 0..(POINTS as u64 + 6) {
            h.record(t * 1000 + 1, &[("translator".into(), samples(&text))]);
        }
        let a = h.answer(0);
        assert_eq!(a.series.len(), MAX_SERIES);
        assert!(a.series_dropped >= 10);
        assert!(a
            .series
            .iter()
            .all(|s| s["points"].as_array().unwrap().len() == POINTS));
    }

    /// A source that never answers costs its own points, not the others'.
    #[test]
    fn a_hung_source_costs_only_its_points() {
        // Accepts and never answers.
        let hung = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = hung.local_addr().unwrap();
        let local = Source::Local {
            name: "collector".into(),
            every: 1,
            encode: Arc::new(|| "dta_store_fill_ratio{store=\"s\"} 0.25\n".into()),
        };
        let sources = vec![
            Source::Metrics {
                name: "translator".into(),
                addr,
            },
            local,
            Source::Ready {
                name: "c2".into(),
                addr,
            },
        ];
        let started = std::time::Instant::now();
        let got = sample_all(&sources, None, 0);
        assert!(started.elapsed() < SAMPLE_TIMEOUT * 2, "asked in parallel");
        assert!(got[0].1.is_err());
        assert_eq!(got[1].1.as_ref().unwrap()[0].value, 0.25);
        assert_eq!(got[2].1.as_ref().unwrap()[0].value, 0.0);
        drop(hung);
    }
}
