//! Queries over regions, with answers that serialise to JSON (the CLI's `--json`, the HTTP API)
//! and print for humans. Every query reads the region directly: the collector's CPU does no work
//! per report, only per query.

use std::net::Ipv4Addr;

use serde::Serialize;

use dta_store::{
    AppendLayout, AppendRecord, Header, KeyIncrementLayout, KeyWriteAnswer, KeyWriteLayout,
    ListReader, PostcardAnswer, PostcardingLayout, Region, SketchKind, SketchLayout, SketchSpec,
    SketchSync, StoreKind, StoreSpec, ValueTable,
};

#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    #[error("store {store:?} is a {found:?} store, not a {expected:?} store")]
    WrongKind {
        store: String,
        expected: StoreKind,
        found: StoreKind,
    },
    #[error("bad key {input:?}: {msg}")]
    BadKey { input: String, msg: String },
    #[error("{0}")]
    Store(String),
    /// The request cannot be answered (bad N, key length, value set): the caller's error.
    #[error(transparent)]
    Invalid(#[from] dta_store::QueryError),
    /// A Sketch-Merge answer would read columns no merge has written yet.
    #[error("{0}")]
    NotMerged(String),
}

fn expect_kind(region: &Region, expected: StoreKind) -> Result<(), QueryError> {
    let h = region.header();
    if h.kind != expected {
        return Err(QueryError::WrongKind {
            store: h.name.clone(),
            expected,
            found: h.kind,
        });
    }
    Ok(())
}

fn store_err(e: impl std::fmt::Display) -> QueryError {
    QueryError::Store(e.to_string())
}

/// The length of a store's keys, for stores that have keys.
pub fn key_len(h: &Header) -> Option<usize> {
    match &h.spec {
        StoreSpec::KeyWrite(s) => Some(s.key_len as usize),
        StoreSpec::KeyIncrement(s) => Some(s.key_len as usize),
        StoreSpec::Postcarding(s) => Some(s.key_len as usize),
        StoreSpec::Append(_) | StoreSpec::SketchMerge(_) => None,
    }
}

/// Parse a key given on a command line or in a URL, for a store whose keys are `key_len` bytes:
/// `0x` + hex (exactly `key_len` bytes); a decimal integer (big-endian, as the wire carries it,
/// for 1-8 byte keys); a dotted IPv4 address (4-byte keys); or a flow 5-tuple
/// `SRC_IP:SPORT-DST_IP:DPORT/PROTO` (13-byte keys: src ip, dst ip, src port, dst port, proto).
/// With `key_len = None` (sketch keys, any length) a decimal integer is 4 bytes if it fits in
/// a u32, else 8.
pub fn parse_key(input: &str, key_len: Option<usize>) -> Result<Vec<u8>, QueryError> {
    let bad = |msg: String| QueryError::BadKey {
        input: input.to_owned(),
        msg,
    };
    let s = input.trim();
    let key = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        hex::decode(h).map_err(|e| bad(format!("not hex: {e}")))?
    } else if let Ok(n) = s.parse::<u64>() {
        let key_len = key_len.unwrap_or(if n <= u32::MAX as u64 { 4 } else { 8 });
        if key_len > 8 {
            return Err(bad(format!(
                "a decimal key fits 1-8 byte keys; this store's keys are {key_len} bytes: use 0x..."
            )));
        }
        if key_len < 8 && n >> (8 * key_len) != 0 {
            return Err(bad(format!("{n} does not fit in {key_len} bytes")));
        }
        n.to_be_bytes()[8 - key_len..].to_vec()
    } else if let Ok(ip) = s.parse::<Ipv4Addr>() {
        ip.octets().to_vec()
    } else if let Some(k) = parse_five_tuple(s) {
        k.to_vec()
    } else {
        return Err(bad(
            "expected 0xHEX, a decimal integer, an IPv4 address or SRC:SPORT-DST:DPORT/PROTO"
                .into(),
        ));
    };
    match key_len {
        Some(n) if key.len() != n => {
            return Err(bad(format!(
                "{} bytes, but this store's keys are {n} bytes",
                key.len()
            )))
        }
        _ if key.is_empty() || key.len() > 16 => {
            return Err(bad(format!("{} bytes: keys are 1-16 bytes", key.len())))
        }
        _ => {}
    }
    Ok(key)
}

/// `10.0.0.1:1234-10.0.0.2:80/6` → 13 bytes.
pub fn parse_five_tuple(s: &str) -> Option<[u8; 13]> {
    let (addrs, proto) = s.split_once('/')?;
    let (src, dst) = addrs.split_once('-')?;
    let (sip, sport) = src.split_once(':')?;
    let (dip, dport) = dst.split_once(':')?;
    let mut k = [0u8; 13];
    k[0..4].copy_from_slice(&sip.parse::<Ipv4Addr>().ok()?.octets());
    k[4..8].copy_from_slice(&dip.parse::<Ipv4Addr>().ok()?.octets());
    k[8..10].copy_from_slice(&sport.parse::<u16>().ok()?.to_be_bytes());
    k[10..12].copy_from_slice(&dport.parse::<u16>().ok()?.to_be_bytes());
    k[12] = proto.parse::<u8>().ok()?;
    Some(k)
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct KeyWriteResult {
    pub store: String,
    pub key: String,
    /// "found", "empty" or "ambiguous".
    pub status: &'static str,
    pub data: Option<String>,
    pub votes: u8,
    pub candidates: Vec<(String, u8)>,
    /// The N the query read (the store's, from its header, unless asked for fewer).
    pub redundancy: u8,
    /// How sure the answer is: `p_wrong` for a `found`, `p_overwritten` for an `empty`, from the
    /// store's load (`docs/regions.md` §5).
    pub confidence: dta_store::Confidence,
}

/// Key-Write query ([DTA A.1] Algorithm 2): plurality vote over `redundancy` slots (`None`: the
/// store's N from its header), at least `threshold` agreeing copies. An N outside 1..=store N or
/// a key of the wrong length is [`QueryError::Invalid`].
pub fn key_write(
    region: &Region,
    key: &[u8],
    redundancy: Option<u8>,
    threshold: u8,
) -> Result<KeyWriteResult, QueryError> {
    expect_kind(region, StoreKind::KeyWrite)?;
    let layout = KeyWriteLayout::new(region.header()).map_err(store_err)?;
    let mut r = KeyWriteResult {
        store: region.header().name.clone(),
        key: hex::encode(key),
        status: "empty",
        data: None,
        votes: 0,
        candidates: vec![],
        redundancy: redundancy.unwrap_or(layout.redundancy()),
        confidence: layout.confidence(region.mem(), redundancy),
    };
    match layout.query(region.mem(), key, redundancy, threshold)? {
        KeyWriteAnswer::Found { data, votes } => {
            r.status = "found";
            r.data = Some(hex::encode(data));
            r.votes = votes;
        }
        KeyWriteAnswer::Empty => {}
        KeyWriteAnswer::Ambiguous { candidates } => {
            r.status = "ambiguous";
            r.candidates = candidates
                .into_iter()
                .map(|(d, v)| (hex::encode(d), v))
                .collect();
        }
    }
    Ok(r)
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct KeyIncrementResult {
    pub store: String,
    pub key: String,
    /// Count-Min estimate: never below the true count ([DTA §4] "Key-Increment", A.4).
    pub count: u64,
    /// The N the query read (the store's, from its header, unless asked for fewer).
    pub redundancy: u8,
    /// The count-min error bound: `count` exceeds the true count by at most `bound.error` with
    /// probability at least `1 − bound.delta` (`docs/regions.md` §5).
    pub bound: dta_store::CountBound,
    /// A store kept in time windows (`docs/regions.md` §2.2): the windows the count covers,
    /// oldest first. Absent for a cumulative store.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub windows: Option<Vec<dta_store::key_increment::WindowSpan>>,
    /// Whether the windows cover all the time asked (a `last:` longer than the store keeps is
    /// cut, and `note` says so).
    #[serde(flatten)]
    pub coverage: dta_store::Coverage,
}

/// Key-Increment query ([DTA A.4] Algorithm 6): the minimum of the key's `redundancy` counters
/// (`None`: the store's N); of a windowed store, in its current window. An N outside 1..=store N
/// or a key of the wrong length is [`QueryError::Invalid`], never a 0.
pub fn key_increment(
    region: &Region,
    key: &[u8],
    redundancy: Option<u8>,
) -> Result<KeyIncrementResult, QueryError> {
    key_increment_in(region, key, redundancy, None)
}

/// [`key_increment`] over the windows `window` selects (`None`: the current window of a windowed
/// store, the one table of a cumulative store): the sum of each window's minimum. A window a
/// cumulative store cannot answer (anything but `all`) is an error with the reason.
pub fn key_increment_in(
    region: &Region,
    key: &[u8],
    redundancy: Option<u8>,
    window: Option<dta_store::WindowSel>,
) -> Result<KeyIncrementResult, QueryError> {
    use dta_store::WindowSel;
    expect_kind(region, StoreKind::KeyIncrement)?;
    let layout = KeyIncrementLayout::new(region.header()).map_err(store_err)?;
    let windowed = layout.windows().is_some();
    let sel = window.unwrap_or(if windowed {
        WindowSel::Current
    } else {
        WindowSel::All
    });
    let now = dta_store::key_increment::unix_ms();
    let (count, spans) = layout.query_windows(region.mem(), key, redundancy, sel, now)?;
    Ok(KeyIncrementResult {
        store: region.header().name.clone(),
        key: hex::encode(key),
        count,
        redundancy: redundancy.unwrap_or(layout.redundancy()),
        bound: layout.bound(region.mem()),
        windows: windowed.then_some(spans),
        coverage: layout.coverage(sel, now),
    })
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PostcardResult {
    pub store: String,
    pub key: String,
    /// "found", "empty" or "ambiguous".
    pub status: &'static str,
    /// The per-hop values, hop 0 first.
    pub path: Vec<u32>,
    /// How sure the answer is: `p_wrong` for a `found`, `p_overwritten` for an `empty`, from the
    /// store's load and the value set (`docs/regions.md` §5).
    pub confidence: dta_store::Confidence,
}

/// Postcarding query ([DTA §4]): decode the N chunks with the lookup table of V = 0..`values`
/// (at most [`dta_store::postcard::MAX_VALUES`], else [`QueryError::Invalid`]).
pub fn postcard(region: &Region, key: &[u8], values: u32) -> Result<PostcardResult, QueryError> {
    expect_kind(region, StoreKind::Postcarding)?;
    let layout = PostcardingLayout::new(region.header()).map_err(store_err)?;
    let table = ValueTable::range(&layout, values)?;
    postcard_with(region, &layout, &table, key)
}

/// As [`postcard`], with a prebuilt lookup table (for many queries).
pub fn postcard_with(
    region: &Region,
    layout: &PostcardingLayout,
    table: &ValueTable,
    key: &[u8],
) -> Result<PostcardResult, QueryError> {
    let (status, path) = match layout.query(region.mem(), key, table)? {
        PostcardAnswer::Found(p) => ("found", p),
        PostcardAnswer::Empty => ("empty", vec![]),
        PostcardAnswer::Ambiguous => ("ambiguous", vec![]),
    };
    Ok(PostcardResult {
        store: region.header().name.clone(),
        key: hex::encode(key),
        status,
        path,
        confidence: layout.confidence(region.mem(), table),
    })
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ListResult {
    pub store: String,
    pub list: u32,
    /// Entries read, oldest first, hex.
    pub entries: Vec<String>,
    /// The store's record layout (`raw`, `int-event`: region header byte 97).
    pub record: &'static str,
    /// With a record layout, each entry decoded (`null`: it does not decode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decoded: Option<Vec<serde_json::Value>>,
    /// Entries overwritten before they could be read (the writer lapped the reader).
    pub missed: u64,
    /// Where to resume: pass it back as `tail`.
    pub next_tail: u64,
    /// Entries follow `next_tail`: `max` was reached.
    pub more: bool,
    /// Whether the entries are all that was asked (none overwritten, none left), and why not.
    #[serde(flatten)]
    pub coverage: dta_store::Coverage,
}

/// Decodes an Append entry (its bytes and its index in its list) by its store's record layout
/// (`None`: it is not one, shown raw). The layouts belong to the crates that write them (the
/// INT sink's events: `dta_int::events::decode_record`); the caller passes the decoder, since
/// this crate sits below them.
pub type RecordDecoder = fn(AppendRecord, &[u8], u64) -> Option<serde_json::Value>;

/// The decoder of a reader that knows no layout but raw.
pub fn raw_records(_: AppendRecord, _: &[u8], _: u64) -> Option<serde_json::Value> {
    None
}

/// Read up to `max` entries of `list` from absolute index `tail` ([DTA A.3], Algorithm 4).
/// `tail = None` starts at the oldest entry still held. With a record layout in the store's
/// header, each entry decoded by `decode` too (`null` where it does not decode).
pub fn list(
    region: &Region,
    list: u32,
    tail: Option<u64>,
    max: usize,
    decode: RecordDecoder,
) -> Result<ListResult, QueryError> {
    expect_kind(region, StoreKind::Append)?;
    let layout = AppendLayout::new(region.header()).map_err(store_err)?;
    let entry_len = layout.entry_len();
    let reader = ListReader::new(layout.clone(), list, 0, 1).map_err(store_err)?;
    let head = region
        .mem()
        .load_u64(layout.head_offset(list))
        .map_err(store_err)?;
    let start = tail.unwrap_or_else(|| head.saturating_sub(layout.capacity()));
    let mut reader = reader.with_tail(start);
    let mut buf = Vec::with_capacity(max.min(1 << 16) * entry_len);
    let first = reader.tail();
    let polled = reader.poll(region.mem(), max, &mut buf);
    let first = first + polled.missed;
    let record = region.header().append_record();
    let decoded = (!record.is_raw()).then(|| {
        buf.chunks(entry_len)
            .enumerate()
            .map(|(i, e)| decode(record, e, first + i as u64).unwrap_or_default())
            .collect()
    });
    let more = reader.tail() < head;
    let mut why = vec![];
    if polled.missed > 0 {
        why.push(format!(
            "{} entries were overwritten before they could be read (the writer lapped this \
             tail; the list keeps {})",
            polled.missed,
            layout.capacity()
        ));
    }
    if more {
        why.push(format!(
            "max {max} reached: {} more entries follow (pass next_tail back as tail)",
            head - reader.tail()
        ));
    }
    Ok(ListResult {
        store: region.header().name.clone(),
        list,
        entries: buf.chunks(entry_len).map(hex::encode).collect(),
        record: record.name(),
        decoded,
        missed: polled.missed,
        next_tail: reader.tail(),
        more,
        coverage: dta_store::Coverage {
            complete: why.is_empty(),
            note: (!why.is_empty()).then(|| why.join("; ")),
        },
    })
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SketchResult {
    pub store: String,
    pub sketch_id: u16,
    /// "count-min" or "hyperloglog".
    pub sketch: &'static str,
    /// Count-Min: the key's estimated count.
    pub estimate: Option<u64>,
    /// HyperLogLog: the estimated number of distinct keys.
    pub cardinality: Option<f64>,
}

/// When the translator writes a Sketch-Merge column, for a not-merged answer's message.
fn when_written(spec: &SketchSpec) -> String {
    match spec.sync {
        SketchSync::InOrder => format!(
            "the translator writes a column once all {} reporters of sketch {} have sent it",
            spec.reporters, spec.sketch_id
        ),
        SketchSync::Approsync => format!(
            "sketch {} is synced with ApproSync: a column is written when a reporter first \
             sends it, and no reporter has sent it yet",
            spec.sketch_id
        ),
    }
}

/// Sketch-Merge query: a key's count estimate (Count-Min) or the cardinality (HyperLogLog).
pub fn sketch(region: &Region, key: Option<&[u8]>) -> Result<SketchResult, QueryError> {
    expect_kind(region, StoreKind::SketchMerge)?;
    let layout = SketchLayout::new(region.header()).map_err(store_err)?;
    let StoreSpec::SketchMerge(spec) = &region.header().spec else {
        return Err(QueryError::Store("header kind and spec disagree".into()));
    };
    let mut r = SketchResult {
        store: region.header().name.clone(),
        sketch_id: spec.sketch_id,
        sketch: "count-min",
        estimate: None,
        cardinality: None,
    };
    match spec.kind {
        SketchKind::CountMin { .. } => {
            let key = key.ok_or_else(|| QueryError::BadKey {
                input: String::new(),
                msg: "a Count-Min query needs a key (`key`, `--key`)".into(),
            })?;
            if !layout.cm_key_merged(region.mem(), key) {
                return Err(QueryError::NotMerged(format!(
                    "sketch {:?}: a column this key reads has not been merged yet ({})",
                    r.store,
                    when_written(spec)
                )));
            }
            r.estimate = Some(layout.cm_estimate(region.mem(), key));
        }
        SketchKind::HyperLogLog { .. } => {
            r.sketch = "hyperloglog";
            if layout.merged_columns(region.mem()) == 0 {
                return Err(QueryError::NotMerged(format!(
                    "sketch {:?}: no column has been merged yet ({})",
                    r.store,
                    when_written(spec)
                )));
            }
            r.cardinality = Some(layout.hll_cardinality(region.mem()));
        }
    }
    Ok(r)
}

/// A region's header and how full its data area is.
#[derive(Debug, Clone, Serialize)]
pub struct Inspection {
    pub path: String,
    pub header: serde_json::Value,
    pub data_bytes: u64,
    /// Fraction of the data area's 8-byte words that are non-zero.
    pub fill: f64,
    /// Words examined to compute `fill` (all of them, or an even sample of large regions).
    pub sampled_words: u64,
    pub huge_pages: bool,
    /// The pages the data area is on and, on 4 KiB pages, why ([`dta_store::Pages`]).
    pub pages: String,
    /// Append stores: total entries appended over all lists.
    pub appended: Option<u64>,
}

pub fn inspect(region: &Region, path: &str) -> Result<Inspection, QueryError> {
    let h = region.header();
    let mem = region.mem();
    let words = mem.len() / 8;
    let sample = words.clamp(1, 1 << 20);
    let stride = (words / sample).max(1);
    let mut nonzero = 0u64;
    let mut seen = 0u64;
    let mut w = 0;
    while w < words {
        if mem.load_u64(w * 8).map_err(store_err)? != 0 {
            nonzero += 1;
        }
        seen += 1;
        w += stride;
    }
    let appended = if h.kind == StoreKind::Append {
        let layout = AppendLayout::new(h).map_err(store_err)?;
        let mut total = 0u64;
        for l in 0..layout.lists() {
            total += mem.load_u64(layout.head_offset(l)).map_err(store_err)?;
        }
        Some(total)
    } else {
        None
    };
    Ok(Inspection {
        path: path.to_owned(),
        header: serde_json::json!({
            "name": h.name,
            "kind": h.kind.name(),
            "spec": h.spec,
            "data_len": mem.len(),
        }),
        data_bytes: mem.len(),
        fill: if seen == 0 {
            0.0
        } else {
            nonzero as f64 / seen as f64
        },
        sampled_words: seen,
        huge_pages: region.huge_pages(),
        pages: region.pages().to_string(),
        appended,
    })
}
