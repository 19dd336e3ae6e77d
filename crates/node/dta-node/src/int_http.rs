//! The INT queries of `dta query int` over the collector's HTTP API (the web console draws them),
//! answered from the collector's regions with the same functions ([`dta_int::query`]), so the
//! answers are the CLI's:
//!
//! | route | parameters | answer |
//! | --- | --- | --- |
//! | `GET /int/path/{store}` | `flow` (required), `redundancy` | [`query::PathResult`] |
//! | `GET /int/hop-latency/{store}` | `flow`, `hop` (required), `values`, `divisor` (default: the sink's) | [`query::HopLatencyResult`] |
//! | `GET /int/events/{store}` | `kind` (comma-separated kinds; default every kind), `node`, `flow`, `since_ms`, `until_ms` (Unix ms, both included), `max` (default 100, at most [`query::MAX_EVENTS`]), `list_base` (default 0) | `{"events": [Event, ...]}`, newest first, decoded by the event layout |
//! | `GET /int/episodes/{store}` | `kind` (comma-separated; default the threshold kinds), `node`, `since_ms`, `gap_ms` (default 1000: a longer quiet time ends an episode), `per_flow` (`true`: one episode per flow too), `max` (default 100, at most [`query::MAX_EPISODES`]), `list_base` | [`query::EpisodePage`] |
//! | `GET /int/flows/{store}` | `paths` (the paths store: each flow's path, and `node`), `prefix` (CIDR), `port`, `node`, `since_ms`, `top` (`recent`, `latency`, `worst`, `packets`, `hops`), `max` (default 20), `list_base`, `flow` (one flow: every summary of it held, the flow over time) | `{"flows": [FlowInfo, ...]}` |
//! | `GET /int/network` | `events`, `paths`, `hist`, `long_tier` (store names; default: the store of the INT sink's layout for each, by its usual name first; the long tier only if there is one), `window` (a `last:` longer than `hist` holds is read from the long tier), `list_base`, `rank` (`METRIC:STAT`, default `hop_latency:p99`: [`query::Congestion`]) | [`query::Network`] |
//! | `GET /int/histogram/{store}` | `node` (required), `port` (the switch's egress port, from a per-port histogram store), `metric` (default `queue_occupancy`), `edges` (comma-separated; default log2), `redundancy`, `window` (`current`, `all`, `last:5m`, `at:UNIX_MS`; default: the current window of a windowed store, all of a cumulative one) | [`query::HistogramResult`] |
//!
//! The routes have the query API's one shape: parameters checked by its
//! [`dta_collector::limits::Params`] (an unknown parameter is refused), the store looked up
//! first, the read off the executor within [`dta_collector::limits::MAX_HEAVY_QUERIES`]
//! ([`HeavySlots::on_store`]), errors as its [`ApiError`], all in the one OpenAPI document.

use std::sync::Arc;

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use dta_collector::http::{ApiError, HeavySlots, Name, Raw};
use dta_collector::limits::{ParamError, Params, MAX_POSTCARD_VALUES};
use dta_collector::Collector;
use dta_int::layout::{Buckets, Metric};
use dta_int::query;
use dta_int::sink::IntSinkConfig;

/// Most bucket edges a histogram query takes.
pub const MAX_EDGES: usize = 64;

#[derive(Clone)]
struct Int {
    c: Arc<Collector>,
    heavy: HeavySlots,
}

/// The `/int/...` routes over `collector`'s stores.
pub fn router(collector: Arc<Collector>) -> Router {
    Router::new()
        .route("/int/path/:name", get(path))
        .route("/int/hop-latency/:name", get(hop_latency))
        .route("/int/histogram/:name", get(histogram))
        .route("/int/events/:name", get(events))
        .route("/int/episodes/:name", get(episodes))
        .route("/int/flows/:name", get(flows))
        .route("/int/network", get(network))
        .with_state(Int {
            c: collector,
            heavy: HeavySlots::default(),
        })
}

fn bad(msg: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(msg)
}

fn region(c: &Collector, name: &str) -> Result<Arc<dta_store::Region>, ApiError> {
    Ok(c.store(name)?.region.clone())
}

fn flow(p: &Params) -> Result<[u8; dta_int::layout::FLOW_KEY_LEN], ApiError> {
    let f = p.raw("flow").ok_or(ParamError::Missing("flow"))?;
    query::parse_flow(f).map_err(bad)
}

async fn path(
    State(s): State<Int>,
    Name(name): Name,
    Raw(raw): Raw,
) -> Result<Json<query::PathResult>, ApiError> {
    let p = Params::new(&raw, &["flow", "redundancy"])?;
    let redundancy = p.redundancy()?;
    let f = flow(&p)?;
    s.heavy
        .on_store(&s.c, name, move |_, st| {
            query::path(&st.region, &f, redundancy).map_err(bad)
        })
        .await
}

async fn hop_latency(
    State(s): State<Int>,
    Name(name): Name,
    Raw(raw): Raw,
) -> Result<Json<query::HopLatencyResult>, ApiError> {
    let p = Params::new(&raw, &["flow", "hop", "values", "divisor"])?;
    let f = flow(&p)?;
    let hop: u8 = p.bounded("hop", None, 0, u8::MAX)?;
    let sink = IntSinkConfig::default();
    let values = p.bounded("values", Some(sink.postcard_values), 1, MAX_POSTCARD_VALUES)?;
    let divisor = p.bounded("divisor", Some(sink.postcard_divisor), 1, u32::MAX)?;
    s.heavy
        .on_store(&s.c, name, move |_, st| {
            query::hop_latency(&st.region, &f, hop, values, divisor).map_err(bad)
        })
        .await
}

async fn events(
    State(s): State<Int>,
    Name(name): Name,
    Raw(raw): Raw,
) -> Result<Json<query::EventPage>, ApiError> {
    let p = Params::new(
        &raw,
        &[
            "kind",
            "node",
            "flow",
            "since_ms",
            "until_ms",
            "max",
            "list_base",
            "before",
        ],
    )?;
    let filter = query::EventFilter {
        kinds: kinds(&p)?,
        node: p.optional("node", 0, u32::MAX)?,
        flow: p.raw("flow").map(|_| flow(&p)).transpose()?,
        since_ns: p.since_ns()?,
        until_ns: p
            .optional("until_ms", 0, u64::MAX / 1_000_000)?
            .map(query::end_of_ms),
        before: p
            .raw("before")
            .map(|c| query::EventCursor::parse(c).map_err(bad))
            .transpose()?,
    };
    let max = p.bounded("max", Some(100), 1, query::MAX_EVENTS as u64)? as usize;
    let list_base = p.list_base()?;
    s.heavy
        .on_store(&s.c, name, move |_, st| {
            query::recent_events(&st.region, list_base, &filter, max).map_err(bad)
        })
        .await
}

/// `kind`: comma-separated event kinds (absent or empty: the route's default).
fn kinds(p: &Params) -> Result<Vec<dta_int::EventKind>, ApiError> {
    match p.raw("kind").filter(|k| !k.is_empty()) {
        None => Ok(vec![]),
        Some(k) => k
            .split(',')
            .take(dta_int::EventKind::ALL.len() + 1)
            .map(|x| dta_int::EventKind::parse(x).map_err(bad))
            .collect(),
    }
}

async fn episodes(
    State(s): State<Int>,
    Name(name): Name,
    Raw(raw): Raw,
) -> Result<Json<query::EpisodePage>, ApiError> {
    let p = Params::new(
        &raw,
        &[
            "kind",
            "node",
            "since_ms",
            "gap_ms",
            "per_flow",
            "max",
            "list_base",
        ],
    )?;
    let q = query::EpisodeQuery {
        kinds: kinds(&p)?,
        node: p.optional("node", 0, u32::MAX)?,
        since_ns: p.since_ns()?,
        gap_ns: p.bounded(
            "gap_ms",
            Some(query::episodes::DEFAULT_GAP_NS / 1_000_000),
            1,
            query::episodes::MAX_GAP_MS,
        )? * 1_000_000,
        per_flow: match p.raw("per_flow") {
            None | Some("false") => false,
            Some("true") => true,
            Some(x) => return Err(bad(format!("per_flow {x:?}: true or false"))),
        },
    };
    let max = p.bounded("max", Some(100), 1, query::MAX_EPISODES as u64)? as usize;
    let list_base = p.list_base()?;
    s.heavy
        .on_store(&s.c, name, move |_, st| {
            let now_ns = dta_store::key_increment::unix_ms().saturating_mul(1_000_000);
            query::episodes(&st.region, list_base, &q, max, now_ns).map_err(bad)
        })
        .await
}

async fn flows(
    State(s): State<Int>,
    Name(name): Name,
    Raw(raw): Raw,
) -> Result<Json<query::FlowPage>, ApiError> {
    let p = Params::new(
        &raw,
        &[
            "paths",
            "prefix",
            "port",
            "node",
            "since_ms",
            "top",
            "max",
            "list_base",
            "flow",
        ],
    )?;
    let filter = query::FlowFilter {
        flow: p.raw("flow").map(|_| flow(&p)).transpose()?,
        prefix: p
            .raw("prefix")
            .map(|x| x.parse().map_err(|e| bad(format!("prefix: {e}"))))
            .transpose()?,
        port: p.optional("port", 0, u16::MAX)?,
        node: p.optional("node", 0, u32::MAX)?,
        since_ns: p.since_ns()?,
    };
    let order = query::FlowOrder::parse(p.raw("top").unwrap_or("recent")).map_err(bad)?;
    let max = p.bounded("max", Some(20), 1, query::MAX_FLOW_SCAN as u64)? as usize;
    let list_base = p.list_base()?;
    let paths = p.raw("paths").map(str::to_owned);
    if let Some(pn) = &paths {
        region(&s.c, pn)?;
    }
    s.heavy
        .on_store(&s.c, name, move |c, st| {
            let pr = paths.as_deref().map(|n| region(c, n)).transpose()?;
            query::flows(&st.region, pr.as_deref(), list_base, &filter, order, max).map_err(bad)
        })
        .await
}

async fn network(State(s): State<Int>, Raw(raw): Raw) -> Result<Json<query::Network>, ApiError> {
    let p = Params::new(
        &raw,
        &[
            "events",
            "paths",
            "hist",
            "long_tier",
            "window",
            "list_base",
            "rank",
        ],
    )?;
    let rank = p
        .raw("rank")
        .map(query::Congestion::parse)
        .transpose()
        .map_err(bad)?
        .unwrap_or_default();
    // A store not named is the one of the INT sink's layout (by its usual name first).
    let name = |k: &'static str, role: query::Role| -> Result<String, ApiError> {
        match p.raw(k) {
            Some(n) => Ok(n.to_owned()),
            None => role
                .find(
                    s.c.stores()
                        .iter()
                        .map(|x| (x.name.as_str(), x.region.header())),
                )
                .map(str::to_owned)
                .map_err(bad),
        }
    };
    let (events, paths, hist) = (
        name("events", query::Role::Events)?,
        name("paths", query::Role::Paths)?,
        name("hist", query::Role::Hist)?,
    );
    // The long tier is optional: named, it must be there; else the one of its layout, if any.
    let long = match p.raw("long_tier") {
        Some(n) => Some(n.to_owned()),
        None => name("long_tier", query::Role::LongTier).ok(),
    };
    let window = p.window()?;
    let list_base = p.list_base()?;
    for n in [Some(&paths), Some(&hist), long.as_ref()]
        .into_iter()
        .flatten()
    {
        region(&s.c, n)?;
    }
    s.heavy
        .on_store(&s.c, events, move |c, st| {
            query::network(
                &st.region,
                &*region(c, &paths)?,
                &*region(c, &hist)?,
                long.map(|n| region(c, &n)).transpose()?.as_deref(),
                list_base,
                window,
                rank,
                dta_store::key_increment::unix_ms(),
            )
            .map_err(bad)
        })
        .await
}

async fn histogram(
    State(s): State<Int>,
    Name(name): Name,
    Raw(raw): Raw,
) -> Result<Json<query::HistogramResult>, ApiError> {
    let p = Params::new(
        &raw,
        &["node", "port", "metric", "edges", "redundancy", "window"],
    )?;
    let port: Option<u16> = p.optional("port", 0, u16::MAX)?;
    let window = p.window()?;
    let node: u32 = p.bounded("node", None, 0, u32::MAX)?;
    let metric_name = p.raw("metric").unwrap_or("queue_occupancy");
    let metric = Metric::from_name(metric_name).ok_or_else(|| {
        bad(format!(
            "unknown metric {metric_name:?}: hop_latency, queue_occupancy or egress_tx_util"
        ))
    })?;
    let edges = match p.raw("edges").filter(|e| !e.is_empty()) {
        None => None,
        Some(e) => {
            let edges = e
                .split(',')
                .take(MAX_EDGES + 1)
                .map(|x| {
                    x.trim()
                        .parse::<u32>()
                        .map_err(|_| bad(format!("edges: {x:?} is not a u32")))
                })
                .collect::<Result<Vec<_>, _>>()?;
            if edges.len() > MAX_EDGES {
                return Err(bad(format!("edges: at most {MAX_EDGES}")));
            }
            Some(edges)
        }
    };
    let buckets = Buckets::named(edges).map_err(bad)?;
    let redundancy = p.redundancy()?;
    s.heavy
        .on_store(&s.c, name, move |_, st| {
            query::histogram_at(
                &st.region,
                node,
                port,
                metric,
                buckets.as_ref(),
                redundancy,
                window,
                dta_store::key_increment::unix_ms(),
            )
            .map_err(bad)
        })
        .await
}
