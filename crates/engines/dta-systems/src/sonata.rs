//! Sonata ([DTA Table 2]: "Reporting fixed-size network query results using queryID keys" on
//! Key-Write, and "Appending query-specific packet tuples from switches to lists at streaming
//! processors" on Append). The switch runs the data-plane part of each [`Query`] per window of
//! [`Params::window_ns`]: at each window's end it writes the query's fixed-size result (8 bytes)
//! under the key `(query id, window)` ([`STORE_RESULTS`]); and for the queries whose last step
//! runs at the stream processor it appends each packet passing the query's filter, as a raw
//! tuple, to the query's list of [`crate::APPEND_STORE`] (`lists::SONATA.start + query id`).
//!
//! Result data (8 bytes, two big-endian u32s) per query: see [`Query`]. Tuple (23 bytes, zero
//! padded to [`crate::ENTRY_LEN`]): query id (u16), flow 5-tuple (13), TCP sequence number
//! (u32), window (u32).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

use dta_wire::Report;

use crate::netseer::SeqTracker;
use crate::trace::{Packet, Trace};
use crate::{flow_string, lists, read_list, Emit, FlowKey, Stores, SystemError, ENTRY_LEN};

/// Key-Write store of query results: 6-byte keys (query id u16, window u32), 8 bytes of data.
pub const STORE_RESULTS: &str = "sonata_results";
/// Copies per Key-Write (the store's `redundancy`).
pub const REDUNDANCY: u8 = dta_wire::DEFAULT_REDUNDANCY;
/// Default window: 100 ms.
pub const DEFAULT_WINDOW_NS: u64 = 100_000_000;
/// Most windows a trace may span (the key holds a u32; this bounds the switch's work).
pub const MAX_WINDOWS: u64 = 1 << 20;
/// Bytes of a raw tuple.
pub const TUPLE_LEN: usize = 23;

const _: () = assert!(TUPLE_LEN <= ENTRY_LEN);

/// The Sonata queries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Query {
    /// New TCP connections (SYNs) per window. Result: (SYNs, distinct destinations). Raw
    /// tuples: every SYN.
    NewConns = 1,
    /// Retransmitted segments per window. Result: (retransmissions, distinct flows). Raw
    /// tuples: every retransmission.
    Retransmissions = 2,
    /// The destination receiving the most bytes per window (ties: the lowest address). Result:
    /// (destination IPv4, bytes). No raw tuples (answered in the switch).
    HeavyDst = 3,
}

impl Query {
    /// Every query.
    pub const ALL: [Query; 3] = [Query::NewConns, Query::Retransmissions, Query::HeavyDst];

    /// The query's id (the key's first two bytes).
    pub fn id(self) -> u16 {
        self as u16
    }

    /// The query's name.
    pub fn name(self) -> &'static str {
        match self {
            Query::NewConns => "new-conns",
            Query::Retransmissions => "retransmissions",
            Query::HeavyDst => "heavy-dst",
        }
    }

    /// Parse a name of [`Query::name`].
    pub fn parse(s: &str) -> Result<Query, SystemError> {
        Query::ALL
            .into_iter()
            .find(|q| q.name() == s)
            .ok_or_else(|| {
                SystemError::BadRequest(format!(
                    "bad Sonata query {s:?}: new-conns, retransmissions or heavy-dst"
                ))
            })
    }

    /// Whether the switch streams raw tuples for this query.
    pub fn has_tuples(self) -> bool {
        !matches!(self, Query::HeavyDst)
    }

    /// The query's tuple list.
    pub fn list(self) -> u32 {
        lists::SONATA.start + u32::from(self.id())
    }
}

const _: () = assert!(lists::SONATA.start + Query::HeavyDst as u32 <= lists::SONATA.end);

/// The [`STORE_RESULTS`] key of `q`'s result for `window`.
pub fn result_key(q: Query, window: u32) -> [u8; 6] {
    let mut k = [0u8; 6];
    k[..2].copy_from_slice(&q.id().to_be_bytes());
    k[2..].copy_from_slice(&window.to_be_bytes());
    k
}

/// The switch's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Params {
    /// Window length, ns.
    pub window_ns: u64,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            window_ns: DEFAULT_WINDOW_NS,
        }
    }
}

impl Params {
    fn validate(&self, trace: &Trace) -> Result<u32, SystemError> {
        if self.window_ns == 0 {
            return Err(SystemError::BadRequest(
                "Sonata window must be positive".into(),
            ));
        }
        let last = trace
            .packets
            .last()
            .map(|p| p.ts_ns / self.window_ns)
            .unwrap_or(0);
        if last >= MAX_WINDOWS {
            return Err(SystemError::BadRequest(format!(
                "the trace spans {} windows of {} ns: at most {MAX_WINDOWS}; use a longer window",
                last + 1,
                self.window_ns
            )));
        }
        Ok(last as u32)
    }
}

/// One window's state of every query.
#[derive(Default)]
struct Window {
    syns: u32,
    syn_dsts: BTreeSet<[u8; 4]>,
    retrans: u32,
    retrans_flows: BTreeSet<FlowKey>,
    dst_bytes: HashMap<[u8; 4], u64>,
}

impl Window {
    fn result(&self, q: Query) -> [u8; 8] {
        let (a, b) = match q {
            Query::NewConns => (self.syns, self.syn_dsts.len() as u32),
            Query::Retransmissions => (self.retrans, self.retrans_flows.len() as u32),
            Query::HeavyDst => self
                .dst_bytes
                .iter()
                .map(|(d, &n)| (u32::from_be_bytes(*d), n.min(u64::from(u32::MAX)) as u32))
                .max_by(|x, y| x.1.cmp(&y.1).then(y.0.cmp(&x.0)))
                .unwrap_or((0, 0)),
        };
        let mut d = [0u8; 8];
        d[..4].copy_from_slice(&a.to_be_bytes());
        d[4..].copy_from_slice(&b.to_be_bytes());
        d
    }
}

fn dst_of(p: &Packet) -> [u8; 4] {
    [p.flow[4], p.flow[5], p.flow[6], p.flow[7]]
}

/// Encode a raw tuple.
pub fn tuple_entry(q: Query, p: &Packet, window: u32) -> [u8; ENTRY_LEN] {
    let mut e = [0u8; ENTRY_LEN];
    e[..2].copy_from_slice(&q.id().to_be_bytes());
    e[2..15].copy_from_slice(&p.flow);
    e[15..19].copy_from_slice(&p.seq.to_be_bytes());
    e[19..23].copy_from_slice(&window.to_be_bytes());
    e
}

/// Reports sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Sent {
    /// Key-Write results.
    pub key_write: u64,
    /// Appended tuples.
    pub append: u64,
}

/// Walk `trace` window by window, feeding `on_packet` each packet with its window and whether
/// it is a retransmission, and `on_window` each window's state at its end (every window from 0
/// to the last packet's, empty ones included).
fn windows(
    trace: &Trace,
    p: &Params,
    mut on_packet: impl FnMut(&Packet, u32, bool) -> Result<(), SystemError>,
    mut on_window: impl FnMut(u32, &Window) -> Result<(), SystemError>,
) -> Result<(), SystemError> {
    let last = p.validate(trace)?;
    let mut seq = SeqTracker::default();
    let mut cur = 0u32;
    let mut w = Window::default();
    for pkt in &trace.packets {
        let wi = (pkt.ts_ns / p.window_ns) as u32;
        while cur < wi {
            on_window(cur, &w)?;
            w = Window::default();
            cur += 1;
        }
        let re = seq.retransmission(pkt);
        if pkt.flags & dta_net::tcp::FLAG_SYN != 0 {
            w.syns += 1;
            w.syn_dsts.insert(dst_of(pkt));
        }
        if re {
            w.retrans += 1;
            w.retrans_flows.insert(pkt.flow);
        }
        *w.dst_bytes.entry(dst_of(pkt)).or_default() += u64::from(pkt.size);
        on_packet(pkt, wi, re)?;
    }
    if !trace.packets.is_empty() {
        debug_assert_eq!(cur, last);
        on_window(cur, &w)?;
    }
    Ok(())
}

/// Run the switch's part of every query over `trace`, sending results and tuples to `emit`.
pub fn reports(trace: &Trace, p: &Params, emit: &mut Emit) -> Result<Sent, SystemError> {
    let sent = std::cell::Cell::new(Sent::default());
    let emit = std::cell::RefCell::new(emit);
    windows(
        trace,
        p,
        |pkt, wi, re| {
            for q in [Query::NewConns, Query::Retransmissions] {
                let pass = match q {
                    Query::NewConns => pkt.flags & dta_net::tcp::FLAG_SYN != 0,
                    Query::Retransmissions => re,
                    Query::HeavyDst => false,
                };
                if pass {
                    (emit.borrow_mut())(&Report::Append {
                        list_id: q.list(),
                        data: &tuple_entry(q, pkt, wi),
                        immediate: false,
                    })?;
                    let mut s = sent.get();
                    s.append += 1;
                    sent.set(s);
                }
            }
            Ok(())
        },
        |wi, w| {
            for q in Query::ALL {
                (emit.borrow_mut())(&Report::KeyWrite {
                    key: &result_key(q, wi),
                    data: &w.result(q),
                    redundancy: REDUNDANCY,
                    immediate: false,
                })?;
                let mut s = sent.get();
                s.key_write += 1;
                sent.set(s);
            }
            Ok(())
        },
    )?;
    Ok(sent.get())
}

/// What the queries should find, from the whole trace.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Truth {
    /// Per (query, window): the result's two values.
    pub results: BTreeMap<(Query, u32), (u32, u32)>,
    /// Per query with tuples: (flow, seq, window) of each tuple, in order.
    pub tuples: BTreeMap<Query, Vec<(FlowKey, u32, u32)>>,
}

/// The ground truth of every query over `trace`.
pub fn truth(trace: &Trace, p: &Params) -> Result<Truth, SystemError> {
    let mut t = Truth::default();
    let tuples = std::cell::RefCell::new(BTreeMap::<Query, Vec<(FlowKey, u32, u32)>>::new());
    let mut results = BTreeMap::new();
    windows(
        trace,
        p,
        |pkt, wi, re| {
            let mut tu = tuples.borrow_mut();
            if pkt.flags & dta_net::tcp::FLAG_SYN != 0 {
                tu.entry(Query::NewConns)
                    .or_default()
                    .push((pkt.flow, pkt.seq, wi));
            }
            if re {
                tu.entry(Query::Retransmissions)
                    .or_default()
                    .push((pkt.flow, pkt.seq, wi));
            }
            Ok(())
        },
        |wi, w| {
            for q in Query::ALL {
                let d = w.result(q);
                let a = u32::from_be_bytes(d[..4].try_into().expect("4"));
                let b = u32::from_be_bytes(d[4..].try_into().expect("4"));
                results.insert((q, wi), (a, b));
            }
            Ok(())
        },
    )?;
    t.results = results;
    t.tuples = tuples.into_inner();
    Ok(t)
}

impl Truth {
    /// The truth as JSON.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "results": self.results.iter().map(|((q, w), (a, b))| serde_json::json!({"query": q.name(), "window": w, "values": [a, b]})).collect::<Vec<_>>(),
            "tuples": self.tuples.iter().map(|(q, v)| (q.name().to_string(), serde_json::json!(v.len()))).collect::<serde_json::Map<_, _>>(),
        })
    }
}

/// A query's result for one window.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ResultAnswer {
    /// The query.
    pub query: &'static str,
    /// The window (index from the trace's start).
    pub window: u32,
    /// The result, named per query.
    pub result: serde_json::Value,
    /// How sure the Key-Write answer is.
    pub confidence: dta_store::Confidence,
}

/// `q`'s result for `window`: an error when the store holds none (the window is past the
/// trace, or its slots were overwritten).
pub fn query_result(stores: &Stores, q: Query, window: u32) -> Result<ResultAnswer, SystemError> {
    let kw = stores.open(STORE_RESULTS)?;
    let err = |m: String| SystemError::Store {
        store: STORE_RESULTS.into(),
        msg: m,
    };
    let r = dta_collector::query::key_write(&kw, &result_key(q, window), None, 1)
        .map_err(|e| err(e.to_string()))?;
    kw.check().map_err(|e| err(e.to_string()))?;
    let d = match (r.status, &r.data) {
        ("found", Some(d)) => hex::decode(d).map_err(|e| err(e.to_string()))?,
        ("ambiguous", _) => {
            return Err(SystemError::NotFound(format!(
                "{} window {window}: {STORE_RESULTS} holds {} different results; no answer",
                q.name(),
                r.candidates.len()
            )))
        }
        _ => {
            return Err(SystemError::NotFound(format!(
                "{} window {window}: no result in {STORE_RESULTS} (the switch writes one per \
                 window of its trace: this window is past it, or its slots were overwritten: \
                 p = {:.2e})",
                q.name(),
                r.confidence.p_overwritten
            )))
        }
    };
    if d.len() != 8 {
        return Err(err("data is not 8 bytes: not a Sonata result store".into()));
    }
    let a = u32::from_be_bytes(d[..4].try_into().expect("4"));
    let b = u32::from_be_bytes(d[4..].try_into().expect("4"));
    let result = match q {
        Query::NewConns => serde_json::json!({"syns": a, "destinations": b}),
        Query::Retransmissions => serde_json::json!({"retransmissions": a, "flows": b}),
        Query::HeavyDst if b == 0 => serde_json::json!({"destination": null, "bytes": 0}),
        Query::HeavyDst => serde_json::json!({
            "destination": std::net::Ipv4Addr::from(a).to_string(),
            "bytes": b,
        }),
    };
    Ok(ResultAnswer {
        query: q.name(),
        window,
        result,
        confidence: r.confidence,
    })
}

/// One raw tuple as read back.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Tuple {
    /// The packet's flow.
    pub flow: String,
    /// Its TCP sequence number.
    pub seq: u32,
    /// Its window.
    pub window: u32,
    /// Position in the query's list.
    pub position: u64,
}

/// A query's raw tuples.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TuplesAnswer {
    /// The query.
    pub query: &'static str,
    /// Its list.
    pub list: u32,
    /// Tuples from `since` on, oldest first (at most the asked number).
    pub tuples: Vec<Tuple>,
    /// Tuples from `since` on held by the list (also those not listed).
    pub matched: u64,
    /// Entries overwritten before this query (0: complete).
    pub overwritten: u64,
    /// Tuples ever appended (the position of the next one).
    pub appended: u64,
}

/// The raw tuples of `q` at or after position `since`, at most `max` of them.
pub fn query_tuples(
    stores: &Stores,
    q: Query,
    since: Option<u64>,
    max: usize,
) -> Result<TuplesAnswer, SystemError> {
    if !q.has_tuples() {
        return Err(SystemError::BadRequest(format!(
            "{} runs wholly in the switch: it sends results, no raw tuples (ask `result`)",
            q.name()
        )));
    }
    let region = stores.open(crate::APPEND_STORE)?;
    let l = read_list(&region, q.list())?;
    if l.appended == 0 {
        return Err(SystemError::NotFound(format!(
            "no {} tuple was ever appended to {} list {}: has `dta report --workload sonata` \
             sent to this collector?",
            q.name(),
            crate::APPEND_STORE,
            q.list()
        )));
    }
    if let Some(s) = since {
        if s >= l.appended {
            return Err(SystemError::NotFound(format!(
                "no {} tuple at or after position {s}: the list holds positions up to {}",
                q.name(),
                l.appended - 1
            )));
        }
    }
    let first = l.appended - l.entries.len() as u64;
    let mut a = TuplesAnswer {
        query: q.name(),
        list: q.list(),
        tuples: vec![],
        matched: 0,
        overwritten: l.overwritten,
        appended: l.appended,
    };
    for (i, e) in l.entries.iter().enumerate() {
        let pos = first + i as u64;
        if since.is_some_and(|s| pos < s) {
            continue;
        }
        if u16::from_be_bytes([e[0], e[1]]) != q.id() {
            return Err(SystemError::Store {
                store: crate::APPEND_STORE.into(),
                msg: format!(
                    "list {} position {pos} is not a {} tuple",
                    q.list(),
                    q.name()
                ),
            });
        }
        a.matched += 1;
        if a.tuples.len() < max {
            a.tuples.push(Tuple {
                flow: flow_string(&e[2..15].try_into().expect("13 bytes")),
                seq: u32::from_be_bytes(e[15..19].try_into().expect("4")),
                window: u32::from_be_bytes(e[19..23].try_into().expect("4")),
                position: pos,
            });
        }
    }
    if a.matched == 0 {
        return Err(SystemError::NotFound(format!(
            "{} tuples from position {} on were overwritten ({} lost): ask from a later position",
            q.name(),
            since.unwrap_or(0),
            l.overwritten
        )));
    }
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_match_the_truth() {
        let (t, inj) = crate::trace::test_trace(300);
        let p = Params::default();
        let truth = truth(&t, &p).unwrap();
        let mut results = BTreeMap::new();
        let mut tuples: BTreeMap<Query, Vec<(FlowKey, u32, u32)>> = BTreeMap::new();
        let sent = reports(&t, &p, &mut |r: &Report<'_>| {
            match *r {
                Report::KeyWrite { key, data, .. } => {
                    let q = Query::ALL
                        .into_iter()
                        .find(|q| q.id() == u16::from_be_bytes([key[0], key[1]]))
                        .unwrap();
                    let w = u32::from_be_bytes(key[2..6].try_into().unwrap());
                    let a = u32::from_be_bytes(data[..4].try_into().unwrap());
                    let b = u32::from_be_bytes(data[4..].try_into().unwrap());
                    assert!(results.insert((q, w), (a, b)).is_none());
                }
                Report::Append { list_id, data, .. } => {
                    let q = Query::ALL
                        .into_iter()
                        .find(|q| q.list() == list_id)
                        .unwrap();
                    tuples.entry(q).or_default().push((
                        data[2..15].try_into().unwrap(),
                        u32::from_be_bytes(data[15..19].try_into().unwrap()),
                        u32::from_be_bytes(data[19..23].try_into().unwrap()),
                    ));
                }
                _ => panic!("Sonata sends Key-Write and Append"),
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(results, truth.results);
        assert_eq!(tuples, truth.tuples);
        assert_eq!(
            sent.append,
            tuples.values().map(|v| v.len() as u64).sum::<u64>()
        );
        let syns: u32 = truth
            .results
            .iter()
            .filter(|((q, _), _)| *q == Query::NewConns)
            .map(|(_, v)| v.0)
            .sum();
        assert_eq!(syns as usize, inj.len(), "one SYN per flow");
        let re: u32 = truth
            .results
            .iter()
            .filter(|((q, _), _)| *q == Query::Retransmissions)
            .map(|(_, v)| v.0)
            .sum();
        assert_eq!(
            re as u64,
            inj.values().map(|i| i.retransmissions).sum::<u64>()
        );
        let windows = t.packets.last().unwrap().ts_ns / p.window_ns + 1;
        assert_eq!(sent.key_write, 3 * windows);
    }

    #[test]
    fn names_and_errors() {
        for q in Query::ALL {
            assert_eq!(Query::parse(q.name()).unwrap(), q);
            assert!(lists::SONATA.contains(&q.list()));
        }
        assert!(Query::parse("ddos").is_err());
        let t = Trace {
            packets: vec![Packet {
                ts_ns: u64::MAX / 2,
                flow: [0; 13],
                size: 40,
                payload: 0,
                seq: 0,
                flags: 0,
            }],
            ..Trace::default()
        };
        assert!(reports(&t, &Params { window_ns: 1 }, &mut |_| Ok(())).is_err());
        assert!(reports(&t, &Params { window_ns: 0 }, &mut |_| Ok(())).is_err());
    }
}
