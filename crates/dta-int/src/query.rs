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

use crate::events::{flow_string, Event, EventKind};
use crate::layout::{decode_path, hist_key, Buckets, Metric, FLOW_KEY_LEN};

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum QueryError {
    #[error("store {0:?} is not a {1} store")]
    WrongKind(String, &'static str),
    #[error("store {0:?}: {1}")]
    Store(String, String),
    #[error("bad flow {0:?}: expected SRC:SPORT-DST:DPORT/PROTO")]
    BadFlow(String),
}

fn layout_err(r: &Region, e: impl std::fmt::Display) -> QueryError {
    QueryError::Store(r.header().name.clone(), e.to_string())
}

fn expect(r: &Region, kind: StoreKind, name: &'static str) -> Result<(), QueryError> {
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
    let list = list_base + kind as u32 - 1;
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

/// Most events one [`recent_events`] answer holds.
pub const MAX_EVENTS: usize = 4096;

/// Which events [`recent_events`] keeps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventFilter {
    /// These kinds (empty: every kind).
    pub kinds: Vec<EventKind>,
    /// At this switch.
    pub node: Option<u32>,
    /// Of this flow.
    pub flow: Option<[u8; FLOW_KEY_LEN]>,
    /// At or after this time (Unix nanoseconds, the sink's clock).
    pub since_ns: Option<u64>,
}

/// "What happened recently": the newest events of the filter's kinds (every kind by default),
/// up to `max` (at most [`MAX_EVENTS`]) read from the end of each kind's list, kept by the
/// filter, newest first. Each kind's list is read back at most `max` entries, so the work is
/// bounded whatever the filter.
pub fn recent_events(
    region: &Region,
    list_base: u32,
    filter: &EventFilter,
    max: usize,
) -> Result<Vec<Event>, QueryError> {
    let max = max.min(MAX_EVENTS);
    let kinds: &[EventKind] = if filter.kinds.is_empty() {
        &EventKind::ALL
    } else {
        &filter.kinds
    };
    let mut all = vec![];
    for &k in kinds {
        all.extend(events(region, list_base, k, max)?.into_iter().filter(|e| {
            filter.node.is_none_or(|n| e.node_id == n)
                && filter.flow.is_none_or(|f| e.flow == f)
                && filter.since_ns.is_none_or(|t| e.time_ns >= t)
        }));
    }
    all.sort_by(|a, b| b.time_ns.cmp(&a.time_ns).then(b.seq.cmp(&a.seq)));
    all.truncate(max);
    Ok(all)
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
    pub metric: Metric,
    pub buckets: Vec<Bucket>,
    pub total: u64,
    /// The time windows counted (oldest first); empty for a store that keeps one cumulative
    /// table (since it was created).
    pub windows: Vec<WindowSpan>,
}

/// "Histogram of a metric at switch S": every bucket's Key-Increment counter ([DTA A.4],
/// Count-Min: never below the true count; exact when no key collides on all its counters), in
/// the store's current window when it keeps windows, else since it was created
/// ([`histogram_in`] names the windows).
pub fn histogram(
    region: &Region,
    node_id: u32,
    metric: Metric,
    buckets: &Buckets,
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
/// store, the whole of a cumulative one), as of `now_ms` (Unix milliseconds); the answer
/// lists the windows it covers.
pub fn histogram_in(
    region: &Region,
    node_id: u32,
    metric: Metric,
    buckets: &Buckets,
    redundancy: Option<u8>,
    window: Option<WindowSel>,
    now_ms: u64,
) -> Result<HistogramResult, QueryError> {
    expect(region, StoreKind::KeyIncrement, "key-increment")?;
    let l = KeyIncrementLayout::new(region.header()).map_err(|e| layout_err(region, e))?;
    let sel = window.unwrap_or(if l.windows().is_some() {
        WindowSel::Current
    } else {
        WindowSel::All
    });
    let windows = l
        .select_windows(region.mem(), sel, now_ms)
        .map_err(|e| layout_err(region, e))?;
    let mut out = Vec::with_capacity(buckets.count());
    for b in 0..buckets.count() {
        let (lo, hi) = buckets.range(b);
        let count = l
            .query_spans(
                region.mem(),
                &hist_key(node_id, metric, b as u8),
                redundancy,
                &windows,
            )
            .map_err(|e| layout_err(region, e))?;
        out.push(Bucket { lo, hi, count });
    }
    Ok(HistogramResult {
        node_id,
        metric,
        total: out.iter().map(|b| b.count).sum(),
        buckets: out,
        windows,
    })
}
