// Size: one query type over a cluster: the per-primitive merges (owners in turn, sums with a
// coverage, lists and sketches fanned out) share its member set-up, rounds and error mapping.
//! Queries over a cluster of collectors ([DTA-draft §3.2] "Supporting Multiple Collectors"):
//! a key is answered by the collector owning it in the cluster map (`dta_cluster`), the user
//! need not know the map. Used by `dta query --cluster`, the HTTP API's `/cluster/...` routes
//! and (through the same HTTP routes) Python.
//!
//! Each collector is asked where it is reachable from here: this process's own regions (the
//! collector serving the HTTP API), else its `region_dir` when the region file is readable
//! (shared memory on this host), else its HTTP API (`/query/...`, answered locally by the
//! peer, so a request is forwarded at most once).
//!
//! * Key-Write and Postcarding: the owners during a change ([`ClusterMap::owners_during_change`],
//!   new then old) are asked in order; the first `found` answer wins, else the new owner's.
//! * Key-Increment: a key's counts written under the old map and under the new one add up, so
//!   the owners' counts are summed (each a Count-Min overestimate of its part).
//! * Append lists: the previous owner's entries, then the new owner's.
//! * Sketch-Merge: the owner's sketch; hierarchically, the sections' Count-Min estimates summed
//!   (each section's estimate is at least its true count, so the sum is at least the
//!   network-wide count and at most the estimate of the summed rows).
//! * Batches: keys grouped by owner, the groups asked in parallel (one thread per collector);
//!   a peer asked over HTTP gets its keys in requests of many (`/local/batch/...`, answered
//!   from its own regions), except keys that also have a previous owner, asked one by one.
//!
//! Every answer names the collectors that gave it (`"collectors"`). A collector that cannot be
//! asked makes the answer an error naming it, never an `empty`.
//!
//! One request is one *round*: every collector asked over HTTP has one deadline in it (the
//! query's timeout, counted from the round's start), so a hung owner costs its own keys at most
//! that deadline and the other owners' answers still arrive. A collector that timed out or
//! refused the connection is not asked again in the round: its remaining keys fail at once with
//! the same error ("timed out", "refused"). A peer that answers under another collector's name
//! (a map whose HTTP addresses point at the wrong collector, or back at this one) is an error,
//! never an answer labelled with the wrong collector.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dta_cluster::{ClusterMap, Collector as Member, Key, Placement, SketchPlacement};
use dta_store::Region;
use serde_json::{json, Value};

use crate::collector::{region_path, Collector};
use crate::query;

/// Most keys one batch query may name.
pub const MAX_BATCH_KEYS: usize = 1024;

/// The response header naming the collector (of a cluster map) that answered: a peer whose
/// answer carries another name than the one asked is reached through a wrong address.
pub const COLLECTOR_HEADER: &str = "dta-collector";

/// What is asked of each collector (the parameters of its `/query/...` route).
#[derive(Debug, Clone, PartialEq)]
pub enum Ask {
    /// Key-Write.
    Kw {
        /// Slots read (default: the store's N).
        redundancy: Option<u8>,
        /// Copies that must agree.
        threshold: u8,
    },
    /// Key-Increment.
    Ki {
        /// Counters read (default: the store's N).
        redundancy: Option<u8>,
        /// The windows of a windowed store (default: the current one).
        window: Option<dta_store::WindowSel>,
    },
    /// Postcarding.
    Postcard {
        /// The value set size (default: the store's configuration, else 2^18).
        values: Option<u32>,
    },
    /// Append list entries.
    List {
        /// The list.
        list: u32,
        /// Absolute index to read from (default: the oldest held).
        tail: Option<u64>,
        /// Most entries.
        max: usize,
    },
    /// Sketch-Merge.
    Sketch,
}

impl Ask {
    fn route(&self) -> &'static str {
        match self {
            Ask::Kw { .. } => "kw",
            Ask::Ki { .. } => "ki",
            Ask::Postcard { .. } => "postcard",
            Ask::List { .. } => "list",
            Ask::Sketch => "sketch",
        }
    }

    /// The query string for a peer (the key in hex so the peer reads exactly these bytes).
    fn query_string(&self, key: Option<&[u8]>) -> String {
        let mut p: Vec<String> = vec![];
        if let Some(k) = key {
            p.push(format!("key=0x{}", hex::encode(k)));
        }
        match self {
            Ask::Kw {
                redundancy,
                threshold,
            } => {
                if let Some(n) = redundancy {
                    p.push(format!("redundancy={n}"));
                }
                p.push(format!("threshold={threshold}"));
            }
            Ask::Ki { redundancy, window } => {
                if let Some(n) = redundancy {
                    p.push(format!("redundancy={n}"));
                }
                if let Some(w) = window {
                    p.push(format!("window={w}"));
                }
            }
            Ask::Postcard { values } => {
                if let Some(v) = values {
                    p.push(format!("values={v}"));
                }
            }
            Ask::List { list, tail, max } => {
                p.push(format!("list={list}"));
                if let Some(t) = tail {
                    p.push(format!("tail={t}"));
                }
                p.push(format!("max={max}"));
            }
            Ask::Sketch => {}
        }
        p.join("&")
    }
}

/// Why a cluster query has no answer.
#[derive(Debug, thiserror::Error)]
pub enum ClusterQueryError {
    /// The map has no such store, or the key does not suit its rule.
    #[error(transparent)]
    Route(#[from] dta_cluster::RouteError),
    /// The key or a parameter is malformed.
    #[error(transparent)]
    Query(#[from] query::QueryError),
    /// A collector holding part of the answer did not answer within its deadline.
    #[error("collector {collector}: timed out: no answer within {} ms ({target})", after.as_millis())]
    TimedOut {
        /// The collector.
        collector: String,
        /// Its deadline in the round.
        after: Duration,
        /// What was asked (`http://addr/route`).
        target: String,
    },
    /// A collector holding part of the answer could not be asked.
    #[error("collector {collector}: {reason}")]
    Unreachable {
        /// The collector.
        collector: String,
        /// Why.
        reason: String,
    },
    /// A collector answered with an error.
    #[error("collector {collector} answered {status}: {message}")]
    Refused {
        /// The collector.
        collector: String,
        /// The HTTP status.
        status: u16,
        /// Its message.
        message: String,
    },
    /// The request is beyond a limit or cannot be answered network-wide.
    #[error("{0}")]
    Invalid(String),
}

impl ClusterQueryError {
    /// The HTTP status this error is answered with.
    pub fn status(&self) -> u16 {
        match self {
            ClusterQueryError::Route(dta_cluster::RouteError::UnknownStore(_)) => 404,
            ClusterQueryError::Route(_)
            | ClusterQueryError::Query(_)
            | ClusterQueryError::Invalid(_) => 400,
            ClusterQueryError::Refused { status, .. } if *status < 500 => *status,
            ClusterQueryError::TimedOut { .. } => 504,
            ClusterQueryError::Unreachable { .. } | ClusterQueryError::Refused { .. } => 502,
        }
    }
}

impl ClusterQueryError {
    /// The collector the error is about, if it is about one.
    pub fn collector(&self) -> Option<&str> {
        match self {
            ClusterQueryError::TimedOut { collector, .. }
            | ClusterQueryError::Unreachable { collector, .. }
            | ClusterQueryError::Refused { collector, .. } => Some(collector),
            _ => None,
        }
    }

    /// The error object of a key in a batch's answers: the key (hex), the message and the
    /// collector it is about.
    pub fn for_key(&self, key: &[u8]) -> Value {
        json!({
            "key": hex::encode(key),
            "error": self.to_string(),
            "collector": self.collector(),
        })
    }
}

/// Queries over the collectors of a map.
pub struct ClusterQuery {
    map: Arc<ClusterMap>,
    /// This process's collector: its name in the map and its regions.
    local: Option<(String, Arc<Collector>)>,
    token: Option<dta_http::Token>,
    timeout: Duration,
    decode: query::RecordDecoder,
}

impl ClusterQuery {
    /// Queries over `map`, asking peers' HTTP APIs with `token` (if they need one).
    pub fn new(map: Arc<ClusterMap>, token: Option<dta_http::Token>) -> ClusterQuery {
        ClusterQuery {
            map,
            local: None,
            token,
            timeout: dta_http::client::DEFAULT_CLIENT_TIMEOUT,
            decode: query::raw_records,
        }
    }

    /// Append entries read from regions here are decoded by `decode` (as the owners' APIs do).
    pub fn with_decoder(mut self, decode: query::RecordDecoder) -> Self {
        self.decode = decode;
        self
    }

    /// This process serves the collector `name` of the map from `collector`'s regions.
    pub fn with_local(mut self, name: &str, collector: Arc<Collector>) -> Result<Self, String> {
        if self.map.collector(name).is_none() {
            return Err(format!("the cluster map names no collector {name:?}"));
        }
        self.local = Some((name.to_owned(), collector));
        Ok(self)
    }

    /// Each collector asked over HTTP answers within `timeout` of a request's start (default
    /// `dta_http::client::DEFAULT_CLIENT_TIMEOUT`).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The map.
    pub fn map(&self) -> &ClusterMap {
        &self.map
    }

    /// The name this process answers under in the map, if it serves one of its collectors.
    pub fn local_name(&self) -> Option<&str> {
        self.local.as_ref().map(|(n, _)| n.as_str())
    }

    /// A new round: the deadlines of one request.
    fn round(&self) -> Round {
        Round {
            deadline: Instant::now() + self.timeout,
            timeout: self.timeout,
            down: Mutex::new(HashMap::new()),
        }
    }

    /// Ask collector `c` the query `ask` on `store` (for `key`, if any); its JSON answer.
    pub fn ask(
        &self,
        c: &Member,
        store: &str,
        ask: &Ask,
        key: Option<&[u8]>,
    ) -> Result<Value, ClusterQueryError> {
        self.ask_in(&self.round(), c, store, ask, key)
    }

    fn ask_in(
        &self,
        round: &Round,
        c: &Member,
        store: &str,
        ask: &Ask,
        key: Option<&[u8]>,
    ) -> Result<Value, ClusterQueryError> {
        let unreachable = |reason: String| ClusterQueryError::Unreachable {
            collector: c.name.clone(),
            reason,
        };
        if let Some((name, col)) = &self.local {
            if *name == c.name {
                let s = col.store(store).map_err(|e| unreachable(e.to_string()))?;
                let values = s.config.as_ref().and_then(|c| c.values);
                let v = answer_local(&s.region, ask, key, values, self.decode)
                    .map_err(|e| refused(c, e))?;
                col.store(store).map_err(|e| unreachable(e.to_string()))?;
                return Ok(v);
            }
        }
        if let Some(dir) = &c.region_dir {
            let path = region_path(dir, store);
            if path.exists() {
                let r = Region::open_read_only(&path)
                    .map_err(|e| unreachable(format!("region {}: {e}", path.display())))?;
                let v = answer_local(&r, ask, key, None, self.decode).map_err(|e| refused(c, e))?;
                r.check()
                    .map_err(|e| unreachable(format!("region {}: {e}", path.display())))?;
                return Ok(v);
            }
        }
        let Some(addr) = c.http else {
            return Err(unreachable(
                "neither its region directory is readable here nor does it have an HTTP API".into(),
            ));
        };
        let target = format!("/query/{}/{}?{}", ask.route(), store, ask.query_string(key));
        self.http(round, c, addr, &target)
    }

    /// `GET target` from collector `c` at `addr` within its deadline in `round`: the JSON
    /// answer of a 200, else the error (remembered in the round when the peer is down).
    fn http(
        &self,
        round: &Round,
        c: &Member,
        addr: SocketAddr,
        target: &str,
    ) -> Result<Value, ClusterQueryError> {
        if let Some(e) = round.down(&c.name) {
            return Err(e);
        }
        let a = dta_http::client::get_until(addr, target, self.token.as_ref(), round.deadline)
            .map_err(|e| round.failed(&c.name, addr, target, e))?;
        let unreachable = |reason: String| ClusterQueryError::Unreachable {
            collector: c.name.clone(),
            reason,
        };
        if let Some(other) = a.header(COLLECTOR_HEADER).filter(|n| *n != c.name) {
            return Err(unreachable(format!(
                "its HTTP address http://{addr} is served by collector {other:?}: the cluster \
                 map's `http` of {:?} is wrong",
                c.name
            )));
        }
        let v: Value = serde_json::from_slice(&a.body)
            .map_err(|e| unreachable(format!("answer is not JSON: {e}")))?;
        if a.status != 200 {
            return Err(ClusterQueryError::Refused {
                collector: c.name.clone(),
                status: a.status,
                message: v["error"].as_str().unwrap_or("").to_owned(),
            });
        }
        Ok(v)
    }

    /// The key bytes of `input` for a hashed store of the map.
    pub fn parse_key(&self, store: &str, input: &str) -> Result<Vec<u8>, ClusterQueryError> {
        let rule = self.map.store(store)?;
        Ok(query::parse_key(input, rule.key_len)?)
    }

    /// Key-Write, Key-Increment or Postcarding: `key` of `store` from its owner(s).
    pub fn key(&self, store: &str, key: &[u8], ask: &Ask) -> Result<Value, ClusterQueryError> {
        self.key_in(&self.round(), store, key, ask)
    }

    fn key_in(
        &self,
        round: &Round,
        store: &str,
        key: &[u8],
        ask: &Ask,
    ) -> Result<Value, ClusterQueryError> {
        let owners = self.map.owners_during_change(store, Key::Bytes(key))?;
        match ask {
            Ask::Ki { .. } => {
                let mut total = 0u64;
                let mut first: Option<Value> = None;
                let mut parts = vec![];
                for o in &owners {
                    let v = self.ask_in(round, o, store, ask, Some(key))?;
                    let n = v["count"]
                        .as_u64()
                        .ok_or_else(|| ClusterQueryError::Unreachable {
                            collector: o.name.clone(),
                            reason: "answer has no count".into(),
                        })?;
                    total = total.saturating_add(n);
                    parts.push(json!({"collector": o.name, "count": n}));
                    first.get_or_insert(v);
                }
                let mut v = first.unwrap_or(Value::Null);
                v["count"] = total.into();
                v["collectors"] = parts.into();
                Ok(v)
            }
            Ask::Kw { .. } | Ask::Postcard { .. } => {
                let mut first: Option<Value> = None;
                let mut asked = vec![];
                for o in &owners {
                    let mut v = self.ask_in(round, o, store, ask, Some(key))?;
                    asked.push(o.name.clone());
                    if v["status"] == "found" {
                        v["collectors"] = json!([o.name]);
                        return Ok(v);
                    }
                    first.get_or_insert(v);
                }
                let mut v = first.unwrap_or(Value::Null);
                v["collectors"] = asked.into();
                Ok(v)
            }
            Ask::List { .. } | Ask::Sketch => Err(ClusterQueryError::Invalid(
                "lists and sketches are not asked by key".into(),
            )),
        }
    }

    /// An Append list from its owner (the previous owner's entries first during a change).
    pub fn list(&self, store: &str, ask: &Ask) -> Result<Value, ClusterQueryError> {
        let Ask::List { list, .. } = ask else {
            return Err(ClusterQueryError::Invalid("not a list query".into()));
        };
        let mut owners = self.map.owners_during_change(store, Key::List(*list))?;
        owners.reverse();
        let round = self.round();
        let mut entries = vec![];
        let mut parts = vec![];
        let mut first: Option<Value> = None;
        // Partial when any owner's part is (overwritten entries, or more past its max).
        let (mut missed, mut more, mut notes) = (0u64, false, vec![]);
        for o in owners {
            let v = self.ask_in(&round, o, store, ask, None)?;
            let e = v["entries"].as_array().cloned().unwrap_or_default();
            parts.push(json!({
                "collector": o.name, "entries": e.len(), "next_tail": v["next_tail"],
                "complete": v["complete"], "more": v["more"],
            }));
            missed = missed.saturating_add(v["missed"].as_u64().unwrap_or(0));
            more |= v["more"].as_bool().unwrap_or(false);
            if v["complete"] != Value::Bool(true) {
                let note = v["note"]
                    .as_str()
                    .unwrap_or("its answer does not say it is complete");
                notes.push(format!("{}: {note}", o.name));
            }
            entries.extend(e);
            first.get_or_insert(v);
        }
        let mut v = first.unwrap_or(Value::Null);
        v["entries"] = entries.into();
        v["collectors"] = parts.into();
        v["missed"] = missed.into();
        v["more"] = more.into();
        v["complete"] = notes.is_empty().into();
        match notes.is_empty() {
            true => _ = v.as_object_mut().map(|m| m.remove("note")),
            false => v["note"] = notes.join("; ").into(),
        }
        Ok(v)
    }

    /// A Sketch-Merge answer network-wide: the owner's, or the sections' merged.
    pub fn sketch(&self, store: &str, key: Option<&[u8]>) -> Result<Value, ClusterQueryError> {
        let rule = self.map.store(store)?;
        let readers = self.map.readers(store)?;
        let hierarchical = matches!(
            rule.placement,
            Placement::Sketch(SketchPlacement::Hierarchical { .. })
        );
        // The sections' collectors asked in parallel, each within its deadline.
        let round = self.round();
        let asked: Vec<(&Member, Result<Value, ClusterQueryError>)> = std::thread::scope(|s| {
            let handles: Vec<_> = readers
                .iter()
                .map(|&i| {
                    let c = &self.map.collectors[i];
                    let round = &round;
                    (
                        c,
                        s.spawn(move || self.ask_in(round, c, store, &Ask::Sketch, key)),
                    )
                })
                .collect();
            handles
                .into_iter()
                .map(|(c, h)| (c, h.join().unwrap_or_else(|_| Err(thread_failed()))))
                .collect()
        });
        let mut answers = vec![];
        for (c, r) in asked {
            match r {
                Ok(v) => answers.push((c.name.clone(), v)),
                // A section whose collector has merged no sketch yet adds nothing.
                Err(ClusterQueryError::Refused { status: 404, .. }) if hierarchical => {}
                Err(e) => return Err(e),
            }
        }
        if !hierarchical || answers.len() == 1 {
            let Some((name, mut v)) = answers.pop() else {
                return Err(ClusterQueryError::Invalid(format!(
                    "no collector has merged sketch {store:?} yet"
                )));
            };
            v["collectors"] = json!([name]);
            return Ok(v);
        }
        if answers.is_empty() {
            return Err(ClusterQueryError::Invalid(format!(
                "no section has merged sketch {store:?} yet"
            )));
        }
        if answers.iter().any(|(_, v)| v["estimate"].is_null()) {
            return Err(ClusterQueryError::Invalid(format!(
                "sketch {store:?} is merged per section: its network-wide answer is a Count-Min \
                 key estimate (the sum over sections); a HyperLogLog's cardinality is answered \
                 per section only (ask a section's collector)"
            )));
        }
        let total: u64 = answers
            .iter()
            .map(|(_, v)| v["estimate"].as_u64().unwrap_or(0))
            .sum();
        let parts: Vec<Value> = answers
            .iter()
            .map(|(n, v)| json!({"collector": n, "estimate": v["estimate"]}))
            .collect();
        let mut v = answers.swap_remove(0).1;
        v["estimate"] = total.into();
        v["collectors"] = parts.into();
        Ok(v)
    }

    /// Many keys of one store: grouped by owner, the groups asked in parallel. One answer (or
    /// error) per key, in order.
    pub fn batch(
        &self,
        store: &str,
        keys: &[Vec<u8>],
        ask: &Ask,
    ) -> Result<Vec<Result<Value, ClusterQueryError>>, ClusterQueryError> {
        if keys.len() > MAX_BATCH_KEYS {
            return Err(ClusterQueryError::Invalid(format!(
                "{} keys; a batch names at most {MAX_BATCH_KEYS}",
                keys.len()
            )));
        }
        let mut groups: Vec<Vec<usize>> = vec![vec![]; self.map.collectors.len()];
        for (i, k) in keys.iter().enumerate() {
            groups[self.map.owner_index(store, Key::Bytes(k))?].push(i);
        }
        let mut out: Vec<Option<Result<Value, ClusterQueryError>>> =
            (0..keys.len()).map(|_| None).collect();
        let round = self.round();
        std::thread::scope(|s| {
            let round = &round;
            let handles: Vec<_> = groups
                .iter()
                .enumerate()
                .filter(|(_, g)| !g.is_empty())
                .map(|(c, g)| s.spawn(move || self.group(round, c, store, keys, g, ask)))
                .collect();
            for h in handles {
                // A thread that panicked leaves its keys unanswered: an error each, below.
                if let Ok(v) = h.join() {
                    for (i, r) in v {
                        out[i] = Some(r);
                    }
                }
            }
        });
        Ok(out
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(thread_failed())))
            .collect())
    }
}

impl ClusterQuery {
    /// Whether collector `c` is asked over HTTP for `store` (neither this process's own nor
    /// its region readable here); its HTTP address then.
    fn remote(&self, c: &Member, store: &str) -> Option<SocketAddr> {
        if self.local.as_ref().is_some_and(|(n, _)| *n == c.name) {
            return None;
        }
        if c.region_dir
            .as_ref()
            .is_some_and(|d| region_path(d, store).exists())
        {
            return None;
        }
        c.http
    }

    /// The keys `idx` of a batch, all owned by collector `c`: keys with one owner that is
    /// asked over HTTP go to its `/local/batch/...` route in requests of many keys; the others
    /// (local, or with a previous owner to ask too) one by one.
    fn group(
        &self,
        round: &Round,
        c: usize,
        store: &str,
        keys: &[Vec<u8>],
        idx: &[usize],
        ask: &Ask,
    ) -> Vec<(usize, Result<Value, ClusterQueryError>)> {
        let member = &self.map.collectors[c];
        let mut out = Vec::with_capacity(idx.len());
        let mut forward = vec![];
        for &i in idx {
            let single = self
                .map
                .owners_during_change(store, Key::Bytes(&keys[i]))
                .is_ok_and(|o| o.len() == 1);
            match self.remote(member, store) {
                Some(addr) if single => forward.push((i, addr)),
                _ => out.push((i, self.key_in(round, store, &keys[i], ask))),
            }
        }
        // Requests whose target stays well within the server's URI limit.
        let mut chunk: Vec<usize> = vec![];
        let mut len = 0;
        let flush = |chunk: &mut Vec<usize>, out: &mut Vec<_>| {
            if chunk.is_empty() {
                return;
            }
            let addr = forward[0].1;
            let ks: Vec<&[u8]> = chunk.iter().map(|&i| &keys[i][..]).collect();
            match self.http_batch(round, member, addr, store, ask, &ks) {
                Ok(answers) => out.extend(chunk.iter().copied().zip(answers)),
                // A peer without the batch route (or that failed it): one key at a time (at
                // once an error each when the peer is down: the round remembers it).
                Err(_) => out.extend(
                    chunk
                        .iter()
                        .map(|&i| (i, self.key_in(round, store, &keys[i], ask))),
                ),
            }
            chunk.clear();
        };
        for &(i, _) in &forward {
            let l = 2 * keys[i].len() + 3;
            if len + l > FORWARD_KEYS_BYTES {
                flush(&mut chunk, &mut out);
                len = 0;
            }
            chunk.push(i);
            len += l;
        }
        flush(&mut chunk, &mut out);
        out
    }

    /// `GET /local/batch/{route}/{store}?keys=...` of collector `c`: its answers, in order.
    fn http_batch(
        &self,
        round: &Round,
        c: &Member,
        addr: SocketAddr,
        store: &str,
        ask: &Ask,
        keys: &[&[u8]],
    ) -> Result<Vec<Result<Value, ClusterQueryError>>, ClusterQueryError> {
        let list: Vec<String> = keys
            .iter()
            .map(|k| format!("0x{}", hex::encode(k)))
            .collect();
        let params = ask.query_string(None);
        let target = format!(
            "/local/batch/{}/{}?keys={}{}{}",
            ask.route(),
            store,
            list.join(","),
            if params.is_empty() { "" } else { "&" },
            params
        );
        let unreachable = |reason: String| ClusterQueryError::Unreachable {
            collector: c.name.clone(),
            reason,
        };
        let v = self.http(round, c, addr, &target)?;
        let answers = v["answers"]
            .as_array()
            .filter(|a| a.len() == keys.len())
            .ok_or_else(|| unreachable(format!("not {} answers", keys.len())))?;
        Ok(answers
            .iter()
            .map(|a| match a["error"].as_str() {
                Some(m) => Err(ClusterQueryError::Refused {
                    collector: c.name.clone(),
                    status: 400,
                    message: m.to_owned(),
                }),
                None => {
                    let mut a = a.clone();
                    a["collectors"] = match ask {
                        Ask::Ki { .. } => json!([{"collector": c.name, "count": a["count"]}]),
                        _ => json!([c.name]),
                    };
                    Ok(a)
                }
            })
            .collect())
    }
}

/// Bytes of keys (hex, with separators) in one forwarded batch request: the request target
/// stays under `dta_http::MAX_URI_LEN`.
const FORWARD_KEYS_BYTES: usize = 3000;

/// The deadlines of one request: every collector asked over HTTP answers by `deadline`; one
/// that timed out or refused the connection is remembered and not asked again.
struct Round {
    deadline: Instant,
    timeout: Duration,
    down: Mutex<HashMap<String, Down>>,
}

/// Why a collector is not asked again in a round.
#[derive(Clone)]
enum Down {
    TimedOut(String),
    Unreachable(String),
}

impl Round {
    /// The error of collector `name` if it is down in this round.
    fn down(&self, name: &str) -> Option<ClusterQueryError> {
        let d = self.down.lock().unwrap_or_else(|p| p.into_inner());
        d.get(name).map(|d| self.error(name, d.clone()))
    }

    /// The error for `e` from collector `name`; a timeout or refused connection is remembered.
    fn failed(
        &self,
        name: &str,
        addr: SocketAddr,
        target: &str,
        e: dta_http::client::ClientError,
    ) -> ClusterQueryError {
        use dta_http::client::ClientError as E;
        let down = match &e {
            E::TimedOut { .. } => Down::TimedOut(format!("http://{addr}{}", route_of(target))),
            E::Refused { .. } => Down::Unreachable(format!(
                "refused: connection refused by http://{addr} (is its collector running?)"
            )),
            E::Io { .. } | E::Malformed { .. } => {
                return ClusterQueryError::Unreachable {
                    collector: name.to_owned(),
                    reason: e.to_string(),
                }
            }
        };
        let mut d = self.down.lock().unwrap_or_else(|p| p.into_inner());
        d.insert(name.to_owned(), down.clone());
        self.error(name, down)
    }

    fn error(&self, name: &str, d: Down) -> ClusterQueryError {
        match d {
            Down::TimedOut(target) => ClusterQueryError::TimedOut {
                collector: name.to_owned(),
                after: self.timeout,
                target,
            },
            Down::Unreachable(reason) => ClusterQueryError::Unreachable {
                collector: name.to_owned(),
                reason,
            },
        }
    }
}

/// A request target without its query string (keys can be long).
fn route_of(target: &str) -> &str {
    target.split_once('?').map_or(target, |(r, _)| r)
}

fn thread_failed() -> ClusterQueryError {
    ClusterQueryError::Invalid("the query thread failed".into())
}

/// A sketch not merged yet reads as the peer's 404 would, wherever the collector was asked.
fn refused(c: &Member, e: ClusterQueryError) -> ClusterQueryError {
    match e {
        ClusterQueryError::Query(q @ query::QueryError::NotMerged(_)) => {
            ClusterQueryError::Refused {
                collector: c.name.clone(),
                status: 404,
                message: q.to_string(),
            }
        }
        e => e,
    }
}

/// `ask` answered from a mapped region (`values`: the store's configured Postcarding value set).
pub fn answer_local(
    r: &Region,
    ask: &Ask,
    key: Option<&[u8]>,
    values: Option<u32>,
    decode: query::RecordDecoder,
) -> Result<Value, ClusterQueryError> {
    let need_key =
        || key.ok_or_else(|| ClusterQueryError::Invalid("this query needs a key".into()));
    let v = match ask {
        Ask::Kw {
            redundancy,
            threshold,
        } => serde_json::to_value(query::key_write(r, need_key()?, *redundancy, *threshold)?),
        Ask::Ki { redundancy, window } => serde_json::to_value(query::key_increment_in(
            r,
            need_key()?,
            *redundancy,
            *window,
        )?),
        Ask::Postcard { values: v } => serde_json::to_value(query::postcard(
            r,
            need_key()?,
            v.or(values).unwrap_or(dta_wire::DEFAULT_POSTCARD_VALUES),
        )?),
        Ask::List { list, tail, max } => {
            serde_json::to_value(query::list(r, *list, *tail, *max, decode)?)
        }
        Ask::Sketch => serde_json::to_value(query::sketch(r, key)?),
    };
    v.map_err(|e| ClusterQueryError::Invalid(e.to_string()))
}
