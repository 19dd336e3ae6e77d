// Size: the INT queries (path, hop latency, events, flows, network, histograms) share the store
// checks, the flow parser and the histogram windows; the scans of the event lists are `scan`.
//! Queries over the stores the sink writes (the CLI's `dta query int ...` and the HTTP API
//! call these): the path of a flow (Key-Write), a hop's latency (Postcarding), the latest events
//! of a kind (Append), a switch's histogram of a metric (Key-Increment, every bucket read).

use serde::Serialize;

use dta_store::key_increment::unix_ms;
use dta_store::{
    AppendLayout, KeyIncrementLayout, KeyWriteAnswer, KeyWriteLayout, ListReader, PostcardAnswer,
    PostcardingLayout, Region, StoreKind, ValueTable,
};
pub use dta_store::{WindowSel, WindowSpan};

use crate::events::{flow_string, Event, EventKind, FlowSummary};
use crate::layout::{decode_path, Buckets, Metric, FLOW_KEY_LEN};
pub mod episodes;
mod network;
pub mod scan;

pub use episodes::{episodes, Episode, EpisodePage, EpisodeQuery, Series, MAX_EPISODES};
pub use network::{network, Congestion, Link, Network, Stat, Switch, MAX_SWITCHES};

pub use scan::{
    end_of_ms, recent_events, EventCursor, EventFilter, EventPage, FlowFilter, FlowPage, MAX_EVENTS,
};

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum QueryError {
    #[error("store {0:?} is not a {1} store")]
    WrongKind(String, &'static str),
    #[error("store {0:?}: {1}")]
    Store(String, String),
    #[error("bad flow {0:?}: expected SRC:SPORT-DST:DPORT/PROTO")]
    BadFlow(String),
}

pub(crate) fn layout_err(r: &Region, e: impl std::fmt::Display) -> QueryError {
    QueryError::Store(r.header().name.clone(), e.to_string())
}

/// List `list_base + offset` of an events store of layout `l`, or why the store has no such list
/// (a `list_base` from a request is anything up to `u32::MAX`).
pub(crate) fn event_list(
    r: &Region,
    l: &AppendLayout,
    list_base: u32,
    offset: u32,
) -> Result<u32, QueryError> {
    list_base
        .checked_add(offset)
        .filter(|&list| list < l.lists())
        .ok_or_else(|| {
            QueryError::Store(
                r.header().name.clone(),
                format!(
                    "list_base {list_base} + {offset} is not one of its {} lists: give the events \
                     store at least {} lists (the INT sink then writes them)",
                    l.lists(),
                    u64::from(list_base) + u64::from(offset) + 1
                ),
            )
        })
}

pub(crate) fn expect(r: &Region, kind: StoreKind, name: &'static str) -> Result<(), QueryError> {
    if r.header().kind != kind {
        return Err(QueryError::WrongKind(r.header().name.clone(), name));
    }
    Ok(())
}

/// `10.0.0.1:1234-10.0.0.2:80/6` → the 13-byte flow key.
pub fn parse_flow(s: &str) -> Result<[u8; FLOW_KEY_LEN], QueryError> {
    let bad = || QueryError::BadFlow(s.to_owned());
    let (addrs, proto) = s.trim().split_once('/').ok_or_else(bad)?;
    let (src, dst) = addrs.split_once('-').ok_or_else(bad)?;
    let (sip, sport) = src.split_once(':').ok_or_else(bad)?;
    let (dip, dport) = dst.split_once(':').ok_or_else(bad)?;
    let ip = |x: &str| x.parse::<std::net::Ipv4Addr>().map_err(|_| bad());
    let port = |x: &str| x.parse::<u16>().map_err(|_| bad());
    let mut k = [0u8; FLOW_KEY_LEN];
    k[0..4].copy_from_slice(&ip(sip)?.octets());
    k[4..8].copy_from_slice(&ip(dip)?.octets());
    k[8..10].copy_from_slice(&port(sport)?.to_be_bytes());
    k[10..12].copy_from_slice(&port(dport)?.to_be_bytes());
    k[12] = proto.parse::<u8>().map_err(|_| bad())?;
    Ok(k)
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PathResult {
    pub flow: String,
    /// "found", "empty" or "ambiguous".
    pub status: &'static str,
    /// Node ids from the INT source (hop 0) to the last hop.
    pub path: Vec<u32>,
}

/// "Path of flow X": the Key-Write path record ([DTA A.1] query, plurality vote).
pub fn path(
    region: &Region,
    flow: &[u8; FLOW_KEY_LEN],
    redundancy: Option<u8>,
) -> Result<PathResult, QueryError> {
    expect(region, StoreKind::KeyWrite, "key-write")?;
    let l = KeyWriteLayout::new(region.header()).map_err(|e| layout_err(region, e))?;
    let (status, path) = match l
        .query(region.mem(), flow, redundancy, 1)
        .map_err(|e| layout_err(region, e))?
    {
        KeyWriteAnswer::Found { data, .. } => match decode_path(&data) {
            Some(p) => ("found", p),
            None => ("ambiguous", vec![]),
        },
        KeyWriteAnswer::Empty => ("empty", vec![]),
        KeyWriteAnswer::Ambiguous { .. } => ("ambiguous", vec![]),
    };
    Ok(PathResult {
        flow: flow_string(flow),
        status,
        path,
    })
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct HopLatencyResult {
    pub flow: String,
    pub hop: u8,
    /// "found", "empty" (no path, or no postcard for this hop) or "ambiguous".
    pub status: &'static str,
    /// The stored value (latency / divisor, capped at values - 1).
    pub value: Option<u32>,
    /// `value * divisor`: the latency to the store's resolution.
    pub latency: Option<u64>,
}

/// "Hop latency of flow X at hop i": decode the flow's Postcarding chunk ([DTA §4] Postcarding,
/// [DTA A.2]) with the value set V = 0..`values`.
pub fn hop_latency(
    region: &Region,
    flow: &[u8; FLOW_KEY_LEN],
    hop: u8,
    values: u32,
    divisor: u32,
) -> Result<HopLatencyResult, QueryError> {
    expect(region, StoreKind::Postcarding, "postcarding")?;
    let l = PostcardingLayout::new(region.header()).map_err(|e| layout_err(region, e))?;
    let table = ValueTable::range(&l, values).map_err(|e| layout_err(region, e))?;
    hop_latency_with(region, &l, &table, flow, hop, divisor)
}

/// As [`hop_latency`] with a prebuilt table (for many queries).
pub fn hop_latency_with(
    region: &Region,
    layout: &PostcardingLayout,
    table: &ValueTable,
    flow: &[u8; FLOW_KEY_LEN],
    hop: u8,
    divisor: u32,
) -> Result<HopLatencyResult, QueryError> {
    if hop as usize >= layout.hops() {
        return Err(QueryError::Store(
            region.header().name.clone(),
            format!(
                "hop {hop}: this store keeps paths of {} hops (hop 0..={})",
                layout.hops(),
                layout.hops() - 1
            ),
        ));
    }
    let (status, value) = match layout
        .query(region.mem(), flow, table)
        .map_err(|e| layout_err(region, e))?
    {
        PostcardAnswer::Found(p) => match p.get(hop as usize) {
            Some(&v) if v != u32::MAX => ("found", Some(v)),
            _ => ("empty", None),
        },
        PostcardAnswer::Empty => ("empty", None),
        PostcardAnswer::Ambiguous => ("ambiguous", None),
    };
    Ok(HopLatencyResult {
        flow: flow_string(flow),
        hop,
        status,
        value,
        latency: value.map(|v| v as u64 * divisor as u64),
    })
}

/// "Latest events of a kind": up to `max` newest records of the kind's Append list
/// ([DTA A.3]), oldest first; `seq` is the entry's index in its list.
pub fn events(
    region: &Region,
    list_base: u32,
    kind: EventKind,
    max: usize,
) -> Result<Vec<Event>, QueryError> {
    expect(region, StoreKind::Append, "append")?;
    let l = AppendLayout::new(region.header()).map_err(|e| layout_err(region, e))?;
    let list = event_list(region, &l, list_base, kind as u32 - 1)?;
    let head = region
        .mem()
        .load_u64(l.head_offset(list))
        .map_err(|e| layout_err(region, e))?;
    let start = head.saturating_sub(max as u64);
    let mut reader = ListReader::new(l.clone(), list, 0, 1)
        .map_err(|e| layout_err(region, e))?
        .with_tail(start);
    let first = reader.tail();
    let mut buf = Vec::new();
    let polled = reader.poll(region.mem(), max, &mut buf);
    let first = first + polled.missed;
    Ok(buf
        .chunks(l.entry_len())
        .enumerate()
        .filter_map(|(i, r)| Event::decode(r, first + i as u64))
        .collect())
}

/// The role of a store in the INT sink's set: what its layout must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Append, record layout `int-event`.
    Events,
    /// Key-Write, 13-byte flow keys, 24-byte path records.
    Paths,
    /// Key-Increment, 6-byte histogram keys.
    Hist,
    /// Key-Increment, 7-byte keys: the histograms' long tier
    /// ([`crate::layout::LONG_TIER_KEY_LEN`]).
    LongTier,
    /// Key-Increment, 8-byte keys: the per-port histograms ([`crate::layout::PORT_KEY_LEN`]).
    PortHist,
    /// Postcarding, 13-byte flow keys.
    Latency,
}

impl Role {
    /// The name the INT sink's example configuration gives it.
    pub fn usual_name(self) -> &'static str {
        match self {
            Role::Events => "int_events",
            Role::Paths => "int_paths",
            Role::Hist => "int_hist",
            Role::LongTier => "int_hist_day",
            Role::PortHist => "int_hist_port",
            Role::Latency => "int_latency",
        }
    }

    /// Whether a store of `header` can play this role.
    pub fn fits(self, h: &dta_store::Header) -> bool {
        use dta_store::StoreSpec as S;
        match (self, &h.spec) {
            (Role::Events, S::Append(a)) => a.record == dta_store::AppendRecord::IntEvent,
            (Role::Paths, S::KeyWrite(k)) => {
                k.key_len as usize == FLOW_KEY_LEN && k.data_len as usize == PATH_RECORD_LEN
            }
            (Role::Hist, S::KeyIncrement(k)) => k.key_len as usize == crate::layout::HIST_KEY_LEN,
            (Role::LongTier, S::KeyIncrement(k)) => {
                k.key_len as usize == crate::layout::LONG_TIER_KEY_LEN
            }
            (Role::PortHist, S::KeyIncrement(k)) => {
                k.key_len as usize == crate::layout::PORT_KEY_LEN
            }
            (Role::Latency, S::Postcarding(p)) => p.key_len as usize == FLOW_KEY_LEN,
            _ => false,
        }
    }

    /// The store among `stores` (name, header) that plays this role: the one of the usual name
    /// if it fits, else the only one that fits; an error naming the candidates otherwise.
    pub fn find<'a>(
        self,
        stores: impl IntoIterator<Item = (&'a str, &'a dta_store::Header)>,
    ) -> Result<&'a str, QueryError> {
        let fit: Vec<&str> = stores
            .into_iter()
            .filter(|(_, h)| self.fits(h))
            .map(|(n, _)| n)
            .collect();
        if let Some(n) = fit.iter().find(|n| **n == self.usual_name()) {
            return Ok(n);
        }
        match fit.as_slice() {
            [one] => Ok(one),
            [] => Err(QueryError::Store(
                self.usual_name().into(),
                format!("no store has the layout of the INT sink's {self:?} store: name one"),
            )),
            many => Err(QueryError::Store(
                self.usual_name().into(),
                format!(
                    "several stores could be the INT sink's: {}; name one",
                    many.join(", ")
                ),
            )),
        }
    }
}

/// Bytes of a path record (`docs/int-sink.md`, "Path record").
const PATH_RECORD_LEN: usize = crate::layout::PATH_DATA_LEN;

/// Most flow summaries a flows or network query reads (the newest), whatever it keeps.
pub const MAX_FLOW_SCAN: usize = scan::MAX_SCAN as usize;

/// How [`flows`] ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowOrder {
    /// The most recently seen first.
    Recent,
    /// The highest path latency of its newest summary first.
    Latency,
    /// The highest path latency of any of its summaries in the time asked first, each flow
    /// given with that summary: a spike stays listed while its time is asked.
    Worst,
    /// The most packets first.
    Packets,
    /// The longest path first.
    Hops,
}

impl FlowOrder {
    pub fn parse(s: &str) -> Result<FlowOrder, String> {
        match s {
            "recent" => Ok(FlowOrder::Recent),
            "latency" => Ok(FlowOrder::Latency),
            "worst" => Ok(FlowOrder::Worst),
            "packets" => Ok(FlowOrder::Packets),
            "hops" => Ok(FlowOrder::Hops),
            _ => Err(format!(
                "order {s:?}: expected recent, latency, worst, packets or hops"
            )),
        }
    }
}

/// A flow the sink knew: its latest summary and, with the paths store, its path.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FlowInfo {
    #[serde(flatten)]
    pub summary: FlowSummary,
    /// Node ids from the INT source; `None` without the paths store or when it has no answer.
    pub path: Option<Vec<u32>>,
}

/// "Which flows, which are the worst": the flows the sink summarised (newest first, each
/// once), kept by `filter` and ranked by `order`, at most `max`; with the paths store, each
/// with its path. The work is bounded by [`MAX_FLOW_SCAN`] summaries and as many path reads;
/// the page says whether they were all the summaries held.
pub fn flows(
    events: &Region,
    paths: Option<&Region>,
    list_base: u32,
    filter: &FlowFilter,
    order: FlowOrder,
    max: usize,
) -> Result<FlowPage, QueryError> {
    if filter.node.is_some() && paths.is_none() {
        return Err(QueryError::Store(
            events.header().name.clone(),
            "a switch filter needs the paths store".into(),
        ));
    }
    let addr = |k: &[u8; FLOW_KEY_LEN], at: usize| -> std::net::IpAddr {
        std::net::Ipv4Addr::new(k[at], k[at + 1], k[at + 2], k[at + 3]).into()
    };
    let mut out = vec![];
    let keep = match order {
        FlowOrder::Worst => scan::Keep::Worst,
        _ => scan::Keep::Newest,
    };
    let (summaries, complete, covered_from_ns) =
        scan::summaries(events, list_base, filter.since_ns, filter.flow, keep)?;
    for s in summaries {
        let k = &s.flow;
        if filter
            .prefix
            .is_some_and(|p| !p.contains(addr(k, 0)) && !p.contains(addr(k, 4)))
        {
            continue;
        }
        let (sport, dport) = (
            u16::from_be_bytes([k[8], k[9]]),
            u16::from_be_bytes([k[10], k[11]]),
        );
        if filter.port.is_some_and(|p| p != sport && p != dport) {
            continue;
        }
        let path = match paths {
            Some(r) => {
                let p = path(r, k, None)?;
                (p.status == "found").then_some(p.path)
            }
            None => None,
        };
        if let Some(n) = filter.node {
            if !path.as_ref().is_some_and(|p| p.contains(&n)) {
                continue;
            }
        }
        out.push(FlowInfo { summary: s, path });
    }
    match order {
        FlowOrder::Recent => {}
        FlowOrder::Latency | FlowOrder::Worst => {
            out.sort_by_key(|f| std::cmp::Reverse(f.summary.path_latency))
        }
        FlowOrder::Packets => out.sort_by_key(|f| std::cmp::Reverse(f.summary.packets)),
        FlowOrder::Hops => out.sort_by_key(|f| std::cmp::Reverse(f.summary.hops)),
    }
    let more = out.len().saturating_sub(max);
    out.truncate(max);
    Ok(FlowPage {
        flows: out,
        complete,
        covered_from_ns,
        more,
    })
}

/// The bucket estimate ([`Buckets::estimate`]) of quantile `q` of the buckets `counts` (in
/// bucket order) totalling `total`; `None` without samples.
fn quantile(buckets: &Buckets, counts: &[(usize, u64)], total: u64, q: f64) -> Option<u64> {
    if total == 0 {
        return None;
    }
    let want = (total as f64 * q).ceil().max(1.0) as u64;
    let mut seen = 0;
    for &(b, n) in counts {
        seen += n;
        if seen >= want {
            return Some(buckets.estimate(b));
        }
    }
    counts.last().map(|&(b, _)| buckets.estimate(b))
}

/// A histogram's quantiles: each the estimate of the bucket that holds it, within the
/// answer's `relative_error` of the true quantile; `max` the highest sample's.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Quantiles {
    pub p50: Option<u64>,
    pub p90: Option<u64>,
    pub p99: Option<u64>,
    pub max: Option<u64>,
}

/// The count of histogram key `key` over `windows` of a histogram store of layout `l`, keyed as
/// the store keys it: a long tier's keys end in [`crate::layout::LONG_TIER`], a per-port
/// store's name `port` (its markers [`crate::layout::MARKER_PORT`]: `port` `None`).
fn hist_count(
    hist: &Region,
    l: &KeyIncrementLayout,
    key: &[u8; crate::layout::HIST_KEY_LEN],
    port: Option<u16>,
    redundancy: Option<u8>,
    windows: &[WindowSpan],
) -> Result<u64, dta_store::QueryError> {
    use crate::layout::{long_tier_key, port_key, LONG_TIER_KEY_LEN, MARKER_PORT, PORT_KEY_LEN};
    match l.key_len() {
        LONG_TIER_KEY_LEN => l.query_spans(hist.mem(), &long_tier_key(key), redundancy, windows),
        PORT_KEY_LEN => {
            let k = port_key(key, port.unwrap_or(MARKER_PORT));
            l.query_spans(hist.mem(), &k, redundancy, windows)
        }
        _ => l.query_spans(hist.mem(), key, redundancy, windows),
    }
}

/// The histogram store that holds the time `window` asks for: `hist`, unless the window asks
/// for the last longer than all of `hist`'s windows together and the long tier `long` holds
/// more. The answer's windows then say which were read.
pub fn tier_for<'a>(
    hist: &'a Region,
    long: Option<&'a Region>,
    window: Option<WindowSel>,
) -> &'a Region {
    let held = |r: &Region| {
        KeyIncrementLayout::new(r.header())
            .ok()
            .and_then(|l| l.windows())
            .map(|(n, ms)| u64::from(n).saturating_mul(ms))
    };
    match (window, long) {
        (Some(WindowSel::Last(ms)), Some(long)) => match (held(hist), held(long)) {
            (Some(fine), Some(coarse)) if ms > fine && coarse > fine => long,
            _ => hist,
        },
        _ => hist,
    }
}

/// What an answer says of `n` uncertain samples (in `of`).
pub(crate) fn uncertain_note(n: u64, of: &str) -> String {
    format!(
        "{n} samples of {of} are uncertain: the store's counters are shared by too many keys \
         (give it more counters; docs/int-sink.md, \"Histograms\")"
    )
}

/// The bucketing the sink recorded in the windows `window` selects of a histogram store
/// ([`Buckets::detect`]); `None` when nothing was written there.
pub fn recorded_buckets(
    hist: &Region,
    window: Option<WindowSel>,
    now_ms: u64,
) -> Result<Option<Buckets>, QueryError> {
    expect(hist, StoreKind::KeyIncrement, "key-increment")?;
    let l = KeyIncrementLayout::new(hist.header()).map_err(|e| layout_err(hist, e))?;
    let windows = l
        .select_windows(hist.mem(), default_window(&l, window), now_ms)
        .map_err(|e| layout_err(hist, e))?;
    recorded_in(hist, &l, &windows)
}

/// The bucketing the sink recorded in `windows` of histogram store `hist` (of layout `l`).
pub(crate) fn recorded_in(
    hist: &Region,
    l: &KeyIncrementLayout,
    windows: &[WindowSpan],
) -> Result<Option<Buckets>, QueryError> {
    Buckets::detect(|k| hist_count(hist, l, k, None, None, windows).map_err(|e| e.to_string()))
        .map_err(|e| QueryError::Store(hist.header().name.clone(), e))
}

/// What an answer over windows that hold no histogram says: when the newest window held that
/// has one ended (Unix milliseconds), or that none has.
pub(crate) fn empty_note(
    hist: &Region,
    l: &KeyIncrementLayout,
    now_ms: u64,
) -> Result<String, QueryError> {
    let asked = "no histogram was written in the windows asked";
    if l.windows().is_none() {
        return Ok(format!("{asked} (none since the store was created)"));
    }
    let held = l
        .select_windows(hist.mem(), WindowSel::All, now_ms)
        .map_err(|e| layout_err(hist, e))?;
    for w in held.iter().rev() {
        // Configured edges (an error here) were written too.
        if !matches!(recorded_in(hist, l, std::slice::from_ref(w)), Ok(None)) {
            return Ok(if w.open {
                format!(
                    "{asked}; the current window, open since {} (Unix ms), has one",
                    w.start_ms
                )
            } else {
                format!(
                    "{asked}; the newest window with one ended at {} (Unix ms), {} s before now",
                    w.end_ms,
                    now_ms.saturating_sub(w.end_ms) / 1000
                )
            });
        }
    }
    Ok(format!("{asked}, nor in any window the store holds"))
}

/// A histogram query's windows: the one asked, else the current window of a windowed store,
/// all of a cumulative one.
fn default_window(l: &KeyIncrementLayout, window: Option<WindowSel>) -> WindowSel {
    window.unwrap_or(if l.windows().is_some() {
        WindowSel::Current
    } else {
        WindowSel::All
    })
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Bucket {
    pub lo: u64,
    /// Exclusive; `None` = unbounded.
    pub hi: Option<u64>,
    pub count: u64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct HistogramResult {
    pub node_id: u32,
    /// The egress port, for a per-port histogram.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    pub metric: Metric,
    /// The bucketing read: as asked, else as the sink recorded it in the windows read
    /// (`None`: nothing recorded there, and no buckets).
    pub histogram: Option<Buckets>,
    /// The bound on the relative error of `quantiles` (each bucket's midpoint against every
    /// value the bucket holds); `None` for configured edges.
    pub relative_error: Option<f64>,
    pub quantiles: Quantiles,
    /// Every bucket of log2 and configured edges; the buckets that hold samples of log-linear
    /// ones (there are up to 3 200).
    pub buckets: Vec<Bucket>,
    pub total: u64,
    /// Samples whose bucket is uncertain: a power of two's buckets do not add up to it, as
    /// when the store's counters are shared by too many keys (`note` says so); 0 otherwise.
    pub uncertain: u64,
    /// The time windows counted (oldest first); empty for a store that keeps one cumulative
    /// table (since it was created).
    pub windows: Vec<WindowSpan>,
    /// Whether the windows cover all the time asked (a `last:` longer than the store keeps is
    /// cut, and `note` says so).
    #[serde(flatten)]
    pub coverage: dta_store::Coverage,
}

/// "Histogram of a metric at switch S": every bucket's Key-Increment counter ([DTA A.4],
/// Count-Min: never below the true count; exact when no key collides on all its counters), in
/// the store's current window when it keeps windows, else since it was created
/// ([`histogram_in`] names the windows).
pub fn histogram(
    region: &Region,
    node_id: u32,
    metric: Metric,
    buckets: Option<&Buckets>,
    redundancy: Option<u8>,
) -> Result<HistogramResult, QueryError> {
    histogram_in(
        region,
        node_id,
        metric,
        buckets,
        redundancy,
        None,
        unix_ms(),
    )
}

/// [`histogram`] over the windows `window` names (`None`: the current one of a windowed
/// store, the whole of a cumulative one), as of `now_ms` (Unix milliseconds), bucketed as
/// `buckets` says or, when `None`, as the sink recorded it there ([`recorded_buckets`]); the
/// answer lists the windows it covers, names the bucketing, and gives the quantiles with the
/// bound on their relative error.
pub fn histogram_in(
    region: &Region,
    node_id: u32,
    metric: Metric,
    buckets: Option<&Buckets>,
    redundancy: Option<u8>,
    window: Option<WindowSel>,
    now_ms: u64,
) -> Result<HistogramResult, QueryError> {
    histogram_at(
        region, node_id, None, metric, buckets, redundancy, window, now_ms,
    )
}

/// [`histogram_in`] of switch `node_id`'s egress port `port` from a per-port histogram store
/// ([`crate::layout::PORT_KEY_LEN`]), or of the switch (`None`) from any other.
#[allow(clippy::too_many_arguments)]
pub fn histogram_at(
    region: &Region,
    node_id: u32,
    port: Option<u16>,
    metric: Metric,
    buckets: Option<&Buckets>,
    redundancy: Option<u8>,
    window: Option<WindowSel>,
    now_ms: u64,
) -> Result<HistogramResult, QueryError> {
    expect(region, StoreKind::KeyIncrement, "key-increment")?;
    let l = KeyIncrementLayout::new(region.header()).map_err(|e| layout_err(region, e))?;
    let name = || region.header().name.clone();
    match (l.key_len() == crate::layout::PORT_KEY_LEN, port) {
        (true, None) => {
            return Err(QueryError::Store(
                name(),
                "it keeps histograms per port: name the port".into(),
            ))
        }
        (false, Some(_)) => {
            return Err(QueryError::Store(
                name(),
                format!(
                    "it keeps no per-port histograms (a Key-Increment store of {}-byte keys \
                     does, where the hops report their ports)",
                    crate::layout::PORT_KEY_LEN
                ),
            ))
        }
        (true, Some(crate::layout::MARKER_PORT)) => {
            return Err(QueryError::Store(
                name(),
                format!(
                    "port {} is the store's marker, not a port",
                    crate::layout::MARKER_PORT
                ),
            ))
        }
        _ => {}
    }
    let sel = default_window(&l, window);
    let windows = l
        .select_windows(region.mem(), sel, now_ms)
        .map_err(|e| layout_err(region, e))?;
    let scheme = match buckets {
        Some(b) => Some(b.clone()),
        None => recorded_in(region, &l, &windows)?,
    };
    let mut coverage = l.coverage(sel, now_ms);
    let Some(scheme) = scheme else {
        let said = empty_note(region, &l, now_ms)?;
        coverage.note.get_or_insert(said);
        return Ok(HistogramResult {
            node_id,
            port,
            metric,
            histogram: None,
            relative_error: None,
            quantiles: Quantiles::default(),
            buckets: vec![],
            total: 0,
            uncertain: 0,
            windows,
            coverage,
        });
    };
    let read = |key: &[u8; crate::layout::HIST_KEY_LEN]| {
        hist_count(region, &l, key, port, redundancy, &windows).map_err(|e| layout_err(region, e))
    };
    let sparse = matches!(scheme, Buckets::LogLinear { .. });
    let mut counts = Vec::new();
    let mut out = Vec::new();
    let mut uncertain = 0u64;
    if sparse {
        // The powers of two first (their log2 keys), then the log-linear buckets of those that
        // hold samples ([`Buckets::octave`]); a power of two whose buckets do not add up to it
        // was answered with another key's counts somewhere (all of a key's counters shared).
        for o in 0..=32u8 {
            let whole = read(&crate::layout::hist_key(node_id, metric, o))?;
            if whole == 0 {
                continue;
            }
            let mut sum = 0u64;
            for b in scheme.in_octave(o) {
                let count = read(&scheme.key(node_id, metric, b as u16))?;
                if count > 0 {
                    sum += count;
                    counts.push((b, count));
                    let (lo, hi) = scheme.range(b);
                    out.push(Bucket { lo, hi, count });
                }
            }
            uncertain += sum.abs_diff(whole);
        }
        if uncertain > 0 {
            coverage.note = Some(uncertain_note(uncertain, "this histogram"));
        }
    } else {
        for b in 0..scheme.count() {
            let count = read(&scheme.key(node_id, metric, b as u16))?;
            if count > 0 {
                counts.push((b, count));
            }
            let (lo, hi) = scheme.range(b);
            out.push(Bucket { lo, hi, count });
        }
    }
    let total = counts.iter().map(|&(_, n)| n).sum();
    let q = |p| quantile(&scheme, &counts, total, p);
    Ok(HistogramResult {
        node_id,
        port,
        metric,
        relative_error: scheme.relative_error(),
        quantiles: Quantiles {
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            max: counts.last().map(|&(b, _)| scheme.estimate(b)),
        },
        histogram: Some(scheme),
        total,
        uncertain,
        buckets: out,
        windows,
        coverage,
    })
}
