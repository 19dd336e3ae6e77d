//! The INT sink's queries over its stores (`dta-int`'s `query`): a flow's path, recent events,
//! the flows the sink summarised, the network map and a switch's histogram. Each takes the
//! opened `Region`s and answers what `GET /int/...` and `dta query int ...` answer for the same
//! question (`docs/int-sink.md`, "Queries"), as dicts and lists.

use dta_int::layout::{Buckets, Metric};
use dta_int::query::{self, EventFilter, FlowFilter, FlowOrder, WindowSel};
use pyo3::prelude::*;

use crate::region::{region_err, to_py, Region};

fn query_err(py: Python<'_>, e: query::QueryError) -> PyErr {
    let reason = match e {
        query::QueryError::WrongKind(..) => "wrong_kind",
        query::QueryError::Store(..) => "store",
        query::QueryError::BadFlow(..) => "bad_flow",
    };
    region_err(py, reason, e.to_string())
}

fn flow_key(py: Python<'_>, flow: &str) -> PyResult<[u8; dta_int::layout::FLOW_KEY_LEN]> {
    query::parse_flow(flow).map_err(|e| query_err(py, e))
}

fn window(py: Python<'_>, w: Option<&str>) -> PyResult<Option<WindowSel>> {
    w.map(WindowSel::parse)
        .transpose()
        .map_err(|m| region_err(py, "bad_window", m))
}

/// Event kinds by name (none: the query's default kinds).
fn event_kinds(py: Python<'_>, kinds: Option<Vec<String>>) -> PyResult<Vec<dta_int::EventKind>> {
    kinds
        .unwrap_or_default()
        .iter()
        .map(|k| dta_int::EventKind::parse(k))
        .collect::<Result<_, _>>()
        .map_err(|m| region_err(py, "bad_kind", m))
}

/// `max` within 1..=`most`, as the HTTP routes bound it.
fn check_max(py: Python<'_>, max: usize, most: usize) -> PyResult<()> {
    if (1..=most).contains(&max) {
        return Ok(());
    }
    Err(region_err(
        py,
        "bad_max",
        format!("max {max}: expected 1..={most}"),
    ))
}

fn since_ns(since_ms: Option<u64>) -> Option<u64> {
    since_ms.map(|ms| ms.saturating_mul(1_000_000))
}

/// A flow's path from the Key-Write store of paths: `{"flow", "status", "path", ...}` as
/// `GET /int/path/{store}?flow=` answers. `flow` is `SRC:SPORT-DST:DPORT/PROTO`.
#[pyfunction]
#[pyo3(signature = (paths, flow, redundancy=None))]
pub(crate) fn int_path<'py>(
    py: Python<'py>,
    paths: &Region,
    flow: &str,
    redundancy: Option<u8>,
) -> PyResult<Bound<'py, PyAny>> {
    let key = flow_key(py, flow)?;
    let r = query::path(paths.inner(), &key, redundancy).map_err(|e| query_err(py, e))?;
    to_py(py, serde_json::to_value(r))
}

/// The events of the events store (Append) the filter keeps, wherever they are in the lists
/// held, decoded, newest first: every kind unless `kinds` names some (`"hop_latency"`,
/// `"path_change"`, ...), at switch `node`, of `flow`, from `since_ms` to `until_ms` (Unix
/// milliseconds, both included); at most `max` (1..=4096). `{"events": [...], "complete": bool, "scanned": N, "next": CURSOR}`
/// (`next` only when not complete: pass it as `before` for the next page), as
/// `GET /int/events/{store}` answers.
#[pyfunction]
#[pyo3(signature = (events, kinds=None, node=None, flow=None, since_ms=None, max=100, list_base=0,
    before=None, until_ms=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn int_events<'py>(
    py: Python<'py>,
    events: &Region,
    kinds: Option<Vec<String>>,
    node: Option<u32>,
    flow: Option<&str>,
    since_ms: Option<u64>,
    max: usize,
    list_base: u32,
    before: Option<&str>,
    until_ms: Option<u64>,
) -> PyResult<Bound<'py, PyAny>> {
    check_max(py, max, query::MAX_EVENTS)?;
    let filter = EventFilter {
        kinds: event_kinds(py, kinds)?,
        node,
        flow: flow.map(|f| flow_key(py, f)).transpose()?,
        since_ns: since_ns(since_ms),
        until_ns: until_ms.map(query::end_of_ms),
        before: before
            .map(query::EventCursor::parse)
            .transpose()
            .map_err(|m| region_err(py, "bad_cursor", m))?,
    };
    let r = query::recent_events(events.inner(), list_base, &filter, max)
        .map_err(|e| query_err(py, e))?;
    to_py(py, serde_json::to_value(r))
}

/// Threshold crossings grouped into episodes: per switch and kind (and with `per_flow`, flow),
/// a run with no quiet time longer than `gap_ms`; `kinds` (default the threshold kinds), `node`,
/// `since_ms`; the newest `max` (1..=4096). `{"episodes": [{"node_id", "kind", "start_ns",
/// "end_ns", "peak", "peak_ns", "peak_flow", "count", "flows"}], "more", "series": [{"node_id",
/// "kind", "events", "episodes", "counts"}], "series_from_ns", "series_step_ns", "scanned",
/// "complete"}`, as `GET /int/episodes/{store}` answers.
#[pyfunction]
#[pyo3(signature = (events, kinds=None, node=None, since_ms=None, gap_ms=1000, per_flow=false,
    max=100, list_base=0))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn int_episodes<'py>(
    py: Python<'py>,
    events: &Region,
    kinds: Option<Vec<String>>,
    node: Option<u32>,
    since_ms: Option<u64>,
    gap_ms: u64,
    per_flow: bool,
    max: usize,
    list_base: u32,
) -> PyResult<Bound<'py, PyAny>> {
    check_max(py, max, query::MAX_EPISODES)?;
    if !(1..=query::episodes::MAX_GAP_MS).contains(&gap_ms) {
        return Err(region_err(
            py,
            "bad_gap",
            format!(
                "gap_ms {gap_ms}: expected 1..={}",
                query::episodes::MAX_GAP_MS
            ),
        ));
    }
    let q = query::EpisodeQuery {
        kinds: event_kinds(py, kinds)?,
        node,
        since_ns: since_ns(since_ms),
        gap_ns: gap_ms * 1_000_000,
        per_flow,
    };
    let now_ns = dta_store::key_increment::unix_ms().saturating_mul(1_000_000);
    let r = query::episodes(events.inner(), list_base, &q, max, now_ns)
        .map_err(|e| query_err(py, e))?;
    to_py(py, serde_json::to_value(r))
}

/// The flows the INT sink summarised (events store; with `paths`, each flow's path): newest
/// first, or the highest first by `top` (`"latency"`: the newest summary's, `"worst"`: the
/// highest of any summary since `since_ms`, `"packets"`, `"hops"`); kept by `prefix`
/// (CIDR, source or destination), `port`, `node` (needs `paths`) and `since_ms`; at most `max`.
/// With `flow`, every summary of that one flow held (the flow over time), newest first.
/// `{"flows": [...], "complete": bool, "covered_from_ns": NS, "more": N}` as
/// `GET /int/flows/{store}` answers (`complete`: every summary held was read; `more`: matches
/// ranked out by `max`).
#[pyfunction]
#[pyo3(signature = (events, paths=None, prefix=None, port=None, node=None, since_ms=None,
    top="recent", max=20, list_base=0, flow=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn int_flows<'py>(
    py: Python<'py>,
    events: &Region,
    paths: Option<PyRef<'py, Region>>,
    prefix: Option<&str>,
    port: Option<u16>,
    node: Option<u32>,
    since_ms: Option<u64>,
    top: &str,
    max: usize,
    list_base: u32,
    flow: Option<&str>,
) -> PyResult<Bound<'py, PyAny>> {
    check_max(py, max, query::MAX_FLOW_SCAN)?;
    let filter = FlowFilter {
        prefix: prefix
            .map(str::parse)
            .transpose()
            .map_err(|e| region_err(py, "bad_prefix", format!("prefix: {e}")))?,
        port,
        node,
        since_ns: since_ns(since_ms),
        flow: flow.map(|f| flow_key(py, f)).transpose()?,
    };
    let order = FlowOrder::parse(top).map_err(|m| region_err(py, "bad_order", m))?;
    let r = query::flows(
        events.inner(),
        paths.as_ref().map(|p| p.inner()),
        list_base,
        &filter,
        order,
        max,
    )
    .map_err(|e| query_err(py, e))?;
    to_py(py, serde_json::to_value(r))
}

/// The network map learned from the flows' paths: `{"rank", "switches"` (the most congested
/// first by `rank`, with their queue occupancy and hop latency over `window`), `"links",
/// "flows", "windows"}`, as `GET /int/network` answers. `window`: `"current"` (the default),
/// `"all"`, `"last:5m"`, `"at:UNIX_MS"`; `rank`: `METRIC:STAT` (`"hop_latency:p99"`, the
/// default, `"queue_occupancy:p99"`, `"hop_latency:over:20000"`, ...); `long_tier`: the
/// histograms' long tier, read when `window` asks for more than `hist` holds.
#[pyfunction]
#[pyo3(signature = (events, paths, hist, window=None, list_base=0, rank=None, long_tier=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn int_network<'py>(
    py: Python<'py>,
    events: &Region,
    paths: &Region,
    hist: &Region,
    window: Option<&str>,
    list_base: u32,
    rank: Option<&str>,
    long_tier: Option<PyRef<'py, Region>>,
) -> PyResult<Bound<'py, PyAny>> {
    let w = self::window(py, window)?;
    let rank = rank
        .map(query::Congestion::parse)
        .transpose()
        .map_err(|m| region_err(py, "bad_rank", m))?
        .unwrap_or_default();
    let r = query::network(
        events.inner(),
        paths.inner(),
        hist.inner(),
        long_tier.as_ref().map(|r| r.inner()),
        list_base,
        w,
        rank,
        dta_store::key_increment::unix_ms(),
    )
    .map_err(|e| query_err(py, e))?;
    to_py(py, serde_json::to_value(r))
}

/// A switch's histogram of `metric` (`"queue_occupancy"`, `"hop_latency"`,
/// `"egress_tx_util"`) from the Key-Increment store: bucketed as the sink recorded it there, or
/// by the sink's `edges`; over `window` (as `int_network`). `{"node_id", "metric", "histogram",
/// "relative_error", "quantiles": {"p50", "p90", "p99", "max"}, "buckets": [{"lo", "hi",
/// "count"}], "total", "windows", "complete"}`, as `GET /int/histogram/{store}` answers. With
/// `port`, the switch's egress port's, from a per-port histogram store.
#[pyfunction]
#[pyo3(signature = (hist, node, metric="queue_occupancy", edges=None, redundancy=None, window=None,
    port=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn int_histogram<'py>(
    py: Python<'py>,
    hist: &Region,
    node: u32,
    metric: &str,
    edges: Option<Vec<u32>>,
    redundancy: Option<u8>,
    window: Option<&str>,
    port: Option<u16>,
) -> PyResult<Bound<'py, PyAny>> {
    let m = Metric::from_name(metric).ok_or_else(|| {
        region_err(
            py,
            "bad_metric",
            format!("unknown metric {metric:?}: hop_latency, queue_occupancy or egress_tx_util"),
        )
    })?;
    let b = Buckets::named(edges).map_err(|m| region_err(py, "bad_edges", m))?;
    let w = self::window(py, window)?;
    let r = query::histogram_at(
        hist.inner(),
        node,
        port,
        m,
        b.as_ref(),
        redundancy,
        w,
        dta_store::key_increment::unix_ms(),
    )
    .map_err(|e| query_err(py, e))?;
    to_py(py, serde_json::to_value(r))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(int_path, m)?)?;
    m.add_function(wrap_pyfunction!(int_events, m)?)?;
    m.add_function(wrap_pyfunction!(int_episodes, m)?)?;
    m.add_function(wrap_pyfunction!(int_flows, m)?)?;
    m.add_function(wrap_pyfunction!(int_network, m)?)?;
    m.add_function(wrap_pyfunction!(int_histogram, m)?)?;
    Ok(())
}
